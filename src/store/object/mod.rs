//! ObjectTier: the cold tier on object storage (S3 and S3-compatible stores: MinIO, Ceph RGW,
//! OSS, COS, OBS, R2), for apps whose remote storage path is `s3a://`, `s3://` or `s3n://`.
//!
//! The Java server writes its remote tier through Hadoop's FileSystem and appends to a
//! partition's file on every flush, which S3A cannot do, so no Uniffle server could use object
//! storage. This tier writes the layout the released clients already read through Hadoop's
//! s3a (`HadoopClientReadHandler`), one immutable object pair per flush:
//!
//! ```text
//! <root>/<appId>/<shuffleId>/<start>-<end>/<serverId>_<epochMs>_<seq>.data
//! <root>/<appId>/<shuffleId>/<start>-<end>/<serverId>_<epochMs>_<seq>.index
//! ```
//!
//! - The client lists the range folder (`listStatus`: one LIST of the prefix), keeps the
//!   `*.index` names that start with the server id it was assigned, and reads each pair on its
//!   own in random order, skipping block ids it already has. It never parses the rest of the
//!   name, so `<epochMs>_<seq>` only has to be unique: the process start time and a counter,
//!   so a restarted server with the same id never overwrites an object of its previous run.
//! - **Never an append, never an overwrite**: each flush is a new data object, written
//!   first, then its index object. A reader that lists between the two sees no index, so no
//!   record points at bytes that are not there. The index records count from 0 in their own
//!   data object.
//! - **Multipart for large flushes**: a data object of at least `fs.s3a.multipart.threshold`
//!   (128M) goes up in parts of `fs.s3a.multipart.size` (64M); a failed upload is aborted, so
//!   no part is left behind (and billed).
//! - **Retries**: throttling (503 SlowDown), 5xx and timeouts are retried with exponential
//!   backoff by the S3 client (`fs.s3a.retry.limit`, `fs.s3a.retry.interval`). A flush that
//!   still fails is a retryable `TierFailed`: the router sends it to local disk when the store
//!   type has one, the spiller retries otherwise, and memory is freed only after success.
//! - **Deletes** list the scope's prefix and batch-delete (DeleteObjects, up to 1000 keys a
//!   request) only the objects whose name starts with `<serverId>_`: another server's objects
//!   in the same folders are never touched.
//!
//! How many objects a partition gets, and why that is acceptable, is in docs/object-storage.md.

pub mod conf;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload, WriteMultipart};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use self::conf::TIER;
pub use self::conf::{is_object_path, ObjectRoot, S3Settings, SCHEMES};
use crate::error::{Error, Result};
use crate::ids::{AppId, PartitionKey, PartitionRange};
use crate::store::admission::{Outcome, Refusal};
use crate::store::failures::Failures;
use crate::store::pairs::{is_own, Pair, Pairs};
use crate::store::remote::{self, RemoteApps, RemoteEntry};
use crate::store::{
    BlockBatch, FileTier, Health, IndexRead, PurgeScope, RemoteStorage, Span, StorageSite, Tier,
    TierKind,
};

/// How the object tier is set up (from `[hdfs_store]`, whose keys name the remote tier, and
/// the server id).
#[derive(Clone, Debug)]
pub struct ObjectOptions {
    /// The server id: the name prefix the client filters on.
    pub file_prefix: String,
    /// Flushes in flight across the server.
    pub max_concurrency: usize,
    /// A flush taking longer is abandoned (its multipart upload aborted) and retried.
    pub write_timeout: Duration,
    /// After a failure, how long [`ObjectTier::may_try`] says no.
    pub failure_cooldown: Duration,
    /// The server's own conf items (`hdfs_store.hadoop_conf`), under each app's.
    pub hadoop_conf: Vec<(String, String)>,
}

/// The object-store tier; see the module doc.
pub struct ObjectTier {
    opts: ObjectOptions,
    /// Names this process writes start `<serverId>_<epoch>_`.
    epoch: u64,
    seq: AtomicU64,
    permits: Arc<Semaphore>,
    stores: parking_lot::Mutex<HashMap<(String, S3Settings), Arc<dyn ObjectStore>>>,
    apps: RemoteApps<AppEntry>,
    /// Every root an app registered since start (kept after the app is gone), for the
    /// leaked-data sweep.
    roots: parking_lot::Mutex<HashMap<ObjectRoot, Arc<dyn ObjectStore>>>,
    failures: Failures,
}

