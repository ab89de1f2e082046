//! `TierRouter`: where every spill goes. It is always there (a server with local disks only
//! has a router over one tier), picks the file tier for each spill batch by the store type
//! once, and falls back to the other tier when the chosen one is failing:
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
//!
//! The router is not a [`Tier`]: it owns the choice between tiers, the registration check
//! ([`Admission`]) and what a refusal means, none of which a leaf tier has.

use std::collections::HashSet;
use std::sync::Arc;

use crate::config::StoreType;
use crate::error::{Error, Result};
use crate::ids::{AppId, PartitionKey};
use futures::future::BoxFuture;

use crate::store::admission::{Admission, Outcome, Refusal, When};
use crate::store::causes::{CauseLog, Place};
use crate::store::hdfs::HdfsTier;
use crate::store::object::{is_object_path, ObjectTier};
use crate::store::quota::{QuotaLimits, Quotas};
use crate::store::{
    BlockBatch, Health, Placement, PurgeScope, RemoteStorage, StorageSite, Tier, TierKind,
};

/// See the module doc.
pub struct TierRouter {
    local: Option<Arc<dyn Tier>>,
    hdfs: Option<Arc<HdfsTier>>,
    /// Object storage, beside HDFS whenever the store type has a remote tier.
    object: Option<Arc<ObjectTier>>,
    /// Batches at least this large prefer HDFS (when both tiers exist).
    cold_threshold: u64,
    /// Partitions found huge; all their spills prefer HDFS.
    huge: parking_lot::Mutex<HashSet<PartitionKey>>,
    admission: Admission,
    /// What each tenant holds and may hold: counted here, where every spill lands.
    quotas: Arc<Quotas>,
    /// One WARN per app and cause on the spill path.
    causes: CauseLog,
}

/// The tiers one batch may go to, preferred first, each with whether to try it now (local
/// files: writable; the remote tier: outside its failure cooldown). Picked once per batch
/// by [`TierRouter::route`], before the write waits for a permit, so the pool the spill
/// metrics count the batch in is the tier it is written to.
pub struct Route {
    order: Vec<(Arc<dyn Tier>, bool)>,
}

impl Route {
    /// The tier the batch goes to first, if the app has any.
    pub fn first(&self) -> Option<TierKind> {
        self.order.first().map(|(t, _)| t.kind())
    }
}

impl TierRouter {
    /// A router over local files only (`MEMORY_LOCALFILE`, `LOCALFILE`).
    pub fn local_only(local: Arc<dyn Tier>) -> Self {
        TierRouter {
            local: Some(local),
            hdfs: None,
            object: None,
            cold_threshold: u64::MAX,
            huge: parking_lot::Mutex::new(HashSet::new()),
            admission: Admission::new(StoreType::MemoryLocalfile),
            quotas: unlimited(),
            causes: CauseLog::default(),
        }
    }

    /// The same router, holding tenants to `quotas` (the default is no quota).
    pub fn with_quotas(mut self, quotas: Arc<Quotas>) -> Self {
        self.quotas = quotas;
        self
    }

    /// The tenants' usage and quotas.
    pub fn quotas(&self) -> &Arc<Quotas> {
        &self.quotas
    }

    /// The final refusal `app` gets on its next write: its storage refused it for good (see
    /// `store::admission`), or it holds its quota (see `store::quota`). An app over its
    /// local-disk quota that has a remote tier to overflow to is not refused.
    pub fn refusal(&self, app: &AppId) -> Option<Error> {
        if let Some(e) = self.admission.failed(app) {
            return Some(e);
        }
        let overflow = self.local.is_some() && self.remote(app).is_some();
        self.quotas.check(app, overflow).err()
    }

    /// A router over the tiers `store_type` has: local files exactly when it names them, a
    /// remote tier (HDFS and object storage) exactly when it names HDFS.
    pub fn new(
        store_type: StoreType,
        local: Option<Arc<dyn Tier>>,
        hdfs: Option<Arc<HdfsTier>>,
        object: Option<Arc<ObjectTier>>,
        cold_threshold: u64,
    ) -> Result<Self> {
        if local.is_some() != store_type.uses_localfile()
            || (hdfs.is_some() || object.is_some()) != store_type.uses_hdfs()
        {
            return Err(Error::Startup(format!(
                "store_type {}: the tiers built do not match it (local files: {}, remote: {})",
                store_type.name(),
                local.is_some(),
                hdfs.is_some() || object.is_some()
            )));
        }
        Ok(TierRouter {
            local,
            hdfs,
            object,
            cold_threshold,
            huge: parking_lot::Mutex::new(HashSet::new()),
            admission: Admission::new(store_type),
            quotas: unlimited(),
            causes: CauseLog::default(),
        })
    }

