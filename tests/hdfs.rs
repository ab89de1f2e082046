//! The HDFS store types through the real gRPC interface, against a real HDFS (MiniHdfs, one per
//! this test binary; the tests fail when it cannot start). Reads of HDFS data go straight to
//! HDFS the way the Uniffle client does (list `<serverId>*.index`, whole records inside the
//! data length), never through the server.
//!
//! The fault tests stop and restart the NameNode or the DataNode of the shared cluster, so
//! every test here holds one lock.

mod common;
use spillway_test_support::minicluster;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use hdfs_native::{Client as Hdfs, ClientBuilder};
use spillway::config::{ByteSize, StoreType};
use spillway::proto;
use spillway::proto::StatusCode;

/// A coordinator that only records heartbeats (every other RPC is unimplemented).
struct BeatRecorder(tokio::sync::mpsc::UnboundedSender<proto::ShuffleServerHeartBeatRequest>);

/// The recorder's service: `heartbeat` records, the RPCs listed answer unimplemented.
macro_rules! recorder_service {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {
        #[tonic::async_trait]
        impl proto::coordinator_server_server::CoordinatorServer for BeatRecorder {
            async fn heartbeat(
                &self,
                req: tonic::Request<proto::ShuffleServerHeartBeatRequest>,
            ) -> Result<tonic::Response<proto::ShuffleServerHeartBeatResponse>, tonic::Status> {
                let _ = self.0.send(req.into_inner());
                Ok(tonic::Response::new(proto::ShuffleServerHeartBeatResponse {
                    status: StatusCode::Success as i32,
                    ret_msg: String::new(),
                }))
            }
            $(async fn $name(
                &self,
                _: tonic::Request<$req>,
            ) -> Result<tonic::Response<$resp>, tonic::Status> {
                Err(tonic::Status::unimplemented("recorder"))
            })*
        }
    };
}

recorder_service! {
    get_shuffle_server_list(()) -> proto::GetShuffleServerListResponse;
    get_shuffle_server_num(()) -> proto::GetShuffleServerNumResponse;
    get_shuffle_assignments(proto::GetShuffleServerRequest) -> proto::GetShuffleAssignmentsResponse;
    get_shuffle_data_storage_info(()) -> proto::GetShuffleDataStorageInfoResponse;
    check_service_available(()) -> proto::CheckServiceAvailableResponse;
    app_heartbeat(proto::AppHeartBeatRequest) -> proto::AppHeartBeatResponse;
    report_client_operation(proto::ReportShuffleClientOpRequest) -> proto::ReportShuffleClientOpResponse;
    register_application_info(proto::ApplicationInfoRequest) -> proto::ApplicationInfoResponse;
    access_cluster(proto::AccessClusterRequest) -> proto::AccessClusterResponse;
    fetch_client_conf(()) -> proto::FetchClientConfResponse;
    fetch_client_conf_v2(proto::FetchClientConfRequest) -> proto::FetchClientConfResponse;
    fetch_remote_storage(proto::FetchRemoteStorageRequest) -> proto::FetchRemoteStorageResponse;
}

/// Starts a [`BeatRecorder`] on loopback; it stops with the test's runtime.
async fn beat_recorder() -> (
    std::net::SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<proto::ShuffleServerHeartBeatRequest>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                proto::coordinator_server_server::CoordinatorServerServer::new(BeatRecorder(tx)),
            )
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (addr, rx)
}

/// Waits for a heartbeat whose `hdfs` storage entry has `status`.
async fn hdfs_beat(
    beats: &mut tokio::sync::mpsc::UnboundedReceiver<proto::ShuffleServerHeartBeatRequest>,
    status: proto::storage_info::StorageStatus,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let beat = tokio::time::timeout_at(deadline, beats.recv())
            .await
            .unwrap_or_else(|_| panic!("no heartbeat with hdfs {status:?}"))
            .expect("recorder running");
        if let Some(info) = beat.storage_info.get("hdfs") {
            assert_eq!(
                info.storage_media,
                proto::storage_info::StorageMedia::Hdfs as i32
            );
            if info.status == status as i32 {
                return;
            }
        }
    }
}

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn cluster() -> &'static minicluster::MiniHdfs {
    tokio::task::spawn_blocking(minicluster::shared)
        .await
        .expect("MiniHdfs start task")
}

