#!/usr/bin/env bash
# Builds stowage-nodeadm-check: nodeadm's own user-data parser and NodeConfig validation (the
# github.com/awslabs/amazon-eks-ami/nodeadm module, at the one version the Go module proxy serves) behind a
# small main, so tests judge the AL2023 user data stowage writes by the code that reads it on a node.
# nodeadm's parser is unexported, so a copy of the module gets one added file (stowage_decode.go.in, which
# calls it the way nodeadm's IMDS provider does) and the main (main.go.in); nothing of nodeadm is edited.
# Its dependencies come from the Go module proxy, pinned by the module's own go.sum (cached after the first build).
# Builds once into ${STOWAGE_CACHE:-$HOME/.cache/stowage}/nodeadm-check-<version>/ (rebuilt when this
# folder's files or the Go version change) and prints the binary's path as the last line on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null 2>&1 || { echo "check.sh: go not found on PATH" >&2; exit 1; }

version=v0.0.0-20240229193347-cfab22a10647
out="${STOWAGE_CACHE:-$HOME/.cache/stowage}/nodeadm-check-$version"
bin="$out/stowage-nodeadm-check"
hash="$( { sha256sum "$here"/check.sh "$here"/*.go.in; go env GOVERSION; } | sha256sum | cut -d' ' -f1)"
mkdir -p "$out"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$out/.lock"
  flock 9
fi
if [[ -x "$bin" && -f "$out/source.sha256" && "$(cat "$out/source.sha256")" == "$hash" ]]; then
  echo "check.sh: $bin is up to date" >&2
else
  tmp="$(mktemp -d)"
  dir="$(cd "$tmp" && go mod download -json "github.com/awslabs/amazon-eks-ami/nodeadm@$version" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["Error"]) if d.get("Error") else print(d["Dir"])')"
  cp -r "$dir" "$tmp/nodeadm" && chmod -R u+w "$tmp/nodeadm"
  cp "$here/stowage_decode.go.in" "$tmp/nodeadm/internal/configprovider/stowage_decode.go"
  mkdir -p "$tmp/nodeadm/cmd/stowage-nodeadm-check"
  cp "$here/main.go.in" "$tmp/nodeadm/cmd/stowage-nodeadm-check/main.go"
  (cd "$tmp/nodeadm" && go build -mod=readonly -buildvcs=false -trimpath -o "$bin.tmp.$$" ./cmd/stowage-nodeadm-check) >&2
  mv -f "$bin.tmp.$$" "$bin"
  echo "$hash" > "$out/source.sha256"
  rm -rf "$tmp"
  echo "check.sh: built $bin" >&2
fi
echo "$bin"
