#!/usr/bin/env bash
# Builds the Java side of the interop tests (interop/: Sentinel 1.8 as the oracle).
#   scripts/interop.sh build   fetch the Maven dependencies once (into ~/.m2), then compile
#                              offline and write interop/target/classpath.txt
#                              and build interop/go (sentinel-golang, from the Go module proxy);
#                              the `transport` profile's classpath (Sentinel's HTTP command
#                              center too) goes to interop/target/classpath-transport.txt
# The Rust tests that use them: cargo test -p sentinel-tests --test differential --test stores
# --test golang --test transport_java
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INTEROP="$ROOT/interop"

need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "interop: '$1' is missing: apt-get install $2" >&2
    exit 1
  fi
}

case "${1:-}" in
  build)
    need java openjdk-17-jdk-headless
    need mvn maven
    need go golang-go
    cd "$INTEROP"
    # Offline first; only a machine without the artifacts yet fetches them (once) from Maven
    # Central.
    build() {
      mvn -B -q -o compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt &&
        mvn -B -q -o -Ptransport dependency:build-classpath \
          -Dmdep.outputFile=target/classpath-transport.txt
    }
    if ! build >/dev/null 2>&1; then
      mvn -B -q dependency:go-offline
      mvn -B -q -Ptransport dependency:go-offline
      build
    fi
    (cd "$INTEROP/go" && go build -o "$ROOT/target/interop-go" .)
    ;;
  *)
    echo "usage: scripts/interop.sh build" >&2
    exit 2
    ;;
esac
