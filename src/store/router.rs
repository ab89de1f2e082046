//! `TierRouter`: the spiller's target. It picks the file tier for each spill batch by the
//! store type, and falls back to the other tier when the chosen one is failing:
//!
//! ```text
//!   MEMORY_LOCALFILE        → local files
//!   MEMORY_HDFS             → HDFS
//!   MEMORY_LOCALFILE_HDFS   → HDFS when batch ≥ cold_storage_threshold_size or the partition
//!                             is huge, else local files;
//!                             either way the other one when the first is unhealthy or fails
//! ```
//!
//! "HDFS" is the remote tier of the app: `HdfsTier` for an `hdfs://`/`viewfs://` path, or
//! `ObjectTier` for an `s3a://`/`s3://`/`s3n://` path (the scheme of the path the app registered
//! picks it, as Java's remote storage is any Hadoop file system).
//!
//! A batch lands whole in one tier (local files keep a partition on one disk; HDFS gives each
//! concurrent writer its own file pair), and a client reads all of them: memory, the server's
//! local files, then HDFS directly, skipping block ids it already has. So a partition's
//! batches may be spread over both tiers in any order. Going back is automatic: the local
//! tier is picked again as soon as its disks are writable, HDFS once its failure cooldown is
//! over and an append succeeds.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{Error, Result};
use crate::ids::{AppId, PartitionKey};
use crate::store::hdfs::HdfsTier;
use crate::store::localfile::LocalFileTier;
use crate::store::object::{is_object_path, ObjectTier};
use crate::store::refusal::{CauseLog, Checks, Outcome, Refusal, Refusals, Refused};
use crate::store::{
    BlockBatch, Health, Placement, PurgeScope, RemoteStorage, StorageSite, Tier, TierKind,
};

/// See the module doc.
pub struct TierRouter {
    local: Option<Arc<LocalFileTier>>,
    hdfs: Option<Arc<HdfsTier>>,
    /// Object storage, beside HDFS whenever the store type has a remote tier.
    object: Option<Arc<ObjectTier>>,
    /// Batches at least this large prefer HDFS (when both tiers exist).
    cold_threshold: u64,
    /// Partitions found huge; all their spills prefer HDFS.
    huge: parking_lot::Mutex<HashSet<PartitionKey>>,
    /// Registration checks of remote paths, cached.
    checks: Checks,
    /// Apps whose remote storage refused for good.
    refusals: Refusals,
    /// One WARN per app and cause on the spill path.
    causes: CauseLog,
    /// The store type's name, for messages (`MEMORY_HDFS`, …).
    store_type: String,
}

impl TierRouter {
    /// A router over the tiers the store type has (at least one).
    pub fn new(
        local: Option<Arc<LocalFileTier>>,
        hdfs: Option<Arc<HdfsTier>>,
        object: Option<Arc<ObjectTier>>,
        cold_threshold: u64,
    ) -> Result<Self> {
        if local.is_none() && hdfs.is_none() && object.is_none() {
            return Err(Error::Startup("no file tier to spill to".to_owned()));
        }
        Ok(TierRouter {
            local,
            hdfs,
            object,
            cold_threshold,
            huge: parking_lot::Mutex::new(HashSet::new()),
            checks: Checks::default(),
            refusals: Refusals::default(),
            causes: CauseLog::default(),
            store_type: String::new(),
        })
    }

    /// Names the store type in the messages of refused registrations.
    pub fn with_store_type(mut self, name: &str) -> Self {
        self.store_type = name.to_owned();
        self
    }