/// Takes the one-test-at-a-time lock and brings back whatever a failed test left stopped.
async fn healthy_cluster() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = ONE_AT_A_TIME.lock().await;
    cluster().await;
    hdfs_command("start-namenode").await;
    hdfs_command("start-datanode").await;
    guard
}

async fn hdfs_command(cmd: &'static str) {
    tokio::task::spawn_blocking(move || minicluster::shared().command(cmd))
        .await
        .expect("MiniHdfs command task");
}

fn admin(url: &str) -> Hdfs {
    ClientBuilder::new().with_url(url).build().expect("client")
}

/// Everything a client can read of a partition: memory and local files through the server,
/// then HDFS directly.
async fn read_everything(
    client: &mut Client,
    hdfs: &Hdfs,
    root: &str,
    app: &str,
    shuffle: i32,
    partition: i32,
    server_id: &str,
) -> (BTreeMap<i64, Bytes>, usize, usize, usize) {
    let served = read_partition(client, app, shuffle, partition).await;
    let from_hdfs = read_hdfs(hdfs, root, app, shuffle, partition, server_id).await;
    let mut all = served.blocks.clone();
    let hdfs_only = from_hdfs.len();
    for (id, b) in from_hdfs {
        if let Some(prev) = all.insert(id, b.clone()) {
            assert_eq!(prev, b, "block {id} differs between tiers");
        }
    }
    (all, served.from_memory, served.from_files, hdfs_only)
}

/// `MEMORY_HDFS`, set up as operators do for the Java server: the remote root belongs to the
/// server's service user and only it may write there; jobs run as other users. A shuffle
/// spilled by finishShuffle lands there in Uniffle's layout, owned by the server's user (simple
/// authentication: never the job's), and the job's user reads it back byte-identical straight
/// from HDFS; unregistering the app deletes the files and the directories.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_hdfs_round_trip_as_the_server_user() {
    let _one = healthy_cluster().await;
    let url = cluster().await.url.clone();
    let superuser = admin(&url);
    let hdfs = ClientBuilder::new()
        .with_url(&url)
        .with_user("alice")
        .build()
        .expect("client as the job's user");
    let mut s = start(0, |c| {
        c.store_type = StoreType::MemoryHdfs;
        c.hdfs_store.partition_write_max_concurrency = 2;
        c.hdfs_store.user = Some("rss".into());
        // The server's own Hadoop conf item (Java: rss.server.hadoop.fs.defaultFS) names the
        // filesystem of the app's bare remote path.
        c.hdfs_store
            .hadoop_conf
            .insert("fs.defaultFS".into(), url.clone());
    })
    .await;
    let root = format!("/{}", unique("rss"));
    superuser.mkdirs(&root, 0o755, true).await.unwrap();
    superuser.set_owner(&root, Some("rss"), None).await.unwrap();
    let app = "application_1_0001_17";
    register_remote(&mut s.client, app, 0, 0..4, &root, "alice").await;
    let expected = write_shuffle(&mut s.client, app, 0, 3, 4, 5, 10_000).await;
    finish(&mut s.client, app, 0).await;
    let store = s.running.registry().store();
    assert_eq!(store.memory().budget().snapshot().used, 0, "all spilled");

    let id = s.running.server_id.clone();
    for (p, want) in &expected {
        let (got, mem, files, from_hdfs) =
            read_everything(&mut s.client, &hdfs, &root, app, 0, *p, &id).await;
        assert_same(&got, want, &format!("partition {p}"));
        assert_eq!(
            (mem, files, from_hdfs),
            (0, 0, want.len()),
            "partition {p} from HDFS only"
        );
    }
    let dir = format!("{root}/{app}/0/1-1");
    let files = hdfs.list_status(&dir, false).await.unwrap();
    assert!(!files.is_empty());
    for f in &files {
        let name = f.path.rsplit('/').next().unwrap();
        assert!(name.starts_with(&format!("{id}_")), "{name}");
        assert_eq!((f.owner.as_str(), f.permission), ("rss", 0o644), "{name}");
    }
    let app_dir = hdfs.get_file_info(&format!("{root}/{app}")).await.unwrap();
    assert_eq!((app_dir.owner.as_str(), app_dir.permission), ("rss", 0o755));

    let r = s
        .client
        .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest { app_id: app.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    let registry = s.running.registry().clone();
    eventually("app purge", || registry.purges_running() == 0).await;
    assert!(
        hdfs.get_file_info(&format!("{root}/{app}")).await.is_err(),
        "the app directory is gone"
    );
    s.running.shutdown().await;
}

