//! `total_limit_hits`, the one counter family every limit counts its hits in.

use prometheus::{IntCounterVec, Opts, Registry};

/// `total_limit_hits`: one counter family for every limit, by plane, limit and what was done.
#[derive(Debug)]
pub struct LimitMetrics {
    hits: IntCounterVec,
}

impl LimitMetrics {
    /// Registers the family on `registry` with the server's `tags`.
    pub fn new(registry: &Registry, tags: &str) -> prometheus::Result<Self> {
        let hits = Self::family(tags)?;
        registry.register(Box::new(hits.clone()))?;
        Ok(LimitMetrics { hits })
    }

    /// A family registered nowhere (unit tests).
    pub fn unregistered() -> Self {
        LimitMetrics {
            hits: Self::family("").expect("static metric options are valid"),
        }
    }

    fn family(tags: &str) -> prometheus::Result<IntCounterVec> {
        IntCounterVec::new(
            Opts::new(
                "total_limit_hits",
                "Requests refused and connections closed by a [limits] setting",
            )
            .const_label("tags", tags),
            &["plane", "limit", "action"],
        )
    }

    /// Counts one limit hit.
    pub fn count(&self, plane: &str, limit: &str, action: &str) {
        self.hits.with_label_values(&[plane, limit, action]).inc();
    }

    /// Requests refused on `plane` by any limit (`action="refused"`), for the `Grpc_RejectCount`
    /// pool gauge.
    pub fn refused(&self, plane: &str) -> u64 {
        use prometheus::core::Collector;
        self.hits
            .collect()
            .iter()
            .flat_map(|f| f.get_metric())
            .filter(|m| {
                let has = |k: &str, v: &str| {
                    m.get_label()
                        .iter()
                        .any(|l| l.name() == k && l.value() == v)
                };
                has("plane", plane) && has("action", "refused")
            })
            .map(|m| m.get_counter().get_value() as u64)
            .sum()
    }

    /// The current count (tests).
    pub fn get(&self, plane: &str, limit: &str, action: &str) -> u64 {
        self.hits.with_label_values(&[plane, limit, action]).get()
    }
}
