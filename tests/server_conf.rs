//! The real binary reading the Java shuffle server's own `server.conf`: what `--print-config`
//! makes of the files the Java 0.9.2 and 0.10.0 servers ship, of a file setting every mapped key,
//! of unknown and malformed keys, and a server started from a `server.conf` answering gRPC.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spillway::config::{ByteSize, Config, StoreType};

const GIB: u64 = 1 << 30;

/// The binary with an environment that cannot leak into the config under test.
fn spillway() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spillway"));
    for var in ["WORKER_IP", "WORKER_CONFIG_PATH", "SPILLWAY_ADMIN_TOKEN"] {
        cmd.env_remove(var);
    }
    cmd
}

/// Writes `text` as `dir/name` and runs `spillway --config <it> --print-config`.
fn print_config(dir: &Path, name: &str, text: &str, env: &[(&str, &str)]) -> Output {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let mut cmd = spillway();
    cmd.arg("--config").arg(&path).arg("--print-config");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the binary runs")
}

/// The printed config, which must itself be a valid Spillway TOML config.
fn printed(out: &Output) -> Config {
    assert!(
        out.status.success(),
        "exit {:?}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The warning lines on stderr.
fn warnings(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .map(str::to_owned)
        .collect()
}

fn paths(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| dir.join(n)).collect()
}

fn joined(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// `conf/server.conf` as the Java 0.9.2 source tree ships it: the same keys, with the
/// placeholder disks and coordinators made real.
fn shipped_092(disks: &str) -> String {
    format!(
        "# Shuffle server settings (license header omitted)

rss.rpc.server.port 19999
rss.jetty.http.port 19998
rss.storage.basePath {disks}
rss.storage.type MEMORY_LOCALFILE_HDFS
rss.coordinator.quorum coordinator-a:19999,coordinator-b:19999
rss.server.buffer.capacity 40gb
rss.server.read.buffer.capacity 20gb
rss.server.flush.thread.alive 5
rss.server.flush.localfile.threadPool.size 10
rss.server.flush.hadoop.threadPool.size 60
rss.server.write.retry.max 10
rss.server.single.buffer.flush.enabled true
rss.server.single.buffer.flush.threshold 128m
"
    )
}

/// `conf/server.conf` of the Java 0.10.0 tree (the same keys), with the settings 0.10's server
/// guide adds for a Netty deployment, written with every separator `Properties` accepts.
fn shipped_0100(disks: &str) -> String {
    format!(
        "! Shuffle server settings, 0.10 style
rss.rpc.server.port=19999
rss.jetty.http.port: 19998
rss.rpc.server.type GRPC_NETTY
rss.server.netty.port 17000
rss.rpc.executor.size 2000
rss.storage.basePath = {disks}
rss.storage.type MEMORY_LOCALFILE_HDFS
rss.coordinator.quorum coordinator-a:19999,\\
                       coordinator-b:19999
rss.server.buffer.capacity 330g
rss.server.read.buffer.capacity 20g
rss.server.flush.thread.alive 10
rss.server.heartbeat.interval 10000
rss.rpc.message.max.size 1073741824
rss.server.preAllocation.expired 120000
rss.server.commit.timeout 600000
rss.server.app.expired.withoutHeartbeat 120000
# huge partitions
rss.server.flush.localfile.threadPool.size 20
rss.server.flush.hadoop.threadPool.size 60
rss.server.flush.cold.storage.threshold.size 128m
rss.server.single.buffer.flush.threshold 129m
rss.server.max.concurrency.of.per-partition.write 30
rss.server.huge-partition.size.threshold 20g
rss.server.huge-partition.memory.limit.ratio 0.2
rss.server.write.retry.max 10
rss.server.single.buffer.flush.enabled true
"
    )
}

#[test]
fn java_092_shipped_server_conf() {
    let dir = tempfile::TempDir::new().unwrap();
    let disks = paths(dir.path(), &["disk1", "disk2"]);
    let out = print_config(
        dir.path(),
        "server.conf",
        &shipped_092(&joined(&disks)),
        &[],
    );
    let c = printed(&out);
    assert_eq!(c.grpc_port, 19999);
    assert_eq!(c.metrics.http_port, 19998);
    assert_eq!(c.netty_port, 17000, "0.10's default: both planes");
    assert_eq!(c.store_type, StoreType::MemoryLocalfileHdfs);
    assert_eq!(c.localfile_store.data_paths, disks);
    assert_eq!(
        c.coordinator_quorum,
        vec!["coordinator-a:19999", "coordinator-b:19999"]
    );
    assert_eq!(c.memory_store.capacity, ByteSize(40 * GIB));
    assert_eq!(c.memory_store.read_capacity, ByteSize(20 * GIB));
    assert_eq!(c.hybrid_store.spill_concurrency, 10);
    assert_eq!(c.hdfs_store.max_concurrency, 60);
    assert_eq!(
        c.hybrid_store.memory_single_buffer_max_spill_size,
        ByteSize(128 << 20)
    );
    assert_eq!(c.hybrid_store.memory_spill_high_watermark, 0.75);
    assert_eq!(c.hybrid_store.memory_spill_low_watermark, 0.25);
    assert!(
        !c.coordinator.enabled,
        "a shuffle server runs no coordinator"
    );

    let warned = warnings(&out);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0]
            .contains("2 Java server setting(s) are not used: rss.server.flush.thread.alive (")
            && warned[0].contains("), rss.server.write.retry.max ("),
        "{}",
        warned[0]
    );
}

