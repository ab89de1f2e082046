# TPC-H and TPC-DS cells of the Spark harness; sourced by run.sh, whose helpers they use.
#
# Per client line in TPC_LINES (run.sh sets it: the first line, plus the Spark 4 line when one is
# built), the cells below run on that line's Spark, vanilla included; the tables are shared.
#
# Per suite in TPC (entries "suite:scale[:q1,q2,...]"): the tables are generated once into
# tests/spark/target/tpc-data/SUITE-sfSCALE (TpcGen writes text in its own JVM, TpcQueries turns
# it into Parquet), the queries run on Spark's own shuffle (the baseline rows), then per client
# type through one Spillway server whose memory store is TPC_MEMORY with single buffers spilled
# from TPC_SINGLE_SPILL up, so reads come from local files as well as memory. Every query's rows
# must equal the baseline's (TpcQueries: multisets, doubles within 1e-6, LIMIT ties).
#
# Per cell it records, in $WORK/tpc-summary.tsv: wall time, Spark's JVM CPU, the server's CPU
# (utime + stime of /proc/PID/stat over the run) and its share of both, the server's peak RSS
# (VmHWM), and per RPC the server-side latency distribution from its RPC audit log
# ($WORK/tpc-rpc-*.tsv, tests/spark/rpc_latency.py). TPC_ROUNDS > 1 repeats every cell, vanilla
# included, in turn (vanilla, then each client type), for a noise band.

TPC=${SPARK_E2E_TPC:-"tpch:0.01:q3,q5,q7,q9,q13,q18,q21,q22 tpcds:0.01:q19,q25,q42,q64,q95"}
TPC_MEMORY=${SPARK_E2E_TPC_MEMORY:-16M}
TPC_SINGLE_SPILL=${SPARK_E2E_TPC_SINGLE_SPILL:-4K}
TPC_ROUNDS=${SPARK_E2E_TPC_ROUNDS:-1}
# 1: a cell fails unless some reads came from local files (the smoke's small store must spill).
TPC_REQUIRE_LOCAL=${SPARK_E2E_TPC_REQUIRE_LOCAL:-1}
TPC_TIMEOUT=${SPARK_E2E_TPC_TIMEOUT:-2400}
TPC_CORES=${SPARK_E2E_TPC_CORES:-2}
# Spark settings of every TPC run, vanilla and rss alike. The smoke's tables are small: few
# partitions and no broadcast joins make its shuffles large enough per partition to spill from
# the small store (benches/tpc.sh sets none: Spark's defaults, 200 partitions and broadcasts).
TPC_CONF=${SPARK_E2E_TPC_CONF-"spark.sql.shuffle.partitions=8 spark.sql.autoBroadcastJoinThreshold=-1"}
# Spark's JVM: the Parquet tables and broadcast joins of sf1 want more than the jobs' 4g.
TPC_HEAP=${SPARK_E2E_TPC_HEAP:-6g}

tpc_data_dir() { echo "$HERE/target/tpc-data/$1-sf$2"; }

# tpc_data SUITE SCALE: the suite's Parquet tables, generated unless already complete.
tpc_data() {
  local suite=$1 scale=$2 data raw d
  data=$(tpc_data_dir "$suite" "$scale")
  # TpcQueries writes the scale as a double ("tpch 1.0"): compared as numbers, so "tpch:1" keeps
  # the tables of an earlier run too.
  if [[ -f $data/_COMPLETE ]] && awk -v s="$suite" -v f="$scale" \
      '$1 == s && $2 + 0 == f + 0 { ok = 1 } END { exit !ok }' "$data/_COMPLETE"; then
    log "$suite sf$scale: tables kept ($data)"
    return 0
  fi
  raw="$WORK/tpc-raw-$suite"
  d=$(client_dir "$BASE_VER")
  bg_wait "$WORK/tpcgen-$suite.log" "$WORK/tpcgen-$suite.log" timeout "$TPC_TIMEOUT" \
    java -Xmx2g -cp "$d/classes:$d/tpcgen/*" io.spillway.sparktest.TpcGen "$suite" "$scale" "$raw" "$TPC_CORES" \
    || { tail -n 20 "$WORK/tpcgen-$suite.log"; return 1; }
  bg_wait "$WORK/tpcparquet-$suite.log" "$WORK/tpcparquet-$suite.log" timeout "$TPC_TIMEOUT" \
    java "${JAVA_OPTS[@]}" -Xmx$TPC_HEAP -Djava.io.tmpdir="$WORK/spark-local" -cp "$(java_cp "$BASE_VER")" \
    io.spillway.sparktest.TpcQueries --generate --suite "$suite" --scale "$scale" --raw "$raw" \
    --data "$data" --local-dir "$WORK/spark-local" --cores "$TPC_CORES" \
    || { grep -vE '^\s+at ' "$WORK/tpcparquet-$suite.log" | tail -n 20; return 1; }
  rm -rf "$raw"
  log "$(grep -h '^TEXT\|^GENERATED' "$WORK/tpcgen-$suite.log" "$WORK/tpcparquet-$suite.log" | tr '\n' ' ')"
}

