//! LocalFileTier: the warm tier. Each partition range lives in one or more data/index file
//! pairs ("parts") on the local data paths, in Uniffle's layout (DATA-FORMATS §3):
//!
//! ```text
//! <data_path>/<appId>/<shuffleId>/<start>-<end>/<prefix>.data      part 0: blocks, concatenated
//! <data_path>/<appId>/<shuffleId>/<start>-<end>/<prefix>.index     part 0: 40-byte records
//! <data_path'>/<appId>/<shuffleId>/<start>-<end>/<prefix>.<n>.data part n ≥ 1, after a failover
//! ```
//!
//! **Failover.** Appends go to the partition's last part. When that part's disk fails, turns
//! read-only, fills past its high watermark, or an append hangs past `write_timeout`, the part
//! is *sealed* (its lengths are frozen) and the next append opens part n+1 on another writable
//! disk. Readers see one logical file: part n's offsets are shifted by the data length of parts
//! 0..n, so every client version (which knows one data file per partition) reads the partition
//! whole and in write order, and `getLocalShuffleData` ranges are mapped back onto the parts.
//!
//! The layout is the only state on disk; nothing else is written next to it (the health
//! probe's dot-file lives for a moment and is deleted), so a restart rediscovers partitions
//! and their parts by walking the data paths (see `scan.rs`).
//!
//! Concurrency, from the outside in:
//! - a per-app **gate** (`tokio::sync::RwLock`): appends hold it shared for their whole
//!   duration, purges hold it exclusively, so a purge never races file creation or writes of
//!   its own app, and never blocks another app;
//! - a per-part **writer lock** serializes appends to one file pair (per part, not per
//!   partition, so an append hung on a dead disk never blocks the failover to a new part);
//! - a per-disk **semaphore** bounds the blocking writes in flight on each disk.
//!
//! Readers take none of these: they read the *committed* lengths (published after an append
//! finished) and never see bytes past them.

mod disk;
mod files;
mod listing;
mod options;
mod read;
mod scan;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{OwnedRwLockWriteGuard, RwLock};

use self::disk::{is_disk_fault, Disk, SpaceLimits, PROBE_TIMEOUT};
pub use self::disk::{DiskReport, DiskStatus};
use self::files::{AppendJob, Committed, PartitionPaths};
pub use self::listing::ScanReport;
pub use self::options::LocalFileOptions;
use crate::error::{Error, Result};
use crate::ids::{AppId, PartitionKey};
use crate::periodic::Schedule;
use crate::store::{BlockBatch, Health, PurgeScope, StorageSite, Tier, TierKind};

/// The local-file tier: see the module doc for layout and locking.
///
/// Built once at start-up by [`LocalFileTier::new`], shared as `Arc`, and kept healthy-aware
/// by [`LocalFileTier::spawn_health_checks`].
pub struct LocalFileTier {
    disks: Vec<Arc<Disk>>,
    prefix: String,
    min_writable_disks: usize,
    sync_on_write: bool,
    direct_io: bool,
    /// An append whose blocking write takes longer marks its disk unhealthy (a hung disk).
    write_timeout: Duration,
    /// Every partition written since start (or purge): its parts and committed lengths. A
    /// `parking_lot` mutex because sections are short lookups and never await.
    partitions: parking_lot::Mutex<HashMap<PartitionKey, Arc<PartitionFile>>>,
    /// Per-app gates (see the module doc); removed when the app is purged.
    gates: parking_lot::Mutex<HashMap<AppId, Arc<AppGate>>>,
    /// Directories a purge failed to delete (`total_local_rename_and_deletion_failed`: Java
    /// counts its rename-then-delete failures of local shuffle directories; Spillway deletes
    /// directly, so a failed delete is the same event).
    deletion_failures: std::sync::atomic::AtomicU64,
    /// Fault for the next append, tests only.
    #[cfg(test)]
    next_fault: parking_lot::Mutex<Option<files::Fault>>,
}

/// The per-app gate; `retired` is set when an app purge removed the gate from the map, so a
/// task that was waiting on it looks the app up again.
type AppGate = RwLock<GateState>;

