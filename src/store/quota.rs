//! Per-tenant quotas on the file tiers: what one app, and all apps of one user together, may
//! hold on this server's local disks and on the remote tier.
//!
//! A remote shuffle service is shared, so its worst day is one tenant's runaway shuffle
//! filling the disks under every other tenant's jobs. The quota keeps that runaway the
//! runaway's problem: once an app (or its user) holds its share, its next `requireBuffer` and
//! `sendShuffleData` are refused with a status the released clients treat as final, naming
//! the quota, the usage and the key to raise, so its tasks fail in seconds instead of
//! retrying until their timeout. Other apps go on.
//!
//! Where the deployment has a remote tier and the app registered a remote path, an app over
//! its local-disk quota is not refused: its spills go to the remote tier instead (the router
//! asks [`Quotas::local_full`]), and only its remote quota can stop it.
//!
//! What an app has already written stays readable until it ends: a quota refuses new data,
//! never deletes. The quota is checked against what the app holds on the file tiers; what it
//! holds in memory when it crosses the line is still written (nothing acknowledged is lost),
//! so an app can end up above its quota by at most what it had in memory at that moment.
//!
//! The limits are read on every check, so a reload (`[quota]` keys are reconfigurable) takes
//! effect with the next request.

use std::sync::Arc;

use crate::error::Error;
use crate::ids::AppId;
use crate::store::causes::{CauseLog, Place};
use crate::store::usage::{Held, Usage};

/// The configured limits, as the running config has them (see `config::QuotaConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaLimits {
    /// Share of the local disks' capacity one app may hold (1.0: no share limit).
    pub app_local_share: f64,
    /// Bytes one app may hold on the local disks (`None`: no absolute limit).
    pub app_local_bytes: Option<u64>,
    /// Share of the local disks' capacity all apps of one user may hold together.
    pub user_local_share: f64,
    /// Bytes all apps of one user may hold on the local disks.
    pub user_local_bytes: Option<u64>,
    /// Bytes one app may hold on the remote tier.
    pub app_remote_bytes: Option<u64>,
    /// Bytes all apps of one user may hold on the remote tier.
    pub user_remote_bytes: Option<u64>,
}

impl QuotaLimits {
    /// The limits `[quota]` sets.
    pub fn from_config(q: &crate::config::QuotaConfig) -> Self {
        let bytes = |b: Option<crate::config::ByteSize>| b.map(|b| b.as_u64());
        QuotaLimits {
            app_local_share: q.app_local_disk_share,
            app_local_bytes: bytes(q.app_local_disk_bytes),
            user_local_share: q.user_local_disk_share,
            user_local_bytes: bytes(q.user_local_disk_bytes),
            app_remote_bytes: bytes(q.app_remote_bytes),
            user_remote_bytes: bytes(q.user_remote_bytes),
        }
    }

    /// No quota at all.
    pub fn unlimited() -> Self {
        QuotaLimits {
            app_local_share: 1.0,
            app_local_bytes: None,
            user_local_share: 1.0,
            user_local_bytes: None,
            app_remote_bytes: None,
            user_remote_bytes: None,
        }
    }
}

/// Which limit an app ran into: whose (`by_user`: the sum over the user's apps) and where
/// (`remote`: the remote tier, else the local disks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Which {
    by_user: bool,
    remote: bool,
}

impl Which {
    /// The keys that set the limit, Spillway's and then the server.conf spelling.
    fn keys(self) -> String {
        let t = if self.by_user { "user" } else { "app" };
        if self.remote {
            format!("quota.{t}_remote_bytes (server.conf: rss.server.quota.{t}.remote.size)")
        } else {
            format!(
                "quota.{t}_local_disk_bytes or quota.{t}_local_disk_share (server.conf: \
                 rss.server.quota.{t}.localfile.size or rss.server.quota.{t}.localfile.ratio)"
            )
        }
    }
}

/// See the module doc.
pub struct Quotas {
    limits: parking_lot::RwLock<QuotaLimits>,
    /// What the local disks may hold of this server's files in all (the sum of each disk's
    /// service capacity at start-up): what the shares are shares of.
    local_capacity: u64,
    usage: Arc<Usage>,
    /// One WARN per app and limit.
    causes: CauseLog,
    /// Requests refused at a quota since start.
    refused: std::sync::atomic::AtomicU64,
}

