package io.spillway.sparktest;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.function.LongFunction;
import java.util.zip.CRC32;

import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.functions;
import scala.Tuple2;

/**
 * Spark end-to-end jobs for Spillway.
 *
 * <p>Each job runs first on Spark's own sort shuffle ("vanilla"), then the SparkContext is stopped
 * and the same job runs through the Uniffle client ("rss", {@code RssShuffleManager}) against the
 * coordinator given with {@code --coordinator}. A job passes when both runs pass the job's own
 * checks (counts and sums known in advance, sort order, AQE plan shape) and the RSS result equals
 * the vanilla result. Output on stdout, one line per job: {@code PASS <label>/<job> ...} or
 * {@code FAIL <label>/<job>: <why>}, then {@code <label>: N passed, M failed}; the exit code is 1
 * when anything failed.
 *
 * <pre>
 *   --mode both|vanilla|rss     default both (vanilla = baseline only, no server needed)
 *   --coordinator host:port     the Uniffle coordinator (required unless --mode vanilla)
 *   --job all|name[,name...]    default all ("all" leaves out the replica and full_sends jobs)
 *   --client-type GRPC|GRPC_NETTY   spark.rss.client.type, default GRPC
 *   --replica N                 spark.rss.data.replica(.write); .read stays 1. Default 1
 *   --pause-dir DIR             replica job, rss run only: the reduce tasks write DIR/paused and
 *                               wait (at most --pause-timeout-s) for DIR/resume before reading;
 *                               integrity job: the driver pauses so between its two reads
 *   --pause-stage reduce|map|map-and-reduce-start
 *                               with --pause-dir: pause the reduce tasks mid-read (default), the
 *                               map tasks halfway through their records (mid-write), or both the
 *                               map tasks halfway (DIR/map) and the reduce tasks before their first
 *                               read (DIR/reduce), so run.sh can stop a store between the two
 *   --local-dir DIR             spark.local.dir (default: java.io.tmpdir)
 *   --label TEXT                prefix of the result lines (e.g. the client version)
 *   --baseline-out FILE         after the vanilla run, write "job TAB digest" of its passing jobs
 *   --baseline-in FILE          with --mode rss: compare with these vanilla digests instead of
 *                               running vanilla again (run.sh runs the baseline once for all
 *                               client versions)
 *   --conf k=v                  extra Spark setting for both runs (repeatable)
 *   --rss-conf k=v              extra Spark setting for the rss run only (repeatable)
 *   --expect-failure "a|b|..."  rss run only: every job must fail, and the text of what the
 *                               driver threw (every cause's message) must contain each part;
 *                               the PASS line gives the time to fail (a settings-mistake cell)
 * </pre>
 */
public final class SparkJobs {

  // ---- sizes (kept modest for a 2-core machine) ----
  static final long RBK_RECORDS = 3_000_000L;
  static final int RBK_KEYS = 500_000;
  static final int RBK_MAPS = 6;
  static final int RBK_REDUCES = 12;

  static final long SORT_RECORDS = 1_000_000L;
  static final int SORT_MAPS = 4;
  static final int SORT_REDUCES = 8;

  static final long SQL_FACTS = 2_000_000L;
  static final int SQL_FACT_MAPS = 8;
  static final int SQL_DIM_ROWS = 5_000;
  static final int SQL_CATEGORIES = 17;
  static final int SQL_SHUFFLE_PARTITIONS = 200;

  static final int TINY_RECORDS = 200_000;
  static final int TINY_MAPS = 4;
  static final int TINY_REDUCES = 2_000;

  static final int BIG_RECORDS = 256;
  static final int BIG_RECORD_BYTES = 1 << 20;
  static final int BIG_MAPS = 4;
  static final int BIG_REDUCES = 8;

  static final int EMPTYP_RECORDS = 10_000;
  static final int EMPTYP_MAPS = 8;
  static final int EMPTYP_REDUCES = 64;

  static final long REPLICA_RECORDS = 2_000_000L;
  static final int REPLICA_MAPS = 4;
  static final int REPLICA_REDUCES = 8;

  static final List<String> ALL_JOBS =
      List.of(
          "reduce_by_key",
          "sort",
          "sql_aqe_skew_join",
          "tiny_partitions",
          "large_records",
          "empty_shuffle",
          "empty_partitions");
  // full_sends: map tasks whose output the client sends in requests of its default
  // rss.client.send.size.limit (16 MiB), for the small-store cells (issue 34).
  static final int FULL_RECORDS = 1_200_000;
  static final int FULL_RECORD_BYTES = 200;
  static final int FULL_MAPS = 6;
  static final int FULL_REDUCES = 32;

  static final List<String> EXTRA_JOBS = List.of("replica", "full_sends", "integrity");

  /** What one run of a job produced: a digest to compare across modes, and broken checks. */
  static final class Outcome {
    final String digest;
    final List<String> problems;

    Outcome(String digest, List<String> problems) {
      this.digest = digest;
      this.problems = problems;
    }
  }

  /** Collects the checks of one job run. */
  static final class Checks {
    final List<String> problems = new ArrayList<>();

    void eq(String what, Object expected, Object actual) {
      if (!expected.equals(actual)) {
        problems.add(what + ": expected " + expected + ", got " + actual);
      }
    }

    void that(String what, boolean ok) {
      if (!ok) {
        problems.add(what);
      }
    }

    Outcome done(String digest) {
      return new Outcome(digest, problems);
    }
  }

  final Map<String, String> opts = new LinkedHashMap<>();
  final List<String> confs = new ArrayList<>();
  final List<String> rssConfs = new ArrayList<>();
  /** Per job, every message in the cause chain of what the driver threw (--expect-failure). */
  final Map<String, String> thrownText = new LinkedHashMap<>();

  public static void main(String[] args) throws Exception {
    loginFromKeytab();
    SparkJobs jobs = new SparkJobs();
    jobs.parse(args);
    int failed = jobs.runAll();
    System.exit(failed == 0 ? 0 : 1);
  }