#[derive(Debug, Default)]
struct GateState {
    retired: bool,
}

/// One partition: its parts in write order. The last part takes appends; the others are
/// sealed.
#[derive(Default)]
struct PartitionFile {
    /// Short sections only (no await): the failover check, sealing, and reader snapshots.
    parts: parking_lot::Mutex<Vec<Arc<Part>>>,
}

/// One data/index file pair of a partition on one disk.
struct Part {
    /// Position among the partition's parts; also in the file names (see [`PartitionPaths`]).
    seq: u32,
    disk: Arc<Disk>,
    paths: PartitionPaths,
    /// Logical offset of this part's first data byte: the data length of all earlier parts,
    /// fixed when the previous part was sealed.
    base: u64,
    /// Serializes appends to this pair. A tokio mutex on purpose: it guards the file, not
    /// memory, and is held for the whole blocking write (the owned guard moves into the
    /// blocking task). It is only ever taken by appends (the spiller), never on a request path;
    /// readers use `state`.
    writer: Arc<tokio::sync::Mutex<WriterState>>,
    /// Lengths readers may see, and whether the part is sealed; updated under `writer` after a
    /// successful append.
    state: parking_lot::Mutex<PartState>,
}

#[derive(Clone, Copy, Debug, Default)]
struct PartState {
    committed: Committed,
    /// No more appends: the partition moved on to a later part. A write that was in flight
    /// when this was set is cut back instead of published.
    sealed: bool,
    /// The part's files vanished under it (data path removed): its blocks cannot be served.
    lost: bool,
}

impl Part {
    fn committed(&self) -> Committed {
        self.state.lock().committed
    }
}

impl PartitionFile {
    /// Every part with its committed lengths, in order (a consistent snapshot for readers).
    fn snapshot(&self) -> Vec<(Arc<Part>, PartState)> {
        let parts = self.parts.lock();
        parts
            .iter()
            .map(|p| (Arc::clone(p), *p.state.lock()))
            .collect()
    }
}

#[derive(Debug, Default)]
struct WriterState {
    /// The range directory (and its parents) exist.
    dirs_created: bool,
    /// A rollback failed: the files may be longer than committed and must be cut first.
    needs_truncate: bool,
}

const TIER: &str = "localfile";

impl LocalFileTier {
    /// Initialises every data path as Java's `LocalStorageManager` does: a path that cannot be
    /// created, reports no file-system size, or has less free space than a configured capacity
    /// fails; up to `init_max_failed_paths` failures are left out (logged) until the next
    /// start, more fail start-up. A path that initialises but fails its first write probe
    /// starts unhealthy (logged) and is probed again by every health pass; start-up also fails
    /// when no path is usable at all. Blocks while probing, so call it at start-up.
    pub fn new(opts: LocalFileOptions) -> Result<Arc<Self>> {
        options::validate(&opts)?;
        let mut disks = Vec::with_capacity(opts.data_paths.len());
        let mut failed = Vec::new();
        for (i, root) in opts.data_paths.iter().enumerate() {
            let index = i32::try_from(i)
                .map_err(|_| Error::Startup("too many localfile data paths".to_owned()))?;
            let limits = match init_path(root, &opts) {
                Ok(limits) => limits,
                Err(reason) => {
                    tracing::error!(disk = %root.display(), storage_id = index, %reason, "data path failed to initialise");
                    failed.push(format!("{}: {reason}", root.display()));
                    continue;
                }
            };
            let disk = Disk::new(index, root.clone(), opts.max_concurrency_per_disk, limits);
            disk.apply_inspection(disk::inspect(root));
            if !disk.is_healthy() {
                // Disks start unhealthy, so `mark_unhealthy` logged no transition: say it here.
                tracing::warn!(disk = %root.display(), storage_id = index, reason = %disk.reason(), "data path is unusable at start-up; it takes no writes until a health probe succeeds");
            }
            disks.push(Arc::new(disk));
        }
        if failed.len() > opts.init_max_failed_paths || disks.is_empty() {
            return Err(Error::Startup(format!(
                "{} of {} localfile data path(s) failed to initialise, more than \
                 localfile_store.init_max_failed_paths ({}; Java: \
                 rss.server.localstorage.initialize.max.fail.number) allows or none left: {}",
                failed.len(),
                opts.data_paths.len(),
                opts.init_max_failed_paths,
                failed.join("; ")
            )));
        }
        if !failed.is_empty() {
            tracing::warn!(skipped = %failed.join("; "), left = disks.len(), "serving without the data paths that failed to initialise (localfile_store.init_max_failed_paths allows it)");
        }
        if !disks.iter().any(|d| d.is_healthy()) {
            let why: Vec<String> = disks
                .iter()
                .map(|d| format!("{}: {}", d.root.display(), d.reason()))
                .collect();
            return Err(Error::Startup(format!(
                "no usable localfile data path: {}",
                why.join("; ")
            )));
        }
        Ok(Arc::new(LocalFileTier {
            disks,
            prefix: opts.file_prefix,
            min_writable_disks: opts.min_writable_disks,
            sync_on_write: opts.sync_on_write,
            direct_io: opts.direct_io,
            write_timeout: opts.write_timeout,
            partitions: parking_lot::Mutex::new(HashMap::new()),
            gates: parking_lot::Mutex::new(HashMap::new()),
            deletion_failures: std::sync::atomic::AtomicU64::new(0),
            #[cfg(test)]
            next_fault: parking_lot::Mutex::new(None),
        }))
    }

