#!/usr/bin/env bash
# Builds Karpenter's own operator with its KWOK cloud provider (the `sigs.k8s.io/karpenter/kwok` main
# package, at the version peers/karpenter/go.mod pins) once into
# ${STOWAGE_CACHE:-$HOME/.cache/stowage}/karpenter-kwok-<karpenter version>/karpenter-kwok
# and prints the binary's path as the last line on stdout (build output goes to stderr). The CRDs the
# operator needs (pkg/apis/crds/*.yaml: NodePool, NodeClaim, NodeOverlay, CapacityBuffer; and
# kwok/apis/crds/*.yaml: KWOKNodeClass) are copied from the same module version into crds/ next to it.
#
# The package is built from inside the peer's module, so go.mod/go.sum there pin every dependency (the
# kwok package needs nothing the peer's module graph lacks; `-mod=readonly` would fail otherwise).
# Idempotent: rebuilds only when go.mod, go.sum or the Go version change (sha256 kept next to the binary);
# the peer's own *.go files do not go into this binary and are not hashed.
# Measured (2 shared cores, module cache and GOCACHE warm from the peer's build): 62 s wall, 39 s CPU;
# the binary is 59 MiB. Up-to-date check: well under a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export GOTOOLCHAIN=local
export CGO_ENABLED=0

if ! command -v go >/dev/null 2>&1; then
  echo "build-operator.sh: go not found on PATH (need Go >= 1.26.6)" >&2
  exit 1
fi

version="$(awk '$1 == "sigs.k8s.io/karpenter" { print $2; exit }' "$here/go.mod")"
if [[ -z "$version" ]]; then
  echo "build-operator.sh: cannot find sigs.k8s.io/karpenter in $here/go.mod" >&2
  exit 1
fi
outdir="${STOWAGE_CACHE:-$HOME/.cache/stowage}/karpenter-kwok-$version"
bin="$outdir/karpenter-kwok"
mkdir -p "$outdir"

hash="$(cd "$here" && { sha256sum go.mod go.sum; go env GOVERSION; echo "sigs.k8s.io/karpenter/kwok"; } | sha256sum | cut -d' ' -f1)"

build() {
  if [[ -x "$bin" && -d "$outdir/crds" && -f "$outdir/source.sha256" && "$(cat "$outdir/source.sha256")" == "$hash" ]]; then
    echo "build-operator.sh: $bin is up to date" >&2
    return 0
  fi
  echo "build-operator.sh: building sigs.k8s.io/karpenter/kwok $version into $outdir" >&2
  local start=$SECONDS tmp="$outdir/karpenter-kwok.tmp.$$"
  # -buildvcs=false: the module sits inside the stowage checkout; its VCS state means nothing here.
  (cd "$here" && go build -mod=readonly -buildvcs=false -trimpath -ldflags="-s -w" -o "$tmp" sigs.k8s.io/karpenter/kwok) >&2
  local moddir
  moddir="$(cd "$here" && go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
  rm -rf "$outdir/crds" && mkdir -p "$outdir/crds"
  cp "$moddir"/pkg/apis/crds/*.yaml "$moddir"/kwok/apis/crds/*.yaml "$outdir/crds/"
  chmod u+w "$outdir"/crds/*.yaml
  mv -f "$tmp" "$bin"
  echo "$hash" > "$outdir/source.sha256"
  echo "build-operator.sh: built in $((SECONDS - start)) s" >&2
}

if command -v flock >/dev/null 2>&1; then
  # Serialise concurrent callers (e.g. parallel test binaries) on one lock file.
  exec 9>"$outdir/.lock"
  flock 9
fi
build
echo "$bin"
