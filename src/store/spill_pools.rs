//! `SpillPools`: the spiller's writers counted the way Java counts its flush thread pools
//! (`LocalFileFlushEventThreadPool_*`, `HadoopFlushEventThreadPool_*`,
//! `FallBackFlushEventThreadPool_*`). Plain atomics moved by guards around the spiller's
//! permit wait and append; `/metrics` reads them at scrape time.
//!
//! Java hands each flush event to the pool of the storage it picked (local files or HDFS),
//! and an event that failed and was re-queued to a separate fallback pool of 5 threads.
//! Spillway has no thread pools: one task per batch waits for one of `spill_concurrency`
//! permits and appends. So a first attempt counts in the pool of the tier it is routed to,
//! and every retry counts in the fallback pool, waiting both while it backs off and while it
//! waits for a permit (Java's pended event sits in the flush queue, then in the pool's).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::TierKind;

/// One pool's counters.
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Batches waiting for a spill permit (or, for retries, backing off).
    queued: AtomicU64,
    /// Appends in progress.
    active: AtomicU64,
    /// Appends finished, successful or not (Java's `getCompletedTaskCount`).
    completed: AtomicU64,
    /// Most appends this pool may run at once (its thread count in Java).
    limit: u64,
}

/// A point-in-time copy of one pool, in Java's terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolSnapshot {
    /// `_ThreadActiveCount`.
    pub active: u64,
    /// `_ThreadQueueWaitingTaskCount`.
    pub queued: u64,
    /// `_CompleteTaskCount`.
    pub completed: u64,
    /// `_ThreadMaxCount` and `_ThreadMinCount`: the pool is fixed-size, as Java's flush pools
    /// are (core = max).
    pub limit: u64,
}

impl PoolStats {
    fn new(limit: usize) -> Self {
        PoolStats {
            limit: limit as u64,
            ..PoolStats::default()
        }
    }

    /// Counts a batch as waiting until the guard drops.
    pub fn wait(&self) -> Waiting<'_> {
        self.queued.fetch_add(1, Ordering::Relaxed);
        Waiting(self)
    }

    /// Counts an append as running until the guard drops, then as completed.
    pub fn work(&self) -> Working<'_> {
        self.active.fetch_add(1, Ordering::Relaxed);
        Working(self)
    }

    /// The current numbers.
    pub fn snapshot(&self) -> PoolSnapshot {
        PoolSnapshot {
            active: self.active.load(Ordering::Relaxed),
            queued: self.queued.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            limit: self.limit,
        }
    }
}

/// See [`PoolStats::wait`].
pub struct Waiting<'a>(&'a PoolStats);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::Relaxed);
    }
}

/// See [`PoolStats::work`].
pub struct Working<'a>(&'a PoolStats);

impl Drop for Working<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
        self.0.completed.fetch_add(1, Ordering::Relaxed);
    }
}

/// The three pools of one spiller.
#[derive(Debug)]
pub struct SpillPools {
    local: PoolStats,
    hdfs: PoolStats,
    fallback: PoolStats,
    has_local: bool,
    has_hdfs: bool,
}

impl SpillPools {
    /// Pools for a spiller with `concurrency` permits. `hdfs_concurrency` is the HDFS tier's
    /// own append limit when the store type has HDFS; its appends also need a spill permit,
    /// so the smaller of the two is that pool's real size. Retries share the spill permits,
    /// so the fallback pool's size is `concurrency` (Java's is a fixed 5 threads).
    pub fn new(concurrency: usize, has_local: bool, hdfs_concurrency: Option<usize>) -> Self {
        let concurrency = concurrency.max(1);
        SpillPools {
            local: PoolStats::new(concurrency),
            hdfs: PoolStats::new(hdfs_concurrency.map_or(0, |h| h.max(1).min(concurrency))),
            fallback: PoolStats::new(concurrency),
            has_local,
            has_hdfs: hdfs_concurrency.is_some(),
        }
    }

    /// The pool of first attempts routed to `kind`.
    pub fn first(&self, kind: TierKind) -> &PoolStats {
        match kind {
            TierKind::Hdfs => &self.hdfs,
            _ => &self.local,
        }
    }

    /// The pool of retries.
    pub fn fallback(&self) -> &PoolStats {
        &self.fallback
    }

    /// The pools Java would have, by its name for them: the local-file pool when the store
    /// type has local files, the Hadoop pool when it has HDFS, and always the fallback pool.
    pub fn snapshots(&self) -> Vec<(&'static str, PoolSnapshot)> {
        let mut out = Vec::with_capacity(3);
        if self.has_local {
            out.push(("LocalFileFlushEventThreadPool", self.local.snapshot()));
        }
        if self.has_hdfs {
            out.push(("HadoopFlushEventThreadPool", self.hdfs.snapshot()));
        }
        out.push(("FallBackFlushEventThreadPool", self.fallback.snapshot()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_move_a_batch_from_queued_to_active_to_completed() {
        let pools = SpillPools::new(4, true, None);
        let pool = pools.first(TierKind::LocalFile);
        let waiting = pool.wait();
        assert_eq!(pool.snapshot().queued, 1);
        drop(waiting);
        let working = pool.work();
        let s = pool.snapshot();
        assert_eq!((s.queued, s.active, s.completed), (0, 1, 0));
        drop(working);
        let s = pool.snapshot();
        assert_eq!((s.queued, s.active, s.completed, s.limit), (0, 0, 1, 4));
    }

    #[test]
    fn pools_follow_the_store_type_and_the_smaller_limit() {
        let names = |p: &SpillPools| p.snapshots().iter().map(|(n, _)| *n).collect::<Vec<_>>();
        let local = SpillPools::new(8, true, None);
        assert_eq!(
            names(&local),
            [
                "LocalFileFlushEventThreadPool",
                "FallBackFlushEventThreadPool"
            ]
        );
        let both = SpillPools::new(8, true, Some(60));
        assert_eq!(names(&both).len(), 3);
        assert_eq!(both.first(TierKind::Hdfs).snapshot().limit, 8);
        let hdfs = SpillPools::new(8, false, Some(3));
        assert_eq!(
            names(&hdfs),
            ["HadoopFlushEventThreadPool", "FallBackFlushEventThreadPool"]
        );
        assert_eq!(hdfs.first(TierKind::Hdfs).snapshot().limit, 3);
    }
}
