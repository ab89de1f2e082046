//! The HTTP side port (`[metrics] http_port`, Uniffle's Jetty port): the metric endpoints in
//! Java's paths and formats, the config and a thread listing for the Uniffle dashboard, a
//! status/health pair, decommission admin calls, and profiling (`pprof.rs`).
//!
//! | Path | Answer | Access |
//! |---|---|---|
//! | `GET /metrics`, `/metrics/{type}`, `/api/shuffleServer/metrics[/{type}]` | JSON samples (no type: `all`) | open |
//! | `GET /prometheus/metrics/{type}`, `/api/shuffleServer/prometheus/metrics/{type}` | text 0.0.4 | open |
//! | `GET /api/shuffleServer/conf` | from a Java `server.conf`: its `rss.*` keys as written (as Java's `getAll`); from TOML: every Spillway key; values as strings, credentials never shown | open |
//! | `GET /api/coordinator/metrics[/{type}]`, `/api/coordinator/prometheus/metrics/{type}` | the embedded coordinator's registries (`coordinator.rs`) | open |
//! | `GET /api/shuffleServer/stacks` | threads and runtime summary (text) | open |
//! | `GET /status`, `GET /health` | JSON state; 200/503 | open |
//! | `GET /admin/state` | JSON state | open |
//! | `POST /admin/decommission`, `POST /admin/cancel_decommission` | ShuffleServerInternal over HTTP | admin |
//! | `POST /api/shuffleServer/confOps/update`, `POST /confOps/update` | runtime reconfiguration, Java's `ConfOpsResource` (`conf_ops.rs`) | admin |
//! | `GET /debug/pprof/profile`, `/debug/pprof/flamegraph`, `/debug/pprof/heap` | profiles | admin |
//! | `/api/server/*`, `/api/app/*`, `GET /api/coordinator/{info,conf,stacks}` | the Java coordinator's REST API, only with `coordinator.enabled` (`coordinator.rs`, which a coordinator-only process serves too) | open |
//! | `GET /dashboard`, `/dashboard/server/{id}`, `/dashboard/app/{id}` | the operator's HTML dashboard, only with `coordinator.enabled` (`coordinator/dashboard/`) | open |
//! | `POST /api/server/[{id}/]decommission`, `…/cancelDecommission` | decommission through the coordinator | admin |
//!
//! "open" is unauthenticated, as in Uniffle. "admin" (`auth.rs`): with `metrics.admin_token` /
//! env `SPILLWAY_ADMIN_TOKEN` set, every caller needs `Authorization: Bearer <token>` (else 401
//! with `WWW-Authenticate: Bearer`); without one, loopback peers only (else 403). Refusals are
//! logged and counted in `total_admin_requests_denied{reason}` of the `server` registry.
//!
//! With `[metrics.https]` the same router is also served over TLS on a port of its own
//! (`tls.rs`), as Java's Jetty adds an HTTPS connector beside the HTTP one.

mod admin;
mod auth;
mod conf_ops;
pub mod coordinator;
mod pprof;
mod state;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::middleware;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use state::HttpState;
use state::{conf_json, metrics_answer, names};

/// The router over `state`. Built once per server: it also logs which admin mode applies.
pub fn router(state: Arc<HttpState>) -> Router {
    let auth = Arc::new(auth::AdminAuth::new(&state.config, &state.metrics));
    // route_layer: the guard runs only for these routes, after routing, so open paths and 404s
    // never reach it.
    let admin = Router::new()
        .route("/admin/decommission", post(admin::decommission))
        .route(
            "/admin/cancel_decommission",
            post(admin::cancel_decommission),
        )
        .route("/debug/pprof/profile", get(pprof::cpu::<false>))
        .route("/debug/pprof/flamegraph", get(pprof::cpu::<true>))
        .route("/debug/pprof/heap", get(pprof::heap))
        .route("/api/shuffleServer/confOps/update", post(conf_ops::update))
        .route("/confOps/update", post(conf_ops::update))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&auth),
            auth::require_admin,
        ));
    // The coordinator's routes (REST API, conf, metrics), built as a coordinator-only
    // process builds them; absent without the embedded coordinator, so its paths answer 404 as
    // a Java shuffle server's do.
    let coordinator = match &state.coordinator {
        Some(ctx) => self::coordinator::routes(
            &self::coordinator::CoordinatorHttp {
                rest: Arc::clone(ctx),
                metrics: Arc::clone(&state.metrics),
                runtime: Arc::clone(&state.runtime),
                id: state.server_id.clone(),
            },
            auth,
            false,
        ),
        None => Router::new(),
    };
    Router::new()
        .route("/metrics", get(metrics_route::<false>))
        .route("/metrics/{kind}", get(metrics_route::<false>))
        .route("/prometheus/metrics/{kind}", get(metrics_route::<true>))
        // 0.10's resource takes the type as optional (`all` without it); the dashboard calls
        // it bare.
        .route("/api/shuffleServer/metrics", get(metrics_route::<false>))
        .route("/api/shuffleServer/metrics/", get(metrics_route::<false>))
        .route(
            "/api/shuffleServer/metrics/{kind}",
            get(metrics_route::<false>),
        )
        .route(
            "/api/shuffleServer/prometheus/metrics/{kind}",
            get(metrics_route::<true>),
        )
        .route("/api/shuffleServer/conf", get(conf))
        .route("/api/shuffleServer/stacks", get(admin::stacks))
        .route("/status", get(admin::status))
        .route("/health", get(admin::health))
        .route("/admin/state", get(admin::status))
        .merge(admin)
        .with_state(state)
        .merge(coordinator)
}

