//! gRPC metrics (Uniffle's `grpc` registry) and the tower layer that records them for every
//! call on the gRPC port: in-flight gauges, totals, and process latency. Transport latency needs
//! the client's `timestamp` from inside the message, so the three handlers that carry one call
//! [`handler_start`] with it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use prometheus::{IntCounter, IntGauge, Registry};
use tracing::Instrument;

use super::families::{counter, gauge};
use crate::clock::now_ms;
use crate::summary::Summary;

/// Which Uniffle metrics exist for one method.
struct MethodSpec {
    /// The gRPC method name (last path segment).
    method: &'static str,
    /// The metric stem (`grpc_<stem>`).
    stem: &'static str,
    /// In-flight gauge `grpc_<stem>` (otherwise only the `_total` counter).
    gauge: bool,
    transport: bool,
    process: bool,
}

const fn spec(
    method: &'static str,
    stem: &'static str,
    gauge: bool,
    transport: bool,
    process: bool,
) -> MethodSpec {
    MethodSpec {
        method,
        stem,
        gauge,
        transport,
        process,
    }
}

/// Java's `ShuffleServerGrpcMetrics` (0.9 and 0.10) method list, one row per method:
/// method, metric stem, gauge, transport, process (kept as a table, unformatted).
#[rustfmt::skip]
const METHODS: [MethodSpec; 14] = [
    spec("registerShuffle", "registered_shuffle", true, false, false),
    spec("sendShuffleData", "send_shuffle_data", true, true, true),
    spec("commitShuffleTask", "commit_shuffle_task", true, false, false),
    spec("finishShuffle", "finish_shuffle", true, false, false),
    spec("requireBuffer", "require_buffer", true, false, false),
    spec("appHeartbeat", "app_heartbeat", true, false, false),
    spec("reportShuffleResult", "report_shuffle_result", true, false, true),
    spec("getShuffleResult", "get_shuffle_result", true, false, false),
    spec("getShuffleResultForMultiPart", "get_shuffle_result_for_multi_part", false, false, true),
    spec("getLocalShuffleData", "get_local_shuffle_data", true, true, true),
    spec("getMemoryShuffleData", "get_memory_shuffle_data", true, true, true),
    spec("getLocalShuffleIndex", "get_local_shuffle_index", true, false, false),
    spec("getSortedShuffleData", "get_sorted_shuffle_data", true, true, true),
    spec("startSortMerge", "start_sort_merge", true, false, false),
];

/// Java's `CoordinatorGrpcMetrics` method list: gauge and counter, no latencies.
#[rustfmt::skip]
const COORDINATOR_METHODS: [MethodSpec; 2] = [
    spec("heartbeat", "heartbeat", true, false, false),
    spec("getShuffleAssignments", "get_shuffle_assignments", true, false, false),
];

/// The path prefix of the coordinator's gRPC service, whose calls the coordinator's own
/// [`GrpcMetrics`] record when one is attached (see [`GrpcMetrics::attach_coordinator`]).
const COORDINATOR_SERVICE: &str = "/rss.common.CoordinatorServer/";

/// The `tags` value of every labelled coordinator family (Java's `Constants.COORDINATOR_TAG`).
pub const COORDINATOR_TAGS: &str = "coordinator";

struct Method {
    in_flight: Option<IntGauge>,
    total: IntCounter,
    transport: Option<Arc<Summary>>,
    process: Option<Arc<Summary>>,
}

/// The `grpc` registry's metrics.
pub struct GrpcMetrics {
    open: IntGauge,
    connections: IntGauge,
    total: IntCounter,
    /// `grpc_server_executor_active_threads` and `grpc_server_executor_blocking_queue_size`,
    /// set at scrape time by [`GrpcMetrics::refresh_executor`].
    executor_active: IntGauge,
    executor_queue: IntGauge,
    methods: HashMap<&'static str, Method>,
    /// The embedded coordinator's gRPC metrics: calls to its service on this port are its, as
    /// a Java coordinator (a process of its own) counts them, and not the shuffle server's.
    coordinator: std::sync::OnceLock<Arc<GrpcMetrics>>,
}

impl GrpcMetrics {
    /// Registers every gRPC metric on `registry` with the `tags` label.
    pub fn new(registry: &Registry, tags: &str) -> prometheus::Result<Self> {
        Self::with_methods(registry, tags, &METHODS)
    }

