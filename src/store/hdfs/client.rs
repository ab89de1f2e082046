//! Which HDFS an app writes to, as whom, and the cached `hdfs_native::Client` for it.
//!
//! An app names its root in `registerShuffle.remoteStorage.path` (`hdfs://nn:8020/rss`, a
//! nameservice `hdfs://ns/rss`, `viewfs://…`, or a bare `/rss` on `fs.defaultFS`) with Hadoop
//! conf items that apply on top of the server's `HADOOP_CONF_DIR`. Clients are cached per
//! (filesystem, user, conf items): an `hdfs_native::Client` holds its NameNode connections, so
//! building one per write would open a connection per spill.

use std::collections::HashMap;

use hdfs_native::{Client, ClientBuilder};

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
    user: String,
    conf: Vec<(String, String)>,
}

/// Kerberos login of the server (from `[hdfs_store]`).
#[derive(Clone, Debug, Default)]
pub struct Kerberos {
    /// Principal to log in as; `None` uses the ticket cache's default principal.
    pub principal: Option<String>,
    /// Keytab for the principal.
    pub keytab: Option<String>,
}

/// `hdfs_native` clients by (filesystem, user, conf).
pub(crate) struct ClientCache {
    kerberos: Kerberos,
    clients: parking_lot::Mutex<HashMap<ClientKey, Client>>,
}

impl ClientCache {
    pub fn new(kerberos: Kerberos) -> Self {
        ClientCache {
            kerberos,
            clients: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// The client for `root` acting as `user` with the app's conf items on top of the
    /// server's Hadoop conf. Building a client reads the conf files and connects nothing yet.
    ///
    /// Identity: with simple auth `user` is the effective user every file is created as (empty:
    /// `HADOOP_USER_NAME`, else the OS user of the server). With Kerberos the server
    /// authenticates as its principal and asks to act as `user` (a proxy user: the NameNode
    /// must allow it through `hadoop.proxyuser.<server>.hosts/groups`); empty `user` writes as
    /// the principal itself.
    pub fn get(&self, root: &RemoteRoot, user: &str, remote: &RemoteStorage) -> Result<Client> {
        let mut conf = remote.conf.clone();
        conf.sort();
        let key = ClientKey {
            fs_url: root.fs_url.clone(),
            user: user.to_owned(),
            conf,
        };
        if let Some(c) = self.clients.lock().get(&key) {
            return Ok(c.clone());
        }
        let mut builder = ClientBuilder::new();
        if let Some(url) = &key.fs_url {
            builder = builder.with_url(url.clone());
        }
        if !key.conf.is_empty() {
            builder = builder.with_config(key.conf.clone());
        }
        if !user.is_empty() {
            builder = builder.with_user(user);
        }
        if let Some(p) = &self.kerberos.principal {
            builder = builder.with_kerberos_principal(p.clone());
        }
        if let Some(k) = &self.kerberos.keytab {
            builder = builder.with_kerberos_keytab(k.clone());
        }
        let client = builder.build().map_err(|e| Error::TierFailed {
            tier: TIER,
            reason: format!(
                "cannot build an HDFS client for {} as {user:?}: {e}",
                key.fs_url.as_deref().unwrap_or("fs.defaultFS")
            ),
        })?;
        Ok(self.clients.lock().entry(key).or_insert(client).clone())
    }
}

#[cfg(test)]
mod tests {
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