impl Quotas {
    /// Quotas over `usage`, with shares of `local_capacity` bytes.
    pub fn new(limits: QuotaLimits, local_capacity: u64, usage: Arc<Usage>) -> Self {
        Quotas {
            limits: parking_lot::RwLock::new(limits),
            local_capacity,
            usage,
            causes: CauseLog::default(),
            refused: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Requests refused at a quota since start.
    pub fn refused(&self) -> u64 {
        self.refused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The usage the quotas read.
    pub fn usage(&self) -> &Arc<Usage> {
        &self.usage
    }

    /// New limits from a reload; the next check uses them.
    pub fn set_limits(&self, limits: QuotaLimits) {
        *self.limits.write() = limits;
    }

    /// The limits in force.
    pub fn limits(&self) -> QuotaLimits {
        self.limits.read().clone()
    }

    /// The local-disk limits of one app and of one user, in bytes (`None`: none).
    pub fn local_limits(&self) -> (Option<u64>, Option<u64>) {
        let l = self.limits.read();
        (
            self.limit(l.app_local_bytes, l.app_local_share),
            self.limit(l.user_local_bytes, l.user_local_share),
        )
    }

    /// The smaller of an absolute limit and a share of the local capacity; a share of 1.0 or
    /// more is no limit (the disks' own watermarks stop the server before that), and so is any
    /// share on a server without local disks (`MEMORY_HDFS`: nothing of an app is local).
    fn limit(&self, bytes: Option<u64>, share: f64) -> Option<u64> {
        let by_share = (share < 1.0 && self.local_capacity > 0)
            .then_some((self.local_capacity as f64 * share) as u64);
        match (bytes, by_share) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// True when `app` (or its user) holds its local-disk share: its spills go to the remote
    /// tier when it has one.
    pub fn local_full(&self, app: &AppId) -> bool {
        let (held, user) = self.usage.app(app);
        self.over(false, &held, &user).is_some()
    }

    /// The limit the app or its user has reached on the local disks or (`remote`) the remote
    /// tier, with the bytes held against it.
    fn over(&self, remote: bool, held: &Held, user: &str) -> Option<(Which, u64, u64)> {
        let pick = |h: &Held| {
            if remote {
                h.remote_bytes
            } else {
                h.local_bytes
            }
        };
        let (app_limit, user_limit) = if remote {
            let l = self.limits.read();
            (l.app_remote_bytes, l.user_remote_bytes)
        } else {
            self.local_limits()
        };
        let by_app = pick(held);
        if let Some(limit) = app_limit.filter(|l| by_app >= *l) {
            let which = Which {
                by_user: false,
                remote,
            };
            return Some((which, by_app, limit));
        }
        let by_user = pick(&self.usage.user(user));
        let which = Which {
            by_user: true,
            remote,
        };
        user_limit
            .filter(|l| by_user >= *l)
            .map(|limit| (which, by_user, limit))
    }

    /// Whether `app` may write more: `Err` with the final refusal naming the limit when it
    /// holds its quota. `remote` says whether its spills can overflow to a remote tier, in
    /// which case a full local-disk quota does not refuse it.
    pub fn check(&self, app: &AppId, remote: bool) -> Result<(), Error> {
        let (held, user) = self.usage.app(app);
        let over = match self.over(false, &held, &user) {
            Some(_) if remote => None,
            over => over,
        }
        .or_else(|| self.over(true, &held, &user));
        let Some((which, used, limit)) = over else {
            return Ok(());
        };
        let (whom, tenant) = match which.by_user {
            false => (format!("app {app}"), "app"),
            true => (format!("user {user:?} (of app {app})"), "user"),
        };
        let (storage, place) = match which.remote {
            false => ("local-disk", Place::LocalQuota),
            true => ("remote-storage", Place::RemoteQuota),
        };
        let reason = format!(
            "{whom} is over its {tenant} {storage} quota on this server: it holds {}, the \
             quota is {}; its written blocks stay readable until the app ends. Raise {}, or \
             write less shuffle data",
            show(used),
            show(limit),
            which.keys(),
        );
        self.refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.causes.first(app, place, &reason) {
            tracing::warn!(app_id = %app, user = %user, used, limit, "{reason}");
        }
        Err(Error::QuotaExceeded { reason })
    }

    /// The app is gone: its logged causes with it.
    pub fn forget_app(&self, app: &AppId) {
        self.causes.forget_app(app);
    }
}

/// Bytes as an operator reads them (`1.5 GiB`).
fn show(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{PartitionKey, PartitionRange};
    use crate::store::TierKind;

    /// Quotas over `capacity` bytes of local disk, with two apps registered for their users.
    fn quotas(limits: QuotaLimits, capacity: u64, apps: [(&str, &str); 2]) -> (Quotas, [AppId; 2]) {
        let q = Quotas::new(limits, capacity, Arc::default());
        let ids = apps.map(|(app, user)| {
            let id = AppId::parse(app).unwrap();
            q.usage().register(&id, user);
            id
        });
        (q, ids)
    }

    fn part(app: &AppId) -> PartitionKey {
        PartitionKey::new(app.clone(), 0, PartitionRange::new(0, 0).unwrap())
    }

    #[test]
    fn an_app_over_its_share_is_refused_naming_the_quota_and_others_go_on() {
        let limits = QuotaLimits {
            app_local_share: 0.5,
            user_local_share: 0.8,
            ..QuotaLimits::unlimited()
        };
        let (q, [a, b]) = quotas(limits, 1000, [("app-a", "alice"), ("app-b", "bob")]);
        let usage = q.usage();
        usage.written(&part(&a), TierKind::LocalFile, 499);
        assert!(q.check(&a, false).is_ok(), "under its share");
        usage.written(&part(&a), TierKind::LocalFile, 1);
        let e = q.check(&a, false).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("app app-a is over its app local-disk quota"),
            "{msg}"
        );
        assert!(msg.contains("holds 500 B, the quota is 500 B"), "{msg}");
        assert!(
            msg.contains("rss.server.quota.app.localfile.ratio"),
            "{msg}"
        );
        assert!(!e.is_retryable());
        // With a remote tier to overflow to it is not refused, but its spills go there.
        assert!(q.check(&a, true).is_ok());
        assert!(q.local_full(&a));
        assert!(q.check(&b, false).is_ok());
        assert!(!q.local_full(&b));
        // Raised by a reload: admitted again at once.
        q.set_limits(QuotaLimits::unlimited());
        assert!(q.check(&a, false).is_ok());
    }

    #[test]
    fn a_user_is_limited_over_all_its_apps_and_remote_bytes_have_their_own_quota() {
        let limits = QuotaLimits {
            user_local_bytes: Some(300),
            app_remote_bytes: Some(100),
            ..QuotaLimits::unlimited()
        };
        let (q, [a1, a2]) = quotas(limits, 1 << 30, [("app-1", "carol"), ("app-2", "carol")]);
        let usage = q.usage();
        usage.written(&part(&a1), TierKind::LocalFile, 200);
        usage.written(&part(&a2), TierKind::LocalFile, 100);
        let msg = q.check(&a2, false).unwrap_err().to_string();
        assert!(msg.contains("user \"carol\" (of app app-2)"), "{msg}");
        assert!(msg.contains("quota.user_local_disk_bytes"), "{msg}");
        usage.written(&part(&a1), TierKind::Hdfs, 100);
        let msg = q.check(&a1, true).unwrap_err().to_string();
        assert!(msg.contains("remote-storage quota"), "{msg}");
        assert!(msg.contains("rss.server.quota.app.remote.size"), "{msg}");
    }

    /// Found by CI: with no local disks (capacity 0) the default shares made a 0-byte quota,
    /// and every `MEMORY_HDFS` app was refused before it wrote anything.
    #[test]
    fn shares_limit_nothing_without_local_disks() {
        let (q, [a, _]) = quotas(
            QuotaLimits::from_config(&crate::config::QuotaConfig::default()),
            0,
            [("app-hdfs", "alice"), ("app-other", "bob")],
        );
        assert_eq!(q.local_limits(), (None, None));
        assert!(q.check(&a, false).is_ok());
        q.usage().written(&part(&a), TierKind::Hdfs, 1 << 30);
        assert!(q.check(&a, false).is_ok(), "no remote quota by default");
    }

    #[test]
    fn sizes_read_as_an_operator_writes_them() {
        assert_eq!(show(512), "512 B");
        assert_eq!(show(1536), "1.5 KiB");
        assert_eq!(show(160 << 20), "160.0 MiB");
    }
}
