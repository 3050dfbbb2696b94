#!/usr/bin/env bash
# A real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager)
# on 127.0.0.1 for end-to-end tests. There is no kubelet: tests register Nodes themselves.
#
#   cluster.sh start    build binaries if needed (build.sh), generate certificates, start all four
#                       processes with a fresh etcd, wait for /readyz and the scheduler/KCM healthz
#   cluster.sh stop     stop everything by pid file (idempotent)
#   cluster.sh status   show each process; exit 0 only when all run and /readyz is ok
#   cluster.sh env      print `export KUBECONFIG=...` (and the kubectl dir) for eval
#   cluster.sh restart-apiserver   stop and start kube-apiserver only (etcd keeps its data): what a
#                       controller sees during an API server upgrade or crash; it stays down for
#                       $STOWAGE_CP_APISERVER_DOWN seconds (default 0) in between (an outage)
#
# Environment (all optional; set the same values for start/stop/status/env):
#   STOWAGE_CP_DIR         run dir: pki, etcd data, kubeconfigs, logs/, pids/
#                          (default <repo>/target/e2e/cluster)
#   STOWAGE_CP_PORT_BASE   first of five consecutive ports (default 23790):
#                          etcd client = base, etcd peer = base+1, kube-apiserver = base+2,
#                          kube-scheduler = base+3, kube-controller-manager = base+4
#   STOWAGE_CP_ETCD_PORT, STOWAGE_CP_ETCD_PEER_PORT, STOWAGE_CP_API_PORT,
#   STOWAGE_CP_SCHED_PORT, STOWAGE_CP_KCM_PORT      override single ports
#   STOWAGE_CP_NODE_LIFECYCLE=1   keep the TaintNodesByCondition admission plugin and the
#                          node-lifecycle controller (realistic not-ready/unreachable taints; the
#                          node writer must then renew Leases and the Ready heartbeat, see docs)
#   STOWAGE_CP_TIMEOUT     seconds to wait for readiness (default 120)
#   STOWAGE_CACHE          binary cache root, see build.sh
# Two clusters coexist when they differ in STOWAGE_CP_DIR and STOWAGE_CP_PORT_BASE.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
RUN="${STOWAGE_CP_DIR:-$REPO/target/e2e/cluster}"
BASE="${STOWAGE_CP_PORT_BASE:-23790}"
ETCD_PORT="${STOWAGE_CP_ETCD_PORT:-$BASE}"
ETCD_PEER_PORT="${STOWAGE_CP_ETCD_PEER_PORT:-$((BASE + 1))}"
API_PORT="${STOWAGE_CP_API_PORT:-$((BASE + 2))}"
SCHED_PORT="${STOWAGE_CP_SCHED_PORT:-$((BASE + 3))}"
KCM_PORT="${STOWAGE_CP_KCM_PORT:-$((BASE + 4))}"
NODE_LIFECYCLE="${STOWAGE_CP_NODE_LIFECYCLE:-0}"
TIMEOUT="${STOWAGE_CP_TIMEOUT:-120}"

PKI="$RUN/pki"
LOGS="$RUN/logs"
PIDS="$RUN/pids"
KUBECONFIG_ADMIN="$RUN/admin.kubeconfig"
# Stop order; start order is the reverse.
COMPONENTS=(kube-controller-manager kube-scheduler kube-apiserver etcd)

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; } # seconds since $1

bin_paths() {
  local line
  while IFS= read -r line; do
    case "$line" in
      K8S_BIN=*) K8S_BIN="${line#K8S_BIN=}" ;;
      ETCD_BIN=*) ETCD_BIN="${line#ETCD_BIN=}" ;;
    esac
  done < <("$HERE/build.sh" paths)
  KUBECTL="$K8S_BIN/kubectl"
}

ensure_tools() { # openssl and curl from Debian if missing (idempotent)
  local missing=()
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v setsid >/dev/null 2>&1 || missing+=(util-linux)
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
}

# --- processes -------------------------------------------------------------------------------

pid_of() { # prints the pid if the process from the pid file is alive and is the right binary
  local name="$1" pid comm
  [[ -f "$PIDS/$name.pid" ]] || return 1
  pid="$(cat "$PIDS/$name.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
  [[ "$comm" == "${name:0:15}" ]] || return 1 # /proc/PID/comm is cut at 15 characters
  [[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]] || return 1 # zombie = gone
  printf '%s\n' "$pid"
}

