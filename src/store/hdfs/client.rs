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
    clients: parking_lot::Mutex<HashMap<ClientKey, Client>>,
}

impl ClientCache {
    pub fn new(identity: Identity) -> Self {
        ClientCache {
            identity,
            clients: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// The client for `root` on behalf of an app whose user is `app_user`, with the app's conf
    /// items on top of the server's Hadoop conf ([`Identity`] decides whom it writes as).
    /// Building a client reads the conf files and connects nothing yet.
    pub fn get(&self, root: &RemoteRoot, app_user: &str, remote: &RemoteStorage) -> Result<Client> {
        let mut conf = remote.conf.clone();
        conf.sort();
        let app_security = conf
            .iter()
            .any(|(k, v)| k == identity::KEY && !v.trim().eq_ignore_ascii_case("simple"));
        let key = ClientKey {
            fs_url: root.fs_url.clone(),
            user: self.identity.effective_user(app_user, app_security),
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
