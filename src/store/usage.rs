//! What each tenant holds on this server's file tiers, known at every moment: per app, and
//! summed per user (the `user` of `registerShuffle`), the bytes and files on the local disks
//! and on the remote tier.
//!
//! The router counts a batch here when its append is durable and drops a shuffle's or an
//! app's share when a purge deletes it, so this is the one owner of tenant usage: the quotas,
//! the metrics and the dashboard read it. What an app holds in memory is not here: the write
//! budget owns memory.
//!
//! Totals are kept per app and per user as they change, so a quota check costs two map
//! lookups, not a walk over the app's partitions (it runs on every `requireBuffer`).

use std::collections::HashMap;

use crate::ids::{AppId, PartitionKey};
use crate::store::{PurgeScope, TierKind};

/// Bytes and files one tenant holds on the file tiers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Bytes on the local disks (data and index files).
    pub local_bytes: u64,
    /// Data/index pairs written to the local disks (each spill of a partition appends to its
    /// pair, so this counts spills, not files).
    pub local_writes: u64,
    /// Bytes on the remote tier (HDFS or object storage).
    pub remote_bytes: u64,
    /// Appends to the remote tier (an object pair each on object storage).
    pub remote_writes: u64,
}

impl Held {
    fn add(&mut self, other: &Held) {
        self.local_bytes += other.local_bytes;
        self.local_writes += other.local_writes;
        self.remote_bytes += other.remote_bytes;
        self.remote_writes += other.remote_writes;
    }

    fn sub(&mut self, other: &Held) {
        self.local_bytes = self.local_bytes.saturating_sub(other.local_bytes);
        self.local_writes = self.local_writes.saturating_sub(other.local_writes);
        self.remote_bytes = self.remote_bytes.saturating_sub(other.remote_bytes);
        self.remote_writes = self.remote_writes.saturating_sub(other.remote_writes);
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        *self == Held::default()
    }

    /// One append of `bytes` to a tier of `kind`.
    fn one(kind: TierKind, bytes: u64) -> Held {
        match kind {
            TierKind::LocalFile => Held {
                local_bytes: bytes,
                local_writes: 1,
                ..Held::default()
            },
            _ => Held {
                remote_bytes: bytes,
                remote_writes: 1,
                ..Held::default()
            },
        }
    }
}

/// One app's usage and the user it counts against.
#[derive(Clone, Debug, Default)]
struct AppHeld {
    user: String,
    total: Held,
    shuffles: HashMap<i32, Held>,
}

#[derive(Default)]
struct State {
    apps: HashMap<AppId, AppHeld>,
    users: HashMap<String, Held>,
}

/// See the module doc.
#[derive(Default)]
pub struct Usage {
    state: parking_lot::Mutex<State>,
}

/// One app's line in [`Usage::apps`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppUsage {
    /// The app.
    pub app: AppId,
    /// Its user (empty when the client sent none).
    pub user: String,
    /// What it holds.
    pub held: Held,
}

impl Usage {
    /// Records the app's user, the first one it registered with (as Java keeps the first
    /// `registerShuffle`'s user for an app).
    pub fn register(&self, app: &AppId, user: &str) {
        let mut s = self.state.lock();
        if !s.apps.contains_key(app) {
            s.apps.insert(
                app.clone(),
                AppHeld {
                    user: user.to_owned(),
                    ..AppHeld::default()
                },
            );
        }
    }

    /// A durable append of `bytes` of `part` to a tier of `kind`.
    pub fn written(&self, part: &PartitionKey, kind: TierKind, bytes: u64) {
        let one = Held::one(kind, bytes);
        let mut s = self.state.lock();
        let State { apps, users } = &mut *s;
        let app = match apps.get_mut(&part.app) {
            Some(a) => a,
            None => apps.entry(part.app.clone()).or_default(),
        };
        app.total.add(&one);
        app.shuffles.entry(part.shuffle).or_default().add(&one);
        match users.get_mut(&app.user) {
            Some(u) => u.add(&one),
            None => {
                users.insert(app.user.clone(), one);
            }
        }
    }

