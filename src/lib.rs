//! Spillway: a drop-in replacement for the Apache Uniffle shuffle server.
//!
//! ```text
//!  request ─▶ grpc  ┐ protocol ─▶ app (AppRegistry) ──────▶ store::tiered ─▶ store::memory (hot)
//!             netty ┘ convert,    apps, shuffles, ranges,     │                 │ store::spill
//!                     outcome     tickets, block ids,         │                 ▼
//!                     (status)    expiry, purge               │   store::router (Route, Placement;
//!                                                             │   store::admission) ─▶ localfile,
//!                                                             └─ reads ──▶ localfile   hdfs, object
//! ```
//!
//! # Layers
//!
//! From the network down to the bytes. A module uses only modules on lower lines, never one
//! on its own line or above: the layers are one-way, so no two modules depend on each other.
//! `tests/layers.rs` reads the `crate::…` paths of the non-test code and fails when a module
//! reaches one above it; its layer list is this list.
//!
//! <!-- layers:begin -->
//! 1. server: the two composition roots (the shuffle server, `server::coordinator_process`);
//!    each builds every part once and owns the shutdown order
//! 2. http: the metrics, admin, pprof and conf endpoints, and the coordinator's REST API and
//!    dashboard on the same port
//! 3. tasks: side tasks beside the request path (heartbeats, push gateway, heap release)
//! 4. grpc, netty: the two data planes, side by side: the `ShuffleServer` gRPC service and
//!    Uniffle's Netty plane, each decoding its own framing
//! 5. protocol: what both planes share: request conversion and checks, the status and
//!    message of a result, the message-size ceilings
//! 6. coordinator: the optional Uniffle coordinator (placement, admission, apps, REST state)
//! 7. health: Java's health checks (share of healthy data paths, health script)
//! 8. app: the registry of apps, shuffles, ranges, tickets, block ids; expiry and purge; the
//!    `server` registry's scrape-time families (`app::server_metrics`)
//! 9. recovery: the journal that brings the registry back after a restart
//! 10. store: the tiers (memory, local files, HDFS, object storage) and the read path
//! 11. audit: Uniffle's RPC and storage audit logs
//! 12. metrics: the Prometheus registries (Uniffle names), fed from above: the server's
//!     families through `metrics::ServerFamilies`, the coordinator's through
//!     `metrics::coordinator::CoordinatorFigures`
//! 13. limits: connection and request limits
//! 14. memory: the write budget (sole owner of capacity), require-buffer tickets, the read cap
//! 15. config: the typed config, Java's keys, validation; its types own their enums
//! 16. codec, status, listen: the byte formats clients parse, the decommission status, binding
//! 17. error: the one error type, mapped once to Uniffle status codes
//! 18. ids, id_set, proto, summary, clock, periodic, runtime, procstat, version: leaves
//! <!-- layers:end -->
//!
//! `runtime` is the tokio runtime with its threads counted, and `runtime::blocking` for every
//! blocking call on a request path; `clock` the one wall clock; `periodic` the loop of every
//! periodic task.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod app;
pub mod audit;
pub mod clock;
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
pub mod procstat;
pub mod proto;
pub mod protocol;
pub mod recovery;
pub mod runtime;
pub mod server;
pub mod status;
pub mod store;
pub mod summary;
pub mod tasks;
pub mod version;
