//! The storage tiers behind the app registry: the trait every leaf tier implements, and the
//! block types that travel from the planes through memory to files.
//!
//! ```text
//!  sendShuffleData ─▶ TieredStore ─▶ MemoryTier (hot) ──Spiller──▶ TierRouter ─▶ LocalFileTier (warm)
//!                                        ▲ reads by block cursor     (Route,     ─▶ HdfsTier, ObjectTier
//!                                                                     admission)    (cold)
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

pub use crate::audit::storage::StorageSite;
use crate::error::Result;
use crate::ids::{AppId, PartitionKey, ShuffleKey};

pub mod admission;
pub mod causes;
pub mod failures;
pub mod flush_stats;
pub mod hdfs;
pub mod index;
pub mod localfile;
pub mod memory;
pub mod object;
pub mod pairs;
pub mod quota;
pub mod remote;
pub mod router;
pub mod spill;
pub mod spill_pools;
pub mod tiered;
pub mod usage;

#[cfg(test)]
pub mod conformance;
#[cfg(test)]
pub mod faulty;

/// One shuffle block as the client sent it. The payload is a slice of the request buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Client-built id (sequence | partition | task attempt).
    pub block_id: i64,
    /// The writer's task attempt id (Spark: map index and attempt number).
    pub task_attempt_id: i64,
    /// Length before compression; stored and echoed, never interpreted.
    pub uncompress_length: i32,
    /// CRC-32 of `data` as sent; stored and echoed, checked only by readers.
    pub crc: i64,
    /// The compressed payload; `data.len()` is the block's `length`.
    pub data: Bytes,
}

impl Block {
    /// Per-block metadata charged on top of the payload, as the Java server and client
    /// count it (block id, crc, task attempt as 3×8 bytes, two lengths as 2×4).
    pub const METADATA_BYTES: u64 = 32;

    /// The block's `length` field.
    pub fn len(&self) -> i32 {
        self.data.len() as i32
    }

    /// True for a zero-length payload (legal: empty map outputs).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Bytes of write memory this block costs: payload + [`Block::METADATA_BYTES`]. The gRPC
    /// client's `requireSize` is the sum of this over a request.
    pub fn charged_len(&self) -> u64 {
        self.data.len() as u64 + Self::METADATA_BYTES
    }
}

/// How the payloads of a send are held when they reach the memory tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payloads {
    /// Slices of one request buffer (gRPC): each partition's payloads are copied into one
    /// allocation of their own, so that a small block kept in memory cannot pin the whole
    /// request after the budget released the rest.
    Shared,
    /// Each in an allocation of exactly its size (the Netty plane receives them so): stored
    /// as they are, with no copy.
    Owned,
}

/// An ordered, immutable run of blocks of one partition range, shared between the memory tier
/// (which keeps serving it) and the tier it is being spilled to.
#[derive(Clone, Debug, Default)]
pub struct BlockBatch {
    blocks: Arc<[Block]>,
    data_bytes: u64,
}

impl BlockBatch {
    /// Wraps blocks in their final order.
    pub fn new(blocks: Vec<Block>) -> Self {
        let data_bytes = blocks.iter().map(|b| b.data.len() as u64).sum();
        BlockBatch {
            blocks: blocks.into(),
            data_bytes,
        }
    }

    /// The blocks, in write order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Sum of payload lengths (what lands in a data file).
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Sum of charged lengths (what the batch costs in memory).
    pub fn charged_bytes(&self) -> u64 {
        self.data_bytes + self.blocks.len() as u64 * Block::METADATA_BYTES
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// True when there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

/// The remote location an app registered (`registerShuffle.remoteStorage`), where the HDFS or
/// object-store tier writes that app's files.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RemoteStorage {
    /// Root path, e.g. `hdfs://ns/rss` or `s3a://bucket/rss`.
    pub path: String,
    /// Hadoop conf items applied on top of the server's (s3a keys among them).
    pub conf: Vec<(String, String)>,
}

/// Secrets among the conf items (`fs.s3a.secret.key`, …) are masked, so logging a
/// `RemoteStorage` never leaks them.
impl std::fmt::Debug for RemoteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let conf: Vec<(&str, String)> = self
            .conf
            .iter()
            .map(|(k, v)| (k.as_str(), crate::config::sensitive::shown(k, v)))
            .collect();
        f.debug_struct("RemoteStorage")
            .field("path", &self.path)
            .field("conf", &conf)
            .finish()
    }
}