# tpc_queries NAME SUITE SCALE QUERIES ARGS...: TpcQueries in the foreground; sets TPC_WALL_MS
# and TPC_JVM_CPU_MS from its TOTAL line.
tpc_queries() {
  local name=$1 suite=$2 scale=$3 queries=$4
  shift 4
  local out="$WORK/$name.out" rc=0 total kv confs=()
  for kv in $TPC_CONF; do confs+=(--conf "$kv"); done
  mkdir -p "$WORK/spark-local"
  bg_wait "$out" "$WORK/$name.log" timeout -k 15 "$TPC_TIMEOUT" java "${JAVA_OPTS[@]}" -Xmx$TPC_HEAP \
    -Djava.io.tmpdir="$WORK/spark-local" -cp "$(java_cp "$TPC_LINE")" \
    io.spillway.sparktest.TpcQueries --suite "$suite" --data "$(tpc_data_dir "$suite" "$scale")" \
    --queries "$queries" --local-dir "$WORK/spark-local" --label "$name" --cores "$TPC_CORES" "${confs[@]}" "$@" \
    || rc=$?
  grep -E '^(PASS|FAIL|TOTAL)' "$out" || true
  count_results "$out" "$rc" "$name"
  total=$(grep -m1 '^TOTAL ' "$out" || true)
  read -r _ _ _ TPC_WALL_MS _ TPC_JVM_CPU_MS <<<"${total:-TOTAL - - 0 0 0}"
}

# tpc_record SUITE SCALE ROUND MODE PASSED QUERIES SERVER_CPU_S HWM_KIB: one row of the summary.
tpc_record() {
  local share=-
  if [[ $7 != - ]]; then
    share=$(awk -v s="$7" -v j="$TPC_JVM_CPU_MS" 'BEGIN { t = s + j / 1000; printf "%.2f", (t > 0 ? 100 * s / t : 0) }')
  fi
  printf '%s\t%s\t%s\t%s\t%s/%s\t%.1f\t%.1f\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" \
    "$(awk -v m="$TPC_WALL_MS" 'BEGIN { print m / 1000 }')" \
    "$(awk -v m="$TPC_JVM_CPU_MS" 'BEGIN { print m / 1000 }')" "$7" "$share" "$8" \
    >>"$WORK/tpc-summary.tsv"
}

# tpc_cells: every suite of TPC, TPC_ROUNDS times: vanilla, then each client type; per line of
# TPC_LINES (default: the first line built).
tpc_cells() {
  local entry suite scale queries round n base
  printf 'suite\tscale\tround\tmode\tpassed\twall_s\tspark_cpu_s\tserver_cpu_s\tserver_share_%%\tserver_hwm_kib\n' \
    >"$WORK/tpc-summary.tsv"
  for TPC_LINE in ${TPC_LINES:-$BASE_VER}; do
    # Cells of other lines than the first carry the line in their names and summary rows.
    TPC_TAG=""
    [[ $TPC_LINE == "$BASE_VER" ]] || TPC_TAG="$TPC_LINE-"
    tpc_line_cells
  done
  echo "== tpc summary ($WORK/tpc-summary.tsv)"
  column -t -s $'\t' "$WORK/tpc-summary.tsv" || cat "$WORK/tpc-summary.tsv"
}

