//! Everything the Java coordinator serves on its Jetty port, built by [`routes`] for both the
//! coordinator embedded in a shuffle server and a coordinator-only process, so the two cannot
//! drift: the REST API (`coordinator/rest/`), `/api/coordinator/conf`, `/info` and `/stacks`
//! (Java's `CoordinatorServerResource`), and the metric endpoints on the paths the Java
//! coordinator serves them (`CoordinatorServerResource` mounts the common `MetricResource` and
//! `PrometheusMetricResource` under `/api/coordinator`; the common resource package serves them
//! at the root too). Registries: `server`, `grpc`, `jvm`, `all` (see `metrics::coordinator`).
//!
//! | Path | Answer | Access |
//! |---|---|---|
//! | `/api/server/*`, `/api/app/*`, `/api/admin/refreshChecker`, `GET /api/coordinator/info` | the REST API | open |
//! | `POST /api/server/[{id}/]decommission`, `…/cancelDecommission` | decommission through the coordinator | admin |
//! | `GET /api/coordinator/conf` | the config's `rss.*` keys as written (credentials masked) | open |
//! | `GET /api/coordinator/stacks` | threads and runtime summary (text) | open |
//! | `GET /api/coordinator/metrics[/{type}]` | JSON samples (no type: `all`) | open |
//! | `GET /api/coordinator/prometheus/metrics/{type}` | text 0.0.4 | open |
//! | `GET /metrics[/{type}]`, `/prometheus/metrics/{type}` | the same, in a coordinator-only process | open |
//! | `POST /confOps/update` | runtime reconfiguration (`config::reload`), in a coordinator-only process; the single binary has the server's | admin |
//!
//! In the single binary the root paths stay the shuffle server's (its Java counterpart owns
//! them on its own port), so the coordinator's are under `/api/coordinator` only. "admin" is
//! the shuffle server's guard (`auth.rs`), built from the same keys in either process
//! (`rss.http.basic.authorizationCredentials`, `metrics.admin_token`).

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::auth::{self, AdminAuth};
use crate::config::reload::Runtime;
use crate::coordinator::rest::{self, RestContext};
use crate::metrics::Metrics;

/// What the coordinator's routes read.
pub struct CoordinatorHttp {
    /// The coordinator and this process's identity.
    pub rest: Arc<RestContext>,
    /// The registries (the coordinator's are attached).
    pub metrics: Arc<Metrics>,
    /// The running config, for `/api/coordinator/conf`.
    pub runtime: Arc<Runtime>,
    /// `<ip>-<grpcPort>`, the process's name in `/api/coordinator/stacks`.
    pub id: String,
}

/// Every coordinator route (see the module doc), for either process. `auth` guards the routes
/// Java marks `@Authorization`; `standalone` adds the root metric paths. The dashboard is
/// merged here too, so both processes serve it.
pub(super) fn routes(c: &CoordinatorHttp, auth: Arc<AdminAuth>, standalone: bool) -> Router {
    let state = Arc::new(ConfState {
        runtime: Arc::clone(&c.runtime),
        id: c.id.clone(),
    });
    rest::open_routes(Arc::clone(&c.rest))
        .merge(crate::coordinator::dashboard::routes(Arc::clone(&c.rest)))
        .merge(
            rest::admin_routes(Arc::clone(&c.rest))
                .route_layer(middleware::from_fn_with_state(auth, auth::require_admin)),
        )
        .merge(
            Router::new()
                .route("/api/coordinator/conf", get(conf))
                .route("/api/coordinator/stacks", get(stacks))
                .with_state(state),
        )
        .merge(router(Arc::clone(&c.metrics), standalone))
}

struct ConfState {
    runtime: Arc<Runtime>,
    id: String,
}

/// Java's `CoordinatorServerResource.getCoordinatorConf`: the conf's entries as
/// `CoordinatorConfVO`s, the same two fields as the server's `/conf` (see `state::conf_json`).
async fn conf(State(s): State<Arc<ConfState>>) -> Response {
    super::state::conf_json(&s.runtime.current())
}

/// Java's `getCoordinatorStacks` (a JVM thread dump); see [`super::admin::stacks_text`].
async fn stacks(State(s): State<Arc<ConfState>>) -> Response {
    super::admin::stacks_text("coordinator", &s.id).into_response()
}

/// The HTTP router of a coordinator-only process: [`routes`] with the root metric paths,
/// behind the admin guard `config` asks for.
pub fn standalone_router(c: &CoordinatorHttp, config: &crate::config::Config) -> Router {
    let auth = Arc::new(AdminAuth::new(config, &c.metrics));
    // The embedded coordinator shares the server's `confOps` (one process, one config).
    let conf_ops = Router::new()
        .route(
            "/confOps/update",
            axum::routing::post(super::conf_ops::update_runtime),
        )
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&auth),
            auth::require_admin,
        ))
        .with_state(Arc::clone(&c.runtime));
    routes(c, auth, true).merge(conf_ops)
}

/// The coordinator's metric routes over `metrics`; `standalone` adds the root paths.
fn router(metrics: Arc<Metrics>, standalone: bool) -> Router {
    let mut router = Router::new()
        .route("/api/coordinator/metrics", get(metrics_route::<false>))
        .route("/api/coordinator/metrics/", get(metrics_route::<false>))
        .route(
            "/api/coordinator/metrics/{kind}",
            get(metrics_route::<false>),
        )
        .route(
            "/api/coordinator/prometheus/metrics/{kind}",
            get(metrics_route::<true>),
        );
    if standalone {
        router = router
            .route("/metrics", get(metrics_route::<false>))
            .route("/metrics/{kind}", get(metrics_route::<false>))
            .route("/prometheus/metrics/{kind}", get(metrics_route::<true>));
    }
    router.with_state(metrics)
}

/// `…/metrics[/{kind}]` (Java's JSON) and, with `TEXT`, `…/prometheus/metrics/{kind}`.
async fn metrics_route<const TEXT: bool>(
    State(m): State<Arc<Metrics>>,
    kind: Option<Path<String>>,
    RawQuery(q): RawQuery,
) -> Response {
    super::state::metrics_answer(kind, TEXT, |kind| {
        m.gather_coordinator(kind, &super::state::names(q))
    })
}
