//! `start(Config)` builds every part once, binds the gRPC port and returns a [`Running`]
//! handle; [`Running::shutdown`] stops everything in order, each step time-bounded:
//!
//! 1. stop accepting gRPC and Netty and drain in-flight requests (both under one drain
//!    timeout); Netty connections finish the frame they are handling, then close;
//! 2. stop side tasks (ticket sweeper, app expiry, disk checks, decommission watcher,
//!    coordinator heartbeats);
//! 3. spill memory to the file tier, bounded by `shutdown.spill_timeout`, then close the HDFS
//!    files kept open between appends;
//! 4. push metrics one last time (push gateway) and stop the HTTP port;
//! 5. stop spill retries and wait for the remaining tasks.
//!
//! [`coordinator_process`] is the other composition root: the coordinator-only process.

pub mod coordinator_process;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::transport::server::TcpIncoming;

use crate::app::{AppRegistry, RegistryOptions};
use crate::audit::AuditLogs;
use crate::config::Config;
use crate::coordinator::service::CoordinatorService;
use crate::coordinator::Coordinator;
use crate::error::{Error, Result};
use crate::grpc::{InternalService, ShuffleService};
use crate::limits::grpc::{RequestLimitLayer, TrackedConn};
use crate::limits::{ConnectionLimits, ConnectionTable, RequestLimits};
use crate::listen::listen;
use crate::memory::{MemoryBudget, ReadBudget, Tickets};
use crate::metrics::Metrics;
use crate::recovery::{JournalOptions, Recovery, RecoveryReport, StateLock};
use crate::status::ServerStatus;
use crate::store::hdfs::{Background, HdfsOptions, HdfsTier, Identity};
use crate::store::localfile::{LocalFileOptions, LocalFileTier};
use crate::store::memory::MemoryTier;
use crate::store::object::{ObjectOptions, ObjectTier};
use crate::store::router::TierRouter;
use crate::store::spill::SpillOptions;
use crate::store::tiered::TieredStore;
use crate::store::{FileTier, Tier};

/// A started server.
pub struct Running {
    /// Where gRPC listens.
    pub grpc_addr: SocketAddr,
    /// Where the Netty data plane listens; `None` when `netty_port = -1`.
    pub netty_addr: Option<SocketAddr>,
    /// Where the HTTP port (metrics, admin, pprof) listens; reported as `jetty_port`.
    pub http_addr: SocketAddr,
    /// Where HTTPS listens (`[metrics.https]`, Java's `rss.jetty.https.port`); `None` without.
    pub https_addr: Option<SocketAddr>,
    /// `<ip>-<grpcPort>` (`<ip>-<grpcPort>-<nettyPort>` with Netty, as Java): the id reported
    /// to coordinators and used as the file-name prefix.
    pub server_id: String,
    registry: Arc<AppRegistry>,
    /// Local disks (`MEMORY_LOCALFILE`, `MEMORY_LOCALFILE_HDFS`).
    local: Option<Arc<LocalFileTier>>,
    /// HDFS (`MEMORY_HDFS`, `MEMORY_LOCALFILE_HDFS`).
    hdfs: Option<Arc<HdfsTier>>,
    /// The embedded coordinator, when `coordinator.enabled`.
    coordinator: Option<Arc<Coordinator>>,
    config: Config,
    /// Stops accepting gRPC (step 1).
    grpc_stop: CancellationToken,
    grpc_task: tokio::task::JoinHandle<std::result::Result<(), tonic::transport::Error>>,
    /// The Netty plane, stopped by `grpc_stop` too; aborting it closes its connections.
    netty_task: Option<tokio::task::JoinHandle<()>>,
    /// Stops side tasks and the watermark loop (step 2).
    tasks_stop: CancellationToken,
    /// Stops spill retries (step 5).
    spill_stop: CancellationToken,
    /// Final metrics push and the HTTP port (step 4).
    late_stop: CancellationToken,
    metrics: Arc<Metrics>,
    /// Fired by the server itself when it wants to stop (decommissioned).
    self_stop: CancellationToken,
    tracker: TaskTracker,
    /// Restart recovery: what it did at start, and the journal flushed at shutdown.
    recovery: Option<Recovery>,
    /// Held until the very end of shutdown: a successor waits for it.
    state_lock: Option<StateLock>,
    /// The audit logs, flushed once both planes have drained.
    audit: AuditLogs,
}

