//! `Spiller`: moves staged blocks from memory to a file tier.
//!
//! ```text
//!   commit over high watermark ──notify──▶ watermark loop: largest buffers first, down to low
//!   insert over single-buffer limit ─────▶ spill that buffer
//!   finishShuffle / shutdown ────────────▶ spill everything in scope, wait until durable
//!                    │
//!                    ▼  one task per batch, bounded by `concurrency` permits
//!      tier.append(batch) ── Ok ──▶ batch.complete(): drop from memory, free the charge
//!                         └─ Err ─▶ keep in memory (still readable), back off, retry
//! ```
//! Memory is never freed before the tier acknowledged the write, so a failing disk turns into
//! back-pressure (`NO_BUFFER`), never into lost blocks.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::ids::PartitionKey;
use crate::store::causes::{CauseLog, Place};
use crate::store::flush_stats::FlushStats;
use crate::store::memory::{MemoryTier, PartitionBuffer, SpillBatch};
use crate::store::router::Route;
use crate::store::router::TierRouter;
use crate::store::spill_pools::SpillPools;
use crate::store::{Placement, PurgeScope, TierKind};

/// How long one append may take before the spiller gives up on it and retries: far above a
/// healthy write of a 256 MiB batch, short enough that a hung disk does not pin spill permits.
pub const APPEND_TIMEOUT: Duration = Duration::from_secs(120);

/// Spill policy knobs (from `[hybrid_store]`).
#[derive(Clone, Debug)]
pub struct SpillOptions {
    /// Concurrent spill writes.
    pub concurrency: usize,
    /// A single buffer staged over this is spilled on its own.
    pub single_buffer_limit: u64,
    /// Whether that applies to every buffer (Java's `rss.server.single.buffer.flush.enabled`);
    /// when false only huge partitions' buffers are spilled on their own.
    pub single_buffer_spill: bool,
    /// Longest pause between retries of a failing spill.
    pub max_backoff: Duration,
    /// An append taking longer is abandoned and retried.
    pub append_timeout: Duration,
    /// The HDFS tier's own append limit when the store type has HDFS (sizes the Hadoop
    /// pool of [`SpillPools`]).
    pub hdfs_concurrency: Option<usize>,
    /// The storage audit log: a line per durable spill (and, through the store, per purge).
    pub audit: crate::audit::StorageAudit,
}

struct Shared {
    memory: Arc<MemoryTier>,
    target: Arc<TierRouter>,
    opts: SpillOptions,
    permits: Semaphore,
    next_event: AtomicU64,
    /// Batches handed out and not yet durable or dropped.
    pending: AtomicUsize,
    failures: AtomicU64,
    /// Per-tier write statistics, read by `/metrics`.
    stats: FlushStats,
    /// The writers as Java's flush thread pools, read by `/metrics`.
    pools: SpillPools,
    tracker: TaskTracker,
    cancel: CancellationToken,
    /// One WARN per app and cause for failing spills.
    causes: CauseLog,
}

/// Cheap-to-clone handle on the spill machinery.
#[derive(Clone)]
pub struct Spiller {
    shared: Arc<Shared>,
}

impl Spiller {
    /// A spiller writing to `target`. Its tasks run on `tracker`; `cancel` stops the retry
    /// back-offs of failing spills (in-flight writes finish). Shutdown fires it only after its
    /// final spill, so retries keep going while there is still time to succeed.
    pub fn new(
        memory: Arc<MemoryTier>,
        target: Arc<TierRouter>,
        opts: SpillOptions,
        cancel: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        let permits = Semaphore::new(opts.concurrency.max(1));
        let pools = SpillPools::new(opts.concurrency, target.has_local(), opts.hdfs_concurrency);
        Spiller {
            shared: Arc::new(Shared {
                memory,
                target,
                opts,
                permits,
                next_event: AtomicU64::new(1),
                pending: AtomicUsize::new(0),
                failures: AtomicU64::new(0),
                stats: FlushStats::default(),
                pools,
                tracker,
                cancel,
                causes: CauseLog::default(),
            }),
        }
    }