#[test]
fn java_0100_shipped_server_conf() {
    let dir = tempfile::TempDir::new().unwrap();
    let disks = paths(dir.path(), &["disk1", "disk2", "disk3"]);
    let out = print_config(
        dir.path(),
        "server.conf",
        &shipped_0100(&joined(&disks)),
        &[],
    );
    let c = printed(&out);
    assert_eq!(c.grpc_port, 19999);
    assert_eq!(c.netty_port, 17000);
    assert_eq!(c.metrics.http_port, 19998);
    assert_eq!(c.localfile_store.data_paths, disks);
    assert_eq!(
        c.coordinator_quorum,
        vec!["coordinator-a:19999", "coordinator-b:19999"]
    );
    assert_eq!(c.memory_store.capacity, ByteSize(330 * GIB));
    assert_eq!(c.memory_store.read_capacity, ByteSize(20 * GIB));
    assert_eq!(c.heartbeat_interval, Duration::from_secs(10));
    assert_eq!(
        c.memory_store.buffer_ticket_timeout,
        Duration::from_secs(120)
    );
    assert_eq!(
        c.memory_store.buffer_ticket_check_interval,
        Duration::from_secs(60)
    );
    assert_eq!(c.app.app_heartbeat_timeout, Duration::from_secs(120));
    assert_eq!(c.app.expiry_check_interval, Duration::from_secs(60));
    assert_eq!(c.hybrid_store.spill_concurrency, 20);
    assert_eq!(c.hdfs_store.max_concurrency, 60);
    assert_eq!(
        c.hdfs_store.cold_storage_threshold_size,
        ByteSize(128 << 20)
    );
    assert_eq!(
        c.hybrid_store.memory_single_buffer_max_spill_size,
        ByteSize(129 << 20)
    );
    assert_eq!(c.hdfs_store.partition_write_max_concurrency, 30);
    assert_eq!(
        c.hybrid_store.huge_partition_size_threshold,
        ByteSize(20 * GIB)
    );
    assert_eq!(c.hybrid_store.huge_partition_memory_limit_ratio, 0.2);
    assert_eq!(c.app.commit_timeout, Duration::from_secs(600));

    let warned = warnings(&out);
    assert_eq!(warned.len(), 1, "{warned:?}");
    for key in [
        "rss.rpc.executor.size",
        "rss.server.flush.thread.alive",
        "rss.server.write.retry.max",
    ] {
        assert_eq!(warned[0].matches(key).count(), 1, "{key}: {}", warned[0]);
    }
    assert!(!warned[0].contains("rss.server.commit.timeout"), "mapped");
    assert!(!warned[0].contains("rss.rpc.message.max.size"), "mapped");
    assert_eq!(c.limits.max_request_size, ByteSize(GIB));
    assert!(
        warned[0].contains(" 3 Java server setting(s)"),
        "{}",
        warned[0]
    );
}

