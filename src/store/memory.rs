//! `MemoryTier`: the hot tier. Per partition range, blocks move
//! staging → in flight (being spilled, still readable) → released (durable elsewhere), so a
//! reported block is always in memory or in a file, never in neither.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use roaring::RoaringTreemap;

use crate::error::{Error, Result};
use crate::id_set::IdSet;
use crate::ids::PartitionKey;
use crate::memory::{Charge, FlushCharge, MemoryBudget, Reservation};
use crate::store::{Block, BlockBatch, Payloads, PurgeScope};

/// Where a memory read starts and what it may return.
#[derive(Clone, Debug)]
pub struct MemoryReadRequest {
    /// `-1`: from the beginning; else continue after this block.
    pub last_block_id: i64,
    /// Soft cap: blocks are added until the total reaches it (the crossing block included).
    pub max_bytes: u64,
    /// Only blocks of these task attempts; `None` = all.
    pub expected_tasks: Option<RoaringTreemap>,
}

/// One block's place in a [`MemoryRead`]'s data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Block id.
    pub block_id: i64,
    /// Offset inside the returned data.
    pub offset: i64,
    /// Payload length.
    pub length: i32,
    /// Uncompressed length (opaque).
    pub uncompress_length: i32,
    /// CRC as sent.
    pub crc: i64,
    /// Writer task attempt.
    pub task_attempt_id: i64,
}

/// The answer to a memory read: the blocks' payloads and their segments.
#[derive(Clone, Debug, Default)]
pub struct MemoryRead {
    /// The payloads in segment order, shared with the partition's buffers (not copied): both
    /// planes send them as they are (Netty as one vectored write, gRPC as body frames).
    pub payloads: Vec<Bytes>,
    /// One per block; offsets are into the concatenation of `payloads`.
    pub segments: Vec<Segment>,
    /// Blocks after these were left for the next read (the size cap was reached). False
    /// means the answer reaches the end of what the partition holds in memory now: the
    /// post-0.10 `is_end` (apache/uniffle#2685), exact where Java's is a size guess.
    pub more: bool,
}

impl MemoryRead {
    /// Bytes of payload.
    pub fn data_len(&self) -> u64 {
        self.payloads.iter().map(|p| p.len() as u64).sum()
    }
}

/// The outcome of inserting blocks into a partition.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Inserted {
    /// Blocks accepted.
    pub blocks: usize,
    /// Charged bytes accepted.
    pub bytes: u64,
    /// Blocks dropped because their id was already received for this partition.
    pub duplicates: usize,
    /// Bytes now staged (not yet handed to the spiller) in this partition.
    pub staged_bytes: u64,
}

/// A batch handed to the spiller; its memory is freed when this is dropped, which the spiller
/// does only after the target tier acknowledged it (or the partition was purged).
pub struct SpillBatch {
    /// The partition.
    pub buffer: Arc<PartitionBuffer>,
    /// Event id, unique per server.
    pub event_id: u64,
    /// The blocks in write order.
    pub batch: BlockBatch,
    /// The memory of the blocks.
    pub charge: FlushCharge,
}

