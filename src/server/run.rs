//! Start-up, phase 3: with every part built, the tasks start, each on the server's task
//! tracker (which shutdown waits for) and each ended by its step's token: the side tasks
//! (sweepers, expiry, disk and health checks, the coordinator's watchers), the gRPC service
//! and the Netty plane, the runtime reconfiguration, the HTTP port, the push gateway and the
//! coordinator heartbeats.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::transport::server::TcpIncoming;

use super::bind::Bound;
use super::build::Parts;
use super::running::Running;
use crate::app::AppRegistry;
use crate::config::reload::QUOTA_KEYS;
use crate::config::Config;
use crate::coordinator::service::CoordinatorService;
use crate::error::Result;
use crate::grpc::{InternalService, ShuffleService};
use crate::ids::AppId;
use crate::limits::grpc::{RequestLimitLayer, TrackedConn};
use crate::limits::{ConnectionLimits, ConnectionTable, RequestLimits};
use crate::periodic::Schedule;
use crate::store::quota::QuotaLimits;

/// Starts every task of the server over `parts`, serving on `bound`.
pub(super) fn run(config: Config, bound: Bound, parts: Parts) -> Result<Running> {
    let Bound {
        grpc,
        grpc_addr,
        netty,
        http: bound_http,
        http_addr,
        https,
        server_id,
        identity,
    } = bound;
    let netty_addr = netty.as_ref().map(|(_, addr)| *addr);
    let https_addr = https.as_ref().map(|h| h.addr);
    let Parts {
        tracker,
        stops,
        metrics,
        audit,
        coordinator,
        state_lock,
        budget,
        local,
        hdfs,
        object,
        health_checks,
        recovery,
        registry,
    } = parts;
    let tasks_stop = &stops.tasks;
    let mem = &config.memory_store;
    let lf = &config.localfile_store;

    let every = |interval| Schedule::new(interval, tasks_stop.clone(), &tracker);
    if let Some(local) = &local {
        local.spawn_health_checks(every(lf.disk_health_check_interval));
    }
    registry
        .tickets()
        .spawn_sweeper(every(mem.buffer_ticket_check_interval));
    // Every `leak_check_interval`: this server's files and objects of apps it no longer
    // knows (Java's `checkAndClearLeakedShuffleData`), disks first, then object storage.
    if local.is_some() || object.is_some() {
        let (local, object, registry) = (local.clone(), object.clone(), Arc::clone(&registry));
        crate::periodic::periodic(
            &tracker,
            lf.leak_check_interval,
            tasks_stop.clone(),
            move || {
                let (local, object) = (local.clone(), object.clone());
                let registry = Arc::clone(&registry);
                async move {
                    let live = |app: &AppId| registry.is_registered(app);
                    if let Some(local) = local {
                        local.sweep_leaked(live).await;
                    }
                    if let Some(object) = object {
                        object.sweep_leaked(live).await;
                    }
                }
            },
        );
    }
    if let Some(r) = &recovery {
        let seen = Arc::clone(&registry);
        r.spawn_seen(
            move || seen.seen_apps(),
            (config.app.app_heartbeat_timeout / 6)
                .clamp(Duration::from_secs(1), Duration::from_secs(10)),
            tasks_stop.clone(),
            &tracker,
        );
    }
    registry.spawn_expiry(every(config.app.expiry_check_interval));
    crate::tasks::release::spawn(
        Arc::clone(&registry),
        Duration::from_secs(1),
        tasks_stop.clone(),
        &tracker,
    );

    spawn_status_watcher(
        Arc::clone(&registry),
        config
            .app
            .expiry_check_interval
            .min(lf.disk_health_check_interval),
        config
            .shutdown
            .after_decommission
            .then(|| stops.itself.clone()),
        tasks_stop.clone(),
        &tracker,
    );
    if let Some(checks) = health_checks {
        checks.spawn(registry.status().clone(), tasks_stop.clone(), &tracker);
    }

    if let Some(coordinator) = &coordinator {
        coordinator.spawn_sweeper(tasks_stop.clone(), &tracker);
        coordinator.spawn_watchers(tasks_stop.clone(), &tracker);
        crate::coordinator::dashboard::sampler::spawn(
            Arc::clone(coordinator),
            tasks_stop.clone(),
            &tracker,
        );
        tracing::info!("embedded coordinator enabled on the gRPC port");
        metrics.attach_coordinator(Arc::clone(coordinator) as Arc<_>, false)?;
    }

    let limits = &config.limits;
    let limit_metrics = Arc::clone(metrics.limits());
    let request_limits = RequestLimits::new(limits, Arc::clone(&limit_metrics));
    let planes = if netty.is_some() { 2 } else { 1 };
    let max_total = crate::limits::fit_open_files(limits.max_connections, planes);
    let connection_limits = ConnectionLimits {
        max_total,
        max_per_address: limits.max_connections_per_address.min(max_total),
        idle_timeout: limits.idle_timeout,
        stall_timeout: limits.stall_timeout,
    };
    let grpc_connections =
        ConnectionTable::new("grpc", connection_limits, Arc::clone(&limit_metrics));
    grpc_connections.spawn_sweeper(tasks_stop.clone(), &tracker);
    // Released clients only send what requireBuffer reserved, so the gRPC budget sits above
    // the write capacity: only requests beyond what the protocol allows ever meet it.
    let grpc_budget = (limits.receive_budget.as_u64() + mem.capacity.as_u64())
        .min(crate::protocol::MAX_REQUEST_SIZE as u64 * 4) as usize;
    let grpc_limits = RequestLimitLayer::new(
        grpc_budget,
        limits.stall_timeout,
        Arc::clone(&limit_metrics),
    );
    let grpc_task = {
        let router = tonic::transport::Server::builder()
            .initial_stream_window_size(Some(4 << 20))
            .initial_connection_window_size(Some(16 << 20))
            .layer(metrics.grpc().layer())
            .layer(grpc_limits)
            .add_service(
                ShuffleService::new(Arc::clone(&registry), request_limits.clone())
                    .with_audit(audit.rpc.clone())
                    .into_server(grpc_budget.min(limits.max_request_size.as_u64() as usize)),
            )
            .add_service(InternalService::new(Arc::clone(&registry)).into_server())
            .add_optional_service(coordinator.clone().map(|c| {
                CoordinatorService::new(c)
                    .with_audit(audit.coordinator_rpc.clone())
                    .into_server()
            }));
        // Nagle plus delayed ACKs stall small replies by ~40 ms; the builder's own
        // `tcp_nodelay` does not apply to an incoming stream we bind ourselves.
        let incoming = TcpIncoming::from(grpc).with_nodelay(Some(true));
        let grpc_metrics = Arc::clone(metrics.grpc());
        let table = Arc::clone(&grpc_connections);
        // Every connection is accepted and put in the table; over a cap the table closes an
        // idle one, or this one (dropped here, which closes the socket).
        let incoming =
            tokio_stream::StreamExt::filter_map(incoming, move |accepted| match accepted {
                Ok(conn) => {
                    let peer = conn.peer_addr().ok()?;
                    let lease = table.admit(peer).ok()?;
                    Some(Ok(
                        grpc_metrics.count_connection(TrackedConn::new(conn, lease))
                    ))
                }
                Err(e) => Some(Err(e)),
            });
        let stop = stops.grpc.clone();
        tracker.spawn(async move {
            router
                .serve_with_incoming_shutdown(incoming, stop.cancelled())
                .await
        })
    };
    let netty_task = netty.map(|(listener, _)| {
        let shared = crate::netty::NettyShared {
            registry: Arc::clone(&registry),
            metrics: Arc::clone(metrics.netty()),
            connections: {
                let table =
                    ConnectionTable::new("netty", connection_limits, Arc::clone(&limit_metrics));
                table.spawn_sweeper(tasks_stop.clone(), &tracker);
                table
            },
            limits: request_limits.clone(),
            limit_metrics: Arc::clone(&limit_metrics),
            audit: audit.rpc.clone(),
        };
        let options = crate::netty::NettyOptions {
            receive_budget: limits.receive_budget.as_u64() as usize,
            max_frame: crate::protocol::MAX_REQUEST_SIZE,
            stall_timeout: limits.stall_timeout,
        };
        tracker.spawn(crate::netty::serve(
            listener,
            shared,
            options,
            stops.grpc.clone(),
        ))
    });
    // What reacts to runtime reconfiguration: Java's listeners of the shuffle server.
    let runtime = crate::config::reload::Runtime::new(config.clone());
    {
        let quotas = Arc::clone(registry.store().router().quotas());
        let rpc = audit.rpc.clone();
        runtime.listen(
            &["audit.rpc_log", "audit.rpc_exclude"],
            Box::new(move |c| {
                rpc.reconfigure(&c.audit).map_err(|e| {
                    format!("audit.rpc_log_path {}: {e}", c.audit.rpc_log_path.display())
                })
            }),
        );
        let registry = Arc::clone(&registry);
        runtime.listen(
            &[
                "hybrid_store.huge_partition_size_threshold",
                "hybrid_store.huge_partition_hard_limit",
                "hybrid_store.huge_partition_split_limit",
            ],
            Box::new(move |c| {
                let h = &c.hybrid_store;
                registry.set_huge_partition_limits(
                    h.huge_partition_size_threshold.as_u64(),
                    h.huge_partition_hard_limit.map(|b| b.as_u64()),
                    h.huge_partition_split_limit.map(|b| b.as_u64()),
                );
                Ok(())
            }),
        );
        if let Some(coordinator) = &coordinator {
            coordinator.follow_reloads(&runtime);
        }
        let shares = budget.clone();
        let budget = budget.clone();
        runtime.listen(
            &[
                "hybrid_store.memory_spill_high_watermark",
                "hybrid_store.memory_spill_low_watermark",
            ],
            Box::new(move |c| {
                let h = &c.hybrid_store;
                budget.set_watermarks(h.memory_spill_high_watermark, h.memory_spill_low_watermark);
                Ok(())
            }),
        );
        runtime.listen(
            &QUOTA_KEYS,
            Box::new(move |c| {
                quotas.set_limits(QuotaLimits::from_config(&c.quota));
                shares.set_app_share(c.quota.app_memory_share.ratio());
                Ok(())
            }),
        );
    }
    crate::config::reload::spawn_file_watch(
        Arc::clone(&runtime),
        &config,
        tasks_stop.clone(),
        &tracker,
    );
    let http = crate::http::router(Arc::new(crate::http::HttpState {
        metrics: Arc::clone(&metrics),
        registry: Arc::clone(&registry),
        config: config.clone(),
        runtime: Arc::clone(&runtime),
        server_id: server_id.clone(),
        stop: stops.late.clone(),
        coordinator: coordinator.as_ref().map(|c| {
            Arc::new(crate::coordinator::rest::RestContext {
                coordinator: Arc::clone(c),
                ip: identity.ip.clone(),
                grpc_port: identity.grpc_port,
                http_port: identity.jetty_port,
                start_time_ms: identity.start_time_ms,
            })
        }),
    }));
    crate::http::spawn(&tracker, bound_http, https, http, &stops.late);
    crate::tasks::push_gateway::spawn_configured(
        &metrics,
        &config,
        &runtime,
        &server_id,
        &stops.late,
        &tracker,
    )?;
    crate::tasks::heartbeat::spawn(
        Arc::clone(&registry),
        local.clone(),
        identity,
        heartbeat_targets(&config, grpc_addr),
        config.heartbeat_interval,
        tasks_stop.clone(),
        &tracker,
    );
    tracing::info!(%grpc_addr, ?netty_addr, %http_addr, ?https_addr, server_id, "spillway listening");
    Ok(Running {
        grpc_addr,
        netty_addr,
        http_addr,
        https_addr,
        server_id,
        registry,
        local,
        hdfs,
        coordinator,
        config,
        stops,
        grpc_task,
        netty_task,
        metrics,
        tracker,
        recovery,
        state_lock,
        audit,
    })
}