  /**
   * With SPARK_E2E_KERBEROS_PRINCIPAL and SPARK_E2E_KERBEROS_KEYTAB set, the job runs as that
   * Kerberos user, logged in from the keytab as spark-submit --principal/--keytab would do, with
   * Hadoop security on for every Hadoop client of this JVM (the Uniffle client's HDFS reads).
   */
  static void loginFromKeytab() throws java.io.IOException {
    String principal = System.getenv("SPARK_E2E_KERBEROS_PRINCIPAL");
    String keytab = System.getenv("SPARK_E2E_KERBEROS_KEYTAB");
    if (principal == null || keytab == null) {
      return;
    }
    org.apache.hadoop.conf.Configuration conf = new org.apache.hadoop.conf.Configuration();
    conf.set("hadoop.security.authentication", "kerberos");
    org.apache.hadoop.security.UserGroupInformation.setConfiguration(conf);
    org.apache.hadoop.security.UserGroupInformation.loginUserFromKeytab(principal, keytab);
    System.err.println(
        "==== Kerberos login: "
            + org.apache.hadoop.security.UserGroupInformation.getLoginUser());
  }

  void parse(String[] args) {
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (!a.startsWith("--") || i + 1 >= args.length) {
        usage("bad argument " + a);
      }
      String v = args[++i];
      switch (a) {
        case "--conf":
          confs.add(v);
          break;
        case "--rss-conf":
          rssConfs.add(v);
          break;
        case "--mode":
        case "--coordinator":
        case "--job":
        case "--client-type":
        case "--replica":
        case "--pause-dir":
        case "--pause-timeout-s":
        case "--pause-stage":
        case "--local-dir":
        case "--label":
        case "--baseline-in":
        case "--baseline-out":
        case "--expect-failure":
          opts.put(a.substring(2), v);
          break;
        default:
          usage("unknown option " + a);
      }
    }
    String mode = opt("mode", "both");
    if (!List.of("both", "vanilla", "rss").contains(mode)) {
      usage("--mode must be both, vanilla or rss");
    }
    if (!List.of("reduce", "map", "map-and-reduce-start").contains(opt("pause-stage", "reduce"))) {
      usage("--pause-stage must be reduce, map or map-and-reduce-start");
    }
    if (!mode.equals("vanilla") && !opts.containsKey("coordinator")) {
      usage("--coordinator host:port is required unless --mode vanilla");
    }
  }

  static void usage(String why) {
    System.err.println("SparkJobs: " + why);
    System.err.println(
        "usage: SparkJobs [--mode both|vanilla|rss] [--coordinator host:port] [--job all|a,b]"
            + " [--client-type GRPC|GRPC_NETTY] [--replica N] [--pause-dir DIR]"
            + " [--local-dir DIR] [--label TEXT] [--conf k=v]... [--rss-conf k=v]...");
    System.exit(2);
  }

  String opt(String k, String dflt) {
    return opts.getOrDefault(k, dflt);
  }

  List<String> selectedJobs() {
    String j = opt("job", "all");
    List<String> out = new ArrayList<>();
    for (String name : j.split(",")) {
      name = name.trim();
      if (name.equals("all")) {
        out.addAll(ALL_JOBS);
      } else if (!ALL_JOBS.contains(name) && !EXTRA_JOBS.contains(name)) {
        usage("unknown job " + name + "; jobs: " + ALL_JOBS + " + " + EXTRA_JOBS);
      } else {
        out.add(name);
      }
    }
    // A job named twice (run.sh adds the small-store jobs to the baseline's list) runs once.
    return new ArrayList<>(new java.util.LinkedHashSet<>(out));
  }

  int runAll() {
    String mode = opt("mode", "both");
    String label = opt("label", "spark");
    List<String> jobs = selectedJobs();
    Map<String, Outcome> vanilla = new LinkedHashMap<>();
    Map<String, Outcome> rss = new LinkedHashMap<>();
    Map<String, String> vanillaErrors = new LinkedHashMap<>();
    Map<String, String> rssErrors = new LinkedHashMap<>();
    Map<String, Long> vanillaMs = new LinkedHashMap<>();
    Map<String, Long> rssMs = new LinkedHashMap<>();

    if (!mode.equals("rss")) {
      runMode(false, jobs, vanilla, vanillaErrors, vanillaMs);
      if (opts.containsKey("baseline-out")) {
        writeBaseline(Paths.get(opts.get("baseline-out")), vanilla);
      }
    }
    Map<String, String> baseline = new LinkedHashMap<>();
    if (mode.equals("rss") && opts.containsKey("baseline-in")) {
      baseline = readBaseline(Paths.get(opts.get("baseline-in")));
    }
    if (!mode.equals("vanilla")) {
      runMode(true, jobs, rss, rssErrors, rssMs);
    }

    int passed = 0;
    int failed = 0;
    if (opts.containsKey("expect-failure")) {
      for (String job : jobs) {
        String text = thrownText.get(job);
        List<String> why = new ArrayList<>();
        if (text == null) {
          why.add("the job did not fail");
        } else {
          for (String part : opts.get("expect-failure").split("\\|")) {
            if (!text.contains(part)) {
              why.add("what the driver threw does not name '" + part + "'");
            }
          }
        }
        String time = String.format(Locale.ROOT, " failed_after=%.1fs", rssMs.getOrDefault(job, 0L) / 1000.0);
        if (why.isEmpty()) {
          passed++;
          System.out.println("PASS " + label + "/" + job + time + " driver saw: "
              + abbrev(firstLine(text.substring(Math.max(0, text.indexOf("remote storage"))))));
        } else {
          failed++;
          System.out.println("FAIL " + label + "/" + job + ": " + String.join("; ", why) + time
              + (text == null ? "" : " (driver saw: " + abbrev(text.replace('\n', ' ')) + ")"));
        }
      }
      System.out.println(label + ": " + passed + " passed, " + failed + " failed");
      System.out.flush();
      return failed;
    }
    for (String job : jobs) {
      List<String> why = new ArrayList<>();
      if (!mode.equals("rss")) {
        collect("vanilla", job, vanilla, vanillaErrors, why);
      }
      if (!mode.equals("vanilla")) {
        collect("rss", job, rss, rssErrors, why);
      }
      if (mode.equals("both") && vanilla.containsKey(job) && rss.containsKey(job)) {
        String v = vanilla.get(job).digest;
        String r = rss.get(job).digest;
        if (!v.equals(r)) {
          why.add("rss result differs from vanilla: vanilla=" + abbrev(v) + " rss=" + abbrev(r));
        }
      }
      if (mode.equals("rss") && opts.containsKey("baseline-in") && rss.containsKey(job)) {
        String v = baseline.get(job);
        String r = rss.get(job).digest;
        if (v == null) {
          why.add("no passing vanilla baseline for this job in " + opts.get("baseline-in"));
        } else if (!v.equals(r)) {
          why.add("rss result differs from the vanilla baseline: vanilla=" + abbrev(v) + " rss="
              + abbrev(r));
        }
      }
      StringBuilder times = new StringBuilder();
      if (vanillaMs.containsKey(job)) {
        times.append(String.format(Locale.ROOT, " vanilla=%.1fs", vanillaMs.get(job) / 1000.0));
      }
      if (rssMs.containsKey(job)) {
        times.append(String.format(Locale.ROOT, " rss=%.1fs", rssMs.get(job) / 1000.0));
      }
      if (why.isEmpty()) {
        passed++;
        Outcome o = mode.equals("vanilla") ? vanilla.get(job) : rss.get(job);
        System.out.println("PASS " + label + "/" + job + times + " digest=" + abbrev(o.digest));
      } else {
        failed++;
        System.out.println("FAIL " + label + "/" + job + ": " + String.join("; ", why) + times);
      }
    }
    System.out.println(label + ": " + passed + " passed, " + failed + " failed");
    System.out.flush();
    return failed;
  }

  static void writeBaseline(Path file, Map<String, Outcome> vanilla) {
    StringBuilder b = new StringBuilder();
    for (Map.Entry<String, Outcome> e : vanilla.entrySet()) {
      if (e.getValue().problems.isEmpty()) {
        b.append(e.getKey()).append('\t').append(e.getValue().digest).append('\n');
      }
    }
    try {
      Files.writeString(file, b.toString());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static Map<String, String> readBaseline(Path file) {
    Map<String, String> m = new LinkedHashMap<>();
    try {
      for (String line : Files.readAllLines(file)) {
        int tab = line.indexOf('\t');
        if (tab > 0) {
          m.put(line.substring(0, tab), line.substring(tab + 1));
        }
      }
    } catch (IOException e) {
      System.err.println("cannot read baseline " + file + ": " + e);
    }
    return m;
  }

  static void collect(
      String mode,
      String job,
      Map<String, Outcome> outcomes,
      Map<String, String> errors,
      List<String> why) {
    if (errors.containsKey(job)) {
      why.add(mode + " run threw " + errors.get(job));
    } else if (!outcomes.containsKey(job)) {
      why.add(mode + " run did not happen");
    } else {
      for (String p : outcomes.get(job).problems) {
        why.add(mode + ": " + p);
      }
    }
  }

  static String abbrev(String s) {
    return s.length() <= 160 ? s : s.substring(0, 157) + "...";
  }

  void runMode(
      boolean useRss,
      List<String> jobs,
      Map<String, Outcome> out,
      Map<String, String> errors,
      Map<String, Long> millis) {
    String m = useRss ? "rss" : "vanilla";
    SparkSession spark;
    try {
      spark = SparkSession.builder().config(sparkConf(useRss)).getOrCreate();
    } catch (Throwable t) {
      t.printStackTrace();
      for (String job : jobs) {
        errors.put(job, "SparkSession start failed: " + describe(t));
      }
      return;
    }
    try {
      for (String job : jobs) {
        System.err.println("==== " + m + " " + job + " start");
        long t0 = System.nanoTime();
        try {
          // SQL settings a previous job changed must not leak into the next one.
          spark.conf().set("spark.sql.adaptive.enabled", "false");
          spark.sparkContext().setJobGroup(job, job, false);
          Outcome o = runJob(job, spark, useRss);
          out.put(job, o);
        } catch (Throwable t) {
          t.printStackTrace();
          errors.put(job, describe(t));
          StringBuilder all = new StringBuilder();
          for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            all.append(c).append('\n');
          }
          thrownText.put(job, all.toString());
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        millis.put(job, ms);
        System.err.println("==== " + m + " " + job + " done in " + ms + " ms");
        System.out.println(
            String.format(Locale.ROOT, "  ran %s/%s in %.1fs%s", m, job, ms / 1000.0,
                errors.containsKey(job) ? " (threw)" : ""));
        System.out.flush();
      }
    } finally {
      long t0 = System.nanoTime();
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
      System.err.println(
          "==== " + m + " SparkSession stopped in " + (System.nanoTime() - t0) / 1_000_000 + " ms");
    }
  }

  static String describe(Throwable t) {
    Throwable root = t;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String msg = t.getClass().getSimpleName() + ": " + firstLine(t.getMessage());
    if (root != t) {
      msg += " (root cause " + root.getClass().getSimpleName() + ": " + firstLine(root.getMessage())
          + ")";
    }
    return msg;
  }

  static String firstLine(String s) {
    if (s == null) {
      return "";
    }
    int nl = s.indexOf('\n');
    String line = nl < 0 ? s : s.substring(0, nl);
    return line.length() > 300 ? line.substring(0, 300) + "..." : line;
  }

  SparkConf sparkConf(boolean useRss) {
    SparkConf conf =
        new SparkConf()
            .setMaster("local[2]")
            .setAppName("spillway-e2e-" + (useRss ? "rss" : "vanilla"))
            .set("spark.ui.enabled", "false")
            .set("spark.driver.host", "127.0.0.1")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.default.parallelism", "4")
            .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
            .set("spark.shuffle.service.enabled", "false")
            .set("spark.sql.adaptive.localShuffleReader.enabled", "false")
            // local[2] = one attempt per task: an RSS error fails the job instead of hiding
            // behind a retry.
            .set("spark.task.maxFailures", "1")
            .set("spark.stage.maxConsecutiveAttempts", "1");
    if (opts.containsKey("local-dir")) {
      conf.set("spark.local.dir", opts.get("local-dir"));
    }
    if (useRss) {
      String replica = opt("replica", "1");
      conf.set("spark.shuffle.manager", "org.apache.spark.shuffle.RssShuffleManager")
          .set("spark.rss.coordinator.quorum", opts.get("coordinator"))
          .set("spark.rss.storage.type", "MEMORY_LOCALFILE")
          .set("spark.rss.client.type", opt("client-type", "GRPC"))
          .set("spark.rss.data.replica", replica)
          .set("spark.rss.data.replica.write", replica)
          .set("spark.rss.data.replica.read", "1")
          .set("spark.rss.dynamicClientConf.enabled", "false")
          // Fail in seconds, not minutes, when no server can be assigned.
          .set("spark.rss.client.assignment.retry.times", "2")
          .set("spark.rss.client.assignment.retry.interval", "3000")
          // Small read buffer: several getMemoryShuffleData rounds and index segments per
          // partition instead of one.
          .set("spark.rss.client.read.buffer.size", "1m")
          .set("spark.rss.heartbeat.interval", "5000");
    }
    for (String kv : confs) {
      setKv(conf, kv);
    }
    if (useRss) {
      for (String kv : rssConfs) {
        setKv(conf, kv);
      }
    }
    return conf;
  }

  static void setKv(SparkConf conf, String kv) {
    int eq = kv.indexOf('=');
    if (eq <= 0) {
      usage("--conf wants key=value, got " + kv);
    }
    conf.set(kv.substring(0, eq), kv.substring(eq + 1));
  }

  Outcome runJob(String job, SparkSession spark, boolean useRss) throws Exception {
    JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    switch (job) {
      case "reduce_by_key":
        return reduceByKey(sc);
      case "sort":
        return sort(sc);
      case "sql_aqe_skew_join":
        return sqlAqeSkewJoin(spark);
      case "tiny_partitions":
        return tinyPartitions(sc);
      case "large_records":
        return largeRecords(sc);
      case "empty_shuffle":
        return emptyShuffle(sc);
      case "empty_partitions":
        return emptyPartitions(sc);
      case "full_sends":
        return fullSends(sc);
      case "replica":
        return replica(sc, useRss ? opts.get("pause-dir") : null,
            Long.parseLong(opt("pause-timeout-s", "180")), opt("pause-stage", "reduce"));
      case "integrity":
        return integrity(sc, useRss ? opts.get("pause-dir") : null,
            Long.parseLong(opt("pause-timeout-s", "180")));
      default:
        throw new IllegalArgumentException(job);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // helpers

  /** SplitMix64 finaliser: a bijection on longs, so mixed keys are unique. */
  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  /** Partition indexes 0..n-1, one per partition, to generate data on the executors. */
  static JavaRDD<Integer> seeds(JavaSparkContext sc, int n) {
    List<Integer> l = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      l.add(i);
    }
    return sc.parallelize(l, n);
  }

  /** The i-th slice [lo, hi) of [0, total) cut into n slices. */
  static long sliceLo(long total, int n, int i) {
    return total * i / n;
  }

  /** f(lo), f(lo+1), ... f(hi-1), generated lazily so a map task holds one record at a time. */
  static <T> Iterator<T> gen(long lo, long hi, LongFunction<T> f) {
    return new Iterator<T>() {
      long next = lo;

      @Override
      public boolean hasNext() {
        return next < hi;
      }

      @Override
      public T next() {
        if (next >= hi) {
          throw new NoSuchElementException();
        }
        return f.apply(next++);
      }
    };
  }

  // ---------------------------------------------------------------------------------------------
  // jobs

  /**
   * 3,000,000 (key, value) records, key = i mod 500,000, value = i, from 6 map tasks into 12 reduce
   * partitions. The keys of one map task are distinct, so map-side combining removes nothing and
   * all 3M records cross the shuffle. Every key's sum is known: k*c + K*c(c-1)/2 with c = 6.
   */
  static Outcome reduceByKey(JavaSparkContext sc) {
    final long n = RBK_RECORDS;
    final int keys = RBK_KEYS;
    final int maps = RBK_MAPS;
    JavaPairRDD<Long, Long> pairs =
        seeds(sc, maps)
            .flatMapToPair(
                p ->
                    gen(sliceLo(n, maps, p), sliceLo(n, maps, p + 1),
                        i -> new Tuple2<>(i % keys, i)));
    JavaPairRDD<Long, Long> sums = pairs.reduceByKey(Long::sum, RBK_REDUCES);
    final long c = n / keys;
    // (count, wrong sums, digest, total)
    long[] r =
        sums.mapPartitions(
                it -> {
                  long count = 0;
                  long wrong = 0;
                  long digest = 0;
                  long total = 0;
                  while (it.hasNext()) {
                    Tuple2<Long, Long> t = it.next();
                    long k = t._1;
                    long expect = k * c + (long) keys * c * (c - 1) / 2;
                    if (t._2 != expect) {
                      wrong++;
                    }
                    count++;
                    total += t._2;
                    digest += mix(k * 0x9E3779B97F4A7C15L + t._2);
                  }
                  return Collections.singletonList(new long[] {count, wrong, digest, total})
                      .iterator();
                })
            .reduce((a, b) -> new long[] {a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]});
    Checks ck = new Checks();
    ck.eq("distinct keys", (long) keys, r[0]);
    ck.eq("keys with a wrong sum", 0L, r[1]);
    ck.eq("sum of all values", n * (n - 1) / 2, r[3]);
    return ck.done("keys=" + r[0] + " digest=" + Long.toHexString(r[2]));
  }

  /**
   * 1,000,000 records (key = mix(i), value = i) sorted by key into 8 range partitions. Checks the
   * global order (within and across partitions), that every record kept its value, and an
   * order-sensitive hash of the whole output sequence.
   */
  static Outcome sort(JavaSparkContext sc) {
    final long n = SORT_RECORDS;
    final int maps = SORT_MAPS;
    JavaPairRDD<Long, Long> pairs =
        seeds(sc, maps)
            .flatMapToPair(
                p ->
                    gen(sliceLo(n, maps, p), sliceLo(n, maps, p + 1),
                        i -> new Tuple2<>(mix(i), i)));
    final long base = 1_000_003L;
    // per partition: index, count, first, last, unsorted pairs, bad values, hash, base^count
    List<long[]> parts =
        pairs
            .sortByKey(true, SORT_REDUCES)
            .mapPartitionsWithIndex(
                (idx, it) -> {
                  long count = 0;
                  long first = 0;
                  long last = 0;
                  long unsorted = 0;
                  long badValues = 0;
                  long hash = 0;
                  long pow = 1;
                  while (it.hasNext()) {
                    Tuple2<Long, Long> t = it.next();
                    if (count == 0) {
                      first = t._1;
                    } else if (t._1 < last) {
                      unsorted++;
                    }
                    if (mix(t._2) != t._1) {
                      badValues++;
                    }
                    last = t._1;
                    hash = hash * base + t._1;
                    pow *= base;
                    count++;
                  }
                  return Collections.singletonList(
                          new long[] {idx, count, first, last, unsorted, badValues, hash, pow})
                      .iterator();
                },
                true)
            .collect();
    List<long[]> sorted = new ArrayList<>(parts);
    sorted.sort((a, b) -> Long.compare(a[0], b[0]));
    Checks ck = new Checks();
    long total = 0;
    long unsorted = 0;
    long bad = 0;
    long hash = 0;
    long boundaryViolations = 0;
    Long prevLast = null;
    for (long[] p : sorted) {
      total += p[1];
      unsorted += p[4];
      bad += p[5];
      hash = hash * p[7] + p[6];
      if (p[1] > 0) {
        if (prevLast != null && p[2] < prevLast) {
          boundaryViolations++;
        }
        prevLast = p[3];
      }
    }
    ck.eq("records", n, total);
    ck.eq("out-of-order neighbours inside partitions", 0L, unsorted);
    ck.eq("partitions starting below the previous partition's last key", 0L, boundaryViolations);
    ck.eq("records whose value does not match the key", 0L, bad);
    return ck.done("records=" + total + " orderhash=" + Long.toHexString(hash));
  }

  /**
   * SQL join + aggregate with AQE: 2,000,000 fact rows (8 map tasks; half of them have key 0, the
   * rest key = id mod 5000) joined with 5,000 dim rows by sort-merge join, grouped into 17
   * categories. 200 shuffle partitions, advisory size 256 KiB, skew threshold 1 MiB, factor 2:
   * the key-0 partition is split by map ranges (skew join) and the small partitions are coalesced
   * into partition ranges. The job fails unless the final plan shows both.
   */
  static Outcome sqlAqeSkewJoin(SparkSession spark) {
    spark.conf().set("spark.sql.adaptive.enabled", "true");
    spark.conf().set("spark.sql.adaptive.coalescePartitions.enabled", "true");
    spark.conf().set("spark.sql.adaptive.coalescePartitions.parallelismFirst", "false");
    spark.conf().set("spark.sql.adaptive.coalescePartitions.minPartitionSize", "1k");
    spark.conf().set("spark.sql.adaptive.advisoryPartitionSizeInBytes", "256k");
    spark.conf().set("spark.sql.adaptive.skewJoin.enabled", "true");
    spark.conf().set("spark.sql.adaptive.skewJoin.skewedPartitionFactor", "2");
    spark.conf().set("spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "1m");
    spark.conf().set("spark.sql.adaptive.localShuffleReader.enabled", "false");
    spark.conf().set("spark.sql.autoBroadcastJoinThreshold", "-1");
    spark.conf().set("spark.sql.adaptive.autoBroadcastJoinThreshold", "-1");
    spark.conf().set("spark.sql.shuffle.partitions", String.valueOf(SQL_SHUFFLE_PARTITIONS));
    try {
      Dataset<Row> facts =
          spark
              .range(0, SQL_FACTS, 1, SQL_FACT_MAPS)
              .selectExpr(
                  "CASE WHEN id % 2 = 0 THEN 0 ELSE id % " + SQL_DIM_ROWS + " END AS fkey",
                  "id AS fid");
      Dataset<Row> dim =
          spark
              .range(0, SQL_DIM_ROWS, 1, 2)
              .selectExpr(
                  "id AS dkey", "id % " + SQL_CATEGORIES + " AS cat", "id * 3 AS weight");
      Dataset<Row> result =
          facts
              .join(dim, facts.col("fkey").equalTo(dim.col("dkey")))
              .groupBy("cat")
              .agg(
                  functions.count(functions.lit(1)).alias("n"),
                  functions.sum("fid").alias("sum_fid"),
                  functions.sum("weight").alias("sum_weight"))
              .orderBy("cat");
      List<Row> rows = result.collectAsList();
      String plan = result.queryExecution().executedPlan().toString();
      Checks ck = new Checks();
      long n = 0;
      long sumFid = 0;
      StringBuilder digest = new StringBuilder();
      long prevCat = -1;
      for (Row r : rows) {
        long cat = r.getLong(0);
        ck.that("categories out of order at " + cat, cat > prevCat);
        prevCat = cat;
        n += r.getLong(1);
        sumFid += r.getLong(2);
        digest.append(cat).append(':').append(r.getLong(1)).append(':').append(r.getLong(2))
            .append(':').append(r.getLong(3)).append(' ');
      }
      ck.eq("categories", (long) SQL_CATEGORIES, (long) rows.size());
      ck.eq("joined rows", SQL_FACTS, n);
      ck.eq("sum of fact ids", SQL_FACTS * (SQL_FACTS - 1) / 2, sumFid);
      ck.that("AQE did not split the skewed partition (no skew=true in the final plan)",
          plan.contains("skew=true"));
      ck.that("AQE did not coalesce partitions (no 'coalesced' AQEShuffleRead in the final plan)",
          plan.contains("coalesced"));
      ck.that("final plan has a local shuffle read", !plan.contains("AQEShuffleRead local"));
      System.err.println("sql_aqe_skew_join final plan:\n" + plan);
      return ck.done(digest.toString().trim());
    } finally {
      spark.conf().unset("spark.sql.shuffle.partitions");
      spark.conf().set("spark.sql.adaptive.enabled", "false");
    }
  }

  /**
   * 200,000 records from 4 map tasks into 2,000 hash partitions (100 records each, keys i with
   * i mod 2000 = partition). Checks every partition's count, sum and key placement.
   */
  static Outcome tinyPartitions(JavaSparkContext sc) {
    final int n = TINY_RECORDS;
    final int maps = TINY_MAPS;
    final int reduces = TINY_REDUCES;
    JavaPairRDD<Integer, Integer> pairs =
        seeds(sc, maps)
            .flatMapToPair(
                p ->
                    gen(sliceLo(n, maps, p), sliceLo(n, maps, p + 1),
                        i -> new Tuple2<>((int) i, (int) i * 7)));
    List<long[]> parts =
        pairs
            .partitionBy(new HashPartitioner(reduces))
            .mapPartitionsWithIndex(
                (idx, it) -> {
                  long count = 0;
                  long sum = 0;
                  long misplaced = 0;
                  while (it.hasNext()) {
                    Tuple2<Integer, Integer> t = it.next();
                    count++;
                    sum += t._2;
                    if (t._1 % reduces != idx || t._2 != t._1 * 7) {
                      misplaced++;
                    }
                  }
                  return Collections.singletonList(new long[] {idx, count, sum, misplaced})
                      .iterator();
                },
                true)
            .collect();
    Checks ck = new Checks();
    ck.eq("reduce partitions", (long) reduces, (long) parts.size());
    long total = 0;
    long misplaced = 0;
    long wrongCounts = 0;
    long digest = 0;
    for (long[] p : parts) {
      total += p[1];
      misplaced += p[3];
      if (p[1] != n / reduces) {
        wrongCounts++;
      }
      digest += mix(p[0] * 31 + p[1]) ^ mix(p[2]);
    }
    ck.eq("records", (long) n, total);
    ck.eq("partitions without exactly " + n / reduces + " records", 0L, wrongCounts);
    ck.eq("records in the wrong partition or with a wrong value", 0L, misplaced);
    return ck.done("partitions=" + parts.size() + " digest=" + Long.toHexString(digest));
  }

  /** Deterministic pseudo-random content of big record i. */
  static byte[] bigRecord(int i) {
    byte[] b = new byte[BIG_RECORD_BYTES];
    long s = mix(i + 1L);
    for (int off = 0; off < b.length; off += 8) {
      s = mix(s);
      for (int k = 0; k < 8 && off + k < b.length; k++) {
        b[off + k] = (byte) (s >>> (8 * k));
      }
    }
    return b;
  }

  /**
   * 256 records of 1 MiB each (random bytes, 256 MiB in total) from 4 map tasks into 8 hash
   * partitions. Every record is compared with its regenerated content on the reduce side.
   */
  /**
   * Map outputs of 40 MB each over 32 partitions: 1.25 MB a partition stays under the client's
   * per-partition buffer (rss.writer.buffer.size, 3 MiB), so each map task sends its whole output
   * when it ends, in requests as large as rss.client.send.size.limit allows (16 MiB). On a
   * 64 MiB store (12.8 MiB above its 0.8 high watermark) such requests once stalled the job on
   * NO_BUFFER (issue 34).
   */
  static Outcome fullSends(JavaSparkContext sc) {
    final int n = FULL_RECORDS;
    final int maps = FULL_MAPS;
    JavaPairRDD<Integer, byte[]> recs =
        seeds(sc, maps)
            .flatMapToPair(
                p ->
                    gen(sliceLo(n, maps, p), sliceLo(n, maps, p + 1),
                        i -> new Tuple2<>((int) i, fullRecord((int) i))));
    long[] r =
        recs.partitionBy(new HashPartitioner(FULL_REDUCES))
            .mapPartitions(
                it -> {
                  long count = 0;
                  long bad = 0;
                  long digest = 0;
                  while (it.hasNext()) {
                    Tuple2<Integer, byte[]> t = it.next();
                    count++;
                    if (!Arrays.equals(t._2, fullRecord(t._1))) {
                      bad++;
                    }
                    digest += mix(t._1 * 31L + t._2.length);
                  }
                  return Collections.singletonList(new long[] {count, bad, digest}).iterator();
                })
            .reduce((a, b) -> new long[] {a[0] + b[0], a[1] + b[1], a[2] + b[2]});
    Checks ck = new Checks();
    ck.eq("records", (long) n, r[0]);
    ck.eq("records with wrong content", 0L, r[1]);
    return ck.done("records=" + r[0] + " digest=" + Long.toHexString(r[2]));
  }

  static byte[] fullRecord(int i) {
    byte[] b = new byte[FULL_RECORD_BYTES];
    long s = mix(i + 7L);
    for (int off = 0; off < b.length; off += 8) {
      s = mix(s);
      for (int k = 0; k < 8 && off + k < b.length; k++) {
        b[off + k] = (byte) (s >>> (8 * k));
      }
    }
    return b;
  }

  static Outcome largeRecords(JavaSparkContext sc) {
    final int n = BIG_RECORDS;
    final int maps = BIG_MAPS;
    JavaPairRDD<Integer, byte[]> recs =
        seeds(sc, maps)
            .flatMapToPair(
                p ->
                    gen(sliceLo(n, maps, p), sliceLo(n, maps, p + 1),
                        i -> new Tuple2<>((int) i, bigRecord((int) i))));
    long[] r =
        recs.partitionBy(new HashPartitioner(BIG_REDUCES))
            .mapPartitions(
                it -> {
                  long count = 0;
                  long bad = 0;
                  long digest = 0;
                  long bytes = 0;
                  while (it.hasNext()) {
                    Tuple2<Integer, byte[]> t = it.next();
                    count++;
                    bytes += t._2.length;
                    if (!Arrays.equals(t._2, bigRecord(t._1))) {
                      bad++;
                    }
                    CRC32 crc = new CRC32();
                    crc.update(t._2);
                    digest += mix(t._1 * 0x100000000L + crc.getValue());
                  }
                  return Collections.singletonList(new long[] {count, bad, digest, bytes})
                      .iterator();
                })
            .reduce((a, b) -> new long[] {a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]});
    Checks ck = new Checks();
    ck.eq("records", (long) n, r[0]);
    ck.eq("bytes", (long) n * BIG_RECORD_BYTES, r[3]);
    ck.eq("records with wrong content", 0L, r[1]);
    return ck.done("records=" + r[0] + " digest=" + Long.toHexString(r[2]));
  }

  /**
   * Three empty shuffles: an RDD with no partitions (no map task), one with 4 empty partitions
   * (map tasks that write nothing), both reduced into 8 partitions, and an empty Dataset
   * aggregated with AQE off.
   */
  static Outcome emptyShuffle(JavaSparkContext sc) {
    Checks ck = new Checks();
    JavaPairRDD<Long, Long> none = sc.<Long>emptyRDD().mapToPair(x -> new Tuple2<>(x, 1L));
    long a = none.reduceByKey(Long::sum, 8).count();
    ck.eq("rows from an RDD without partitions", 0L, a);

    JavaPairRDD<Long, Long> empties =
        sc.parallelize(Collections.<Long>emptyList(), 4).mapToPair(x -> new Tuple2<>(x, 1L));
    List<Integer> sizes =
        empties
            .reduceByKey(Long::sum, 8)
            .mapPartitions(it -> {
              int c = 0;
              while (it.hasNext()) {
                it.next();
                c++;
              }
              return Collections.singletonList(c).iterator();
            })
            .collect();
    ck.eq("reduce partitions of the empty shuffle", 8, sizes.size());
    ck.eq("rows from 4 empty map tasks", 0, sizes.stream().mapToInt(Integer::intValue).sum());

    SparkSession spark = SparkSession.active();
    long g =
        spark.range(0, 0, 1, 3).groupBy(functions.col("id").mod(5)).count().collectAsList().size();
    ck.eq("groups of an empty Dataset", 0L, g);
    return ck.done("empty=" + a + "," + sizes.size() + "," + g);
  }

  /**
   * 10,000 records from 8 map tasks, of which only the even ones produce data, all with keys
   * 0, 1, 2, grouped into 64 partitions: 61 reduce partitions and half the map outputs are empty.
   */
  static Outcome emptyPartitions(JavaSparkContext sc) {
    final int n = EMPTYP_RECORDS;
    final int maps = EMPTYP_MAPS;
    JavaPairRDD<Integer, Integer> pairs =
        seeds(sc, maps)
            .flatMapToPair(
                p -> {
                  List<Tuple2<Integer, Integer>> out = new ArrayList<>();
                  if (p % 2 == 0) {
                    int lo = (int) sliceLo(n, maps / 2, p / 2);
                    int hi = (int) sliceLo(n, maps / 2, p / 2 + 1);
                    for (int i = lo; i < hi; i++) {
                      out.add(new Tuple2<>(i % 3, i));
                    }
                  }
                  return out.iterator();
                });
    List<long[]> parts =
        pairs
            .groupByKey(new HashPartitioner(EMPTYP_REDUCES))
            .mapPartitionsWithIndex(
                (idx, it) -> {
                  List<long[]> out = new ArrayList<>();
                  long groups = 0;
                  while (it.hasNext()) {
                    Tuple2<Integer, Iterable<Integer>> t = it.next();
                    long c = 0;
                    long s = 0;
                    for (int v : t._2) {
                      c++;
                      s += v;
                      if (v % 3 != t._1) {
                        s = Long.MIN_VALUE / 2;
                      }
                    }
                    out.add(new long[] {idx, t._1, c, s});
                    groups++;
                  }
                  if (groups == 0) {
                    out.add(new long[] {idx, -1, 0, 0});
                  }
                  return out.iterator();
                },
                true)
            .collect();
    Checks ck = new Checks();
    long emptyParts = 0;
    long total = 0;
    StringBuilder digest = new StringBuilder();
    List<long[]> groups = new ArrayList<>();
    for (long[] p : parts) {
      if (p[1] < 0) {
        emptyParts++;
      } else {
        groups.add(p);
        total += p[2];
      }
    }
    groups.sort((x, y) -> Long.compare(x[1], y[1]));
    for (long[] g : groups) {
      long key = g[1];
      long count = 0;
      long sum = 0;
      for (long i = 0; i < n; i++) {
        if (i % 3 == key) {
          count++;
          sum += i;
        }
      }
      ck.eq("records of key " + key, count, g[2]);
      ck.eq("sum of key " + key, sum, g[3]);
      digest.append(key).append('@').append(g[0]).append(':').append(g[2]).append(':')
          .append(g[3]).append(' ');
    }
    ck.eq("keys", 3L, (long) groups.size());
    ck.eq("empty reduce partitions", (long) EMPTYP_REDUCES - 3, emptyParts);
    ck.eq("records", (long) n, total);
    return ck.done(digest.toString().trim());
  }

  /**
   * Replica job (run by run.sh with two servers and --replica 2): 2,000,000 records (key = i,
   * value = mix(i)) from 4 map tasks, hash-partitioned into 8 partitions without aggregation, so
   * the reduce side reads lazily. With --pause-dir, every reduce task that starts before
   * DIR/resume exists pauses after its first record (its reader is then in the middle of a
   * partition) and waits for DIR/resume, so run.sh can kill one server mid-read. With
   * {@code pauseMap}, the map tasks pause instead, halfway through their records (with a small
   * spark.rss.writer.buffer.size the first half has been sent by then), so run.sh can kill a
   * server mid-write. With {@code map-and-reduce-start}, the map tasks pause halfway on DIR/map
   * and the reduce tasks before their first read on DIR/reduce, so run.sh can stop the remote
   * store while the second half is written and start it again before anything is read. Checks
   * count, key sum, value integrity and placement of every record: a lost or duplicated block
   * after the fail-over shows up here.
   */
  static Outcome replica(
      JavaSparkContext sc, String pauseDir, long pauseTimeoutS, String stage) {
    final long n = REPLICA_RECORDS;
    final int maps = REPLICA_MAPS;
    final int reduces = REPLICA_REDUCES;
    final boolean both = stage.equals("map-and-reduce-start");
    final String mapPause =
        pauseDir == null ? null : both ? pauseDir + "/map" : stage.equals("map") ? pauseDir : null;
    final String reducePause = both || stage.equals("map") ? null : pauseDir;
    final String reduceStartPause = both && pauseDir != null ? pauseDir + "/reduce" : null;
    JavaPairRDD<Long, Long> pairs =
        seeds(sc, maps)
            .flatMapToPair(
                p -> {
                  long lo = sliceLo(n, maps, p);
                  long hi = sliceLo(n, maps, p + 1);
                  long half = lo + (hi - lo) / 2;
                  return gen(lo, hi, i -> {
                    if (i == half) {
                      try {
                        pause(mapPause, pauseTimeoutS);
                      } catch (IOException | InterruptedException e) {
                        throw new IllegalStateException("map task pause failed", e);
                      }
                    }
                    return new Tuple2<>(i, mix(i));
                  });
                });
    long[] r =
        pairs
            .partitionBy(new HashPartitioner(reduces))
            .mapPartitionsWithIndex(
                (idx, it) -> {
                  // Before the first hasNext(): the reader has not fetched anything yet.
                  pause(reduceStartPause, pauseTimeoutS);
                  HashPartitioner hp = new HashPartitioner(reduces);
                  long count = 0;
                  long keySum = 0;
                  long bad = 0;
                  long digest = 0;
                  while (it.hasNext()) {
                    Tuple2<Long, Long> t = it.next();
                    if (count == 0) {
                      pause(reducePause, pauseTimeoutS);
                    }
                    count++;
                    keySum += t._1;
                    if (t._2 != mix(t._1) || hp.getPartition(t._1) != idx) {
                      bad++;
                    }
                    digest += mix(t._1 ^ t._2);
                  }
                  return Collections.singletonList(new long[] {count, keySum, bad, digest})
                      .iterator();
                },
                true)
            .reduce((a, b) -> new long[] {a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]});
    Checks ck = new Checks();
    ck.eq("records", n, r[0]);
    ck.eq("sum of keys", n * (n - 1) / 2, r[1]);
    ck.eq("records with a wrong value or in the wrong partition", 0L, r[2]);
    for (String dir : new String[] {mapPause, reducePause, reduceStartPause}) {
      if (dir != null) {
        ck.that("a stage never paused (" + dir + "/paused missing)",
            Files.exists(Paths.get(dir, "paused")));
      }
    }
    return ck.done("records=" + r[0] + " digest=" + Long.toHexString(r[3]));
  }

  /**
   * Integrity job: 1,000,000 records (key = i, value = mix(i)) from 4 map tasks into 8
   * partitions, read twice from the same shuffle (the second job reuses the map output and reads
   * the server again). Run with the master client's integrity validation on, every reduce task
   * checks the record counts the server answered against the records it read. With --pause-dir
   * (rss run only) the driver writes DIR/paused between the two reads and waits for DIR/resume:
   * run.sh changes one count the server holds meanwhile, and the second read must fail with the
   * client's "Inconsistent number of records" (the message names the read, so a failure of the
   * first read cannot pass for it).
   */
  static Outcome integrity(JavaSparkContext sc, String pauseDir, long pauseTimeoutS)
      throws IOException, InterruptedException {
    final long n = 1_000_000;
    final int maps = 4;
    final int reduces = 8;
    JavaPairRDD<Long, Long> shuffled =
        seeds(sc, maps)
            .flatMapToPair(
                p -> gen(sliceLo(n, maps, p), sliceLo(n, maps, p + 1),
                    i -> new Tuple2<>(i, mix(i))))
            .partitionBy(new HashPartitioner(reduces));
    long first = shuffled.count();
    pause(pauseDir, pauseTimeoutS);
    long second;
    try {
      second = shuffled.count();
    } catch (Exception e) { // SparkException is checked for javac, though Scala throws it freely
      throw new IllegalStateException("the second read of the shuffle failed: " + e.getMessage(), e);
    }
    Checks ck = new Checks();
    ck.eq("records, first read", n, first);
    ck.eq("records, second read", n, second);
    if (pauseDir != null) {
      ck.that("the driver never paused (" + pauseDir + "/paused missing)",
          Files.exists(Paths.get(pauseDir, "paused")));
    }
    return ck.done("records=" + first + "+" + second);
  }

  /** Writes DIR/paused and waits for DIR/resume; no-op without a DIR or once resumed. */
  static void pause(String dir, long timeoutS) throws IOException, InterruptedException {
    if (dir == null) {
      return;
    }
    Path resume = Paths.get(dir, "resume");
    if (Files.exists(resume)) {
      return;
    }
    try {
      Files.createFile(Paths.get(dir, "paused"));
      System.err.println("replica job: paused, waiting for " + resume);
    } catch (FileAlreadyExistsException e) {
      // another task paused first
    }
    long deadline = System.nanoTime() + timeoutS * 1_000_000_000L;
    while (!Files.exists(resume)) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("no " + resume + " after " + timeoutS + " s");
      }
      Thread.sleep(100);
    }
    System.err.println("replica job: resumed");
  }
}
