//! The read side of the local-file tier: index and byte-range reads of committed data. Readers
//! take no lock of the write path; they see only lengths published by finished appends.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};

use super::disk::{is_disk_fault, Disk};
use super::{files, LocalFileTier, Part, PartState};
use crate::error::{Error, Result};
use crate::ids::PartitionKey;
use crate::store::index;
use crate::store::{DataRead, FileRange, FileTier, IndexRead, Span};

#[async_trait]
impl FileTier for LocalFileTier {
    /// The committed index records of every part, as one logical index: records of part n
    /// have their offsets shifted by the data length of parts 0..n, so the client's ranges
    /// are offsets into the concatenation of the parts' data files. A partition never written
    /// here, or purged, answers an empty `IndexRead`; a part whose files vanished is left out
    /// (its blocks are lost; the client reports them missing rather than reading garbage).
    async fn read_index(&self, part: &PartitionKey) -> Result<IndexRead> {
        let Some(file) = self.lookup(part) else {
            return Ok(IndexRead::default());
        };
        let parts = file.snapshot();
        let Some((last, last_state)) = parts.last() else {
            return Ok(IndexRead::default());
        };
        let data_len = last.base + last_state.committed.data_len;
        let wanted: Vec<(Arc<Part>, u64)> = parts
            .iter()
            .filter(|(_, st)| !st.lost && st.committed.index_len > 0)
            .map(|(p, st)| (Arc::clone(p), st.committed.index_len))
            .collect();
        if wanted.is_empty() {
            return Ok(IndexRead::default());
        }
        let storage_ids = vec![wanted[0].0.disk.index];
        let key = part.clone();
        let read = crate::runtime::blocking(move || read_parts_index(&key, wanted))
            .await
            .map_err(|e| Error::Internal {
                reason: format!("index read task for {part} failed: {e}"),
            })??;
        if read.is_empty() {
            // Purged between the lookup and the read.
            return Ok(IndexRead::default());
        }
        Ok(IndexRead {
            index: read,
            data_len,
            storage_ids,
        })
    }

    /// Exactly `len` bytes at logical `offset` within the committed data of the parts; past
    /// the committed end is `BadRequest`, an unknown partition is `Internal` ("no data file").
    async fn read_data(&self, part: &PartitionKey, span: Span) -> Result<Bytes> {
        self.on_pieces(part, span, "read", read_pieces).await
    }

    /// The range of [`FileTier::read_data`] as open files: the transport sends them with
    /// sendfile, so the bytes go from the page cache to the socket without a user-space copy
    /// or a read buffer. Opening happens on a blocking thread, as reads do, so a hung disk
    /// stalls that thread and not the runtime.
    async fn read_data_ranges(&self, part: &PartitionKey, span: Span) -> Result<DataRead> {
        self.on_pieces(part, span, "open", open_pieces)
            .await
            .map(DataRead::Files)
    }
}

/// One part's share of a logical data range.
struct Piece {
    part: Arc<Part>,
    /// Offset within the part's data file.
    from: u64,
    len: usize,
    /// Bytes after the piece worth announcing to the kernel (the next range of a sequential
    /// reader), within what is committed.
    ahead: u64,
}

impl LocalFileTier {
    /// Splits logical `[offset, offset + len)` into the parts it overlaps. Past the committed
    /// end is `BadRequest`, an unknown partition or a vanished part `Internal`; an empty range
    /// plans no piece.
    /// Runs `task` over the pieces of `span` on a blocking thread (the file calls block; a
    /// hung disk stalls that thread, not the runtime). An empty span answers `T::default()`
    /// without one. `what` names the task in an error.
    async fn on_pieces<T: Default + Send + 'static>(
        &self,
        part: &PartitionKey,
        span: Span,
        what: &str,
        task: fn(&PartitionKey, Vec<Piece>) -> Result<T>,
    ) -> Result<T> {
        let pieces = self.plan_read(part, span)?;
        if pieces.is_empty() {
            return Ok(T::default());
        }
        let key = part.clone();
        crate::runtime::blocking(move || task(&key, pieces))
            .await
            .map_err(|e| Error::Internal {
                reason: format!("data {what} task for {part} failed: {e}"),
            })?
    }

    fn plan_read(&self, part: &PartitionKey, span: Span) -> Result<Vec<Piece>> {
        let Span { offset, len } = span;
        let Some(file) = self.lookup(part) else {
            return Err(Error::Internal {
                reason: format!("no data file for partition {part} on this server"),
            });
        };
        let parts = file.snapshot();
        let data_len = file_end(&parts);
        let end = match offset.checked_add(len) {
            Some(end) if end <= data_len => end,
            _ => {
                return Err(Error::bad_request(format!(
                    "read of partition {part} at offset {offset} length {len} is past the data \
                     file length {data_len}"
                )))
            }
        };
        if len == 0 {
            return Ok(Vec::new());
        }
        usize::try_from(len)
            .map_err(|_| Error::bad_request(format!("read length {len} is too large")))?;
        let mut pieces = Vec::new();
        for (p, st) in &parts {
            let (p_start, p_end) = (p.base, p.base + st.committed.data_len);
            if p_end <= offset || p_start >= end {
                continue;
            }
            if st.lost {
                return Err(Error::Internal {
                    reason: format!(
                        "partition {part}: bytes {offset}..{end} were in a file pair on {} that \
                         vanished",
                        p.disk.root.display()
                    ),
                });
            }
            let from = offset.max(p_start) - p_start;
            let to = end.min(p_end) - p_start;
            pieces.push(Piece {
                part: Arc::clone(p),
                from,
                len: (to - from) as usize,
                ahead: (to - from).min(st.committed.data_len - to),
            });
        }
        Ok(pieces)
    }
}

