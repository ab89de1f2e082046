#!/usr/bin/env bash
# TPC-H and TPC-DS end to end (benches/README "Round 8"): Spark 3.5 in local mode on this
# machine, the released Uniffle 0.9.2 client, a release Spillway; every query on Spark's own sort
# shuffle (vanilla, the one-machine reference) and through Spillway on both planes, in turn, in
# one run. The harness is the Spark harness's TPC cells (tests/spark/tpc.sh): the same data, the
# same result checks (every query's rows equal vanilla's), at benchmark scale.
#
#   bash benches/tpc.sh [--tpc "tpch:1 tpcds:1"] [--rounds N] [--memory 2G] [--single-spill 128M]
#                       [--out DIR] [--pretouch GIB] [--no-build]
#
# --tpc          suites and scale factors (tests/spark/run.sh --tpc; default TPC-H sf1, TPC-DS sf1)
# --rounds N     every cell N times, interleaved (vanilla, gRPC, Netty, vanilla, ...): the noise band
# --memory       the server's memory store (default 2G: nothing spills at sf1, as a production
#                server sized for its load; --memory 256M --single-spill 1M makes it read files)
# --pretouch G   turn off the VM's free-page reporting and touch G GiB once before the run
#                (benches/README round 4; needs root); default 14
# --out DIR      where the tables go (default benches/tpc/); the harness's work dir (logs, rows,
#                audit logs) is kept under target/tpc-work/
#
# Prints, and writes to DIR/tpc-<date>.md: per suite and mode, queries passed, wall time and its
# ratio to vanilla, Spark's CPU, the server's CPU and its share of the run's CPU, the server's peak
# RSS; the per-query times (the slowest ratios first); and the server-side latency of every RPC
# (from its RPC audit log) per plane.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

TPC_SPEC="tpch:1 tpcds:1"
ROUNDS=1
MEMORY=2G
SINGLE_SPILL=128M
OUT=$ROOT/benches/tpc
PRETOUCH=14
BUILD=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tpc) TPC_SPEC=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --memory) MEMORY=$2; shift ;;
    --single-spill) SINGLE_SPILL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --pretouch) PRETOUCH=$2; shift ;;
    --no-build) BUILD=0 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "tpc.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

WORKDIR=$ROOT/target/tpc-work
mkdir -p "$OUT" "$WORKDIR"
if [[ $BUILD == 1 ]]; then
  cargo build --locked --release --bin spillway
fi
if [[ $PRETOUCH -gt 0 && -w /sys/module/page_reporting/parameters/page_reporting_order ]]; then
  echo 11 >/sys/module/page_reporting/parameters/page_reporting_order
  dd if=/dev/zero of=/dev/shm/spillway-pretouch bs=1M count=$((PRETOUCH * 1024)) status=none
  rm -f /dev/shm/spillway-pretouch
fi

stamp=$(date -u +%Y%m%d-%H%M)
commit=$(git rev-parse --short HEAD)
log="$WORKDIR/tpc-$stamp.log"
rc=0
TMPDIR="$WORKDIR" SPILLWAY_BIN="$ROOT/target/release/spillway" SPILLWAY_BIN_PREBUILT=1 \
  SPARK_E2E_TPC="$TPC_SPEC" SPARK_E2E_TPC_ROUNDS=$ROUNDS SPARK_E2E_TPC_MEMORY=$MEMORY \
  SPARK_E2E_TPC_SINGLE_SPILL=$SINGLE_SPILL SPARK_E2E_TPC_TIMEOUT=7200 SPARK_E2E_TPC_CONF="" \
  SPARK_E2E_TPC_REQUIRE_LOCAL=0 SPARK_E2E_FULL_JIT=1 \
  bash tests/spark/run.sh --versions 0.9.2 --tpc-only --keep 2>&1 | tee "$log" || rc=$?
work=$(grep -o 'logs and configs kept in .*' "$log" | tail -n 1 | sed 's/.* in //')
[[ -n $work && -f $work/tpc-summary.tsv ]] || { echo "tpc.sh: no summary (log $log)" >&2; exit 1; }

python3 - "$work" "$OUT/tpc-$stamp.md" "$TPC_SPEC" "$MEMORY" "$SINGLE_SPILL" "$commit" <<'EOF'
import csv, glob, os, re, statistics, sys
from collections import defaultdict

