#!/usr/bin/env bash
# Build the e2e control-plane binaries from Go modules into a cache outside the repo.
#
#   build.sh [build]   build (or reuse) kube-apiserver, kube-controller-manager, kube-scheduler,
#                      kubectl (k8s.io/kubernetes) and etcd (go.etcd.io/etcd/server/v3)
#   build.sh paths     print the two bin dirs (K8S_BIN=..., ETCD_BIN=...) without building
#   build.sh regen     regenerate k8sbin/go.mod+go.sum and etcdbin/go.mod+go.sum from the
#                      module proxy (only when bumping versions; the results are committed)
#
# Environment:
#   STOWAGE_CACHE  cache root (default: $HOME/.cache/stowage)
#   GOMODCACHE / GOCACHE are left at the Go defaults unless already set, so warm runs are fast.
#
# The binaries land in $STOWAGE_CACHE/k8s-<ver>/bin and $STOWAGE_CACHE/etcd-<ver>/bin.
# A build is skipped when every binary exists, reports the expected version and was built from
# the same go.mod/go.sum/flags (stamp file).
set -euo pipefail

K8S_VERSION=v1.36.3
STAGING_VERSION=v0.36.3
ETCD_VERSION=v3.6.16
GO_LINE=1.26.0

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${STOWAGE_CACHE:-$HOME/.cache/stowage}"
K8S_BIN="$CACHE/k8s-$K8S_VERSION/bin"
ETCD_BIN="$CACHE/etcd-$ETCD_VERSION/bin"
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

# Use exactly the installed Go; never download a toolchain or touch the committed go.mod/go.sum.
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false"

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_go() {
  if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; fi
  command -v go >/dev/null 2>&1 || die "go not found in PATH (need Go >= $GO_LINE)"
  local have
  have="$(go env GOVERSION)"; have="${have#go}"
  # sort -V: the smaller of (need, have) must be need.
  [[ "$(printf '%s\n%s\n' "$GO_LINE" "$have" | sort -V | head -n1)" == "$GO_LINE" ]] \
    || die "Go $have is older than $GO_LINE (GOTOOLCHAIN=local, no toolchain download)"
}

stamp_of() { # stamp_of <module dir> <extra text>: hash of what determines the binaries
  { go env GOVERSION; cat "$1/go.mod" "$1/go.sum"; printf '%s\n' "$2"; } | sha256sum | cut -d' ' -f1
}

