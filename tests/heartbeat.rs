//! Coordinator heartbeats against fake coordinators: what a heartbeat carries, that a hung or
//! unreachable coordinator delays neither the others nor the server, and that heartbeats resume
//! when a coordinator comes back.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use spillway::proto;
use spillway::proto::coordinator_server_server::{CoordinatorServer, CoordinatorServerServer};
use spillway::proto::shuffle_server_internal_client::ShuffleServerInternalClient;
use spillway::proto::StatusCode;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

type Beat = proto::ShuffleServerHeartBeatRequest;

const INTERVAL: Duration = Duration::from_millis(200);

/// Guards against hangs only; never a speed claim.
const PATIENCE: Duration = Duration::from_secs(60);

/// A coordinator that records heartbeats, or takes them and never answers.
struct Fake {
    beats: mpsc::UnboundedSender<Beat>,
    hang: bool,
    calls: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl CoordinatorServer for Fake {
    async fn heartbeat(
        &self,
        req: Request<Beat>,
    ) -> Result<Response<proto::ShuffleServerHeartBeatResponse>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.hang {
            std::future::pending::<()>().await;
        }
        let _ = self.beats.send(req.into_inner());
        Ok(Response::new(proto::ShuffleServerHeartBeatResponse {
            status: StatusCode::Success as i32,
            ret_msg: String::new(),
        }))
    }

    async fn get_shuffle_server_list(
        &self,
        _: Request<()>,
    ) -> Result<Response<proto::GetShuffleServerListResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn get_shuffle_server_num(
        &self,
        _: Request<()>,
    ) -> Result<Response<proto::GetShuffleServerNumResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn get_shuffle_assignments(
        &self,
        _: Request<proto::GetShuffleServerRequest>,
    ) -> Result<Response<proto::GetShuffleAssignmentsResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn get_shuffle_data_storage_info(
        &self,
        _: Request<()>,
    ) -> Result<Response<proto::GetShuffleDataStorageInfoResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn check_service_available(
        &self,
        _: Request<()>,
    ) -> Result<Response<proto::CheckServiceAvailableResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn app_heartbeat(
        &self,
        _: Request<proto::AppHeartBeatRequest>,
    ) -> Result<Response<proto::AppHeartBeatResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn report_client_operation(
        &self,
        _: Request<proto::ReportShuffleClientOpRequest>,
    ) -> Result<Response<proto::ReportShuffleClientOpResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn register_application_info(
        &self,
        _: Request<proto::ApplicationInfoRequest>,
    ) -> Result<Response<proto::ApplicationInfoResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn access_cluster(
        &self,
        _: Request<proto::AccessClusterRequest>,
    ) -> Result<Response<proto::AccessClusterResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn fetch_client_conf(
        &self,
        _: Request<()>,
    ) -> Result<Response<proto::FetchClientConfResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn fetch_client_conf_v2(
        &self,
        _: Request<proto::FetchClientConfRequest>,
    ) -> Result<Response<proto::FetchClientConfResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn fetch_remote_storage(
        &self,
        _: Request<proto::FetchRemoteStorageRequest>,
    ) -> Result<Response<proto::FetchRemoteStorageResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
}

