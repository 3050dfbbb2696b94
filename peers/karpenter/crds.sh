#!/usr/bin/env bash
# Fetches, from the Go module proxy at pinned versions, the CRDs a Karpenter v1 user on EKS has installed:
#   karpenter.sh NodePool and NodeClaim     sigs.k8s.io/karpenter (the version go.mod pins)
#   karpenter.k8s.aws EC2NodeClass          github.com/aws/karpenter-provider-aws (the same version)
# and the CRD nodeadm publishes for its NodeConfig (the one version of github.com/awslabs/amazon-eks-ami/nodeadm
# the proxy serves), so a test can have the API server judge the user data stowage writes by nodeadm's own
# schema. Copies them into ${STOWAGE_CACHE:-$HOME/.cache/stowage}/karpenter-aws-crds-<version>/{karpenter,nodeadm}/
# and prints that folder as the last line on stdout (progress goes to stderr). Idempotent: the module cache
# makes a second run a few milliseconds of copying.
source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

NODEADM_VERSION=v0.0.0-20240229193347-cfab22a10647

# module_dir MODULE@VERSION: downloads the module (outside any go.mod) and prints its folder.
module_dir() {
  local tmp dir
  tmp="$(mktemp -d)"
  dir="$(cd "$tmp" && go mod download -json "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["Error"]) if d.get("Error") else print(d["Dir"])')"
  rm -rf "$tmp"
  [[ -d "$dir" ]] || { echo "$script: $1 has no module folder" >&2; exit 1; }
  echo "$dir"
}

core="$(module_dir "sigs.k8s.io/karpenter@$version")"
aws="$(module_dir "github.com/aws/karpenter-provider-aws@$version")"
nodeadm="$(module_dir "github.com/awslabs/amazon-eks-ami/nodeadm@$NODEADM_VERSION")"

out="${STOWAGE_CACHE:-$HOME/.cache/stowage}/karpenter-aws-crds-$version"
mkdir -p "$(dirname "$out")"
if command -v flock >/dev/null 2>&1; then
  # Test binaries run in parallel: one copy at a time.
  exec 9>"$out.lock"
  flock 9
fi
rm -rf "$out.tmp.$$" && mkdir -p "$out.tmp.$$/karpenter" "$out.tmp.$$/nodeadm"
cp "$core/pkg/apis/crds/karpenter.sh_nodepools.yaml" "$core/pkg/apis/crds/karpenter.sh_nodeclaims.yaml" \
   "$aws/pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml" "$out.tmp.$$/karpenter/"
cp "$nodeadm/crds/node.eks.aws_nodeconfigs.yaml" "$out.tmp.$$/nodeadm/"
chmod -R u+w "$out.tmp.$$"
# Test binaries read $out without this lock while another test runs this script: once the folder holds
# these very files, it is left alone (replacing it would leave a moment with no folder at all, which
# failed an e2e test on 2026-12-03 with "reading .../karpenter.sh_nodepools.yaml: No such file").
same=1
for f in karpenter/karpenter.sh_nodepools.yaml karpenter/karpenter.sh_nodeclaims.yaml \
         karpenter/karpenter.k8s.aws_ec2nodeclasses.yaml nodeadm/node.eks.aws_nodeconfigs.yaml; do
  cmp -s "$out.tmp.$$/$f" "$out/$f" || same=0
done
if [[ $same == 1 ]]; then
  rm -rf "$out.tmp.$$"
else
  rm -rf "$out" && mv "$out.tmp.$$" "$out"
fi
echo "$script: Karpenter $version and nodeadm $NODEADM_VERSION CRDs in $out" >&2
echo "$out"
