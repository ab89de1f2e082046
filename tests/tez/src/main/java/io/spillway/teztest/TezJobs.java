package io.spillway.teztest;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.lib.input.TextInputFormat;
import org.apache.hadoop.mapreduce.lib.output.TextOutputFormat;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.yarn.api.records.ApplicationAttemptId;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.util.SystemClock;
import org.apache.tez.client.FrameworkClient;
import org.apache.tez.client.LocalClient;
import org.apache.tez.client.TezApiVersionInfo;
import org.apache.tez.client.TezClient;
import org.apache.tez.dag.api.DAG;
import org.apache.tez.dag.api.DataSinkDescriptor;
import org.apache.tez.dag.api.DataSourceDescriptor;
import org.apache.tez.dag.api.Edge;
import org.apache.tez.dag.api.ProcessorDescriptor;
import org.apache.tez.dag.api.TezConfiguration;
import org.apache.tez.dag.api.Vertex;
import org.apache.tez.dag.api.client.DAGClient;
import org.apache.tez.dag.api.client.DAGStatus;
import org.apache.tez.dag.app.DAGAppMaster;
import org.apache.tez.dag.app.RssDAGAppMaster;
import org.apache.tez.examples.OrderedWordCount;
import org.apache.tez.examples.WordCount;
import org.apache.tez.mapreduce.input.MRInput;
import org.apache.tez.mapreduce.output.MROutput;
import org.apache.tez.mapreduce.processor.SimpleMRProcessor;
import org.apache.tez.runtime.api.ProcessorContext;
import org.apache.tez.runtime.library.api.KeyValueReader;
import org.apache.tez.runtime.library.api.KeyValueWriter;
import org.apache.tez.runtime.library.conf.UnorderedPartitionedKVEdgeConfig;
import org.apache.tez.runtime.library.partitioner.HashPartitioner;

/**
 * Tez end-to-end jobs: Tez 0.9.1 in local mode, each DAG first on Tez's own shuffle, then
 * through the released Uniffle Tez client 0.9.2 against a Spillway coordinator, outputs
 * compared. Prints {@code PASS <label>/<job> ...} or {@code FAIL <label>/<job>: why} per job,
 * as tests/spark's SparkJobs does, and exits 1 when anything failed.
 *
 * <p>Local mode runs the DAG app master in this JVM, so the client's own app master
 * (RssDAGAppMaster, which a YARN deployment names in {@code tez.am.launch.cmd-opts}) is put in
 * by a LocalClient whose {@code createDAGAppMaster} returns it, the way Tez's own tests swap in
 * theirs. Everything the client sets up lives in RssDAGAppMaster's service init: registration
 * with the coordinator, shuffle assignment and the rewrite of every edge's input and output to
 * the Rss classes.
 *
 * <pre>
 *   TezJobs --coordinator host:port --work DIR [--label TEXT] [--job a,b]
 *           [--rss-conf k=v]...
 * </pre>
 *
 * <p>Jobs: {@code ordered_wordcount} (tez-examples' OrderedWordCount: two ordered edges, the
 * second sorting by count) and {@code unordered_wordcount} (one unordered partitioned edge; the
 * summation sorts its output itself so outputs compare byte for byte).
 */
public final class TezJobs {
  static final int LINES = 200_000;
  static final int WORDS = 5_000;
  static final int PARTITIONS = 4;

