//! The server's health checks (Java `HealthCheck`), on when `health.enabled`: every
//! `health.check_interval` the checkers run in order — the storage checker, then the health
//! script — and the first that fails makes the server UNHEALTHY; a pass where all succeed
//! makes it ACTIVE again. Like Java, only ACTIVE ↔ UNHEALTHY moves: a decommissioning server
//! stays decommissioning (see [`ServerStatus::set_checks_healthy`]).
//!
//! ```text
//! loop: storage checker (probe every data path, share of healthy paths ≥ minimum?)
//!         └─ ok ─▶ health script (exit 0, no ERROR line, within its timeout?)
//!                    └─ ok ─▶ healthy
//!       ─▶ ServerStatus, `is_healthy` gauge ─▶ next heartbeat carries the status
//! ```
//!
//! Everything runs on its own task: probes on the blocking pool, the script as a child
//! process with a deadline, so no check ever waits on, or blocks, the request path.
//!
//! Sources read (apache/incubator-uniffle, `server/src/main/java/org/apache/uniffle/server/`):
//! `HealthCheck.java` (0.10 line: `compareAndSet` ACTIVE ↔ UNHEALTHY; an older version set
//! UNHEALTHY unconditionally, overriding decommissioning), `LocalStorageChecker.java` (0.10
//! line, with the reconfigurable probe timeout: a timed-out probe is only left out of the count;
//! older versions marked the path corrupted), `HealthScriptChecker.java`, `ShuffleServer.java`
//! (the checker list), `ShuffleServerConf.java` (keys and defaults). The stored copies carry no
//! release tag; the ones used are those with 0.10's reconfiguration and storage audit code.

mod script;
mod storage;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::HealthConfig;
use crate::error::{Error, Result};
use crate::status::ServerStatus;
use crate::store::localfile::LocalFileTier;

use script::ScriptChecker;
use storage::{StorageCheckOptions, StorageChecker};

/// The checkers, in the order Java runs them (built-in storage checker first).
pub struct HealthChecks {
    storage: Option<StorageChecker>,
    script: Option<ScriptChecker>,
    interval: Duration,
}

impl HealthChecks {
    /// Builds the checkers from `[health]`; `None` when health checks are off. Fails like
    /// Java's start-up does: no local data paths to check, or a health script that is
    /// missing or not executable.
    pub fn new(config: &HealthConfig, local: Option<&Arc<LocalFileTier>>) -> Result<Option<Self>> {
        if !config.enabled {
            return Ok(None);
        }
        let Some(local) = local else {
            return Err(Error::Startup(
                "health.enabled: the storage checker needs local data paths, and store_type \
                 has no LOCALFILE (Java: \"Not support storage checker\")"
                    .to_owned(),
            ));
        };
        let storage = StorageChecker::new(
            Arc::clone(local),
            StorageCheckOptions {
                max_usage: config.disk_max_usage,
                recovery_usage: config.disk_recovery_usage,
                min_healthy_share: config.min_healthy_disks_ratio,
                probe_timeout: config.disk_check_timeout,
                unhealthy_on_failed_disk: config.unhealthy_on_failed_disk,
            },
        );
        let script = match &config.script_path {
            Some(path) => Some(ScriptChecker::new(path, config.script_timeout)?),
            None => None,
        };
        Ok(Some(HealthChecks {
            storage: Some(storage),
            script,
            interval: config.check_interval,
        }))
    }

    /// One pass over the checkers; the first failure is the verdict (later checkers do not
    /// run, as in Java).
    pub async fn check(&mut self) -> std::result::Result<(), String> {
        if let Some(storage) = &mut self.storage {
            storage.check().await?;
        }
        if let Some(script) = &self.script {
            script
                .check()
                .await
                .map_err(|f| format!("health script failed: {f:?}"))?;
        }
        Ok(())
    }

    /// Runs a pass now and then every `health.check_interval` on `tracker` until `cancel`
    /// fires, feeding each verdict to `status`.
    pub fn spawn(mut self, status: ServerStatus, cancel: CancellationToken, tracker: &TaskTracker) {
        tracker.spawn(async move {
            let mut was_healthy = true;
            loop {
                let verdict = tokio::select! {
                    _ = cancel.cancelled() => break,
                    v = self.check() => v,
                };
                // One line per change of verdict, whatever the status does with it.
                match &verdict {
                    Ok(()) if !was_healthy => tracing::info!("health checks pass again"),
                    Err(why) if was_healthy => tracing::warn!(reason = %why, "health checks fail"),
                    _ => {}
                }
                was_healthy = verdict.is_ok();
                status.set_checks_healthy(was_healthy);
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(self.interval) => {}
                }
            }
        });
    }
}