#[test]
fn every_mapped_key_and_no_warning() {
    let dir = tempfile::TempDir::new().unwrap();
    let disks = paths(dir.path(), &["a", "b"]);
    let text = format!(
        "rss.rpc.server.port 21000
rss.server.netty.port 21001
rss.rpc.server.type GRPC_NETTY
rss.jetty.http.port 21002
rss.storage.type MEMORY_LOCALFILE
rss.storage.basePath {}
rss.coordinator.quorum c1:19999
rss.server.tags fast,ssd
rss.server.heartbeat.interval 5s
rss.server.buffer.capacity -1
rss.server.buffer.capacity.ratio 0.5
rss.server.read.buffer.capacity 1g
rss.server.read.buffer.capacity.ratio 0.1
rss.server.memory.shuffle.highWaterMark.percentage 80
rss.server.memory.shuffle.lowWaterMark.percentage 20
rss.server.single.buffer.flush.threshold 256m
rss.server.single.buffer.flush.enabled true
rss.server.preAllocation.expired 30000
rss.server.app.expired.withoutHeartbeat 90000
rss.server.flush.localfile.threadPool.size 4
rss.server.flush.hadoop.threadPool.size 16
rss.server.max.concurrency.of.per-partition.write 6
rss.server.flush.cold.storage.threshold.size 32mb
rss.server.storage.flushOperationTimeoutSec 45
rss.server.huge-partition.size.threshold 8g
rss.server.huge-partition.memory.limit.ratio 0.25
rss.server.huge-partition.size.hard.limit 64g
rss.server.high.watermark.write 92
rss.server.low.watermark.write 80
rss.server.health.check.enable true
rss.server.health.min.storage.percentage 100
rss.server.health.check.interval.ms 2000
rss.client.netty.client.connection.timeout.ms 120000
rss.server.decommission.shutdown true
rss.metrics.reporter.class org.apache.uniffle.common.metrics.prometheus.PrometheusPushGatewayMetricReporter
rss.metrics.prometheus.pushgateway.addr pushgateway.example:9091
rss.metrics.prometheus.pushgateway.jobname uniffle
rss.metrics.prometheus.pushgateway.groupingkey cluster=prod
rss.metrics.prometheus.pushgateway.report.interval.seconds 15
rss.security.hadoop.kerberos.enable true
rss.security.hadoop.kerberos.principal rss/host@EXAMPLE.COM
rss.security.hadoop.kerberos.keytab.file /etc/security/rss.keytab
rss.security.hadoop.kerberos.proxy.user.enable true
",
        joined(&disks)
    );
    let out = print_config(dir.path(), "server.properties", &text, &[]);
    let c = printed(&out);
    assert_eq!(warnings(&out), Vec::<String>::new());
    assert_eq!(
        (c.grpc_port, c.netty_port, c.metrics.http_port),
        (21000, 21001, 21002)
    );
    assert_eq!(c.store_type, StoreType::MemoryLocalfile);
    assert_eq!(c.localfile_store.data_paths, disks);
    assert_eq!(c.coordinator_quorum, vec!["c1:19999"]);
    assert_eq!(c.tags, vec!["fast", "ssd"]);
    assert_eq!(c.heartbeat_interval, Duration::from_secs(5));
    // Half of what this process may use: more than nothing, and a whole number of bytes.
    assert!(c.memory_store.capacity.as_u64() > 0);
    assert_eq!(c.memory_store.read_capacity, ByteSize(GIB));
    assert_eq!(c.hybrid_store.memory_spill_high_watermark, 0.8);
    assert_eq!(c.hybrid_store.memory_spill_low_watermark, 0.2);
    assert_eq!(
        c.hybrid_store.memory_single_buffer_max_spill_size,
        ByteSize(256 << 20)
    );
    assert_eq!(
        c.memory_store.buffer_ticket_timeout,
        Duration::from_secs(30)
    );
    assert_eq!(c.app.app_heartbeat_timeout, Duration::from_secs(90));
    assert_eq!(c.hybrid_store.spill_concurrency, 4);
    assert_eq!(c.hdfs_store.max_concurrency, 16);
    assert_eq!(c.hdfs_store.partition_write_max_concurrency, 6);
    assert_eq!(c.hdfs_store.cold_storage_threshold_size, ByteSize(32 << 20));
    assert_eq!(c.localfile_store.write_timeout, Duration::from_secs(45));
    assert_eq!(c.hdfs_store.write_timeout, Duration::from_secs(45));
    assert_eq!(
        c.hybrid_store.huge_partition_size_threshold,
        ByteSize(8 * GIB)
    );
    assert_eq!(c.hybrid_store.huge_partition_memory_limit_ratio, 0.25);
    assert_eq!(
        c.hybrid_store.huge_partition_hard_limit,
        Some(ByteSize(64 * GIB))
    );
    assert_eq!(c.localfile_store.disk_high_watermark, 0.92);
    assert_eq!(c.localfile_store.disk_low_watermark, 0.8);
    assert!(c.health.enabled);
    assert_eq!(c.health.min_healthy_disks_ratio, 1.0);
    assert_eq!(c.health.check_interval, Duration::from_secs(2));
    assert_eq!(c.limits.idle_timeout, Duration::from_secs(120));
    assert_eq!(
        c.metrics.push_gateway_endpoint.as_deref(),
        Some("http://pushgateway.example:9091")
    );
    assert_eq!(c.metrics.push_gateway_job, "uniffle");
    assert_eq!(c.metrics.push_gateway_grouping_key, "cluster=prod");
    assert_eq!(c.metrics.push_interval, Duration::from_secs(15));
    assert_eq!(
        c.hdfs_store.kerberos_principal.as_deref(),
        Some("rss/host@EXAMPLE.COM")
    );
    assert_eq!(
        c.hdfs_store.kerberos_keytab.as_deref(),
        Some(Path::new("/etc/security/rss.keytab"))
    );
}