/// A running fake coordinator.
struct Coordinator {
    addr: SocketAddr,
    beats: mpsc::UnboundedReceiver<Beat>,
    calls: Arc<AtomicUsize>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Coordinator {
    /// Serves on `addr` (port 0 for a fresh one); retries the bind while the port is still
    /// held by a previous instance.
    async fn start(addr: SocketAddr, hang: bool) -> Coordinator {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let listener = loop {
            match TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(e) => {
                    assert!(tokio::time::Instant::now() < deadline, "bind {addr}: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        let addr = listener.local_addr().unwrap();
        let (tx, beats) = mpsc::unbounded_channel();
        let calls = Arc::new(AtomicUsize::new(0));
        let fake = Fake {
            beats: tx,
            hang,
            calls: Arc::clone(&calls),
        };
        let stop = CancellationToken::new();
        let signal = stop.clone();
        let task = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(CoordinatorServerServer::new(fake))
                .serve_with_incoming_shutdown(TcpIncoming::from(listener), signal.cancelled_owned())
                .await
                .unwrap();
        });
        Coordinator {
            addr,
            beats,
            calls,
            stop,
            task,
        }
    }

    /// The next heartbeat that satisfies `pred` (earlier ones are skipped).
    async fn beat_where(&mut self, what: &str, pred: impl Fn(&Beat) -> bool) -> Beat {
        let wait = async {
            loop {
                let beat = self.beats.recv().await.expect("coordinator is running");
                if pred(&beat) {
                    return beat;
                }
            }
        };
        tokio::time::timeout(PATIENCE, wait)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for a heartbeat with {what}"))
    }

    /// Graceful stop: connections are closed, the port is free again.
    async fn stop(self) -> SocketAddr {
        self.stop.cancel();
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("fake coordinator stops")
            .unwrap();
        self.addr
    }
}

/// An address where nothing listens.
async fn dead_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

async fn shutdown_within_patience(running: spillway::server::Running) {
    tokio::time::timeout(PATIENCE, running.shutdown())
        .await
        .expect("shutdown does not hang on coordinators");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_reports_identity_memory_apps_disks_and_status() {
    let mut coord = Coordinator::start("127.0.0.1:0".parse().unwrap(), false).await;
    let quorum = vec![coord.addr.to_string()];
    let mut s = start(2, |c| {
        c.coordinator_quorum = quorum;
        c.heartbeat_interval = INTERVAL;
        c.tags = vec!["blue".into(), "GRPC".into(), "green".into()];
    })
    .await;
    let port = s.running.grpc_addr.port();

    let first = coord.beat_where("anything", |_| true).await;
    let id = first.server_id.clone().expect("server id is set");
    assert_eq!(id.id, s.running.server_id);
    // The test config runs the Netty plane on a free port: it is part of the identity.
    let netty = s.running.netty_addr.expect("Netty plane is on").port();
    assert_eq!(id.id, format!("127.0.0.1-{port}-{netty}"));
    assert_eq!(id.ip, "127.0.0.1");
    assert_eq!(id.port, i32::from(port));
    assert_eq!(id.netty_port, i32::from(netty));
    assert_eq!(
        first.tags,
        ["ss_v5", "ss_v4", "GRPC", "GRPC_NETTY", "blue", "green"]
    );
    assert_eq!(first.is_healthy, None, "isHealthy would override status");
    assert_eq!(first.status, Some(proto::ServerStatus::Active as i32));
    assert_eq!(first.storage_info.len(), 2);
    for d in &s.disks {
        let key = d.path().display().to_string();
        let info = first
            .storage_info
            .get(&key)
            .unwrap_or_else(|| panic!("storage info for {key}"));
        assert_eq!(
            info.status,
            proto::storage_info::StorageStatus::Normal as i32
        );
        assert!(info.capacity > 0, "capacity of {key}");
    }
    assert_eq!(first.version.as_deref(), Some(env!("CARGO_PKG_VERSION")));
    assert!(first.git_commit_id.is_some());
    assert!(first.start_time_ms.is_some_and(|t| t > 0));
    let capacity = 64 << 20;
    assert_eq!(first.used_memory + first.available_memory, capacity);

    register(&mut s.client, "hb_app", 0, 0..2, false).await;
    send(
        &mut s.client,
        "hb_app",
        0,
        vec![
            (0, vec![make_block(0, 0, 0, 4000)]),
            (1, vec![make_block(0, 1, 0, 4000)]),
        ],
    )
    .await;
    let busy = coord
        .beat_where("the app and its memory", |b| {
            b.used_memory > 0 && b.application_info.iter().any(|a| a.app_id == "hb_app")
        })
        .await;
    assert_eq!(busy.available_memory, capacity - busy.used_memory);
    let app = busy
        .application_info
        .iter()
        .find(|a| a.app_id == "hb_app")
        .unwrap();
    assert_eq!(app.partition_num, 2);
    assert!(app.memory_size >= 8000, "{app:?}");
    assert!(app.total_size >= 8000, "{app:?}");
    assert_eq!(busy.display_metrics["app"], "1");
    assert_eq!(busy.display_metrics["partition"], "2");

    // Spilled: the bytes move to `localTotalSize` (Java's onLocalFileDataSize), nothing on HDFS.
    common::finish(&mut s.client, "hb_app", 0).await;
    let spilled = coord
        .beat_where("the app's bytes on local files", |b| {
            b.application_info
                .iter()
                .any(|a| a.app_id == "hb_app" && a.local_total_size >= 8000)
        })
        .await;
    let app = spilled
        .application_info
        .iter()
        .find(|a| a.app_id == "hb_app")
        .unwrap();
    assert_eq!(app.hadoop_total_size, 0, "{app:?}");
    assert!(app.total_size >= 8000, "{app:?}");

    let channel = tonic::transport::Channel::from_shared(format!("http://{}", s.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let r = ShuffleServerInternalClient::new(channel)
        .decommission(proto::DecommissionRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    let leaving = coord
        .beat_where("status DECOMMISSIONING", |b| {
            b.status == Some(proto::ServerStatus::Decommissioning as i32)
        })
        .await;
    assert_eq!(leaving.is_healthy, None);

    shutdown_within_patience(s.running).await;
    coord.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_unreachable_and_garbage_coordinators_delay_neither_the_others_nor_the_server() {
    let hung = Coordinator::start("127.0.0.1:0".parse().unwrap(), true).await;
    let dead = dead_addr().await;
    let (garbage, garbage_task) = garbage_coordinator().await;
    let mut good = Coordinator::start("127.0.0.1:0".parse().unwrap(), false).await;
    let quorum = vec![
        hung.addr.to_string(),
        dead.to_string(),
        garbage.to_string(),
        good.addr.to_string(),
    ];
    let mut s = start(1, |c| {
        c.coordinator_quorum = quorum;
        c.heartbeat_interval = INTERVAL;
    })
    .await;

    for _ in 0..5 {
        good.beat_where("anything", |_| true).await;
        // The server keeps answering while heartbeats to the others hang or fail.
        let r = s
            .client
            .app_heartbeat(proto::AppHeartBeatRequest {
                app_id: "nobody".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status_of(r.status), StatusCode::NoRegister);
    }
    register(&mut s.client, "app", 0, 0..1, false).await;
    send(
        &mut s.client,
        "app",
        0,
        vec![(0, vec![make_block(0, 0, 0, 100)])],
    )
    .await;
    good.beat_where("the app", |b| {
        b.application_info.iter().any(|a| a.app_id == "app")
    })
    .await;
    assert!(
        hung.calls.load(Ordering::SeqCst) >= 1,
        "the hung coordinator got a call"
    );

    shutdown_within_patience(s.running).await;
    // The hung handler never returns, so a graceful stop would wait for it forever.
    hung.task.abort();
    garbage_task.abort();
    good.stop().await;
}

/// A "coordinator" that answers every connection with bytes that are not HTTP/2, then hangs up.
async fn garbage_coordinator() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let _ = socket
                .write_all(b"HTTP/1.1 418 I'm a teapot\r\n\r\n\x00\xff\xfe garbage")
                .await;
        }
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_resume_when_a_coordinator_comes_back() {
    let mut coord = Coordinator::start("127.0.0.1:0".parse().unwrap(), false).await;
    let quorum = vec![coord.addr.to_string()];
    let s = start(1, |c| {
        c.coordinator_quorum = quorum;
        c.heartbeat_interval = INTERVAL;
    })
    .await;
    coord.beat_where("anything", |_| true).await;

    let addr = coord.stop().await;
    // Let a few heartbeats fail (a pause, not a timing claim).
    tokio::time::sleep(INTERVAL * 5).await;

    let mut back = Coordinator::start(addr, false).await;
    let beat = back.beat_where("anything", |_| true).await;
    assert_eq!(
        beat.server_id.map(|id| id.id),
        Some(s.running.server_id.clone())
    );
    back.beat_where("a second one", |_| true).await;

    shutdown_within_patience(s.running).await;
    back.stop().await;
}

/// Java's health checks end to end: a health script whose verdict a test flips through a file
/// turns the status in the heartbeats UNHEALTHY and back to ACTIVE; while decommissioning, a
/// failing check leaves the status alone (Java's `compareAndSet`) but the gauge still says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_health_script_reports_unhealthy_until_it_passes_again() {
    let mut coord = Coordinator::start("127.0.0.1:0".parse().unwrap(), false).await;
    let quorum = vec![coord.addr.to_string()];
    let dir = tempfile::tempdir().unwrap();
    let verdict = dir.path().join("verdict");
    std::fs::write(&verdict, "all good\n").unwrap();
    let script = dir.path().join("health.sh");
    std::fs::write(&script, format!("#!/bin/sh\ncat {}\n", verdict.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = start(2, |c| {
        c.coordinator_quorum = quorum;
        c.heartbeat_interval = INTERVAL;
        c.health.enabled = true;
        c.health.check_interval = Duration::from_millis(100);
        c.health.script_path = Some(script.clone());
        // The temp dirs sit on the host's disk, whose fullness is not under test here.
        c.health.disk_max_usage = 1.0;
        c.health.disk_recovery_usage = 1.0;
        c.shutdown.after_decommission = false;
    })
    .await;
    let status = s.running.registry().status().clone();

    coord
        .beat_where("status ACTIVE", |b| {
            b.status == Some(proto::ServerStatus::Active as i32)
        })
        .await;
    std::fs::write(&verdict, "ERROR the NIC is flapping\n").unwrap();
    let sick = coord
        .beat_where("status UNHEALTHY", |b| {
            b.status == Some(proto::ServerStatus::Unhealthy as i32)
        })
        .await;
    assert_eq!(sick.is_healthy, None, "isHealthy would override status");
    std::fs::write(&verdict, "recovered\n").unwrap();
    coord
        .beat_where("status ACTIVE again", |b| {
            b.status == Some(proto::ServerStatus::Active as i32)
        })
        .await;

    status.decommission().unwrap();
    std::fs::write(&verdict, "ERROR again\n").unwrap();
    eventually("the checks to fail", || status.health_failing()).await;
    let leaving = coord
        .beat_where("a beat after the failed check", |_| true)
        .await;
    assert!(
        leaving.status == Some(proto::ServerStatus::Decommissioning as i32)
            || leaving.status == Some(proto::ServerStatus::Decommissioned as i32),
        "{:?}",
        leaving.status
    );
    shutdown_within_patience(s.running).await;
    coord.stop().await;
}

/// Java's `LocalStorage` capacity: a path stops taking new partitions once this server's own
/// bytes there reach the high watermark of its capacity, and takes them again once they fall
/// below the low one. Heartbeats carry the capacity and OVERUSED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_past_its_capacity_watermark_takes_no_new_partitions_until_purged() {
    let mut coord = Coordinator::start("127.0.0.1:0".parse().unwrap(), false).await;
    let quorum = vec![coord.addr.to_string()];
    let capacity: i64 = 100 << 10;
    let mut s = start(2, |c| {
        c.coordinator_quorum = quorum;
        c.heartbeat_interval = INTERVAL;
        c.localfile_store.disk_capacity = Some(spillway::config::ByteSize(capacity as u64));
        c.localfile_store.disk_high_watermark = 0.5;
        c.localfile_store.disk_low_watermark = 0.3;
    })
    .await;
    let first = coord.beat_where("anything", |_| true).await;
    assert!(first.storage_info.values().all(|i| i.capacity == capacity));

    // 64 KiB in one partition: past 50 % of its path's 100 KiB.
    register(&mut s.client, "cap_app", 0, 0..1, false).await;
    write_shuffle(&mut s.client, "cap_app", 0, 1, 1, 4, 16 << 10).await;
    finish(&mut s.client, "cap_app", 0).await;
    let full = coord
        .beat_where("an OVERUSED path", |b| {
            b.storage_info
                .values()
                .any(|i| i.status == proto::storage_info::StorageStatus::Overused as i32)
        })
        .await;
    let (full_path, info) = full
        .storage_info
        .iter()
        .find(|(_, i)| i.status == proto::storage_info::StorageStatus::Overused as i32)
        .unwrap();
    assert!(info.used_bytes >= 64 << 10, "{info:?}");
    let full_path = std::path::PathBuf::from(full_path);
    assert!(full_path.join("cap_app/0/0-0").is_dir());
    // Java's gauge is inverted: 1 for the path that cannot be written, 0 for the other.
    let metrics = reqwest::get(format!(
        "http://{}/prometheus/metrics/all",
        s.running.http_addr
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let writable = |path: &std::path::Path| {
        let label = format!("local_disk_path=\"{}\"", path.display());
        metrics
            .lines()
            .find(|l| l.starts_with("local_storage_is_writable{") && l.contains(&label))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no local_storage_is_writable with {label}:\n{metrics}"))
    };
    assert_eq!(writable(&full_path), 1.0);
    let other = s
        .disks
        .iter()
        .map(|d| d.path().to_path_buf())
        .find(|p| *p != full_path)
        .unwrap();

    // Every new partition goes to the other path.
    register(&mut s.client, "cap_app", 1, 0..8, false).await;
    write_shuffle(&mut s.client, "cap_app", 1, 1, 8, 1, 100).await;
    finish(&mut s.client, "cap_app", 1).await;
    for p in 0..8 {
        assert!(
            other.join(format!("cap_app/1/{p}-{p}")).is_dir(),
            "partition {p}"
        );
        assert!(!full_path.join(format!("cap_app/1/{p}-{p}")).exists());
    }

    // Purging shuffle 0 takes the path below the low watermark: NORMAL again.
    let r = s
        .client
        .unregister_shuffle(proto::ShuffleUnregisterRequest {
            app_id: "cap_app".into(),
            shuffle_id: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    let key = full_path.display().to_string();
    coord
        .beat_where("the path NORMAL again", |b| {
            b.storage_info
                .get(&key)
                .is_some_and(|i| i.status == proto::storage_info::StorageStatus::Normal as i32)
        })
        .await;
    shutdown_within_patience(s.running).await;
    coord.stop().await;
}