    /// The registration check (`registerShuffle`, before the app is recorded): whether the
    /// app's remote storage can take its spills, asked of the store once per path, user and
    /// settings (cached, see [`Checks`]).
    ///
    /// - A store type with no local tier (`MEMORY_HDFS`, `HDFS`) has nothing to fall back to:
    ///   an app that registers no remote path, or one the store refuses for good, is refused
    ///   here with the cause, instead of filling memory with blocks no spill can take.
    /// - With local disks (`MEMORY_LOCALFILE_HDFS`) a refused app is served from them: one
    ///   WARN, and its spills never try the remote tier.
    /// - A transient answer (throttling, 5xx, timeout, unreachable) refuses nothing: today's
    ///   retries and fallback handle it, as they did before there was a check.
    pub async fn admit(
        &self,
        app: &AppId,
        user: &str,
        remote: Option<&RemoteStorage>,
    ) -> Result<()> {
        if !self.has_remote() {
            return Ok(());
        }
        let Some(remote) = remote.filter(|r| !r.path.is_empty()) else {
            if self.local.is_none() {
                let e = Error::Misconfigured {
                    reason: format!(
                        "this server's storage type {} spills only to remote storage, and app \
                         {app} registered no remote storage path: set spark.rss.remote.storage.path \
                         (or the coordinator's rss.coordinator.remote.storage.path), or run the \
                         server with a storage type that has local disks",
                        self.store_type_name()
                    ),
                };
                if self.causes.first(app, "refused", "no remote path") {
                    tracing::warn!(app_id = %app, error = %e, "registration refused");
                }
                return Err(e);
            }
            return Ok(());
        };
        let outcome = if is_object_path(&remote.path) {
            match &self.object {
                Some(o) => self.checks.check(user, remote, o.probe(remote)).await,
                None => return Ok(()),
            }
        } else {
            match &self.hdfs {
                Some(h) => self.checks.check(user, remote, h.probe(user, remote)).await,
                None => return Ok(()),
            }
        };
        match outcome {
            Outcome::Usable => {
                self.refusals.clear(app);
                Ok(())
            }
            Outcome::Transient(why) => {
                if self.causes.first(app, "registration check", &why) {
                    tracing::warn!(app_id = %app, path = %remote.path, cause = %why,
                        "the remote storage did not answer the registration check; registering anyway, its spills retry");
                }
                Ok(())
            }
            Outcome::Refused(refusal) => self.refused(app, refusal, "registration"),
        }
    }

    /// Records that `app`'s remote storage refused for good: logged once per app and cause,
    /// and an error for the caller when there is no local tier to serve the app instead. A
    /// registered app is marked (its spills skip the remote tier, or its requests fail); an
    /// app refused at registration is not recorded at all, so nothing of it is kept.
    fn refused(
        &self,
        app: &AppId,
        refusal: std::sync::Arc<Refusal>,
        when: &'static str,
    ) -> Result<()> {
        let fallback = self.local.is_some();
        let first = self.causes.first(app, "refused", &refusal.answer);
        if fallback || when == "flush" {
            self.refusals.mark(
                app,
                Refused {
                    refusal: std::sync::Arc::clone(&refusal),
                    fallback,
                },
            );
        }
        if fallback {
            if first {
                tracing::warn!(app_id = %app, path = %refusal.path, answer = %refusal.answer, fix = %refusal.fix, when,
                    "remote storage refused this app for good; its spills go to local disk");
            }
            Ok(())
        } else {
            if first {
                tracing::warn!(app_id = %app, path = %refusal.path, answer = %refusal.answer, fix = %refusal.fix, when,
                    "remote storage refused this app for good; it fails (the storage type has no local disk to fall back to)");
            }
            Err(refusal.error())
        }
    }

    /// The app is gone: log its causes' counts. Its refusal is forgotten by its purge, which
    /// reads it first.
    pub fn forget_app(&self, app: &AppId) {
        self.causes.forget_app(app);
    }

    fn store_type_name(&self) -> &str {
        if self.store_type.is_empty() {
            "MEMORY_HDFS"
        } else {
            &self.store_type
        }
    }

    /// The local-file tier, if the store type has one.
    pub fn local(&self) -> Option<&Arc<LocalFileTier>> {
        self.local.as_ref()
    }

    /// The HDFS tier, if the store type has one.
    pub fn hdfs(&self) -> Option<&Arc<HdfsTier>> {
        self.hdfs.as_ref()
    }

    /// The object-store tier, if the store type has a remote tier.
    pub fn object(&self) -> Option<&Arc<ObjectTier>> {
        self.object.as_ref()
    }

