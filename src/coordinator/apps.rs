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
    /// User from `registerApplicationInfo`: logs, and `app_num{user_name}`.
    user: String,
    /// Whether `registerApplicationInfo` named the user. Java's per-user count (its quota
    /// manager's) holds registered apps only, not apps known from heartbeats alone.
    registered: bool,
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
    /// Apps ever added (`total_app_num`): an app that expired and comes back counts again, as
    /// Java's app manager forgets expired ids too.
    created: u64,
}

impl Apps {
    pub(super) fn new(timeout: Duration) -> Self {
        Apps {
            timeout,
            apps: HashMap::new(),
            created: 0,
        }
    }

    /// Marks `app_id` alive at `now`, creating it if new.
    pub(super) fn touch(&mut self, app_id: &str, now: Instant) {
        let created = &mut self.created;
        let entry = self.apps.entry(app_id.to_owned()).or_insert_with(|| {
            tracing::debug!(app_id, "coordinator: new app");
            *created += 1;
            AppEntry::default()
        });
        entry.last_seen = Some(now);
    }

    /// `registerApplicationInfo`: touch plus the user.
    pub(super) fn register(&mut self, app_id: &str, user: &str, now: Instant) {
        self.touch(app_id, now);
        if let Some(entry) = self.apps.get_mut(app_id) {
            entry.user = user.to_owned();
            entry.registered = true;
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

    /// Registered apps alive at `now`, per user.
    pub(super) fn per_user(&self, now: Instant) -> std::collections::BTreeMap<String, u64> {
        let mut users = std::collections::BTreeMap::new();
        for entry in self.apps.values() {
            if entry.registered && self.is_live(entry, now) {
                *users.entry(entry.user.clone()).or_insert(0) += 1;
            }
        }
        users
    }

    /// Apps ever added.
    pub(super) fn created(&self) -> u64 {
        self.created
    }

    /// Forgets apps silent for longer than the timeout, and with them their load; returns how
    /// many went.
    pub(super) fn sweep(&mut self, now: Instant) -> usize {
        let before = self.apps.len();
        let timeout = self.timeout;
        self.apps.retain(|app_id, entry| {
            let live = Self::live_within(entry, now, timeout);
            if !live {
                tracing::info!(app_id, user = %entry.user, "coordinator: app expired");
            }
            live
        });
        before - self.apps.len()
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
        assert_eq!(apps.sweep(later), 1);
        assert_eq!(apps.sweep(later), 0);

        // A heartbeat keeps an app alive.
        apps.touch("app2", later);
        assert_eq!(apps.sweep(later + Duration::from_secs(60)), 0);
        assert_eq!(apps.sweep(later + Duration::from_secs(61)), 1);
        assert!(apps.load(later).is_empty());
    }

    #[test]
    fn per_user_counts_live_registered_apps_and_created_counts_every_new_id() {
        let t0 = Instant::now();
        let mut apps = Apps::new(Duration::from_secs(60));
        apps.register("a1", "alice", t0);
        apps.register("a2", "alice", t0);
        apps.register("b1", "bob", t0 + Duration::from_secs(30));
        apps.touch("anon", t0);
        let users = apps.per_user(t0 + Duration::from_secs(60));
        assert_eq!(users.get("alice"), Some(&2));
        assert_eq!(users.get("bob"), Some(&1));
        assert_eq!(users.len(), 2, "heartbeat-only apps have no user");
        assert_eq!(apps.created(), 4);
        let later = t0 + Duration::from_secs(61);
        assert_eq!(apps.per_user(later).get("alice"), None);
        apps.sweep(later);
        apps.touch("a1", later);
        assert_eq!(
            apps.created(),
            5,
            "an expired app that returns is new again"
        );
    }
}
