//! Reading and deleting this server's file pairs in a range directory, with the rules the
//! Uniffle client applies when it reads them directly.

use bytes::Bytes;
use hdfs_native::{Client, HdfsError};

use super::client::TIER;
use crate::error::{Error, Result};
use crate::store::pairs::{is_own, Pair, Pairs};
use crate::store::IndexRead;

/// The pairs of one partition written by this server, as one logical file.
#[derive(Default)]
pub(super) struct Layout {
    client: Option<Client>,
    pairs: Pairs<String>,
}

fn err(what: &str, path: &str, e: HdfsError) -> Error {
    Error::TierFailed {
        tier: TIER,
        reason: format!("{what} {path}: {e}"),
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl Layout {
    /// Lists the range directory and reads every own index with the client's rules
    /// ([`Pair::read`]).
    pub async fn load(client: Client, dir: &str, prefix: &str) -> Result<Layout> {
        let listing = match client.list_status(dir, false).await {
            Ok(l) => l,
            Err(HdfsError::FileNotFound(_)) => return Ok(Layout::default()),
            Err(e) => return Err(err("list", dir, e)),
        };
        let mut index_paths: Vec<String> = listing
            .into_iter()
            .filter(|s| !s.isdir)
            .map(|s| s.path)
            .filter(|p| {
                let name = file_name(p);
                is_own(name, prefix) && name.ends_with(".index")
            })
            .collect();
        index_paths.sort();
        let mut pairs = Vec::with_capacity(index_paths.len());
        for index_path in index_paths {
            let data_path = format!("{}.data", index_path.trim_end_matches(".index"));
            let raw = read_whole(&client, &index_path).await?;
            let data_len = match client.get_file_info(&data_path).await {
                Ok(s) => s.length as u64,
                Err(HdfsError::FileNotFound(_)) => 0,
                Err(e) => return Err(err("stat", &data_path, e)),
            };
            pairs.push(Pair::read(data_path, &raw, data_len));
        }
        Ok(Layout {
            client: Some(client),
            pairs: Pairs { pairs },
        })
    }

    /// The records of all pairs, rebased onto the logical file.
    pub fn index(&self) -> IndexRead {
        self.pairs.index()
    }

    /// Exactly `[offset, offset + len)` of the logical file; past its end is an error.
    pub async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let client = self.client.as_ref();
        self.pairs
            .read(offset, len, "HDFS", |path, start, take| async move {
                let Some(client) = client else {
                    return Err(Error::Internal {
                        reason: "HDFS layout without a client".to_owned(),
                    });
                };
                let reader = client
                    .read(&path)
                    .await
                    .map_err(|e| err("open", &path, e))?;
                // The extent is within the file's length, so the range is too (read_range
                // panics past the end).
                if (start + take) as usize > reader.file_length() {
                    return Err(Error::Internal {
                        reason: format!("{path} shrank while being read"),
                    });
                }
                reader
                    .read_range(start as usize, take as usize)
                    .await
                    .map_err(|e| err("read", &path, e))
            })
            .await
    }
}

async fn read_whole(client: &Client, path: &str) -> Result<Bytes> {
    let reader = client.read(path).await.map_err(|e| err("open", path, e))?;
    reader
        .read_range(0, reader.file_length())
        .await
        .map_err(|e| err("read", path, e))
}

/// Deletes this server's `.data`/`.index` files under `dir` (recursively), then every
/// directory from the deepest up to `app_dir` that is left empty; returns the bytes deleted.
/// Directories go with non-recursive deletes, which the NameNode refuses when anything is
/// left in them (another server's files, a racing append), so only empty ones disappear.
pub(super) async fn delete_own_files(
    client: &Client,
    dir: &str,
    app_dir: &str,
    prefix: &str,
) -> Result<u64> {
    let listing = match client.list_status(dir, true).await {
        Ok(l) => l,
        Err(HdfsError::FileNotFound(_)) => return Ok(0),
        Err(e) => return Err(err("list", dir, e)),
    };
    let mut freed = 0u64;
    let mut dirs = vec![dir.to_owned()];
    for s in listing {
        if s.isdir {
            dirs.push(s.path);
            continue;
        }
        let name = file_name(&s.path);
        if is_own(name, prefix) && (name.ends_with(".data") || name.ends_with(".index")) {
            match client.delete(&s.path, false).await {
                Ok(_) | Err(HdfsError::FileNotFound(_)) => freed += s.length as u64,
                Err(e) => return Err(err("delete", &s.path, e)),
            }
        }
    }
    // Parents of the scope up to the app directory may be empty now too.
    let mut parent = dir.to_owned();
    while parent.len() > app_dir.len() {
        match parent.rsplit_once('/') {
            Some((p, _)) => parent = p.to_owned(),
            None => break,
        }
        dirs.push(parent.clone());
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    dirs.dedup();
    for d in dirs {
        // Refused (not empty) or already gone: both fine.
        let _ = client.delete(&d, false).await;
    }
    Ok(freed)
}
