//! The coordinator's metric families, named, typed and labelled as the Java 0.10 coordinator
//! registers them (`CoordinatorMetrics`, `CoordinatorGrpcMetrics`, and the `Grpc` executor pool
//! through `CommonMetrics`), valued from the coordinator's own state ([`CoordinatorFigures`]) when scraped.
//!
//! ```text
//!  server  total/active/unhealthy/lost/exclude_server_num ← ServerRegistry::counts, the exclude list
//!          running_app_num, app_num{user_name}, total_app_num ← the coordinator's apps
//!          total_access_request, total_*_denied_request   ← accessCluster and its checkers
//!          Grpc_*                                          ← the coordinator's own gRPC calls
//!  grpc    grpc_open, grpc_total, grpc_server_*, grpc_heartbeat[_total],
//!          grpc_get_shuffle_assignments[_total]            ← GrpcMetrics::coordinator
//!  jvm     the process's, shared with the shuffle server when embedded
//! ```
//! Java registers the `server` families with `MetricsManager.addGauge/addCounter(name)`, which
//! adds no label (only `app_num` has `user_name`), and the gRPC and pool families with
//! `tags="coordinator"`; so does this module. `remote_storage_in_used_<host>` is absent: see
//! the list of coordinator families in docs/monitoring.md Spillway does not have.

use std::sync::Arc;

use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::Registry;

use crate::limits::LimitMetrics;

use super::families::{label, sample};
use super::grpc::GrpcMetrics;
use super::grpc::COORDINATOR_TAGS;
use super::pools;

/// The coordinator's state its `server` families show, read at each scrape. The coordinator
/// implements it: this layer knows the figures, not the coordinator's types.
pub trait CoordinatorFigures: Send + Sync {
    /// The figures now.
    fn figures(&self) -> CoordinatorSnapshot;
}

/// One reading of [`CoordinatorFigures`], named after the Java families it fills.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoordinatorSnapshot {
    /// `total_server_num`: live servers of any status.
    pub total_servers: usize,
    /// `active_server_num`.
    pub active_servers: usize,
    /// `lost_server_num`.
    pub lost_servers: usize,
    /// `unhealthy_server_num`.
    pub unhealthy_servers: usize,
    /// `exclude_server_num`.
    pub excluded_servers: usize,
    /// `running_app_num`.
    pub running_apps: usize,
    /// `total_app_num`.
    pub total_apps: u64,
    /// `total_access_request`.
    pub access_requests: u64,
    /// `total_candidates_denied_request`.
    pub candidates_denied: u64,
    /// `total_load_denied_request`.
    pub load_denied: u64,
    /// `total_quota_denied_request`.
    pub quota_denied: u64,
    /// `app_num{user_name}`: running apps per user.
    pub apps_per_user: std::collections::BTreeMap<String, u64>,
}

/// The embedded or stand-alone coordinator's registries.
pub struct CoordinatorMetrics {
    coordinator: Arc<dyn CoordinatorFigures>,
    /// Java's coordinator `grpc` registry.
    grpc_registry: Registry,
    grpc: Arc<GrpcMetrics>,
    /// Spillway's own families a coordinator-only process serves with the `server` ones (its
    /// audit log's drop counter), since it has no shuffle-server registry to put them on.
    extra: Registry,
}

impl CoordinatorMetrics {
    /// Registers the coordinator's gRPC families; the `server` families are computed at
    /// scrape time from `coordinator`.
    pub fn new(coordinator: Arc<dyn CoordinatorFigures>) -> prometheus::Result<Self> {
        let grpc_registry = Registry::new();
        let grpc = Arc::new(GrpcMetrics::coordinator(&grpc_registry)?);
        Ok(CoordinatorMetrics {
            coordinator,
            grpc_registry,
            grpc,
            extra: Registry::new(),
        })
    }

    /// Adds `collector` to the `server` families (see `extra`).
    pub(super) fn register(
        &self,
        collector: Box<dyn prometheus::core::Collector>,
    ) -> prometheus::Result<()> {
        self.extra.register(collector)
    }

    /// The coordinator's gRPC metrics, which the gRPC layer feeds for the coordinator service.
    pub fn grpc(&self) -> &Arc<GrpcMetrics> {
        &self.grpc
    }