/// Which tier a value belongs to; also the label used in logs and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TierKind {
    /// Memory buffers (hot).
    Memory,
    /// Local files on the data paths (warm).
    LocalFile,
    /// HDFS (cold).
    Hdfs,
}

impl TierKind {
    /// Short lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            TierKind::Memory => "memory",
            TierKind::LocalFile => "localfile",
            TierKind::Hdfs => "hdfs",
        }
    }
}

/// What a purge removes. A purge never touches data outside its scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PurgeScope {
    /// Everything of one app.
    App(AppId),
    /// Everything of one shuffle.
    Shuffle(ShuffleKey),
    /// One partition range (the spiller's cleanup after a purge raced its write).
    Partition(PartitionKey),
}

impl PurgeScope {
    /// Everything of `app`'s shuffle `shuffle`.
    pub fn shuffle(app: AppId, shuffle: i32) -> Self {
        PurgeScope::Shuffle(ShuffleKey { app, shuffle })
    }

    /// The app the scope belongs to.
    pub fn app(&self) -> &AppId {
        match self {
            PurgeScope::App(app) => app,
            PurgeScope::Shuffle(key) => &key.app,
            PurgeScope::Partition(key) => &key.app,
        }
    }

    /// Where in the app the scope lies: its shuffle and range, `None` for "all of them", the
    /// folder levels the remote tiers delete under.
    pub fn within_app(&self) -> (Option<i32>, Option<crate::ids::PartitionRange>) {
        match self {
            PurgeScope::App(_) => (None, None),
            PurgeScope::Shuffle(k) => (Some(k.shuffle), None),
            PurgeScope::Partition(k) => (Some(k.shuffle), Some(k.range)),
        }
    }

    /// True when `part` is inside the scope.
    pub fn covers(&self, part: &PartitionKey) -> bool {
        match self {
            PurgeScope::App(app) => &part.app == app,
            PurgeScope::Shuffle(key) => part.app == key.app && part.shuffle == key.shuffle,
            PurgeScope::Partition(key) => part == key,
        }
    }
}

/// Whether a tier can take new writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    /// False when the tier should not be chosen for new data.
    pub writable: bool,
    /// Human-readable detail (which disks are full or failing).
    pub detail: String,
}

impl Health {
    /// A healthy tier.
    pub fn ok() -> Self {
        Health {
            writable: true,
            detail: String::new(),
        }
    }
}

/// A storage tier that durable data is spilled to.
///
/// # Contract
/// - `append` writes the whole batch after everything previously appended to the same
///   partition. `Ok` means every block of the batch can be read back from this tier (for file
///   tiers: data and index records are written, data first). The spiller releases the memory of
///   a batch only after `Ok`. On `Err` nothing of the batch is visible to readers, and the
///   partition stays appendable (a retry starts where the last `Ok` ended).
/// - Appends to the same partition may be called concurrently; the tier serializes them.
/// - `purge` removes exactly the data inside the scope and returns the bytes freed.
#[async_trait]
pub trait Tier: Send + Sync + 'static {
    /// Which tier this is.
    fn kind(&self) -> TierKind;

    /// Appends a batch to a partition; see the trait contract.
    async fn append(&self, part: &PartitionKey, batch: &BlockBatch) -> Result<()>;

    /// Deletes all data inside `scope`; returns bytes freed.
    async fn purge(&self, scope: &PurgeScope) -> Result<u64>;

    /// Makes what was appended inside `scope` final, for a commit (`finishShuffle`): a tier
    /// that keeps files open between appends closes them (HDFS), as Java's commit returns
    /// with every flushed file closed. What an append wrote is readable before this; a
    /// failure here loses nothing, so it is logged by the tier, not returned. Default: the
    /// tier keeps nothing open.
    async fn seal(&self, _scope: &PurgeScope) {}

    /// Whether new partitions should be placed here.
    fn health(&self) -> Health;

    /// Where `part`'s data lives (a disk path, a storage host), for the per-location flush
    /// metrics (`local_disk_path`, `storage_host` labels). Default: not tracked.
    fn location(&self, _part: &PartitionKey) -> Option<String> {
        None
    }

    /// Where `part`'s last append went as Java's storage audit names it (`local` + the disk's
    /// base path; the remote storage's host + path). Default: the app's one site in
    /// [`Tier::sites`] (a remote tier's); a tier that spreads an app over several says which.
    fn site(&self, part: &PartitionKey) -> Option<StorageSite> {
        self.sites(&part.app).pop()
    }

    /// Every storage a purge of `app` deletes from, as Java's storage audit lists them (each
    /// healthy local disk; the app's remote storage if it has one). Asked before the purge.
    /// Default: none.
    fn sites(&self, _app: &AppId) -> Vec<StorageSite> {
        Vec::new()
    }
}

