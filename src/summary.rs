//! A Prometheus summary (quantiles over a sliding window), which the `prometheus` crate does not
//! have: Uniffle's latency metrics are simpleclient `Summary`s with quantiles 0.5, 0.75, 0.9,
//! 0.95 and 0.99 and dashboards read those quantile series.
//!
//! Observations are kept for [`WINDOW`] (simpleclient's default max age is 10 minutes), at most
//! [`MAX_SAMPLES`] of them (the oldest go first); quantiles are exact over what is kept and are
//! computed at scrape time, so the hot path only pushes one value under a short lock.
//!
//! A module of its own (not under `metrics`) because the registry records into summaries that
//! the metrics module reads: neither imports the other for it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prometheus::core::{Collector, Desc};
use prometheus::proto;

/// How long an observation counts towards the quantiles.
pub const WINDOW: Duration = Duration::from_secs(600);
/// Most observations kept for quantiles.
pub const MAX_SAMPLES: usize = 4096;
/// Quantiles exported, as Uniffle's summaries.
pub const QUANTILES: [f64; 5] = [0.5, 0.75, 0.9, 0.95, 0.99];

#[derive(Default)]
struct State {
    samples: VecDeque<(Instant, f64)>,
    count: u64,
    sum: f64,
}

/// One summary with constant labels (`tags`).
pub struct Summary {
    desc: Desc,
    labels: Vec<proto::LabelPair>,
    state: Mutex<State>,
}

impl Summary {
    /// A summary named `name` with the constant labels `labels`.
    pub fn new(name: &str, labels: &[(&str, &str)]) -> prometheus::Result<Self> {
        let const_labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let desc = Desc::new(
            name.to_owned(),
            format!("Summary {name}"),
            Vec::new(),
            const_labels,
        )?;
        let labels = labels
            .iter()
            .map(|(k, v)| {
                let mut l = proto::LabelPair::default();
                l.set_name((*k).to_owned());
                l.set_value((*v).to_owned());
                l
            })
            .collect();
        Ok(Summary {
            desc,
            labels,
            state: Mutex::new(State::default()),
        })
    }

    /// Records one value.
    pub fn observe(&self, value: f64) {
        let now = Instant::now();
        let mut s = self.state.lock();
        s.count += 1;
        s.sum += value;
        if s.samples.len() == MAX_SAMPLES {
            s.samples.pop_front();
        }
        s.samples.push_back((now, value));
    }

    /// Observations since start.
    pub fn count(&self) -> u64 {
        self.state.lock().count
    }

    fn snapshot(&self) -> (u64, f64, Vec<f64>) {
        let now = Instant::now();
        let mut s = self.state.lock();
        while s
            .samples
            .front()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) > WINDOW)
        {
            s.samples.pop_front();
        }
        let values = s.samples.iter().map(|(_, v)| *v).collect();
        (s.count, s.sum, values)
    }
}

/// The value at quantile `q` of sorted `values` (nearest rank); NaN when empty, as
/// simpleclient reports an empty window.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Collector for Summary {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        let (count, sum, mut values) = self.snapshot();
        values.sort_by(f64::total_cmp);
        let mut summary = proto::Summary::default();
        summary.set_sample_count(count);
        summary.set_sample_sum(sum);
        summary.set_quantile(
            QUANTILES
                .iter()
                .map(|&q| {
                    let mut qv = proto::Quantile::default();
                    qv.set_quantile(q);
                    qv.set_value(quantile(&values, q));
                    qv
                })
                .collect(),
        );
        let mut metric = proto::Metric::from_label(self.labels.clone());
        metric.set_summary(summary);
        let mut family = proto::MetricFamily::default();
        family.set_name(self.desc.fq_name.clone());
        family.set_help(self.desc.help.clone());
        family.set_field_type(proto::MetricType::SUMMARY);
        family.set_metric(vec![metric]);
        vec![family]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_over_observations() {
        let s = Summary::new("lat", &[("tags", "a")]).unwrap();
        for v in 1..=100 {
            s.observe(v as f64);
        }
        let fam = s.collect().remove(0);
        let m = &fam.get_metric()[0];
        let q = m.get_summary().get_quantile();
        assert_eq!(q[0].value(), 50.0);
        assert_eq!(q[4].value(), 99.0);
        assert_eq!(m.get_summary().sample_count(), 100);
        assert_eq!(m.get_summary().sample_sum(), 5050.0);
        assert_eq!(m.get_label()[0].value(), "a");
    }

    #[test]
    fn window_is_bounded() {
        let s = Summary::new("lat", &[]).unwrap();
        for v in 0..(MAX_SAMPLES + 10) {
            s.observe(v as f64);
        }
        assert_eq!(s.snapshot().2.len(), MAX_SAMPLES);
        assert_eq!(s.count(), (MAX_SAMPLES + 10) as u64);
    }
}
