//! The real binary as a coordinator-only process started from a Java `coordinator.conf`: a
//! Spillway shuffle server heartbeats to it, a client gets an assignment naming that server and
//! writes there, the coordinator's metrics are on Java's paths, and SIGTERM ends it with exit 0.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spillway::proto::coordinator_server_client::CoordinatorServerClient;
use spillway::proto::{self, StatusCode};
use tonic::transport::Channel;

use common::status_of;

/// Kills the coordinator if the test fails before it sends SIGTERM.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A Java coordinator.conf (`key value` lines, as Java's conf/coordinator.conf is written),
/// with ephemeral ports, a key Spillway does not use, and a name that is not coordinator.conf
/// so the content alone says what it is.
const CONF: &str = "\
# Java coordinator settings
rss.rpc.server.port 0
rss.jetty.http.port 0
rss.coordinator.server.heartbeat.timeout 30000
rss.coordinator.app.expired 60000
rss.coordinator.shuffle.nodes.max 1
rss.coordinator.server.periodic.output.interval.times 30
";

fn addr_after(line: &str, field: &str) -> Option<std::net::SocketAddr> {
    let value = line.split(&format!("{field}=")).nth(1)?;
    let addr: std::net::SocketAddr = value.split_whitespace().next()?.parse().ok()?;
    // It listens on 0.0.0.0 (Java's coordinator binds every address too).
    Some(std::net::SocketAddr::new(
        [127, 0, 0, 1].into(),
        addr.port(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_coordinator_conf_starts_a_coordinator_that_servers_and_clients_use() {
    let dir = tempfile::TempDir::new().unwrap();
    let conf = dir.path().join("rss-coordinator.properties");
    std::fs::write(&conf, CONF).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .arg("--config")
        .arg(&conf)
        .env("RUST_LOG", "info")
        .env("WORKER_IP", "127.0.0.1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("binary starts");
    let mut child = KillOnDrop(Some(child));
    let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("coordinator> {line}");
            let _ = tx.send(line);
        }
    });
    let mut warned = false;
    let (grpc, http) = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the coordinator logs its listening addresses");
        warned |= line.contains("Java coordinator setting(s) are not used")
            && line.contains("rss.coordinator.server.periodic.output.interval.times");
        assert!(
            !line.contains("spillway listening"),
            "a shuffle server started instead of a coordinator"
        );
        if line.contains("spillway coordinator listening") {
            break (
                addr_after(&line, "grpc_addr").unwrap(),
                addr_after(&line, "http_addr").unwrap(),
            );
        }
    };
    assert!(warned, "the unused key is warned once at start-up");

    // A Spillway shuffle server with this coordinator in its quorum.
    let mut server = common::start(1, |c| {
        c.coordinator_quorum = vec![grpc.to_string()];
        c.heartbeat_interval = Duration::from_millis(200);
    })
    .await;
    let channel = Channel::from_shared(format!("http://{grpc}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut coordinator = CoordinatorServerClient::new(channel);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let servers = coordinator
            .get_shuffle_server_list(())
            .await
            .unwrap()
            .into_inner()
            .servers;
        if servers.iter().any(|s| s.id == server.running.server_id) {
            assert_eq!(
                servers.len(),
                1,
                "the coordinator registered no server of its own"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the shuffle server never heartbeat"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A client's assignment names that server, and writing there works.
    let r = coordinator
        .register_application_info(proto::ApplicationInfoRequest {
            app_id: "coord_app".into(),
            user: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    let r = coordinator
        .get_shuffle_assignments(proto::GetShuffleServerRequest {
            application_id: "coord_app".into(),
            shuffle_id: 0,
            partition_num: 2,
            partition_num_per_range: 1,
            data_replica: 1,
            require_tags: vec!["ss_v5".into(), "GRPC".into()],
            assignment_shuffle_server_number: -1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    assert_eq!(r.assignments.len(), 2);
    for a in &r.assignments {
        assert_eq!(a.server.len(), 1);
        assert_eq!(a.server[0].id, server.running.server_id);
        assert_eq!(a.server[0].port, i32::from(server.running.grpc_addr.port()));
    }
    common::register(&mut server.client, "coord_app", 0, 0..2, false).await;
    let expected = common::write_shuffle(&mut server.client, "coord_app", 0, 2, 2, 2, 500).await;
    common::verify_shuffle(&mut server.client, "coord_app", 0, &expected).await;

    // The coordinator's metrics, on Java's coordinator paths: the root ones are its own here.
    let base = format!("http://{http}");
    let text = reqwest::get(format!("{base}/prometheus/metrics/server"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.lines().any(|l| l == "total_server_num 1"), "{text}");
    assert!(text.lines().any(|l| l == "running_app_num 1"), "{text}");
    assert!(
        text.lines().any(|l| l == r#"app_num{user_name="alice"} 1"#),
        "{text}"
    );
    assert!(
        !text.contains("total_received_data"),
        "no shuffle-server families in a coordinator"
    );
    let grpc_text = reqwest::get(format!("{base}/api/coordinator/prometheus/metrics/grpc"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        grpc_text
            .lines()
            .any(|l| l == r#"grpc_get_shuffle_assignments_total{tags="coordinator"} 1"#),
        "{grpc_text}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &reqwest::get(format!("{base}/metrics/all"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(json["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "grpc_heartbeat_total"));
    let r = reqwest::get(format!("{base}/prometheus/metrics/netty"))
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        500,
        "the coordinator has no netty registry"
    );

    server.running.shutdown().await;
    let mut child = child.0.take().unwrap();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    reader.join().unwrap();
}
