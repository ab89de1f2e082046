//! Uniffle's Netty data plane (`GRPC_NETTY` mode, NETTY.md): sends and reads over Uniffle's own
//! binary framing, served from the same [`AppRegistry`](crate::app::AppRegistry) as gRPC.
//!
//! ```text
//!  TcpStream ─▶ server::Handler ─ frame::Header::parse (limits, before any body byte)
//!                  │                 receive budget (server-wide bytes semaphore)
//!                  ▼
//!              sends: messages::decode_send over recv::Receiver (each payload read into its
//!                     own buffer) ─▶ registry.send
//!              reads: messages::Request::decode ─▶ registry read_index / read_data / read_memory
//!                  ▼
//!              messages::Response::encode_head_with + body::Body (memory payloads as one
//!              vectored write of the buffers that hold them; local data by sendfile)
//! ```
//! Control calls (register, requireBuffer, report, finish, …) stay on gRPC, as with Java.
//! Index reads are answered with type 14 (decodable by 0.9 and 0.10 clients), memory reads with
//! type 16. No block byte is copied in user space on the way out: local data goes from the page
//! cache to the socket by sendfile, and memory reads write the stored payloads themselves.

pub mod body;
pub mod client;
pub mod frame;
pub mod messages;
mod recv;
pub mod server;

pub use frame::{FrameError, Header, HEADER_LEN};
pub use messages::{Request, Response, ResponseHead};
pub use server::{serve, NettyOptions, NettyShared};