/// `MEMORY_LOCALFILE_HDFS`: small spills go to local files, spills over the cold threshold to
/// HDFS; with the DataNode down the large spill falls back to local files, and HDFS is used
/// again once it is back. Nothing is lost on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localfile_hdfs_routes_by_size_and_falls_back() {
    let _one = healthy_cluster().await;
    let url = cluster().await.url.clone();
    let hdfs = admin(&url);
    let mut s = start(1, |c| {
        c.store_type = StoreType::MemoryLocalfileHdfs;
        c.hdfs_store.cold_storage_threshold_size = ByteSize(256 << 10);
        c.hdfs_store.write_timeout = Duration::from_secs(5);
        c.hdfs_store.failure_cooldown = Duration::from_millis(500);
        c.hybrid_store.spill_retry_max_backoff = Duration::from_millis(200);
    })
    .await;
    let root = format!("/{}", unique("hybrid"));
    let app = "app-hybrid";
    let id = s.running.server_id.clone();
    register_remote(&mut s.client, app, 0, 0..2, &format!("{url}{root}"), "bob").await;
    // Partition 0 gets 20 × 1 KiB (small spill), partition 1 gets 8 × 64 KiB (cold spill).
    let mut expected: BTreeMap<i32, BTreeMap<i64, Bytes>> = BTreeMap::new();
    let mut send_round = |round: i64| {
        let mut batch = Vec::new();
        for (p, n, len) in [(0, 20, 1 << 10), (1, 8, 64 << 10)] {
            let blocks: Vec<proto::ShuffleBlock> = (0..n)
                .map(|i| make_block(round * 100 + i, p, 1, len))
                .collect();
            for b in &blocks {
                expected
                    .entry(p)
                    .or_default()
                    .insert(b.block_id, b.data.clone());
            }
            batch.push((p, blocks));
        }
        batch
    };
    let first = send_round(0);
    send(&mut s.client, app, 0, first).await;
    finish(&mut s.client, app, 0).await;
    let small = read_everything(&mut s.client, &hdfs, &root, app, 0, 0, &id).await;
    assert_eq!((small.2, small.3), (20, 0), "small spill → local files");
    let big = read_everything(&mut s.client, &hdfs, &root, app, 0, 1, &id).await;
    assert_eq!((big.2, big.3), (0, 8), "cold spill → HDFS");
    // Flush metrics name the tier the router picked, not the router.
    let host = url
        .split_once("://")
        .expect("hdfs url")
        .1
        .trim_end_matches('/');
    let text = reqwest::get(format!(
        "http://{}/prometheus/metrics/server",
        s.running.http_addr
    ))
    .await
    .expect("HTTP port answers")
    .text()
    .await
    .unwrap();
    let sample = |name: &str, label: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} sample with {label} in:\n{text}"))
    };
    assert_eq!(
        sample(
            "total_hadoop_write_data",
            &format!("storage_host=\"{host}\"")
        ),
        (8 * (64 << 10)) as f64
    );
    assert_eq!(
        sample("total_localfile_write_data", "local_disk_path="),
        (20 * (1 << 10)) as f64
    );

    hdfs_command("stop-datanode").await;
    let second = send_round(1);
    send(&mut s.client, app, 0, second).await;
    finish(&mut s.client, app, 0).await;
    // HDFS cannot be read either now: what the server serves is the fallback.
    let served = read_partition(&mut s.client, app, 0, 1).await;
    assert_eq!(
        (served.from_memory, served.from_files),
        (0, 8),
        "with the DataNode down the cold spill fell back to local files"
    );
    let hdfs_tier = s.running.hdfs_tier().expect("hdfs tier").clone();
    assert!(
        !spillway::store::Tier::health(hdfs_tier.as_ref()).writable,
        "HDFS health shows the failure"
    );
    assert!(
        s.running.registry().store().health().writable,
        "the server stays writable through its local disks"
    );
    hdfs_command("start-datanode").await;

    // Back to HDFS once it works again (the first tries may still meet the old DataNode state).
    let mut round = 2;
    loop {
        let batch = send_round(round);
        send(&mut s.client, app, 0, batch).await;
        finish(&mut s.client, app, 0).await;
        let big = read_everything(&mut s.client, &hdfs, &root, app, 0, 1, &id).await;
        if big.3 > 8 {
            break;
        }
        round += 1;
        assert!(round < 30, "HDFS never taken again");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(spillway::store::Tier::health(hdfs_tier.as_ref()).writable);
    // The pair whose append failed while the DataNode was gone held the first cold spill; its
    // lease is recovered in the background, after which its committed length is readable.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (got, ..) = read_everything(&mut s.client, &hdfs, &root, app, 0, 1, &id).await;
        if got.len() == expected[&1].len() || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for (p, want) in &expected {
        let (got, ..) = read_everything(&mut s.client, &hdfs, &root, app, 0, *p, &id).await;
        assert_same(&got, want, &format!("partition {p}: nothing lost"));
    }
    s.running.shutdown().await;
}

