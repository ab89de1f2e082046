package io.spillway.sparktest;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import org.apache.hadoop.conf.Configuration;
import org.apache.uniffle.client.api.ShuffleReadClient;
import org.apache.uniffle.client.api.ShuffleWriteClient;
import org.apache.uniffle.client.factory.ShuffleClientFactory;
import org.apache.uniffle.client.response.SendShuffleDataResult;
import org.apache.uniffle.common.ClientType;
import org.apache.uniffle.common.PartitionRange;
import org.apache.uniffle.common.RemoteStorageInfo;
import org.apache.uniffle.common.ShuffleBlockInfo;
import org.apache.uniffle.common.ShuffleDataDistributionType;
import org.apache.uniffle.common.ShuffleServerInfo;
import org.apache.uniffle.common.config.RssConf;
import org.apache.uniffle.common.util.BlockIdLayout;
import org.apache.uniffle.common.util.ChecksumUtils;

/**
 * Shuffle benchmark through the released Uniffle client's own {@code ShuffleWriteClient} and
 * {@code ShuffleReadClient} (no Spark): what a Spark job's shuffle costs a server, without the
 * job's own CPU on the same two cores. Driven by benches/realclient.sh; a tiny run is a job of
 * tests/spark/run.sh so that it cannot rot.
 *
 * <p>Per map task (task attempt id = map index), as RssShuffleWriter does: blocks round-robin
 * over the partitions (the order the writer's buffer manager emits them when partitions fill
 * evenly), block ids from {@link BlockIdLayout#DEFAULT} (sequence, partition, task attempt),
 * CRC32 of the stored bytes, batched into {@code sendShuffleData} calls of up to
 * {@code --request-size} (Java's spark.rss.client.send.size.limit, 16m in 0.9), then
 * {@code reportShuffleResult}, and {@code sendCommit} only with {@code --commit true} (the Spark
 * writer commits only when the storage type has no memory tier; MEMORY_LOCALFILE does not).
 * Sends are synchronous per task: the writer's asynchronous DataPusher is left out, so
 * concurrency comes from {@code --concurrency} tasks at once. Payloads are stored uncompressed
 * (uncompressLength = length): compression is client CPU, not server work.
 *
 * <p>Reads: per partition, {@code getShuffleResult} as the reader's driver side does, then a
 * {@code ShuffleReadClient} for MEMORY_LOCALFILE read until it returns null. The read client
 * yields bytes without block ids, so every payload starts with its block id (8 bytes); the rest
 * is a slice of a seeded pool chosen by the id. Every block is checked: id expected for the
 * partition and seen once, length, bytes; and the count. The client itself checks each CRC.
 *
 * <p>Sources: the client API as the 0.9.2 jar has it ({@code javap}: the
 * {@code ShuffleClientFactory} builders, {@code ShuffleBlockInfo}'s constructor); the reader's
 * builder calls as RssShuffleReader (client-spark/spark3) makes them, read in a version newer
 * than 0.10 (its extra builder calls, e.g. readCostTracker, do not exist in 0.9); the send size
 * limit from RssSparkConfig of 0.9.
 *
 * <p>The client's Roaring bitmap class is shaded under a different package per release (0.9.0:
 * org.apache.uniffle.org.roaringbitmap, 0.9.2: org.apache.uniffle.shaded.org.roaringbitmap), and
 * the harness compiles this class against each; so it is never named: bitmaps are typed by
 * {@code var} from {@code getShuffleResult}'s return type and new ones made like it.
 *
 * <p>Many apps ({@code --apps N}, benches/realclient.sh {@code --apps-points}): N apps, each with
 * its own {@code ShuffleWriteClient}, app id and shuffle (the clients share the factory's one
 * connection per server, as executors of one JVM would); map task m belongs to app m mod N with
 * task attempt id m / N, so the tasks spread over the apps round-robin, and each app's partitions
 * are read and checked against its own tasks. {@code --read results} reads only the block-id
 * bitmaps (getShuffleResult, checked), not the data.
 *
 * <p>Latency as the client sees it: every {@code sendShuffleData} (requireBuffer, then the send,
 * inside the client), {@code reportShuffleResult} and {@code getShuffleResult} call is timed, and
 * "LATENCY op=... count=... p50_ms=... p99_ms=... p999_ms=... max_ms=..." lines are printed.
 *
 * <p>Output: "RESULT key=value ..." (GB/s are 10^9 bytes of payload per second), then
 * "PASS label" or "FAIL label: reason" (label: {@code --label}, default clientbench); exit code 0
 * only on PASS.
 */
