#!/usr/bin/env bash
# The RPC audit log's cost at full load: the same release server with [audit] rpc_log on and
# off, runs alternated, many small requests (4 KiB blocks in 64 KiB sends: the audit is per RPC).
# Build first: cargo build --release --bin spillway --bin spillway-bench
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release
OUT=${OUT:-$(mktemp -d)}
run() { # $1 = on|off, $2 = round
  local dir=$OUT/$1-$2; rm -rf "$dir"; mkdir -p "$dir/data"
  local port=$((21000 + RANDOM % 2000)) http=$((23000 + RANDOM % 2000))
  cat > "$dir/c.toml" <<TOML
store_type = "MEMORY_LOCALFILE"
grpc_port = $port
netty_port = -1
bind_ip = "127.0.0.1"
worker_ip = "127.0.0.1"
[memory_store]
capacity = "2G"
[localfile_store]
data_paths = ["$dir/data"]
sync_on_write = true
[metrics]
http_port = $http
[coordinator]
enabled = false
[audit]
rpc_log = $( [ "$1" = on ] && echo true || echo false )
rpc_log_path = "$dir/audit.log"
TOML
  RUST_LOG=warn $BIN/spillway --config "$dir/c.toml" & local pid=$!
  for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  $BIN/spillway-bench run --addr 127.0.0.1:$port --server-pid $pid --data-dir "$dir/data" --no-ceilings \
     --total 512M --block-size 4K --request-size 64K --maps 32 --partitions 16 --concurrency 8 > "$dir/report.txt" 2>&1 || echo "bench failed $1 $2"
  kill $pid; wait $pid 2>/dev/null || true
  echo "== audit $1 round $2: audit lines $(cat "$dir/audit.log" 2>/dev/null | wc -l)"
  grep -E "^write|server CPU|verification" "$dir/report.txt"
}
for r in 1 2 3; do run on $r; run off $r; done
