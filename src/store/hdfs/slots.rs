//! A partition's writer slots and their file pairs: writing a batch to a pair (data, then
//! index, each made visible before the next), keeping the pair open for the slot's next append,
//! closing it once idle, and retiring a pair an append left behind.

use std::sync::Arc;
use std::time::Duration;

use hdfs_native::file::FileWriter;
use hdfs_native::{Client, HdfsError, WriteOptions};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::errors::Failure;
use crate::store::BlockBatch;

/// Mode of the directories the tier creates (`rwxr-xr-x`); files are created `rw-r--r--`.
pub(super) const DIR_PERMISSION: u32 = 0o755;

/// Where the tier's background work runs (idle closers, lease recoveries): the server's task
/// tracker, which shutdown waits for, and the token that ends that work at shutdown (the
/// shutdown closes what is open itself).
#[derive(Clone, Default)]
pub struct Background {
    /// The tracker the tasks are spawned on.
    pub tracker: TaskTracker,
    /// Fired at shutdown: waiting tasks end.
    pub stop: CancellationToken,
}

impl Background {
    fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = work => {}
            }
        });
    }
}

/// A partition's writer slots.
pub(super) struct Slots {
    pub free: Arc<Semaphore>,
    pub slots: Vec<Arc<tokio::sync::Mutex<Slot>>>,
}

/// One writer's file pair.
#[derive(Default)]
pub(super) struct Slot {
    pub index: usize,
    /// Bumped when an append of this slot failed or was abandoned: the next append starts a
    /// new file pair.
    pub fail_times: u32,
    /// An append is (or was, if it never finished) writing this pair.
    pub dirty: bool,
    /// The pair exists (appends open it in append mode).
    pub created: bool,
    /// Bytes in the data file, where the next batch starts.
    pub data_len: u64,
    /// The pair's writers, when the last append left them open (everything written is
    /// synced and visible).
    pub open: Option<OpenPair>,
}

/// A file pair left open after an append, so the slot's next append writes on without an
/// open and a close.
pub(super) struct OpenPair {
    data: FileWriter,
    index: FileWriter,
    /// The client that wrote it, for the lease recovery after a failed close.
    client: Client,
    data_path: String,
    index_path: String,
    /// When the last append through it ended.
    pub used: Instant,
    _permit: OwnedSemaphorePermit,
}

impl OpenPair {
    /// Closes data, then index. Their bytes are already visible to Hadoop's client: the close
    /// only completes the files and ends the DataNode pipelines and the lease. When it fails
    /// (the NameNode away or in safe mode), the NameNode is asked to recover both leases in
    /// the background, which closes the files at their synced lengths; until then readers
    /// that see only completed blocks see them shorter. The caller retires the slot's pair.
    async fn close(mut self, background: &Background) -> Result<(), (String, HdfsError)> {
        let closed = match self.data.close().await {
            Ok(()) => self
                .index
                .close()
                .await
                .map_err(|e| (self.index_path.clone(), e)),
            Err(e) => Err((self.data_path.clone(), e)),
        };
        if closed.is_err() {
            recover_leases(
                background,
                self.client.clone(),
                vec![self.data_path.clone(), self.index_path.clone()],
            );
        }
        closed
    }
}

/// Moves a slot to a new pair (`failTimes` + 1); the old pair is never written again.
pub(super) fn retire(slot: &mut Slot) {
    slot.open = None;
    slot.fail_times += 1;
    slot.created = false;
    slot.data_len = 0;
    slot.dirty = false;
}

/// How long lease recovery of a retired pair is retried (it completes once the DataNodes
/// holding its last block are reachable).
const RECOVERY_PATIENCE: Duration = Duration::from_secs(30 * 60);

/// Asks the NameNode to recover the leases of `paths` until it reports them closed, so the
/// committed length of a pair whose append failed is visible to readers again.
pub(super) fn recover_leases(background: &Background, client: Client, paths: Vec<String>) {
    background.spawn(async move {
        let started = Instant::now();
        let mut wait = Duration::from_millis(200);
        for path in paths {
            loop {
                match client.recover_lease(&path).await {
                    Ok(true) | Err(HdfsError::FileNotFound(_)) => break,
                    Ok(false) | Err(_) if started.elapsed() < RECOVERY_PATIENCE => {
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(5));
                    }
                    outcome => {
                        tracing::warn!(path, ?outcome, "gave up recovering the lease of a retired HDFS file; the NameNode recovers it at its lease hard limit");
                        break;
                    }
                }
            }
        }
    });
}

