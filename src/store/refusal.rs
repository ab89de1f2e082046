//! Remote storage that refuses an app for good: the registration check, the apps it refused,
//! and logging a cause once.
//!
//! A remote tier can fail in two ways. Throttling, 5xx answers, timeouts and an unreachable
//! store pass: the spiller retries and the router falls back, as before. A wrong key, a
//! bucket that does not exist, a path the server's user may not write, or a name service
//! that does not resolve never pass: every retry gets the same answer while the app's blocks
//! fill memory and its writers wait in back-pressure. This module holds what the router needs
//! to tell the two apart and to act on the second at once:
//!
//! - [`Checks`]: the cheap probe made when an app registers a remote path, cached per path,
//!   user and settings (a hash: no secret is kept) so that thousands of registrations of one
//!   job cost one call to the store, and run once when many arrive together.
//! - [`Refusals`]: apps whose remote storage refused for good, with the cause. With no local
//!   tier to fall back to, the app's next `requireBuffer` and `sendShuffleData` fail with it.
//! - [`CauseLog`]: one WARN per app and cause, then a count, for every retry loop on the
//!   spill path (a store refusing every flush once logged 1,531 lines in four minutes).

use std::collections::HashMap;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::error::Error;
use crate::ids::AppId;
use crate::store::RemoteStorage;

/// How long a check's answer is reused. A refusal is asked again sooner, so that a fixed
/// bucket policy or a created bucket is seen within a minute without a restart; a corrected
/// key is a new cache key and is checked at once.
const OK_FOR: Duration = Duration::from_secs(600);
const REFUSED_FOR: Duration = Duration::from_secs(30);
/// A transient answer is kept briefly, so a burst of registrations does not hammer a store
/// that is down, and the next burst finds out whether it is back.
const TRANSIENT_FOR: Duration = Duration::from_secs(5);

/// What a probe of a remote root found.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The server can create and delete a file there with the app's settings.
    Usable,
    /// Refused for a reason no retry changes: an [`Error::StorageRefused`]'s fields.
    Refused(Arc<Refusal>),
    /// Failed in a way that may pass (throttling, 5xx, timeout, unreachable).
    Transient(String),
}

/// The parts of an [`Error::StorageRefused`], kept so the error can be rebuilt for every
/// request it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The path the app registered.
    pub path: String,
    /// The store's answer.
    pub answer: String,
    /// The setting to correct.
    pub fix: String,
}

impl Refusal {
    /// The error to answer with.
    pub fn error(&self) -> Error {
        Error::StorageRefused {
            path: self.path.clone(),
            answer: self.answer.clone(),
            fix: self.fix.clone(),
        }
    }

    /// The refusal an error carries, if it is one.
    pub fn of(e: &Error) -> Option<Refusal> {
        match e {
            Error::StorageRefused { path, answer, fix } => Some(Refusal {
                path: path.clone(),
                answer: answer.clone(),
                fix: fix.clone(),
            }),
            _ => None,
        }
    }
}

/// The cache key of a check: the path, the user, and a hash of the settings the app sent
/// (the secret's value is hashed, never stored).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    path: String,
    user: String,
    conf: u64,
}

impl Key {
    fn new(user: &str, remote: &RemoteStorage) -> Self {
        let mut items: Vec<&(String, String)> = remote.conf.iter().collect();
        items.sort();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        items.hash(&mut h);
        Key {
            path: remote.path.clone(),
            user: user.to_owned(),
            conf: h.finish(),
        }
    }
}

struct Cached {
    cell: Arc<OnceCell<(Outcome, Instant)>>,
}

/// See the module doc.
#[derive(Default)]
pub struct Checks {
    cache: parking_lot::Mutex<HashMap<Key, Cached>>,
}

