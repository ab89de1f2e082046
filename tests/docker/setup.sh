#!/usr/bin/env bash
# A Docker engine for tests/deploy.rs, which builds and runs the image of `spillway deploy
# dockerfile --prebuilt`. Idempotent, and quick once done: it installs dockerd (Debian's
# docker.io) and debootstrap when missing, starts dockerd on the default socket unless one answers
# there, and makes sure the runtime base image exists.
#
# debian:bookworm-slim comes from Docker Hub when it can be reached. Where it cannot (this
# project's machines reach package registries only), a stand-in is built locally from a
# debootstrap --variant=minbase bookworm tree and labelled org.spillway.stand-in=true.
# The test packages the binary the suite built, so the build stage's rust image is not needed
# (tests/deploy.rs checks that stage without Docker).
set -euo pipefail
cd "$(dirname "$0")/../.."

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}"
fi

if ! docker info >/dev/null 2>&1; then
  echo "== starting dockerd (log: /var/log/spillway-test-dockerd.log)"
  # No bridge and no iptables rules: the tests run containers with --network host, and the
  # machine's firewall is left as it is.
  setsid dockerd --iptables=false --bridge=none >/var/log/spillway-test-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { tail -20 /var/log/spillway-test-dockerd.log; exit 1; }
fi

runtime=debian:bookworm-slim

have() { docker image inspect "$1" >/dev/null 2>&1; }

if ! have "$runtime" && ! docker pull -q "$runtime" >/dev/null 2>&1; then
  echo "== building a stand-in for $runtime (debootstrap)"
  root=$(mktemp -d /var/tmp/spillway-bookworm.XXXXXX)
  # The Debian mirror this machine's apt already uses (its first deb822 or one-line source).
  mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [[ -n $mirror ]] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $mirror ]] || { echo "no Debian mirror in this machine's apt sources" >&2; exit 1; }
  debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'LABEL org.spillway.stand-in=true' \
    -c 'CMD ["bash"]' - "$runtime" >/dev/null
  rm -rf "$root"
fi

echo "== docker engine ready ($(docker version --format '{{.Server.Version}}')), base image: $runtime"
