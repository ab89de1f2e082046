//! Cost of the memory tier's hot paths: reserve + insert of a send's blocks, and cursor reads.
//!
//! Payloads are clones of one shared `Bytes`, so insert measures metadata work (budget lock,
//! duplicate check, staging), not memcpy. Reads copy payloads into the answer, as the server
//! does. Quick check that it still builds and runs: `cargo bench --bench memory_tier -- --test`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use roaring::RoaringTreemap;
use spillway::ids::{AppId, BlockIdLayout, PartitionKey, PartitionRange};
use spillway::memory::MemoryBudget;
use spillway::store::memory::{MemoryReadRequest, MemoryTier, PartitionBuffer, SpillBatch};
use spillway::store::{Block, Payloads, PurgeScope};

const LAYOUT: BlockIdLayout = BlockIdLayout::DEFAULT;
const BLOCKS_PER_SEND: usize = 16;
/// Batches staged before the bench spills them (outside the timed section), so memory stays
/// bounded at `SPILL_EVERY` × 16 × 64 KiB = 64 MiB.
const SPILL_EVERY: u64 = 64;
/// Map tasks writing the partition; each send is one task's 16 blocks (sequence numbers
/// 0..16). After every task sent once, the partition is purged and registered again (outside
/// the timed section), so the received-id set, whose size insert cost depends on, cycles
/// through the same sizes instead of growing for as long as the bench runs.
const MAP_TASKS: u64 = 2000;
const READ_PARTITION_BLOCKS: usize = 1000;
const READ_BLOCK_LEN: usize = 8 << 10;
const READ_BYTES: u64 = 1 << 20;
/// Tasks writing the read partition; the filtered reads expect the first half of them.
const READ_TASKS: i64 = 10;

fn partition(tier: &MemoryTier) -> Arc<PartitionBuffer> {
    let key = PartitionKey::new(
        AppId::parse("bench_app").expect("valid app id"),
        0,
        PartitionRange::new(0, 0).expect("valid range"),
    );
    tier.ensure(key, false)
}

fn block(block_id: i64, task: i64, payload: &Bytes) -> Block {
    Block {
        block_id,
        task_attempt_id: task,
        uncompress_length: payload.len() as i32 * 2,
        crc: block_id,
        data: payload.clone(),
    }
}

/// The 16 blocks map task `task` sends; ids are unique within the partition's life, so none
/// is dropped as a duplicate.
fn send_blocks(task: u64, payload: &Bytes) -> Vec<Block> {
    let task = task as i64;
    (0..BLOCKS_PER_SEND as i64)
        .map(|seq| block(LAYOUT.block_id(seq, 0, task), task, payload))
        .collect()
}

fn bench_insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory_insert");
    for block_len in [1usize << 10, 64 << 10] {
        let payload = Bytes::from(vec![0xA5u8; block_len]);
        let charged = BLOCKS_PER_SEND as u64 * (block_len as u64 + Block::METADATA_BYTES);
        group.throughput(Throughput::Bytes((BLOCKS_PER_SEND * block_len) as u64));
        // Shared: gRPC payloads, slices of one request, copied per partition; owned: Netty
        // payloads, received right-sized and stored as they are.
        for payloads in [Payloads::Shared, Payloads::Owned] {
            let label = format!("{}KiB_blocks_{payloads:?}", block_len >> 10);
            group.bench_function(BenchmarkId::new("reserve_insert_16", label), |b| {
                let budget = MemoryBudget::new(1 << 30, 0.8, 0.2);
                let tier = MemoryTier::new(budget.clone());
                let mut buf = partition(&tier);
                let mut sends = 0u64;
                b.iter_custom(|iters| {
                    let mut elapsed = Duration::ZERO;
                    let mut done = 0;
                    while done < iters {
                        let task = sends % MAP_TASKS;
                        let n = (iters - done).min(SPILL_EVERY).min(MAP_TASKS - task);
                        let batches: Vec<Vec<Block>> =
                            (task..task + n).map(|t| send_blocks(t, &payload)).collect();
                        sends += n;
                        let start = Instant::now();
                        for blocks in batches {
                            let mut reservation = budget.try_reserve(charged).expect("budget fits");
                            let inserted = buf
                                .insert(blocks, payloads, &mut reservation)
                                .expect("inserts");
                            black_box(inserted);
                        }
                        elapsed += start.elapsed();
                        if let Some(spill) =
                            buf.begin_spill(&std::sync::atomic::AtomicU64::new(sends))
                        {
                            spill.complete();
                        }
                        if sends.is_multiple_of(MAP_TASKS) {
                            tier.purge(&PurgeScope::App(buf.key().app.clone()));
                            buf = partition(&tier);
                        }
                        done += n;
                    }
                    elapsed
                })
            });
        }
    }
    group.finish();
}

