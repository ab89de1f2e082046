//! The push-gateway reporter: every `push_interval`, POSTs ("push-add": replaces only the
//! metric families it sends) all registries in text format to
//! `<endpoint>/metrics/job/<job>/<k>/<v>…/instance/<server id>`, as Java's
//! `PrometheusPushGatewayMetricReporter` does. Each attempt has a deadline and a failed push is
//! retried a few times with backoff within the interval; nothing here can hold up serving. When
//! stopped it pushes once more, so the gateway keeps the server's final numbers.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::metrics::{format, Metrics};

/// Where and how to push.
#[derive(Clone, Debug)]
pub struct PushOptions {
    /// Gateway base URL (`http://host:9091`).
    pub endpoint: String,
    /// Job name.
    pub job: String,
    /// Grouping key pairs; `instance` is appended by [`push_url`].
    pub grouping: Vec<(String, String)>,
    /// Between pushes, at start.
    pub interval: Duration,
    /// The running config, whose `metrics.push_interval` may change at runtime (Java's
    /// reporter listens for `rss.metrics.prometheus.pushgateway.report.interval.seconds`):
    /// a new interval restarts the wait, so the next push is one new interval away, as Java
    /// reschedules its reporter. `None`: the interval never changes.
    pub reconfigured: Option<watch::Receiver<Arc<Config>>>,
    /// Deadline of one attempt.
    pub timeout: Duration,
}

/// Attempts per push (the first plus retries) before waiting for the next interval.
const ATTEMPTS: u32 = 3;

/// Everything but RFC 3986's unreserved characters is escaped in a path segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// One path segment pair of the grouping key. Values that are empty or contain `/` use the
/// gateway's base64url form (`key@base64/…`), everything else is percent-encoded.
fn segment(key: &str, value: &str) -> String {
    if value.is_empty() || value.contains('/') {
        let b64 = base64::engine::general_purpose::URL_SAFE.encode(value.as_bytes());
        // The gateway reads "=" as the encoding of an empty value.
        let b64 = if b64.is_empty() { "=".to_owned() } else { b64 };
        format!("{key}@base64/{b64}")
    } else {
        format!("{key}/{}", utf8_percent_encode(value, SEGMENT))
    }
}

/// The push URL for `server_id`.
pub fn push_url(opts: &PushOptions, server_id: &str) -> String {
    let mut url = format!(
        "{}/metrics/{}",
        opts.endpoint.trim_end_matches('/'),
        segment("job", &opts.job)
    );
    for (k, v) in &opts.grouping {
        url.push('/');
        url.push_str(&segment(k, v));
    }
    url.push('/');
    url.push_str(&segment("instance", server_id));
    url
}

/// Starts the pusher when `config` names a push gateway; the interval follows runtime
/// reconfiguration through `runtime`.
pub fn spawn_configured(
    metrics: &Arc<Metrics>,
    config: &Config,
    runtime: &crate::config::reload::Runtime,
    id: &str,
    stop: &CancellationToken,
    tracker: &TaskTracker,
) -> crate::error::Result<()> {
    let Some(endpoint) = &config.metrics.push_gateway_endpoint else {
        return Ok(());
    };
    spawn(
        Arc::clone(metrics),
        PushOptions {
            endpoint: endpoint.clone(),
            job: config.metrics.push_gateway_job.clone(),
            grouping: config.metrics.grouping_key(),
            interval: config.metrics.push_interval,
            timeout: config.metrics.push_timeout,
            reconfigured: Some(runtime.subscribe()),
        },
        id.to_owned(),
        stop.clone(),
        tracker,
    )
}

/// Starts the reporter on `tracker`; `stop` ends it after one final push.
pub fn spawn(
    metrics: Arc<Metrics>,
    opts: PushOptions,
    server_id: String,
    stop: CancellationToken,
    tracker: &TaskTracker,
) -> crate::error::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(opts.timeout)
        .connect_timeout(opts.timeout)
        .build()
        .map_err(|e| crate::error::Error::Startup(format!("push gateway client: {e}")))?;
    let url = push_url(&opts, &server_id);
    tracing::info!(%url, interval = ?opts.interval, "pushing metrics to the push gateway");
    let mut reconfigured = opts.reconfigured.clone();
    tracker.spawn(async move {
        let mut failing = false;
        let mut interval = opts.interval;
        let mut next = Instant::now() + interval;
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep_until(next) => {}
                changed = interval_change(&mut reconfigured) => {
                    if changed != interval {
                        tracing::info!(from = ?interval, to = ?changed, "push gateway interval changed");
                        interval = changed;
                        next = Instant::now() + interval;
                    }
                    continue;
                }
            }
            let ok = push_with_retries(&client, &url, &metrics, &stop).await;
            if ok && failing {
                tracing::info!(%url, "metrics push works again");
            }
            failing = !ok;
            next = Instant::now() + interval;
        }
        // The final numbers: one attempt, bounded by the client's timeout.
        match push(&client, &url, &metrics).await {
            Ok(()) => tracing::info!(%url, "final metrics push done"),
            Err(e) => tracing::warn!(%url, error = %e, "final metrics push failed"),
        }
    });
    Ok(())
}

/// The push interval after the next config change; never returns without one (or once the
/// config can no longer change).
async fn interval_change(config: &mut Option<watch::Receiver<Arc<Config>>>) -> Duration {
    if let Some(rx) = config {
        if rx.changed().await.is_ok() {
            return rx.borrow_and_update().metrics.push_interval;
        }
    }
    std::future::pending().await
}

async fn push_with_retries(
    client: &reqwest::Client,
    url: &str,
    metrics: &Metrics,
    stop: &CancellationToken,
) -> bool {
    let mut backoff = Duration::from_millis(200);
    for attempt in 1..=ATTEMPTS {
        match push(client, url, metrics).await {
            Ok(()) => return true,
            Err(e) if attempt == ATTEMPTS => {
                tracing::warn!(%url, attempt, error = %e, "metrics push failed; next try in one interval");
            }
            Err(e) => {
                tracing::debug!(%url, attempt, error = %e, "metrics push failed; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return false,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff *= 2;
            }
        }
    }
    false
}

/// One push-add of every registry.
pub async fn push(client: &reqwest::Client, url: &str, metrics: &Metrics) -> Result<(), String> {
    let body = format::text(&metrics.gather_push());
    let response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, format::TEXT_CONTENT_TYPE)
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response.text().await.unwrap_or_default();
    Err(format!("gateway answered {status}: {}", text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_has_job_grouping_and_instance() {
        let opts = PushOptions {
            endpoint: "http://gw:9091/".into(),
            job: "rss".into(),
            grouping: vec![
                ("cluster".into(), "a b".into()),
                ("path".into(), "/x".into()),
            ],
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            reconfigured: None,
        };
        assert_eq!(
            push_url(&opts, "10.0.0.5-19999-17000"),
            "http://gw:9091/metrics/job/rss/cluster/a%20b/path@base64/L3g=/instance/10.0.0.5-19999-17000"
        );
    }
}
