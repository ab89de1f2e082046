package io.spillway.hdfs;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;

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
 *       port, same metadata);
 *   <li>{@code mkdir <path> <owner> <octal mode>}: a directory made by the superuser and given
 *       to {@code owner}, as operators prepare the shuffle server's remote path.
 * </ul>
 *
 * <p>Commands are idempotent (stopping what is stopped does nothing), so a test can bring the
 * cluster back to health whatever an earlier test left.
 *
 * <p>End of stdin (the test process exited or closed the pipe) shuts the cluster down, so a
 * crashed test never leaves an HDFS behind. The root directory is made world-writable with the
 * sticky bit (like /tmp), so jobs writing as any user can create their shuffle directories.
 *
 * <p>{@code MiniHdfs <base-dir> --secure <ticket-lifetime-seconds>}: a kerberized cluster. A
 * MiniKdc (realm EXAMPLE.COM, on 127.0.0.1) holds {@code hdfs/localhost} and {@code
 * HTTP/localhost} (the cluster's own), {@code rss/localhost} (a shuffle server that may act for
 * any user: {@code hadoop.proxyuser.rss.*}), {@code mallory/localhost} (one that may not) and
 * the job user {@code alice}, each with a keytab {@code <name>.keytab} in {@code <base-dir>/kdc};
 * tickets live {@code ticket-lifetime-seconds}. Before {@code HDFS_URL} it prints {@code
 * KRB5_CONF=<krb5.conf>} and {@code KEYTABS=<dir>}. The superuser is {@code hdfs}; the DataNode
 * takes block tokens without SASL on unprivileged ports (Hadoop's {@code
 * ignore.secure.ports.for.testing}).
 */
public final class MiniHdfs {
  public static void main(String[] args) throws Exception {
    boolean secure = args.length == 3 && args[1].equals("--secure");
    if (args.length != 1 && !secure) {
      System.err.println("usage: MiniHdfs <base-dir> [--secure <ticket-lifetime-seconds>]");
      System.exit(2);
    }
    File base = new File(args[0]);
    Configuration conf = new Configuration();
    if (secure) {
      kerberize(conf, new File(base, "kdc"), Long.parseLong(args[2]));
    }
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

    if (secure) {
      System.out.println("KRB5_CONF=" + System.getProperty("java.security.krb5.conf"));
      System.out.println("KEYTABS=" + new File(base, "kdc").getAbsolutePath());
    }
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
            // mkdir <path> <owner> <octal mode>: a directory prepared the way an operator
            // prepares the remote storage path for the shuffle server's service user.
            String[] words = cmd.split("\\s+");
            if (words.length != 4 || !words[0].equals("mkdir")) {
              throw new IllegalArgumentException("unknown command");
            }
            FileSystem admin = cluster.getFileSystem();
            Path dir = new Path(words[1]);
            admin.mkdirs(dir);
            admin.setOwner(dir, words[2], null);
            admin.setPermission(dir, new FsPermission(Short.parseShort(words[3], 8)));
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

  /** Starts the KDC, writes the keytabs, logs in as hdfs and turns security on in conf. */
  private static void kerberize(Configuration conf, File dir, long lifetimeSeconds)
      throws Exception {
    dir.mkdirs();
    Properties kdcConf = MiniKdc.createConf();
    kdcConf.setProperty(MiniKdc.KDC_BIND_ADDRESS, "127.0.0.1");
    kdcConf.setProperty(MiniKdc.MAX_TICKET_LIFETIME, String.valueOf(lifetimeSeconds * 1000));
    kdcConf.setProperty(MiniKdc.MAX_RENEWABLE_LIFETIME, String.valueOf(lifetimeSeconds * 1000));
    MiniKdc kdc = new MiniKdc(kdcConf, dir);
    kdc.start();
    String realm = kdc.getRealm();
    File hdfs = new File(dir, "hdfs.keytab");
    kdc.createPrincipal(hdfs, "hdfs/localhost", "HTTP/localhost");
    kdc.createPrincipal(new File(dir, "rss.keytab"), "rss/localhost");
    kdc.createPrincipal(new File(dir, "mallory.keytab"), "mallory/localhost");
    kdc.createPrincipal(new File(dir, "alice.keytab"), "alice");

    conf.set("hadoop.security.authentication", "kerberos");
    String service = "hdfs/localhost@" + realm;
    conf.set(DFSConfigKeys.DFS_NAMENODE_KERBEROS_PRINCIPAL_KEY, service);
    conf.set(DFSConfigKeys.DFS_NAMENODE_KEYTAB_FILE_KEY, hdfs.getAbsolutePath());
    conf.set(DFSConfigKeys.DFS_DATANODE_KERBEROS_PRINCIPAL_KEY, service);
    conf.set(DFSConfigKeys.DFS_DATANODE_KEYTAB_FILE_KEY, hdfs.getAbsolutePath());
    conf.set(DFSConfigKeys.DFS_WEB_AUTHENTICATION_KERBEROS_PRINCIPAL_KEY, "HTTP/localhost@" + realm);
    conf.set(DFSConfigKeys.DFS_WEB_AUTHENTICATION_KERBEROS_KEYTAB_KEY, hdfs.getAbsolutePath());
    conf.setBoolean(DFSConfigKeys.DFS_BLOCK_ACCESS_TOKEN_ENABLE_KEY, true);
    conf.setBoolean("ignore.secure.ports.for.testing", true);
    conf.set("hadoop.proxyuser.rss.hosts", "*");
    conf.set("hadoop.proxyuser.rss.groups", "*");
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(service, hdfs.getAbsolutePath());
  }
}
