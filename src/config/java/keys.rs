//! Every configuration key the Java shuffle server reads, in 0.9.2 and in 0.10, and what Spillway
//! does with each: the one place that says it, as data.
//!
//! The start-up warning, `--print-config`'s Java names, the README's key table and the checks on
//! the mapper all read this table, so none of them can drift from the others. The mapping code
//! itself lives in the file of its concern (listeners, storage, memory, ...); a unit test checks
//! that the mapper consults exactly the keys marked [`Treatment::Mapped`] here.
//!
//! Where the key list came from: `ShuffleServerConf` and `RssBaseConf` of the 0.9.2 and 0.10
//! releases, plus the keys the server reads from other classes (metric reporters, the Netty
//! client options it shares with the clients, security); see the README's key table.

/// Which Java releases read a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Releases {
    /// 0.9.2 and 0.10.
    Both,
    /// 0.9.2 only: 0.10 dropped or renamed it.
    Only092,
    /// New in 0.10.
    Only010,
}

impl Releases {
    /// As the README's table writes it.
    pub fn label(self) -> &'static str {
        match self {
            Releases::Both => "0.9.2, 0.10",
            Releases::Only092 => "0.9.2",
            Releases::Only010 => "0.10",
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

/// The Java keys that set the Spillway key `spillway` (dotted, as `--print-config` and errors
/// name it).
pub fn java_names_of(spillway: &str) -> impl Iterator<Item = &'static str> + '_ {
    KEYS.iter().filter_map(move |k| match k.treatment {
        Treatment::Mapped { to, .. } if to.contains(&spillway) => Some(k.key),
        _ => None,
    })
}

/// How many keys of `releases`' servers are mapped, not applicable and refused, in that order.
pub fn counts(release_092: bool) -> (usize, usize, usize) {
    let mut out = (0, 0, 0);
    for k in KEYS {
        let read = match k.releases {
            Releases::Both => true,
            Releases::Only092 => release_092,
            Releases::Only010 => !release_092,
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

/// The README's table of every key (Markdown), generated so the README cannot disagree with
/// what the server does.
pub fn markdown_table() -> String {
    let (m92, n92, r92) = counts(true);
    let (m10, n10, r10) = counts(false);
    let mut out = format!(
        "0.9.2: {m92} keys mapped, {n92} not applicable, {r92} refused. \
         0.10: {m10} mapped, {n10} not applicable, {r10} refused.\n\n\
         | Java key | Releases | Java default | Spillway | Conversion, or why not | When absent |\n\
         |---|---|---|---|---|---|\n"
    );
    let cell = |s: &str| s.replace('|', "\\|");
    for k in KEYS {
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

const fn mapped(
    key: &'static str,
    releases: Releases,
    java_default: &'static str,
    to: &'static [&'static str],
    how: &'static str,
    absent: &'static str,
) -> JavaKey {
    JavaKey {
        key,
        releases,
        java_default,
        treatment: Treatment::Mapped { to, how, absent },
    }
}

const fn na(
    key: &'static str,
    releases: Releases,
    java_default: &'static str,
    why: &'static str,
) -> JavaKey {
    JavaKey {
        key,
        releases,
        java_default,
        treatment: Treatment::NotApplicable(why),
    }
}

use Releases::Both;

/// Every key, sorted by name.
pub static KEYS: &[JavaKey] = &[
    mapped(
        "rss.client.netty.client.connection.timeout.ms",
        Both,
        "",
        &["limits.idle_timeout"],
        "ms (the Java server closes idle Netty connections after it)",
        "600 s",
    ),
    mapped(
        "rss.coordinator.quorum",
        Both,
        "",
        &["coordinator_quorum"],
        "comma-separated host:port",
        "none (standalone)",
    ),
    mapped(
        "rss.http.basic.authorizationCredentials",
        Both,
        "",
        &["metrics.basic_credentials"],
        "as written (base64 of user:password), compared as-is with the Authorization: Basic value",
        "none",
    ),
    mapped(
        "rss.jetty.http.port",
        Both,
        "",
        &["metrics.http_port"],
        "0..=65535",
        "19998",
    ),
    mapped(
        "rss.metrics.prometheus.pushgateway.addr",
        Both,
        "",
        &["metrics.push_gateway_endpoint"],
        "host:port gets http://; required with the reporter",
        "none",
    ),
    mapped(
        "rss.metrics.prometheus.pushgateway.groupingkey",
        Both,
        "",
        &["metrics.push_gateway_grouping_key"],
        "k1=v1;k2=v2",
        "empty",
    ),
    mapped(
        "rss.metrics.prometheus.pushgateway.jobname",
        Both,
        "",
        &["metrics.push_gateway_job"],
        "required with the reporter",
        "none",
    ),
    mapped(
        "rss.metrics.prometheus.pushgateway.report.interval.seconds",
        Both,
        "",
        &["metrics.push_interval"],
        "seconds > 0",
        "10 s",
    ),
    mapped(
        "rss.metrics.reporter.class",
        Both,
        "",
        &["metrics.push_gateway_endpoint"],
        "must be the PrometheusPushGatewayMetricReporter; it turns pushing on; another class is warned",
        "no pushing",
    ),
    mapped(
        "rss.rpc.server.port",
        Both,
        "",
        &["grpc_port"],
        "0..=65535; 0 = any free port",
        "19999",
    ),
    mapped(
        "rss.rpc.server.type",
        Both,
        "",
        &["netty_port"],
        "only when no Netty port is set: GRPC turns the Netty plane off, GRPC_NETTY puts it on 17000",
        "17000 (0.10's default GRPC_NETTY; a 0.9 server without either key served gRPC only)",
    ),
    mapped(
        "rss.security.hadoop.kerberos.enable",
        Both,
        "",
        &["hdfs_store.kerberos_principal", "hdfs_store.kerberos_keytab"],
        "gates the principal and keytab; with false they are warned",
        "false",
    ),
    mapped(
        "rss.security.hadoop.kerberos.keytab.file",
        Both,
        "",
        &["hdfs_store.kerberos_keytab"],
        "required when Kerberos is enabled",
        "none",
    ),
    na(
        "rss.security.hadoop.kerberos.krb5-conf.file",
        Both,
        "",
        "Spillway's Kerberos library reads KRB5_CONFIG from the environment: set KRB5_CONFIG to this file",
    ),
    mapped(
        "rss.security.hadoop.kerberos.principal",
        Both,
        "",
        &["hdfs_store.kerberos_principal"],
        "required when Kerberos is enabled",
        "none",
    ),
    mapped(
        "rss.security.hadoop.kerberos.proxy.user.enable",
        Both,
        "",
        &["hdfs_store.write_as"],
        "true: \"auto\" (a proxy of the app's user under Kerberos, the server's own identity under simple authentication); false: \"server\"",
        "true",
    ),
    na(
        "rss.security.hadoop.kerberos.relogin.interval.sec",
        Both,
        "",
        "Spillway renews its ticket from the keytab before it expires, with no fixed interval",
    ),
    mapped(
        "rss.server.app.expired.withoutHeartbeat",
        Both,
        "",
        &["app.app_heartbeat_timeout", "app.expiry_check_interval"],
        "ms; the check interval is half of it (Java's sweep period)",
        "60 s / 10 s",
    ),
    mapped(
        "rss.server.buffer.capacity",
        Both,
        "",
        &["memory_store.capacity"],
        "size; negative = use the ratio",
        "the ratio",
    ),
    mapped(
        "rss.server.buffer.capacity.ratio",
        Both,
        "",
        &["memory_store.capacity"],
        "x the memory the process may use (physical memory, or the cgroup limit when lower) instead of Java's max heap, rounded down to whole MiB; in (0, 1]",
        "0.6",
    ),
    mapped(
        "rss.server.commit.timeout",
        Both,
        "",
        &["app.commit_timeout"],
        "ms > 0; how long a commit and finishShuffle wait for the spill",
        "600 s",
    ),
    mapped(
        "rss.server.decommission.shutdown",
        Both,
        "",
        &[],
        "true is what Spillway always does; false is warned",
        "true",
    ),
    mapped(
        "rss.server.flush.cold.storage.threshold.size",
        Both,
        "",
        &["hdfs_store.cold_storage_threshold_size"],
        "size > 0",
        "64 MiB",
    ),
    mapped(
        "rss.server.flush.hadoop.threadPool.size",
        Both,
        "",
        &["hdfs_store.max_concurrency"],
        ">= 1",
        "10 (Java: 60 threads)",
    ),
    mapped(
        "rss.server.flush.localfile.threadPool.size",
        Both,
        "",
        &["hybrid_store.spill_concurrency"],
        ">= 1",
        "8 (Java: 10 threads)",
    ),
    mapped(
        "rss.server.hadoop.*",
        Both,
        "",
        &["hdfs_store.hadoop_conf"],
        "rss.server.hadoop.<item> = hdfs_store.hadoop_conf[<item>], on top of HADOOP_CONF_DIR, under each app's remote-storage conf items",
        "none",
    ),
    mapped(
        "rss.server.health.check.enable",
        Both,
        "",
        &["localfile_store.healthy_check_min_disks"],
        "true enables the minimum of healthy disks below",
        "off",
    ),
    mapped(
        "rss.server.health.check.interval.ms",
        Both,
        "",
        &["localfile_store.disk_health_check_interval"],
        "ms",
        "10 s",
    ),
    mapped(
        "rss.server.health.min.storage.percentage",
        Both,
        "",
        &["localfile_store.healthy_check_min_disks"],
        "when health checks are on: ceil(percentage x disks / 100)",
        "80 %",
    ),
    mapped(
        "rss.server.heartbeat.interval",
        Both,
        "",
        &["heartbeat_interval"],
        "ms",
        "10 s",
    ),
    mapped(
        "rss.server.high.watermark.write",
        Both,
        "",
        &["localfile_store.disk_high_watermark"],
        "percent / 100",
        "95 %",
    ),
    mapped(
        "rss.server.huge-partition.memory.limit.ratio",
        Both,
        "",
        &["hybrid_store.huge_partition_memory_limit_ratio"],
        "in (0, 1]",
        "0.2",
    ),
    mapped(
        "rss.server.huge-partition.size.hard.limit",
        Both,
        "",
        &["hybrid_store.huge_partition_hard_limit"],
        "size > 0; 9223372036854775807 = no limit",
        "no limit",
    ),
    mapped(
        "rss.server.huge-partition.size.threshold",
        Both,
        "",
        &["hybrid_store.huge_partition_size_threshold"],
        "size > 0",
        "20 GiB",
    ),
    mapped(
        "rss.server.huge-partition.split.limit",
        Both,
        "",
        &["hybrid_store.huge_partition_split_limit"],
        "size; 9223372036854775807 = never split; negative (Java: split every partition) = 0",
        "never split",
    ),
    mapped(
        "rss.server.low.watermark.write",
        Both,
        "",
        &["localfile_store.disk_low_watermark"],
        "percent / 100",
        "85 %",
    ),
    mapped(
        "rss.server.max.concurrency.of.per-partition.write",
        Both,
        "",
        &["hdfs_store.partition_write_max_concurrency"],
        ">= 1",
        "20 (Java: 30)",
    ),
    mapped(
        "rss.server.max.concurrency.of.single.partition.writer",
        Both,
        "",
        &["hdfs_store.partition_write_max_concurrency"],
        "old name, read only when the new one is absent",
        "20 (Java: 30)",
    ),
    mapped(
        "rss.server.memory.shuffle.highWaterMark.percentage",
        Both,
        "",
        &["hybrid_store.memory_spill_high_watermark"],
        "percent / 100",
        "75 % (Java's)",
    ),
    mapped(
        "rss.server.memory.shuffle.lowWaterMark.percentage",
        Both,
        "",
        &["hybrid_store.memory_spill_low_watermark"],
        "percent / 100",
        "25 % (Java's)",
    ),
    mapped(
        "rss.server.metrics.blockSizeStatistics.buckets",
        Both,
        "",
        &["metrics.block_size_buckets"],
        "comma-separated sizes",
        "32kb ... 16mb (Java's ten)",
    ),
    mapped(
        "rss.server.metrics.blockSizeStatisticsEnabled",
        Both,
        "",
        &["metrics.block_size_statistics"],
        "true / false",
        "false",
    ),
    mapped(
        "rss.server.netty.port",
        Both,
        "",
        &["netty_port"],
        "a negative port turns the Netty plane off (0.9); 0 = any free port",
        "see rss.rpc.server.type",
    ),
    mapped(
        "rss.server.preAllocation.expired",
        Both,
        "",
        &["memory_store.buffer_ticket_timeout", "memory_store.buffer_ticket_check_interval"],
        "ms; the check interval is half of it (Java's sweep period)",
        "20 s / 10 s",
    ),
    mapped(
        "rss.server.read.buffer.capacity",
        Both,
        "",
        &["memory_store.read_capacity"],
        "size; negative = use the ratio",
        "the ratio",
    ),
    mapped(
        "rss.server.read.buffer.capacity.ratio",
        Both,
        "",
        &["memory_store.read_capacity"],
        "as the write ratio",
        "0.2",
    ),
    mapped(
        "rss.server.rpc.audit.log.enabled",
        Both,
        "",
        &["audit.rpc_log"],
        "boolean",
        "true",
    ),
    mapped(
        "rss.server.rpc.audit.log.excludeList",
        Both,
        "",
        &["audit.rpc_exclude"],
        "comma list of command names",
        "appHeartbeat",
    ),
    mapped(
        "rss.server.single.buffer.flush.enabled",
        Both,
        "",
        &[],
        "true is what Spillway always does; false is warned",
        "true",
    ),
    mapped(
        "rss.server.single.buffer.flush.threshold",
        Both,
        "",
        &["hybrid_store.memory_single_buffer_max_spill_size"],
        "size",
        "128 MiB",
    ),
    mapped(
        "rss.server.storage.audit.log.enabled",
        Releases::Only010,
        "false",
        &["audit.storage_log"],
        "boolean",
        "false",
    ),
    mapped(
        "rss.server.storage.flushOperationTimeoutSec",
        Both,
        "",
        &["localfile_store.write_timeout", "hdfs_store.write_timeout"],
        "seconds; <= 0 (Java: no timeout) keeps Spillway's hung-write timeouts",
        "60 s / 30 s",
    ),
    mapped(
        "rss.server.tags",
        Both,
        "",
        &["tags"],
        "comma-separated",
        "none",
    ),
    mapped(
        "rss.server.topN.appShuffleDataSize.number",
        Both,
        "",
        &["metrics.top_n_apps"],
        ">= 0",
        "10",
    ),
    na(
        "rss.server.topN.appShuffleDataSize.refreshIntervalMs",
        Both,
        "",
        "Spillway computes the top-N families at each scrape, never older than Java's refresh",
    ),
    mapped(
        "rss.storage.basePath",
        Both,
        "",
        &["localfile_store.data_paths"],
        "comma-separated",
        "/tmp/spillway/data (Java has no default)",
    ),
    mapped(
        "rss.storage.type",
        Both,
        "",
        &["store_type"],
        "MEMORY_LOCALFILE, MEMORY_HDFS, MEMORY_LOCALFILE_HDFS, LOCALFILE, HDFS, LOCALFILE_HDFS (without MEMORY a commit waits for the shuffle's spill, as Java's); MEMORY alone is refused (no tier to spill to)",
        "MEMORY_LOCALFILE (Java has no default)",
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
        let asked: BTreeSet<&str> = mapper
            .asked
            .iter()
            .map(|k| lookup(k).map_or(k.as_str(), |row| row.key))
            .collect();
        let mapped: BTreeSet<&str> = KEYS
            .iter()
            .filter(|k| matches!(k.treatment, Treatment::Mapped { .. }))
            .map(|k| k.key)
            .collect();
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
        for pair in KEYS.windows(2) {
            assert!(
                pair[0].key.to_ascii_lowercase() < pair[1].key.to_ascii_lowercase(),
                "{} then {}: keep KEYS sorted, each key once",
                pair[0].key,
                pair[1].key
            );
        }
        let spillway = spillway_keys();
        for k in KEYS {
            match k.treatment {
                Treatment::Mapped { to, how, absent } => {
                    assert!(!how.is_empty() && !absent.is_empty(), "{}", k.key);
                    for t in to {
                        assert!(spillway.contains(*t), "{}: no Spillway key {t}", k.key);
                    }
                }
                Treatment::NotApplicable(why) | Treatment::Refused(why) => {
                    assert!(!why.is_empty(), "{} needs its reason", k.key)
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
        assert!(java_names_of("grpc_port").any(|k| k == "rss.rpc.server.port"));
    }

    /// The README's table is this table: regenerate it with
    /// `SPILLWAY_UPDATE_README=1 cargo test --lib readme_key_table`.
    #[test]
    fn readme_key_table_is_generated_from_this_table() {
        const BEGIN: &str = "<!-- java-keys:begin (generated from src/config/java/keys.rs) -->\n";
        const END: &str = "<!-- java-keys:end -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let start = readme
            .find(BEGIN)
            .expect("README has the key table's begin marker")
            + BEGIN.len();
        let end = readme[start..].find(END).expect("and its end marker") + start;
        let table = markdown_table();
        if readme[start..end] != table {
            if std::env::var_os("SPILLWAY_UPDATE_README").is_some() {
                let updated = format!("{}{table}{}", &readme[..start], &readme[end..]);
                std::fs::write(path, updated).unwrap();
            } else {
                panic!(
                    "README's Java key table is stale: run SPILLWAY_UPDATE_README=1 cargo test \
                     --lib readme_key_table"
                );
            }
        }
    }
}
