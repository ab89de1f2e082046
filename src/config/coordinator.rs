//! The `[coordinator]` settings ([`CoordinatorConfig`]) and their own types: the strategies
//! and checkers an operator names, and Java's cluster-conf format. They live with the config
//! (the bottom layer), and the coordinator uses them from here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How many servers one IP may contribute (`rss.coordinator.assignment.host.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HostStrategy {
    /// Distinct IPs first, then the rest by rank: spreads replicas over machines when it can.
    #[default]
    PreferDiff,
    /// Distinct IPs only, even if that yields fewer servers than wanted.
    MustDiff,
    /// The top-ranked servers, whatever their IPs.
    None,
}

/// How ranges are laid on the chosen servers (`rss.coordinator.select.partition.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PartitionStrategy {
    /// Ranges one by one round-robin.
    Round,
    /// Adjacent ranges in groups sized from `estimateTaskConcurrency` (Java's default).
    #[default]
    Continuous,
}

/// One of Java's access checkers (`rss.coordinator.access.checkers`, by class name there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessCheckerKind {
    /// `AccessClusterLoadChecker`: enough ACTIVE servers with the tags and free memory.
    ClusterLoad,
    /// `AccessQuotaChecker`: a user's running apps below their quota.
    Quota,
    /// `AccessCandidatesChecker`: the access id is listed in the candidates file.
    Candidates,
}

/// Which parser reads the dynamic client conf file (`rss.coordinator.dynamicClientConf.parser`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ClientConfFormat {
    /// `key value` lines (Java's default).
    #[default]
    Legacy,
    /// `rssClientConf` and `remoteStorageInfos` in YAML.
    Yaml,
    /// LEGACY, then YAML if LEGACY rejects the file, which it never does (module doc).
    Mixed,
}

