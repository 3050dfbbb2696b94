#!/usr/bin/env bash
# Builds karpenter-peer once into ${STOWAGE_CACHE:-$HOME/.cache/stowage}/karpenter-peer-<karpenter version>/
# and prints the binary's path as the last line on stdout (build output goes to stderr).
# Idempotent: rebuilds only when the Go sources, go.mod or go.sum change (sha256 of them, kept next to the
# binary). Needs Go >= 1.26.6 (sigs.k8s.io/karpenter v1.14.1's go line) and the Go module proxy.
# Cold build (empty module cache and GOCACHE) measured 3 min 27 s wall / 169 s CPU on 2 shared cores.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export GOTOOLCHAIN=local
export CGO_ENABLED=0

if ! command -v go >/dev/null 2>&1; then
  echo "build.sh: go not found on PATH (need Go >= 1.26.6)" >&2
  exit 1
fi

version="$(awk '$1 == "sigs.k8s.io/karpenter" { print $2; exit }' "$here/go.mod")"
if [[ -z "$version" ]]; then
  echo "build.sh: cannot find sigs.k8s.io/karpenter in $here/go.mod" >&2
  exit 1
fi
outdir="${STOWAGE_CACHE:-$HOME/.cache/stowage}/karpenter-peer-$version"
bin="$outdir/karpenter-peer"
mkdir -p "$outdir"

hash="$(cd "$here" && { ls ./*.go go.mod go.sum | LC_ALL=C sort | xargs sha256sum; go env GOVERSION; } | sha256sum | cut -d' ' -f1)"

build() {
  if [[ -x "$bin" && -f "$outdir/source.sha256" && "$(cat "$outdir/source.sha256")" == "$hash" ]]; then
    echo "build.sh: $bin is up to date" >&2
    return 0
  fi
  echo "build.sh: building karpenter-peer (sigs.k8s.io/karpenter $version) into $outdir" >&2
  local start=$SECONDS tmp="$outdir/karpenter-peer.tmp.$$"
  (cd "$here" && go build -mod=readonly -trimpath -ldflags="-s -w" -o "$tmp" .) >&2
  mv -f "$tmp" "$bin"
  echo "$hash" > "$outdir/source.sha256"
  echo "build.sh: built in $((SECONDS - start)) s" >&2
}

if command -v flock >/dev/null 2>&1; then
  # Serialise concurrent callers (e.g. parallel test binaries) on one lock file.
  exec 9>"$outdir/.lock"
  flock 9
fi
build
echo "$bin"
