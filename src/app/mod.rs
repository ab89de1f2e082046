//! `AppRegistry`: the apps this server serves, and the one API that every front end (gRPC
//! now, the Netty plane later) calls. Handlers convert wire messages into these calls; all
//! semantics (status rules, refresh, expiry, purge) live here and below.
//!
//! - `state.rs`: `App` and `Shuffle`
//! - `mod.rs`: lookup and lifecycle (register, heartbeat, expiry, unregister, purge)
//! - `write.rs`: requireBuffer, sendShuffleData, commit, finish
//! - `read.rs`: block-id reports and queries, memory/index/data reads

pub mod block_ids;
pub mod block_sizes;
pub mod read;
pub mod record_counts;
mod restore;
pub mod server_metrics;
mod state;
mod stats;
pub mod write;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

pub use state::{App, RemoteStorage, Shuffle};
pub use stats::RegistryStats;

use crate::error::{Error, Result};
use crate::ids::{AppId, PartitionKey, PartitionRange};
use crate::memory::{ReadBudget, Tickets};
use crate::periodic::Schedule;
use crate::recovery::{Journal, Record};
use crate::status::ServerStatus;
use crate::store::tiered::TieredStore;
use crate::store::PurgeScope;

/// Registry policy (from `[app]`, `[hybrid_store]` and `[memory_store]`).
#[derive(Clone, Debug)]
pub struct RegistryOptions {
    /// An app with no request or heartbeat for this long is purged.
    pub app_timeout: Duration,
    /// A partition that received more than this is "huge".
    pub huge_partition_threshold: u64,
    /// Memory a huge partition may hold before requireBuffer answers
    /// `NO_BUFFER_FOR_HUGE_PARTITION`.
    pub huge_partition_memory_limit: u64,
    /// Partition size beyond which sends are refused for good.
    pub huge_partition_hard_limit: Option<u64>,
    /// Encoded partition size (plus the size requested) beyond which `requireBuffer` lists
    /// the partition in `needSplitPartitionIds`; `None` never does.
    pub huge_partition_split_limit: Option<u64>,
    /// Read memory taken by an index read (Java's `rss.server.index.size.hint`).
    pub index_read_hint: u64,
    /// How long `finishShuffle` (and a waiting `commitShuffleTask`) waits for its spill.
    pub commit_timeout: Duration,
    /// `commitShuffleTask` answers once the shuffle's buffers are spilled: store types whose
    /// clients read no memory (`LOCALFILE`, `HDFS`, `LOCALFILE_HDFS`), as Java's
    /// `ShuffleTaskManager.commitShuffle` waits for them.
    pub commit_waits_for_spill: bool,
    /// How long a `requireBuffer` over full memory waits for a release before `NO_BUFFER`.
    pub require_buffer_wait: Duration,
}

/// A shuffle registration, already validated.
#[derive(Clone, Debug)]
pub struct Registration {
    /// The app.
    pub app: AppId,
    /// The shuffle.
    pub shuffle: i32,
    /// Ranges this server owns.
    pub ranges: Vec<PartitionRange>,
    /// Client asked for `LOCAL_ORDER`.
    pub local_order: bool,
    /// Hadoop user.
    pub user: String,
    /// HDFS location, if any.
    pub remote_storage: Option<RemoteStorage>,
    /// Client properties (0.10 sends the whole SparkConf).
    pub properties: HashMap<String, String>,
    /// Writers per partition the app asks for on HDFS (`maxConcurrencyPerPartitionToWrite`,
    /// Spark's `spark.rss.client.max.concurrency.of.per-partition.write`); 0: the server's.
    pub partition_writers: i32,
}

/// "No limit" in [`HugeLimits`]: no partition reaches it (Java's `Long.MAX_VALUE` default).
const NO_LIMIT: u64 = u64::MAX;

/// The huge-partition limits as the request path reads them: one relaxed load each.
#[derive(Debug)]
struct HugeLimits {
    threshold: AtomicU64,
    /// [`NO_LIMIT`] for none.
    hard: AtomicU64,
    /// [`NO_LIMIT`] for none.
    split: AtomicU64,
}

