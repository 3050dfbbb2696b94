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
# One patch (timescale/): the fixed timers of the disruption and termination controllers, of the cluster
# state's consolidation memory and of the pod-event clock are divided by
# $STOWAGE_TIME_SCALE when it is set (the lifetime benchmark's compression); unset, the binary behaves as Karpenter's own.
# Idempotent: rebuilds only when go.mod, go.sum, this script, the patch or the Go version change (sha256
# kept next to the binary); the peer's own *.go files do not go into this binary and are not hashed.
# Measured (2 shared cores, module cache and GOCACHE warm from the peer's build): 62 s wall, 39 s CPU;
# the binary is 59 MiB. Up-to-date check: well under a second.
source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

hash="$(cd "$here" && { sha256sum go.mod go.sum build-operator.sh timescale/stowage_timescale.go.in; go env GOVERSION; echo "sigs.k8s.io/karpenter/kwok"; } | sha256sum | cut -d' ' -f1)"

# patch N FILE OLD NEW: replaces the exact text OLD in FILE (of the module copy), failing loudly unless it
# is there exactly N times (a Karpenter version that changed it needs this script revisited).
patch() {
  local n=$1 file=$2 old=$3 new=$4
  python3 - "$n" "$file" "$old" "$new" <<'PY'
import sys
n, path, old, new = int(sys.argv[1]), *sys.argv[2:5]
text = open(path).read()
if text.count(old) != n:
    sys.exit(f"build-operator.sh: expected {n} of {old!r} in {path}, found {text.count(old)}")
open(path, "w").write(text.replace(old, new))
PY
}

steps() {
  local tmp=$1 outdir=$2 moddir work
  # On a fresh machine the module may not be in the cache yet: fetch it before asking for its folder.
  (cd "$here" && go mod download sigs.k8s.io/karpenter) >&2
  moddir="$(cd "$here" && go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
  [[ -n "$moddir" && -d "$moddir" ]] || { echo "build-operator.sh: sigs.k8s.io/karpenter has no module folder" >&2; exit 1; }
  # The one change to Karpenter: its disruption and termination timers read STOWAGE_TIME_SCALE (timescale/; without it
  # they are Karpenter's own). A copy of the module is patched and replaces it through a copy of go.mod.
  work="$(mktemp -d)"
  cp -r "$moddir" "$work/karpenter" && chmod -R u+w "$work/karpenter"
  local d="$work/karpenter/pkg/controllers/disruption" t="$work/karpenter/pkg/controllers/node/termination"
  sed 's/__PKG__/disruption/g' "$here/timescale/stowage_timescale.go.in" > "$d/stowage_timescale.go"
  sed 's/__PKG__/termination/g' "$here/timescale/stowage_timescale.go.in" > "$t/stowage_timescale.go"
  local st="$work/karpenter/pkg/controllers/state" pe="$work/karpenter/pkg/controllers/nodeclaim/podevents"
  sed 's/__PKG__/state/g' "$here/timescale/stowage_timescale.go.in" > "$st/stowage_timescale.go"
  sed 's/__PKG__/podevents/g' "$here/timescale/stowage_timescale.go.in" > "$pe/stowage_timescale.go"
  patch 1 "$d/controller.go" "const pollingPeriod = 10 * time.Second" "var pollingPeriod = scaledTimer(10 * time.Second)"
  patch 1 "$d/consolidation.go" "const commandValidationDelay = 15 * time.Second" "var commandValidationDelay = scaledTimer(15 * time.Second)"
  patch 1 "$d/queue.go" "NewTypedItemExponentialFailureRateLimiter[reconcile.Request](queueBaseDelay, queueMaxDelay)" "NewTypedItemExponentialFailureRateLimiter[reconcile.Request](scaledTimer(queueBaseDelay), scaledTimer(queueMaxDelay))"
  patch 1 "$d/queue.go" "RequeueAfter: queueBaseDelay}" "RequeueAfter: scaledTimer(queueBaseDelay)}"
  # Termination: the minimum drain time, the drain and volume-detachment requeues, the wait after the
  # cloud's Delete.
  patch 1 "$t/controller.go" "c.clock.Since(cond.LastTransitionTime.Time) < MinDrainTime)" "c.clock.Since(cond.LastTransitionTime.Time) < scaledTimer(MinDrainTime))"
  patch 3 "$t/controller.go" "return reconcile.Result{RequeueAfter: 1 * time.Second}, nil" "return reconcile.Result{RequeueAfter: scaledTimer(1 * time.Second)}, nil"
  patch 1 "$t/controller.go" "return reconcile.Result{RequeueAfter: 5 * time.Second}, nil" "return reconcile.Result{RequeueAfter: scaledTimer(5 * time.Second)}, nil"
  # Consolidation's "nothing changed" memory: unchanged cluster state is re-examined after 5 minutes
  # (`ConsolidationState`); a node whose consolidateAfter elapses with no other change waits for it.
  patch 1 "$st/cluster.go" "if c.clock.Since(state) < time.Minute*5 {" "if c.clock.Since(state) < scaledTimer(time.Minute*5) {"
  # A NodeClaim's lastPodEventTime (consolidateAfter's start) is not moved by a pod event within 10 s
  # of the last one it recorded.
  patch 1 "$pe/controller.go" "const dedupeTimeout = 10 * time.Second" "var dedupeTimeout = scaledTimer(10 * time.Second)"
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
