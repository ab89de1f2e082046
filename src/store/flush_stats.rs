//! `FlushStats`: what the spiller has written, per target tier and per location (disk path,
//! HDFS host). Plain atomics updated once per spill event; `/metrics` reads them at scrape
//! time, so nothing here knows about Prometheus.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

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
}
