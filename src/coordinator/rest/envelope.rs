//! What every REST handler shares: the context it reads, and Java's `Response` envelope.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde_json::{json, Value};

use crate::coordinator::Coordinator;

/// What the REST handlers read: the coordinator and this process's identity for
/// `/api/coordinator/info`.
#[derive(Debug)]
pub struct RestContext {
    /// The embedded coordinator.
    pub coordinator: Arc<Coordinator>,
    /// Address shuffle servers and clients reach this process at.
    pub ip: String,
    /// gRPC port (Java's `rss.rpc.server.port`).
    pub grpc_port: u16,
    /// HTTP port (Java's `rss.jetty.http.port`).
    pub http_port: u16,
    /// Process start, ms since the epoch.
    pub start_time_ms: i64,
}

pub(super) type Ctx = State<Arc<RestContext>>;

/// Java's `Response.success(data)`.
pub(super) fn success(data: Value) -> Response {
    Json(json!({"code": 0, "data": data, "errMsg": "success"})).into_response()
}

/// Java's `Response.fail(msg)`: still HTTP 200, code -1, no data.
pub(super) fn fail(msg: impl Into<String>) -> Response {
    let msg = msg.into();
    tracing::info!(error = %msg, "coordinator REST call failed");
    Json(json!({"code": -1, "data": null, "errMsg": msg})).into_response()
}

/// The JSON body, or `Ok(None)` when there is none; a malformed body is a 400 with the reason,
/// as Jersey's JSON reader answers.
pub(super) fn json_body<T: serde::de::DeserializeOwned>(
    body: &Bytes,
) -> Result<Option<T>, Refused> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(body).map(Some).map_err(|e| {
        tracing::info!(error = %e, "coordinator REST call with a malformed JSON body");
        (
            StatusCode::BAD_REQUEST,
            format!("malformed JSON body: {e}\n"),
        )
    })
}

/// A request answered with a bare HTTP error instead of the envelope, as Jersey does for a
/// body it cannot read.
pub(super) type Refused = (StatusCode, String);

/// Runs a handler that walks every server or every app (the node list, the app list, the
/// dashboard's pages) on the blocking pool. At 2,000 servers and 10,000 apps such a walk takes
/// hundreds of milliseconds; on a tokio worker it held back every heartbeat and assignment
/// queued behind it, which was most of the assignment p99 (`docs/performance.md`, "The
/// coordinator at cluster scale").
pub(in crate::coordinator) async fn walk<F>(handler: F) -> Response
where
    F: FnOnce() -> Response + Send + 'static,
{
    crate::runtime::blocking(handler).await.unwrap_or_else(|e| {
        tracing::error!(error = %e, "coordinator HTTP handler failed");
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the handler failed; see the coordinator's log\n",
        )
            .into_response()
    })
}