#[test]
fn unknown_keys_are_warned_once_and_never_fatal() {
    let dir = tempfile::TempDir::new().unwrap();
    let text = format!(
        "rss.storage.basePath {}
rss.server.write.retry.max 10
rss.server.hadoop.dfs.client.socket-timeout 60000
rss.server.hadoop.dfs.replication 2
rss.server.flush.thread.alive 5
log4j.rootLogger INFO
rss.server.write.retry.max 20
rss.server.single.buffer.flush.enabled false
rss.security.hadoop.kerberos.principal unused@EXAMPLE.COM
",
        dir.path().join("d").display()
    );
    let out = print_config(dir.path(), "server.conf", &text, &[]);
    let config = printed(&out);
    // rss.server.hadoop.* items are the server's Hadoop conf, not unknown keys.
    let hadoop: Vec<(&str, &str)> = config
        .hdfs_store
        .hadoop_conf
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        hadoop,
        vec![
            ("dfs.client.socket-timeout", "60000"),
            ("dfs.replication", "2")
        ]
    );
    let warned = warnings(&out);
    assert_eq!(warned.len(), 1, "one warning line: {warned:?}");
    let line = &warned[0];
    assert!(!line.contains("rss.server.hadoop."), "{line}");
    for key in [
        "rss.server.write.retry.max",
        "rss.server.flush.thread.alive",
        "log4j.rootLogger",
        "rss.security.hadoop.kerberos.principal",
    ] {
        assert_eq!(line.matches(key).count(), 1, "{key} listed once: {line}");
    }
    assert!(
        line.contains("log4j.rootLogger (not a key of the Java shuffle server 0.9.2 or 0.10)"),
        "each key says why: {line}"
    );
    // A behaviour switch Spillway has: mapped, so not listed.
    assert!(
        !line.contains("rss.server.single.buffer.flush.enabled"),
        "{line}"
    );
    assert!(!config.hybrid_store.memory_single_buffer_spill);
    assert!(line.contains(" 4 Java server setting(s)"), "{line}");
}