impl HugeLimits {
    fn new(opts: &RegistryOptions) -> Self {
        HugeLimits {
            threshold: AtomicU64::new(opts.huge_partition_threshold),
            hard: AtomicU64::new(opts.huge_partition_hard_limit.unwrap_or(NO_LIMIT)),
            split: AtomicU64::new(opts.huge_partition_split_limit.unwrap_or(NO_LIMIT)),
        }
    }

    fn get(limit: &AtomicU64) -> Option<u64> {
        Some(limit.load(Ordering::Relaxed)).filter(|&l| l != NO_LIMIT)
    }
}

/// The registry. Cheap to share behind an `Arc`.
pub struct AppRegistry {
    apps: RwLock<HashMap<AppId, Arc<App>>>,
    /// Apps whose purge is running; their re-registration is refused meanwhile.
    purging: Arc<Mutex<HashSet<AppId>>>,
    store: Arc<TieredStore>,
    tickets: Arc<Tickets>,
    reads: ReadBudget,
    status: ServerStatus,
    opts: RegistryOptions,
    /// The huge-partition limits, which change at runtime (Java reads them through
    /// `getReconfigurableConf` on every use); `opts` keeps their start-up values.
    huge: HugeLimits,
    /// Runs the file part of app purges in the background.
    tracker: TaskTracker,
    /// Request counters for `/metrics` (shared with background purges).
    stats: Arc<RegistryStats>,
    /// Restart recovery's journal, when enabled: registrations and reports are answered only
    /// once their record is written; drops and commits are queued in order.
    journal: std::sync::OnceLock<Arc<Journal>>,
}

impl AppRegistry {
    /// A registry over `store`; background purges run on `tracker`.
    pub fn new(
        store: Arc<TieredStore>,
        tickets: Arc<Tickets>,
        reads: ReadBudget,
        status: ServerStatus,
        opts: RegistryOptions,
        tracker: TaskTracker,
    ) -> Self {
        AppRegistry {
            apps: RwLock::new(HashMap::new()),
            purging: Arc::new(Mutex::new(HashSet::new())),
            store,
            tickets,
            reads,
            status,
            huge: HugeLimits::new(&opts),
            opts,
            tracker,
            stats: Arc::default(),
            journal: std::sync::OnceLock::new(),
        }
    }

    /// Connects the journal (once, at start-up, after the registry was restored).
    pub fn set_journal(&self, journal: Arc<Journal>) {
        let _ = self.journal.set(journal);
    }

    /// Switches the `write_block_size` histogram on with these bucket bounds (bytes); once, at
    /// start-up. Empty bounds leave it off.
    pub fn enable_block_sizes(&self, bounds: Vec<u64>) {
        let _ = self
            .stats
            .block_sizes
            .set(block_sizes::BlockSizes::new(bounds));
    }

    /// Writes `rec` and waits for it; without a journal, nothing to do.
    async fn journal(&self, rec: Record) -> Result<()> {
        match self.journal.get() {
            Some(j) => j.write(&rec).await,
            None => Ok(()),
        }
    }

    /// Queues `rec` (order kept, no wait); without a journal, nothing to do.
    fn journal_detached(&self, rec: Record) {
        if let Some(j) = self.journal.get() {
            j.write_detached(&rec);
        }
    }

    /// Puts an app recovered after a restart into the registry, with a buffer for each of its
    /// ranges (restart recovery only; the app is new to this process).
    pub(crate) fn adopt_app(&self, app: Arc<App>) {
        for id in app.shuffle_ids() {
            let Some(shuffle) = app.shuffle(id) else {
                continue;
            };
            for range in shuffle.ranges() {
                let key = PartitionKey::new(app.id().clone(), id, range);
                self.store.memory().ensure(key, shuffle.local_order());
            }
        }
        self.store
            .register_app(app.id(), &app.user(), app.remote_storage().as_ref());
        self.apps.write().insert(app.id().clone(), app);
    }

    /// Request counters (bytes received and served, refusals), read by `/metrics`.
    pub fn stats(&self) -> &RegistryStats {
        &self.stats
    }

