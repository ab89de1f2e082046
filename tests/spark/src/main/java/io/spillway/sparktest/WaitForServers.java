package io.spillway.sparktest;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.apache.uniffle.client.impl.grpc.CoordinatorGrpcClient;
import org.apache.uniffle.client.request.RssGetShuffleAssignmentsRequest;
import org.apache.uniffle.client.response.RssGetShuffleAssignmentsResponse;
import org.apache.uniffle.common.ShuffleServerInfo;
import org.apache.uniffle.common.rpc.StatusCode;
import org.apache.uniffle.proto.RssProtos;

/**
 * Waits until a Uniffle coordinator can assign shuffle servers, the way the Spark driver will ask:
 * {@code getShuffleAssignments} with the tags {@code ss_v5} + client type and a replica count of
 * {@code --servers}. Exits 0 once it gets SUCCESS with that many distinct servers, 1 after
 * {@code --timeout-s} (printing the last answer and, if the coordinator serves it,
 * {@code getShuffleServerList}). Uses the coordinator client inside the Uniffle client jar, so it
 * speaks exactly the proto of the client version under test.
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
    Set<String> tagSet = new HashSet<>();
    for (String t : tags.split(",")) {
      if (!t.isBlank()) {
        tagSet.add(t.trim());
      }
    }
    // The client's own coordinator client, not gRPC stubs: Uniffle's master relocates gRPC under
    // org.apache.uniffle.shaded and the 0.9 releases do not, while this API is the same in both.
    CoordinatorGrpcClient client = new CoordinatorGrpcClient(host, port);
    long start = System.nanoTime();
    long deadline = start + timeoutS * 1_000_000_000L;
    String last = "no answer yet";
    int attempt = 0;
    try {
      while (true) {
        attempt++;
        try {
          RssGetShuffleAssignmentsResponse resp =
              client.getShuffleAssignments(
                  new RssGetShuffleAssignmentsRequest(
                      "spillway-e2e-probe_" + System.currentTimeMillis(),
                      0,
                      servers,
                      1,
                      servers,
                      tagSet,
                      -1,
                      1,
                      new HashSet<>()));
          TreeSet<String> ids = new TreeSet<>();
          boolean unwanted = false;
          if (resp.getPartitionToServers() != null) {
            for (List<ShuffleServerInfo> list : resp.getPartitionToServers().values()) {
              for (ShuffleServerInfo s : list) {
                ids.add(s.getId() + "@" + s.getHost() + ":" + s.getGrpcPort());
                unwanted |= without.contains(s.getHost() + ":" + s.getGrpcPort());
              }
            }
          }
          last = "getShuffleAssignments(tags=" + tags + ", replica=" + servers + ") -> "
              + resp.getStatusCode() + " " + resp.getMessage() + " servers=" + ids
              + (without.isEmpty() ? "" : " (must leave out " + without + ")");
          if (resp.getStatusCode() == StatusCode.SUCCESS && ids.size() >= servers && !unwanted) {
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
          System.out.println("getShuffleServerList: " + serverList(client));
          System.exit(1);
        }
        Thread.sleep(500);
      }
    } finally {
      client.close();
    }
  }

  /** getShuffleServerList, for diagnostics. */
  static String serverList(CoordinatorGrpcClient client) {
    try {
      List<String> ids = new ArrayList<>();
      for (RssProtos.ShuffleServerId s : client.getShuffleServerList().getServersList()) {
        ids.add(s.getId());
      }
      return ids.toString();
    } catch (RuntimeException e) {
      return "failed: " + e;
    }
  }
}