#[test]
fn malformed_values_fail_naming_the_java_key() {
    let dir = tempfile::TempDir::new().unwrap();
    let base = format!("rss.storage.basePath {}\n", dir.path().join("d").display());
    for (line, expected) in [
        (
            "rss.server.buffer.capacity abc",
            "config key `rss.server.buffer.capacity`: \"abc\" is not a size",
        ),
        (
            "rss.rpc.server.port 19999x",
            "config key `rss.rpc.server.port`: \"19999x\" is not an integer",
        ),
        (
            "rss.storage.type MEMORY",
            "config key `rss.storage.type`: \"MEMORY\" is not supported",
        ),
        (
            "rss.server.heartbeat.interval 10m",
            "config key `rss.server.heartbeat.interval`: \"10m\": the Java server reads this as \
             10485760 milliseconds",
        ),
        (
            "rss.server.memory.shuffle.lowWaterMark.percentage 90",
            "config key `rss.server.memory.shuffle.lowWaterMark.percentage`: must be below",
        ),
        (
            "rss.security.hadoop.kerberos.enable true",
            "config key `rss.security.hadoop.kerberos.principal`: is required",
        ),
    ] {
        let out = print_config(dir.path(), "server.conf", &format!("{base}{line}\n"), &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{line} was accepted");
        assert!(stderr.contains(expected), "{line}: {stderr}");
        assert!(stderr.contains("server.conf"), "names the file: {stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn env_overrides_still_apply_and_are_validated() {
    let dir = tempfile::TempDir::new().unwrap();
    let text = format!(
        "rss.storage.basePath {}\nrss.rpc.server.port 20000\n",
        dir.path().join("d").display()
    );
    let token = "a-long-admin-token-0123456789";
    let out = print_config(
        dir.path(),
        "server.conf",
        &text,
        &[("WORKER_IP", "10.1.2.3"), ("SPILLWAY_ADMIN_TOKEN", token)],
    );
    let c = printed(&out);
    assert_eq!(c.worker_ip.as_deref(), Some("10.1.2.3"));
    assert_eq!(c.grpc_port, 20000);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(token),
        "the admin token is never printed"
    );
    // The file may also come from WORKER_CONFIG_PATH.
    let path = dir.path().join("server.conf");
    let out = spillway()
        .arg("--print-config")
        .env("WORKER_CONFIG_PATH", &path)
        .output()
        .unwrap();
    assert_eq!(printed(&out).grpc_port, 20000);
    // Validation runs after the overlay.
    let out = print_config(dir.path(), "server.conf", &text, &[("WORKER_IP", "a b")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("worker_ip"));
}

#[test]
fn printed_config_reads_back_as_the_same_toml() {
    let dir = tempfile::TempDir::new().unwrap();
    let disks = paths(dir.path(), &["disk1", "disk2"]);
    let first = print_config(
        dir.path(),
        "server.conf",
        &shipped_0100(&joined(&disks)),
        &[],
    );
    let toml = String::from_utf8(first.stdout.clone()).unwrap();
    // Both namings: each key that Java keys set names them.
    for (line_start, java) in [
        ("grpc_port = ", "  # rss.rpc.server.port"),
        (
            "capacity = ",
            "  # rss.server.buffer.capacity, rss.server.buffer.capacity.ratio",
        ),
        (
            "after_decommission = ",
            "  # rss.server.decommission.shutdown",
        ),
    ] {
        assert!(
            toml.lines()
                .any(|l| l.starts_with(line_start) && l.ends_with(java)),
            "no `{line_start}…{java}` line in\n{toml}"
        );
    }
    let second = print_config(dir.path(), "printed.toml", &toml, &[]);
    assert!(second.status.success());
    assert_eq!(String::from_utf8_lossy(&second.stdout), toml);
    assert!(warnings(&second).is_empty());
}

#[test]
fn properties_are_recognised_by_content_whatever_the_name() {
    let dir = tempfile::TempDir::new().unwrap();
    let text = format!(
        "# no suffix to go by\nrss.rpc.server.port 20100\nrss.storage.basePath {}\n",
        dir.path().join("d").display()
    );
    for name in ["server", "rss.txt", "server.toml"] {
        let out = print_config(dir.path(), name, &text, &[]);
        assert_eq!(printed(&out).grpc_port, 20100, "{name}");
    }
    // TOML stays TOML, also under a .conf name.
    let out = print_config(dir.path(), "spillway.conf", "grpc_port = 20200\n", &[]);
    assert_eq!(printed(&out).grpc_port, 20200);
}

/// Kills the server if the test fails before it sends SIGTERM.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_started_from_server_conf_answers_grpc() {
    let dir = tempfile::TempDir::new().unwrap();
    let disks = paths(dir.path(), &["disk1", "disk2"]);
    // A Java server.conf moved onto ephemeral ports; the host disk's usage is not under test.
    let conf = format!(
        "rss.rpc.server.port 0
rss.server.netty.port 0
rss.jetty.http.port 0
rss.rpc.server.type GRPC_NETTY
rss.storage.type MEMORY_LOCALFILE
rss.storage.basePath {}
rss.server.buffer.capacity 256mb
rss.server.read.buffer.capacity 64mb
rss.server.high.watermark.write 100
rss.server.low.watermark.write 99
rss.server.flush.thread.alive 5
rss.server.write.retry.max 10
rss.http.basic.authorizationCredentials dXNlcjpzZWNyZXQ=
",
        joined(&disks)
    );
    let conf_path = dir.path().join("server.conf");
    std::fs::write(&conf_path, conf).unwrap();

    let child = spillway()
        .arg("--config")
        .arg(&conf_path)
        .env("RUST_LOG", "info")
        .env("WORKER_IP", "127.0.0.1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("binary starts");
    let mut child = KillOnDrop(Some(child));
    let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("spillway> {line}");
            lines.push(line.clone());
            let _ = tx.send(line);
        }
        lines
    });
    let addr_of = |line: &str, field: &str| -> Option<u16> {
        let rest = line.split(field).nth(1)?;
        let addr: std::net::SocketAddr = rest.split_whitespace().next()?.parse().ok()?;
        Some(addr.port())
    };
    let (port, http_port) = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the binary logs its listening address");
        if let (Some(grpc), Some(http)) =
            (addr_of(&line, "grpc_addr="), addr_of(&line, "http_addr="))
        {
            break (grpc, http);
        }
    };
    let mut client = connect(([127, 0, 0, 1], port).into()).await;
    register(&mut client, "conf_app", 0, 0..2, false).await;
    let expected = write_shuffle(&mut client, "conf_app", 0, 2, 2, 3, 1000).await;
    verify_shuffle(&mut client, "conf_app", 0, &expected).await;
    drop(client);
    java_rest_surface(http_port, &disks).await;

    let mut child = child.0.take().unwrap();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    let lines = reader.join().unwrap();
    let warned: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("Java server setting(s) are not used"))
        .collect();
    assert_eq!(warned.len(), 1, "one warning line: {warned:?}");
    assert!(warned[0].contains("WARN"), "{}", warned[0]);
    for key in [
        "rss.server.flush.thread.alive",
        "rss.server.write.retry.max",
    ] {
        assert_eq!(warned[0].matches(key).count(), 1, "{}", warned[0]);
    }
}