/// Equal maps; on a difference names the block ids instead of dumping megabytes.
fn assert_same(got: &BTreeMap<i64, Bytes>, want: &BTreeMap<i64, Bytes>, what: &str) {
    let missing: Vec<&i64> = want.keys().filter(|k| !got.contains_key(k)).collect();
    let extra: Vec<&i64> = got.keys().filter(|k| !want.contains_key(k)).collect();
    let differ: Vec<&i64> = want
        .iter()
        .filter(|(k, v)| got.get(k).is_some_and(|g| g != *v))
        .map(|(k, _)| k)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty() && differ.is_empty(),
        "{what}: missing {missing:?}, unexpected {extra:?}, different {differ:?}"
    );
}

/// `MEMORY_HDFS` with the NameNode down: spills fail and are retried, the blocks stay in
/// memory and readable, memory stays within its capacity (clients get NO_BUFFER), the server
/// reports UNHEALTHY; when the NameNode is back the spill lands and the server is ACTIVE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namenode_down_keeps_blocks_in_memory_until_it_returns() {
    let _one = healthy_cluster().await;
    let url = cluster().await.url.clone();
    let hdfs = admin(&url);
    let capacity = 4u64 << 20;
    let (coordinator, mut beats) = beat_recorder().await;
    let mut s = start(0, |c| {
        c.coordinator_quorum = vec![coordinator.to_string()];
        c.heartbeat_interval = Duration::from_millis(200);
        c.store_type = StoreType::MemoryHdfs;
        c.memory_store.capacity = ByteSize(capacity);
        c.hybrid_store.memory_spill_high_watermark = 0.5;
        c.hybrid_store.memory_spill_low_watermark = 0.1;
        c.hdfs_store.write_timeout = Duration::from_secs(5);
        c.hdfs_store.failure_cooldown = Duration::from_millis(300);
        c.hybrid_store.spill_retry_max_backoff = Duration::from_millis(300);
        c.app.expiry_check_interval = Duration::from_millis(100);
        c.localfile_store.disk_health_check_interval = Duration::from_millis(100);
    })
    .await;
    let root = format!("/{}", unique("nn-down"));
    let app = "app-nn-down";
    let id = s.running.server_id.clone();
    register_remote(
        &mut s.client,
        app,
        0,
        0..2,
        &format!("{url}{root}"),
        "carol",
    )
    .await;
    hdfs_command("stop-namenode").await;

    // 3 MiB of blocks: over the 2 MiB high watermark, so the spiller tries (and fails).
    let mut expected: BTreeMap<i32, BTreeMap<i64, Bytes>> = BTreeMap::new();
    for seq in 0..24 {
        let p = (seq % 2) as i32;
        let b = make_block(seq, p, 3, 128 << 10);
        expected
            .entry(p)
            .or_default()
            .insert(b.block_id, b.data.clone());
        send(&mut s.client, app, 0, vec![(p, vec![b])]).await;
    }
    let registry = s.running.registry().clone();
    let spiller = registry.store().spiller().clone();
    eventually("failed spills", || spiller.failures() >= 2).await;
    eventually("UNHEALTHY", || {
        registry.status().get() == proto::ServerStatus::Unhealthy
    })
    .await;
    hdfs_beat(&mut beats, proto::storage_info::StorageStatus::Unhealthy).await;

    // Memory is bounded: another 2 MiB does not fit next to the 3 MiB held.
    let r = require_once(&mut s.client, app, 2 << 20).await;
    assert_eq!(status_of(r.status), StatusCode::NoBuffer);
    assert!(registry.store().memory().budget().snapshot().used <= capacity);
    for (p, want) in &expected {
        let got = read_partition(&mut s.client, app, 0, *p).await;
        assert_eq!(
            &got.blocks, want,
            "partition {p} served from memory meanwhile"
        );
    }

    let mut finishing = s.client.clone();
    let finish_task = tokio::spawn(async move { finish(&mut finishing, app, 0).await });
    hdfs_command("start-namenode").await;
    tokio::time::timeout(Duration::from_secs(120), finish_task)
        .await
        .expect("finishShuffle returns once HDFS is back")
        .expect("finish task");
    assert_eq!(registry.store().memory().budget().snapshot().used, 0);
    eventually("ACTIVE again", || {
        registry.status().get() == proto::ServerStatus::Active
    })
    .await;
    hdfs_beat(&mut beats, proto::storage_info::StorageStatus::Normal).await;
    for (p, want) in &expected {
        let (got, mem, _, from_hdfs) =
            read_everything(&mut s.client, &hdfs, &root, app, 0, *p, &id).await;
        assert_same(&got, want, &format!("partition {p}: nothing lost"));
        assert_eq!((mem, from_hdfs), (0, want.len()));
    }
    s.running.shutdown().await;
}

