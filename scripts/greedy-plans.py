#!/usr/bin/env python3
"""Writes the greedy plan of every workload in the benchmark corpus (benches/workloads/index.yaml) as
JSON, with the solver's timings removed, so that two builds can be compared byte for byte:

    scripts/greedy-plans.py BIN OUT_DIR   # BIN: a stowage binary; then diff -r OUT_A OUT_B

The greedy planner is deterministic (ARCHITECTURE.md, "Determinism"), so a refactoring that leaves
planning alone must leave these files unchanged. Replays (time windows) are not planned here."""
import json, pathlib, subprocess, sys

def entries(index):
    """The `name`, `files` and `catalog` of each entry of index.yaml (a small, fixed YAML shape)."""
    out, cur, in_files = [], None, False
    for raw in index.read_text().splitlines():
        line = raw.split(' #')[0].rstrip() if not raw.lstrip().startswith('#') else ''
        if not line.strip():
            continue
        if line.startswith('- name:'):
            cur = {'name': line.split(':', 1)[1].strip(), 'files': [], 'catalog': 'default'}
            out.append(cur); in_files = False
        elif cur is None:
            continue
        elif line.startswith('  files:'):
            v = line.split(':', 1)[1].strip()
            in_files = not v
            if v:
                cur['files'] = [f.strip() for f in v.strip('[]').split(',') if f.strip()]
        elif in_files and line.startswith('    - '):
            cur['files'].append(line[6:].strip())
        elif line.startswith('  ') and not line.startswith('   '):
            in_files = False
            k, _, v = line.strip().partition(':')
            if k == 'catalog':
                cur['catalog'] = v.strip()
    return [e for e in out if e['files']]

def strip_times(v):
    if isinstance(v, dict):
        return {k: strip_times(x) for k, x in v.items() if not ('time' in k.lower() or k.lower().endswith('ms') or k == 'phases')}
    if isinstance(v, list):
        return [strip_times(x) for x in v]
    return v

def main():
    bin_, out = sys.argv[1], pathlib.Path(sys.argv[2])
    root = pathlib.Path(__file__).resolve().parent.parent
    index = root / 'benches/workloads/index.yaml'
    out.mkdir(parents=True, exist_ok=True)
    for e in entries(index):
        cmd = [bin_, 'plan', '--solver', 'greedy', '-o', 'json']
        cat = e['catalog']
        if cat.startswith('karpenter-benchmark:'):
            p = out / f"catalog-{cat.split(':')[1]}.json"
            subprocess.run([bin_, 'catalog', 'generate', '--karpenter-benchmark', cat.split(':')[1], '--out', str(p)], check=True, capture_output=True)
            cmd += ['--catalog', str(p)]
        elif cat != 'default':
            cmd += ['--catalog', str(index.parent / cat)]
        cmd += [str(index.parent / f) for f in e['files']]
        r = subprocess.run(cmd, capture_output=True, text=True)
        text = json.dumps(strip_times(json.loads(r.stdout)), indent=1, sort_keys=True) if r.returncode == 0 else f"exit {r.returncode}\n{r.stderr}"
        (out / f"{e['name']}.json").write_text(text + "\n")
        print(e['name'], 'ok' if r.returncode == 0 else f'exit {r.returncode}', flush=True)

main()