/// Where one app's objects go.
struct AppEntry {
    remote: RemoteStorage,
    root: ObjectRoot,
    settings: S3Settings,
    store: Arc<dyn ObjectStore>,
    /// Flushes hold it shared, purges exclusively; `true` once an app purge retired the entry.
    gate: Arc<tokio::sync::RwLock<bool>>,
}

impl RemoteEntry for AppEntry {
    fn gate(&self) -> &Arc<tokio::sync::RwLock<bool>> {
        &self.gate
    }

    fn registered_path(&self) -> String {
        self.remote.path.clone()
    }
}

/// A store error as the crate's: an answer no retry changes (see [`final_answer`]) is an
/// [`Error::StorageRefused`] naming the object (the caller that knows the app's registered
/// path puts that in its place); anything else is the retryable `TierFailed`.
fn store_err(what: &str, key: &str, e: object_store::Error) -> Error {
    match final_answer(&e) {
        Some((answer, fix)) => Error::StorageRefused {
            path: key.to_owned(),
            answer: format!("{what} {key}: {answer}"),
            fix,
        },
        None => Error::TierFailed {
            tier: TIER,
            reason: format!("{what} {key}: {e}"),
        },
    }
}

/// S3 error codes that mean the request will never succeed with these settings, each with
/// the setting to correct. Throttling (SlowDown, 503), 5xx and timeouts are not here: they
/// pass, and stay retried.
const FINAL_CODES: &[(&str, &str)] = &[
    ("InvalidAccessKeyId", "fs.s3a.access.key names a key the store does not know"),
    ("SignatureDoesNotMatch", "fs.s3a.secret.key does not belong to fs.s3a.access.key"),
    ("AccessDenied", "grant the credentials in fs.s3a.access.key (or fs.s3a.aws.credentials.provider) write access to the path, or use credentials that have it"),
    ("AllAccessDisabled", "the bucket is disabled for every request: use another bucket"),
    ("AccountProblem", "the account of the bucket is blocked: ask the store's administrator"),
    ("NoSuchBucket", "create the bucket, or correct the bucket in the remote storage path (spark.rss.remote.storage.path or the coordinator's rss.coordinator.remote.storage.path)"),
    ("InvalidBucketName", "correct the bucket in the remote storage path"),
    ("AuthorizationHeaderMalformed", "fs.s3a.endpoint.region does not match the bucket's region"),
    ("PermanentRedirect", "fs.s3a.endpoint (or fs.s3a.endpoint.region) points to another region than the bucket's"),
    ("InvalidToken", "fs.s3a.session.token is malformed"),
];

/// The store's answer and the fix when `e` will not pass by retrying; `None` otherwise.
/// Reads the S3 error body's `<Code>` and `<Message>` only: other elements of some answers
/// (the string to sign, the access key id) stay out of every message.
fn final_answer(e: &object_store::Error) -> Option<(String, String)> {
    use object_store::Error as E;
    let text = e.to_string();
    let code = xml_element(&text, "Code");
    let answer = match (&code, xml_element(&text, "Message")) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c.clone(),
        (None, _) => status_line(&text),
    };
    let fix_of = |c: &str| {
        FINAL_CODES
            .iter()
            .find(|(k, _)| *k == c)
            .map(|(_, fix)| (*fix).to_owned())
    };
    match (e, code.as_deref()) {
        (_, Some(c)) if fix_of(c).is_some() => Some((answer, fix_of(c)?)),
        (E::PermissionDenied { .. }, _) => Some((answer, fix_of("AccessDenied")?)),
        (E::Unauthenticated { .. }, _) => Some((
            answer,
            "fs.s3a.access.key and fs.s3a.secret.key (or fs.s3a.aws.credentials.provider)"
                .to_owned(),
        )),
        _ => None,
    }
}

/// The text of the first `<tag>…</tag>` in `text`.
fn xml_element(text: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&format!("</{tag}>"))?;
    Some(text[start..start + len].trim().to_owned())
}

