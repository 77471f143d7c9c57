#!/usr/bin/env bash
# Starts and stops the real servers that the integration tests talk to.
#
# Usage:
#   scripts/services.sh start  <service> [--keep-data]
#   scripts/services.sh stop   <service> [--keep-data]
#   scripts/services.sh status
#   scripts/services.sh env            # prints `export SENTINEL_...=...` lines; eval "$(...)"
#
# Services:
#   etcd         all the etcd instances the tests share: etcd-main, etcd-auth and etcd-tls.
#   etcd-main    plain etcd, client http://127.0.0.1:23790, peer 23800.
#   etcd-auth    etcd with auth enabled, client 23791, peer 23801, simple tokens that expire
#                after 2 s of inactivity (--auth-token-ttl 2). Users set up on a fresh start:
#                  root:rootpw   (root role)
#                  app:apppw     (role rules-rw: readwrite on the prefix /rules/)
#   etcd-tls     etcd serving TLS only: client https://127.0.0.1:23793, peer 23803, with a
#                throwaway CA made by openssl on start: .services/etcd-tls/certs/ca.pem
#                (the server certificate is for 127.0.0.1 and localhost). Used by the tests
#                built with the `tls` feature.
#   etcd-fault   an etcd (client 23792, peer 23802) that fault tests stop and restart
#                themselves, so they never disturb the instances other tests share.
#
# Data and logs live under $ROOT/.services/<instance>/{data,server.log,server.pid}.
#
# `start` wipes the data directory first, unless --keep-data is given. `stop` deletes the data
# directory too, unless --keep-data is given. A test that restarts the same server mid-test, on
# the same ports with the same data, runs:
#   scripts/services.sh stop etcd-fault --keep-data
#   scripts/services.sh start etcd-fault --keep-data
# `start` of an instance that is already running and healthy does nothing and succeeds.
# `stop` kills exactly the PID recorded in the pidfile, never a process found by name.
#
# `start` apt-get installs whichever of the Debian packages in ETCD_PACKAGES dpkg does not list
# as installed: etcd-server and etcd-client for the servers and etcdctl, and protobuf-compiler
# plus libprotobuf-dev because the etcd-client crate's build script needs protoc and the
# google/protobuf/*.proto includes, which Debian ships in libprotobuf-dev.
#
# Adding a service: write `start_<name>` / `stop_<name>` functions (see the etcd ones, built on
# spawn_detached / wait_ready / stop_instance), and add it to the dispatch in main() and
# INSTANCES.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# SENTINEL_SERVICES_DIR moves data and logs elsewhere, e.g. to /dev/shm to take disk
# flushes out of a latency benchmark.
SERVICES_DIR="${SENTINEL_SERVICES_DIR:-$ROOT/.services}"
READY_TIMEOUT_SECS="${SERVICES_READY_TIMEOUT_SECS:-30}"

ETCD_MAIN_CLIENT_PORT=23790
ETCD_MAIN_PEER_PORT=23800
ETCD_AUTH_CLIENT_PORT=23791
ETCD_AUTH_PEER_PORT=23801
ETCD_FAULT_CLIENT_PORT=23792
ETCD_FAULT_PEER_PORT=23802
ETCD_TLS_CLIENT_PORT=23793
ETCD_TLS_PEER_PORT=23803

# Every instance this script knows, for `status`.
INSTANCES=(etcd-main etcd-auth etcd-tls etcd-fault)

APT_UPDATED=0

log() { printf '[services] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# ---------------------------------------------------------------------------------------------
# Installation
# ---------------------------------------------------------------------------------------------

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root (or sudo) to run: $*"
  fi
}

apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install these by hand: $*"
  if [ "$APT_UPDATED" -eq 0 ]; then
    log "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# Debian packages the etcd instances and the etcd-client crate's build need.
ETCD_PACKAGES=(protobuf-compiler libprotobuf-dev etcd-server etcd-client)

# Checks packages, not commands: a working protoc says nothing about whether the
# google/protobuf/*.proto includes (libprotobuf-dev) are there.
pkg_installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

ensure_etcd_installed() {
  local pkg missing=()
  for pkg in "${ETCD_PACKAGES[@]}"; do
    pkg_installed "$pkg" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
  fi
}

# ---------------------------------------------------------------------------------------------
# Generic process handling
# ---------------------------------------------------------------------------------------------

instance_dir() { printf '%s/%s' "$SERVICES_DIR" "$1"; }
pid_file() { printf '%s/server.pid' "$(instance_dir "$1")"; }
log_file() { printf '%s/server.log' "$(instance_dir "$1")"; }
data_dir() { printf '%s/data' "$(instance_dir "$1")"; }

# Prints the recorded PID of an instance if that process is alive and is still the server
# binary we started (guards against PID reuse). Fails otherwise.
live_pid() {
  local name="$1" binary="$2" pf pid
  pf="$(pid_file "$name")"
  [ -f "$pf" ] || return 1
  pid="$(cat "$pf")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$binary" || return 1
  printf '%s' "$pid"
}

