//! Every key of the Java coordinator's `coordinator.conf` and what a coordinator-only Spillway
//! process does with each, as data: the coordinator's counterpart of [`super::keys::KEYS`],
//! read by the start-up warning, the coordinator key table in docs/compatibility.md and the mapper's check.
//!
//! Where the key list came from: `CoordinatorConf` as stored by the project's code search of
//! apache/incubator-uniffle and apache/uniffle (the stored versions bracket the 0.10 tag), plus
//! the `RssBaseConf` keys the coordinator guide names (`rss.rpc.server.port`,
//! `rss.jetty.http.port`, the metric reporter, `rss.reconfigure.interval.sec`). The 0.10
//! coordinator guide names the IO_SAMPLE keys `rss.coordinator.remote.storage.io.sample.*`, but
//! every CoordinatorConf read (0.8 to after 0.10) has `rss.coordinator.remote.storage.schedule.*`:
//! the rows follow the code, and the guide's names get the "not a key" warning, since Java
//! ignores them too. Other `RssBaseConf` keys a coordinator.conf may set are answered from the
//! shuffle server's table, which lists them all. Release attribution
//! is pinned only for the rows added with the audit log (issue 22): the RPC audit keys and the
//! client-conf apply strategy are 0.10 (apache/uniffle#1979, #2014 and #1710 landed after the
//! 0.9 branch was cut), the node-tags file is 0.10 (the protocol notes, COORDINATOR.md §2.4),
//! and the node-client cache is in both (decommission through the coordinator, 0.8). Every
//! other row says 0.9.2 and 0.10. `rss.coordinator.access.bannedIdProvider` and
//! `bannedIdProviderPattern` appear only in a CoordinatorConf newer than 0.10 (apache/uniffle
//! 4afa141a) and not in the 0.9-era copy (b275e674), with no evidence they shipped in 0.10.0,
//! so they have no row: the warning calls them not a key of 0.9.2 or 0.10.

use super::keys::{
    mapped, na, refused, JavaKey,
    Releases::{Both, Only010},
    RSS_JETTY_HTTPS_PORT, RSS_JETTY_SSL_KEYMANAGER_PASSWORD, RSS_JETTY_SSL_KEYSTORE_PASSWORD,
    RSS_JETTY_SSL_KEYSTORE_PATH, RSS_METRICS_PROMETHEUS_PUSHGATEWAY_ADDR,
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_GROUPINGKEY, RSS_METRICS_PROMETHEUS_PUSHGATEWAY_JOBNAME,
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_REPORT_INTERVAL_SECONDS, RSS_METRICS_REPORTER_CLASS,
    RSS_RPC_SERVER_PORT,
};

/// The coordinator row for `key` (any case), if the Java coordinator reads it.
pub fn lookup(key: &str) -> Option<&'static JavaKey> {
    COORDINATOR_KEYS.iter().find(|k| k.matches(key))
}

/// The coordinator key table of docs/compatibility.md (Markdown).
pub fn markdown_table() -> String {
    super::keys::markdown_table_of(COORDINATOR_KEYS)
}

const ONE_PATH: &str = "tunes IO_SAMPLE, which ranks remote storage paths by HDFS probes the coordinator cannot make (no HDFS client); Spillway selects by APP_BALANCE";

