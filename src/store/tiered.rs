//! `TieredStore`: memory in front of the file tiers. Writes land in memory, the spiller moves
//! them down through the [`TierRouter`]; reads go to memory by
//! block cursor and to the server-read file tier by index and range (clients read HDFS
//! directly); purges fan out to every tier.

use std::sync::Arc;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::Result;
use crate::ids::AppId;
use crate::ids::PartitionKey;
use crate::memory::Reservation;
use crate::store::memory::{Inserted, MemoryRead, MemoryReadRequest, MemoryTier, PartitionBuffer};
use crate::store::router::TierRouter;
use crate::store::spill::{SpillOptions, Spiller};
use crate::store::{
    Block, DataRead, FileTier, IndexRead, Payloads, PurgeScope, RemoteStorage, Span,
};

/// The store behind the app registry.
pub struct TieredStore {
    hot: Arc<MemoryTier>,
    /// The tier behind `getLocalShuffleIndex/Data`; `None` in `MEMORY_HDFS` (no local files:
    /// clients read HDFS directly and never ask).
    warm: Option<Arc<dyn FileTier>>,
    /// Where spills go and purges fan out.
    router: Arc<TierRouter>,
    spiller: Spiller,
}

impl TieredStore {
    /// A store whose spills all go to `warm` (local files), which also serves the file reads.
    /// See [`TieredStore::with_router`] for the rest.
    pub fn new(
        hot: Arc<MemoryTier>,
        warm: Arc<dyn FileTier>,
        spill: SpillOptions,
        loop_stop: CancellationToken,
        retry_stop: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        let router = Arc::new(TierRouter::local_only(warm.clone()));
        Self::with_router(
            hot,
            Some(warm),
            router,
            spill,
            loop_stop,
            retry_stop,
            tracker,
        )
    }

    /// Builds the store, with spills going through `router` (which picks local files or the
    /// remote tier per batch); `warm` serves the server-side file reads (local files), if
    /// any. Starts the spiller's watermark loop on `tracker`: `loop_stop` ends it;
    /// `retry_stop` ends retries of failing spills.
    pub fn with_router(
        hot: Arc<MemoryTier>,
        warm: Option<Arc<dyn FileTier>>,
        router: Arc<TierRouter>,
        spill: SpillOptions,
        loop_stop: CancellationToken,
        retry_stop: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        let spiller = Spiller::new(
            Arc::clone(&hot),
            Arc::clone(&router),
            spill,
            retry_stop,
            tracker,
        );
        spiller.spawn_watermark_loop(loop_stop);
        TieredStore {
            hot,
            warm,
            router,
            spiller,
        }
    }

    /// The spill router: the tiers, and which apps the store takes writes from.
    pub fn router(&self) -> &Arc<TierRouter> {
        &self.router
    }

    /// Remembers an app's Hadoop user and remote storage for the HDFS tier.
    pub fn register_app(&self, app: &AppId, user: &str, remote: Option<&RemoteStorage>) {
        self.router.register_app(app, user, remote);
    }

    /// The registration check of the app's remote storage (see [`TierRouter::admit`]); Ok
    /// when the store type has no remote tier.
    pub async fn admit(
        &self,
        app: &AppId,
        user: &str,
        remote: Option<&RemoteStorage>,
    ) -> crate::error::Result<()> {
        self.router.admit(app, user, remote).await
    }

    /// The cause `app` fails with, when its storage refused it for good with nothing to fall
    /// back to (see `store::admission`).
    pub fn failed(&self, app: &AppId) -> Option<crate::error::Error> {
        self.router.admission().failed(app)
    }

    /// The cause new data of `app` is refused with: [`TieredStore::failed`], or a quota it
    /// holds (see `store::quota`).
    pub fn refusal(&self, app: &AppId) -> Option<crate::error::Error> {
        self.router.refusal(app)
    }

    /// The app is gone: log the counts of its logged causes.
    pub fn forget_app(&self, app: &AppId) {
        self.router.forget_app(app);
        self.router.quotas().forget_app(app);
        self.spiller.forget_app(app);
    }

    /// The HDFS writers per partition an app asked for at registration (0: the server's).
    pub fn set_partition_writers(&self, app: &AppId, requested: i32) {
        self.router.set_partition_writers(app, requested);
    }

