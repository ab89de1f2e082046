//! `Apps`: the applications the coordinator has heard from, and the partitions each was
//! assigned per server, which is the load the assignment rule balances.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
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
    /// Wall clock of the first time the app was heard from, ms since the epoch (REST API).
    registration_ms: i64,
    /// Wall clock of the last registration, heartbeat or assignment, ms since the epoch.
    update_ms: i64,
    /// Client version and commit from `registerApplicationInfo` (0.10 clients).
    version: String,
    git_commit_id: String,
    /// The shuffles this coordinator assigned, by shuffle id (the dashboard's app page).
    shuffles: BTreeMap<i32, ShuffleRecord>,
}

/// One `getShuffleAssignments` answer as the coordinator gave it: what it knows of a shuffle
/// without asking the servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShuffleRecord {
    /// The shuffle id the client asked for.
    pub shuffle_id: i32,
    /// `partitionNum` of the request.
    pub partitions: i32,
    /// The servers the ranges went to.
    pub servers: BTreeSet<String>,
}

/// One live app with what the coordinator assigned it (the dashboard's app page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppDetail {
    /// As the REST API shows it.
    pub snapshot: AppSnapshot,
    /// Assigned shuffles, by shuffle id; a shuffle assigned again (a retry) keeps the last.
    pub shuffles: Vec<ShuffleRecord>,
    /// Partitions assigned per server id, over all shuffles.
    pub assigned: BTreeMap<String, u64>,
}

/// One live app as the coordinator REST API shows it (Java's `AppInfo` with its user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSnapshot {
    /// The app id.
    pub app_id: String,
    /// From `registerApplicationInfo`; empty for apps only heard from by heartbeat, as Java
    /// files them under the user `""`.
    pub user: String,
    /// First heard from, ms since the epoch.
    pub registration_ms: i64,
    /// Last heard from, ms since the epoch.
    pub update_ms: i64,
    /// Client version (empty when not sent).
    pub version: String,
    /// Client commit (empty when not sent).
    pub git_commit_id: String,
}

/// The apps, keyed by app id. Plain data behind the coordinator's apps lock, which app
/// heartbeats and registrations take a thousand times a second at 10,000 apps. Assignments are
/// serialised apart from it (as Java's are, so concurrent requests do not pick the same
/// server): they take the load as a shared snapshot under a short hold of the lock, run the
/// rule without it, and add the new load under a second short hold.
///
/// The load is kept as a running sum rather than summed over the apps at each assignment:
/// with thousands of apps the sum was the whole cost of an assignment, all of it under the
/// lock (`docs/performance.md`, "The coordinator at cluster scale"). Expiry finds the silent
/// apps from the oldest end of `by_seen` instead of scanning them all.
#[derive(Debug)]
pub(super) struct Apps {
    timeout: Duration,
    apps: HashMap<String, AppEntry>,
    /// Apps ever heard from (Java's `total_app_num` counter, shown by `/api/app/total`).
    total: u64,
    /// Partitions assigned per server id, summed over every app in `apps`; a server whose sum
    /// falls to 0 is removed. Changed only by [`Apps::add_load`] and [`Apps::expire`], copied
    /// on write: the snapshot [`Apps::load`] hands out is dropped before the next change, so
    /// the copy happens only when a sweep expires apps during an assignment.
    load: Arc<HashMap<String, u64>>,
    /// Every app in `apps` keyed by when it was last heard from, oldest first.
    by_seen: BTreeSet<(Instant, String)>,
}

impl Apps {
    pub(super) fn new(timeout: Duration) -> Self {
        Apps {
            timeout,
            apps: HashMap::new(),
            total: 0,
            load: Arc::default(),
            by_seen: BTreeSet::new(),
        }
    }

    /// Marks `app_id` alive at `now`, creating it if new.
    pub(super) fn touch(&mut self, app_id: &str, now: Instant) {
        let wall = crate::clock::now_ms();
        let total = &mut self.total;
        let entry = self.apps.entry(app_id.to_owned()).or_insert_with(|| {
            tracing::debug!(app_id, "coordinator: new app");
            *total += 1;
            AppEntry {
                registration_ms: wall,
                ..AppEntry::default()
            }
        });
        let mut key = (now, app_id.to_owned());
        if let Some(before) = entry.last_seen.replace(now) {
            key.0 = before;
            self.by_seen.remove(&key);
            key.0 = now;
        }
        self.by_seen.insert(key);
        entry.update_ms = wall;
    }

