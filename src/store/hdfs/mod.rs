//! HdfsTier: the cold tier. Spills land in the HDFS path each app registered, in exactly the
//! layout the Uniffle client reads **directly** from HDFS (DATA-FORMATS §4):
//!
//! ```text
//! <root>/<appId>/<shuffleId>/<start>-<end>/<serverId>[_<writerIndex>]_<failTimes>.data
//! <root>/<appId>/<shuffleId>/<start>-<end>/<serverId>[_<writerIndex>]_<failTimes>.index
//! ```
//!
//! The client lists every `*.index` of the range directory whose name starts with the server
//! id it got from the coordinator, and reads each pair on its own: whole 40-byte records, and
//! only records that end inside the data file's length. So:
//!
//! - **one writer per file**: a partition has `partition_write_max_concurrency` writer slots,
//!   each with its own file pair (`_<writerIndex>` is left out when there is one slot); an
//!   append takes a free slot, so concurrent spills of one partition never share a file;
//! - **data before index**: an append makes the data file's new bytes visible first, then
//!   writes the index records, so a visible record never points at bytes that are not there;
//! - **a failed or abandoned append retires its file pair** (`failTimes` + 1 for the next
//!   append of that slot): HDFS cannot cut a file back, and a writer that died mid-write may
//!   still hold the lease. What the client can see of a retired pair is harmless: data with no
//!   record is never read, a torn last record is dropped (whole records only), and complete
//!   records of a batch that is written again elsewhere are duplicates the client skips (it
//!   reads each block id once).
//!
//! How an append makes bytes visible: Uniffle's `HadoopShuffleWriteHandler` opens each file in
//! create/append mode and closes it per batch. A close waits for the NameNode to confirm the
//! last block (`complete`), which it cannot before the DataNode's block report arrives; the
//! HDFS client retries it after 500 ms (Java's after 400 ms), so every batch held its memory
//! for about a second. Instead, an append ends each file with an `hsync`: the DataNodes have
//! the bytes and the NameNode records the new length (what `getFileStatus` answers, and what
//! the client checks index records against), in milliseconds. The pair then stays open for
//! the slot's next append, and a background task closes it once idle for `keep_open`. At most
//! `max_open_pairs` pairs are kept open across the server (each holds a write pipeline on the
//! DataNodes); past that, or with `keep_open` zero, or where `hsync` is unsupported
//! (erasure-coded directories), an append closes its files as Java does.
//!
//! The spiller and the router hand this tier large batches only.
//!
//! Concurrency: a per-app gate (appends shared, purges exclusive), a server-wide semaphore of
//! `max_concurrency` appends, and the per-partition slots.

mod client;
pub mod conf_files;
mod errors;
pub mod identity;
mod probe;
mod read;
mod slots;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use hdfs_native::Client;
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

use self::client::{ClientCache, RemoteRoot, TIER};
pub use self::identity::{Identity, WriteAs};
pub use self::slots::Background;
use self::slots::{close_pairs, close_when_idle, recover_leases, retire, write_pair, Slot, Slots};
use crate::error::{Error, Result};
use crate::ids::{AppId, PartitionKey, PartitionRange};
use crate::store::failures::Failures;
use crate::store::remote::{
    end_purge, entry_for_append, sites, timed_out, RemoteApps, RemoteEntry,
};
use crate::store::{
    BlockBatch, FileTier, Health, IndexRead, PurgeScope, RemoteStorage, Span, StorageSite, Tier,
    TierKind,
};