/// `MEMORY_LOCALFILE_HDFS`: once a partition is huge, its spills go to HDFS even when they are
/// far below the cold threshold; other partitions stay on local files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_partitions_spill_to_hdfs() {
    let _one = healthy_cluster().await;
    let url = cluster().await.url.clone();
    let hdfs = admin(&url);
    let mut s = start(1, |c| {
        c.store_type = StoreType::MemoryLocalfileHdfs;
        // 64 MiB memory: huge past 512 KiB, then spilled past 0.02 × 64 MiB / 2 ≈ 655 KB.
        c.hybrid_store.huge_partition_size_threshold = ByteSize(512 << 10);
        c.hybrid_store.huge_partition_memory_limit_ratio = 0.02;
    })
    .await;
    let root = format!("/{}", unique("huge"));
    let app = "app-huge";
    let id = s.running.server_id.clone();
    register_remote(&mut s.client, app, 0, 0..2, &format!("{url}{root}"), "dave").await;
    let mut expected: BTreeMap<i32, BTreeMap<i64, Bytes>> = BTreeMap::new();
    for seq in 0..40 {
        let mut batch = vec![(0, vec![make_block(seq, 0, 1, 32 << 10)])];
        if seq < 10 {
            batch.push((1, vec![make_block(seq, 1, 1, 1 << 10)]));
        }
        for (p, blocks) in &batch {
            for b in blocks {
                expected
                    .entry(*p)
                    .or_default()
                    .insert(b.block_id, b.data.clone());
            }
        }
        send(&mut s.client, app, 0, batch).await;
    }
    finish(&mut s.client, app, 0).await;
    let (got, _, _, from_hdfs) = read_everything(&mut s.client, &hdfs, &root, app, 0, 0, &id).await;
    assert_same(&got, &expected[&0], "huge partition");
    assert!(from_hdfs > 0, "the huge partition's spills went to HDFS");
    let (got, _, files, from_hdfs) =
        read_everything(&mut s.client, &hdfs, &root, app, 0, 1, &id).await;
    assert_same(&got, &expected[&1], "small partition");
    assert_eq!(
        (files, from_hdfs),
        (10, 0),
        "the small partition stays local"
    );
    s.running.shutdown().await;
}

/// A TCP proxy in front of the NameNode that can stall: while stalled it forwards nothing (a
/// NameNode that hangs, as in a long GC pause or a full RPC queue).
struct StallingProxy {
    addr: std::net::SocketAddr,
    stalled: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl StallingProxy {
    async fn start(target: String) -> StallingProxy {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stalled = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stalled);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = tokio::net::TcpStream::connect(&target).await else {
                    continue;
                };
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                for (mut from, mut to, flag) in [
                    (
                        Box::new(ri) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
                        Box::new(wo) as Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
                        Arc::clone(&flag),
                    ),
                    (Box::new(ro), Box::new(wi), Arc::clone(&flag)),
                ] {
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 64 << 10];
                        loop {
                            let n = match from.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            while flag.load(Ordering::SeqCst) {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            if to.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            }
        });
        StallingProxy { addr, stalled }
    }

    fn stall(&self, on: bool) {
        self.stalled.store(on, std::sync::atomic::Ordering::SeqCst);
    }
}