    /// Records the client's version and commit (`registerApplicationInfo`, 0.10 clients).
    pub(super) fn set_client(&mut self, app_id: &str, version: &str, git_commit_id: &str) {
        if let Some(entry) = self.apps.get_mut(app_id) {
            entry.version = version.to_owned();
            entry.git_commit_id = git_commit_id.to_owned();
        }
    }

    /// Apps ever heard from since start.
    pub(super) fn total(&self) -> u64 {
        self.total
    }

    /// Records the servers a shuffle of `app_id` was assigned to; the load is added by
    /// [`Apps::add_load`].
    pub(super) fn record_shuffle(&mut self, app_id: &str, record: ShuffleRecord) {
        if let Some(entry) = self.apps.get_mut(app_id) {
            entry.shuffles.insert(record.shuffle_id, record);
        }
    }

    /// The app `app_id` if alive at `now`, with its shuffles and load.
    pub(super) fn detail(&self, app_id: &str, now: Instant) -> Option<AppDetail> {
        let entry = self.apps.get(app_id).filter(|e| self.is_live(e, now))?;
        Some(AppDetail {
            snapshot: Self::snapshot(app_id, entry),
            shuffles: entry.shuffles.values().cloned().collect(),
            assigned: entry
                .assigned
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        })
    }

    fn snapshot(app_id: &str, e: &AppEntry) -> AppSnapshot {
        AppSnapshot {
            app_id: app_id.to_owned(),
            user: e.user.clone(),
            registration_ms: e.registration_ms,
            update_ms: e.update_ms,
            version: e.version.clone(),
            git_commit_id: e.git_commit_id.clone(),
        }
    }

