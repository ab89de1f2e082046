//! Every key of the Java coordinator's `coordinator.conf` and what a coordinator-only Spillway
//! process does with each, as data: the coordinator's counterpart of [`super::keys::KEYS`],
//! read by the start-up warning, the README's coordinator key table and the mapper's check.
//!
//! Where the key list came from: `CoordinatorConf` as stored by the project's code search of
//! apache/incubator-uniffle (the newest stored version predates the 0.10 tag: it has no
//! `rss.coordinator.remote.storage.io.sample.*` keys, which the 0.10 coordinator guide,
//! `docs/coordinator_guide.md`, lists and this table takes from there), plus the `RssBaseConf`
//! keys the coordinator guide names (`rss.rpc.server.port`, `rss.jetty.http.port`, the metric
//! reporter, `rss.reconfigure.interval.sec`). Other `RssBaseConf` keys a coordinator.conf may
//! set are answered from the shuffle server's table, which lists them all. Release attribution
//! is not pinned per key: every row says 0.9.2 and 0.10.

use super::keys::{mapped, na, refused, JavaKey, Releases::Both};

/// The coordinator row for `key` (any case), if the Java coordinator reads it.
pub fn lookup(key: &str) -> Option<&'static JavaKey> {
    COORDINATOR_KEYS.iter().find(|k| k.matches(key))
}

/// The README's coordinator key table (Markdown).
pub fn markdown_table() -> String {
    super::keys::markdown_table_of(COORDINATOR_KEYS)
}

const NO_LOAD_CHECKER: &str = "a setting of the access checkers, which Spillway's coordinator does not have yet (accessCluster lets every client in; rss.coordinator.access.checkers is refused)";
const NO_QUOTA: &str = "a setting of Java's AccessQuotaChecker, which Spillway's coordinator does not have yet (rss.coordinator.access.checkers is refused)";
const ONE_PATH: &str = "chooses among several remote storage paths; Spillway's coordinator serves one (rss.coordinator.remote.storage.path)";