    /// The `server` registry's families, sorted by name.
    pub(super) fn server(
        &self,
        limits: &LimitMetrics,
        runtime: Option<&tokio::runtime::Handle>,
    ) -> Vec<MetricFamily> {
        let c = self.coordinator.figures();
        let mut out = vec![
            plain(
                "total_server_num",
                MetricType::GAUGE,
                c.total_servers as f64,
            ),
            plain(
                "active_server_num",
                MetricType::GAUGE,
                c.active_servers as f64,
            ),
            plain("lost_server_num", MetricType::GAUGE, c.lost_servers as f64),
            plain(
                "unhealthy_server_num",
                MetricType::GAUGE,
                c.unhealthy_servers as f64,
            ),
            plain(
                "exclude_server_num",
                MetricType::GAUGE,
                c.excluded_servers as f64,
            ),
            plain("running_app_num", MetricType::GAUGE, c.running_apps as f64),
            plain("total_app_num", MetricType::COUNTER, c.total_apps as f64),
            plain(
                "total_access_request",
                MetricType::COUNTER,
                c.access_requests as f64,
            ),
            plain(
                "total_candidates_denied_request",
                MetricType::COUNTER,
                c.candidates_denied as f64,
            ),
            plain(
                "total_load_denied_request",
                MetricType::COUNTER,
                c.load_denied as f64,
            ),
            plain(
                "total_quota_denied_request",
                MetricType::COUNTER,
                c.quota_denied as f64,
            ),
            app_num(c.apps_per_user),
        ];
        out.extend(pools::grpc_pool(
            COORDINATOR_TAGS,
            &self.grpc,
            limits,
            runtime,
        ));
        out.extend(self.extra.gather());
        out.sort_by(|a, b| a.name().cmp(b.name()));
        out
    }

    /// The `grpc` registry's families. `connections` is the gRPC port's open connections: the
    /// coordinator shares the port (and so its connections) with the shuffle server when
    /// embedded, and has it alone when it runs by itself.
    pub(super) fn grpc_families(&self, connections: i64, queued: usize) -> Vec<MetricFamily> {
        self.grpc.refresh_executor(queued);
        self.grpc.set_connections(connections);
        self.grpc_registry.gather()
    }
}

/// A family without labels, as Java's `addGauge(name)` / `addCounter(name)` make them, with
/// their HELP text (`Gauge <name>` / `Counter <name>`).
fn plain(name: &str, ty: MetricType, value: f64) -> MetricFamily {
    family(name, ty, vec![sample(Vec::new(), ty, value)])
}

/// `app_num{user_name}`: one sample per user with a running app. Without any the family is
/// still exported (HELP and TYPE only), as simpleclient exports a labelled family.
fn app_num(users: std::collections::BTreeMap<String, u64>) -> MetricFamily {
    let samples = users
        .into_iter()
        .map(|(user, n)| sample(vec![label("user_name", user)], MetricType::GAUGE, n as f64))
        .collect();
    family("app_num", MetricType::GAUGE, samples)
}

fn family(name: &str, ty: MetricType, metrics: Vec<proto::Metric>) -> MetricFamily {
    let help = if ty == MetricType::COUNTER {
        "Counter"
    } else {
        "Gauge"
    };
    super::families::family(name, format!("{help} {name}"), ty, metrics)
}

/// Merges families of the same name into one (their samples differ by label values, e.g.
/// `grpc_open{tags="coordinator"}` beside the shuffle server's `grpc_open{tags="ss_v5,…"}`),
/// so one text body has one TYPE line per name, as the push gateway requires. A family whose
/// type differs from the first of its name is dropped with a warning (none does today).
pub(super) fn merge(families: Vec<MetricFamily>) -> Vec<MetricFamily> {
    let mut out: Vec<MetricFamily> = Vec::with_capacity(families.len());
    let mut index = std::collections::HashMap::new();
    for mut f in families {
        match index.get(f.name()) {
            Some(&i) => {
                let first: &mut MetricFamily = &mut out[i];
                if first.get_field_type() == f.get_field_type() {
                    first.mut_metric().extend(f.take_metric());
                } else {
                    tracing::warn!(family = f.name(), "two metric families of one name and different types: the second is not exported");
                }
            }
            None => {
                index.insert(f.name().to_owned(), out.len());
                out.push(f);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_puts_same_named_families_together_and_drops_a_type_clash() {
        let gauge = |name: &str, v: f64| plain(name, MetricType::GAUGE, v);
        let merged = merge(vec![
            gauge("grpc_open", 1.0),
            gauge("running_app_num", 2.0),
            gauge("grpc_open", 3.0),
            plain("running_app_num", MetricType::COUNTER, 4.0),
        ]);
        let names: Vec<&str> = merged.iter().map(|f| f.name()).collect();
        assert_eq!(names, ["grpc_open", "running_app_num"]);
        let values: Vec<f64> = merged[0]
            .get_metric()
            .iter()
            .map(|m| m.get_gauge().get_value())
            .collect();
        assert_eq!(values, [1.0, 3.0]);
        assert_eq!(
            merged[1].get_metric().len(),
            1,
            "the counter of a gauge's name"
        );
    }
}
