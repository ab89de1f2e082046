//! The server's lifecycle status (ACTIVE / DECOMMISSIONING / DECOMMISSIONED / UNHEALTHY),
//! changed by `ShuffleServerInternal` calls and read by registration and heartbeats.

use std::sync::Arc;

use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::proto::ServerStatus as WireStatus;

/// Cheap-to-clone handle on the status; watchers wake on every change.
#[derive(Clone)]
pub struct ServerStatus {
    tx: Arc<watch::Sender<WireStatus>>,
}

impl Default for ServerStatus {
    fn default() -> Self {
        ServerStatus {
            tx: Arc::new(watch::channel(WireStatus::Active).0),
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

    /// Follows storage health: ACTIVE → UNHEALTHY when the file tier cannot take writes (too
    /// few healthy disks), and back when it recovers. Decommission states are left alone.
    /// Returns true when the status changed.
    pub fn set_storage_healthy(&self, healthy: bool) -> bool {
        self.tx.send_if_modified(|s| match (*s, healthy) {
            (WireStatus::Active, false) => {
                *s = WireStatus::Unhealthy;
                true
            }
            (WireStatus::Unhealthy, true) => {
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

    #[test]
    fn storage_health_toggles_only_active_and_unhealthy() {
        let s = ServerStatus::default();
        assert!(s.set_storage_healthy(false));
        assert_eq!(s.get(), WireStatus::Unhealthy);
        assert!(
            s.decommission().is_err(),
            "Java refuses to decommission an unhealthy server"
        );
        assert!(s.set_storage_healthy(true));
        s.decommission().unwrap();
        assert!(!s.set_storage_healthy(false));
        assert_eq!(s.get(), WireStatus::Decommissioning);
    }
}
