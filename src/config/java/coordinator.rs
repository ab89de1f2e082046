//! A Java `coordinator.conf`: the keys a coordinator-only process maps (see
//! `coordinator_keys.rs` for every key and what happens to it).

use std::path::PathBuf;

use super::mapper::Mapper;
use super::values::java_list;
use crate::config::coordinator::{
    AccessCheckerKind, ClientConfFormat, HostStrategy, PartitionStrategy,
};
use crate::config::{ConfigError, Role};

impl Mapper {
    /// Maps a coordinator.conf: the process becomes a coordinator (`role`), with Java's
    /// ports, expiry and assignment size, and pushes to a gateway as the Java coordinator does.
    pub(super) fn map_coordinator_conf(&mut self) -> Result<(), ConfigError> {
        self.coordinator_conf = true;
        self.config.role = Role::Coordinator;
        self.config.coordinator.enabled = true;
        // There is no shuffle server in the process to register.
        self.config.coordinator.register_self = false;
        if let Some((e, port)) = self.port("rss.rpc.server.port")? {
            self.config.grpc_port = port;
            self.set_origin("grpc_port", &e);
        }
        if let Some((e, port)) = self.port("rss.jetty.http.port")? {
            self.config.metrics.http_port = port;
            self.set_origin("metrics.http_port", &e);
        }
        self.map_jetty_security()?;
        if let Some((e, timeout)) =
            self.positive_duration("rss.coordinator.server.heartbeat.timeout", 1)?
        {
            self.config.coordinator.server_heartbeat_timeout = timeout;
            self.set_origin("coordinator.server_heartbeat_timeout", &e);
        }
        if let Some((e, timeout)) = self.positive_duration("rss.coordinator.app.expired", 1)? {
            self.config.coordinator.app_heartbeat_timeout = timeout;
            self.set_origin("coordinator.app_heartbeat_timeout", &e);
        }
        if let Some((e, n)) = self.positive_count("rss.coordinator.shuffle.nodes.max")? {
            self.config.coordinator.shuffle_server_number = n;
            self.set_origin("coordinator.shuffle_server_number", &e);
        }
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
        if let Some((e, on)) = self.boolean("rss.coordinator.rpc.audit.log.enabled")? {
            self.config.audit.coordinator_rpc_log = on;
            self.set_origin("audit.coordinator_rpc_log", &e);
        }
        if let Some(e) = self.take("rss.coordinator.rpc.audit.log.excludeList") {
            self.config.audit.coordinator_rpc_exclude = java_list(&e.value);
            self.set_origin("audit.coordinator_rpc_exclude", &e);
        }
        Ok(())
    }

    /// How servers and ranges are chosen, and among several remote storage paths.
    fn map_placement(&mut self) -> Result<(), ConfigError> {
        if let Some((e, i)) = self.choice(
            "rss.coordinator.assignment.host.strategy",
            &["PREFER_DIFF", "MUST_DIFF", "NONE"],
        )? {
            self.config.coordinator.assignment_host_strategy = [
                HostStrategy::PreferDiff,
                HostStrategy::MustDiff,
                HostStrategy::None,
            ][i];
            self.set_origin("coordinator.assignment_host_strategy", &e);
        }
        if let Some((e, i)) = self.choice(
            "rss.coordinator.select.partition.strategy",
            &["ROUND", "CONTINUOUS"],
        )? {
            self.config.coordinator.select_partition_strategy =
                [PartitionStrategy::Round, PartitionStrategy::Continuous][i];
            self.set_origin("coordinator.select_partition_strategy", &e);
        }
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
        if let Some((e, n)) =
            self.positive_count("rss.coordinator.access.loadChecker.serverNum.threshold")?
        {
            self.config.coordinator.access_load_server_num_threshold = Some(n);
            self.set_origin("coordinator.access_load_server_num_threshold", &e);
        }
        if let Some((e, n)) = self.int(
            "rss.coordinator.quota.default.app.num",
            i64::from(i32::MIN)..=i64::from(i32::MAX),
        )? {
            self.config.coordinator.quota_default_app_num = n;
            self.set_origin("coordinator.quota_default_app_num", &e);
        }
        Ok(())
    }

    /// The files the coordinator watches (quota, candidates, dynamic client conf, exclude
    /// nodes), each with its poll interval.
    fn map_operator_files(&mut self) -> Result<(), ConfigError> {
        if let Some(e) = self.string("rss.coordinator.access.candidates.path") {
            self.config.coordinator.access_candidates_path = Some(PathBuf::from(&e.value));
            self.set_origin("coordinator.access_candidates_path", &e);
        }
        if let Some((e, d)) =
            self.positive_duration("rss.coordinator.access.candidates.updateIntervalSec", 1000)?
        {
            self.config.coordinator.access_candidates_update_interval = d;
            self.set_origin("coordinator.access_candidates_update_interval", &e);
        }
        if let Some(e) = self.string("rss.coordinator.quota.default.path") {
            self.config.coordinator.quota_path = Some(PathBuf::from(&e.value));
            self.set_origin("coordinator.quota_path", &e);
        }
        if let Some((e, d)) = self.positive_duration("rss.coordinator.quota.update.interval", 1)? {
            self.config.coordinator.quota_update_interval = d;
            self.set_origin("coordinator.quota_update_interval", &e);
        }
        if let Some((e, on)) = self.boolean("rss.coordinator.dynamicClientConf.enabled")? {
            self.config.coordinator.dynamic_client_conf_enabled = on;
            self.set_origin("coordinator.dynamic_client_conf_enabled", &e);
        }
        if let Some(e) = self.string("rss.coordinator.dynamicClientConf.path") {
            self.config.coordinator.dynamic_client_conf_path = Some(PathBuf::from(&e.value));
            self.set_origin("coordinator.dynamic_client_conf_path", &e);
        }
        if let Some((e, i)) = self.choice(
            "rss.coordinator.dynamicClientConf.parser",
            &["LEGACY", "YAML", "MIXED"],
        )? {
            self.config.coordinator.dynamic_client_conf_parser = [
                ClientConfFormat::Legacy,
                ClientConfFormat::Yaml,
                ClientConfFormat::Mixed,
            ][i];
            self.set_origin("coordinator.dynamic_client_conf_parser", &e);
        }
        if let Some((e, d)) =
            self.positive_duration("rss.coordinator.dynamicClientConf.updateIntervalSec", 1000)?
        {
            self.config.coordinator.dynamic_client_conf_update_interval = d;
            self.set_origin("coordinator.dynamic_client_conf_update_interval", &e);
        }
        if let Some(e) = self.string("rss.coordinator.exclude.nodes.file.path") {
            self.config.coordinator.exclude_nodes_file_path = Some(PathBuf::from(&e.value));
            self.set_origin("coordinator.exclude_nodes_file_path", &e);
        }
        if let Some((e, d)) =
            self.positive_duration("rss.coordinator.exclude.nodes.check.interval.ms", 1)?
        {
            self.config.coordinator.exclude_nodes_check_interval = d;
            self.set_origin("coordinator.exclude_nodes_check_interval", &e);
        }
        Ok(())
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