/// How the HDFS tier is set up (from `[hdfs_store]` and the server id).
#[derive(Clone, Debug)]
pub struct HdfsOptions {
    /// The server id: the file-name prefix the client filters on.
    pub file_prefix: String,
    /// Appends in flight across the server.
    pub max_concurrency: usize,
    /// Writer slots (file pairs) per partition, unless the app asks for its own.
    pub partition_write_max_concurrency: usize,
    /// The most writer slots an app may ask for (Java's
    /// `rss.server.max.concurrency.limit.of.per-partition.write`).
    pub partition_write_max_concurrency_limit: usize,
    /// An append taking longer is abandoned and its file pair retired.
    pub write_timeout: Duration,
    /// After a failure, how long [`HdfsTier::may_try`] says no.
    pub failure_cooldown: Duration,
    /// How long a file pair stays open after an append for the next one; zero closes every
    /// pair after each append (Java's way). See the module doc.
    pub keep_open: Duration,
    /// The most file pairs kept open across the server.
    pub max_open_pairs: usize,
    /// Who the server is to HDFS and whom each app's files are written as.
    pub identity: Identity,
    /// The server's Hadoop conf items (`hdfs_store.hadoop_conf`), under each app's.
    pub hadoop_conf: Vec<(String, String)>,
}

/// The HDFS tier; see the module doc.
pub struct HdfsTier {
    opts: HdfsOptions,
    clients: ClientCache,
    permits: Arc<Semaphore>,
    /// One permit per file pair kept open between appends (`max_open_pairs`).
    open_pairs: Arc<Semaphore>,
    apps: RemoteApps<AppEntry>,
    /// Recent append failures, for [`Tier::health`] and [`HdfsTier::may_try`].
    failures: Failures,
    /// Where idle closers and lease recoveries run.
    background: Background,
}

/// What the tier knows about one app.
struct AppEntry {
    /// Appends hold it shared, purges exclusively; `true` once an app purge retired the entry.
    gate: Arc<tokio::sync::RwLock<bool>>,
    target: parking_lot::Mutex<Target>,
    partitions: parking_lot::Mutex<HashMap<(i32, PartitionRange), Arc<Slots>>>,
    /// Writer slots a partition of this app gets when it first spills here.
    writers: std::sync::atomic::AtomicUsize,
}

impl RemoteEntry for AppEntry {
    fn gate(&self) -> &Arc<tokio::sync::RwLock<bool>> {
        &self.gate
    }

    fn registered_path(&self) -> String {
        self.target.lock().remote.path.clone()
    }
}

impl AppEntry {
    /// The writer slots of the app's partitions inside `scope`.
    fn slots_in(&self, scope: &PurgeScope) -> Vec<Arc<Slots>> {
        let app = scope.app();
        self.partitions
            .lock()
            .iter()
            .filter(|((s, r), _)| scope.covers(&PartitionKey::new(app.clone(), *s, *r)))
            .map(|(_, slots)| Arc::clone(slots))
            .collect()
    }
}

/// Where and as whom an app's files are written.
#[derive(Clone, Debug)]
struct Target {
    remote: RemoteStorage,
    root: RemoteRoot,
    user: String,
}

impl HdfsTier {
    /// A tier with no app yet, whose background work is on a tracker of its own (tests,
    /// tools). Connects nothing: clients are built when an app first spills.
    pub fn new(opts: HdfsOptions) -> Arc<Self> {
        Self::with_background(opts, Background::default())
    }

    /// A tier whose idle closers and lease recoveries run on `background` (the server's task
    /// tracker, which shutdown waits for).
    pub fn with_background(opts: HdfsOptions, background: Background) -> Arc<Self> {
        Arc::new(HdfsTier {
            background,
            failures: Failures::new("hdfs", "appends", opts.failure_cooldown),
            permits: Arc::new(Semaphore::new(opts.max_concurrency.max(1))),
            open_pairs: Arc::new(Semaphore::new(if opts.keep_open.is_zero() {
                0
            } else {
                opts.max_open_pairs
            })),
            clients: ClientCache::new(opts.identity.clone(), opts.hadoop_conf.clone()),
            opts,
            apps: parking_lot::Mutex::new(HashMap::new()),
        })
    }

