//! Gauges and counters as Uniffle registers them: its HELP text and the `tags` label.

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