/// Where an appended batch landed: the labels of the per-tier, per-location flush metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The tier that took the batch.
    pub kind: TierKind,
    /// The tier's [`Tier::location`] for the batch's partition.
    pub location: Option<String>,
    /// The tier's [`Tier::site`] for the batch's partition (the storage audit's host and path).
    pub site: Option<StorageSite>,
}

/// The raw index of a partition as the client reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexRead {
    /// Whole 40-byte records only.
    pub index: Bytes,
    /// Length of the data file when the index was read; every record points below it.
    pub data_len: u64,
    /// One id per index part (the disk index); empty when there is no file.
    pub storage_ids: Vec<i32>,
}

/// A byte range of a partition's logical data file, as `getLocalShuffleData` names it: kept as
/// offset and length (not a `Range`), so a client's `offset + length` past `u64` is a span that
/// reads fail, not an overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub offset: u64,
    /// Bytes from there.
    pub len: u64,
}

impl Span {
    /// `len` bytes at `offset`.
    pub const fn at(offset: u64, len: u64) -> Self {
        Span { offset, len }
    }
}

/// A tier whose partitions are files read back by index and byte range (local files; the
/// server side of HDFS).
#[async_trait]
pub trait FileTier: Tier {
    /// The partition's index. A partition with no file answers an empty [`IndexRead`].
    async fn read_index(&self, part: &PartitionKey) -> Result<IndexRead>;

    /// Exactly the bytes of `span` in the partition's data file; a span past the end of what
    /// has been durably written is an error, never a short answer.
    async fn read_data(&self, part: &PartitionKey, span: Span) -> Result<Bytes>;

    /// The same span as [`FileTier::read_data`], for a transport that can send file bytes
    /// itself (sendfile): a tier with local files answers open files and ranges, so the bytes
    /// never pass through user space. The default reads them into memory.
    async fn read_data_ranges(&self, part: &PartitionKey, span: Span) -> Result<DataRead> {
        Ok(DataRead::Memory(self.read_data(part, span).await?))
    }
}

/// A data read as handed to a transport: bytes in memory, or committed ranges of open files.
#[derive(Debug)]
pub enum DataRead {
    /// The bytes, read into memory.
    Memory(Bytes),
    /// Ranges to send in order; together exactly the length asked for.
    Files(Vec<FileRange>),
}

impl DataRead {
    /// Bytes in the read.
    pub fn len(&self) -> u64 {
        match self {
            DataRead::Memory(b) => b.len() as u64,
            DataRead::Files(ranges) => ranges.iter().map(|r| r.len).sum(),
        }
    }

    /// True for an empty read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A committed range of an open data file. The file was checked to hold the whole range when
/// it was opened; an open file keeps its bytes readable even if the partition is purged while
/// the range is being sent.
#[derive(Debug)]
pub struct FileRange {
    /// The data file, opened for reading.
    pub file: std::fs::File,
    /// Where the range starts in the file.
    pub offset: u64,
    /// Bytes in the range.
    pub len: u64,
}
