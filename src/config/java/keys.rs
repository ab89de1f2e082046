//! Every configuration key the Java shuffle server reads, in 0.9.2 and in 0.10, and what Spillway
//! does with each: the one place that says it, as data.
//!
//! The start-up warning, `--print-config`'s Java names, the key table in docs/compatibility.md and the checks on
//! the mapper all read this table, so none of them can drift from the others. The mapping code
//! itself lives in the file of its concern (listeners, storage, memory, ...); a unit test checks
//! that the mapper consults exactly the keys marked [`Treatment::Mapped`] here.
//!
//! Where the key list came from: `ShuffleServerConf` and `RssBaseConf` of the 0.9.2 and 0.10
//! releases, plus the keys the server reads from other classes (metric reporters, the Netty
//! client options it shares with the clients, security); see the key table in docs/compatibility.md.

/// Which Java releases read a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Releases {
    /// 0.9.2 and 0.10.
    Both,
    /// 0.9.2 only: 0.10 dropped or renamed it.
    Only092,
    /// New in 0.10.
    Only010,
    /// Not a key of the Java server: Spillway's own, spelled the Java way so a `server.conf`
    /// can set it. Counted with no Java release.
    Spillway,
}

impl Releases {
    /// As the table in docs/compatibility.md writes it.
    pub fn label(self) -> &'static str {
        match self {
            Releases::Both => "0.9.2, 0.10",
            Releases::Only092 => "0.9.2",
            Releases::Only010 => "0.10",
            Releases::Spillway => "Spillway only",
        }
    }
}

/// What Spillway does with a Java key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// Spillway gives the key its Java meaning. `to` lists the Spillway keys it sets (empty for a
    /// behaviour switch with no key of its own), `how` the conversion, `absent` what Spillway
    /// uses when the file does not set it.
    Mapped {
        /// The Spillway keys it sets, dotted.
        to: &'static [&'static str],
        /// The conversion from the Java value.
        how: &'static str,
        /// What Spillway uses when the file does not set the key.
        absent: &'static str,
    },
    /// Means nothing for Spillway (JVM internals, a Java thread pool Spillway does not have...).
    /// A file that sets it gets the reason in the start-up warning; its value is not used.
    NotApplicable(&'static str),
    /// Asks for something Spillway will not do. Set to its Java default it is accepted (it asks
    /// for nothing); set to anything else, start-up stops with the reason.
    Refused(&'static str),
}

/// One Java key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JavaKey {
    /// As Java spells it; a family of keys ends in `.*` (`rss.server.hadoop.*`).
    pub key: &'static str,
    /// Which releases read it.
    pub releases: Releases,
    /// Java's default, as its `ConfigOption` declares it (`(none)` when it has none).
    pub java_default: &'static str,
    /// What Spillway does with it.
    pub treatment: Treatment,
}

impl JavaKey {
    /// Whether `key` (as written in a file, any case, as Java matches it) is this key or a
    /// member of this family.
    pub fn matches(&self, key: &str) -> bool {
        match self.key.strip_suffix('*') {
            Some(prefix) => {
                key.len() > prefix.len()
                    && key.is_char_boundary(prefix.len())
                    && key[..prefix.len()].eq_ignore_ascii_case(prefix)
            }
            None => key.eq_ignore_ascii_case(self.key),
        }
    }
}

/// The table row for `key`, if the Java server reads it.
pub fn lookup(key: &str) -> Option<&'static JavaKey> {
    KEYS.iter().find(|k| k.matches(key))
}

/// How many keys of `releases`' servers are mapped, not applicable and refused, in that order.
pub fn counts(release_092: bool) -> (usize, usize, usize) {
    counts_of(KEYS, release_092)
}

/// [`counts`] over any key table (the coordinator's too).
pub(super) fn counts_of(keys: &[JavaKey], release_092: bool) -> (usize, usize, usize) {
    let mut out = (0, 0, 0);
    for k in keys {
        let read = match k.releases {
            Releases::Both => true,
            Releases::Only092 => release_092,
            Releases::Only010 => !release_092,
            Releases::Spillway => false,
        };
        if !read {
            continue;
        }
        match k.treatment {
            Treatment::Mapped { .. } => out.0 += 1,
            Treatment::NotApplicable(_) => out.1 += 1,
            Treatment::Refused(_) => out.2 += 1,
        }
    }
    out
}

/// The table of every key in docs/compatibility.md (Markdown), generated so the docs cannot disagree with
/// what the server does.
pub fn markdown_table() -> String {
    markdown_table_of(KEYS)
}

/// [`markdown_table`] over any key table (the coordinator's too).
pub(super) fn markdown_table_of(keys: &[JavaKey]) -> String {
    let (m92, n92, r92) = counts_of(keys, true);
    let (m10, n10, r10) = counts_of(keys, false);
    let mut out = format!(
        "0.9.2: {m92} keys mapped, {n92} not applicable, {r92} refused. \
         0.10: {m10} mapped, {n10} not applicable, {r10} refused.\n\n\
         | Java key | Releases | Java default | Spillway | Conversion, or why not | When absent |\n\
         |---|---|---|---|---|---|\n"
    );
    let cell = |s: &str| s.replace('|', "\\|");
    for k in keys {
        let (spillway, how, absent) = match k.treatment {
            Treatment::Mapped { to, how, absent } => {
                let to = if to.is_empty() {
                    "(behaviour)".to_owned()
                } else {
                    to.iter()
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                (to, how.to_owned(), absent.to_owned())
            }
            Treatment::NotApplicable(why) => ("n/a".to_owned(), why.to_owned(), String::new()),
            Treatment::Refused(why) => (
                "refused unless default".to_owned(),
                why.to_owned(),
                String::new(),
            ),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            k.key,
            k.releases.label(),
            cell(k.java_default),
            spillway,
            cell(&how),
            cell(&absent)
        ));
    }
    out
}

/// A table row: the constructors below name the treatment, so each row reads as what it is.
const fn row(
    key: &'static str,
    releases: Releases,
    java_default: &'static str,
    treatment: Treatment,
) -> JavaKey {
    JavaKey {
        key,
        releases,
        java_default,
        treatment,
    }
}

pub(super) const fn mapped(
    key: &'static str,
    releases: Releases,
    java_default: &'static str,
    to: &'static [&'static str],
    how: &'static str,
    absent: &'static str,
) -> JavaKey {
    row(
        key,
        releases,
        java_default,
        Treatment::Mapped { to, how, absent },
    )
}

