package io.spillway.sparktest;

import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.math.BigDecimal;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.plans.logical.GlobalLimit;
import org.apache.spark.sql.catalyst.plans.logical.LocalLimit;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Sort;
import org.apache.spark.sql.types.StructType;
import scala.collection.JavaConverters;

/**
 * TPC-H and TPC-DS through Spark 3.5 in local mode, on Spark's own shuffle ("vanilla") or
 * through the released Uniffle client ("rss").
 *
 * <p>Data comes from the TPC generators published on Maven Central ({@link TpcGen}), written
 * once as Parquet and reused. The query texts are the
 * ones Spark publishes in its {@code spark-sql} test-jar (unpacked by the pom into
 * {@code spark-tpc/}). A vanilla run writes every query's rows; an rss run compares its rows with
 * them as multisets (doubles within {@link #REL_TOL}), and where the query ends in ORDER BY ...
 * LIMIT, rows may differ only among those that tie with the last row on the sort key: a LIMIT
 * cutting through ties may keep either.
 *
 * <pre>
 *   --generate                  turn TpcGen's text (--raw DIR) into Parquet tables in --data
 *   --mode vanilla|rss          run the queries (vanilla: --results-out; rss: --baseline-in)
 *   --suite tpch|tpcds
 *   --scale F                   scale factor (1 = about 1 GB of text)
 *   --data DIR                  the suite's Parquet tables, DIR/table
 *   --queries all|q1,q2,...     default all
 *   --coordinator host:port     rss: the Uniffle coordinator
 *   --client-type GRPC|GRPC_NETTY
 *   --results-out DIR           vanilla: DIR/query.rows, one file per query
 *   --baseline-in DIR           rss: compare with those files
 *   --cores N                   local[N], default 2
 *   --local-dir DIR             spark.local.dir and the warehouse
 *   --label TEXT                prefix of the result lines
 *   --conf k=v                  extra Spark setting (repeatable)
 * </pre>
 *
 * <p>Output: {@code TIME <label> <suite> <query> <ms> <rows>} per query; in rss mode also
 * {@code PASS <label>/<suite>/<query>} or {@code FAIL <label>/<suite>/<query>: why}; at the end
 * {@code TOTAL <label> <suite> <wall ms> <queries> <jvm cpu ms>}. Exit code 1 when a query failed.
 */
public final class TpcQueries {

  /** Relative tolerance of a double cell: aggregation order differs between runs. */
  static final double REL_TOL = 1e-6;

  /** Cells of one serialised row are separated by tabs; strings have theirs escaped. */
  static final char SEP = '\t';

  final Map<String, String> opts = new LinkedHashMap<>();
  final List<String> confs = new ArrayList<>();

  public static void main(String[] args) throws Exception {
    TpcQueries t = new TpcQueries();
    t.parse(args);
    int failed = t.run();
    System.out.flush();
    System.exit(failed > 0 ? 1 : 0);
  }