    /// Health of everything spills can go to.
    pub fn health(&self) -> crate::store::Health {
        self.router.health()
    }

    /// The memory tier.
    pub fn memory(&self) -> &Arc<MemoryTier> {
        &self.hot
    }

    /// The file tier spills go to.
    pub fn warm(&self) -> Option<&Arc<dyn FileTier>> {
        self.warm.as_ref()
    }

    /// The spiller.
    pub fn spiller(&self) -> &Spiller {
        &self.spiller
    }

    /// Stages blocks in `buffer`, then lets the spiller decide whether the buffer must go to
    /// disk now (single-buffer limit, or the lower limit of a huge partition).
    pub fn insert(
        &self,
        buffer: &Arc<PartitionBuffer>,
        blocks: Vec<Block>,
        payloads: Payloads,
        reservation: &mut Reservation,
        huge_limit: Option<u64>,
    ) -> Result<Inserted> {
        let inserted = buffer.insert(blocks, payloads, reservation)?;
        if huge_limit.is_some() {
            self.router.mark_huge(buffer.key());
        }
        self.spiller
            .after_insert(buffer, inserted.staged_bytes, huge_limit);
        Ok(inserted)
    }

    /// Memory read of one partition range; `None` buffer reads as empty.
    pub fn read_memory(&self, part: &PartitionKey, req: &MemoryReadRequest) -> MemoryRead {
        self.hot.get(part).map(|b| b.read(req)).unwrap_or_default()
    }

    /// The file tier's index of a partition.
    pub async fn read_index(&self, part: &PartitionKey) -> Result<IndexRead> {
        match &self.warm {
            Some(w) => w.read_index(part).await,
            None => Ok(IndexRead::default()),
        }
    }

    /// A byte range of the file tier's data file.
    pub async fn read_data(&self, part: &PartitionKey, span: Span) -> Result<Bytes> {
        match &self.warm {
            Some(w) => w.read_data(part, span).await,
            None => Err(no_local_file(part)),
        }
    }

    /// A byte range of the file tier's data file as open file ranges where the tier has
    /// them (see [`FileTier::read_data_ranges`]).
    pub async fn read_data_ranges(&self, part: &PartitionKey, span: Span) -> Result<DataRead> {
        match &self.warm {
            Some(w) => w.read_data_ranges(part, span).await,
            None => Err(no_local_file(part)),
        }
    }

    /// Spills every buffer in `scope` and waits until all of it is durable, then has the
    /// tiers close what they keep open of it ([`Tier::seal`]).
    pub async fn flush(&self, scope: &PurgeScope) {
        let buffers = self.hot.buffers_in(scope);
        self.spiller.spill_and_wait(&buffers).await;
        self.router.seal(scope).await;
    }

    /// Spills every buffer of the server and waits until all of it is durable (shutdown).
    pub async fn flush_all(&self) {
        let buffers = self.hot.all_buffers();
        self.spiller.spill_and_wait(&buffers).await;
    }

    /// Removes `scope` from every tier; returns bytes freed on the file tiers.
    pub async fn purge(&self, scope: &PurgeScope) -> Result<u64> {
        self.hot.purge(scope);
        self.purge_files(scope).await
    }

    /// Removes `scope` from the file tiers only (memory was purged already). App and shuffle
    /// purges are the storage audit's `d|…` lines, logged before the files go, one per storage
    /// the app may have data on, as Java's storage managers log them.
    pub async fn purge_files(&self, scope: &PurgeScope) -> Result<u64> {
        let audit = &self.spiller.options().audit;
        if audit.is_on() {
            let shuffle = match scope {
                PurgeScope::App(_) => Some(None),
                PurgeScope::Shuffle(key) => Some(Some(key.shuffle)),
                // The cleanup after a spill raced a purge: not a purge of Java's.
                PurgeScope::Partition(_) => None,
            };
            if let Some(shuffle) = shuffle {
                let app = scope.app();
                audit.deleted(app, shuffle, self.router.sites(app));
            }
        }
        self.router.purge(scope).await
    }
}

/// The answer to a local data read when the server spills to HDFS only.
fn no_local_file(part: &PartitionKey) -> crate::error::Error {
    crate::error::Error::bad_request(format!(
        "no local file for partition {part}: this server spills to HDFS only"
    ))
}
