//! `FlushStats`: what the spiller has written, per target tier and per location (disk path,
//! HDFS host). Plain atomics updated once per spill event; `/metrics` reads them at scrape
//! time, so nothing here knows about Prometheus.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::ids::AppId;
use crate::store::TierKind;

/// A spill slower than this counts in `total_write_slow` (Java `rss.server.write.slow.threshold`).
pub const SLOW_WRITE: Duration = Duration::from_secs(10);

/// Event-size bucket limits (Java's `event_size_threshold_level1..4`): < 200 kB, < 1 MB,
/// < 10 MB, larger.
pub const SIZE_LEVELS: [u64; 3] = [200 << 10, 1 << 20, 10 << 20];

/// Counters of one target tier kind.
#[derive(Debug, Default)]
pub struct KindStats {
    /// Write attempts (first tries and retries).
    pub attempts: AtomicU64,
    /// Attempts that were retries of a failed one.
    pub retries: AtomicU64,
    /// Events written successfully.
    pub successes: AtomicU64,
    /// Events given up (shutdown while failing).
    pub failures: AtomicU64,
    /// Payload bytes written.
    pub bytes: AtomicU64,
}

/// Flush statistics of one spiller. Cheap to update: a few relaxed atomic adds per event and
/// a short map lookup for the location.
#[derive(Debug, Default)]
pub struct FlushStats {
    kinds: [KindStats; 3],
    /// Payload bytes per (kind, location); the location comes from [`Tier::location`](crate::store::Tier::location).
    by_location: Mutex<HashMap<(TierKind, String), u64>>,
    /// Payload bytes written (all kinds).
    pub write_data: AtomicU64,
    /// Blocks written.
    pub write_blocks: AtomicU64,
    /// Successful events.
    pub write_num: AtomicU64,
    /// Milliseconds spent in successful appends.
    pub write_time_ms: AtomicU64,
    /// Failed append attempts.
    pub write_exceptions: AtomicU64,
    /// Successful appends slower than [`SLOW_WRITE`].
    pub write_slow: AtomicU64,
    /// Events dropped because their partition was purged before they were written.
    pub dropped_events: AtomicU64,
    /// Events never written (shutdown while failing).
    pub failed_events: AtomicU64,
    /// Events by size bucket (see [`SIZE_LEVELS`]).
    pub size_levels: [AtomicU64; 4],
    /// Payload bytes of huge partitions written to HDFS, per host
    /// (`total_hadoop_write_data_for_huge_partition`).
    huge_by_location: Mutex<HashMap<String, u64>>,
    /// What each live app has written (top-N gauges, `flush_file_num`); an app leaves the
    /// map when it is purged ([`FlushStats::forget_app`]).
    per_app: Mutex<HashMap<AppId, AppWritten>>,
    /// Spill events written since start (`total_flush_file_num`).
    pub flush_files: AtomicU64,
}

/// What one app has had written to file tiers since it was registered.
///
/// `events` is Java's per-app "file number": Java bumps it once per flush event written to a
/// storage that already holds a write handler for the app, which it always does by then, so
/// in Java as here it counts written spill events, not distinct files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AppWritten {
    /// Spill events written.
    pub events: u64,
    /// Charged bytes written to local files (`ShuffleTaskInfo.onLocalFileDataSize`).
    pub local_bytes: u64,
    /// Charged bytes written to HDFS (`ShuffleTaskInfo.onHadoopDataSize`).
    pub hdfs_bytes: u64,
}

fn slot(kind: TierKind) -> usize {
    match kind {
        TierKind::Memory => 0,
        TierKind::LocalFile => 1,
        TierKind::Hdfs => 2,
    }
}

impl FlushStats {
    /// The counters of `kind`.
    pub fn kind(&self, kind: TierKind) -> &KindStats {
        &self.kinds[slot(kind)]
    }

