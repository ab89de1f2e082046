//! Spillway: a Uniffle-compatible shuffle server.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod app;
pub mod codec;
pub mod config;
pub mod error;
pub mod grpc;
pub mod ids;
pub mod memory;
pub mod proto;
pub mod server;
pub mod status;
pub mod store;
pub mod tasks;
