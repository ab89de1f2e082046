//! Metrics on one set of Prometheus registries, named as the Java server names them
//! (`shared/protocol/HTTP-METRICS.md`): `server`, `grpc`, `netty`, and `jvm` (here: process,
//! tokio runtime and allocator numbers). One [`Metrics`] is built by `server::start` and shared
//! as `Arc`; there are no global metric statics.
//!
//! ```text
//!  server  ← ServerFamilies (app::server_metrics): scrape-time reads of budget, registry
//!            stats, spiller, disks, status, fed from above
//!            pools: Java's thread-pool gauges from the gRPC layer, the runtime and the spiller
//!  grpc    ← GrpcMetrics: tower layer on the gRPC server (+ handler_start for transport latency)
//!  netty   ← NettyMetrics: the Netty handler's per-request guard
//!  jvm     ← ProcessCollector (prometheus `process`), RuntimeCollector (tokio, jemalloc)
//!  coordinator (when one runs here) ← coordinator.rs: Java's coordinator `server` and `grpc`
//!          registries, served under /api/coordinator and pushed with the rest
//! ```
//! The families are Java's (`tests/fixtures/java_metric_families.txt` lists them with their
//! sources); docs/monitoring.md's metrics section says what each is computed from here, and which
//! JVM-only families are absent and why. A family with no samples yet is still exported, as
//! HELP and TYPE only, because simpleclient exports a labelled family before its first child.
//! Every sample carries `tags` = the server's tags joined with `,` (as Java). Latencies are
//! summaries in seconds with quantiles 0.5/0.75/0.9/0.95/0.99, as simpleclient's.

pub mod coordinator;
mod families;
pub use families::{family, label, sample};
pub mod format;
pub mod grpc;
pub mod netty;
pub mod pools;
pub mod process;
pub use crate::summary;

use std::str::FromStr;
use std::sync::Arc;

use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, Opts, Registry};

use crate::error::{Error, Result};

pub use grpc::{handler_start, GrpcLayer, GrpcMetrics};
pub use netty::NettyMetrics;

/// A registry name in the URL (`/metrics/{type}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Shuffle-server metrics.
    Server,
    /// gRPC metrics.
    Grpc,
    /// Netty-plane metrics.
    Netty,
    /// Process/runtime metrics (Java: JVM metrics).
    Jvm,
    /// All four merged.
    All,
}

impl FromStr for Kind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "server" => Kind::Server,
            "grpc" => Kind::Grpc,
            "netty" => Kind::Netty,
            "jvm" => Kind::Jvm,
            "all" => Kind::All,
            other => {
                return Err(Error::bad_request(format!(
                    "unknown metrics type {other:?}: use server, grpc, netty, jvm or all"
                )))
            }
        })
    }
}

/// Family of the HTTP requests refused at a protected endpoint, by `reason`.
pub const ADMIN_DENIED: &str = "total_admin_requests_denied";

/// The server's registries.
pub struct Metrics {
    tags: String,
    server: Registry,
    /// The scrape-time families of the `server` registry. Kept beside the registry rather
    /// than registered in it because `Registry::gather` drops families without samples, and
    /// Java exports those (a labelled family with no children yet) as HELP and TYPE lines.
    server_collector: std::sync::OnceLock<Box<dyn ServerFamilies>>,
    /// The runtime whose workers run the gRPC handlers (the `Grpc_*` pool gauges).
    runtime: Option<tokio::runtime::Handle>,
    /// [`ADMIN_DENIED`]: kept here rather than in `ServerCollector` because it counts events the
    /// HTTP layer sees, not state read at scrape time.
    admin_denied: IntCounterVec,
    grpc: Registry,
    netty: Registry,
    jvm: Registry,
    grpc_metrics: Arc<GrpcMetrics>,
    netty_metrics: Arc<NettyMetrics>,
    limit_metrics: Arc<crate::limits::LimitMetrics>,
    /// The coordinator's registries, when this process runs one ([`Metrics::attach_coordinator`]).
    coordinator: std::sync::OnceLock<coordinator::CoordinatorMetrics>,
    /// Set for a coordinator-only process: what it pushes is the coordinator's alone.
    coordinator_only: std::sync::atomic::AtomicBool,
}