/// What the 0.10 REST surface shows of a server started from a Java `server.conf`: the `rss.*`
/// keys as written (credentials masked), metrics without a type, and the Basic credentials of
/// `rss.http.basic.authorizationCredentials` opening the guarded endpoints.
async fn java_rest_surface(http_port: u16, disks: &[PathBuf]) {
    let base = format!("http://127.0.0.1:{http_port}");
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    let body = http
        .get(format!("{base}/api/shuffleServer/conf"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let conf: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(conf["code"], 0, "{conf}");
    let entries: std::collections::BTreeMap<String, String> = conf["data"]
        .as_array()
        .expect("data is a list")
        .iter()
        .map(|e| {
            (
                e["argumentKey"].as_str().unwrap().to_owned(),
                e["argumentValue"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        entries.len(),
        13,
        "every key of the file, once: {entries:?}"
    );
    assert!(entries.keys().all(|k| k.starts_with("rss.")), "{entries:?}");
    assert_eq!(entries["rss.rpc.server.type"], "GRPC_NETTY");
    assert_eq!(entries["rss.storage.basePath"], joined(disks));
    assert_eq!(entries["rss.server.buffer.capacity"], "256mb");
    // Kept though Spillway ignores it: the file is what the operator wrote.
    assert_eq!(entries["rss.server.flush.thread.alive"], "5");
    assert_eq!(
        entries["rss.http.basic.authorizationCredentials"], "******",
        "the credentials never show on an open endpoint"
    );

    // The 0.10 dashboard asks for every registry without a type.
    for path in ["/api/shuffleServer/metrics", "/api/shuffleServer/metrics/"] {
        let r = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        let names: std::collections::BTreeSet<&str> = v["metrics"]
            .as_array()
            .expect("metrics list")
            .iter()
            .filter_map(|m| m["name"].as_str())
            .collect();
        // One family of each registry: server, grpc, netty, jvm.
        for name in [
            "total_received_data",
            "grpc_total",
            "netty_send_shuffle_data_request_total",
            "process_resident_memory_bytes",
        ] {
            assert!(names.contains(name), "{path}: no {name} in {names:?}");
        }
        assert!(v["timeStamp"].as_i64().unwrap() > 0);
    }

    // The guarded endpoints want the Basic credentials, loopback included.
    let r = http
        .post(format!("{base}/admin/cancel_decommission"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Basic"));
    assert_eq!(r.text().await.unwrap(), "Authentication Failed");
    let r = http
        .post(format!("{base}/admin/cancel_decommission"))
        .header("Authorization", "Basic dXNlcjpvdGhlcg==")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = http
        .post(format!("{base}/admin/cancel_decommission"))
        .basic_auth("user", Some("secret"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
}
