//! The storage checker (Java `LocalStorageChecker`): each pass probes every data path and
//! calls the server unhealthy when too small a share of them is fit to take shuffle data.

use std::sync::Arc;
use std::time::Duration;

use crate::store::localfile::{DiskReport, DiskStatus, LocalFileTier};

/// Settings of the storage checker (`[health]`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StorageCheckOptions {
    /// A data path whose file system is this full (ratio) or fuller stops counting as
    /// healthy (`rss.server.health.max.storage.usage.percentage`).
    pub max_usage: f64,
    /// An unhealthy data path counts as healthy again at or below this usage
    /// (`rss.server.health.storage.recovery.usage.percentage`).
    pub recovery_usage: f64,
    /// The server is healthy while at least this share of its data paths is healthy
    /// (`rss.server.health.min.storage.percentage`).
    pub min_healthy_share: f64,
    /// A probe that takes longer leaves its path out of the healthy count
    /// (`rss.server.health.checker.localStorageExecutionTimeoutMS`).
    pub probe_timeout: Duration,
    /// One failed probe makes the server unhealthy
    /// (`rss.server.health.markUnhealthyOnceStorageCorruption`).
    pub unhealthy_on_failed_disk: bool,
}

/// Per-path state kept between passes: Java keeps it in `LocalStorageChecker.StorageInfo`.
pub(crate) struct StorageChecker {
    tier: Arc<LocalFileTier>,
    opts: StorageCheckOptions,
    /// Whether each data path (in `disk_reports` order) was within its usage bounds at the
    /// last pass; the hysteresis memory.
    space_ok: Vec<bool>,
    /// The verdict of the last pass, to log only transitions.
    healthy: bool,
}

impl StorageChecker {
    pub(crate) fn new(tier: Arc<LocalFileTier>, opts: StorageCheckOptions) -> Self {
        let disks = tier.disk_reports().len();
        StorageChecker {
            tier,
            opts,
            space_ok: vec![true; disks],
            healthy: true,
        }
    }

    /// One pass: fresh probes of every path (which also refresh the tier's write flags),
    /// then the healthy share against the minimum. Returns the verdict and, when unhealthy,
    /// why.
    pub(crate) async fn check(&mut self) -> Result<(), String> {
        self.tier.check_disks_within(self.opts.probe_timeout).await;
        let reports = self.tier.disk_reports();
        let verdict = self.judge(&reports);
        let healthy = verdict.is_ok();
        if healthy != self.healthy {
            self.healthy = healthy;
            match &verdict {
                Ok(()) => tracing::info!("storage checker: enough data paths are healthy again"),
                Err(why) => {
                    tracing::warn!(reason = %why, "storage checker: too few healthy data paths")
                }
            }
        }
        verdict
    }

    /// Java's rule, pass by pass: a path whose probe failed is not counted (and its usage
    /// flag is left as it was); the others are counted while their file system's usage is
    /// below `max_usage`, or, once over it, until it falls to `recovery_usage`.
    fn judge(&mut self, reports: &[DiskReport]) -> Result<(), String> {
        if reports.is_empty() {
            return Err("no data path is left".to_owned());
        }
        self.space_ok.resize(reports.len(), true);
        let mut healthy = 0usize;
        let mut bad = Vec::new();
        for (r, ok) in reports.iter().zip(self.space_ok.iter_mut()) {
            if r.status == DiskStatus::Unhealthy {
                bad.push(format!("{}: probe failed", r.path.display()));
                continue;
            }
            *ok = space_verdict(*ok, r.capacity_bytes, r.available_bytes, &self.opts);
            if *ok {
                healthy += 1;
            } else {
                bad.push(format!(
                    "{}: file system {:.1}% used",
                    r.path.display(),
                    used_percent(r.capacity_bytes, r.available_bytes)
                ));
            }
        }
        let failed_probe = reports.iter().any(|r| r.status == DiskStatus::Unhealthy);
        if self.opts.unhealthy_on_failed_disk && failed_probe {
            return Err(format!(
                "a data path failed its probe (health.unhealthy_on_failed_disk): {}",
                bad.join("; ")
            ));
        }
        // Both sides are correctly rounded quotients, so equal fractions compare equal.
        if healthy as f64 / reports.len() as f64 >= self.opts.min_healthy_share {
            Ok(())
        } else {
            Err(format!(
                "{healthy} of {} data paths healthy, need {:.1}%: {}",
                reports.len(),
                self.opts.min_healthy_share * 100.0,
                bad.join("; ")
            ))
        }
    }
}

