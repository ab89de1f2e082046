//! The push-gateway reporter against a real Prometheus push gateway (Debian package
//! `prometheus-pushgateway`, installed by `tests/run-all.sh`): periodic push-adds land under
//! job + grouping key + `instance=<server id>`, and a final push happens at shutdown.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{register, start};

/// The gateway process; killed when the test ends, however it ends.
struct Gateway {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (the gateway cannot report an ephemeral port back to us).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn gateway() -> Gateway {
    let dir = tempfile::TempDir::new().unwrap();
    let port = free_port();
    let child = Command::new("prometheus-pushgateway")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!(
            "--persistence.file={}",
            dir.path().join("gw.data").display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect(
            "prometheus-pushgateway is installed (tests/run-all.sh installs it: \
             apt-get install prometheus-pushgateway)",
        );
    let gw = Gateway {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = reqwest::get(format!("{}/-/ready", gw.url)).await {
            if r.status().is_success() {
                return gw;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "push gateway did not become ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The gateway's groups (`/api/v1/metrics` → `data`).
async fn groups(gw: &Gateway) -> Vec<serde_json::Value> {
    let body = reqwest::get(format!("{}/api/v1/metrics", gw.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["data"].as_array().cloned().unwrap_or_default()
}

/// The group of `instance`, if pushed.
async fn group_of(gw: &Gateway, instance: &str) -> Option<serde_json::Value> {
    groups(gw)
        .await
        .into_iter()
        .find(|g| g["labels"]["instance"] == instance)
}

/// The value of the first sample of `metric` in a group, as the gateway reports it.
fn sample(group: &serde_json::Value, metric: &str) -> Option<f64> {
    group[metric]["metrics"][0]["value"]
        .as_str()
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_pushes_carry_job_grouping_key_and_instance() {
    let gw = gateway().await;
    let mut s = start(1, |c| {
        c.metrics.push_gateway_endpoint = Some(gw.url.clone());
        c.metrics.push_interval = Duration::from_millis(100);
        c.metrics.push_gateway_job = "rss_test".into();
        c.metrics.push_gateway_grouping_key = "cluster=c1;zone=a/b".into();
    })
    .await;
    let id = s.running.server_id.clone();
    register(&mut s.client, "push_app", 0, 0..1, false).await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let group = loop {
        if let Some(g) = group_of(&gw, &id).await {
            if sample(&g, "app_num_with_node") == Some(1.0) {
                break g;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no push with the app"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(group["labels"]["job"], "rss_test");
    assert_eq!(group["labels"]["cluster"], "c1");
    assert_eq!(
        group["labels"]["zone"], "a/b",
        "values with '/' go base64-encoded"
    );
    assert_eq!(group["last_push_successful"], true);
    // Every registry is pushed: server, grpc, netty, jvm.
    for m in [
        "total_received_data",
        "grpc_registered_shuffle_total",
        "netty_active_connection",
        "process_resident_memory_bytes",
    ] {
        assert!(group.get(m).is_some(), "{m} pushed");
    }
    assert_eq!(
        group["app_num_with_node"]["metrics"][0]["labels"]["tags"],
        "ss_v5,ss_v4,GRPC,GRPC_NETTY"
    );
    assert_eq!(sample(&group, "grpc_registered_shuffle_total"), Some(1.0));
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_pushes_the_final_numbers() {
    let gw = gateway().await;
    // An interval far beyond the test: only the final push can reach the gateway.
    let mut s = start(1, |c| {
        c.metrics.push_gateway_endpoint = Some(gw.url.clone());
        c.metrics.push_interval = Duration::from_secs(3600);
    })
    .await;
    let id = s.running.server_id.clone();
    register(&mut s.client, "final_app", 0, 0..2, false).await;
    assert!(group_of(&gw, &id).await.is_none());
    s.running.shutdown().await;

    let group = group_of(&gw, &id).await.expect("the final push arrived");
    assert_eq!(group["labels"]["job"], "spillway");
    assert_eq!(sample(&group, "total_app_num"), Some(1.0));
    assert_eq!(sample(&group, "partition_num_with_node"), Some(2.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_gateway_never_blocks_serving() {
    // Nothing listens there: pushes fail and are retried in the background.
    let port = free_port();
    let mut s = start(1, |c| {
        c.metrics.push_gateway_endpoint = Some(format!("http://127.0.0.1:{port}"));
        c.metrics.push_interval = Duration::from_millis(20);
        c.metrics.push_timeout = Duration::from_millis(200);
    })
    .await;
    for shuffle in 0..20 {
        register(&mut s.client, "busy_app", shuffle, 0..1, false).await;
    }
    let report = s.running.shutdown().await;
    assert!(!report.drain_timed_out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_coordinators_families_are_pushed_beside_the_servers() {
    let gw = gateway().await;
    let mut s = start(1, |c| {
        c.metrics.push_gateway_endpoint = Some(gw.url.clone());
        c.metrics.push_interval = Duration::from_millis(100);
        c.coordinator.enabled = true;
        c.coordinator.register_self = false;
    })
    .await;
    let id = s.running.server_id.clone();
    register(&mut s.client, "push_app", 0, 0..1, false).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", s.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut coordinator =
        spillway::proto::coordinator_server_client::CoordinatorServerClient::new(channel);
    coordinator
        .register_application_info(spillway::proto::ApplicationInfoRequest {
            app_id: "push_app".into(),
            user: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let group = loop {
        if let Some(g) = group_of(&gw, &id).await {
            if sample(&g, "running_app_num") == Some(1.0) {
                break g;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no push with the coordinator's app"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The gateway took the merged body: one family per name, the server's and the
    // coordinator's samples side by side.
    assert_eq!(group["last_push_successful"], true);
    let tags: Vec<&str> = group["grpc_open"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["labels"]["tags"].as_str().unwrap())
        .collect();
    assert!(tags.contains(&"coordinator"), "{tags:?}");
    assert!(tags.contains(&"ss_v5,ss_v4,GRPC,GRPC_NETTY"), "{tags:?}");
    assert_eq!(
        group["app_num"]["metrics"][0]["labels"]["user_name"],
        "alice"
    );
    assert!(group.get("grpc_registered_shuffle_total").is_some());
    s.running.shutdown().await;
}
