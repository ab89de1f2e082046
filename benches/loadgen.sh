#!/usr/bin/env bash
# The load-generator runs behind the results table in benches/README.md. Each run starts its
# own spillway and discard server (child processes) and measures the ceilings in the same run.
# Usage: bash benches/loadgen.sh [extra spillway-bench options]   (about 5 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin spillway --bin spillway-bench
B=target/release/spillway-bench
run() { echo "== spillway-bench run $*"; "$B" run "$@"; echo; }

# Throughput, CPU and ceilings: 64 KiB and 1 MiB blocks over both planes (second round reported).
for t in grpc netty; do
  for bs in 64K 1M; do
    run --transport "$t" --block-size "$bs" --total 512M --maps 16 --partitions 16 --rounds 2 "$@"
  done
done
# Memory kept full: 2 GiB through 512 MiB of memory (spills during the writes), peak RSS.
for t in grpc netty; do
  run --transport "$t" --total 2G --capacity 512M --finish false --no-ceilings "$@"
done
# 2,000 concurrent writers far over a 64 MiB capacity, against 8 writers on the same load.
for c in 8 2000; do
  run --transport grpc --maps 2000 --concurrency "$c" --partitions 8 --block-size 64K \
    --total 1G --capacity 64M --finish false --no-ceilings "$@"
done
