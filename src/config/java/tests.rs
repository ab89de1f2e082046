use super::values::{java_double, java_duration, java_size};
use super::*;
use crate::config::{ByteSize, HdfsWriteAs, StoreType};
use std::path::PathBuf;
use std::time::Duration;

const GIB: u64 = 1 << 30;

fn props(text: &str) -> Vec<(String, String)> {
    parse_properties(text)
        .unwrap()
        .into_iter()
        .map(|p| (p.key, p.value))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn load(text: &str) -> JavaConfig {
    from_properties(text, Some(10 * GIB)).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn load_err(text: &str) -> ConfigError {
    match from_properties(text, Some(10 * GIB)) {
        Ok(c) => panic!("accepted:\n{text}\n{:?}", c.config),
        Err(e) => e,
    }
}

#[test]
fn separators_comments_and_blanks() {
    let text = "# comment\n! also a comment\n\n   \na=1\nb = 2\nc:3\nd : 4\ne 5\n\tf\t \t6\ng\n\
                h=\ni = x = y\nj:=k\n";
    assert_eq!(
        props(text),
        pairs(&[
            ("a", "1"),
            ("b", "2"),
            ("c", "3"),
            ("d", "4"),
            ("e", "5"),
            ("f", "6"),
            ("g", ""),
            ("h", ""),
            ("i", "x = y"),
            ("j", "=k"),
        ])
    );
}

#[test]
fn continuations_escapes_and_line_ends() {
    let text = "list = a,\\\n       b,\\\r\n   c\r\
                key\\ with\\:seps = v\\tw\n\
                uni=\\u0041\\u00e9\\uD83D\\uDE00\\q\n\
                even=ends\\\\\n\
                next=1\n\
                # a comment \\\n\
                after=comment\n\
                trailing=x\\";
    assert_eq!(
        props(text),
        pairs(&[
            ("list", "a,b,c"),
            ("key with:seps", "v\tw"),
            ("uni", "Aé😀q"),
            ("even", "ends\\"),
            ("next", "1"),
            ("after", "comment"),
            ("trailing", "x"),
        ])
    );
    let entries = parse_properties("a=1\n\nb=2\\\n  3\nc=4").unwrap();
    assert_eq!(
        entries.iter().map(|p| p.line).collect::<Vec<_>>(),
        vec![1, 3, 5]
    );
}

#[test]
fn values_are_trimmed_like_the_java_server_does() {
    assert_eq!(props("a = 1 \t\n"), pairs(&[("a", "1")]));
    assert_eq!(props("a = \\t1\\t"), pairs(&[("a", "1")]));
}

#[test]
fn malformed_unicode_escape_names_the_key() {
    let err = parse_properties("ok=1\nbad=\\u12g4\n").unwrap_err();
    assert_eq!(err.key, "bad");
    let err = parse_properties("b\\u12=1\n").unwrap_err();
    assert_eq!(err.key, "line 1");
}

#[test]
fn java_sizes() {
    for (text, bytes) in [
        ("1024", 1024),
        ("-1", -1),
        ("+7", 7),
        ("100b", 100),
        ("512k", 512 << 10),
        ("512KB", 512 << 10),
        ("256m", 256 << 20),
        ("40gb", 40 << 30),
        ("40G", 40 << 30),
        ("1t", 1 << 40),
        ("2pb", 2 << 50),
    ] {
        assert_eq!(java_size(text), Ok(bytes), "{text}");
    }
    for text in [
        "", "abc", "1.5g", "10 g", "-1g", "10gib", "10q", "1e3", "0x10", "g", "9999999p",
    ] {
        assert!(java_size(text).is_err(), "{text:?} should fail");
    }
    assert!(java_size("abc").unwrap_err().contains("is not a size"));
}

#[test]
fn java_durations() {
    for (text, ms) in [
        ("10000", 10_000),
        ("-1", -1),
        ("10s", 10_000),
        ("500ms", 500),
        ("2min", 120_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("1500us", 1),
    ] {
        assert_eq!(java_duration(text, 1), Ok(ms), "{text}");
    }
    assert_eq!(java_duration("30", 1000), Ok(30_000));
    assert_eq!(java_duration("30s", 1000), Ok(30_000));
    let err = java_duration("5m", 1).unwrap_err();
    assert!(err.contains("5242880 milliseconds"), "{err}");
    for text in ["", "ten", "10 s", "1.5s", "10x"] {
        assert!(java_duration(text, 1).is_err(), "{text:?} should fail");
    }
}

#[test]
fn java_doubles() {
    assert_eq!(java_double("75"), Some(75.0));
    assert_eq!(java_double("75.5d"), Some(75.5));
    assert_eq!(java_double(".5"), Some(0.5));
    assert_eq!(java_double("1e1"), Some(10.0));
    for text in ["", "NaN", "Infinity", "inf", "75%", "seventy"] {
        assert_eq!(java_double(text), None, "{text:?}");
    }
}

/// `conf/server.conf` as the Java 0.9.2 and 0.10.0 source trees ship it (same keys in both;
/// placeholder paths and hosts made concrete).
const SHIPPED: &str = "\
# the Apache license header would be here
rss.rpc.server.port 19999
rss.jetty.http.port 19998
rss.storage.basePath /data1/rss,/data2/rss
rss.storage.type MEMORY_LOCALFILE_HDFS
rss.coordinator.quorum coord1:19999,coord2:19999
rss.server.buffer.capacity 40gb
rss.server.read.buffer.capacity 20gb
rss.server.flush.thread.alive 5
rss.server.flush.localfile.threadPool.size 10
rss.server.flush.hadoop.threadPool.size 60
rss.server.disk.capacity 1t
rss.server.single.buffer.flush.enabled true
rss.server.single.buffer.flush.threshold 128m
";

#[test]
fn shipped_server_conf() {
    let loaded = load(SHIPPED);
    let c = &loaded.config;
    assert_eq!(c.grpc_port, 19999);
    assert_eq!(c.metrics.http_port, 19998);
    assert_eq!(c.netty_port, 17000);
    assert_eq!(c.store_type, StoreType::MemoryLocalfileHdfs);
    assert_eq!(
        c.localfile_store.data_paths,
        vec![PathBuf::from("/data1/rss"), PathBuf::from("/data2/rss")]
    );
    assert_eq!(c.coordinator_quorum, vec!["coord1:19999", "coord2:19999"]);
    assert_eq!(c.memory_store.capacity, ByteSize(40 * GIB));
    assert_eq!(c.memory_store.read_capacity, ByteSize(20 * GIB));
    assert_eq!(c.hybrid_store.spill_concurrency, 10);
    assert_eq!(c.hdfs_store.max_concurrency, 60);
    assert_eq!(
        c.hybrid_store.memory_single_buffer_max_spill_size,
        ByteSize(128 << 20)
    );
    // Java's memory watermarks, since the file sets none.
    assert_eq!(c.hybrid_store.memory_spill_high_watermark, 0.75);
    assert_eq!(c.hybrid_store.memory_spill_low_watermark, 0.25);
    let keys: Vec<&str> = loaded
        .ignored
        .iter()
        .map(|k| k.split(' ').next().unwrap())
        .collect();
    assert_eq!(keys, vec!["rss.server.flush.thread.alive"]);
    assert_eq!(c.localfile_store.disk_capacity, Some(ByteSize(1 << 40)));
}

#[test]
fn ratios_size_memory_from_what_the_process_may_use() {
    let c = load("rss.storage.basePath /d\n").config;
    assert_eq!(c.memory_store.capacity, ByteSize(6 * GIB));
    assert_eq!(c.memory_store.read_capacity, ByteSize(2 * GIB));
    let c = load(
        "rss.server.buffer.capacity -1\nrss.server.buffer.capacity.ratio 0.5\n\
         rss.server.read.buffer.capacity.ratio 0.1\n",
    )
    .config;
    assert_eq!(c.memory_store.capacity, ByteSize(5 * GIB));
    assert_eq!(c.memory_store.read_capacity, ByteSize(GIB));
    // An explicit size wins over the ratio.
    let c = load("rss.server.buffer.capacity 1g\nrss.server.buffer.capacity.ratio 0.5\n").config;
    assert_eq!(c.memory_store.capacity, ByteSize(GIB));
    // Unknown memory keeps Spillway's defaults.
    let c = from_properties("rss.rpc.server.port 1\n", None)
        .unwrap()
        .config;
    assert_eq!(c.memory_store, crate::config::MemoryStoreConfig::default());
}

#[test]
fn server_type_decides_netty_only_without_a_port() {
    assert_eq!(load("rss.rpc.server.type GRPC\n").config.netty_port, -1);
    assert_eq!(
        load("rss.rpc.server.type grpc_netty\n").config.netty_port,
        17000
    );
    assert_eq!(
        load("rss.rpc.server.type GRPC\nrss.server.netty.port 17001\n")
            .config
            .netty_port,
        17001
    );
    assert_eq!(load("rss.server.netty.port -1\n").config.netty_port, -1);
    assert_eq!(load("rss.server.netty.port -5\n").config.netty_port, -1);
    assert_eq!(load("rss.server.netty.port 0\n").config.netty_port, 0);
    assert_eq!(load("rss.rpc.server.port 1\n").config.netty_port, 17000);
}

#[test]
fn every_mapped_key() {
    let text = "\
rss.rpc.server.port 21000
rss.server.netty.port 21001
rss.rpc.server.type GRPC_NETTY
rss.jetty.http.port 21002
rss.storage.type MEMORY_LOCALFILE
rss.storage.basePath /d1, /d2 ,/d3,
rss.coordinator.quorum c1:19999, c2:19999
rss.server.tags t1,t2
rss.server.heartbeat.interval 5000
rss.server.buffer.capacity 2g
rss.server.buffer.capacity.ratio 0.9
rss.server.read.buffer.capacity 512m
rss.server.read.buffer.capacity.ratio 0.1
rss.server.memory.shuffle.highWaterMark.percentage 70
rss.server.memory.shuffle.lowWaterMark.percentage 30.5
rss.server.single.buffer.flush.threshold 64m
rss.server.single.buffer.flush.enabled TRUE
rss.server.preAllocation.expired 30000
rss.server.app.expired.withoutHeartbeat 120000
rss.server.flush.localfile.threadPool.size 12
rss.server.flush.hadoop.threadPool.size 40
rss.server.max.concurrency.of.per-partition.write 5
rss.server.flush.cold.storage.threshold.size 32m
rss.server.storage.flushOperationTimeoutSec 90
rss.server.huge-partition.size.threshold 10g
rss.server.huge-partition.memory.limit.ratio 0.3
rss.server.huge-partition.size.hard.limit 50g
rss.server.huge-partition.split.limit 5g
rss.server.high.watermark.write 90
rss.server.low.watermark.write 70
rss.server.health.check.enable true
rss.server.health.min.storage.percentage 50
rss.server.health.check.interval.ms 3000
rss.client.netty.client.connection.timeout.ms 300000
rss.server.decommission.shutdown true
rss.metrics.reporter.class org.apache.uniffle.common.metrics.prometheus.PrometheusPushGatewayMetricReporter
rss.metrics.prometheus.pushgateway.addr gateway:9091
rss.metrics.prometheus.pushgateway.jobname rss-servers
rss.metrics.prometheus.pushgateway.groupingkey cluster=c1;zone=z
rss.metrics.prometheus.pushgateway.report.interval.seconds 30
rss.security.hadoop.kerberos.enable true
rss.security.hadoop.kerberos.principal rss/host@REALM
rss.security.hadoop.kerberos.keytab.file /etc/rss.keytab
rss.security.hadoop.kerberos.proxy.user.enable true
rss.http.basic.authorizationCredentials dXNlcjpzZWNyZXQ=
";
    let loaded = load(text);
    assert_eq!(loaded.ignored, Vec::<String>::new());
    let c = loaded.config;
    let mut e = Config {
        grpc_port: 21000,
        netty_port: 21001,
        store_type: StoreType::MemoryLocalfile,
        coordinator_quorum: vec!["c1:19999".into(), "c2:19999".into()],
        tags: vec!["t1".into(), "t2".into()],
        heartbeat_interval: Duration::from_secs(5),
        ..Config::default()
    };
    e.metrics.http_port = 21002;
    e.localfile_store.data_paths = ["/d1", "/d2", "/d3"].map(PathBuf::from).to_vec();
    e.memory_store.capacity = ByteSize(2 * GIB);
    e.memory_store.read_capacity = ByteSize(512 << 20);
    e.hybrid_store.memory_spill_high_watermark = 0.7;
    e.hybrid_store.memory_spill_low_watermark = 0.305;
    e.hybrid_store.memory_single_buffer_max_spill_size = ByteSize(64 << 20);
    e.memory_store.buffer_ticket_timeout = Duration::from_secs(30);
    e.memory_store.buffer_ticket_check_interval = Duration::from_secs(15);
    e.app.app_heartbeat_timeout = Duration::from_secs(120);
    e.app.expiry_check_interval = Duration::from_secs(60);
    e.hybrid_store.spill_concurrency = 12;
    e.hdfs_store.max_concurrency = 40;
    e.hdfs_store.partition_write_max_concurrency = 5;
    e.hdfs_store.cold_storage_threshold_size = ByteSize(32 << 20);
    e.localfile_store.write_timeout = Duration::from_secs(90);
    e.hdfs_store.write_timeout = Duration::from_secs(90);
    e.hybrid_store.huge_partition_size_threshold = ByteSize(10 * GIB);
    e.hybrid_store.huge_partition_memory_limit_ratio = 0.3;
    e.hybrid_store.huge_partition_hard_limit = Some(ByteSize(50 * GIB));
    e.hybrid_store.huge_partition_split_limit = Some(ByteSize(5 * GIB));
    e.localfile_store.disk_high_watermark = 0.9;
    e.localfile_store.disk_low_watermark = 0.7;
    e.health.enabled = true;
    e.health.min_healthy_disks_ratio = 0.5;
    e.health.check_interval = Duration::from_secs(3);
    e.limits.idle_timeout = Duration::from_secs(300);
    e.metrics.push_gateway_endpoint = Some("http://gateway:9091".into());
    e.metrics.push_gateway_job = "rss-servers".into();
    e.metrics.push_gateway_grouping_key = "cluster=c1;zone=z".into();
    e.metrics.push_interval = Duration::from_secs(30);
    e.hdfs_store.kerberos_principal = Some("rss/host@REALM".into());
    e.hdfs_store.kerberos_keytab = Some(PathBuf::from("/etc/rss.keytab"));
    e.metrics.basic_credentials = Some(crate::config::Secret("dXNlcjpzZWNyZXQ=".into()));
    // The file as written, for the conf endpoint.
    e.java_properties = props(text);
    assert_eq!(c, e);
}

#[test]
fn storage_types_without_memory_and_the_commit_timeout() {
    for (name, store_type) in StoreType::ALL {
        let c = load(&format!(
            "rss.storage.type {name}\nrss.server.commit.timeout 30000\n"
        ));
        assert_eq!(c.config.store_type, store_type, "{name}");
        assert_eq!(c.config.app.commit_timeout, Duration::from_secs(30));
        assert!(c.ignored.is_empty(), "{:?}", c.ignored);
    }
    let e = load_err("rss.storage.type MEMORY\n");
    assert_eq!(e.key, "rss.storage.type");
}

#[test]
fn proxy_user_disabled_writes_as_the_server() {
    let on = "rss.security.hadoop.kerberos.enable true\n\
              rss.security.hadoop.kerberos.principal rss/host@REALM\n\
              rss.security.hadoop.kerberos.keytab.file /etc/rss.keytab\n";
    let c = load(&format!(
        "{on}rss.security.hadoop.kerberos.proxy.user.enable false\n"
    ))
    .config;
    assert_eq!(c.hdfs_store.write_as, HdfsWriteAs::Server);
    let c = load(on).config;
    assert_eq!(c.hdfs_store.write_as, HdfsWriteAs::Auto);
}

#[test]
fn keys_match_in_any_case_and_the_last_duplicate_wins() {
    let loaded = load("RSS.RPC.SERVER.PORT 1\nrss.rpc.server.port 2\nrss.Rpc.Server.Port 3\n");
    assert_eq!(loaded.config.grpc_port, 3);
    assert!(loaded.ignored.is_empty());
}

#[test]
fn unknown_keys_are_listed_once_in_file_order() {
    let loaded = load(
        "zz.other 1\nrss.server.flush.thread.alive 1\nrss.server.hadoop.dfs.replication 2\n\
         rss.server.flush.thread.alive 2\nrss.server.single.buffer.flush.enabled false\n\
         rss.server.decommission.shutdown false\nrss.metrics.prometheus.pushgateway.addr g:1\n\
         rss.security.hadoop.kerberos.principal p@R\n\
         rss.server.max.concurrency.of.per-partition.write 4\n\
         rss.server.max.concurrency.of.single.partition.writer 9\n\
         rss.server.hadoop.fs.defaultFS hdfs://ns1\n",
    );
    let keys: Vec<&str> = loaded
        .ignored
        .iter()
        .map(|k| k.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        keys,
        vec![
            "zz.other",
            "rss.server.flush.thread.alive",
            "rss.metrics.prometheus.pushgateway.addr",
            "rss.security.hadoop.kerberos.principal",
            "rss.server.max.concurrency.of.single.partition.writer",
        ]
    );
    assert_eq!(loaded.config.hdfs_store.partition_write_max_concurrency, 4);
    let hadoop: Vec<(&str, &str)> = loaded
        .config
        .hdfs_store
        .hadoop_conf
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        hadoop,
        vec![("dfs.replication", "2"), ("fs.defaultFS", "hdfs://ns1")],
        "rss.server.hadoop.* items become the server's Hadoop conf, case kept"
    );
    // The old per-partition name is read when the new one is absent.
    let c = load("rss.server.max.concurrency.of.single.partition.writer 9\n").config;
    assert_eq!(c.hdfs_store.partition_write_max_concurrency, 9);
    // Behaviour switches that used to be warned are mapped now.
    assert!(!loaded.config.hybrid_store.memory_single_buffer_spill);
    assert!(!loaded.config.shutdown.after_decommission);
    // Each listed key says why.
    assert_eq!(
        loaded.ignored[0],
        "zz.other (not a key of the Java shuffle server 0.9.2 or 0.10)"
    );
    let krb5 = load("rss.security.hadoop.kerberos.krb5-conf.file /etc/krb5.conf\n");
    assert!(
        krb5.ignored[0].starts_with("rss.security.hadoop.kerberos.krb5-conf.file (")
            && krb5.ignored[0].contains("KRB5_CONFIG"),
        "{:?}",
        krb5.ignored
    );
}

#[test]
fn malformed_values_name_the_java_key() {
    for (text, key, needle) in [
        ("rss.server.buffer.capacity abc", "rss.server.buffer.capacity", "\"abc\" is not a size"),
        ("rss.server.buffer.capacity 1.5g", "rss.server.buffer.capacity", "fractions"),
        ("rss.server.buffer.capacity 0", "rss.server.buffer.capacity", "above 0"),
        ("rss.rpc.server.port 19999x", "rss.rpc.server.port", "not an integer"),
        ("rss.rpc.server.port 70000", "rss.rpc.server.port", "out of range"),
        ("rss.jetty.http.port -1", "rss.jetty.http.port", "out of range"),
        ("rss.server.netty.port abc", "rss.server.netty.port", "not an integer"),
        ("rss.rpc.server.type NETTY", "rss.rpc.server.type", "GRPC, GRPC_NETTY"),
        ("rss.storage.type MEMORY", "rss.storage.type", "MEMORY_LOCALFILE"),
        ("rss.server.heartbeat.interval 10m", "rss.server.heartbeat.interval", "byte size"),
        ("rss.server.heartbeat.interval 0", "rss.server.heartbeat.interval", "above 0"),
        ("rss.server.app.expired.withoutHeartbeat soon", "rss.server.app.expired.withoutHeartbeat", "not a duration"),
        ("rss.server.memory.shuffle.highWaterMark.percentage 150", "rss.server.memory.shuffle.highWaterMark.percentage", "percentage"),
        ("rss.server.memory.shuffle.lowWaterMark.percentage 80", "rss.server.memory.shuffle.lowWaterMark.percentage", "below"),
        ("rss.server.buffer.capacity.ratio 1.5", "rss.server.buffer.capacity.ratio", "ratio"),
        ("rss.server.single.buffer.flush.enabled yes", "rss.server.single.buffer.flush.enabled", "true or false"),
        ("rss.server.flush.localfile.threadPool.size 0", "rss.server.flush.localfile.threadPool.size", "out of range"),
        ("rss.server.huge-partition.size.hard.limit -1", "rss.server.huge-partition.size.hard.limit", "above 0"),
        ("rss.storage.basePath /a,/a", "rss.storage.basePath", "listed twice"),
        ("rss.server.topN.appShuffleDataSize.number -1", "rss.server.topN.appShuffleDataSize.number", "out of range"),
        ("rss.server.metrics.blockSizeStatistics.buckets 1k,0", "rss.server.metrics.blockSizeStatistics.buckets", "above 0"),
        ("rss.coordinator.quorum http://c:1", "rss.coordinator.quorum", "host"),
        ("rss.server.low.watermark.write 96", "rss.server.low.watermark.write", "below"),
        ("rss.rpc.server.port 19998\nrss.jetty.http.port 19998", "rss.jetty.http.port", "different ports"),
        ("rss.rpc.server.port 2000\nrss.server.netty.port 2000", "rss.server.netty.port", "its own port"),
        ("rss.metrics.reporter.class PrometheusPushGatewayMetricReporter", "rss.metrics.prometheus.pushgateway.addr", "required"),
        ("rss.metrics.reporter.class PrometheusPushGatewayMetricReporter\nrss.metrics.prometheus.pushgateway.addr g:1", "rss.metrics.prometheus.pushgateway.jobname", "required"),
        ("rss.metrics.reporter.class PrometheusPushGatewayMetricReporter\nrss.metrics.prometheus.pushgateway.addr g:1\nrss.metrics.prometheus.pushgateway.jobname j\nrss.metrics.prometheus.pushgateway.groupingkey instance=x", "rss.metrics.prometheus.pushgateway.groupingkey", "set by the server"),
        ("rss.metrics.reporter.class PrometheusPushGatewayMetricReporter\nrss.metrics.prometheus.pushgateway.addr g:1\nrss.metrics.prometheus.pushgateway.jobname a/b", "rss.metrics.prometheus.pushgateway.jobname", "without '/'"),
        ("rss.security.hadoop.kerberos.enable true", "rss.security.hadoop.kerberos.principal", "required"),
        ("rss.security.hadoop.kerberos.enable true\nrss.security.hadoop.kerberos.principal p@R", "rss.security.hadoop.kerberos.keytab.file", "required"),
        ("rss.server.health.check.enable true\nrss.server.health.min.storage.percentage 101", "rss.server.health.min.storage.percentage", "percentage"),
    ] {
        let err = load_err(text);
        assert_eq!(err.key, key, "{text}: {err}");
        assert!(err.reason.contains(needle), "{text}: {err}");
    }
    assert_eq!(
        load_err("rss.server.buffer.capacity abc").to_string(),
        "config key `rss.server.buffer.capacity`: \"abc\" is not a size (expected a byte \
         count or digits with b, k, kb, m, mb, g, gb, t, tb, p or pb, e.g. 40g)"
    );
}

#[test]
fn push_gateway_addr_with_scheme_is_kept() {
    let c = load(
        "rss.metrics.reporter.class org.apache.uniffle.common.metrics.prometheus.PrometheusPushGatewayMetricReporter\n\
         rss.metrics.prometheus.pushgateway.addr https://gw.example.com:9091\n\
         rss.metrics.prometheus.pushgateway.jobname j\n",
    )
    .config;
    assert_eq!(
        c.metrics.push_gateway_endpoint.as_deref(),
        Some("https://gw.example.com:9091")
    );
}

#[test]
fn split_limit_long_max_is_none_and_negative_is_zero() {
    let split = |v: &str| {
        load(&format!("rss.server.huge-partition.split.limit {v}\n"))
            .config
            .hybrid_store
            .huge_partition_split_limit
    };
    assert_eq!(split("9223372036854775807"), None);
    assert_eq!(split("-1"), Some(ByteSize(0)));
    assert_eq!(split("0"), Some(ByteSize(0)));
    assert_eq!(split("20g"), Some(ByteSize(20 * GIB)));
    assert_eq!(
        load("").config.hybrid_store.huge_partition_split_limit,
        None
    );
}

#[test]
fn top_n_apps_maps_and_its_refresh_interval_is_listed_as_unused() {
    let loaded = load(
        "rss.server.topN.appShuffleDataSize.number 3\n\
         rss.server.topN.appShuffleDataSize.refreshIntervalMs 5000\n",
    );
    assert_eq!(loaded.config.metrics.top_n_apps, 3);
    assert_eq!(
        loaded.ignored,
        vec![
            "rss.server.topN.appShuffleDataSize.refreshIntervalMs (Spillway computes the \
             top-N families at each scrape, never older than Java's refresh)"
        ]
    );
    assert_eq!(load("").config.metrics.top_n_apps, 10, "Java's default");
    let c = load(
        "rss.server.metrics.blockSizeStatisticsEnabled true\n\
         rss.server.metrics.blockSizeStatistics.buckets 1k, 2mb\n",
    )
    .config;
    assert!(c.metrics.block_size_statistics);
    assert_eq!(
        c.metrics.block_size_buckets,
        vec![ByteSize(1024), ByteSize(2 << 20)]
    );
}

#[test]
fn hard_limit_of_long_max_means_none() {
    let c = load("rss.server.huge-partition.size.hard.limit 9223372036854775807\n").config;
    assert_eq!(c.hybrid_store.huge_partition_hard_limit, None);
}

#[test]
fn format_is_recognised_by_content_and_suffix() {
    assert!(looks_like_properties("rss.rpc.server.port 1\n"));
    assert!(looks_like_properties(
        "# c\nRSS.rpc.server.port=1\nother=2\n"
    ));
    assert!(!looks_like_properties("grpc_port = 1\n"));
    assert!(!looks_like_properties("[memory_store]\nrss.x = 1\n"));
    assert!(!looks_like_properties(""));

    let dir = tempfile::TempDir::new().unwrap();
    let toml_named_conf = dir.path().join("spillway.conf");
    let c = parse_config_file(&toml_named_conf, "grpc_port = 1234\n", None).unwrap();
    assert_eq!(c.grpc_port, 1234);
    let err = parse_config_file(&toml_named_conf, "grpc_portt = 1\n", None).unwrap_err();
    assert!(err.reason.contains("no rss.* key"), "{err}");
    // A Java file without a suffix, and an all-comments server.conf.
    let c = parse_config_file(
        &dir.path().join("server"),
        "rss.rpc.server.port 1234\n",
        None,
    )
    .unwrap();
    assert_eq!(c.grpc_port, 1234);
    let c = parse_config_file(&dir.path().join("server.conf"), "# nothing\n", None).unwrap();
    assert_eq!(c.hybrid_store.memory_spill_high_watermark, 0.75);
    // A TOML file stays TOML.
    let c = parse_config_file(&dir.path().join("c.toml"), "grpc_port = 1\n", None).unwrap();
    assert_eq!(c.grpc_port, 1);
}

#[test]
fn available_memory_is_plausible() {
    if let Some(bytes) = available_memory() {
        assert!(bytes >= 64 << 20, "{bytes}");
    }
}

#[test]
fn refused_keys_stop_start_up_unless_set_to_the_java_default() {
    let e = load_err("rss.server.merge.enable true\n");
    assert_eq!(e.key, "rss.server.merge.enable");
    assert!(e.reason.contains("remote merge"), "{}", e.reason);
    assert!(
        e.reason.contains("only Java's default false"),
        "{}",
        e.reason
    );
    let loaded = load("rss.server.merge.enable FALSE\n");
    assert!(loaded.ignored.is_empty(), "{:?}", loaded.ignored);
}

#[test]
fn disk_capacity_init_failures_and_health_checks() {
    let c = load(
        "rss.storage.basePath /d1,/d2\nrss.server.disk.capacity 100g\n\
         rss.server.disk.capacity.ratio 0.5\nrss.server.disk-capacity.watermark.check.enabled true\n\
         rss.server.localstorage.initialize.max.fail.number 1\n\
         rss.server.health.check.enable true\nrss.server.health.max.storage.usage.percentage 95\n\
         rss.server.health.storage.recovery.usage.percentage 70\n\
         rss.server.health.checker.localStorageExecutionTimeoutMS 2000\n\
         rss.server.health.checker.class.names org.apache.uniffle.server.HealthScriptChecker\n\
         rss.server.health.checker.script.path /opt/check.sh\n\
         rss.server.health.checker.script.execute.timeout 300\n\
         rss.server.health.markUnhealthyOnceStorageCorruption true\n",
    );
    assert_eq!(c.ignored, Vec::<String>::new());
    assert!(c.config.health.unhealthy_on_failed_disk);
    let (lf, h) = (&c.config.localfile_store, &c.config.health);
    assert_eq!(lf.disk_capacity, Some(ByteSize(100 * GIB)));
    assert_eq!(lf.disk_capacity_ratio, 0.5);
    assert!(lf.disk_usage_watermark_check);
    assert_eq!(lf.init_max_failed_paths, 1);
    assert!(h.enabled);
    assert_eq!((h.disk_max_usage, h.disk_recovery_usage), (0.95, 0.7));
    assert_eq!(h.disk_check_timeout, Duration::from_secs(2));
    assert_eq!(h.script_path, Some(PathBuf::from("/opt/check.sh")));
    assert_eq!(h.script_timeout, Duration::from_millis(300));

    // Java's -1 means "use the ratio".
    let c = load("rss.server.disk.capacity -1\n");
    assert_eq!(c.config.localfile_store.disk_capacity, None);
    // A script without its checker class listed, or with health checks off, is not run.
    for text in [
        "rss.server.health.check.enable true\nrss.server.health.checker.script.path /x.sh\n",
        "rss.server.health.checker.class.names org.apache.uniffle.server.HealthScriptChecker\n\
         rss.server.health.checker.script.path /x.sh\n",
    ] {
        let c = load(text);
        assert_eq!(c.config.health.script_path, None, "{text}");
        assert!(c.ignored[0].starts_with("rss.server.health.checker.script.path ("));
    }
    for (text, key, says) in [
        (
            "rss.server.health.checker.class.names com.acme.MyChecker\n",
            "rss.server.health.checker.class.names",
            "com.acme.MyChecker",
        ),
        (
            "rss.server.health.check.enable true\n\
             rss.server.health.checker.class.names org.apache.uniffle.server.HealthScriptChecker\n",
            "rss.server.health.checker.class.names",
            "script.path is not set",
        ),
        (
            "rss.server.disk.capacity.ratio 1.5\n",
            "rss.server.disk.capacity.ratio",
            "(0, 1]",
        ),
        (
            "rss.server.localstorage.initialize.max.fail.number -1\n",
            "rss.server.localstorage.initialize.max.fail.number",
            "out of range",
        ),
        (
            "rss.storage.type HDFS\nrss.server.health.check.enable true\n",
            "rss.server.health.check.enable",
            "LOCALFILE",
        ),
    ] {
        let e = load_err(text);
        assert_eq!(e.key, key, "{text}");
        assert!(e.reason.contains(says), "{text}: {}", e.reason);
    }
}
