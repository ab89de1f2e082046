#!/usr/bin/env bash
# Builds the MiniHdfs launcher (tests/hdfs) into target/classes + target/deps, the classpath the
# Rust tests and the Spark harness start it with. Idempotent and quick when nothing changed: a
# stamp of the pom and sources skips Maven; Maven tries offline (~/.m2) first, then Maven Central.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE"
STAMP=target/.installed
want=$(cat pom.xml $(find src -type f | sort) | sha256sum | cut -d' ' -f1)
if [[ -f $STAMP && "$(cat "$STAMP")" == "$want" && -d target/deps && -d target/classes ]]; then
  exit 0
fi
if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  echo "tests/hdfs/install.sh: installing Java 17 and Maven" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven
fi
mvn -q -B -o package -DskipTests >/dev/null 2>&1 || mvn -q -B package -DskipTests
echo "$want" > "$STAMP"