/// Every key, sorted by name.
pub static COORDINATOR_KEYS: &[JavaKey] = &[
    mapped(
        "rss.coordinator.access.candidates.path",
        Both,
        "(none)",
        &["coordinator.access_candidates_path"],
        "path of the candidates file (one access id per line), re-read when it changes; must list one at start-up, as Java",
        "none",
    ),
    mapped(
        "rss.coordinator.access.candidates.updateIntervalSec",
        Both,
        "120",
        &["coordinator.access_candidates_update_interval"],
        "seconds > 0",
        "120 s",
    ),
    mapped(
        "rss.coordinator.access.checkers",
        Both,
        "org.apache.uniffle.coordinator.access.checker.AccessClusterLoadChecker,org.apache.uniffle.coordinator.access.checker.AccessQuotaChecker",
        &["coordinator.access_checkers"],
        "Java class names: AccessClusterLoadChecker, AccessQuotaChecker, AccessCandidatesChecker; any other class stops start-up",
        "Java's default: cluster load + quota (a TOML config runs none by default)",
    ),
    mapped(
        "rss.coordinator.access.loadChecker.memory.percentage",
        Both,
        "15.0",
        &["coordinator.access_load_memory_percentage"],
        "percent in 0..=100 of a server's memory that must be free",
        "15",
    ),
    mapped(
        "rss.coordinator.access.loadChecker.serverNum.threshold",
        Both,
        "(none)",
        &["coordinator.access_load_server_num_threshold"],
        ">= 1 available servers required; none: rss.coordinator.shuffle.nodes.max",
        "rss.coordinator.shuffle.nodes.max",
    ),
    mapped(
        "rss.coordinator.app.expired",
        Both,
        "60000",
        &["coordinator.app_heartbeat_timeout"],
        "milliseconds > 0",
        "60 s",
    ),
    mapped(
        "rss.coordinator.assignment.host.strategy",
        Both,
        "PREFER_DIFF",
        &["coordinator.assignment_host_strategy"],
        "PREFER_DIFF, MUST_DIFF or NONE",
        "PREFER_DIFF",
    ),
    mapped(
        "rss.coordinator.assignment.strategy",
        Both,
        "PARTITION_BALANCE",
        &[],
        "PARTITION_BALANCE (Spillway's balance rule, src/coordinator/assign.rs); BASIC stops start-up",
        "PARTITION_BALANCE",
    ),
    refused(
        "rss.coordinator.client.confApplyStrategy",
        Only010,
        "org.apache.uniffle.coordinator.conf.BypassRssClientConfApplyStrategy",
        "Spillway answers fetchClientConf as Java's default strategy does (the same items for every app and user); plug-in strategies are not served",
    ),
    mapped(
        "rss.coordinator.dynamicClientConf.enabled",
        Both,
        "false",
        &["coordinator.dynamic_client_conf_enabled"],
        "boolean; the file must exist at start-up, as Java",
        "false",
    ),
    mapped(
        "rss.coordinator.dynamicClientConf.parser",
        Both,
        "LEGACY",
        &["coordinator.dynamic_client_conf_parser"],
        "LEGACY, YAML or MIXED (any case); MIXED reads as LEGACY, as Java's does, since its LEGACY parser accepts any file",
        "LEGACY",
    ),
    mapped(
        "rss.coordinator.dynamicClientConf.path",
        Both,
        "(none)",
        &["coordinator.dynamic_client_conf_path"],
        "the client conf file in the format rss.coordinator.dynamicClientConf.parser names, re-read when it changes",
        "none",
    ),
    mapped(
        "rss.coordinator.dynamicClientConf.updateIntervalSec",
        Both,
        "120",
        &["coordinator.dynamic_client_conf_update_interval"],
        "seconds > 0",
        "120 s",
    ),
    mapped(
        "rss.coordinator.exclude.nodes.check.interval.ms",
        Both,
        "60000",
        &["coordinator.exclude_nodes_check_interval"],
        "ms > 0",
        "60 s",
    ),
    mapped(
        "rss.coordinator.exclude.nodes.file.path",
        Both,
        "(none)",
        &["coordinator.exclude_nodes_file_path"],
        "server ids, one per line, re-read when it changes; unioned with the REST API's runtime list",
        "none",
    ),
    na(
        "rss.coordinator.node.tags.checkIntervalMs",
        Only010,
        "60000",
        "read only with rss.coordinator.node.tags.filePath, which is refused",
    ),
    refused(
        "rss.coordinator.node.tags.filePath",
        Only010,
        "(none)",
        "Spillway's coordinator takes a server's tags from its heartbeat only; it cannot add tags to servers from a file (set rss.server.tags on the servers instead)",
    ),
    na(
        "rss.coordinator.nodes.client.cache.expired",
        Both,
        "120000",
        "sizes Java's cache of ShuffleServerInternal clients for decommission calls; Spillway's coordinator opens a connection per REST decommission call (an operator action), so there is no cache to expire",
    ),
    na(
        "rss.coordinator.nodes.client.cache.max",
        Both,
        "1000",
        "sizes Java's cache of ShuffleServerInternal clients for decommission calls; Spillway's coordinator opens a connection per REST decommission call, so there is no cache to bound",
    ),
    mapped(
        "rss.coordinator.quota.default.app.num",
        Both,
        "-1",
        &["coordinator.quota_default_app_num"],
        "apps per user when the quota file names none; negative = unlimited (Java's default \
         since 0.8.0, apache/uniffle#1186; 5 before, as its docs still say)",
        "-1: unlimited (Java's)",
    ),
    mapped(
        "rss.coordinator.quota.default.path",
        Both,
        "(none)",
        &["coordinator.quota_path"],
        "`user = n` lines, re-read when it changes",
        "none",
    ),
    mapped(
        "rss.coordinator.quota.update.interval",
        Both,
        "60000",
        &["coordinator.quota_update_interval"],
        "ms > 0",
        "60 s",
    ),
    mapped(
        "rss.coordinator.remote.storage.cluster.conf",
        Both,
        "(none)",
        &["coordinator.remote_storage_cluster_conf"],
        "Java's `host,k1=v1&k2=v2;host2,...` format: Hadoop conf items per remote storage host, served by fetchRemoteStorage",
        "none",
    ),
    mapped(
        "rss.coordinator.remote.storage.path",
        Both,
        "(none)",
        &["coordinator.remote_storage_path"],
        "comma-separated paths; each app gets the one with the fewest apps (APP_BALANCE)",
        "none: fetchRemoteStorage answers an empty path, as Java's",
    ),
    na(
        "rss.coordinator.remote.storage.schedule.access.times",
        Both,
        "3",
        ONE_PATH,
    ),
    na(
        "rss.coordinator.remote.storage.schedule.file.size",
        Both,
        "204800000",
        ONE_PATH,
    ),
    na(
        "rss.coordinator.remote.storage.schedule.time",
        Both,
        "60000",
        ONE_PATH,
    ),
    mapped(
        "rss.coordinator.remote.storage.select.strategy",
        Both,
        "APP_BALANCE",
        &[],
        "APP_BALANCE only: IO_SAMPLE ranks paths by HDFS probes, and the coordinator has no HDFS client; it stops start-up",
        "APP_BALANCE",
    ),
    mapped(
        "rss.coordinator.rpc.audit.log.enabled",
        Only010,
        "true",
        &["audit.coordinator_rpc_log"],
        "boolean; applies at start",
        "true",
    ),
    mapped(
        "rss.coordinator.rpc.audit.log.excludeList",
        Only010,
        "appHeartbeat,heartbeat",
        &["audit.coordinator_rpc_exclude"],
        "comma list of command names; applies at start",
        "appHeartbeat,heartbeat",
    ),
    mapped(
        "rss.coordinator.select.partition.strategy",
        Both,
        "CONTINUOUS",
        &["coordinator.select_partition_strategy"],
        "ROUND or CONTINUOUS",
        "CONTINUOUS (Java's since 0.8.0, apache/uniffle#1036; its coordinator guide said ROUND until #1692)",
    ),
    mapped(
        "rss.coordinator.server.heartbeat.timeout",
        Both,
        "30000",
        &["coordinator.server_heartbeat_timeout"],
        "milliseconds > 0",
        "30 s",
    ),
    na(
        "rss.coordinator.server.periodic.output.interval.times",
        Both,
        "30",
        "how often Java logs the list of live servers; Spillway logs each server as it joins and as it is lost",
    ),
    mapped(
        "rss.coordinator.shuffle.nodes.max",
        Both,
        "9",
        &["coordinator.shuffle_server_number"],
        "at least 1; re-read from the changed file at runtime, as Java (rss.reconfigure.interval.sec)",
        "9",
    ),
    na(
        "rss.coordinator.startup-silent-period.duration",
        Both,
        "20000",
        "read only with rss.coordinator.startup-silent-period.enabled, which is refused",
    ),
    refused(
        "rss.coordinator.startup-silent-period.enabled",
        Both,
        "false",
        "Spillway's coordinator assigns from its first heartbeat; it has no start-up silent period",
    ),
    mapped(
        "rss.http.basic.authorizationCredentials",
        Only010,
        "(none)",
        &["metrics.basic_credentials"],
        "as written (base64 of user:password), compared as-is with the Authorization: Basic value on the decommission calls, as Java's filter does",
        "none (decommission calls from loopback only)",
    ),
    mapped(
        "rss.jetty.http.port",
        Both,
        "19998",
        &["metrics.http_port"],
        "0..=65535: the coordinator's REST API and metrics",
        "19998",
    ),
    RSS_JETTY_HTTPS_PORT,
    mapped(
        "rss.jetty.ssl.enable",
        Both,
        "false",
        &["metrics.https"],
        "true serves the same routes over HTTPS on rss.jetty.https.port with rss.jetty.ssl.keystore.path; false warns the other rss.jetty.ssl keys",
        "false (HTTP only)",
    ),
    RSS_JETTY_SSL_KEYMANAGER_PASSWORD,
    RSS_JETTY_SSL_KEYSTORE_PASSWORD,
    RSS_JETTY_SSL_KEYSTORE_PATH,
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_ADDR,
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_GROUPINGKEY,
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_JOBNAME,
    RSS_METRICS_PROMETHEUS_PUSHGATEWAY_REPORT_INTERVAL_SECONDS,
    RSS_METRICS_REPORTER_CLASS,
    mapped(
        "rss.reconfigure.interval.sec",
        Both,
        "5",
        &["reconfigure_interval"],
        "seconds > 0: how often the coordinator.conf is checked for rss.coordinator.shuffle.nodes.max, the one key Java's coordinator reloads",
        "5 s",
    ),
    RSS_RPC_SERVER_PORT,
];

#[cfg(test)]
mod tests {
    use super::super::mapper::Mapper;
    use super::super::parse_properties;
    use super::*;

    #[test]
    fn the_coordinator_mapper_asks_for_exactly_the_mapped_keys() {
        let mut mapper = Mapper::new(parse_properties("").unwrap());
        mapper.map_coordinator_conf().unwrap();
        let (asked, mapped) =
            super::super::table_checks::asked_and_mapped(&mapper.asked, COORDINATOR_KEYS, lookup);
        assert_eq!(asked, mapped);
    }

    #[test]
    fn rows_are_sorted_unique_and_have_reasons() {
        super::super::table_checks::assert_sorted_with_reasons(COORDINATOR_KEYS);
    }

    /// Regenerate with `SPILLWAY_UPDATE_README=1 cargo test --lib readme_coordinator_key_table`.
    #[test]
    fn readme_coordinator_key_table_is_generated_from_this_table() {
        super::super::table_checks::assert_docs_section_is(
            "<!-- java-coordinator-keys:begin (generated from src/config/java/coordinator_keys.rs) -->\n",
            "<!-- java-coordinator-keys:end -->",
            &markdown_table(),
            "coordinator key table",
            "readme_coordinator_key_table",
        );
    }
}
