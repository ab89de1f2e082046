//! Which HDFS an app writes to, as whom, and the cached `hdfs_native::Client` for it.
//!
//! An app names its root in `registerShuffle.remoteStorage.path` (`hdfs://nn:8020/rss`, a
//! nameservice `hdfs://ns/rss`, `viewfs://…`, or a bare `/rss` on `fs.defaultFS`) with Hadoop
//! conf items that apply on top of the server's `HADOOP_CONF_DIR`. Clients are cached per
//! (filesystem, user, conf items): an `hdfs_native::Client` holds its NameNode connections, so
//! building one per write would open a connection per spill.

use std::collections::HashMap;

use hdfs_native::{Client, ClientBuilder};

use super::identity::{self, Identity};
use crate::error::{Error, Result};
use crate::store::RemoteStorage;

/// The tier name used in errors.
pub(crate) const TIER: &str = "hdfs";

/// An app's HDFS location, parsed once at registration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RemoteRoot {
    /// `scheme://authority`, or `None` for a bare path on `fs.defaultFS`.
    pub fs_url: Option<String>,
    /// Absolute path of the root inside that filesystem, without a trailing `/` (`""` for `/`).
    pub root: String,
}

impl RemoteRoot {
    /// Parses `remoteStorage.path`. Only HDFS-protocol filesystems (`hdfs`, `viewfs`) are
    /// accepted: anything else (`s3a://`, `file://`) is not something this tier can write.
    pub fn parse(path: &str) -> Result<RemoteRoot> {
        let bad = |why: &str| Error::TierFailed {
            tier: TIER,
            reason: format!("remote storage path {path:?}: {why}"),
        };
        let (fs_url, rest) = match path.split_once("://") {
            Some((scheme, rest)) => {
                if !matches!(scheme, "hdfs" | "viewfs") {
                    return Err(bad("only hdfs:// and viewfs:// are supported"));
                }
                let (authority, rest) = match rest.find('/') {
                    Some(i) => rest.split_at(i),
                    None => (rest, ""),
                };
                if authority.is_empty() {
                    return Err(bad("no host or nameservice"));
                }
                (Some(format!("{scheme}://{authority}")), rest)
            }
            None if path.starts_with('/') => (None, path),
            None => return Err(bad("expected hdfs://host[:port]/path or an absolute path")),
        };
        let root = rest.trim_end_matches('/').to_owned();
        if root.split('/').any(|c| c == "." || c == "..") {
            return Err(bad("must not contain . or .. components"));
        }
        Ok(RemoteRoot { fs_url, root })
    }
}

/// Everything that makes two apps need different clients.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ClientKey {
    fs_url: Option<String>,
    /// The effective user asked of HDFS; `None`: the server's own identity.
    user: Option<String>,
    conf: Vec<(String, String)>,
}

/// `hdfs_native` clients by (filesystem, effective user, conf).
pub(crate) struct ClientCache {
    identity: Identity,
    /// The server's own conf items (`hdfs_store.hadoop_conf`), under every app's.
    server_conf: Vec<(String, String)>,
    clients: parking_lot::Mutex<HashMap<ClientKey, Client>>,
}

