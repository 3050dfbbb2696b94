#!/usr/bin/env bash
# The main job on the embedded defaults: plan the bundled seed batch (seed-1c, a pod stuck on existing
# nodes) with stowage's planner, then verify the plan with the independent checker.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-target}/release/stowage
workload=(scenarios/seed-1c-stuck-on-existing-nodes/state.yaml
          scenarios/seed-1-statefulset-capacity-spread/nodepools.yaml
          scenarios/common-ec2nodeclass.yaml)
mkdir -p target/demo
"$bin" plan "${workload[@]}"
"$bin" plan "${workload[@]}" -o json > target/demo/seed-1c-plan.json
"$bin" check "${workload[@]}" --plan target/demo/seed-1c-plan.json
