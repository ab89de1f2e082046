//! The read side of the registry: block-id reports and queries, and the memory, index and
//! data reads of reducers (SEMANTICS §4 and §6).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::app::record_counts::{PartitionCounts, RecordCount, RecordCounts};
use crate::app::stats::ReadKind;
use crate::app::AppRegistry;
use crate::codec::bitmap;
use crate::error::{Error, Result};
use crate::ids::{AppId, BlockIdLayout, PartitionKey, PartitionRange};
use crate::memory::{ReadPermit, ReadUse};
use crate::store::memory::{MemoryRead, MemoryReadRequest, Segment};
use crate::store::{DataRead, IndexRead, Span};

/// Addresses a partition for index and data reads, as the client does.
#[derive(Clone, Copy, Debug)]
pub struct ReadArgs {
    /// Shuffle id.
    pub shuffle: i32,
    /// Partition id.
    pub partition: i32,
    /// Partitions per registered range (Spark: 1).
    pub per_range: i32,
    /// Total partitions of the shuffle.
    pub partition_num: i32,
}

/// A memory read request.
#[derive(Clone, Debug)]
pub struct MemoryReadArgs {
    /// Shuffle id.
    pub shuffle: i32,
    /// Partition id.
    pub partition: i32,
    /// `-1` or the last block id the client got.
    pub last_block_id: i64,
    /// Soft cap on returned bytes.
    pub read_buffer_size: i32,
    /// Java-legacy bitmap of expected task attempt ids; empty = all.
    pub expected_tasks: Bytes,
}

/// A memory read as served: its segments, and its payloads held against the read budget
/// until the transport has written them.
#[derive(Debug, Default)]
pub struct MemoryServed {
    /// The segments and payloads the memory tier answered.
    pub read: MemoryRead,
    permit: Option<ReadPermit>,
}

impl MemoryServed {
    /// The payloads as the buffers hold them, for a vectored write; the read memory is held
    /// until the returned permit is dropped (after the write).
    pub fn into_payloads(self) -> (Vec<Segment>, Vec<Bytes>, Option<ReadPermit>) {
        (self.read.segments, self.read.payloads, self.permit)
    }
}

impl AppRegistry {
    /// `reportShuffleResult`; answered once the report is journaled (restart recovery), so
    /// `getShuffleResult` after a restart answers exactly as before it.
    ///
    /// `records` are the post-0.10 `partitionStats` as `(partition, task attempt, records)`.
    /// A count is kept only when it is the reporting attempt's own (`task`, the request's
    /// `taskAttemptId`, as the master client sends them) for a partition this same report
    /// carries block ids for: so every kept count stands beside at least one block id, and
    /// no report can plant counts for other attempts or for partitions it wrote nothing to.
    #[allow(clippy::too_many_arguments)]
    pub async fn report(
        &self,
        app_id: &AppId,
        shuffle: i32,
        bitmap_num: i32,
        task: i64,
        parts: &[(i32, Vec<i64>)],
        records: &[RecordCount],
    ) -> Result<()> {
        let app = self.verify_and_touch(app_id)?;
        let shuffle_state = Self::shuffle_of(&app, shuffle)?;
        RecordCounts::validate(records)?;
        shuffle_state.block_ids.report(bitmap_num, parts)?;
        // A set, not a scan of `parts` per count: a report may carry thousands of partitions.
        let records: Vec<RecordCount> = if records.is_empty() {
            Vec::new()
        } else {
            let written: std::collections::HashSet<i32> = parts
                .iter()
                .filter(|(_, ids)| !ids.is_empty())
                .map(|(p, _)| *p)
                .collect();
            records
                .iter()
                .filter(|c| c.task_attempt == task && written.contains(&c.partition))
                .copied()
                .collect()
        };
        shuffle_state.records.report(&records);
        self.journal(crate::recovery::Record::Report {
            app: app_id.to_string(),
            shuffle,
            bitmap_num,
            parts: parts.to_vec(),
            // The journal's line keeps the `(partition, task attempt, records)` arrays it
            // always wrote, so journals of earlier builds replay as they are.
            records: records
                .iter()
                .map(|c| (c.partition, c.task_attempt, c.records))
                .collect(),
            at_ms: crate::clock::now_ms().unsigned_abs(),
        })
        .await
    }

    /// The record counts reported for `partitions` (post-0.10 `partitionStats`), for
    /// `getShuffleResultForMultiPart`: the requested partitions only, as their block ids are.
    pub fn record_counts(
        &self,
        app_id: &AppId,
        shuffle: i32,
        partitions: &[i32],
    ) -> Result<Vec<PartitionCounts>> {
        let app = self.verify(app_id)?;
        Ok(app
            .shuffle(shuffle)
            .map(|s| s.records.get(partitions))
            .unwrap_or_default())
    }

