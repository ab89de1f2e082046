//! Start-up, phase 2: every part built once from the config, in dependency order, with
//! nothing served yet: the metrics and audit logs, the embedded coordinator, the state lock
//! (with `takeover`, the wait for the old process), the tiers, the journal's replay, and the
//! app registry over them. A settings mistake stops the server here with its key named.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bind::Bound;
use crate::app::{AppRegistry, RegistryOptions};
use crate::audit::AuditLogs;
use crate::config::Config;
use crate::coordinator::Coordinator;
use crate::error::{Error, Result};
use crate::health::HealthChecks;
use crate::memory::{MemoryBudget, ReadBudget, Tickets};
use crate::metrics::Metrics;
use crate::recovery::{JournalOptions, Recovery, StateLock};
use crate::status::ServerStatus;
use crate::store::hdfs::{Background, HdfsOptions, HdfsTier, Identity};
use crate::store::localfile::{LocalFileOptions, LocalFileTier};
use crate::store::memory::MemoryTier;
use crate::store::object::{ObjectOptions, ObjectTier};
use crate::store::quota::{QuotaLimits, Quotas};
use crate::store::router::TierRouter;
use crate::store::spill::SpillOptions;
use crate::store::tiered::TieredStore;
use crate::store::{FileTier, Tier, TierKind};

/// The tokens of the ordered shutdown, each fired at its step (`Running::shutdown`).
#[derive(Default)]
pub(super) struct Stops {
    /// Step 1: stop accepting gRPC and Netty.
    pub grpc: CancellationToken,
    /// Step 2: side tasks and the watermark loop.
    pub tasks: CancellationToken,
    /// Step 4: the final metrics push and the HTTP port.
    pub late: CancellationToken,
    /// Step 5: spill retries.
    pub spill: CancellationToken,
    /// Fired by the server itself when it wants to stop (decommissioned).
    pub itself: CancellationToken,
}

/// Everything built, nothing served.
pub(super) struct Parts {
    /// Every task of the server runs on it; shutdown waits for it.
    pub tracker: TaskTracker,
    pub stops: Stops,
    pub metrics: Arc<Metrics>,
    pub audit: AuditLogs,
    pub coordinator: Option<Arc<Coordinator>>,
    /// Held until the end of shutdown: a successor waits for it.
    pub state_lock: Option<StateLock>,
    /// The write budget, whose watermarks are reconfigurable.
    pub budget: MemoryBudget,
    pub local: Option<Arc<LocalFileTier>>,
    pub hdfs: Option<Arc<HdfsTier>>,
    pub object: Option<Arc<ObjectTier>>,
    pub health_checks: Option<HealthChecks>,
    pub recovery: Option<Recovery>,
    pub registry: Arc<AppRegistry>,
}

/// Builds every part of the shuffle server for the ports `bound`.
pub(super) async fn build(config: &Config, bound: &Bound) -> Result<Parts> {
    let metrics = Metrics::new(&bound.identity.all_tags())?;
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
    let stops = Stops::default();
    let tasks_stop = &stops.tasks;
    let spill_stop = &stops.spill;

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
        let takeover = config.recovery.takeover;
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
    budget.set_app_share(config.quota.app_memory_share.ratio());
    let local = if config.store_type.uses_localfile() {
        let local = LocalFileTier::new(LocalFileOptions {
            data_paths: lf.data_paths.clone(),
            file_prefix: bound.server_id.clone(),
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
                file_prefix: bound.server_id.clone(),
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
            server_id: bound.server_id.clone(),
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
            file_prefix: bound.server_id.clone(),
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
    // The quotas' shares are shares of what the disks may hold at start-up.
    let local_capacity = local.as_ref().map_or(0, |l| {
        l.disk_reports()
            .iter()
            .map(|r| r.service_capacity_bytes)
            .sum()
    });
    let quotas = Quotas::new(
        QuotaLimits::from_config(&config.quota),
        local_capacity,
        Arc::default(),
    );
    let router = TierRouter::new(
        config.store_type,
        local.clone().map(|l| l as Arc<dyn Tier>),
        hdfs.clone(),
        object.clone(),
        config.hdfs_store.cold_storage_threshold_size.as_u64(),
    )?;
    let router = Arc::new(router.with_quotas(Arc::new(quotas)));
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
    if let Some(r) = recovery.as_mut() {
        registry.attach_recovery(r);
        // The restored apps' files count against their quotas again.
        if let Some(local) = &local {
            let usage = registry.store().router().quotas().usage();
            for (part, bytes) in local.held() {
                usage.written(&part, TierKind::LocalFile, bytes);
            }
        }
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
    Ok(Parts {
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
    })
}