/// `MEMORY_LOCALFILE_HDFS` with a NameNode that stops answering: the HDFS append is abandoned
/// after `write_timeout`, the spill goes to local files, HDFS shows unhealthy; nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_namenode_times_out_and_falls_back() {
    let _one = healthy_cluster().await;
    let url = cluster().await.url.clone();
    let hdfs = admin(&url);
    let proxy = StallingProxy::start(url.trim_start_matches("hdfs://").to_owned()).await;
    let mut s = start(1, |c| {
        c.store_type = StoreType::MemoryLocalfileHdfs;
        c.hdfs_store.cold_storage_threshold_size = ByteSize(256 << 10);
        c.hdfs_store.write_timeout = Duration::from_secs(2);
        c.hdfs_store.failure_cooldown = Duration::from_secs(600);
    })
    .await;
    let root = format!("/{}", unique("hung"));
    let app = "app-hung";
    let id = s.running.server_id.clone();
    register_remote(
        &mut s.client,
        app,
        0,
        0..1,
        &format!("hdfs://{}{root}", proxy.addr),
        "erin",
    )
    .await;
    let mut expected: BTreeMap<i64, Bytes> = BTreeMap::new();
    for round in 0..2 {
        if round == 1 {
            proxy.stall(true);
        }
        let blocks: Vec<proto::ShuffleBlock> = (0..8)
            .map(|i| make_block(round * 100 + i, 0, 1, 64 << 10))
            .collect();
        for b in &blocks {
            expected.insert(b.block_id, b.data.clone());
        }
        send(&mut s.client, app, 0, vec![(0, blocks)]).await;
        finish(&mut s.client, app, 0).await;
    }
    let served = read_partition(&mut s.client, app, 0, 0).await;
    assert_eq!(
        (served.from_memory, served.from_files),
        (0, 8),
        "the stalled spill went to local files"
    );
    let hdfs_tier = s.running.hdfs_tier().expect("hdfs tier").clone();
    assert!(!spillway::store::Tier::health(hdfs_tier.as_ref()).writable);
    proxy.stall(false);
    // The abandoned append reached the NameNode once it answered again and reopened the pair
    // holding round 0; its lease is recovered in the background, then round 0 is readable.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let (got, files, from_hdfs) = loop {
        let (got, _, files, from_hdfs) =
            read_everything(&mut s.client, &hdfs, &root, app, 0, 0, &id).await;
        if got.len() == expected.len() || tokio::time::Instant::now() > deadline {
            break (got, files, from_hdfs);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_same(&got, &expected, "nothing lost");
    assert_eq!((files, from_hdfs), (8, 8));
    s.running.shutdown().await;
}

