//! Profiling endpoints, as Go's `net/http/pprof` names them so `go tool pprof URL` works:
//! `profile` (CPU samples in pprof protobuf), `flamegraph` (the same samples as an SVG), and
//! `heap` (jemalloc heap profile, feature `jemalloc`, when the process was started with
//! `_RJEM_MALLOC_CONF=prof:true`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::state::HttpState;

/// Longest CPU profile one request may ask for.
pub const MAX_SECONDS: u64 = 300;

/// `?seconds=N&frequency=HZ`.
#[derive(Debug, Deserialize)]
pub(super) struct ProfileParams {
    /// Sampling time; default 30 s (as Go), at most [`MAX_SECONDS`].
    seconds: Option<u64>,
    /// Samples per second; default 99.
    frequency: Option<i32>,
}

/// Samples the whole process for the requested time. Only one profile runs at a time (the
/// sampler is process-wide): a second request gets 409. Shutdown ends the sampling early.
async fn sample(s: &HttpState, p: &ProfileParams) -> Result<pprof::Report, Response> {
    let seconds = p.seconds.unwrap_or(30).clamp(1, MAX_SECONDS);
    let frequency = p.frequency.unwrap_or(99).clamp(1, 1000);
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(frequency)
        // Unwinding through these from a signal handler can deadlock.
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(|e| {
            (
                StatusCode::CONFLICT,
                format!("cannot start the CPU profiler (is another profile running?): {e}"),
            )
                .into_response()
        })?;
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs(seconds)) => {}
        _ = s.stop.cancelled() => {}
    }
    let report = guard.report().build().map_err(internal);
    drop(guard);
    report
}

fn internal(e: impl std::fmt::Display) -> Response {
    tracing::warn!(error = %e, "profile failed");
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
}

/// `GET /debug/pprof/profile?seconds=N`: CPU profile, pprof protobuf (`go tool pprof` reads
/// it); with `SVG`, `GET /debug/pprof/flamegraph?seconds=N`: the same samples as an SVG.
pub(super) async fn cpu<const SVG: bool>(
    State(s): State<Arc<HttpState>>,
    Query(p): Query<ProfileParams>,
) -> Response {
    let report = match sample(&s, &p).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let rendered = if SVG {
        let mut svg = Vec::new();
        report
            .flamegraph(&mut svg)
            .map(|()| ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response())
    } else {
        report.pprof().map(|profile| {
            use pprof::protos::Message;
            let disposition = "attachment; filename=\"profile.pb\"";
            (
                [
                    (header::CONTENT_TYPE, "application/octet-stream"),
                    (header::CONTENT_DISPOSITION, disposition),
                ],
                profile.encode_to_vec(),
            )
                .into_response()
        })
    };
    rendered.unwrap_or_else(internal)
}

/// `GET /debug/pprof/heap`: jemalloc's sampled live heap in pprof format (gzipped protobuf).
#[cfg(feature = "jemalloc")]
pub(super) async fn heap() -> Response {
    let Some(ctl) = jemalloc_pprof::PROF_CTL.as_ref() else {
        return not_enabled();
    };
    let mut ctl = Arc::clone(ctl).lock_owned().await;
    if !ctl.activated() {
        return not_enabled();
    }
    // Dumping and symbolizing reads files and walks debug info: off the async workers.
    match crate::runtime::blocking(move || ctl.dump_pprof())
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
    {
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, "application/octet-stream"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"heap.pb.gz\"",
                ),
            ],
            bytes,
        )
            .into_response(),
        Err(e) => internal(e),
    }
}

#[cfg(feature = "jemalloc")]
fn not_enabled() -> Response {
    (
        StatusCode::NOT_FOUND,
        "heap profiling is off: start spillway with _RJEM_MALLOC_CONF=prof:true,prof_active:true,lg_prof_sample:19",
    )
        .into_response()
}

/// Without the `jemalloc` feature there is no heap profiler.
#[cfg(not(feature = "jemalloc"))]
pub(super) async fn heap() -> Response {
    (
        StatusCode::NOT_FOUND,
        "heap profiling needs a build with the jemalloc feature (cargo build --features jemalloc)",
    )
        .into_response()
}