/// Writes one batch to the slot's current pair: the data bytes, made visible (`hsync`, or a
/// close when the pair is not kept open), then the index records likewise, so no visible
/// record ever points past the visible data. `keep` is a permit to leave the pair open
/// afterwards (a pair the slot already holds open carries its own). Leaves `dirty` set unless
/// everything succeeded, so a failed or dropped (timed-out) append retires the pair.
pub(super) async fn write_pair(
    client: &Client,
    dir: &str,
    name_of: impl Fn(&Slot) -> String,
    slot: &mut Slot,
    batch: &BlockBatch,
    keep: Option<OwnedSemaphorePermit>,
) -> Result<(), Failure> {
    if slot.dirty {
        retire(slot);
    }
    slot.dirty = true;
    let (mut data, index, mut keep) = match slot.open.take() {
        Some(pair) => (pair.data, Some(pair.index), Some(pair._permit)),
        None => (open_data(client, dir, &name_of, slot).await?, None, keep),
    };
    let name = name_of(slot);
    let data_path = format!("{dir}/{name}.data");
    let index_path = format!("{dir}/{name}.index");
    for b in batch.blocks() {
        if !b.data.is_empty() {
            data.write_bytes(b.data.clone())
                .await
                .map_err(|e| Failure::new("write", &data_path, e))?;
        }
    }
    publish(&mut data, &mut keep, &data_path).await?;

    let records = crate::store::index::encode_blocks(batch.blocks(), slot.data_len);
    let mut index = match index {
        Some(w) => w,
        None => if slot.created {
            client.append(&index_path).await
        } else {
            client.create(&index_path, WriteOptions::default()).await
        }
        .map_err(|e| Failure::new("open", &index_path, e))?,
    };
    index
        .write_bytes(records)
        .await
        .map_err(|e| Failure::new("write", &index_path, e))?;
    publish(&mut index, &mut keep, &index_path).await?;
    if keep.is_none() {
        // The index could not be kept open after all (no hsync there): the pair is not kept,
        // so its data file is closed too (a no-op when it was closed above).
        data.close()
            .await
            .map_err(|e| Failure::new("close", &data_path, e))?;
    }
    if let Some(permit) = keep {
        slot.open = Some(OpenPair {
            data,
            index,
            client: client.clone(),
            data_path,
            index_path,
            used: Instant::now(),
            _permit: permit,
        });
    }
    slot.created = true;
    slot.data_len += batch.data_bytes();
    slot.dirty = false;
    Ok(())
}

/// Opens the slot's data file: create for a new pair, append for one it wrote before. A pair
/// left by an earlier run of this server (same id) is never appended to, its lengths being
/// unknown: the slot skips to the next free name.
async fn open_data(
    client: &Client,
    dir: &str,
    name_of: &impl Fn(&Slot) -> String,
    slot: &mut Slot,
) -> Result<FileWriter, Failure> {
    if !slot.created {
        // Explicitly 755 (what Hadoop's mkdirs gives with the default umask 022): parents
        // made implicitly by a create would be 777, writable by every user.
        client
            .mkdirs(dir, DIR_PERMISSION, true)
            .await
            .map_err(|e| Failure::new("mkdirs", dir, e))?;
    }
    let mut attempts = 0;
    loop {
        let data_path = format!("{dir}/{}.data", name_of(slot));
        let opened = if slot.created {
            client.append(&data_path).await
        } else {
            client.create(&data_path, WriteOptions::default()).await
        };
        match opened {
            Ok(w) => return Ok(w),
            Err(HdfsError::AlreadyExists(_)) if attempts < 16 => {
                attempts += 1;
                slot.fail_times += 1;
            }
            Err(e) => return Err(Failure::new("open", &data_path, e)),
        }
    }
}

/// Makes what was written to `file` visible to readers: `hsync` (the DataNodes have the bytes,
/// the NameNode the length) when the pair stays open, else a close. Where `hsync` is not
/// supported (erasure-coded files) it closes, and the pair is not kept open.
async fn publish(
    file: &mut FileWriter,
    keep: &mut Option<OwnedSemaphorePermit>,
    path: &str,
) -> Result<(), Failure> {
    if keep.is_some() {
        match file.hsync().await {
            Ok(()) => return Ok(()),
            // hsync answers OperationFailed for an erasure-coded file only (and for a closed
            // writer, which is never synced): close instead, and keep no pair open.
            Err(HdfsError::OperationFailed(m)) => {
                tracing::debug!(path, reason = %m, "hsync unsupported; closing the pair after each append");
                *keep = None;
            }
            Err(e) => return Err(Failure::new("hsync", path, e)),
        }
    }
    file.close()
        .await
        .map_err(|e| Failure::new("close", path, e))
}

/// Closes the open pairs of `partitions`, all at once; a busy slot (an append writing on, an
/// idle closer closing) is waited for. A pair whose close fails is retired: its bytes are
/// visible, and the NameNode ends the file by lease recovery.
pub(super) async fn close_pairs(background: &Background, partitions: &[Arc<Slots>]) {
    let closing = partitions
        .iter()
        .flat_map(|slots| (0..slots.slots.len()).map(move |i| (Arc::clone(slots), i)))
        .map(|(slots, i)| async move {
            // A writer permit first, as appends and idle closers take one: a permit always
            // finds a slot unlocked.
            let Ok(_permit) = Arc::clone(&slots.free).acquire_owned().await else {
                return;
            };
            let mut guard = Arc::clone(&slots.slots[i]).lock_owned().await;
            if let Some(pair) = guard.open.take() {
                if let Err((path, e)) = pair.close(background).await {
                    tracing::warn!(path, error = %e, "closing an open HDFS file pair failed; recovering its lease");
                    retire(&mut guard);
                }
            }
        });
    futures::future::join_all(closing).await;
}

/// Closes a slot's open pair once no append has used it for `idle`. Holds a writer permit of
/// the partition while it works, so appends meanwhile take the other slots (or wait for one),
/// never a slot that is closing.
pub(super) fn close_when_idle(
    background: &Background,
    slots: Arc<Slots>,
    index: usize,
    idle: Duration,
) {
    background.spawn(close_idle(background.clone(), slots, index, idle));
}

async fn close_idle(background: Background, slots: Arc<Slots>, index: usize, idle: Duration) {
    tokio::time::sleep(idle).await;
    let Ok(_permit) = Arc::clone(&slots.free).acquire_owned().await else {
        return;
    };
    let mut slot = slots.slots[index].lock().await;
    if slot.open.as_ref().is_none_or(|p| p.used.elapsed() < idle) {
        // Closed already, or used again since: that append scheduled its own close.
        return;
    }
    let Some(pair) = slot.open.take() else {
        return;
    };
    if let Err((path, e)) = pair.close(&background).await {
        tracing::warn!(path, error = %e, "closing an idle HDFS file pair failed; recovering its lease");
        retire(&mut slot);
    }
}