work, out, spec, memory, spill, commit = sys.argv[1:7]
rows = list(csv.DictReader(open(os.path.join(work, "tpc-summary.tsv")), delimiter="\t"))
lines = [f"TPC run of {commit}: `{spec}`, server memory {memory}, single-buffer spill {spill}; "
         f"work dir {work}", ""]

# Per suite and mode: medians over the rounds, ratios against vanilla's median.
by = defaultdict(list)
for r in rows:
    by[(r["suite"], r["scale"], r["mode"])].append(r)
lines += ["| suite | mode | rounds | queries passed | wall s (median) | vs vanilla | wall s per round | "
          "Spark CPU s | server CPU s | server share of CPU | server peak RSS MiB |",
          "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
for (suite, scale, mode), rs in by.items():
    wall = statistics.median(float(r["wall_s"]) for r in rs)
    van = statistics.median(float(r["wall_s"]) for r in by[(suite, scale, "vanilla")])
    def med(k):
        v = [float(r[k]) for r in rs if r[k] not in ("-", "")]
        return f"{statistics.median(v):.1f}" if v else "-"
    share = [float(r["server_share_%"]) for r in rs if r["server_share_%"] not in ("-", "")]
    hwm = [int(r["server_hwm_kib"]) for r in rs if r["server_hwm_kib"] not in ("-", "")]
    lines.append(
        f"| {suite} sf{scale} | {mode} | {len(rs)} | {rs[-1]['passed']} | {wall:.1f} | "
        f"{wall / van:.3f} | {' · '.join(r['wall_s'] for r in rs)} | {med('spark_cpu_s')} | "
        f"{med('server_cpu_s')} | {(f'{statistics.median(share):.2f} %') if share else '-'} | "
        f"{(max(hwm) / 1024):.0f} |" if hwm else
        f"| {suite} sf{scale} | {mode} | {len(rs)} | {rs[-1]['passed']} | {wall:.1f} | "
        f"{wall / van:.3f} | {' · '.join(r['wall_s'] for r in rs)} | {med('spark_cpu_s')} | - | - | - |")

# Per query: median time per mode; the slowest ratios first.
times = defaultdict(lambda: defaultdict(list))
for f in glob.glob(os.path.join(work, "tpc-*.out")):
    for line in open(f):
        m = re.match(r"TIME tpc-(\w+)-(vanilla|GRPC_NETTY|GRPC)-\d+ (\w+) (\w+) (\d+) (\d+)", line)
        if m:
            times[(m.group(3), m.group(4))][m.group(2)].append(int(m.group(5)))
modes = [m for m in ("GRPC", "GRPC_NETTY") if any(m in t for t in times.values())]
table = []
for (suite, q), t in times.items():
    if "vanilla" not in t:
        continue
    v = statistics.median(t["vanilla"])
    table.append((suite, q, v, {m: statistics.median(t[m]) for m in modes if m in t}))
table.sort(key=lambda x: -max((x[3][m] / max(x[2], 1) for m in x[3]), default=0))
lines += ["", "Per query, median ms over the rounds (slowest ratio against vanilla first):", "",
          "| suite | query | vanilla ms | " + " | ".join(f"{m} ms | {m} / vanilla" for m in modes) + " |",
          "|---|---|---:|" + "---:|---:|" * len(modes)]
for suite, q, v, ms in table:
    cells = " | ".join(f"{ms[m]:.0f} | {ms[m] / max(v, 1):.2f}" if m in ms else "- | -" for m in modes)
    lines.append(f"| {suite} | {q} | {v:.0f} | {cells} |")

# Server-side RPC latency per suite, plane and round (from the server's RPC audit log).
for f in sorted(glob.glob(os.path.join(work, "tpc-rpc-*.tsv"))):
    name = os.path.basename(f)[len("tpc-rpc-"):-len(".tsv")]
    rs = list(csv.reader(open(f), delimiter="\t"))
    lines += ["", f"RPC latency, server side ({name}):", "",
              "| " + " | ".join(rs[0]) + " |", "|---|" + "---:|" * (len(rs[0]) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rs[1:]]
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
print(f"\nwritten to {out}")
EOF
exit $rc
