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

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use hdfs_native::WriteOptions;

    use super::*;

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
        let url =
            tokio::task::spawn_blocking(|| crate::store::hdfs::minicluster::shared().url.clone())
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