    /// One append attempt is starting (`retry`: not the event's first).
    pub fn attempt(&self, kind: TierKind, retry: bool) {
        let k = self.kind(kind);
        k.attempts.fetch_add(1, Ordering::Relaxed);
        if retry {
            k.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An append failed (it will be retried or given up).
    pub fn failed_attempt(&self) {
        self.write_exceptions.fetch_add(1, Ordering::Relaxed);
    }

    /// An event was written.
    pub fn succeeded(
        &self,
        kind: TierKind,
        location: Option<String>,
        bytes: u64,
        blocks: u64,
        took: Duration,
    ) {
        let k = self.kind(kind);
        k.successes.fetch_add(1, Ordering::Relaxed);
        k.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.write_data.fetch_add(bytes, Ordering::Relaxed);
        self.write_blocks.fetch_add(blocks, Ordering::Relaxed);
        self.write_num.fetch_add(1, Ordering::Relaxed);
        self.write_time_ms
            .fetch_add(took.as_millis() as u64, Ordering::Relaxed);
        if took > SLOW_WRITE {
            self.write_slow.fetch_add(1, Ordering::Relaxed);
        }
        let level = SIZE_LEVELS.iter().take_while(|&&l| bytes >= l).count();
        self.size_levels[level].fetch_add(1, Ordering::Relaxed);
        if let Some(location) = location {
            *self.by_location.lock().entry((kind, location)).or_default() += bytes;
        }
    }

    /// The event just [`succeeded`](Self::succeeded) belonged to `app`, weighed `charged`
    /// bytes of write memory and, when it went to HDFS for a huge partition, counts in
    /// `total_hadoop_write_data_for_huge_partition` under `location`.
    pub fn app_written(
        &self,
        app: &AppId,
        kind: TierKind,
        charged: u64,
        huge_hdfs: Option<(&str, u64)>,
    ) {
        self.flush_files.fetch_add(1, Ordering::Relaxed);
        {
            let mut apps = self.per_app.lock();
            let w = match apps.get_mut(app) {
                Some(w) => w,
                None => apps.entry(app.clone()).or_default(),
            };
            w.events += 1;
            match kind {
                TierKind::Hdfs => w.hdfs_bytes += charged,
                _ => w.local_bytes += charged,
            }
        }
        if let Some((location, bytes)) = huge_hdfs {
            *self
                .huge_by_location
                .lock()
                .entry(location.to_owned())
                .or_default() += bytes;
        }
    }

    /// Takes a purged app out of the per-app statistics and returns what it had written.
    pub fn forget_app(&self, app: &AppId) -> AppWritten {
        self.per_app.lock().remove(app).unwrap_or_default()
    }

    /// What every live app has written.
    pub fn per_app(&self) -> Vec<(AppId, AppWritten)> {
        self.per_app
            .lock()
            .iter()
            .map(|(a, w)| (a.clone(), *w))
            .collect()
    }

    /// HDFS bytes of huge partitions per host.
    pub fn huge_by_location(&self) -> Vec<(String, u64)> {
        self.huge_by_location
            .lock()
            .iter()
            .map(|(l, b)| (l.clone(), *b))
            .collect()
    }

    /// An event was given up after failures.
    pub fn gave_up(&self, kind: TierKind) {
        self.kind(kind).failures.fetch_add(1, Ordering::Relaxed);
        self.failed_events.fetch_add(1, Ordering::Relaxed);
    }

    /// An event was dropped because its partition was purged first.
    pub fn dropped(&self) {
        self.dropped_events.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes written per (kind, location), for labelled counters.
    pub fn by_location(&self) -> Vec<(TierKind, String, u64)> {
        self.by_location
            .lock()
            .iter()
            .map(|((k, l), b)| (*k, l.clone(), *b))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_lands_in_kind_location_and_size_level() {
        let s = FlushStats::default();
        s.attempt(TierKind::LocalFile, false);
        s.succeeded(
            TierKind::LocalFile,
            Some("/d1".into()),
            300 << 10,
            3,
            Duration::from_millis(5),
        );
        assert_eq!(
            s.kind(TierKind::LocalFile).bytes.load(Ordering::Relaxed),
            300 << 10
        );
        assert_eq!(s.size_levels[1].load(Ordering::Relaxed), 1);
        assert_eq!(
            s.by_location(),
            vec![(TierKind::LocalFile, "/d1".to_owned(), 300 << 10)]
        );
        assert_eq!(s.kind(TierKind::Hdfs).successes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn per_app_statistics_add_up_and_leave_with_the_app() {
        let s = FlushStats::default();
        let a = AppId::parse("app_1").unwrap();
        s.app_written(&a, TierKind::LocalFile, 100, None);
        s.app_written(&a, TierKind::Hdfs, 40, Some(("nn:8020", 30)));
        assert_eq!(s.flush_files.load(Ordering::Relaxed), 2);
        assert_eq!(s.huge_by_location(), vec![("nn:8020".to_owned(), 30)]);
        let w = AppWritten {
            events: 2,
            local_bytes: 100,
            hdfs_bytes: 40,
        };
        assert_eq!(s.per_app(), vec![(a.clone(), w)]);
        assert_eq!(s.forget_app(&a), w);
        assert!(s.per_app().is_empty());
        // Forgetting twice (a purge racing an expiry) finds nothing the second time.
        assert_eq!(s.forget_app(&a), AppWritten::default());
    }
}
