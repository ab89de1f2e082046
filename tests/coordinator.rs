//! The embedded coordinator over real gRPC: fake shuffle-server heartbeats, then the calls a
//! Spark driver makes (assignments, client conf, remote storage, app registration).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use spillway::config::Config;
use spillway::proto::coordinator_server_client::CoordinatorServerClient;
use spillway::proto::{self, ServerStatus, StatusCode};
use tonic::transport::Channel;

use common::{status_of, TestServer};

type Coord = CoordinatorServerClient<Channel>;

const GIB: i64 = 1 << 30;

async fn start_coordinator(tweak: impl FnOnce(&mut Config)) -> (TestServer, Coord) {
    let server = common::start(1, |c| {
        c.coordinator.enabled = true;
        // These tests register fake servers only; the self-registration has its own test.
        c.coordinator.register_self = false;
        tweak(c);
    })
    .await;
    let channel = Channel::from_shared(format!("http://{}", server.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .expect("connects");
    (server, CoordinatorServerClient::new(channel))
}

/// A heartbeat as a 0.10 server sends it: `status` set, `isHealthy` unset.
fn heartbeat(id: &str, tags: &[&str], available: i64) -> proto::ShuffleServerHeartBeatRequest {
    proto::ShuffleServerHeartBeatRequest {
        server_id: Some(proto::ShuffleServerId {
            id: id.into(),
            ip: "127.0.0.1".into(),
            port: 20000 + id.len() as i32,
            netty_port: -1,
            jetty_port: 0,
        }),
        used_memory: 1024,
        available_memory: available,
        tags: tags.iter().map(|t| t.to_string()).collect(),
        status: Some(ServerStatus::Active as i32),
        ..Default::default()
    }
}

async fn send_heartbeat(client: &mut Coord, req: proto::ShuffleServerHeartBeatRequest) {
    let resp = client.heartbeat(req).await.unwrap().into_inner();
    assert_eq!(status_of(resp.status), StatusCode::Success);
}

/// s1 [ss_v5, GRPC] 3 GiB, s2 [ss_v5, GRPC, GRPC_NETTY] 2 GiB, s3 [ss_v5, GRPC_NETTY] 1 GiB.
async fn three_servers(client: &mut Coord) {
    send_heartbeat(client, heartbeat("s1", &["ss_v5", "GRPC"], 3 * GIB)).await;
    send_heartbeat(
        client,
        heartbeat("s2", &["ss_v5", "GRPC", "GRPC_NETTY"], 2 * GIB),
    )
    .await;
    send_heartbeat(client, heartbeat("s3", &["ss_v5", "GRPC_NETTY"], GIB)).await;
}

fn request(
    app: &str,
    partitions: i32,
    replica: i32,
    tags: &[&str],
) -> proto::GetShuffleServerRequest {
    proto::GetShuffleServerRequest {
        application_id: app.into(),
        shuffle_id: 0,
        partition_num: partitions,
        partition_num_per_range: 1,
        data_replica: replica,
        require_tags: tags.iter().map(|t| t.to_string()).collect(),
        assignment_shuffle_server_number: -1,
        ..Default::default()
    }
}

async fn assign(
    client: &mut Coord,
    req: proto::GetShuffleServerRequest,
) -> proto::GetShuffleAssignmentsResponse {
    client
        .get_shuffle_assignments(req)
        .await
        .unwrap()
        .into_inner()
}

/// Asserts SUCCESS, contiguous ranges covering `0..partition_num`, `replica` distinct servers
/// per range; returns partitions per server id.
fn check(
    resp: &proto::GetShuffleAssignmentsResponse,
    req: &proto::GetShuffleServerRequest,
) -> BTreeMap<String, usize> {
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
    let mut counts = BTreeMap::new();
    let mut next = 0;
    for range in &resp.assignments {
        assert_eq!(range.start_partition, next, "ranges are contiguous");
        assert!(range.end_partition >= range.start_partition);
        next = range.end_partition + 1;
        assert_eq!(range.server.len(), req.data_replica as usize);
        let distinct: BTreeSet<&str> = range.server.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(distinct.len(), range.server.len(), "replicas are distinct");
        for server in &range.server {
            *counts.entry(server.id.clone()).or_insert(0) +=
                (range.end_partition - range.start_partition + 1) as usize;
        }
    }
    assert_eq!(next, req.partition_num, "every partition is assigned");
    counts
}

fn ids(counts: &BTreeMap<String, usize>) -> Vec<&str> {
    counts.keys().map(String::as_str).collect()
}

#[tokio::test]
async fn assignments_honour_tags_replicas_server_number_and_faulty_ids() {
    let (server, mut client) = start_coordinator(|_| {}).await;
    three_servers(&mut client).await;

    // Tags: a GRPC client gets only s1 and s2.
    let req = request("app1", 10, 1, &["ss_v5", "GRPC"]);
    let counts = check(&assign(&mut client, req.clone()).await, &req);
    assert_eq!(ids(&counts), ["s1", "s2"]);
    assert_eq!(counts.values().sum::<usize>(), 10);
    let req = request("app1", 10, 1, &["ss_v5", "GRPC_NETTY"]);
    assert_eq!(
        ids(&check(&assign(&mut client, req.clone()).await, &req)),
        ["s2", "s3"]
    );

    // Replicas: every partition on two distinct servers, spread over all three.
    let mut req = request("app2", 12, 2, &["ss_v5"]);
    req.partition_num_per_range = 1;
    let counts = check(&assign(&mut client, req.clone()).await, &req);
    assert_eq!(ids(&counts), ["s1", "s2", "s3"]);
    assert_eq!(counts.values().sum::<usize>(), 24);
    assert!(counts.values().all(|&n| n == 8), "{counts:?}");

    // Ranges of several partitions, the last one short.
    let mut req = request("app2", 7, 1, &[]);
    req.partition_num_per_range = 3;
    let resp = assign(&mut client, req.clone()).await;
    check(&resp, &req);
    let bounds: Vec<(i32, i32)> = resp
        .assignments
        .iter()
        .map(|r| (r.start_partition, r.end_partition))
        .collect();
    assert_eq!(bounds, [(0, 2), (3, 5), (6, 6)]);

    // Requested server number.
    let mut req = request("app3", 20, 1, &["ss_v5"]);
    req.assignment_shuffle_server_number = 1;
    assert_eq!(
        check(&assign(&mut client, req.clone()).await, &req).len(),
        1
    );
    req.assignment_shuffle_server_number = 2;
    assert_eq!(
        check(&assign(&mut client, req.clone()).await, &req).len(),
        2
    );
    req.assignment_shuffle_server_number = 0;
    assert_eq!(
        check(&assign(&mut client, req.clone()).await, &req).len(),
        3
    );

    // Faulty servers are avoided.
    let mut req = request("app4", 6, 1, &["ss_v5", "GRPC"]);
    req.faulty_server_ids = vec!["s1".into()];
    assert_eq!(
        ids(&check(&assign(&mut client, req.clone()).await, &req)),
        ["s2"]
    );
    req.faulty_server_ids = vec!["s1".into(), "s2".into()];
    let resp = assign(&mut client, req).await;
    assert_eq!(status_of(resp.status), StatusCode::InternalError);

    // The ids carry what clients connect to.
    let req = request("app5", 1, 1, &["GRPC"]);
    let resp = assign(&mut client, req).await;
    let id = &resp.assignments[0].server[0];
    assert_eq!(id.ip, "127.0.0.1");
    assert_eq!(id.port, 20002);
    assert_eq!(id.netty_port, -1);

    server.running.shutdown().await;
}

#[tokio::test]
async fn impossible_requests_answer_internal_error() {
    let (server, mut client) = start_coordinator(|_| {}).await;

    // No servers at all.
    let resp = assign(&mut client, request("app", 4, 1, &["ss_v5"])).await;
    assert_eq!(status_of(resp.status), StatusCode::InternalError);
    assert!(
        resp.ret_msg.contains("enough shuffle servers"),
        "{}",
        resp.ret_msg
    );
    assert!(resp.assignments.is_empty());

    three_servers(&mut client).await;
    // More replicas than servers.
    let resp = assign(&mut client, request("app", 4, 4, &["ss_v5"])).await;
    assert_eq!(status_of(resp.status), StatusCode::InternalError);
    assert!(
        resp.ret_msg.contains("dataReplica is 4"),
        "{}",
        resp.ret_msg
    );
    // More replicas than servers with the tags.
    let resp = assign(&mut client, request("app", 4, 3, &["GRPC"])).await;
    assert_eq!(status_of(resp.status), StatusCode::InternalError);
    // A tag no server has.
    let resp = assign(&mut client, request("app", 4, 1, &["ss_v4"])).await;
    assert_eq!(status_of(resp.status), StatusCode::InternalError);
    // Nonsense numbers.
    for req in [
        request("app", -1, 1, &[]),
        request("app", 4, 0, &[]),
        proto::GetShuffleServerRequest {
            partition_num_per_range: 0,
            ..request("app", 4, 1, &[])
        },
        request("app", i32::MAX, 1, &[]),
    ] {
        let resp = assign(&mut client, req).await;
        assert_eq!(status_of(resp.status), StatusCode::InternalError);
        assert!(resp.ret_msg.starts_with("invalid"), "{}", resp.ret_msg);
    }
    // No partitions: nothing to assign, and that is fine.
    let resp = assign(&mut client, request("app", 0, 1, &["ss_v5"])).await;
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
    assert!(resp.assignments.is_empty());

    server.running.shutdown().await;
}

#[tokio::test]
async fn load_spreads_shuffles_over_servers() {
    let (server, mut client) = start_coordinator(|_| {}).await;
    for id in ["s1", "s2", "s3"] {
        send_heartbeat(&mut client, heartbeat(id, &["ss_v5"], GIB)).await;
    }
    // One range per shuffle, one server each: the assigned load sends each shuffle elsewhere.
    let mut used = BTreeSet::new();
    for shuffle in 0..3 {
        let mut req = request("app", 1, 1, &["ss_v5"]);
        req.shuffle_id = shuffle;
        let counts = check(&assign(&mut client, req.clone()).await, &req);
        used.extend(counts.into_keys());
    }
    assert_eq!(used.len(), 3, "{used:?}");
    let coordinator = server.running.coordinator().expect("coordinator enabled");
    assert_eq!(coordinator.app_count(), 1);
    assert!(coordinator.load().values().all(|&n| n == 1));

    server.running.shutdown().await;
}

#[tokio::test]
async fn unhealthy_and_decommissioning_servers_are_not_assigned() {
    let (server, mut client) = start_coordinator(|_| {}).await;
    let with_status = |id: &str, status: ServerStatus, healthy: Option<bool>| {
        let mut req = heartbeat(id, &["ss_v5"], GIB);
        req.status = Some(status as i32);
        req.is_healthy = healthy;
        req
    };
    send_heartbeat(
        &mut client,
        with_status("active", ServerStatus::Active, None),
    )
    .await;
    send_heartbeat(
        &mut client,
        with_status("decom", ServerStatus::Decommissioning, None),
    )
    .await;
    send_heartbeat(
        &mut client,
        with_status("sick", ServerStatus::Unhealthy, None),
    )
    .await;
    // isHealthy overrides status either way.
    send_heartbeat(
        &mut client,
        with_status("override_bad", ServerStatus::Active, Some(false)),
    )
    .await;
    send_heartbeat(
        &mut client,
        with_status("override_good", ServerStatus::Decommissioning, Some(true)),
    )
    .await;
    // A ≤0.7 server: no status, only isHealthy.
    let mut old = heartbeat("old", &["ss_v5"], GIB);
    old.status = None;
    old.is_healthy = Some(true);
    send_heartbeat(&mut client, old).await;

    let req = request("app", 30, 1, &["ss_v5"]);
    let counts = check(&assign(&mut client, req.clone()).await, &req);
    assert_eq!(ids(&counts), ["active", "old", "override_good"]);

    let coordinator = server.running.coordinator().expect("coordinator enabled");
    let status = |id: &str| coordinator.servers().get(id).map(|s| s.status);
    assert_eq!(status("override_bad"), Some(ServerStatus::Unhealthy));
    assert_eq!(status("override_good"), Some(ServerStatus::Active));
    assert_eq!(status("decom"), Some(ServerStatus::Decommissioning));

    // Every live server is listed, whatever its status.
    let list = client
        .get_shuffle_server_list(())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.servers.len(), 6);
    let num = client
        .get_shuffle_server_num(())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(num.num, 6);

    // Recovery: the next heartbeat decides.
    send_heartbeat(&mut client, with_status("sick", ServerStatus::Active, None)).await;
    let counts = check(&assign(&mut client, req.clone()).await, &req);
    assert!(counts.contains_key("sick"), "{counts:?}");

    server.running.shutdown().await;
}

#[tokio::test]
async fn silent_server_drops_out_after_the_timeout() {
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.server_heartbeat_timeout = Duration::from_millis(300);
    })
    .await;
    // s1 keeps heartbeating; s2 sends one heartbeat and falls silent.
    let keepalive = {
        let mut client = client.clone();
        tokio::spawn(async move {
            loop {
                send_heartbeat(&mut client, heartbeat("s1", &["ss_v5"], GIB)).await;
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        })
    };
    send_heartbeat(&mut client, heartbeat("s2", &["ss_v5"], 4 * GIB)).await;
    let coordinator = server
        .running
        .coordinator()
        .expect("coordinator enabled")
        .clone();
    common::eventually("s1 registered", || {
        coordinator.servers().get("s1").is_some()
    })
    .await;

    common::eventually("s2 dropped", || coordinator.servers().get("s2").is_none()).await;
    // Over gRPC too: s2 is neither listed nor assigned.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let list = client
            .get_shuffle_server_list(())
            .await
            .unwrap()
            .into_inner();
        let listed: Vec<String> = list.servers.into_iter().map(|s| s.id).collect();
        let req = request("app", 6, 1, &["ss_v5"]);
        let resp = assign(&mut client, req.clone()).await;
        if listed == ["s1"] && status_of(resp.status) == StatusCode::Success {
            assert_eq!(ids(&check(&resp, &req)), ["s1"]);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "s2 still listed: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A new heartbeat brings it back.
    send_heartbeat(&mut client, heartbeat("s2", &["ss_v5"], 4 * GIB)).await;
    assert!(coordinator.servers().get("s2").is_some());

    keepalive.abort();
    server.running.shutdown().await;
}

#[tokio::test]
async fn client_conf_remote_storage_and_cluster_calls() {
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.client_conf = BTreeMap::from([
            ("rss.storage.type".into(), "MEMORY_LOCALFILE".into()),
            ("spark.rss.writer.buffer.size".into(), "4m".into()),
        ]);
        c.coordinator.remote_storage_path = Some("hdfs://ns1/rss".into());
    })
    .await;

    let expected = vec![
        (
            "rss.storage.type".to_string(),
            "MEMORY_LOCALFILE".to_string(),
        ),
        ("spark.rss.writer.buffer.size".to_string(), "4m".to_string()),
    ];
    let items = |resp: proto::FetchClientConfResponse| {
        assert_eq!(status_of(resp.status), StatusCode::Success);
        resp.client_conf
            .into_iter()
            .map(|i| (i.key, i.value))
            .collect::<Vec<_>>()
    };
    let v1 = client.fetch_client_conf(()).await.unwrap().into_inner();
    assert_eq!(items(v1), expected);
    let v2 = client
        .fetch_client_conf_v2(proto::FetchClientConfRequest {
            user: "alice".into(),
            properties: Default::default(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(items(v2), expected);

    let remote = client
        .fetch_remote_storage(proto::FetchRemoteStorageRequest {
            app_id: "app".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(remote.status), StatusCode::Success);
    assert_eq!(remote.remote_storage.unwrap().path, "hdfs://ns1/rss");

    // accessCluster lets everyone in, with a fresh id each time.
    let mut uuids = BTreeSet::new();
    for _ in 0..2 {
        let resp = client
            .access_cluster(proto::AccessClusterRequest {
                access_id: "queue".into(),
                tags: vec!["ss_v5".into()],
                user: "alice".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status_of(resp.status), StatusCode::Success);
        assert!(!resp.uuid.is_empty());
        assert!(
            resp.uuid.chars().all(|c| c.is_ascii_digit() || c == '-'),
            "{}",
            resp.uuid
        );
        uuids.insert(resp.uuid);
    }
    assert_eq!(uuids.len(), 2);

    // Availability and the server list follow heartbeats.
    let available = client
        .check_service_available(())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(available.status), StatusCode::Success);
    assert!(!available.available);
    assert_eq!(
        client
            .get_shuffle_server_num(())
            .await
            .unwrap()
            .into_inner()
            .num,
        0
    );
    three_servers(&mut client).await;
    assert!(
        client
            .check_service_available(())
            .await
            .unwrap()
            .into_inner()
            .available
    );
    assert_eq!(
        client
            .get_shuffle_server_num(())
            .await
            .unwrap()
            .into_inner()
            .num,
        3
    );
    let list = client
        .get_shuffle_server_list(())
        .await
        .unwrap()
        .into_inner();
    let listed: Vec<&str> = list.servers.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(listed, ["s1", "s2", "s3"]);
    assert_eq!(list.servers[0].ip, "127.0.0.1");

    // App registration and heartbeats are tracked.
    let resp = client
        .register_application_info(proto::ApplicationInfoRequest {
            app_id: "app_1".into(),
            user: "alice".into(),
            version: Some("0.10.0".into()),
            git_commit_id: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(resp.status), StatusCode::Success);
    let resp = client
        .app_heartbeat(proto::AppHeartBeatRequest {
            app_id: "app_2".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(resp.status), StatusCode::Success);
    assert_eq!(server.running.coordinator().unwrap().app_count(), 2);

    let resp = client
        .report_client_operation(proto::ReportShuffleClientOpRequest {
            client_host: "h".into(),
            client_port: 1,
            server: None,
            operation: "op".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(resp.status), StatusCode::Success);
    let info = client
        .get_shuffle_data_storage_info(())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.storage_path, "hdfs://ns1/rss");

    // A heartbeat naming no server is answered SUCCESS and ignored.
    send_heartbeat(&mut client, proto::ShuffleServerHeartBeatRequest::default()).await;
    assert_eq!(
        client
            .get_shuffle_server_num(())
            .await
            .unwrap()
            .into_inner()
            .num,
        3
    );

    server.running.shutdown().await;
}

#[tokio::test]
async fn defaults_serve_empty_conf_and_storage() {
    let (server, mut client) = start_coordinator(|_| {}).await;
    let conf = client.fetch_client_conf(()).await.unwrap().into_inner();
    assert_eq!(status_of(conf.status), StatusCode::Success);
    assert!(conf.client_conf.is_empty());
    let remote = client
        .fetch_remote_storage(proto::FetchRemoteStorageRequest {
            app_id: "app".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(remote.status), StatusCode::Success);
    assert_eq!(remote.remote_storage.unwrap_or_default().path, "");
    server.running.shutdown().await;
}

#[tokio::test]
async fn disabled_by_default() {
    let server = common::start(1, |_| {}).await;
    assert!(server.running.coordinator().is_none());
    let channel = Channel::from_shared(format!("http://{}", server.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let err = CoordinatorServerClient::new(channel)
        .get_shuffle_server_num(())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    server.running.shutdown().await;
}

/// The single-binary flow: the server heartbeats its own coordinator (as `tasks::heartbeat`
/// will), a driver asks for servers, and registers the shuffle on the server it was given.
#[tokio::test]
async fn a_server_can_register_with_its_own_coordinator() {
    let (mut server, mut client) = start_coordinator(|_| {}).await;
    let addr = server.running.grpc_addr;
    let own = proto::ShuffleServerHeartBeatRequest {
        server_id: Some(proto::ShuffleServerId {
            id: server.running.server_id.clone(),
            ip: addr.ip().to_string(),
            port: i32::from(addr.port()),
            netty_port: 0,
            jetty_port: 0,
        }),
        available_memory: GIB,
        tags: vec!["ss_v5".into(), "GRPC".into()],
        status: Some(ServerStatus::Active as i32),
        ..Default::default()
    };
    send_heartbeat(&mut client, own).await;

    let req = request("app_single", 4, 1, &["ss_v5", "GRPC"]);
    let resp = assign(&mut client, req.clone()).await;
    assert_eq!(
        ids(&check(&resp, &req)),
        [server.running.server_id.as_str()]
    );
    let given = &resp.assignments[0].server[0];
    assert_eq!(format!("{}:{}", given.ip, given.port), addr.to_string());

    common::register(&mut server.client, "app_single", 0, 0..4, false).await;
    server.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_embedded_coordinator_the_server_registers_itself() {
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.register_self = true;
        c.heartbeat_interval = std::time::Duration::from_millis(100);
    })
    .await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let list = client
            .get_shuffle_server_list(tonic::Request::new(()))
            .await
            .unwrap()
            .into_inner();
        if list
            .servers
            .iter()
            .any(|s| s.id == server.running.server_id)
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "server never registered itself"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let req = request("app_self", 3, 1, &["ss_v5", "GRPC"]);
    let resp = assign(&mut client, req.clone()).await;
    assert_eq!(
        ids(&check(&resp, &req)),
        [server.running.server_id.as_str()]
    );
    server.running.shutdown().await;
}

/// A `GRPC_NETTY` client (the 0.10 default) against servers without a Netty port: the answer
/// still starts as Java's, and says that only the Netty tag rules the servers out and what to
/// change, instead of reading like a cluster that is too small. Here the server registers itself
/// with its own coordinator, with `netty_port = -1`, as a real deployment would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_netty_client_without_netty_servers_is_told_why() {
    let (s, mut client) = start_coordinator(|c| {
        c.netty_port = -1;
        c.coordinator.register_self = true;
        c.heartbeat_interval = std::time::Duration::from_millis(200);
    })
    .await;
    let grpc = request("app_grpc", 4, 1, &["ss_v5", "GRPC"]);
    let mut served = false;
    for _ in 0..100 {
        if status_of(assign(&mut client, grpc.clone()).await.status) == StatusCode::Success {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(served, "the server registered itself for GRPC clients");
    let resp = assign(
        &mut client,
        request("app_netty", 4, 1, &["ss_v5", "GRPC_NETTY"]),
    )
    .await;
    assert_eq!(status_of(resp.status), StatusCode::InternalError);
    for part in [
        "There isn't enough shuffle servers",
        "1 server(s) would match but serve no Netty data plane",
        "netty_port",
        "spark.rss.client.type=GRPC",
    ] {
        assert!(
            resp.ret_msg.contains(part),
            "names {part}: {}",
            resp.ret_msg
        );
    }
    s.running.shutdown().await;
}