fn used_percent(total: u64, available: u64) -> f64 {
    if total == 0 {
        return 100.0;
    }
    total.saturating_sub(available) as f64 * 100.0 / total as f64
}

/// The usage hysteresis of one path: healthy until usage reaches `max_usage`, then
/// unhealthy until it falls to `recovery_usage` (both bounds inclusive, as Java compares).
/// A file system that reports no size is unhealthy.
pub(crate) fn space_verdict(
    was_ok: bool,
    total: u64,
    available: u64,
    opts: &StorageCheckOptions,
) -> bool {
    if total == 0 {
        return false;
    }
    let used = used_percent(total, available);
    if was_ok {
        used < opts.max_usage * 100.0
    } else {
        used <= opts.recovery_usage * 100.0
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const OPTS: StorageCheckOptions = StorageCheckOptions {
        max_usage: 0.9,
        recovery_usage: 0.8,
        min_healthy_share: 0.8,
        probe_timeout: Duration::from_secs(1),
        unhealthy_on_failed_disk: false,
    };

    #[test]
    fn usage_has_hysteresis_with_inclusive_bounds() {
        let at = |was, used: u64| space_verdict(was, 100, 100 - used, &OPTS);
        assert!(at(true, 89));
        assert!(!at(true, 90), "Java: usage >= max is unhealthy");
        assert!(!at(false, 81));
        assert!(at(false, 80), "Java: usage <= recovery is healthy again");
        assert!(
            at(true, 85),
            "between the bounds a healthy path stays healthy"
        );
        assert!(!space_verdict(true, 0, 0, &OPTS), "no size, not healthy");
    }

    fn report(i: i32, status: DiskStatus, used_pct: u64) -> DiskReport {
        DiskReport {
            index: i,
            path: PathBuf::from(format!("/d{i}")),
            capacity_bytes: 100,
            service_capacity_bytes: 90,
            available_bytes: 100 - used_pct,
            written_bytes: 0,
            status,
            timed_out: false,
            partitions_moved_off: 0,
        }
    }

    #[tokio::test]
    async fn the_share_of_healthy_paths_decides() {
        let dir = tempfile::tempdir().unwrap();
        let tier = LocalFileTier::new(crate::store::localfile::LocalFileOptions {
            max_concurrency_per_disk: 1,
            ..crate::store::localfile::LocalFileOptions::testing(
                vec![dir.path().join("d0")],
                "127.0.0.1-1",
            )
        })
        .unwrap();
        let mut c = StorageChecker::new(tier, OPTS);
        use DiskStatus::*;
        // 4 of 5 healthy is exactly 80 %: healthy (Java compares with >=).
        let mut five: Vec<DiskReport> = (0..5).map(|i| report(i, Normal, 10)).collect();
        five[4] = report(4, Unhealthy, 10);
        assert_eq!(c.judge(&five), Ok(()));
        // An overused path (write watermark) still counts: only its file system's usage does.
        five[3] = report(3, Overused, 10);
        assert_eq!(c.judge(&five), Ok(()));
        five[2] = report(2, Normal, 95);
        let err = c.judge(&five).unwrap_err();
        assert!(err.starts_with("3 of 5 data paths healthy"), "{err}");
        // Back to 85 %: between the bounds, /d2 stays unhealthy.
        five[2] = report(2, Normal, 85);
        assert!(c.judge(&five).is_err());
        five[2] = report(2, Normal, 80);
        assert_eq!(c.judge(&five), Ok(()));
        assert!(c.judge(&[]).is_err(), "no path at all");
        // markUnhealthyOnceStorageCorruption: the one failed probe (/d4) is enough.
        c.opts.unhealthy_on_failed_disk = true;
        let err = c.judge(&five).unwrap_err();
        assert!(err.contains("/d4: probe failed"), "{err}");
        five[4] = report(4, Normal, 10);
        assert_eq!(c.judge(&five), Ok(()));
    }
}
