#!/usr/bin/env bash
# Runs every test tier: unit and integration tests (HiGHS, the planners, the checker), clippy.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
start=$(date +%s)
cargo build --all-targets --quiet
cargo test --quiet
cargo clippy --all-targets --quiet -- -D warnings
echo "tests passed in $(( $(date +%s) - start ))s"