    /// Passes an app's registration on to the remote tier its path's scheme names.
    pub fn register_app(&self, app: &AppId, user: &str, remote: Option<&RemoteStorage>) {
        let Some(remote) = remote.filter(|r| !r.path.is_empty()) else {
            return;
        };
        if self.refusals.get(app).is_some() {
            // Its store refused it at the check: the tier never hears of it, so no purge or
            // leaked-data sweep asks that store again with the same settings.
            return;
        }
        let registered = if is_object_path(&remote.path) {
            self.object.as_ref().map(|o| o.register_app(app, remote))
        } else {
            self.hdfs
                .as_ref()
                .map(|h| h.register_app(app, user, remote))
        };
        if let Some(Err(e)) = registered {
            // The error names the path or the s3a key, never a secret's value.
            if self.causes.first(app, "registration", &e.to_string()) {
                tracing::warn!(app_id = %app, error = %e, "remote storage unusable; spills of this app stay off the remote tier");
            }
        }
    }

    /// The app's remote tier and whether to try it now (outside its failure cooldown); none
    /// for an app its remote storage refused for good.
    fn remote(&self, app: &AppId) -> Option<(Arc<dyn Tier>, bool)> {
        if self.refusals.get(app).is_some() {
            return None;
        }
        if let Some(h) = self.hdfs.as_ref().filter(|h| h.serves(app)) {
            return Some((Arc::clone(h) as Arc<dyn Tier>, h.may_try()));
        }
        self.object
            .as_ref()
            .filter(|o| o.serves(app))
            .map(|o| (Arc::clone(o) as Arc<dyn Tier>, o.may_try()))
    }

    fn has_remote(&self) -> bool {
        self.hdfs.is_some() || self.object.is_some()
    }

    /// Marks a partition huge: its spills go to HDFS from now on (when there is one).
    pub fn mark_huge(&self, part: &PartitionKey) {
        if self.has_remote() && self.local.is_some() {
            let mut huge = self.huge.lock();
            if !huge.contains(part) {
                huge.insert(part.clone());
            }
        }
    }

    /// The tiers to try for one batch, preferred first, each with whether to try it now
    /// (local files: writable; the remote tier: outside its failure cooldown).
    fn order(&self, part: &PartitionKey, batch: &BlockBatch) -> Vec<(Arc<dyn Tier>, bool)> {
        let remote = self.remote(&part.app);
        let local = self.local.as_ref().map(|l| {
            let usable = l.health().writable;
            (Arc::clone(l) as Arc<dyn Tier>, usable)
        });
        let cold = batch.data_bytes() >= self.cold_threshold || self.huge.lock().contains(part);
        let (first, second) = match (local, remote) {
            (Some(l), Some(h)) if cold => (Some(h), Some(l)),
            (Some(l), Some(h)) => (Some(l), Some(h)),
            (Some(l), None) => (Some(l), None),
            (None, h) => (h, None),
        };
        first.into_iter().chain(second).collect()
    }
}

#[async_trait]
impl Tier for TierRouter {
    fn kind(&self) -> TierKind {
        if self.local.is_none() {
            TierKind::Hdfs
        } else {
            TierKind::LocalFile
        }
    }

    /// The first choice of [`TierRouter::order`] (the fallback on failure is not foreseen).
    fn route(&self, part: &PartitionKey, batch: &BlockBatch) -> TierKind {
        self.order(part, batch)
            .first()
            .map_or_else(|| self.kind(), |(t, _)| t.kind())
    }

    /// Tries the usable tiers in preference order and returns at the first success. When no
    /// tier is usable the preferred one is tried anyway (its error is the real reason, and the
    /// spiller's retry needs an attempt to find out it recovered). With no tier for the app
    /// at all (`MEMORY_HDFS` and the app registered no remote storage) the error is retried
    /// like any other: the blocks stay in memory.
    async fn append(&self, part: &PartitionKey, batch: &BlockBatch) -> Result<()> {
        self.append_placed(part, batch).await.map(|_| ())
    }

