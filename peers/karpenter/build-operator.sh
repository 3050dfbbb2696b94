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
# One patch (timescale/): the disruption controller's fixed timers are divided by $STOWAGE_TIME_SCALE when
# it is set (the lifetime benchmark's compression); unset, the binary behaves as Karpenter's own.
# Idempotent: rebuilds only when go.mod, go.sum, this script, the patch or the Go version change (sha256
# kept next to the binary); the peer's own *.go files do not go into this binary and are not hashed.
# Measured (2 shared cores, module cache and GOCACHE warm from the peer's build): 62 s wall, 39 s CPU;
# the binary is 59 MiB. Up-to-date check: well under a second.
source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

hash="$(cd "$here" && { sha256sum go.mod go.sum build-operator.sh timescale/stowage_timescale.go; go env GOVERSION; echo "sigs.k8s.io/karpenter/kwok"; } | sha256sum | cut -d' ' -f1)"

# patch FILE OLD NEW: replaces the exact text OLD in FILE (of the module copy), failing loudly if it is not
# there exactly once (a Karpenter version that moved it needs this script revisited).
patch_once() {
  local file=$1 old=$2 new=$3
  python3 - "$file" "$old" "$new" <<'PY'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"build-operator.sh: expected exactly one {old!r} in {path}, found {text.count(old)}")
open(path, "w").write(text.replace(old, new))
PY
}

steps() {
  local tmp=$1 outdir=$2 moddir work
  moddir="$(cd "$here" && go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
  # The one change to Karpenter: its disruption timers read STOWAGE_TIME_SCALE (timescale/; without it
  # they are Karpenter's own). A copy of the module is patched and replaces it through a copy of go.mod.
  work="$(mktemp -d)"
  cp -r "$moddir" "$work/karpenter" && chmod -R u+w "$work/karpenter"
  local d="$work/karpenter/pkg/controllers/disruption"
  cp "$here/timescale/stowage_timescale.go" "$d/"
  patch_once "$d/controller.go" "const pollingPeriod = 10 * time.Second" "var pollingPeriod = scaledTimer(10 * time.Second)"
  patch_once "$d/consolidation.go" "const commandValidationDelay = 15 * time.Second" "var commandValidationDelay = scaledTimer(15 * time.Second)"
  patch_once "$d/queue.go" "NewTypedItemExponentialFailureRateLimiter[reconcile.Request](queueBaseDelay, queueMaxDelay)" "NewTypedItemExponentialFailureRateLimiter[reconcile.Request](scaledTimer(queueBaseDelay), scaledTimer(queueMaxDelay))"
  patch_once "$d/queue.go" "RequeueAfter: queueBaseDelay}" "RequeueAfter: scaledTimer(queueBaseDelay)}"
  cp "$here/go.mod" "$work/go.mod" && cp "$here/go.sum" "$work/go.sum"
  echo "replace sigs.k8s.io/karpenter => $work/karpenter" >> "$work/go.mod"
  # -buildvcs=false: the module sits inside the stowage checkout; its VCS state means nothing here.
  (cd "$here" && go build -modfile="$work/go.mod" -mod=readonly -buildvcs=false -trimpath -ldflags="-s -w" -o "$tmp" sigs.k8s.io/karpenter/kwok) >&2
  rm -rf "$work"
  rm -rf "$outdir/crds" && mkdir -p "$outdir/crds"
  cp "$moddir"/pkg/apis/crds/*.yaml "$moddir"/kwok/apis/crds/*.yaml "$outdir/crds/"
  chmod u+w "$outdir"/crds/*.yaml
}

cached_build karpenter-kwok "$hash" steps crds