/// The coordinators to heartbeat: the configured quorum, plus this server's own address when
/// it runs the embedded coordinator (so a single binary is a complete service).
fn heartbeat_targets(config: &Config, grpc_addr: SocketAddr) -> Vec<String> {
    let mut targets = config.coordinator_quorum.clone();
    if config.coordinator.enabled && config.coordinator.register_self {
        let ip = if grpc_addr.ip().is_unspecified() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            grpc_addr.ip()
        };
        let own = SocketAddr::new(ip, grpc_addr.port()).to_string();
        if !targets.contains(&own) {
            targets.push(own);
        }
    }
    targets
}

/// Keeps the server status in step with reality: UNHEALTHY while no file tier can take
/// spills (local disks, HDFS failing) or `[health]`'s checks fail, and DECOMMISSIONING → DECOMMISSIONED once no app is left, which then asks the server
/// to stop.
fn spawn_status_watcher(
    registry: Arc<AppRegistry>,
    interval: Duration,
    // None: stay up once decommissioned (`shutdown.after_decommission = false`).
    self_stop: Option<CancellationToken>,
    cancel: CancellationToken,
    tracker: &TaskTracker,
) {
    tracker.spawn(async move {
        let mut changes = registry.status().subscribe();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = changes.changed() => {}
                _ = tokio::time::sleep(interval) => {}
            }
            let health = registry.store().health();
            // Also re-applies the health checks' verdict after a status change by others (a
            // cancelled decommission of a server whose checks fail is UNHEALTHY at once).
            if registry.status().set_storage_healthy(health.writable) {
                if registry.status().get() == crate::proto::ServerStatus::Unhealthy {
                    tracing::warn!(storage_writable = health.writable, detail = %health.detail, "status UNHEALTHY");
                } else {
                    tracing::info!("storage writable and health checks pass: status ACTIVE");
                }
            }
            if registry.status().get() == crate::proto::ServerStatus::Decommissioning
                && registry.app_count() == 0
                && registry.status().finish_decommission()
            {
                match &self_stop {
                    Some(stop) => {
                        tracing::info!("decommissioned: no apps left");
                        stop.cancel();
                    }
                    None => tracing::info!(
                        "decommissioned: no apps left; staying up (shutdown.after_decommission \
                         = false) until cancel_decommission or a stop"
                    ),
                }
            }
        }
    });
}
