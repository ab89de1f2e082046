//! `RegistryStats`: request-level counters of the registry (bytes received and served,
//! refusals, lifetime app counts). Plain atomics bumped at the registry's choke points, which
//! both planes (gRPC, Netty) go through; `/metrics` reads them at scrape time.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::summary::Summary;

/// Lifetime counters and in-progress gauges of the registry.
#[derive(Default)]
pub struct RegistryStats {
    /// Charged bytes of every accepted send (`total_received_data`).
    pub received_bytes: AtomicU64,
    /// Bytes served by every read kind (`total_read_data`).
    pub read_bytes: AtomicU64,
    /// Bytes served from data files (`total_read_local_data_file`).
    pub read_data_file_bytes: AtomicU64,
    /// Bytes served from index files (`total_read_local_index_file`).
    pub read_index_file_bytes: AtomicU64,
    /// Bytes served from memory (`total_read_memory_data`).
    pub read_memory_bytes: AtomicU64,
    /// Milliseconds spent in file reads (`total_read_time`).
    pub read_time_ms: AtomicU64,
    /// Read-memory requests (`total_require_read_memory_num`).
    pub read_memory_requests: AtomicU64,
    /// Read-memory refusals (`total_require_read_memory_failed_num`).
    pub read_memory_refused: AtomicU64,
    /// `requireBuffer` refusals for lack of memory, regular partitions.
    pub require_failed_regular: AtomicU64,
    /// `requireBuffer` refusals because a huge partition holds too much memory.
    pub require_failed_huge: AtomicU64,
    /// Sends refused past the huge-partition hard limit.
    pub huge_hard_limit: AtomicU64,
    /// Apps created since start (`total_app_num`).
    pub apps_created: AtomicU64,
    /// Partition ranges registered since start (`total_partition_num`).
    pub ranges_registered: AtomicU64,
    /// Requests for apps the server does not know (`total_app_not_found_num`).
    pub app_not_found: AtomicU64,
    /// File bytes deleted by unregisters and app purges (`total_delete_data`).
    pub deleted_bytes: AtomicU64,
    /// Data-file reads in progress.
    pub reading_data_files: AtomicI64,
    /// Index-file reads in progress.
    pub reading_index_files: AtomicI64,
    /// Memory reads in progress.
    pub reading_memory: AtomicI64,
    /// Partition ranges found huge since start (`total_huge_partition_num`).
    pub huge_partitions: AtomicU64,
    /// Apps that had a huge partition since start (`total_app_with_huge_partition_num`).
    pub apps_with_huge: AtomicU64,
    /// Spill events of purged apps (`total_delete_file_num`, see [`crate::store::flush_stats`]).
    pub deleted_files: AtomicU64,
    /// How long removals took (`total_remove_resource_time`,
    /// `total_remove_resource_by_shuffle_ids_time`).
    pub removals: Removals,
    /// `write_block_size`, when switched on ([`AppRegistry::enable_block_sizes`]).
    ///
    /// [`AppRegistry::enable_block_sizes`]: crate::app::AppRegistry::enable_block_sizes
    pub block_sizes: std::sync::OnceLock<crate::app::block_sizes::BlockSizes>,
}

/// Durations of resource removals, in seconds, as Java's two summaries: an app's (expiry or
/// `unregisterShuffleByAppId`) from taking it out of memory until its files are deleted, and
/// a shuffle's (`unregisterShuffle`). Removals are rare, so a summary's short lock is no cost.
pub struct Removals {
    /// `total_remove_resource_time`.
    pub app: Arc<Summary>,
    /// `total_remove_resource_by_shuffle_ids_time`.
    pub shuffle: Arc<Summary>,
}

impl Default for Removals {
    fn default() -> Self {
        // Java registers both without labels (`MetricsManager.addSummary`), so no `tags`.
        let summary =
            |name: &str| Arc::new(Summary::new(name, &[]).expect("a constant, valid metric name"));
        Removals {
            app: summary("total_remove_resource_time"),
            shuffle: summary("total_remove_resource_by_shuffle_ids_time"),
        }
    }
}

/// Which kind of read a [`ReadGuard`] counts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ReadKind {
    DataFile,
    IndexFile,
    Memory,
}

/// Counts one read in progress and, when it succeeds, its bytes and time.
pub(crate) struct ReadGuard<'a> {
    stats: &'a RegistryStats,
    kind: ReadKind,
    started: Instant,
}

impl RegistryStats {
    fn in_progress(&self, kind: ReadKind) -> &AtomicI64 {
        match kind {
            ReadKind::DataFile => &self.reading_data_files,
            ReadKind::IndexFile => &self.reading_index_files,
            ReadKind::Memory => &self.reading_memory,
        }
    }

    /// Starts counting a read.
    pub(crate) fn begin_read(&self, kind: ReadKind) -> ReadGuard<'_> {
        self.in_progress(kind).fetch_add(1, Ordering::Relaxed);
        ReadGuard {
            stats: self,
            kind,
            started: Instant::now(),
        }
    }

    /// Counts a `requireBuffer` refusal by its cause.
    pub(crate) fn require_outcome<T>(&self, result: &Result<T>) {
        match result {
            Err(Error::NoBuffer { .. }) => {
                self.require_failed_regular.fetch_add(1, Ordering::Relaxed);
            }
            Err(Error::NoBufferForHugePartition { .. }) => {
                self.require_failed_huge.fetch_add(1, Ordering::Relaxed);
            }
            Err(Error::HugePartitionHardLimit { .. }) => {
                self.huge_hard_limit.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// `requireBuffer` refusals of either kind (`total_require_buffer_failed`).
    pub fn require_failed(&self) -> u64 {
        self.require_failed_regular.load(Ordering::Relaxed)
            + self.require_failed_huge.load(Ordering::Relaxed)
    }
}

impl ReadGuard<'_> {
    /// The read served `bytes`.
    pub(crate) fn served(&self, bytes: u64) {
        let s = self.stats;
        s.read_bytes.fetch_add(bytes, Ordering::Relaxed);
        let (counter, timed) = match self.kind {
            ReadKind::DataFile => (&s.read_data_file_bytes, true),
            ReadKind::IndexFile => (&s.read_index_file_bytes, true),
            ReadKind::Memory => (&s.read_memory_bytes, false),
        };
        counter.fetch_add(bytes, Ordering::Relaxed);
        if timed {
            s.read_time_ms
                .fetch_add(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
    }
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.stats
            .in_progress(self.kind)
            .fetch_sub(1, Ordering::Relaxed);
    }
}
