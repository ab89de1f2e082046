//! The coordinator's metric endpoints, on the paths the Java coordinator's Jetty serves them
//! (`CoordinatorServerResource` mounts the common `MetricResource` and
//! `PrometheusMetricResource` under `/api/coordinator`; the common resource package serves them
//! at the root too). Registries: `server`, `grpc`, `jvm`, `all` (see `metrics::coordinator`).
//!
//! | Path | Answer |
//! |---|---|
//! | `GET /api/coordinator/metrics[/{type}]` | JSON samples (no type: `all`) |
//! | `GET /api/coordinator/prometheus/metrics/{type}` | text 0.0.4 |
//! | `GET /metrics[/{type}]`, `/prometheus/metrics/{type}` | the same, in a coordinator-only process |
//!
//! In the single binary the root paths stay the shuffle server's (its Java counterpart owns
//! them on its own port), so the coordinator's are under `/api/coordinator` only.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::metrics::{format, Kind, Metrics};

/// The coordinator's metric routes over `metrics`; `standalone` adds the root paths.
pub fn router(metrics: Arc<Metrics>, standalone: bool) -> Router {
    let mut router = Router::new()
        .route("/api/coordinator/metrics", get(json_all))
        .route("/api/coordinator/metrics/", get(json_all))
        .route("/api/coordinator/metrics/{kind}", get(json_kind))
        .route("/api/coordinator/prometheus/metrics/{kind}", get(text_kind));
    if standalone {
        router = router
            .route("/metrics", get(json_all))
            .route("/metrics/{kind}", get(json_kind))
            .route("/prometheus/metrics/{kind}", get(text_kind));
    }
    router.with_state(metrics)
}

/// Java answers an unknown type with an uncaught exception, which Jetty turns into a 500.
fn bad_kind(e: crate::error::Error) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
}

fn json(metrics: &Metrics, kind: Kind, query: Option<String>) -> Response {
    match metrics.gather_coordinator(kind, &super::names(query)) {
        Ok(families) => Json(format::json(&families, crate::metrics::now_ms())).into_response(),
        Err(e) => bad_kind(e),
    }
}

async fn json_all(State(m): State<Arc<Metrics>>, RawQuery(q): RawQuery) -> Response {
    json(&m, Kind::All, q)
}

async fn json_kind(
    State(m): State<Arc<Metrics>>,
    Path(kind): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    match kind.parse::<Kind>() {
        Ok(kind) => json(&m, kind, q),
        Err(e) => bad_kind(e),
    }
}

async fn text_kind(
    State(m): State<Arc<Metrics>>,
    Path(kind): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    let families = kind
        .parse::<Kind>()
        .and_then(|kind| m.gather_coordinator(kind, &super::names(q)));
    match families {
        Ok(families) => (
            [(header::CONTENT_TYPE, format::TEXT_CONTENT_TYPE)],
            format::text(&families),
        )
            .into_response(),
        Err(e) => bad_kind(e),
    }
}
