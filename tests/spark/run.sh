#!/usr/bin/env bash
# Spark end-to-end harness: real Spark 3.5 jobs in local mode, through the released Uniffle Spark 3
# client, against Spillway; every job's result is compared with the same job on Spark's own
# shuffle (the "vanilla baseline").
#
#   bash tests/spark/run.sh [options]
#
#   --vanilla-only        build the Maven project and run only the vanilla baseline (no server)
#   --build-only          build the Maven project per client version and stop (the chaos soak's
#                         Spark jobs use tests/spark/target/uniffle-0.9.2)
#   --versions "A B"      Uniffle client lines (default "0.9.2 0.9.0 master master-spark4"; env
#                         SPARK_E2E_VERSIONS): a released version on Spark 3.5; master (Uniffle's
#                         master Spark 3 client on Spark 3.5) and master-spark4 (its Spark 4 client
#                         on Spark 4.0), both from ../shared/clients, with integrity validation on
#   --jobs a,b            jobs of the single-server suites (default all; see SparkJobs.java; with
#                         all, versions after the first run SPARK_E2E_OTHER_VERSION_JOBS)
#   --no-replica          skip the two-server replica job
#   --no-restart          skip the upgrade job (the server is replaced by --takeover mid-read)
#   --no-clientbench      skip the clientbench job (ClientBench, benches/realclient.sh's driver, at
#                         a tiny size on one server, per client type)
#   --no-small-store      skip the small-store cells (a 64 MiB memory store, the client's default
#                         16 MiB send size, full_sends + reduce_by_key; issue 34's NO_BUFFER stall)
#   --no-tenants          skip the tenant cells (a runaway app at its quota fails naming it while a
#                         neighbour's job on the same server passes; docs/operating.md, "Quotas")
#   --tenants-only        build, then only the tenant cells (with the reduce_by_key baseline)
#   --no-cluster          skip the cluster job (two coordinators, replica 3: SIGKILL, coordinator
#                         fail-over, decommission)
#   --client-types "A B"  spark.rss.client.type values to run the suites with (default "GRPC GRPC_NETTY";
#                         env SPARK_E2E_CLIENT_TYPES); GRPC_NETTY uses Spillway's Netty plane
#   --keep                keep the work dir (configs, server and Spark logs) even on success
#   --no-hdfs             skip the HDFS suites (MEMORY_HDFS, MEMORY_LOCALFILE_HDFS)
#   --no-s3               skip the object-storage suites (MEMORY_HDFS and MEMORY_LOCALFILE_HDFS on
#                         s3a://, a moto S3 server on loopback, the client reading through s3a)
#   --hdfs-jobs a,b       jobs of the HDFS suites (default reduce_by_key,sort,large_records,empty_partitions;
#                         env SPARK_E2E_HDFS_JOBS)
#   --no-tpc              skip the TPC-H / TPC-DS cells (tests/spark/tpc.sh)
#   --no-tez              skip the Tez cells (tests/tez: Tez 0.9.1 in local mode through the released
#                         Uniffle Tez client 0.9.2, an ordered and an unordered edge)
#   --tez-only            build, then only the Tez cells
#   --tpc-only            build, then only the TPC cells (benches/tpc.sh runs the benchmark so)
#   --refusals-only       build, then only the settings-mistake cells (refusal_cells: a wrong s3a
#                         secret, a missing bucket, an unwritable HDFS path, a GRPC_NETTY client
#                         without Netty servers; S3Proxy and MiniHdfs on loopback)
#   --half 1|2            one of the two halves CI runs side by side (run-all.sh): 1 is the first
#                         client type's cells (once-only cells included), the HDFS and S3 cells;
#                         2 is the TPC cells first, then the other client types' cells and Tez
#   --baselines DIR       share the vanilla baselines through DIR (env SPARK_E2E_BASELINES): a run
#                         reuses the ones there when they cover its jobs, else runs them and leaves
#                         them there; a lock lets two runs at once share one baseline run
#   --tpc "S:F[:q,..] ..."  TPC suites, scale factors and queries (env SPARK_E2E_TPC; default in
#                         tpc.sh: TPC-H sf0.01 8 queries, TPC-DS sf0.01 5 queries); more knobs as
#                         SPARK_E2E_TPC_* in tpc.sh (memory store, rounds, heap, cores)
#
# Phases: Maven build per client version (cached by a stamp; offline first, online if the
# artefacts are missing) -> cargo build -> vanilla baseline -> per client version: one Spillway
# server with the embedded coordinator + all jobs -> replica job: server A (coordinator) and
# server B, replica 2, B is SIGKILLed mid-read (each reduce task pauses after its first record) ->
# upgrade job: one server (fixed ports), the same paused job, a second spillway binary started
# with --takeover replaces it while every reduce task is mid-read (the old one spills, journals
# and exits; the new one recovers the shuffle from disk and serves the rest) -> cluster job:
# coordinators embedded in servers A and B, every server heartbeats to both, the client lists
# both, replica 3 (write 2, read 2): C (first replica) SIGKILLed mid-read; C restarts, D joins,
# A stops, a new job is assigned by B; new cluster, C decommissioned mid-read and stopping by
# itself once the job is gone; then (first client type only) two coordinator-only processes K1,
# K2 from Java coordinator.conf files in front of three servers, K1 SIGTERMed mid-read, a new job
# assigned by K2 (README "Cluster job") -> HDFS suites:
# a MiniHdfs (tests/hdfs) on loopback, one server per store type MEMORY_HDFS and
# MEMORY_LOCALFILE_HDFS (cold threshold 1 MiB), client 0.9.2 over GRPC with
# spark.rss.remote.storage.path on that HDFS: the client reads the spilled shuffle straight from
# HDFS; the server log must show HDFS files deleted at unregister (proof they were written) and
# the Spark log the client's HadoopClientReadHandler finding this server's index files. The remote
# path belongs to the server's user rss (HADOOP_USER_NAME=rss), the jobs run as alice. Then the
# same MEMORY_HDFS suite on a kerberized MiniHdfs (--secure): the server logs in from rss's keytab,
# the job as alice from hers, and the client reads through Kerberos.
# -> TPC cells (tpc.sh): TPC-H and TPC-DS queries on vanilla, then through one server per client
# type with a small memory store, every query's rows compared with vanilla's.
# Every wait has a timeout; servers and Spark are killed on exit. The last line is
# "N passed, M failed"; the exit code is non-zero when anything failed.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# From the repo root, so that cargo and rustup see rust-toolchain.toml; all paths are absolute.
cd "$ROOT"
# Spark binds and advertises loopback only.
export SPARK_LOCAL_IP=127.0.0.1

VERSIONS=${SPARK_E2E_VERSIONS:-"0.9.2 0.9.0 master master-spark4"}
JOBS=all
# The suite of every client version after the first, when --jobs is all: the first version runs
# every job on both planes; the others leave out tiny_partitions (2,000 reduce tasks, whose cost
# is the client's per-reader set-up, the same code in every 0.9 release: 40 s a suite).
OTHER_VERSION_JOBS=${SPARK_E2E_OTHER_VERSION_JOBS:-reduce_by_key,sort,sql_aqe_skew_join,large_records,empty_shuffle,empty_partitions}
CLIENT_TYPES=${SPARK_E2E_CLIENT_TYPES:-"GRPC GRPC_NETTY"}
VANILLA_ONLY=0
BUILD_ONLY=0
REPLICA=1
RESTART=1
CLUSTER=1
CLIENTBENCH=1
SMALL_STORE=1
SMALL_STORE_JOBS=${SPARK_E2E_SMALL_STORE_JOBS:-full_sends,reduce_by_key}
KEEP=0
HDFS=1
S3=1
HDFS_JOBS=${SPARK_E2E_HDFS_JOBS:-reduce_by_key,sort,large_records,empty_partitions}
TPC_CELLS=1
TPC_ONLY=0
TEZ=1
TEZ_ONLY=0
REFUSALS_ONLY=0
TENANTS=1
TENANTS_ONLY=0
HALF=""
BASELINES_DIR=${SPARK_E2E_BASELINES:-}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --vanilla-only) VANILLA_ONLY=1 ;;
    --build-only) BUILD_ONLY=1 ;;
    --versions) VERSIONS=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --no-replica) REPLICA=0 ;;
    --no-restart) RESTART=0 ;;
    --no-cluster) CLUSTER=0 ;;
    --no-clientbench) CLIENTBENCH=0 ;;
    --no-small-store) SMALL_STORE=0 ;;
    --client-types) CLIENT_TYPES=$2; shift ;;
    --keep) KEEP=1 ;;
    --no-hdfs) HDFS=0 ;;
    --hdfs-jobs) HDFS_JOBS=$2; shift ;;
    --no-s3) S3=0 ;;
    --no-tpc) TPC_CELLS=0 ;;
    --no-tez) TEZ=0 ;;
    --tez-only) TEZ_ONLY=1 ;;
    --tpc-only) TPC_ONLY=1 ;;
    --refusals-only) REFUSALS_ONLY=1 ;;
    --no-tenants) TENANTS=0 ;;
    --tenants-only) TENANTS_ONLY=1 ;;
    --tpc) SPARK_E2E_TPC=$2; shift ;;
    --half) HALF=$2; shift ;;
    --baselines) BASELINES_DIR=$2; shift ;;
    -h|--help) sed -n '2,78p' "$HERE/run.sh"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=tests/spark/tpc.sh