  public static void main(String[] args) throws Exception {
    String coordinator = null;
    String work = null;
    String label = "tez";
    List<String> jobs = List.of("ordered_wordcount", "unordered_wordcount");
    List<String> rssConf = new ArrayList<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--coordinator":
          coordinator = args[i + 1];
          break;
        case "--work":
          work = args[i + 1];
          break;
        case "--label":
          label = args[i + 1];
          break;
        case "--job":
          jobs = List.of(args[i + 1].split(","));
          break;
        case "--rss-conf":
          rssConf.add(args[i + 1]);
          break;
        default:
          System.err.println("TezJobs: unknown option " + args[i]);
          System.exit(2);
      }
    }
    if (coordinator == null || work == null) {
      System.err.println("TezJobs: --coordinator and --work are required");
      System.exit(2);
    }
    Path dir = Paths.get(work);
    Path input = dir.resolve("input");
    writeInput(input);
    int failed = 0;
    for (String job : jobs) {
      String name = label + "/" + job;
      try {
        long t0 = System.nanoTime();
        Path vanillaOut = dir.resolve(job + "-vanilla");
        run(job, conf(dir, null, rssConf), input, vanillaOut);
        double vanillaS = (System.nanoTime() - t0) / 1e9;
        long t1 = System.nanoTime();
        Path rssOut = dir.resolve(job + "-rss");
        run(job, conf(dir, coordinator, rssConf), input, rssOut);
        double rssS = (System.nanoTime() - t1) / 1e9;
        String problem = compare(job, vanillaOut, rssOut);
        if (problem == null) {
          System.out.printf(
              "PASS %s vanilla=%.1fs rss=%.1fs digest=%s%n",
              name, vanillaS, rssS, digest(rssOut));
        } else {
          failed++;
          System.out.println("FAIL " + name + ": " + problem);
        }
      } catch (Exception e) {
        failed++;
        e.printStackTrace();
        System.out.println("FAIL " + name + ": " + e);
      }
    }
    System.out.println(label + ": " + (jobs.size() - failed) + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }

  /** The input: LINES lines of words drawn from WORDS words by a fixed sequence (splitmix64). */
  static void writeInput(Path input) throws IOException {
    Files.createDirectories(input);
    try (BufferedWriter w =
        Files.newBufferedWriter(input.resolve("words.txt"), StandardCharsets.UTF_8)) {
      long s = 42;
      for (int i = 0; i < LINES; i++) {
        StringBuilder line = new StringBuilder();
        for (int j = 0; j < 8; j++) {
          s += 0x9E3779B97F4A7C15L;
          long z = s;
          z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
          z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
          z ^= z >>> 31;
          // A skewed draw: the square makes low word numbers frequent.
          double u = (z >>> 11) / (double) (1L << 53);
          line.append(j == 0 ? "" : " ").append("w").append((int) (u * u * WORDS));
        }
        w.write(line.toString());
        w.newLine();
      }
    }
  }

  /** Local mode; with a coordinator, the Uniffle client's settings. */
  static TezConfiguration conf(Path dir, String coordinator, List<String> rssConf)
      throws IOException {
    TezConfiguration conf = new TezConfiguration();
    conf.setBoolean(TezConfiguration.TEZ_LOCAL_MODE, true);
    conf.set("fs.defaultFS", "file:///");
    conf.setBoolean("tez.runtime.optimize.local.fetch", true);
    Path staging = dir.resolve("staging-" + System.nanoTime());
    Files.createDirectories(staging);
    conf.set(TezConfiguration.TEZ_AM_STAGING_DIR, staging.toString());
    // Two task threads, as Spark's local[2].
    conf.setInt("tez.am.inline.task.execution.max-tasks", 2);
    conf.setInt("tez.runtime.io.sort.mb", 32);
    if (coordinator != null) {
      conf.set("tez.rss.coordinator.quorum", coordinator);
      conf.set("tez.rss.client.type", "GRPC");
      conf.set("tez.rss.storage.type", "MEMORY_LOCALFILE");
      conf.setInt("tez.rss.runtime.io.sort.mb", 32);
      for (String kv : rssConf) {
        int eq = kv.indexOf('=');
        conf.set(kv.substring(0, eq), kv.substring(eq + 1));
      }
    }
    return conf;
  }

  static void run(String job, TezConfiguration conf, Path input, Path output) throws Exception {
    boolean rss = conf.get("tez.rss.coordinator.quorum") != null;
    TezClient client =
        rss ? new RssLocalTezClient(job + "-rss", conf) : TezClient.create(job, conf);
    client.start();
    try {
      DAG dag;
      switch (job) {
        case "ordered_wordcount":
          dag =
              OrderedWordCount.createDAG(
                  conf, input.toString(), output.toString(), PARTITIONS, false, false,
                  job + (rss ? "-rss" : "-vanilla"));
          break;
        case "unordered_wordcount":
          dag = unorderedWordCount(conf, input.toString(), output.toString(), rss);
          break;
        default:
          throw new IllegalArgumentException("unknown job " + job);
      }
      client.waitTillReady();
      DAGClient dagClient = client.submitDAG(dag);
      DAGStatus status = dagClient.waitForCompletion();
      if (status.getState() != DAGStatus.State.SUCCEEDED) {
        throw new IllegalStateException(
            "DAG " + dag.getName() + " ended " + status.getState() + ": "
                + status.getDiagnostics());
      }
    } finally {
      client.stop();
    }
  }

  /**
   * Tokenizer (tez-examples' WordCount.TokenProcessor) to a summation over an unordered
   * partitioned edge: the summation reads key-value pairs in any order and sums them itself.
   */
  static DAG unorderedWordCount(TezConfiguration conf, String in, String out, boolean rss) {
    DataSourceDescriptor source =
        MRInput.createConfigBuilder(new Configuration(conf), TextInputFormat.class, in).build();
    DataSinkDescriptor sink =
        MROutput.createConfigBuilder(new Configuration(conf), TextOutputFormat.class, out)
            .build();
    Vertex tokenizer =
        Vertex.create("Tokenizer", ProcessorDescriptor.create(WordCount.TokenProcessor.class.getName()))
            .addDataSource("Input", source);
    Vertex summation =
        Vertex.create(
                "Summation", ProcessorDescriptor.create(UnorderedSum.class.getName()), PARTITIONS)
            .addDataSink("Output", sink);
    UnorderedPartitionedKVEdgeConfig edge =
        UnorderedPartitionedKVEdgeConfig.newBuilder(
                Text.class.getName(), IntWritable.class.getName(), HashPartitioner.class.getName())
            .setFromConfiguration(conf)
            .build();
    return DAG.create("unordered_wordcount" + (rss ? "-rss" : "-vanilla"))
        .addVertex(tokenizer)
        .addVertex(summation)
        .addEdge(Edge.create(tokenizer, summation, edge.createDefaultEdgeProperty()));
  }

  /** Sums an unordered input per word and writes the words in order. */
  public static class UnorderedSum extends SimpleMRProcessor {
    public UnorderedSum(ProcessorContext context) {
      super(context);
    }

    @Override
    public void run() throws Exception {
      KeyValueReader reader = (KeyValueReader) getInputs().get("Tokenizer").getReader();
      Map<String, Integer> sums = new TreeMap<>();
      while (reader.next()) {
        sums.merge(
            reader.getCurrentKey().toString(),
            ((IntWritable) reader.getCurrentValue()).get(),
            Integer::sum);
      }
      KeyValueWriter writer = (KeyValueWriter) getOutputs().get("Output").getWriter();
      for (Map.Entry<String, Integer> e : sums.entrySet()) {
        writer.write(new Text(e.getKey()), new IntWritable(e.getValue()));
      }
    }
  }

  /** The part files' lines, file by file in name order. */
  static List<String> lines(Path out) throws IOException {
    List<String> all = new ArrayList<>();
    List<Path> parts;
    try (Stream<Path> s = Files.list(out)) {
      parts = s.filter(p -> p.getFileName().toString().startsWith("part-")).sorted().toList();
    }
    for (Path p : parts) {
      all.addAll(Files.readAllLines(p, StandardCharsets.UTF_8));
    }
    return all;
  }

  /**
   * Null when the outputs agree. The unordered job sorts within each partition, so its files
   * must be equal byte for byte; the ordered job's words of equal count may come in any order,
   * so its lines must be the same multiset and its counts in order.
   */
  static String compare(String job, Path vanilla, Path rss) throws IOException {
    List<String> a = lines(vanilla);
    List<String> b = lines(rss);
    long words = 0;
    for (String l : b) {
      words += Long.parseLong(l.substring(l.lastIndexOf('\t') + 1));
    }
    if (words != (long) LINES * 8) {
      return "the rss output counts " + words + " words, not " + (long) LINES * 8;
    }
    if (job.equals("ordered_wordcount")) {
      long last = Long.MIN_VALUE;
      for (String l : b) {
        long n = Long.parseLong(l.substring(l.lastIndexOf('\t') + 1));
        if (n < last) {
          return "the rss output is not ordered by count at \"" + l + "\"";
        }
        last = n;
      }
      List<String> sa = new ArrayList<>(a);
      List<String> sb = new ArrayList<>(b);
      Collections.sort(sa);
      Collections.sort(sb);
      return sa.equals(sb) ? null : "the rss output's lines differ from vanilla's";
    }
    return a.equals(b) ? null : "the rss output differs from vanilla's";
  }

  static String digest(Path out) throws Exception {
    List<String> l = new ArrayList<>(lines(out));
    Collections.sort(l);
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    for (String s : l) {
      md.update(s.getBytes(StandardCharsets.UTF_8));
      md.update((byte) '\n');
    }
    return "lines=" + l.size() + " sha=" + HexFormat.of().formatHex(md.digest()).substring(0, 16);
  }

  /** Local mode with the Uniffle client's app master in place of Tez's. */
  static final class RssLocalClient extends LocalClient {
    @Override
    protected DAGAppMaster createDAGAppMaster(
        ApplicationAttemptId attempt,
        ContainerId container,
        String host,
        int nmPort,
        int nmHttpPort,
        org.apache.hadoop.yarn.util.Clock clock,
        long submitTime,
        boolean isSession,
        String userDir,
        String[] localDirs,
        String[] logDirs,
        Credentials credentials,
        String user) {
      return new RssDAGAppMaster(
          attempt, container, host, nmPort, nmHttpPort, new SystemClock(), submitTime, isSession,
          userDir, localDirs, logDirs, new TezApiVersionInfo().getVersion(), credentials, user,
          null);
    }
  }

  /** A TezClient whose framework client is {@link RssLocalClient}. */
  static final class RssLocalTezClient extends TezClient {
    RssLocalTezClient(String name, TezConfiguration conf) {
      super(name, conf, false, null, null);
    }

    @Override
    protected FrameworkClient createFrameworkClient() {
      return new RssLocalClient();
    }
  }
}
