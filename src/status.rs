//! The server's lifecycle status (ACTIVE / DECOMMISSIONING / DECOMMISSIONED / UNHEALTHY),
//! changed by `ShuffleServerInternal` calls and read by registration and heartbeats.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::proto::ServerStatus as WireStatus;

/// Cheap-to-clone handle on the status; watchers wake on every change.
#[derive(Clone)]
pub struct ServerStatus {
    tx: Arc<watch::Sender<WireStatus>>,
    /// No file tier can take spills (set by the status watcher).
    storage_failing: Arc<AtomicBool>,
    /// The last pass of `[health]`'s checks failed (set by the health checks).
    checks_failing: Arc<AtomicBool>,
}

impl Default for ServerStatus {
    fn default() -> Self {
        ServerStatus {
            tx: Arc::new(watch::channel(WireStatus::Active).0),
            storage_failing: Arc::new(AtomicBool::new(false)),
            checks_failing: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl ServerStatus {
    /// The current status.
    pub fn get(&self) -> WireStatus {
        *self.tx.borrow()
    }

    /// Waits for changes (the decommission watcher uses it).
    pub fn subscribe(&self) -> watch::Receiver<WireStatus> {
        self.tx.subscribe()
    }

    /// ACTIVE → DECOMMISSIONING; a no-op when already decommissioning or decommissioned;
    /// any other state → `INVALID_REQUEST`, as in Java.
    pub fn decommission(&self) -> Result<()> {
        let mut outcome = Ok(());
        self.tx.send_if_modified(|s| match *s {
            WireStatus::Active => {
                *s = WireStatus::Decommissioning;
                true
            }
            WireStatus::Decommissioning | WireStatus::Decommissioned => false,
            other => {
                outcome = Err(Error::InvalidState {
                    reason: format!(
                        "cannot decommission a server in state {}",
                        other.as_str_name()
                    ),
                });
                false
            }
        });
        outcome
    }

    /// DECOMMISSIONING/DECOMMISSIONED → ACTIVE; otherwise a no-op.
    pub fn cancel_decommission(&self) {
        self.tx.send_if_modified(|s| {
            if matches!(*s, WireStatus::Decommissioning | WireStatus::Decommissioned) {
                *s = WireStatus::Active;
                true
            } else {
                false
            }
        });
    }

    /// DECOMMISSIONING → DECOMMISSIONED (the watcher saw no app left); false otherwise.
    pub fn finish_decommission(&self) -> bool {
        self.tx.send_if_modified(|s| {
            if *s == WireStatus::Decommissioning {
                *s = WireStatus::Decommissioned;
                true
            } else {
                false
            }
        })
    }

    /// Follows storage health: UNHEALTHY while no file tier can take writes (every disk
    /// unhealthy or full, HDFS failing). Returns true when the status changed.
    pub fn set_storage_healthy(&self, healthy: bool) -> bool {
        self.storage_failing.store(!healthy, Ordering::Release);
        self.follow_health()
    }

    /// Follows the verdict of `[health]`'s checks. Returns true when the status changed.
    pub fn set_checks_healthy(&self, healthy: bool) -> bool {
        self.checks_failing.store(!healthy, Ordering::Release);
        self.follow_health()
    }

    /// True while a health input fails, whatever the status (a decommissioning server can be
    /// unhealthy too): Java's `is_healthy` gauge follows the checks, not the status.
    pub fn health_failing(&self) -> bool {
        self.storage_failing.load(Ordering::Acquire) || self.checks_failing.load(Ordering::Acquire)
    }

    /// ACTIVE → UNHEALTHY while either input fails, UNHEALTHY → ACTIVE once both pass; any
    /// other status is left alone, as Java's `HealthCheck` moves only between these two
    /// (`compareAndSet`). The flags are read under the channel's lock, so two inputs changing
    /// at once still settle on their latest values.
    fn follow_health(&self) -> bool {
        self.tx
            .send_if_modified(|s| match (*s, self.health_failing()) {
                (WireStatus::Active, true) => {
                    *s = WireStatus::Unhealthy;
                    true
                }
                (WireStatus::Unhealthy, false) => {
                    *s = WireStatus::Active;
                    true
                }
                _ => false,
            })
    }

    /// True while new apps must be refused.
    pub fn refuses_new_apps(&self) -> bool {
        matches!(
            self.get(),
            WireStatus::Decommissioning | WireStatus::Decommissioned
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_follow_java() {
        let s = ServerStatus::default();
        s.decommission().unwrap();
        assert_eq!(s.get(), WireStatus::Decommissioning);
        s.decommission().unwrap();
        assert!(s.finish_decommission());
        assert_eq!(s.get(), WireStatus::Decommissioned);
        s.cancel_decommission();
        assert_eq!(s.get(), WireStatus::Active);
        s.cancel_decommission();
        assert_eq!(s.get(), WireStatus::Active);
    }

    // An input's setter says whether it changed the status: each step below asserts
    // (changed, status after it).
    use WireStatus::{Active, Decommissioning, Unhealthy};

    #[test]
    fn either_failing_input_keeps_the_server_unhealthy() {
        let s = ServerStatus::default();
        assert_eq!((s.set_checks_healthy(false), s.get()), (true, Unhealthy));
        let step = (s.set_storage_healthy(true), s.get());
        assert_eq!(
            step,
            (false, Unhealthy),
            "storage fine, checks still failing"
        );
        assert_eq!((s.set_checks_healthy(true), s.get()), (true, Active));
        s.decommission().unwrap();
        let step = (s.set_checks_healthy(false), s.get());
        assert_eq!(
            step,
            (false, Decommissioning),
            "decommissioning is never overridden"
        );
        assert!(s.health_failing());
        s.cancel_decommission();
        // The status watcher re-applies the inputs on every status change.
        assert_eq!((s.set_storage_healthy(true), s.get()), (true, Unhealthy));
    }

    #[test]
    fn storage_health_toggles_only_active_and_unhealthy() {
        let s = ServerStatus::default();
        assert_eq!((s.set_storage_healthy(false), s.get()), (true, Unhealthy));
        assert!(
            s.decommission().is_err(),
            "Java refuses to decommission an unhealthy server"
        );
        assert_eq!((s.set_storage_healthy(true), s.get()), (true, Active));
        s.decommission().unwrap();
        let step = (s.set_storage_healthy(false), s.get());
        assert_eq!(step, (false, Decommissioning));
    }
}
