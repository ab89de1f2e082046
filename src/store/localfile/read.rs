//! The read side of the local-file tier: index and byte-range reads of committed data. Readers
//! take no lock of the write path; they see only lengths published by finished appends.

use std::io;
use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;

use super::disk::{is_disk_fault, Disk};
use super::{files, LocalFileTier};
use crate::error::{Error, Result};
use crate::ids::PartitionKey;
use crate::store::{FileTier, IndexRead};

#[async_trait]
impl FileTier for LocalFileTier {
    /// Reads the committed part of the index file (whole records only) from disk; a partition
    /// never written here, or purged, answers an empty `IndexRead`.
    async fn read_index(&self, part: &PartitionKey) -> Result<IndexRead> {
        let Some(file) = self.lookup(part) else {
            return Ok(IndexRead::default());
        };
        let committed = *file.committed.lock();
        if committed.index_len == 0 {
            return Ok(IndexRead::default());
        }
        let len = usize::try_from(committed.index_len).map_err(|_| Error::Internal {
            reason: format!("index of {part} is too large to read"),
        })?;
        let path = file.paths.index.clone();
        let read_path = path.clone();
        let read = tokio::task::spawn_blocking(move || files::read_at(&read_path, 0, len, 0))
            .await
            .map_err(|e| Error::Internal {
                reason: format!("index read task for {part} failed: {e}"),
            })?;
        match read {
            Ok(index) => Ok(IndexRead {
                index,
                data_len: committed.data_len,
                storage_ids: vec![file.disk.index],
            }),
            // Purged between the lookup and the read.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(IndexRead::default()),
            Err(e) => Err(read_failed(&file.disk, path, e)),
        }
    }

    /// Exactly `len` bytes at `offset` within the committed data; past the committed end is
    /// `BadRequest`, an unknown partition is `Internal` ("no data file").
    async fn read_data(&self, part: &PartitionKey, offset: u64, len: u64) -> Result<Bytes> {
        let Some(file) = self.lookup(part) else {
            return Err(Error::Internal {
                reason: format!("no data file for partition {part} on this server"),
            });
        };
        let data_len = file.committed.lock().data_len;
        match offset.checked_add(len) {
            Some(end) if end <= data_len => {}
            _ => {
                return Err(Error::bad_request(format!(
                    "read of partition {part} at offset {offset} length {len} is past the data \
                     file length {data_len}"
                )))
            }
        }
        if len == 0 {
            return Ok(Bytes::new());
        }
        let len = usize::try_from(len)
            .map_err(|_| Error::bad_request(format!("read length {len} is too large")))?;
        let path = file.paths.data.clone();
        let read_path = path.clone();
        // Read-ahead of the next range of the same size, within what is committed.
        let read_ahead = (len as u64).min(data_len - (offset + len as u64));
        let read = tokio::task::spawn_blocking(move || {
            files::read_at(&read_path, offset, len, read_ahead)
        })
        .await
        .map_err(|e| Error::Internal {
            reason: format!("data read task for {part} failed: {e}"),
        })?;
        match read {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::Internal {
                reason: format!("no data file for partition {part} on this server"),
            }),
            Err(e) => Err(read_failed(&file.disk, path, e)),
        }
    }
}

/// Maps a read error, flagging the disk when the error says the disk is failing.
fn read_failed(disk: &Disk, path: PathBuf, e: io::Error) -> Error {
    if is_disk_fault(&e) {
        disk.mark_unhealthy(&format!("read of {} failed: {e}", path.display()));
    }
    Error::io(path, e)
}