/// A partition of `READ_PARTITION_BLOCKS` 8 KiB blocks, written 16 per send: the first 512 in
/// a batch being spilled (still readable), the rest staged. The returned batch must
/// stay alive for the in-flight half to stay readable.
fn read_partition(tier: &MemoryTier) -> (Arc<PartitionBuffer>, SpillBatch, Vec<i64>) {
    let payload = Bytes::from(vec![0x5Au8; READ_BLOCK_LEN]);
    let buf = partition(tier);
    let ids: Vec<i64> = (0..READ_PARTITION_BLOCKS as i64)
        .map(|i| LAYOUT.block_id(i / READ_TASKS, 0, i % READ_TASKS))
        .collect();
    let mut in_flight = None;
    for (n, chunk) in ids.chunks(BLOCKS_PER_SEND).enumerate() {
        let blocks: Vec<Block> = chunk
            .iter()
            .map(|&id| block(id, LAYOUT.task_attempt_of(id), &payload))
            .collect();
        let charged = blocks.iter().map(Block::charged_len).sum();
        let mut reservation = tier.budget().try_reserve(charged).expect("budget fits");
        buf.insert(blocks, Payloads::Shared, &mut reservation)
            .expect("inserts");
        if (n + 1) * BLOCKS_PER_SEND >= READ_PARTITION_BLOCKS / 2 && in_flight.is_none() {
            in_flight = buf.begin_spill(&std::sync::atomic::AtomicU64::new(1));
        }
    }
    let in_flight = in_flight.expect("something was staged");
    (buf, in_flight, ids)
}

fn bench_read(c: &mut Criterion) {
    let tier = MemoryTier::new(MemoryBudget::new(1 << 30, 0.8, 0.2));
    let (buf, _in_flight, ids) = read_partition(&tier);
    let expected: RoaringTreemap = (0..READ_TASKS as u64 / 2).collect();
    let middle = ids[READ_PARTITION_BLOCKS / 2 - 1];

    let mut group = c.benchmark_group("memory_read");
    group.throughput(Throughput::Bytes(READ_BYTES));
    for (cursor, last_block_id) in [("from_start", -1), ("from_middle", middle)] {
        for (filter, expected_tasks) in [("all_tasks", None), ("half_tasks", Some(&expected))] {
            let req = MemoryReadRequest {
                last_block_id,
                max_bytes: READ_BYTES,
                expected_tasks: expected_tasks.cloned(),
            };
            let answer = buf.read(&req);
            assert_eq!(answer.data_len(), READ_BYTES, "reads a full 1 MiB");
            group.bench_function(BenchmarkId::new(cursor, filter), |b| {
                b.iter(|| buf.read(black_box(&req)))
            });
        }
    }
    group.finish();
}

/// `criterion_group!` defines an undocumented `pub fn`; a private module keeps `missing_docs`
/// quiet without silencing it for the whole file.
mod groups {
    use super::{bench_insert, bench_read};
    use criterion::criterion_group;

    criterion_group!(benches, bench_insert, bench_read);
}

criterion_main!(groups::benches);
