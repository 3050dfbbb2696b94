# Sourced by build.sh and build-operator.sh: the Go environment both builds need, the Karpenter version
# go.mod pins, and `cached_build`, which runs a build once per source hash into the cache.
# Needs Go >= 1.26.6 (sigs.k8s.io/karpenter v1.14.1's go line) and the Go module proxy.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script="$(basename "${BASH_SOURCE[1]}")"
export GOTOOLCHAIN=local
export CGO_ENABLED=0

if ! command -v go >/dev/null 2>&1; then
  echo "$script: go not found on PATH (need Go >= 1.26.6)" >&2
  exit 1
fi

version="$(awk '$1 == "sigs.k8s.io/karpenter" { print $2; exit }' "$here/go.mod")"
if [[ -z "$version" ]]; then
  echo "$script: cannot find sigs.k8s.io/karpenter in $here/go.mod" >&2
  exit 1
fi

# cached_build NAME HASH STEPS [EXTRA_DIR]: builds into $STOWAGE_CACHE/NAME-<version>/NAME unless the binary
# (and EXTRA_DIR beside it, if named) exists and was built from HASH. STEPS is a function called with the
# temporary binary path and the output folder; callers are serialised on a lock file. Prints the binary's
# path as the last line on stdout (build output goes to stderr).
cached_build() {
  local name=$1 hash=$2 steps=$3 extra=${4:-}
  local outdir="${STOWAGE_CACHE:-$HOME/.cache/stowage}/$name-$version"
  local bin="$outdir/$name"
  mkdir -p "$outdir"
  if command -v flock >/dev/null 2>&1; then
    # Serialise concurrent callers (e.g. parallel test binaries) on one lock file.
    exec 9>"$outdir/.lock"
    flock 9
  fi
  if [[ -x "$bin" && ( -z "$extra" || -d "$outdir/$extra" ) && -f "$outdir/source.sha256" && "$(cat "$outdir/source.sha256")" == "$hash" ]]; then
    echo "$script: $bin is up to date" >&2
  else
    echo "$script: building $name (sigs.k8s.io/karpenter $version) into $outdir" >&2
    local start=$SECONDS tmp="$outdir/$name.tmp.$$"
    "$steps" "$tmp" "$outdir"
    mv -f "$tmp" "$bin"
    echo "$hash" > "$outdir/source.sha256"
    echo "$script: built in $((SECONDS - start)) s" >&2
  fi
  echo "$bin"
}
