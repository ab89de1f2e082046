//! `TieredStore`: memory in front of a file tier. Writes land in memory, the spiller moves
//! them down; reads go to memory by block cursor and to the file tier by index and range;
//! purges fan out to every tier.

use std::sync::Arc;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::Result;
use crate::ids::PartitionKey;
use crate::memory::Reservation;
use crate::store::memory::{Inserted, MemoryRead, MemoryReadRequest, MemoryTier, PartitionBuffer};
use crate::store::spill::{SpillOptions, Spiller};
use crate::store::{Block, FileTier, IndexRead, PurgeScope};

/// The store behind the app registry.
pub struct TieredStore {
    hot: Arc<MemoryTier>,
    warm: Arc<dyn FileTier>,
    spiller: Spiller,
}

impl TieredStore {
    /// Builds the store and starts the spiller's watermark loop on `tracker`. `loop_stop`
    /// ends the watermark loop; `retry_stop` ends retries of failing spills.
    pub fn new(
        hot: Arc<MemoryTier>,
        warm: Arc<dyn FileTier>,
        spill: SpillOptions,
        loop_stop: CancellationToken,
        retry_stop: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        let target: Arc<dyn crate::store::Tier> = warm.clone();
        let spiller = Spiller::new(Arc::clone(&hot), target, spill, retry_stop, tracker);
        spiller.spawn_watermark_loop(loop_stop);
        TieredStore { hot, warm, spiller }
    }

    /// The memory tier.
    pub fn memory(&self) -> &Arc<MemoryTier> {
        &self.hot
    }

    /// The file tier spills go to.
    pub fn warm(&self) -> &Arc<dyn FileTier> {
        &self.warm
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
        reservation: &mut Reservation,
        huge_limit: Option<u64>,
    ) -> Result<Inserted> {
        let inserted = buffer.insert(blocks, reservation)?;
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
        self.warm.read_index(part).await
    }

    /// A byte range of the file tier's data file.
    pub async fn read_data(&self, part: &PartitionKey, offset: u64, len: u64) -> Result<Bytes> {
        self.warm.read_data(part, offset, len).await
    }

    /// Spills every buffer in `scope` and waits until all of it is durable.
    pub async fn flush(&self, scope: &PurgeScope) {
        let buffers = self.hot.buffers_in(scope);
        self.spiller.spill_and_wait(&buffers).await;
    }

    /// Spills every buffer of the server and waits until all of it is durable (shutdown).
    pub async fn flush_all(&self) {
        let buffers = self.hot.all_buffers();
        self.spiller.spill_and_wait(&buffers).await;
    }

    /// Removes `scope` from every tier; returns bytes freed on the file tier.
    pub async fn purge(&self, scope: &PurgeScope) -> Result<u64> {
        self.hot.purge(scope);
        self.warm.purge(scope).await
    }
}
