//! The conformance suites every [`FileTier`] must pass (local files now, HDFS later).
//!
//! Each suite is a `pub async fn` taking `&dyn FileTier` that panics on the first violation,
//! so a tier's test module just calls [`run_all`]. Suites use their own app ids (prefixed
//! `conformance-`) and purge them first, so they can run in any order, repeatedly, on one
//! tier. They check what a Uniffle client relies on (DATA-FORMATS §3.3): whole 40-byte
//! records, contiguous offsets starting at 0, every record inside `data_len`, bytes read back
//! identical, and batches never interleaved.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;

use crate::ids::{AppId, PartitionKey, PartitionRange};
use crate::store::index::IndexEntry;
use crate::store::{Block, BlockBatch, DataRead, FileTier, PurgeScope, Span};

/// Runs every suite below, in order.
pub async fn run_all(tier: &dyn FileTier) {
    append_then_read(tier).await;
    appends_accumulate_in_order(tier).await;
    concurrent_appends_to_one_partition(tier).await;
    many_partitions(tier).await;
    purge_shuffle_keeps_siblings(tier).await;
    purge_app(tier).await;
    empty_batch(tier).await;
    read_past_end_fails(tier).await;
    unknown_partition_reads_empty(tier).await;
}

/// One batch (including a zero-length block) reads back byte-identical, per block and as one
/// segment-sized range read.
pub async fn append_then_read(tier: &dyn FileTier) {
    let app = fresh_app(tier, "conformance-append-read").await;
    let p = part(&app, 0, 3);
    let batch = BlockBatch::new(vec![
        test_block(1, 7, payload(1, 1000)),
        test_block(2, 7, Bytes::new()),
        test_block(3, 8, payload(3, 4096)),
        test_block(4, 7, payload(4, 1)),
    ]);
    tier.append(&p, &batch).await.expect("append");
    assert_blocks_eq(&read_back(tier, &p).await, batch.blocks());
    let idx = tier.read_index(&p).await.expect("read_index");
    assert_eq!(
        idx.data_len,
        batch.data_bytes(),
        "data_len after one append"
    );
    tier.purge(&PurgeScope::App(app)).await.expect("purge");
}

/// Several appends accumulate in call order; after each, exactly the blocks so far are seen.
pub async fn appends_accumulate_in_order(tier: &dyn FileTier) {
    let app = fresh_app(tier, "conformance-accumulate").await;
    let p = part(&app, 1, 0);
    let mut want = Vec::new();
    for round in 0..5i64 {
        let blocks: Vec<Block> = (0..3)
            .map(|i| {
                let id = round * 10 + i;
                test_block(
                    id,
                    round,
                    payload(id as u64, 100 + (id as usize * 37) % 700),
                )
            })
            .collect();
        tier.append(&p, &BlockBatch::new(blocks.clone()))
            .await
            .expect("append");
        want.extend(blocks);
        assert_blocks_eq(&read_back(tier, &p).await, &want);
    }
    tier.purge(&PurgeScope::App(app)).await.expect("purge");
}

/// Sixteen appends to one partition in flight at once: all land, contiguous, none lost, and
/// the blocks of one batch stay together in batch order.
pub async fn concurrent_appends_to_one_partition(tier: &dyn FileTier) {
    const WRITERS: i64 = 16;
    const PER_BATCH: i64 = 3;
    let app = fresh_app(tier, "conformance-concurrent").await;
    let p = part(&app, 0, 0);
    let batches: Vec<BlockBatch> = (0..WRITERS)
        .map(|task| {
            BlockBatch::new(
                (0..PER_BATCH)
                    .map(|i| {
                        let id = task * 100 + i;
                        test_block(id, task, payload(id as u64, 500 + (id as usize % 7) * 300))
                    })
                    .collect(),
            )
        })
        .collect();
    let results = join_all(batches.iter().map(|b| tier.append(&p, b)).collect()).await;
    for r in results {
        r.expect("concurrent append");
    }
    let got = read_back(tier, &p).await;
    assert_eq!(
        got.len(),
        (WRITERS * PER_BATCH) as usize,
        "every block lands"
    );
    let mut tasks = Vec::new();
    for chunk in got.chunks(PER_BATCH as usize) {
        let task = chunk[0].task_attempt_id;
        assert_blocks_eq(chunk, batches[task as usize].blocks());
        tasks.push(task);
    }
    tasks.sort_unstable();
    assert_eq!(
        tasks,
        (0..WRITERS).collect::<Vec<_>>(),
        "every batch lands once"
    );
    tier.purge(&PurgeScope::App(app)).await.expect("purge");
}