k8s_flags() {
  # Upstream conventions (hack/lib/golang.sh, hack/lib/version.sh): -trimpath, -s -w,
  # tags selinux,notest,grpcnotrace, version stamped into component-base and client-go.
  # buildDate = the release time of the tag (from the proxy's .info), so builds are reproducible.
  local bd v minor ldf kv
  bd="$(cd "$HERE/k8sbin" && go list -m -json k8s.io/kubernetes | sed -n 's/.*"Time": "\([^"]*\)".*/\1/p')"
  [[ -n "$bd" ]] || bd="1970-01-01T00:00:00Z"
  v="$K8S_VERSION"; minor="${v#v1.}"; minor="${minor%%.*}"
  ldf="-s -w"
  for kv in "gitVersion=$v" gitMajor=1 "gitMinor=$minor" gitTreeState=clean "buildDate=$bd"; do
    ldf+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  printf '%s\n' "$ldf"
}

# Version output is captured first: `cmd | grep -q` under pipefail fails at random when grep
# exits before cmd has written its last line (SIGPIPE).
reports() { # reports <expected line> <command...>: the command prints exactly that line
  local out
  out="$("${@:2}" 2>/dev/null)" || return 1
  grep -qxF -- "$1" <<<"$out"
}

k8s_ok() { # all four binaries present, right version, same stamp
  local c
  for c in "${K8S_CMDS[@]}"; do [[ -x "$K8S_BIN/$c" ]] || return 1; done
  [[ -f "$K8S_BIN/.stamp" && "$(cat "$K8S_BIN/.stamp")" == "$1" ]] || return 1
  reports "Kubernetes $K8S_VERSION" "$K8S_BIN/kube-apiserver" --version || return 1
  reports "Kubernetes $K8S_VERSION" "$K8S_BIN/kube-controller-manager" --version || return 1
  reports "Kubernetes $K8S_VERSION" "$K8S_BIN/kube-scheduler" --version || return 1
  reports "Client Version: $K8S_VERSION" "$K8S_BIN/kubectl" version --client || return 1
}

etcd_ok() {
  [[ -x "$ETCD_BIN/etcd" ]] || return 1
  [[ -f "$ETCD_BIN/.stamp" && "$(cat "$ETCD_BIN/.stamp")" == "$1" ]] || return 1
  reports "etcd Version: ${ETCD_VERSION#v}" "$ETCD_BIN/etcd" --version || return 1
}

build_k8s() {
  local ldf stamp t0 tmp
  ldf="$(k8s_flags)"
  stamp="$(stamp_of "$HERE/k8sbin" "$ldf")"
  if k8s_ok "$stamp"; then log "k8s $K8S_VERSION: up to date in $K8S_BIN"; return 0; fi
  log "k8s $K8S_VERSION: building ${K8S_CMDS[*]} (cold caches: ~10-15 min on 2 cores; ~25 s with a warm GOCACHE)"
  t0=$SECONDS
  tmp="$(mktemp -d "$CACHE/k8s-$K8S_VERSION/tmp.XXXXXX")"
  (cd "$HERE/k8sbin" && go build -trimpath -pgo=off -tags=selinux,notest,grpcnotrace \
      -ldflags="$ldf" -o "$tmp/" \
      "${K8S_CMDS[@]/#/k8s.io/kubernetes/cmd/}")
  local c
  for c in "${K8S_CMDS[@]}"; do mv -f "$tmp/$c" "$K8S_BIN/$c"; done
  rmdir "$tmp"
  printf '%s\n' "$stamp" >"$K8S_BIN/.stamp"
  k8s_ok "$stamp" || die "k8s binaries built but do not report $K8S_VERSION"
  log "k8s $K8S_VERSION: built in $((SECONDS - t0)) s"
}

build_etcd() {
  local ldf="-s -w" stamp t0 tmp
  stamp="$(stamp_of "$HERE/etcdbin" "$ldf")"
  if etcd_ok "$stamp"; then log "etcd $ETCD_VERSION: up to date in $ETCD_BIN"; return 0; fi
  log "etcd $ETCD_VERSION: building"
  t0=$SECONDS
  tmp="$(mktemp -d "$CACHE/etcd-$ETCD_VERSION/tmp.XXXXXX")"
  # -o .../etcd: the main package is the module root, so the default name would be "server".
  (cd "$HERE/etcdbin" && go build -trimpath -ldflags="$ldf" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  mv -f "$tmp/etcd" "$ETCD_BIN/etcd"
  rmdir "$tmp"
  printf '%s\n' "$stamp" >"$ETCD_BIN/.stamp"
  etcd_ok "$stamp" || die "etcd built but does not report ${ETCD_VERSION#v}"
  log "etcd $ETCD_VERSION: built in $((SECONDS - t0)) s"
}

cmd_build() {
  need_go
  mkdir -p "$K8S_BIN" "$ETCD_BIN"
  local t0=$SECONDS
  # Serialise concurrent callers (e.g. two clusters started at once) on one lock per cache.
  exec 9>"$CACHE/.build.lock"
  flock 9
  build_etcd
  build_k8s
  log "done in $((SECONDS - t0)) s: K8S_BIN=$K8S_BIN ETCD_BIN=$ETCD_BIN"
}

cmd_regen() {
  need_go
  export GOFLAGS="-buildvcs=false"
  local gomod mods m c
  log "regen k8sbin for k8s.io/kubernetes $K8S_VERSION (staging $STAGING_VERSION)"
  gomod="$(cd "$HERE" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
    | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
  [[ -f "$gomod" ]] || die "could not download the go.mod of k8s.io/kubernetes@$K8S_VERSION"
  # Staging modules = the ones upstream replaces with ./staging/src/...
  mods="$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod")"
  [[ -n "$mods" ]] || mods="$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) v0\.0\.0$#\1#p' "$gomod")"
  [[ -n "$mods" ]] || die "no staging modules found in $gomod"
  log "$(wc -w <<<"$mods") staging modules"
  rm -f "$HERE/k8sbin/go.mod" "$HERE/k8sbin/go.sum"
  (
    cd "$HERE/k8sbin"
    go mod init e2e.local/k8sbin
    go mod edit -go="$GO_LINE" -godebug=default=go1.26
    for m in $mods; do go mod edit -replace="$m=$m@$STAGING_VERSION"; done
    go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
    for c in "${K8S_CMDS[@]}"; do go mod edit -tool="k8s.io/kubernetes/cmd/$c"; done
    go mod tidy
  )
  log "regen etcdbin for go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  rm -f "$HERE/etcdbin/go.mod" "$HERE/etcdbin/go.sum"
  (
    cd "$HERE/etcdbin"
    go mod init e2e.local/etcdbin
    go mod edit -go="$GO_LINE" -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION" \
      -tool=go.etcd.io/etcd/server/v3
    go mod tidy
  )
  log "regen done; commit k8sbin/go.{mod,sum} and etcdbin/go.{mod,sum}"
}

case "${1:-build}" in
  build) cmd_build ;;
  paths) printf 'K8S_BIN=%s\nETCD_BIN=%s\n' "$K8S_BIN" "$ETCD_BIN" ;;
  regen) cmd_regen ;;
  *) echo "usage: $0 [build|paths|regen]" >&2; exit 2 ;;
esac
