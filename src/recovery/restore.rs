//! Between the registry and the recovered state: rebuild the registry after a restart, and
//! read it back out for journal snapshots and last-seen records.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::record::now_ms;
use super::state::{AppState, RecoveredState, ShuffleState};
use crate::app::{App, AppRegistry};
use crate::ids::{AppId, PartitionRange};
use crate::store::RemoteStorage;

/// Puts every app of `state` into `registry`: registrations, ranges (with their buffers),
/// commit counters, reported block ids, and last-seen times. Entries that do not validate
/// (an app id or range a current server would refuse) are logged and skipped.
pub fn restore(registry: &Arc<AppRegistry>, state: RecoveredState) {
    let now = now_ms();
    for (id, a) in state.apps {
        let app_id = match AppId::parse(&id) {
            Ok(app) => app,
            Err(e) => {
                tracing::warn!(app_id = %id, error = %e, "journal names an invalid app id; skipped");
                continue;
            }
        };
        let app = App::new(app_id.clone());
        let idle = Duration::from_millis(now.saturating_sub(a.last_seen_ms));
        app.set_last_seen(
            Instant::now()
                .checked_sub(idle)
                .unwrap_or_else(Instant::now),
        );
        let remote = a.remote.map(|(path, conf)| RemoteStorage { path, conf });
        app.set_registration(a.user, remote, Default::default());
        for (shuffle_id, s) in a.shuffles {
            let shuffle = app.shuffle_or_insert(shuffle_id, s.local_order);
            for (start, end) in s.ranges {
                let added = PartitionRange::new(start, end).and_then(|r| shuffle.add_range(r));
                if let Err(e) = added {
                    tracing::warn!(app_id = %id, shuffle_id, start, end, error = %e, "journal range skipped");
                }
            }
            shuffle.restore_commits(s.commits);
            if let Some(bitmap_num) = s.bitmap_num {
                shuffle
                    .block_ids
                    .import(bitmap_num, s.ids.into_iter().collect());
            }
        }
        registry.adopt_app(Arc::new(app));
    }
}

/// The registry's live state in the journal's shape.
pub fn export(registry: &AppRegistry) -> RecoveredState {
    let mut state = RecoveredState::default();
    let now = now_ms();
    for app in registry.apps() {
        let mut a = AppState {
            user: app.user(),
            remote: app.remote_storage().map(|r| (r.path, r.conf)),
            last_seen_ms: seen_ms(&app, now),
            ..AppState::default()
        };
        for id in app.shuffle_ids() {
            let Some(shuffle) = app.shuffle(id) else {
                continue;
            };
            let (bitmap_num, ids) = shuffle.block_ids.export();
            a.shuffles.insert(
                id,
                ShuffleState {
                    local_order: shuffle.local_order(),
                    ranges: shuffle.ranges().iter().map(|r| (r.start, r.end)).collect(),
                    commits: shuffle.commits(),
                    bitmap_num,
                    ids: ids
                        .into_iter()
                        .map(|(p, m)| (p, Arc::unwrap_or_clone(m)))
                        .collect(),
                },
            );
        }
        state.apps.insert(app.id().to_string(), a);
    }
    state
}

/// `(app id, wall-clock ms last seen)` of every live app.
pub fn seen(registry: &AppRegistry) -> Vec<(String, u64)> {
    let now = now_ms();
    registry
        .apps()
        .iter()
        .map(|a| (a.id().to_string(), seen_ms(a, now)))
        .collect()
}

fn seen_ms(app: &App, now: u64) -> u64 {
    now.saturating_sub(app.last_seen().elapsed().as_millis() as u64)
}
