//! Wire codecs shared by the gRPC and Netty planes that are not protobuf messages.
//!
//! Kept apart from `proto.rs` because these byte layouts are fixed by Java libraries, not by
//! `.proto` files, and are pinned by byte-exact tests against the Java output.

pub mod bitmap;
