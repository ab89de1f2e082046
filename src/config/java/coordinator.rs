//! A Java `coordinator.conf`: the keys a coordinator-only process maps (see
//! `coordinator_keys.rs` for every key and what happens to it).

use std::path::PathBuf;

use super::mapper::Mapper;
use super::values::java_list;
use crate::config::coordinator::{
    AccessCheckerKind, ClientConfFormat, HostStrategy, PartitionStrategy,
};
use crate::config::{ConfigError, Role};

/// `rss.coordinator.assignment.host.strategy`'s Java names.
const HOST_STRATEGIES: [(&str, HostStrategy); 3] = [
    ("PREFER_DIFF", HostStrategy::PreferDiff),
    ("MUST_DIFF", HostStrategy::MustDiff),
    ("NONE", HostStrategy::None),
];

/// `rss.coordinator.select.partition.strategy`'s Java names.
const PARTITION_STRATEGIES: [(&str, PartitionStrategy); 2] = [
    ("ROUND", PartitionStrategy::Round),
    ("CONTINUOUS", PartitionStrategy::Continuous),
];

/// `rss.coordinator.dynamicClientConf.parser`'s Java names.
const CLIENT_CONF_PARSERS: [(&str, ClientConfFormat); 3] = [
    ("LEGACY", ClientConfFormat::Legacy),
    ("YAML", ClientConfFormat::Yaml),
    ("MIXED", ClientConfFormat::Mixed),
];

impl Mapper {
    /// Maps a coordinator.conf: the process becomes a coordinator (`role`), with Java's
    /// ports, expiry and assignment size, and pushes to a gateway as the Java coordinator does.
    pub(super) fn map_coordinator_conf(&mut self) -> Result<(), ConfigError> {
        self.coordinator_conf = true;
        self.config.role = Role::Coordinator;
        self.config.coordinator.enabled = true;
        // There is no shuffle server in the process to register.
        self.config.coordinator.register_self = false;
        self.map_base_listeners()?;
        self.map(
            "rss.coordinator.server.heartbeat.timeout",
            Self::positive_millis,
            "coordinator.server_heartbeat_timeout",
            |c, v| c.coordinator.server_heartbeat_timeout = v,
        )?;
        self.map(
            "rss.coordinator.app.expired",
            Self::positive_millis,
            "coordinator.app_heartbeat_timeout",
            |c, v| c.coordinator.app_heartbeat_timeout = v,
        )?;
        self.map(
            "rss.coordinator.shuffle.nodes.max",
            Self::positive_count,
            "coordinator.shuffle_server_number",
            |c, v| c.coordinator.shuffle_server_number = v,
        )?;
        // Spillway's rule is PARTITION_BALANCE's; BASIC would ask for another one.
        self.choice(
            "rss.coordinator.assignment.strategy",
            &["PARTITION_BALANCE"],
        )?;
        if let Some(e) = self.string("rss.coordinator.remote.storage.path") {
            let paths = java_list(&e.value);
            if !paths.is_empty() {
                self.config.coordinator.remote_storage_path = Some(paths.join(","));
                self.set_origin("coordinator.remote_storage_path", &e);
            }
        }
        self.map_placement()?;
        self.map_admission()?;
        self.map_operator_files()?;
        self.map_reload()?;
        self.map_coordinator_audit()?;
        self.map_push_gateway()
    }