pub(super) const fn na(
    key: &'static str,
    releases: Releases,
    java_default: &'static str,
    why: &'static str,
) -> JavaKey {
    row(key, releases, java_default, Treatment::NotApplicable(why))
}

pub(super) const fn refused(
    key: &'static str,
    releases: Releases,
    java_default: &'static str,
    why: &'static str,
) -> JavaKey {
    row(key, releases, java_default, Treatment::Refused(why))
}

use Releases::{Both, Only010, Only092, Spillway};

// Rows the server's and the coordinator's tables share (Jetty, the push gateway, the RPC
// port): written once here, listed in both.

/// `rss.jetty.https.port`, the same in both files.
pub(super) const RSS_JETTY_HTTPS_PORT: JavaKey = mapped(
    "rss.jetty.https.port",
    Both,
    "(none)",
    &["metrics.https"],
    "the HTTPS port (metrics.https.port), beside the HTTP one as Jetty's second connector; required with rss.jetty.ssl.enable",
    "no HTTPS",
);

/// `rss.jetty.ssl.keymanager.password`, the same in both files.
pub(super) const RSS_JETTY_SSL_KEYMANAGER_PASSWORD: JavaKey = mapped(
    "rss.jetty.ssl.keymanager.password",
    Both,
    "(none)",
    &["metrics.https"],
    "metrics.https.key_password; a PKCS#12 keystore has one password, so it must equal the keystore password",
    "the keystore password",
);

/// `rss.jetty.ssl.keystore.password`, the same in both files.
pub(super) const RSS_JETTY_SSL_KEYSTORE_PASSWORD: JavaKey = mapped(
    "rss.jetty.ssl.keystore.password",
    Both,
    "(none)",
    &["metrics.https"],
    "metrics.https.keystore_password",
    "none (a keystore without a password)",
);

/// `rss.jetty.ssl.keystore.path`, the same in both files.
pub(super) const RSS_JETTY_SSL_KEYSTORE_PATH: JavaKey = mapped(
    "rss.jetty.ssl.keystore.path",
    Both,
    "(none)",
    &["metrics.https"],
    "metrics.https.keystore_path: PKCS#12 (.p12/.pfx) or PEM with chain and key; a JKS keystore is refused with the keytool command that converts it",
    "none; required with rss.jetty.ssl.enable",
);

/// `rss.metrics.prometheus.pushgateway.addr`, the same in both files.
pub(super) const RSS_METRICS_PROMETHEUS_PUSHGATEWAY_ADDR: JavaKey = mapped(
    "rss.metrics.prometheus.pushgateway.addr",
    Both,
    "(none)",
    &["metrics.push_gateway_endpoint"],
    "host:port gets http://; required with the reporter",
    "none",
);

/// `rss.metrics.prometheus.pushgateway.groupingkey`, the same in both files.
pub(super) const RSS_METRICS_PROMETHEUS_PUSHGATEWAY_GROUPINGKEY: JavaKey = mapped(
    "rss.metrics.prometheus.pushgateway.groupingkey",
    Both,
    "",
    &["metrics.push_gateway_grouping_key"],
    "k1=v1;k2=v2",
    "empty",
);

/// `rss.metrics.prometheus.pushgateway.jobname`, the same in both files.
pub(super) const RSS_METRICS_PROMETHEUS_PUSHGATEWAY_JOBNAME: JavaKey = mapped(
    "rss.metrics.prometheus.pushgateway.jobname",
    Both,
    "(none)",
    &["metrics.push_gateway_job"],
    "required with the reporter",
    "none",
);

/// `rss.metrics.prometheus.pushgateway.report.interval.seconds`, the same in both files.
pub(super) const RSS_METRICS_PROMETHEUS_PUSHGATEWAY_REPORT_INTERVAL_SECONDS: JavaKey = mapped(
    "rss.metrics.prometheus.pushgateway.report.interval.seconds",
    Both,
    "10",
    &["metrics.push_interval"],
    "seconds > 0",
    "10 s",
);

/// `rss.metrics.reporter.class`, the same in both files.
pub(super) const RSS_METRICS_REPORTER_CLASS: JavaKey = mapped(
    "rss.metrics.reporter.class",
    Both,
    "(none)",
    &["metrics.push_gateway_endpoint"],
    "must be the PrometheusPushGatewayMetricReporter; it turns pushing on; another class is warned",
    "no pushing",
);

/// `rss.rpc.server.port`, the same in both files.
pub(super) const RSS_RPC_SERVER_PORT: JavaKey = mapped(
    "rss.rpc.server.port",
    Both,
    "19999",
    &["grpc_port"],
    "0..=65535; 0 = any free port",
    "19999",
);