# spawn_detached <instance> <command...>: runs the command in its own session, stdin closed,
# output appended to the instance log, and records its PID.
spawn_detached() {
  local name="$1"
  shift
  local lf pf
  lf="$(log_file "$name")"
  pf="$(pid_file "$name")"
  mkdir -p "$(instance_dir "$name")"
  printf '\n==== %s starting %s\n' "$(date -u +%FT%TZ)" "$name" >>"$lf"
  # This shell is not a process-group leader, so setsid execs the server in place and $! is
  # the server's own PID.
  setsid "$@" </dev/null >>"$lf" 2>&1 &
  printf '%s' "$!" >"$pf"
}

# wait_ready <instance> <binary> <check command...>: polls the check until it succeeds, the
# process dies, or READY_TIMEOUT_SECS pass. On failure prints the log tail and exits non-zero.
wait_ready() {
  local name="$1" binary="$2"
  shift 2
  local deadline=$((SECONDS + READY_TIMEOUT_SECS))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if "$@" >/dev/null 2>&1; then
      log "$name is ready (pid $(cat "$(pid_file "$name")"))"
      return 0
    fi
    if ! live_pid "$name" "$binary" >/dev/null; then
      log "$name exited during startup; last log lines:"
      tail -n 40 "$(log_file "$name")" >&2 || true
      exit 1
    fi
    sleep 0.2
  done
  log "$name not ready after ${READY_TIMEOUT_SECS}s; last log lines:"
  tail -n 40 "$(log_file "$name")" >&2 || true
  exit 1
}

# stop_instance <instance> <binary> <keep_data 0|1>: SIGTERM to the recorded PID, SIGKILL after
# 10 s, then removes the pidfile (and the data unless keep_data).
stop_instance() {
  local name="$1" binary="$2" keep_data="$3" pid
  if pid="$(live_pid "$name" "$binary")"; then
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) ignored SIGTERM for 10 s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
    fi
    log "$name stopped (pid $pid)"
  else
    log "$name is not running"
  fi
  rm -f "$(pid_file "$name")"
  if [ "$keep_data" -eq 0 ]; then
    rm -rf "$(data_dir "$name")"
  fi
}

# ---------------------------------------------------------------------------------------------
# etcd
# ---------------------------------------------------------------------------------------------

etcd_ports() {
  case "$1" in
  etcd-main) printf '%s %s' "$ETCD_MAIN_CLIENT_PORT" "$ETCD_MAIN_PEER_PORT" ;;
  etcd-auth) printf '%s %s' "$ETCD_AUTH_CLIENT_PORT" "$ETCD_AUTH_PEER_PORT" ;;
  etcd-fault) printf '%s %s' "$ETCD_FAULT_CLIENT_PORT" "$ETCD_FAULT_PEER_PORT" ;;
  etcd-tls) printf '%s %s' "$ETCD_TLS_CLIENT_PORT" "$ETCD_TLS_PEER_PORT" ;;
  *) die "unknown etcd instance $1" ;;
  esac
}

# etcd_healthy <url> [ca file]
etcd_healthy() {
  local url="$1" ca="${2:-}"
  if command -v curl >/dev/null 2>&1; then
    curl -sf --max-time 1 ${ca:+--cacert "$ca"} "$url/health" | grep -q '"health":"true"'
  else
    etcdctl --endpoints="$url" ${ca:+--cacert="$ca"} --command-timeout=1s endpoint health
  fi
}

# start_etcd_instance <instance> <keep_data 0|1> <scheme> <ca file or ""> [extra etcd flags...]
start_etcd_instance() {
  local name="$1" keep_data="$2" scheme="$3" ca="$4"
  shift 4
  local client peer url
  read -r client peer <<<"$(etcd_ports "$name")"
  url="$scheme://127.0.0.1:$client"

  if live_pid "$name" etcd >/dev/null && etcd_healthy "$url" "$ca"; then
    log "$name already running at $url"
    return 0
  fi
  # A dead or unhealthy leftover: stop exactly the recorded PID, keep data as asked.
  stop_instance "$name" etcd 1 2>/dev/null || true

  ensure_etcd_installed
  local dd
  dd="$(data_dir "$name")"
  if [ "$keep_data" -eq 0 ]; then
    rm -rf "$dd"
  fi
  mkdir -p "$dd"
  chmod 700 "$dd"

  spawn_detached "$name" etcd --name "$name" --data-dir "$dd" \
    --listen-client-urls "$url" --advertise-client-urls "$url" \
    --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$name=http://127.0.0.1:$peer" \
    --logger zap --log-level warn "$@"
  wait_ready "$name" etcd etcd_healthy "$url" "$ca"
}

start_etcd_main() { start_etcd_instance etcd-main "$1" http ""; }
stop_etcd_main() { stop_instance etcd-main etcd "$1"; }

start_etcd_fault() { start_etcd_instance etcd-fault "$1" http ""; }
stop_etcd_fault() { stop_instance etcd-fault etcd "$1"; }

