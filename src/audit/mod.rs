//! Uniffle's audit logs, written to files of their own whatever `RUST_LOG` says: security
//! teams and log pipelines read them as the Java server writes them.
//!
//! - [`rpc`]: one line per shuffle-server request (Java's `SHUFFLE_SERVER_RPC_AUDIT_LOG`,
//!   `rss.server.rpc.audit.log.enabled`, on by default), from both the gRPC and the Netty plane.
//!
//! Handlers only fill a small record and queue it ([`writer::Sink`]): a thread formats it into
//! a buffered file, so no request waits on the disk, and a full queue drops the line and counts
//! it in `spillway_audit_dropped_lines_total{log}` rather than slowing the request.

pub mod rpc;
pub mod writer;

use prometheus::{IntCounterVec, Opts};

use crate::config::AuditConfig;
use crate::error::{Error, Result};
pub use rpc::RpcAudit;

/// Counter of audit lines lost to a full queue (a stalled disk) or a stopped writer.
pub const DROPPED: &str = "spillway_audit_dropped_lines_total";

/// The audit logs of one server.
#[derive(Clone)]
pub struct AuditLogs {
    /// The RPC audit log.
    pub rpc: RpcAudit,
}

impl AuditLogs {
    /// Opens the logs `config` turns on; `dropped` is [`DROPPED`], labelled by `log`.
    pub fn open(config: &AuditConfig, dropped: &IntCounterVec) -> Result<AuditLogs> {
        let rpc = RpcAudit::open(config, dropped.with_label_values(&["rpc"])).map_err(|e| {
            Error::Startup(format!(
                "audit.rpc_log_path {}: {e}",
                config.rpc_log_path.display()
            ))
        })?;
        Ok(AuditLogs { rpc })
    }

    /// Writes out what is queued and stops the writers (the last shutdown steps, after the
    /// planes have drained).
    pub async fn close(&self) {
        self.rpc.close().await;
    }
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