    /// Records where `app` writes (`registerShuffle`): its remote storage and Hadoop user. An
    /// empty path means the app has none, and this tier cannot take its data. Re-registering
    /// with another path moves only future file pairs (Uniffle pins an app to one path, so
    /// clients do not do that).
    pub fn register_app(&self, app: &AppId, user: &str, remote: &RemoteStorage) -> Result<()> {
        if remote.path.is_empty() {
            return Ok(());
        }
        let root = RemoteRoot::parse(&remote.path)?;
        let target = Target {
            remote: remote.clone(),
            root,
            user: user.to_owned(),
        };
        let mut apps = self.apps.lock();
        let entry = apps.entry(app.clone()).or_insert_with(|| {
            Arc::new(AppEntry {
                gate: Arc::new(tokio::sync::RwLock::new(false)),
                target: parking_lot::Mutex::new(target.clone()),
                partitions: parking_lot::Mutex::new(HashMap::new()),
                writers: std::sync::atomic::AtomicUsize::new(
                    self.opts.partition_write_max_concurrency.max(1),
                ),
            })
        });
        *entry.target.lock() = target;
        Ok(())
    }

    /// The writer slots per partition for `app`, as Java's `getMaxConcurrencyWriting`: what the
    /// app asked for (`maxConcurrencyPerPartitionToWrite` > 0) capped by the server's limit,
    /// else the server's own per-partition value. Partitions that already spilled keep theirs.
    pub fn set_partition_writers(&self, app: &AppId, requested: i32) {
        let writers = self.writers_for(requested);
        if let Some(entry) = self.entry(app) {
            entry
                .writers
                .store(writers, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn writers_for(&self, requested: i32) -> usize {
        let n = if requested > 0 {
            (requested as usize).min(self.opts.partition_write_max_concurrency_limit)
        } else {
            self.opts.partition_write_max_concurrency
        };
        n.max(1)
    }

    /// Whether `app` registered a remote storage this tier can write to.
    pub fn serves(&self, app: &AppId) -> bool {
        self.apps.lock().contains_key(app)
    }

    /// Whether a spill should be tried here now: false during `failure_cooldown` after a
    /// failed append, so the router sends spills elsewhere instead of waiting on a broken HDFS.
    pub fn may_try(&self) -> bool {
        self.failures.may_try()
    }

    /// Closes every file pair kept open between appends, now (at shutdown).
    pub async fn close_open_pairs(&self) {
        let entries: Vec<Arc<AppEntry>> = self.apps.lock().values().cloned().collect();
        let slots: Vec<Arc<Slots>> = entries
            .iter()
            .flat_map(|e| e.partitions.lock().values().cloned().collect::<Vec<_>>())
            .collect();
        close_pairs(&self.background, &slots).await;
    }

    /// The file-name prefix of one slot's current pair.
    fn pair_name(&self, slots: usize, slot: &Slot) -> String {
        if slots == 1 {
            format!("{}_{}", self.opts.file_prefix, slot.fail_times)
        } else {
            format!(
                "{}_{}_{}",
                self.opts.file_prefix, slot.index, slot.fail_times
            )
        }
    }

    fn entry(&self, app: &AppId) -> Option<Arc<AppEntry>> {
        self.apps.lock().get(app).cloned()
    }

    fn client(&self, target: &Target) -> Result<Client> {
        self.clients.get(&target.root, &target.user, &target.remote)
    }

    /// Takes a free writer slot of the partition (waiting when all are busy).
    async fn take_slot(
        slots: &Arc<Slots>,
    ) -> Result<(OwnedSemaphorePermit, OwnedMutexGuard<Slot>)> {
        let permit =
            Arc::clone(&slots.free)
                .acquire_owned()
                .await
                .map_err(|_| Error::Internal {
                    reason: "HDFS slot permits closed".to_owned(),
                })?;
        // The permit guarantees a free slot; lowest index first, so sequential appends keep
        // going to the same pair.
        for slot in &slots.slots {
            if let Ok(guard) = Arc::clone(slot).try_lock_owned() {
                return Ok((permit, guard));
            }
        }
        Err(Error::Internal {
            reason: "no free HDFS writer slot despite a permit".to_owned(),
        })
    }
}

/// `<root>/<app>/<shuffle>` or `<root>/<app>/<shuffle>/<start>-<end>` as an HDFS path.
fn dir_of(
    root: &RemoteRoot,
    app: &AppId,
    shuffle: Option<i32>,
    range: Option<PartitionRange>,
) -> String {
    let mut dir = format!("{}/{}", root.root, app);
    if let Some(s) = shuffle {
        dir.push_str(&format!("/{s}"));
    }
    if let Some(r) = range {
        dir.push('/');
        dir.push_str(&r.dir_name());
    }
    dir
}

#[async_trait]
impl Tier for HdfsTier {
    fn kind(&self) -> TierKind {
        TierKind::Hdfs
    }

    /// The NameNode authority of the app's remote storage (`host:port`, or the nameservice),
    /// Java's `storage_host` label; `default` for a bare path on `fs.defaultFS`.
    fn location(&self, part: &PartitionKey) -> Option<String> {
        let entry = self.entry(&part.app)?;
        let target = entry.target.lock();
        let authority = target
            .root
            .fs_url
            .as_deref()
            .and_then(|url| url.split_once("://").map(|(_, a)| a.to_owned()));
        Some(authority.unwrap_or_else(|| "default".to_owned()))
    }

    /// The app's remote storage, when it registered one.
    fn sites(&self, app: &AppId) -> Vec<StorageSite> {
        sites(&self.apps, app)
    }

    /// Writes the batch to a free slot's file pair under the app's remote storage, within
    /// `write_timeout`. Errors are the retryable `Error::TierFailed` (the app has no remote
    /// storage, HDFS refused or timed out); the slot's pair is then retired, so the retry
    /// starts a new pair and readers never see a batch half-appended to a pair that goes on.
    async fn append(&self, part: &PartitionKey, batch: &BlockBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let (entry, gate) = entry_for_append(&self.apps, &part.app, TIER, "remote storage").await?;
        let target = entry.target.lock().clone();
        let n = entry.writers.load(std::sync::atomic::Ordering::Relaxed);
        let slots = Arc::clone(
            entry
                .partitions
                .lock()
                .entry((part.shuffle, part.range))
                .or_insert_with(|| {
                    Arc::new(Slots {
                        free: Arc::new(Semaphore::new(n)),
                        slots: (0..n)
                            .map(|index| {
                                Arc::new(tokio::sync::Mutex::new(Slot {
                                    index,
                                    ..Slot::default()
                                }))
                            })
                            .collect(),
                    })
                }),
        );
        let outcome = async {
            let client = self.client(&target)?;
            let _permit = Arc::clone(&self.permits)
                .acquire_owned()
                .await
                .map_err(|_| Error::Internal {
                    reason: "HDFS permits closed".to_owned(),
                })?;
            let (_slot_permit, mut slot) = Self::take_slot(&slots).await?;
            let dir = dir_of(
                &target.root,
                &part.app,
                Some(part.shuffle),
                Some(part.range),
            );
            let slot_count = slots.slots.len();
            let keep = match slot.open {
                Some(_) => None,
                None => Arc::clone(&self.open_pairs).try_acquire_owned().ok(),
            };
            match tokio::time::timeout(
                self.opts.write_timeout,
                write_pair(
                    &client,
                    &dir,
                    |s| self.pair_name(slot_count, s),
                    &mut slot,
                    batch,
                    keep,
                ),
            )
            .await
            {
                Ok(Ok(())) => {
                    if slot.open.is_some() {
                        close_when_idle(
                            &self.background,
                            Arc::clone(&slots),
                            slot.index,
                            self.opts.keep_open,
                        );
                    }
                    Ok(())
                }
                failed => {
                    if slot.dirty && slot.created {
                        // The failed append reopened a pair that holds committed batches:
                        // until the NameNode recovers its lease, readers may see a shorter
                        // file. Recover it now (in the background: it needs the DataNodes
                        // back) and never write to it again.
                        let name = self.pair_name(slot_count, &slot);
                        recover_leases(
                            &self.background,
                            client.clone(),
                            vec![format!("{dir}/{name}.data"), format!("{dir}/{name}.index")],
                        );
                        retire(&mut slot);
                    }
                    match failed {
                        Ok(Err(f)) if f.connection_dropped() => {
                            let why = self
                                .clients
                                .explain_refused_proxy(&target.root, &target.user, &target.remote)
                                .await;
                            Err(match (f.into_error(), why) {
                                (Error::TierFailed { tier, reason }, Some(why)) => {
                                    Error::TierFailed {
                                        tier,
                                        reason: format!("{reason}; {why}"),
                                    }
                                }
                                (e, _) => e,
                            })
                        }
                        Ok(Err(f)) => Err(f.into_error()),
                        _ => Err(timed_out(
                            TIER,
                            format!("append to {dir}"),
                            self.opts.write_timeout,
                        )),
                    }
                }
            }
        }
        .await;
        drop(gate);
        // The app's own path or user refused: HDFS itself is fine for other apps.
        self.failures.settle(outcome, &target.remote.path)
    }

    /// Closes the pairs kept open in `scope` (see the module doc).
    async fn seal(&self, scope: &PurgeScope) {
        let Some(entry) = self.entry(scope.app()) else {
            return;
        };
        close_pairs(&self.background, &entry.slots_in(scope)).await;
    }

    /// Deletes this server's files (names starting with `<serverId>_`) in the scope, then the
    /// directories the scope leaves empty. Directories are removed with non-recursive deletes,
    /// which the NameNode refuses for a directory that is not empty: files of other servers,
    /// or of an append racing in, are never removed. An app purge also forgets the app.
    async fn purge(&self, scope: &PurgeScope) -> Result<u64> {
        let app = scope.app().clone();
        let Some(entry) = self.entry(&app) else {
            return Ok(0);
        };
        let mut gate = Arc::clone(&entry.gate).write_owned().await;
        let target = entry.target.lock().clone();
        let (shuffle, range) = scope.within_app();
        // Pairs left open in the scope are closed first, so their writers end cleanly rather
        // than against deleted files (appends are kept out by the gate).
        close_pairs(&self.background, &entry.slots_in(scope)).await;
        let result = async {
            let client = self.client(&target)?;
            let dir = dir_of(&target.root, &app, shuffle, range);
            let app_dir = dir_of(&target.root, &app, None, None);
            read::delete_own_files(&client, &dir, &app_dir, &self.opts.file_prefix).await
        }
        .await;
        entry
            .partitions
            .lock()
            .retain(|(s, r), _| !scope.covers(&PartitionKey::new(app.clone(), *s, *r)));
        end_purge(&self.apps, &entry, scope, &mut gate, &result, "HDFS files");
        result
    }

    /// Writable unless the last append failed (a success clears it). Used for the server's
    /// status and the heartbeat's storage info; the router uses [`HdfsTier::may_try`].
    fn health(&self) -> Health {
        self.failures.health()
    }
}

#[async_trait]
impl FileTier for HdfsTier {
    /// The server-side view of a partition (clients read HDFS directly; this is for tests and
    /// checks): every pair of this server, in name order, as one logical file. Each pair
    /// contributes the records a client would use (whole, contiguous, inside its data
    /// length); offsets are rebased onto the concatenation.
    async fn read_index(&self, part: &PartitionKey) -> Result<IndexRead> {
        let layout = self.layout(part).await?;
        Ok(layout.index())
    }

    async fn read_data(&self, part: &PartitionKey, span: Span) -> Result<Bytes> {
        let layout = self.layout(part).await?;
        layout.read(span.offset, span.len).await
    }
}

impl HdfsTier {
    /// The partition's pairs as a client would read them once closed. Its open pairs are
    /// closed first: the HDFS client this side reads with sees only completed blocks of an
    /// open file, where the Uniffle client (Hadoop's) also reads the synced part of the last.
    async fn layout(&self, part: &PartitionKey) -> Result<read::Layout> {
        let Some(entry) = self.entry(&part.app) else {
            return Ok(read::Layout::default());
        };
        let slots = entry
            .partitions
            .lock()
            .get(&(part.shuffle, part.range))
            .cloned();
        if let Some(slots) = slots {
            close_pairs(&self.background, &[slots]).await;
        }
        let target = entry.target.lock().clone();
        let client = self.client(&target)?;
        let dir = dir_of(
            &target.root,
            &part.app,
            Some(part.shuffle),
            Some(part.range),
        );
        read::Layout::load(client, &dir, &self.opts.file_prefix).await
    }
}