/// The storage audit log of a `MEMORY_HDFS` server: each spill to HDFS is a `w|…` line naming the
/// remote storage's host (`URI.getHost` of the app's path) and the path as the client sent it,
/// and the shuffle and app purges `d|…` lines for that storage, as Java's `HadoopStorageManager`
/// logs them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_audit_names_the_remote_storage() {
    let _one = healthy_cluster().await;
    let url = cluster().await.url.clone();
    let superuser = admin(&url);
    let dir = tempfile::TempDir::new().unwrap();
    let log = dir.path().join("storage_audit.log");
    let l = log.clone();
    let mut s = start(0, move |c| {
        c.store_type = StoreType::MemoryHdfs;
        c.audit.storage_log = true;
        c.audit.storage_log_path = l;
    })
    .await;
    let root = format!("/{}", unique("rss"));
    superuser.mkdirs(&root, 0o777, true).await.unwrap();
    let remote = format!("{url}{root}");
    let host = url
        .split_once("://")
        .and_then(|(_, a)| a.rsplit_once(':'))
        .map(|(h, _)| h.to_owned())
        .expect("the MiniHdfs URL has host:port");
    let app = "application_1_0001_42";
    register_remote(&mut s.client, app, 3, 0..2, &remote, "alice").await;
    write_shuffle(&mut s.client, app, 3, 1, 2, 2, 500).await;
    finish(&mut s.client, app, 3).await;
    let r = s
        .client
        .unregister_shuffle(proto::ShuffleUnregisterRequest {
            app_id: app.into(),
            shuffle_id: 3,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    let r = s
        .client
        .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest { app_id: app.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    s.running.shutdown().await;

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    let writes: Vec<&Vec<&str>> = lines.iter().filter(|l| l[0] == "w").collect();
    assert_eq!(writes.len(), 2, "one per partition: {text}");
    for w in &writes {
        assert_eq!(w[1..3], [app, "3"], "{text}");
        assert!(w[3] == "0_0" || w[3] == "1_1", "{text}");
        assert_eq!(w[4..6], [host.as_str(), remote.as_str()], "{text}");
        // One map task, two blocks of 500 bytes per partition.
        assert_eq!(w[6], (2 * (500 + 32)).to_string(), "{text}");
    }
    let deletes: Vec<&Vec<&str>> = lines.iter().filter(|l| l[0] == "d").collect();
    assert_eq!(
        deletes,
        [
            &vec!["d", app, "3", host.as_str(), remote.as_str()],
            &vec!["d", app, host.as_str(), remote.as_str()],
        ],
        "{text}"
    );
}

/// `maxConcurrencyPerPartitionToWrite` of `registerShuffle` (Spark's
/// `spark.rss.client.max.concurrency.of.per-partition.write`), as the Java server applies it:
/// capped by `partition_write_max_concurrency_limit`, 0 meaning the server's own value. With one
/// writer the pair is `<serverId>_0`, with several `<serverId>_<writer>_0`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_asks_for_its_own_hdfs_writers_per_partition() {
    let _one = healthy_cluster().await;
    let url = cluster().await.url.clone();
    let superuser = admin(&url);
    let mut s = start(0, move |c| {
        c.store_type = StoreType::MemoryHdfs;
        c.hdfs_store.partition_write_max_concurrency = 1;
        c.hdfs_store.partition_write_max_concurrency_limit = 4;
    })
    .await;
    let root = format!("/{}", unique("rss"));
    superuser.mkdirs(&root, 0o777, true).await.unwrap();
    let remote = format!("{url}{root}");
    let server_id = s.running.server_id.clone();
    for (app, asked, several) in [
        ("application_1_0001_7", 0, false),
        ("application_1_0002_7", 8, true),
    ] {
        s.client
            .register_shuffle(proto::ShuffleRegisterRequest {
                app_id: app.into(),
                shuffle_id: 0,
                partition_ranges: vec![proto::ShufflePartitionRange { start: 0, end: 0 }],
                remote_storage: Some(proto::RemoteStorage {
                    path: remote.clone(),
                    remote_storage_conf: Vec::new(),
                }),
                user: "alice".into(),
                max_concurrency_per_partition_to_write: asked,
                ..Default::default()
            })
            .await
            .unwrap();
        write_shuffle(&mut s.client, app, 0, 1, 1, 2, 500).await;
        finish(&mut s.client, app, 0).await;
        let names: Vec<String> = superuser
            .list_status(&format!("{root}/{app}/0/0-0"), false)
            .await
            .expect("the partition's HDFS directory")
            .into_iter()
            .map(|f| f.path.rsplit('/').next().unwrap().to_owned())
            .collect();
        let stem = if several {
            format!("{server_id}_0_0")
        } else {
            format!("{server_id}_0")
        };
        assert!(
            names.contains(&format!("{stem}.data")),
            "asked {asked}: {names:?}"
        );
        let data = superuser
            .get_file_info(&format!("{root}/{app}/0/0-0/{stem}.data"))
            .await
            .unwrap();
        assert_eq!(data.length, 2 * 500, "both blocks of the partition");
    }
    s.running.shutdown().await;
}

/// `MEMORY_HDFS` has nothing to fall back to: a path the server's HDFS user may not write, a
/// host that does not resolve, and no remote path at all are refused at `registerShuffle` with
/// a final status whose message names the path, HDFS's answer and what to fix, before a block
/// is accepted. The same path made writable registers, and the check left no file behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_hdfs_refuses_paths_it_cannot_write_at_registration() {
    let _one = healthy_cluster().await;
    let url = cluster().await.url.clone();
    let superuser = admin(&url);
    let mut s = start(0, |c| {
        c.store_type = StoreType::MemoryHdfs;
        c.hdfs_store.user = Some("rss".into());
    })
    .await;
    // Owned by the superuser, 755: the server's user "rss" may not create in it.
    let locked = format!("/{}", unique("locked"));
    superuser.mkdirs(&locked, 0o755, true).await.unwrap();
    let path = format!("{url}{locked}/rss");
    let conf = || vec![("dfs.client.socket-timeout".to_owned(), "20000".to_owned())];
    let t = std::time::Instant::now();
    let r =
        register_remote_answer(&mut s.client, "app_locked", 0, 0..2, &path, "alice", conf()).await;
    println!(
        "unwritable path refused in {:?}: {}",
        t.elapsed(),
        r.ret_msg
    );
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    for part in [path.as_str(), "AccessControlException", "write access"] {
        assert!(r.ret_msg.contains(part), "names {part}: {}", r.ret_msg);
    }

    let unresolvable = "hdfs://no-such-nameservice.invalid:8020/rss";
    let t = std::time::Instant::now();
    let r = register_remote_answer(
        &mut s.client,
        "app_ns",
        0,
        0..2,
        unresolvable,
        "alice",
        conf(),
    )
    .await;
    println!(
        "unresolvable host refused in {:?}: {}",
        t.elapsed(),
        r.ret_msg
    );
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    for part in [unresolvable, "does not resolve", "dfs.nameservices"] {
        assert!(r.ret_msg.contains(part), "names {part}: {}", r.ret_msg);
    }

    let r = s
        .client
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: "app_no_path".into(),
            shuffle_id: 0,
            partition_ranges: vec![proto::ShufflePartitionRange { start: 0, end: 0 }],
            user: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(r.status),
        StatusCode::InvalidRequest,
        "{}",
        r.ret_msg
    );
    for part in [
        "MEMORY_HDFS",
        "registered no remote storage path",
        "spark.rss.remote.storage.path",
    ] {
        assert!(r.ret_msg.contains(part), "names {part}: {}", r.ret_msg);
    }
    assert_eq!(
        s.running.registry().app_count(),
        0,
        "nothing was registered"
    );

    // Fixed by the operator: the path is checked again on the next registration with other
    // settings, or after the refusal's cache time; a new path is a new check.
    superuser
        .set_owner(&locked, Some("rss"), None)
        .await
        .unwrap();
    let fixed = format!("{url}{locked}/rss2");
    register_remote_with(&mut s.client, "app_fixed", 0, 0..2, &fixed, "alice", conf()).await;
    let names: Vec<String> = superuser
        .list_status(&format!("{locked}/rss2"), false)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert!(names.is_empty(), "the check's file is gone: {names:?}");
    s.running.shutdown().await;
}

