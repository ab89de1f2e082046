//! Admission: which apps the store takes writes from. Today that is the registration check of
//! an app's remote storage and the apps that storage refused for good; the app layer asks
//! [`Admission::failed`] in one place before it takes an app's writes.
//!
//! A remote tier can fail in two ways. Throttling, 5xx answers, timeouts and an unreachable
//! store pass: the spiller retries and the router falls back, as before. A wrong key, a
//! bucket that does not exist, a path the server's user may not write, or a name service
//! that does not resolve never pass: every retry gets the same answer while the app's blocks
//! fill memory and its writers wait in back-pressure. This module tells the two apart and
//! acts on the second at once:
//!
//! - [`Checks`]: the cheap probe made when an app registers a remote path, cached per path,
//!   user and settings (a hash: no secret is kept) so that thousands of registrations of one
//!   job cost one call to the store, and run once when many arrive together.
//! - [`Refusals`]: apps whose remote storage refused for good, with the cause. With no local
//!   tier to fall back to, the app's next `requireBuffer` and `sendShuffleData` fail with it,
//!   and the router's append returns [`Error::StorageRefused`], which the spiller takes as
//!   final.

use std::collections::HashMap;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::config::StoreType;
use crate::error::{Error, Result};
use crate::ids::AppId;
use crate::store::causes::{CauseLog, Place};
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
    /// The outcome for `remote` as `user`: a cached one while fresh, else that of the future
    /// `probe` makes (made only then). Callers that arrive while a probe of the same key runs
    /// wait for it instead of probing again.
    pub async fn check<P, F>(&self, user: &str, remote: &RemoteStorage, probe: P) -> Outcome
    where
        P: FnOnce() -> F,
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
            .get_or_init(|| async { (probe().await, Instant::now()) })
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

/// When a refusal was met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// At `registerShuffle`, before the app is recorded.
    Registration,
    /// On a spill of a registered app.
    Flush,
}

impl When {
    fn as_str(self) -> &'static str {
        match self {
            When::Registration => "registration",
            When::Flush => "flush",
        }
    }
}

/// See the module doc.
pub struct Admission {
    checks: Checks,
    refusals: Refusals,
    causes: CauseLog,
    store_type: StoreType,
}

impl Admission {
    /// Admission for a server of `store_type` (its local tier, if any, is what a refused app
    /// falls back to).
    pub fn new(store_type: StoreType) -> Self {
        Admission {
            checks: Checks::default(),
            refusals: Refusals::default(),
            causes: CauseLog::default(),
            store_type,
        }
    }

    fn has_local(&self) -> bool {
        self.store_type.uses_localfile()
    }

    /// An app registered no remote storage path. A store type with no local tier
    /// (`MEMORY_HDFS`, `HDFS`) has nothing to spill it to: it is refused with the cause,
    /// instead of filling memory with blocks no spill can take.
    pub fn no_remote_path(&self, app: &AppId) -> Result<()> {
        if self.has_local() {
            return Ok(());
        }
        let e = Error::Misconfigured {
            reason: format!(
                "this server's storage type {} spills only to remote storage, and app \
                 {app} registered no remote storage path: set spark.rss.remote.storage.path \
                 (or the coordinator's rss.coordinator.remote.storage.path), or run the \
                 server with a storage type that has local disks",
                self.store_type.name()
            ),
        };
        if self.causes.first(app, Place::Refused, "no remote path") {
            tracing::warn!(app_id = %app, error = %e, "registration refused");
        }
        Err(e)
    }

    /// The registration check of `remote` as `user`: `probe`'s outcome, or a cached one
    /// (see [`Checks`]), decided:
    ///
    /// - usable: any earlier refusal of the app is forgotten;
    /// - a transient answer refuses nothing (the spills' retries and fallback handle it, as
    ///   they did before there was a check): one WARN;
    /// - refused for good: see [`Admission::refused`].
    pub async fn check<P, F>(
        &self,
        app: &AppId,
        user: &str,
        remote: &RemoteStorage,
        probe: P,
    ) -> Result<()>
    where
        P: FnOnce() -> F,
        F: Future<Output = Outcome>,
    {
        match self.checks.check(user, remote, probe).await {
            Outcome::Usable => {
                self.refusals.clear(app);
                Ok(())
            }
            Outcome::Transient(why) => {
                if self.causes.first(app, Place::RegistrationCheck, &why) {
                    tracing::warn!(app_id = %app, path = %remote.path, cause = %why,
                        "the remote storage did not answer the registration check; registering anyway, its spills retry");
                }
                Ok(())
            }
            Outcome::Refused(refusal) => self.refused(app, refusal, When::Registration),
        }
    }

    /// Records that `app`'s remote storage refused for good: logged once per app and cause,
    /// and [`Error::StorageRefused`] for the caller when there is no local tier to serve the
    /// app instead. With local disks the app is marked (its spills skip the remote tier) and
    /// carries on. Without, an app refused on a flush is marked (its requests fail with the
    /// cause from now on); one refused at registration is not recorded at all, so nothing of
    /// it is kept.
    pub fn refused(&self, app: &AppId, refusal: Arc<Refusal>, when: When) -> Result<()> {
        let fallback = self.has_local();
        let first = self.causes.first(app, Place::Refused, &refusal.answer);
        if fallback || when == When::Flush {
            self.refusals.mark(
                app,
                Refused {
                    refusal: Arc::clone(&refusal),
                    fallback,
                },
            );
        }
        let when = when.as_str();
        if fallback {
            if first {
                tracing::warn!(app_id = %app, path = %refusal.path, answer = %refusal.answer, fix = %refusal.fix, when,
                    "remote storage refused this app for good; its spills go to local disk");
            }
            Ok(())
        } else {
            if first {
                tracing::warn!(app_id = %app, path = %refusal.path, answer = %refusal.answer, fix = %refusal.fix, when,
                    "remote storage refused this app for good; it fails (the storage type has no local disk to fall back to)");
            }
            Err(refusal.error())
        }
    }

    /// Whether `app`'s remote storage refused it (with or without a fallback): its spills and
    /// purges leave that storage alone.
    pub fn is_refused(&self, app: &AppId) -> bool {
        self.refusals.get(app).is_some()
    }

    /// The cause `app` fails with: its remote storage refused it for good and there is no
    /// local tier to serve it instead. `requireBuffer`, `sendShuffleData` and
    /// `finishShuffle` answer with it.
    pub fn failed(&self, app: &AppId) -> Option<Error> {
        self.refusals
            .get(app)
            .filter(|r| !r.fallback)
            .map(|r| r.refusal.error())
    }

    /// The app's data is being purged: its refusal goes with it.
    pub fn clear(&self, app: &AppId) {
        self.refusals.clear(app);
    }

    /// The app is gone: log the counts of its causes.
    pub fn forget_app(&self, app: &AppId) {
        self.causes.forget_app(app);
    }
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
                    .check("u", &remote("s3a://b/rss", secret), || async {
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
            checks.check("u", &r, refused).await,
            Outcome::Refused(_)
        ));
        // Cached: the probe is not run.
        assert!(matches!(
            checks.check("u", &r, || async { Outcome::Usable }).await,
            Outcome::Refused(_)
        ));
        tokio::time::advance(REFUSED_FOR + Duration::from_secs(1)).await;
        assert!(matches!(
            checks.check("u", &r, || async { Outcome::Usable }).await,
            Outcome::Usable
        ));
    }
}