/// Many partitions over several shuffles, appended interleaved, each read back intact.
pub async fn many_partitions(tier: &dyn FileTier) {
    let app = fresh_app(tier, "conformance-many").await;
    let mut want: Vec<(PartitionKey, Vec<Block>)> = Vec::new();
    for shuffle in 0..3 {
        for p in 0..12 {
            want.push((part(&app, shuffle, p), Vec::new()));
        }
    }
    for round in 0..2i64 {
        for (n, (p, blocks)) in want.iter_mut().enumerate() {
            let id = (n as i64) * 10 + round;
            let b = test_block(id, round, payload(id as u64, 64 + (n * 53) % 2000));
            tier.append(p, &BlockBatch::new(vec![b.clone()]))
                .await
                .expect("append");
            blocks.push(b);
        }
    }
    for (p, blocks) in &want {
        assert_blocks_eq(&read_back(tier, p).await, blocks);
    }
    tier.purge(&PurgeScope::App(app)).await.expect("purge");
}

/// Purging one shuffle empties exactly its partitions: the app's other shuffle, another app
/// with the same shuffle id, and an app whose id extends the purged one stay intact. The
/// purged partition can be written again from offset 0.
pub async fn purge_shuffle_keeps_siblings(tier: &dyn FileTier) {
    let a = fresh_app(tier, "conformance-purge-shuffle").await;
    let b = fresh_app(tier, "conformance-purge-shuffle-other").await;
    let gone = [part(&a, 1, 0), part(&a, 1, 1)];
    let kept = [part(&a, 2, 0), part(&b, 1, 0), part(&b, 1, 1)];
    let mut kept_batches = Vec::new();
    let mut gone_bytes = 0;
    for (n, p) in gone.iter().chain(kept.iter()).enumerate() {
        let batch = BlockBatch::new(vec![test_block(n as i64, 0, payload(n as u64, 777))]);
        tier.append(p, &batch).await.expect("append");
        if n < gone.len() {
            gone_bytes += batch.data_bytes();
        } else {
            kept_batches.push(batch);
        }
    }
    let freed = tier
        .purge(&PurgeScope::shuffle(a.clone(), 1))
        .await
        .expect("purge shuffle");
    assert!(
        freed >= gone_bytes,
        "freed {freed} < purged data {gone_bytes}"
    );
    for p in &gone {
        assert_unknown(tier, p).await;
    }
    for (p, batch) in kept.iter().zip(&kept_batches) {
        assert_blocks_eq(&read_back(tier, p).await, batch.blocks());
    }
    let again = BlockBatch::new(vec![test_block(99, 1, payload(99, 10))]);
    tier.append(&gone[0], &again)
        .await
        .expect("append after purge");
    assert_blocks_eq(&read_back(tier, &gone[0]).await, again.blocks());
    tier.purge(&PurgeScope::App(a)).await.expect("purge");
    tier.purge(&PurgeScope::App(b)).await.expect("purge");
}

/// Purging an app empties all its shuffles and leaves other apps intact.
pub async fn purge_app(tier: &dyn FileTier) {
    let a = fresh_app(tier, "conformance-purge-app").await;
    let b = fresh_app(tier, "conformance-purge-app-other").await;
    let gone = [part(&a, 0, 0), part(&a, 5, 2)];
    let kept = part(&b, 0, 0);
    for (n, p) in gone.iter().enumerate() {
        let batch = BlockBatch::new(vec![test_block(n as i64, 0, payload(n as u64, 300))]);
        tier.append(p, &batch).await.expect("append");
    }
    let kept_batch = BlockBatch::new(vec![test_block(50, 0, payload(50, 300))]);
    tier.append(&kept, &kept_batch).await.expect("append");
    let freed = tier
        .purge(&PurgeScope::App(a.clone()))
        .await
        .expect("purge app");
    assert!(freed >= 600, "freed {freed} < purged data 600");
    for p in &gone {
        assert_unknown(tier, p).await;
    }
    assert_blocks_eq(&read_back(tier, &kept).await, kept_batch.blocks());
    tier.purge(&PurgeScope::App(b)).await.expect("purge");
}

/// An empty batch is `Ok` and writes nothing, on a new partition and on one with data.
pub async fn empty_batch(tier: &dyn FileTier) {
    let app = fresh_app(tier, "conformance-empty").await;
    let fresh = part(&app, 0, 0);
    tier.append(&fresh, &BlockBatch::new(Vec::new()))
        .await
        .expect("empty append");
    let idx = tier.read_index(&fresh).await.expect("read_index");
    assert!(idx.index.is_empty(), "empty batch wrote index records");
    assert_eq!(idx.data_len, 0);

    let used = part(&app, 0, 1);
    let batch = BlockBatch::new(vec![test_block(1, 0, payload(1, 50))]);
    tier.append(&used, &batch).await.expect("append");
    tier.append(&used, &BlockBatch::default())
        .await
        .expect("empty append");
    assert_blocks_eq(&read_back(tier, &used).await, batch.blocks());
    tier.purge(&PurgeScope::App(app)).await.expect("purge");
}

