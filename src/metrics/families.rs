//! Gauges and counters as Uniffle registers them: its HELP text and the `tags` label.

use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{IntCounter, IntGauge, Opts, Registry};

/// A gauge with Uniffle's HELP text and the `tags` label, registered on `registry`.
pub(crate) fn gauge(registry: &Registry, name: &str, tags: &str) -> prometheus::Result<IntGauge> {
    let g =
        IntGauge::with_opts(Opts::new(name, format!("Gauge {name}")).const_label("tags", tags))?;
    registry.register(Box::new(g.clone()))?;
    Ok(g)
}

/// A counter with Uniffle's HELP text and the `tags` label, registered on `registry`.
pub(crate) fn counter(
    registry: &Registry,
    name: &str,
    tags: &str,
) -> prometheus::Result<IntCounter> {
    let c = IntCounter::with_opts(
        Opts::new(name, format!("Counter {name}")).const_label("tags", tags),
    )?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}

/// A label pair, for families built at scrape time.
pub fn label(name: &str, value: String) -> proto::LabelPair {
    let mut l = proto::LabelPair::default();
    l.set_name(name.to_owned());
    l.set_value(value);
    l
}

/// One sample of a family built at scrape time, from figures no registered metric holds.
pub fn sample(labels: Vec<proto::LabelPair>, ty: MetricType, value: f64) -> proto::Metric {
    let mut m = proto::Metric::from_label(labels);
    if ty == MetricType::COUNTER {
        let mut c = proto::Counter::default();
        c.set_value(value);
        m.set_counter(c);
    } else {
        let mut g = proto::Gauge::default();
        g.set_value(value);
        m.set_gauge(g);
    }
    m
}

/// A family of such samples.
pub fn family(
    name: &str,
    help: String,
    ty: MetricType,
    metrics: Vec<proto::Metric>,
) -> MetricFamily {
    let mut f = MetricFamily::default();
    f.set_name(name.to_owned());
    f.set_help(help);
    f.set_field_type(ty);
    f.set_metric(metrics);
    f
}
