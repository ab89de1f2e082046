//! The `[coordinator]` settings' own types: the strategies and checkers an operator names,
//! and Java's cluster-conf format. They live with the config (the bottom layer), and the
//! coordinator uses them from here.

use std::collections::BTreeMap;

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
