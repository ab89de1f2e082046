#!/usr/bin/env bash
# The real Java client's benchmark (benches/README "Round 6"): the released Uniffle 0.9.2 client's
# own ShuffleWriteClient / ShuffleReadClient (tests/spark ClientBench, no Spark) against a release
# Spillway and, side by side in the same run, against the discard server (`spillway-bench
# discard`: decodes every request and drops it). The discard server stores nothing, so against it
# only the write phase runs: its figures are the transport's floor for the same client traffic.
#
#   bash benches/realclient.sh [--presets "64k 1m small spill"] [--planes "GRPC GRPC_NETTY"]
#                              [--scale N] [--servers "spillway discard"] [--keep] [--no-build]
#                              [--profile DIR [--profile-seconds 20]]
#                              [--spillway-bins "before=/path/spillway after=target/release/spillway"]
#                              [--apps-points "500 1000 2000" [--apps-tasks 20000]]
#
# Per run: server CPU-seconds (utime + stime of /proc/PID/stat, before and after the client) per
# GB moved (payload written + payload read back; 10^9 bytes), and peak RSS (VmHWM of
# /proc/PID/status; every run starts a fresh server). Prints a markdown table at the end; exit
# code 1 when any run failed to verify.
#
# --scale N        multiplies every preset's total (default 1: about 3 minutes on 2 cores)
# --spillway-bins  several Spillway builds side by side in one run, labelled in the table
#                  (default: target/release/spillway as "spillway")
# --profile DIR    for each Spillway run, a CPU flamegraph of the server over the first N seconds
#                  of the client's run from its own pprof endpoint (/debug/pprof/flamegraph;
#                  loopback passes the admin guard): DIR/realclient-<preset>-<plane>-<build>.svg;
#                  with perf installed also the server's top symbols, kernel included, over the
#                  whole client run (.perf.txt), and its flamegraph (.perf.svg, drawn by
#                  benches/perf_flamegraph.py). Profiled runs carry the profilers' own cost:
#                  take figures from runs without --profile.
# --apps-points    instead of the presets: latency against concurrent apps (benches/README
#                  "Send latency against concurrent apps"). Per point N, a fresh Spillway (1 GiB,
#                  gRPC) and ClientBench --apps N: N apps, each its own ShuffleWriteClient, app id
#                  and 4-partition shuffle; --apps-tasks map tasks (default 20000, as the load
#                  generator's curve) of one 4 KiB block per partition, round-robin over the
#                  apps, 32 at once; then getShuffleResult of every app's partitions (checked).
#                  Prints the client's p50/p99/p999 of sendShuffleData (requireBuffer + send,
#                  as the client sees it), reportShuffleResult and getShuffleResult, and the
#                  server's own p99 of the four RPCs (executionTimeUs of its RPC audit log).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PRESETS="64k 1m small spill"
PLANES="GRPC GRPC_NETTY"
SERVERS="spillway discard"
SCALE=1
KEEP=0
BUILD=1
PROFILE_DIR=""
PROFILE_SECONDS=20
SPILLWAY_BINS="spillway=target/release/spillway"
APPS_POINTS=""
APPS_TASKS=20000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --presets) PRESETS=$2; shift ;;
    --planes) PLANES=$2; shift ;;
    --servers) SERVERS=$2; shift ;;
    --scale) SCALE=$2; shift ;;
    --keep) KEEP=1 ;;
    --no-build) BUILD=0 ;;
    --profile) PROFILE_DIR=$2; shift ;;
    --profile-seconds) PROFILE_SECONDS=$2; shift ;;
    --spillway-bins) SPILLWAY_BINS=$2; shift ;;
    --apps-points) APPS_POINTS=$2; shift ;;
    --apps-tasks) APPS_TASKS=$2; shift ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "realclient.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

VER=0.9.2
CLIENT="$ROOT/tests/spark/target/uniffle-$VER"
CLASSES="$ROOT/target/realclient/classes"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/spillway-realclient.XXXXXX")
SERVER_PID=""
cleanup() {
  if [[ -n $SERVER_PID ]]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ $KEEP == 1 ]]; then echo "work dir kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ---- builds