    /// A partition that received more than this is "huge" (`[hybrid_store]`).
    pub fn huge_partition_threshold(&self) -> u64 {
        self.huge.threshold.load(Ordering::Relaxed)
    }

    /// Partition size beyond which sends are refused for good.
    pub fn huge_partition_hard_limit(&self) -> Option<u64> {
        HugeLimits::get(&self.huge.hard)
    }

    /// Size beyond which `requireBuffer` asks a 0.10 client to split the partition.
    pub fn huge_partition_split_limit(&self) -> Option<u64> {
        HugeLimits::get(&self.huge.split)
    }

    /// New huge-partition limits (runtime reconfiguration); they apply from the next request.
    pub fn set_huge_partition_limits(&self, threshold: u64, hard: Option<u64>, split: Option<u64>) {
        self.huge.threshold.store(threshold, Ordering::Relaxed);
        self.huge
            .hard
            .store(hard.unwrap_or(NO_LIMIT), Ordering::Relaxed);
        self.huge
            .split
            .store(split.unwrap_or(NO_LIMIT), Ordering::Relaxed);
    }

    /// Registered partition ranges over all live apps (`partition_num_with_node`).
    pub fn partition_count(&self) -> usize {
        self.apps.read().values().map(|a| a.partition_count()).sum()
    }

    /// ACTIVE → DECOMMISSIONING (the `ShuffleServerInternal.decommission` call and the HTTP
    /// admin endpoint): no new apps; the server stops once the last app is gone.
    pub fn decommission(&self) -> Result<()> {
        self.status.decommission()?;
        tracing::info!(
            apps = self.app_count(),
            "decommissioning: no new apps accepted"
        );
        Ok(())
    }

    /// Back to ACTIVE (`cancelDecommission`, gRPC or HTTP).
    pub fn cancel_decommission(&self) {
        self.status.cancel_decommission();
        tracing::info!("decommission cancelled");
    }

    /// The store behind the registry.
    pub fn store(&self) -> &Arc<TieredStore> {
        &self.store
    }

    /// The ticket table.
    pub fn tickets(&self) -> &Arc<Tickets> {
        &self.tickets
    }

    /// The read-memory cap.
    pub fn read_budget(&self) -> &ReadBudget {
        &self.reads
    }

    /// Server status (decommission).
    pub fn status(&self) -> &ServerStatus {
        &self.status
    }

    /// Number of live apps.
    pub fn app_count(&self) -> usize {
        self.apps.read().len()
    }

    /// Live apps.
    pub fn apps(&self) -> Vec<Arc<App>> {
        self.apps.read().values().cloned().collect()
    }

    /// Whether `app` is registered here (expired or not): what the leaked-data sweep keeps.
    pub fn is_registered(&self, app: &AppId) -> bool {
        self.apps.read().contains_key(app)
    }

    /// `registerShuffle`: creates or refreshes the app and its ranges (idempotent).
    ///
    /// Runs under the apps write lock (registration is rare), so it cannot interleave with a
    /// purge taking the same app out: either it lands before and is purged with the app, or it
    /// sees the purge and is refused.
    /// Answered once the registration is journaled (restart recovery).
    pub async fn register(&self, reg: Registration) -> Result<()> {
        let record = Record::Register {
            app: reg.app.to_string(),
            shuffle: reg.shuffle,
            ranges: reg.ranges.iter().map(|r| (r.start, r.end)).collect(),
            local_order: reg.local_order,
            user: reg.user.clone(),
            remote: reg
                .remote_storage
                .as_ref()
                .map(|r| (r.path.clone(), r.conf.clone())),
            at_ms: crate::clock::now_ms().unsigned_abs(),
        };
        // The remote storage is checked before anything is recorded: an app that cannot be
        // served is refused with the cause (see `TierRouter::admit`).
        self.store
            .admit(&reg.app, &reg.user, reg.remote_storage.as_ref())
            .await?;
        let (app, shuffle) = (reg.app.clone(), reg.shuffle);
        // Waits out an `unregisterShuffle` of this shuffle that is still purging (see
        // `App::shuffle_gate`). A brand-new app has no purge to wait for.
        let existing = self.apps.read().get(&app).cloned();
        let _gate = match &existing {
            Some(a) => Some(a.shuffle_gate(shuffle).read_owned().await),
            None => None,
        };
        self.register_in_memory(reg)?;
        self.journal(record).await?;
        tracing::info!(app_id = %app, shuffle_id = shuffle, "registered shuffle");
        Ok(())
    }

