//! What the two remote tiers (HDFS, object storage) share about the apps they know: each app
//! has an entry behind a gate that appends hold shared and purges exclusively, and an app
//! purge retires the entry.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{OwnedRwLockReadGuard, RwLock};

use crate::error::{Error, Result};
use crate::ids::AppId;
use crate::store::{PurgeScope, StorageSite};

/// The apps a remote tier knows, by id.
pub type RemoteApps<E> = parking_lot::Mutex<HashMap<AppId, Arc<E>>>;

/// What a remote tier's per-app entry offers the shared steps.
pub trait RemoteEntry {
    /// Appends hold it shared, purges exclusively; `true` once an app purge retired the entry.
    fn gate(&self) -> &Arc<RwLock<bool>>;
    /// The remote storage path the app registered, as the client sent it.
    fn registered_path(&self) -> String;
}

/// The app's entry with its gate held shared for one append, or the retryable error of an app
/// with no storage here (it registered none, or an app purge retired it while the append
/// waited). `missing` names what the tier expected the app to register.
pub async fn entry_for_append<E: RemoteEntry>(
    apps: &RemoteApps<E>,
    app: &AppId,
    tier: &'static str,
    missing: &str,
) -> Result<(Arc<E>, OwnedRwLockReadGuard<bool>)> {
    let no_storage = || Error::TierFailed {
        tier,
        reason: format!("app {app} registered no {missing}"),
    };
    let entry = apps.lock().get(app).cloned().ok_or_else(no_storage)?;
    let gate = Arc::clone(entry.gate()).read_owned().await;
    if *gate {
        return Err(no_storage());
    }
    Ok((entry, gate))
}

/// The app's registered remote storage, for the storage audit log.
pub fn sites<E: RemoteEntry>(apps: &RemoteApps<E>, app: &AppId) -> Vec<StorageSite> {
    let path = apps.lock().get(app).map(|e| e.registered_path());
    path.map(|p| StorageSite::remote(&p)).into_iter().collect()
}

/// Ends a purge while its gate is still held. A successful app purge marks the entry retired
/// (`retired` is the gate's flag: an append that waited on the gate then fails as an
/// app with no storage instead of writing into deleted folders) and forgets it, unless a registration made while
/// the purge ran has already replaced it. `what` names the deleted things in the log line.
pub fn end_purge<E>(
    apps: &RemoteApps<E>,
    entry: &Arc<E>,
    scope: &PurgeScope,
    retired: &mut bool,
    result: &Result<u64>,
    what: &str,
) {
    let app = scope.app();
    if matches!(scope, PurgeScope::App(_)) && result.is_ok() {
        *retired = true;
        let mut apps = apps.lock();
        if apps.get(app).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            apps.remove(app);
        }
    }
    if let Ok(freed) = result {
        if *freed > 0 {
            tracing::info!(app_id = %app, ?scope, freed, "deleted {what}");
        }
    }
}

/// The retryable error of a remote write that did not finish within the tier's
/// `write_timeout` (`what`: the write and its path).
pub fn timed_out(tier: &'static str, what: String, timeout: std::time::Duration) -> Error {
    Error::TierFailed {
        tier,
        reason: format!("{what} did not finish within {timeout:?}"),
    }
}
