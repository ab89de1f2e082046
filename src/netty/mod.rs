//! Uniffle's Netty data plane (`GRPC_NETTY` mode, NETTY.md): sends and reads over Uniffle's own
//! binary framing, served from the same [`AppRegistry`](crate::app::AppRegistry) as gRPC.
//!
//! ```text
//!  TcpStream ─▶ server::Handler ─ frame::Header::parse (limits, before any body byte)
//!                  │                 receive budget (server-wide bytes semaphore)
//!                  ▼
//!              messages::Request::decode ─▶ registry.send / read_index / read_data / read_memory
//!                  ▼
//!              messages::Response::encode_head + body (one vectored write, body not copied)
//! ```
//! Control calls (register, requireBuffer, report, finish, …) stay on gRPC, as with Java.
//! Index reads are answered with type 14 (decodable by 0.9 and 0.10 clients), memory reads with
//! type 16. Local data is read into `Bytes` through the file tier, not `sendfile`d: the tier
//! API returns bytes so the read budget can ride on them until the write completes.

pub mod client;
pub mod frame;
pub mod messages;
pub mod server;

pub use frame::{FrameError, Header, HEADER_LEN};
pub use messages::{Request, Response, ResponseHead};
pub use server::{serve, NettyOptions, NettyShared};