public final class ClientBench {
  private static final int SHUFFLE_ID = 0;
  private static final int POOL_BYTES = 32 << 20;
  private static final int ID_BYTES = 8;

  private final Map<String, String> opts;
  private final byte[] pool;
  private final BlockIdLayout layout = BlockIdLayout.DEFAULT;
  private final int minBlock;
  private final int maxBlock;
  private final Latencies latencies = new Latencies();

  /** Call durations (ns) per operation, for the LATENCY lines. */
  static final class Latencies {
    private final Map<String, long[]> samples = new HashMap<>();
    private final Map<String, Integer> counts = new HashMap<>();

    synchronized void record(String op, long nanos) {
      long[] v = samples.computeIfAbsent(op, k -> new long[1024]);
      int n = counts.getOrDefault(op, 0);
      if (n == v.length) {
        v = java.util.Arrays.copyOf(v, n * 2);
        samples.put(op, v);
      }
      v[n] = nanos;
      counts.put(op, n + 1);
    }

    <T> T time(String op, Supplier<T> call) {
      long t0 = System.nanoTime();
      T r = call.get();
      record(op, System.nanoTime() - t0);
      return r;
    }

    synchronized String lines() {
      StringBuilder b = new StringBuilder();
      for (String op : new String[] {"sendShuffleData", "reportShuffleResult", "getShuffleResult"}) {
        int n = counts.getOrDefault(op, 0);
        if (n == 0) {
          continue;
        }
        long[] v = java.util.Arrays.copyOf(samples.get(op), n);
        java.util.Arrays.sort(v);
        b.append(String.format("LATENCY op=%s count=%d p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f%n",
            op, n, at(v, 0.5), at(v, 0.99), at(v, 0.999), v[n - 1] / 1e6));
      }
      return b.toString();
    }

    /** The q quantile (nearest rank) of sorted v, in ms. */
    private static double at(long[] v, double q) {
      int i = (int) Math.ceil(q * v.length) - 1;
      return v[Math.max(0, Math.min(v.length - 1, i))] / 1e6;
    }
  }

  private ClientBench(Map<String, String> opts) {
    this.opts = opts;
    this.pool = new byte[POOL_BYTES + maxOf(opts)];
    new SplittableRandom(42).nextBytes(pool);
    String[] range = opts.getOrDefault("block-size", "64k").split("-");
    this.minBlock = (int) parseSize(range[0]);
    this.maxBlock = (int) parseSize(range[range.length - 1]);
    if (minBlock <= ID_BYTES || maxBlock < minBlock) {
      throw new IllegalArgumentException("--block-size: bad range " + opts.get("block-size"));
    }
  }

