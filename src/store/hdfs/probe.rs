//! The registration check of an app's HDFS path (see `store::admission`): the calls a flush
//! makes, as the user it makes them as, answered at `registerShuffle`.

use std::sync::Arc;
use std::time::Duration;

use hdfs_native::{HdfsError, WriteOptions};

use super::client::RemoteRoot;
use super::conf_files;
use super::errors::Failure;
use super::slots::DIR_PERMISSION;
use super::HdfsTier;
use crate::error::Error;
use crate::store::admission::{Outcome, Refusal};
use crate::store::RemoteStorage;

/// How long the registration probe may take before its answer counts as transient (the
/// registration then goes ahead, as it did before there was a check).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

impl HdfsTier {
    /// The registration check of a path: the root is created if missing (as the first flush
    /// would), then an empty file `<root>/.spillway-probe-<serverId>` is created and deleted
    /// as the user the app's files are written as. That is the NameNode's answer to exactly
    /// the calls a flush makes, with no block written (an empty file's close does not wait
    /// for a block report). Readers never see the file: they list `<root>/<app>/…` only.
    pub async fn probe(&self, user: &str, remote: &RemoteStorage) -> Outcome {
        let refused = |answer: String, fix: String| {
            Outcome::Refused(Arc::new(Refusal {
                path: remote.path.clone(),
                answer,
                fix,
            }))
        };
        let root = match RemoteRoot::parse(&remote.path) {
            Ok(r) => r,
            Err(e) => return refused(e.to_string(), "correct the remote storage path".to_owned()),
        };
        if let Some(why) = self.unresolvable(&root, remote).await {
            return refused(
                why,
                "name a host that resolves, or define the nameservice (dfs.nameservices, \
                 dfs.ha.namenodes.<ns>, dfs.namenode.rpc-address.<ns>.<nn>) in hdfs-site.xml \
                 under HADOOP_CONF_DIR or in the app's remote storage conf"
                    .to_owned(),
            );
        }
        let client =
            match self.clients.get(&root, user, remote) {
                Ok(c) => c,
                Err(e) => return refused(
                    e.to_string(),
                    "correct the Hadoop settings of the path (HADOOP_CONF_DIR, the app's remote \
                     storage conf)"
                        .to_owned(),
                ),
            };
        let dir = if root.root.is_empty() {
            "/"
        } else {
            root.root.as_str()
        };
        let file = format!("{}/.spillway-probe-{}", root.root, self.opts.file_prefix);
        let calls = async {
            client
                .mkdirs(dir, DIR_PERMISSION, true)
                .await
                .map_err(|e| Failure::new("mkdirs", dir, e))?;
            let opened = match client.create(&file, WriteOptions::default()).await {
                Err(HdfsError::AlreadyExists(_)) => {
                    // Left by a probe that was cut short.
                    let _ = client.delete(&file, false).await;
                    client.create(&file, WriteOptions::default()).await
                }
                other => other,
            };
            let mut w = opened.map_err(|e| Failure::new("create", &file, e))?;
            w.close()
                .await
                .map_err(|e| Failure::new("close", &file, e))?;
            client
                .delete(&file, false)
                .await
                .map_err(|e| Failure::new("delete", &file, e))?;
            Ok::<(), Failure>(())
        };
        match tokio::time::timeout(PROBE_TIMEOUT, calls).await {
            Ok(Ok(())) => Outcome::Usable,
            Ok(Err(f)) if f.connection_dropped() => {
                match self
                    .clients
                    .explain_refused_proxy(&root, user, remote)
                    .await
                {
                    Some(why) => refused(
                        why,
                        "let the server's principal impersonate the app's user \
                         (hadoop.proxyuser.<server user>.hosts/.groups on the NameNode)"
                            .to_owned(),
                    ),
                    None => Outcome::Transient(f.into_error().to_string()),
                }
            }
            Ok(Err(f)) => match f.into_error() {
                Error::StorageRefused { answer, fix, .. } => refused(answer, fix),
                e => Outcome::Transient(e.to_string()),
            },
            Err(_) => Outcome::Transient(format!(
                "no answer from HDFS within {PROBE_TIMEOUT:?} while checking {}",
                remote.path
            )),
        }
    }

    /// Why the NameNode host of `root` can never be reached: its name does not resolve and
    /// no HA nameservice of that name is configured (the conf directory's files, the
    /// server's items, the app's). The HDFS client would retry such a connection until the
    /// probe's time runs out, which reads as "unreachable, try later"; a name that does not
    /// exist is not a passing state. A DNS outage ("temporary failure") is left to the probe.
    async fn unresolvable(&self, root: &RemoteRoot, remote: &RemoteStorage) -> Option<String> {
        let authority = root.fs_url.as_deref()?.strip_prefix("hdfs://")?;
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().ok()?),
            None => (authority, 8020),
        };
        let nameservice = format!("dfs.ha.namenodes.{host}");
        let files = conf_files::conf_dir()
            .and_then(|(dir, _)| conf_files::read(&dir).ok())
            .unwrap_or_default();
        if files
            .iter()
            .chain(self.opts.hadoop_conf.iter())
            .chain(remote.conf.iter())
            .any(|(k, _)| *k == nameservice)
        {
            return None;
        }
        match tokio::net::lookup_host((host, port)).await {
            Err(e) if e.to_string().contains("not known") => Some(format!(
                "the NameNode host {host} does not resolve ({e}) and no nameservice {host} is configured"
            )),
            _ => None,
        }
    }
}
