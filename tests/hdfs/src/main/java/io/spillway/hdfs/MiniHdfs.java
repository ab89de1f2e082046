package io.spillway.hdfs;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * A one-NameNode, one-DataNode HDFS on 127.0.0.1 for Spillway's tests.
 *
 * <p>Usage: {@code java -cp <classes:deps/*> io.spillway.hdfs.MiniHdfs <base-dir>}. Prints
 * {@code HDFS_URL=hdfs://127.0.0.1:<port>} once the cluster is up, then reads commands, one per
 * line, on stdin and answers each with {@code OK <command>} or {@code ERR <command> <reason>}:
 *
 * <ul>
 *   <li>{@code stop-datanode} / {@code start-datanode}: the DataNode goes away / comes back
 *       (same ports), so writes fail while it is gone;
 *   <li>{@code stop-namenode} / {@code start-namenode}: the same for the NameNode (same RPC
 *       port, same metadata).
 * </ul>
 *
 * <p>Commands are idempotent (stopping what is stopped does nothing), so a test can bring the
 * cluster back to health whatever an earlier test left.
 *
 * <p>End of stdin (the test process exited or closed the pipe) shuts the cluster down, so a
 * crashed test never leaves an HDFS behind. The root directory is made world-writable with the
 * sticky bit (like /tmp), so jobs writing as any user can create their shuffle directories.
 */
public final class MiniHdfs {
  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: MiniHdfs <base-dir>");
      System.exit(2);
    }
    File base = new File(args[0]);
    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getAbsolutePath());
    // Loopback only, ephemeral ports everywhere but the NameNode RPC port (kept across restarts).
    conf.set(DFSConfigKeys.DFS_NAMENODE_HTTP_ADDRESS_KEY, "127.0.0.1:0");
    conf.set(DFSConfigKeys.DFS_DATANODE_ADDRESS_KEY, "127.0.0.1:0");
    conf.set(DFSConfigKeys.DFS_DATANODE_HTTP_ADDRESS_KEY, "127.0.0.1:0");
    conf.set(DFSConfigKeys.DFS_DATANODE_IPC_ADDRESS_KEY, "127.0.0.1:0");
    // One DataNode: a pipeline cannot replace a failed node, and small blocks keep it light.
    conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 1);
    conf.set("dfs.client.block.write.replace-datanode-on-failure.enable", "false");
    conf.setLong(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, 16L << 20);
    // Leases of a writer that vanished are recovered quickly (a fault test kills writers).
    conf.setLong(DFSConfigKeys.DFS_HEARTBEAT_INTERVAL_KEY, 1);
    conf.setInt(DFSConfigKeys.DFS_NAMENODE_HEARTBEAT_RECHECK_INTERVAL_KEY, 2000);

    MiniDFSCluster cluster =
        new MiniDFSCluster.Builder(conf).numDataNodes(1).format(true).build();
    cluster.waitActive();
    FileSystem fs = cluster.getFileSystem();
    fs.setPermission(new Path("/"), new FsPermission((short) 01777));
    int port = cluster.getNameNodePort();
    System.out.println("HDFS_URL=hdfs://127.0.0.1:" + port);
    System.out.flush();

    MiniDFSCluster.DataNodeProperties stopped = null;
    boolean nameNodeDown = false;
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String cmd = line.trim();
      if (cmd.isEmpty()) {
        continue;
      }
      try {
        switch (cmd) {
          case "stop-datanode":
            if (stopped == null) {
              stopped = cluster.stopDataNode(0);
            }
            break;
          case "start-datanode":
            if (stopped != null) {
              cluster.restartDataNode(stopped, true);
              stopped = null;
              cluster.waitActive();
            }
            break;
          case "stop-namenode":
            if (!nameNodeDown) {
              cluster.shutdownNameNode(0);
              nameNodeDown = true;
            }
            break;
          case "start-namenode":
            if (nameNodeDown) {
              cluster.restartNameNode(0, true);
              nameNodeDown = false;
            }
            break;
          default:
            throw new IllegalArgumentException("unknown command");
        }
        System.out.println("OK " + cmd);
      } catch (Exception e) {
        System.out.println("ERR " + cmd + " " + e.toString().replace('\n', ' '));
      }
      System.out.flush();
    }
    cluster.shutdown(true);
    System.exit(0);
  }
}
