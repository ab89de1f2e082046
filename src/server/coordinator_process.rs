//! A coordinator-only process (`role = "coordinator"`, or a Java `coordinator.conf`): the
//! coordinator's gRPC service on `grpc_port`, and on `metrics.http_port` everything the Java
//! coordinator's Jetty serves (REST API, conf, info, metrics; `http::coordinator`, the same
//! routes the embedded coordinator serves), plus HTTPS on a second port with `[metrics.https]`
//! as Jetty adds its SSL connector. Nothing of the shuffle server (no store, no Netty plane, no
//! heartbeats of its own), so Spillway can stand in for the Java coordinators of a cluster as
//! well as its servers. The operator files (exclude nodes, quota, candidates, dynamic client
//! conf) are read at start-up, where a bad one stops it as in Java, and polled afterwards; the
//! config file is watched for the keys Java's coordinator reloads (`config::reload`).
//!
//! Shutdown, in order: stop the gRPC service (in-flight calls finish), stop the sweeper and
//! the file polls, push the metrics one last time, stop HTTP, as the shuffle server orders its
//! own.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::transport::server::TcpIncoming;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::listen::listen;
use crate::metrics::Metrics;

use crate::coordinator::service::CoordinatorService;
use crate::coordinator::Coordinator;

/// How long each shutdown step may take before the next one goes ahead. Public because
/// `spillway deploy` sizes a coordinator's stop timeout from it (two bounded steps: the gRPC
/// calls, then the tasks and the HTTP port).
pub const STEP_BUDGET: Duration = Duration::from_secs(10);

/// A running coordinator-only process.
pub struct RunningCoordinator {
    /// Where the coordinator's gRPC service listens.
    pub grpc_addr: SocketAddr,
    /// Where its HTTP port (REST API, metrics) listens.
    pub http_addr: SocketAddr,
    /// Where HTTPS listens (`[metrics.https]`, Java's `rss.jetty.https.port`); `None` without.
    pub https_addr: Option<SocketAddr>,
    /// `<ip>-<grpcPort>`, as Java names a coordinator (the push gateway's `instance`).
    pub id: String,
    coordinator: Arc<Coordinator>,
    metrics: Arc<Metrics>,
    /// The RPC audit log, flushed once the gRPC calls have ended.
    audit: crate::audit::RpcAudit,
    grpc_stop: CancellationToken,
    grpc_task: tokio::task::JoinHandle<std::result::Result<(), tonic::transport::Error>>,
    tasks_stop: CancellationToken,
    late_stop: CancellationToken,
    tracker: TaskTracker,
}