    /// The coordinator's gRPC families (Java's `CoordinatorGrpcMetrics`: the general ones plus
    /// `heartbeat` and `getShuffleAssignments`), labelled `tags="coordinator"`.
    pub fn coordinator(registry: &Registry) -> prometheus::Result<Self> {
        Self::with_methods(registry, COORDINATOR_TAGS, &COORDINATOR_METHODS)
    }

    /// Makes `coordinator` record the calls to the coordinator service that reach this
    /// metrics' layer (once; a second call is ignored and answers false).
    pub fn attach_coordinator(&self, coordinator: Arc<GrpcMetrics>) -> bool {
        self.coordinator.set(coordinator).is_ok()
    }

    fn with_methods(
        registry: &Registry,
        tags: &str,
        specs: &[MethodSpec],
    ) -> prometheus::Result<Self> {
        let open = gauge(registry, "grpc_open", tags)?;
        let total = counter(registry, "grpc_total", tags)?;
        let connections = gauge(registry, "grpc_server_connection_number", tags)?;
        // Java's executor gauges. Tonic runs each call as a task on the tokio runtime, so the
        // executor's active threads are the calls being handled, and its queue is the
        // runtime's queue of tasks waiting for a worker (see `refresh_executor`).
        let executor_active = gauge(registry, "grpc_server_executor_active_threads", tags)?;
        let executor_queue = gauge(registry, "grpc_server_executor_blocking_queue_size", tags)?;
        let mut methods = HashMap::new();
        for s in specs {
            let summary = |suffix: &str| -> prometheus::Result<Arc<Summary>> {
                let sum = Arc::new(Summary::new(
                    &format!("grpc_{}_{suffix}", s.stem),
                    &[("tags", tags)],
                )?);
                registry.register(Box::new(SharedSummary(Arc::clone(&sum))))?;
                Ok(sum)
            };
            let method = Method {
                in_flight: if s.gauge {
                    Some(gauge(registry, &format!("grpc_{}", s.stem), tags)?)
                } else {
                    None
                },
                total: counter(registry, &format!("grpc_{}_total", s.stem), tags)?,
                transport: s
                    .transport
                    .then(|| summary("transport_latency"))
                    .transpose()?,
                process: s.process.then(|| summary("process_latency")).transpose()?,
            };
            methods.insert(s.method, method);
        }
        Ok(GrpcMetrics {
            open,
            connections,
            total,
            executor_active,
            executor_queue,
            methods,
            coordinator: std::sync::OnceLock::new(),
        })
    }

    /// `(calls being handled, calls received since start)`.
    pub fn calls(&self) -> (u64, u64) {
        (self.open.get().max(0) as u64, self.total.get())
    }

    /// Sets the executor gauges before a scrape: active = calls being handled, queue =
    /// `queued` (the runtime's tasks waiting for a worker thread).
    pub fn refresh_executor(&self, queued: usize) {
        self.executor_active.set(self.open.get().max(0));
        self.executor_queue.set(queued as i64);
    }

    /// Open connections of the port (`grpc_server_connection_number`).
    pub fn connections(&self) -> i64 {
        self.connections.get()
    }

    /// Sets `grpc_server_connection_number` before a scrape, for metrics whose calls share a
    /// port counted elsewhere (the embedded coordinator's).
    pub fn set_connections(&self, n: i64) {
        self.connections.set(n);
    }

    /// Wraps an accepted gRPC connection so it counts in `grpc_server_connection_number` until
    /// it closes.
    pub fn count_connection<T>(&self, io: T) -> CountedConn<T> {
        self.connections.inc();
        CountedConn {
            inner: io,
            gauge: self.connections.clone(),
        }
    }

    /// The tower layer for the gRPC server builder.
    pub fn layer(self: &Arc<Self>) -> GrpcLayer {
        GrpcLayer {
            metrics: Arc::clone(self),
        }
    }

    fn begin(self: &Arc<Self>, path: &str) -> Call {
        if path.starts_with(COORDINATOR_SERVICE) {
            if let Some(c) = self.coordinator.get() {
                return c.begin(path);
            }
        }
        let method = path.rsplit('/').next().unwrap_or_default();
        let method = self.methods.get_key_value(method).map(|(k, m)| {
            if let Some(g) = &m.in_flight {
                g.inc();
            }
            m.total.inc();
            *k
        });
        self.open.inc();
        self.total.inc();
        Call {
            metrics: Arc::clone(self),
            method,
            started: Instant::now(),
            handler_started_us: Arc::new(AtomicU64::new(0)),
            epoch_ms: now_ms(),
        }
    }
}

