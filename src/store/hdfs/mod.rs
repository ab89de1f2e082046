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
pub mod identity;
mod read;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use hdfs_native::file::FileWriter;
use hdfs_native::{Client, HdfsError, WriteOptions};
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use self::client::{ClientCache, RemoteRoot, TIER};
pub use self::identity::{Identity, WriteAs};
use crate::error::{Error, Result};
use crate::ids::{AppId, PartitionKey, PartitionRange};
use crate::store::admission::{Outcome, Refusal};
use crate::store::failures::Failures;
use crate::store::{
    BlockBatch, FileTier, Health, IndexRead, PurgeScope, RemoteStorage, StorageSite, Tier, TierKind,
};

/// Mode of the directories the tier creates (`rwxr-xr-x`); files are created `rw-r--r--`.
const DIR_PERMISSION: u32 = 0o755;

/// How long the registration probe may take before its answer counts as transient (the
/// registration then goes ahead, as it did before there was a check).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

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
    apps: parking_lot::Mutex<HashMap<AppId, Arc<AppEntry>>>,
    /// Recent append failures, for [`Tier::health`] and [`HdfsTier::may_try`].
    failures: Failures,
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

/// A partition's writer slots.
struct Slots {
    free: Arc<Semaphore>,
    slots: Vec<Arc<tokio::sync::Mutex<Slot>>>,
}

/// One writer's file pair.
#[derive(Default)]
struct Slot {
    index: usize,
    /// Bumped when an append of this slot failed or was abandoned: the next append starts a
    /// new file pair.
    fail_times: u32,
    /// An append is (or was, if it never finished) writing this pair.
    dirty: bool,
    /// The pair exists (appends open it in append mode).
    created: bool,
    /// Bytes in the data file, where the next batch starts.
    data_len: u64,
    /// The pair's writers, when the last append left them open (everything written is
    /// synced and visible).
    open: Option<OpenPair>,
}

/// A file pair left open after an append, so the slot's next append writes on without an
/// open and a close.
struct OpenPair {
    data: FileWriter,
    index: FileWriter,
    /// The client that wrote it, for the lease recovery after a failed close.
    client: Client,
    data_path: String,
    index_path: String,
    /// When the last append through it ended.
    used: Instant,
    _permit: OwnedSemaphorePermit,
}

impl OpenPair {
    /// Closes data, then index. Their bytes are already visible to Hadoop's client: the close
    /// only completes the files and ends the DataNode pipelines and the lease. When it fails
    /// (the NameNode away or in safe mode), the NameNode is asked to recover both leases in
    /// the background, which closes the files at their synced lengths; until then readers
    /// that see only completed blocks see them shorter. The caller retires the slot's pair.
    async fn close(mut self) -> std::result::Result<(), (String, HdfsError)> {
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
                self.client.clone(),
                vec![self.data_path.clone(), self.index_path.clone()],
            );
        }
        closed
    }
}

