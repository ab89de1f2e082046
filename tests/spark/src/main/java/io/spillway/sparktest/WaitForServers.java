package io.spillway.sparktest;

import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.uniffle.proto.CoordinatorServerGrpc;
import org.apache.uniffle.proto.RssProtos;

/**
 * Waits until a Uniffle coordinator can assign shuffle servers, the way the Spark driver will ask:
 * {@code getShuffleAssignments} with the tags {@code ss_v5} + client type and a replica count of
 * {@code --servers}. Exits 0 once it gets SUCCESS with that many distinct servers, 1 after
 * {@code --timeout-s} (printing the last answer and, if the coordinator serves it,
 * {@code getShuffleServerList}). Uses the gRPC stubs inside the Uniffle client jar, so it speaks
 * exactly the proto of the client version under test.
 *
 * <p>With {@code --without host:port,...} the answer must also leave out those servers: the
 * cluster job waits with it until a coordinator has dropped a stopped server (heartbeat timeout)
 * or no longer assigns a decommissioning one.
 *
 * <pre>
 *   WaitForServers --coordinator host:port [--servers N] [--tags ss_v5,GRPC] [--timeout-s 60]
 *                  [--without host:port[,host:port...]]
 * </pre>
 */
public final class WaitForServers {
  public static void main(String[] args) throws Exception {
    String coordinator = null;
    int servers = 1;
    String tags = "ss_v5,GRPC";
    long timeoutS = 60;
    TreeSet<String> without = new TreeSet<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--coordinator":
          coordinator = args[i + 1];
          break;
        case "--servers":
          servers = Integer.parseInt(args[i + 1]);
          break;
        case "--tags":
          tags = args[i + 1];
          break;
        case "--timeout-s":
          timeoutS = Long.parseLong(args[i + 1]);
          break;
        case "--without":
          for (String a : args[i + 1].split(",")) {
            if (!a.isBlank()) {
              without.add(a.trim());
            }
          }
          break;
        default:
          System.err.println("WaitForServers: unknown option " + args[i]);
          System.exit(2);
      }
    }
    if (coordinator == null || !coordinator.contains(":")) {
      System.err.println("WaitForServers: --coordinator host:port is required");
      System.exit(2);
    }
    String host = coordinator.substring(0, coordinator.lastIndexOf(':'));
    int port = Integer.parseInt(coordinator.substring(coordinator.lastIndexOf(':') + 1));
    ManagedChannel channel = NettyChannelBuilder.forAddress(host, port).usePlaintext().build();
    long start = System.nanoTime();
    long deadline = start + timeoutS * 1_000_000_000L;
    String last = "no answer yet";
    int attempt = 0;
    try {
      while (true) {
        attempt++;
        try {
          RssProtos.GetShuffleServerRequest.Builder req =
              RssProtos.GetShuffleServerRequest.newBuilder()
                  .setClientHost("127.0.0.1")
                  .setClientPort("0")
                  .setApplicationId("spillway-e2e-probe_" + System.currentTimeMillis())
                  .setShuffleId(0)
                  .setPartitionNum(servers)
                  .setPartitionNumPerRange(1)
                  .setDataReplica(servers)
                  .setAssignmentShuffleServerNumber(-1)
                  .setEstimateTaskConcurrency(1);
          for (String t : tags.split(",")) {
            if (!t.isBlank()) {
              req.addRequireTags(t.trim());
            }
          }
          RssProtos.GetShuffleAssignmentsResponse resp =
              CoordinatorServerGrpc.newBlockingStub(channel)
                  .withDeadlineAfter(5, TimeUnit.SECONDS)
                  .getShuffleAssignments(req.build());
          TreeSet<String> ids = new TreeSet<>();
          boolean unwanted = false;
          for (RssProtos.PartitionRangeAssignment a : resp.getAssignmentsList()) {
            for (RssProtos.ShuffleServerId s : a.getServerList()) {
              ids.add(s.getId() + "@" + s.getIp() + ":" + s.getPort());
              unwanted |= without.contains(s.getIp() + ":" + s.getPort());
            }
          }
          last = "getShuffleAssignments(tags=" + tags + ", replica=" + servers + ") -> "
              + resp.getStatus() + " " + resp.getRetMsg() + " servers=" + ids
              + (without.isEmpty() ? "" : " (must leave out " + without + ")");
          if (resp.getStatus() == RssProtos.StatusCode.SUCCESS && ids.size() >= servers
              && !unwanted) {
            System.out.printf(
                "coordinator %s ready after %.1fs: %s%n",
                coordinator, (System.nanoTime() - start) / 1e9, ids);
            return;
          }
        } catch (RuntimeException e) {
          last = "getShuffleAssignments failed: " + e;
        }
        if (System.nanoTime() > deadline) {
          System.out.println(
              "coordinator " + coordinator + " not ready after " + timeoutS + " s (" + attempt
                  + " attempts); last: " + last);
          System.out.println("getShuffleServerList: " + serverList(channel));
          System.exit(1);
        }
        Thread.sleep(500);
      }
    } finally {
      channel.shutdownNow();
      channel.awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  /**
   * getShuffleServerList, for diagnostics. Called by reflection: its google.protobuf.Empty
   * argument is relocated differently in each client jar.
   */
  static String serverList(ManagedChannel channel) {
    try {
      Object stub =
          CoordinatorServerGrpc.newBlockingStub(channel).withDeadlineAfter(5, TimeUnit.SECONDS);
      for (Method m : stub.getClass().getMethods()) {
        if (m.getName().equals("getShuffleServerList") && m.getParameterCount() == 1) {
          Object empty = m.getParameterTypes()[0].getMethod("getDefaultInstance").invoke(null);
          RssProtos.GetShuffleServerListResponse r =
              (RssProtos.GetShuffleServerListResponse) m.invoke(stub, empty);
          List<String> ids = new ArrayList<>();
          for (RssProtos.ShuffleServerId s : r.getServersList()) {
            ids.add(s.getId());
          }
          return ids.toString();
        }
      }
      return "not in this client jar";
    } catch (InvocationTargetException e) {
      return "failed: " + e.getCause();
    } catch (ReflectiveOperationException | RuntimeException e) {
      return "failed: " + e;
    }
  }
}
