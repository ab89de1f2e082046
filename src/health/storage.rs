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
