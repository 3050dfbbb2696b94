#!/usr/bin/env bash
# Installs what building stowage needs, idempotently: Debian packages for HiGHS (cmake, a C++
# compiler, libclang for its bindings), openssl and curl for the test control plane, python3-venv for
# the EC2 emulator. Rust and Go come with the machine; their versions are checked.
set -euo pipefail

need=()
for pkg in cmake g++ libclang-dev clang pkg-config openssl curl python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  echo "setup: installing ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }
rustc_minor=$(rustc --version | sed -E 's/rustc 1\.([0-9]+).*/\1/')
if [ "$rustc_minor" -lt 95 ]; then
  echo "setup: rustc 1.95 or newer is needed (found $(rustc --version))" >&2
  exit 1
fi