    /// Which apps the store takes writes from.
    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// The registration check (`registerShuffle`, before the app is recorded): whether the
    /// app's remote storage can take its spills, asked of the tier its path names (see
    /// [`Admission::check`]). With local disks a refused app is served from them; without,
    /// it is refused here with the cause.
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
            return self.admission.no_remote_path(app);
        };
        // The tier the path names probes it. Its future is large (a whole client call), so it
        // is boxed, and made only when the check is not cached.
        let probe = || -> BoxFuture<'_, Outcome> {
            match (is_object_path(&remote.path), &self.object, &self.hdfs) {
                (true, Some(o), _) => Box::pin(o.probe(remote)),
                (false, _, Some(h)) => Box::pin(h.probe(user, remote)),
                // No tier for the path's scheme: nothing of the app goes there to refuse.
                _ => Box::pin(std::future::ready(Outcome::Usable)),
            }
        };
        self.admission.check(app, user, remote, probe).await
    }

    /// The app is gone: log its causes' counts. Its refusal is forgotten by its purge, which
    /// reads it first.
    pub fn forget_app(&self, app: &AppId) {
        self.admission.forget_app(app);
        self.causes.forget_app(app);
    }

    /// The HDFS tier, if the store type has one.
    pub fn hdfs(&self) -> Option<&Arc<HdfsTier>> {
        self.hdfs.as_ref()
    }

    /// Whether spills can go to local disk (the spill pools and queue metrics are Java's
    /// local-file ones then).
    pub fn has_local(&self) -> bool {
        self.local.is_some()
    }

    /// Passes an app's registration on to the remote tier its path's scheme names.
    pub fn register_app(&self, app: &AppId, user: &str, remote: Option<&RemoteStorage>) {
        self.quotas.usage().register(app, user);
        let Some(remote) = remote.filter(|r| !r.path.is_empty()) else {
            return;
        };
        if self.admission.is_refused(app) {
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
            if self.causes.first(app, Place::Registration, &e.to_string()) {
                tracing::warn!(app_id = %app, error = %e, "remote storage unusable; spills of this app stay off the remote tier");
            }
        }
    }

    /// The HDFS writers per partition an app asked for at registration (0: the server's).
    pub fn set_partition_writers(&self, app: &AppId, requested: i32) {
        if let Some(hdfs) = &self.hdfs {
            hdfs.set_partition_writers(app, requested);
        }
    }

    /// The app's remote tier and whether to try it now (outside its failure cooldown); none
    /// for an app its remote storage refused for good.
    fn remote(&self, app: &AppId) -> Option<(Arc<dyn Tier>, bool)> {
        if self.admission.is_refused(app) {
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

    /// The tiers to try for `batch` of `part`, picked now; see [`Route`].
    pub fn route(&self, part: &PartitionKey, batch: &BlockBatch) -> Route {
        let remote = self.remote(&part.app);
        let local = self.local.as_ref().map(|l| {
            let usable = l.health().writable;
            (Arc::clone(l), usable)
        });
        // Large batches, huge partitions and apps over their local-disk quota go to the remote
        // tier first; local disks stay the fallback, so an acknowledged block is never left
        // without a place to go.
        let cold = self.has_remote()
            && (batch.data_bytes() >= self.cold_threshold
                || self.huge.lock().contains(part)
                || self.quotas.local_full(&part.app));
        let (first, second) = match (local, remote) {
            (Some(l), Some(h)) if cold => (Some(h), Some(l)),
            (Some(l), Some(h)) => (Some(l), Some(h)),
            (Some(l), None) => (Some(l), None),
            (None, h) => (h, None),
        };
        Route {
            order: first.into_iter().chain(second).collect(),
        }
    }

    /// Writes the batch to the tiers of `route`: the usable ones in preference order, until
    /// one takes it, and says which did. When no tier is usable the preferred one is tried
    /// anyway (its error is the real reason, and the spiller's retry needs an attempt to find
    /// out it recovered). With no tier for the app at all (`MEMORY_HDFS` and the app
    /// registered no remote storage) the error is retried like any other: the blocks stay in
    /// memory.
    ///
    /// [`Error::StorageRefused`] comes back only when the app now fails for good (its remote
    /// storage refused it and there is no local tier): the spiller stops retrying on it. A
    /// refusal with local disks to fall back to comes back as a retryable error.
    pub async fn append(
        &self,
        part: &PartitionKey,
        batch: &BlockBatch,
        route: Route,
    ) -> Result<Placement> {
        let Some(preferred) = route.order.first().map(|(t, _)| Arc::clone(t)) else {
            if let Some(e) = self.admission.failed(&part.app) {
                return Err(e);
            }
            return Err(Error::TierFailed {
                tier: TierKind::Hdfs.as_str(),
                reason: format!(
                    "app {} registered no remote storage and this server has no local disks",
                    part.app
                ),
            });
        };
        let mut tried = 0;
        let mut last_err = None;
        for (tier, _) in route.order.iter().filter(|(_, usable)| *usable) {
            tried += 1;
            let place = match tier.kind() {
                TierKind::LocalFile => Place::LocalSpill,
                _ => Place::RemoteSpill,
            };
            match tier.append(part, batch).await {
                Ok(()) => {
                    self.causes.passed(&part.app, place);
                    if (tried > 1 || !Arc::ptr_eq(tier, &preferred))
                        && self
                            .causes
                            .first(&part.app, Place::Fallback, place.as_str())
                    {
                        tracing::info!(partition = %part, tier = tier.kind().as_str(), bytes = batch.data_bytes(),
                            "spill went to the fallback tier (logged once per app; the count follows when it passes)");
                    }
                    self.written(tier.as_ref(), part, batch);
                    return Ok(placement(tier.as_ref(), part));
                }
                Err(e) => {
                    if let Some(refusal) = Refusal::of(&e) {
                        // No retry changes this answer: stop sending the app's spills there.
                        self.admission
                            .refused(&part.app, Arc::new(refusal), When::Flush)?;
                        // Local disks take the app's spills from now on: retryable.
                        last_err.get_or_insert(Error::TierFailed {
                            tier: tier.kind().as_str(),
                            reason: format!("{e}; this app's spills go to local disk from now on"),
                        });
                        continue;
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
            preferred.append(part, batch).await?;
            self.written(preferred.as_ref(), part, batch);
            return Ok(placement(preferred.as_ref(), part));
        }
        Err(last_err.unwrap_or_else(|| Error::Internal {
            reason: "no tier tried".to_owned(),
        }))
    }

    /// Has the tiers close what they keep open of `scope` (see [`Tier::seal`]).
    pub async fn seal(&self, scope: &PurgeScope) {
        if let Some(l) = &self.local {
            l.seal(scope).await;
        }
        if let Some(h) = &self.hdfs {
            h.seal(scope).await;
        }
    }

    /// A batch is durable on `tier`: the app's usage grows by its data and index bytes.
    fn written(&self, tier: &dyn Tier, part: &PartitionKey, batch: &BlockBatch) {
        let bytes =
            batch.data_bytes() + crate::store::index::IndexEntry::SIZE as u64 * batch.len() as u64;
        self.quotas.usage().written(part, tier.kind(), bytes);
    }

    /// Purges every tier (a partition's batches may be in both). The scope leaves the
    /// tenants' usage whatever the tiers answer: a failed delete leaves files for the
    /// leaked-data sweep, not data the app can still write to.
    pub async fn purge(&self, scope: &PurgeScope) -> Result<u64> {
        self.quotas.usage().purged(scope);
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
        let refused = self.admission.is_refused(scope.app());
        if matches!(scope, PurgeScope::App(_)) {
            self.admission.clear(scope.app());
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

    /// Every storage a purge of `app` deletes from, as Java's storage audit lists them:
    /// local disks first, then the remote tiers.
    pub fn sites(&self, app: &AppId) -> Vec<StorageSite> {
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
    pub fn health(&self) -> Health {
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

/// Where a batch `tier` took for `part` landed.
/// No quota, over a usage nobody reads: routers built without [`TierRouter::with_quotas`].
fn unlimited() -> Arc<Quotas> {
    Arc::new(Quotas::new(QuotaLimits::unlimited(), 0, Arc::default()))
}

fn placement(tier: &dyn Tier, part: &PartitionKey) -> Placement {
    Placement {
        kind: tier.kind(),
        location: tier.location(part),
        site: tier.site(part),
    }
}
