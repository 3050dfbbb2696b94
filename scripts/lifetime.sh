#!/usr/bin/env bash
# The lifetime benchmark (issue 19; docs/lifetime.md): each history once with Karpenter's own operator
# (v1.14.1, KWOK cloud provider) and once with stowage's controller, each on a fresh real control plane;
# results in benches/results/lifetime/<history>/ (table.md, results.json, cost.svg, every run's
# recording, its NodeClaims at the end and Karpenter's log). Idempotent: installs what it needs
# (scripts/setup.sh, the control-plane binaries, Karpenter's operator). Not part of the test command
# (tests/e2e_lifetime.rs is its smoke test). Arguments go to the benchmark (`--help`), e.g.
#   scripts/lifetime.sh --history web --compression 60
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
tests/control-plane/build.sh
peers/karpenter/build-operator.sh >/dev/null
cargo build --release --quiet --example lifetime
exec "${CARGO_TARGET_DIR:-target}/release/examples/lifetime" "$@"
