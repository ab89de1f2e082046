package io.spillway.sparktest;

import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.uniffle.proto.CoordinatorServerGrpc;
import org.apache.uniffle.proto.RssProtos;

/**
 * A minimal stand-in for the Uniffle coordinator, for run.sh --stub-coordinator: it lets the
 * harness drive Spillway with the real Spark client before Spillway's own coordinator exists, and
 * it logs every coordinator RPC (method, app, tags, replica) on stdout, which documents what the
 * client calls and in which order.
 *
 * <p>Servers come from {@code --servers id@ip:port,...} and from shuffle-server heartbeats.
 * {@code getShuffleAssignments} gives each partition {@code dataReplica} servers, rotating the
 * first one by partition, in the order servers became known; it answers INTERNAL_ERROR when there
 * are fewer servers than replicas. Tags are logged, not enforced. The other client calls answer
 * SUCCESS with empty content. Methods taking {@code google.protobuf.Empty} ({@code fetchClientConf},
 * {@code getShuffleServerList}, ...) are left UNIMPLEMENTED: the client jars relocate protobuf
 * differently (0.9.0: org.apache.uniffle.com.google.protobuf, 0.9.2:
 * org.apache.uniffle.shaded.com.google.protobuf), so naming Empty would tie this file to one
 * version; the jobs run with spark.rss.dynamicClientConf.enabled=false.
 *
 * <pre>
 *   StubCoordinator --port P [--servers id@ip:port,...]
 * </pre>
 */
public final class StubCoordinator extends CoordinatorServerGrpc.CoordinatorServerImplBase {
  /** Known servers by id, in the order they became known. */
  private final Map<String, RssProtos.ShuffleServerId> servers = new LinkedHashMap<>();

  static void log(String s) {
    System.out.println(LocalTime.now() + " stub-coordinator " + s);
    System.out.flush();
  }

