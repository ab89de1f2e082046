//! Runtime reconfiguration through the real interfaces: Java's `confOps/update` REST endpoint
//! (body, answers, the admin guard), the RPC audit log changing behaviour from the next
//! request, `/api/shuffleServer/conf` showing the running values, and the config file re-read
//! at `reconfigure_interval` once it changes.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::start;
use spillway::config::{Config, Secret};
use spillway::proto;
use spillway::server;
use tempfile::TempDir;

const BASIC: &str = "dXNlcjpzZWNyZXQ=";

struct Answer {
    code: u16,
    body: String,
}

async fn post(base: &str, path: &str, body: &str, auth: Option<&str>) -> Answer {
    let mut req = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let r = req.send().await.unwrap();
    Answer {
        code: r.status().as_u16(),
        body: r.text().await.unwrap(),
    }
}

/// `/api/shuffleServer/conf` as `key → value`.
async fn conf(base: &str) -> Vec<(String, String)> {
    let body = reqwest::get(format!("{base}/api/shuffleServer/conf"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["argumentKey"].as_str().unwrap().to_owned(),
                e["argumentValue"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn value<'a>(conf: &'a [(String, String)], key: &str) -> Option<&'a str> {
    conf.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Lines of the audit file naming `cmd`.
fn count(path: &Path, cmd: &str) -> usize {
    let tag = format!("cmd={cmd}\t");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&tag))
        .count()
}

async fn until(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn rest_update_reconfigures_the_audit_log_and_conf_shows_it() {
    let dir = TempDir::new().unwrap();
    let audit = dir.path().join("audit.log");
    let path = audit.clone();
    let mut s = start(1, move |c| {
        c.audit.rpc_log = true;
        c.audit.rpc_log_path = path;
        c.metrics.basic_credentials = Some(Secret(BASIC.into()));
    })
    .await;
    let base = format!("http://{}", s.running.http_addr);
    let auth = format!("Basic {BASIC}");
    common::register(&mut s.client, "app_reconf", 1, 0..1, false).await;
    let heartbeat = async |c: &mut common::Client| {
        let r = c
            .app_heartbeat(proto::AppHeartBeatRequest {
                app_id: "app_reconf".into(),
            })
            .await
            .unwrap();
        assert_eq!(r.into_inner().status, 0);
    };
    let update = r#"{"update": {"rss.server.rpc.audit.log.excludeList": "requireBuffer"}}"#;

    // The guard: Java's Basic credentials, Java's refusal.
    let a = post(&base, "/api/shuffleServer/confOps/update", update, None).await;
    assert_eq!((a.code, a.body.as_str()), (401, "Authentication Failed"));
    let a = post(
        &base,
        "/confOps/update",
        update,
        Some("Basic dXNlcjpvdGhlcg=="),
    )
    .await;
    assert_eq!(a.code, 401);

    // appHeartbeat is excluded by default; the update lifts that from the next request.
    heartbeat(&mut s.client).await;
    let a = post(
        &base,
        "/api/shuffleServer/confOps/update",
        update,
        Some(&auth),
    )
    .await;
    assert_eq!(
        (a.code, a.body.as_str()),
        (
            200,
            "temporarily effective until restart: Update successfully"
        )
    );
    heartbeat(&mut s.client).await;
    until("the heartbeat's audit line", async || {
        count(&audit, "appHeartbeat") == 1
    })
    .await;
    assert_eq!(
        value(&conf(&base).await, "audit.rpc_exclude"),
        Some("requireBuffer")
    );

    // Off, then on again (by the root path and the Spillway name): what ran while off is not
    // in the file, what runs after is.
    let off = r#"{"update": {"rss.server.rpc.audit.log.enabled": false}}"#;
    assert_eq!(
        post(&base, "/confOps/update", off, Some(&auth)).await.code,
        200
    );
    heartbeat(&mut s.client).await;
    let on = r#"{"update": {"audit.rpc_log": "true"}, "delete": ["audit.rpc_exclude"]}"#;
    assert_eq!(
        post(&base, "/confOps/update", on, Some(&auth)).await.code,
        200
    );
    common::register(&mut s.client, "app_reconf", 2, 0..1, false).await;
    until("the registration's audit line", async || {
        count(&audit, "registerShuffle") == 2
    })
    .await;
    assert_eq!(
        count(&audit, "appHeartbeat"),
        1,
        "no line while the log was off"
    );
    // The delete put the default exclude list back.
    heartbeat(&mut s.client).await;
    let c = conf(&base).await;
    assert_eq!(value(&c, "audit.rpc_exclude"), Some("appHeartbeat"));
    assert_eq!(value(&c, "audit.rpc_log"), Some("true"));

    // Refusals change nothing and say why.
    for (body, code, why) in [
        (
            r#"{"update": {"rss.rpc.server.port": "1"}}"#,
            400,
            "not reconfigurable",
        ),
        (
            r#"{"update": {"audit.rpc_log": "yes"}}"#,
            400,
            "is not true or false",
        ),
        (
            r#"{"update": {"audit.rpc_log": "false"}, "delete": ["grpc_port"]}"#,
            400,
            "grpc_port",
        ),
        (r#"{"updates": {}}"#, 400, "unknown field"),
        ("null", 200, "Nothing changed"),
    ] {
        let a = post(
            &base,
            "/api/shuffleServer/confOps/update",
            body,
            Some(&auth),
        )
        .await;
        assert_eq!(a.code, code, "{body}: {}", a.body);
        assert!(a.body.contains(why), "{body}: {}", a.body);
    }
    assert_eq!(value(&conf(&base).await, "audit.rpc_log"), Some("true"));
    let form = reqwest::Client::new()
        .post(format!("{base}/confOps/update"))
        .header("authorization", &auth)
        .form(&[("key", "audit.rpc_log"), ("value", "false")])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 415);
    s.running.shutdown().await;
}

/// A Java `server.conf` for a test server on loopback-reachable ephemeral ports.
fn server_conf(data: &Path, exclude: &str, interval_secs: u32) -> String {
    format!(
        "rss.rpc.server.port 0\nrss.jetty.http.port 0\nrss.server.netty.port -1\n\
         rss.storage.type MEMORY_LOCALFILE\nrss.storage.basePath {}\n\
         rss.server.buffer.capacity 64mb\nrss.server.read.buffer.capacity 16mb\n\
         rss.server.rpc.audit.log.enabled false\n\
         rss.server.rpc.audit.log.excludeList {exclude}\n\
         rss.metrics.reporter.class PrometheusPushGatewayMetricReporter\n\
         rss.metrics.prometheus.pushgateway.addr 127.0.0.1:9\n\
         rss.metrics.prometheus.pushgateway.jobname reconf\n\
         rss.metrics.prometheus.pushgateway.report.interval.seconds {interval_secs}\n\
         rss.reconfigure.interval.sec 1\n",
        data.display()
    )
}

/// Writes `text` to `path` and moves its modification time forward, so the change is seen
/// whatever the file system's timestamp granularity.
fn rewrite(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(2))
        .unwrap();
}

#[tokio::test]
async fn a_changed_config_file_is_applied_at_the_reconfigure_interval() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let path = dir.path().join("server.conf");
    std::fs::write(&path, server_conf(&data, "appHeartbeat", 600)).unwrap();
    let env = |name: &str| (name == "WORKER_IP").then(|| "127.0.0.1".to_owned());
    let mut config = Config::load(Some(&path), &env).unwrap();
    config.bind_ip = "127.0.0.1".into();
    config.recovery.enabled = false;
    let running = server::start(config).await.unwrap();
    let base = format!("http://{}", running.http_addr);
    let c = conf(&base).await;
    assert_eq!(
        value(
            &c,
            "rss.metrics.prometheus.pushgateway.report.interval.seconds"
        ),
        Some("600")
    );

    // Reconfigurable keys change; the port key does not (a restart would be needed).
    let changed = server_conf(&data, "appHeartbeat,requireBuffer", 42).replace(
        "rss.server.read.buffer.capacity 16mb",
        "rss.server.read.buffer.capacity 8mb",
    );
    rewrite(&path, &changed);
    until("the file's new values on /conf", async || {
        let c = conf(&base).await;
        value(
            &c,
            "rss.metrics.prometheus.pushgateway.report.interval.seconds",
        ) == Some("42")
            && value(&c, "rss.server.rpc.audit.log.excludeList")
                == Some("appHeartbeat,requireBuffer")
    })
    .await;
    let c = conf(&base).await;
    assert_eq!(
        value(&c, "rss.server.read.buffer.capacity"),
        Some("16mb"),
        "a key that needs a restart keeps showing the running value"
    );

    // A key the file no longer sets goes back to its default, and leaves /conf.
    let without: String = changed
        .lines()
        .filter(|l| !l.starts_with("rss.server.rpc.audit.log.excludeList"))
        .map(|l| format!("{l}\n"))
        .collect();
    rewrite(&path, &without);
    until("the removed key to leave /conf", async || {
        value(&conf(&base).await, "rss.server.rpc.audit.log.excludeList").is_none()
    })
    .await;
    running.shutdown().await;
}

