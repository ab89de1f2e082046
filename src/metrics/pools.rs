//! Java's thread-pool gauges in the `server` registry, mapped onto what does that work here.
//!
//! Java's `ThreadPoolManager` registers seven gauges per pool through `CommonMetrics`, which
//! shares the shuffle server's registry and `tags` label: `<pool>_ThreadActiveCount`,
//! `_ThreadCurrentCount`, `_ThreadMaxCount`, `_ThreadMinCount`, `_CompleteTaskCount`,
//! `_ThreadQueueWaitingTaskCount` and `_RejectCount`. The shuffle server has `Grpc` (the gRPC
//! executor), `LocalFileFlushEventThreadPool`, `HadoopFlushEventThreadPool` (store types with
//! HDFS only) and `FallBackFlushEventThreadPool`.
//!
//! ```text
//!  Grpc_*            tonic runs each call as a task on the tokio runtime, whose workers are
//!                    the threads: active = calls being handled, current = max = min = the
//!                    runtime's worker threads, queued = tasks waiting for a worker,
//!                    completed = calls finished, rejected = gRPC requests refused by [limits]
//!  *FlushEvent*_*    the spiller's writers (store::spill_pools): active = appends running,
//!                    queued = batches waiting for a spill permit (retries: also backing off),
//!                    completed = appends finished, max = min = the pool's permits,
//!                    current = active (a task per batch, no idle writers), rejected = 0
//!                    (the spill queue has no bound, so no batch is ever refused)
//! ```

use prometheus::proto::{self, MetricFamily, MetricType};

use super::grpc::GrpcMetrics;
use crate::limits::LimitMetrics;

/// One spill writer pool as Java's flush pool gauges show it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolValues {
    /// `_ThreadActiveCount`.
    pub active: u64,
    /// `_ThreadQueueWaitingTaskCount`.
    pub queued: u64,
    /// `_CompleteTaskCount`.
    pub completed: u64,
    /// `_ThreadMaxCount` and `_ThreadMinCount` (a fixed-size pool).
    pub limit: u64,
}

/// Every pool gauge, valued now.
pub fn families(
    tags: &str,
    spill: &[(&'static str, PoolValues)],
    grpc: &GrpcMetrics,
    limits: &LimitMetrics,
    runtime: Option<&tokio::runtime::Handle>,
) -> Vec<MetricFamily> {
    let mut out = Vec::with_capacity(28);
    out.extend(grpc_pool(tags, grpc, limits, runtime));
    for &(name, s) in spill {
        pool(
            &mut out,
            tags,
            name,
            Values {
                active: s.active,
                current: s.active,
                max: s.limit,
                min: s.limit,
                completed: s.completed,
                queued: s.queued,
                rejected: 0,
            },
        );
    }
    out
}

/// The `Grpc_*` gauges of `grpc`'s calls alone (the coordinator's registry: Java's
/// coordinator registers its gRPC executor through `CommonMetrics` with `tags="coordinator"`).
/// Workers and the queue are the runtime's, and refusals the gRPC port's, which the embedded
/// coordinator shares with the shuffle server.
pub fn grpc_pool(
    tags: &str,
    grpc: &GrpcMetrics,
    limits: &LimitMetrics,
    runtime: Option<&tokio::runtime::Handle>,
) -> Vec<MetricFamily> {
    let mut out = Vec::with_capacity(7);
    let (open, total) = grpc.calls();
    let (workers, queued) = runtime.map_or((0, 0), |r| {
        let m = r.metrics();
        (m.num_workers() as u64, m.global_queue_depth() as u64)
    });
    pool(
        &mut out,
        tags,
        "Grpc",
        Values {
            active: open,
            current: workers,
            max: workers,
            min: workers,
            completed: total.saturating_sub(open),
            queued,
            rejected: limits.refused("grpc"),
        },
    );
    out
}

/// One pool's seven values, named as Java's gauges.
struct Values {
    active: u64,
    current: u64,
    max: u64,
    min: u64,
    completed: u64,
    queued: u64,
    rejected: u64,
}

fn pool(out: &mut Vec<MetricFamily>, tags: &str, name: &str, v: Values) {
    for (suffix, value) in [
        ("ThreadActiveCount", v.active),
        ("ThreadCurrentCount", v.current),
        ("ThreadMaxCount", v.max),
        ("ThreadMinCount", v.min),
        ("CompleteTaskCount", v.completed),
        ("ThreadQueueWaitingTaskCount", v.queued),
        ("RejectCount", v.rejected),
    ] {
        out.push(gauge(&format!("{name}_{suffix}"), tags, value as f64));
    }
}

/// A gauge family with Java's HELP text ("Gauge <name>") and the `tags` label.
fn gauge(name: &str, tags: &str, value: f64) -> MetricFamily {
    let mut l = proto::LabelPair::default();
    l.set_name("tags".into());
    l.set_value(tags.to_owned());
    let mut m = proto::Metric::from_label(vec![l]);
    let mut g = proto::Gauge::default();
    g.set_value(value);
    m.set_gauge(g);
    let mut f = MetricFamily::default();
    f.set_name(name.to_owned());
    f.set_help(format!("Gauge {name}"));
    f.set_field_type(MetricType::GAUGE);
    f.set_metric(vec![m]);
    f
}
