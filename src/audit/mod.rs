//! Uniffle's audit logs, written to files of their own whatever `RUST_LOG` says: security
//! teams and log pipelines read them as the Java server writes them.
//!
//! - [`rpc`]: one line per shuffle-server request (Java's `SHUFFLE_SERVER_RPC_AUDIT_LOG`,
//!   `rss.server.rpc.audit.log.enabled`, on by default), from both the gRPC and the Netty plane.
//! - the coordinator's RPC log ([`rpc`] too, [`open_coordinator_rpc`]): one line per
//!   coordinator request (Java's `COORDINATOR_RPC_AUDIT_LOG`,
//!   `rss.coordinator.rpc.audit.log.enabled`, on by default), from the embedded coordinator
//!   and the coordinator-only process alike.
//! - [`storage`]: one line per durable spill and per purged storage (Java 0.10's
//!   `SHUFFLE_SERVER_STORAGE_AUDIT_LOG`, `rss.server.storage.audit.log.enabled`, off by
//!   default), from the spiller and the app/shuffle purges.
//!
//! Handlers and spill tasks only fill a small record and queue it ([`writer::Sink`]): a thread formats it into
//! a buffered file, so no request waits on the disk, and a full queue drops the line and counts
//! it in `spillway_audit_dropped_lines_total{log}` rather than slowing the request.

pub mod rpc;
pub mod storage;
pub mod writer;

use prometheus::{IntCounterVec, Opts};

use crate::config::AuditConfig;
use crate::error::{Error, Result};
pub use rpc::RpcAudit;
pub use storage::StorageAudit;

/// Counter of audit lines lost to a full queue (a stalled disk) or a stopped writer.
pub const DROPPED: &str = "spillway_audit_dropped_lines_total";

/// The audit logs of one server.
#[derive(Clone)]
pub struct AuditLogs {
    /// The RPC audit log.
    pub rpc: RpcAudit,
    /// The storage audit log.
    pub storage: StorageAudit,
    /// The embedded coordinator's RPC audit log (off unless [`AuditLogs::open`] is told the
    /// process serves a coordinator).
    pub coordinator_rpc: RpcAudit,
}

impl AuditLogs {
    /// Opens the logs `config` turns on, the coordinator's only when `coordinator` (the process
    /// serves one); `dropped` is [`DROPPED`], labelled by `log`.
    pub fn open(
        config: &AuditConfig,
        coordinator: bool,
        dropped: &IntCounterVec,
    ) -> Result<AuditLogs> {
        let rpc = RpcAudit::open(config, dropped.with_label_values(&["rpc"])).map_err(|e| {
            Error::Startup(format!(
                "audit.rpc_log_path {}: {e}",
                config.rpc_log_path.display()
            ))
        })?;
        let storage = if config.storage_log {
            let sink = writer::Sink::open(
                &config.storage_log_path,
                "audit-storage",
                dropped.with_label_values(&["storage"]),
            )
            .map_err(|e| {
                Error::Startup(format!(
                    "audit.storage_log_path {}: {e}",
                    config.storage_log_path.display()
                ))
            })?;
            StorageAudit::new(sink)
        } else {
            StorageAudit::off()
        };
        let coordinator_rpc = match coordinator {
            true => open_coordinator_rpc(config, dropped)?,
            false => RpcAudit::off(),
        };
        Ok(AuditLogs {
            rpc,
            storage,
            coordinator_rpc,
        })
    }

    /// Writes out what is queued and stops the RPC writers (once the planes have drained).
    /// The storage log stays open: the final spill and the background purges still write to
    /// it; [`AuditLogs::close_storage`] ends it after them.
    pub async fn close(&self) {
        self.rpc.close().await;
        self.coordinator_rpc.close().await;
    }

    /// Writes out and stops the storage writer (the last shutdown step that can write).
    pub async fn close_storage(&self) {
        self.storage.close().await;
    }
}

/// The coordinator's RPC audit log as `config` describes it (off: a log that records nothing);
/// lines lost to a full queue count in `dropped{log="coordinator_rpc"}`.
pub fn open_coordinator_rpc(config: &AuditConfig, dropped: &IntCounterVec) -> Result<RpcAudit> {
    RpcAudit::open_coordinator(config, dropped.with_label_values(&["coordinator_rpc"])).map_err(
        |e| {
            Error::Startup(format!(
                "audit.coordinator_rpc_log_path {}: {e}",
                config.coordinator_rpc_log_path.display()
            ))
        },
    )
}

/// The [`DROPPED`] counter family.
pub fn dropped_counter(tags: &str) -> prometheus::Result<IntCounterVec> {
    IntCounterVec::new(
        Opts::new(
            DROPPED,
            "Audit log lines dropped because the writer fell behind or had stopped",
        )
        .const_label("tags", tags),
        &["log"],
    )
}
