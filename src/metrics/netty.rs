//! Netty-plane metrics (Uniffle's `netty` registry): connections, handler exceptions, and per
//! request type in-flight gauges, totals, transport and process latencies.

use std::sync::Arc;
use std::time::Instant;

use prometheus::{IntCounter, IntGauge, Registry};

use super::families::{counter, gauge};
use super::grpc::SharedSummary;
use crate::clock::now_ms;
use crate::summary::Summary;

/// Java's `NettyMetrics` request names, indexed by [`RequestKind`].
const REQUESTS: [&str; 5] = [
    "send_shuffle_data_request",
    "get_local_shuffle_data_request",
    "get_local_shuffle_index_request",
    "get_memory_shuffle_data_request",
    "get_sorted_shuffle_data_request",
];

struct PerRequest {
    in_flight: IntGauge,
    total: IntCounter,
    transport: Arc<Summary>,
    process: Arc<Summary>,
}

/// The `netty` registry's metrics.
pub struct NettyMetrics {
    active_connections: IntGauge,
    handle_exceptions: IntCounter,
    requests: Vec<PerRequest>,
}

/// The Netty request types Java counts, in [`REQUESTS`] order. The Netty plane says which one
/// a decoded request is, so this module needs nothing of the plane's types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// `SendShuffleDataRequest`.
    Send = 0,
    /// `GetLocalShuffleDataRequest`.
    Data = 1,
    /// `GetLocalShuffleIndexRequest`.
    Index = 2,
    /// `GetMemoryShuffleDataRequest`.
    Memory = 3,
    /// `GetSortedShuffleDataRequest`.
    Sorted = 4,
}

impl NettyMetrics {
    /// Registers every Netty metric on `registry` with the `tags` label.
    pub fn new(registry: &Registry, tags: &str) -> prometheus::Result<Self> {
        let active_connections = gauge(registry, "netty_active_connection", tags)?;
        let handle_exceptions = counter(registry, "netty_handle_exception", tags)?;
        // No boss/worker event loops here: present for dashboards, always 0.
        gauge(registry, "netty_pending_tasks_num_for_boss_group", tags)?;
        gauge(registry, "netty_pending_tasks_num_for_worker_group", tags)?;
        let summary = |name: String| -> prometheus::Result<Arc<Summary>> {
            let s = Arc::new(Summary::new(&name, &[("tags", tags)])?);
            registry.register(Box::new(SharedSummary(Arc::clone(&s))))?;
            Ok(s)
        };
        let requests = REQUESTS
            .iter()
            .map(|r| {
                Ok(PerRequest {
                    in_flight: gauge(registry, &format!("netty_{r}"), tags)?,
                    total: counter(registry, &format!("netty_{r}_total"), tags)?,
                    transport: summary(format!("netty_{r}_transport_latency"))?,
                    process: summary(format!("netty_{r}_process_latency"))?,
                })
            })
            .collect::<prometheus::Result<Vec<_>>>()?;
        Ok(NettyMetrics {
            active_connections,
            handle_exceptions,
            requests,
        })
    }

    /// A connection opened; the guard counts it until dropped.
    pub fn connection(self: &Arc<Self>) -> ConnectionGuard {
        self.active_connections.inc();
        ConnectionGuard(Arc::clone(self))
    }

    /// A connection ended with an error.
    pub fn exception(&self) {
        self.handle_exceptions.inc();
    }

    /// A decoded request of `kind`, sent by the client at `timestamp` (ms, if it says), is
    /// about to be handled; the guard records its process latency when dropped.
    pub fn request(&self, kind: RequestKind, timestamp: Option<i64>) -> RequestGuard<'_> {
        let r = &self.requests[kind as usize];
        r.in_flight.inc();
        r.total.inc();
        if let Some(ts) = timestamp {
            let now = now_ms();
            if ts > 0 && now >= ts {
                r.transport.observe((now - ts) as f64 / 1000.0);
            }
        }
        RequestGuard {
            request: r,
            started: Instant::now(),
        }
    }
}

/// Counts one open connection.
pub struct ConnectionGuard(Arc<NettyMetrics>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.active_connections.dec();
    }
}

/// Counts one request in flight.
pub struct RequestGuard<'a> {
    request: &'a PerRequest,
    started: Instant,
}

impl Drop for RequestGuard<'_> {
    fn drop(&mut self) {
        self.request.in_flight.dec();
        self.request
            .process
            .observe(self.started.elapsed().as_secs_f64());
    }
}
