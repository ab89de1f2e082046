//! Reads a generator app's partition from its remote storage (HDFS or an S3 bucket) the way
//! the Uniffle client does, since no server serves its remote files: list the range folder,
//! take every `*.index` of the app's server, and per file pair only whole records that start
//! where the previous one ended and end inside the data file (a torn tail after a failed HDFS
//! append is never read; an object pair is immutable, so it has none).
//!
//! A listing or read that fails (the NameNode down, the store frozen) is an error, so the
//! caller retries the whole read as it does while a server restarts; a folder that does not
//! exist is a partition with nothing on the remote tier.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use futures::TryStreamExt;
use hdfs_native::{Client, ClientBuilder, HdfsError};
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;

use crate::client::ReadBlock;
use spillway::store::object::S3Settings;
use spillway::store::pairs::Pair;

/// The remote storage a share of the soak's apps registers, and how to read it back.
#[derive(Clone)]
pub enum RemoteReader {
    /// The MiniDFS.
    Hdfs(HdfsReader),
    /// A bucket of the soak's S3 server.
    S3(S3Reader),
}

impl RemoteReader {
    /// The `remoteStorage.path` the apps register with.
    pub fn remote_path(&self) -> String {
        match self {
            RemoteReader::Hdfs(r) => r.remote_path(),
            RemoteReader::S3(r) => r.remote_path(),
        }
    }

    /// The blocks of `partition` that the server at `server` wrote there: its `*.index` files
    /// in name order, each with its data file.
    pub async fn partition(
        &self,
        app: &str,
        shuffle: i32,
        partition: usize,
        server: SocketAddr,
    ) -> anyhow::Result<Vec<ReadBlock>> {
        let listed = match self {
            RemoteReader::Hdfs(r) => r.listing(app, shuffle, partition).await?,
            RemoteReader::S3(r) => r.listing(app, shuffle, partition).await?,
        };
        let mut index_paths: Vec<String> = listed
            .into_iter()
            .filter(|p| own_index(p.rsplit('/').next().unwrap_or(p), server))
            .collect();
        index_paths.sort();
        let mut out = Vec::new();
        for index_path in index_paths {
            let data_path = format!("{}.data", index_path.trim_end_matches(".index"));
            let index = self.whole(&index_path).await?;
            let data = self.whole(&data_path).await?;
            blocks_of_pair(&index, &data, &mut out);
        }
        Ok(out)
    }

    async fn whole(&self, path: &str) -> anyhow::Result<Bytes> {
        match self {
            RemoteReader::Hdfs(r) => r.whole(path).await,
            RemoteReader::S3(r) => r.whole(path).await,
        }
    }
}

/// True for an index file of the server at `server`: its id is `<ip>-<grpc port>`, followed
/// by `_` (or by `-<netty port>_` when it serves Netty too), so `…-1999` never claims
/// `…-19990`'s files.
fn own_index(name: &str, server: SocketAddr) -> bool {
    let prefix = format!("{}-{}", server.ip(), server.port());
    name.ends_with(".index")
        && name
            .strip_prefix(&prefix)
            .is_some_and(|rest| rest.starts_with('_') || rest.starts_with('-'))
}

/// Appends the blocks of one pair, with the client's rules (see [`Pair::read`]).
fn blocks_of_pair(index: &[u8], data: &Bytes, out: &mut Vec<ReadBlock>) {
    let pair = Pair::read((), index, data.len() as u64);
    for e in pair.records {
        let start = e.offset as usize;
        out.push(ReadBlock {
            block_id: e.block_id,
            crc: e.crc,
            data: data.slice(start..start + e.length as usize),
        });
    }
}

/// The soak's HDFS: where HDFS apps register, and a client to read them back.
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

    /// The files of the partition's range folder; none when the folder does not exist.
    async fn listing(
        &self,
        app: &str,
        shuffle: i32,
        partition: usize,
    ) -> anyhow::Result<Vec<String>> {
        let dir = format!("{}/{app}/{shuffle}/{partition}-{partition}", self.root);
        match self.client.list_status(&dir, false).await {
            Ok(l) => Ok(l.into_iter().filter(|s| !s.isdir).map(|s| s.path).collect()),
            Err(HdfsError::FileNotFound(_)) => Ok(Vec::new()),
            Err(e) => Err(e).with_context(|| format!("list {dir}")),
        }
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

/// The soak's bucket: where S3 apps register (`s3a://<bucket><root>`), and a client that
/// reads it as the client's s3a does.
#[derive(Clone)]
pub struct S3Reader {
    store: Arc<dyn ObjectStore>,
    bucket: String,
    root: String,
}

impl S3Reader {
    /// A reader of `bucket` with the s3a conf items `conf` (endpoint, keys), under `root`
    /// (no leading slash).
    pub fn new(bucket: &str, root: &str, conf: &[(String, String)]) -> anyhow::Result<S3Reader> {
        let settings = S3Settings::from_conf(bucket, conf)
            .map_err(|e| anyhow::anyhow!("s3a conf of bucket {bucket}: {e}"))?;
        let store = settings
            .builder(bucket)
            .map_err(|e| anyhow::anyhow!("S3 client for bucket {bucket}: {e}"))?
            .build()
            .with_context(|| format!("S3 client for bucket {bucket}"))?;
        Ok(S3Reader {
            store: Arc::new(store),
            bucket: bucket.to_owned(),
            root: root.to_owned(),
        })
    }

    /// The `remoteStorage.path` S3 apps register with.
    pub fn remote_path(&self) -> String {
        format!("s3a://{}/{}", self.bucket, self.root)
    }

    /// The objects of the partition's range folder.
    async fn listing(
        &self,
        app: &str,
        shuffle: i32,
        partition: usize,
    ) -> anyhow::Result<Vec<String>> {
        let folder = format!("{}/{app}/{shuffle}/{partition}-{partition}", self.root);
        let listing: Vec<_> = self
            .store
            .list(Some(&ObjectPath::from(folder.as_str())))
            .try_collect()
            .await
            .with_context(|| format!("list {folder}"))?;
        Ok(listing
            .into_iter()
            .map(|m| m.location.to_string())
            .collect())
    }

    /// A whole object; one deleted between the listing and the read (the app purged) is
    /// empty, as with HDFS.
    async fn whole(&self, key: &str) -> anyhow::Result<Bytes> {
        let got = match self.store.get(&ObjectPath::from(key)).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(Bytes::new()),
            Err(e) => return Err(e).with_context(|| format!("get {key}")),
        };
        got.bytes().await.with_context(|| format!("read {key}"))
    }
}

