#!/usr/bin/env bash
# The main job on the embedded defaults: run the four seed scenarios (scenarios/README.md) end to end in
# the simulator — controllers, kube-scheduler, volumes, a cloud and stowage's provisioning loop on a
# simulated clock, every plan verified by the independent checker — and print each timeline, the final
# cluster and which expectations held. Exit code 0 only if all of them hold. Idempotent: installs what
# the build needs (scripts/setup.sh), builds the simulator alone, reruns in about two seconds.
# Extra arguments go to `stowage simulate` (e.g. --solver greedy, -o json, a scenario file).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
# Only what the simulator needs: no controller, no EC2 SDK, no benchmark (ARCHITECTURE.md, "Crates").
cargo build --release --quiet --no-default-features --bin stowage
bin=${CARGO_TARGET_DIR:-target}/release/stowage
exec "$bin" simulate "$@"
