#!/usr/bin/env bash
# Builds karpenter-peer once into ${STOWAGE_CACHE:-$HOME/.cache/stowage}/karpenter-peer-<karpenter version>/
# and prints the binary's path as the last line on stdout (build output goes to stderr).
# Idempotent: rebuilds only when the Go sources, go.mod or go.sum change (sha256 of them, kept next to the
# binary). Needs Go >= 1.26.6 (sigs.k8s.io/karpenter v1.14.1's go line) and the Go module proxy.
# Cold build (empty module cache and GOCACHE) measured 3 min 27 s wall / 169 s CPU on 2 shared cores.
source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

hash="$(cd "$here" && { ls ./*.go go.mod go.sum | LC_ALL=C sort | xargs sha256sum; go env GOVERSION; } | sha256sum | cut -d' ' -f1)"

steps() {
  (cd "$here" && go build -mod=readonly -trimpath -ldflags="-s -w" -o "$1" .) >&2
}

cached_build karpenter-peer "$hash" steps