#[tokio::test]
async fn a_new_push_interval_reschedules_the_reporter() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    // A stand-in gateway that counts push-adds.
    let pushes = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&pushes);
    let gateway = axum::Router::new().fallback(axum::routing::post(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "" }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gw = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, gateway).await });

    let s = start(1, move |c| {
        c.metrics.push_gateway_endpoint = Some(format!("http://{gw}"));
        c.metrics.push_interval = Duration::from_secs(3600);
    })
    .await;
    let base = format!("http://{}", s.running.http_addr);
    // An hour away: nothing pushed until the interval changes.
    assert_eq!(pushes.load(Ordering::SeqCst), 0);
    let a = post(
        &base,
        "/api/shuffleServer/confOps/update",
        r#"{"update": {"metrics.push_interval": "100ms"}}"#,
        None,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    until("pushes at the new interval", async || {
        pushes.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert_eq!(
        value(&conf(&base).await, "metrics.push_interval"),
        Some("100ms")
    );
    s.running.shutdown().await;
}

#[tokio::test]
async fn a_new_hard_limit_applies_to_the_next_require_buffer() {
    let mut s = start(1, |_| {}).await;
    let base = format!("http://{}", s.running.http_addr);
    let app = "app_hard_limit";
    common::register(&mut s.client, app, 0, 0..1, false).await;
    common::send(
        &mut s.client,
        app,
        0,
        vec![(0, vec![common::make_block(1, 0, 1, 1000)])],
    )
    .await;
    let mut require = async |size: i32| {
        common::status_of(common::require_once(&mut s.client, app, size).await.status)
    };
    assert_eq!(require(2000).await, proto::StatusCode::Success);
    let a = post(
        &base,
        "/confOps/update",
        r#"{"update": {"rss.server.huge-partition.size.hard.limit": "512"}}"#,
        None,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    let refused = require(2000).await;
    assert_eq!(
        refused,
        proto::StatusCode::ExceedHugePartitionHardLimit,
        "the hard limit, not memory"
    );
    // Deleting it puts Java's default (no limit) back.
    let a = post(
        &base,
        "/confOps/update",
        r#"{"delete": ["hybrid_store.huge_partition_hard_limit"]}"#,
        None,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(require(2000).await, proto::StatusCode::Success);
    s.running.shutdown().await;
}