  public static void main(String[] args) throws Exception {
    int port = 0;
    String list = "";
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--port":
          port = Integer.parseInt(args[i + 1]);
          break;
        case "--servers":
          list = args[i + 1];
          break;
        default:
          System.err.println("StubCoordinator: unknown option " + args[i]);
          System.exit(2);
      }
    }
    StubCoordinator stub = new StubCoordinator();
    for (String s : list.split(",")) {
      s = s.trim();
      if (s.isEmpty()) {
        continue;
      }
      String id = s.substring(0, s.indexOf('@'));
      String addr = s.substring(s.indexOf('@') + 1);
      String ip = addr.substring(0, addr.lastIndexOf(':'));
      int p = Integer.parseInt(addr.substring(addr.lastIndexOf(':') + 1));
      stub.servers.put(
          id, RssProtos.ShuffleServerId.newBuilder().setId(id).setIp(ip).setPort(p).build());
    }
    Server server =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
            .addService(stub)
            .build()
            .start();
    Runtime.getRuntime()
        .addShutdownHook(new Thread(server::shutdownNow));
    log("listening port=" + server.getPort() + " servers=" + stub.servers.keySet());
    server.awaitTermination();
  }

  private static <T> void reply(StreamObserver<T> obs, T value) {
    obs.onNext(value);
    obs.onCompleted();
  }

  @Override
  public void heartbeat(
      RssProtos.ShuffleServerHeartBeatRequest req,
      StreamObserver<RssProtos.ShuffleServerHeartBeatResponse> obs) {
    RssProtos.ShuffleServerId id = req.getServerId();
    boolean isNew;
    synchronized (servers) {
      isNew = !servers.containsKey(id.getId());
      servers.put(id.getId(), id);
    }
    if (isNew) {
      log("heartbeat from new server " + id.getId() + " " + id.getIp() + ":" + id.getPort()
          + " netty=" + id.getNettyPort() + " tags=" + req.getTagsList() + " status="
          + req.getStatus() + " availableMemory=" + req.getAvailableMemory());
    }
    reply(
        obs,
        RssProtos.ShuffleServerHeartBeatResponse.newBuilder()
            .setStatus(RssProtos.StatusCode.SUCCESS)
            .build());
  }

  @Override
  public void getShuffleAssignments(
      RssProtos.GetShuffleServerRequest req,
      StreamObserver<RssProtos.GetShuffleAssignmentsResponse> obs) {
    List<RssProtos.ShuffleServerId> known;
    synchronized (servers) {
      known = new ArrayList<>(servers.values());
    }
    int replica = Math.max(1, req.getDataReplica());
    log("getShuffleAssignments app=" + req.getApplicationId() + " shuffle=" + req.getShuffleId()
        + " partitions=" + req.getPartitionNum() + " perRange=" + req.getPartitionNumPerRange()
        + " replica=" + req.getDataReplica() + " tags=" + req.getRequireTagsList()
        + " serverNumber=" + req.getAssignmentShuffleServerNumber() + " faulty="
        + req.getFaultyServerIdsList());
    RssProtos.GetShuffleAssignmentsResponse.Builder resp =
        RssProtos.GetShuffleAssignmentsResponse.newBuilder();
    if (known.size() < replica) {
      reply(
          obs,
          resp.setStatus(RssProtos.StatusCode.INTERNAL_ERROR)
              .setRetMsg("stub: " + known.size() + " servers for replica " + replica)
              .build());
      return;
    }
    int perRange = Math.max(1, req.getPartitionNumPerRange());
    for (int start = 0; start < req.getPartitionNum(); start += perRange) {
      RssProtos.PartitionRangeAssignment.Builder a =
          RssProtos.PartitionRangeAssignment.newBuilder()
              .setStartPartition(start)
              .setEndPartition(Math.min(start + perRange, req.getPartitionNum()) - 1);
      for (int r = 0; r < replica; r++) {
        a.addServer(known.get((start / perRange + r) % known.size()));
      }
      resp.addAssignments(a);
    }
    reply(obs, resp.setStatus(RssProtos.StatusCode.SUCCESS).build());
  }

  @Override
  public void registerApplicationInfo(
      RssProtos.ApplicationInfoRequest req,
      StreamObserver<RssProtos.ApplicationInfoResponse> obs) {
    log("registerApplicationInfo app=" + req.getAppId() + " user=" + req.getUser());
    reply(
        obs,
        RssProtos.ApplicationInfoResponse.newBuilder()
            .setStatus(RssProtos.StatusCode.SUCCESS)
            .build());
  }

  @Override
  public void appHeartbeat(
      RssProtos.AppHeartBeatRequest req, StreamObserver<RssProtos.AppHeartBeatResponse> obs) {
    log("appHeartbeat app=" + req.getAppId());
    reply(
        obs,
        RssProtos.AppHeartBeatResponse.newBuilder()
            .setStatus(RssProtos.StatusCode.SUCCESS)
            .build());
  }

  @Override
  public void accessCluster(
      RssProtos.AccessClusterRequest req, StreamObserver<RssProtos.AccessClusterResponse> obs) {
    log("accessCluster id=" + req.getAccessId() + " tags=" + req.getTagsList());
    reply(
        obs,
        RssProtos.AccessClusterResponse.newBuilder()
            .setStatus(RssProtos.StatusCode.SUCCESS)
            .build());
  }

  @Override
  public void fetchRemoteStorage(
      RssProtos.FetchRemoteStorageRequest req,
      StreamObserver<RssProtos.FetchRemoteStorageResponse> obs) {
    log("fetchRemoteStorage app=" + req.getAppId());
    reply(
        obs,
        RssProtos.FetchRemoteStorageResponse.newBuilder()
            .setStatus(RssProtos.StatusCode.SUCCESS)
            .build());
  }

  @Override
  public void reportClientOperation(
      RssProtos.ReportShuffleClientOpRequest req,
      StreamObserver<RssProtos.ReportShuffleClientOpResponse> obs) {
    log("reportClientOperation " + req.getOperation());
    reply(
        obs,
        RssProtos.ReportShuffleClientOpResponse.newBuilder()
            .setStatus(RssProtos.StatusCode.SUCCESS)
            .build());
  }
}