    /// The scope's files are deleted: its share leaves the app's and the user's totals. A
    /// partition scope (the cleanup after a spill raced a purge) belongs to a shuffle or app
    /// whose purge has already taken its share.
    pub fn purged(&self, scope: &PurgeScope) {
        let mut s = self.state.lock();
        let State { apps, users } = &mut *s;
        let (user, gone) = match scope {
            PurgeScope::App(app) => match apps.remove(app) {
                Some(a) => (a.user, a.total),
                None => return,
            },
            PurgeScope::Shuffle(key) => {
                let Some(a) = apps.get_mut(&key.app) else {
                    return;
                };
                let Some(gone) = a.shuffles.remove(&key.shuffle) else {
                    return;
                };
                a.total.sub(&gone);
                (a.user.clone(), gone)
            }
            PurgeScope::Partition(_) => return,
        };
        if let Some(u) = users.get_mut(&user) {
            u.sub(&gone);
            if u.is_empty() {
                users.remove(&user);
            }
        }
    }

    /// What `app` holds, and its user.
    pub fn app(&self, app: &AppId) -> (Held, String) {
        let s = self.state.lock();
        s.apps
            .get(app)
            .map(|a| (a.total, a.user.clone()))
            .unwrap_or_default()
    }

    /// What all apps of `user` hold together.
    pub fn user(&self, user: &str) -> Held {
        self.state
            .lock()
            .users
            .get(user)
            .copied()
            .unwrap_or_default()
    }

    /// Every app's usage, largest local share first (the dashboard's and the metrics' order).
    pub fn apps(&self) -> Vec<AppUsage> {
        let s = self.state.lock();
        let mut out: Vec<AppUsage> = s
            .apps
            .iter()
            .map(|(app, a)| AppUsage {
                app: app.clone(),
                user: a.user.clone(),
                held: a.total,
            })
            .collect();
        out.sort_by(|a, b| {
            let size = |u: &AppUsage| u.held.local_bytes + u.held.remote_bytes;
            size(b).cmp(&size(a)).then_with(|| a.app.cmp(&b.app))
        });
        out
    }

    /// Every user's usage, largest first.
    pub fn users(&self) -> Vec<(String, Held)> {
        let s = self.state.lock();
        let mut out: Vec<(String, Held)> = s.users.iter().map(|(u, h)| (u.clone(), *h)).collect();
        out.sort_by(|a, b| {
            let size = |h: &Held| h.local_bytes + h.remote_bytes;
            size(&b.1).cmp(&size(&a.1)).then_with(|| a.0.cmp(&b.0))
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::PartitionRange;

    fn part(app: &AppId, shuffle: i32) -> PartitionKey {
        PartitionKey::new(app.clone(), shuffle, PartitionRange::new(0, 0).unwrap())
    }

    #[test]
    fn totals_follow_writes_and_purges_per_app_and_user() {
        let u = Usage::default();
        let (a, b, c) = (
            AppId::parse("app-a").unwrap(),
            AppId::parse("app-b").unwrap(),
            AppId::parse("app-c").unwrap(),
        );
        u.register(&a, "alice");
        u.register(&b, "alice");
        u.register(&c, "bob");
        // A second registration with another user does not move the app.
        u.register(&a, "mallory");
        u.written(&part(&a, 0), TierKind::LocalFile, 100);
        u.written(&part(&a, 1), TierKind::LocalFile, 50);
        u.written(&part(&a, 1), TierKind::Hdfs, 7);
        u.written(&part(&b, 0), TierKind::LocalFile, 30);
        u.written(&part(&c, 0), TierKind::Hdfs, 9);
        assert_eq!(u.app(&a).0.local_bytes, 150);
        assert_eq!(u.app(&a).0.local_writes, 2);
        assert_eq!(u.app(&a).0.remote_bytes, 7);
        assert_eq!(u.app(&a).1, "alice");
        assert_eq!(u.user("alice").local_bytes, 180);
        assert_eq!(u.user("bob").remote_writes, 1);
        assert_eq!(u.user("mallory"), Held::default());

        u.purged(&PurgeScope::shuffle(a.clone(), 1));
        assert_eq!(u.app(&a).0.local_bytes, 100);
        assert_eq!(u.app(&a).0.remote_bytes, 0);
        assert_eq!(u.user("alice").local_bytes, 130);
        // A partition cleanup takes nothing: its shuffle's purge did.
        u.purged(&PurgeScope::Partition(part(&a, 0)));
        assert_eq!(u.app(&a).0.local_bytes, 100);
        u.purged(&PurgeScope::App(a.clone()));
        assert_eq!(u.app(&a).0, Held::default());
        assert_eq!(u.user("alice").local_bytes, 30);
        u.purged(&PurgeScope::App(b.clone()));
        assert!(u.users().iter().all(|(user, _)| user != "alice"));
        assert_eq!(u.apps().len(), 1);
    }
}
