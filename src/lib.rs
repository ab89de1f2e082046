//! Spillway: a drop-in replacement for the Apache Uniffle shuffle server.
//!
//! ```text
//!  request ─▶ grpc ──────▶ app (AppRegistry) ──────▶ store::tiered ─▶ store::memory (hot)
//!            convert +     apps, shuffles, ranges,     │                 │ store::spill
//!            reply(status) tickets, block ids,         │                 ▼
//!                          expiry, purge               └─ reads ──▶ store::localfile (warm)
//!
//!  memory: the write budget (sole owner of capacity), require-buffer tickets, the read cap
//!  server: builds each part once, owns the shutdown order; tasks: periodic side tasks
//!  config, error (the one status-code mapping), ids (validated ids), status (decommission)
//!  coordinator: the optional embedded Uniffle coordinator, on the same gRPC port
//!  codec::bitmap and store::index: the byte formats clients parse
//! ```
//! metrics: the Prometheus registries (Uniffle names); http: metrics, admin and pprof endpoints
//! netty: Uniffle's Netty data plane (sends and reads), beside `grpc`, calling the same `app` API.
//! audit: Uniffle's RPC audit log, fed by both planes, written to a file of its own.
//! health: Java's health checks (share of healthy data paths, health script) behind UNHEALTHY.
//! runtime: the tokio runtime with its threads counted, and `runtime::blocking` for every
//! blocking call on a request path (counted until it returns: a stuck one shows).
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod app;
pub mod audit;
pub mod bench;
pub mod codec;
pub mod config;
pub mod coordinator;
pub mod error;
pub mod grpc;
pub mod health;
pub mod http;
pub mod id_set;
pub mod ids;
pub mod limits;
pub mod listen;
pub mod memory;
pub mod metrics;
pub mod netty;
pub mod periodic;
pub mod proto;
pub mod recovery;
pub mod runtime;
pub mod server;
pub mod status;
pub mod store;
pub mod summary;
pub mod tasks;
