//! Side tasks that run beside the request path; they loop with [`crate::periodic::periodic`].

/// Coordinator heartbeats. Not built on `periodic`: after a failure the next beat comes after
/// a backoff, not a full interval.
pub mod heartbeat;
/// Periodic metrics push to a Prometheus push gateway.
pub mod push_gateway;
/// Freed heap back to the OS when the server goes idle.
pub mod release;
