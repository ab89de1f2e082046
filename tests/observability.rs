//! The HTTP port against the real server: metric endpoints in Uniffle's paths and formats
//! (values move with real gRPC and Netty traffic), config, stacks, status and decommission over
//! HTTP, the heartbeat's `jetty_port`, and CPU profiles parsed by `go tool pprof`.

mod common;

use std::time::Duration;

use common::{make_block, register, send, start, write_shuffle};
use spillway::netty::messages::{MemoryRequest, Request};
use spillway::netty::{Header, HEADER_LEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn get(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.expect("HTTP port answers");
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

/// The value of the first sample of `name` whose labels contain every `labels` part.
fn value(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| labels.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// `go tool pprof` from Go's install (or PATH); the test fails without it.
fn go() -> std::path::PathBuf {
    let local = std::path::PathBuf::from("/usr/local/go/bin/go");
    if local.exists() {
        local
    } else {
        "go".into()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_grpc_and_netty_traffic() {
    let mut s = start(1, |c| {
        c.tags = vec!["blue".into()];
    })
    .await;
    let base = format!("http://{}", s.running.http_addr);
    let tags = r#"tags="ss_v5,ss_v4,GRPC,GRPC_NETTY,blue""#;

    let (code, before) = get(&format!("{base}/prometheus/metrics/all")).await;
    assert_eq!(code, 200);
    assert_eq!(value(&before, "app_num_with_node", &[tags]), Some(0.0));
    assert_eq!(value(&before, "total_received_data", &[tags]), Some(0.0));
    assert!(before.contains("# HELP total_received_data Counter total_received_data"));
    assert!(before.contains("# TYPE grpc_send_shuffle_data_process_latency summary"));

    register(&mut s.client, "obs_app", 0, 0..2, false).await;
    let expected = write_shuffle(&mut s.client, "obs_app", 0, 2, 2, 3, 1000).await;
    common::verify_shuffle(&mut s.client, "obs_app", 0, &expected).await;

    // A Netty memory read, so the netty registry moves too.
    let netty = s.running.netty_addr.expect("netty plane on");
    let mut conn = tokio::net::TcpStream::connect(netty).await.unwrap();
    let req = Request::Memory(MemoryRequest {
        request_id: 7,
        app_id: "obs_app".into(),
        shuffle_id: 0,
        partition_id: 0,
        last_block_id: -1,
        read_buffer_size: 1 << 20,
        timestamp: spillway_now_ms() - 5,
        expected_task_ids: None,
    });
    conn.write_all(&req.encode()).await.unwrap();
    let mut header = [0u8; HEADER_LEN];
    conn.read_exact(&mut header).await.unwrap();
    let h = Header::parse(&header, usize::MAX).unwrap();
    let mut rest = vec![0u8; h.payload_len()];
    conn.read_exact(&mut rest).await.unwrap();
    drop(conn);

    // Spill to disk so the flush counters move.
    common::finish(&mut s.client, "obs_app", 0).await;

    let (_, server) = get(&format!("{base}/prometheus/metrics/server")).await;
    assert_eq!(value(&server, "app_num_with_node", &[tags]), Some(1.0));
    assert_eq!(
        value(&server, "partition_num_with_node", &[tags]),
        Some(2.0)
    );
    assert_eq!(value(&server, "total_app_num", &[tags]), Some(1.0));
    // 2 maps × 3 sequences × 2 partitions × (1000 + 32 metadata bytes).
    assert_eq!(
        value(&server, "total_received_data", &[tags]),
        Some(12.0 * 1032.0)
    );
    assert!(value(&server, "total_read_data", &[tags]).unwrap() >= 12.0 * 1000.0);
    assert_eq!(value(&server, "is_healthy", &[tags]), Some(0.0));
    assert_eq!(value(&server, "huge_partition_num", &[tags]), Some(0.0));
    assert_eq!(
        value(&server, "buffer_count_in_buffer_pool", &[tags]),
        Some(2.0)
    );
    let disk = s.disks[0].path().to_string_lossy().into_owned();
    let disk_label = format!(r#"local_disk_path="{disk}""#);
    assert_eq!(
        value(&server, "total_localfile_write_data", &[&disk_label]),
        Some(12.0 * 1000.0)
    );
    assert_eq!(
        value(
            &server,
            "local_storage_total_dirs_num",
            &[r#"local_disk_path="ALL""#]
        ),
        Some(1.0)
    );
    assert!(value(&server, "storage_success_write_local", &[tags]).unwrap() >= 2.0);
    assert_eq!(
        value(&server, "storage_failed_write_local", &[tags]),
        Some(0.0)
    );
    assert!(value(&server, "local_storage_total_space", &[&disk_label]).unwrap() > 0.0);

    let (_, grpc) = get(&format!("{base}/prometheus/metrics/grpc")).await;
    // 2 maps × 3 sends (each send carries both partitions).
    assert_eq!(
        value(&grpc, "grpc_send_shuffle_data_total", &[tags]),
        Some(6.0)
    );
    assert_eq!(
        value(&grpc, "grpc_registered_shuffle_total", &[tags]),
        Some(1.0)
    );
    assert_eq!(
        value(&grpc, "grpc_send_shuffle_data", &[tags]),
        Some(0.0),
        "none in flight"
    );
    assert_eq!(
        value(
            &grpc,
            "grpc_send_shuffle_data_process_latency_count",
            &[tags]
        ),
        Some(6.0)
    );
    assert!(value(
        &grpc,
        "grpc_send_shuffle_data_process_latency",
        &[r#"quantile="0.99""#]
    )
    .is_some_and(|v| v >= 0.0));
    assert!(value(&grpc, "grpc_total", &[tags]).unwrap() > 6.0);
    assert_eq!(
        value(&grpc, "grpc_server_connection_number", &[tags]),
        Some(1.0),
        "the test's one channel"
    );

    let (_, netty_text) = get(&format!(
        "{base}/api/shuffleServer/prometheus/metrics/netty"
    ))
    .await;
    assert_eq!(
        value(
            &netty_text,
            "netty_get_memory_shuffle_data_request_total",
            &[tags]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &netty_text,
            "netty_get_memory_shuffle_data_request_transport_latency_count",
            &[tags]
        ),
        Some(1.0)
    );

    let (_, jvm) = get(&format!("{base}/prometheus/metrics/jvm")).await;
    assert!(value(&jvm, "process_resident_memory_bytes", &[]).unwrap() > 0.0);
    let workers = value(&jvm, "tokio_workers", &[tags]).unwrap();
    assert!(workers >= 1.0);
    // A server in a test's runtime has no thread count to give (the binary's: binary_smoke).
    assert_eq!(value(&jvm, "tokio_threads", &[tags]), None);
    assert!(value(&jvm, "tokio_blocking_tasks", &[tags]).unwrap() >= 0.0);

    // JSON, with the name[] filter, on both paths.
    for path in ["/metrics/server", "/api/shuffleServer/metrics/server"] {
        let (code, body) = get(&format!(
            "{base}{path}?name[]=app_num_with_node&name[]=total_received_data"
        ))
        .await;
        assert_eq!(code, 200);
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        let samples = json["metrics"].as_array().unwrap();
        assert_eq!(samples.len(), 2, "{body}");
        let app = samples
            .iter()
            .find(|m| m["name"] == "app_num_with_node")
            .unwrap();
        assert_eq!(app["labelNames"], serde_json::json!(["tags"]));
        assert_eq!(
            app["labelValues"],
            serde_json::json!(["ss_v5,ss_v4,GRPC,GRPC_NETTY,blue"])
        );
        assert_eq!(app["value"], 1.0);
        assert!(app["timestampMs"].is_null());
        assert!(json["timeStamp"].as_i64().unwrap() > 0);
    }
    let (_, all) = get(&format!("{base}/metrics")).await;
    let all: serde_json::Value = serde_json::from_str(&all).unwrap();
    let names: Vec<&str> = all["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    for n in [
        "used_buffer_size",
        "grpc_send_shuffle_data_process_latency",
        "grpc_send_shuffle_data_process_latency_count",
        "netty_active_connection",
        "process_cpu_seconds_total",
    ] {
        assert!(names.contains(&n), "{n} in /metrics");
    }

    // Unregistering deletes the spilled files: total_delete_data moves by their size.
    let r = s
        .client
        .unregister_shuffle_by_app_id(spillway::proto::ShuffleUnregisterByAppIdRequest {
            app_id: "obs_app".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, text) = get(&format!(
            "{base}/prometheus/metrics/server?name[]=total_delete_data"
        ))
        .await;
        // Data (12 × 1000 bytes) and index (12 × 40 bytes) files.
        if value(&text, "total_delete_data", &[tags]) == Some(12.0 * 1040.0) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let (code, body) = get(&format!("{base}/metrics/nope")).await;
    assert_eq!(code, 500, "unknown type answers 500 like Java: {body}");
    let (code, _) = get(&format!("{base}/prometheus/metrics/nope")).await;
    assert_eq!(code, 500);

    s.running.shutdown().await;
}

fn spillway_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conf_stacks_status_and_decommission_over_http() {
    let mut s = start(1, |c| {
        c.coordinator.enabled = true;
        c.coordinator.register_self = true;
        c.heartbeat_interval = Duration::from_millis(50);
    })
    .await;
    // An app keeps a decommissioning server from finishing at once.
    register(&mut s.client, "dec_app", 0, 0..1, false).await;
    let base = format!("http://{}", s.running.http_addr);
    let client = reqwest::Client::new();

    let (code, conf) = get(&format!("{base}/api/shuffleServer/conf")).await;
    assert_eq!(code, 200);
    let conf: serde_json::Value = serde_json::from_str(&conf).unwrap();
    assert_eq!(conf["code"], 0);
    assert_eq!(conf["errMsg"], "success");
    let entries = conf["data"].as_array().unwrap();
    let find = |k: &str| {
        entries
            .iter()
            .find(|e| e["argumentKey"] == k)
            .map(|e| e["argumentValue"].as_str().unwrap().to_owned())
    };
    assert_eq!(find("bind_ip").as_deref(), Some("127.0.0.1"));
    assert_eq!(find("metrics.http_port").as_deref(), Some("0"));
    assert!(find("memory_store.capacity").is_some());

    let (code, stacks) = get(&format!("{base}/api/shuffleServer/stacks")).await;
    assert_eq!(code, 200);
    assert!(stacks.contains("threads (tid, name, state)"), "{stacks}");
    assert!(stacks.contains("tokio runtime:"), "{stacks}");

    let (code, status) = get(&format!("{base}/status")).await;
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["status"], "ACTIVE");
    assert_eq!(status["serverId"], s.running.server_id.as_str());
    assert_eq!(get(&format!("{base}/health")).await.0, 200);

    let r = client
        .post(format!("{base}/admin/decommission"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(body["status"], "DECOMMISSIONING");
    assert_eq!(
        s.running.registry().status().get(),
        spillway::proto::ServerStatus::Decommissioning
    );
    let r = client
        .post(format!("{base}/admin/cancel_decommission"))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(body["status"], "ACTIVE");
    let (_, state) = get(&format!("{base}/admin/state")).await;
    assert!(state.contains("\"ACTIVE\""));

    // Heartbeats report the bound HTTP port, not the configured 0.
    let coordinator = s.running.coordinator().unwrap().clone();
    let id = s.running.server_id.clone();
    let port = i32::from(s.running.http_addr.port());
    common::eventually("a heartbeat with the HTTP port", || {
        coordinator
            .servers()
            .get(&id)
            .is_some_and(|n| n.jetty_port == port)
    })
    .await;

    s.running.shutdown().await;
}

/// Keeps the server busy (sends of 64 KiB blocks) until `stop` is set.
async fn load(mut client: common::Client, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let mut seq = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let blocks = (0..4)
            .map(|p| (p, vec![make_block(seq, p, 0, 64 << 10)]))
            .collect();
        send(&mut client, "prof_app", 0, blocks).await;
        seq += 1;
        if seq % 64 == 0 {
            common::finish(&mut client, "prof_app", 0).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_profile_is_read_by_go_pprof_and_flamegraph_is_svg() {
    let mut s = start(1, |c| {
        c.memory_store.capacity = spillway::config::ByteSize(256 << 20)
    })
    .await;
    register(&mut s.client, "prof_app", 0, 0..4, false).await;
    let base = format!("http://{}", s.running.http_addr);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loader = tokio::spawn(load(s.client.clone(), stop.clone()));

    let r = reqwest::get(format!(
        "{base}/debug/pprof/profile?seconds=2&frequency=499"
    ))
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let profile = r.bytes().await.unwrap();
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("profile.pb");
    std::fs::write(&path, &profile).unwrap();
    let out = std::process::Command::new(go())
        .args(["tool", "pprof", "-symbolize=none", "-raw"])
        .arg(&path)
        .output()
        .expect("go is installed (tests/run-all.sh installs it when missing)");
    let raw = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "go tool pprof failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(raw.contains("PeriodType: cpu nanoseconds"), "{raw}");
    assert!(raw.contains("spillway::"), "frames from our code: {raw}");

    let r = reqwest::get(format!(
        "{base}/debug/pprof/flamegraph?seconds=2&frequency=499"
    ))
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "image/svg+xml");
    let svg = r.text().await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    loader.await.unwrap();
    assert!(svg.starts_with("<?xml"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("spillway::"), "frames from our code");

    // Without a jemalloc-profiled process the heap endpoint explains how to turn it on.
    let (code, body) = get(&format!("{base}/debug/pprof/heap")).await;
    assert_eq!(code, 404, "{body}");
    assert!(
        body.contains("MALLOC_CONF") || body.contains("jemalloc"),
        "{body}"
    );

    s.running.shutdown().await;
}