/// A summary registered in a registry and also kept by its owner (the registry takes a box).
pub(crate) struct SharedSummary(pub Arc<Summary>);

impl prometheus::core::Collector for SharedSummary {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.0.desc()
    }
    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.0.collect()
    }
}

/// One call in progress; dropping it ends the call (also when the client went away).
struct Call {
    metrics: Arc<GrpcMetrics>,
    method: Option<&'static str>,
    started: Instant,
    /// Microseconds (+1) after `started` at which the handler began (0: never reported).
    handler_started_us: Arc<AtomicU64>,
    epoch_ms: i64,
}

impl Drop for Call {
    fn drop(&mut self) {
        self.metrics.open.dec();
        let Some(m) = self.method.and_then(|k| self.metrics.methods.get(k)) else {
            return;
        };
        if let Some(g) = &m.in_flight {
            g.dec();
        }
        if let Some(p) = &m.process {
            // Handler time when the handler reported its start, else the whole call.
            let offset = self
                .handler_started_us
                .load(Ordering::Relaxed)
                .saturating_sub(1);
            let us = (self.started.elapsed().as_micros() as u64).saturating_sub(offset);
            p.observe(us as f64 / 1e6);
        }
    }
}

/// What the layer leaves in the request's extensions for [`handler_start`].
#[derive(Clone)]
pub struct Received {
    metrics: Arc<GrpcMetrics>,
    method: Option<&'static str>,
    /// Wall-clock ms when the call arrived.
    at_ms: i64,
    started: Instant,
    handler_started_us: Arc<AtomicU64>,
}

/// Called first thing by handlers whose request carries the client's send `timestamp` (ms):
/// records the transport latency (arrival − timestamp, as Java; skipped for a missing or
/// future timestamp) and marks where handler time starts for the process latency.
pub fn handler_start<T>(request: &tonic::Request<T>, client_timestamp_ms: i64) {
    let Some(r) = request.extensions().get::<Received>() else {
        return;
    };
    r.handler_started_us.store(
        r.started.elapsed().as_micros() as u64 + 1,
        Ordering::Relaxed,
    );
    let Some(m) = r.method.and_then(|k| r.metrics.methods.get(k)) else {
        return;
    };
    if let Some(t) = &m.transport {
        if client_timestamp_ms > 0 && r.at_ms >= client_timestamp_ms {
            t.observe((r.at_ms - client_timestamp_ms) as f64 / 1000.0);
        }
    }
}

/// Tower layer recording [`GrpcMetrics`] for every call.
#[derive(Clone)]
pub struct GrpcLayer {
    metrics: Arc<GrpcMetrics>,
}

impl<S> tower_layer::Layer<S> for GrpcLayer {
    type Service = GrpcService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcService {
            inner,
            metrics: Arc::clone(&self.metrics),
        }
    }
}

/// The service [`GrpcLayer`] wraps around the gRPC routes.
#[derive(Clone)]
pub struct GrpcService<S> {
    inner: S,
    metrics: Arc<GrpcMetrics>,
}

impl<S, B> tower_service::Service<http::Request<B>> for GrpcService<S>
where
    S: tower_service::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let call = self.metrics.begin(req.uri().path());
        req.extensions_mut().insert(Received {
            metrics: Arc::clone(&call.metrics),
            method: call.method,
            at_ms: call.epoch_ms,
            started: call.started,
            handler_started_us: Arc::clone(&call.handler_started_us),
        });
        // A debug-level span (free unless enabled: `RUST_LOG=spillway=debug`) so every log
        // line of the call carries its method; handlers log app/shuffle/partition fields.
        let span = tracing::debug_span!("rpc", method = call.method.unwrap_or("other"));
        let fut = self.inner.call(req);
        Box::pin(
            async move {
                let out = fut.await;
                drop(call);
                out
            }
            .instrument(span),
        )
    }
}

/// A connection counted in `grpc_server_connection_number` while it is open.
pub struct CountedConn<T> {
    inner: T,
    gauge: IntGauge,
}

impl<T> Drop for CountedConn<T> {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for CountedConn<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for CountedConn<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<T: tonic::transport::server::Connected> tonic::transport::server::Connected
    for CountedConn<T>
{
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}