/// `MEMORY_LOCALFILE_HDFS` serves an app whose HDFS path it may not write from local disk:
/// registration succeeds, every spill (all over the cold threshold) lands in local files
/// without trying HDFS again, and every block reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_localfile_hdfs_serves_an_unwritable_path_from_local_disk() {
    let _one = healthy_cluster().await;
    let url = cluster().await.url.clone();
    let superuser = admin(&url);
    let mut s = start(1, |c| {
        c.store_type = StoreType::MemoryLocalfileHdfs;
        c.hdfs_store.user = Some("rss".into());
        c.hdfs_store.cold_storage_threshold_size = ByteSize(1);
    })
    .await;
    let locked = format!("/{}", unique("locked"));
    superuser.mkdirs(&locked, 0o755, true).await.unwrap();
    let path = format!("{url}{locked}/rss");
    let app = "app_local_instead";
    register_remote(&mut s.client, app, 0, 0..2, &path, "alice").await;
    // The registration check asked the NameNode (and was refused); nothing asks it after that.
    let checked = cluster().await.audit(&locked);
    assert!(
        checked.iter().any(|l| l.ends_with("allowed=false")),
        "the check's refused call is in the NameNode's audit log: {checked:?}"
    );
    let expected = write_shuffle(&mut s.client, app, 0, 2, 2, 3, 4_000).await;
    finish(&mut s.client, app, 0).await;
    for (p, want) in &expected {
        let got = read_partition(&mut s.client, app, 0, *p).await;
        assert_eq!(&got.blocks, want, "partition {p}");
        assert_eq!(got.from_memory, 0, "partition {p} from local files");
    }
    assert_eq!(
        cluster().await.audit(&locked),
        checked,
        "the NameNode was asked again after it refused the app"
    );
    assert!(
        superuser
            .get_file_info(&format!("{locked}/rss/{app}"))
            .await
            .is_err(),
        "nothing went to HDFS"
    );
    s.running.shutdown().await;
}
