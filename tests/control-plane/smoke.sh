#!/usr/bin/env bash
# Temporary smoke test of the e2e control plane (the real one will be written in Rust):
# two hand-made Nodes in two zones, a Deployment spread across zones by the real kube-scheduler,
# and a StatefulSet whose WaitForFirstConsumer PVC is bound to a pre-created zonal PV.
# Starts the cluster and stops it again on exit (SMOKE_KEEP=1 leaves it running).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLUSTER="$HERE/cluster.sh"

log() { printf '[smoke %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

cleanup() { [[ "${SMOKE_KEEP:-0}" == 1 ]] || "$CLUSTER" stop; }
trap cleanup EXIT

t0=$SECONDS
"$CLUSTER" stop # fresh etcd: start wipes the data dir
"$CLUSTER" start
eval "$("$CLUSTER" env)"
k() { "$STOWAGE_K8S_BIN/kubectl" "$@"; }
log "cluster started in $((SECONDS - t0)) s"

wait_until() { # wait_until <what> <seconds> <command...>
  local what="$1" deadline=$((SECONDS + $2)); shift 2
  until "$@"; do
    ((SECONDS < deadline)) || die "timeout waiting for $what"
    sleep 0.5
  done
}

now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
# Node status as one line of JSON (also valid YAML flow style): capacity/allocatable incl. pods,
# condition Ready=True.
STATUS='{"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}, '
STATUS+='"allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110", "ephemeral-storage": "90Gi"}, '
STATUS+='"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "stand-in", '
STATUS+="\"lastHeartbeatTime\": \"$now\", \"lastTransitionTime\": \"$now\"}]}"
node_manifest() { # node_manifest <name> <zone>
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $1
  labels:
    kubernetes.io/hostname: $1
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    topology.kubernetes.io/region: us-east-1
    topology.kubernetes.io/zone: $2
    node.kubernetes.io/instance-type: m5.xlarge
spec:
  providerID: aws:///$2/i-$1
EOF
}
allocatable_pods() { k get node "$1" -o jsonpath='{.status.allocatable.pods}'; }

log "creating nodes"
# node-a: status sent in the create request itself (a Node keeps .status on create).
{ node_manifest node-a us-east-1a; printf 'status: %s\n' "$STATUS"; } | k create -f - >/dev/null
[[ "$(allocatable_pods node-a)" == 110 ]] || die "node-a lost its status on create"
# node-b: created bare; a plain patch of the Node ignores .status, the status subresource works.
node_manifest node-b us-east-1b | k create -f - >/dev/null
k patch node node-b --type=merge -p "{\"status\": $STATUS}" >/dev/null
[[ -z "$(allocatable_pods node-b)" ]] || die "a main-resource patch changed node status (unexpected)"
k patch node node-b --subresource=status --type=merge -p "{\"status\": $STATUS}" >/dev/null
for n in node-a node-b; do
  [[ "$(allocatable_pods "$n")" == 110 ]] || die "$n has no allocatable pods"
  taints="$(k get node "$n" -o jsonpath='{.spec.taints}')"
  [[ -z "$taints" ]] || log "note: $n has taints $taints"
done
k get nodes -L topology.kubernetes.io/zone

log "deployment with a zonal topology spread (maxSkew 1, 2 replicas)"
k apply -f - >/dev/null <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: spread, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: spread}}
  template:
    metadata: {labels: {app: spread}}
    spec:
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: DoNotSchedule
        labelSelector: {matchLabels: {app: spread}}
      containers:
      - name: c
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 500m, memory: 256Mi}}
EOF
t1=$SECONDS
spread_nodes() {
  k get pods -n default -l app=spread -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep . | sort | tr '\n' ' '
}
two_bound() { [[ "$(spread_nodes | wc -w)" == 2 ]]; }
wait_until "2 spread pods bound" 60 two_bound
nodes="$(spread_nodes)"
[[ "$nodes" == "node-a node-b " ]] || die "spread pods on '$nodes', want one on node-a and one on node-b"
log "spread pods bound to: $nodes($((SECONDS - t1)) s)"
k get pods -n default -l app=spread -o wide

log "WaitForFirstConsumer StorageClass, zonal PV in us-east-1b, StatefulSet with a claim template"
k apply -f - >/dev/null <<'EOF'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-wffc}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-b}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local-wffc
  local: {path: /mnt/disks/pv-b}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      nodeSelector: {topology.kubernetes.io/zone: us-east-1b}
      containers:
      - name: c
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 100m, memory: 64Mi}}
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: local-wffc
      resources: {requests: {storage: 1Gi}}
EOF
t1=$SECONDS
pvc_phase() { k get pvc -n default data-db-0 -o jsonpath='{.status.phase}' 2>/dev/null; }
pvc_bound() { [[ "$(pvc_phase)" == Bound ]]; }
db0_node() { k get pod -n default db-0 -o jsonpath='{.spec.nodeName}' 2>/dev/null; }
db0_bound() { [[ -n "$(db0_node)" ]]; }
wait_until "PVC data-db-0 Bound" 90 pvc_bound
[[ "$(k get pvc -n default data-db-0 -o jsonpath='{.spec.volumeName}')" == pv-b ]] || die "PVC not bound to pv-b"
wait_until "pod db-0 bound" 60 db0_bound
node="$(db0_node)"
[[ "$node" == node-b ]] || die "db-0 on '$node', want node-b"
log "PVC data-db-0 $(pvc_phase) to pv-b, db-0 on $node ($((SECONDS - t1)) s)"
k get pv,pvc -n default
k get pods -n default -o wide

log "process RSS (MiB):"
for c in etcd kube-apiserver kube-scheduler kube-controller-manager; do
  pid="$(cat "${STOWAGE_CP_DIR:-$HERE/../../target/e2e/cluster}/pids/$c.pid")"
  printf '  %-24s %s\n' "$c" "$(($(awk '/VmRSS/{print $2}' "/proc/$pid/status") / 1024))" >&2
done
log "PASS in $((SECONDS - t0)) s"
