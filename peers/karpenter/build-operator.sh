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
source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

hash="$(cd "$here" && { sha256sum go.mod go.sum; go env GOVERSION; echo "sigs.k8s.io/karpenter/kwok"; } | sha256sum | cut -d' ' -f1)"

steps() {
  local tmp=$1 outdir=$2 moddir
  # -buildvcs=false: the module sits inside the stowage checkout; its VCS state means nothing here.
  (cd "$here" && go build -mod=readonly -buildvcs=false -trimpath -ldflags="-s -w" -o "$tmp" sigs.k8s.io/karpenter/kwok) >&2
  moddir="$(cd "$here" && go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
  rm -rf "$outdir/crds" && mkdir -p "$outdir/crds"
  cp "$moddir"/pkg/apis/crds/*.yaml "$moddir"/kwok/apis/crds/*.yaml "$outdir/crds/"
  chmod u+w "$outdir"/crds/*.yaml
}

cached_build karpenter-kwok "$hash" steps crds
