//! Remote storage selection for `fetchRemoteStorage`, as the Java 0.10 coordinator's
//! `ApplicationManager` with `AppBalanceSelectStorageStrategy` (`APP_BALANCE`, Java's
//! default): an app gets the configured path with the fewest apps, keeps it for its life (all of
//! its shuffle data lands under one path), and its path's count drops when it expires.
//!
//! Each path carries the Hadoop conf items of its cluster, the cluster being the path's host
//! (`hdfs://<host>/...`) as a key of the per-cluster conf.
//!
//! Java's `IO_SAMPLE` strategy and `APP_BALANCE`'s health probe both time writes of a test file
//! to every HDFS path from the coordinator; Spillway's coordinator has no HDFS client in its
//! path, so every configured path counts as healthy and only the app counts decide.

use std::collections::{BTreeMap, HashMap};

/// A path and the conf items its apps get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteStorage {
    /// E.g. `hdfs://ns1/rss`.
    pub path: String,
    /// Hadoop conf items of the path's cluster, in key order.
    pub conf: BTreeMap<String, String>,
}

/// The configured paths, their app counts, and each app's choice.
#[derive(Debug, Default)]
pub(super) struct RemoteStorages {
    /// Paths in configuration order (ties in app count go to the earlier one).
    available: Vec<RemoteStorage>,
    /// Apps per path; kept for a path removed while apps still use it.
    counts: HashMap<String, u64>,
    /// The path each app was given.
    apps: HashMap<String, RemoteStorage>,
}

/// The host part of `path` (Java's `URI.getHost()`), the key into the per-cluster conf.
pub fn storage_host(path: &str) -> Option<&str> {
    let rest = path.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host.split(':').next()?;
    (!host.is_empty()).then_some(host)
}

impl RemoteStorages {
    /// Sets the paths (`paths` as Java's comma-separated list) and their clusters' conf, as
    /// `refreshRemoteStorage` does on a conf change. Apps keep the path they were given.
    pub(super) fn refresh(
        &mut self,
        paths: &str,
        cluster_conf: &BTreeMap<String, BTreeMap<String, String>>,
    ) {
        let mut available: Vec<RemoteStorage> = Vec::new();
        for path in paths.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if available.iter().any(|s| s.path == path) {
                continue;
            }
            let conf = storage_host(path)
                .and_then(|host| cluster_conf.get(host))
                .cloned()
                .unwrap_or_default();
            available.push(RemoteStorage {
                path: path.to_owned(),
                conf,
            });
        }
        self.set(available);
    }

    /// Sets the paths, each with its own conf (the YAML dynamic client conf's
    /// `remoteStorageInfos`). Apps keep the path they were given.
    pub(super) fn set(&mut self, available: Vec<RemoteStorage>) {
        self.counts
            .retain(|path, n| *n > 0 || available.iter().any(|s| &s.path == path));
        for storage in &available {
            self.counts.entry(storage.path.clone()).or_insert(0);
        }
        if self.available != available {
            tracing::info!(paths = ?available.iter().map(|s| &s.path).collect::<Vec<_>>(),
                "coordinator: remote storage paths refreshed");
        }
        self.available = available;
    }

    /// `pickRemoteStorage`: the app's path if it has one, else the available path with the
    /// fewest apps. `None` when no path is configured.
    pub(super) fn pick(&mut self, app_id: &str) -> Option<RemoteStorage> {
        if let Some(storage) = self.apps.get(app_id) {
            return Some(storage.clone());
        }
        let storage = self
            .available
            .iter()
            .min_by_key(|s| self.counts.get(&s.path).copied().unwrap_or(0))?
            .clone();
        *self.counts.entry(storage.path.clone()).or_insert(0) += 1;
        self.apps.insert(app_id.to_owned(), storage.clone());
        Some(storage)
    }

    /// The path `app_id` was given, if it asked.
    pub(super) fn of(&self, app_id: &str) -> Option<&str> {
        self.apps.get(app_id).map(|s| s.path.as_str())
    }

    /// An app expired: its path has one app fewer.
    pub(super) fn release(&mut self, app_id: &str) {
        let Some(storage) = self.apps.remove(app_id) else {
            return;
        };
        if let Some(n) = self.counts.get_mut(&storage.path) {
            *n = n.saturating_sub(1);
            if *n == 0 && !self.available.iter().any(|s| s.path == storage.path) {
                self.counts.remove(&storage.path);
            }
        }
    }

    /// Apps per path, for tests and operators.
    pub(super) fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.iter().map(|(p, n)| (p.clone(), *n)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_paths() {
        assert_eq!(storage_host("hdfs://ns1/rss"), Some("ns1"));
        assert_eq!(storage_host("hdfs://nn:8020/a/b"), Some("nn"));
        assert_eq!(storage_host("s3a://user@bucket/x"), Some("bucket"));
        assert_eq!(storage_host("/local/path"), None);
    }

    #[test]
    fn apps_balance_over_paths_and_keep_theirs() {
        let conf = BTreeMap::from([(
            "ns2".to_string(),
            BTreeMap::from([("dfs.replication".to_string(), "2".to_string())]),
        )]);
        let mut s = RemoteStorages::default();
        assert!(s.pick("app0").is_none());
        s.refresh("hdfs://ns1/rss, hdfs://ns2/rss", &conf);
        let a = s.pick("a").unwrap();
        let b = s.pick("b").unwrap();
        let c = s.pick("c").unwrap();
        assert_eq!(a.path, "hdfs://ns1/rss");
        assert!(a.conf.is_empty());
        assert_eq!(b.path, "hdfs://ns2/rss");
        assert_eq!(b.conf["dfs.replication"], "2");
        assert_eq!(c.path, "hdfs://ns1/rss");
        assert_eq!(s.pick("b").unwrap(), b, "an app keeps its path");
        s.release("a");
        s.release("c");
        assert_eq!(s.pick("d").unwrap().path, "hdfs://ns1/rss");

        // ns1 removed while d uses it: new apps go to ns2, d keeps ns1 until it expires.
        s.refresh("hdfs://ns2/rss", &conf);
        assert_eq!(s.pick("e").unwrap().path, "hdfs://ns2/rss");
        assert_eq!(s.pick("d").unwrap().path, "hdfs://ns1/rss");
        assert_eq!(s.counts()["hdfs://ns1/rss"], 1);
        s.release("d");
        assert!(!s.counts().contains_key("hdfs://ns1/rss"));
    }
}