    /// The coordinator's RPC audit log (0.10 keys). Absent, Java's defaults hold: on, the two
    /// heartbeats excluded; the server's `rss.server.rpc.audit.*` keys do not reach it.
    fn map_coordinator_audit(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.coordinator.rpc.audit.log.enabled",
            Self::boolean,
            "audit.coordinator_rpc_log",
            |c, v| c.audit.coordinator_rpc_log = v,
        )?;
        self.map(
            "rss.coordinator.rpc.audit.log.excludeList",
            Self::list,
            "audit.coordinator_rpc_exclude",
            |c, v| c.audit.coordinator_rpc_exclude = v,
        )
    }

    /// How servers and ranges are chosen, and among several remote storage paths.
    fn map_placement(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.coordinator.assignment.host.strategy",
            |m, k| m.one_of(k, &HOST_STRATEGIES),
            "coordinator.assignment_host_strategy",
            |c, v| c.coordinator.assignment_host_strategy = v,
        )?;
        self.map(
            "rss.coordinator.select.partition.strategy",
            |m, k| m.one_of(k, &PARTITION_STRATEGIES),
            "coordinator.select_partition_strategy",
            |c, v| c.coordinator.select_partition_strategy = v,
        )?;
        // APP_BALANCE is what Spillway serves; IO_SAMPLE ranks paths by HDFS probes that a
        // coordinator without an HDFS client cannot make.
        self.choice(
            "rss.coordinator.remote.storage.select.strategy",
            &["APP_BALANCE"],
        )?;
        if let Some(e) = self.string("rss.coordinator.remote.storage.cluster.conf") {
            let conf = crate::config::coordinator::parse_cluster_conf(&e.value)
                .map_err(|reason| e.error(reason))?;
            self.config.coordinator.remote_storage_cluster_conf = conf;
            self.set_origin("coordinator.remote_storage_cluster_conf", &e);
        }
        Ok(())
    }

    /// `accessCluster`'s checkers. Without the key Java runs its default pair, the cluster-load
    /// and quota checkers, and so does a coordinator started from a coordinator.conf (a TOML
    /// config runs none unless it lists them: docs/coordinator.md, placement and admission).
    fn map_admission(&mut self) -> Result<(), ConfigError> {
        let checkers = match self.take("rss.coordinator.access.checkers") {
            Some(e) => {
                let mut kinds = Vec::new();
                for class in java_list(&e.value) {
                    let simple = class.rsplit('.').next().unwrap_or(&class);
                    kinds.push(match simple {
                        "AccessClusterLoadChecker" => AccessCheckerKind::ClusterLoad,
                        "AccessQuotaChecker" => AccessCheckerKind::Quota,
                        "AccessCandidatesChecker" => AccessCheckerKind::Candidates,
                        _ => {
                            return Err(e.error(format!(
                                "{class}: Spillway's coordinator has Java's cluster-load, quota \
                                 and candidates checkers; other checkers (AccessSupportRssChecker, \
                                 AccessBannedChecker, plug-in classes) are not served"
                            )))
                        }
                    });
                }
                self.set_origin("coordinator.access_checkers", &e);
                kinds
            }
            None => vec![AccessCheckerKind::ClusterLoad, AccessCheckerKind::Quota],
        };
        self.config.coordinator.access_checkers = checkers;
        if let Some((e, v)) = self.double("rss.coordinator.access.loadChecker.memory.percentage")? {
            if !(0.0..=100.0).contains(&v) {
                return Err(e.error(format!("{v} is not a percentage in 0..=100")));
            }
            self.config.coordinator.access_load_memory_percentage = v;
            self.set_origin("coordinator.access_load_memory_percentage", &e);
        }
        self.map(
            "rss.coordinator.access.loadChecker.serverNum.threshold",
            Self::positive_count,
            "coordinator.access_load_server_num_threshold",
            |c, v| c.coordinator.access_load_server_num_threshold = Some(v),
        )?;
        self.map(
            "rss.coordinator.quota.default.app.num",
            |m, k| m.int(k, i64::from(i32::MIN)..=i64::from(i32::MAX)),
            "coordinator.quota_default_app_num",
            |c, v| c.coordinator.quota_default_app_num = v,
        )
    }

    /// The files the coordinator watches (quota, candidates, dynamic client conf, exclude
    /// nodes), each with its poll interval.
    fn map_operator_files(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.coordinator.access.candidates.path",
            Self::text,
            "coordinator.access_candidates_path",
            |c, v| c.coordinator.access_candidates_path = Some(PathBuf::from(v)),
        )?;
        self.map(
            "rss.coordinator.access.candidates.updateIntervalSec",
            Self::positive_secs,
            "coordinator.access_candidates_update_interval",
            |c, v| c.coordinator.access_candidates_update_interval = v,
        )?;
        self.map(
            "rss.coordinator.quota.default.path",
            Self::text,
            "coordinator.quota_path",
            |c, v| c.coordinator.quota_path = Some(PathBuf::from(v)),
        )?;
        self.map(
            "rss.coordinator.quota.update.interval",
            Self::positive_millis,
            "coordinator.quota_update_interval",
            |c, v| c.coordinator.quota_update_interval = v,
        )?;
        self.map(
            "rss.coordinator.dynamicClientConf.enabled",
            Self::boolean,
            "coordinator.dynamic_client_conf_enabled",
            |c, v| c.coordinator.dynamic_client_conf_enabled = v,
        )?;
        self.map(
            "rss.coordinator.dynamicClientConf.path",
            Self::text,
            "coordinator.dynamic_client_conf_path",
            |c, v| c.coordinator.dynamic_client_conf_path = Some(PathBuf::from(v)),
        )?;
        self.map(
            "rss.coordinator.dynamicClientConf.parser",
            |m, k| m.one_of(k, &CLIENT_CONF_PARSERS),
            "coordinator.dynamic_client_conf_parser",
            |c, v| c.coordinator.dynamic_client_conf_parser = v,
        )?;
        self.map(
            "rss.coordinator.dynamicClientConf.updateIntervalSec",
            Self::positive_secs,
            "coordinator.dynamic_client_conf_update_interval",
            |c, v| c.coordinator.dynamic_client_conf_update_interval = v,
        )?;
        self.map(
            "rss.coordinator.exclude.nodes.file.path",
            Self::text,
            "coordinator.exclude_nodes_file_path",
            |c, v| c.coordinator.exclude_nodes_file_path = Some(PathBuf::from(v)),
        )?;
        self.map(
            "rss.coordinator.exclude.nodes.check.interval.ms",
            Self::positive_millis,
            "coordinator.exclude_nodes_check_interval",
            |c, v| c.coordinator.exclude_nodes_check_interval = v,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::super::{from_coordinator_properties, is_coordinator_file};
    use crate::config::Role;

    /// Java's `conf/coordinator.conf` as shipped, plus a few more keys.
    const CONF: &str = "\
rss.rpc.server.port 19999
rss.jetty.http.port 19998
rss.coordinator.server.heartbeat.timeout 30000
rss.coordinator.app.expired 60000
rss.coordinator.shuffle.nodes.max 13
rss.coordinator.remote.storage.path hdfs://ns1/rss
rss.coordinator.server.periodic.output.interval.times 10
rss.coordinator.access.checkers org.apache.uniffle.coordinator.access.checker.AccessClusterLoadChecker
rss.rpc.executor.size 1000
rss.coordinator.no.such.key x
";

    #[test]
    fn a_java_coordinator_conf_maps_onto_a_coordinator_process() {
        let loaded = from_coordinator_properties(CONF).unwrap();
        let c = &loaded.config;
        assert_eq!(c.role, Role::Coordinator);
        assert!(c.coordinator.enabled && !c.coordinator.register_self);
        assert_eq!((c.grpc_port, c.metrics.http_port), (19999, 19998));
        assert_eq!(
            c.coordinator.server_heartbeat_timeout,
            Duration::from_secs(30)
        );
        assert_eq!(c.coordinator.app_heartbeat_timeout, Duration::from_secs(60));
        assert_eq!(c.coordinator.shuffle_server_number, 13);
        assert_eq!(
            c.coordinator.remote_storage_path.as_deref(),
            Some("hdfs://ns1/rss")
        );
        let ignored = loaded.ignored.join("; ");
        assert!(
            ignored.contains(
                "rss.coordinator.server.periodic.output.interval.times (how often Java logs"
            ),
            "{ignored}"
        );
        assert!(
            ignored.contains("rss.rpc.executor.size ("),
            "a base key answered from the server table: {ignored}"
        );
        assert!(
            ignored.contains("rss.coordinator.no.such.key (not a key of the Java coordinator"),
            "{ignored}"
        );
        assert!(
            !ignored.contains("access.checkers"),
            "Java's default is accepted"
        );
    }

    /// The coordinator's audit keys: Java's defaults when absent (on, both heartbeats
    /// excluded), the file's values when set.
    #[test]
    fn coordinator_audit_keys_map_with_javas_defaults() {
        let absent = from_coordinator_properties("").unwrap().config;
        assert!(absent.audit.coordinator_rpc_log);
        assert_eq!(
            absent.audit.coordinator_rpc_exclude,
            ["appHeartbeat", "heartbeat"]
        );
        let set = from_coordinator_properties(
            "rss.coordinator.rpc.audit.log.enabled false\n\
             rss.coordinator.rpc.audit.log.excludeList getShuffleAssignments, accessCluster\n\
             rss.coordinator.client.confApplyStrategy \
             org.apache.uniffle.coordinator.conf.BypassRssClientConfApplyStrategy\n\
             rss.coordinator.nodes.client.cache.max 10\n",
        )
        .unwrap();
        assert!(!set.config.audit.coordinator_rpc_log);
        assert_eq!(
            set.config.audit.coordinator_rpc_exclude,
            ["getShuffleAssignments", "accessCluster"]
        );
        let ignored = set.ignored.join("; ");
        assert!(
            ignored.contains("rss.coordinator.nodes.client.cache.max (sizes Java's cache"),
            "{ignored}"
        );
        assert!(
            !ignored.contains("confApplyStrategy"),
            "Java's default strategy is served: {ignored}"
        );
        assert_eq!(
            from_coordinator_properties("rss.coordinator.rpc.audit.log.enabled maybe\n")
                .unwrap_err()
                .key,
            "rss.coordinator.rpc.audit.log.enabled"
        );
    }

    #[test]
    fn what_the_coordinator_cannot_do_stops_start_up_with_the_key_named() {
        for (line, key) in [
            (
                "rss.coordinator.access.checkers org.apache.uniffle.coordinator.access.checker.AccessBannedChecker",
                "rss.coordinator.access.checkers",
            ),
            (
                "rss.coordinator.remote.storage.select.strategy IO_SAMPLE",
                "rss.coordinator.remote.storage.select.strategy",
            ),
            (
                "rss.coordinator.assignment.strategy BASIC",
                "rss.coordinator.assignment.strategy",
            ),
            (
                "rss.coordinator.startup-silent-period.enabled true",
                "rss.coordinator.startup-silent-period.enabled",
            ),
            (
                "rss.coordinator.app.expired 0",
                "rss.coordinator.app.expired",
            ),
            (
                "rss.coordinator.client.confApplyStrategy com.example.MyStrategy",
                "rss.coordinator.client.confApplyStrategy",
            ),
            (
                "rss.coordinator.node.tags.filePath /etc/uniffle/tags",
                "rss.coordinator.node.tags.filePath",
            ),
        ] {
            let e = from_coordinator_properties(&format!("{line}\n")).unwrap_err();
            assert_eq!(e.key, key, "{line}: {e}");
        }
    }

    /// The placement and admission keys of a Java coordinator.conf, with Java's defaults when
    /// absent (the cluster-load and quota checkers; no per-user limit, as since 0.8.0).
    #[test]
    fn placement_and_admission_keys_keep_their_java_meaning() {
        use crate::config::coordinator::{
            AccessCheckerKind, ClientConfFormat, HostStrategy, PartitionStrategy,
        };
        let c = from_coordinator_properties("rss.rpc.server.port 19999\n")
            .unwrap()
            .config;
        assert_eq!(
            c.coordinator.dynamic_client_conf_parser,
            ClientConfFormat::Legacy
        );
        assert_eq!(
            c.coordinator.select_partition_strategy,
            PartitionStrategy::Continuous
        );
        assert_eq!(
            c.coordinator.access_checkers,
            [AccessCheckerKind::ClusterLoad, AccessCheckerKind::Quota]
        );
        assert_eq!(c.coordinator.quota_default_app_num, -1);
        let loaded = from_coordinator_properties(
            "rss.coordinator.access.checkers \
             org.apache.uniffle.coordinator.access.checker.AccessCandidatesChecker\n\
             rss.coordinator.access.candidates.path /etc/rss/candidates\n\
             rss.coordinator.access.candidates.updateIntervalSec 30\n\
             rss.coordinator.access.loadChecker.memory.percentage 20\n\
             rss.coordinator.access.loadChecker.serverNum.threshold 2\n\
             rss.coordinator.quota.default.app.num -1\n\
             rss.coordinator.quota.default.path /etc/rss/quota\n\
             rss.coordinator.quota.update.interval 5000\n\
             rss.coordinator.dynamicClientConf.enabled true\n\
             rss.coordinator.dynamicClientConf.path /etc/rss/client.conf\n\
             rss.coordinator.dynamicClientConf.parser yaml\n\
             rss.coordinator.dynamicClientConf.updateIntervalSec 10\n\
             rss.coordinator.exclude.nodes.file.path /etc/rss/exclude\n\
             rss.coordinator.exclude.nodes.check.interval.ms 2000\n\
             rss.coordinator.assignment.host.strategy MUST_DIFF\n\
             rss.coordinator.select.partition.strategy ROUND\n\
             rss.coordinator.remote.storage.select.strategy APP_BALANCE\n\
             rss.coordinator.remote.storage.path hdfs://a/rss,hdfs://b/rss\n\
             rss.coordinator.remote.storage.cluster.conf a,dfs.replication=2\n",
        )
        .unwrap();
        assert!(loaded.ignored.is_empty(), "{:?}", loaded.ignored);
        let c = &loaded.config.coordinator;
        assert_eq!(c.access_checkers, [AccessCheckerKind::Candidates]);
        assert_eq!(
            c.access_candidates_path.as_deref(),
            Some(Path::new("/etc/rss/candidates"))
        );
        assert_eq!(c.access_candidates_update_interval, Duration::from_secs(30));
        assert_eq!(c.access_load_memory_percentage, 20.0);
        assert_eq!(c.access_load_server_num_threshold, Some(2));
        assert_eq!(c.quota_default_app_num, -1);
        assert_eq!(c.quota_path.as_deref(), Some(Path::new("/etc/rss/quota")));
        assert_eq!(c.quota_update_interval, Duration::from_secs(5));
        assert!(c.dynamic_client_conf_enabled);
        assert_eq!(c.dynamic_client_conf_parser, ClientConfFormat::Yaml);
        assert_eq!(
            c.dynamic_client_conf_update_interval,
            Duration::from_secs(10)
        );
        assert_eq!(
            c.exclude_nodes_file_path.as_deref(),
            Some(Path::new("/etc/rss/exclude"))
        );
        assert_eq!(c.exclude_nodes_check_interval, Duration::from_secs(2));
        assert_eq!(c.assignment_host_strategy, HostStrategy::MustDiff);
        assert_eq!(c.select_partition_strategy, PartitionStrategy::Round);
        assert_eq!(
            c.remote_storage_path.as_deref(),
            Some("hdfs://a/rss,hdfs://b/rss")
        );
        assert_eq!(c.remote_storage_cluster_conf["a"]["dfs.replication"], "2");
    }

    #[test]
    fn a_coordinator_conf_is_told_from_a_server_conf() {
        let any = Path::new("/etc/rss/rss.conf");
        assert!(is_coordinator_file(any, CONF));
        assert!(is_coordinator_file(
            Path::new("/opt/rss/conf/coordinator.conf"),
            "rss.rpc.server.port 19999\n"
        ));
        // A server.conf names its coordinators, which is no coordinator key.
        let server = "rss.rpc.server.port 19999\nrss.coordinator.quorum c1:19999\n\
                      rss.storage.type MEMORY_LOCALFILE\nrss.storage.basePath /data\n";
        assert!(!is_coordinator_file(any, server));
        // A coordinator key beside a server key: still a server.conf (the mapper then warns it).
        let mixed = format!("{server}rss.coordinator.app.expired 60000\n");
        assert!(!is_coordinator_file(any, &mixed));
        assert!(!is_coordinator_file(any, "rss.rpc.server.port 19999\n"));
    }
}