/// Every key, sorted by name.
pub static KEYS: &[JavaKey] = &[
    na(
        "jvm.pause.info-threshold.ms",
        Both,
        "1000",
        "a JVM GC-pause monitor threshold: Spillway has no JVM and no garbage collector",
    ),
    na(
        "jvm.pause.warn-threshold.ms",
        Both,
        "10000",
        "a JVM GC-pause monitor threshold: Spillway has no JVM and no garbage collector",
    ),
    na(
        "reconfigurable.file.name",
        Only092,
        "",
        "set by the 0.9 Java server itself to the file it watches; Spillway knows its --config path",
    ),
    mapped(
        "rss.client.netty.client.connection.timeout.ms",
        Both,
        "600000",
        &["limits.idle_timeout"],
        "ms (the Java server closes idle Netty connections after it)",
        "600 s",
    ),
    mapped(
        "rss.coordinator.quorum",
        Both,
        "(none)",
        &["coordinator_quorum"],
        "comma-separated host:port",
        "none (standalone)",
    ),
    na(
        "rss.coordinator.rpc.client.type",
        Only010,
        "GRPC",
        "picks the Java server's coordinator client; Spillway's heartbeats always use gRPC, as the coordinators serve it",
    ),
    mapped(
        "rss.http.basic.authorizationCredentials",
        Only010,
        "(none)",
        &["metrics.basic_credentials"],
        "as written (base64 of user:password), compared as-is with the Authorization: Basic value",
        "none",
    ),
    na(
        "rss.io.serializations",
        Only010,
        "org.apache.uniffle.common.serializer.writable.WritableSerializer,org.apache.uniffle.common.serializer.kryo.KryoSerializer",
        "serializer settings of remote merge, which Spillway does not serve",
    ),
    na(
        "rss.jetty.corePool.size",
        Both,
        "256",
        "sizes a Java thread pool (Jetty); Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    na(
        "rss.jetty.http.idle.timeout",
        Both,
        "30000",
        "Jetty's idle timeout; Spillway's HTTP server closes idle keep-alive connections by itself",
    ),
    mapped(
        "rss.jetty.http.port",
        Both,
        "19998",
        &["metrics.http_port"],
        "0..=65535",
        "19998",
    ),
    RSS_JETTY_HTTPS_PORT,
    na(
        "rss.jetty.maxPool.size",
        Both,
        "256",
        "sizes a Java thread pool (Jetty); Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    mapped(
        "rss.jetty.ssl.enable",
        Both,
        "false",
        &["metrics.https"],
        "true serves HTTPS on rss.jetty.https.port with rss.jetty.ssl.keystore.path; false warns the other rss.jetty.ssl keys",
        "false (HTTP only)",
    ),
    RSS_JETTY_SSL_KEYMANAGER_PASSWORD,
    RSS_JETTY_SSL_KEYSTORE_PASSWORD,
    RSS_JETTY_SSL_KEYSTORE_PATH,
    na(
        "rss.jetty.ssl.truststore.password",
        Both,
        "(none)",
        "Jetty uses the keystore as its trust store and asks clients for no certificate, so the trust store is never consulted; Spillway asks for none either",
    ),
    na(
        "rss.jetty.stop.timeout",
        Both,
        "30000",
        "Jetty's stop timeout; Spillway's HTTP port stops within shutdown.drain_timeout",
    ),
    na(
        "rss.jvm.metrics.verbose.enable",
        Both,
        "true",
        "selects the JVM metric set; Spillway exports no jvm_* families (see the metrics section)",
    ),
    na(
        "rss.kryo.referenceTracking",
        Only010,
        "true",
        "serializer settings of remote merge, which Spillway does not serve",
    ),
    na(
        "rss.kryo.registrationClasses",
        Only010,
        "",
        "serializer settings of remote merge, which Spillway does not serve",
    ),
    na(
        "rss.kryo.registrationRequired",
        Only010,
        "false",
        "serializer settings of remote merge, which Spillway does not serve",
    ),
    na(
        "rss.kryo.scalaRegistrationRequired",
        Only010,
        "false",
        "serializer settings of remote merge, which Spillway does not serve",
    ),
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_ADDR,
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_GROUPINGKEY,
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_JOBNAME,
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_REPORT_INTERVAL_SECONDS,
    RSS_METRICS_REPORTER_CLASS,
    na(
        "rss.port.max.retry",
        Both,
        "16",
        "Java retries binding random ports; Spillway binds the configured port, or any free one for 0, once",
    ),
    na(
        "rss.random.port.max",
        Both,
        "65535",
        "Java picks port 0 from this range; Spillway lets the OS pick any free port",
    ),
    na(
        "rss.random.port.min",
        Both,
        "40000",
        "Java picks port 0 from this range; Spillway lets the OS pick any free port",
    ),
    mapped(
        "rss.reconfigure.interval.sec",
        Both,
        "5",
        &["reconfigure_interval"],
        "seconds > 0: how often the config file is checked for changes to the keys that can change at runtime",
        "5 s",
    ),
    na(
        "rss.rpc.client.type",
        Only092,
        "GRPC",
        "picks the Java server's coordinator client; Spillway's heartbeats always use gRPC, as the coordinators serve it",
    ),
    na(
        "rss.rpc.client.type.grpc.timeout",
        Only092,
        "60000",
        "Spillway's heartbeat RPC times out after the heartbeat interval, so a hung coordinator never delays the next beat",
    ),
    na(
        "rss.rpc.executor.queue.size",
        Only010,
        "2147483647",
        "sizes a Java thread pool; Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    na(
        "rss.rpc.executor.size",
        Both,
        "1000",
        "sizes a Java thread pool; Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    mapped(
        "rss.rpc.message.max.size",
        Both,
        "1073741824",
        &["limits.max_request_size"],
        "size > 0, at most 2G - 1; gRPC's inbound message limit (Java's Netty server ignores it, and so does Spillway's)",
        "1G (Java's)",
    ),
    na(
        "rss.rpc.metrics.enabled",
        Both,
        "true",
        "Spillway's gRPC metrics are always on (they cost a few atomic adds per call)",
    ),
    na(
        "rss.rpc.netty.maxOrder",
        Only010,
        "3",
        "tunes Java Netty's allocator or event loops; Spillway's Netty plane is tokio, with its own buffers",
    ),
    na(
        "rss.rpc.netty.pageSize",
        Only010,
        "4096",
        "tunes Java Netty's allocator or event loops; Spillway's Netty plane is tokio, with its own buffers",
    ),
    na(
        "rss.rpc.netty.smallCacheEnabled",
        Only010,
        "true",
        "tunes Java Netty's allocator or event loops; Spillway's Netty plane is tokio, with its own buffers",
    ),
    na(
        "rss.rpc.netty.smallCacheSize",
        Only010,
        "1024",
        "tunes Java Netty's allocator or event loops; Spillway's Netty plane is tokio, with its own buffers",
    ),
    RSS_RPC_SERVER_PORT,
    mapped(
        "rss.rpc.server.type",
        Both,
        "GRPC_NETTY [0.9.2: GRPC]",
        &["netty_port"],
        "only when no Netty port is set: GRPC turns the Netty plane off, GRPC_NETTY puts it on 17000",
        "17000 (0.10's default GRPC_NETTY; a 0.9 server without either key served gRPC only)",
    ),
    mapped(
        "rss.security.hadoop.kerberos.enable",
        Both,
        "false",
        &["hdfs_store.kerberos_principal", "hdfs_store.kerberos_keytab"],
        "gates the principal and keytab; with false they are warned",
        "false",
    ),
    mapped(
        "rss.security.hadoop.kerberos.keytab.file",
        Both,
        "(none)",
        &["hdfs_store.kerberos_keytab"],
        "required when Kerberos is enabled",
        "none",
    ),
    na(
        "rss.security.hadoop.kerberos.krb5-conf.file",
        Both,
        "(none)",
        "Spillway's Kerberos library reads KRB5_CONFIG from the environment: set KRB5_CONFIG to this file",
    ),
    mapped(
        "rss.security.hadoop.kerberos.principal",
        Both,
        "(none)",
        &["hdfs_store.kerberos_principal"],
        "required when Kerberos is enabled",
        "none",
    ),
    mapped(
        "rss.security.hadoop.kerberos.proxy.user.enable",
        Both,
        "true",
        &["hdfs_store.write_as"],
        "true: \"auto\" (a proxy of the app's user under Kerberos, the server's own identity under simple authentication); false: \"server\"",
        "true",
    ),
    na(
        "rss.security.hadoop.kerberos.relogin.interval.sec",
        Both,
        "60",
        "Spillway renews its ticket from the keytab before it expires, with no fixed interval",
    ),
    mapped(
        "rss.server.app.expired.withoutHeartbeat",
        Both,
        "60000",
        &["app.app_heartbeat_timeout", "app.expiry_check_interval"],
        "ms; the check interval is half of it (Java's sweep period)",
        "60 s / 10 s",
    ),
    na(
        "rss.server.blockIdManagerClass",
        Only010,
        "org.apache.uniffle.server.block.DefaultShuffleBlockIdManager",
        "a Java class; Spillway keeps each partition's reported block ids in a roaring bitmap of its own, with the same wire results",
    ),
    mapped(
        "rss.server.buffer.capacity",
        Both,
        "-1",
        &["memory_store.capacity"],
        "size; negative = use the ratio",
        "the ratio",
    ),
    mapped(
        "rss.server.buffer.capacity.ratio",
        Both,
        "0.6",
        &["memory_store.capacity"],
        "x the memory the process may use (physical memory, or the cgroup limit when lower) instead of Java's max heap, rounded down to whole MiB; in (0, 1]",
        "0.6",
    ),
    na(
        "rss.server.buffer.flush.triggeredWhenCachingData",
        Only010,
        "true",
        "Spillway checks the memory watermarks on every cached block, as Java's default true does",
    ),
    na(
        "rss.server.buffer.lab.chunkPoolCapacityRatio",
        Only010,
        "0.1",
        "tunes Java's local allocation buffers (see rss.server.buffer.lab.enabled)",
    ),
    na(
        "rss.server.buffer.lab.chunkSize",
        Only010,
        "102400",
        "tunes Java's local allocation buffers (see rss.server.buffer.lab.enabled)",
    ),
    na(
        "rss.server.buffer.lab.enabled",
        Only010,
        "false",
        "Java's local allocation buffers cut GC churn from small blocks; Spillway keeps blocks as slices of the request's buffer, with no GC to relieve",
    ),
    na(
        "rss.server.buffer.lab.maxAllocRatio",
        Only010,
        "0.2",
        "tunes Java's local allocation buffers (see rss.server.buffer.lab.enabled)",
    ),
    na(
        "rss.server.buffer.maxFlushEventCountPerBuffer",
        Only010,
        "5",
        "caps Java's in-flight flush events per buffer; Spillway spills a buffer with one spill at a time",
    ),
    na(
        "rss.server.cleanup.threshold",
        Both,
        "10.0",
        "Java's disk-cleanup trigger; Spillway deletes an app's files when the app is removed or expires",
    ),
    na(
        "rss.server.commit.check.interval.max.ms",
        Both,
        "10000",
        "Java polls commits at up to this interval; Spillway's commit wakes when the spill completes",
    ),
    mapped(
        "rss.server.commit.timeout",
        Both,
        "600000",
        &["app.commit_timeout"],
        "ms > 0; how long a commit and finishShuffle wait for the spill",
        "600 s",
    ),
    na(
        "rss.server.decommission.check.interval",
        Both,
        "60000",
        "Spillway checks for the last app at every app removal and every app.expiry_check_interval, never later than Java's interval",
    ),
    mapped(
        "rss.server.decommission.shutdown",
        Both,
        "true",
        &["shutdown.after_decommission"],
        "boolean; false: stay up as DECOMMISSIONED until cancelled",
        "true",
    ),
    mapped(
        "rss.server.disk-capacity.watermark.check.enabled",
        Both,
        "false",
        &["localfile_store.disk_usage_watermark_check"],
        "boolean: the file system's own usage must also stay under the write watermarks",
        "false",
    ),
    mapped(
        "rss.server.disk.capacity",
        Both,
        "-1",
        &["localfile_store.disk_capacity"],
        "size per data path of this server's own files; negative = use the ratio; a path with less room at start-up fails to initialise",
        "0.9 x each file system's size",
    ),
    mapped(
        "rss.server.disk.capacity.ratio",
        Both,
        "0.9",
        &["localfile_store.disk_capacity_ratio"],
        "share of each data path's file system when rss.server.disk.capacity is negative; in (0, 1]",
        "0.9",
    ),
    na(
        "rss.server.displayMetricsList",
        Only010,
        "app:app_num_with_node,partition:partition_num_with_node",
        "picks the metrics the Java server reports to the coordinator's dashboard; Spillway's heartbeat carries the standard fields",
    ),
    na(
        "rss.server.event.size.threshold.l1",
        Both,
        "200000",
        "buckets of a Java flush-event metric Spillway does not export",
    ),
    na(
        "rss.server.event.size.threshold.l2",
        Both,
        "1000000",
        "buckets of a Java flush-event metric Spillway does not export",
    ),
    na(
        "rss.server.event.size.threshold.l3",
        Both,
        "10000000",
        "buckets of a Java flush-event metric Spillway does not export",
    ),
    mapped(
        "rss.server.flush.cold.storage.threshold.size",
        Both,
        "67108864",
        &["hdfs_store.cold_storage_threshold_size"],
        "size > 0",
        "64 MiB",
    ),
    mapped(
        "rss.server.flush.hadoop.threadPool.size",
        Both,
        "60",
        &["hdfs_store.max_concurrency"],
        ">= 1",
        "10 (Java: 60 threads)",
    ),
    mapped(
        "rss.server.flush.localfile.threadPool.size",
        Both,
        "10",
        &["hybrid_store.spill_concurrency"],
        ">= 1",
        "8 (Java: 10 threads)",
    ),
    na(
        "rss.server.flush.thread.alive",
        Both,
        "120",
        "sizes a Java thread pool (idle flush threads); Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    na(
        "rss.server.flush.threadPool.queue.size",
        Both,
        "2147483647",
        "the length of Java's flush queue; Spillway's pending spills wait in memory, bounded by the memory budget",
    ),
    na(
        "rss.server.flush.tryLockTimeoutMs",
        Only010,
        "100",
        "Java's per-app flush lock wait; Spillway's spills take no app-wide lock",
    ),
    mapped(
        "rss.server.hadoop.*",
        Both,
        "(none)",
        &["hdfs_store.hadoop_conf"],
        "`rss.server.hadoop.<item>` = `hdfs_store.hadoop_conf[<item>]`, on top of HADOOP_CONF_DIR, under each app's remote-storage conf items",
        "none",
    ),
    mapped(
        "rss.server.health.check.enable",
        Both,
        "false",
        &["health.enabled"],
        "boolean: runs the storage checker (and the health script) every interval; a failing pass reports UNHEALTHY",
        "off",
    ),
    mapped(
        "rss.server.health.check.interval.ms",
        Both,
        "5000",
        &["health.check_interval"],
        "ms > 0",
        "5 s",
    ),
    mapped(
        "rss.server.health.checker.class.names",
        Both,
        "(none)",
        &["health.script_path"],
        "only org.apache.uniffle.server.HealthScriptChecker (enables rss.server.health.checker.script.path); any other class stops start-up (the storage checker is built in)",
        "the storage checker only",
    ),
    mapped(
        "rss.server.health.checker.localStorageExecutionTimeoutMS",
        Both,
        "60000",
        &["health.disk_check_timeout"],
        "ms > 0; a slower probe leaves its path out of the healthy count (Spillway also flags it unhealthy until a probe succeeds)",
        "60 s",
    ),
    mapped(
        "rss.server.health.checker.script.execute.timeout",
        Both,
        "5000",
        &["health.script_timeout"],
        "ms > 0 (Java: <= 0 runs without a deadline, refused here); the script and its children are killed at the deadline",
        "5 s",
    ),
    mapped(
        "rss.server.health.checker.script.path",
        Both,
        "(none)",
        &["health.script_path"],
        "used when HealthScriptChecker is listed and health checks are on; unhealthy on a non-zero exit, a stdout line starting with ERROR, or the timeout",
        "none",
    ),
    mapped(
        "rss.server.health.markUnhealthyOnceStorageCorruption",
        Only010,
        "false",
        &["health.unhealthy_on_failed_disk"],
        "boolean: with health checks on, one data path failing its probe makes the server UNHEALTHY whatever the healthy share",
        "false",
    ),
    mapped(
        "rss.server.health.max.storage.usage.percentage",
        Both,
        "90.0",
        &["health.disk_max_usage"],
        "percent / 100: a data path whose file system is this full is not healthy",
        "90 %",
    ),
    mapped(
        "rss.server.health.min.storage.percentage",
        Both,
        "80.0",
        &["health.min_healthy_disks_ratio"],
        "percent / 100: the server is healthy while at least this share of its data paths is",
        "80 %",
    ),
    mapped(
        "rss.server.health.storage.recovery.usage.percentage",
        Both,
        "80.0",
        &["health.disk_recovery_usage"],
        "percent / 100: an unhealthy data path is healthy again at or below this usage",
        "80 %",
    ),
    na(
        "rss.server.heartbeat.delay",
        Both,
        "10000",
        "Spillway sends its first heartbeat as soon as it serves, so coordinators can assign it at once",
    ),
    mapped(
        "rss.server.heartbeat.interval",
        Both,
        "10000",
        &["heartbeat_interval"],
        "ms",
        "10 s",
    ),
    na(
        "rss.server.heartbeat.threadNum",
        Both,
        "2",
        "sizes a Java thread pool (heartbeats); Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    na(
        "rss.server.heartbeatReportOnUnregisterEnabled",
        Only010,
        "false",
        "an extra heartbeat after unregister (off by default); Spillway's next heartbeat reports it",
    ),
    mapped(
        "rss.server.high.watermark.write",
        Both,
        "95.0",
        &["localfile_store.disk_high_watermark"],
        "percent / 100",
        "95 %",
    ),
    mapped(
        "rss.server.huge-partition.memory.limit.ratio",
        Both,
        "0.2",
        &["hybrid_store.huge_partition_memory_limit_ratio"],
        "in (0, 1]",
        "0.2",
    ),
    mapped(
        "rss.server.huge-partition.size.hard.limit",
        Only010,
        "9223372036854775807",
        &["hybrid_store.huge_partition_hard_limit"],
        "size > 0; 9223372036854775807 = no limit",
        "no limit",
    ),
    mapped(
        "rss.server.huge-partition.size.threshold",
        Both,
        "21474836480",
        &["hybrid_store.huge_partition_size_threshold"],
        "size > 0",
        "20 GiB",
    ),
    mapped(
        "rss.server.huge-partition.split.limit",
        Only010,
        "9223372036854775807",
        &["hybrid_store.huge_partition_split_limit"],
        "size; 9223372036854775807 = never split; negative (Java: split every partition) = 0",
        "never split",
    ),
    na(
        "rss.server.hybrid.storage.fallback.max.fail.times",
        Both,
        "0",
        "Spillway retries a failed spill on the other tier at once, with backoff, rather than after a count",
    ),
    na(
        "rss.server.hybrid.storage.fallback.strategy.class",
        Both,
        "(none)",
        "a Java class; Spillway falls back from a failing tier by retrying the spill on the other tier, with backoff",
    ),
    na(
        "rss.server.hybrid.storage.manager.selector.class",
        Both,
        "org.apache.uniffle.server.storage.hybrid.DefaultStorageManagerSelector",
        "a Java class; Spillway chooses the tier by rss.server.flush.cold.storage.threshold.size, as Java's default selector does",
    ),
    na(
        "rss.server.id",
        Both,
        "(none)",
        "the Java server computes its id (ip-grpcPort[-nettyPort]) at start and overwrites this key; Spillway computes the same id",
    ),
    na(
        "rss.server.index.size.hint",
        Both,
        "2097152",
        "sizes Java's index read buffer; Spillway reads an index file whole, bounded by limits.max_response_size",
    ),
    mapped(
        "rss.server.leak.shuffledata.check.interval",
        Both,
        "3600000",
        &["localfile_store.leak_check_interval"],
        "ms > 0: every interval the directories of apps the server does not know are deleted from the healthy data paths (lost+found and hidden directories kept)",
        "1 h (Java's)",
    ),
    mapped(
        "rss.server.localstorage.initialize.max.fail.number",
        Both,
        "0",
        &["localfile_store.init_max_failed_paths"],
        ">= 0 data paths that may fail to initialise (left out); more stop start-up",
        "0",
    ),
    na(
        "rss.server.localStorageManagerClass",
        Only010,
        "org.apache.uniffle.server.storage.LocalStorageManager",
        "a Java class; Spillway's local tier keeps a partition's files on one disk and moves to another only on failure",
    ),
    na(
        "rss.server.log.app.detail.while.remove.enabled",
        Only010,
        "false",
        "Spillway logs each removed app with its shuffle count and bytes at info level",
    ),
    mapped(
        "rss.server.low.watermark.write",
        Both,
        "85.0",
        &["localfile_store.disk_low_watermark"],
        "percent / 100",
        "85 %",
    ),
    mapped(
        "rss.server.max.concurrency.limit.of.per-partition.write",
        Both,
        "2147483647",
        &["hdfs_store.partition_write_max_concurrency_limit"],
        ">= 1: caps the HDFS writers per partition an app asks for at registration (maxConcurrencyPerPartitionToWrite > 0); an app that asks for none gets rss.server.max.concurrency.of.per-partition.write",
        "2147483647 (Java's: no cap)",
    ),
    mapped(
        "rss.server.max.concurrency.of.per-partition.write",
        Both,
        "30",
        &["hdfs_store.partition_write_max_concurrency"],
        ">= 1",
        "20 (Java: 30)",
    ),
    mapped(
        "rss.server.max.concurrency.of.single.partition.writer",
        Both,
        "30",
        &["hdfs_store.partition_write_max_concurrency"],
        "old name, read only when the new one is absent",
        "20 (Java: 30)",
    ),
    mapped(
        "rss.server.memory.shuffle.highWaterMark.percentage",
        Both,
        "75.0",
        &["hybrid_store.memory_spill_high_watermark"],
        "percent / 100",
        "75 % (Java's)",
    ),
    mapped(
        "rss.server.memory.shuffle.lowWaterMark.percentage",
        Both,
        "25.0",
        &["hybrid_store.memory_spill_low_watermark"],
        "percent / 100",
        "25 % (Java's)",
    ),
    na(
        "rss.server.merge.blockRingBufferSize",
        Only010,
        "2",
        "remote merge (0.10's server-side sort) is not served by Spillway; this key only tunes it",
    ),
    na(
        "rss.server.merge.cacheMergedBlockInitSleepMs",
        Only010,
        "100",
        "remote merge (0.10's server-side sort) is not served by Spillway; this key only tunes it",
    ),
    na(
        "rss.server.merge.cacheMergedBlockMaxSleepMs",
        Only010,
        "2000",
        "remote merge (0.10's server-side sort) is not served by Spillway; this key only tunes it",
    ),
    na(
        "rss.server.merge.classLoaderJarsPath",
        Only010,
        "(none)",
        "remote merge (0.10's server-side sort) is not served by Spillway; this key only tunes it",
    ),
    na(
        "rss.server.merge.defaultMergedBlockSize",
        Only010,
        "14m",
        "remote merge (0.10's server-side sort) is not served by Spillway; this key only tunes it",
    ),
    refused(
        "rss.server.merge.enable",
        Only010,
        "false",
        "remote merge (0.10's server-side sort for apps that ask for it) is not served by Spillway; a server that advertised it would accept merge requests it cannot answer",
    ),
    na(
        "rss.server.merge.threadAliveTime",
        Only010,
        "120",
        "remote merge (0.10's server-side sort) is not served by Spillway; this key only tunes it",
    ),
    na(
        "rss.server.merge.threadPoolQueueSize",
        Only010,
        "2147483647",
        "remote merge (0.10's server-side sort) is not served by Spillway; this key only tunes it",
    ),
    na(
        "rss.server.merge.threadPoolSize",
        Only010,
        "10",
        "remote merge (0.10's server-side sort) is not served by Spillway; this key only tunes it",
    ),
    mapped(
        "rss.server.metrics.blockSizeStatistics.buckets",
        Only010,
        "32kb,64kb,128kb,256kb,512kb,1mb,2mb,4mb,8mb,16mb",
        &["metrics.block_size_buckets"],
        "comma-separated sizes",
        "32kb ... 16mb (Java's ten)",
    ),
    mapped(
        "rss.server.metrics.blockSizeStatisticsEnabled",
        Only010,
        "false",
        &["metrics.block_size_statistics"],
        "true / false",
        "false",
    ),
    na(
        "rss.server.multistorage.fallback.max.fail.times",
        Both,
        "0",
        "old name of rss.server.hybrid.storage.fallback.max.fail.times",
    ),
    na(
        "rss.server.multistorage.fallback.strategy.class",
        Both,
        "(none)",
        "old name of rss.server.hybrid.storage.fallback.strategy.class (a Java class)",
    ),
    na(
        "rss.server.multistorage.manager.selector.class",
        Both,
        "org.apache.uniffle.server.storage.hybrid.DefaultStorageManagerSelector",
        "old name of rss.server.hybrid.storage.manager.selector.class (a Java class)",
    ),
    na(
        "rss.server.netty.accept.thread",
        Both,
        "10",
        "tunes Java Netty's allocator or event loops; Spillway's Netty plane is tokio, with its own buffers",
    ),
    na(
        "rss.server.netty.connect.backlog",
        Both,
        "0",
        "the listen backlog; Spillway uses the OS default (somaxconn), as Java's 0 does",
    ),
    na(
        "rss.server.netty.connect.timeout",
        Both,
        "5000",
        "a client-side connect timeout in Java's shared Netty options; the server never connects out on the Netty plane",
    ),
    na(
        "rss.server.netty.directMemoryTracker.memoryUsage.initialFetchDelayMs",
        Both,
        "10000",
        "Java direct-memory tracker; Spillway has no direct memory (documented absent metrics)",
    ),
    na(
        "rss.server.netty.directMemoryTracker.memoryUsage.updateMetricsIntervalMs",
        Both,
        "10000",
        "Java direct-memory tracker; Spillway has no direct memory (documented absent metrics)",
    ),
    na(
        "rss.server.netty.epoll.enable",
        Both,
        "false",
        "switches Java Netty to epoll; Spillway always uses epoll (tokio) on Linux",
    ),
    na(
        "rss.server.netty.handler.idle.timeout",
        Both,
        "60000",
        "Java's Netty idle handler; Spillway closes idle connections after limits.idle_timeout (from rss.client.netty.client.connection.timeout.ms)",
    ),
    na(
        "rss.server.netty.metrics.pendingTaskNumPollingIntervalMs",
        Only010,
        "10000",
        "polls Java Netty's event-loop queues; Spillway's netty_pending_tasks_num is read at scrape",
    ),
    mapped(
        "rss.server.netty.port",
        Both,
        "17000 [0.9.2: -1]",
        &["netty_port"],
        "a negative port turns the Netty plane off (0.9); 0 = any free port",
        "see rss.rpc.server.type",
    ),
    na(
        "rss.server.netty.receive.buf",
        Both,
        "0",
        "SO_RCVBUF; Spillway leaves it to the OS, as Java's default 0 does",
    ),
    na(
        "rss.server.netty.send.buf",
        Both,
        "0",
        "SO_SNDBUF; Spillway leaves it to the OS, as Java's default 0 does",
    ),
    na(
        "rss.server.netty.worker.thread",
        Both,
        "0",
        "tunes Java Netty's allocator or event loops; Spillway's Netty plane is tokio, with its own buffers",
    ),
    na(
        "rss.server.pending.event.timeout.sec",
        Both,
        "600",
        "Java drops a flush event that waited this long; Spillway never drops accepted data, back-pressure (NO_BUFFER) holds new writes instead",
    ),
    mapped(
        "rss.server.preAllocation.expired",
        Both,
        "20000",
        &["memory_store.buffer_ticket_timeout", "memory_store.buffer_ticket_check_interval"],
        "ms; the check interval is half of it (Java's sweep period)",
        "20 s / 10 s",
    ),
    mapped(
        "rss.server.quota.app.localfile.ratio",
        Spillway,
        "(none)",
        &["quota.app_local_disk_share"],
        "ratio in (0, 1] of the local disks' capacity",
        "0.5",
    ),
    mapped(
        "rss.server.quota.app.localfile.size",
        Spillway,
        "(none)",
        &["quota.app_local_disk_bytes"],
        "size > 0",
        "no limit",
    ),
    mapped(
        "rss.server.quota.app.memory.ratio",
        Spillway,
        "(none)",
        &["quota.app_memory_share"],
        "\"fair\" or a ratio in (0, 1] of the write memory, past its high watermark while another app waits",
        "fair",
    ),
    mapped(
        "rss.server.quota.app.remote.size",
        Spillway,
        "(none)",
        &["quota.app_remote_bytes"],
        "size > 0",
        "no limit",
    ),
    mapped(
        "rss.server.quota.user.localfile.ratio",
        Spillway,
        "(none)",
        &["quota.user_local_disk_share"],
        "ratio in (0, 1] of the local disks' capacity",
        "0.8",
    ),
    mapped(
        "rss.server.quota.user.localfile.size",
        Spillway,
        "(none)",
        &["quota.user_local_disk_bytes"],
        "size > 0",
        "no limit",
    ),
    mapped(
        "rss.server.quota.user.remote.size",
        Spillway,
        "(none)",
        &["quota.user_remote_bytes"],
        "size > 0",
        "no limit",
    ),
    mapped(
        "rss.server.read.buffer.capacity",
        Both,
        "-1",
        &["memory_store.read_capacity"],
        "size; negative = use the ratio",
        "the ratio",
    ),
    mapped(
        "rss.server.read.buffer.capacity.ratio",
        Both,
        "0.2",
        &["memory_store.read_capacity"],
        "as the write ratio",
        "0.2",
    ),
    mapped(
        "rss.server.rpc.audit.log.enabled",
        Only010,
        "true",
        &["audit.rpc_log"],
        "boolean",
        "true",
    ),
    mapped(
        "rss.server.rpc.audit.log.excludeList",
        Only010,
        "appHeartbeat",
        &["audit.rpc_exclude"],
        "comma list of command names",
        "appHeartbeat",
    ),
    na(
        "rss.server.shuffle.flush.threshold",
        Both,
        "0",
        "Java keeps flushes below it in memory until commit (0, its default, off); Spillway spills what the watermarks pick",
    ),
    na(
        "rss.server.shuffleBuffer.type",
        Only010,
        "LINKED_LIST",
        "chooses the Java buffer's list type (LINKED_LIST or SKIP_LIST); Spillway's buffers keep blocks in arrival order and index reads by block id without either",
    ),
    na(
        "rss.server.shuffleBufferManager.trigger.flush.interval",
        Both,
        "0",
        "Java's periodic flush check (off by default); Spillway checks the watermarks on every insert",
    ),
    na(
        "rss.server.single.buffer.flush.blocksNumberThreshold",
        Only010,
        "2147483647",
        "Java flushes a buffer with many blocks to relieve its GC; Spillway's per-block cost is a slice, with no GC",
    ),
    mapped(
        "rss.server.single.buffer.flush.enabled",
        Both,
        "true",
        &["hybrid_store.memory_single_buffer_spill"],
        "boolean; false: only huge partitions' buffers spill on their own",
        "true",
    ),
    mapped(
        "rss.server.single.buffer.flush.threshold",
        Both,
        "134217728",
        &["hybrid_store.memory_single_buffer_max_spill_size"],
        "size",
        "128 MiB",
    ),
    mapped(
        "rss.server.storage.audit.log.enabled",
        Only010,
        "false",
        &["audit.storage_log"],
        "boolean",
        "false",
    ),
    mapped(
        "rss.server.storage.flushOperationTimeoutSec",
        Only010,
        "-1",
        &["localfile_store.write_timeout", "hdfs_store.write_timeout"],
        "seconds; <= 0 (Java: no timeout) keeps Spillway's hung-write timeouts",
        "60 s / 30 s",
    ),
    na(
        "rss.server.storage.resourceRemoveOperationTimeoutSec",
        Only010,
        "600",
        "Java's timeout for deleting an app's files; Spillway deletes in the background and counts failures in total_local_rename_and_deletion_failed",
    ),
    na(
        "rss.server.storageMediaProvider.from.env.key",
        Both,
        "(none)",
        "Spillway detects each disk's media (SSD/HDD) from /sys/block by itself",
    ),
    na(
        "rss.server.summary.metric.thread.pool.core.size",
        Both,
        "2",
        "sizes a Java thread pool (summary metrics are computed at scrape); Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    na(
        "rss.server.summary.metric.thread.pool.keep.alive.time",
        Both,
        "60",
        "sizes a Java thread pool (summary metrics); Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    na(
        "rss.server.summary.metric.thread.pool.max.size",
        Both,
        "20",
        "sizes a Java thread pool (summary metrics); Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    na(
        "rss.server.summary.metric.wait.queue.size",
        Both,
        "1000",
        "sizes a Java thread pool (summary metrics); Spillway runs this work as async tasks, bounded by its own limits and concurrency keys",
    ),
    mapped(
        "rss.server.tags",
        Both,
        "(none)",
        &["tags"],
        "comma-separated",
        "none",
    ),
    mapped(
        "rss.server.topN.appShuffleDataSize.number",
        Both,
        "10",
        &["metrics.top_n_apps"],
        ">= 0",
        "10",
    ),
    na(
        "rss.server.topN.appShuffleDataSize.refreshIntervalMs",
        Both,
        "1000",
        "Spillway computes the top-N families at each scrape, never older than Java's refresh",
    ),
    na(
        "rss.server.write.retry.max",
        Both,
        "10",
        "Spillway retries a failed spill with backoff until it is durable, the app is gone or the server stops, so no accepted block is dropped after a count",
    ),
    na(
        "rss.server.write.slow.threshold",
        Both,
        "10000",
        "threshold of a Java slow-write log line; Spillway times every spill in its flush metrics",
    ),
    mapped(
        "rss.storage.basePath",
        Both,
        "(none)",
        &["localfile_store.data_paths"],
        "comma-separated",
        "/tmp/spillway/data (Java has no default)",
    ),
    na(
        "rss.storage.data.replica",
        Both,
        "1",
        "the Java server stores it in each write request but no writer reads it; HDFS replication comes from dfs.replication (rss.server.hadoop.dfs.replication)",
    ),
    na(
        "rss.storage.hdfs.write.dataBufferSize",
        Only010,
        "8k",
        "Java's HDFS write buffer; Spillway hands each spill batch to the HDFS client whole",
    ),
    na(
        "rss.storage.hdfs.write.indexBufferSize",
        Only010,
        "8k",
        "Java's HDFS index write buffer; Spillway hands each spill batch to the HDFS client whole",
    ),
    na(
        "rss.storage.localfile.write.dataBufferSize",
        Only010,
        "8k",
        "Java's local write buffer; Spillway writes each spill batch with one positioned write",
    ),
    na(
        "rss.storage.localfile.write.indexBufferSize",
        Only010,
        "8k",
        "Java's local index write buffer; Spillway writes each spill batch's index with one positioned write",
    ),
    na(
        "rss.storage.localFileWriterClass",
        Only010,
        "org.apache.uniffle.storage.handler.impl.LocalFileWriter",
        "a Java class; Spillway's local writer appends with positioned writes of its own",
    ),
    mapped(
        "rss.storage.type",
        Both,
        "(none)",
        &["store_type"],
        "MEMORY_LOCALFILE, MEMORY_HDFS, MEMORY_LOCALFILE_HDFS, LOCALFILE, HDFS, LOCALFILE_HDFS (without MEMORY a commit waits for the shuffle's spill, as Java's); MEMORY alone is refused (no tier to spill to)",
        "MEMORY_LOCALFILE (Java has no default)",
    ),
    na(
        "rss.test.mode.enable",
        Both,
        "false",
        "Java requires it to serve LOCALFILE or HDFS alone (slow in Java); Spillway serves every storage type without it",
    ),
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::mapper::Mapper;
    use super::super::parse_properties;
    use super::*;

    /// Every dotted key of Spillway's config, as config.toml.example documents them (a test of
    /// its own checks that it documents every key).
    fn spillway_keys() -> BTreeSet<String> {
        crate::config::tests::documented_keys(crate::config::tests::EXAMPLE)
            .into_iter()
            .map(|(section, key)| {
                if section.is_empty() {
                    key
                } else {
                    format!("{section}.{key}")
                }
            })
            .collect()
    }

    #[test]
    fn the_mapper_asks_for_exactly_the_mapped_keys() {
        // A family member makes the mapper walk the family.
        let props = parse_properties("rss.server.hadoop.dfs.replication = 2\n").unwrap();
        let mut mapper = Mapper::new(props);
        mapper.map_all(Some(16 << 30)).unwrap();
        let (asked, mapped) =
            super::super::table_checks::asked_and_mapped(&mapper.asked, KEYS, lookup);
        let not_in_table: Vec<_> = asked.difference(&mapped).collect();
        let never_asked: Vec<_> = mapped.difference(&asked).collect();
        assert!(
            not_in_table.is_empty() && never_asked.is_empty(),
            "the mapper reads keys the table does not mark mapped: {not_in_table:?}; the table \
             marks keys mapped that the mapper never reads: {never_asked:?}"
        );
    }

    #[test]
    fn rows_are_sorted_unique_and_name_real_spillway_keys() {
        super::super::table_checks::assert_sorted_with_reasons(KEYS);
        let spillway = spillway_keys();
        for k in KEYS {
            if let Treatment::Mapped { to, .. } = k.treatment {
                for t in to {
                    assert!(spillway.contains(*t), "{}: no Spillway key {t}", k.key);
                }
            }
        }
    }

    #[test]
    fn families_and_case() {
        assert_eq!(
            lookup("RSS.SERVER.HADOOP.dfs.replication").map(|k| k.key),
            Some("rss.server.hadoop.*")
        );
        assert!(lookup("rss.server.hadoop.").is_none());
        assert_eq!(
            lookup("rss.RPC.server.port").map(|k| k.key),
            Some("rss.rpc.server.port")
        );
    }

    /// The table in docs/compatibility.md is this table: regenerate it with
    /// `SPILLWAY_UPDATE_README=1 cargo test --lib readme_key_table`.
    #[test]
    fn readme_key_table_is_generated_from_this_table() {
        super::super::table_checks::assert_docs_section_is(
            "<!-- java-keys:begin (generated from src/config/java/keys.rs) -->\n",
            "<!-- java-keys:end -->",
            &markdown_table(),
            "Java key table",
            "readme_key_table",
        );
    }
}