impl Checks {
    /// The outcome for `remote` as `user`: a cached one while fresh, else `probe`'s. Callers
    /// that arrive while a probe of the same key runs wait for it instead of probing again.
    pub async fn check<F>(&self, user: &str, remote: &RemoteStorage, probe: F) -> Outcome
    where
        F: Future<Output = Outcome>,
    {
        let key = Key::new(user, remote);
        let cell = {
            let mut cache = self.cache.lock();
            let now = Instant::now();
            // Forget stale answers (bounded: one entry per path, user and settings in use).
            cache.retain(|_, c| {
                c.cell
                    .get()
                    .is_none_or(|(outcome, at)| now.duration_since(*at) < ttl(outcome))
            });
            Arc::clone(
                &cache
                    .entry(key)
                    .or_insert_with(|| Cached {
                        cell: Arc::new(OnceCell::new()),
                    })
                    .cell,
            )
        };
        let (outcome, _) = cell
            .get_or_init(|| async { (probe.await, Instant::now()) })
            .await;
        outcome.clone()
    }

    /// Entries cached now (a test and the docs' cost claim read it).
    pub fn cached(&self) -> usize {
        self.cache.lock().len()
    }
}

fn ttl(outcome: &Outcome) -> Duration {
    match outcome {
        Outcome::Usable => OK_FOR,
        Outcome::Refused(_) => REFUSED_FOR,
        Outcome::Transient(_) => TRANSIENT_FOR,
    }
}

/// An app whose remote storage refused for good.
#[derive(Clone, Debug)]
pub struct Refused {
    /// Why.
    pub refusal: Arc<Refusal>,
    /// The store type has local disks: the app's spills go there instead, and it does not
    /// fail.
    pub fallback: bool,
}

/// See the module doc.
#[derive(Default)]
pub struct Refusals {
    apps: parking_lot::RwLock<HashMap<AppId, Refused>>,
}

impl Refusals {
    /// Marks `app` refused (a registered app; its purge forgets it).
    pub fn mark(&self, app: &AppId, refused: Refused) {
        self.apps.write().insert(app.clone(), refused);
    }

    /// Forgets `app` (its storage passed a new check, or it is gone).
    pub fn clear(&self, app: &AppId) {
        if !self.apps.read().contains_key(app) {
            return;
        }
        self.apps.write().remove(app);
    }

    /// `app`'s refusal, if it has one.
    pub fn get(&self, app: &AppId) -> Option<Refused> {
        let apps = self.apps.read();
        if apps.is_empty() {
            return None;
        }
        apps.get(app).cloned()
    }
}

/// Entries of a [`CauseLog`] past which old ones are pruned, and their age then.
const PRUNE_AT: usize = 10_000;
const PRUNE_AFTER: Duration = Duration::from_secs(3600);

/// The cause logged last at a place (its [`cause_key`]) and its count.
type Logged = (String, Seen);

/// One cause as counted by [`CauseLog`].
struct Seen {
    count: u64,
    first: Instant,
}

/// One WARN per app, place and cause; later occurrences are counted, and the count is logged
/// when the cause passes (the place succeeds again) or the app is gone.
#[derive(Default)]
pub struct CauseLog {
    seen: parking_lot::Mutex<HashMap<(AppId, &'static str), Logged>>,
}

impl CauseLog {
    /// Counts `cause` at `place` for `app`; true when the caller should log it: the first
    /// time, or when the cause differs from the one logged last at that place.
    pub fn first(&self, app: &AppId, place: &'static str, cause: &str) -> bool {
        let key = cause_key(cause);
        let mut seen = self.seen.lock();
        if seen.len() >= PRUNE_AT {
            // Apps refused at registration never register, so nothing forgets them: past a
            // size no healthy server reaches, causes first seen an hour ago go.
            seen.retain(|_, (_, s)| s.first.elapsed() < PRUNE_AFTER);
        }
        match seen.get_mut(&(app.clone(), place)) {
            Some((logged, s)) if *logged == key => {
                s.count += 1;
                false
            }
            Some(entry) => {
                let (old, s) = std::mem::replace(
                    entry,
                    (
                        key,
                        Seen {
                            count: 1,
                            first: Instant::now(),
                        },
                    ),
                );
                summarize(app, place, &old, &s);
                true
            }
            None => {
                seen.insert(
                    (app.clone(), place),
                    (
                        key,
                        Seen {
                            count: 1,
                            first: Instant::now(),
                        },
                    ),
                );
                true
            }
        }
    }

