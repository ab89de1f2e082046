//! Consecutive write failures of a remote tier (HDFS, object storage): what the router asks
//! before trying the tier ([`Failures::may_try`], false during the cooldown after a failure)
//! and what the tier reports as its health.

use std::time::Duration;

use tokio::time::Instant;

use crate::store::Health;

/// See the module doc.
pub struct Failures {
    /// How the tier and its writes are named in the health detail and the log
    /// (`"hdfs"`, `"appends"`).
    tier: &'static str,
    writes: &'static str,
    cooldown: Duration,
    state: parking_lot::Mutex<State>,
}

#[derive(Default)]
struct State {
    consecutive: u64,
    last: Option<Instant>,
    last_error: String,
}

impl Failures {
    /// No failure yet.
    pub fn new(tier: &'static str, writes: &'static str, cooldown: Duration) -> Self {
        Failures {
            tier,
            writes,
            cooldown,
            state: parking_lot::Mutex::new(State::default()),
        }
    }

    /// Counts a write's outcome: a failure extends the run, a success ends it.
    pub fn record<T, E: std::fmt::Display>(&self, outcome: &std::result::Result<T, E>) {
        let mut s = self.state.lock();
        match outcome {
            Ok(_) => {
                if s.consecutive > 0 {
                    tracing::info!(
                        failures = s.consecutive,
                        "{} {} succeed again",
                        self.tier,
                        self.writes
                    );
                }
                s.consecutive = 0;
            }
            Err(e) => {
                s.consecutive += 1;
                s.last = Some(Instant::now());
                s.last_error = e.to_string();
            }
        }
    }

    /// The end of a remote tier's append: a refusal names the path the app registered (the
    /// tier's own calls know only the file they failed on), and is not counted against the
    /// tier, whose other apps it does not concern; every other outcome is recorded.
    pub fn settle(
        &self,
        outcome: crate::error::Result<()>,
        registered: &str,
    ) -> crate::error::Result<()> {
        let outcome = outcome.map_err(|e| match e {
            crate::error::Error::StorageRefused { answer, fix, .. } => {
                crate::error::Error::StorageRefused {
                    path: registered.to_owned(),
                    answer,
                    fix,
                }
            }
            other => other,
        });
        if !matches!(outcome, Err(crate::error::Error::StorageRefused { .. })) {
            self.record(&outcome);
        }
        outcome
    }

    /// False during the cooldown after a failure, so the router sends spills elsewhere
    /// instead of waiting on a broken store; then one write may find out it recovered.
    pub fn may_try(&self) -> bool {
        let s = self.state.lock();
        match s.last {
            Some(t) if s.consecutive > 0 => t.elapsed() >= self.cooldown,
            _ => true,
        }
    }

    /// Whether the last write failed.
    pub fn failing(&self) -> bool {
        self.state.lock().consecutive > 0
    }

    /// Writable unless the last write failed (a success clears it).
    pub fn health(&self) -> Health {
        let s = self.state.lock();
        if s.consecutive == 0 {
            Health::ok()
        } else {
            Health {
                writable: false,
                detail: format!(
                    "{}: {} failed {} in a row, last: {}",
                    self.tier, s.consecutive, self.writes, s.last_error
                ),
            }
        }
    }
}
