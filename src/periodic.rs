//! The one loop shape the side tasks share: tick on tokio time (so tests can pause it), stop
//! promptly on cancellation. A module of its own so the registry and the memory accounting,
//! which the side tasks read, can run periodic work without depending on them.

use std::future::Future;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Runs `tick` every `interval` (first run one interval from now) until `cancel` fires.
/// A slow tick delays the next one instead of bunching them up.
pub fn periodic<F, Fut>(
    tracker: &TaskTracker,
    interval: Duration,
    cancel: CancellationToken,
    mut tick: F,
) where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tracker.spawn(async move {
        let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = ticker.tick() => tick().await,
            }
        }
    });
}

/// When a periodic task runs and what ends it: every `interval` on `tracker`, until `stop`
/// fires. The components that run one take it whole, so their start-up code reads the same.
#[derive(Clone)]
pub struct Schedule {
    /// Time between runs (the first one interval from now).
    pub interval: Duration,
    /// Ends the loop.
    pub stop: CancellationToken,
    /// Where the loop runs, so the shutdown waits for it.
    pub tracker: TaskTracker,
}

impl Schedule {
    /// A schedule on `tracker`.
    pub fn new(interval: Duration, stop: CancellationToken, tracker: &TaskTracker) -> Self {
        Schedule {
            interval,
            stop,
            tracker: tracker.clone(),
        }
    }

    /// A schedule with a stop and a tracker of its own (tests).
    #[cfg(test)]
    pub fn fresh(interval: Duration) -> Self {
        Self::new(interval, CancellationToken::new(), &TaskTracker::new())
    }

    /// Stops the loop and waits until it has ended (tests).
    #[cfg(test)]
    pub async fn end(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// Runs `tick` on this schedule (see [`periodic`]).
    pub fn run<F, Fut>(self, tick: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        periodic(&self.tracker, self.interval, self.stop, tick)
    }
}
