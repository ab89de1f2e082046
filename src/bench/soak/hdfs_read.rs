//! Reads a generator app's partition from HDFS the way the Uniffle client does, since no
//! server serves its HDFS files: list the range directory, take every `*.index` of the app's
//! server, and per file pair only whole records that start where the previous one ended and
//! end inside the data file (a torn tail after a failed append is never read).
//!
//! A listing or read that fails (the NameNode down) is an error, so the caller retries the
//! whole read as it does while a server restarts; a directory that does not exist is a
//! partition with nothing on HDFS.

use std::net::SocketAddr;

use anyhow::Context;
use bytes::Bytes;
use hdfs_native::{Client, ClientBuilder, HdfsError};

use crate::bench::client::ReadBlock;
use crate::store::index::IndexEntry;

/// The soak's remote storage: where HDFS apps register, and a client to read them back.
#[derive(Clone)]
pub struct HdfsReader {
    client: Client,
    url: String,
    root: String,
}

impl HdfsReader {
    /// A reader of the apps registered with [`HdfsReader::remote_path`] on `url`.
    pub fn new(url: &str, root: &str) -> anyhow::Result<HdfsReader> {
        let client = ClientBuilder::new()
            .with_url(url)
            .build()
            .with_context(|| format!("HDFS client for {url}"))?;
        Ok(HdfsReader {
            client,
            url: url.to_owned(),
            root: root.to_owned(),
        })
    }

    /// The `remoteStorage.path` HDFS apps register with (a full URL, as Spark jobs give it).
    pub fn remote_path(&self) -> String {
        format!("{}{}", self.url, self.root)
    }

    /// The blocks of `partition` that the server at `server` wrote to HDFS. Its files start
    /// with its server id, `<ip>-<grpc port>` followed by `_` (or `-<netty port>_` when it
    /// serves Netty too).
    pub async fn partition(
        &self,
        app: &str,
        shuffle: i32,
        partition: usize,
        server: SocketAddr,
    ) -> anyhow::Result<Vec<ReadBlock>> {
        let dir = format!("{}/{app}/{shuffle}/{partition}-{partition}", self.root);
        let prefix = format!("{}-{}", server.ip(), server.port());
        let listing = match self.client.list_status(&dir, false).await {
            Ok(l) => l,
            Err(HdfsError::FileNotFound(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("list {dir}")),
        };
        let mut index_paths: Vec<String> = listing
            .into_iter()
            .filter(|s| !s.isdir)
            .map(|s| s.path)
            .filter(|p| {
                let name = p.rsplit('/').next().unwrap_or(p);
                name.ends_with(".index")
                    && name
                        .strip_prefix(&prefix)
                        .is_some_and(|rest| rest.starts_with('_') || rest.starts_with('-'))
            })
            .collect();
        index_paths.sort();
        let mut out = Vec::new();
        for index_path in index_paths {
            let data_path = format!("{}.data", index_path.trim_end_matches(".index"));
            let index = self.whole(&index_path).await?;
            let data = self.whole(&data_path).await?;
            let mut extent = 0usize;
            for e in IndexEntry::decode_all(&index) {
                let Ok(len) = usize::try_from(e.length) else {
                    break;
                };
                if e.offset != extent as i64 || extent + len > data.len() {
                    break;
                }
                out.push(ReadBlock {
                    block_id: e.block_id,
                    crc: e.crc,
                    data: data.slice(extent..extent + len),
                });
                extent += len;
            }
        }
        Ok(out)
    }

    /// A whole file; one that vanished between the listing and the read (the app purged) is
    /// empty, and the blocks it held show as lost only if nothing else returned them.
    async fn whole(&self, path: &str) -> anyhow::Result<Bytes> {
        let r = match self.client.read(path).await {
            Ok(r) => r,
            Err(HdfsError::FileNotFound(_)) => return Ok(Bytes::new()),
            Err(e) => return Err(e).with_context(|| format!("open {path}")),
        };
        r.read_range(0, r.file_length())
            .await
            .with_context(|| format!("read {path}"))
    }
}