impl SpillBatch {
    /// Called after the tier acknowledged the batch: drops it from memory and frees it.
    pub fn complete(self) {
        {
            let mut inner = self.buffer.inner.lock();
            if let Some((_, batch)) = inner.in_flight.remove(&self.event_id) {
                for b in batch.blocks() {
                    inner.positions.remove(&b.block_id);
                }
                // Counted here, once the tier acknowledged the batch: Java adds a flushed
                // event's block ids to its committed set only after the write succeeded.
                self.buffer
                    .committed_blocks
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
            // Emptied containers give their tables back: a removal keeps a hash table at its
            // high-water mark and an emptied BTreeMap keeps its root node, so every partition
            // that ever spilled held both for the rest of its shuffle (hundreds of bytes at
            // least, a block id's worth of table per block it ever had in memory at most;
            // benches/README round 5). The next insert allocates them again.
            if inner.in_flight.is_empty() {
                inner.in_flight = BTreeMap::new();
            }
            if inner.positions.is_empty() {
                inner.positions = HashMap::new();
            } else if inner.positions.capacity() > 4 * inner.positions.len().max(16) {
                inner.positions.shrink_to_fit();
            }
        }
        drop(self.charge);
    }
}

/// Blocks carry a per-partition sequence number in arrival order. A spill always takes all of
/// staging, so in-flight batches (by event id) followed by staging are exactly the blocks in
/// sequence order, each run contiguous: a reader's cursor is one hash lookup plus a skip, not
/// a scan.
#[derive(Default)]
struct BufferInner {
    staging: Vec<Block>,
    /// Sequence number of `staging[0]`.
    staging_first_seq: u64,
    next_seq: u64,
    staged_charge: Option<Charge>,
    staged_bytes: u64,
    /// Batches being spilled, by event id, with the sequence number of their first block;
    /// read in id order before staging.
    in_flight: BTreeMap<u64, (u64, BlockBatch)>,
    /// Block id → sequence number, for blocks still in memory.
    positions: HashMap<i64, u64>,
    /// Every block id received for this partition, to drop resent duplicates.
    seen: IdSet,
}

/// The in-memory state of one registered partition range.
pub struct PartitionBuffer {
    key: PartitionKey,
    /// `LOCAL_ORDER`: batches are sorted by task attempt id when they are spilled.
    local_order: bool,
    inner: Mutex<BufferInner>,
    /// Lifetime payload bytes received (huge-partition detection).
    total_bytes: AtomicU64,
    /// Lifetime encoded bytes received (payload + 32 per block): Java's `partitionDataSize`,
    /// the measure a 0.10 client's `partitionRequireSizes` are in, so the split limit can be
    /// compared exactly as Java compares it.
    encoded_bytes: AtomicU64,
    /// Set when the partition is purged; in-flight spills of it are then dropped.
    purged: AtomicBool,
    /// Blocks of this range written durably to a file tier (`committed_block_count`). Ids
    /// are unique per range (resent duplicates are dropped on insert) and a batch is counted
    /// once, when its append succeeded, so this is the number of distinct committed ids.
    committed_blocks: AtomicU64,
    /// Set the first time the range passed the huge-partition threshold, so the lifetime
    /// counters (`total_huge_partition_num`) count each range once.
    huge: AtomicBool,
}

impl PartitionBuffer {
    /// The partition.
    pub fn key(&self) -> &PartitionKey {
        &self.key
    }

    /// Whether spills sort by task attempt id.
    pub fn local_order(&self) -> bool {
        self.local_order
    }

    /// Payload bytes ever received.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes.load(Ordering::Relaxed)
    }

    /// Encoded bytes ever received (payload + 32 per block, resent duplicates not counted).
    pub fn encoded_bytes(&self) -> u64 {
        self.encoded_bytes.load(Ordering::Relaxed)
    }

    /// Charged bytes currently in memory (staged + in flight).
    pub fn memory_bytes(&self) -> u64 {
        let inner = self.inner.lock();
        inner.staged_bytes
            + inner
                .in_flight
                .values()
                .map(|(_, b)| b.charged_bytes())
                .sum::<u64>()
    }

    /// Charged bytes staged and not yet handed to the spiller.
    pub fn staged_bytes(&self) -> u64 {
        self.inner.lock().staged_bytes
    }

    /// Blocks in memory: `(staged, being spilled)`, Java's `block_count_in_buffer_pool` and
    /// `in_flush_block_count_in_buffer_pool` for this range.
    pub fn block_counts(&self) -> (u64, u64) {
        let inner = self.inner.lock();
        let flushing = inner.in_flight.values().map(|(_, b)| b.len() as u64).sum();
        (inner.staging.len() as u64, flushing)
    }

    /// Blocks of this range durably written to a file tier.
    pub fn committed_blocks(&self) -> u64 {
        self.committed_blocks.load(Ordering::Relaxed)
    }

    /// Marks the range huge; true only for the call that marked it.
    pub fn mark_huge(&self) -> bool {
        !self.huge.swap(true, Ordering::AcqRel)
    }

    /// Whether the range was marked huge.
    pub fn is_huge(&self) -> bool {
        self.huge.load(Ordering::Acquire)
    }

