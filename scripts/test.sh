#!/usr/bin/env bash
# The whole test suite, as CI runs it, on a fresh machine or a developer's:
#   1. installs (apt) and starts the real servers the integration tests need,
#   2. runs the quality gates (fmt, clippy, each feature alone via cargo-hack, docs) and every
#      test, doctests included,
#   3. stops the servers it started.
# Usage: scripts/test.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Pinned so every machine checks features with the same tool; bump it on purpose.
CARGO_HACK_VERSION=0.6.46

# A run from a clean clone gains nothing from incremental compilation (it wrote 7.7 GB under
# target/debug/incremental), and test binaries need only line tables for their backtraces: full
# debug info made target/debug 25 GB, and a CI machine with less free disk failed on it. A
# developer's first run of this script after a plain `cargo test` rebuilds once for these.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only

step() { printf '\n==> %s\n' "$*"; }

cleanup() {
  step "stopping test servers"
  scripts/services.sh stop etcd || true
  scripts/services.sh stop etcd-fault || true
  scripts/services.sh stop redis || true
  scripts/services.sh stop nacos || true
  scripts/services.sh stop nats || true
}
trap cleanup EXIT

step "starting test servers (installs etcd, protoc, Redis and nats-server, and builds rnacos, on a fresh machine)"
scripts/services.sh start etcd
scripts/services.sh start redis  # redis-flow (16384) included: the cluster-redis outage tests stop and kill it
scripts/services.sh start nacos
scripts/services.sh start nats
eval "$(scripts/services.sh env)"

step "installing headless Chromium and chromedriver (the console's browser tests)"
# Debian's packages: /usr/bin/chromium and /usr/bin/chromedriver; a test tool's own browser
# download cannot work here (no internet).
CONSOLE_BROWSER_PACKAGES=(chromium chromium-driver)
missing_browser=()
for pkg in "${CONSOLE_BROWSER_PACKAGES[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || missing_browser+=("$pkg")
done
if [ "${#missing_browser[@]}" -gt 0 ]; then
  sudo_if_needed=()
  [ "$(id -u)" -eq 0 ] || sudo_if_needed=(sudo)
  "${sudo_if_needed[@]}" apt-get update -qq
  "${sudo_if_needed[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing_browser[@]}"
fi

step "building the Java interop harness (Sentinel 1.8 from Maven Central, cached in ~/.m2)"
# needs openjdk-17-jdk-headless and maven; the differential test in the `tests` crate runs it
scripts/interop.sh build

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "cargo hack check --each-feature"
# A fresh machine has no cargo-hack, and an older or newer one may disagree with the pin.
if [ "$(cargo hack --version 2>/dev/null || true)" != "cargo-hack $CARGO_HACK_VERSION" ]; then
  cargo install cargo-hack --version "$CARGO_HACK_VERSION" --locked
fi
# Every feature of every crate must build on its own, not just in the default or
# --all-features sets that clippy sees. --no-dev-deps edits Cargo.toml and Cargo.lock while it
# runs and restores them after.
cargo hack check --each-feature --no-dev-deps --workspace

step "cargo test"
cargo test --workspace --no-fail-fast
cargo build -p examples --all-features --bin etcd --bin redis --bin nacos --bin nats --bin service --bin cluster --bin otel --bin transport --bin console
# the OpenTelemetry recipe: metrics and block span events reach OTel's exporters
cargo test -p examples --features otel --test otel --no-fail-fast
# the service in the Sentinel dashboard: its command center run as docs/dashboard.md runs it
# (sentinel-transport's own tests and the Java golden comparison run in `cargo test --workspace`)
cargo test -p examples --features transport --test transport --no-fail-fast
# the axum service run as the README runs it, from a rules file and from etcd
cargo test -p examples --features axum,etcd --test service --no-fail-fast
# the console in headless Chromium (installed above) against the console service with its
# rules in etcd-main; screenshots of each state in target/console-screenshots/
cargo test -p examples --features console --test console --no-fail-fast
# the cluster example: three processes share one 50 QPS limit on Redis (the cluster-redis
# multi-process tests themselves run in `cargo test --workspace`)
cargo test -p examples --features cluster --test cluster --no-fail-fast
# sentinel-tower's axum feature: the matched route names the resource (tests and doctests)
cargo test -p sentinel-tower --features axum --no-fail-fast
cargo test -p sentinel-datasource-etcd --features tls --no-fail-fast
# the Redis cluster and TLS tests and the NATS TLS test are behind features
cargo test -p sentinel-datasource-redis --all-features --no-fail-fast
cargo test -p sentinel-datasource-nats --all-features --no-fail-fast
cargo test -p sentinel-core --features metrics --test metrics
# YAML resources (sentinel-golang CRDs, OpenSergo) and the shipped JSON Schemas (also built by
# `cargo test --workspace` through sentinel-rules' features; run on their own here too)
cargo test -p sentinel-core --features yaml,schema --test kubernetes --test schemas

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "fuzzing the converters (fast path against general path, 30 s)"
# installs a nightly toolchain and cargo-fuzz (pinned in the script) on a fresh machine
scripts/fuzz.sh 30

step "all checks passed"
