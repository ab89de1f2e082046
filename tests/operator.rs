//! The `spillway` binary in the Uniffle Kubernetes operator's shuffle-server pod: started with
//! exactly the env the operator sets and a `server.conf` where the operator mounts it (no
//! `--config`), it listens on the operator's ports, heartbeats the operator's coordinators with
//! the pod IP, and sizes its buffers from `XMX_SIZE` as the Java server sizes them from its heap.
//! In the coordinator pod (`SERVICE_NAME=coordinator`) the same binary runs the coordinator
//! from the mounted `coordinator.conf`.
//!
//! The mount is a temporary directory named by `RSS_CONF_DIR` (which the Java scripts honour
//! too): the real `/data/rssadmin/rss/conf` is writable here, but the machine's other test runs
//! start the binary without `--config`, and would read a `server.conf` left there. Reading the
//! real path when it exists is covered by the unit tests of `config::operator`.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{connect, register};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spillway::config::CoordinatorConfig;
use spillway::coordinator::service::CoordinatorService;
use spillway::coordinator::{Coordinator, CoordinatorOptions};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;

/// Guards against hangs only; never a speed claim.
const PATIENCE: Duration = Duration::from_secs(60);

/// Kills the server if the test fails before it sends SIGTERM, so no process outlives the test.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The operator's env (`shuffleserver.go` `generateMainContainerENV`) for a pod with IP
/// 127.0.0.1, plus `RSS_CONF_DIR` standing for the mount.
fn operator_env<'a>(
    cmd: &'a mut Command,
    rpc: u16,
    http: u16,
    quorum: &str,
    conf_dir: &std::path::Path,
) -> &'a mut Command {
    cmd.env_remove("WORKER_CONFIG_PATH")
        .env_remove("WORKER_IP")
        .env("SERVER_RPC_PORT", rpc.to_string())
        .env("SERVER_HTTP_PORT", http.to_string())
        .env("RSS_COORDINATOR_QUORUM", quorum)
        .env("XMX_SIZE", "1000M")
        .env("SERVICE_NAME", "server")
        .env("NODE_NAME", "node-1")
        .env("RSS_IP", "127.0.0.1")
        .env("RSS_CONF_DIR", conf_dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_in_the_operators_pod_unchanged() {
    // The operator's coordinator: Spillway's embedded one, served on its own port.
    let coordinator = Arc::new(Coordinator::new(CoordinatorOptions::from(
        &CoordinatorConfig::default(),
    )));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let coord_addr = listener.local_addr().unwrap();
    let service = CoordinatorService::new(Arc::clone(&coordinator)).into_server();
    let serving = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
    });

    let dir = tempfile::TempDir::new().unwrap();
    let conf_dir = dir.path().join("conf");
    std::fs::create_dir(&conf_dir).unwrap();
    let [rpc, http, netty] = common::free_ports();
    let quorum = coord_addr.to_string();
    let data = dir.path().join("rssdata");
    // The ConfigMap's server.conf after the operator's UpdateProperties: the user's keys and the
    // four the operator writes (port, HTTP port, quorum, base path).
    std::fs::write(
        conf_dir.join("server.conf"),
        format!(
            "rss.storage.type MEMORY_LOCALFILE\n\
             rss.server.netty.port {netty}\n\
             rss.server.heartbeat.interval 500\n\
             rss.server.rpc.audit.log.enabled false\n\
             rss.rpc.server.port {rpc}\n\
             rss.jetty.http.port {http}\n\
             rss.coordinator.quorum {quorum}\n\
             rss.storage.basePath {}\n",
            data.display()
        ),
    )
    .unwrap();

    // What the server makes of it, through its own --print-config.
    let printed = operator_env(
        &mut Command::new(env!("CARGO_BIN_EXE_spillway")),
        rpc,
        http,
        &quorum,
        &conf_dir,
    )
    .arg("--print-config")
    .output()
    .expect("binary runs");
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let effective: toml::Table = toml::from_str(&String::from_utf8_lossy(&printed.stdout)).unwrap();
    assert_eq!(effective["grpc_port"].as_integer(), Some(rpc.into()));
    assert_eq!(effective["netty_port"].as_integer(), Some(netty.into()));
    assert_eq!(
        effective["metrics"]["http_port"].as_integer(),
        Some(http.into())
    );
    assert_eq!(effective["worker_ip"].as_str(), Some("127.0.0.1"));
    // Java: 0.6 and 0.2 of the 1000 MiB heap.
    assert_eq!(
        effective["memory_store"]["capacity"].as_str(),
        Some("600M"),
        "{effective:?}"
    );
    assert_eq!(
        effective["memory_store"]["read_capacity"].as_str(),
        Some("200M")
    );

    let child = operator_env(
        &mut Command::new(env!("CARGO_BIN_EXE_spillway")),
        rpc,
        http,
        &quorum,
        &conf_dir,
    )
    .env("RUST_LOG", "info")
    .stdout(Stdio::null())
    .stderr(Stdio::inherit())
    .spawn()
    .expect("binary starts");
    let mut child = KillOnDrop(Some(child));

    // The coordinator hears from it under the pod IP and the operator's ports, with the memory
    // XMX_SIZE sized.
    let id = format!("127.0.0.1-{rpc}-{netty}");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let node = loop {
        if let Some(node) = coordinator.servers().get(&id) {
            break node;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no heartbeat from {id}; known: {:?}",
            coordinator.servers().live()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(node.ip, "127.0.0.1");
    assert_eq!(node.grpc_port, i32::from(rpc));
    assert_eq!(node.netty_port, i32::from(netty));
    assert_eq!(node.jetty_port, i32::from(http));
    assert_eq!(node.available_memory + node.used_memory, 600 << 20);

    // It serves on those ports.
    let mut client = connect(format!("127.0.0.1:{rpc}").parse().unwrap()).await;
    register(&mut client, "operator_app", 0, 0..2, false).await;
    let health = reqwest::get(format!("http://127.0.0.1:{http}/health"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    drop(client);

    let mut child = child.0.take().unwrap();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    serving.abort();
}

/// The operator's coordinator pod (`coordinator.go`): its env, and the ConfigMap's
/// coordinator.conf as the operator fills it in (the two ports and the exclude-nodes file it
/// mounts) beside the servers' server.conf. The binary runs the coordinator from it: servers
/// heartbeat to it on the operator's port, and its REST API answers with the pod IP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_the_operators_coordinator_pod() {
    let dir = tempfile::TempDir::new().unwrap();
    let conf_dir = dir.path().join("conf");
    std::fs::create_dir(&conf_dir).unwrap();
    let exclude = dir.path().join("exclude_nodes");
    std::fs::write(&exclude, "").unwrap();
    let [rpc, http] = common::free_ports();
    std::fs::write(
        conf_dir.join("coordinator.conf"),
        format!(
            "rss.coordinator.server.heartbeat.timeout 30000\n\
             rss.rpc.server.port {rpc}\n\
             rss.jetty.http.port {http}\n\
             rss.coordinator.exclude.nodes.file.path {}\n",
            exclude.display()
        ),
    )
    .unwrap();
    std::fs::write(
        conf_dir.join("server.conf"),
        format!(
            "rss.storage.type MEMORY_LOCALFILE\nrss.storage.basePath {}\n",
            dir.path().join("rssdata").display()
        ),
    )
    .unwrap();
    let pod = |cmd: &mut Command, rpc: u16, http: u16, conf_dir: &std::path::Path| {
        cmd.env_remove("WORKER_CONFIG_PATH")
            .env_remove("WORKER_IP")
            .env("COORDINATOR_RPC_PORT", rpc.to_string())
            .env("COORDINATOR_HTTP_PORT", http.to_string())
            .env("XMX_SIZE", "800M")
            .env("SERVICE_NAME", "coordinator")
            .env("NODE_NAME", "node-1")
            .env("RSS_IP", "127.0.0.1")
            .env("RSS_CONF_DIR", conf_dir);
    };

    // A coordinator.conf without the ports takes the operator's env ones.
    let bare = dir.path().join("bare");
    std::fs::create_dir(&bare).unwrap();
    std::fs::write(
        bare.join("coordinator.conf"),
        "rss.coordinator.app.expired 60000\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spillway"));
    pod(&mut cmd, 20011, 20012, &bare);
    let printed = cmd.arg("--print-config").output().expect("binary runs");
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let effective: toml::Table = toml::from_str(&String::from_utf8_lossy(&printed.stdout)).unwrap();
    assert_eq!(effective["role"].as_str(), Some("coordinator"));
    assert_eq!(effective["grpc_port"].as_integer(), Some(20011));
    assert_eq!(effective["metrics"]["http_port"].as_integer(), Some(20012));

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spillway"));
    pod(&mut cmd, rpc, http, &conf_dir);
    let child = cmd
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("binary starts");
    let mut child = KillOnDrop(Some(child));

    // Its REST API, under the pod IP, once it listens.
    let info_url = format!("http://127.0.0.1:{http}/api/coordinator/info");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let info: serde_json::Value = loop {
        if let Ok(r) = reqwest::get(&info_url).await {
            break serde_json::from_str(&r.text().await.unwrap()).unwrap();
        }
        assert!(tokio::time::Instant::now() < deadline, "no HTTP on {http}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(info["data"]["coordinatorId"], format!("127.0.0.1-{rpc}"));
    assert_eq!(info["data"]["serverIp"], "127.0.0.1");

    // A shuffle server of the operator's quorum heartbeats to it.
    let server = common::start(1, |c| {
        c.coordinator_quorum = vec![format!("127.0.0.1:{rpc}")];
        c.heartbeat_interval = Duration::from_millis(100);
    })
    .await;
    let nodes_url = format!("http://127.0.0.1:{http}/api/server/nodes");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let nodes = reqwest::get(&nodes_url)
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if nodes.contains(&format!("\"{}\"", server.running.server_id)) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{nodes}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.running.shutdown().await;

    let mut child = child.0.take().unwrap();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status:?}");

    // A shuffle server's config in the coordinator's pod is refused, naming SERVICE_NAME.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spillway"));
    pod(&mut cmd, rpc, http, &conf_dir);
    let out = cmd
        .arg("--config")
        .arg(conf_dir.join("server.conf"))
        .arg("--print-config")
        .output()
        .expect("binary runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("SERVICE_NAME"), "{err}");
}