    /// One health pass over every disk, concurrently on the blocking pool: a probe file is
    /// written, synced, read back and deleted, then usage is read with `statvfs`. Flips the
    /// healthy and overused flags (with watermark hysteresis), one log line per change. A disk
    /// whose probe does not finish within 30 s, or whose previous probe still hangs, is
    /// unhealthy.
    pub async fn check_disks(&self) {
        self.check_disks_within(PROBE_TIMEOUT).await
    }

    /// [`LocalFileTier::check_disks`] with another probe deadline (the health checker's
    /// `health.disk_check_timeout`).
    pub async fn check_disks_within(&self, timeout: Duration) {
        let mut pending = Vec::with_capacity(self.disks.len());
        for disk in &self.disks {
            if !disk.try_begin_probe() {
                disk.mark_unhealthy("the previous health probe has not finished");
                continue;
            }
            let d = Arc::clone(disk);
            let handle = crate::runtime::blocking(move || {
                let outcome = disk::inspect(&d.root);
                d.end_probe();
                outcome
            });
            pending.push((disk, handle));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        for (disk, handle) in pending {
            let outcome = match tokio::time::timeout_at(deadline, handle).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(e)) => Err(format!("health probe task failed: {e}")),
                Err(_) => Err(format!("health probe did not finish within {timeout:?}")),
            };
            disk.apply_inspection(outcome);
        }
    }

    /// Deletes the directories of apps that `is_live` does not know from every healthy disk,
    /// as Java's `checkAndClearLeakedShuffleData`, and returns their ids. The disks are listed
    /// before `is_live` is asked, so an app registered meanwhile is never taken for leaked.
    pub async fn sweep_leaked(&self, is_live: impl Fn(&AppId) -> bool) -> Vec<AppId> {
        let roots: Vec<PathBuf> = self
            .disks
            .iter()
            .filter(|d| d.is_healthy())
            .map(|d| d.root.clone())
            .collect();
        let listed = match crate::runtime::blocking(move || listing::app_dirs(&roots)).await {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(error = %e, "leaked-data sweep could not list the data paths");
                return Vec::new();
            }
        };
        let mut swept = Vec::new();
        for app in listed {
            if is_live(&app) {
                continue;
            }
            match Tier::purge(self, &PurgeScope::App(app.clone())).await {
                Ok(bytes) => {
                    tracing::info!(app_id = %app, bytes, "deleted leaked shuffle data of an unknown app");
                    swept.push(app);
                }
                Err(e) => {
                    tracing::warn!(app_id = %app, error = %e, "leaked shuffle data not deleted")
                }
            }
        }
        swept
    }

    /// Runs [`LocalFileTier::check_disks`] on `schedule` (the first pass one interval from
    /// now: `new` already probed).
    pub fn spawn_health_checks(self: &Arc<Self>, schedule: Schedule) {
        let tier = Arc::clone(self);
        schedule.run(move || {
            let tier = Arc::clone(&tier);
            async move { tier.check_disks().await }
        });
    }

    /// Directories purges failed to delete since start.
    pub fn deletion_failures(&self) -> u64 {
        self.deletion_failures
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every partition this tier holds with its committed data and index bytes: after a
    /// restart, what the tenants' usage starts from (the files outlived the counts).
    pub fn held(&self) -> Vec<(PartitionKey, u64)> {
        let partitions: Vec<(PartitionKey, Arc<PartitionFile>)> = self
            .partitions
            .lock()
            .iter()
            .map(|(k, f)| (k.clone(), Arc::clone(f)))
            .collect();
        partitions
            .into_iter()
            .map(|(key, file)| {
                let bytes = file
                    .parts
                    .lock()
                    .iter()
                    .map(|p| {
                        let c = p.state.lock().committed;
                        c.data_len + c.index_len
                    })
                    .sum();
                (key, bytes)
            })
            .collect()
    }

    /// One report per data path, in `data_paths` order, for heartbeats and metrics.
    pub fn disk_reports(&self) -> Vec<DiskReport> {
        self.disks.iter().map(|d| d.report()).collect()
    }

    /// Disks whose last probe succeeded (overused ones included: they still serve their
    /// partitions).
    pub fn healthy_disks(&self) -> usize {
        self.disks.iter().filter(|d| d.is_healthy()).count()
    }

    /// Makes the next append fail at `fault.at` with `fault.errno` (tests only).
    #[cfg(test)]
    pub(crate) fn inject_fault(&self, fault: files::Fault) {
        *self.next_fault.lock() = Some(fault);
    }

    /// The part the next append of `part` goes to. A partition is placed on a disk on first
    /// use; when its current part's disk can no longer take writes (unhealthy, over the high
    /// watermark) or the part was lost, that part is sealed and a new one is opened on a
    /// writable disk. A disk that is merely over the watermark keeps the partition when no
    /// other disk is writable (better a fuller disk than back-pressure).
    fn active_part(&self, part: &PartitionKey) -> Result<Arc<Part>> {
        let file = {
            let mut map = self.partitions.lock();
            Arc::clone(map.entry(part.clone()).or_default())
        };
        let mut parts = file.parts.lock();
        if let Some(last) = parts.last() {
            let state = *last.state.lock();
            let any_writable = || self.disks.iter().any(|d| d.is_writable());
            if !state.sealed && !state.lost {
                if last.disk.is_writable() || (last.disk.is_healthy() && !any_writable()) {
                    return Ok(Arc::clone(last));
                }
                if !last.disk.is_healthy() && !any_writable() {
                    return Err(Error::TierFailed {
                        tier: TIER,
                        reason: format!(
                            "disk {} ({}) of partition {part} is unhealthy and no other disk can \
                             take it: {}",
                            last.disk.index,
                            last.disk.root.display(),
                            self.bad_disks()
                        ),
                    });
                }
            }
        }
        let disk = self.place(part)?;
        let (seq, base) = match parts.last() {
            Some(last) => {
                last.disk.count_moved_off();
                let mut state = last.state.lock();
                state.sealed = true;
                (last.seq + 1, last.base + state.committed.data_len)
            }
            None => (0, 0),
        };
        let dir = disk
            .root
            .join(part.app.as_str())
            .join(part.shuffle.to_string())
            .join(part.range.dir_name());
        if seq == 0 {
            tracing::debug!(app_id = %part.app, shuffle_id = part.shuffle, range = %part.range, storage_id = disk.index, "placed partition");
        } else {
            tracing::warn!(app_id = %part.app, shuffle_id = part.shuffle, range = %part.range, storage_id = disk.index, part = seq, base, "partition moved to another disk: its earlier disk cannot take writes");
        }
        let new = Arc::new(Part {
            seq,
            paths: PartitionPaths::new(dir, &self.prefix, seq),
            disk,
            base,
            writer: Arc::new(tokio::sync::Mutex::new(WriterState::default())),
            state: parking_lot::Mutex::new(PartState::default()),
        });
        parts.push(Arc::clone(&new));
        Ok(new)
    }

    /// Uniffle's placement: murmur3 of `"<appId>_<shuffleId>_<start>"` modulo the disks that
    /// may take new partitions right now.
    fn place(&self, part: &PartitionKey) -> Result<Arc<Disk>> {
        let writable: Vec<&Arc<Disk>> = self.disks.iter().filter(|d| d.is_writable()).collect();
        if writable.is_empty() {
            return Err(Error::TierFailed {
                tier: TIER,
                reason: format!(
                    "no disk can take new partition {part}: {}",
                    self.bad_disks()
                ),
            });
        }
        let key = format!("{}_{}_{}", part.app, part.shuffle, part.range.start);
        let hash = murmur3::murmur3_32(&mut key.as_bytes(), 0).map_err(|e| Error::Internal {
            reason: format!("hashing {key}: {e}"),
        })?;
        Ok(Arc::clone(writable[hash as usize % writable.len()]))
    }

    /// The app's gate, created on first use.
    fn gate(&self, app: &AppId) -> Arc<AppGate> {
        let mut gates = self.gates.lock();
        Arc::clone(gates.entry(app.clone()).or_default())
    }

    /// "disk 1 (/p) unhealthy: …; disk 2 (/q) overused: 96.0% used", or "" when all are normal.
    fn bad_disks(&self) -> String {
        let bad: Vec<String> = self
            .disks
            .iter()
            .filter_map(|d| match d.status() {
                DiskStatus::Normal => None,
                s => Some(format!(
                    "disk {} ({}) {}: {}",
                    d.index,
                    d.root.display(),
                    s.as_str(),
                    d.reason()
                )),
            })
            .collect();
        bad.join("; ")
    }

    /// Takes the app's gate exclusively, skipping gates retired by a concurrent app purge.
    async fn lock_app(&self, app: &AppId) -> (Arc<AppGate>, OwnedRwLockWriteGuard<GateState>) {
        loop {
            let gate = self.gate(app);
            let guard = Arc::clone(&gate).write_owned().await;
            if !guard.retired {
                return (gate, guard);
            }
        }
    }

    fn lookup(&self, part: &PartitionKey) -> Option<Arc<PartitionFile>> {
        self.partitions.lock().get(part).cloned()
    }
}

