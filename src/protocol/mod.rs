//! What the two data planes share, beneath both: the gRPC service (`grpc`) and Uniffle's Netty
//! plane (`netty`) decode their own framing, then convert the same way, call the same `app`
//! API, and answer with the same status codes and messages. Neither plane imports the other.

pub mod convert;
pub mod outcome;
mod sizes;

pub use sizes::{MAX_REQUEST_SIZE, MAX_RESPONSE_SIZE};