/// "403 Forbidden" out of an answer without an S3 error body.
fn status_line(text: &str) -> String {
    text.split("response: ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .map_or_else(|| text.to_owned(), str::to_owned)
}

impl ObjectTier {
    /// A tier with no app yet; stores are built when an app registers.
    pub fn new(opts: ObjectOptions) -> Arc<Self> {
        let epoch = crate::clock::now_ms().unsigned_abs();
        Arc::new(ObjectTier {
            failures: Failures::new("object store", "flushes", opts.failure_cooldown),
            permits: Arc::new(Semaphore::new(opts.max_concurrency.max(1))),
            opts,
            epoch,
            seq: AtomicU64::new(0),
            stores: parking_lot::Mutex::new(HashMap::new()),
            apps: parking_lot::Mutex::new(HashMap::new()),
            roots: parking_lot::Mutex::new(HashMap::new()),
        })
    }

    /// Records where `app` writes (`registerShuffle`): parses the path and its s3a keys and
    /// builds (or reuses) the S3 client. A bad path or key fails here, naming it.
    pub fn register_app(&self, app: &AppId, remote: &RemoteStorage) -> Result<()> {
        // Every registerShuffle of the app names its storage again: keep the entry (and the
        // gate that orders its flushes before its purge) unless the storage changed.
        if self.entry(app).is_some_and(|e| &e.remote == remote) {
            return Ok(());
        }
        let (root, settings, store) = self.resolve(remote)?;
        self.roots.lock().insert(root.clone(), Arc::clone(&store));
        self.apps.lock().insert(
            app.clone(),
            Arc::new(AppEntry {
                remote: remote.clone(),
                root,
                settings,
                store,
                gate: Arc::new(tokio::sync::RwLock::new(false)),
            }),
        );
        Ok(())
    }

    /// The root, settings and S3 client of a registered path (clients are shared by bucket
    /// and settings).
    fn resolve(
        &self,
        remote: &RemoteStorage,
    ) -> Result<(ObjectRoot, S3Settings, Arc<dyn ObjectStore>)> {
        let root = ObjectRoot::parse(&remote.path)?;
        let conf: Vec<(String, String)> = self
            .opts
            .hadoop_conf
            .iter()
            .chain(remote.conf.iter())
            .cloned()
            .collect();
        let settings = S3Settings::from_conf(&root.bucket, &conf)?;
        let mut stores = self.stores.lock();
        let key = (root.bucket.clone(), settings.clone());
        let store = match stores.get(&key) {
            Some(s) => Arc::clone(s),
            None => {
                let built: Arc<dyn ObjectStore> =
                    Arc::new(settings.builder(&root.bucket)?.build().map_err(|e| {
                        Error::TierFailed {
                            tier: TIER,
                            reason: format!("S3 client for bucket {}: {e}", root.bucket),
                        }
                    })?);
                stores.insert(key, Arc::clone(&built));
                built
            }
        };
        Ok((root, settings, store))
    }

    /// The registration check of a path: writes and deletes an empty object
    /// `<root>/.spillway-probe-<serverId>` with the app's settings. A PUT is what every flush
    /// does, so it finds what a flush would (wrong keys, a missing bucket, a policy without
    /// PutObject), where a LIST or HEAD would pass a read-only key. Readers never see the
    /// object: they list `<root>/<app>/…` only, and the leaked-data sweep only folders.
    pub async fn probe(&self, remote: &RemoteStorage) -> Outcome {
        let refused = |answer: String, fix: String| {
            Outcome::Refused(Arc::new(Refusal {
                path: remote.path.clone(),
                answer,
                fix,
            }))
        };
        let (root, _, store) = match self.resolve(remote) {
            Ok(r) => r,
            // Settings that do not parse never will: the message names the key.
            Err(e) => return refused(e.to_string(), "correct the setting named".to_owned()),
        };
        let key = root.key(&format!(".spillway-probe-{}", self.opts.file_prefix));
        let path = Path::from(key.as_str());
        match tokio::time::timeout(PROBE_TIMEOUT, store.put(&path, PutPayload::default())).await {
            Err(_) => Outcome::Transient(format!(
                "no answer from the store within {PROBE_TIMEOUT:?} to a put of {key}"
            )),
            Ok(Err(e)) => match store_err("put", &key, e) {
                Error::StorageRefused { answer, fix, .. } => refused(answer, fix),
                other => Outcome::Transient(other.to_string()),
            },
            Ok(Ok(_)) => {
                match tokio::time::timeout(PROBE_TIMEOUT, store.delete(&path)).await {
                    Ok(Ok(())) => {}
                    failed => {
                        tracing::debug!(
                            key,
                            ?failed,
                            "the registration probe's object was not deleted"
                        )
                    }
                }
                Outcome::Usable
            }
        }
    }

    /// Whether any app writes here (or the last flush failed): only then does this tier's
    /// health say anything about the server's (a server whose apps all use HDFS must turn
    /// unhealthy when HDFS fails, whatever an idle object tier would say).
    pub fn in_use(&self) -> bool {
        !self.apps.lock().is_empty() || self.failures.failing()
    }

    /// Whether `app` registered an object-store path this tier can write to.
    pub fn serves(&self, app: &AppId) -> bool {
        self.apps.lock().contains_key(app)
    }

    /// False during `failure_cooldown` after a failed flush, so the router sends spills to
    /// local disk instead of waiting on a failing store.
    pub fn may_try(&self) -> bool {
        self.failures.may_try()
    }

    fn entry(&self, app: &AppId) -> Option<Arc<AppEntry>> {
        self.apps.lock().get(app).cloned()
    }

    /// Deletes this server's objects of apps that `is_live` does not know, under every root an
    /// app registered since start, as the local tier's sweep (Java's
    /// `checkAndClearLeakedShuffleData`) does for the disks: an app purge that failed while
    /// the store was down, or an app that ended while its purge could not run, leaves
    /// objects nobody deletes otherwise. One LIST (by delimiter) per root and pass; other
    /// servers' objects are never touched. Returns the apps swept.
    pub async fn sweep_leaked(&self, is_live: impl Fn(&AppId) -> bool) -> Vec<AppId> {
        let roots: Vec<(ObjectRoot, Arc<dyn ObjectStore>)> = self
            .roots
            .lock()
            .iter()
            .map(|(r, s)| (r.clone(), Arc::clone(s)))
            .collect();
        let mut swept = Vec::new();
        for (root, store) in roots {
            let prefix = (!root.root.is_empty()).then(|| Path::from(root.root.as_str()));
            let listed = match store.list_with_delimiter(prefix.as_ref()).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(bucket = %root.bucket, root = %root.root, error = %e, "leaked-data sweep could not list an object-store root");
                    continue;
                }
            };
            for dir in listed.common_prefixes {
                let Some(app) = dir.filename().and_then(|n| AppId::parse(n).ok()) else {
                    continue;
                };
                // Asked after the listing, so an app registered meanwhile is never taken for
                // leaked; a live app's objects are its purge's to delete.
                if is_live(&app) || self.serves(&app) {
                    continue;
                }
                match delete_own(&store, dir.as_ref(), &self.opts.file_prefix).await {
                    Ok(0) => {}
                    Ok(bytes) => {
                        tracing::info!(app_id = %app, bucket = %root.bucket, bytes, "deleted leaked shuffle objects of an unknown app");
                        swept.push(app);
                    }
                    Err(e) => {
                        tracing::warn!(app_id = %app, error = %e, "leaked shuffle objects not deleted")
                    }
                }
            }
        }
        swept
    }

    /// The folder of a scope: `<root>/<app>[/<shuffle>[/<start>-<end>]]`.
    fn folder(
        root: &ObjectRoot,
        app: &AppId,
        shuffle: Option<i32>,
        range: Option<PartitionRange>,
    ) -> String {
        let mut dir = root.key(app.as_str());
        if let Some(s) = shuffle {
            dir.push_str(&format!("/{s}"));
        }
        if let Some(r) = range {
            dir.push('/');
            dir.push_str(&r.dir_name());
        }
        dir
    }

    /// A name no object of this server has had: `<serverId>_<epochMs>_<seq>`, zero-padded so
    /// that name order is write order (the server-side reader concatenates in that order).
    fn next_name(&self) -> String {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        format!("{}_{:013}_{:010}", self.opts.file_prefix, self.epoch, seq)
    }

    /// Writes the data object by `deadline`: one PUT, or a multipart upload that is aborted
    /// when a part fails or the deadline passes (the writer is kept, not dropped, so the abort
    /// always runs and no part is left behind to be billed).
    async fn put_data(
        entry: &AppEntry,
        key: &str,
        batch: &BlockBatch,
        deadline: Instant,
    ) -> Result<()> {
        let path = Path::from(key);
        let timed_out = || Error::TierFailed {
            tier: TIER,
            reason: format!("flush to {key} did not finish in time"),
        };
        let payloads = batch
            .blocks()
            .iter()
            .filter(|b| !b.data.is_empty())
            .map(|b| b.data.clone());
        if batch.data_bytes() < entry.settings.multipart_threshold {
            // The payloads as they are: no copy into one buffer.
            let payload: PutPayload = payloads.collect();
            return match tokio::time::timeout_at(deadline, entry.store.put(&path, payload)).await {
                Ok(r) => r.map(|_| ()).map_err(|e| store_err("put", key, e)),
                Err(_) => Err(timed_out()),
            };
        }
        let upload = match tokio::time::timeout_at(deadline, entry.store.put_multipart(&path)).await
        {
            Ok(r) => r.map_err(|e| store_err("start multipart upload of", key, e))?,
            Err(_) => return Err(timed_out()),
        };
        let mut writer =
            WriteMultipart::new_with_chunk_size(upload, entry.settings.part_size as usize);
        let mut outcome = Ok(());
        for p in payloads {
            match tokio::time::timeout_at(deadline, writer.wait_for_capacity(4)).await {
                Ok(Ok(())) => writer.put(p),
                Ok(Err(e)) => {
                    outcome = Err(store_err("upload part of", key, e));
                    break;
                }
                Err(_) => {
                    outcome = Err(timed_out());
                    break;
                }
            }
        }
        if outcome.is_ok() {
            // `finish` consumes the writer; on a failed completion S3 keeps no object, and
            // the parts go with the upload's abort below only if we still own it, so the
            // completion gets the rest of the deadline and its failure is reported as is.
            return match tokio::time::timeout_at(deadline, writer.finish()).await {
                Ok(r) => r
                    .map(|_| ())
                    .map_err(|e| store_err("complete multipart upload of", key, e)),
                Err(_) => Err(timed_out()),
            };
        }
        // Abort with time of its own: the deadline may be what failed.
        match tokio::time::timeout(ABORT_TIMEOUT, writer.abort()).await {
            Ok(Ok(())) => {}
            failed => tracing::warn!(key, ?failed, "aborting a failed multipart upload failed; the bucket's lifecycle rule for incomplete uploads cleans it"),
        }
        outcome
    }
}