#[async_trait]
impl Tier for LocalFileTier {
    fn kind(&self) -> TierKind {
        TierKind::LocalFile
    }

    /// Writes data, then index records (each fdatasynced when configured), then publishes the
    /// new lengths. On error both files are cut back to the last committed lengths, the disk
    /// is flagged unhealthy for EIO/ENOSPC/EROFS-like errors or a write that hangs past
    /// `write_timeout`, and the error is returned (retryable); the partition stays appendable,
    /// and its next append goes to another disk if this one can no longer take it (see
    /// [`LocalFileTier::active_part`]). Fails fast with `Error::TierFailed` when no disk can take
    /// the partition.
    ///
    /// Cancel-safe: the guards move into the blocking task, so an abandoned append still
    /// finishes (or rolls back) before the next append to its part or a purge touches it.
    async fn append(&self, part: &PartitionKey, batch: &BlockBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let gate = loop {
            let guard = self.gate(&part.app).read_owned().await;
            if !guard.retired {
                break guard;
            }
        };
        let deadline = tokio::time::Instant::now() + self.write_timeout;
        // Waits behind a hung append of the same part end at the deadline too (without
        // blaming the disk: only the write that hangs does).
        let waited_too_long = |what: &str, disk: &Disk| Error::TierFailed {
            tier: TIER,
            reason: format!(
                "partition {part}: {what} on disk {} after {:?}",
                disk.root.display(),
                self.write_timeout
            ),
        };
        let (target, writer) = loop {
            let target = self.active_part(part)?;
            let writer = tokio::time::timeout_at(deadline, Arc::clone(&target.writer).lock_owned())
                .await
                .map_err(|_| waited_too_long("an earlier append is still running", &target.disk))?;
            // The partition may have moved on while we waited for the lock.
            let state = *target.state.lock();
            if !state.sealed && !state.lost {
                break (target, writer);
            }
        };
        let permit =
            tokio::time::timeout_at(deadline, Arc::clone(&target.disk.permits).acquire_owned())
                .await
                .map_err(|_| waited_too_long("no write permit", &target.disk))?
                .map_err(|_| Error::Internal {
                    reason: "localfile write permits closed".to_owned(),
                })?;
        let committed = target.committed();
        let index = files::encode_index(batch.blocks(), committed.data_len);
        let batch = batch.clone();
        let sync = self.sync_on_write;
        let direct = self.direct_io;
        #[cfg(test)]
        let fault = self.next_fault.lock().take();

        let file = Arc::clone(&target);
        let task = crate::runtime::blocking(move || {
            let (_gate, _permit, mut writer) = (gate, permit, writer);
            let job = AppendJob {
                paths: &file.paths,
                committed,
                blocks: batch.blocks(),
                create_dirs: !writer.dirs_created,
                truncate_first: writer.needs_truncate,
                sync,
                direct: direct
                    && !file
                        .disk
                        .direct_refused
                        .load(std::sync::atomic::Ordering::Relaxed),
                direct_refused: &file.disk.direct_refused,
                #[cfg(test)]
                fault,
            };
            match files::append(&job, &index) {
                Ok(()) => {
                    writer.dirs_created = true;
                    writer.needs_truncate = false;
                    let added = batch.data_bytes() + index.len() as u64;
                    let mut state = file.state.lock();
                    if state.sealed {
                        // The partition moved to another part while this write ran (it hung
                        // past the timeout): the batch is retried there, so cut it here.
                        drop(state);
                        writer.needs_truncate = files::truncate_to(&file.paths, committed).is_err();
                        return Err(Error::TierFailed {
                            tier: TIER,
                            reason: format!(
                                "disk {} finished a write after its partition moved on",
                                file.disk.root.display()
                            ),
                        });
                    }
                    state.committed.data_len += batch.data_bytes();
                    state.committed.index_len += index.len() as u64;
                    drop(state);
                    file.disk.add_written(added);
                    Ok(())
                }
                Err(failure) => {
                    writer.needs_truncate = !failure.rolled_back;
                    if failure.source.kind() == io::ErrorKind::NotFound && writer.dirs_created {
                        // The range directory vanished under us (a data path removed or
                        // wiped): the part's earlier blocks are gone; start a new part.
                        file.state.lock().lost = true;
                        tracing::error!(path = %failure.path.display(), storage_id = file.disk.index, "partition files vanished from the disk; their blocks are lost, later spills go to a new file pair");
                    } else if is_disk_fault(&failure.source) {
                        file.disk.mark_unhealthy(&format!(
                            "append to {} failed: {}",
                            failure.path.display(),
                            failure.source
                        ));
                    }
                    Err(Error::io(failure.path, failure.source))
                }
            }
        });
        match tokio::time::timeout_at(deadline, task).await {
            Ok(joined) => joined.map_err(|e| Error::Internal {
                reason: format!("append task for partition {part} failed: {e}"),
            })?,
            Err(_) => {
                target.disk.mark_timed_out(&format!(
                    "an append to {} did not finish within {:?}",
                    target.paths.data.display(),
                    self.write_timeout
                ));
                Err(Error::TierFailed {
                    tier: TIER,
                    reason: format!(
                        "append of partition {part} to disk {} timed out after {:?}",
                        target.disk.root.display(),
                        self.write_timeout
                    ),
                })
            }
        }
    }