impl HdfsTier {
    /// A tier with no app yet. Connects nothing: clients are built when an app first spills.
    pub fn new(opts: HdfsOptions) -> Arc<Self> {
        Arc::new(HdfsTier {
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

    /// The registration check of a path: the root is created if missing (as the first flush
    /// would), then an empty file `<root>/.spillway-probe-<serverId>` is created and deleted
    /// as the user the app's files are written as. That is the NameNode's answer to exactly
    /// the calls a flush makes, with no block written (an empty file's close does not wait
    /// for a block report). Readers never see the file: they list `<root>/<app>/…` only.
    pub async fn probe(&self, user: &str, remote: &RemoteStorage) -> Outcome {
        let refused = |answer: String, fix: String| {
            Outcome::Refused(Arc::new(Refusal {
                path: remote.path.clone(),
                answer,
                fix,
            }))
        };
        let root = match RemoteRoot::parse(&remote.path) {
            Ok(r) => r,
            Err(e) => return refused(e.to_string(), "correct the remote storage path".to_owned()),
        };
        if let Some(why) = self.unresolvable(&root, remote).await {
            return refused(
                why,
                "name a host that resolves, or define the nameservice (dfs.nameservices, \
                 dfs.ha.namenodes.<ns>, dfs.namenode.rpc-address.<ns>.<nn>) in hdfs-site.xml \
                 under HADOOP_CONF_DIR or in the app's remote storage conf"
                    .to_owned(),
            );
        }
        let client =
            match self.clients.get(&root, user, remote) {
                Ok(c) => c,
                Err(e) => return refused(
                    e.to_string(),
                    "correct the Hadoop settings of the path (HADOOP_CONF_DIR, the app's remote \
                     storage conf)"
                        .to_owned(),
                ),
            };
        let dir = if root.root.is_empty() {
            "/"
        } else {
            root.root.as_str()
        };
        let file = format!("{}/.spillway-probe-{}", root.root, self.opts.file_prefix);
        let calls = async {
            client
                .mkdirs(dir, DIR_PERMISSION, true)
                .await
                .map_err(|e| hdfs_err("mkdirs", dir, e))?;
            let opened = match client.create(&file, WriteOptions::default()).await {
                Err(HdfsError::AlreadyExists(_)) => {
                    // Left by a probe that was cut short.
                    let _ = client.delete(&file, false).await;
                    client.create(&file, WriteOptions::default()).await
                }
                other => other,
            };
            let mut w = opened.map_err(|e| hdfs_err("create", &file, e))?;
            w.close().await.map_err(|e| hdfs_err("close", &file, e))?;
            client
                .delete(&file, false)
                .await
                .map_err(|e| hdfs_err("delete", &file, e))?;
            Ok::<(), Error>(())
        };
        match tokio::time::timeout(PROBE_TIMEOUT, calls).await {
            Ok(Ok(())) => Outcome::Usable,
            Ok(Err(Error::StorageRefused { answer, fix, .. })) => refused(answer, fix),
            Ok(Err(e)) if e.to_string().contains("RPC listener disconnected") => {
                match self
                    .clients
                    .explain_refused_proxy(&root, user, remote)
                    .await
                {
                    Some(why) => refused(
                        why,
                        "let the server's principal impersonate the app's user \
                         (hadoop.proxyuser.<server user>.hosts/.groups on the NameNode)"
                            .to_owned(),
                    ),
                    None => Outcome::Transient(e.to_string()),
                }
            }
            Ok(Err(e)) => Outcome::Transient(e.to_string()),
            Err(_) => Outcome::Transient(format!(
                "no answer from HDFS within {PROBE_TIMEOUT:?} while checking {}",
                remote.path
            )),
        }
    }

    /// Why the NameNode host of `root` can never be reached: its name does not resolve and
    /// no HA nameservice of that name is configured (the conf directory's files, the
    /// server's items, the app's). The HDFS client would retry such a connection until the
    /// probe's time runs out, which reads as "unreachable, try later"; a name that does not
    /// exist is not a passing state. A DNS outage ("temporary failure") is left to the probe.
    async fn unresolvable(&self, root: &RemoteRoot, remote: &RemoteStorage) -> Option<String> {
        let authority = root.fs_url.as_deref()?.strip_prefix("hdfs://")?;
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().ok()?),
            None => (authority, 8020),
        };
        let nameservice = format!("dfs.ha.namenodes.{host}");
        let files = conf_files::conf_dir()
            .and_then(|(dir, _)| conf_files::read(&dir).ok())
            .unwrap_or_default();
        if files
            .iter()
            .chain(self.opts.hadoop_conf.iter())
            .chain(remote.conf.iter())
            .any(|(k, _)| *k == nameservice)
        {
            return None;
        }
        match tokio::net::lookup_host((host, port)).await {
            Err(e) if e.to_string().contains("not known") => Some(format!(
                "the NameNode host {host} does not resolve ({e}) and no nameservice {host} is configured"
            )),
            _ => None,
        }
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
        close_pairs(&slots).await;
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

/// An HDFS error as the crate's: an answer no retry changes (see [`final_answer`]) is an
/// [`Error::StorageRefused`] (the caller that knows the app's registered path puts it in);
/// anything else is the retryable `TierFailed`.
fn hdfs_err(what: &str, path: &str, e: HdfsError) -> Error {
    match final_answer(&e) {
        Some((answer, fix)) => Error::StorageRefused {
            path: path.to_owned(),
            answer: format!("{what} {path}: {answer}"),
            fix,
        },
        None => Error::TierFailed {
            tier: TIER,
            reason: format!("{what} {path}: {e}"),
        },
    }
}

/// The NameNode's answer and the setting to correct when `e` will not pass by retrying:
/// permissions, impersonation refused, a path that cannot be a directory, a host or
/// nameservice that does not resolve. Safe mode, connection failures, timeouts and
/// DataNode trouble pass, and stay retried.
fn final_answer(e: &HdfsError) -> Option<(String, String)> {
    match e {
        HdfsError::RPCError(class, msg) | HdfsError::FatalRPCError(class, msg) => {
            let short = class.rsplit('.').next().unwrap_or(class);
            let fix = match short {
                "AccessControlException" => {
                    "grant the HDFS user the server writes as (the app's user when it \
                     impersonates, else its own) write access to the remote storage path, or \
                     register a path it may write"
                }
                "AuthorizationException" => {
                    "let the server's principal impersonate the app's user \
                     (hadoop.proxyuser.<server user>.hosts/.groups on the NameNode)"
                }
                "ParentNotDirectoryException" | "InvalidPathException" => {
                    "correct the remote storage path (spark.rss.remote.storage.path or the \
                     coordinator's rss.coordinator.remote.storage.path)"
                }
                _ => return None,
            };
            let first_line = msg.lines().next().unwrap_or(msg);
            Some((format!("{short}: {first_line}"), fix.to_owned()))
        }
        // EAI_NONAME only: "Temporary failure in name resolution" is a DNS outage, which
        // passes.
        HdfsError::IOError(io)
            if io.to_string().contains("failed to lookup address")
                && io.to_string().contains("not known") =>
        {
            Some((
                format!("the NameNode's host does not resolve ({io})"),
                "name a host that resolves, or define the nameservice (dfs.nameservices, \
             dfs.ha.namenodes.<ns>, dfs.namenode.rpc-address.<ns>.<nn>) in hdfs-site.xml \
             under HADOOP_CONF_DIR or in the app's remote storage conf"
                    .to_owned(),
            ))
        }
        HdfsError::InvalidPath(_) | HdfsError::UrlParseError(_) => {
            Some((e.to_string(), "correct the remote storage path".to_owned()))
        }
        _ => None,
    }
}

/// Moves a slot to a new pair (`failTimes` + 1); the old pair is never written again.
fn retire(slot: &mut Slot) {
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
fn recover_leases(client: Client, paths: Vec<String>) {
    tokio::spawn(async move {
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
async fn write_pair(
    client: &Client,
    dir: &str,
    name_of: impl Fn(&Slot) -> String,
    slot: &mut Slot,
    batch: &BlockBatch,
    keep: Option<OwnedSemaphorePermit>,
) -> Result<()> {
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
                .map_err(|e| hdfs_err("write", &data_path, e))?;
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
        .map_err(|e| hdfs_err("open", &index_path, e))?,
    };
    index
        .write_bytes(records)
        .await
        .map_err(|e| hdfs_err("write", &index_path, e))?;
    publish(&mut index, &mut keep, &index_path).await?;
    if keep.is_none() {
        // The index could not be kept open after all (no hsync there): the pair is not kept,
        // so its data file is closed too (a no-op when it was closed above).
        data.close()
            .await
            .map_err(|e| hdfs_err("close", &data_path, e))?;
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
) -> Result<FileWriter> {
    if !slot.created {
        // Explicitly 755 (what Hadoop's mkdirs gives with the default umask 022): parents
        // made implicitly by a create would be 777, writable by every user.
        client
            .mkdirs(dir, DIR_PERMISSION, true)
            .await
            .map_err(|e| hdfs_err("mkdirs", dir, e))?;
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
            Err(e) => return Err(hdfs_err("open", &data_path, e)),
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
) -> Result<()> {
    if keep.is_some() {
        match file.hsync().await {
            Ok(()) => return Ok(()),
            Err(HdfsError::OperationFailed(m)) if m.contains("not supported") => {
                tracing::debug!(path, reason = %m, "hsync unsupported; closing the pair after each append");
                *keep = None;
            }
            Err(e) => return Err(hdfs_err("hsync", path, e)),
        }
    }
    file.close().await.map_err(|e| hdfs_err("close", path, e))
}

/// Closes the open pairs of `partitions`, all at once; a busy slot (an append writing on, an
/// idle closer closing) is waited for. A pair whose close fails is retired: its bytes are
/// visible, and the NameNode ends the file by lease recovery.
async fn close_pairs(partitions: &[Arc<Slots>]) {
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
                if let Err((path, e)) = pair.close().await {
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
async fn close_when_idle(slots: Arc<Slots>, index: usize, idle: Duration) {
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
    if let Err((path, e)) = pair.close().await {
        tracing::warn!(path, error = %e, "closing an idle HDFS file pair failed; recovering its lease");
        retire(&mut slot);
    }
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

    /// The app's remote storage path as the client registered it, and that URI's host.
    fn site(&self, part: &PartitionKey) -> Option<StorageSite> {
        self.sites(&part.app).pop()
    }

    /// The app's remote storage, when it registered one.
    fn sites(&self, app: &AppId) -> Vec<StorageSite> {
        self.entry(app)
            .map(|entry| StorageSite::remote(&entry.target.lock().remote.path))
            .into_iter()
            .collect()
    }

    /// Writes the batch to a free slot's file pair under the app's remote storage, within
    /// `write_timeout`. Errors are the retryable `Error::TierFailed` (the app has no remote
    /// storage, HDFS refused or timed out); the slot's pair is then retired, so the retry
    /// starts a new pair and readers never see a batch half-appended to a pair that goes on.
    async fn append(&self, part: &PartitionKey, batch: &BlockBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let no_storage = || Error::TierFailed {
            tier: TIER,
            reason: format!("app {} registered no remote storage", part.app),
        };
        let entry = self.entry(&part.app).ok_or_else(no_storage)?;
        let gate = Arc::clone(&entry.gate).read_owned().await;
        if *gate {
            return Err(no_storage());
        }
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
                        tokio::spawn(close_when_idle(
                            Arc::clone(&slots),
                            slot.index,
                            self.opts.keep_open,
                        ));
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
                            client.clone(),
                            vec![format!("{dir}/{name}.data"), format!("{dir}/{name}.index")],
                        );
                        retire(&mut slot);
                    }
                    match failed {
                        Ok(Err(Error::TierFailed { tier, reason }))
                            if reason.contains("RPC listener disconnected") =>
                        {
                            let why = self
                                .clients
                                .explain_refused_proxy(&target.root, &target.user, &target.remote)
                                .await;
                            Err(Error::TierFailed {
                                tier,
                                reason: match why {
                                    Some(why) => format!("{reason}; {why}"),
                                    None => reason,
                                },
                            })
                        }
                        Ok(Err(e)) => Err(e),
                        _ => Err(Error::TierFailed {
                            tier: TIER,
                            reason: format!(
                                "append to {dir} did not finish within {:?}",
                                self.opts.write_timeout
                            ),
                        }),
                    }
                }
            }
        }
        .await;
        drop(gate);
        let outcome = outcome.map_err(|e| match e {
            // The app's own path or user is refused: name the path it registered; HDFS itself
            // is fine for other apps, so it is not counted as failing.
            Error::StorageRefused { answer, fix, .. } => Error::StorageRefused {
                path: target.remote.path.clone(),
                answer,
                fix,
            },
            other => other,
        });
        if !matches!(outcome, Err(Error::StorageRefused { .. })) {
            self.failures.record(&outcome);
        }
        outcome
    }

    /// Closes the pairs kept open in `scope` (see the module doc).
    async fn seal(&self, scope: &PurgeScope) {
        let Some(entry) = self.entry(scope.app()) else {
            return;
        };
        close_pairs(&entry.slots_in(scope)).await;
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
        let (shuffle, range) = match scope {
            PurgeScope::App(_) => (None, None),
            PurgeScope::Shuffle(k) => (Some(k.shuffle), None),
            PurgeScope::Partition(k) => (Some(k.shuffle), Some(k.range)),
        };
        // Pairs left open in the scope are closed first, so their writers end cleanly rather
        // than against deleted files (appends are kept out by the gate).
        close_pairs(&entry.slots_in(scope)).await;
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
        if matches!(scope, PurgeScope::App(_)) && result.is_ok() {
            *gate = true;
            let mut apps = self.apps.lock();
            if apps.get(&app).is_some_and(|e| Arc::ptr_eq(e, &entry)) {
                apps.remove(&app);
            }
        }
        drop(gate);
        if let Ok(freed) = &result {
            if *freed > 0 {
                tracing::info!(app_id = %app, ?scope, freed, "deleted HDFS files");
            }
        }
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

    async fn read_data(&self, part: &PartitionKey, offset: u64, len: u64) -> Result<Bytes> {
        let layout = self.layout(part).await?;
        layout.read(offset, len).await
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
            close_pairs(&[slots]).await;
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