source "$HERE/tpc.sh"
read -r -a VERSION_LIST <<<"$VERSIONS"
[[ ${#VERSION_LIST[@]} -gt 0 ]] || { echo "run.sh: no client versions" >&2; exit 2; }

# Time limits (seconds).
MVN_TIMEOUT=${SPARK_E2E_MVN_TIMEOUT:-1500}
CARGO_TIMEOUT=${SPARK_E2E_CARGO_TIMEOUT:-1800}
SERVER_START_TIMEOUT=60
COORDINATOR_READY_TIMEOUT=90
SUITE_TIMEOUT=${SPARK_E2E_SUITE_TIMEOUT:-1500}
REPLICA_TIMEOUT=900
PAUSE_TIMEOUT=300
# Cluster job: the coordinators' server heartbeat timeout (servers beat every 2 s), and how long a
# decommissioned server may take to stop once its last app is gone.
CLUSTER_SERVER_TIMEOUT=10
DECOMMISSION_EXIT_TIMEOUT=60

WORK=$(mktemp -d "${TMPDIR:-/tmp}/spillway-spark.XXXXXX")
PIDS=()
PASSED=0
FAILED=0
FAILURES=()
TIMINGS=()

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

# Stops one process we started: SIGTERM, up to 15 s, then SIGKILL.
stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  local i
  # Newest first: Spark before the servers it talks to.
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    stop_pid "${PIDS[$i]}"
  done
  stop_hdfs
  stop_s3
  stop_s3proxy
  if [[ $KEEP == 1 || $FAILED -gt 0 || $rc -ne 0 ]]; then
    echo "logs and configs kept in $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM

PHASE=""
PHASE_T0=0
phase() {
  PHASE=$1
  PHASE_T0=$(date +%s.%N)
  log "== $PHASE"
}
phase_done() {
  local t
  t=$(awk -v a="$PHASE_T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  TIMINGS+=("$(printf '%-34s %7ss' "$PHASE" "$t")")
  log "== $PHASE: ${t}s"
}

fail() {
  FAILED=$((FAILED + 1))
  FAILURES+=("$1")
  echo "FAIL $1"
}

# The timings, the failures and the totals; exits non-zero when anything failed.
finish() {
  echo
  echo "== timings"
  printf '  %s\n' "${TIMINGS[@]}"
  if [[ ${#FAILURES[@]} -gt 0 ]]; then
    echo "== failures"
    printf '  %s\n' "${FAILURES[@]}"
  fi
  if [[ $PASSED -eq 0 && $FAILED -eq 0 ]]; then
    fail "no job ran"
  fi
  echo "$PASSED passed, $FAILED failed"
  exit $((FAILED > 0))
}

# Adds the PASS/FAIL lines of one SparkJobs run to the totals; a run that exited non-zero
# without any FAIL line (crash, timeout) counts as one failure.
count_results() {
  local out=$1 rc=$2 what=$3 p f
  p=$(grep -c '^PASS ' "$out" || true)
  f=$(grep -c '^FAIL ' "$out" || true)
  PASSED=$((PASSED + p))
  FAILED=$((FAILED + f))
  while IFS= read -r line; do FAILURES+=("${line#FAIL }"); done < <(grep '^FAIL ' "$out" || true)
  if [[ $rc -ne 0 && $f -eq 0 ]]; then
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
      fail "$what: timed out (exit $rc)"
    else
      fail "$what: exited $rc without a result line"
    fi
  fi
  if [[ $rc -ne 0 || $f -gt 0 ]]; then
    echo "---- last errors of $what (full log: ${out%.out}.log)"
    grep -E 'ERROR|Exception|FAIL' "${out%.out}.log" 2>/dev/null | grep -v '^\s*at ' | tail -n 25 || true
  fi
}

# Runs a command in the background and waits for it: bash runs traps only between commands, so a
# foreground child would delay the cleanup on SIGTERM until it ends; `wait` is interrupted at once.
# The child is registered for cleanup. Returns its exit code. Output goes to the file OUT (ERR:
# same file, or "-" for the runner's own stderr); given here, not as redirections of the call,
# which would also catch the trap's messages. OUT "-" keeps the runner's stdout and stderr.
bg_wait() {
  local out=$1 err=$2
  shift 2
  if [[ $out == - ]]; then
    "$@" &
  elif [[ $err == "$out" ]]; then
    "$@" >"$out" 2>&1 &
  else
    "$@" >"$out" 2>"$err" &
  fi
  local pid=$!
  PIDS+=("$pid")
  local rc=0
  wait "$pid" || rc=$?
  forget_pid "$pid"
  return $rc
}

# Drops a reaped pid from PIDS, so that cleanup never signals a recycled pid.
forget_pid() {
  local keep=() p
  for p in "${PIDS[@]}"; do
    [[ $p == "$1" ]] || keep+=("$p")
  done
  PIDS=("${keep[@]}")
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# ---- Maven -------------------------------------------------------------------------------------

client_dir() { echo "$HERE/target/uniffle-$1"; }

# Client lines. A released version ("0.9.2") is the released Spark 3 client from Maven Central on
# Spark 3.5. "master" and "master-spark4" are Uniffle's master clients (0.11.0-SNAPSHOT), which no
# registry serves: jars built from source (../shared/clients, its README gives the commit and the
# command), installed into ~/.m2 by install_master_clients; "master" runs the Spark 3 one on
# Spark 3.5, "master-spark4" the Spark 4 one on Spark 4.0 (Scala 2.13).
MASTER_VERSION=0.11.0-SNAPSHOT
SPARK4_VERSION=${SPARK_E2E_SPARK4_VERSION:-4.0.2}
line_mvn_args() {
  case $1 in
    master) echo "-Duniffle.version=$MASTER_VERSION" ;;
    master-spark4) echo "-Duniffle.version=$MASTER_VERSION -Duniffle.artifact=rss-client-spark4-shaded -Dspark.version=$SPARK4_VERSION -Dscala.binary.version=2.13" ;;
    *) echo "-Duniffle.version=$1" ;;
  esac
}
# line_spark LINE: the Spark major version the line runs on (its vanilla baseline is that Spark's).
line_spark() { case $1 in *-spark4) echo 4 ;; *) echo 3 ;; esac; }
# line_baseline LINE: the vanilla digests the line's results must equal (set once they exist).
line_baseline() { if [[ $(line_spark "$1") == 4 ]]; then echo "$BASELINE4"; else echo "$BASELINE"; fi; }
# line_jobs LINE: the single-server suite's jobs. With --jobs all, the first line runs every job
# and the others SPARK_E2E_OTHER_VERSION_JOBS; the master lines add the integrity job.
line_jobs() {
  local jobs=$JOBS
  [[ $1 == "$BASE_VER" || $JOBS != all ]] || jobs=$OTHER_VERSION_JOBS
  [[ $1 != master* || $JOBS != all ]] || jobs="$jobs,integrity"
  echo "$jobs"
}
# line_rss_conf LINE: the master lines run with the client's integrity validation on, the
# counts kept by the server (apache/uniffle#2669): every reduce task checks what it read.
INTEGRITY_CONF="--rss-conf spark.rss.client.integrityValidation.enabled=true --rss-conf spark.rss.client.integrityValidation.serverManagementEnabled=true"
line_rss_conf() { [[ $1 != master* ]] || echo "$INTEGRITY_CONF"; }

# The master client jars and their sha256 (../shared/clients/README.md): a jar that differs is
# refused, so a test never runs an unknown build.
declare -A MASTER_JARS=(
  [rss-client-spark3-shaded]=eb22af3613d1efe7e63bb0b12d00b86ec3dc37f918ff57fc8f4d24dde5ef9685
  [rss-client-spark4-shaded]=6b5b86d1a947cd5540c948cd333e9b30e1d091ddad1c711490a36440d4ebc8ef
)
# client_jars_dir: ../shared/clients beside the checkout (SPILLWAY_CLIENT_JARS overrides it).
client_jars_dir() {
  local d
  for d in "${SPILLWAY_CLIENT_JARS:-}" "$ROOT/../shared/clients" /work/shared/clients; do
    [[ -n $d && -d $d ]] && { (cd "$d" && pwd); return 0; }
  done
  return 1
}
# install_client_jar ARTIFACT VERSION SHA256 [CLASSIFIER]: a client jar no registry serves, from
# ../shared/clients into ~/.m2 (mvn install:install-file), unless the installed copy already has
# the pinned sha256. Fails, naming the file, when the jar is missing or differs.
install_client_jar() {
  local art=$1 ver=$2 want=$3 cls=${4:-} dir jar m2 sum
  local file="$art-$ver${cls:+-$cls}.jar"
  m2="$HOME/.m2/repository/org/apache/uniffle/$art/$ver/$file"
  if [[ -f $m2 ]] && [[ $(sha256sum "$m2" | cut -d' ' -f1) == "$want" ]]; then
    return 0
  fi
  if ! dir=$(client_jars_dir); then
    echo "$file is missing: no ../shared/clients beside $ROOT (set SPILLWAY_CLIENT_JARS to the directory holding it)" >&2
    return 1
  fi
  jar="$dir/$file"
  [[ -f $jar ]] || { echo "$jar is missing" >&2; return 1; }
  sum=$(sha256sum "$jar" | cut -d' ' -f1)
  [[ $sum == "$want" ]] || { echo "$jar has sha256 $sum, not the $want its README names" >&2; return 1; }
  mvn -B -q install:install-file -Dfile="$jar" -DgroupId=org.apache.uniffle -DartifactId="$art" \
    -Dversion="$ver" ${cls:+-Dclassifier="$cls"} -Dpackaging=jar -DgeneratePom=true \
    || { echo "mvn install:install-file of $jar failed" >&2; return 1; }
  log "installed $file from $dir into ~/.m2"
}
install_master_clients() {
  local art
  for art in "${!MASTER_JARS[@]}"; do
    install_client_jar "$art" "$MASTER_VERSION" "${MASTER_JARS[$art]}" || return 1
  done
}

build_client() {
  local ver=$1 out stamp
  out=$(client_dir "$ver")
  if [[ $ver == master* ]] && ! install_master_clients; then
    return 1
  fi
  stamp=$({
    cat "$HERE/pom.xml"
    find "$HERE/src" -type f | LC_ALL=C sort | xargs cat
    echo "$ver"
    line_mvn_args "$ver"
    [[ $ver != master* ]] || echo "${MASTER_JARS[*]}"
  } | sha256sum | cut -c1-16)
  if [[ -f $out/.stamp && $(cat "$out/.stamp") == "$stamp" && -d $out/classes && -d $out/deps ]]; then
    log "client $ver: up to date ($out)"
    return 0
  fi
  rm -rf "$out"
  local -a line_args
  read -r -a line_args <<<"$(line_mvn_args "$ver")"
  local mvn=(mvn -B -q -f "$HERE/pom.xml" package "${line_args[@]}" -Dbuild.dir="$out")
  if bg_wait "$WORK/mvn-$ver-offline.log" "$WORK/mvn-$ver-offline.log" \
    timeout "$MVN_TIMEOUT" "${mvn[@]}" -o; then
    log "client $ver: built offline from ~/.m2"
  else
    log "client $ver: offline build failed (artefacts not cached yet?), building online"
    rm -rf "$out"
    if ! bg_wait "$WORK/mvn-$ver.log" "$WORK/mvn-$ver.log" timeout "$MVN_TIMEOUT" "${mvn[@]}"; then
      tail -n 40 "$WORK/mvn-$ver.log"
      return 1
    fi
    log "client $ver: built online"
  fi
  echo "$stamp" >"$out/.stamp"
}

# The Tez harness (tests/tez): Tez 0.9.1 and the released Uniffle Tez client 0.9.2, which no
# registry serves (../shared/clients/rss-client-tez-0.9.2-shaded.jar, classifier "shaded").
TEZ_DIR="$ROOT/tests/tez"
TEZ_JAR_SHA256=76ea63bd902a2ddad45753b036e3ffabeaf0c1cade32a02c1b7a86a8126ca835
build_tez() {
  local out="$TEZ_DIR/target" stamp
  install_client_jar rss-client-tez 0.9.2 "$TEZ_JAR_SHA256" shaded || return 1
  stamp=$({
    cat "$TEZ_DIR/pom.xml"
    find "$TEZ_DIR/src" -type f | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -c1-16)
  if [[ -f $out/.stamp && $(cat "$out/.stamp") == "$stamp" && -d $out/classes && -d $out/deps ]]; then
    log "tez harness: up to date ($out)"
    return 0
  fi
  rm -rf "$out"
  local mvn=(mvn -B -q -f "$TEZ_DIR/pom.xml" package)
  if ! bg_wait "$WORK/mvn-tez-offline.log" "$WORK/mvn-tez-offline.log" timeout "$MVN_TIMEOUT" "${mvn[@]}" -o; then
    rm -rf "$out"
    if ! bg_wait "$WORK/mvn-tez.log" "$WORK/mvn-tez.log" timeout "$MVN_TIMEOUT" "${mvn[@]}"; then
      tail -n 40 "$WORK/mvn-tez.log"
      return 1
    fi
  fi
  echo "$stamp" >"$out/.stamp"
  log "tez harness: built ($out)"
}

# tez_cells: one server with the embedded coordinator; TezJobs runs each DAG on Tez's own shuffle
# and then through the client (GRPC only: the 0.9.2 Tez client passes no Netty port from its app
# master to its tasks, so GRPC_NETTY cannot work with it; apache/uniffle#1995 fixed that in 0.10).
# Besides TezJobs' own comparison, the server must have registered the DAGs' shuffles and the
# client's app master must have swapped in its Rss inputs and outputs.
tez_cells() {
  local name="uniffle-tez-0.9.2-GRPC" out rc=0 d="$TEZ_DIR/target"
  phase "tez (local mode), Tez 0.9.1, client 0.9.2, GRPC"
  if CLIENT_TYPE=GRPC SERVER_NETTY_PORT=$(free_port) start_cluster "$BASE_VER" 1 "tz_"; then
    out="$WORK/$name.out"
    mkdir -p "$WORK/tez-work"
    printf '%s\n' 'log4j.rootLogger=WARN, stderr' \
      'log4j.appender.stderr=org.apache.log4j.ConsoleAppender' 'log4j.appender.stderr.Target=System.err' \
      'log4j.appender.stderr.layout=org.apache.log4j.PatternLayout' \
      'log4j.appender.stderr.layout.ConversionPattern=%d{HH:mm:ss.SSS} %p %c{1}: %m%n' \
      'log4j.logger.org.apache.tez.common.RssTezUtils=INFO' >"$WORK/tez-log4j.properties"
    bg_wait "$out" "$WORK/$name.log" timeout -k 15 "$SUITE_TIMEOUT" java "${JAVA_OPTS[@]}" -Xmx2g \
      -Djava.system.class.loader=io.spillway.teztest.UrlSystemLoader \
      -Dlog4j.configuration="file:$WORK/tez-log4j.properties" -Djava.io.tmpdir="$WORK/tez-work" \
      -cp "$d/classes:$d/deps/*" io.spillway.teztest.TezJobs --coordinator "$COORD" \
      --work "$WORK/tez-work" --label "$name" || rc=$?
    grep -E '^(PASS|FAIL)' "$out" || true
    count_results "$out" "$rc" "$name"
    grep -q 'registered shuffle app_id=appattempt_' "$WORK/tz_0/server.log" \
      || fail "$name: the server registered no Tez shuffle (log $WORK/tz_0/server.log)"
    grep -q 'transient from org.apache.tez.runtime.library.input.UnorderedKVInput to .*RssUnorderedKVInput' "$WORK/$name.log" \
      || fail "$name: the client's app master did not swap in its unordered input (log $WORK/$name.log)"
    grep -q 'transient from org.apache.tez.runtime.library.output.OrderedPartitionedKVOutput to .*RssOrderedPartitionedKVOutput' "$WORK/$name.log" \
      || fail "$name: the client's app master did not swap in its ordered output (log $WORK/$name.log)"
  else
    fail "$name: cluster not ready (see above; coordinator $COORD)"
  fi
  stop_cluster
  phase_done
}

# ---- Java --------------------------------------------------------------------------------------

JAVA_OPTS=(
  -Xmx4g
  -XX:+IgnoreUnrecognizedVMOptions
  --add-opens=java.base/java.lang=ALL-UNNAMED
  --add-opens=java.base/java.lang.invoke=ALL-UNNAMED
  --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens=java.base/java.io=ALL-UNNAMED
  --add-opens=java.base/java.net=ALL-UNNAMED
  --add-opens=java.base/java.nio=ALL-UNNAMED
  --add-opens=java.base/java.util=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED
  --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens=java.base/sun.nio.cs=ALL-UNNAMED
  --add-opens=java.base/sun.security.action=ALL-UNNAMED
  --add-opens=java.base/sun.util.calendar=ALL-UNNAMED
  -Djdk.reflect.useDirectMethodHandle=false
  -Dio.netty.tryReflectionSetAccessible=true
  # apache/uniffle#2082: the 0.9.x client's shaded Netty fails reads on Java 17 ("duplicate or
  # slice") without it. The shading prefix differs: 0.9.2 org.apache.uniffle.shaded.io.netty,
  # 0.9.0 org.apache.uniffle.io.netty (the property name is relocated with the classes).
  -Dorg.apache.uniffle.shaded.io.netty.noUnsafe=true
  -Dorg.apache.uniffle.io.netty.noUnsafe=true
)
# The client JIT only (C1): the jobs are seconds long, and C2's compiles of Spark's and the
# client's code cost more CPU than they win back. Measured on the 2-core VM, the vanilla baseline
# plus the 0.9.2 GRPC suite, alternating, two runs each: CPU 254 and 236 s -> 180 and 178 s, wall
# 143 and 130 s -> 109 and 122 s (the last with a Maven build and a cargo build beside it).
# Benchmarks (benches/tpc.sh) set SPARK_E2E_FULL_JIT=1: their runs are minutes long.
[[ -n ${SPARK_E2E_FULL_JIT:-} ]] || JAVA_OPTS+=(-XX:TieredStopAtLevel=1)

# SPARK_E2E_HADOOP_CONF: a directory put first on the class path, so its core-site.xml is the
# Hadoop conf of every Hadoop client in the job's JVM (as HADOOP_CONF_DIR is under spark-submit).
# SPARK_E2E_EXTRA_CP: more classpath entries after the client's (the object-storage suites' s3a jars).
java_cp() { local d; d=$(client_dir "$1"); echo "${SPARK_E2E_HADOOP_CONF:+$SPARK_E2E_HADOOP_CONF:}$d/classes:$d/deps/*${SPARK_E2E_EXTRA_CP:+:$SPARK_E2E_EXTRA_CP}"; }

# run_jobs VERSION NAME TIMEOUT ARGS...: SparkJobs in the foreground, its result lines echoed.
run_jobs() {
  local ver=$1 name=$2 limit=$3
  shift 3
  local out="$WORK/$name.out" rc=0
  mkdir -p "$WORK/spark-local"
  bg_wait "$out" "$WORK/$name.log" timeout -k 15 "$limit" java "${JAVA_OPTS[@]}" \
    -Djava.io.tmpdir="$WORK/spark-local" -cp "$(java_cp "$ver")" \
    io.spillway.sparktest.SparkJobs --local-dir "$WORK/spark-local" --label "$name" "$@" \
    || rc=$?
  cat "$out"
  count_results "$out" "$rc" "$name"
}

# vanilla_baseline VERSION NAME FILE JOBS: JOBS on Spark's own shuffle (the line's Spark), each
# passing job's digest into FILE. With --baselines, FILE is shared: a FILE whose recorded jobs
# (FILE.jobs) cover JOBS is reused, and the lock makes a second run wait for the first one's.
vanilla_baseline() {
  local ver=$1 name=$2 file=$3 jobs=$4 lock covered=1 j
  if [[ -z $BASELINES_DIR ]]; then
    run_jobs "$ver" "$name" "$SUITE_TIMEOUT" --mode vanilla --job "$jobs" --baseline-out "$file"
    return
  fi
  exec {lock}>"$BASELINES_DIR/.lock"
  flock "$lock"
  if [[ -f $file && -f $file.jobs ]]; then
    for j in ${jobs//,/ }; do grep -qxF -- "$j" "$file.jobs" || covered=0; done
  else
    covered=0
  fi
  if [[ $covered == 1 ]]; then
    log "vanilla baseline: $file (jobs $jobs) left by another run"
  else
    rm -f "$file.jobs"
    run_jobs "$ver" "$name" "$SUITE_TIMEOUT" --mode vanilla --job "$jobs" --baseline-out "$file"
    tr ',' '\n' <<<"$jobs" >"$file.jobs"
  fi
  exec {lock}>&-
}

# ---- Spillway ----------------------------------------------------------------------------------

SPILLWAY_BIN=${SPILLWAY_BIN:-"${CARGO_TARGET_DIR:-$ROOT/target}/debug/spillway"}

# start_server NAME PORT COORDINATOR(0|1) QUORUM: sets NAME_PID and NAME_ADDR.
start_server() {
  local name=$1 port=$2 coord=$3 quorum=$4
  local dir="$WORK/$name"
  mkdir -p "$dir/d1" "$dir/d2"
  {
    echo "store_type = \"${STORE_TYPE:-MEMORY_LOCALFILE}\""
    echo "grpc_port = $port"
    # A fixed Netty port keeps the server id across a restart (the upgrade job).
    echo "netty_port = ${SERVER_NETTY_PORT:-0}"
    echo 'bind_ip = "127.0.0.1"'
    echo 'worker_ip = "127.0.0.1"'
    echo "coordinator_quorum = [$quorum]"
    echo 'heartbeat_interval = "2s"'
    echo '[memory_store]'
    echo '# Small on purpose: the large-record job (256 MiB) has to spill and back off.'
    echo "capacity = \"${SERVER_MEMORY:-256M}\""
    echo '[localfile_store]'
    echo "data_paths = [\"$dir/d1\", \"$dir/d2\"]"
    # The host disk's usage is not under test (over 95 % every spill would be refused).
    echo 'disk_high_watermark = 1.0'
    echo 'disk_low_watermark = 0.99'
    echo '[metrics]'
    echo 'http_port = 0'
    echo '[shutdown]'
    echo 'drain_timeout = "5s"'
    echo 'spill_timeout = "10s"'
    if [[ $coord == 1 ]]; then
      echo '[coordinator]'
      echo 'enabled = true'
      # Heartbeat our own coordinator too (deduplicated when the quorum already lists it).
      echo 'register_self = true'
      # More keys of [coordinator] (the cluster job's shorter server heartbeat timeout).
      [[ -z ${COORDINATOR_EXTRA_TOML:-} ]] || printf '%s\n' "$COORDINATOR_EXTRA_TOML"
    fi
    # Whole extra sections (e.g. [hdfs_store]) for the HDFS suites.
    [[ -z ${SERVER_EXTRA_TOML:-} ]] || printf '%s\n' "$SERVER_EXTRA_TOML"
  } >"$dir/config.toml"
  launch_server "$name" server.log
}

# launch_server NAME LOG: starts spillway on WORK/NAME/config.toml (written by start_server; a
# second launch is a restart with the same server id and data dirs), logging to WORK/NAME/LOG,
# and waits for it to listen. Sets NAME_PID, NAME_ADDR (gRPC) and NAME_HTTP (HTTP port).
launch_server() {
  local name=$1 logf="$WORK/$1/$2"
  RUST_LOG=${SPILLWAY_LOG:-info} WORKER_IP=127.0.0.1 NO_COLOR=1 \
    "$SPILLWAY_BIN" --config "$WORK/$name/config.toml" >"$logf" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  printf -v "${name}_PID" '%s' "$pid"
  local deadline=$((SECONDS + SERVER_START_TIMEOUT)) line
  while true; do
    line=$(grep -m1 -o 'spillway listening grpc_addr=.*' "$logf" 2>/dev/null || true)
    if [[ -n $line ]]; then
      local grpc=${line#*grpc_addr=} http=${line#*http_addr=}
      printf -v "${name}_ADDR" '%s' "${grpc%% *}"
      printf -v "${name}_HTTP" '%s' "${http%% *}"
      log "server $name (pid $pid) listening on ${grpc%% *} (http ${http%% *}); log $logf"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "---- server $name exited during start-up; $logf says:"
      grep -m 5 -E '^Error|panicked|ERROR' "$logf" || tail -n 20 "$logf"
      return 1
    fi
    if ((SECONDS > deadline)); then
      echo "---- server $name: no 'spillway listening' line after ${SERVER_START_TIMEOUT}s"
      tail -n 20 "$logf"
      return 1
    fi
    sleep 0.2
  done
}

# sigkill_pid PID: SIGKILL a process we started, reap it and drop it from the cleanup list.
sigkill_pid() {
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  forget_pid "$1"
}

# wait_coordinator VERSION HOST:PORT N [--without host:port,...]: until the coordinator assigns N
# servers for our tags (and none of the --without ones).
wait_coordinator() {
  local ver=$1 coord=$2 n=$3
  shift 3
  bg_wait - - \
    timeout -k 5 $((COORDINATOR_READY_TIMEOUT + 30)) java -cp "$(java_cp "$ver")" \
    io.spillway.sparktest.WaitForServers --coordinator "$coord" --servers "$n" \
    --tags "ss_v5,$CLIENT_TYPE" --timeout-s "$COORDINATOR_READY_TIMEOUT" "$@"
}

# Sets up N servers (names SRV0..): server 0 hosts the embedded coordinator, the others
# heartbeat to it. Sets COORD. Returns non-zero with a message when anything is not ready.
start_cluster() {
  local ver=$1 n=$2 prefix=$3 i
  local ports=()
  for ((i = 0; i < n; i++)); do ports+=("$(free_port)"); done
  COORD="127.0.0.1:${ports[0]}"
  start_server "${prefix}0" "${ports[0]}" 1 "\"$COORD\"" || return 1
  for ((i = 1; i < n; i++)); do
    start_server "${prefix}$i" "${ports[$i]}" 0 "\"$COORD\"" || return 1
  done
  wait_coordinator "$ver" "$COORD" "$n"
}

# start_paused_job NAME PAUSE_DIR REPLICA [SparkJobs args...]: starts the replica job against
# COORD in the background (sets jpid) and waits until its reduce stage paused mid-read
# (PAUSE_DIR/paused, or PAUSE_DIR/$PAUSED_AT), it ended, or PAUSE_TIMEOUT passed. The job resumes when PAUSE_DIR/resume
# appears. Extra arguments go to SparkJobs (e.g. --rss-conf spark.rss.data.replica.write=2).
start_paused_job() {
  local name=$1 pause=$2 replica=$3 deadline paused_at=${PAUSED_AT:-paused}
  shift 3
  rm -rf "$pause"
  mkdir -p "$pause/map" "$pause/reduce" "$WORK/spark-local"
  timeout -k 15 "$REPLICA_TIMEOUT" java "${JAVA_OPTS[@]}" \
    -Djava.io.tmpdir="$WORK/spark-local" -cp "$(java_cp "$ver")" \
    io.spillway.sparktest.SparkJobs --local-dir "$WORK/spark-local" --label "$name" \
    --mode rss --coordinator "$COORD" --job "${PAUSED_JOB:-replica}" --replica "$replica" \
    --client-type "$CLIENT_TYPE" --pause-dir "$pause" --pause-timeout-s "$PAUSE_TIMEOUT" \
    --rss-conf spark.rss.client.read.buffer.size=256k \
    --baseline-in "$(line_baseline "$ver")" "$@" >"$WORK/$name.out" 2>"$WORK/$name.log" &
  jpid=$!
  PIDS+=("$jpid")
  deadline=$((SECONDS + PAUSE_TIMEOUT))
  while [[ ! -e $pause/$paused_at ]] && kill -0 "$jpid" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.2
  done
}

# finish_paused_job NAME PAUSE_DIR: resumes the job started by start_paused_job, waits for it
# and counts its results.
finish_paused_job() {
  local name=$1 pause=$2 rc=0
  touch "$pause/resume"
  wait "$jpid" || rc=$?
  forget_pid "$jpid"
  cat "$WORK/$name.out"
  count_results "$WORK/$name.out" "$rc" "$name"
}

stop_cluster() {
  local i
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[$i]}"; done
  PIDS=()
}

# ---- integrity cell ------------------------------------------------------------------------------

# integrity_cell LINE: the negative half of the integrity check. The integrity job (validation
# on) reads its shuffle once, the driver pauses, `spillway-bench skew-records` adds one record to
# a count the server holds, and the second read must fail with the client's "Inconsistent number
# of records": proof that the reader checks the counts Spillway answers (the suites' passing
# jobs are the positive half).
integrity_cell() {
  local ver=$1 name pause server skew
  name="uniffle-$ver-$CLIENT_TYPE-integrity-skewed"
  pause="$WORK/pause-int-$ver-$CLIENT_TYPE"
  server="i${ver//[.-]/_}_${CLIENT_TYPE}_"
  skew="${SPILLWAY_BIN%/*}/spillway-bench"
  phase "integrity check against a changed count, client $ver, $CLIENT_TYPE"
  if start_cluster "$ver" 1 "$server"; then
    local addr_var="${server}0_ADDR" http_var="${server}0_HTTP"
    # shellcheck disable=SC2046
    PAUSED_JOB=integrity start_paused_job "$name" "$pause" 1 $(line_rss_conf "$ver") \
      --expect-failure "the second read of the shuffle failed|Inconsistent number of records"
    if [[ -e $pause/paused ]]; then
      if "$skew" skew-records --grpc "${!addr_var}" --coordinator-http "http://${!http_var}" \
          --partitions 8 >"$WORK/$name-skew.log" 2>&1; then
        log "driver paused between the reads: $(cat "$WORK/$name-skew.log")"
      else
        fail "$name: skew-records failed: $(tail -n 3 "$WORK/$name-skew.log")"
      fi
    else
      fail "$name: the driver never paused between the reads"
    fi
    finish_paused_job "$name" "$pause"
  else
    fail "$name: cluster not ready (see above; coordinator $COORD)"
  fi
  stop_cluster
  phase_done
}

# ---- clientbench job ----------------------------------------------------------------------------

# clientbench_job: a tiny run of benches/realclient.sh's driver (ClientBench: the released client's
# ShuffleWriteClient / ShuffleReadClient without Spark) on one server without a coordinator, so the
# benchmark cannot rot. 32 MiB of 4-16 KiB blocks through a 16 MiB memory store: the writes spill
# and the reads come from files and memory; every block is verified.
clientbench_job() {
  local ver=$BASE_VER name="clientbench-$BASE_VER-$CLIENT_TYPE" rc=0
  phase "clientbench (client API, no Spark), client $ver, $CLIENT_TYPE"
  local netty
  netty=$(free_port)
  if SERVER_NETTY_PORT=$netty SERVER_MEMORY=16M start_server "cb_${CLIENT_TYPE}" "$(free_port)" 0 ""; then
    local addr_var="cb_${CLIENT_TYPE}_ADDR"
    local out="$WORK/$name.out"
    bg_wait "$out" "$WORK/$name.log" timeout -k 15 300 java "${JAVA_OPTS[@]}" -cp "$(java_cp "$ver")" \
      io.spillway.sparktest.ClientBench --grpc-port "${!addr_var##*:}" --netty-port "$netty" \
      --client-type "$CLIENT_TYPE" --label "$name" --total 32m --maps 4 --partitions 8 \
      --block-size 4k-16k --concurrency 4 --request-size 1m --read-size 1m || rc=$?
    cat "$out"
    count_results "$out" "$rc" "$name"
  else
    fail "$name: server did not start"
  fi
  stop_cluster
  phase_done
}

# ---- small-store cells --------------------------------------------------------------------------

# small_store_job: one server whose memory store is 64 MiB (watermarks 0.8/0.2: 12.8 MiB above the
# high mark), the client's default send size (16 MiB), and jobs whose map tasks send full-size
# requests. Before issue 34 such a request, arriving while the cached bytes sat just under the high
# watermark, was refused with NO_BUFFER until the client gave up. Results must equal vanilla's.
small_store_job() {
  local ver=$BASE_VER name="uniffle-$BASE_VER-$CLIENT_TYPE-64m" server="m_${CLIENT_TYPE}_"
  phase "small store (64M), client $ver, $CLIENT_TYPE"
  local audit="$WORK/${server}0-rpc-audit.log"
  if SERVER_MEMORY=64M SERVER_NETTY_PORT=$(free_port) \
      SERVER_EXTRA_TOML=$'[audit]\nrpc_log = true\nrpc_log_path = "'"$audit"'"' \
      start_cluster "$ver" 1 "$server"; then
    run_jobs "$ver" "$name" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
      --job "$SMALL_STORE_JOBS" --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE"
    local pid_var="${server}0_PID" http_var="${server}0_HTTP"
    if kill -0 "${!pid_var}" 2>/dev/null; then
      log "$name: $(curl -s "http://${!http_var}/prometheus/metrics/server" \
        | grep -E '^(total_require_buffer_failed|total_flush_file_num)[{ ]' | tr '\n' ' ')"
    else
      fail "$name: the server died (log $WORK/${server}0/server.log)"
    fi
  else
    fail "$name: cluster not ready (see above; coordinator $COORD)"
  fi
  stop_cluster
  # The cell proves something only if the client sent requests larger than the 12.8 MiB above
  # the high watermark (the RPC audit log, flushed when the server stopped, has every
  # requireBuffer's size).
  local largest
  largest=$(grep -o 'cmd=requireBuffer.*requireSize=[0-9]*' "$audit" 2>/dev/null \
    | sed 's/.*requireSize=//' | sort -n | tail -n 1)
  log "$name: largest requireBuffer ${largest:-none} bytes; NO_BUFFER answers: $(grep -c 'cmd=requireBuffer.*statusCode=NO_BUFFER' "$audit" 2>/dev/null || true)"
  if [[ -z $largest || $largest -le 13421772 ]]; then
    fail "$name: no requireBuffer over the 13421772 bytes above the high watermark (largest: ${largest:-none}); the cell did not test what it is for"
  fi
  phase_done
}

# job_bg VERSION NAME USER ARGS...: SparkJobs as USER (HADOOP_USER_NAME: the user the client
# registers with) in the background, beside jobs run in the foreground; job_bg_done NAME waits
# for it and counts its result lines, as run_jobs does.
job_bg() {
  local ver=$1 name=$2 user=$3
  shift 3
  mkdir -p "$WORK/spark-local"
  HADOOP_USER_NAME=$user timeout -k 15 "$SUITE_TIMEOUT" java "${JAVA_OPTS[@]}" \
    -Djava.io.tmpdir="$WORK/spark-local" -cp "$(java_cp "$ver")" \
    io.spillway.sparktest.SparkJobs --local-dir "$WORK/spark-local" --label "$name" "$@" \
    >"$WORK/$name.out" 2>"$WORK/$name.log" &
  BG_JOB=$!
  PIDS+=("$BG_JOB")
}

job_bg_done() {
  local name=$1 rc=0
  wait "$BG_JOB" || rc=$?
  forget_pid "$BG_JOB"
  cat "$WORK/$name.out"
  count_results "$WORK/$name.out" "$rc" "$name"
}

# tenant_cells: one server shared by two tenants (docs/operating.md, "Quotas"), both started at
# once. Tenant A (HADOOP_USER_NAME alice: the client's registerShuffle user) runs large_records,
# 256 MiB of shuffle, into a per-app local-disk quota of 96 MiB: it must fail, and the exception
# its task threw must name the quota and the key to raise. (The released 0.9.2 client wraps it:
# the driver's job failure says "Fail to send the block", the task's NotRetryException below it in
# the log carries the server's message.) Tenant B (bob) runs reduce_by_key on the same server
# meanwhile and must pass with the baseline's result. The server logs one WARN for A's quota,
# whatever the number of refused requests, and its metrics count the refusals.
tenant_cells() {
  local ver=$BASE_VER server="q_${CLIENT_TYPE}_"
  local a="uniffle-$BASE_VER-$CLIENT_TYPE-tenant-runaway" b="uniffle-$BASE_VER-$CLIENT_TYPE-tenant-neighbour"
  phase "tenants: a runaway app at its quota and a neighbour, client $ver, $CLIENT_TYPE"
  if ! SERVER_MEMORY=64M SERVER_NETTY_PORT=$(free_port) \
      SERVER_EXTRA_TOML=$'[quota]\napp_local_disk_bytes = "96M"' \
      start_cluster "$ver" 1 "$server"; then
    fail "$a: cluster not ready (see above; coordinator $COORD)"
    stop_cluster
    phase_done
    return
  fi
  # B alone first, for the time its run beside A is compared with (logged, not asserted).
  HADOOP_USER_NAME=bob run_jobs "$ver" "$b-alone" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
    --job reduce_by_key --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE"
  job_bg "$ver" "$a" alice --mode rss --coordinator "$COORD" --job large_records \
    --client-type "$CLIENT_TYPE" --expect-failure "Fail to send the block"
  HADOOP_USER_NAME=bob run_jobs "$ver" "$b" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
    --job reduce_by_key --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE"
  job_bg_done "$a"
  if grep -q 'statusCode=NO_REGISTER, errorMsg:app .* is over its app local-disk quota on this server: .*Raise quota.app_local_disk_bytes' "$WORK/$a.log"; then
    log "$a: the task's exception names the quota: $(grep -o 'errorMsg:app [^;]*' "$WORK/$a.log" | head -n 1)"
  else
    fail "$a: no task exception in $WORK/$a.log names the quota and its key"
  fi
  local alone beside
  alone=$(grep -o 'rss=[0-9.]*s' "$WORK/$b-alone.out" | head -n 1)
  beside=$(grep -o 'rss=[0-9.]*s' "$WORK/$b.out" | head -n 1)
  log "$b: reduce_by_key alone ${alone#rss=}, beside the runaway ${beside#rss=}"
  local http_var="${server}0_HTTP" slog="$WORK/${server}0/server.log" n
  log "$a: server says $(curl -s "http://${!http_var}/prometheus/metrics/server" \
    | grep -E '^tenant_quota_refused_total[{ ]' | tr '\n' ' ')"
  stop_cluster
  n=$(grep -c 'WARN.*is over its app local-disk quota' "$slog" || true)
  if [[ $n != 1 ]]; then
    fail "$a: $n quota WARN lines in $slog, want 1 (one per app and quota)"
  else
    log "$a: one WARN for the runaway's quota"
  fi
  phase_done
}

# tenant_overflow_cell: the runaway of tenant_cells under MEMORY_LOCALFILE_HDFS with an HDFS
# remote path (docs/operating.md, "Quotas": overflow). At its local-disk quota its spills go to
# HDFS instead of failing: its job must pass with the baseline's result, the neighbour's too, and
# the server must log no quota refusal. Needs MiniHdfs (HDFS_URL).
tenant_overflow_cell() {
  local ver=$BASE_VER server="qo_${CLIENT_TYPE}_"
  local a="uniffle-$BASE_VER-$CLIENT_TYPE-tenant-overflow" b="uniffle-$BASE_VER-$CLIENT_TYPE-tenant-overflow-neighbour"
  phase "tenants: a runaway app overflowing to HDFS and a neighbour, client $ver, $CLIENT_TYPE"
  hdfs_cmd "mkdir /rss-overflow rss 755" || fail "$a: could not prepare /rss-overflow"
  local started=0
  # Only the quota sends batches to HDFS: none reaches the cold threshold.
  # As the HDFS suites run it: the server as rss, which owns the path, the jobs as others.
  export HADOOP_USER_NAME=rss
  STORE_TYPE=MEMORY_LOCALFILE_HDFS SERVER_MEMORY=64M \
    SERVER_EXTRA_TOML=$'[hdfs_store]\ncold_storage_threshold_size = "1G"\n[quota]\napp_local_disk_bytes = "96M"' \
    start_cluster "$ver" 1 "$server" && started=1
  unset HADOOP_USER_NAME
  if [[ $started == 0 ]]; then
    fail "$a: cluster not ready (see above; coordinator $COORD)"
    stop_cluster
    phase_done
    return
  fi
  local remote=(--rss-conf "spark.rss.storage.type=MEMORY_LOCALFILE_HDFS"
    --rss-conf "spark.rss.remote.storage.path=$HDFS_URL/rss-overflow")
  job_bg "$ver" "$a" alice --mode rss --coordinator "$COORD" --job large_records \
    --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE" "${remote[@]}"
  HADOOP_USER_NAME=bob run_jobs "$ver" "$b" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
    --job reduce_by_key --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE" "${remote[@]}"
  job_bg_done "$a"
  stop_cluster
  local slog="$WORK/${server}0/server.log"
  if grep -q 'WARN.*is over its .* quota' "$slog"; then
    fail "$a: the server refused an app at a quota: $(grep -m1 'is over its' "$slog")"
  fi
  if ! grep -q 'HadoopClientReadHandler: Find index file' "$WORK/$a.log"; then
    fail "$a: nothing of the runaway went to HDFS (no HadoopClientReadHandler index in $WORK/$a.log)"
  else
    log "$a: the runaway passed, reading its overflow from HDFS"
  fi
  phase_done
}

# ---- cluster job -------------------------------------------------------------------------------

# check_alive WHAT NAME...: a failure of WHAT for every server NAME whose process is gone.
check_alive() {
  local what=$1 n v
  shift
  for n in "$@"; do
    v="${n}_PID"
    if ! kill -0 "${!v}" 2>/dev/null; then
      fail "$what: server $n died (log $WORK/$n/server*.log)"
    fi
  done
}

# assigned_by JOB HOST:PORT: whether the client of JOB got a shuffle assignment from the
# coordinator at HOST:PORT (the 0.9 client logs which quorum member answered).
assigned_by() {
  grep -q "Success to get shuffle server assignment from .*$2\b" "$WORK/$1.log"
}

# start_ha_servers PREFIX NAMES...: NAME A and B host a coordinator, the others do not; every
# server heartbeats to both coordinators (quorum = A, B; A and B also register_self). Server C
# gets more memory so that both coordinators rank it first: it is then the first replica of
# every partition, the one the readers read from until it goes away. Sets
# HA_A and HA_B (host:port of the coordinators) and leaves the ports in HA_PORT_<NAME>.
start_ha_servers() {
  local prefix=$1 n port
  shift
  for n in "$@"; do printf -v "HA_PORT_$n" '%s' "$(free_port)"; done
  HA_A="127.0.0.1:$HA_PORT_A" HA_B="127.0.0.1:$HA_PORT_B"
  local quorum="\"$HA_A\", \"$HA_B\""
  for n in "$@"; do
    port="HA_PORT_$n"
    # Fixed Netty port: a restart keeps the server id <ip>-<grpc>-<netty>.
    if [[ $n == A || $n == B ]]; then
      # A stopped server leaves the coordinators' assignments this long after its last beat.
      COORDINATOR_EXTRA_TOML="server_heartbeat_timeout = \"${CLUSTER_SERVER_TIMEOUT}s\"" \
        SERVER_NETTY_PORT=$(free_port) start_server "$prefix$n" "${!port}" 1 "$quorum" || return 1
    elif [[ $n == C ]]; then
      SERVER_MEMORY=384M SERVER_NETTY_PORT=$(free_port) \
        start_server "$prefix$n" "${!port}" 0 "$quorum" || return 1
    else
      SERVER_NETTY_PORT=$(free_port) start_server "$prefix$n" "${!port}" 0 "$quorum" || return 1
    fi
  done
}

# cluster_job: coordinator HA with replica 3 (write 2, read 2); the phases are described in
# tests/spark/README.md ("Cluster job").
cluster_job() {
  local ver=$BASE_VER p="c_${CLIENT_TYPE}_" name pause pid_var c_pid qc http_var resp t0 rc
  # The released client refuses write + read <= replica ("Replica config is unsafe"): with 3
  # replicas, write 2 needs read 2 (any 2 readers see every block that 2 writers stored).
  local ha_conf=(--rss-conf spark.rss.data.replica.write=2 --rss-conf spark.rss.data.replica.read=2)
  local decommissioned=0 c_killed=0

  # (a) SIGKILL mid-read, then coordinator fail-over.
  if ! start_ha_servers "$p" A B C || ! wait_coordinator "$ver" "$HA_A" 3 \
      || ! wait_coordinator "$ver" "$HA_B" 3; then
    fail "uniffle-$ver-$CLIENT_TYPE-cluster: cluster not ready (see above; coordinators $HA_A, $HA_B)"
    stop_cluster
    return
  fi
  local qa=$HA_A qb=$HA_B
  COORD="$qa,$qb"
  name="uniffle-$ver-$CLIENT_TYPE-cluster-kill"
  pause="$WORK/pause-ck-$CLIENT_TYPE"
  start_paused_job "$name" "$pause" 3 "${ha_conf[@]}"
  pid_var="${p}C_PID"
  if [[ -e $pause/paused ]]; then
    log "reduce stage paused: SIGKILL server C (pid ${!pid_var}, the first replica)"
    sigkill_pid "${!pid_var}"
    c_killed=1
  else
    log "the reduce stage did not pause (job ended or ${PAUSE_TIMEOUT}s passed)"
  fi
  finish_paused_job "$name" "$pause"
  # C was the replica the readers read from: they must have failed over mid-partition.
  grep -q "MultiReplicaClientReadHandler: Failed to read a replica from \[127.0.0.1-$HA_PORT_C-" \
    "$WORK/$name.log" || fail "$name: no reader failed over from server C (was it not the first replica?)"
  assigned_by "$name" "$qa" || fail "$name: the assignment did not come from the first coordinator $qa"
  # (Spark's local-mode app ids start with local-; the WaitForServers probes do not.)
  grep -q 'shuffle assigned app_id=local-.* replica=3 servers=\["[^"]*", "[^"]*", "[^"]*"\]' \
    "$WORK/${p}A/server.log" || fail "$name: coordinator A did not assign the job's shuffle to 3 servers (log $WORK/${p}A/server.log)"
  check_alive "$name" "${p}A" "${p}B"

  # C comes back (same config and server id, recovers its journal), a spare D joins, then the
  # first coordinator's server A stops: the client must get its assignment from B. D (320 MiB)
  # ranks second after C: with replica.skip (the client's default) the first replica.write = 2
  # replicas, C and D, are written to, the third (B) only when one of them fails. D is SIGKILLed
  # halfway through the map tasks, so the rest of the writes must fall back to B.
  name="uniffle-$ver-$CLIENT_TYPE-cluster-failover"
  HA_PORT_D=$(free_port)
  # (The job did not pause: C must be gone before it can come back.)
  ((c_killed)) || sigkill_pid "${!pid_var}"
  if launch_server "${p}C" server-restart.log \
      && SERVER_MEMORY=320M SERVER_NETTY_PORT=$(free_port) \
        start_server "${p}D" "$HA_PORT_D" 0 "\"$qa\", \"$qb\""; then
    pid_var="${p}A_PID"
    log "stopping server A (pid ${!pid_var}) and its coordinator $qa"
    stop_pid "${!pid_var}"
    forget_pid "${!pid_var}"
    t0=$SECONDS
    if wait_coordinator "$ver" "$qb" 3 --without "$qa"; then
      log "coordinator B dropped server A after $((SECONDS - t0))s"
      pause="$WORK/pause-cf-$CLIENT_TYPE"
      # Writer buffers of 128 KiB: half of each map task's output is sent before it pauses.
      # Retries of a send to the dead D 1 s apart, not 10 s (they would take 20 s per batch).
      start_paused_job "$name" "$pause" 3 "${ha_conf[@]}" --pause-stage map \
        --rss-conf spark.rss.writer.buffer.size=128k \
        --rss-conf spark.rss.client.retry.interval.max=1000
      pid_var="${p}D_PID"
      if [[ -e $pause/paused ]]; then
        log "map stage paused: SIGKILL server D (pid ${!pid_var}, a primary write replica)"
        sigkill_pid "${!pid_var}"
      else
        log "the map stage did not pause (job ended or ${PAUSE_TIMEOUT}s passed)"
      fi
      finish_paused_job "$name" "$pause"
      assigned_by "$name" "$qb" || fail "$name: no assignment from the second coordinator $qb"
      ! assigned_by "$name" "$qa" || fail "$name: an assignment came from the stopped coordinator $qa"
      grep -q 'The sending of primary round is failed partially, so start the secondary round' \
        "$WORK/$name.log" || fail "$name: no write fell back to the third replica (was D not a primary?)"
      check_alive "$name" "${p}B" "${p}C"
    else
      fail "$name: coordinator B still assigns the stopped server A"
    fi
  else
    fail "$name: server C did not restart or server D did not start"
  fi
  stop_cluster

  # (b) Decommission mid-read.
  p="d_${CLIENT_TYPE}_"
  name="uniffle-$ver-$CLIENT_TYPE-cluster-decommission"
  if ! start_ha_servers "$p" A B C || ! wait_coordinator "$ver" "$HA_A" 3 \
      || ! wait_coordinator "$ver" "$HA_B" 3; then
    fail "$name: cluster not ready (see above; coordinators $HA_A, $HA_B)"
    stop_cluster
    return
  fi
  qa=$HA_A qb=$HA_B qc="127.0.0.1:$HA_PORT_C"
  COORD="$qa,$qb"
  pause="$WORK/pause-cd-$CLIENT_TYPE"
  start_paused_job "$name" "$pause" 3 "${ha_conf[@]}"
  pid_var="${p}C_PID" http_var="${p}C_HTTP"
  c_pid=${!pid_var}
  if [[ -e $pause/paused ]]; then
    log "reduce stage paused: POST /admin/decommission to server C (http ${!http_var})"
    resp=$(python3 -c 'import sys, urllib.request
r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="POST"), timeout=10)
print(r.status, r.read().decode())' "http://${!http_var}/admin/decommission" 2>&1 || true)
    log "decommission answered: $resp"
    [[ $resp == 200*DECOMMISSIONING* ]] || fail "$name: POST /admin/decommission answered: $resp"
    decommissioned=1
    # Both coordinators stop assigning C (its heartbeats say DECOMMISSIONING) ...
    wait_coordinator "$ver" "$qa" 2 --without "$qc" \
      || fail "$name: coordinator A still assigns the decommissioning server C"
    wait_coordinator "$ver" "$qb" 2 --without "$qc" \
      || fail "$name: coordinator B still assigns the decommissioning server C"
    # ... while C keeps serving the paused readers.
    kill -0 "$c_pid" 2>/dev/null || fail "$name: server C stopped while the job still read from it"
  else
    log "the reduce stage did not pause (job ended or ${PAUSE_TIMEOUT}s passed)"
  fi
  finish_paused_job "$name" "$pause"
  # The job's SparkContext stopped (unregisterShuffleByAppId): C has no app left and stops.
  t0=$SECONDS
  while ((decommissioned)) && kill -0 "$c_pid" 2>/dev/null \
      && ((SECONDS - t0 < DECOMMISSION_EXIT_TIMEOUT)); do
    sleep 0.2
  done
  if ((!decommissioned)); then
    :
  elif kill -0 "$c_pid" 2>/dev/null; then
    fail "$name: server C still runs ${DECOMMISSION_EXIT_TIMEOUT}s after the job ended (log $WORK/${p}C/server.log)"
  else
    rc=0
    wait "$c_pid" 2>/dev/null || rc=$?
    forget_pid "$c_pid"
    log "server C stopped by itself $((SECONDS - t0))s after the job ended (exit $rc)"
    [[ $rc == 0 ]] || fail "$name: server C exited $rc"
    grep -q 'decommissioned: no apps left' "$WORK/${p}C/server.log" \
      || fail "$name: no 'decommissioned: no apps left' in $WORK/${p}C/server.log"
  fi
  check_alive "$name" "${p}A" "${p}B"
  stop_cluster
}

# start_coordinator NAME PORT: a coordinator-only spillway process on PORT, started from a Java
# coordinator.conf written to WORK/NAME/coordinator.conf; waits until it listens. Sets NAME_PID.
start_coordinator() {
  local name=$1 port=$2 dir="$WORK/$1"
  local logf="$dir/coordinator.log"
  mkdir -p "$dir"
  {
    echo '# A Java coordinator.conf, as the Java coordinator reads it.'
    echo "rss.rpc.server.port $port"
    echo 'rss.jetty.http.port 0'
    # A stopped server leaves the assignments this long after its last beat.
    echo "rss.coordinator.server.heartbeat.timeout $((CLUSTER_SERVER_TIMEOUT * 1000))"
    # Java's default access checkers (cluster load, quota) want nodes.max servers available.
    echo "rss.coordinator.shuffle.nodes.max ${COORDINATOR_NODES_MAX:-3}"
    # More lines (the object-storage suite's remote storage path and cluster conf).
    [[ -z ${COORDINATOR_CONF_EXTRA:-} ]] || printf '%s\n' "$COORDINATOR_CONF_EXTRA"
  } >"$dir/coordinator.conf"
  RUST_LOG=${SPILLWAY_LOG:-info} WORKER_IP=127.0.0.1 NO_COLOR=1 \
    "$SPILLWAY_BIN" --config "$dir/coordinator.conf" >"$logf" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  printf -v "${name}_PID" '%s' "$pid"
  local deadline=$((SECONDS + SERVER_START_TIMEOUT))
  until grep -q 'spillway coordinator listening' "$logf" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || ((SECONDS > deadline)); then
      echo "---- coordinator $name did not start; $logf says:"
      tail -n 20 "$logf"
      return 1
    fi
    sleep 0.2
  done
  log "coordinator $name (pid $pid) listening on 127.0.0.1:$port; log $logf"
}

# term_pid PID: SIGTERM a process we started and wait up to 15 s (then SIGKILL); returns its
# exit code (137 when it had to be killed).
term_pid() {
  local pid=$1 i rc=0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || rc=$?
  forget_pid "$pid"
  return $rc
}

# coordinators_job: the cluster job's last phase (README "Cluster job"): two coordinator-only
# processes K1 and K2 (Java coordinator.conf files) in front of servers A, B, C that host no
# coordinator; K1 stops mid-job, and the next job is assigned by K2.
coordinators_job() {
  local ver=$BASE_VER p="k_${CLIENT_TYPE}_" name pause n k1 k2 pid_var rc
  local ha_conf=(--rss-conf spark.rss.data.replica.write=2 --rss-conf spark.rss.data.replica.read=2)
  local port1 port2
  port1=$(free_port)
  port2=$(free_port)
  k1="127.0.0.1:$port1" k2="127.0.0.1:$port2"
  name="uniffle-$ver-$CLIENT_TYPE-cluster-coordinators"
  local ready=1
  start_coordinator "${p}K1" "$port1" && start_coordinator "${p}K2" "$port2" || ready=0
  for n in A B C; do
    ((ready)) || break
    SERVER_NETTY_PORT=$(free_port) start_server "$p$n" "$(free_port)" 0 "\"$k1\", \"$k2\"" \
      || ready=0
  done
  if ((!ready)) || ! wait_coordinator "$ver" "$k1" 3 || ! wait_coordinator "$ver" "$k2" 3; then
    fail "$name: cluster not ready (see above; coordinators $k1, $k2)"
    stop_cluster
    return
  fi
  COORD="$k1,$k2"
  pause="$WORK/pause-kc-$CLIENT_TYPE"
  start_paused_job "$name" "$pause" 3 "${ha_conf[@]}"
  pid_var="${p}K1_PID"
  if [[ -e $pause/paused ]]; then
    log "reduce stage paused: SIGTERM coordinator K1 (pid ${!pid_var}, $k1)"
  else
    log "the reduce stage did not pause (job ended or ${PAUSE_TIMEOUT}s passed); stopping K1 anyway"
  fi
  rc=0
  term_pid "${!pid_var}" || rc=$?
  [[ $rc == 0 ]] || fail "$name: coordinator K1 exited $rc on SIGTERM (log $WORK/${p}K1/coordinator.log)"
  finish_paused_job "$name" "$pause"
  assigned_by "$name" "$k1" || fail "$name: the assignment did not come from the first coordinator K1 $k1"
  grep -q 'shuffle assigned app_id=local-.* replica=3' "$WORK/${p}K1/coordinator.log" \
    || fail "$name: coordinator K1 logged no assignment of the job's shuffle (log $WORK/${p}K1/coordinator.log)"
  check_alive "$name" "${p}A" "${p}B" "${p}C"

  # A new job with K1 gone: the client's first coordinator refuses connections, K2 assigns.
  name="uniffle-$ver-$CLIENT_TYPE-cluster-coordinators-k2"
  run_jobs "$ver" "$name" "$REPLICA_TIMEOUT" --mode rss --coordinator "$COORD" --job replica \
    --replica 3 --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE" "${ha_conf[@]}"
  assigned_by "$name" "$k2" || fail "$name: no assignment from the second coordinator K2 $k2"
  ! assigned_by "$name" "$k1" || fail "$name: an assignment came from the stopped coordinator K1 $k1"
  grep -q 'shuffle assigned app_id=local-.* replica=3' "$WORK/${p}K2/coordinator.log" \
    || fail "$name: coordinator K2 logged no assignment (log $WORK/${p}K2/coordinator.log)"
  pid_var="${p}K2_PID"
  kill -0 "${!pid_var}" 2>/dev/null || fail "$name: coordinator K2 died (log $WORK/${p}K2/coordinator.log)"
  check_alive "$name" "${p}A" "${p}B" "${p}C"
  stop_cluster
}

# ---- HDFS --------------------------------------------------------------------------------------

HDFS_PID=""
HDFS_FD=""
HDFS_BASE=""
HDFS_KRB5_CONF=""
HDFS_KEYTABS=""
HDFS_START_TIMEOUT=180

# ---- Settings mistakes (docs/operating.md, "When it does not start or a job fails at once") ---

# start_s3proxy: S3Proxy (tests/s3/install.sh: Maven Central), the S3 server that checks request
# signatures (moto accepts any), on a free loopback port with a filesystem backend under
# WORK/s3proxy; sets S3P_ENDPOINT and S3P_DATA (a bucket is a folder there).
start_s3proxy() {
  bash "$ROOT/tests/s3/install.sh" --s3proxy >"$WORK/s3proxy-install.log" 2>&1 \
    || { tail -n 20 "$WORK/s3proxy-install.log"; return 1; }
  local port jar dir=$WORK/s3proxy
  port=$(free_port)
  jar=$(ls "$ROOT"/tests/s3/target/s3proxy-*.jar | head -1)
  S3P_DATA=$dir/data
  mkdir -p "$S3P_DATA"
  cat >"$dir/s3proxy.conf" <<CONF
s3proxy.endpoint=http://127.0.0.1:$port
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=spillway-access
s3proxy.credential=spillway-right-secret
jclouds.provider=filesystem
jclouds.filesystem.basedir=$S3P_DATA
CONF
  # Not in PIDS: stop_cluster stops those between cells, and S3Proxy serves them all.
  java -Xmx256m -XX:TieredStopAtLevel=1 -jar "$jar" --properties "$dir/s3proxy.conf" >"$dir/s3proxy.log" 2>&1 &
  S3P_PID=$!
  local deadline=$((SECONDS + 120))
  until curl -s -o /dev/null "http://127.0.0.1:$port/"; do
    ((SECONDS < deadline)) || { tail -n 20 "$dir/s3proxy.log"; return 1; }
    sleep 0.2
  done
  S3P_ENDPOINT="http://127.0.0.1:$port"
  log "S3Proxy (checks signatures) on $S3P_ENDPOINT; log $dir/s3proxy.log"
}

S3P_PID=""
stop_s3proxy() {
  if [[ -n $S3P_PID ]]; then
    stop_pid "$S3P_PID"
    S3P_PID=""
  fi
}

# refusal_cells: a wrong s3a secret (sent with the registration, Spark's own is right), a bucket
# that does not exist, and an HDFS path the server's user may not write (and, on MEMORY_HDFS
# only, a job whose storage type sends no remote path). Under MEMORY_HDFS each
# job must fail with the path and the store's answer in what the driver threw (the server
# refuses registerShuffle); under MEMORY_LOCALFILE_HDFS the same settings must pass, served
# from local disk, with one WARN per app in the server log. The released client retries a
# refused registration rss.client.assignment.retry.times (3) times, rss.client.assignment.retry
# .interval (65 s) apart; the cells serve 1 s through the coordinator's client conf, as an
# operator can for every job. Needs MiniHdfs (HDFS_URL).
refusal_cells() {
  local ver=$BASE_VER STORE_TYPE cell name prefix expect bucket=rss-refusals path
  CLIENT_TYPE=GRPC
  phase "settings mistakes: S3Proxy start"
  if ! start_s3proxy; then
    fail "settings mistakes: S3Proxy did not start"
    phase_done
    return
  fi
  phase_done
  mkdir -p "$S3P_DATA/$bucket"
  hdfs_cmd "mkdir /rss-locked hdfs 755" || fail "settings mistakes: could not prepare /rss-locked"
  local s3_right=(
    "fs.s3a.endpoint=$S3P_ENDPOINT"
    "fs.s3a.path.style.access=true"
    "fs.s3a.connection.ssl.enabled=false"
    "fs.s3a.endpoint.region=us-east-1"
    "fs.s3a.access.key=spillway-access"
    "fs.s3a.secret.key=spillway-right-secret"
  )
  local hadoop_conf="" kv
  for kv in "${s3_right[@]}"; do hadoop_conf+="\"${kv%%=*}\" = \"${kv#*=}\", "; done
  for STORE_TYPE in MEMORY_HDFS MEMORY_LOCALFILE_HDFS; do
    prefix="r_${STORE_TYPE}_"
    phase "settings mistakes, $STORE_TYPE, client $ver"
    SERVER_EXTRA_TOML=$'[hdfs_store]\ncold_storage_threshold_size = "1M"\n'"hadoop_conf = { ${hadoop_conf%, } }"
    COORDINATOR_EXTRA_TOML='client_conf = { "rss.client.assignment.retry.interval" = "1000" }'
    export STORE_TYPE SERVER_EXTRA_TOML COORDINATOR_EXTRA_TOML
    local started=0
    export HADOOP_USER_NAME=rss
    start_cluster "$ver" 1 "$prefix" && started=1
    unset SERVER_EXTRA_TOML COORDINATOR_EXTRA_TOML HADOOP_USER_NAME
    if [[ $started == 0 ]]; then
      fail "settings mistakes $STORE_TYPE: cluster not ready (coordinator $COORD)"
      stop_cluster
      phase_done
      continue
    fi
    for cell in wrong_secret missing_bucket unwritable_hdfs no_remote_path; do
      # A job without a remote path is only a mistake on a server with no local disk.
      [[ $cell == no_remote_path && $STORE_TYPE != MEMORY_HDFS ]] && continue
      local client_type=$STORE_TYPE
      [[ $cell != no_remote_path ]] || client_type=MEMORY_LOCALFILE
      local args=(--rss-conf "spark.rss.storage.type=$client_type"
        --rss-conf "spark.rss.dynamicClientConf.enabled=true")
      for kv in "${s3_right[@]}"; do args+=(--rss-conf "spark.hadoop.$kv"); done
      case $cell in
        wrong_secret)
          path=s3a://$bucket/rss
          args+=(--rss-conf "spark.rss.hadoop.fs.s3a.secret.key=spillway-rihgt-secret")
          expect="$path|SignatureDoesNotMatch|fs.s3a.secret.key" ;;
        missing_bucket)
          path=s3a://rss-no-such-bucket/rss
          expect="$path|NoSuchBucket|create the bucket" ;;
        unwritable_hdfs)
          path=$HDFS_URL/rss-locked/rss
          expect="$path|AccessControlException|write access" ;;
        no_remote_path)
          # The job's storage type and the server's disagree: no path is sent.
          path=""
          expect="MEMORY_HDFS|registered no remote storage path|spark.rss.remote.storage.path" ;;
      esac
      [[ -z $path ]] || args+=(--rss-conf "spark.rss.remote.storage.path=$path")
      name="uniffle-$ver-$STORE_TYPE-$cell"
      if [[ $STORE_TYPE == MEMORY_HDFS ]]; then
        HADOOP_USER_NAME=alice SPARK_E2E_EXTRA_CP="$ROOT/tests/s3/target/s3a-deps/*" \
          run_jobs "$ver" "$name" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
          --job empty_partitions --client-type "$CLIENT_TYPE" --expect-failure "$expect" "${args[@]}"
      else
        HADOOP_USER_NAME=alice SPARK_E2E_EXTRA_CP="$ROOT/tests/s3/target/s3a-deps/*" \
          run_jobs "$ver" "$name" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
          --job sort --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE" "${args[@]}"
      fi
    done
    stop_cluster
    local slog="$WORK/${prefix}0/server.log" n
    if grep -q 'spillway-rihgt-secret\|spillway-right-secret' "$slog"; then
      fail "settings mistakes $STORE_TYPE: an s3a secret appears in the server log ($slog)"
    fi
    # One WARN per refused app: three apps, three lines, whatever the number of registrations,
    # spills and requests.
    n=$(grep -c 'remote storage refused this app for good' "$slog" || true)
    if [[ $n != 3 ]]; then
      fail "settings mistakes $STORE_TYPE: $n 'refused this app for good' lines in $slog, want 3 (one per app)"
    else
      log "settings mistakes $STORE_TYPE: one WARN per refused app ($n lines)"
    fi
    unset STORE_TYPE
    phase_done
  done
  # A GRPC_NETTY client (the 0.10 default) against a server without a Netty port: the
  # coordinator's answer says that only the Netty tag rules the server out, and the fixes.
  phase "settings mistakes: a GRPC_NETTY client, no Netty port, client $ver"
  COORDINATOR_EXTRA_TOML='client_conf = { "rss.client.assignment.retry.interval" = "1000" }'
  SERVER_NETTY_PORT=-1
  export COORDINATOR_EXTRA_TOML SERVER_NETTY_PORT
  if start_cluster "$ver" 1 r_nonetty_; then
    run_jobs "$ver" "uniffle-$ver-netty-client-no-netty-port" "$SUITE_TIMEOUT" --mode rss \
      --coordinator "$COORD" --job empty_partitions --client-type GRPC_NETTY \
      --rss-conf "spark.rss.dynamicClientConf.enabled=true" \
      --expect-failure "GRPC_NETTY|serve no Netty data plane|spark.rss.client.type=GRPC"
  else
    fail "settings mistakes, no Netty port: cluster not ready (coordinator $COORD)"
  fi
  stop_cluster
  unset COORDINATOR_EXTRA_TOML SERVER_NETTY_PORT
  stop_s3proxy
  phase_done
}

