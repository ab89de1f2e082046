//! `Apps`: the applications the coordinator has heard from, and the partitions each was
//! assigned per server, which is the load the assignment rule balances.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// One application.
#[derive(Debug, Clone, Default)]
struct AppEntry {
    /// Last registration, heartbeat or assignment; `None` only before the first.
    last_seen: Option<Instant>,
    /// User from `registerApplicationInfo` (logs only).
    user: String,
    /// Partitions assigned per server id, over all of the app's shuffles.
    assigned: HashMap<String, u64>,
}

/// The apps, keyed by app id. Plain data: the coordinator keeps it behind one lock so that
/// reading the load, assigning and adding the new load happen as one step, as the Java
/// coordinator serialises assignments so concurrent requests do not pick the same server.
#[derive(Debug)]
pub(super) struct Apps {
    timeout: Duration,
    apps: HashMap<String, AppEntry>,
}

impl Apps {
    pub(super) fn new(timeout: Duration) -> Self {
        Apps {
            timeout,
            apps: HashMap::new(),
        }
    }

    /// Marks `app_id` alive at `now`, creating it if new.
    pub(super) fn touch(&mut self, app_id: &str, now: Instant) {
        let entry = self.apps.entry(app_id.to_owned()).or_insert_with(|| {
            tracing::debug!(app_id, "coordinator: new app");
            AppEntry::default()
        });
        entry.last_seen = Some(now);
    }

    /// `registerApplicationInfo`: touch plus the user.
    pub(super) fn register(&mut self, app_id: &str, user: &str, now: Instant) {
        self.touch(app_id, now);
        if let Some(entry) = self.apps.get_mut(app_id) {
            entry.user = user.to_owned();
        }
    }

    /// Adds `partitions` (per server id) to the app's load, touching it.
    pub(super) fn add_load(
        &mut self,
        app_id: &str,
        partitions: HashMap<String, u64>,
        now: Instant,
    ) {
        self.touch(app_id, now);
        if let Some(entry) = self.apps.get_mut(app_id) {
            for (server, n) in partitions {
                *entry.assigned.entry(server).or_insert(0) += n;
            }
        }
    }

    /// Partitions assigned per server id, summed over the apps still alive at `now`.
    pub(super) fn load(&self, now: Instant) -> HashMap<String, u64> {
        let mut load = HashMap::new();
        for entry in self.apps.values().filter(|e| self.is_live(e, now)) {
            for (server, n) in &entry.assigned {
                *load.entry(server.clone()).or_insert(0) += n;
            }
        }
        load
    }

    /// Apps alive at `now`.
    pub(super) fn live_count(&self, now: Instant) -> usize {
        self.apps.values().filter(|e| self.is_live(e, now)).count()
    }

    /// Forgets apps silent for longer than the timeout, and with them their load; returns the
    /// ids that went, so their remote storage choice can be released.
    pub(super) fn sweep(&mut self, now: Instant) -> Vec<String> {
        let timeout = self.timeout;
        let mut expired = Vec::new();
        self.apps.retain(|app_id, entry| {
            let live = Self::live_within(entry, now, timeout);
            if !live {
                tracing::info!(app_id, user = %entry.user, "coordinator: app expired");
                expired.push(app_id.clone());
            }
            live
        });
        expired
    }

    fn is_live(&self, entry: &AppEntry, now: Instant) -> bool {
        Self::live_within(entry, now, self.timeout)
    }

    fn live_within(entry: &AppEntry, now: Instant, timeout: Duration) -> bool {
        entry
            .last_seen
            .is_some_and(|seen| now.saturating_duration_since(seen) <= timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_sums_live_apps_and_expires_with_them() {
        let t0 = Instant::now();
        let mut apps = Apps::new(Duration::from_secs(60));
        apps.add_load(
            "app1",
            HashMap::from([("a".into(), 3), ("b".into(), 1)]),
            t0,
        );
        apps.add_load("app1", HashMap::from([("a".into(), 1)]), t0);
        apps.register("app2", "alice", t0 + Duration::from_secs(30));
        apps.add_load(
            "app2",
            HashMap::from([("b".into(), 2)]),
            t0 + Duration::from_secs(30),
        );
        let load = apps.load(t0 + Duration::from_secs(60));
        assert_eq!(load, HashMap::from([("a".into(), 4), ("b".into(), 3)]));
        assert_eq!(apps.live_count(t0 + Duration::from_secs(60)), 2);

        // app1 is silent past the timeout: its load no longer counts, even before a sweep.
        let later = t0 + Duration::from_secs(61);
        assert_eq!(apps.load(later), HashMap::from([("b".into(), 2)]));
        assert_eq!(apps.live_count(later), 1);
        assert_eq!(apps.sweep(later), ["app1"]);
        assert!(apps.sweep(later).is_empty());

        // A heartbeat keeps an app alive.
        apps.touch("app2", later);
        assert!(apps.sweep(later + Duration::from_secs(60)).is_empty());
        assert_eq!(apps.sweep(later + Duration::from_secs(61)).len(), 1);
        assert!(apps.load(later).is_empty());
    }
}