    /// Number of batches being spilled.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().in_flight.len()
    }

    /// True once purged.
    pub fn is_purged(&self) -> bool {
        self.purged.load(Ordering::Acquire)
    }

    /// Stages blocks, charging their memory to `reservation`. Blocks whose id this partition
    /// already received are dropped (their bytes stay on the reservation and return with it).
    /// Fails without staging anything if the reservation is too small or the partition was
    /// purged.
    pub fn insert(
        &self,
        blocks: Vec<Block>,
        payloads: Payloads,
        reservation: &mut Reservation,
    ) -> Result<Inserted> {
        let blocks = match payloads {
            Payloads::Shared => compact(blocks),
            Payloads::Owned => blocks,
        };
        let mut inner = self.inner.lock();
        if self.is_purged() {
            return Err(Error::NotRegistered {
                app_id: self.key.app.to_string(),
                shuffle_id: self.key.shuffle,
                what: format!("partition range {}", self.key.range),
            });
        }
        let mut out = Inserted::default();
        let mut fresh = Vec::with_capacity(blocks.len());
        for b in blocks {
            let id = b.block_id as u64;
            // Ids are marked seen as we go (so duplicates inside one batch are caught) and
            // unmarked below if the charge fails. Single inserts, not a bitmap union: a union
            // rebuilds whole containers and made inserts 8x slower with many map tasks.
            if !inner.seen.insert(id) {
                out.duplicates += 1;
                continue;
            }
            out.bytes += b.charged_len();
            fresh.push(b);
        }
        let charge = match reservation.commit(out.bytes) {
            Ok(c) => c,
            Err(e) => {
                for b in &fresh {
                    inner.seen.remove(b.block_id as u64);
                }
                return Err(e);
            }
        };
        let payload: u64 = fresh.iter().map(|b| b.data.len() as u64).sum();
        out.blocks = fresh.len();
        if inner.staging.is_empty() {
            inner.staging_first_seq = inner.next_seq;
        }
        for b in &fresh {
            let seq = inner.next_seq;
            inner.positions.insert(b.block_id, seq);
            inner.next_seq += 1;
        }
        inner.staging.extend(fresh);
        inner.staged_bytes += out.bytes;
        match inner.staged_charge.as_mut() {
            Some(c) => c.merge(charge),
            None => inner.staged_charge = Some(charge),
        }
        out.staged_bytes = inner.staged_bytes;
        self.total_bytes.fetch_add(payload, Ordering::Relaxed);
        self.encoded_bytes.fetch_add(out.bytes, Ordering::Relaxed);
        Ok(out)
    }

    /// Moves everything staged into a new in-flight batch for the spiller; `None` when
    /// nothing is staged. The blocks stay readable until [`SpillBatch::complete`].
    ///
    /// The event id is drawn from `events` under the buffer lock, so ids grow in the order
    /// batches leave staging: readers walk in-flight batches by id, and a newer batch with a
    /// smaller id would let a cursor skip blocks that are only in memory.
    pub fn begin_spill(self: &Arc<Self>, events: &AtomicU64) -> Option<SpillBatch> {
        let mut inner = self.inner.lock();
        if inner.staging.is_empty() || self.is_purged() {
            return None;
        }
        let blocks = std::mem::take(&mut inner.staging);
        inner.staged_bytes = 0;
        let charge = inner.staged_charge.take()?;
        let event_id = events.fetch_add(1, Ordering::Relaxed);
        // Readers keep seeing arrival order (a reducer's cursor points into it); only the
        // copy written to the tier is sorted for LOCAL_ORDER.
        let readable = BlockBatch::new(blocks);
        let to_write = if self.local_order {
            let mut sorted = readable.blocks().to_vec();
            sorted.sort_by_key(|b| b.task_attempt_id);
            BlockBatch::new(sorted)
        } else {
            readable.clone()
        };
        let first_seq = inner.staging_first_seq;
        inner.staging_first_seq = inner.next_seq;
        inner.in_flight.insert(event_id, (first_seq, readable));
        drop(inner);
        Some(SpillBatch {
            buffer: Arc::clone(self),
            event_id,
            batch: to_write,
            charge: charge.start_flush(),
        })
    }

    /// Reads blocks after `last_block_id` (in-flight batches by event id, then staging), as
    /// Java's `getMemoryShuffleData` does. An unknown `last_block_id` restarts from the
    /// beginning (the client de-duplicates).
    pub fn read(&self, req: &MemoryReadRequest) -> MemoryRead {
        // Pick blocks under the lock (cheap `Bytes` clones); nothing is copied.
        let mut more = false;
        let picked: Vec<Block> = {
            let inner = self.inner.lock();
            let start = if req.last_block_id == -1 {
                0
            } else {
                inner
                    .positions
                    .get(&req.last_block_id)
                    .map_or(0, |seq| seq + 1)
            };
            let runs = inner
                .in_flight
                .values()
                .map(|(first, batch)| (*first, batch.blocks()))
                .chain(std::iter::once((
                    inner.staging_first_seq,
                    &inner.staging[..],
                )));
            let after_cursor = runs.flat_map(|(first, blocks)| {
                let skip = (start.saturating_sub(first) as usize).min(blocks.len());
                blocks[skip..].iter()
            });
            let mut total = 0u64;
            let mut picked = Vec::new();
            for b in after_cursor {
                if total >= req.max_bytes && !picked.is_empty() {
                    more = true;
                    break;
                }
                if let Some(tasks) = &req.expected_tasks {
                    if !tasks.contains(b.task_attempt_id as u64) {
                        continue;
                    }
                }
                total += b.data.len() as u64;
                picked.push(b.clone());
            }
            picked
        };
        let mut offset = 0i64;
        let mut segments = Vec::with_capacity(picked.len());
        let mut payloads = Vec::with_capacity(picked.len());
        for b in picked {
            segments.push(Segment {
                block_id: b.block_id,
                offset,
                length: b.len(),
                uncompress_length: b.uncompress_length,
                crc: b.crc,
                task_attempt_id: b.task_attempt_id,
            });
            offset += b.data.len() as i64;
            payloads.push(b.data);
        }
        MemoryRead {
            payloads,
            segments,
            more,
        }
    }

    /// Drops everything staged and in flight (frees staged memory now; in-flight memory is
    /// freed when the spiller drops its batch).
    fn purge(&self) {
        let mut inner = self.inner.lock();
        self.purged.store(true, Ordering::Release);
        inner.staging = Vec::new();
        inner.staged_bytes = 0;
        inner.staged_charge = None;
        inner.in_flight.clear();
        inner.positions = HashMap::new();
        inner.seen = IdSet::new();
    }
}

