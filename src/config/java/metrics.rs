//! The metrics the server exports and pushes.

use super::mapper::{Entry, Mapper};
use super::values::java_size;
use super::PUSH_GATEWAY_REPORTER;
use crate::config::ByteSize;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_push_gateway(&mut self) -> Result<(), ConfigError> {
        const ADDR: &str = "rss.metrics.prometheus.pushgateway.addr";
        const JOB: &str = "rss.metrics.prometheus.pushgateway.jobname";
        const GROUPING: &str = "rss.metrics.prometheus.pushgateway.groupingkey";
        const INTERVAL: &str = "rss.metrics.prometheus.pushgateway.report.interval.seconds";
        let reporter = self.string("rss.metrics.reporter.class");
        let is_push_gateway = reporter.as_ref().is_some_and(|r| {
            r.value == PUSH_GATEWAY_REPORTER || r.value == "PrometheusPushGatewayMetricReporter"
        });
        if !is_push_gateway {
            let why = match &reporter {
                Some(r) => {
                    self.ignore(r, "Spillway reports only to a Prometheus push gateway");
                    "the push gateway reporter is not rss.metrics.reporter.class"
                }
                None => "no rss.metrics.reporter.class",
            };
            for key in [ADDR, JOB, GROUPING, INTERVAL] {
                self.ignore_key(key, why);
            }
            return Ok(());
        }
        let reporter = reporter.expect("checked above");
        let required = |e: Option<Entry>, key: &str| {
            e.ok_or_else(|| {
                ConfigError::new(
                    key,
                    format!(
                        "is required with rss.metrics.reporter.class = {}",
                        reporter.value
                    ),
                )
            })
        };
        let addr = required(self.string(ADDR), ADDR)?;
        let job = required(self.string(JOB), JOB)?;
        let lower = addr.value.to_ascii_lowercase();
        // The Java reporter prefixes `http://` to a bare `host:port`.
        let endpoint = if lower.starts_with("http://") || lower.starts_with("https://") {
            addr.value.clone()
        } else {
            format!("http://{}", addr.value)
        };
        self.config.metrics.push_gateway_endpoint = Some(endpoint);
        self.set_origin("metrics.push_gateway_endpoint", &addr);
        self.config.metrics.push_gateway_job = job.value.clone();
        self.set_origin("metrics.push_gateway_job", &job);
        if let Some(e) = self.take(GROUPING) {
            crate::config::parse_grouping_key(&e.value)
                .map_err(|reason| e.error(format!("{reason}; expected k1=v1;k2=v2")))?;
            self.config.metrics.push_gateway_grouping_key = e.value.clone();
            self.set_origin("metrics.push_gateway_grouping_key", &e);
        }
        self.map(
            INTERVAL,
            Self::positive_secs,
            "metrics.push_interval",
            |c, v| c.metrics.push_interval = v,
        )
    }

    pub(super) fn map_top_n(&mut self) -> Result<(), ConfigError> {
        self.map(
            "rss.server.topN.appShuffleDataSize.number",
            Self::count,
            "metrics.top_n_apps",
            |c, v| c.metrics.top_n_apps = v,
        )?;
        self.map(
            "rss.server.metrics.blockSizeStatisticsEnabled",
            Self::boolean,
            "metrics.block_size_statistics",
            |c, v| c.metrics.block_size_statistics = v,
        )?;
        if let Some(e) = self.string("rss.server.metrics.blockSizeStatistics.buckets") {
            let bounds = e
                .value
                .split(',')
                .map(str::trim)
                .filter(|b| !b.is_empty())
                .map(|b| match java_size(b) {
                    Ok(n) if n > 0 => Ok(ByteSize(n as u64)),
                    Ok(n) => Err(e.error(format!("bound {n} is not above 0"))),
                    Err(reason) => Err(e.error(reason)),
                })
                .collect::<Result<Vec<_>, _>>()?;
            self.config.metrics.block_size_buckets = bounds;
            self.set_origin("metrics.block_size_buckets", &e);
        }
        Ok(())
    }
}
