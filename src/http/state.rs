//! What the HTTP handlers share: the state they read, and the helpers both the server's and
//! the coordinator's routes use.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use prometheus::proto::MetricFamily;
use tokio_util::sync::CancellationToken;

use crate::app::AppRegistry;
use crate::config::reload::Runtime;
use crate::config::Config;
use crate::metrics::{format, Kind, Metrics};

/// What the handlers read.
pub struct HttpState {
    /// The registries.
    pub metrics: Arc<Metrics>,
    /// Apps, status, stores.
    pub registry: Arc<AppRegistry>,
    /// The start-up config (the admin guard's credentials).
    pub config: Config,
    /// The running config, as runtime reconfiguration leaves it (for
    /// `/api/shuffleServer/conf` and the `confOps` endpoint).
    pub runtime: Arc<Runtime>,
    /// `<ip>-<grpcPort>[-<nettyPort>]`.
    pub server_id: String,
    /// Stops long requests (profiles) early at shutdown.
    pub stop: CancellationToken,
    /// The embedded coordinator's REST API; `None` when the coordinator is off, and then its
    /// paths answer 404 as a Java shuffle server's do.
    pub coordinator: Option<Arc<crate::coordinator::rest::RestContext>>,
}

/// A metrics route's answer: the families of the type in the path (`all` without one) that
/// `gather` returns, in Java's JSON, or in the Prometheus text format when `text`. Java answers
/// an unknown type with an uncaught exception, which Jetty turns into a 500.
pub(super) fn metrics_answer(
    kind: Option<Path<String>>,
    text: bool,
    gather: impl FnOnce(Kind) -> crate::error::Result<Vec<MetricFamily>>,
) -> Response {
    let kind = kind.map_or(Ok(Kind::All), |Path(k)| k.parse::<Kind>());
    match kind.and_then(gather) {
        Ok(families) if text => (
            [(header::CONTENT_TYPE, format::TEXT_CONTENT_TYPE)],
            format::text(&families),
        )
            .into_response(),
        Ok(families) => Json(format::json(&families, crate::clock::now_ms())).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The repeated `name[]=` parameters.
pub(super) fn names(query: Option<String>) -> Vec<String> {
    let Some(q) = query else {
        return Vec::new();
    };
    form_urlencoded::parse(q.as_bytes())
        .filter(|(k, _)| k == "name[]" || k == "name")
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// Java's `{"code":0,"data":[{"argumentKey":…,"argumentValue":…}],"errMsg":"success"}`, for
/// `/api/shuffleServer/conf` and `/api/coordinator/conf` (Java's `CoordinatorConfVO` has the
/// same two fields).
///
/// A process started from a Java `server.conf` or `coordinator.conf` lists that file's keys as
/// written, which is what Java's `getAll()` holds, so a dashboard or script that looks up an
/// `rss.*` key finds it. A TOML config has no `rss.*` keys: it lists its own dotted keys. The
/// Basic credentials are masked (Java shows them to anyone; the endpoint is open), and so are
/// Hadoop's sensitive keys (`config::sensitive`). Both show
/// the running values, as runtime reconfiguration left them.
pub(super) fn conf_json(config: &Config) -> Response {
    // Hadoop secrets (s3a keys and the like) never leave the process.
    let config = &config.redacted();
    let pairs = if config.java_properties.is_empty() {
        crate::config::reload::flatten(config)
    } else {
        config
            .java_properties
            .iter()
            .map(|(k, v)| {
                let secret = k.eq_ignore_ascii_case(crate::config::java::BASIC_CREDENTIALS_KEY);
                (k.clone(), if secret { "******".into() } else { v.clone() })
            })
            .collect()
    };
    let data: Vec<serde_json::Value> = pairs
        .into_iter()
        .map(|(k, v)| serde_json::json!({"argumentKey": k, "argumentValue": v}))
        .collect();
    Json(serde_json::json!({"code": 0, "data": data, "errMsg": "success"})).into_response()
}