/// A range past the committed data is an error, never a short answer; reading up to the end
/// (and a zero-length read there) works.
pub async fn read_past_end_fails(tier: &dyn FileTier) {
    let app = fresh_app(tier, "conformance-past-end").await;
    let p = part(&app, 0, 0);
    tier.append(
        &p,
        &BlockBatch::new(vec![test_block(1, 0, payload(1, 100))]),
    )
    .await
    .expect("append");
    assert_eq!(
        tier.read_data(&p, Span::at(0, 100))
            .await
            .expect("whole")
            .len(),
        100
    );
    assert_eq!(
        tier.read_data(&p, Span::at(60, 40))
            .await
            .expect("tail")
            .len(),
        40
    );
    assert!(tier
        .read_data(&p, Span::at(100, 0))
        .await
        .expect("empty at end")
        .is_empty());
    assert_eq!(
        materialize(
            tier.read_data_ranges(&p, Span::at(60, 40))
                .await
                .expect("tail")
        )
        .len(),
        40
    );
    for (offset, len) in [(0, 101), (100, 1), (99, 2), (1000, 1), (u64::MAX, 2)] {
        assert!(
            tier.read_data(&p, Span::at(offset, len)).await.is_err(),
            "read at {offset} length {len} of 100 bytes must fail"
        );
        assert!(
            tier.read_data_ranges(&p, Span::at(offset, len))
                .await
                .is_err(),
            "ranges at {offset} length {len} of 100 bytes must fail"
        );
    }
    tier.purge(&PurgeScope::App(app)).await.expect("purge");
}

/// A partition never written answers an empty index, and a data read of it fails.
pub async fn unknown_partition_reads_empty(tier: &dyn FileTier) {
    let app = fresh_app(tier, "conformance-unknown").await;
    assert_unknown(tier, &part(&app, 4, 4)).await;
}

// ---- helpers, public so tier-specific tests can build on them ----

/// A partition key for a single-partition range (the Spark shape).
pub fn part(app: &AppId, shuffle: i32, partition: i32) -> PartitionKey {
    let range = PartitionRange::new(partition, partition).expect("valid test range");
    PartitionKey::new(app.clone(), shuffle, range)
}

/// A block with a correct CRC and an uncompressed length of twice the payload.
pub fn test_block(block_id: i64, task_attempt_id: i64, data: Bytes) -> Block {
    Block {
        block_id,
        task_attempt_id,
        uncompress_length: (data.len() * 2) as i32,
        crc: i64::from(crc32fast::hash(&data)),
        data,
    }
}

/// `len` deterministic pseudo-random bytes derived from `seed`.
pub fn payload(seed: u64, len: usize) -> Bytes {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

/// Reads a partition back the way a client does and checks the client's rules on the way:
/// whole 40-byte records, offsets contiguous from 0, every record inside `data_len`, one range
/// read for all records equal to the per-block reads, each block matching its CRC.
pub async fn read_back(tier: &dyn FileTier, p: &PartitionKey) -> Vec<Block> {
    let idx = tier.read_index(p).await.expect("read_index");
    assert_eq!(
        idx.index.len() % IndexEntry::SIZE,
        0,
        "{p}: partial index record"
    );
    let entries = IndexEntry::decode_all(&idx.index);
    if entries.is_empty() {
        return Vec::new();
    }
    assert!(!idx.storage_ids.is_empty(), "{p}: index without storage id");
    let mut end = 0u64;
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.offset as u64, end, "{p}: record {i} is not contiguous");
        assert!(e.length >= 0, "{p}: record {i} has a negative length");
        end += e.length as u64;
        assert!(
            end <= idx.data_len,
            "{p}: record {i} ends past data_len {}",
            idx.data_len
        );
    }
    let all = tier
        .read_data(p, Span::at(0, end))
        .await
        .expect("segment read");
    assert_eq!(all.len() as u64, end, "{p}: short segment read");
    let mut blocks = Vec::with_capacity(entries.len());
    for e in &entries {
        let (start, len) = (e.offset as usize, e.length as usize);
        let data = all.slice(start..start + len);
        let single = tier
            .read_data(p, Span::at(e.offset as u64, e.length as u64))
            .await
            .expect("block read");
        assert_eq!(
            single, data,
            "{p}: block {} differs between reads",
            e.block_id
        );
        let ranges = tier
            .read_data_ranges(p, Span::at(e.offset as u64, e.length as u64))
            .await
            .expect("block ranges");
        assert_eq!(
            materialize(ranges),
            data,
            "{p}: block {} differs between a read and its file ranges",
            e.block_id
        );
        assert_eq!(
            i64::from(crc32fast::hash(&data)),
            e.crc,
            "{p}: block {} fails its CRC",
            e.block_id
        );
        blocks.push(Block {
            block_id: e.block_id,
            task_attempt_id: e.task_attempt_id,
            uncompress_length: e.uncompress_length,
            crc: e.crc,
            data,
        });
    }
    blocks
}

