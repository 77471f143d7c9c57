#!/usr/bin/env bash
# Builds the Java side of the token server's interop tests (token-server/tests/):
# Sentinel 1.8.9's cluster token client and token server from Maven Central.
#   interop/token-server/build.sh   fetch the Maven dependencies once (into ~/.m2), then
#                                   compile offline and write target/classpath.txt
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "interop/token-server: '$tool' is missing: apt-get install openjdk-17-jdk-headless maven" >&2
    exit 1
  fi
done

cd "$HERE"
build() {
  mvn -B -q -o compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt
}
# Offline first; only a machine without the artifacts yet fetches them (once).
if ! build >/dev/null 2>&1; then
  mvn -B -q dependency:go-offline
  build
fi
echo "interop/token-server: built (classes in target/classes, classpath in target/classpath.txt)"
