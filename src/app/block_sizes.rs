//! `BlockSizes`: Java's `write_block_size{appId}` histogram, the payload length of every block
//! received, per app. Off by default, as Java's
//! (`rss.server.metrics.blockSizeStatisticsEnabled`): when off the send path does nothing
//! here. When on, a send takes one short lock for all its blocks; the counts are read at
//! scrape time and an app's histogram leaves with the app, as Java removes its child.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::ids::AppId;

/// One app's histogram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// Observations at or below each bucket bound (not cumulative).
    pub buckets: Vec<u64>,
    /// Observations above every bound (the `+Inf` bucket's own share).
    pub above: u64,
    /// Sum of the observed lengths.
    pub sum: f64,
}

impl Histogram {
    /// Observations in total.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum::<u64>() + self.above
    }
}

/// The per-app histograms; see the module doc.
#[derive(Debug, Default)]
pub struct BlockSizes {
    /// Upper bounds in bytes, ascending; empty = statistics off.
    bounds: Vec<u64>,
    apps: Mutex<HashMap<AppId, Histogram>>,
}

impl BlockSizes {
    /// Statistics over `bounds` (sorted and de-duplicated here); empty bounds turn them off.
    pub fn new(mut bounds: Vec<u64>) -> Self {
        bounds.sort_unstable();
        bounds.dedup();
        BlockSizes {
            bounds,
            apps: Mutex::default(),
        }
    }

    /// Whether blocks are observed at all.
    pub fn enabled(&self) -> bool {
        !self.bounds.is_empty()
    }

    /// The bucket bounds in bytes.
    pub fn bounds(&self) -> &[u64] {
        &self.bounds
    }

    /// Observes the payload lengths of one send's blocks for `app`.
    pub fn observe(&self, app: &AppId, lengths: impl Iterator<Item = u64>) {
        if !self.enabled() {
            return;
        }
        let mut apps = self.apps.lock();
        let h = match apps.get_mut(app) {
            Some(h) => h,
            None => apps.entry(app.clone()).or_insert_with(|| Histogram {
                buckets: vec![0; self.bounds.len()],
                ..Histogram::default()
            }),
        };
        for len in lengths {
            match self.bounds.iter().position(|b| len <= *b) {
                Some(i) => h.buckets[i] += 1,
                None => h.above += 1,
            }
            h.sum += len as f64;
        }
    }

    /// Drops a removed app's histogram.
    pub fn forget(&self, app: &AppId) {
        if self.enabled() {
            self.apps.lock().remove(app);
        }
    }

    /// Every app's histogram.
    pub fn snapshot(&self) -> Vec<(AppId, Histogram)> {
        self.apps
            .lock()
            .iter()
            .map(|(a, h)| (a.clone(), h.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_fall_in_the_first_bucket_that_holds_them() {
        let s = BlockSizes::new(vec![1024, 32]);
        let a = AppId::parse("a").unwrap();
        s.observe(&a, [10, 32, 33, 5000].into_iter());
        let h = &s.snapshot()[0].1;
        assert_eq!(s.bounds(), &[32, 1024]);
        assert_eq!((h.buckets.clone(), h.above, h.count()), (vec![2, 1], 1, 4));
        assert_eq!(h.sum, 5075.0);
        s.forget(&a);
        assert!(s.snapshot().is_empty());
    }

    #[test]
    fn off_observes_nothing() {
        let s = BlockSizes::new(Vec::new());
        s.observe(&AppId::parse("a").unwrap(), [10].into_iter());
        assert!(!s.enabled() && s.snapshot().is_empty());
    }
}