  void parse(String[] args) {
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("--generate")) {
        opts.put("generate", "1");
      } else if (a.equals("--conf")) {
        confs.add(need(args, ++i, a));
      } else if (a.startsWith("--")) {
        opts.put(a.substring(2), need(args, ++i, a));
      } else {
        throw new IllegalArgumentException("unexpected argument " + a);
      }
    }
  }

  static String need(String[] args, int i, String flag) {
    if (i >= args.length) {
      throw new IllegalArgumentException(flag + " wants a value");
    }
    return args[i];
  }

  String req(String k) {
    String v = opts.get(k);
    if (v == null) {
      throw new IllegalArgumentException("--" + k + " is required");
    }
    return v;
  }

  int run() throws Exception {
    String suite = req("suite");
    if (!suite.equals("tpch") && !suite.equals("tpcds")) {
      throw new IllegalArgumentException("--suite tpch|tpcds, got " + suite);
    }
    Path data = Paths.get(req("data"));
    int cores = Integer.parseInt(opts.getOrDefault("cores", "2"));
    if (opts.containsKey("generate")) {
      generate(suite, Double.parseDouble(req("scale")), data, cores);
      return 0;
    }
    return runQueries(suite, data, cores);
  }

  // ---- generation --------------------------------------------------------------------------

  /**
   * Turns the text {@link TpcGen} wrote under RAW into Parquet under DATA/table, with the types
   * of RAW/schema.ddl, and marks DATA complete for this suite and scale.
   */
  void generate(String suite, double scale, Path data, int cores) throws Exception {
    Path raw = Paths.get(req("raw"));
    long t0 = System.nanoTime();
    deleteTree(data);
    Files.createDirectories(data);
    List<String> ddl = Files.readAllLines(raw.resolve("schema.ddl"));
    SparkSession spark = SparkSession.builder().config(baseConf("tpc-generate", cores)).getOrCreate();
    try {
      for (String line : ddl) {
        String[] f = line.split("\t");
        String name = f[0];
        String glob =
            suite.equals("tpch")
                ? raw.resolve(name).resolve("*.tbl").toString()
                : raw.resolve(f[1]).resolve(name + "{.dat,_[0-9]*_[0-9]*.dat}").toString();
        spark
            .read()
            .option("sep", "|")
            // No quoting: the generators never quote, and a '"' inside a comment is data.
            .option("quote", "\u0000")
            .option("mode", "FAILFAST")
            .schema(StructType.fromDDL(f[f.length - 1]))
            .csv(glob)
            .write()
            .mode(SaveMode.Overwrite)
            .parquet(data.resolve(name).toString());
      }
    } finally {
      spark.stop();
    }
    Files.write(data.resolve("tables"), ddl.stream().map(l -> l.split("\t")[0]).collect(Collectors.toList()));
    Files.writeString(data.resolve("_COMPLETE"), suite + " " + scale + "\n");
    System.out.printf(
        Locale.ROOT, "GENERATED %s sf%s as Parquet in %.1f s into %s%n", suite, scale, (System.nanoTime() - t0) / 1e9, data);
  }

  static void deleteTree(Path p) throws IOException {
    if (!Files.exists(p)) {
      return;
    }
    try (Stream<Path> s = Files.walk(p)) {
      for (Path q : s.sorted(Comparator.reverseOrder()).collect(Collectors.toList())) {
        Files.delete(q);
      }
    }
  }

  // ---- queries -----------------------------------------------------------------------------

  SparkConf baseConf(String app, int cores) {
    SparkConf conf =
        new SparkConf()
            .setMaster("local[" + cores + "]")
            .setAppName(app)
            .set("spark.ui.enabled", "false")
            .set("spark.driver.host", "127.0.0.1")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.shuffle.service.enabled", "false")
            // The Uniffle client needs a serializer that supports relocation, as Uniffle's own
            // Spark guide sets; both runs use it.
            .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
            // The Uniffle client reads whole partitions; both runs plan alike.
            .set("spark.sql.adaptive.localShuffleReader.enabled", "false")
            // One attempt per task: a lost or corrupt block fails the query, never a retry.
            .set("spark.task.maxFailures", "1")
            .set("spark.stage.maxConsecutiveAttempts", "1");
    if (opts.containsKey("local-dir")) {
      conf.set("spark.local.dir", opts.get("local-dir"));
      conf.set("spark.sql.warehouse.dir", opts.get("local-dir") + "/warehouse");
    }
    return conf;
  }

  int runQueries(String suite, Path data, int cores) throws Exception {
    String mode = req("mode");
    String label = opts.getOrDefault("label", mode);
    SparkConf conf = baseConf("tpc-" + suite + "-" + label, cores);
    if (mode.equals("rss")) {
      conf.set("spark.shuffle.manager", "org.apache.spark.shuffle.RssShuffleManager")
          .set("spark.rss.coordinator.quorum", req("coordinator"))
          .set("spark.rss.storage.type", "MEMORY_LOCALFILE")
          .set("spark.rss.client.type", opts.getOrDefault("client-type", "GRPC"))
          .set("spark.rss.dynamicClientConf.enabled", "false")
          .set("spark.rss.client.assignment.retry.times", "2")
          .set("spark.rss.client.assignment.retry.interval", "3000");
    } else if (!mode.equals("vanilla")) {
      throw new IllegalArgumentException("--mode vanilla|rss, got " + mode);
    }
    for (String kv : confs) {
      int eq = kv.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("--conf wants key=value, got " + kv);
      }
      conf.set(kv.substring(0, eq), kv.substring(eq + 1));
    }
    if (!Files.exists(data.resolve("_COMPLETE"))) {
      throw new IllegalStateException(data + " holds no generated tables (run --generate)");
    }
    Path out = mode.equals("vanilla") ? Paths.get(req("results-out")) : null;
    Path baseline = mode.equals("rss") ? Paths.get(req("baseline-in")) : null;
    if (out != null) {
      Files.createDirectories(out);
    }
    List<String> queries = queryNames(suite, opts.getOrDefault("queries", "all"));
    SparkSession spark = SparkSession.builder().config(conf).getOrCreate();
    int failed = 0;
    long wall0 = System.nanoTime();
    long cpu0 = jvmCpuNanos();
    try {
      for (String name : Files.readAllLines(data.resolve("tables"))) {
        spark.read().parquet(data.resolve(name).toString()).createOrReplaceTempView(name);
      }
      for (String q : queries) {
        String what = label + "/" + suite + "/" + q;
        String text = queryText(suite, q);
        long t0 = System.nanoTime();
        Result r;
        try {
          r = Result.of(spark.sql(text));
        } catch (Exception e) {
          System.out.println("FAIL " + what + ": " + SparkJobs.firstLine(String.valueOf(e)));
          failed++;
          continue;
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf(
            Locale.ROOT, "TIME %s %s %s %d %d%n", label, suite, q, ms, r.rows.size());
        if (out != null) {
          r.write(out.resolve(suite + "-" + q + ".rows"));
        } else {
          Path base = baseline.resolve(suite + "-" + q + ".rows");
          if (!Files.exists(base)) {
            System.out.println("FAIL " + what + ": no vanilla result (" + base + ")");
            failed++;
            continue;
          }
          String why = r.differenceFrom(Result.read(base));
          if (why == null) {
            System.out.println("PASS " + what + " (" + r.rows.size() + " rows, " + ms + " ms)");
          } else if (why.startsWith("tie:")) {
            System.out.println(
                "PASS " + what + " (" + r.rows.size() + " rows, " + ms + " ms; " + why + ")");
          } else {
            System.out.println("FAIL " + what + ": " + why);
            failed++;
          }
        }
      }
    } finally {
      long wallMs = (System.nanoTime() - wall0) / 1_000_000;
      long cpuMs = (jvmCpuNanos() - cpu0) / 1_000_000;
      System.out.printf(
          Locale.ROOT, "TOTAL %s %s %d %d %d%n", label, suite, wallMs, queries.size(), cpuMs);
      spark.stop();
    }
    return failed;
  }

  static long jvmCpuNanos() {
    java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
    if (os instanceof com.sun.management.OperatingSystemMXBean) {
      return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
    }
    return 0;
  }

  static final Pattern QUERY_FILE = Pattern.compile("q(\\d+)([ab]?)\\.sql");

  /** The suite's query names in Spark's order (q1, q2, ..., q14a, q14b, ...). */
  static List<String> queryNames(String suite, String spec) throws IOException {
    if (!spec.equals("all")) {
      return List.of(spec.split(","));
    }
    Path dir;
    try {
      dir = Paths.get(TpcQueries.class.getResource("/spark-tpc/" + suite).toURI());
    } catch (URISyntaxException | NullPointerException e) {
      throw new IllegalStateException("no spark-tpc/" + suite + " query texts on the class path");
    }
    List<String[]> found = new ArrayList<>();
    try (Stream<Path> s = Files.list(dir)) {
      for (Path p : s.collect(Collectors.toList())) {
        Matcher m = QUERY_FILE.matcher(p.getFileName().toString());
        if (m.matches()) {
          found.add(new String[] {m.group(1), m.group(2)});
        }
      }
    }
    found.sort(
        Comparator.<String[]>comparingInt(a -> Integer.parseInt(a[0])).thenComparing(a -> a[1]));
    return found.stream().map(a -> "q" + a[0] + a[1]).collect(Collectors.toList());
  }

  static String queryText(String suite, String q) throws IOException {
    try (InputStream in = TpcQueries.class.getResourceAsStream("/spark-tpc/" + suite + "/" + q + ".sql")) {
      if (in == null) {
        throw new IllegalArgumentException("no query " + suite + "/" + q);
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  // ---- results -----------------------------------------------------------------------------

  /**
   * A query's rows in the order Spark returned them, each cell as a typed string (N null, D
   * double, S string, V any other value in its exact form), and which output columns the final
   * ORDER BY sorts on when a LIMIT follows it.
   */
  static final class Result {
    final List<List<String>> rows;
    /** Output columns of the final sort key under a LIMIT; null: no LIMIT on a sort. */
    final int[] limitKeys;

    Result(List<List<String>> rows, int[] limitKeys) {
      this.rows = rows;
      this.limitKeys = limitKeys;
    }

    static Result of(Dataset<Row> df) {
      int[] keys = limitKeys(df.queryExecution().analyzed());
      List<List<String>> rows = new ArrayList<>();
      for (Row r : df.collectAsList()) {
        List<String> cells = new ArrayList<>(r.length());
        for (int i = 0; i < r.length(); i++) {
          cells.add(cell(r.get(i)));
        }
        rows.add(cells);
      }
      return new Result(rows, keys);
    }

    static String cell(Object v) {
      if (v == null) {
        return "N";
      }
      if (v instanceof Double || v instanceof Float) {
        return "D" + ((Number) v).doubleValue();
      }
      if (v instanceof String) {
        return "S" + ((String) v).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n");
      }
      if (v instanceof BigDecimal) {
        return "V" + ((BigDecimal) v).toPlainString();
      }
      return "V" + v;
    }

    /**
     * The output columns a LIMIT's sort orders by: the plan is walked from the top through
     * limits, projections and aliases to the first Sort; null when no LIMIT sits above it; -1
     * for a key that is not an output column.
     */
    static int[] limitKeys(LogicalPlan top) {
      List<Attribute> output = JavaConverters.seqAsJavaList(top.output());
      LogicalPlan p = top;
      boolean limit = false;
      while (true) {
        if (p instanceof GlobalLimit || p instanceof LocalLimit) {
          limit = true;
        } else if (p instanceof Sort) {
          break;
        } else if (!(p.getClass().getSimpleName().equals("Project")
            || p.getClass().getSimpleName().equals("SubqueryAlias")
            || p.getClass().getSimpleName().equals("WithCTE"))) {
          return null;
        }
        List<LogicalPlan> kids = JavaConverters.seqAsJavaList(p.children());
        if (kids.isEmpty()) {
          return null;
        }
        // WithCTE lists its definitions first and the query last.
        p = kids.get(kids.size() - 1);
      }
      if (!limit) {
        return null;
      }
      List<SortOrder> order = JavaConverters.seqAsJavaList(((Sort) p).order());
      int[] keys = new int[order.size()];
      for (int k = 0; k < keys.length; k++) {
        Expression e = order.get(k).child();
        keys[k] = -1;
        if (e instanceof Attribute) {
          for (int i = 0; i < output.size(); i++) {
            if (output.get(i).exprId().equals(((Attribute) e).exprId())) {
              keys[k] = i;
            }
          }
        }
      }
      return keys;
    }

    void write(Path file) throws IOException {
      StringBuilder sb = new StringBuilder();
      sb.append("#keys ");
      if (limitKeys == null) {
        sb.append("none");
      } else {
        sb.append(
            java.util.Arrays.stream(limitKeys).mapToObj(Integer::toString).collect(Collectors.joining(",")));
      }
      sb.append('\n');
      for (List<String> r : rows) {
        sb.append(String.join(String.valueOf(SEP), r)).append('\n');
      }
      Files.writeString(file, sb.toString());
    }

    static Result read(Path file) throws IOException {
      List<String> lines = Files.readAllLines(file);
      String head = lines.get(0).substring("#keys ".length());
      int[] keys =
          head.equals("none")
              ? null
              : java.util.Arrays.stream(head.split(",")).mapToInt(Integer::parseInt).toArray();
      List<List<String>> rows = new ArrayList<>();
      for (String l : lines.subList(1, lines.size())) {
        rows.add(List.of(l.split(String.valueOf(SEP), -1)));
      }
      return new Result(rows, keys);
    }

    /**
     * Null when this and the baseline hold the same multiset of rows; "tie: ..." when they differ
     * only in rows tied with the baseline's last row on the LIMIT's sort key; otherwise why not.
     */
    String differenceFrom(Result base) {
      if (rows.size() != base.rows.size()) {
        return rows.size() + " rows, vanilla " + base.rows.size();
      }
      List<List<String>> mine = new ArrayList<>();
      List<List<String>> theirs = new ArrayList<>();
      unmatched(rows, base.rows, mine, theirs);
      if (mine.isEmpty()) {
        return null;
      }
      String sample = "e.g. " + render(mine.get(0)) + " vs vanilla " + render(theirs.get(0));
      int[] keys = base.limitKeys;
      if (keys == null || base.rows.isEmpty()) {
        return mine.size() + " rows differ; " + sample;
      }
      for (int k : keys) {
        if (k < 0) {
          return mine.size() + " rows differ under a LIMIT whose sort key is not an output column; " + sample;
        }
      }
      List<String> last = base.rows.get(base.rows.size() - 1);
      for (List<List<String>> side : List.of(mine, theirs)) {
        for (List<String> r : side) {
          for (int k : keys) {
            if (!cellEquals(r.get(k), last.get(k))) {
              return mine.size() + " rows differ, not only ties at the LIMIT; " + sample;
            }
          }
        }
      }
      return "tie: " + mine.size() + " rows tied at the LIMIT's cut differ";
    }

    static String render(List<String> row) {
      String s = String.join(" | ", row);
      return s.length() > 200 ? s.substring(0, 200) + "..." : s;
    }

    /**
     * Rows of A and B left over after matching equal rows (doubles within the tolerance): both
     * sides are sorted on a key with doubles rounded and walked together; what the rounding put
     * out of step is matched pairwise after.
     */
    static void unmatched(
        List<List<String>> a, List<List<String>> b, List<List<String>> restA, List<List<String>> restB) {
      List<List<String>> sa = new ArrayList<>(a);
      List<List<String>> sb = new ArrayList<>(b);
      Comparator<List<String>> byKey = Comparator.comparing(Result::sortKey);
      sa.sort(byKey);
      sb.sort(byKey);
      int i = 0;
      int j = 0;
      while (i < sa.size() && j < sb.size()) {
        if (rowEquals(sa.get(i), sb.get(j))) {
          i++;
          j++;
        } else if (sortKey(sa.get(i)).compareTo(sortKey(sb.get(j))) <= 0) {
          restA.add(sa.get(i++));
        } else {
          restB.add(sb.get(j++));
        }
      }
      restA.addAll(sa.subList(i, sa.size()));
      restB.addAll(sb.subList(j, sb.size()));
      for (java.util.Iterator<List<String>> it = restA.iterator(); it.hasNext(); ) {
        List<String> r = it.next();
        for (int k = 0; k < restB.size(); k++) {
          if (rowEquals(r, restB.get(k))) {
            restB.remove(k);
            it.remove();
            break;
          }
        }
      }
    }

    static String sortKey(List<String> row) {
      StringBuilder sb = new StringBuilder();
      for (String c : row) {
        if (c.startsWith("D")) {
          double d = Double.parseDouble(c.substring(1));
          sb.append(Double.isFinite(d) ? String.format(Locale.ROOT, "D%.5e", d) : c);
        } else {
          sb.append(c);
        }
        sb.append(SEP);
      }
      return sb.toString();
    }

    static boolean rowEquals(List<String> a, List<String> b) {
      if (a.size() != b.size()) {
        return false;
      }
      for (int i = 0; i < a.size(); i++) {
        if (!cellEquals(a.get(i), b.get(i))) {
          return false;
        }
      }
      return true;
    }

    static boolean cellEquals(String a, String b) {
      if (a.equals(b)) {
        return true;
      }
      if (a.startsWith("D") && b.startsWith("D")) {
        double x = Double.parseDouble(a.substring(1));
        double y = Double.parseDouble(b.substring(1));
        return Math.abs(x - y) <= REL_TOL * Math.max(1.0, Math.max(Math.abs(x), Math.abs(y)));
      }
      return false;
    }
  }
}