spawn() { # spawn <name> <binary> <args...>: detached, own session, output appended to logs/<name>.log
  local name="$1"; shift
  printf '\n===== %s start %s\n' "$name" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$LOGS/$name.log"
  setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
  printf '%s\n' "$!" >"$PIDS/$name.pid"
  # The child is still the shell or setsid until it execs the binary: wait for that.
  local i
  for ((i = 0; i < 100; i++)); do pid_of "$name" >/dev/null && return 0; sleep 0.05; done
  die "$name did not start (log: $LOGS/$name.log)"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # wait_for <what> <component whose death aborts the wait> <command...>
  local what="$1" comp="$2"; shift 2
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ! pid_of "$comp" >/dev/null; then
      tail -n 30 "$LOGS/$comp.log" >&2 || true
      die "$comp exited while waiting for $what (log: $LOGS/$comp.log)"
    fi
    ((SECONDS < deadline)) || { tail -n 30 "$LOGS/$comp.log" >&2; die "timeout waiting for $what"; }
    sleep 0.2
  done
}

etcd_healthy() { [[ "$(curl -sf "http://127.0.0.1:$ETCD_PORT/health")" == *'"health":"true"'* ]]; }
api_ready() { [[ "$("$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" get --raw /readyz 2>/dev/null)" == ok ]]; }
default_sa() { "$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" get serviceaccount default -n default -o name; }
healthz_ok() { [[ "$(curl -sk "https://127.0.0.1:$1/healthz")" == ok ]]; }

# --- certificates and kubeconfigs ------------------------------------------------------------

gen_pki() {
  if [[ -f "$PKI/.complete" ]]; then return 0; fi
  log "generating certificates in $PKI"
  rm -rf "$PKI"; mkdir -p "$PKI"
  (
    cd "$PKI"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=stowage-e2e-ca" \
      -keyout ca.key -out ca.crt \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    printf '%s\n' \
      "subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.0.0.1" \
      "extendedKeyUsage=serverAuth" "keyUsage=critical,digitalSignature,keyEncipherment" >server.ext
    printf '%s\n' "extendedKeyUsage=clientAuth" "keyUsage=critical,digitalSignature,keyEncipherment" >client.ext
    sign() { # sign <name> <subject> <ext file>
      openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -extfile "$3" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr"
    }
    sign apiserver "/CN=kube-apiserver" server.ext
    sign admin "/O=system:masters/CN=stowage-e2e-admin" client.ext
    # The scheduler runs as the identity the bootstrap RBAC policy grants (as with kubeadm).
    # The KCM is system:masters: with its bootstrap identity it needs
    # --use-service-account-credentials, which adds ~4 s before the controllers run (one
    # ServiceAccount and token per controller).
    sign scheduler "/CN=system:kube-scheduler" client.ext
    sign controller-manager "/O=system:masters/CN=system:kube-controller-manager" client.ext
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub
    touch .complete
  )
}

write_kubeconfig() { # write_kubeconfig <file> <cert/key base name in PKI>; data embedded
  local b64ca b64crt b64key
  b64ca="$(base64 -w0 "$PKI/ca.crt")"; b64crt="$(base64 -w0 "$PKI/$2.crt")"; b64key="$(base64 -w0 "$PKI/$2.key")"
  (umask 077; cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: stowage-e2e
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $b64ca
users:
- name: $2
  user:
    client-certificate-data: $b64crt
    client-key-data: $b64key
contexts:
- name: stowage-e2e
  context:
    cluster: stowage-e2e
    user: $2
current-context: stowage-e2e
EOF
  )
}

spawn_apiserver() {
  local disable_admission=ServiceAccount
  if [[ "$NODE_LIFECYCLE" != 1 ]]; then disable_admission+=",TaintNodesByCondition"; fi
  spawn kube-apiserver "$K8S_BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --service-account-issuer="https://127.0.0.1:$API_PORT" \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=RBAC --allow-privileged=true \
    --disable-admission-plugins="$disable_admission" \
    --endpoint-reconciler-type=none
}

# --- commands --------------------------------------------------------------------------------

cmd_start() {
  local t0 name port
  ensure_tools
  "$HERE/build.sh" build
  bin_paths

  if cmd_status >/dev/null 2>&1; then
    log "already running ($RUN, apiserver https://127.0.0.1:$API_PORT)"; return 0
  fi
  cmd_stop >/dev/null # leftovers of a partial or crashed start
  t0=$EPOCHREALTIME
  # A failed start stops what it started (logs stay in $LOGS).
  trap 'rc=$?; if ((rc != 0)); then log "start failed, stopping"; cmd_stop; fi' EXIT

  for port in "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" "$SCHED_PORT" "$KCM_PORT"; do
    if port_in_use "$port"; then die "port $port on 127.0.0.1 is in use (set STOWAGE_CP_PORT_BASE)"; fi
  done
  mkdir -p "$RUN" "$LOGS" "$PIDS"
  gen_pki
  log "certificates ready after $(since "$t0") s"
  write_kubeconfig "$KUBECONFIG_ADMIN" admin
  write_kubeconfig "$RUN/scheduler.kubeconfig" scheduler
  write_kubeconfig "$RUN/controller-manager.kubeconfig" controller-manager
  printf 'API_PORT=%s\nETCD_PORT=%s\nETCD_PEER_PORT=%s\nSCHED_PORT=%s\nKCM_PORT=%s\nNODE_LIFECYCLE=%s\n' \
    "$API_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" "$SCHED_PORT" "$KCM_PORT" "$NODE_LIFECYCLE" >"$RUN/cluster.env"

  # Fresh state on every start.
  rm -rf "$RUN/etcd"
  spawn etcd "$ETCD_BIN/etcd" --name stowage-e2e --data-dir "$RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "stowage-e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --log-level=warn
  wait_for "etcd health" etcd etcd_healthy
  log "etcd healthy after $(since "$t0") s"

  local controllers='*,-node-lifecycle-controller'
  if [[ "$NODE_LIFECYCLE" == 1 ]]; then controllers='*'; fi

  spawn_apiserver
  wait_for "kube-apiserver /readyz" kube-apiserver api_ready
  log "kube-apiserver ready after $(since "$t0") s"

  spawn kube-scheduler "$K8S_BIN/kube-scheduler" \
    --kubeconfig="$RUN/scheduler.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$SCHED_PORT"
  spawn kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$RUN/controller-manager.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --controllers="$controllers"
  wait_for "kube-scheduler /healthz" kube-scheduler healthz_ok "$SCHED_PORT"
  wait_for "kube-controller-manager /healthz" kube-controller-manager healthz_ok "$KCM_PORT"
  # The KCM's healthz is ok before its controllers run; the default ServiceAccount, made by the
  # serviceaccount controller, shows that they do.
  wait_for "the KCM controllers (ServiceAccount default/default)" kube-controller-manager default_sa
  for name in "${COMPONENTS[@]}"; do pid_of "$name" >/dev/null || die "$name is not running"; done
  trap - EXIT
  log "control plane up in $(since "$t0") s: apiserver https://127.0.0.1:$API_PORT, run dir $RUN"
  log "use: eval \"\$($0 env)\""
}

cmd_stop() {
  local name pid i
  for name in "${COMPONENTS[@]}"; do
    if pid="$(pid_of "$name")"; then
      kill -TERM "$pid" 2>/dev/null || true
      for ((i = 0; i < 100; i++)); do pid_of "$name" >/dev/null || break; sleep 0.1; done
      if pid_of "$name" >/dev/null; then
        log "$name ($pid) ignored SIGTERM for 10 s, killing"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do pid_of "$name" >/dev/null || break; sleep 0.1; done
      fi
      log "stopped $name ($pid)"
    fi
    rm -f "$PIDS/$name.pid"
  done
}

cmd_status() {
  local name pid ok=0 port="$API_PORT"
  if [[ -f "$RUN/cluster.env" ]]; then
    # The port the cluster in this run dir was started with (the kubeconfig carries it too).
    port="$(sed -n 's/^API_PORT=//p' "$RUN/cluster.env")"
  fi
  for name in etcd kube-apiserver kube-scheduler kube-controller-manager; do
    if pid="$(pid_of "$name")"; then
      printf '%-24s running  pid %s\n' "$name" "$pid"
    else
      printf '%-24s stopped\n' "$name"; ok=1
    fi
  done
  if ((ok == 0)); then
    [[ -n "${KUBECTL:-}" ]] || bin_paths
    if api_ready; then
      printf '%-24s ok (https://127.0.0.1:%s)\n' "/readyz" "$port"
    else
      printf '%-24s not ready\n' "/readyz"; ok=1
    fi
  fi
  return "$ok"
}

cmd_restart_apiserver() { # stop kube-apiserver (etcd keeps the data) and start it again
  local pid i t0=$EPOCHREALTIME
  bin_paths
  if pid="$(pid_of kube-apiserver)"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do pid_of kube-apiserver >/dev/null || break; sleep 0.1; done
    if pid_of kube-apiserver >/dev/null; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
  fi
  for ((i = 0; i < 100; i++)); do port_in_use "$API_PORT" || break; sleep 0.1; done
  sleep "${STOWAGE_CP_APISERVER_DOWN:-0}"
  spawn_apiserver
  wait_for "kube-apiserver /readyz" kube-apiserver api_ready
  log "kube-apiserver restarted in $(since "$t0") s"
}

cmd_env() {
  bin_paths
  printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_ADMIN"
  printf 'export STOWAGE_K8S_BIN=%q\n' "$K8S_BIN"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  restart-apiserver) cmd_restart_apiserver ;;
  *) echo "usage: $0 start|stop|status|env|restart-apiserver" >&2; exit 2 ;;
esac