    /// Starts the watermark loop until `stop` fires: waits for the budget's signal (past the
    /// high watermark, or a refused request asking for room; or a 1 s tick, in case a signal
    /// raced), then spills largest buffers first until the target is handed out.
    pub fn spawn_watermark_loop(&self, stop: CancellationToken) {
        let this = self.clone();
        self.shared.tracker.spawn(async move {
            let budget = this.shared.memory.budget().clone();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = budget.spill_wanted() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                this.spill_to_target();
            }
        });
    }

    /// One pass: hands buffers (largest first) to spill tasks until the budget's
    /// [`next_spill`](crate::memory::MemoryBudget::next_spill) bytes are on their way.
    pub fn spill_to_target(&self) {
        let target = self.shared.memory.budget().next_spill();
        if target == 0 {
            return;
        }
        let mut picked = 0u64;
        for (buffer, staged) in self.shared.memory.spill_candidates() {
            if picked >= target {
                break;
            }
            if self.spill(&buffer) {
                picked += staged;
            }
        }
        tracing::debug!(target, picked, "watermark spill");
    }

    /// Called after an insert: spills the buffer alone when it is over the single-buffer
    /// limit (or `huge_limit` for huge partitions, whichever is lower).
    pub fn after_insert(
        &self,
        buffer: &Arc<PartitionBuffer>,
        staged: u64,
        huge_limit: Option<u64>,
    ) {
        let limit = match huge_limit {
            Some(h) => h.min(self.shared.opts.single_buffer_limit),
            None if !self.shared.opts.single_buffer_spill => return,
            None => self.shared.opts.single_buffer_limit,
        };
        if staged > limit {
            self.spill(buffer);
        }
    }

    /// Hands what `buffer` has staged to a spill task; false when nothing was staged.
    pub fn spill(&self, buffer: &Arc<PartitionBuffer>) -> bool {
        let Some(batch) = buffer.begin_spill(&self.shared.next_event) else {
            return false;
        };
        self.shared.pending.fetch_add(1, Ordering::AcqRel);
        let this = self.clone();
        self.shared.tracker.spawn(async move {
            this.write(batch).await;
            this.shared.pending.fetch_sub(1, Ordering::AcqRel);
        });
        true
    }

    /// Writes one batch, retrying with backoff until it is durable, its partition is purged,
    /// its app's storage refused it for good, or shutdown cancels the retries (the batch then
    /// stays in memory and is reported lost in the log, because the process is going away).
    async fn write(&self, batch: SpillBatch) {
        let key = batch.buffer.key().clone();
        let stats = &self.shared.stats;
        let mut backoff = Duration::from_millis(50);
        let mut attempt = 0u32;
        loop {
            if batch.buffer.is_purged() {
                stats.dropped();
                return; // dropping the batch frees its memory
            }
            // The tiers are picked once per attempt, before the permit: the pool the batch
            // waits in (Java picks the storage, and so the flush thread pool, before queueing
            // an event) and the counters of the attempt are the tier it is written to.
            let route = self.shared.target.route(&key, &batch.batch);
            let kind = route.first().unwrap_or(TierKind::Hdfs);
            let (result, began, took) = self.attempt(&key, &batch, route, kind, attempt).await;
            match result {
                Ok(placed) => {
                    self.written(&key, &batch, placed, began, took).await;
                    if attempt > 0 {
                        self.shared.causes.passed(&key.app, Place::Spill);
                    }
                    batch.complete();
                    return;
                }
                Err(crate::error::Error::StorageRefused { path, answer, fix }) => {
                    // The app's storage refused it for good, with nothing to fall back to: no
                    // retry can write these blocks, and the app's requests now fail with the
                    // cause. Its memory goes back to the other apps at once.
                    self.shared.failures.fetch_add(1, Ordering::Relaxed);
                    stats.failed_attempt();
                    let freed = self.shared.memory.purge(&PurgeScope::App(key.app.clone()));
                    stats.gave_up(kind);
                    if self.shared.causes.first(&key.app, Place::Spill, "refused") {
                        tracing::warn!(app_id = %key.app, freed, path, answer, fix,
                            "the app's spills are refused for good: its blocks in memory are dropped and its requests fail with the cause");
                    }
                    return;
                }
                Err(e) => {
                    attempt += 1;
                    self.shared.failures.fetch_add(1, Ordering::Relaxed);
                    stats.failed_attempt();
                    if self
                        .shared
                        .causes
                        .first(&key.app, Place::Spill, &e.to_string())
                    {
                        tracing::warn!(partition = %key, attempt, blocks = batch.batch.len(),
                            error = %e, "spill failed; blocks stay in memory, retrying (logged once per app and cause; the count follows when it passes)");
                    }
                    // A failed batch waits for its retry in the fallback pool, as a pended
                    // event waits in Java's flush queue.
                    let _waiting = self.shared.pools.fallback().wait();
                    tokio::select! {
                        _ = self.shared.cancel.cancelled() => {
                            stats.gave_up(kind);
                            tracing::error!(partition = %key, blocks = batch.batch.len(),
                                "shutdown while a spill was failing: these blocks are not on disk");
                            return;
                        }
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(self.shared.opts.max_backoff);
                }
            }
        }
    }

    /// One append of `batch` along `route`, under a spill permit and the append timeout
    /// (which keeps one hung disk from holding permits forever; the tier finishes or rolls
    /// back an abandoned append before the partition is written again). Returns the result
    /// with the write's own start and time span, from the permit on (the audit line's and
    /// the flush metrics').
    async fn attempt(
        &self,
        key: &PartitionKey,
        batch: &SpillBatch,
        route: Route,
        kind: TierKind,
        attempt: u32,
    ) -> (
        crate::error::Result<Placement>,
        std::time::SystemTime,
        Duration,
    ) {
        let pools = &self.shared.pools;
        let pool = if attempt == 0 {
            pools.first(kind)
        } else {
            pools.fallback()
        };
        let waiting = pool.wait();
        let _permit = self.shared.permits.acquire().await;
        drop(waiting);
        let _working = pool.work();
        self.shared.stats.attempt(kind, attempt > 0);
        let started = std::time::Instant::now();
        let began = std::time::SystemTime::now();
        let timeout = self.shared.opts.append_timeout;
        let result =
            tokio::time::timeout(timeout, self.shared.target.append(key, &batch.batch, route))
                .await
                .unwrap_or_else(|_| {
                    Err(crate::error::Error::TierFailed {
                        tier: kind.as_str(),
                        reason: format!("append did not finish within {timeout:?}"),
                    })
                });
        (result, began, started.elapsed())
    }

    /// The bookkeeping of a durable batch: the storage audit, the flush statistics, and the
    /// cleanup when its partition was purged while it was written.
    async fn written(
        &self,
        key: &PartitionKey,
        batch: &SpillBatch,
        placed: Placement,
        began: std::time::SystemTime,
        took: Duration,
    ) {
        let stats = &self.shared.stats;
        // Java's `w|…` line: logged once the write is durable, with the event size (what the
        // batch cost in memory) and the write's own time span.
        self.shared.opts.audit.written(
            key,
            placed.site,
            batch.batch.charged_bytes(),
            (began, std::time::SystemTime::now()),
        );
        let data = batch.batch.data_bytes();
        let huge_hdfs = match (&placed.location, placed.kind) {
            (Some(host), TierKind::Hdfs) if batch.buffer.is_huge() => Some((host.as_str(), data)),
            _ => None,
        };
        stats.app_written(
            &key.app,
            placed.kind,
            batch.batch.charged_bytes(),
            huge_hdfs,
        );
        stats.succeeded(
            placed.kind,
            placed.location,
            data,
            batch.batch.len() as u64,
            took,
        );
        if batch.buffer.is_purged() && self.shared.memory.get(key).is_none() {
            // The partition was purged while we wrote, so our append may have recreated its
            // files: remove that partition only. If the shuffle was registered again
            // meanwhile, its new files are left alone (our stale blocks then sit beside them;
            // readers skip ids they do not expect).
            let scope = PurgeScope::Partition(key.clone());
            if let Err(e) = self.shared.target.purge(&scope).await {
                tracing::warn!(partition = %key, error = %e, "cleanup after purge race failed");
            }
        }
    }

    /// Spills every staged buffer for which `filter` holds, and waits until none of them
    /// has a batch in flight. Used by `finishShuffle` and shutdown.
    pub async fn spill_and_wait(&self, buffers: &[Arc<PartitionBuffer>]) {
        for b in buffers {
            self.spill(b);
        }
        let mut wait = Duration::from_millis(5);
        while buffers.iter().any(|b| b.in_flight() > 0 && !b.is_purged()) {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(200));
        }
    }

    /// The app is gone: log the counts of causes it left.
    pub fn forget_app(&self, app: &crate::ids::AppId) {
        self.shared.causes.forget_app(app);
    }

    /// Batches handed out and not yet finished.
    pub fn pending(&self) -> usize {
        self.shared.pending.load(Ordering::Acquire)
    }

    /// The options it was built with (the purges read the storage audit log from them).
    pub fn options(&self) -> &SpillOptions {
        &self.shared.opts
    }

    /// Write statistics since start, per target tier (read by `/metrics`).
    pub fn stats(&self) -> &FlushStats {
        &self.shared.stats
    }

    /// The writers seen as Java's flush thread pools (read by `/metrics`).
    pub fn pools(&self) -> &SpillPools {
        &self.shared.pools
    }

    /// Whether spills can go to local disk (else only to the remote tier).
    pub fn has_local(&self) -> bool {
        self.shared.target.has_local()
    }

    /// Failed spill attempts since start.
    pub fn failures(&self) -> u64 {
        self.shared.failures.load(Ordering::Relaxed)
    }
}