    /// The apps alive at `now`, in no order: callers sort after releasing the lock, which
    /// app heartbeats wait on.
    pub(super) fn snapshots(&self, now: Instant) -> Vec<AppSnapshot> {
        self.apps
            .iter()
            .filter(|(_, e)| self.is_live(e, now))
            .map(|(id, e)| Self::snapshot(id, e))
            .collect()
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
            let load = Arc::make_mut(&mut self.load);
            for (server, n) in partitions {
                match load.get_mut(&server) {
                    Some(sum) => *sum += n,
                    None => {
                        load.insert(server.clone(), n);
                    }
                }
                *entry.assigned.entry(server).or_insert(0) += n;
            }
        }
    }

    /// Partitions assigned per server id, summed over the apps still alive at `now`: forgets
    /// the apps silent past the timeout first (see [`Apps::expire`]), so the sum holds the
    /// live apps only. Returns the ids that went with the sum.
    pub(super) fn load(&mut self, now: Instant) -> (Arc<HashMap<String, u64>>, Vec<String>) {
        let expired = self.expire(now);
        (Arc::clone(&self.load), expired)
    }

    /// Apps alive at `now`: all of them but the silent ones not yet expired, counted from the
    /// oldest end of `by_seen` (every app is in it once), so the metrics and the dashboard do
    /// not walk 10,000 apps under the lock.
    pub(super) fn live_count(&self, now: Instant) -> usize {
        let silent = self
            .by_seen
            .iter()
            .take_while(|(seen, _)| now.saturating_duration_since(*seen) > self.timeout)
            .count();
        self.apps.len() - silent
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

    /// Apps ever added (`total_app_num`).
    pub(super) fn created(&self) -> u64 {
        self.total
    }

    /// Forgets apps silent for longer than the timeout, and with them their load; returns the
    /// ids that went, so their remote storage choice can be released. Costs the expired apps,
    /// not all of them.
    pub(super) fn expire(&mut self, now: Instant) -> Vec<String> {
        let mut expired = Vec::new();
        while let Some((seen, _)) = self.by_seen.first() {
            if now.saturating_duration_since(*seen) <= self.timeout {
                break;
            }
            let Some((_, app_id)) = self.by_seen.pop_first() else {
                break;
            };
            if let Some(entry) = self.apps.remove(&app_id) {
                tracing::info!(app_id, user = %entry.user, "coordinator: app expired");
                let load = Arc::make_mut(&mut self.load);
                for (server, n) in &entry.assigned {
                    if let Some(sum) = load.get_mut(server) {
                        *sum = sum.saturating_sub(*n);
                        if *sum == 0 {
                            load.remove(server);
                        }
                    }
                }
            }
            expired.push(app_id);
        }
        expired
    }

    /// [`Apps::expire`], run by the coordinator's sweeper.
    pub(super) fn sweep(&mut self, now: Instant) -> Vec<String> {
        self.expire(now)
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
        let (load, expired) = apps.load(t0 + Duration::from_secs(60));
        assert_eq!(*load, HashMap::from([("a".into(), 4), ("b".into(), 3)]));
        assert!(expired.is_empty());
        assert_eq!(apps.live_count(t0 + Duration::from_secs(60)), 2);
        assert_eq!(apps.total(), 2);
        let mut snaps = apps.snapshots(t0 + Duration::from_secs(60));
        snaps.sort_by(|a, b| a.app_id.cmp(&b.app_id));
        assert_eq!(snaps[0].app_id, "app1");
        assert_eq!(snaps[0].user, "");
        assert_eq!(snaps[1].user, "alice");
        assert!(snaps[1].registration_ms > 0 && snaps[1].update_ms >= snaps[1].registration_ms);

        // app1 is silent past the timeout: it is not live even before a sweep, and the next
        // read of the load forgets it with its load.
        let later = t0 + Duration::from_secs(61);
        assert_eq!(apps.live_count(later), 1);
        let (load, expired) = apps.load(later);
        assert_eq!(*load, HashMap::from([("b".into(), 2)]));
        assert_eq!(expired, ["app1"]);
        assert!(apps.sweep(later).is_empty());

        // A heartbeat keeps an app alive.
        apps.touch("app2", later);
        assert!(apps.sweep(later + Duration::from_secs(60)).is_empty());
        assert_eq!(apps.sweep(later + Duration::from_secs(61)).len(), 1);
        assert!(apps.load(later).0.is_empty());
        assert!(apps.by_seen.is_empty());
    }

    /// The running sum against the sum it replaced, over live apps computed from scratch,
    /// through assignments, heartbeats, registrations and expiry in a seeded random order.
    #[test]
    fn the_running_load_is_the_sum_over_the_live_apps() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(60);
        let mut apps = Apps::new(timeout);
        let mut seen: HashMap<String, (Instant, HashMap<String, u64>)> = HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut now = t0;
        for step in 0..5_000 {
            now += Duration::from_millis(next() % 400);
            let app = format!("app{}", next() % 50);
            match next() % 4 {
                0 => {
                    apps.touch(&app, now);
                    seen.entry(app).or_insert((now, HashMap::new())).0 = now;
                }
                1 => {
                    apps.register(&app, "u", now);
                    seen.entry(app).or_insert((now, HashMap::new())).0 = now;
                }
                _ => {
                    let server = format!("s{}", next() % 12);
                    let n = 1 + next() % 100;
                    apps.add_load(&app, HashMap::from([(server.clone(), n)]), now);
                    let e = seen.entry(app).or_insert((now, HashMap::new()));
                    e.0 = now;
                    *e.1.entry(server).or_insert(0) += n;
                }
            }
            if step % 7 == 0 {
                // The model: an app silent past the timeout when the load is read is gone,
                // with its load. One heard from again before that read is live again with
                // what it had, as before the running sum (and as Java's expiry check, which
                // runs on a timer, leaves it).
                seen.retain(|_, (at, _)| now.saturating_duration_since(*at) <= timeout);
                let mut want: HashMap<String, u64> = HashMap::new();
                for (_, load) in seen.values() {
                    for (s, n) in load {
                        *want.entry(s.clone()).or_insert(0) += n;
                    }
                }
                assert_eq!(*apps.load(now).0, want, "step {step}");
                assert_eq!(apps.live_count(now), seen.len());
                assert_eq!(apps.by_seen.len(), apps.apps.len());
            }
        }
    }

    #[test]
    fn detail_keeps_the_last_assignment_of_each_shuffle_and_the_load() {
        let t0 = Instant::now();
        let mut apps = Apps::new(Duration::from_secs(60));
        apps.register("a1", "alice", t0);
        let record = |id, servers: &[&str]| ShuffleRecord {
            shuffle_id: id,
            partitions: 4,
            servers: servers.iter().map(|s| s.to_string()).collect(),
        };
        apps.record_shuffle("a1", record(1, &["s1"]));
        apps.record_shuffle("a1", record(0, &["s1", "s2"]));
        apps.record_shuffle("a1", record(1, &["s2"]));
        apps.record_shuffle("unknown", record(0, &["s1"]));
        apps.add_load("a1", HashMap::from([("s1".into(), 3)]), t0);
        let d = apps.detail("a1", t0).unwrap();
        assert_eq!(d.snapshot.user, "alice");
        assert_eq!(
            d.shuffles,
            vec![record(0, &["s1", "s2"]), record(1, &["s2"])]
        );
        assert_eq!(d.assigned, BTreeMap::from([("s1".into(), 3)]));
        assert!(apps.detail("unknown", t0).is_none());
        assert!(apps.detail("a1", t0 + Duration::from_secs(61)).is_none());
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
