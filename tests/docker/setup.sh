#!/usr/bin/env bash
# A Docker engine for tests/deploy.rs, which builds and runs the image of `spillway deploy
# dockerfile`. Idempotent, and quick once done: it installs dockerd (Debian's docker.io) and
# debootstrap when missing, starts dockerd on the default socket unless one answers there, and
# makes sure the Dockerfile's two base images exist.
#
# The base images come from Docker Hub when it can be reached. Where it cannot (this project's
# machines reach package registries only), they are built locally as stand-ins and labelled
# org.spillway.stand-in=true:
# - debian:bookworm-slim: a debootstrap --variant=minbase bookworm tree, imported;
# - rust:<channel>-slim-bookworm: that image plus gcc and libc6-dev (what the official slim image
#   carries) and the Rust toolchain pinned in rust-toolchain.toml, copied from this machine
#   with its CA bundle.
set -euo pipefail
cd "$(dirname "$0")/../.."

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
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

channel=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
runtime=debian:bookworm-slim
builder=rust:${channel}-slim-bookworm

have() { docker image inspect "$1" >/dev/null 2>&1; }

if ! have "$runtime" && ! docker pull -q "$runtime" >/dev/null 2>&1; then
  echo "== building a stand-in for $runtime (debootstrap)"
  root=$(mktemp -d /var/tmp/spillway-bookworm.XXXXXX)
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'LABEL org.spillway.stand-in=true' \
    -c 'CMD ["bash"]' - "$runtime" >/dev/null
  rm -rf "$root"
fi

if ! have "$builder" && ! docker pull -q "$builder" >/dev/null 2>&1; then
  echo "== building a stand-in for $builder (toolchain $(rustc --version))"
  ctx=$(mktemp -d /var/tmp/spillway-rust.XXXXXX)
  sysroot=$(rustc --print sysroot)
  mkdir -p "$ctx/rust"
  cp -a "$sysroot/bin" "$sysroot/lib" "$ctx/rust/"
  # The CAs this machine trusts, so that cargo inside reaches crates.io the way it does here.
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
  cat >"$ctx/Dockerfile" <<EOF
FROM $runtime
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY rust /usr/local/rust
ENV CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL org.spillway.stand-in=true
EOF
  DOCKER_BUILDKIT=0 docker build -q --network host -t "$builder" "$ctx" >/dev/null
  rm -rf "$ctx"
fi
echo "== docker engine ready ($(docker version --format '{{.Server.Version}}')), base images: $runtime $builder"
