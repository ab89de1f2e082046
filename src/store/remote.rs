//! What the two remote tiers (HDFS, object storage) share about the apps they know: each app
//! has an entry behind a gate that appends hold shared and purges exclusively, and an app
//! purge retires the entry.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::Result;
use crate::ids::AppId;
use crate::store::PurgeScope;

/// The apps a remote tier knows, by id.
pub type RemoteApps<E> = parking_lot::Mutex<HashMap<AppId, Arc<E>>>;

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