/// How long each request of a registration probe may take before its answer counts as
/// transient (the registration then goes ahead, as it did before there was a check).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the abort of a failed multipart upload may take.
const ABORT_TIMEOUT: Duration = Duration::from_secs(60);

#[async_trait]
impl Tier for ObjectTier {
    fn kind(&self) -> TierKind {
        TierKind::Hdfs
    }

    /// The bucket, as Java's `storage_host` label of a remote storage.
    fn location(&self, part: &PartitionKey) -> Option<String> {
        self.entry(&part.app).map(|e| e.root.bucket.clone())
    }

    fn sites(&self, app: &AppId) -> Vec<StorageSite> {
        remote::sites(&self.apps, app)
    }

    /// One new object pair: data, then index. On any failure the index object was not
    /// written, so readers see nothing of the batch; an orphan data object (a data PUT that
    /// succeeded before the index PUT failed) has no index and is never read, and the
    /// partition's or app's purge deletes it.
    async fn append(&self, part: &PartitionKey, batch: &BlockBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let (entry, gate) =
            remote::entry_for_append(&self.apps, &part.app, TIER, "object-store path").await?;
        let outcome = async {
            let _permit = Arc::clone(&self.permits)
                .acquire_owned()
                .await
                .map_err(|_| Error::Internal {
                    reason: "object-store permits closed".to_owned(),
                })?;
            let folder = Self::folder(&entry.root, &part.app, Some(part.shuffle), Some(part.range));
            let name = self.next_name();
            let data_key = format!("{folder}/{name}.data");
            let index_key = format!("{folder}/{name}.index");
            let deadline = Instant::now() + self.opts.write_timeout;
            Self::put_data(&entry, &data_key, batch, deadline).await?;
            let records = crate::store::index::encode_blocks(batch.blocks(), 0);
            match tokio::time::timeout_at(
                deadline,
                entry
                    .store
                    .put(&Path::from(index_key.as_str()), PutPayload::from(records)),
            )
            .await
            {
                Ok(r) => r.map(|_| ()).map_err(|e| store_err("put", &index_key, e)),
                Err(_) => Err(remote::timed_out(
                    TIER,
                    format!("flush to {index_key}"),
                    self.opts.write_timeout,
                )),
            }
        }
        .await;
        drop(gate);
        // The app's own settings refused: the tier itself is fine for other apps.
        self.failures.settle(outcome, &entry.remote.path)
    }