start_etcd_auth() {
  local keep_data="$1" url marker
  url="http://127.0.0.1:$ETCD_AUTH_CLIENT_PORT"
  marker="$(data_dir etcd-auth)/.auth-configured"
  start_etcd_instance etcd-auth "$keep_data" http "" --auth-token simple --auth-token-ttl 2
  if [ -f "$marker" ]; then
    return 0
  fi
  # etcdctl logs retry warnings on stderr (e.g. "root user does not have root role" before it
  # grants it); keep them in the instance log and show them only when a step fails.
  local ctl=(etcdctl --endpoints="$url" --command-timeout=5s) lf step
  lf="$(log_file etcd-auth)"
  for step in "user add root:rootpw" "user add app:apppw" "role add rules-rw" \
    "role grant-permission rules-rw --prefix=true readwrite /rules/" \
    "user grant-role app rules-rw" "auth enable"; do
    # shellcheck disable=SC2086 # the steps are fixed word lists
    if ! "${ctl[@]}" $step >>"$lf" 2>&1; then
      log "etcd-auth: 'etcdctl $step' failed; last log lines:"
      tail -n 20 "$lf" >&2 || true
      exit 1
    fi
  done
  touch "$marker"
  log "etcd-auth: users root and app created, auth enabled"
}
stop_etcd_auth() { stop_instance etcd-auth etcd "$1"; }

# A throwaway CA and a server certificate for 127.0.0.1/localhost, made once per instance dir.
make_tls_certs() {
  local dir="$1"
  # Reuse them while they are far from their 30-day expiry.
  if [ -f "$dir/ca.pem" ] && [ -f "$dir/server.pem" ] &&
    [ -z "$(find "$dir/server.pem" -mtime +20 2>/dev/null)" ]; then
    return 0
  fi
  rm -rf "$dir"
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  mkdir -p "$dir"
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=sentinel-test-ca" \
      -keyout ca-key.pem -out ca.pem
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
      -keyout server-key.pem -out server.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 \
      -extfile server.ext -out server.pem
  ) >>"$(log_file etcd-tls)" 2>&1 || die "making the etcd-tls certificates failed; see $(log_file etcd-tls)"
}

start_etcd_tls() {
  local certs
  mkdir -p "$(instance_dir etcd-tls)"
  certs="$(instance_dir etcd-tls)/certs"
  make_tls_certs "$certs"
  start_etcd_instance etcd-tls "$1" https "$certs/ca.pem" \
    --cert-file "$certs/server.pem" --key-file "$certs/server-key.pem"
}
stop_etcd_tls() { stop_instance etcd-tls etcd "$1"; }

# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------

cmd_env() {
  printf 'export SENTINEL_ETCD_ENDPOINTS=http://127.0.0.1:%s\n' "$ETCD_MAIN_CLIENT_PORT"
  printf 'export SENTINEL_ETCD_AUTH_ENDPOINTS=http://127.0.0.1:%s\n' "$ETCD_AUTH_CLIENT_PORT"
  printf 'export SENTINEL_ETCD_FAULT_ENDPOINTS=http://127.0.0.1:%s\n' "$ETCD_FAULT_CLIENT_PORT"
  printf 'export SENTINEL_ETCD_TLS_ENDPOINTS=https://127.0.0.1:%s\n' "$ETCD_TLS_CLIENT_PORT"
  printf 'export SENTINEL_ETCD_TLS_CA=%s\n' "$(instance_dir etcd-tls)/certs/ca.pem"
}

cmd_status() {
  local name pid
  for name in "${INSTANCES[@]}"; do
    local binary="${name%%-*}"
    if pid="$(live_pid "$name" "$binary")"; then
      printf '%-12s running  pid %s\n' "$name" "$pid"
    else
      printf '%-12s stopped\n' "$name"
    fi
  done
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

main() {
  [ $# -ge 1 ] || usage
  local cmd="$1"
  shift
  case "$cmd" in
  env) cmd_env ;;
  status) cmd_status ;;
  start | stop)
    [ $# -ge 1 ] || usage
    local service="$1"
    shift
    local keep_data=0 arg
    for arg in "$@"; do
      case "$arg" in
      --keep-data) keep_data=1 ;;
      *) die "unknown option $arg" ;;
      esac
    done
    mkdir -p "$SERVICES_DIR"
    case "$service" in
    etcd)
      "${cmd}_etcd_main" "$keep_data"
      "${cmd}_etcd_auth" "$keep_data"
      "${cmd}_etcd_tls" "$keep_data"
      ;;
    etcd-main) "${cmd}_etcd_main" "$keep_data" ;;
    etcd-auth) "${cmd}_etcd_auth" "$keep_data" ;;
    etcd-fault) "${cmd}_etcd_fault" "$keep_data" ;;
    etcd-tls) "${cmd}_etcd_tls" "$keep_data" ;;
    *) die "unknown service $service (known: etcd, etcd-main, etcd-auth, etcd-tls, etcd-fault)" ;;
    esac
    ;;
  *) usage ;;
  esac
}

main "$@"