    /// Removes the scope's partitions and deletes `<path>/<appId>` (App) or
    /// `<path>/<appId>/<shuffleId>` (Shuffle) on every disk, under the app's gate: in-flight
    /// appends of the app finish first, and appends that arrive meanwhile wait and then start
    /// fresh files. Returns the committed bytes (data + index) of the removed partitions.
    async fn purge(&self, scope: &PurgeScope) -> Result<u64> {
        let app = scope.app().clone();
        let (gate, guard) = self.lock_app(&app).await;
        let removed: Vec<Arc<PartitionFile>> = self
            .partitions
            .lock()
            .extract_if(|k, _| scope.covers(k))
            .map(|(_, v)| v)
            .collect();
        let mut freed = 0;
        for file in &removed {
            for (part, state) in file.snapshot() {
                let c = state.committed;
                part.disk.sub_written(c.data_len + c.index_len);
                freed += c.data_len + c.index_len;
            }
        }
        let dirs: Vec<PathBuf> = self
            .disks
            .iter()
            .map(|d| match scope {
                PurgeScope::App(app) => d.root.join(app.as_str()),
                PurgeScope::Shuffle(key) => {
                    d.root.join(key.app.as_str()).join(key.shuffle.to_string())
                }
                PurgeScope::Partition(key) => d
                    .root
                    .join(key.app.as_str())
                    .join(key.shuffle.to_string())
                    .join(key.range.dir_name()),
            })
            .collect();
        let prune_parents = matches!(scope, PurgeScope::Partition(_));
        // The guard travels with the deletion so an abandoned purge still excludes appends
        // until its directories are gone.
        let (mut guard, deleted, failures) = crate::runtime::blocking(move || {
            let mut first_err: Option<(PathBuf, io::Error)> = None;
            let mut failures = 0u64;
            for dir in dirs {
                if let Err(e) = files::remove_tree(&dir) {
                    tracing::warn!(path = %dir.display(), error = %e, "purge could not delete a directory");
                    failures += 1;
                    first_err.get_or_insert((dir, e));
                } else if prune_parents {
                    // Drop the shuffle and app directories too if this left them empty
                    // (`remove_dir` refuses non-empty ones, which is the point).
                    let mut parent = dir.parent();
                    for _ in 0..2 {
                        match parent {
                            Some(p) if std::fs::remove_dir(p).is_ok() => parent = p.parent(),
                            _ => break,
                        }
                    }
                }
            }
            (guard, first_err, failures)
        })
        .await
        .map_err(|e| Error::Internal {
            reason: format!("purge task for app {app} failed: {e}"),
        })?;
        self.deletion_failures
            .fetch_add(failures, std::sync::atomic::Ordering::Relaxed);
        if matches!(scope, PurgeScope::App(_)) {
            guard.retired = true;
            let mut gates = self.gates.lock();
            if gates.get(&app).is_some_and(|g| Arc::ptr_eq(g, &gate)) {
                gates.remove(&app);
            }
        }
        drop(guard);
        match deleted {
            Some((path, e)) => Err(Error::io(path, e)),
            None => Ok(freed),
        }
    }