    /// Lists the scope's prefix and batch-deletes this server's objects in it. Object stores
    /// have no directories, so nothing else is left behind.
    async fn purge(&self, scope: &PurgeScope) -> Result<u64> {
        let app = scope.app().clone();
        let Some(entry) = self.entry(&app) else {
            return Ok(0);
        };
        let mut gate = entry.gate.write().await;
        let (shuffle, range) = scope.within_app();
        let folder = Self::folder(&entry.root, &app, shuffle, range);
        let result = delete_own(&entry.store, &folder, &self.opts.file_prefix).await;
        remote::end_purge(
            &self.apps,
            &entry,
            scope,
            &mut gate,
            &result,
            "object-store objects",
        );
        result
    }

    /// Writable unless the last flush failed (a success clears it).
    fn health(&self) -> Health {
        self.failures.health()
    }
}

/// Deletes every object under `folder/` whose name starts with `<prefix>_`, in batches;
/// returns the bytes deleted.
async fn delete_own(store: &Arc<dyn ObjectStore>, folder: &str, prefix: &str) -> Result<u64> {
    let dir = Path::from(folder);
    let own: Vec<object_store::ObjectMeta> = store
        .list(Some(&dir))
        .try_filter(|m| {
            let keep = m
                .location
                .filename()
                .is_some_and(|name| is_own(name, prefix));
            futures::future::ready(keep)
        })
        .try_collect()
        .await
        .map_err(|e| store_err("list", folder, e))?;
    let bytes: u64 = own.iter().map(|m| m.size).sum();
    if own.is_empty() {
        return Ok(0);
    }
    let locations = futures::stream::iter(own.into_iter().map(|m| Ok(m.location))).boxed();
    store
        .delete_stream(locations)
        .try_for_each(|_| futures::future::ready(Ok(())))
        .await
        .map_err(|e| store_err("delete under", folder, e))?;
    Ok(bytes)
}

