#!/usr/bin/env python3
"""Which side of each MILP gap is short: the default-budget run against a long reference run.

Usage: scripts/gap-sides.py SHORT/results.json LONG/results.json

Both files are `stowage bench --solver milp` results on the same workloads (the long run with, say,
`--time-budget 60s`). Per workload: the MILP objective and proven gap of each run, and a verdict.
The plan side is short at the default budget when the long run found a cheaper plan; the gap is closed
when the long run proves the target (1 %); otherwise neither run tells which side is short, and the
verdict says which bounds converged.
"""
import json
import sys


def milp_rows(path):
    rows = json.load(open(path))['rows']
    return {r['workload']: r for r in rows if r['planner'] == 'milp'}


def pct(g):
    return '-' if g is None else f'{g * 100:.1f}%'


short, long_ = milp_rows(sys.argv[1]), milp_rows(sys.argv[2])
print('| workload | objective (1 s) | gap (1 s) | objective (long) | bound (long) | gap (long) | what is short at 1 s |')
print('|---|---:|---:|---:|---:|---:|---|')
for w, s in short.items():
    l = long_.get(w)
    if l is None:
        continue
    so, lo = s['objective'], l['objective']
    lg = l.get('gap')
    lb = l.get('lowerBound')
    notes = []
    if lo < so - 1e-6 * abs(so):
        notes.append(f'the plan: {100 * (so - lo) / so:.1f}% dearer than the long run\'s')
    if lg is not None and lg <= 0.01 + 1e-9:
        notes.append('the bound: the long run proves the target' if (1 if s.get('gap') is None else s['gap']) > 0.01 + 1e-9 else 'nothing: proven at 1 s')
    elif not notes:
        detail = l.get('detail', '')
        conv = 'converged' in detail.split('size-class bound', 1)[-1].split(';', 1)[0] if 'size-class bound' in detail else False
        notes.append('undecided: no cheaper plan in the long run, and its bound ' + ('(the size-class bound converged) ' if conv else '') + 'proves no better')
    print(f"| {w} | {so:.4f} | {pct(s.get('gap'))} | {lo:.4f} | {'-' if lb is None else f'{lb:.4f}'} | {pct(lg)} | {'; '.join(notes)} |")