  private static int maxOf(Map<String, String> opts) {
    String[] range = opts.getOrDefault("block-size", "64k").split("-");
    return (int) parseSize(range[range.length - 1]);
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> opts = new HashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      if (!args[i].startsWith("--")) {
        usage("unexpected " + args[i]);
      }
      opts.put(args[i].substring(2), args[i + 1]);
    }
    if (args.length % 2 != 0 || !opts.containsKey("grpc-port")) {
      usage("missing --grpc-port or an option's value");
    }
    int rc;
    try {
      rc = new ClientBench(opts).run();
    } catch (Throwable t) {
      t.printStackTrace();
      System.out.println("FAIL " + opts.getOrDefault("label", "clientbench") + ": " + t);
      rc = 1;
    }
    System.out.flush();
    // The clients' pools are not all daemon threads.
    System.exit(rc);
  }

  private static void usage(String why) {
    System.err.println(
        "ClientBench: "
            + why
            + "\nusage: ClientBench --grpc-port P [--netty-port N] [--host 127.0.0.1]"
            + " [--client-type GRPC|GRPC_NETTY] [--maps 16] [--partitions 16]"
            + " [--block-size 64k | 4k-16k] [--total 512m] [--concurrency 8]"
            + " [--request-size 16m] [--read-size 14m] [--read-concurrency 2]"
            + " [--commit false] [--read true|false|results] [--apps 1] [--app-id ID]"
            + " [--label clientbench]");
    System.exit(2);
  }

  static long parseSize(String s) {
    String t = s.trim().toLowerCase();
    long mult = 1;
    char last = t.charAt(t.length() - 1);
    if (last == 'k') {
      mult = 1L << 10;
    } else if (last == 'm') {
      mult = 1L << 20;
    } else if (last == 'g') {
      mult = 1L << 30;
    }
    if (mult != 1) {
      t = t.substring(0, t.length() - 1);
    }
    return Long.parseLong(t) * mult;
  }

  private String opt(String key, String dflt) {
    return opts.getOrDefault(key, dflt);
  }

  private int intOpt(String key, int dflt) {
    return Integer.parseInt(opt(key, Integer.toString(dflt)));
  }

  /** Mixes a block id into a well-spread 64-bit value (splitmix64's finaliser). */
  private static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  private int lengthOf(long blockId) {
    if (minBlock == maxBlock) {
      return minBlock;
    }
    return minBlock + (int) Long.remainderUnsigned(mix(blockId), maxBlock - minBlock + 1);
  }

  private int poolOffset(long blockId) {
    return (int) Long.remainderUnsigned(mix(blockId ^ 0x5eed), POOL_BYTES);
  }

  private byte[] payload(long blockId, int length) {
    byte[] b = new byte[length];
    ByteBuffer.wrap(b).putLong(blockId);
    System.arraycopy(pool, poolOffset(blockId), b, ID_BYTES, length - ID_BYTES);
    return b;
  }

  private int run() throws Exception {
    String host = opt("host", "127.0.0.1");
    int grpcPort = intOpt("grpc-port", 0);
    int nettyPort = intOpt("netty-port", -1);
    String clientType = opt("client-type", "GRPC");
    int maps = intOpt("maps", 16);
    int partitions = intOpt("partitions", 16);
    long total = parseSize(opt("total", "512m"));
    int concurrency = intOpt("concurrency", 8);
    long requestSize = parseSize(opt("request-size", "16m"));
    long readSize = parseSize(opt("read-size", "14m"));
    int readConcurrency = intOpt("read-concurrency", 2);
    boolean commit = Boolean.parseBoolean(opt("commit", "false"));
    String readMode = opt("read", "true");
    boolean read = !readMode.equals("false");
    boolean readData = !readMode.equals("results");
    int apps = intOpt("apps", 1);
    String appId = opt("app-id", "clientbench_" + System.currentTimeMillis());
    if (apps < 1 || maps < apps) {
      throw new IllegalArgumentException("--apps must be between 1 and --maps");
    }
    long avgBlock = (minBlock + (long) maxBlock) / 2;
    int blocksPerMapPartition = (int) Math.max(1, total / ((long) maps * partitions * avgBlock));
    if (partitions > layout.maxNumPartitions || blocksPerMapPartition > layout.maxSequenceNo) {
      throw new IllegalArgumentException("partitions or blocks per task exceed the block id layout");
    }

    ShuffleServerInfo server =
        new ShuffleServerInfo(host + "-" + grpcPort, host, grpcPort, nettyPort);
    List<ShuffleServerInfo> servers = Collections.singletonList(server);
    RssConf rssConf = new RssConf();
    rssConf.setString("rss.storage.type", "MEMORY_LOCALFILE");
    rssConf.setString("rss.client.type", clientType);
    // One app per client, as a Spark application has one: with many apps, each gets a small
    // transfer pool (about one task of it runs at a time).
    int transferPool = apps == 1 ? Math.max(concurrency, 4) : 2;
    String[] appIds = new String[apps];
    ShuffleWriteClient[] clients = new ShuffleWriteClient[apps];
    List<PartitionRange> ranges = new ArrayList<>();
    for (int p = 0; p < partitions; p++) {
      ranges.add(new PartitionRange(p, p));
    }
    long reg0 = System.nanoTime();
    for (int a = 0; a < apps; a++) {
      appIds[a] = apps == 1 ? appId : appId + "_" + a;
      clients[a] = newWriteClient(clientType, transferPool, rssConf);
      clients[a].registerApplicationInfo(appIds[a], 60_000, "clientbench");
      clients[a].registerShuffle(
          server,
          appIds[a],
          SHUFFLE_ID,
          ranges,
          RemoteStorageInfo.EMPTY_REMOTE_STORAGE,
          ShuffleDataDistributionType.NORMAL,
          -1);
    }
    double registerS = (System.nanoTime() - reg0) / 1e9;
    // The Spark client's heartbeat keeps the app alive on the server while it runs.
    ScheduledExecutorService heartbeat = Executors.newSingleThreadScheduledExecutor();
    heartbeat.scheduleAtFixedRate(
        () -> {
          for (int a = 0; a < apps; a++) {
            try {
              clients[a].sendAppHeartbeat(appIds[a], 10_000);
            } catch (Throwable t) {
              System.err.println("heartbeat of " + appIds[a] + " failed: " + t);
            }
          }
        },
        0,
        10,
        TimeUnit.SECONDS);

    // ---- write phase
    AtomicLong written = new AtomicLong();
    AtomicLong blocksWritten = new AtomicLong();
    ExecutorService tasks = Executors.newFixedThreadPool(concurrency);
    long t0 = System.nanoTime();
    List<Future<?>> futures = new ArrayList<>();
    for (int m = 0; m < maps; m++) {
      final int app = m % apps;
      final long taskAttemptId = m / apps;
      futures.add(
          tasks.submit(
              () -> {
                writeTask(
                    clients[app], appIds[app], servers, taskAttemptId, partitions,
                    blocksPerMapPartition, requestSize, written, blocksWritten);
                return null;
              }));
    }
    for (Future<?> f : futures) {
      f.get();
    }
    if (commit) {
      for (int a = 0; a < apps; a++) {
        int mapsOfApp = (maps - a + apps - 1) / apps;
        if (!clients[a].sendCommit(Collections.singleton(server), appIds[a], SHUFFLE_ID, mapsOfApp)) {
          throw new IllegalStateException("sendCommit failed");
        }
      }
    }
    double writeS = (System.nanoTime() - t0) / 1e9;
    tasks.shutdown();
    StringBuilder result = new StringBuilder("RESULT");
    result.append(String.format(" client_type=%s apps=%d register_s=%.3f write_bytes=%d write_blocks=%d"
            + " write_s=%.3f write_gbps=%.3f",
        clientType, apps, registerS, written.get(), blocksWritten.get(), writeS,
        written.get() / writeS / 1e9));

    // ---- read phase
    if (read) {
      AtomicLong readBytes = new AtomicLong();
      AtomicLong readBlocks = new AtomicLong();
      ExecutorService readers = Executors.newFixedThreadPool(readData ? readConcurrency : concurrency);
      long r0 = System.nanoTime();
      List<Future<?>> reads = new ArrayList<>();
      for (int a = 0; a < apps; a++) {
        final int app = a;
        final int mapsOfApp = (maps - a + apps - 1) / apps;
        for (int p = 0; p < partitions; p++) {
          final int partition = p;
          reads.add(
              readers.submit(
                  () -> {
                    readPartition(
                        clients[app], appIds[app], servers, clientType, partition, partitions,
                        mapsOfApp, blocksPerMapPartition, readSize, rssConf, readData, readBytes,
                        readBlocks);
                    return null;
                  }));
        }
      }
      for (Future<?> f : reads) {
        f.get();
      }
      double readS = (System.nanoTime() - r0) / 1e9;
      readers.shutdown();
      if (readData
          && (readBlocks.get() != blocksWritten.get() || readBytes.get() != written.get())) {
        throw new IllegalStateException(
            "read " + readBlocks.get() + " blocks / " + readBytes.get() + " bytes, wrote "
                + blocksWritten.get() + " / " + written.get());
      }
      if (readData) {
        result.append(String.format(" read_bytes=%d read_blocks=%d read_s=%.3f read_gbps=%.3f",
            readBytes.get(), readBlocks.get(), readS, readBytes.get() / readS / 1e9));
      } else {
        result.append(String.format(" results_read=%d results_s=%.3f", reads.size(), readS));
      }
    }
    heartbeat.shutdownNow();
    for (int a = 0; a < apps; a++) {
      clients[a].unregisterShuffle(appIds[a]);
      clients[a].close();
    }
    System.out.print(latencies.lines());
    System.out.println(result);
    System.out.println("PASS " + opt("label", "clientbench"));
    return 0;
  }

  private static ShuffleWriteClient newWriteClient(
      String clientType, int transferPool, RssConf rssConf) {
    // Same values as RssShuffleManager's defaults in 0.9 (spark.rss.client.retry.max = 50
    // would turn a broken server into minutes of retries: 3 is enough for a benchmark).
    return ShuffleClientFactory.getInstance()
        .createShuffleWriteClient(
            ShuffleClientFactory.newWriteBuilder()
                .clientType(clientType)
                .retryMax(3)
                .retryIntervalMax(2000)
                .heartBeatThreadNum(1)
                .replica(1)
                .replicaWrite(1)
                .replicaRead(1)
                .replicaSkipEnabled(true)
                .dataTransferPoolSize(transferPool)
                .dataCommitPoolSize(4)
                .unregisterThreadPoolSize(2)
                .unregisterRequestTimeSec(10)
                .rssConf(rssConf));
  }

  private void writeTask(
      ShuffleWriteClient client,
      String appId,
      List<ShuffleServerInfo> servers,
      long taskAttemptId,
      int partitions,
      int blocksPerPartition,
      long requestSize,
      AtomicLong written,
      AtomicLong blocksWritten) {
    Map<Integer, Set<Long>> reported = new HashMap<>();
    List<ShuffleBlockInfo> batch = new ArrayList<>();
    long batchBytes = 0;
    for (int seq = 0; seq < blocksPerPartition; seq++) {
      for (int p = 0; p < partitions; p++) {
        long blockId = layout.getBlockId(seq, p, taskAttemptId);
        int length = lengthOf(blockId);
        byte[] data = payload(blockId, length);
        long crc = ChecksumUtils.getCrc32(data);
        batch.add(new ShuffleBlockInfo(
            SHUFFLE_ID, p, blockId, length, crc, data, servers, length, length, taskAttemptId));
        reported.computeIfAbsent(p, k -> new HashSet<>()).add(blockId);
        batchBytes += length;
        if (batchBytes >= requestSize) {
          send(client, appId, batch);
          written.addAndGet(batchBytes);
          blocksWritten.addAndGet(batch.size());
          batch = new ArrayList<>();
          batchBytes = 0;
        }
      }
    }
    if (!batch.isEmpty()) {
      send(client, appId, batch);
      written.addAndGet(batchBytes);
      blocksWritten.addAndGet(batch.size());
    }
    Map<ShuffleServerInfo, Map<Integer, Set<Long>>> report = new HashMap<>();
    report.put(servers.get(0), reported);
    latencies.time(
        "reportShuffleResult",
        () -> {
          client.reportShuffleResult(report, appId, SHUFFLE_ID, taskAttemptId, 1);
          return null;
        });
  }

  private void send(ShuffleWriteClient client, String appId, List<ShuffleBlockInfo> batch) {
    SendShuffleDataResult r =
        latencies.time("sendShuffleData", () -> client.sendShuffleData(appId, batch, () -> false));
    if (!r.getFailedBlockIds().isEmpty()) {
      throw new IllegalStateException(
          r.getFailedBlockIds().size() + " of " + batch.size() + " blocks failed to send");
    }
  }

  /** A new, empty instance of the client's (shaded) bitmap class. */
  @SuppressWarnings("unchecked")
  private static <T> T emptyLike(T bitmap) {
    try {
      return (T) bitmap.getClass().getConstructor().newInstance();
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot create a " + bitmap.getClass(), e);
    }
  }

  private void readPartition(
      ShuffleWriteClient writeClient,
      String appId,
      List<ShuffleServerInfo> servers,
      String clientType,
      int partition,
      int partitions,
      int maps,
      int blocksPerPartition,
      long readSize,
      RssConf rssConf,
      boolean readData,
      AtomicLong readBytes,
      AtomicLong readBlocks) {
    var reported =
        latencies.time(
            "getShuffleResult",
            () ->
                writeClient.getShuffleResult(
                    clientType, new HashSet<>(servers), appId, SHUFFLE_ID, partition));
    var expected = emptyLike(reported);
    var taskIds = emptyLike(reported);
    for (long m = 0; m < maps; m++) {
      taskIds.addLong(m);
      for (int seq = 0; seq < blocksPerPartition; seq++) {
        expected.addLong(layout.getBlockId(seq, partition, m));
      }
    }
    if (!reported.equals(expected)) {
      throw new IllegalStateException(
          "partition " + partition + ": getShuffleResult has " + reported.getLongCardinality()
              + " block ids, expected " + expected.getLongCardinality());
    }
    if (!readData) {
      return;
    }
    ShuffleReadClient reader =
        ShuffleClientFactory.getInstance()
            .createShuffleReadClient(
                ShuffleClientFactory.newReadBuilder()
                    .appId(appId)
                    .shuffleId(SHUFFLE_ID)
                    .partitionId(partition)
                    .basePath("")
                    .partitionNumPerRange(1)
                    .partitionNum(partitions)
                    .blockIdBitmap(reported)
                    .taskIdBitmap(taskIds)
                    .shuffleServerInfoList(servers)
                    .hadoopConf(new Configuration())
                    .shuffleDataDistributionType(ShuffleDataDistributionType.NORMAL)
                    .expectedTaskIdsBitmapFilterEnable(false)
                    .storageType("MEMORY_LOCALFILE")
                    .readBufferSize(readSize)
                    .clientType(ClientType.valueOf(clientType))
                    .retryMax(3)
                    .retryIntervalMax(2000)
                    .rssConf(rssConf));
    var seen = emptyLike(reported);
    long bytes = 0;
    long blocks = 0;
    try {
      // `var`: 0.9 returns CompressedShuffleBlock, master its abstract base ShuffleBlock; both
      // have the two getters used here.
      for (var block = reader.readShuffleBlockData();
          block != null;
          block = reader.readShuffleBlockData()) {
        ByteBuffer buf = block.getByteBuffer();
        int length = buf.remaining();
        if (length < ID_BYTES) {
          throw new IllegalStateException("partition " + partition + ": a block of " + length + " bytes");
        }
        long blockId = buf.getLong(buf.position());
        if (!expected.contains(blockId) || seen.contains(blockId)) {
          throw new IllegalStateException(
              "partition " + partition + ": unexpected or repeated block id " + blockId);
        }
        seen.addLong(blockId);
        if (length != lengthOf(blockId) || block.getUncompressLength() != length) {
          throw new IllegalStateException("block " + blockId + ": length " + length);
        }
        ByteBuffer body = buf.slice(buf.position() + ID_BYTES, length - ID_BYTES);
        ByteBuffer want = ByteBuffer.wrap(pool, poolOffset(blockId), length - ID_BYTES);
        if (body.mismatch(want) != -1) {
          throw new IllegalStateException("block " + blockId + ": bytes differ");
        }
        bytes += length;
        blocks++;
      }
      reader.checkProcessedBlockIds();
    } finally {
      reader.close();
    }
    if (!seen.equals(expected)) {
      throw new IllegalStateException(
          "partition " + partition + ": read " + seen.getLongCardinality() + " of "
              + expected.getLongCardinality() + " blocks");
    }
    readBytes.addAndGet(bytes);
    readBlocks.addAndGet(blocks);
  }
}