/// Copies the payloads of one partition's blocks into one allocation of their own.
///
/// gRPC payloads arrive as slices of the whole request buffer (up to 16 MiB, many
/// partitions). Kept as slices, one small live block would pin the entire request long after
/// the budget released the rest, so real memory could far exceed the accounted capacity. This
/// is the one user-space copy of a gRPC block on the write path; everything after (spill,
/// reads) shares it. Netty payloads are received right-sized and skip it ([`Payloads`]).
fn compact(mut blocks: Vec<Block>) -> Vec<Block> {
    let total: usize = blocks.iter().map(|b| b.data.len()).sum();
    let mut buf = BytesMut::with_capacity(total);
    for b in &blocks {
        buf.extend_from_slice(&b.data);
    }
    let all = buf.freeze();
    let mut at = 0;
    for b in &mut blocks {
        let len = b.data.len();
        b.data = all.slice(at..at + len);
        at += len;
    }
    blocks
}

/// All partition buffers of the server.
///
/// One `RwLock`ed map: lookups (every send and read) share the read lock; only registration
/// and purge write. Nothing awaits under it.
pub struct MemoryTier {
    budget: MemoryBudget,
    buffers: RwLock<HashMap<PartitionKey, Arc<PartitionBuffer>>>,
}

impl MemoryTier {
    /// An empty tier charging `budget`.
    pub fn new(budget: MemoryBudget) -> Self {
        MemoryTier {
            budget,
            buffers: RwLock::new(HashMap::new()),
        }
    }

    /// The budget this tier charges.
    pub fn budget(&self) -> &MemoryBudget {
        &self.budget
    }

