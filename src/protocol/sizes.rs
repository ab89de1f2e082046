//! The message-size ceilings of both planes (the Netty plane's frame limit is gRPC's request
//! limit, as Java's `rss.rpc.message.max.size` serves both).

/// Largest gRPC request accepted: Java's `rss.rpc.message.max.size` default (1 GiB). A
/// request is buffered whole by the transport before any memory check, so this also bounds
/// what one connection can make the server hold.
pub const MAX_REQUEST_SIZE: usize = 1 << 30;

/// Largest response sent (the Java client accepts `Integer.MAX_VALUE`).
pub const MAX_RESPONSE_SIZE: usize = i32::MAX as usize;