# start_hdfs [NAME [ARGS...]]: builds (idempotent) and starts MiniHdfs under WORK/NAME (default
# hdfs) with ARGS (--secure <seconds>: kerberized, see MiniHdfs.java); sets HDFS_URL, and with
# --secure HDFS_KRB5_CONF and HDFS_KEYTABS. The launcher stops when
# its stdin closes: we hold the write end of a FIFO and close it in stop_hdfs (or by exiting).
start_hdfs() {
  if ! bash "$ROOT/tests/hdfs/install.sh" >"$WORK/hdfs-install.log" 2>&1; then
    tail -n 30 "$WORK/hdfs-install.log"
    return 1
  fi
  HDFS_BASE="$WORK/${1:-hdfs}"
  (($# > 0)) && shift
  local base=$HDFS_BASE cp="$ROOT/tests/hdfs/target/classes:$ROOT/tests/hdfs/target/deps/*"
  mkdir -p "$base"
  mkfifo "$base.in"
  java -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$cp" io.spillway.hdfs.MiniHdfs "$base/data" "$@" \
    <"$base.in" >"$base.out" 2>"$base.log" &
  HDFS_PID=$!
  exec {HDFS_FD}>"$base.in"
  local deadline=$((SECONDS + HDFS_START_TIMEOUT)) line
  while true; do
    line=$(grep -m1 '^HDFS_URL=' "$base.out" || true)
    if [[ -n $line ]]; then
      HDFS_URL=${line#HDFS_URL=}
      HDFS_KRB5_CONF=$(sed -n 's/^KRB5_CONF=//p' "$base.out")
      HDFS_KEYTABS=$(sed -n 's/^KEYTABS=//p' "$base.out")
      log "MiniHdfs (pid $HDFS_PID) at $HDFS_URL; log $base.log"
      return 0
    fi
    if ! kill -0 "$HDFS_PID" 2>/dev/null || ((SECONDS > deadline)); then
      echo "---- MiniHdfs did not start; $base.log says:"
      tail -n 30 "$base.log"
      return 1
    fi
    sleep 0.2
  done
}

# hdfs_cmd CMD: one MiniHdfs command (see MiniHdfs.java); waits for its OK, prints its ERR.
hdfs_cmd() {
  local cmd=$1 out="$HDFS_BASE.out" deadline=$((SECONDS + 60))
  echo "$cmd" >&"$HDFS_FD"
  while ((SECONDS < deadline)); do
    grep -qxF "OK $cmd" "$out" && return 0
    if grep -qF "ERR $cmd" "$out"; then
      grep -F "ERR $cmd" "$out"
      return 1
    fi
    sleep 0.2
  done
  echo "MiniHdfs: no answer to '$cmd' within 60 s"
  return 1
}

stop_hdfs() {
  if [[ -n $HDFS_FD ]]; then
    exec {HDFS_FD}>&-
    HDFS_FD=""
  fi
  if [[ -n $HDFS_PID ]]; then
    local i
    for ((i = 0; i < 150; i++)); do
      kill -0 "$HDFS_PID" 2>/dev/null || break
      sleep 0.1
    done
    stop_pid "$HDFS_PID"
    HDFS_PID=""
  fi
}

# ---- S3 (object-storage suites) -----------------------------------------------------------------

S3_ENDPOINT=""
# launch_s3 PORT: one moto S3 server on 127.0.0.1:PORT, its request log appended to WORK/s3.log
# and its pid in WORK/s3.pid (a file: the restart fault starts a new process from a subshell).
# Not in PIDS: stop_cluster stops the servers between suites, the S3 server stays up.
launch_s3() {
  local port=$1 pid deadline=$((SECONDS + 60))
  MOTO_RECORDER_FILEPATH="$WORK/s3-journal.jsonl" "$ROOT/tests/s3/target/venv/bin/python" \
    "$ROOT/tests/s3/moto_journal.py" -H 127.0.0.1 -p "$port" >>"$WORK/s3.log" 2>&1 &
  pid=$!
  echo "$pid" >"$WORK/s3.pid"
  until curl -s -o /dev/null "http://127.0.0.1:$port/"; do
    if ! kill -0 "$pid" 2>/dev/null || ((SECONDS > deadline)); then
      tail -n 20 "$WORK/s3.log"
      return 1
    fi
    sleep 0.2
  done
}

# start_s3: moto's S3 server (tests/s3/install.sh: PyPI) on a free loopback port, and the s3a jars
# for the client (tests/s3/install.sh --maven). Sets S3_ENDPOINT.
start_s3() {
  if ! bg_wait "$WORK/s3-install.log" "$WORK/s3-install.log" bash "$ROOT/tests/s3/install.sh" --maven; then
    tail -n 20 "$WORK/s3-install.log"
    return 1
  fi
  local port
  port=$(free_port)
  : >"$WORK/s3.log"
  launch_s3 "$port" || return 1
  S3_ENDPOINT="http://127.0.0.1:$port"
  log "S3 server (moto, pid $(cat "$WORK/s3.pid")) on $S3_ENDPOINT"
}

# crash_s3: SIGKILLs the S3 server (a crash: no goodbye). Its request journal (moto's recorder,
# switched on by the suite) keeps every request it took.
crash_s3() {
  local pid
  pid=$(cat "$WORK/s3.pid")
  { kill -KILL "$pid" && wait "$pid"; } 2>/dev/null || true
  log "S3 server crashed (SIGKILL, pid $pid)"
}

# revive_s3: a new S3 server process on the crashed one's port, with the journal replayed into
# it, so the objects written before the crash are back, as on a store whose disks survive a
# restart (moto keeps objects in memory). The journal is written by a wrapper that serialises
# moto's recorder (tests/s3/moto_journal.py): moto's own appends interleave under concurrent
# PUTs.
revive_s3() {
  local port=${S3_ENDPOINT##*:}
  # A kill between a record and its newline leaves a torn last line.
  sed -i '$ { /}$/!d }' "$WORK/s3-journal.jsonl"
  launch_s3 "$port" || return 1
  log "S3 server started again (pid $(cat "$WORK/s3.pid")); replaying $(wc -l <"$WORK/s3-journal.jsonl") journalled requests"
  curl -s -f -X POST "$S3_ENDPOINT/moto-api/recorder/replay-recording" -o /dev/null || return 1
  curl -s -f -X POST "$S3_ENDPOINT/moto-api/recorder/start-recording" -o /dev/null || return 1
  log "S3 server restarted: journal replayed"
}

stop_s3() {
  if [[ -f $WORK/s3.pid ]]; then
    stop_pid "$(cat "$WORK/s3.pid")"
    rm -f "$WORK/s3.pid"
  fi
}

# ---- phases ------------------------------------------------------------------------------------

log "work dir $WORK"
read -r -a CLIENT_TYPE_LIST <<<"$CLIENT_TYPES"
# The client types the suites and their cells run with; the TPC cells run with every one.
SUITE_TYPES=("${CLIENT_TYPE_LIST[@]}")
case $HALF in
  "") ;;
  1) SUITE_TYPES=("${CLIENT_TYPE_LIST[0]}") TPC_CELLS=0 TEZ=0 ;;
  2) SUITE_TYPES=("${CLIENT_TYPE_LIST[@]:1}") HDFS=0 S3=0 ;;
  *) echo "run.sh: --half takes 1 or 2" >&2; exit 2 ;;