/// Serves `router` on `listener` until `stop` fires; in-flight requests finish first (the
/// profile endpoints end their sampling early on the same token). Requests carry the peer
/// address (`ConnectInfo`), which the admin guard needs without a token.
pub async fn serve(listener: TcpListener, router: Router, stop: CancellationToken) {
    let addr = listener.local_addr().ok();
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    if let Err(e) = axum::serve(listener, service)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
    {
        tracing::warn!(error = %e, ?addr, "HTTP server ended with an error");
    }
}

/// Serves `router` over TLS on `listener` until `stop` fires, as [`serve`] does over TCP.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    stop: CancellationToken,
) {
    let addr = listener.local_addr().ok();
    let listener = match tls::TlsListener::new(listener, tls, stop.clone()) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, ?addr, "HTTPS listener failed");
            return;
        }
    };
    // `tap_io` only to get the peer address into `ConnectInfo`, which axum provides for
    // tapped listeners of any kind.
    let listener = axum::serve::ListenerExt::tap_io(listener, |_| {});
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    if let Err(e) = axum::serve(listener, service)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
    {
        tracing::warn!(error = %e, ?addr, "HTTPS server ended with an error");
    }
}

/// Binds the HTTP port.
pub fn bind(addr: SocketAddr, takeover: bool) -> crate::error::Result<TcpListener> {
    crate::listen::listen(addr, "HTTP", takeover)
}

/// The HTTPS port (Jetty's second connector), bound with its TLS config before anything is
/// served, so that a taken port or an unreadable keystore stops start-up.
pub struct HttpsListener {
    listener: TcpListener,
    /// Where it listens (port 0 resolved).
    pub addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
}

/// Binds `[metrics.https]` on `ip`, if configured.
pub fn bind_https(
    https: Option<&crate::config::HttpsConfig>,
    ip: std::net::IpAddr,
    takeover: bool,
) -> crate::error::Result<Option<HttpsListener>> {
    use crate::error::Error;
    let Some(https) = https else {
        return Ok(None);
    };
    let tls = tls::server_config(https).map_err(Error::Startup)?;
    let listener = bind(SocketAddr::new(ip, https.port), takeover)?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Startup(format!("local address of the HTTPS port: {e}")))?;
    Ok(Some(HttpsListener {
        listener,
        addr,
        tls,
    }))
}

/// Serves `router` on the HTTP port and, when bound, the HTTPS port, until `stop`.
pub fn spawn(
    tracker: &tokio_util::task::TaskTracker,
    http: TcpListener,
    https: Option<HttpsListener>,
    router: Router,
    stop: &CancellationToken,
) {
    if let Some(https) = https {
        tracker.spawn(serve_tls(
            https.listener,
            https.tls,
            router.clone(),
            stop.clone(),
        ));
    }
    tracker.spawn(serve(http, router, stop.clone()));
}

/// `…/metrics[/{kind}]` (Java's JSON) and, with `TEXT`, `…/prometheus/metrics/{kind}`.
async fn metrics_route<const TEXT: bool>(
    State(s): State<Arc<HttpState>>,
    kind: Option<Path<String>>,
    RawQuery(q): RawQuery,
) -> Response {
    metrics_answer(kind, TEXT, |kind| Ok(s.metrics.gather(kind, &names(q))))
}

/// `GET /api/shuffleServer/conf`: see [`conf_json`].
async fn conf(State(s): State<Arc<HttpState>>) -> Response {
    conf_json(&s.runtime.current())
}