    fn location(&self, part: &PartitionKey) -> Option<String> {
        let file = self.lookup(part)?;
        let parts = file.parts.lock();
        parts
            .last()
            .map(|p| p.disk.root.to_string_lossy().into_owned())
    }

    /// The disk of the partition's newest part (where the last append went).
    fn site(&self, part: &PartitionKey) -> Option<StorageSite> {
        let file = self.lookup(part)?;
        let parts = file.parts.lock();
        parts
            .last()
            .map(|p| StorageSite::local(&p.disk.root.to_string_lossy()))
    }

    /// Every disk not marked unhealthy, as Java lists every uncorrupted local storage.
    fn sites(&self, _app: &AppId) -> Vec<StorageSite> {
        self.disks
            .iter()
            .filter(|d| d.is_healthy())
            .map(|d| StorageSite::local(&d.root.to_string_lossy()))
            .collect()
    }

    /// Writable while at least `max(1, min_writable_disks)` disks are healthy and under the
    /// high watermark (a server that cannot place a spill anywhere tells coordinators so);
    /// `detail` names every disk that is not normal. The share of healthy disks Java asks for
    /// is `[health]`'s business.
    fn health(&self) -> Health {
        let writable = self.disks.iter().filter(|d| d.is_writable()).count();
        let need = self.min_writable_disks.max(1);
        let bad = self.bad_disks();
        let detail = if bad.is_empty() {
            String::new()
        } else {
            format!(
                "{writable} of {} disks writable (need {need}): {bad}",
                self.disks.len()
            )
        };
        Health {
            writable: writable >= need,
            detail,
        }
    }
}