/// Per-cluster Hadoop conf in Java's format `cluster,k1=v1,k2=v2;cluster2,k=v`, where the
/// cluster is the host of a remote storage path (`hdfs://<host>/...`). Like Java, any malformed
/// part makes the whole value count as empty; the error says which part.
pub fn parse_cluster_conf(
    text: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, String> {
    let mut clusters = BTreeMap::new();
    if text.is_empty() {
        return Ok(clusters);
    }
    for cluster in text.split(';') {
        let mut items = cluster.split(',');
        let id = items.next().unwrap_or("");
        let mut conf = BTreeMap::new();
        for item in items {
            let kv: Vec<&str> = item.split('=').collect();
            let [key, value] = kv[..] else {
                return Err(format!("{cluster:?}: expected cluster,k1=v1,..."));
            };
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() || value.is_empty() {
                return Err(format!("{cluster:?}: empty key or value"));
            }
            conf.insert(key.to_owned(), value.to_owned());
        }
        if conf.is_empty() {
            return Err(format!("{cluster:?}: expected cluster,k1=v1,..."));
        }
        clusters.insert(id.to_owned(), conf);
    }
    Ok(clusters)
}

/// `[coordinator]`: the embedded Uniffle coordinator, served on the gRPC port beside the
/// shuffle server so one binary is a complete remote shuffle service: clients point
/// `spark.rss.coordinator.quorum` at this server, and shuffle servers (this one included) send
/// their heartbeats here.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoordinatorConfig {
    /// Whether the `CoordinatorServer` gRPC service is served. Default: false (the shipped
    /// `config.toml.example` turns it on).
    pub enabled: bool,
    /// With `enabled`, this server heartbeats its own coordinator (in addition to
    /// `coordinator_quorum`), so one binary is a complete service. Off only for a
    /// coordinator-only node or tests that want a coordinator without its own server.
    /// Default: true.
    pub register_self: bool,
    /// A shuffle server with no heartbeat for this long is no longer assigned and is dropped.
    /// Must be > 0. Default: `30s` (Uniffle's `rss.coordinator.server.heartbeat.timeout`).
    #[serde(with = "humantime_serde")]
    pub server_heartbeat_timeout: Duration,
    /// An app with no heartbeat, registration or assignment for this long is forgotten, and the
    /// partitions it was assigned stop counting towards server load. Must be > 0.
    /// Default: `60s` (Uniffle's `rss.coordinator.app.expired`).
    #[serde(with = "humantime_serde")]
    pub app_heartbeat_timeout: Duration,
    /// Servers per shuffle when the client asks for -1/0 (`assignmentShuffleServerNumber`), and
    /// the most a client may ask for, as in Uniffle; capped by the servers available. At least 1.
    /// Default: 9 (Uniffle's `rss.coordinator.shuffle.nodes.max`).
    pub shuffle_server_number: usize,
    /// Remote storage path answered by `fetchRemoteStorage` (e.g. `hdfs://ns/rss`); `None`
    /// answers an empty path. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_storage_path: Option<String>,
    /// Client settings served by `fetchClientConf`/`fetchClientConfV2`. Clients apply a key
    /// only if their own config lacks it, prefixing `spark.`/`mapreduce.` themselves, so
    /// `rss.storage.type` reaches every engine. The dynamic client conf file's items override
    /// these. Default: empty.
    pub client_conf: BTreeMap<String, String>,
    /// Hadoop conf items per remote storage cluster, keyed by the host of a path in
    /// `remote_storage_path` (Uniffle's `rss.coordinator.remote.storage.cluster.conf`,
    /// `host,k=v;...` there). Default: empty.
    pub remote_storage_cluster_conf: BTreeMap<String, BTreeMap<String, String>>,
    /// Servers per IP: `PREFER_DIFF` (distinct hosts first), `MUST_DIFF` or `NONE`.
    /// Default: `PREFER_DIFF` (Uniffle's `rss.coordinator.assignment.host.strategy`).
    pub assignment_host_strategy: HostStrategy,
    /// Range layout: `CONTINUOUS` (adjacent partitions per server, sized from the client's
    /// `estimateTaskConcurrency`) or `ROUND`. Default: `CONTINUOUS` (Uniffle's
    /// `rss.coordinator.select.partition.strategy`).
    pub select_partition_strategy: PartitionStrategy,
    /// `accessCluster` checkers in order: `cluster_load`, `quota`, `candidates`. Default: none
    /// (everyone is admitted). Uniffle's `rss.coordinator.access.checkers` defaults to cluster
    /// load + quota; Spillway does not, because the load checker then needs
    /// `shuffle_server_number` (9) servers and would send every app of a single-binary
    /// service back to Spark's sort shuffle.
    pub access_checkers: Vec<AccessCheckerKind>,
    /// `cluster_load`: a server is available with at least this percentage of its memory free;
    /// in `[0, 100]`. Default: 15 (Uniffle's `rss.coordinator.access.loadChecker.memory.percentage`).
    pub access_load_memory_percentage: f64,
    /// `cluster_load`: available servers needed; unset: the count the client asks for, else
    /// `shuffle_server_number`. At least 1. Default: unset (Uniffle's
    /// `rss.coordinator.access.loadChecker.serverNum.threshold`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_load_server_num_threshold: Option<usize>,
    /// `candidates`: file of allowed access ids, one per line; must list one at start-up.
    /// Default: none (Uniffle's `rss.coordinator.access.candidates.path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_candidates_path: Option<PathBuf>,
    /// How often the candidates file is checked for changes. Must be > 0. Default: `120s`
    /// (Uniffle's `rss.coordinator.access.candidates.updateIntervalSec`).
    #[serde(with = "humantime_serde")]
    pub access_candidates_update_interval: Duration,
    /// `quota`: running apps per user when the quota file does not name the user; negative
    /// means unlimited. Default: -1 (Uniffle's `rss.coordinator.quota.default.app.num`).
    pub quota_default_app_num: i64,
    /// `quota`: file of `user = appNum` lines. Default: none (Uniffle's
    /// `rss.coordinator.quota.default.path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota_path: Option<PathBuf>,
    /// The quota file is checked every half of this, as Uniffle does. Must be > 0. Default:
    /// `60s` (Uniffle's `rss.coordinator.quota.update.interval`).
    #[serde(with = "humantime_serde")]
    pub quota_update_interval: Duration,
    /// Serve the dynamic client conf file through `fetchClientConf(V2)`. Default: false
    /// (Uniffle's `rss.coordinator.dynamicClientConf.enabled`).
    pub dynamic_client_conf_enabled: bool,
    /// The dynamic client conf file, in the format `dynamic_client_conf_parser` names.
    /// Required when enabled. Default: none (Uniffle's `rss.coordinator.dynamicClientConf.path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_client_conf_path: Option<PathBuf>,
    /// The format of that file: `LEGACY` (`key value` lines; the
    /// `rss.coordinator.remote.storage.path` and `...cluster.conf` lines set the remote
    /// storage), `YAML` (`rssClientConf` items and `remoteStorageInfos` paths, each with its
    /// own conf) or `MIXED` (read as LEGACY, as Java's MIXED does). A file the parser rejects
    /// keeps the last good conf. Default: `LEGACY` (Uniffle's
    /// `rss.coordinator.dynamicClientConf.parser`).
    pub dynamic_client_conf_parser: ClientConfFormat,
    /// How often the dynamic client conf file is checked for changes. Must be > 0. Default:
    /// `120s` (Uniffle's `rss.coordinator.dynamicClientConf.updateIntervalSec`).
    #[serde(with = "humantime_serde")]
    pub dynamic_client_conf_update_interval: Duration,
    /// File of excluded server ids, one per line, `#` comments: they are not assigned.
    /// Default: none (Uniffle's `rss.coordinator.exclude.nodes.file.path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude_nodes_file_path: Option<PathBuf>,
    /// How often the exclude-nodes file is checked for changes. Must be > 0. Default: `60s`
    /// (Uniffle's `rss.coordinator.exclude.nodes.check.interval.ms`).
    #[serde(with = "humantime_serde")]
    pub exclude_nodes_check_interval: Duration,
    /// How often the dashboard (`/dashboard`) samples each server's memory and throughput
    /// counters; the charts keep the last hour of samples (at most 3600 points). Must be > 0.
    /// Default: `10s`. No Java key: Uniffle's dashboard is a separate process that keeps no
    /// history.
    #[serde(with = "humantime_serde")]
    pub dashboard_sample_interval: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            enabled: false,
            register_self: true,
            server_heartbeat_timeout: Duration::from_secs(30),
            app_heartbeat_timeout: Duration::from_secs(60),
            shuffle_server_number: 9,
            remote_storage_path: None,
            client_conf: BTreeMap::new(),
            remote_storage_cluster_conf: BTreeMap::new(),
            assignment_host_strategy: HostStrategy::PreferDiff,
            select_partition_strategy: PartitionStrategy::Continuous,
            access_checkers: Vec::new(),
            access_load_memory_percentage: 15.0,
            access_load_server_num_threshold: None,
            access_candidates_path: None,
            access_candidates_update_interval: Duration::from_secs(120),
            quota_default_app_num: -1,
            quota_path: None,
            quota_update_interval: Duration::from_secs(60),
            dynamic_client_conf_enabled: false,
            dynamic_client_conf_path: None,
            dynamic_client_conf_parser: ClientConfFormat::Legacy,
            dynamic_client_conf_update_interval: Duration::from_secs(120),
            exclude_nodes_file_path: None,
            exclude_nodes_check_interval: Duration::from_secs(60),
            dashboard_sample_interval: Duration::from_secs(10),
        }
    }
}