/// Every key, sorted by name.
pub static COORDINATOR_KEYS: &[JavaKey] = &[
    refused(
        "rss.coordinator.access.candidates.path",
        Both,
        "(none)",
        "Java's AccessCandidatesChecker file; Spillway's coordinator has no access checkers yet, so the file would let in clients it should refuse",
    ),
    na(
        "rss.coordinator.access.candidates.updateIntervalSec",
        Both,
        "120",
        NO_LOAD_CHECKER,
    ),
    refused(
        "rss.coordinator.access.checkers",
        Both,
        "org.apache.uniffle.coordinator.access.checker.AccessClusterLoadChecker",
        "Spillway's accessCluster has no checkers yet and lets every client in; a list other than Java's default would promise refusals it does not make (the default is accepted, and served without the load check: README, coordinator-only process)",
    ),
    na(
        "rss.coordinator.access.loadChecker.memory.percentage",
        Both,
        "15.0",
        NO_LOAD_CHECKER,
    ),
    na(
        "rss.coordinator.access.loadChecker.serverNum.threshold",
        Both,
        "(none)",
        NO_LOAD_CHECKER,
    ),
    mapped(
        "rss.coordinator.app.expired",
        Both,
        "60000",
        &["coordinator.app_heartbeat_timeout"],
        "milliseconds > 0",
        "60 s",
    ),
    refused(
        "rss.coordinator.assignment.host.strategy",
        Both,
        "PREFER_DIFF",
        "Spillway's assignment does not spread replicas by host yet; MUST_DIFF or NONE would ask for a rule it does not apply",
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
        "rss.coordinator.dynamicClientConf.enabled",
        Both,
        "false",
        "the dynamic client conf file is not read yet; give the items in TOML ([coordinator.client_conf])",
    ),
    na(
        "rss.coordinator.dynamicClientConf.path",
        Both,
        "(none)",
        "read only with rss.coordinator.dynamicClientConf.enabled, which is refused",
    ),
    na(
        "rss.coordinator.dynamicClientConf.updateIntervalSec",
        Both,
        "120",
        "read only with rss.coordinator.dynamicClientConf.enabled, which is refused",
    ),
    na(
        "rss.coordinator.exclude.nodes.check.interval.ms",
        Both,
        "60000",
        "read only with rss.coordinator.exclude.nodes.file.path, which is refused",
    ),
    refused(
        "rss.coordinator.exclude.nodes.file.path",
        Both,
        "(none)",
        "Spillway's coordinator has no exclude-nodes file yet; the servers it lists would still be assigned",
    ),
    na("rss.coordinator.quota.default.app.num", Both, "5", NO_QUOTA),
    na("rss.coordinator.quota.default.path", Both, "(none)", NO_QUOTA),
    na("rss.coordinator.quota.update.interval", Both, "60000", NO_QUOTA),
    refused(
        "rss.coordinator.remote.storage.cluster.conf",
        Both,
        "(none)",
        "per-cluster Hadoop conf items are not served yet: fetchRemoteStorage answers the path without conf items, so clients would miss them",
    ),
    na(
        "rss.coordinator.remote.storage.io.sample.access.times",
        Both,
        "3",
        ONE_PATH,
    ),
    na(
        "rss.coordinator.remote.storage.io.sample.file.size",
        Both,
        "204800000",
        ONE_PATH,
    ),
    na(
        "rss.coordinator.remote.storage.io.sample.schedule.time",
        Both,
        "60000",
        ONE_PATH,
    ),
    mapped(
        "rss.coordinator.remote.storage.path",
        Both,
        "(none)",
        &["coordinator.remote_storage_path"],
        "one path; several (comma-separated) stop start-up: there is no per-app selection among paths yet",
        "none: fetchRemoteStorage answers an empty path, as Java's",
    ),
    na(
        "rss.coordinator.remote.storage.select.strategy",
        Both,
        "APP_BALANCE",
        ONE_PATH,
    ),
    refused(
        "rss.coordinator.select.partition.strategy",
        Both,
        "ROUND",
        "Spillway gives the ranges round-robin (ROUND); CONTINUOUS would ask for consecutive ranges it does not give",
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
        "at least 1",
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
        "rss.jetty.http.port",
        Both,
        "19998",
        &["metrics.http_port"],
        "0..=65535: the coordinator's metrics",
        "19998",
    ),
    mapped(
        "rss.metrics.prometheus.pushgateway.addr",
        Both,
        "(none)",
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
        "(none)",
        &["metrics.push_gateway_job"],
        "required with the reporter",
        "none",
    ),
    mapped(
        "rss.metrics.prometheus.pushgateway.report.interval.seconds",
        Both,
        "10",
        &["metrics.push_interval"],
        "seconds > 0",
        "10 s",
    ),
    mapped(
        "rss.metrics.reporter.class",
        Both,
        "(none)",
        &["metrics.push_gateway_endpoint"],
        "must be the PrometheusPushGatewayMetricReporter; it turns pushing on; another class is warned",
        "no pushing",
    ),
    na(
        "rss.reconfigure.interval.sec",
        Both,
        "5",
        "a coordinator-only process reloads nothing at runtime (Java reloads its cluster manager's and access manager's keys, none of which Spillway maps)",
    ),
    mapped(
        "rss.rpc.server.port",
        Both,
        "19999",
        &["grpc_port"],
        "0..=65535; 0 = any free port",
        "19999",
    ),
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::keys::Treatment;
    use super::super::mapper::Mapper;
    use super::super::parse_properties;
    use super::*;

    #[test]
    fn the_coordinator_mapper_asks_for_exactly_the_mapped_keys() {
        let mut mapper = Mapper::new(parse_properties("").unwrap());
        mapper.map_coordinator_conf().unwrap();
        let asked: BTreeSet<&str> = mapper
            .asked
            .iter()
            .map(|k| lookup(k).map_or(k.as_str(), |row| row.key))
            .collect();
        let mapped: BTreeSet<&str> = COORDINATOR_KEYS
            .iter()
            .filter(|k| matches!(k.treatment, Treatment::Mapped { .. }))
            .map(|k| k.key)
            .collect();
        assert_eq!(asked, mapped);
    }

    #[test]
    fn rows_are_sorted_unique_and_have_reasons() {
        for pair in COORDINATOR_KEYS.windows(2) {
            assert!(
                pair[0].key.to_ascii_lowercase() < pair[1].key.to_ascii_lowercase(),
                "{} then {}: keep the table sorted, each key once",
                pair[0].key,
                pair[1].key
            );
        }
        for k in COORDINATOR_KEYS {
            match k.treatment {
                Treatment::Mapped { how, absent, .. } => {
                    assert!(!how.is_empty() && !absent.is_empty(), "{}", k.key)
                }
                Treatment::NotApplicable(why) | Treatment::Refused(why) => {
                    assert!(!why.is_empty(), "{}", k.key)
                }
            }
        }
    }

    /// Regenerate with `SPILLWAY_UPDATE_README=1 cargo test --lib readme_coordinator_key_table`.
    #[test]
    fn readme_coordinator_key_table_is_generated_from_this_table() {
        const BEGIN: &str =
            "<!-- java-coordinator-keys:begin (generated from src/config/java/coordinator_keys.rs) -->\n";
        const END: &str = "<!-- java-coordinator-keys:end -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let start = readme.find(BEGIN).expect("README has the begin marker") + BEGIN.len();
        let end = readme[start..].find(END).expect("and the end marker") + start;
        let table = markdown_table();
        if readme[start..end] != table {
            if std::env::var_os("SPILLWAY_UPDATE_README").is_some() {
                let updated = format!("{}{table}{}", &readme[..start], &readme[end..]);
                std::fs::write(path, updated).unwrap();
            } else {
                panic!(
                    "README's coordinator key table is stale: run SPILLWAY_UPDATE_README=1 \
                     cargo test --lib readme_coordinator_key_table"
                );
            }
        }
    }
}