/// Whether `root` can be a data path at all: it is created if missing, and written. A path
/// that cannot be created, a read-only mount and a directory the server's user may not write
/// are settings mistakes, reported at start-up; a full or failing disk is not (it may come
/// back), and is left to the health probe.
fn settings_check(root: &std::path::Path) -> std::result::Result<(), String> {
    std::fs::create_dir_all(root).map_err(|e| format!("cannot create it: {e}"))?;
    match disk::probe(root) {
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EROFS | libc::EACCES | libc::EPERM | libc::ENOTDIR)
            ) =>
        {
            Err(format!("cannot write to it: {e}"))
        }
        _ => Ok(()),
    }
}

/// The start-up check of `localfile_store.data_paths`, made before anything (the state lock
/// among it) is written there: more unusable paths than `max_failed` allows, or none usable,
/// stop the server with every bad path, its cause and the keys named, as Java's
/// `LocalStorageManager` stops it (`rss.server.localstorage.initialize.max.fail.number`,
/// default 0).
pub fn check_data_paths(paths: &[std::path::PathBuf], max_failed: usize) -> Result<()> {
    let failed: Vec<String> = paths
        .iter()
        .filter_map(|p| {
            settings_check(p)
                .err()
                .map(|why| format!("{}: {why}", p.display()))
        })
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    if failed.len() > max_failed || failed.len() == paths.len() {
        return Err(Error::Startup(format!(
            "localfile_store.data_paths (Java: rss.storage.basePath): {} of {} path(s) unusable, \
             more than localfile_store.init_max_failed_paths ({max_failed}; Java: \
             rss.server.localstorage.initialize.max.fail.number) allows or none left: {}",
            failed.len(),
            paths.len(),
            failed.join("; ")
        )));
    }
    tracing::warn!(unusable = %failed.join("; "), "serving without the data paths that cannot be used (localfile_store.init_max_failed_paths allows it)");
    Ok(())
}

