//! `POST /api/shuffleServer/confOps/update` (and `/confOps/update`): Java 0.10's
//! `ConfOpsResource`, the REST way into runtime reconfiguration (`crate::config::reload`).
//!
//! Java mounts the resource twice: as a root resource at `/confOps` (its package is scanned)
//! and under `ServerResource`'s `/api/shuffleServer`; both answer here. The body is Java's
//! `ConfVO`, `{"update": {"key": "value", ...}, "delete": ["key", ...]}` (either part may be
//! left out), sent as `application/json` (else 415, as Jersey's `@Consumes`); values may be
//! JSON strings, numbers or booleans (Jackson turns all three into the `String` Java stores).
//! Answers are Java's plain-text ones: `temporarily effective until restart: Update
//! successfully` when applied, `Nothing changed` for a `null` body. The guard is the admin one
//! (`auth.rs`), which answers Java's `401 Authentication Failed` for missing Basic credentials.
//!
//! Refusals (Spillway's own, see the reload module): 400 with the reason, nothing applied.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::state::HttpState;
use crate::config::reload::Runtime;

/// Java's answer when the update went through.
pub const APPLIED: &str = "temporarily effective until restart: Update successfully";

/// Java's answer for an empty (`null`) body.
pub const NOTHING: &str = "Nothing changed";

/// Java's `ConfVO`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfVo {
    #[serde(default)]
    update: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    delete: Vec<String>,
}

pub(super) async fn update(
    State(s): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    apply(Arc::clone(&s.runtime), headers, body).await
}

/// The same over a process's [`Runtime`] alone: a coordinator-only process's `/confOps/update`
/// (Java's `JettyServer` serves `ConfOpsResource` on the coordinator's port too).
pub(super) async fn update_runtime(
    State(runtime): State<Arc<Runtime>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    apply(runtime, headers, body).await
}

async fn apply(runtime: Arc<Runtime>, headers: HeaderMap, body: Bytes) -> Response {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be application/json: {\"update\": {...}, \"delete\": [...]}\n",
        )
            .into_response();
    }
    let vo: Option<ConfVo> = match serde_json::from_slice(&body) {
        Ok(vo) => vo,
        Err(e) => {
            return bad(format!(
                "the body is not {{\"update\": {{...}}, \"delete\": [...]}}: {e}"
            ))
        }
    };
    let Some(vo) = vo else {
        return text(NOTHING);
    };
    let mut update = Vec::with_capacity(vo.update.len());
    for (key, value) in vo.update {
        let value = match value {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            other => return bad(format!("{key}: {other} is not a string, number or boolean")),
        };
        update.push((key, value));
    }
    // Keys only: a value sent under a wrong key may be a secret.
    let keys: Vec<&str> = update.iter().map(|(k, _)| k.as_str()).collect();
    tracing::info!(update = ?keys, delete = ?vo.delete, "dynamic config update requested");
    // Turning the audit log on opens its file: blocking work, kept off the async workers.
    let result = crate::runtime::blocking(move || runtime.update(&update, &vo.delete)).await;
    match result {
        Ok(Ok(())) => text(APPLIED),
        Ok(Err(refused)) => {
            tracing::warn!(reason = %refused, "dynamic config update refused");
            bad(refused.to_string())
        }
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("update failed: {e}\n"),
        )
            .into_response(),
    }
}

fn text(s: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], s).into_response()
}

fn bad(reason: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "text/plain")],
        format!("{reason}\n"),
    )
        .into_response()
}