/// The `server` registry's scrape-time families, and the spill writers as Java's flush
/// pools. The server implements it over its registry and tiers (`app::server_metrics`): this
/// layer knows the families, not the parts they are read from.
pub trait ServerFamilies: Send + Sync {
    /// The families, valued now (empty families included).
    fn families(&self) -> Vec<MetricFamily>;
    /// Each spill writer pool by Java's pool name, valued now.
    fn pools(&self) -> Vec<(&'static str, pools::PoolValues)>;
}

fn registration(e: prometheus::Error) -> Error {
    Error::Startup(format!("metrics registration: {e}"))
}

impl Metrics {
    /// Builds the `grpc`, `netty` and `jvm` registries; the `server` registry is filled by
    /// [`Metrics::attach_server`] once the registry and tiers exist. `tags` are the server's
    /// tags as heartbeats send them.
    pub fn new(tags: &[String]) -> Result<Arc<Self>> {
        let tags = tags.join(",");
        let grpc = Registry::new();
        let netty = Registry::new();
        let jvm = Registry::new();
        let grpc_metrics = Arc::new(GrpcMetrics::new(&grpc, &tags).map_err(registration)?);
        let netty_metrics = Arc::new(NettyMetrics::new(&netty, &tags).map_err(registration)?);
        #[cfg(target_os = "linux")]
        jvm.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .map_err(registration)?;
        jvm.register(Box::new(
            process::RuntimeCollector::new(&tags).map_err(registration)?,
        ))
        .map_err(registration)?;
        let server = Registry::new();
        let admin_denied = IntCounterVec::new(
            Opts::new(ADMIN_DENIED, format!("Counter {ADMIN_DENIED}")).const_label("tags", &tags),
            &["reason"],
        )
        .map_err(registration)?;
        server
            .register(Box::new(admin_denied.clone()))
            .map_err(registration)?;
        let limit_metrics =
            Arc::new(crate::limits::LimitMetrics::new(&server, &tags).map_err(registration)?);
        Ok(Arc::new(Metrics {
            tags,
            server,
            server_collector: std::sync::OnceLock::new(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            admin_denied,
            grpc,
            netty,
            jvm,
            grpc_metrics,
            netty_metrics,
            limit_metrics,
            coordinator: std::sync::OnceLock::new(),
            coordinator_only: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Attaches what fills the `server` registry at scrape time (once; a second call is
    /// refused): the shuffle server's parts, read by a collector the server builds above this
    /// layer (`app::server_metrics`).
    pub fn attach_server(&self, source: Box<dyn ServerFamilies>) -> Result<()> {
        self.server_collector
            .set(source)
            .map_err(|_| Error::Startup("metrics: the server collector is attached twice".into()))
    }

    /// Adds the coordinator's registries (once; a second call is refused) and routes the calls
    /// to its gRPC service on this process's port to its gRPC metrics. `only`: this process
    /// runs nothing else (a coordinator-only process), so it pushes the coordinator's alone.
    pub fn attach_coordinator(
        &self,
        coordinator: Arc<dyn coordinator::CoordinatorFigures>,
        only: bool,
    ) -> Result<()> {
        let metrics = coordinator::CoordinatorMetrics::new(coordinator).map_err(registration)?;
        let grpc = Arc::clone(metrics.grpc());
        self.coordinator
            .set(metrics)
            .map_err(|_| Error::Startup("metrics: the coordinator is attached twice".into()))?;
        self.grpc_metrics.attach_coordinator(grpc);
        self.coordinator_only
            .store(only, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// The coordinator's families of `kind` (Java's coordinator registries: `server`, `grpc`,
    /// `jvm`, `all`); with `names` non-empty, only those. Without a coordinator, none. `netty`
    /// is refused: the Java coordinator has no such registry.
    pub fn gather_coordinator(&self, kind: Kind, names: &[String]) -> Result<Vec<MetricFamily>> {
        if kind == Kind::Netty {
            return Err(Error::bad_request(
                "unknown metrics type \"netty\": the coordinator has server, grpc, jvm and all",
            ));
        }
        let Some(c) = self.coordinator.get() else {
            return Ok(Vec::new());
        };
        let mut families = Vec::new();
        if matches!(kind, Kind::Server | Kind::All) {
            families.extend(c.server(&self.limit_metrics, self.runtime.as_ref()));
        }
        if matches!(kind, Kind::Grpc | Kind::All) {
            let queued = self
                .runtime
                .as_ref()
                .map_or(0, |r| r.metrics().global_queue_depth());
            families.extend(c.grpc_families(self.grpc_metrics.connections(), queued));
        }
        if matches!(kind, Kind::Jvm | Kind::All) {
            families.extend(self.jvm.gather());
        }
        Ok(families
            .into_iter()
            .filter(|f| names.is_empty() || names.iter().any(|n| n == f.name()))
            .collect())
    }

    /// What the push gateway gets: every family of this process once, the shuffle server's
    /// and the embedded coordinator's merged by name (a coordinator-only process: its own).
    pub fn gather_push(&self) -> Vec<MetricFamily> {
        let coordinator_only = self
            .coordinator_only
            .load(std::sync::atomic::Ordering::Relaxed);
        if coordinator_only {
            return self.gather_coordinator(Kind::All, &[]).unwrap_or_default();
        }
        let mut families = self.gather(Kind::All, &[]);
        if self.coordinator.get().is_some() {
            families.extend(
                self.gather_coordinator(Kind::Server, &[])
                    .unwrap_or_default(),
            );
            families.extend(self.gather_coordinator(Kind::Grpc, &[]).unwrap_or_default());
        }
        coordinator::merge(families)
    }

    /// The `server` registry's families: the registered ones, the collector's (empty ones
    /// included) and the thread-pool gauges, sorted by name as `Registry::gather` sorts.
    fn gather_server(&self) -> Vec<MetricFamily> {
        let mut out = self.server.gather();
        if let Some(c) = self.server_collector.get() {
            out.extend(c.families());
            out.extend(pools::families(
                &self.tags,
                &c.pools(),
                &self.grpc_metrics,
                &self.limit_metrics,
                self.runtime.as_ref(),
            ));
        }
        out.sort_by(|a, b| a.name().cmp(b.name()));
        out
    }

    /// Registers `collector` with the attached coordinator's `server` families (a
    /// coordinator-only process's own counters); an error before
    /// [`Metrics::attach_coordinator`].
    pub fn register_coordinator(
        &self,
        collector: Box<dyn prometheus::core::Collector>,
    ) -> Result<()> {
        let c = self
            .coordinator
            .get()
            .ok_or_else(|| Error::Startup("no coordinator metrics to register on".into()))?;
        c.register(collector).map_err(registration)
    }

    /// Registers `collector` on the `server` registry (families owned elsewhere, such as the
    /// audit logs' drop counter).
    pub fn register_server(&self, collector: Box<dyn prometheus::core::Collector>) -> Result<()> {
        self.server.register(collector).map_err(registration)
    }

    /// The `tags` label value.
    pub fn tags(&self) -> &str {
        &self.tags
    }

    /// The gRPC metrics (the server builder takes [`GrpcMetrics::layer`]).
    pub fn grpc(&self) -> &Arc<GrpcMetrics> {
        &self.grpc_metrics
    }

    /// `total_limit_hits`, shared by every limit.
    pub fn limits(&self) -> &Arc<crate::limits::LimitMetrics> {
        &self.limit_metrics
    }

    /// The Netty-plane metrics.
    pub fn netty(&self) -> &Arc<NettyMetrics> {
        &self.netty_metrics
    }

    /// [`ADMIN_DENIED`], labelled by `reason`.
    pub fn admin_denied(&self) -> &IntCounterVec {
        &self.admin_denied
    }

    /// Every family of `kind`; with `names` non-empty, only those families (the `name[]=`
    /// filter). Summaries are matched by their base name, as Java's filter does.
    pub fn gather(&self, kind: Kind, names: &[String]) -> Vec<MetricFamily> {
        if matches!(kind, Kind::Grpc | Kind::All) {
            let queued = self
                .runtime
                .as_ref()
                .map_or(0, |r| r.metrics().global_queue_depth());
            self.grpc_metrics.refresh_executor(queued);
        }
        let mut families = Vec::new();
        if matches!(kind, Kind::Server | Kind::All) {
            families.extend(self.gather_server());
        }
        let others: &[&Registry] = match kind {
            Kind::Server => &[],
            Kind::Grpc => &[&self.grpc],
            Kind::Netty => &[&self.netty],
            Kind::Jvm => &[&self.jvm],
            Kind::All => &[&self.grpc, &self.netty, &self.jvm],
        };
        families.extend(others.iter().flat_map(|r| r.gather()));
        families
            .into_iter()
            .filter(|f| names.is_empty() || names.iter().any(|n| n == f.name()))
            .collect()
    }
}