/// What a shutdown did, for the log and for tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// In-flight requests did not finish within the drain timeout.
    pub drain_timed_out: bool,
    /// Memory was not fully spilled within the spill timeout.
    pub spill_timed_out: bool,
    /// Bytes still in memory at exit (0 after a complete spill).
    pub bytes_left_in_memory: u64,
}

/// Builds the server from `config` and starts serving.
pub async fn start(config: Config) -> Result<Running> {
    let bind: SocketAddr = SocketAddr::new(
        config
            .bind_ip
            .parse::<IpAddr>()
            .map_err(|e| Error::Startup(format!("bind_ip {:?}: {e}", config.bind_ip)))?,
        config.grpc_port,
    );
    let takeover = config.recovery.takeover;
    let listener = listen(bind, "gRPC", takeover)?;
    let grpc_addr = listener
        .local_addr()
        .map_err(|e| Error::Startup(format!("local address of {bind}: {e}")))?;
    let netty_listener = match u16::try_from(config.netty_port) {
        // -1: the plane is off.
        Err(_) => None,
        Ok(port) => {
            let bind = SocketAddr::new(bind.ip(), port);
            let listener = listen(bind, "Netty", takeover)?;
            let addr = listener
                .local_addr()
                .map_err(|e| Error::Startup(format!("local address of {bind}: {e}")))?;
            Some((listener, addr))
        }
    };
    let netty_addr = netty_listener.as_ref().map(|(_, addr)| *addr);
    let ip = config
        .worker_ip
        .clone()
        .unwrap_or_else(crate::listen::host_ip);
    let server_id = match netty_addr {
        Some(netty) => format!("{ip}-{}-{}", grpc_addr.port(), netty.port()),
        None => format!("{ip}-{}", grpc_addr.port()),
    };

    let http_listener = crate::http::bind(
        SocketAddr::new(bind.ip(), config.metrics.http_port),
        takeover,
    )?;
    let http_addr = http_listener
        .local_addr()
        .map_err(|e| Error::Startup(format!("local address of the HTTP port: {e}")))?;
    // Key material before anything else starts, so a bad keystore stops start-up at once.
    let https = crate::http::bind_https(config.metrics.https.as_ref(), bind.ip(), takeover)?;
    let https_addr = https.as_ref().map(|h| h.addr);
    let mut transport_tags = vec![crate::tasks::heartbeat::TAG_GRPC.to_owned()];
    if netty_addr.is_some() {
        transport_tags.push(crate::tasks::heartbeat::TAG_GRPC_NETTY.to_owned());
    }
    let identity = crate::tasks::heartbeat::Identity {
        server_id: server_id.clone(),
        ip,
        grpc_port: grpc_addr.port(),
        netty_port: netty_addr.map_or(0, |a| a.port()),
        jetty_port: http_addr.port(),
        transport_tags,
        tags: config.tags.clone(),
        start_time_ms: crate::clock::now_ms(),
    };
    let metrics = Metrics::new(&identity.all_tags())?;
    let audit_dropped = crate::audit::dropped_counter(metrics.tags())
        .map_err(|e| Error::Startup(format!("audit metrics: {e}")))?;
    metrics.register_server(Box::new(audit_dropped.clone()))?;
    let audit = AuditLogs::open(&config.audit, config.coordinator.enabled, &audit_dropped)?;

    // Before any task starts, so a refused coordinator file leaves nothing running.
    let coordinator = match config.coordinator.enabled {
        true => Some(Arc::new(
            Coordinator::open((&config.coordinator).into()).map_err(Error::Startup)?,
        )),
        false => None,
    };
    let tracker = TaskTracker::new();
    let tasks_stop = CancellationToken::new();
    let spill_stop = CancellationToken::new();
    let late_stop = CancellationToken::new();

    let mem = &config.memory_store;
    let hybrid = &config.hybrid_store;
    let lf = &config.localfile_store;
    if let Some(warning) = config.memory_headroom_warning() {
        tracing::warn!("{warning}");
    }

    // Settings mistakes stop the server here, each with its key named, before the state lock
    // would fail on the same path with a message about a lock file.
    if config.store_type.uses_localfile() {
        crate::store::localfile::check_data_paths(&lf.data_paths, lf.init_max_failed_paths)?;
    }
    if config.store_type.uses_hdfs() {
        crate::store::hdfs::conf_files::check().map_err(Error::Startup)?;
    }

    // The state lock before anything reads or writes the data paths: with `takeover` this
    // waits (ports already bound, clients queueing) until the old process saved everything.
    let journal_dirs = if config.recovery.enabled {
        let data_paths: &[std::path::PathBuf] = if config.store_type.uses_localfile() {
            &lf.data_paths
        } else {
            &[]
        };
        let dirs = Recovery::dirs(config.recovery.dir.as_ref(), data_paths);
        if dirs.is_empty() {
            tracing::warn!(
                "restart recovery is off: store_type has no data paths and recovery.dir is not set"
            );
        }
        dirs
    } else {
        Vec::new()
    };
    let state_lock = if journal_dirs.is_empty() {
        None
    } else {
        let dirs = journal_dirs.clone();
        let wait =
            config.shutdown.drain_timeout + config.shutdown.spill_timeout + Duration::from_secs(30);
        Some(
            crate::runtime::blocking(move || crate::recovery::acquire_lock(&dirs, takeover, wait))
                .await
                .map_err(|e| Error::Startup(format!("state lock task failed: {e}")))??,
        )
    };

    let budget = MemoryBudget::new(
        mem.capacity.as_u64(),
        hybrid.memory_spill_high_watermark,
        hybrid.memory_spill_low_watermark,
    );
    let local = if config.store_type.uses_localfile() {
        let local = LocalFileTier::new(LocalFileOptions {
            data_paths: lf.data_paths.clone(),
            file_prefix: server_id.clone(),
            capacity: lf.disk_capacity.map(|c| c.as_u64()),
            capacity_ratio: lf.disk_capacity_ratio,
            high_watermark: lf.disk_high_watermark,
            low_watermark: lf.disk_low_watermark,
            whole_disk_watermark: lf.disk_usage_watermark_check,
            init_max_failed_paths: lf.init_max_failed_paths,
            min_writable_disks: lf.healthy_check_min_disks,
            max_concurrency_per_disk: lf.disk_max_concurrency,
            sync_on_write: lf.sync_on_write,
            direct_io: lf.direct_io,
            write_timeout: lf.write_timeout,
        })?;
        local.spawn_health_checks(lf.disk_health_check_interval, tasks_stop.clone(), &tracker);
        Some(local)
    } else {
        None
    };
    // Built before serving so a missing health script stops start-up, as in Java.
    let health_checks = crate::health::HealthChecks::new(&config.health, local.as_ref())?;
    let hdfs = config.store_type.uses_hdfs().then(|| {
        let h = &config.hdfs_store;
        let hadoop_conf: Vec<(String, String)> = h
            .hadoop_conf
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        HdfsTier::with_background(
            HdfsOptions {
                file_prefix: server_id.clone(),
                max_concurrency: h.max_concurrency,
                partition_write_max_concurrency: h.partition_write_max_concurrency,
                partition_write_max_concurrency_limit: h.partition_write_max_concurrency_limit,
                write_timeout: h.write_timeout,
                failure_cooldown: h.failure_cooldown,
                keep_open: h.keep_open,
                max_open_pairs: h.max_open_pairs,
                identity: {
                    let identity = Identity::resolve(
                        h.kerberos_principal.clone(),
                        h.kerberos_keytab.as_ref().map(|p| p.display().to_string()),
                        h.user.clone(),
                        h.write_as,
                        &hadoop_conf,
                    );
                    tracing::info!(write_as = ?h.write_as, "{}", identity.describe());
                    identity
                },
                hadoop_conf,
            },
            Background {
                tracker: tracker.clone(),
                stop: tasks_stop.clone(),
            },
        )
    });

    // Replay the journal and adopt the data files before the registry exists.
    let mut recovery = if journal_dirs.is_empty() {
        None
    } else {
        let opts = JournalOptions {
            dirs: journal_dirs,
            sync: lf.sync_on_write,
            compact_size: config.recovery.compact_size.as_u64(),
            server_id: server_id.clone(),
            write_timeout: lf.write_timeout,
        };
        let app_timeout = config.app.app_heartbeat_timeout;
        let tier = local.clone();
        Some(
            crate::runtime::blocking(move || Recovery::open(opts, app_timeout, tier.as_deref()))
                .await
                .map_err(|e| Error::Startup(format!("recovery task failed: {e}")))??,
        )
    };

    let hot = Arc::new(MemoryTier::new(budget.clone()));
    let spill = SpillOptions {
        concurrency: hybrid.spill_concurrency,
        single_buffer_limit: hybrid.memory_single_buffer_max_spill_size.as_u64(),
        single_buffer_spill: hybrid.memory_single_buffer_spill,
        max_backoff: hybrid.spill_retry_max_backoff,
        append_timeout: crate::store::spill::APPEND_TIMEOUT,
        hdfs_concurrency: config
            .store_type
            .uses_hdfs()
            .then_some(config.hdfs_store.max_concurrency),
        audit: audit.storage.clone(),
    };
    // Server-side file reads (getLocalShuffleIndex/Data) come from local disks only; clients
    // read HDFS directly.
    let warm: Option<Arc<dyn FileTier>> = local.clone().map(|l| l as Arc<dyn FileTier>);
    // Object storage goes with HDFS: the remote tier of an app is whichever its path names.
    let object = hdfs.as_ref().map(|_| {
        let h = &config.hdfs_store;
        ObjectTier::new(ObjectOptions {
            file_prefix: server_id.clone(),
            max_concurrency: h.max_concurrency,
            write_timeout: h.write_timeout,
            failure_cooldown: h.failure_cooldown,
            hadoop_conf: h
                .hadoop_conf
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    });
    let router = Arc::new(TierRouter::new(
        config.store_type,
        local.clone().map(|l| l as Arc<dyn Tier>),
        hdfs.clone(),
        object.clone(),
        config.hdfs_store.cold_storage_threshold_size.as_u64(),
    )?);
    if hdfs.is_some() {
        tracing::info!(store_type = ?config.store_type, "spills go through the remote-tier router (HDFS or object storage, by the app's path)");
    }
    let store = Arc::new(TieredStore::with_router(
        hot,
        warm,
        router,
        spill,
        tasks_stop.clone(),
        spill_stop.clone(),
        tracker.clone(),
    ));

    let tickets = Arc::new(Tickets::new(mem.buffer_ticket_timeout));
    tickets.spawn_sweeper(
        mem.buffer_ticket_check_interval,
        tasks_stop.clone(),
        &tracker,
    );

    let status = ServerStatus::default();
    let registry = Arc::new(AppRegistry::new(
        store,
        tickets,
        ReadBudget::new(mem.read_capacity.as_u64()),
        status.clone(),
        RegistryOptions {
            app_timeout: config.app.app_heartbeat_timeout,
            huge_partition_threshold: hybrid.huge_partition_size_threshold.as_u64(),
            huge_partition_memory_limit: (mem.capacity.as_u64() as f64
                * hybrid.huge_partition_memory_limit_ratio)
                as u64,
            huge_partition_hard_limit: hybrid.huge_partition_hard_limit.map(|b| b.as_u64()),
            huge_partition_split_limit: hybrid.huge_partition_split_limit.map(|b| b.as_u64()),
            index_read_hint: 2 << 20,
            commit_timeout: config.app.commit_timeout,
            commit_waits_for_spill: !config.store_type.with_memory(),
            require_buffer_wait: mem.require_buffer_wait,
        },
        tracker.clone(),
    ));
    if let Some(local) = &local {
        let (local, registry) = (Arc::clone(local), Arc::clone(&registry));
        crate::periodic::periodic(
            &tracker,
            lf.leak_check_interval,
            tasks_stop.clone(),
            move || {
                let (local, registry) = (Arc::clone(&local), Arc::clone(&registry));
                async move {
                    local.sweep_leaked(|app| registry.is_registered(app)).await;
                }
            },
        );
    }
    // The same sweep over object storage: this server's objects of apps it no longer knows.
    if let Some(object) = &object {
        let (object, registry) = (Arc::clone(object), Arc::clone(&registry));
        crate::periodic::periodic(
            &tracker,
            lf.leak_check_interval,
            tasks_stop.clone(),
            move || {
                let (object, registry) = (Arc::clone(&object), Arc::clone(&registry));
                async move {
                    object.sweep_leaked(|app| registry.is_registered(app)).await;
                }
            },
        );
    }
    if let Some(r) = recovery.as_mut() {
        registry.attach_recovery(r);
        let seen = Arc::clone(&registry);
        r.spawn_seen(
            move || seen.seen_apps(),
            (config.app.app_heartbeat_timeout / 6)
                .clamp(Duration::from_secs(1), Duration::from_secs(10)),
            tasks_stop.clone(),
            &tracker,
        );
    }
    if config.metrics.block_size_statistics {
        registry.enable_block_sizes(
            config
                .metrics
                .block_size_buckets
                .iter()
                .map(|b| b.as_u64())
                .collect(),
        );
    }
    let server_families = crate::app::server_metrics::ServerCollector::new(
        Arc::clone(&registry),
        local.clone(),
        config.metrics.top_n_apps,
        metrics.tags(),
    )
    .map_err(|e| Error::Startup(format!("metrics registration: {e}")))?;
    metrics.attach_server(Box::new(server_families))?;
    registry.spawn_expiry(
        config.app.expiry_check_interval,
        tasks_stop.clone(),
        &tracker,
    );
    crate::tasks::release::spawn(
        Arc::clone(&registry),
        Duration::from_secs(1),
        tasks_stop.clone(),
        &tracker,
    );

    let self_stop = CancellationToken::new();
    spawn_status_watcher(
        Arc::clone(&registry),
        config
            .app
            .expiry_check_interval
            .min(lf.disk_health_check_interval),
        config
            .shutdown
            .after_decommission
            .then(|| self_stop.clone()),
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

    let grpc_stop = CancellationToken::new();
    let limits = &config.limits;
    let limit_metrics = Arc::clone(metrics.limits());
    let request_limits = RequestLimits::new(limits, Arc::clone(&limit_metrics));
    let planes = if netty_listener.is_some() { 2 } else { 1 };
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
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
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
        let stop = grpc_stop.clone();
        tokio::spawn(async move {
            router
                .serve_with_incoming_shutdown(incoming, stop.cancelled())
                .await
        })
    };
    let netty_task = netty_listener.map(|(listener, _)| {
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
        tokio::spawn(crate::netty::serve(
            listener,
            shared,
            options,
            grpc_stop.clone(),
        ))
    });
    // What reacts to runtime reconfiguration: Java's listeners of the shuffle server.
    let runtime = crate::config::reload::Runtime::new(config.clone());
    {
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
            let coordinator = Arc::clone(coordinator);
            runtime.listen(
                &["coordinator.shuffle_server_number"],
                Box::new(move |c| {
                    coordinator.set_shuffle_nodes_max(c.coordinator.shuffle_server_number);
                    Ok(())
                }),
            );
        }
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
    }
    if let Some(path) = &config.source_path {
        crate::config::reload::spawn_file_watch(
            Arc::clone(&runtime),
            path.clone(),
            config.reconfigure_interval,
            |name| std::env::var(name).ok(),
            tasks_stop.clone(),
            &tracker,
        );
    }
    let http = crate::http::router(Arc::new(crate::http::HttpState {
        metrics: Arc::clone(&metrics),
        registry: Arc::clone(&registry),
        config: config.clone(),
        runtime: Arc::clone(&runtime),
        server_id: server_id.clone(),
        stop: late_stop.clone(),
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
    crate::http::spawn(&tracker, http_listener, https, http, &late_stop);
    crate::tasks::push_gateway::spawn_configured(
        &metrics, &config, &runtime, &server_id, &late_stop, &tracker,
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
        grpc_stop,
        grpc_task,
        netty_task,
        tasks_stop,
        spill_stop,
        late_stop,
        metrics,
        self_stop,
        tracker,
        recovery,
        state_lock,
        audit,
    })
}

impl Running {
    /// The app registry (tests assert on its state).
    pub fn registry(&self) -> &Arc<AppRegistry> {
        &self.registry
    }

    /// The local-file tier, when the store type has one (tests read its disk reports).
    pub fn local_tier(&self) -> Option<&Arc<LocalFileTier>> {
        self.local.as_ref()
    }

    /// The HDFS tier, when the store type has one.
    pub fn hdfs_tier(&self) -> Option<&Arc<HdfsTier>> {
        self.hdfs.as_ref()
    }

    /// What restart recovery did at start-up (`None` when recovery is off).
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.recovery.as_ref().map(|r| r.report())
    }

    /// The metric registries (what `/metrics` serves).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The embedded coordinator (`coordinator.enabled`), e.g. for tests to read its servers.
    pub fn coordinator(&self) -> Option<&Arc<Coordinator>> {
        self.coordinator.as_ref()
    }

    /// Resolves when the server decided to stop by itself (decommissioned with no apps).
    pub fn stopped_by_itself(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.self_stop.cancelled()
    }

    /// Whether the server has decided to stop by itself.
    pub fn has_stopped_by_itself(&self) -> bool {
        self.self_stop.is_cancelled()
    }

    /// Runs until `signal` resolves or the server stops by itself, then shuts down.
    pub async fn run_until(self, signal: impl std::future::Future<Output = ()>) -> ShutdownReport {
        tokio::select! {
            _ = signal => tracing::info!("shutdown signal received"),
            _ = self.self_stop.cancelled() => tracing::info!("decommissioned: stopping"),
        }
        self.shutdown().await
    }

    /// Stops the server in order (see the module doc); each step is bounded.
    pub async fn shutdown(self) -> ShutdownReport {
        let mut report = ShutdownReport::default();
        let cfg = &self.config.shutdown;

        self.grpc_stop.cancel();
        let drain_deadline = tokio::time::Instant::now() + cfg.drain_timeout;
        let mut grpc_task = self.grpc_task;
        match timed("drain gRPC", cfg.drain_timeout, &mut grpc_task).await {
            Some(Ok(Ok(()))) => {}
            Some(Ok(Err(e))) => tracing::warn!(error = %e, "gRPC server ended with an error"),
            Some(Err(e)) => tracing::warn!(error = %e, "gRPC task failed"),
            None => {
                report.drain_timed_out = true;
                grpc_task.abort();
            }
        }
        if let Some(mut netty_task) = self.netty_task {
            let left = drain_deadline.saturating_duration_since(tokio::time::Instant::now());
            match timed("drain Netty", left, &mut netty_task).await {
                Some(Ok(())) => {}
                Some(Err(e)) => tracing::warn!(error = %e, "Netty task failed"),
                None => {
                    report.drain_timed_out = true;
                    netty_task.abort();
                }
            }
        }

        // Every request has answered (or been cut off): its audit line is queued.
        if timed(
            "flush audit logs",
            Duration::from_secs(10),
            self.audit.close(),
        )
        .await
        .is_none()
        {
            tracing::warn!("audit logs not flushed in time");
        }

        self.tasks_stop.cancel();

        let store = Arc::clone(self.registry.store());
        // Hand every buffer to the spiller at once, then wait for all of them: one failing
        // partition must not keep the others from being written.
        let spill = store.flush_all();
        if timed("spill memory", cfg.spill_timeout, spill)
            .await
            .is_none()
        {
            report.spill_timed_out = true;
        }
        report.bytes_left_in_memory = store.memory().budget().snapshot().used;
        if let Some(hdfs) = &self.hdfs {
            // What is in them is visible already; closing ends their files and leases here
            // rather than by the NameNode's lease recovery an hour later.
            if timed(
                "close HDFS files",
                Duration::from_secs(10),
                hdfs.close_open_pairs(),
            )
            .await
            .is_none()
            {
                tracing::warn!("open HDFS files not closed in time; the NameNode recovers them");
            }
        }
        if let Some(r) = &self.recovery {
            // Drops and commits are queued without waiting; make them durable before the
            // successor (waiting on the lock) replays the journal.
            if let Err(e) = r.journal().flush().await {
                tracing::error!(error = %e, "could not flush the journal at shutdown");
            }
        }

        // Final push of the numbers after the spill, then the HTTP port closes.
        self.late_stop.cancel();
        self.spill_stop.cancel();
        self.tracker.close();
        if timed("stop tasks", Duration::from_secs(10), self.tracker.wait())
            .await
            .is_none()
        {
            tracing::warn!("some background tasks did not stop in time");
        }
        if let Some(r) = &self.recovery {
            // The last-seen task wrote its final record on the way out.
            let _ = r.journal().flush().await;
        }
        // The final spill and the background purges have logged their storage lines.
        if timed(
            "flush storage audit log",
            Duration::from_secs(10),
            self.audit.close_storage(),
        )
        .await
        .is_none()
        {
            tracing::warn!("storage audit log not flushed in time");
        }
        drop(self.state_lock);
        tracing::info!(?report, "spillway stopped");
        report
    }
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

/// Runs `fut` with a deadline, logging how long the step took.
async fn timed<F: std::future::Future>(step: &str, budget: Duration, fut: F) -> Option<F::Output> {
    let started = tokio::time::Instant::now();
    let out = tokio::time::timeout(budget, fut).await.ok();
    match &out {
        Some(_) => tracing::info!(step, elapsed = ?started.elapsed(), "shutdown step done"),
        None => tracing::warn!(step, ?budget, "shutdown step timed out"),
    }
    out
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