    /// `getShuffleResult` / `getShuffleResultForMultiPart`: the Java-legacy bitmap of block ids
    /// reported for `partitions`; empty bytes when the shuffle never had a report.
    pub fn block_ids(
        &self,
        app_id: &AppId,
        shuffle: i32,
        partitions: &[i32],
        layout: BlockIdLayout,
    ) -> Result<Bytes> {
        let app = self.verify_and_touch(app_id)?;
        let Some(shuffle) = app.shuffle(shuffle) else {
            return Ok(Bytes::new());
        };
        Ok(shuffle
            .block_ids
            .get(partitions, layout)?
            .map(|ids| bitmap::encode(&ids))
            .unwrap_or_default())
    }

    /// `getMemoryShuffleData`. Holds `read_buffer_size` of read memory while it builds the
    /// answer (`NO_BUFFER` when the read cap is reached).
    pub fn read_memory(&self, app_id: &AppId, args: MemoryReadArgs) -> Result<MemoryServed> {
        let app = self.verify_and_touch(app_id)?;
        if args.read_buffer_size < 0 {
            return Err(Error::bad_request(format!(
                "readBufferSize {} is negative",
                args.read_buffer_size
            )));
        }
        let guard = self.stats().begin_read(ReadKind::Memory);
        self.stats()
            .read_memory_requests
            .fetch_add(1, Ordering::Relaxed);
        let permit = self
            .read_budget()
            .try_acquire(args.read_buffer_size as u64)
            .inspect_err(|_| {
                self.stats()
                    .read_memory_refused
                    .fetch_add(1, Ordering::Relaxed);
            })?
            .tagged(ReadUse::Memory);
        let Some(key) = app
            .shuffle(args.shuffle)
            .and_then(|s| s.key_of(app_id, args.partition))
        else {
            return Ok(MemoryServed::default());
        };
        let expected = if args.expected_tasks.is_empty() {
            None
        } else {
            Some(bitmap::decode(&args.expected_tasks)?).filter(|t| !t.is_empty())
        };
        let req = MemoryReadRequest {
            last_block_id: args.last_block_id,
            max_bytes: args.read_buffer_size as u64,
            expected_tasks: expected,
        };
        let read = self.store().read_memory(&key, &req);
        guard.served(read.data_len());
        Ok(MemoryServed {
            read,
            permit: Some(permit),
        })
    }

    /// `getLocalShuffleIndex`.
    pub async fn read_index(&self, app_id: &AppId, args: ReadArgs) -> Result<IndexRead> {
        let key = self.read_key(app_id, args)?;
        let permit = self
            .read_budget()
            .try_acquire(self.opts.index_read_hint)?
            .tagged(ReadUse::IndexFile);
        let guard = self.stats().begin_read(ReadKind::IndexFile);
        let mut read = self.store().read_index(&key).await?;
        guard.served(read.index.len() as u64);
        read.index = permit.attach(read.index);
        Ok(read)
    }

    /// `getLocalShuffleData`: exactly `length` bytes at `offset` of the partition's file.
    pub async fn read_data(
        &self,
        app_id: &AppId,
        args: ReadArgs,
        offset: i64,
        length: i32,
    ) -> Result<Bytes> {
        let key = self.data_key(app_id, args, offset, length)?;
        let permit = self
            .read_budget()
            .try_acquire(length as u64)?
            .tagged(ReadUse::DataFile);
        let guard = self.stats().begin_read(ReadKind::DataFile);
        let data = self
            .store()
            .read_data(&key, Span::at(offset as u64, length as u64))
            .await?;
        guard.served(data.len() as u64);
        Ok(permit.attach(data))
    }

    /// `getLocalShuffleData` for a transport that sends file ranges itself (the Netty plane,
    /// with sendfile). Ranges of open files hold no memory, so they take nothing from the read
    /// budget; a tier that can only answer bytes in memory is charged as [`Self::read_data`]
    /// is.
    pub async fn read_data_ranges(
        &self,
        app_id: &AppId,
        args: ReadArgs,
        offset: i64,
        length: i32,
    ) -> Result<DataRead> {
        let key = self.data_key(app_id, args, offset, length)?;
        let guard = self.stats().begin_read(ReadKind::DataFile);
        let read = self
            .store()
            .read_data_ranges(&key, Span::at(offset as u64, length as u64))
            .await?;
        guard.served(read.len());
        match read {
            DataRead::Memory(data) => {
                let permit = self
                    .read_budget()
                    .try_acquire(data.len() as u64)?
                    .tagged(ReadUse::DataFile);
                Ok(DataRead::Memory(permit.attach(data)))
            }
            files => Ok(files),
        }
    }

    fn data_key(
        &self,
        app_id: &AppId,
        args: ReadArgs,
        offset: i64,
        length: i32,
    ) -> Result<PartitionKey> {
        if offset < 0 || length < 0 {
            return Err(Error::bad_request(format!(
                "offset {offset} and length {length} must not be negative"
            )));
        }
        self.read_key(app_id, args)
    }

    fn read_key(&self, app_id: &AppId, args: ReadArgs) -> Result<PartitionKey> {
        self.verify_and_touch(app_id)?;
        let range = PartitionRange::for_read(args.partition, args.per_range, args.partition_num)?;
        Ok(PartitionKey::new(app_id.clone(), args.shuffle, range))
    }
}