/// Java's `LocalStorage` constructor checks for one path: it must be creatable, report a
/// file-system size, and, when a capacity is configured, have that much room. Java empties the
/// path first, so its free space is the whole room; Spillway keeps a previous run's files for
/// recovery, so they count as room too. Returns the path's limits, or why it failed.
fn init_path(
    root: &std::path::Path,
    opts: &LocalFileOptions,
) -> std::result::Result<SpaceLimits, String> {
    settings_check(root)?;
    let usage = disk::usage(root).map_err(|e| format!("statvfs failed: {e}"))?;
    let capacity = match opts.capacity {
        None => (usage.capacity as f64 * opts.capacity_ratio) as u64,
        Some(capacity) => {
            if usage.available < capacity {
                let ours = files::tree_size(root);
                if usage.available.saturating_add(ours) < capacity {
                    return Err(format!(
                        "{} bytes free (plus {ours} of this server's files) is less than \
                         localfile_store.disk_capacity ({capacity} bytes)",
                        usage.available
                    ));
                }
            }
            capacity
        }
    };
    if capacity == 0 {
        return Err("the file system reports no size".to_owned());
    }
    Ok(SpaceLimits {
        capacity,
        high: opts.high_watermark,
        low: opts.low_watermark,
        whole_disk: opts.whole_disk_watermark,
    })
}