esac
log "client versions: ${VERSION_LIST[*]}; jobs: $JOBS; client types: ${CLIENT_TYPE_LIST[*]}${HALF:+; half $HALF: suites with ${SUITE_TYPES[*]:-none}}"

BUILT=()
phase "maven build"
# Two runs at once (--half) share the builds and ~/.m2: one builds, the other then finds it built.
mkdir -p "$HERE/target"
exec {build_lock}>"$HERE/target/.build.lock"
flock "$build_lock"
if [[ $VANILLA_ONLY == 1 ]]; then
  NEED=("${VERSION_LIST[0]}")
else
  NEED=("${VERSION_LIST[@]}")
fi
for ver in "${NEED[@]}"; do
  if build_client "$ver"; then
    BUILT+=("$ver")
  else
    fail "maven build of the Uniffle $ver client project"
  fi
done
if [[ ($TEZ == 1 || $TEZ_ONLY == 1) && $VANILLA_ONLY == 0 ]] && ! build_tez; then
  fail "maven build of the Tez harness (tests/tez)"
  TEZ=0 TEZ_ONLY=0
fi
exec {build_lock}>&-
phase_done
[[ ${#BUILT[@]} -gt 0 ]] || { echo "$PASSED passed, $FAILED failed"; exit 1; }
BASE_VER=${BUILT[0]}
MASTER_LINES=()
SPARK4_LINE=""
for ver in "${BUILT[@]}"; do
  [[ $ver != master* ]] || MASTER_LINES+=("$ver")
  [[ -n $SPARK4_LINE || $(line_spark "$ver") != 4 ]] || SPARK4_LINE=$ver
done
# The TPC cells run on the first line and on the Spark 4 line (tpc.sh).
TPC_LINES="$BASE_VER${SPARK4_LINE:+ $SPARK4_LINE}"
if [[ $BUILD_ONLY == 1 ]]; then
  echo "built: ${BUILT[*]}"
  exit $((FAILED > 0))
fi

if [[ $VANILLA_ONLY == 0 ]]; then
  phase "cargo build"
  if [[ -n ${SPILLWAY_BIN_PREBUILT:-} ]]; then
    log "using $SPILLWAY_BIN as is"
  elif ! bg_wait "$WORK/cargo.log" "$WORK/cargo.log" \
      timeout "$CARGO_TIMEOUT" cargo build --locked --bin spillway; then
    tail -n 30 "$WORK/cargo.log"
    fail "cargo build"
  fi
  # Every cell below needs the server (and the integrity cell the tools binary beside it): a
  # missing one fails the run here, rather than leaving only the vanilla passes to count.
  missing=0
  for bin in "$SPILLWAY_BIN" "${SPILLWAY_BIN%/*}/spillway-bench"; do
    [[ -x $bin ]] || { fail "no executable $bin: no Spillway cell can run"; missing=1; }
  done
  phase_done
  [[ $missing == 0 ]] || finish
fi

if [[ $TPC_ONLY == 1 ]]; then
  [[ ! -x $SPILLWAY_BIN ]] || tpc_cells
  finish
fi
if [[ $TEZ_ONLY == 1 ]]; then
  [[ ! -x $SPILLWAY_BIN ]] || tez_cells
  finish
fi

BASELINE="$WORK/baseline.tsv"
BASELINE4="$WORK/baseline-spark4.tsv"
if [[ $TENANTS_ONLY == 1 ]]; then
  phase "vanilla baseline"
  run_jobs "$BASE_VER" vanilla "$SUITE_TIMEOUT" --mode vanilla --job reduce_by_key,large_records \
    --baseline-out "$BASELINE"
  phase_done
  [[ -x $SPILLWAY_BIN ]] || fail "tenants: no server binary"
  for CLIENT_TYPE in "${SUITE_TYPES[@]}"; do
    [[ ! -x $SPILLWAY_BIN ]] || tenant_cells
  done
  if [[ $HDFS == 1 && -x $SPILLWAY_BIN ]]; then
    CLIENT_TYPE=${SUITE_TYPES[0]}
    if start_hdfs; then tenant_overflow_cell; else fail "tenants: MiniHdfs did not start"; fi
    stop_hdfs
  fi
  finish
fi
if [[ $REFUSALS_ONLY == 1 ]]; then
  phase "vanilla baseline"
  run_jobs "$BASE_VER" vanilla "$SUITE_TIMEOUT" --mode vanilla --job sort --baseline-out "$BASELINE"
  phase_done
  if [[ -x $SPILLWAY_BIN ]] && start_hdfs; then
    refusal_cells
  else
    fail "settings mistakes: no server binary or MiniHdfs did not start"
  fi
  stop_hdfs
  finish
fi
# The second half starts with the TPC cells, which bring their own vanilla runs: by their end the
# first half has left the suites' baselines in the shared directory.
if [[ $HALF == 2 && $TPC_CELLS == 1 && $VANILLA_ONLY == 0 && -x $SPILLWAY_BIN ]]; then
  tpc_cells
  TPC_CELLS=0
fi
if [[ -n $BASELINES_DIR ]]; then
  mkdir -p "$BASELINES_DIR"
  BASELINE="$BASELINES_DIR/baseline.tsv"
  BASELINE4="$BASELINES_DIR/baseline-spark4.tsv"
fi
phase "vanilla baseline"
BASE_JOBS=$JOBS
if [[ $REPLICA == 1 || $RESTART == 1 || $CLUSTER == 1 || $S3 == 1 ]]; then
  BASE_JOBS="$BASE_JOBS,replica"
fi
if [[ $SMALL_STORE == 1 ]]; then
  BASE_JOBS="$BASE_JOBS,$SMALL_STORE_JOBS"
fi
if [[ $HDFS == 1 || $S3 == 1 ]]; then
  BASE_JOBS="$BASE_JOBS,$HDFS_JOBS"
fi
[[ ${#MASTER_LINES[@]} == 0 ]] || BASE_JOBS="$BASE_JOBS,integrity"
vanilla_baseline "$BASE_VER" vanilla "$BASELINE" "$BASE_JOBS"
phase_done
# The Spark 4 lines compare with Spark 4's own shuffle.
if [[ -n $SPARK4_LINE ]]; then
  phase "vanilla baseline, Spark $SPARK4_VERSION"
  vanilla_baseline "$SPARK4_LINE" vanilla-spark4 "$BASELINE4" "$(line_jobs "$SPARK4_LINE")"
  phase_done
fi

if [[ $VANILLA_ONLY == 0 && -x $SPILLWAY_BIN ]]; then
  for CLIENT_TYPE in "${SUITE_TYPES[@]}"; do
    for ver in "${BUILT[@]}"; do
      phase "rss suite, client $ver, $CLIENT_TYPE"
      if start_cluster "$ver" 1 "s${ver//[.-]/_}_${CLIENT_TYPE}_"; then
        run_jobs "$ver" "uniffle-$ver-$CLIENT_TYPE" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
          --job "$(line_jobs "$ver")" --client-type "$CLIENT_TYPE" --baseline-in "$(line_baseline "$ver")" \
          $(line_rss_conf "$ver")
        name="s${ver//[.-]/_}_${CLIENT_TYPE}_0_PID"
        if ! kill -0 "${!name}" 2>/dev/null; then
          fail "uniffle-$ver-$CLIENT_TYPE: the server died during the suite (log $WORK/s${ver//[.-]/_}_${CLIENT_TYPE}_0/server.log)"
        fi
      else
        fail "uniffle-$ver-$CLIENT_TYPE: cluster not ready (see above; coordinator $COORD)"
      fi
      stop_cluster
      phase_done
    done
    # The negative integrity cells run with the first client type only: the counts travel over
    # gRPC on both planes (getShuffleResultForMultiPart), and the suites' jobs already check them
    # against Netty reads.
    if [[ $CLIENT_TYPE == "${CLIENT_TYPE_LIST[0]}" ]]; then
      for ver in "${MASTER_LINES[@]}"; do
        integrity_cell "$ver"
      done
    fi

    if [[ $CLIENTBENCH == 1 ]]; then
      clientbench_job
    fi

    if [[ $SMALL_STORE == 1 ]]; then
      small_store_job
    fi

    if [[ $TENANTS == 1 ]]; then
      tenant_cells
    fi

    if [[ $REPLICA == 1 ]]; then
      ver=$BASE_VER
      phase "replica job, client $ver, $CLIENT_TYPE"
      if start_cluster "$ver" 2 "r_${CLIENT_TYPE}_"; then
        name="uniffle-$ver-$CLIENT_TYPE-replica"
        pause="$WORK/pause-$CLIENT_TYPE"
        start_paused_job "$name" "$pause" 2
        if [[ -e $pause/paused ]]; then
          b_pid_var="r_${CLIENT_TYPE}_1_PID" b_addr_var="r_${CLIENT_TYPE}_1_ADDR"
          b_pid=${!b_pid_var}
          log "reduce stage paused: SIGKILL server B (pid $b_pid, ${!b_addr_var})"
          sigkill_pid "$b_pid"
          log "server B is gone; resuming the reduce stage"
        else
          log "the reduce stage did not pause (job ended or ${PAUSE_TIMEOUT}s passed)"
        fi
        finish_paused_job "$name" "$pause"
        a_pid_var="r_${CLIENT_TYPE}_0_PID"
        if ! kill -0 "${!a_pid_var}" 2>/dev/null; then
          fail "$name: server A died (log $WORK/r_${CLIENT_TYPE}_0/server.log)"
        fi
      else
        fail "uniffle-$ver-$CLIENT_TYPE-replica: cluster not ready (see above; coordinator $COORD)"
      fi
      stop_cluster
      phase_done
    fi
    if [[ $RESTART == 1 ]]; then
      ver=$BASE_VER
      phase "upgrade job (--takeover mid-read), client $ver, $CLIENT_TYPE"
      if SERVER_NETTY_PORT=$(free_port) start_cluster "$ver" 1 "u_${CLIENT_TYPE}_"; then
        name="uniffle-$ver-$CLIENT_TYPE-upgrade"
        pause="$WORK/pause-up-$CLIENT_TYPE"
        start_paused_job "$name" "$pause" 1
        old_var="u_${CLIENT_TYPE}_0_PID"; old_pid=${!old_var}
        sdir="$WORK/u_${CLIENT_TYPE}_0"
        if [[ -e $pause/paused ]]; then
          log "reduce stage paused: starting the new server with --takeover (old pid $old_pid)"
          t0=$(date +%s%N)
          RUST_LOG=${SPILLWAY_LOG:-info} WORKER_IP=127.0.0.1 NO_COLOR=1 \
            "$SPILLWAY_BIN" --config "$sdir/config.toml" --takeover >"$sdir/server2.log" 2>&1 &
          new_pid=$!
          PIDS+=("$new_pid")
          deadline=$((SECONDS + SERVER_START_TIMEOUT))
          while ! grep -q 'spillway listening' "$sdir/server2.log" && kill -0 "$new_pid" 2>/dev/null \
              && ((SECONDS < deadline)); do
            sleep 0.05
          done
          t1=$(date +%s%N)
          wait "$old_pid" 2>/dev/null || true
          forget_pid "$old_pid"
          if grep -q 'spillway listening' "$sdir/server2.log"; then
            log "new server (pid $new_pid) serving $(( (t1 - t0) / 1000000 )) ms after it started; $(grep -o 'recovery done.*' "$sdir/server2.log" | head -c 300)"
          else
            fail "$name: the new server did not take over (log $sdir/server2.log)"
          fi
        else
          log "the reduce stage did not pause (job ended or ${PAUSE_TIMEOUT}s passed)"
        fi
        finish_paused_job "$name" "$pause"
        if [[ -n ${new_pid:-} ]] && ! kill -0 "$new_pid" 2>/dev/null; then
          fail "$name: the new server died (log $sdir/server2.log)"
        fi
      else
        fail "uniffle-$ver-$CLIENT_TYPE-upgrade: cluster not ready (see above; coordinator $COORD)"
      fi
      stop_cluster
      unset new_pid
      phase_done
    fi
    if [[ $CLUSTER == 1 ]]; then
      phase "cluster job, client $BASE_VER, $CLIENT_TYPE"
      cluster_job
      phase_done
      # Coordinator-only processes and their fail-over do not depend on the data plane: once.
      if [[ $CLIENT_TYPE == "${CLIENT_TYPE_LIST[0]}" ]]; then
        phase "coordinators K1 K2, $BASE_VER, $CLIENT_TYPE"
        coordinators_job
        phase_done
      fi
    fi
  done
elif [[ $VANILLA_ONLY == 0 ]]; then
  fail "no spillway binary at $SPILLWAY_BIN: RSS suites not run"
fi

if [[ $VANILLA_ONLY == 0 && $HDFS == 1 && -x $SPILLWAY_BIN ]]; then
  phase "MiniHdfs start"
  if start_hdfs; then
    phase_done
    ver=$BASE_VER
    CLIENT_TYPE=GRPC
    for STORE_TYPE in MEMORY_HDFS MEMORY_LOCALFILE_HDFS; do
      phase "hdfs suite $STORE_TYPE, client $ver"
      prefix="h_${STORE_TYPE}_"
      # MEMORY_LOCALFILE_HDFS: spills of 1 MiB and more go to HDFS, smaller ones to local files.
      # MEMORY_HDFS keeps every file pair open for 30 s (keep_open's most), so the client reads
      # files still being written: what its hsync made visible, as Hadoop's reader sees it.
      SERVER_EXTRA_TOML=$'[hdfs_store]\ncold_storage_threshold_size = "1M"'
      [[ $STORE_TYPE != MEMORY_HDFS ]] || SERVER_EXTRA_TOML+=$'\nkeep_open = "30s"'
      export STORE_TYPE SERVER_EXTRA_TOML
      # As operators run it: the remote path belongs to the server's service user (755), the
      # server runs as that user (HADOOP_USER_NAME) and the jobs as another one. Under simple
      # authentication the server writes as itself, so only it needs write access there.
      if ! hdfs_cmd "mkdir /rss-$STORE_TYPE rss 755"; then
        fail "hdfs suite $STORE_TYPE: could not prepare /rss-$STORE_TYPE"
      fi
      export HADOOP_USER_NAME=rss
      started=0
      start_cluster "$ver" 1 "$prefix" && started=1
      unset HADOOP_USER_NAME
      if [[ $started == 1 ]]; then
        name="uniffle-$ver-$STORE_TYPE"
        HADOOP_USER_NAME=alice run_jobs "$ver" "$name" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
          --job "$HDFS_JOBS" --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE" \
          --rss-conf "spark.rss.storage.type=$STORE_TYPE" \
          --rss-conf "spark.rss.remote.storage.path=$HDFS_URL/rss-$STORE_TYPE"
        pid_var="${prefix}0_PID"
        if ! kill -0 "${!pid_var}" 2>/dev/null; then
          fail "$name: the server died during the suite (log $WORK/${prefix}0/server.log)"
        fi
        stop_cluster
        # Unregistering each app deletes its HDFS files; the log line proves they existed.
        if ! grep -q 'deleted HDFS files' "$WORK/${prefix}0/server.log"; then
          fail "$name: no shuffle data went to HDFS (no 'deleted HDFS files' in $WORK/${prefix}0/server.log)"
        fi
        # ... and the client found this server's files there and read them directly.
        if ! grep -q 'HadoopClientReadHandler: Find index file' "$WORK/$name.log"; then
          fail "$name: the client read nothing from HDFS (no HadoopClientReadHandler index in $WORK/$name.log)"
        fi
        # No spill was refused for want of permission (a refused one falls back or retries).
        if grep -q 'Permission denied' "$WORK/${prefix}0/server.log"; then
          fail "$name: HDFS refused the server's writes: $(grep -m1 'Permission denied' "$WORK/${prefix}0/server.log")"
        fi
      else
        fail "uniffle-$ver-$STORE_TYPE: cluster not ready (see above; coordinator $COORD)"
        stop_cluster
      fi
      unset STORE_TYPE SERVER_EXTRA_TOML
      phase_done
    done
    [[ $TENANTS == 0 ]] || tenant_overflow_cell
    refusal_cells
  else
    fail "MiniHdfs did not start (log $WORK/hdfs.log)"
    phase_done
  fi
  stop_hdfs

  # Kerberos: a kerberized MiniHdfs with its KDC; the server logs in from rss's keytab and writes
  # as a proxy of the job's user; the job logs in as alice from her keytab, and the released
  # client reads the shuffle from HDFS through Kerberos.
  phase "MiniHdfs start (Kerberos)"
  if start_hdfs hdfs-krb --secure 3600; then
    phase_done
    ver=$BASE_VER
    CLIENT_TYPE=GRPC
    mkdir -p "$WORK/krb-hadoop"
    # The cluster's client conf: security on, and the NameNode's principal (Java clients need it
    # to authenticate the NameNode; hdfs-native takes the one the NameNode announces).
    printf '%s\n' '<configuration>' \
      '<property><name>hadoop.security.authentication</name><value>kerberos</value></property>' \
      '<property><name>dfs.namenode.kerberos.principal</name><value>hdfs/localhost@EXAMPLE.COM</value></property>' \
      '</configuration>' >"$WORK/krb-hadoop/core-site.xml"
    for STORE_TYPE in MEMORY_HDFS MEMORY_LOCALFILE_HDFS; do
      prefix="k_${STORE_TYPE}_"
      phase "hdfs suite $STORE_TYPE with Kerberos, client $ver"
      SERVER_EXTRA_TOML=$'[hdfs_store]\ncold_storage_threshold_size = "1M"\nkerberos_principal = "rss/localhost@EXAMPLE.COM"\n'"kerberos_keytab = \"$HDFS_KEYTABS/rss.keytab\""
      export STORE_TYPE SERVER_EXTRA_TOML
      started=0
      HADOOP_CONF_DIR="$WORK/krb-hadoop" KRB5_CONFIG="$HDFS_KRB5_CONF" \
        KRB5CCNAME="FILE:$WORK/krb-server-$STORE_TYPE.ccache" start_cluster "$ver" 1 "$prefix" && started=1
      if [[ $started == 1 ]]; then
        name="uniffle-$ver-$STORE_TYPE-kerberos"
        saved_opts=("${JAVA_OPTS[@]}")
        JAVA_OPTS+=("-Djava.security.krb5.conf=$HDFS_KRB5_CONF")
        SPARK_E2E_KERBEROS_PRINCIPAL="alice@EXAMPLE.COM" SPARK_E2E_KERBEROS_KEYTAB="$HDFS_KEYTABS/alice.keytab" \
          SPARK_E2E_HADOOP_CONF="$WORK/krb-hadoop" run_jobs "$ver" "$name" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
          --job "$HDFS_JOBS" --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE" \
          --rss-conf "spark.rss.storage.type=$STORE_TYPE" \
          --rss-conf "spark.rss.remote.storage.path=$HDFS_URL/rss-kerberos-$STORE_TYPE" \
          --rss-conf "spark.rss.client.remote.storage.useLocalConfAsDefault=true" \
          --rss-conf "spark.hadoop.hadoop.security.authentication=kerberos"
        JAVA_OPTS=("${saved_opts[@]}")
        slog="$WORK/${prefix}0/server.log"
        pid_var="${prefix}0_PID"
        if ! kill -0 "${!pid_var}" 2>/dev/null; then
          fail "$name: the server died during the suite (log $slog)"
        fi
        stop_cluster
        if ! grep -q 'written by the principal rss/localhost@EXAMPLE.COM as a proxy' "$slog"; then
          fail "$name: the server did not log in from its keytab (log $slog)"
        fi
        if ! grep -q 'deleted HDFS files' "$slog"; then
          fail "$name: no shuffle data went to HDFS (no 'deleted HDFS files' in $slog)"
        fi
        if ! grep -q 'HadoopClientReadHandler: Find index file' "$WORK/$name.log"; then
          fail "$name: the client read nothing from HDFS (no HadoopClientReadHandler index in $WORK/$name.log)"
        fi
      else
        fail "uniffle-$ver-$STORE_TYPE-kerberos: cluster not ready (see above; coordinator $COORD)"
        stop_cluster
      fi
      unset SERVER_EXTRA_TOML
      phase_done
    done
    unset STORE_TYPE
  else
    fail "kerberized MiniHdfs did not start (log $WORK/hdfs-krb.log)"
    phase_done
  fi
  stop_hdfs
fi

# Object storage: the remote tier on s3a:// (moto on loopback). The server writes one immutable
# object pair per flush with the s3a keys of its own [hdfs_store] hadoop_conf (Java:
# rss.server.hadoop.fs.s3a.*); the released client reads the objects itself through Hadoop's s3a
# (hadoop-aws + the AWS SDK bundle), with the same keys as spark.hadoop.fs.s3a.*.
if [[ $VANILLA_ONLY == 0 && $S3 == 1 && -x $SPILLWAY_BIN ]]; then
  phase "S3 server start"
  if start_s3; then
    phase_done
    ver=$BASE_VER
    CLIENT_TYPE=GRPC
    S3_KEYS=(
      "fs.s3a.endpoint=$S3_ENDPOINT"
      "fs.s3a.path.style.access=true"
      "fs.s3a.connection.ssl.enabled=false"
      "fs.s3a.endpoint.region=us-east-1"
      "fs.s3a.access.key=spillway"
      "fs.s3a.secret.key=spillway-e2e-secret"
    )
    hadoop_conf=""
    for kv in "${S3_KEYS[@]}"; do hadoop_conf+="\"${kv%%=*}\" = \"${kv#*=}\", "; done
    for STORE_TYPE in MEMORY_HDFS MEMORY_LOCALFILE_HDFS; do
      phase "s3 suite $STORE_TYPE, client $ver"
      prefix="o_${STORE_TYPE}_"
      bucket="rss-${STORE_TYPE,,}"
      bucket=${bucket//_/-}
      curl -s -f -X PUT "$S3_ENDPOINT/$bucket" -o /dev/null || fail "s3 suite $STORE_TYPE: could not create bucket $bucket"
      SERVER_EXTRA_TOML=$'[hdfs_store]\ncold_storage_threshold_size = "1M"\n'"hadoop_conf = { ${hadoop_conf%, } }"
      export STORE_TYPE SERVER_EXTRA_TOML
      if start_cluster "$ver" 1 "$prefix"; then
        name="uniffle-$ver-$STORE_TYPE-s3a"
        rss_s3=()
        for kv in "${S3_KEYS[@]}"; do rss_s3+=(--rss-conf "spark.hadoop.$kv"); done
        SPARK_E2E_EXTRA_CP="$ROOT/tests/s3/target/s3a-deps/*" \
          run_jobs "$ver" "$name" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
          --job "$HDFS_JOBS" --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE" \
          --rss-conf "spark.rss.storage.type=$STORE_TYPE" \
          --rss-conf "spark.rss.remote.storage.path=s3a://$bucket/rss" "${rss_s3[@]}"
        pid_var="${prefix}0_PID"
        if ! kill -0 "${!pid_var}" 2>/dev/null; then
          fail "$name: the server died during the suite (log $WORK/${prefix}0/server.log)"
        fi
        stop_cluster
        # Unregistering each app deletes its objects; the log line proves they were written.
        if ! grep -q 'deleted object-store objects' "$WORK/${prefix}0/server.log"; then
          fail "$name: no shuffle data went to S3 (no 'deleted object-store objects' in $WORK/${prefix}0/server.log)"
        fi
        # ... and the client found this server's objects there and read them through s3a: the S3
        # server logged GETs of index and data objects (the server never reads objects back).
        if ! grep -q 'HadoopClientReadHandler: Find index file' "$WORK/$name.log"; then
          fail "$name: the client read nothing from S3 (no HadoopClientReadHandler index in $WORK/$name.log)"
        fi
        for kind in index data; do
          # (werkzeug colours 206 lines, so no quote before the method)
          if ! grep -qE "GET /$bucket/rss/[^ ?]*\.$kind HTTP" "$WORK/s3.log"; then
            fail "$name: no GET of a .$kind object in the S3 server's request log ($WORK/s3.log)"
          fi
        done
        # The secret key is in the server's config and the job's: never in either log.
        if grep -q 'spillway-e2e-secret' "$WORK/${prefix}0/server.log"; then
          fail "$name: the s3a secret key appears in the server log"
        fi
      else
        fail "uniffle-$ver-$STORE_TYPE-s3a: cluster not ready (see above; coordinator $COORD)"
        stop_cluster
      fi
      unset STORE_TYPE SERVER_EXTRA_TOML
      phase_done
    done
    # The S3 server stopped mid-job and started again: the replica job (one server here) pauses
    # its map tasks halfway; the S3 server crashes (crash_s3); the maps write their second half
    # while it is down, so flushes fail on S3 and go to local disk; the reduce tasks pause before
    # their first read; a new S3 process starts with the journal replayed (revive_s3); then the
    # reduce tasks read memory, local files and the objects written before the crash. The result
    # equals vanilla Spark's, so no block was lost (a missing block fails the job: one attempt
    # per task). A 6 MiB store (sends of at most 1 MiB) that spills every partition buffer past
    # 256 KiB spills throughout the 2,000,000 records, and every batch prefers S3 (cold
    # threshold 1 byte); requests give up after 2 s, flushes after 5 s.
    phase "s3 restart suite MEMORY_LOCALFILE_HDFS, client $ver"
    STORE_TYPE=MEMORY_LOCALFILE_HDFS
    bucket=rss-restart
    prefix="or_"
    name="uniffle-$ver-$STORE_TYPE-s3a-restart"
    { curl -s -f -X POST "$S3_ENDPOINT/moto-api/recorder/reset-recording" -o /dev/null \
      && curl -s -f -X POST "$S3_ENDPOINT/moto-api/recorder/start-recording" -o /dev/null \
      && curl -s -f -X PUT "$S3_ENDPOINT/$bucket" -o /dev/null; } \
      || fail "$name: could not create bucket $bucket with the journal on"
    SERVER_EXTRA_TOML=$'[hybrid_store]\nmemory_single_buffer_max_spill_size = "256K"\n[hdfs_store]\ncold_storage_threshold_size = "1"\nwrite_timeout = "5s"\nfailure_cooldown = "2s"\n'"hadoop_conf = { ${hadoop_conf%, }, \"fs.s3a.connection.timeout\" = \"2s\", \"fs.s3a.retry.limit\" = \"1\" }"
    export STORE_TYPE SERVER_EXTRA_TOML
    if SERVER_MEMORY=6M start_cluster "$ver" 1 "$prefix"; then
      pause="$WORK/pause-s3"
      rss_s3=()
      for kv in "${S3_KEYS[@]}"; do rss_s3+=(--rss-conf "spark.hadoop.$kv"); done
      SPARK_E2E_EXTRA_CP="$ROOT/tests/s3/target/s3a-deps/*" PAUSED_AT=map/paused \
        start_paused_job "$name" "$pause" 1 --pause-stage map-and-reduce-start \
        --rss-conf spark.rss.writer.buffer.size=128k \
        --rss-conf spark.rss.client.send.size.limit=1m \
        --rss-conf "spark.rss.storage.type=$STORE_TYPE" \
        --rss-conf "spark.rss.remote.storage.path=s3a://$bucket/rss" "${rss_s3[@]}"
      if [[ -e $pause/map/paused ]]; then
        # The first half's spills may still be on their way: wait until pairs reach S3 and no
        # new one has come for a second (at most 30 s).
        prev=-1
        deadline=$((SECONDS + 30))
        while ((SECONDS < deadline)); do
          n=$(grep -cE "PUT /$bucket/rss/[^ ?]*\.index HTTP" "$WORK/s3.log" || true)
          ((n > 0 && n == prev)) && break
          prev=$n
          sleep 1
        done
        # The pairs complete on S3 before the crash (index PUT answered 200), by data object.
        grep -oE "PUT /$bucket/rss/[^ ?]*\.index HTTP/1\.[01]\" 200" "$WORK/s3.log" \
          | sed -E 's/^PUT ([^ ]*)\.index .*/\1.data/' >"$WORK/s3-before-crash.txt" || true
        puts_before=$(wc -l <"$WORK/s3-before-crash.txt")
        log "map stage paused with $puts_before object pairs on S3"
        crash_s3
        touch "$pause/map/resume"
        deadline=$((SECONDS + PAUSE_TIMEOUT))
        while [[ ! -e $pause/reduce/paused ]] && kill -0 "$jpid" 2>/dev/null && ((SECONDS < deadline)); do
          sleep 0.2
        done
        revive_s3 || fail "$name: the S3 server did not start again"
        touch "$pause/reduce/resume"
        ((puts_before > 0)) || fail "$name: no object reached S3 before the crash"
      else
        fail "$name: the map stage did not pause (job ended or ${PAUSE_TIMEOUT}s passed)"
      fi
      SPARK_E2E_EXTRA_CP="$ROOT/tests/s3/target/s3a-deps/*" finish_paused_job "$name" "$pause"
      stop_cluster
      # The outage hit flushes: they failed on S3 and went on to local disk ...
      if ! grep -q 'spill to tier failed.*tier="hdfs"' "$WORK/${prefix}0/server.log"; then
        fail "$name: no flush met the crashed S3 server (no failed remote spill in $WORK/${prefix}0/server.log)"
      fi
      # ... and the reduce tasks read every pair written before the crash from the new process.
      awk '/Running on http/ { n++ } n >= 2' "$WORK/s3.log" >"$WORK/s3-after-restart.log"
      unread=0
      while read -r key; do
        grep -qF "GET $key HTTP" "$WORK/s3-after-restart.log" || unread=$((unread + 1))
      done <"$WORK/s3-before-crash.txt"
      if ((unread > 0)); then
        fail "$name: $unread of the $puts_before data objects written before the crash were not read from the restarted S3 server ($WORK/s3.log)"
      fi
    else
      fail "$name: cluster not ready (see above; coordinator $COORD)"
      stop_cluster
    fi
    unset STORE_TYPE SERVER_EXTRA_TOML
    phase_done
    # Behind a coordinator-only process whose Java coordinator.conf gives the s3a path and, as
    # its cluster conf, the s3a keys: the client fetches both (dynamic client conf), registers
    # them with the server and reads with them. Neither the server's config nor the job's Spark
    # conf has any s3a key.
    phase "s3 suite behind a coordinator-only process, client $ver"
    STORE_TYPE=MEMORY_LOCALFILE_HDFS
    bucket=rss-coordinator-conf
    prefix="oc_"
    name="uniffle-$ver-$STORE_TYPE-s3a-coordinator"
    curl -s -f -X PUT "$S3_ENDPOINT/$bucket" -o /dev/null || fail "$name: could not create bucket $bucket"
    cport=$(free_port)
    cluster_conf="$bucket,$(IFS=,; echo "${S3_KEYS[*]}")"
    SERVER_EXTRA_TOML=$'[hdfs_store]\ncold_storage_threshold_size = "1M"'
    export STORE_TYPE SERVER_EXTRA_TOML
    if COORDINATOR_NODES_MAX=1 COORDINATOR_CONF_EXTRA="rss.coordinator.remote.storage.path s3a://$bucket/rss"$'\n'"rss.coordinator.remote.storage.cluster.conf $cluster_conf" \
        start_coordinator "${prefix}K" "$cport" \
      && start_server "${prefix}0" "$(free_port)" 0 "\"127.0.0.1:$cport\"" \
      && wait_coordinator "$ver" "127.0.0.1:$cport" 1; then
      COORD="127.0.0.1:$cport"
      SPARK_E2E_EXTRA_CP="$ROOT/tests/s3/target/s3a-deps/*" \
        run_jobs "$ver" "$name" "$SUITE_TIMEOUT" --mode rss --coordinator "$COORD" \
        --job "$HDFS_JOBS" --client-type "$CLIENT_TYPE" --baseline-in "$BASELINE" \
        --rss-conf "spark.rss.storage.type=$STORE_TYPE" \
        --rss-conf "spark.rss.dynamicClientConf.enabled=true"
      stop_cluster
      grep -q 'deleted object-store objects' "$WORK/${prefix}0/server.log" \
        || fail "$name: no shuffle data went to S3 (log $WORK/${prefix}0/server.log)"
      grep -qE "GET /$bucket/rss/[^ ?]*\.data HTTP" "$WORK/s3.log" \
        || fail "$name: the client read no data object (no GET in $WORK/s3.log)"
      if grep -q 'spillway-e2e-secret' "$WORK/${prefix}0/server.log" "$WORK/${prefix}K/coordinator.log"; then
        fail "$name: the s3a secret key appears in the server's or the coordinator's log"
      fi
    else
      fail "$name: cluster not ready (see above; coordinator 127.0.0.1:$cport)"
      stop_cluster
    fi
    unset STORE_TYPE SERVER_EXTRA_TOML
    phase_done
  else
    fail "S3 server did not start (log $WORK/s3.log)"
    phase_done
  fi
  stop_s3
fi

if [[ $TEZ == 1 && $VANILLA_ONLY == 0 && -x $SPILLWAY_BIN ]]; then
  tez_cells
fi

if [[ $TPC_CELLS == 1 && $VANILLA_ONLY == 0 && -x $SPILLWAY_BIN ]]; then
  tpc_cells
fi

finish
