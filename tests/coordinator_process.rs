//! The real binary as a coordinator-only process started from a Java `coordinator.conf`: a
//! Spillway shuffle server heartbeats to it, a client gets an assignment naming that server and
//! writes there, the coordinator's metrics are on Java's paths, and SIGTERM ends it with exit 0.
//! Its HTTP port serves the Java coordinator's REST API as the embedded coordinator does: the
//! nodes that heartbeat, decommission reaching the server over `ShuffleServerInternal` behind
//! the Basic credentials of the coordinator.conf, its conf and info, over HTTPS too, the
//! exclude-nodes file it polls, and `rss.coordinator.shuffle.nodes.max` re-read from the changed
//! file.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
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
    let process = CoordinatorProcess::start(&conf);
    let (grpc, http) = (process.grpc, process.http);
    let warned = process.start_up.iter().any(|line| {
        line.contains("Java coordinator setting(s) are not used")
            && line.contains("rss.coordinator.server.periodic.output.interval.times")
    });
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
    process.stop().await;
}

/// The binary started on a coordinator.conf, once it logged its addresses (on loopback).
struct CoordinatorProcess {
    child: KillOnDrop,
    reader: std::thread::JoinHandle<()>,
    /// The log lines before the listening line (start-up warnings).
    start_up: Vec<String>,
    grpc: SocketAddr,
    http: SocketAddr,
    https: Option<SocketAddr>,
}

impl CoordinatorProcess {
    fn start(conf: &Path) -> CoordinatorProcess {
        let child = Command::new(env!("CARGO_BIN_EXE_spillway"))
            .arg("--config")
            .arg(conf)
            .env("RUST_LOG", "info")
            .env("WORKER_IP", "127.0.0.1")
            .env_remove("SPILLWAY_ADMIN_TOKEN")
            .env_remove("SERVICE_NAME")
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
        let mut start_up = Vec::new();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the coordinator logs its listening addresses");
            assert!(
                !line.contains("spillway listening"),
                "a shuffle server started instead of a coordinator"
            );
            if line.contains("spillway coordinator listening") {
                let https = line
                    .split("https_addr=Some(")
                    .nth(1)
                    .and_then(|v| v.split(')').next())
                    .and_then(|v| v.parse::<SocketAddr>().ok())
                    .map(|a| SocketAddr::new([127, 0, 0, 1].into(), a.port()));
                return CoordinatorProcess {
                    child,
                    reader,
                    start_up,
                    grpc: addr_after(&line, "grpc_addr").unwrap(),
                    http: addr_after(&line, "http_addr").unwrap(),
                    https,
                };
            }
            start_up.push(line);
        }
    }

    /// SIGTERM; the process must exit 0.
    async fn stop(mut self) {
        let mut child = self.child.0.take().unwrap();
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "exit status {status:?}");
        self.reader.join().unwrap();
    }
}