/// Binds both ports and serves until [`RunningCoordinator::shutdown`].
pub async fn start(config: Config) -> Result<RunningCoordinator> {
    let ip = config
        .bind_ip
        .parse::<IpAddr>()
        .map_err(|e| Error::Startup(format!("bind_ip {:?}: {e}", config.bind_ip)))?;
    let takeover = config.recovery.takeover;
    let listener = listen(SocketAddr::new(ip, config.grpc_port), "gRPC", takeover)?;
    let grpc_addr = listener
        .local_addr()
        .map_err(|e| Error::Startup(format!("local address of the gRPC port: {e}")))?;
    let http_listener = crate::http::bind(SocketAddr::new(ip, config.metrics.http_port), takeover)?;
    let http_addr = http_listener
        .local_addr()
        .map_err(|e| Error::Startup(format!("local address of the HTTP port: {e}")))?;
    // Key material before anything starts, so a bad keystore stops start-up at once.
    let https = crate::http::bind_https(config.metrics.https.as_ref(), ip, takeover)?;
    let https_addr = https.as_ref().map(|h| h.addr);
    let host = config
        .worker_ip
        .clone()
        .unwrap_or_else(crate::listen::host_ip);
    let id = format!("{host}-{}", grpc_addr.port());

    let tracker = TaskTracker::new();
    let tasks_stop = CancellationToken::new();
    let late_stop = CancellationToken::new();
    let grpc_stop = CancellationToken::new();

    // Before any task starts, so a refused operator file leaves nothing running.
    let coordinator =
        Arc::new(Coordinator::open((&config.coordinator).into()).map_err(Error::Startup)?);
    coordinator.spawn_sweeper(tasks_stop.clone(), &tracker);
    coordinator.spawn_watchers(tasks_stop.clone(), &tracker);
    crate::coordinator::dashboard::sampler::spawn(
        Arc::clone(&coordinator),
        tasks_stop.clone(),
        &tracker,
    );
    let metrics = Metrics::new(&[])?;
    metrics.attach_coordinator(Arc::clone(&coordinator) as Arc<_>, true)?;
    let audit = open_audit(&config, &metrics)?;

    let grpc_task = {
        let router = tonic::transport::Server::builder()
            .layer(metrics.grpc().layer())
            .add_service(
                CoordinatorService::new(Arc::clone(&coordinator))
                    .with_audit(audit.clone())
                    .into_server(),
            );
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let grpc_metrics = Arc::clone(metrics.grpc());
        let incoming = tokio_stream::StreamExt::map(incoming, move |accepted| {
            accepted.map(|conn| grpc_metrics.count_connection(conn))
        });
        let stop = grpc_stop.clone();
        tracker.spawn(async move {
            router
                .serve_with_incoming_shutdown(incoming, stop.cancelled())
                .await
        })
    };

    // Runtime reconfiguration, as Java's coordinator has it: `rss.coordinator.shuffle.nodes.max`
    // from the file (every `reconfigure_interval`) or a REST update, and the push interval.
    let runtime = crate::config::reload::Runtime::new_limited(
        config.clone(),
        &["coordinator.shuffle_server_number", "metrics.push_interval"],
    );
    coordinator.follow_reloads(&runtime);
    crate::config::reload::spawn_file_watch(
        Arc::clone(&runtime),
        &config,
        tasks_stop.clone(),
        &tracker,
    );
    let http = crate::http::coordinator::standalone_router(
        &crate::http::coordinator::CoordinatorHttp {
            rest: Arc::new(crate::coordinator::rest::RestContext {
                coordinator: Arc::clone(&coordinator),
                ip: host.clone(),
                grpc_port: grpc_addr.port(),
                http_port: http_addr.port(),
                start_time_ms: crate::clock::now_ms(),
            }),
            metrics: Arc::clone(&metrics),
            runtime: Arc::clone(&runtime),
            id: id.clone(),
        },
        &config,
    );
    crate::http::spawn(&tracker, http_listener, https, http, &late_stop);
    crate::tasks::push_gateway::spawn_configured(
        &metrics, &config, &runtime, &id, &late_stop, &tracker,
    )?;
    tracing::info!(%grpc_addr, %http_addr, ?https_addr, coordinator_id = %id, "spillway coordinator listening");
    Ok(RunningCoordinator {
        grpc_addr,
        http_addr,
        https_addr,
        id,
        coordinator,
        metrics,
        audit,
        grpc_stop,
        grpc_task,
        tasks_stop,
        late_stop,
        tracker,
    })
}

/// The coordinator's RPC audit log, its drop counter on the served registry.
fn open_audit(config: &Config, metrics: &Metrics) -> Result<crate::audit::RpcAudit> {
    let dropped = crate::audit::dropped_counter(metrics.tags())
        .map_err(|e| Error::Startup(format!("audit metrics: {e}")))?;
    metrics.register_coordinator(Box::new(dropped.clone()))?;
    crate::audit::open_coordinator_rpc(&config.audit, &dropped)
}

impl RunningCoordinator {
    /// The coordinator's state (servers, apps).
    pub fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coordinator
    }

    /// The metric registries.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Serves until `signal`, then shuts down.
    pub async fn run_until(self, signal: impl std::future::Future<Output = ()>) {
        signal.await;
        self.shutdown().await;
    }

    /// Stops in order; each step is bounded by [`STEP_BUDGET`] and logged if it overruns.
    pub async fn shutdown(self) {
        self.grpc_stop.cancel();
        match tokio::time::timeout(STEP_BUDGET, self.grpc_task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "coordinator gRPC server ended with an error")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "coordinator gRPC task failed"),
            Err(_) => {
                tracing::warn!(budget = ?STEP_BUDGET, "coordinator gRPC calls still running at shutdown")
            }
        }
        self.audit.close().await;
        self.tasks_stop.cancel();
        // The final push and the HTTP port go last, so the final numbers stay observable.
        self.late_stop.cancel();
        self.tracker.close();
        if tokio::time::timeout(STEP_BUDGET, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(budget = ?STEP_BUDGET, "coordinator tasks still running at shutdown");
        }
        tracing::info!("spillway coordinator stopped");
    }
}
