#!/usr/bin/env bash
# A backlog the budget cuts, planned batch after batch (README, Benchmarks, "Cutting the batch"):
# karpenter-5000 (Karpenter's benchmark shapes) as one pending batch in the simulator, under a budget
# that cuts it and under one that does not. Prints per run the batches (simulated second, pods, new
# nodes, $/h of the plan, pods deferred), the nodes and $/h at the end, and whether every plan was valid.
#
#   scripts/cut-backlog.sh BIN [BUDGET ...]    # BIN: a release stowage binary; budgets default to 100ms 10s
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$1
shift
if [ $# -gt 0 ]; then budgets=("$@"); else budgets=(100ms 10s); fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The simulator reads manifests and catalogs as text.
zcat "$root/benches/workloads/karpenter/diverse-5000.json.gz" > "$dir/workload.json"
zcat "$root/benches/workloads/catalogs/karpenter-benchmark-400.json.gz" > "$dir/catalog.json"
for b in "${budgets[@]}"; do
  mkdir -p "$dir/$b"
  cat > "$dir/$b/scenario.yaml" <<YAML
schema: stowage.dev/scenario/v1
name: karpenter-5000 under $b
settings: {timeBudget: $b, catalog: ../catalog.json, consolidation: false, launchJitter: 0s}
manifests: [../workload.json]
steps:
  - settle: {}
  - expect: {pendingPods: 0}
YAML
  "$bin" simulate "$dir/$b" -o json > "$dir/$b/report.json" || true
  python3 - "$dir/$b/report.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))['scenarios'][0]
batches = [e for e in s['timeline'] if e['event'] == 'batch']
deferred = lambda e: sum('deferred to the next batch' in u for u in e['unschedulable'])
print(f"{s['scenario']}: passed {s['passed']}, {len(batches)} batches, {len(s['nodes'])} nodes, {s['costPerHour']:.2f} $/h at {s['endedAt']} s, invalid plans {s['invalidPlans']}")
for e in batches:
    print(f"  t={e['at']} s: {e['pods']} pods, {e['newNodes']} new nodes, {e['costPerHour']:.2f} $/h, {deferred(e)} deferred")
print(f"  first {sum(1 for e in batches if e['at'] <= 10)} batches (t <= 10 s): {sum(e['costPerHour'] for e in batches if e['at'] <= 10):.2f} $/h")
PY
done
