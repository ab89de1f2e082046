//! Spillway: a Uniffle-compatible shuffle server.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod app;
pub mod codec;
pub mod error;
pub mod ids;
pub mod proto;
pub mod store;
