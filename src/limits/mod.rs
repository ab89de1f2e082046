//! Hard limits against broken or hostile peers (`[limits]`): who may hold a connection
//! ([`connections`]), how long a request may stall or a connection idle, how many bytes of
//! requests may wait in memory ([`grpc`] for the gRPC plane; the Netty handler takes the same
//! budget per frame), and how large one request or response may be ([`RequestLimits`]).
//!
//! Every limit that bites is logged and counted in `total_limit_hits{plane,limit,action}` (the
//! `server` registry), so an operator can tell a misbehaving client from a slow server.

pub mod connections;
pub mod grpc;
mod hits;

use std::sync::Arc;

use crate::config::LimitsConfig;
use crate::error::{Error, Result};
pub use connections::{
    BusyGuard, CloseReason, ConnectionLimits, ConnectionTable, Lease, SendingGuard, Slot,
};
pub use hits::LimitMetrics;

/// File descriptors kept for files, journals, HDFS and the HTTP port.
const FDS_RESERVED: u64 = 2048;

/// Raises the open-files limit so `wanted` connections per plane fit (beyond the hard limit
/// too when the process may, as root can), and returns the connection cap per plane that
/// fits: `wanted`, or less with a warning. Connections beyond the open-files limit would fail
/// in `accept` (and spills in `open`), which is worse than a cap.
pub fn fit_open_files(wanted: usize, planes: usize) -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return wanted;
    };
    let needed = (wanted as u64)
        .saturating_mul(planes.max(1) as u64)
        .saturating_add(FDS_RESERVED);
    let mut limit = soft;
    if soft < needed {
        // Beyond the hard limit needs CAP_SYS_RESOURCE; otherwise settle for the hard limit.
        let target = needed.max(hard);
        limit = match setrlimit(Resource::RLIMIT_NOFILE, target, target) {
            Ok(()) => target,
            Err(_) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                Ok(()) => hard,
                Err(_) => soft,
            },
            Err(_) => soft,
        };
        tracing::info!(from = soft, to = limit, "raised the open-files limit");
    }
    let fit = (limit.saturating_sub(FDS_RESERVED) / planes.max(1) as u64).max(64) as usize;
    if fit < wanted {
        tracing::warn!(
            open_files_limit = limit,
            wanted,
            cap = fit,
            "limits.max_connections lowered to fit the open-files limit (raise `ulimit -n` / LimitNOFILE)"
        );
        return fit;
    }
    wanted
}

/// The per-request caps, checked at the edge of both planes before the registry sees a
/// request; a refusal is counted under the plane that received it.
#[derive(Debug, Clone)]
pub struct RequestLimits {
    /// `limits.max_blocks_per_request`.
    pub blocks: usize,
    /// `limits.max_partitions_per_request`.
    pub partitions: usize,
    /// `limits.max_block_ids_per_request`.
    pub block_ids: usize,
    /// `limits.max_string_length`.
    pub string_len: usize,
    /// `limits.max_response_size`.
    pub response: usize,
    metrics: Arc<LimitMetrics>,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits::new(
            &LimitsConfig::default(),
            Arc::new(LimitMetrics::unregistered()),
        )
    }
}

impl RequestLimits {
    /// The caps of `c`, counting refusals in `metrics`.
    pub fn new(c: &LimitsConfig, metrics: Arc<LimitMetrics>) -> Self {
        RequestLimits {
            blocks: c.max_blocks_per_request,
            partitions: c.max_partitions_per_request,
            block_ids: c.max_block_ids_per_request,
            string_len: c.max_string_length.as_u64() as usize,
            response: c.max_response_size.as_u64() as usize,
            metrics,
        }
    }

    /// `n` blocks in one send.
    pub fn blocks(&self, plane: &str, n: usize) -> Result<()> {
        self.over(plane, "max_blocks_per_request", "blocks", n, self.blocks)
    }

    /// `n` partitions or ranges named in one request.
    pub fn partitions(&self, plane: &str, n: usize) -> Result<()> {
        self.over(
            plane,
            "max_partitions_per_request",
            "partitions",
            n,
            self.partitions,
        )
    }

    /// `n` block ids in one report or client bitmap.
    pub fn block_ids(&self, plane: &str, n: usize) -> Result<()> {
        self.over(
            plane,
            "max_block_ids_per_request",
            "block ids",
            n,
            self.block_ids,
        )
    }

    /// Request strings (`field` names each).
    pub fn strings<'a>(
        &self,
        plane: &str,
        strings: impl IntoIterator<Item = (&'static str, &'a str)>,
    ) -> Result<()> {
        for (field, s) in strings {
            if s.len() > self.string_len {
                self.metrics.count(plane, "max_string_length", "refused");
                return Err(Error::LimitExceeded {
                    limit: "max_string_length",
                    reason: format!(
                        "{field} is {} bytes, the limit is {}",
                        s.len(),
                        self.string_len
                    ),
                });
            }
        }
        Ok(())
    }

    /// A client's serialized bitmap of `n` bytes (a read's expected task ids). A Roaring
    /// bitmap needs at least a byte per id, except in run containers, which stay runs once
    /// decoded, so the byte cap also caps what decoding may build.
    pub fn expected_tasks_bitmap(&self, plane: &str, n: usize) -> Result<()> {
        self.over(
            plane,
            "max_block_ids_per_request",
            "bytes of serialized bitmap",
            n,
            self.block_ids.saturating_mul(8),
        )
    }

    /// A response payload of `n` bytes.
    pub fn response(&self, plane: &str, n: usize) -> Result<()> {
        self.over(
            plane,
            "max_response_size",
            "response bytes",
            n,
            self.response,
        )
    }

    fn over(
        &self,
        plane: &str,
        limit: &'static str,
        what: &str,
        n: usize,
        max: usize,
    ) -> Result<()> {
        if n > max {
            self.metrics.count(plane, limit, "refused");
            return Err(Error::LimitExceeded {
                limit,
                reason: format!("{n} {what}, the limit is {max}"),
            });
        }
        Ok(())
    }
}