    /// [`Tier::append`]'s routing, reporting the tier that took the batch.
    async fn append_placed(&self, part: &PartitionKey, batch: &BlockBatch) -> Result<Placement> {
        let order = self.order(part, batch);
        let Some(preferred) = order.first().map(|(t, _)| Arc::clone(t)) else {
            if let Some(e) = self.failed(&part.app) {
                return Err(e);
            }
            return Err(Error::TierFailed {
                tier: "hdfs",
                reason: format!(
                    "app {} registered no remote storage and this server has no local disks",
                    part.app
                ),
            });
        };
        let mut tried = 0;
        let mut last_err = None;
        for (tier, _) in order.iter().filter(|(_, usable)| *usable) {
            tried += 1;
            let place = match tier.kind() {
                TierKind::LocalFile => "local spill",
                _ => "remote spill",
            };
            match tier.append_placed(part, batch).await {
                Ok(placed) => {
                    self.causes.passed(&part.app, place);
                    if (tried > 1 || !Arc::ptr_eq(tier, &preferred))
                        && self.causes.first(&part.app, "fallback", place)
                    {
                        tracing::info!(partition = %part, tier = tier.kind().as_str(), bytes = batch.data_bytes(),
                            "spill went to the fallback tier (logged once per app; the count follows when it passes)");
                    }
                    return Ok(placed);
                }
                Err(e) => {
                    if let Some(refusal) = Refusal::of(&e) {
                        // No retry changes this answer: stop sending the app's spills there.
                        match self.refused(&part.app, std::sync::Arc::new(refusal), "flush") {
                            Ok(()) => {
                                last_err = Some(e);
                                continue;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    if self.causes.first(&part.app, place, &e.to_string()) {
                        tracing::warn!(partition = %part, tier = tier.kind().as_str(), error = %e,
                            "spill to tier failed (logged once per app and cause; the count follows when it passes)");
                    }
                    last_err = Some(e);
                }
            }
        }
        if tried == 0 {
            return preferred.append_placed(part, batch).await;
        }
        Err(last_err.unwrap_or_else(|| Error::Internal {
            reason: "no tier tried".to_owned(),
        }))
    }

    /// Purges every tier (a partition's batches may be in both).
    async fn seal(&self, scope: &PurgeScope) {
        if let Some(h) = &self.hdfs {
            h.seal(scope).await;
        }
    }

    async fn purge(&self, scope: &PurgeScope) -> Result<u64> {
        let mut freed = 0;
        let mut first_err = None;
        if let Some(l) = &self.local {
            match l.purge(scope).await {
                Ok(n) => freed += n,
                Err(e) => first_err = Some(e),
            }
        }
        // A refused app's remote storage refuses the purge too, and holds nothing of it
        // unless the refusal came mid-job; the leaked-data sweep removes that once the store
        // lets the server in again.
        let refused = self.refusals.get(scope.app()).is_some();
        if matches!(scope, PurgeScope::App(_)) {
            self.refusals.clear(scope.app());
        }
        let remotes = self
            .hdfs
            .iter()
            .map(|h| Arc::clone(h) as Arc<dyn Tier>)
            .chain(self.object.iter().map(|o| Arc::clone(o) as Arc<dyn Tier>))
            .filter(|_| !refused);
        for remote in remotes {
            match remote.purge(scope).await {
                Ok(n) => freed += n,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if !matches!(scope, PurgeScope::Partition(_)) {
            self.huge.lock().retain(|p| !scope.covers(p));
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(freed),
        }
    }

    /// Its remote storage refused the app for good and there is no local tier to serve it
    /// instead. `requireBuffer` and `sendShuffleData` answer with it too.
    fn failed(&self, app: &AppId) -> Option<Error> {
        self.refusals
            .get(app)
            .filter(|r| !r.fallback)
            .map(|r| r.refusal.error())
    }

    /// Both tiers' storages, local disks first (a purge deletes from both).
    fn sites(&self, app: &AppId) -> Vec<StorageSite> {
        let mut sites = self.local.as_ref().map_or_else(Vec::new, |l| l.sites(app));
        if let Some(h) = &self.hdfs {
            sites.extend(h.sites(app));
        }
        if let Some(o) = &self.object {
            sites.extend(o.sites(app));
        }
        sites
    }

    /// Writable while any tier can take spills; `detail` names the tiers that cannot.
    fn health(&self) -> Health {
        let parts: Vec<Health> = self
            .local
            .iter()
            .map(|l| l.health())
            .chain(self.hdfs.iter().map(|h| h.health()))
            .chain(
                self.object
                    .iter()
                    .filter(|o| o.in_use())
                    .map(|o| o.health()),
            )
            .collect();
        let detail: Vec<&str> = parts
            .iter()
            .filter(|h| !h.detail.is_empty())
            .map(|h| h.detail.as_str())
            .collect();
        Health {
            writable: parts.iter().any(|h| h.writable),
            detail: detail.join("; "),
        }
    }
}
