//! The running server's handle, and its ordered shutdown: [`Running::shutdown`] stops
//! everything in order, each step time-bounded:
//!
//! 1. stop accepting gRPC and Netty and drain in-flight requests (both under one drain
//!    timeout); Netty connections finish the frame they are handling, then close;
//! 2. stop side tasks (ticket sweeper, app expiry, disk checks, decommission watcher,
//!    coordinator heartbeats, the HDFS tier's idle closers);
//! 3. spill memory to the file tier, bounded by `shutdown.spill_timeout`, then close the HDFS
//!    files kept open between appends;
//! 4. push metrics one last time (push gateway) and stop the HTTP port;
//! 5. stop spill retries and wait for the remaining tasks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use super::build::Stops;
use crate::app::AppRegistry;
use crate::audit::AuditLogs;
use crate::config::Config;
use crate::coordinator::Coordinator;
use crate::metrics::Metrics;
use crate::recovery::{Recovery, RecoveryReport, StateLock};
use crate::store::hdfs::HdfsTier;
use crate::store::localfile::LocalFileTier;

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
    pub(super) registry: Arc<AppRegistry>,
    /// Local disks (`MEMORY_LOCALFILE`, `MEMORY_LOCALFILE_HDFS`).
    pub(super) local: Option<Arc<LocalFileTier>>,
    /// HDFS (`MEMORY_HDFS`, `MEMORY_LOCALFILE_HDFS`).
    pub(super) hdfs: Option<Arc<HdfsTier>>,
    /// The embedded coordinator, when `coordinator.enabled`.
    pub(super) coordinator: Option<Arc<Coordinator>>,
    pub(super) config: Config,
    /// The shutdown's steps (see the module doc).
    pub(super) stops: Stops,
    pub(super) grpc_task: tokio::task::JoinHandle<std::result::Result<(), tonic::transport::Error>>,
    /// The Netty plane, stopped by `grpc_stop` too; aborting it closes its connections.
    pub(super) netty_task: Option<tokio::task::JoinHandle<()>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) tracker: TaskTracker,
    /// Restart recovery: what it did at start, and the journal flushed at shutdown.
    pub(super) recovery: Option<Recovery>,
    /// Held until the very end of shutdown: a successor waits for it.
    pub(super) state_lock: Option<StateLock>,
    /// The audit logs, flushed once both planes have drained.
    pub(super) audit: AuditLogs,
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
        self.stops.itself.cancelled()
    }

    /// Whether the server has decided to stop by itself.
    pub fn has_stopped_by_itself(&self) -> bool {
        self.stops.itself.is_cancelled()
    }

    /// Runs until `signal` resolves or the server stops by itself, then shuts down.
    pub async fn run_until(self, signal: impl std::future::Future<Output = ()>) -> ShutdownReport {
        tokio::select! {
            _ = signal => tracing::info!("shutdown signal received"),
            _ = self.stops.itself.cancelled() => tracing::info!("decommissioned: stopping"),
        }
        self.shutdown().await
    }

    /// Stops the server in order (see the module doc); each step is bounded.
    pub async fn shutdown(self) -> ShutdownReport {
        let mut report = ShutdownReport::default();
        let cfg = &self.config.shutdown;

        self.stops.grpc.cancel();
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
        // `timed` logs the step that did not finish; nothing else waits on it.
        let _ = timed("flush audit logs", FLUSH_BUDGET, self.audit.close()).await;

        self.stops.tasks.cancel();

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
        self.stops.late.cancel();
        self.stops.spill.cancel();
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
        let _ = timed(
            "flush storage audit log",
            FLUSH_BUDGET,
            self.audit.close_storage(),
        )
        .await;
        drop(self.state_lock);
        tracing::info!(?report, "spillway stopped");
        report
    }
}

/// How long the shutdown waits for each audit log's writer to flush.
const FLUSH_BUDGET: Duration = Duration::from_secs(10);

/// Runs `fut` with a deadline, logging how long the step took, or that it timed out.
async fn timed<F: std::future::Future>(step: &str, budget: Duration, fut: F) -> Option<F::Output> {
    let started = tokio::time::Instant::now();
    let out = tokio::time::timeout(budget, fut).await.ok();
    match &out {
        Some(_) => tracing::info!(step, elapsed = ?started.elapsed(), "shutdown step done"),
        None => tracing::warn!(step, ?budget, "shutdown step timed out"),
    }
    out
}