    fn register_in_memory(&self, reg: Registration) -> Result<()> {
        let mut apps = self.apps.write();
        if self.purging.lock().contains(&reg.app) {
            return Err(Error::InvalidState {
                reason: format!("app {} is being purged; register again later", reg.app),
            });
        }
        if !apps.contains_key(&reg.app) && self.status.refuses_new_apps() {
            return Err(Error::InvalidState {
                reason: format!(
                    "server is {}: it accepts no new apps",
                    self.status.get().as_str_name()
                ),
            });
        }
        let shuffle = {
            let app = apps.entry(reg.app.clone()).or_insert_with(|| {
                self.stats.apps_created.fetch_add(1, Ordering::Relaxed);
                Arc::new(App::new(
                    reg.app.clone(),
                    self.store.memory().budget().tenant(),
                ))
            });
            app.touch();
            app.set_registration(reg.user, reg.remote_storage, reg.properties);
            self.store
                .register_app(&reg.app, &app.user(), app.remote_storage().as_ref());
            self.store
                .set_partition_writers(&reg.app, reg.partition_writers);
            app.shuffle_or_insert(reg.shuffle, reg.local_order)
        };
        for range in reg.ranges {
            shuffle.add_range(range)?;
            self.stats.ranges_registered.fetch_add(1, Ordering::Relaxed);
            let key = PartitionKey::new(reg.app.clone(), reg.shuffle, range);
            self.store.memory().ensure(key, shuffle.local_order());
        }
        drop(apps);
        Ok(())
    }

    /// Java 0.10's `verifyRequest`: the app must exist and not be expired.
    pub fn verify(&self, app: &AppId) -> Result<Arc<App>> {
        let found = self.apps.read().get(app).cloned();
        match found {
            Some(a) if !self.expired(&a, Instant::now()) => Ok(a),
            _ => {
                self.stats.app_not_found.fetch_add(1, Ordering::Relaxed);
                Err(Error::AppNotFound {
                    app_id: app.to_string(),
                })
            }
        }
    }

    /// Like [`AppRegistry::verify`], and marks the app as seen. Every request of a live app
    /// refreshes it (Java skips requireBuffer and commit; refreshing them too only keeps a
    /// writing app alive longer, which is what a client in the middle of a stage wants).
    pub fn verify_and_touch(&self, app: &AppId) -> Result<Arc<App>> {
        let a = self.verify(app)?;
        a.touch();
        Ok(a)
    }

    fn expired(&self, app: &App, now: Instant) -> bool {
        now.saturating_duration_since(app.last_seen()) > self.opts.app_timeout
    }

    /// `appHeartbeat`: refreshes a live app; unknown or expired → `NO_REGISTER` (0.10).
    pub fn heartbeat(&self, app: &AppId) -> Result<()> {
        self.verify_and_touch(app).map(|_| ())
    }

    /// `unregisterShuffle`: purges one shuffle at once. Unknown apps/shuffles succeed
    /// (idempotent, as 0.9 does).
    pub async fn unregister_shuffle(&self, app: &AppId, shuffle: i32) -> Result<()> {
        let Some(a) = self.apps.read().get(app).cloned() else {
            return Ok(());
        };
        let started = std::time::Instant::now();
        // Held until the purge is done, so no registration of this shuffle lands in between.
        let _gate = a.shuffle_gate(shuffle).write_owned().await;
        a.remove_shuffle(shuffle);
        self.journal(Record::DropShuffle {
            app: app.to_string(),
            shuffle,
        })
        .await?;
        let scope = PurgeScope::shuffle(app.clone(), shuffle);
        let freed = self.store.purge(&scope).await?;
        self.stats.deleted_bytes.fetch_add(freed, Ordering::Relaxed);
        self.stats
            .removals
            .shuffle
            .observe(started.elapsed().as_secs_f64());
        tracing::info!(app_id = %app, shuffle_id = shuffle, freed, "unregistered shuffle");
        Ok(())
    }