#[cfg(test)]
use spillway_test_support::minicluster;

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use hdfs_native::WriteOptions;

    use super::*;
    use spillway::store::index::IndexEntry;

    async fn put(client: &Client, path: &str, data: Bytes) {
        let mut w = client
            .create(path, WriteOptions::default())
            .await
            .expect("create");
        w.write_bytes(data).await.expect("write");
        w.close().await.expect("close");
    }

    /// The client's rules on a real HDFS: only the server's own pairs (`…-1999_` or
    /// `…-1999-<netty>_`, never `…-19990_`), whole records up to the first one that ends past
    /// the data file, and no directory means no blocks.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_own_whole_records_like_the_client() {
        let url = tokio::task::spawn_blocking(|| super::minicluster::shared().url.clone())
            .await
            .unwrap();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let root = format!("/soak-read-{nanos}");
        let reader = HdfsReader::new(&url, &root).unwrap();
        assert_eq!(reader.remote_path(), format!("{url}{root}"));
        let server: SocketAddr = "127.0.0.1:1999".parse().unwrap();
        let dir = format!("{root}/app/0/3-3");
        reader.client.mkdirs(&dir, 0o755, true).await.unwrap();
        let blocks: Vec<(i64, Bytes)> = (0..3)
            .map(|i| (100 + i, Bytes::from(vec![i as u8; 10 + i as usize])))
            .collect();
        let pair = |blocks: &[(i64, Bytes)], data_len: usize| {
            let mut index = BytesMut::new();
            let mut data = BytesMut::new();
            for (id, b) in blocks {
                IndexEntry {
                    offset: data.len() as i64,
                    length: b.len() as i32,
                    uncompress_length: b.len() as i32,
                    crc: i64::from(crc32fast::hash(b)),
                    block_id: *id,
                    task_attempt_id: 0,
                }
                .encode(&mut index);
                data.extend_from_slice(b);
            }
            data.truncate(data_len);
            (index.freeze(), data.freeze())
        };
        // Own pair, torn: the third block's bytes are cut short.
        let (index, data) = pair(&blocks, 10 + 11 + 5);
        put(
            &reader.client,
            &format!("{dir}/127.0.0.1-1999_0.index"),
            index,
        )
        .await;
        put(
            &reader.client,
            &format!("{dir}/127.0.0.1-1999_0.data"),
            data,
        )
        .await;
        // Own pair of a server that also serves Netty, whole.
        let (index, data) = pair(&blocks[2..], 12);
        put(
            &reader.client,
            &format!("{dir}/127.0.0.1-1999-2000_1.index"),
            index,
        )
        .await;
        put(
            &reader.client,
            &format!("{dir}/127.0.0.1-1999-2000_1.data"),
            data,
        )
        .await;
        // Another server's pair.
        let (index, data) = pair(&blocks, 33);
        put(
            &reader.client,
            &format!("{dir}/127.0.0.1-19990_0.index"),
            index,
        )
        .await;
        put(
            &reader.client,
            &format!("{dir}/127.0.0.1-19990_0.data"),
            data,
        )
        .await;

        let reader = RemoteReader::Hdfs(reader);
        let got = reader.partition("app", 0, 3, server).await.unwrap();
        let ids: Vec<i64> = got.iter().map(|b| b.block_id).collect();
        assert_eq!(
            ids,
            vec![102, 100, 101],
            "pairs in name order, torn tail left out"
        );
        for b in &got {
            let want = &blocks.iter().find(|(id, _)| *id == b.block_id).unwrap().1;
            assert_eq!(&b.data, want);
            assert_eq!(b.crc, i64::from(crc32fast::hash(want)));
        }
        assert!(reader
            .partition("app", 0, 4, server)
            .await
            .unwrap()
            .is_empty());
        assert!(reader
            .partition("other", 0, 3, server)
            .await
            .unwrap()
            .is_empty());
    }
}
