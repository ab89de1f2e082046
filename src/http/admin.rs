//! Status, health, decommission and the thread listing. Decommission goes through the same
//! registry calls as the gRPC `ShuffleServerInternal` service.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::state::HttpState;
use crate::proto::ServerStatus as WireStatus;

fn state_json(s: &HttpState) -> serde_json::Value {
    let mem = s.registry.store().memory().budget().snapshot();
    serde_json::json!({
        "serverId": s.server_id,
        "status": s.registry.status().get().as_str_name(),
        "apps": s.registry.app_count(),
        "partitions": s.registry.partition_count(),
        "memory": {
            "capacity": mem.capacity,
            "reserved": mem.reserved,
            "used": mem.used,
            "inFlush": mem.in_flush,
        },
        "readMemoryUsed": s.registry.read_budget().used(),
        "pendingSpills": s.registry.store().spiller().pending(),
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// `GET /status`, `GET /admin/state`: the server's state as JSON.
pub(super) async fn status(State(s): State<Arc<HttpState>>) -> Response {
    Json(state_json(&s)).into_response()
}

/// `GET /health`: 200 while the server takes or finishes work (ACTIVE, DECOMMISSIONING), 503
/// when it is UNHEALTHY or done; for load balancers and Kubernetes probes.
pub(super) async fn health(State(s): State<Arc<HttpState>>) -> Response {
    let status = s.registry.status().get();
    let code = match status {
        WireStatus::Active | WireStatus::Decommissioning => StatusCode::OK,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    (code, status.as_str_name().to_owned()).into_response()
}

/// `POST /admin/decommission`: as the gRPC call; 409 with the reason when the state forbids it.
pub(super) async fn decommission(State(s): State<Arc<HttpState>>) -> Response {
    match s.registry.decommission() {
        Ok(()) => Json(state_json(&s)).into_response(),
        Err(e) => (StatusCode::CONFLICT, e.to_string()).into_response(),
    }
}

/// `POST /admin/cancel_decommission`.
pub(super) async fn cancel_decommission(State(s): State<Arc<HttpState>>) -> Response {
    s.registry.cancel_decommission();
    Json(state_json(&s)).into_response()
}

/// `GET /api/shuffleServer/stacks`: Java answers a JVM thread dump. Async tasks have no stacks
/// to dump, so this lists the OS threads with their states and the runtime's task numbers, and
/// says where the deeper views are (tokio-console, `/debug/pprof/profile`).
pub(super) async fn stacks(State(s): State<Arc<HttpState>>) -> Response {
    stacks_text("server", &s.server_id).into_response()
}

/// The listing of [`stacks`] for a process of `role` (`server`, `coordinator`) named `id`.
pub(super) fn stacks_text(role: &str, id: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "spillway {} {role} {id} pid {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id()
    );
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let m = rt.metrics();
        let _ = writeln!(
            out,
            "tokio runtime: {} workers, {} alive tasks, {} in the global queue",
            m.num_workers(),
            m.num_alive_tasks(),
            m.global_queue_depth()
        );
    }
    let _ = writeln!(out, "\nthreads (tid, name, state):");
    match std::fs::read_dir("/proc/self/task") {
        Ok(dir) => {
            let mut threads: Vec<(u64, String, String)> = dir
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let tid: u64 = e.file_name().to_str()?.parse().ok()?;
                    let name = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                    let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                    // The state letter follows the parenthesised name.
                    let state = stat
                        .rsplit_once(") ")
                        .and_then(|(_, rest)| rest.split(' ').next())
                        .unwrap_or("?")
                        .to_owned();
                    Some((tid, name.trim().to_owned(), state))
                })
                .collect();
            threads.sort();
            for (tid, name, state) in threads {
                let _ = writeln!(out, "  {tid:>8}  {name:<24} {state}");
            }
        }
        Err(e) => {
            let _ = writeln!(out, "  (cannot list threads: {e})");
        }
    }
    let _ = writeln!(
        out,
        "\nAsync tasks have no thread stacks: build with --features console (RUSTFLAGS=\"--cfg tokio_unstable\") \
         and run tokio-console for tasks, or GET /debug/pprof/flamegraph?seconds=10 (shuffle servers) for where CPU goes."
    );
    out
}