    /// Creates the buffer of a registered range; idempotent (re-registration keeps data).
    pub fn ensure(&self, key: PartitionKey, local_order: bool) -> Arc<PartitionBuffer> {
        if let Some(b) = self.buffers.read().get(&key) {
            return Arc::clone(b);
        }
        let mut map = self.buffers.write();
        Arc::clone(map.entry(key.clone()).or_insert_with(|| {
            Arc::new(PartitionBuffer {
                key,
                local_order,
                inner: Mutex::new(BufferInner::default()),
                total_bytes: AtomicU64::new(0),
                encoded_bytes: AtomicU64::new(0),
                purged: AtomicBool::new(false),
                committed_blocks: AtomicU64::new(0),
                huge: AtomicBool::new(false),
            })
        }))
    }

    /// The buffer of a registered range, if any.
    pub fn get(&self, key: &PartitionKey) -> Option<Arc<PartitionBuffer>> {
        self.buffers.read().get(key).cloned()
    }

    /// Every buffer with something staged, largest first (watermark spill order).
    pub fn spill_candidates(&self) -> Vec<(Arc<PartitionBuffer>, u64)> {
        let mut out: Vec<_> = self
            .buffers
            .read()
            .values()
            .map(|b| (Arc::clone(b), b.staged_bytes()))
            .filter(|(_, staged)| *staged > 0)
            .collect();
        out.sort_by_key(|(_, staged)| std::cmp::Reverse(*staged));
        out
    }

    /// Buffers inside `scope`.
    pub fn buffers_in(&self, scope: &PurgeScope) -> Vec<Arc<PartitionBuffer>> {
        self.buffers
            .read()
            .iter()
            .filter(|(k, _)| scope.covers(k))
            .map(|(_, b)| Arc::clone(b))
            .collect()
    }

    /// Every buffer.
    pub fn all_buffers(&self) -> Vec<Arc<PartitionBuffer>> {
        self.buffers.read().values().cloned().collect()
    }

