//! [`CauseLog`]: one WARN per app, place and cause for every retry loop of the store (a store
//! refusing every flush once logged 1,531 lines in four minutes), then a count when the cause
//! passes or the app is gone.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::ids::AppId;

/// Where on the store's paths a cause was met: the key a cause is logged once under, per app.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// The registration check found the app's remote storage refusing it for good (or the app
    /// registered no remote path where one is needed).
    Refused,
    /// The registration check got no usable answer from the remote storage.
    RegistrationCheck,
    /// The remote tier could not take the app's registration (its settings do not parse).
    Registration,
    /// A spill went to the tier the router did not prefer.
    Fallback,
    /// A spill to local disk failed.
    LocalSpill,
    /// A spill to the app's remote storage failed.
    RemoteSpill,
    /// The spiller's retry loop (any tier).
    Spill,
    /// The app (or its user) holds its local-disk quota.
    LocalQuota,
    /// The app (or its user) holds its remote-storage quota.
    RemoteQuota,
}

impl Place {
    /// The label written in the log line.
    pub fn as_str(self) -> &'static str {
        match self {
            Place::Refused => "refused",
            Place::RegistrationCheck => "registration check",
            Place::Registration => "registration",
            Place::Fallback => "fallback",
            Place::LocalSpill => "local spill",
            Place::RemoteSpill => "remote spill",
            Place::Spill => "spill",
            Place::LocalQuota => "local-disk quota",
            Place::RemoteQuota => "remote-storage quota",
        }
    }
}

/// Entries of a [`CauseLog`] past which old ones are pruned, and their age then.
const PRUNE_AT: usize = 10_000;
const PRUNE_AFTER: Duration = Duration::from_secs(3600);

/// One cause as counted by [`CauseLog`]: its [`cause_key`], how often, since when.
struct Seen {
    cause: String,
    count: u64,
    first: Instant,
}

impl Seen {
    fn new(cause: String) -> Self {
        Seen {
            cause,
            count: 1,
            first: Instant::now(),
        }
    }
}

/// See the module doc.
#[derive(Default)]
pub struct CauseLog {
    seen: parking_lot::Mutex<HashMap<(AppId, Place), Seen>>,
}

impl CauseLog {
    /// Counts `cause` at `place` for `app`; true when the caller should log it: the first
    /// time, or when the cause differs from the one logged last at that place.
    pub fn first(&self, app: &AppId, place: Place, cause: &str) -> bool {
        let key = cause_key(cause);
        let mut seen = self.seen.lock();
        if seen.len() >= PRUNE_AT {
            // Apps refused at registration never register, so nothing forgets them: past a
            // size no healthy server reaches, causes first seen an hour ago go.
            seen.retain(|_, s| s.first.elapsed() < PRUNE_AFTER);
        }
        match seen.get_mut(&(app.clone(), place)) {
            Some(s) if s.cause == key => {
                s.count += 1;
                false
            }
            Some(entry) => {
                let old = std::mem::replace(entry, Seen::new(key));
                summarize(app, place, &old);
                true
            }
            None => {
                seen.insert((app.clone(), place), Seen::new(key));
                true
            }
        }
    }

    /// The place works again for `app`: logs how often the cause was seen, if more than once.
    pub fn passed(&self, app: &AppId, place: Place) {
        let mut seen = self.seen.lock();
        if seen.is_empty() {
            return;
        }
        if let Some(s) = seen.remove(&(app.clone(), place)) {
            drop(seen);
            summarize(app, place, &s);
        }
    }

    /// The app is gone: logs every count it left.
    pub fn forget_app(&self, app: &AppId) {
        let gone: Vec<(Place, Seen)> = {
            let mut seen = self.seen.lock();
            let keys: Vec<_> = seen.keys().filter(|(a, _)| a == app).cloned().collect();
            keys.into_iter()
                .filter_map(|k| seen.remove(&k).map(|s| (k.1, s)))
                .collect()
        };
        for (place, s) in gone {
            summarize(app, place, &s);
        }
    }
}

fn summarize(app: &AppId, place: Place, s: &Seen) {
    if s.count > 1 {
        tracing::info!(app_id = %app, place = place.as_str(), times = s.count,
            over_secs = s.first.elapsed().as_secs(), cause = %s.cause,
            "a cause logged once above repeated");
    }
}

/// A cause's identity: its text with the parts that differ per occurrence (numbers, paths,
/// object keys, durations) blanked, so "put s3a://b/x/1.data: 403" and "put s3a://b/y/2.data:
/// 403" are one cause.
pub fn cause_key(cause: &str) -> String {
    cause
        .split_whitespace()
        .map(|w| {
            if w.contains('/') || w.chars().any(|c| c.is_ascii_digit()) {
                "_"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_is_logged_once_per_app_and_place_until_it_passes_or_changes() {
        let log = CauseLog::default();
        let a = AppId::parse("app_1").unwrap();
        let b = AppId::parse("app_2").unwrap();
        let spill = Place::Spill;
        assert!(log.first(&a, spill, "put s3a://b/a/0/0-0/x_1.data: 403 Forbidden"));
        assert!(!log.first(&a, spill, "put s3a://b/a/0/1-1/x_2.data: 403 Forbidden"));
        assert!(log.first(&b, spill, "put s3a://b/b/0/0-0/x_3.data: 403 Forbidden"));
        assert!(log.first(&a, spill, "put s3a://b/a/0/0-0/x_4.data: timed out"));
        log.passed(&a, spill);
        assert!(log.first(&a, spill, "put s3a://b/a/0/0-0/x_5.data: timed out"));
        log.forget_app(&a);
        assert!(log.first(&a, spill, "put s3a://b/a/0/0-0/x_5.data: timed out"));
        // Another place of the same app is logged on its own.
        assert!(log.first(
            &a,
            Place::RemoteSpill,
            "put s3a://b/a/0/0-0/x_5.data: timed out"
        ));
    }
}
