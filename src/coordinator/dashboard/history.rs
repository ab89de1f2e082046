//! `History`: the bounded ring of samples behind the dashboard's charts. Written by the sampler
//! once per interval, read by every page render; nothing else touches it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// The span the charts cover.
pub const SPAN: Duration = Duration::from_secs(3600);

/// The most samples kept, whatever the interval: a sub-second interval (tests) keeps the most
/// recent 3600 points instead of growing without bound.
pub const MAX_POINTS: usize = 3600;

/// One server at one sampling instant.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSample {
    /// Server id.
    pub id: String,
    /// `usedMemory` of its last heartbeat.
    pub used_memory: i64,
    /// `usedMemory + availableMemory` (Java's `totalMemory`).
    pub capacity: i64,
    /// Bytes per second written to the server since the previous sample, from its
    /// `total_received_data` counter; `None` when either reading is missing (no HTTP port in
    /// the heartbeat, the fetch failed, first sample, or the counter went backwards after a
    /// restart).
    pub write_rate: Option<f64>,
    /// The same from `total_read_data`.
    pub read_rate: Option<f64>,
}

/// Every live server at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Wall clock, ms since the epoch.
    pub at_ms: i64,
    /// Sorted by server id.
    pub servers: Vec<ServerSample>,
}

/// The ring. Sections are a push or a clone, never an await.
#[derive(Debug)]
pub struct History {
    interval: Duration,
    capacity: usize,
    /// Shared, so a page render takes the hour of samples without copying every server's.
    samples: Mutex<VecDeque<Arc<Sample>>>,
}

impl History {
    /// An empty history sampled every `interval`, holding [`SPAN`] worth of samples (at most
    /// [`MAX_POINTS`]).
    pub fn new(interval: Duration) -> Self {
        let per_span = SPAN.as_millis() / interval.as_millis().max(1);
        let capacity = usize::try_from(per_span)
            .unwrap_or(MAX_POINTS)
            .clamp(2, MAX_POINTS);
        History {
            interval,
            capacity,
            samples: Mutex::new(VecDeque::with_capacity(capacity)),
        }
    }

    /// The sampling interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How many samples are kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Appends `sample`, dropping the oldest when full.
    pub fn push(&self, sample: Sample) {
        let mut samples = self.samples.lock();
        if samples.len() == self.capacity {
            samples.pop_front();
        }
        samples.push_back(Arc::new(sample));
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> Vec<Arc<Sample>> {
        self.samples.lock().iter().cloned().collect()
    }

    /// The most recent sample.
    pub fn last(&self) -> Option<Arc<Sample>> {
        self.samples.lock().back().cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: i64) -> Sample {
        Sample {
            at_ms,
            servers: Vec::new(),
        }
    }

    #[test]
    fn the_ring_keeps_an_hour_and_drops_the_oldest() {
        let history = History::new(Duration::from_secs(10));
        assert_eq!(history.capacity(), 360);
        for i in 0..400 {
            history.push(sample(i));
        }
        let samples = history.samples();
        assert_eq!(samples.len(), 360);
        assert_eq!(samples[0].at_ms, 40);
        assert_eq!(history.last().map(|s| s.at_ms), Some(399));
    }

    #[test]
    fn a_fine_interval_is_bounded() {
        assert_eq!(
            History::new(Duration::from_millis(50)).capacity(),
            MAX_POINTS
        );
        assert_eq!(History::new(Duration::from_secs(7200)).capacity(), 2);
    }
}