#[async_trait]
impl FileTier for ObjectTier {
    /// The server-side view of a partition (clients read the store directly; this is for
    /// tests and checks): this server's pairs in write order as one logical file, each pair
    /// contributing the records a client would use.
    async fn read_index(&self, part: &PartitionKey) -> Result<IndexRead> {
        Ok(self.layout(part).await?.index())
    }

    async fn read_data(&self, part: &PartitionKey, span: Span) -> Result<Bytes> {
        self.layout(part).await?.read(span.offset, span.len).await
    }
}

/// This server's pairs of one partition and the store they are in.
#[derive(Default)]
struct Layout {
    store: Option<Arc<dyn ObjectStore>>,
    pairs: Pairs<Path>,
}

impl ObjectTier {
    async fn layout(&self, part: &PartitionKey) -> Result<Layout> {
        let Some(entry) = self.entry(&part.app) else {
            return Ok(Layout::default());
        };
        let folder = Self::folder(&entry.root, &part.app, Some(part.shuffle), Some(part.range));
        let listing: Vec<object_store::ObjectMeta> = entry
            .store
            .list(Some(&Path::from(folder.as_str())))
            .try_collect()
            .await
            .map_err(|e| store_err("list", &folder, e))?;
        let sizes: HashMap<String, u64> = listing
            .iter()
            .map(|m| (m.location.to_string(), m.size))
            .collect();
        let mut indexes: Vec<&object_store::ObjectMeta> = listing
            .iter()
            .filter(|m| {
                m.location
                    .filename()
                    .is_some_and(|n| is_own(n, &self.opts.file_prefix) && n.ends_with(".index"))
            })
            .collect();
        indexes.sort_by(|a, b| a.location.cmp(&b.location));
        let mut pairs = Vec::with_capacity(indexes.len());
        for meta in indexes {
            let index_key = meta.location.to_string();
            let data_key = format!("{}.data", index_key.trim_end_matches(".index"));
            let data_len = sizes.get(&data_key).copied().unwrap_or(0);
            let raw = entry
                .store
                .get(&meta.location)
                .await
                .map_err(|e| store_err("get", &index_key, e))?
                .bytes()
                .await
                .map_err(|e| store_err("get", &index_key, e))?;
            pairs.push(Pair::read(Path::from(data_key.as_str()), &raw, data_len));
        }
        Ok(Layout {
            store: Some(Arc::clone(&entry.store)),
            pairs: Pairs { pairs },
        })
    }
}

impl Layout {
    fn index(&self) -> IndexRead {
        self.pairs.index()
    }

    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let store = self.store.as_ref();
        self.pairs
            .read(
                offset,
                len,
                "object-store",
                |data, start, take| async move {
                    let Some(store) = store else {
                        return Err(Error::Internal {
                            reason: "object-store layout without a store".to_owned(),
                        });
                    };
                    store
                        .get_range(&data, start..start + take)
                        .await
                        .map_err(|e| store_err("get", data.as_ref(), e))
                },
            )
            .await
    }
}