/// Java's envelope from `resp`: HTTP 200, then the JSON.
async fn envelope(resp: reqwest::Response) -> Value {
    assert_eq!(resp.status().as_u16(), 200);
    let body = resp.text().await.unwrap();
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

async fn assigned(client: &mut CoordinatorServerClient<Channel>, app: &str) -> BTreeSet<String> {
    let resp = client
        .get_shuffle_assignments(proto::GetShuffleServerRequest {
            application_id: app.into(),
            partition_num: 4,
            partition_num_per_range: 1,
            data_replica: 1,
            assignment_shuffle_server_number: 10,
            require_tags: vec!["ss_v5".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    if status_of(resp.status) != StatusCode::Success {
        return BTreeSet::new();
    }
    resp.assignments
        .iter()
        .flat_map(|a| a.server.iter().map(|s| s.id.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_process_serves_javas_rest_api_behind_javas_credentials() {
    let dir = tempfile::TempDir::new().unwrap();
    // One PEM file with the chain and the key, as a keystore path may hold.
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_pem = ck.cert.pem();
    let keystore = dir.path().join("coordinator.pem");
    std::fs::write(
        &keystore,
        format!("{cert_pem}{}", ck.signing_key.serialize_pem()),
    )
    .unwrap();
    let exclude = dir.path().join("exclude_nodes");
    std::fs::write(&exclude, "").unwrap();
    let credentials = "dXNlcjpzZWNyZXQ=";
    let conf = dir.path().join("coordinator.conf");
    let write_conf = |nodes_max: usize| {
        std::fs::write(
            &conf,
            format!(
                "rss.rpc.server.port 0\n\
                 rss.jetty.http.port 0\n\
                 rss.http.basic.authorizationCredentials {credentials}\n\
                 rss.jetty.ssl.enable true\n\
                 rss.jetty.https.port 0\n\
                 rss.jetty.ssl.keystore.path {}\n\
                 rss.coordinator.server.heartbeat.timeout 30000\n\
                 rss.coordinator.exclude.nodes.file.path {}\n\
                 rss.coordinator.exclude.nodes.check.interval.ms 100\n\
                 rss.coordinator.shuffle.nodes.max {nodes_max}\n\
                 rss.reconfigure.interval.sec 1\n",
                keystore.display(),
                exclude.display()
            ),
        )
        .unwrap()
    };
    write_conf(1);
    let process = CoordinatorProcess::start(&conf);
    let (grpc, http, https) = (process.grpc, process.http, process.https);
    let https = https.expect("rss.jetty.ssl.enable serves HTTPS");

    let beat = |c: &mut spillway::config::Config| {
        c.coordinator_quorum = vec![grpc.to_string()];
        c.heartbeat_interval = Duration::from_millis(100);
    };
    let a = common::start(1, beat).await;
    let mut b = common::start(1, beat).await;
    let (ida, idb) = (a.running.server_id.clone(), b.running.server_id.clone());
    let base = format!("http://{http}");
    let web = reqwest::Client::new();

    // The servers that heartbeat, listed as Java lists them.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let v = envelope(
            web.get(format!("{base}/api/server/nodes"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(v["code"], 0, "{v}");
        let ids: BTreeSet<String> = v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap().to_owned())
            .collect();
        if ids == [ida.clone(), idb.clone()].into() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the servers never showed up: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The dashboard is served here as by the embedded coordinator (tests/dashboard.rs checks
    // what Chromium shows); its cluster page lists both servers.
    let page = web.get(format!("{base}/dashboard")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains(&ida) && page.contains(&idb), "{page}");
    let node = envelope(
        web.get(format!("{base}/api/server/nodes/{idb}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(node["data"]["status"], "ACTIVE", "{node}");
    assert_eq!(
        node["data"]["grpcPort"],
        i64::from(b.running.grpc_addr.port())
    );

    let channel = Channel::from_shared(format!("http://{grpc}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut coordinator = CoordinatorServerClient::new(channel);

    // rss.coordinator.shuffle.nodes.max is re-read from the changed file, as Java re-reads it.
    assert_eq!(assigned(&mut coordinator, "app_one").await.len(), 1);
    write_conf(2);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    while assigned(&mut coordinator, &format!("app_two_{n}"))
        .await
        .len()
        != 2
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "nodes.max 2 never applied"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        n += 1;
    }

    // The same key over Java's confOps, behind the credentials; a server's key is refused.
    let conf_ops = |body: &'static str| {
        web.post(format!("{base}/confOps/update"))
            .header("authorization", format!("Basic {credentials}"))
            .header("content-type", "application/json")
            .body(body)
    };
    let r = web
        .post(format!("{base}/confOps/update"))
        .header("content-type", "application/json")
        .body(r#"{"update": {"rss.coordinator.shuffle.nodes.max": "1"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = conf_ops(r#"{"update": {"rss.server.rpc.audit.log.enabled": "true"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let refusal = r.text().await.unwrap();
    assert!(refusal.contains("not reconfigurable"), "{refusal}");
    let r = conf_ops(r#"{"update": {"rss.coordinator.shuffle.nodes.max": "1"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(assigned(&mut coordinator, "app_rest_one").await.len(), 1);
    let r = conf_ops(r#"{"update": {"rss.coordinator.shuffle.nodes.max": "2"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(assigned(&mut coordinator, "app_rest_two").await.len(), 2);

    // info: this process's identity.
    let info = envelope(
        web.get(format!("{base}/api/coordinator/info"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let info = &info["data"];
    assert_eq!(info["coordinatorId"], format!("127.0.0.1-{}", grpc.port()));
    assert_eq!(info["serverIp"], "127.0.0.1");
    assert_eq!(info["serverPort"], grpc.port().to_string());
    assert_eq!(info["serverWebPort"], http.port().to_string());

    // conf: the file's keys as written, the credentials masked.
    let conf_v = envelope(
        web.get(format!("{base}/api/coordinator/conf"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let pairs: Vec<(String, String)> = conf_v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["argumentKey"].as_str().unwrap().to_owned(),
                p["argumentValue"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        pairs.contains(&("rss.rpc.server.port".into(), "0".into())),
        "{pairs:?}"
    );
    assert!(
        pairs.contains(&("rss.coordinator.shuffle.nodes.max".into(), "2".into())),
        "the running value: {pairs:?}"
    );
    assert!(
        pairs.contains(&(
            "rss.http.basic.authorizationCredentials".into(),
            "******".into()
        )),
        "{pairs:?}"
    );
    assert!(!conf_v.to_string().contains(credentials));
    let stacks = web
        .get(format!("{base}/api/coordinator/stacks"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(stacks.contains("coordinator 127.0.0.1-"), "{stacks}");

    // Decommission needs the coordinator.conf's Basic credentials, as Java's filter asks.
    let decommission = format!("{base}/api/server/{idb}/decommission");
    let r = web.post(&decommission).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.text().await.unwrap(), "Authentication Failed");
    let r = web
        .post(&decommission)
        .header("authorization", "Basic d3Jvbmc=")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // B holds an app, so it stays DECOMMISSIONING rather than finishing.
    common::register(&mut b.client, "app_on_b", 0, 0..2, false).await;
    let v = envelope(
        web.post(&decommission)
            .header("authorization", format!("Basic {credentials}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v["code"], 0, "{v}");
    // The server itself changed state (the call went to it over ShuffleServerInternal).
    let status_b: Value = serde_json::from_str(
        &web.get(format!("http://{}/status", b.running.http_addr))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(status_b["status"], "DECOMMISSIONING");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let node = envelope(
            web.get(format!("{base}/api/server/nodes/{idb}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        if node["data"]["status"] == "DECOMMISSIONING" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{node}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let v = envelope(
        web.post(format!("{base}/api/server/{idb}/cancelDecommission"))
            .header("authorization", format!("Basic {credentials}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v["code"], 0, "{v}");

    // The same routes over HTTPS, with the coordinator.conf's keystore.
    let tls = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap())
        .resolve("localhost", https)
        .build()
        .unwrap();
    let info = envelope(
        tls.get(format!(
            "https://localhost:{}/api/coordinator/info",
            https.port()
        ))
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(info["data"]["serverPort"], grpc.port().to_string());

    // The exclude-nodes file is polled: A listed there is no longer assigned.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while assigned(&mut coordinator, "app_before").await != [ida.clone(), idb.clone()].into() {
        assert!(tokio::time::Instant::now() < deadline, "B never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(&exclude, format!("{ida}\n")).unwrap();
    let mut n = 0;
    while assigned(&mut coordinator, &format!("app_after_{n}")).await != [idb.clone()].into() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "A is still assigned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        n += 1;
    }

    a.running.shutdown().await;
    b.running.shutdown().await;
    process.stop().await;
}
