#!/usr/bin/env python3
"""The README's benchmark tables, from one `stowage bench` run's results.json:

    scripts/readme-tables.py [benches/results/results.json]

1. stowage's planners per workload: $/h of greedy and the MILP driver, the $/h lower bound, the MILP's
   proven gap on its objective, status and times; then the fraction of workloads whose plan is proven
   within 1 % (on the objective, and on $/h against the $/h bound).
2. stowage beside Karpenter (when the run had `--peer karpenter`): Karpenter's median run by cost with
   the [min-max] spread over its runs, its unschedulable pods, the cost ratio only where both leave the
   same pods pending, and the checker's verdicts over the runs.

Markdown on stdout; nothing is computed that the bench did not measure."""
import json, pathlib, sys

path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else 'benches/results/results.json')
res = json.loads(path.read_text())
rows = res['rows']


def f(x, d=4):
    return '-' if x is None else f'{x:.{d}f}'


def rng(r, key, d=4):
    runs = [x[key] for x in r.get('runs', []) if x.get(key) is not None]
    if len(runs) < 2 or min(runs) == max(runs):
        return ''
    if isinstance(runs[0], int):
        return f' [{min(runs)}–{max(runs)}]'
    return f' [{min(runs):.{d}f}–{max(runs):.{d}f}]'


def get(w, planner):
    return next((r for r in rows if r['workload'] == w and r['planner'] == planner and r['weights'] in ('default', '-') and not r.get('error')), None)


workloads = list(dict.fromkeys(r['workload'] for r in rows))
s = res['settings']
print(f"Settings: MILP budget {s['timeBudgetMs']:.0f} ms, target gap {s['gap']*100:.0f} %, HiGHS threads {s['threads']}, {s['jobs']} worker(s)"
      + (f", Karpenter {s['peerRuns']} runs per workload" if s.get('peer') else '') + '.\n')
print('| workload | pods | greedy $/h | MILP $/h | MILP ÷ greedy | $/h lower bound | MILP ÷ bound | MILP gap (objective) | status | greedy ms | MILP ms |')
print('|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|')
within_obj = within_cost = counted = 0
for w in workloads:
    g, m = get(w, 'greedy'), get(w, 'milp')
    if not m:
        continue
    counted += 1
    gap = m.get('gap') if (m.get('lowerBound') or 0) > 0 else None  # a bound <= 0 proves nothing
    if gap is not None and gap <= 0.01 + 1e-9:
        within_obj += 1
    if m.get('vsBound') is not None and m['vsBound'] <= 1.01 + 1e-9:
        within_cost += 1
    ratio = f(m['costPerHour'] / g['costPerHour'], 3) if g and g.get('costPerHour') else '-'
    print(f"| {w} | {m['pods']} | {f(g and g.get('costPerHour'))} | {f(m.get('costPerHour'))} | {ratio} | {f(m.get('boundPerHour'))} | {f(m.get('vsBound'), 3)} | "
          f"{'no bound' if gap is None else f'{gap*100:.1f}%'} | {m['status']} | {f(g and g.get('timeMs'), 0)} | {f(m.get('timeMs'), 0)} |")
print(f"\nProven within 1 %: {within_obj} of {counted} workloads on the MILP's objective, {within_cost} of {counted} on $/h against the $/h lower bound.")

peers = [r for r in rows if r['planner'] == 'karpenter']
if peers:
    print('\n| workload | pods | stowage (MILP) $/h | Karpenter $/h, median [spread] | cost stowage ÷ Karpenter | stowage unsched | Karpenter unsched | stowage ms | Karpenter ms | Karpenter plans, judged by the checker |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|---:|---|')
    for k in peers:
        m = get(k['workload'], 'milp') or get(k['workload'], 'greedy')
        if k.get('error'):
            print(f"| {k['workload']} | {k['pods']} | {f(m and m.get('costPerHour'))} | ERROR: {k['error'][:60]} | - | - | - | - | - | - |")
            continue
        mu, ku = m.get('unschedulable') if m else None, k.get('unschedulable')
        if m is None or m.get('costPerHour') is None or not k.get('costPerHour'):
            ratio = '-'
        elif mu != ku:
            ratio = f'not comparable ({mu} vs {ku} pending)'
        else:
            ratio = f"{m['costPerHour'] / k['costPerHour']:.3f}"
        runs = k.get('runs') or [{'verdict': k.get('verdict')}]
        verdicts = {}
        for x in runs:
            verdicts[x.get('verdict') or 'error'] = verdicts.get(x.get('verdict') or 'error', 0) + 1
        judged = ', '.join(f'{n} {v}' for v, n in sorted(verdicts.items()))
        print(f"| {k['workload']} | {k['pods']} | {f(m and m.get('costPerHour'))} | {f(k['costPerHour'])}{rng(k, 'costPerHour')} | {ratio} | {mu} | {ku}{rng(k, 'unschedulable')} | "
              f"{f(m and m.get('timeMs'), 0)} | {f(k.get('timeMs'), 0)}{rng(k, 'timeMs', 0)} | {judged} |")