    /// `unregisterShuffleByAppId`: the app is gone from memory, tickets and the registry when
    /// this returns; its files are deleted in the background (re-registration is refused
    /// until that is done). Idempotent.
    pub fn unregister_app(&self, app: &AppId) {
        if let Some(files) = self.begin_purge(app, false, "unregistered") {
            self.tracker.spawn(files);
        }
    }

    /// Takes an app out of the registry, tickets and memory at once, and returns the future
    /// that deletes its files. `only_if_expired` re-checks expiry under the same lock that
    /// removes the app, so a request that refreshed it meanwhile wins. Never touches another
    /// app.
    fn begin_purge(
        &self,
        app: &AppId,
        only_if_expired: bool,
        reason: &'static str,
    ) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        let started = std::time::Instant::now();
        {
            let mut apps = self.apps.write();
            let stale = apps
                .get(app)
                .is_some_and(|a| self.expired(a, Instant::now()));
            if only_if_expired && !stale {
                return None;
            }
            apps.remove(app)?;
            self.purging.lock().insert(app.clone());
        }
        self.journal_detached(Record::DropApp {
            app: app.to_string(),
        });
        self.tickets.purge_app(app);
        self.store.forget_app(app);
        let scope = PurgeScope::App(app.clone());
        let in_memory = self.store.memory().purge(&scope);
        // Java moves the app's flushed-file count to `total_delete_file_num` when it removes
        // the app's storage info.
        let written = self.store.spiller().stats().forget_app(app);
        if let Some(sizes) = self.stats.block_sizes.get() {
            sizes.forget(app);
        }
        self.stats
            .deleted_files
            .fetch_add(written.events, Ordering::Relaxed);
        let store = Arc::clone(&self.store);
        let app = app.clone();
        let purging = Arc::clone(&self.purging);
        let stats = Arc::clone(&self.stats);
        Some(async move {
            match store.purge_files(&scope).await {
                Ok(freed) => {
                    stats.deleted_bytes.fetch_add(freed, Ordering::Relaxed);
                    stats.removals.app.observe(started.elapsed().as_secs_f64());
                    tracing::info!(app_id = %app, in_memory, freed, reason, "purged app")
                }
                Err(e) => {
                    tracing::warn!(app_id = %app, error = %e, reason, "purge of app files failed")
                }
            }
            purging.lock().remove(&app);
        })
    }

    /// Apps whose files are still being deleted.
    pub fn purges_running(&self) -> usize {
        self.purging.lock().len()
    }

    /// One expiry pass: purges every app not seen for `app_timeout` (file deletions run
    /// concurrently) and returns how many.
    pub async fn expire(&self) -> usize {
        let now = Instant::now();
        let stale: Vec<AppId> = self
            .apps
            .read()
            .values()
            .filter(|a| self.expired(a, now))
            .map(|a| a.id().clone())
            .collect();
        let purges: Vec<_> = stale
            .iter()
            .filter_map(|app| self.begin_purge(app, true, "expired without heartbeat"))
            .map(|files| self.tracker.spawn(files))
            .collect();
        let n = purges.len();
        for p in purges {
            let _ = p.await;
        }
        n
    }

    /// Runs [`AppRegistry::expire`] on `schedule`.
    pub fn spawn_expiry(self: &Arc<Self>, schedule: Schedule) {
        let registry = Arc::clone(self);
        schedule.run(move || {
            let registry = Arc::clone(&registry);
            async move {
                registry.expire().await;
            }
        });
    }

    fn shuffle_of(app: &App, shuffle: i32) -> Result<Arc<Shuffle>> {
        app.shuffle(shuffle).ok_or_else(|| Error::NotRegistered {
            app_id: app.id().to_string(),
            shuffle_id: shuffle,
            what: format!("shuffle {shuffle}"),
        })
    }
}

#[cfg(test)]
mod tests;