[[ $BUILD == 0 ]] || cargo build --release --locked --bin spillway --bin spillway-bench
if [[ ! -d $CLIENT/deps ]]; then
  # The Spark harness's Maven project brings the released client jars (offline first).
  log "building the client jars of tests/spark (Uniffle $VER)"
  mvn -B -q -f tests/spark/pom.xml package -Duniffle.version=$VER -Dbuild.dir="$CLIENT" -o \
    || mvn -B -q -f tests/spark/pom.xml package -Duniffle.version=$VER -Dbuild.dir="$CLIENT"
fi
mkdir -p "$CLASSES"
javac --release 17 -d "$CLASSES" -cp "$CLIENT/classes:$CLIENT/deps/*" \
  tests/spark/src/main/java/io/spillway/sparktest/ClientBench.java
CP="$CLASSES:$CLIENT/classes:$CLIENT/deps/*"
# The 0.9.x client's shaded Netty fails reads on Java 17 without noUnsafe (apache/uniffle#2082).
JAVA_OPTS=(-Xmx3g -Dorg.apache.uniffle.shaded.io.netty.noUnsafe=true
  --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED)

# ---- presets: "name|server capacity|ClientBench options" (totals in MiB, scaled below)
preset() {
  case "$1" in
    # The load generator's presets (benches/loadgen.sh): 16 maps, 16 partitions, 8 at once.
    64k) echo "1G|--block-size 64k --maps 16 --partitions 16 --concurrency 8 --total-mib 512" ;;
    1m) echo "1G|--block-size 1m --maps 16 --partitions 16 --concurrency 8 --total-mib 512" ;;
    # Many small blocks from many tasks at once (the real client's pattern the issue names).
    small) echo "1G|--block-size 4k-16k --maps 64 --partitions 64 --concurrency 32 --total-mib 256" ;;
    # More than the memory capacity: spills while the writes run, reads from files and memory.
    spill) echo "256M|--block-size 256k --maps 16 --partitions 16 --concurrency 8 --total-mib 1024" ;;
    *) echo "realclient.sh: unknown preset $1" >&2; return 1 ;;
  esac
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_port() {
  local port=$1 i
  for ((i = 0; i < 300; i++)); do
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
HZ=$(getconf CLK_TCK)

start_server() {
  local kind=$1 cap=$2 dir=$3
  GRPC_PORT=$(free_port)
  NETTY_PORT=$(free_port)
  HTTP_PORT=$(free_port)
  mkdir -p "$dir/data"
  if [[ $kind != discard ]]; then
    cat >"$dir/config.toml" <<EOF
store_type = "MEMORY_LOCALFILE"
grpc_port = $GRPC_PORT
netty_port = $NETTY_PORT
bind_ip = "127.0.0.1"
worker_ip = "127.0.0.1"
[memory_store]
capacity = "$cap"
[localfile_store]
data_paths = ["$dir/data"]
# The host disk's fill level is not under test.
disk_high_watermark = 1.0
disk_low_watermark = 0.99
[metrics]
http_port = $HTTP_PORT
[audit]
rpc_log_path = "$dir/rpc_audit.log"
[coordinator]
enabled = false
EOF
    RUST_LOG=${SPILLWAY_LOG:-warn} "${BIN[$kind]}" --config "$dir/config.toml" \
      >"$dir/server.log" 2>&1 &
  else
    target/release/spillway-bench discard --grpc-port "$GRPC_PORT" --netty-port "$NETTY_PORT" \
      >"$dir/server.log" 2>&1 &
  fi
  SERVER_PID=$!
  wait_port "$GRPC_PORT" || { log "$kind did not start; $dir/server.log:"; tail -5 "$dir/server.log" >&2; return 1; }
}

stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

field() { { grep -o "$1=[0-9.]*" <<<"$2" || true; } | head -1 | cut -d= -f2; }

# Server kinds of a run: each Spillway build by its label, then the discard server.
declare -A BIN
KINDS=()
for k in $SERVERS; do
  if [[ $k == spillway ]]; then
    for b in $SPILLWAY_BINS; do
      BIN[${b%%=*}]=${b#*=}
      KINDS+=("${b%%=*}")
    done
  else
    KINDS+=("$k")
  fi
done

# ---- latency against concurrent apps (--apps-points)
# The server's own execution time of RPC $1 at quantile $2 (nearest rank), in ms: its RPC
# audit log's executionTimeUs, one line per call.
server_q() {
  { grep -P "cmd=$1\t" "$3" || true; } | grep -o 'executionTimeUs=[0-9]*' | cut -d= -f2 | sort -n \
    | awk -v q="$2" '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
        i = int(q * NR); if (i < q * NR) i++; if (i < 1) i = 1; printf "%.3f", v[i] / 1000 }'
}
lat() { { grep "^LATENCY op=$1 " "$2" || true; } | grep -o "$3=[0-9.]*" | cut -d= -f2; }
if [[ -n $APPS_POINTS ]]; then
  label=${SPILLWAY_BINS%% *}
  BIN[${label%%=*}]=${label#*=}
  ROWS=()
  FAILED=0
  for apps in $APPS_POINTS; do
    dir="$WORK/apps-$apps"
    mkdir -p "$dir"
    start_server "${label%%=*}" 1G "$dir"
    log "apps $apps: ClientBench --apps $apps --maps $APPS_TASKS (server pid $SERVER_PID, load $(cut -d' ' -f1-3 /proc/loadavg))"
    c0=$(cpu_ticks "$SERVER_PID")
    rc=0
    timeout -k 10 900 java "${JAVA_OPTS[@]}" -cp "$CP" io.spillway.sparktest.ClientBench \
      --grpc-port "$GRPC_PORT" --netty-port "$NETTY_PORT" --client-type GRPC --apps "$apps" \
      --maps "$APPS_TASKS" --partitions 4 --block-size 4k --total "$((APPS_TASKS * 16))k" \
      --concurrency 32 --read results --label "apps-$apps" >"$dir/client.out" 2>"$dir/client.log" || rc=$?
    c1=$(cpu_ticks "$SERVER_PID")
    stop_server
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    result=$(grep '^RESULT' "$dir/client.out" || true)
    if [[ $rc -ne 0 || -z $result ]]; then
      FAILED=$((FAILED + 1))
      log "FAILED (exit $rc): $(grep -m1 '^FAIL' "$dir/client.out" || tail -1 "$dir/client.log")"
      ROWS+=("| $apps | FAILED |")
      KEEP=1
      continue
    fi
    ws=$(field write_s "$result")
    row="| $apps"
    for op in sendShuffleData reportShuffleResult getShuffleResult; do
      for q in p50_ms p99_ms p999_ms; do row+=" | $(lat "$op" "$dir/client.out" "$q")"; done
    done
    for op in requireBuffer sendShuffleData reportShuffleResult getShuffleResult; do
      row+=" | $(server_q "$op" 0.99 "$dir/rpc_audit.log")"
    done
    row+=" | $(awk -v t="$APPS_TASKS" -v s="$ws" 'BEGIN { printf "%.0f", t / s }')"
    row+=" | $(awk -v c="$((c1 - c0))" -v hz="$HZ" -v t="$APPS_TASKS" 'BEGIN { printf "%.0f", c / hz / t * 1e6 }')"
    row+=" | $(field register_s "$result") | $load |"
    ROWS+=("$row")
    log "$row"
  done
  echo
  echo "Uniffle $VER client (ClientBench --apps), $APPS_TASKS tasks of 4 x 4 KiB, 32 at once, capacity 1 GiB, gRPC."
  echo
  echo "| apps | send p50 ms | send p99 ms | send p999 ms | report p50 ms | report p99 ms | report p999 ms | getShuffleResult p50 ms | getShuffleResult p99 ms | getShuffleResult p999 ms | server requireBuffer p99 ms | server send p99 ms | server report p99 ms | server getShuffleResult p99 ms | tasks/s | server CPU µs per task | register all s | load after |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
  printf '%s\n' "${ROWS[@]}"
  [[ $FAILED -eq 0 ]] || { echo "$FAILED run(s) failed; logs in $WORK"; exit 1; }
  exit 0
fi

ROWS=()
FAILED=0
n=0
for preset_name in $PRESETS; do
  spec=$(preset "$preset_name")
  cap=${spec%%|*}
  args=${spec#*|}
  mib=$(grep -o -- '--total-mib [0-9]*' <<<"$args" | awk '{ print $2 }')
  total="$(awk -v m="$mib" -v s="$SCALE" 'BEGIN { printf "%d", m * s }')m"
  args="${args/--total-mib $mib/--total $total}"
  for plane in $PLANES; do
    for kind in "${KINDS[@]}"; do
      n=$((n + 1))
      dir="$WORK/$n-$preset_name-$plane-$kind"
      mkdir -p "$dir"
      start_server "$kind" "$cap" "$dir"
      read_opt=true
      [[ $kind == discard ]] && read_opt=false
      log "$preset_name $plane $kind: ClientBench $args (server pid $SERVER_PID)"
      c0=$(cpu_ticks "$SERVER_PID")
      prof_pid=""
      if [[ -n $PROFILE_DIR && $kind != discard ]]; then
        mkdir -p "$PROFILE_DIR"
        curl -sf -o "$PROFILE_DIR/realclient-$preset_name-${plane,,}-$kind.svg" \
          "http://127.0.0.1:$HTTP_PORT/debug/pprof/flamegraph?seconds=$PROFILE_SECONDS&frequency=997" &
        prof_pid=$!
        if command -v perf >/dev/null; then
          # The kernel's share too (the pprof flamegraph sees user space only): perf's own
          # sampling of the server, reported as text next to the SVG.
          perf record -q -F 299 --call-graph dwarf,16384 -o "$dir/perf.data" -p "$SERVER_PID" 2>"$dir/perf.log" &
          perf_pid=$!
        fi
      fi
      rc=0
      # shellcheck disable=SC2086
      timeout -k 10 900 java "${JAVA_OPTS[@]}" -cp "$CP" io.spillway.sparktest.ClientBench \
        --grpc-port "$GRPC_PORT" --netty-port "$NETTY_PORT" --client-type "$plane" \
        --read "$read_opt" $args >"$dir/client.out" 2>"$dir/client.log" || rc=$?
      c1=$(cpu_ticks "$SERVER_PID")
      if [[ -n $prof_pid ]]; then
        wait "$prof_pid" || log "profile of $preset_name $plane failed"
        if [[ -n ${perf_pid:-} ]]; then
          kill -INT "$perf_pid" 2>/dev/null || true
          wait "$perf_pid" 2>/dev/null || true
          perf report -i "$dir/perf.data" --no-children --sort dso,sym --stdio 2>/dev/null \
            | grep -E '^ +[0-9]' | head -n 60 >"$PROFILE_DIR/realclient-$preset_name-${plane,,}-$kind.perf.txt" || true
          perf script -i "$dir/perf.data" 2>/dev/null \
            | python3 benches/perf_flamegraph.py "$preset_name $plane $kind: Spillway server" \
              >"$PROFILE_DIR/realclient-$preset_name-${plane,,}-$kind.perf.svg" || true
          perf_pid=""
        fi
      fi
      hwm=$(hwm_kib "$SERVER_PID")
      stop_server
      result=$(grep '^RESULT' "$dir/client.out" || true)
      if [[ $rc -ne 0 || -z $result ]]; then
        FAILED=$((FAILED + 1))
        log "FAILED (exit $rc): $(grep -m1 '^FAIL' "$dir/client.out" || tail -1 "$dir/client.log")"
        ROWS+=("| $preset_name | $plane | $kind | FAILED | | | | |")
        KEEP=1
        continue
      fi
      wb=$(field write_bytes "$result"); ws=$(field write_s "$result")
      rb=$(field read_bytes "$result"); rs=$(field read_s "$result")
      row=$(awk -v wb="$wb" -v ws="$ws" -v rb="${rb:-0}" -v rs="${rs:-0}" -v c="$((c1 - c0))" \
        -v hz="$HZ" -v hwm="$hwm" -v p="$preset_name" -v pl="$plane" -v k="$kind" -v cap="$cap" 'BEGIN {
          gb = (wb + rb) / 1e9; cpu = c / hz
          r = (rs > 0) ? sprintf("%.3f", rb / rs / 1e9) : "-"
          printf "| %s | %s | %s | %.3f | %s | %.2f | %.3f | %.0f |", p, pl, k, wb / ws / 1e9, r, cpu, cpu / gb, hwm / 1024
        }')
      ROWS+=("$row")
      log "$row"
    done
  done
done

echo
echo "Uniffle $VER client (ClientBench), scale $SCALE; discard: write phase only (it stores nothing)."
echo
echo "| Preset | Plane | Server | Write GB/s | Read GB/s | Server CPU-s | CPU-s per GB moved | Peak RSS (MiB) |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
[[ $FAILED -eq 0 ]] || { echo "$FAILED run(s) failed; logs in $WORK"; exit 1; }