/// Logical end of a partition's data.
fn file_end(parts: &[(Arc<Part>, PartState)]) -> u64 {
    parts
        .last()
        .map_or(0, |(p, st)| p.base + st.committed.data_len)
}

/// Reads each part's committed index and joins them with offsets made logical. A missing
/// index file of the only part means the partition was purged (empty answer); of one part
/// among several, the part is skipped.
fn read_parts_index(part: &PartitionKey, wanted: Vec<(Arc<Part>, u64)>) -> Result<Bytes> {
    let single = wanted.len() == 1 && wanted[0].0.base == 0;
    let mut joined = BytesMut::new();
    for (p, index_len) in wanted {
        let len = usize::try_from(index_len).map_err(|_| Error::Internal {
            reason: format!("index of {part} is too large to read"),
        })?;
        let bytes = match files::read_at(&p.paths.index, 0, len, 0) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !single {
                    tracing::warn!(partition = %part, path = %p.paths.index.display(), "an index file of the partition is missing; its blocks are left out");
                }
                continue;
            }
            Err(e) => return Err(read_failed(&p.disk, p.paths.index.clone(), e)),
        };
        if single {
            return Ok(bytes);
        }
        let at = joined.len();
        joined.extend_from_slice(&bytes);
        index::shift_offsets(&mut joined[at..], p.base);
    }
    Ok(joined.freeze())
}

/// Reads the pieces of one logical range; one piece is returned as read (no copy).
fn read_pieces(part: &PartitionKey, pieces: Vec<Piece>) -> Result<Bytes> {
    let read_one = |p: &Piece| {
        files::read_at(&p.part.paths.data, p.from, p.len, p.ahead)
            .map_err(|e| data_file_error(part, &p.part, e))
    };
    if let [p] = pieces.as_slice() {
        return read_one(p);
    }
    let total = pieces.iter().map(|p| p.len).sum();
    let mut out = BytesMut::with_capacity(total);
    for p in &pieces {
        out.extend_from_slice(&read_one(p)?);
    }
    Ok(out.freeze())
}

/// Opens the data file of each piece and checks it holds the piece, so that once the
/// response header promises the length, the file can deliver it.
fn open_pieces(part: &PartitionKey, pieces: Vec<Piece>) -> Result<Vec<FileRange>> {
    pieces
        .into_iter()
        .map(|p| {
            let file = files::open_range(&p.part.paths.data, p.from, p.len as u64, p.ahead)
                .map_err(|e| data_file_error(part, &p.part, e))?;
            Ok(FileRange {
                file,
                offset: p.from,
                len: p.len as u64,
            })
        })
        .collect()
}

/// A data file that cannot be read: gone (the partition has no data here) or failing.
fn data_file_error(part: &PartitionKey, p: &Part, e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::NotFound => Error::Internal {
            reason: format!("no data file for partition {part} on this server"),
        },
        _ => read_failed(&p.disk, p.paths.data.clone(), e),
    }
}

/// Maps a read error, flagging the disk when the error says the disk is failing.
fn read_failed(disk: &Disk, path: PathBuf, e: io::Error) -> Error {
    if is_disk_fault(&e) {
        disk.mark_unhealthy(&format!("read of {} failed: {e}", path.display()));
    }
    Error::io(path, e)
}