    /// The place works again for `app`: logs how often the cause was seen, if more than once.
    pub fn passed(&self, app: &AppId, place: &'static str) {
        let mut seen = self.seen.lock();
        if seen.is_empty() {
            return;
        }
        if let Some((cause, s)) = seen.remove(&(app.clone(), place)) {
            drop(seen);
            summarize(app, place, &cause, &s);
        }
    }

    /// The app is gone: logs every count it left.
    pub fn forget_app(&self, app: &AppId) {
        let gone: Vec<(&'static str, String, Seen)> = {
            let mut seen = self.seen.lock();
            let keys: Vec<_> = seen.keys().filter(|(a, _)| a == app).cloned().collect();
            keys.into_iter()
                .filter_map(|k| seen.remove(&k).map(|(c, s)| (k.1, c, s)))
                .collect()
        };
        for (place, cause, s) in gone {
            summarize(app, place, &cause, &s);
        }
    }
}

fn summarize(app: &AppId, place: &str, cause: &str, s: &Seen) {
    if s.count > 1 {
        tracing::info!(app_id = %app, place, times = s.count, over_secs = s.first.elapsed().as_secs(),
            cause, "a cause logged once above repeated");
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
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn remote(path: &str, secret: &str) -> RemoteStorage {
        RemoteStorage {
            path: path.to_owned(),
            conf: vec![("fs.s3a.secret.key".to_owned(), secret.to_owned())],
        }
    }

    #[tokio::test]
    async fn many_registrations_cost_one_probe_per_path_user_and_settings() {
        let checks = Arc::new(Checks::default());
        let probes = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..200 {
            let (checks, probes) = (Arc::clone(&checks), Arc::clone(&probes));
            tasks.push(tokio::spawn(async move {
                let secret = if i % 2 == 0 { "right" } else { "wrong" };
                checks
                    .check("u", &remote("s3a://b/rss", secret), async {
                        probes.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Outcome::Usable
                    })
                    .await
            }));
        }
        for t in tasks {
            assert!(matches!(t.await.unwrap(), Outcome::Usable));
        }
        assert_eq!(probes.load(Ordering::SeqCst), 2, "one probe per settings");
        assert_eq!(checks.cached(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_is_asked_again_after_its_expiry() {
        let checks = Checks::default();
        let r = remote("hdfs://nn/rss", "");
        let refused = || async {
            Outcome::Refused(Arc::new(Refusal {
                path: "hdfs://nn/rss".into(),
                answer: "denied".into(),
                fix: "grant".into(),
            }))
        };
        assert!(matches!(
            checks.check("u", &r, refused()).await,
            Outcome::Refused(_)
        ));
        // Cached: the probe is not run.
        assert!(matches!(
            checks.check("u", &r, async { Outcome::Usable }).await,
            Outcome::Refused(_)
        ));
        tokio::time::advance(REFUSED_FOR + Duration::from_secs(1)).await;
        assert!(matches!(
            checks.check("u", &r, async { Outcome::Usable }).await,
            Outcome::Usable
        ));
    }

    #[test]
    fn a_cause_is_logged_once_per_app_and_place_until_it_passes_or_changes() {
        let log = CauseLog::default();
        let a = AppId::parse("app_1").unwrap();
        let b = AppId::parse("app_2").unwrap();
        assert!(log.first(&a, "spill", "put s3a://b/a/0/0-0/x_1.data: 403 Forbidden"));
        assert!(!log.first(&a, "spill", "put s3a://b/a/0/1-1/x_2.data: 403 Forbidden"));
        assert!(log.first(&b, "spill", "put s3a://b/b/0/0-0/x_3.data: 403 Forbidden"));
        assert!(log.first(&a, "spill", "put s3a://b/a/0/0-0/x_4.data: timed out"));
        log.passed(&a, "spill");
        assert!(log.first(&a, "spill", "put s3a://b/a/0/0-0/x_5.data: timed out"));
        log.forget_app(&a);
        assert!(log.first(&a, "spill", "put s3a://b/a/0/0-0/x_5.data: timed out"));
    }
}
