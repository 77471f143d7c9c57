#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ (cargo-fuzz on a nightly toolchain) for a bounded time.
# Usage: scripts/fuzz.sh [SECONDS]        (default 30 per target; CI runs the default)
# A failure leaves the input that made it in fuzz/artifacts/<target>/; replay it with
#   cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT/fuzz"

SECONDS_PER_TARGET="${1:-30}"
# Pinned so every machine fuzzes with the same tool; bump it on purpose.
CARGO_FUZZ_VERSION=0.13.2

# libFuzzer's instrumentation needs a nightly compiler; the product builds on stable.
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if [ "$(cargo fuzz --version 2>/dev/null || true)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

for target in $(cargo +nightly fuzz list); do
  # The corpus starts from the real payloads the converters' tests read; new inputs that
  # libFuzzer finds go to fuzz/corpus/<target>/ (not committed).
  mkdir -p "corpus/$target"
  cargo +nightly fuzz run "$target" "corpus/$target" "$ROOT/sentinel-core/tests/data/rules" -- \
    -max_total_time="$SECONDS_PER_TARGET" -max_len=4096
done
