//! Side tasks that run beside the request path. `periodic` is the one loop shape they share:
//! tick on tokio time (so tests can pause it), stop promptly on cancellation.

/// Coordinator heartbeats. Not built on `periodic`: after a failure the next beat comes after
/// a backoff, not a full interval.
pub mod heartbeat;
/// Periodic metrics push to a Prometheus push gateway.
pub mod push_gateway;
/// Freed heap back to the OS when the server goes idle.
pub mod release;

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
