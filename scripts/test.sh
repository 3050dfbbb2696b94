#!/usr/bin/env bash
# Runs every test tier of every crate: formatting, unit and integration tests (HiGHS, the planners, the
# checker, tests/layering.rs and tests/tidy.rs on the structure), clippy.
# The e2e tier (tests/e2e_*.rs: a real control plane and moto, docs/control-plane.md) runs in `cargo test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
start=$(date +%s)
# The e2e tier needs the control-plane binaries (built from Go modules into $STOWAGE_CACHE; minutes when
# cold, under a second when current) and the moto venv. Both steps are idempotent.
tests/control-plane/build.sh
tests/moto/moto.sh venv
# tests/peer_karpenter.rs and the bench run Karpenter's scheduler (peers/karpenter); build.sh is cached
# under $STOWAGE_CACHE and takes ~50 ms when current.
peers/karpenter/build.sh >/dev/null
# Every e2e control plane gets Karpenter v1.14.1's own CRDs (peers/karpenter/crds.sh), and the quick-start
# test judges user data with nodeadm's own parser (peers/nodeadm/check.sh: about 2.5 min cold, cached after).
peers/karpenter/crds.sh >/dev/null
peers/nodeadm/check.sh >/dev/null
cargo fmt --all --check
cargo build --workspace --all-targets --quiet
# The e2e tests run the whole controller on their tokio runtime's workers, whose stacks (std's default,
# 2 MiB, when the runtime sets none) an unoptimised build's large futures may overflow: one e2e run
# aborted with "stack overflow" (2026-12-02) and another ended without a result, and both passed when
# repeated. 16 MiB for every thread the tests start (the binary's runtime sets its own:
# src/cli/controller.rs).
export RUST_MIN_STACK=${RUST_MIN_STACK:-16777216}
cargo test --workspace --quiet --no-fail-fast
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The binary without the controller and the benchmark (what scripts/demo.sh builds) must build on its own.
cargo clippy -p stowage --no-default-features --quiet -- -D warnings
echo "tests passed in $(( $(date +%s) - start ))s"