# tpc_line_cells: tpc_cells for one line (TPC_LINE, TPC_TAG).
tpc_line_cells() {
  local entry suite scale queries round n base
  for entry in $TPC; do
    IFS=: read -r suite scale queries <<<"$entry"
    queries=${queries:-all}
    phase "tpc data $suite sf$scale"
    if ! tpc_data "$suite" "$scale"; then
      fail "tpc $suite sf$scale: data generation"
      phase_done
      continue
    fi
    phase_done
    n=$(if [[ $queries == all ]]; then echo all; else tr ',' '\n' <<<"$queries" | wc -l; fi)
    for ((round = 1; round <= TPC_ROUNDS; round++)); do
      local vname="tpc-$suite-${TPC_TAG}vanilla-$round"
      base="$WORK/$vname"
      phase "tpc $suite sf$scale round $round: ${TPC_TAG}vanilla"
      tpc_queries "$vname" "$suite" "$scale" "$queries" --mode vanilla --results-out "$base"
      [[ $n != all ]] || n=$(grep -c '^TIME ' "$WORK/$vname.out" || true)
      tpc_record "$suite" "$scale" "$round" "${TPC_TAG}vanilla" "$(grep -c '^TIME ' "$WORK/$vname.out" || true)" "$n" - -
      phase_done
      for CLIENT_TYPE in "${CLIENT_TYPE_LIST[@]}"; do
        tpc_rss_cell "$suite" "$scale" "$queries" "$round" "$base" "$n"
      done
    done
  done
}

# tpc_rss_cell SUITE SCALE QUERIES ROUND BASELINE N: one server, the suite through the client.
tpc_rss_cell() {
  local suite=$1 scale=$2 queries=$3 round=$4 base=$5 n=$6
  local name="tpc-$suite-$TPC_TAG$CLIENT_TYPE-$round" server="t_${CLIENT_TYPE}_"
  local audit="$WORK/$name-rpc-audit.log" passed0=$PASSED
  phase "tpc $suite sf$scale round $round: $TPC_TAG$CLIENT_TYPE (memory $TPC_MEMORY)"
  if SERVER_MEMORY=$TPC_MEMORY SERVER_NETTY_PORT=$(free_port) \
      SERVER_EXTRA_TOML=$'[hybrid_store]\nmemory_single_buffer_max_spill_size = "'"$TPC_SINGLE_SPILL"$'"\n[audit]\nrpc_log = true\nrpc_log_path = "'"$audit"'"' \
      start_cluster "$TPC_LINE" 1 "$server"; then
    local pid_var="${server}0_PID" cpu0 cpu1 hwm
    cpu0=$(awk '{ print $14 + $15 }' "/proc/${!pid_var}/stat")
    tpc_queries "$name" "$suite" "$scale" "$queries" --mode rss --coordinator "$COORD" \
      --client-type "$CLIENT_TYPE" --baseline-in "$base"
    if kill -0 "${!pid_var}" 2>/dev/null; then
      cpu1=$(awk '{ print $14 + $15 }' "/proc/${!pid_var}/stat")
      hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/${!pid_var}/status")
      tpc_record "$suite" "$scale" "$round" "$TPC_TAG$CLIENT_TYPE" $((PASSED - passed0)) "$n" \
        "$(awk -v t=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')" "$hwm"
    else
      fail "$name: the server died (log $WORK/${server}0/server.log)"
    fi
  else
    fail "$name: cluster not ready (see above; coordinator $COORD)"
  fi
  stop_cluster
  # The audit log is complete once the server has stopped. In the smoke, reads must have come
  # from local files too (the small store spills), or the cell did not test what it claims.
  if [[ -s $audit ]]; then
    local rpc="$WORK/tpc-rpc-$suite-$TPC_TAG$CLIENT_TYPE-$round.tsv"
    python3 "$HERE/rpc_latency.py" "$audit" >"$rpc"
    column -t -s $'\t' "$rpc"
    [[ $TPC_REQUIRE_LOCAL == 0 ]] || grep -q $'^getLocalShuffleData\t' "$rpc" \
      || fail "$name: no read came from local files (store $TPC_MEMORY, single spill $TPC_SINGLE_SPILL)"
  else
    fail "$name: no RPC audit log ($audit)"
  fi
  phase_done
}