    /// Removes and purges every buffer inside `scope`; returns charged bytes freed now.
    pub fn purge(&self, scope: &PurgeScope) -> u64 {
        let removed: Vec<Arc<PartitionBuffer>> = {
            let mut map = self.buffers.write();
            let keys: Vec<PartitionKey> = map.keys().filter(|k| scope.covers(k)).cloned().collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        removed
            .iter()
            .map(|b| {
                let staged = b.staged_bytes();
                b.purge();
                staged
            })
            .sum()
    }

    /// Number of registered partition ranges.
    pub fn partitions(&self) -> usize {
        self.buffers.read().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{AppId, PartitionRange};

    fn key(app: &str, shuffle: i32, p: i32) -> PartitionKey {
        PartitionKey::new(
            AppId::parse(app).unwrap(),
            shuffle,
            PartitionRange::new(p, p).unwrap(),
        )
    }

    pub(crate) fn block(id: i64, task: i64, len: usize) -> Block {
        Block {
            block_id: id,
            task_attempt_id: task,
            uncompress_length: len as i32,
            crc: id,
            data: Bytes::from(vec![id as u8; len]),
        }
    }

    #[test]
    fn insert_read_spill_complete() {
        let (budget, _tier, buf) = one_buffer(false);
        let mut r = budget.try_reserve(3 * 42).unwrap();
        let ins = buf
            .insert(
                vec![block(1, 1, 10), block(2, 1, 10), block(1, 1, 10)],
                Payloads::Shared,
                &mut r,
            )
            .unwrap();
        assert_eq!((ins.blocks, ins.duplicates, ins.bytes), (2, 1, 84));
        drop(r);
        assert_eq!(budget.snapshot().used, 84);

        let all = MemoryReadRequest {
            last_block_id: -1,
            max_bytes: 1 << 20,
            expected_tasks: None,
        };
        assert_eq!(buf.read(&all).segments.len(), 2);

        let spill = buf.begin_spill(&AtomicU64::new(7)).unwrap();
        assert_eq!(budget.snapshot().in_flush, 84);
        // Still readable while in flight, and new blocks come after it.
        let mut r = budget.try_reserve(42).unwrap();
        buf.insert(vec![block(3, 2, 10)], Payloads::Shared, &mut r)
            .unwrap();
        let read = buf.read(&all);
        assert_eq!(
            read.segments.iter().map(|s| s.block_id).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(read.segments[2].offset, 20);
        // Two blocks in flight, one staged, none committed yet.
        assert_eq!(buf.block_counts(), (1, 2));
        assert_eq!(buf.committed_blocks(), 0);
        spill.complete();
        assert_eq!(budget.snapshot().used, 42);
        assert_eq!(buf.read(&all).segments.len(), 1);
        assert_eq!(buf.block_counts(), (1, 0));
        assert_eq!(buf.committed_blocks(), 2);
        assert!(buf.mark_huge() && !buf.mark_huge() && buf.is_huge());
    }

    #[test]
    fn read_cursor_filter_and_cap() {
        let (budget, _tier, buf) = one_buffer(false);
        let mut r = budget.try_reserve(5 * 42).unwrap();
        buf.insert(
            (1..=5).map(|i| block(i, i % 2, 10)).collect(),
            Payloads::Shared,
            &mut r,
        )
        .unwrap();
        let mut req = MemoryReadRequest {
            last_block_id: 2,
            max_bytes: 15,
            expected_tasks: None,
        };
        let ids = |r: MemoryRead| r.segments.iter().map(|s| s.block_id).collect::<Vec<_>>();
        assert_eq!(ids(buf.read(&req)), vec![3, 4], "crossing block included");
        req.last_block_id = 999;
        assert_eq!(ids(buf.read(&req)), vec![1, 2], "unknown cursor restarts");
        req.last_block_id = -1;
        req.max_bytes = 1000;
        req.expected_tasks = Some([1u64].into_iter().collect());
        assert_eq!(ids(buf.read(&req)), vec![1, 3, 5]);
    }

    /// A 10,000-byte budget, its memory tier, and the buffer of partition `a/0/1`.
    fn one_buffer(local_order: bool) -> (MemoryBudget, MemoryTier, Arc<PartitionBuffer>) {
        let budget = MemoryBudget::new(10_000, 0.8, 0.2);
        let tier = MemoryTier::new(budget.clone());
        let buf = tier.ensure(key("a", 0, 1), local_order);
        (budget, tier, buf)
    }

    /// A local-order buffer holding blocks 1, 2, 3 of tasks 3, 1, 2 (arrival order).
    fn three_tasks_out_of_order() -> (MemoryTier, Arc<PartitionBuffer>) {
        let (budget, tier, buf) = one_buffer(true);
        let mut r = budget.try_reserve(3 * 42).unwrap();
        buf.insert(
            vec![block(1, 3, 10), block(2, 1, 10), block(3, 2, 10)],
            Payloads::Shared,
            &mut r,
        )
        .unwrap();
        (tier, buf)
    }

    #[test]
    fn local_order_sorts_spilled_batches_by_task() {
        let (_tier, buf) = three_tasks_out_of_order();
        let spill = buf.begin_spill(&AtomicU64::new(1)).unwrap();
        let tasks: Vec<i64> = spill
            .batch
            .blocks()
            .iter()
            .map(|b| b.task_attempt_id)
            .collect();
        assert_eq!(tasks, vec![1, 2, 3]);
    }

    #[test]
    fn local_order_spill_keeps_arrival_order_for_readers() {
        // A reducer mid-way through a partition must not skip blocks when the batch it reads
        // is spilled (and sorted for the file) under its cursor.
        let (_tier, buf) = three_tasks_out_of_order();
        let first = MemoryReadRequest {
            last_block_id: -1,
            max_bytes: 1,
            expected_tasks: None,
        };
        assert_eq!(buf.read(&first).segments[0].block_id, 1);
        let _spill = buf.begin_spill(&AtomicU64::new(1)).unwrap();
        let next = MemoryReadRequest {
            last_block_id: 1,
            max_bytes: 1000,
            expected_tasks: None,
        };
        let ids: Vec<i64> = buf
            .read(&next)
            .segments
            .iter()
            .map(|s| s.block_id)
            .collect();
        assert_eq!(ids, vec![2, 3]);
    }

    proptest::proptest! {
        /// The indexed cursor answers exactly what a linear scan over the blocks still in
        /// memory (arrival order) would, whatever the interleaving of inserts and spills.
        #[test]
        fn cursor_matches_a_linear_scan(ops in proptest::collection::vec((0u8..4, 1usize..5), 1..60)) {
            let budget = MemoryBudget::new(1 << 30, 0.8, 0.2);
            let tier = MemoryTier::new(budget.clone());
            let buf = tier.ensure(key("a", 0, 1), false);
            let events = AtomicU64::new(1);
            let mut spills = std::collections::VecDeque::new();
            let mut next_id = 0i64;
            let mut model: Vec<i64> = Vec::new(); // ids in memory, arrival order
            for (op, n) in ops {
                match op {
                    0 | 1 => {
                        let blocks: Vec<Block> = (0..n).map(|i| block(next_id + i as i64, 1, 3)).collect();
                        let mut r = budget.try_reserve(n as u64 * 35).unwrap();
                        buf.insert(blocks, Payloads::Shared, &mut r).unwrap();
                        model.extend(next_id..next_id + n as i64);
                        next_id += n as i64;
                    }
                    2 => {
                        if let Some(s) = buf.begin_spill(&events) {
                            spills.push_back(s);
                        }
                    }
                    _ => {
                        if let Some(s) = spills.pop_front() {
                            let gone: Vec<i64> = s.batch.blocks().iter().map(|b| b.block_id).collect();
                            s.complete();
                            model.retain(|id| !gone.contains(id));
                        }
                    }
                }
                for cursor in [-1, n as i64, next_id - 1, next_id + 5] {
                    let req = MemoryReadRequest { last_block_id: cursor, max_bytes: u64::MAX, expected_tasks: None };
                    let got: Vec<i64> = buf.read(&req).segments.iter().map(|s| s.block_id).collect();
                    let from = model.iter().position(|id| *id == cursor).map_or(0, |i| i + 1);
                    proptest::prop_assert_eq!(&got, &model[from..].to_vec());
                }
            }
        }
    }

    #[test]
    fn payloads_are_compacted_out_of_the_request_buffer() {
        let (budget, _tier, buf) = one_buffer(false);
        let request = Bytes::from(vec![9u8; 4096]);
        let mut b = block(1, 1, 0);
        b.data = request.slice(100..110);
        let mut r = budget.try_reserve(42).unwrap();
        buf.insert(vec![b], Payloads::Shared, &mut r).unwrap();
        let staged = buf.inner.lock().staging[0].data.clone();
        assert_eq!(&staged[..], &[9u8; 10]);
        assert!(
            !std::ptr::eq(staged.as_ptr(), request[100..].as_ptr()),
            "not a slice of the request"
        );
    }

    #[test]
    fn purge_frees_staged_memory_and_only_its_scope() {
        let budget = MemoryBudget::new(10_000, 0.8, 0.2);
        let tier = MemoryTier::new(budget.clone());
        let a = tier.ensure(key("a", 0, 1), false);
        let b = tier.ensure(key("b", 0, 1), false);
        let mut r = budget.try_reserve(84).unwrap();
        a.insert(vec![block(1, 1, 10)], Payloads::Shared, &mut r)
            .unwrap();
        b.insert(vec![block(1, 1, 10)], Payloads::Shared, &mut r)
            .unwrap();
        let spill = a.begin_spill(&AtomicU64::new(1));
        let mut r = budget.try_reserve(42).unwrap();
        a.insert(vec![block(2, 1, 10)], Payloads::Shared, &mut r)
            .unwrap();
        drop(r);
        tier.purge(&PurgeScope::App(AppId::parse("a").unwrap()));
        assert_eq!(
            budget.snapshot().used,
            84,
            "in-flight batch still holds its charge"
        );
        drop(spill);
        assert_eq!(budget.snapshot().used, 42, "only b remains");
        assert!(tier.get(&key("b", 0, 1)).is_some());
        assert!(a
            .insert(
                vec![block(9, 1, 1)],
                Payloads::Shared,
                &mut budget.try_reserve(33).unwrap()
            )
            .is_err());
    }
}
