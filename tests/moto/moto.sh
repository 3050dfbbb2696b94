#!/usr/bin/env bash
# The moto EC2 emulator (PyPI moto[server]) for end-to-end tests.
#
#   moto.sh start    create/refresh the venv if needed, start moto_server in the background,
#                    wait until it answers
#   moto.sh stop     stop it by pid file (idempotent)
#   moto.sh status   exit 0 when running and answering
#   moto.sh env      print exports for an AWS SDK client (endpoint, dummy credentials, region)
#   moto.sh venv     only create/refresh the venv
#   moto.sh lock     re-resolve requirements.txt from requirements.in (when bumping moto)
#
# Environment:
#   MOTO_PORT          port on 127.0.0.1 (default 5055)
#   STOWAGE_MOTO_DIR   run dir for moto.log and moto.pid (default <repo>/target/e2e/moto)
#   STOWAGE_CACHE      cache root; the venv is $STOWAGE_CACHE/moto-venv (default ~/.cache/stowage)
#   STOWAGE_PYTHON     interpreter for the venv (default python3)
#   STOWAGE_MOTO_PLAIN 1 runs plain moto_server instead of ice_server.py (moto behind the
#                      fault-injection middleware: capacity errors and throttling on demand,
#                      EC2's prioritized allocation; see ice_server.py)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${STOWAGE_CACHE:-$HOME/.cache/stowage}"
VENV="$CACHE/moto-venv"
PORT="${MOTO_PORT:-5055}"
RUN="${STOWAGE_MOTO_DIR:-$REPO/target/e2e/moto}"
PIDFILE="$RUN/moto.pid"
LOGFILE="$RUN/moto.log"
PY="${STOWAGE_PYTHON:-python3}"
REQS="$HERE/requirements.txt"
URL="http://127.0.0.1:$PORT"

log() { printf '[moto %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; } # seconds since $1

apt_install() {
  log "installing $* with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "$@" >/dev/null
}

ensure_tools() {
  command -v curl >/dev/null 2>&1 || apt_install curl
  command -v setsid >/dev/null 2>&1 || apt_install util-linux
  command -v "$PY" >/dev/null 2>&1 || { apt_install python3; PY=python3; }
}

venv_ok() { # venv exists, its python runs, and it was built from the current requirements.txt
  [[ -x "$VENV/bin/python" && -x "$VENV/bin/moto_server" && -f "$VENV/.stamp" ]] || return 1
  [[ "$(cat "$VENV/.stamp")" == "$(sha256sum <"$REQS" | cut -d' ' -f1)" ]] || return 1
  "$VENV/bin/python" -c 'import moto.server' >/dev/null 2>&1
}

ensure_venv() {
  ensure_tools
  if venv_ok; then return 0; fi
  local t0=$SECONDS
  log "creating venv $VENV from $REQS"
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  if ! "$PY" -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    apt_install python3-venv # Debian ships venv/ensurepip separately
    "$PY" -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "$REQS"
  sha256sum <"$REQS" | cut -d' ' -f1 >"$VENV/.stamp"
  venv_ok || die "venv at $VENV is not usable after install"
  log "venv ready in $((SECONDS - t0)) s (moto $("$VENV/bin/python" -c 'import moto; print(moto.__version__)'))"
}

pid_alive() {
  local pid comm
  [[ -f "$PIDFILE" ]] || return 1
  pid="$(cat "$PIDFILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
  if [[ "$comm" != moto_server ]]; then
    # ice_server.py runs under the venv's python: recognise it by its command line.
    [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" == *"$HERE/ice_server.py"* ]] || return 1
  fi
  printf '%s\n' "$pid"
}

answers() { [[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/moto-api/")" == 200 ]]; }

cmd_start() {
  local t0 deadline
  ensure_venv
  if pid_alive >/dev/null && answers; then log "already running at $URL"; return 0; fi
  cmd_stop
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then die "port $PORT is in use (set MOTO_PORT)"; fi
  mkdir -p "$RUN"
  printf '\n===== moto start %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$LOGFILE"
  t0=$EPOCHREALTIME
  if [[ "${STOWAGE_MOTO_PLAIN:-0}" == 1 ]]; then
    setsid "$VENV/bin/moto_server" -H 127.0.0.1 -p "$PORT" </dev/null >>"$LOGFILE" 2>&1 &
  else
    setsid "$VENV/bin/python" "$HERE/ice_server.py" -H 127.0.0.1 -p "$PORT" </dev/null >>"$LOGFILE" 2>&1 &
  fi
  printf '%s\n' "$!" >"$PIDFILE"
  deadline=$((SECONDS + ${STOWAGE_MOTO_TIMEOUT:-30}))
  until answers; do
    pid_alive >/dev/null || { tail -n 20 "$LOGFILE" >&2; die "moto_server exited (log: $LOGFILE)"; }
    ((SECONDS < deadline)) || die "timeout waiting for $URL"
    sleep 0.1
  done
  log "moto_server answering at $URL after $(since "$t0") s (pid $(cat "$PIDFILE"), log $LOGFILE)"
}

cmd_stop() {
  local pid i
  if pid="$(pid_alive)"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do pid_alive >/dev/null || break; sleep 0.1; done
    if pid_alive >/dev/null; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
    log "stopped moto_server ($pid)"
  fi
  rm -f "$PIDFILE"
}

cmd_status() {
  local pid
  if pid="$(pid_alive)" && answers; then echo "moto_server running, pid $pid, $URL"; return 0; fi
  echo "moto_server stopped"; return 1
}

cmd_env() {
  printf 'export AWS_ENDPOINT_URL=%q\n' "$URL"
  printf 'export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing\n'
  printf 'export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1\n'
  printf 'export STOWAGE_MOTO_PYTHON=%q\n' "$VENV/bin/python"
}

cmd_lock() { # resolve requirements.in in a scratch venv and freeze it
  ensure_tools
  local tmp
  tmp="$(mktemp -d)"
  "$PY" -m venv "$tmp/venv"
  "$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check -r "$HERE/requirements.in"
  {
    echo "# Generated by 'tests/moto/moto.sh lock' from requirements.in; do not edit."
    grep -v '^moto==' < <("$tmp/venv/bin/python" -m pip freeze --disable-pip-version-check)
    sed -n 's/^\(moto\[server\]==.*\)$/\1/p' "$HERE/requirements.in"
  } >"$REQS"
  rm -rf "$tmp"
  log "wrote $REQS"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  venv) ensure_venv ;;
  lock) cmd_lock ;;
  *) echo "usage: $0 start|stop|status|env|venv|lock" >&2; exit 2 ;;
esac