impl ClientCache {
    pub fn new(identity: Identity, server_conf: Vec<(String, String)>) -> Self {
        ClientCache {
            identity,
            server_conf,
            clients: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// Why HDFS closed a connection on which the server acted for `app_user`, if the server's
    /// own identity gets through: then authentication worked and the NameNode refused the
    /// impersonation, which it says only in a connection-level error the HDFS client drops
    /// (the caller sees "RPC listener disconnected"). One `getFileInfo("/")` as the server.
    pub async fn explain_refused_proxy(
        &self,
        root: &RemoteRoot,
        app_user: &str,
        remote: &RemoteStorage,
    ) -> Option<String> {
        if !self.identity.security {
            // Without security nothing is impersonated: the client just names its user.
            return None;
        }
        let acting = self.key(root, app_user, remote).user?;
        let mut own = remote.clone();
        let server = self.get_as(root, None, &mut own.conf).ok()?;
        let probe =
            tokio::time::timeout(std::time::Duration::from_secs(5), server.get_file_info("/"));
        matches!(probe.await, Ok(Ok(_))).then(|| {
            format!(
                "HDFS authenticated the server but closed the connection when it asked to act as \
                 {acting}: the NameNode does not let the server's principal impersonate {acting} \
                 (hadoop.proxyuser.<principal short name>.hosts/.groups/.users on the NameNode)"
            )
        })
    }

    /// The client for `root` on behalf of an app whose user is `app_user`, with the app's conf
    /// items on top of the server's Hadoop conf ([`Identity`] decides whom it writes as).
    /// Building a client reads the conf files and connects nothing yet.
    pub fn get(&self, root: &RemoteRoot, app_user: &str, remote: &RemoteStorage) -> Result<Client> {
        self.build(self.key(root, app_user, remote))
    }

    fn key(&self, root: &RemoteRoot, app_user: &str, remote: &RemoteStorage) -> ClientKey {
        let mut conf = remote.conf.clone();
        conf.sort();
        let app_security = conf
            .iter()
            .any(|(k, v)| k == identity::KEY && !v.trim().eq_ignore_ascii_case("simple"));
        ClientKey {
            fs_url: root.fs_url.clone(),
            user: self.identity.effective_user(app_user, app_security),
            conf,
        }
    }

    /// The client with the server's own identity (`user` None) or as `user`.
    fn get_as(
        &self,
        root: &RemoteRoot,
        user: Option<String>,
        conf: &mut Vec<(String, String)>,
    ) -> Result<Client> {
        conf.sort();
        self.build(ClientKey {
            fs_url: root.fs_url.clone(),
            user,
            conf: std::mem::take(conf),
        })
    }

    fn build(&self, key: ClientKey) -> Result<Client> {
        if let Some(c) = self.clients.lock().get(&key) {
            return Ok(c.clone());
        }
        let mut builder = ClientBuilder::new();
        if let Some(url) = &key.fs_url {
            builder = builder.with_url(url.clone());
        }
        let conf = merged_conf(&self.server_conf, &key.conf);
        let mut conf: Vec<(String, String)> = conf.into_iter().collect();
        if self.identity.security {
            // The server's security wins over the app's conf items (clients send theirs, often
            // `simple`): a configured principal means Kerberos whatever HADOOP_CONF_DIR says,
            // as the Java server's process-wide login does.
            conf.retain(|(k, _)| k != identity::KEY);
            conf.push((identity::KEY.to_owned(), "kerberos".to_owned()));
        }
        if !conf.is_empty() {
            builder = builder.with_config(conf);
        }
        if let Some(user) = &key.user {
            builder = builder.with_user(user);
        }
        if let Some(p) = &self.identity.principal {
            builder = builder.with_kerberos_principal(p.clone());
        }
        if let Some(k) = &self.identity.keytab {
            builder = builder.with_kerberos_keytab(k.clone());
        }
        let client = builder.build().map_err(|e| Error::TierFailed {
            tier: TIER,
            reason: format!(
                "cannot build an HDFS client for {} as {}: {e}",
                key.fs_url.as_deref().unwrap_or("fs.defaultFS"),
                key.user.as_deref().unwrap_or("the server's own identity")
            ),
        })?;
        Ok(self.clients.lock().entry(key).or_insert(client).clone())
    }
}

/// The conf a client is built with: the server's items, then the app's on top (an app's item
/// replaces the server's of the same key, as the Java server copies its Hadoop conf and sets
/// the app's remote-storage items on it).
fn merged_conf(
    server: &[(String, String)],
    app: &[(String, String)],
) -> std::collections::BTreeMap<String, String> {
    server.iter().chain(app).cloned().collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn app_conf_items_win_over_the_servers() {
        let kv = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        let merged = super::merged_conf(
            &[
                kv("fs.defaultFS", "hdfs://server"),
                kv("dfs.replication", "2"),
            ],
            &[kv("fs.defaultFS", "hdfs://app")],
        );
        assert_eq!(merged["fs.defaultFS"], "hdfs://app");
        assert_eq!(merged["dfs.replication"], "2");
    }

    use super::*;

    #[test]
    fn parses_remote_paths() {
        let r = RemoteRoot::parse("hdfs://127.0.0.1:9000/rss/x/").unwrap();
        assert_eq!(r.fs_url.as_deref(), Some("hdfs://127.0.0.1:9000"));
        assert_eq!(r.root, "/rss/x");
        let r = RemoteRoot::parse("hdfs://ns").unwrap();
        assert_eq!(
            (r.fs_url.as_deref(), r.root.as_str()),
            (Some("hdfs://ns"), "")
        );
        let r = RemoteRoot::parse("/rss").unwrap();
        assert_eq!((r.fs_url, r.root.as_str()), (None, "/rss"));
        for bad in [
            "s3a://b/rss",
            "file:///tmp",
            "hdfs:///rss",
            "rss",
            "hdfs://nn/a/../b",
        ] {
            assert!(RemoteRoot::parse(bad).is_err(), "{bad} must be refused");
        }
    }
}