/// Asserts two block lists are equal field by field, naming the first difference.
pub fn assert_blocks_eq(got: &[Block], want: &[Block]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "block {i} differs");
    }
    assert_eq!(got.len(), want.len(), "block count differs");
}

/// Asserts the tier knows nothing of `p`: empty index, failing data read.
pub async fn assert_unknown(tier: &dyn FileTier, p: &PartitionKey) {
    let idx = tier
        .read_index(p)
        .await
        .expect("read_index of unknown partition");
    assert!(idx.index.is_empty(), "{p}: expected an empty index");
    assert_eq!(idx.data_len, 0, "{p}: expected data_len 0");
    assert!(idx.storage_ids.is_empty(), "{p}: expected no storage ids");
    assert!(
        tier.read_data(p, Span::at(0, 1)).await.is_err(),
        "{p}: data read of an unknown partition must fail"
    );
}

/// An app id for a suite, with anything a previous run left behind purged.
async fn fresh_app(tier: &dyn FileTier, name: &str) -> AppId {
    let app = AppId::parse(name).expect("valid suite app id");
    tier.purge(&PurgeScope::App(app.clone()))
        .await
        .expect("purge before suite");
    app
}

/// Drives all futures concurrently on the current task (the suites only borrow the tier, so
/// they cannot spawn) and returns their outputs in order.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (fut, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

/// The bytes a [`DataRead`] stands for, as a transport would send them (file ranges read
/// with positioned reads, as sendfile does).
pub fn materialize(read: DataRead) -> Bytes {
    use std::os::unix::fs::FileExt;
    match read {
        DataRead::Memory(b) => b,
        DataRead::Files(ranges) => {
            let mut out = Vec::new();
            for r in ranges {
                let at = out.len();
                out.resize(at + r.len as usize, 0);
                r.file
                    .read_exact_at(&mut out[at..], r.offset)
                    .expect("a file range holds its bytes");
            }
            Bytes::from(out)
        }
    }
}

/// A remote tier (HDFS, object storage) whose apps must be registered before their first
/// write: registers each app a suite picks on first use, as `registerShuffle` would, then
/// hands every call to the tier.
pub struct Registering<T> {
    /// The tier under test.
    pub tier: std::sync::Arc<T>,
    register: RegisterFn<T>,
}

/// How [`Registering`] registers an app with its tier.
type RegisterFn<T> = Box<dyn Fn(&T, &AppId) + Send + Sync>;

impl<T> Registering<T> {
    /// `register(tier, app)` runs before every call naming `app` (it decides whether the app
    /// is registered already).
    pub fn new(
        tier: std::sync::Arc<T>,
        register: impl Fn(&T, &AppId) + Send + Sync + 'static,
    ) -> Self {
        Registering {
            tier,
            register: Box::new(register),
        }
    }

    fn ensure(&self, app: &AppId) {
        (self.register)(&self.tier, app)
    }
}

#[async_trait::async_trait]
impl<T: FileTier> crate::store::Tier for Registering<T> {
    fn kind(&self) -> crate::store::TierKind {
        self.tier.kind()
    }
    async fn append(&self, part: &PartitionKey, batch: &BlockBatch) -> crate::error::Result<()> {
        self.ensure(&part.app);
        self.tier.append(part, batch).await
    }
    async fn purge(&self, scope: &PurgeScope) -> crate::error::Result<u64> {
        self.ensure(scope.app());
        self.tier.purge(scope).await
    }
    fn health(&self) -> crate::store::Health {
        self.tier.health()
    }
}

#[async_trait::async_trait]
impl<T: FileTier> FileTier for Registering<T> {
    async fn read_index(
        &self,
        part: &PartitionKey,
    ) -> crate::error::Result<crate::store::IndexRead> {
        self.ensure(&part.app);
        self.tier.read_index(part).await
    }
    async fn read_data(&self, part: &PartitionKey, span: Span) -> crate::error::Result<Bytes> {
        self.ensure(&part.app);
        self.tier.read_data(part, span).await
    }
}
