#!/usr/bin/env bash
# Installs the S3 server the object-storage tests start: moto's server (moto[server], PyPI) in a
# virtualenv at tests/s3/target/venv. With --maven also Hadoop's s3a jars (pom.xml) into
# target/s3a-deps for the Spark harness. Idempotent and quick when installed (a version check, a
# stamp of the pom); concurrent callers (parallel test binaries) take turns on a lock.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=$HERE/target/venv
MOTO=5.2.5
mkdir -p "$HERE/target"
exec 9>"$HERE/target/.install.lock"
flock 9
# S3Proxy (Maven Central, org.gaul:s3proxy, one jar with its dependencies): the S3 server
# that checks request signatures, which moto does not (a wrong secret passes there). The
# configuration-mistake tests start it (tests/support/src/s3proxy.rs), as does the Spark
# harness's refusal suite.
S3PROXY=2.6.0
if [[ ${1:-} == --maven || ${1:-} == --s3proxy ]]; then
  jar=$HERE/target/s3proxy-$S3PROXY.jar
  if [[ ! -s $jar ]]; then
    art=org.gaul:s3proxy:$S3PROXY:jar:jar-with-dependencies
    mvn -q -B -o dependency:copy -Dartifact=$art -DoutputDirectory="$HERE/target" >/dev/null 2>&1 \
      || mvn -q -B dependency:copy -Dartifact=$art -DoutputDirectory="$HERE/target"
    mv "$HERE/target/s3proxy-$S3PROXY-jar-with-dependencies.jar" "$jar"
    echo "tests/s3/install.sh: S3Proxy $S3PROXY installed at $jar" >&2
  fi
  [[ ${1:-} == --s3proxy ]] && exit 0
fi
if [[ ${1:-} == --maven ]]; then
  stamp=$HERE/target/.s3a-deps
  want=$(sha256sum "$HERE/pom.xml" | cut -d' ' -f1)
  if [[ ! -f $stamp || "$(cat "$stamp")" != "$want" || ! -d $HERE/target/s3a-deps ]]; then
    (cd "$HERE" && { mvn -q -B -o package >/dev/null 2>&1 || mvn -q -B package; })
    echo "$want" >"$stamp"
  fi
fi
if "$VENV/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO')" 2>/dev/null \
  && [[ -x $VENV/bin/moto_server ]]; then
  exit 0
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "tests/s3/install.sh: installing python3-venv" >&2
  # The lock timeout: run-all.sh installs Debian packages in a chain beside this one.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq python3-venv
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "moto[server]==$MOTO"
echo "tests/s3/install.sh: moto $MOTO installed in $VENV" >&2
