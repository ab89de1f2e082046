//! Between the registry and the recovered state: rebuild the registry after a restart, and
//! read it back out for journal snapshots and last-seen records. It lives with the registry
//! (which it builds) so that recovery, which only persists, never depends on the registry.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{App, AppRegistry};
use crate::ids::{AppId, PartitionRange};
use crate::recovery::{AppState, RecoveredState, Recovery, ShuffleState};
use crate::store::RemoteStorage;

impl AppRegistry {
    /// Rebuilds the registry from what `recovery` found (once), then connects it to the
    /// journal: from here on its changes are journaled and snapshots come from it.
    pub fn attach_recovery(self: &Arc<Self>, recovery: &mut Recovery) {
        if let Some(state) = recovery.take_state() {
            restore(self, state);
        }
        self.set_journal(Arc::clone(recovery.journal()));
        let weak = Arc::downgrade(self);
        recovery.journal().set_snapshot(Arc::new(move || {
            weak.upgrade()
                .map(|r| export(&r).to_records())
                .unwrap_or_default()
        }));
    }

    /// `(app id, wall-clock ms last seen)` of every live app, for the journal's last-seen
    /// records.
    pub fn seen_apps(&self) -> Vec<(String, u64)> {
        seen(self)
    }
}

/// Puts every app of `state` into `registry`: registrations, ranges (with their buffers),
/// commit counters, reported block ids, and last-seen times. Entries that do not validate
/// (an app id or range a current server would refuse) are logged and skipped.
fn restore(registry: &Arc<AppRegistry>, state: RecoveredState) {
    let now = crate::clock::now_ms().unsigned_abs();
    for (id, a) in state.apps {
        let app_id = match AppId::parse(&id) {
            Ok(app) => app,
            Err(e) => {
                tracing::warn!(app_id = %id, error = %e, "journal names an invalid app id; skipped");
                continue;
            }
        };
        let app = App::new(app_id.clone(), registry.store().memory().budget().tenant());
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
                let added = PartitionRange::new(start, end)
                    .map_err(crate::error::Error::from)
                    .and_then(|r| shuffle.add_range(r));
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
            let counts: Vec<crate::app::record_counts::RecordCount> = s
                .records
                .into_iter()
                .flat_map(|(p, tasks)| {
                    tasks
                        .into_iter()
                        .map(move |(t, n)| crate::app::record_counts::RecordCount {
                            partition: p,
                            task_attempt: t,
                            records: n,
                        })
                })
                .collect();
            shuffle.records.import(&counts);
        }
        registry.adopt_app(Arc::new(app));
    }
}

/// The registry's live state in the journal's shape.
fn export(registry: &AppRegistry) -> RecoveredState {
    let mut state = RecoveredState::default();
    let now = crate::clock::now_ms().unsigned_abs();
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
                    ids: ids.into_iter().map(|(p, m)| (p, m.to_treemap())).collect(),
                    records: shuffle
                        .records
                        .export()
                        .into_iter()
                        .map(|c| {
                            let attempts = c.attempts.iter().map(|a| (a.task_attempt, a.records));
                            (c.partition, attempts.collect())
                        })
                        .collect(),
                },
            );
        }
        state.apps.insert(app.id().to_string(), a);
    }
    state
}

/// `(app id, wall-clock ms last seen)` of every live app.
fn seen(registry: &AppRegistry) -> Vec<(String, u64)> {
    let now = crate::clock::now_ms().unsigned_abs();
    registry
        .apps()
        .iter()
        .map(|a| (a.id().to_string(), seen_ms(a, now)))
        .collect()
}

fn seen_ms(app: &App, now: u64) -> u64 {
    now.saturating_sub(app.last_seen().elapsed().as_millis() as u64)
}
