#!/usr/bin/env python3
"""The scaling and budget tables of the README (issue 20 item 4), with one command:

    scripts/budget-table.py BIN [BUDGET ...]    # BIN: a release stowage binary; budgets default to 1s 5s 30s

1. Greedy alone (`stowage plan --solver greedy`) on Karpenter-shaped batches of 10,000 and 100,000 pods
   (benches/workloads/karpenter/diverse-{10000,100000}.json.gz, made by the Go peer like the corpus's
   karpenter-N files): the problem build, the greedy phase and the process's wall time, and the ratio
   100k / 10k of the greedy phase (n log n predicts 12.5).
2. The MILP driver (`stowage plan`, the default solver) under each budget on mixed-10, karpenter-5000,
   karpenter-20000 and the two batches above: wall time of the whole process (reading and writing
   included), the planner's reported time (problem build included), status, cost, how many pods the
   greedy planner's fast pass placed after the deadline, and how many the cut deferred to the next batch
   (docs/formats.md, Time budget).

Markdown on stdout. Every plan is also judged by `stowage check` (a column says so)."""
import json, pathlib, subprocess, sys, tempfile, time

ROOT = pathlib.Path(__file__).resolve().parent.parent
W = ROOT / 'benches/workloads'
KCAT = W / 'catalogs/karpenter-benchmark-400.json.gz'
NODECLASS = ROOT / 'scenarios/common-ec2nodeclass.yaml'
WORKLOADS = [
    ('mixed-10', [W / 'mixed/mixed-10.json.gz', NODECLASS], None),
    ('karpenter-5000', [W / 'karpenter/diverse-5000.json.gz'], KCAT),
    ('karpenter-20000', [W / 'karpenter/diverse-20000.json.gz'], KCAT),
    ('karpenter-10000', [W / 'karpenter/diverse-10000.json.gz'], KCAT),
    ('karpenter-100000', [W / 'karpenter/diverse-100000.json.gz'], KCAT),
]


def plan(bin_, files, cat, args, out):
    cmd = [bin_, 'plan', '--max-input-bytes', '1000000000', '-o', 'json'] + args
    if cat:
        cmd += ['--catalog', str(cat)]
    cmd += [str(f) for f in files]
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    out.write_text(r.stdout)
    chk = [bin_, 'check', '--max-input-bytes', '1000000000', '--plan', str(out)] + (['--catalog', str(cat)] if cat else []) + [str(f) for f in files]
    c = subprocess.run(chk, capture_output=True, text=True)
    return json.loads(r.stdout), wall, 'valid' if c.returncode == 0 else f'INVALID (exit {c.returncode})'


def phase(report, name):
    return sum(p['timeMs'] for p in report['phases'] if p['name'] == name)


def fast_pods(detail):
    marker = ' pods placed by its fast pass'
    if marker not in detail:
        return 0
    return int(detail.split(marker)[0].rsplit(' ', 1)[1])


def main():
    bin_ = sys.argv[1]
    budgets = sys.argv[2:] or ['1s', '5s', '30s']
    commit = subprocess.run(['git', '-C', str(ROOT), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
    print(f'commit {commit}, {subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()} cores\n')
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / 'plan.json'
        print('| pods | new nodes | problem ms | greedy ms | wall s | $/h | check |')
        print('|---:|---:|---:|---:|---:|---:|---|')
        greedy = {}
        for name, files, cat in WORKLOADS[3:]:
            p, wall, ok = plan(bin_, files, cat, ['--solver', 'greedy'], out)
            s = p['solver']
            greedy[name] = phase(s, 'greedy')
            print(f"| {len(p['placements']) + len(p['unschedulable']):,} | {len(p['newNodes']):,} | {phase(s, 'problem'):.0f} | {greedy[name]:.0f} | {wall:.2f} | {p['costPerHour']:.4f} | {ok} |")
        print(f"\ngreedy ms 100k / 10k: {greedy['karpenter-100000'] / greedy['karpenter-10000']:.1f} (linear 10, n log n 12.5)\n")
        print('| workload | budget | wall s | reported ms | problem ms | status | $/h | fast-pass pods | deferred pods | check |')
        print('|---|---|---:|---:|---:|---|---:|---:|---:|---|')
        for name, files, cat in WORKLOADS:
            for b in budgets:
                p, wall, ok = plan(bin_, files, cat, ['--time-budget', b], out)
                s = p['solver']
                print(f"| {name} | {b} | {wall:.2f} | {s['timeMs']:.0f} | {phase(s, 'problem'):.0f} | {s['status']} | {p['costPerHour']:.4f} | {fast_pods(s['detail'])} | {len(p.get('deferred', []))} | {ok} |", flush=True)


if __name__ == '__main__':
    main()
