//! The embedded coordinator's Java 0.10 placement and admission rules over real gRPC: host
//! spreading and continuous ranges in `getShuffleAssignments`, the access checkers behind
//! `accessCluster`, the dynamic client conf, remote storage balance in `fetchRemoteStorage`,
//! and the exclude-nodes file. Files are edited while the server runs; the tests poll for the
//! coordinator to follow, with a deadline that only guards against hangs.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::Path;
use std::time::{Duration, SystemTime};

use spillway::config::Config;
use spillway::coordinator::{AccessCheckerKind, ClientConfFormat, HostStrategy, PartitionStrategy};
use spillway::proto::coordinator_server_client::CoordinatorServerClient;
use spillway::proto::{self, ServerStatus, StatusCode};
use tonic::transport::Channel;

use common::{status_of, TestServer};

type Coord = CoordinatorServerClient<Channel>;

const GIB: i64 = 1 << 30;

/// Files are polled this often, so edits show up quickly.
const POLL: Duration = Duration::from_millis(50);

async fn start_coordinator(tweak: impl FnOnce(&mut Config)) -> (TestServer, Coord) {
    let server = common::start(1, |c| {
        c.coordinator.enabled = true;
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

/// A 0.10 server's heartbeat from `ip`, with `available` of `available + used` memory free.
fn heartbeat(
    id: &str,
    ip: &str,
    available: i64,
    used: i64,
) -> proto::ShuffleServerHeartBeatRequest {
    proto::ShuffleServerHeartBeatRequest {
        server_id: Some(proto::ShuffleServerId {
            id: id.into(),
            ip: ip.into(),
            port: 20000,
            netty_port: -1,
            jetty_port: 0,
        }),
        used_memory: used,
        available_memory: available,
        tags: vec!["ss_v5".into()],
        status: Some(ServerStatus::Active as i32),
        ..Default::default()
    }
}

async fn beat(client: &mut Coord, req: proto::ShuffleServerHeartBeatRequest) {
    let resp = client.heartbeat(req).await.unwrap().into_inner();
    assert_eq!(status_of(resp.status), StatusCode::Success);
}

fn request(
    app: &str,
    partitions: i32,
    replica: i32,
    servers: i32,
) -> proto::GetShuffleServerRequest {
    proto::GetShuffleServerRequest {
        application_id: app.into(),
        partition_num: partitions,
        partition_num_per_range: 1,
        data_replica: replica,
        require_tags: vec!["ss_v5".into()],
        assignment_shuffle_server_number: servers,
        ..Default::default()
    }
}

/// The replicas of each partition, by server id, asserting SUCCESS.
async fn layout(client: &mut Coord, req: proto::GetShuffleServerRequest) -> Vec<Vec<String>> {
    let resp = client
        .get_shuffle_assignments(req)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
    resp.assignments
        .iter()
        .map(|a| a.server.iter().map(|s| s.id.clone()).collect())
        .collect()
}

fn used(layout: &[Vec<String>]) -> BTreeSet<String> {
    layout.iter().flatten().cloned().collect()
}

/// Writes `text` to `path` and moves its modification time forward, so a change is seen
/// whatever the file system's timestamp granularity.
fn write_file(path: &Path, text: &str) {
    static BUMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    std::fs::write(path, text).unwrap();
    let step = BUMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() + Duration::from_secs(step))
        .unwrap();
}

/// Polls `check` until it returns true; the deadline only guards against hangs.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn prefer_diff_spreads_over_hosts_and_continuous_keeps_neighbours_together() {
    let (server, mut client) = start_coordinator(|c| {
        assert_eq!(
            c.coordinator.assignment_host_strategy,
            HostStrategy::PreferDiff,
            "Java's default"
        );
        assert_eq!(
            c.coordinator.select_partition_strategy,
            PartitionStrategy::Continuous,
            "Java's default"
        );
    })
    .await;
    // a1/a2 share a host and have the most memory; b1 and c1 are on their own hosts.
    beat(&mut client, heartbeat("a1", "10.0.0.1", 8 * GIB, 0)).await;
    beat(&mut client, heartbeat("a2", "10.0.0.1", 7 * GIB, 0)).await;
    beat(&mut client, heartbeat("b1", "10.0.0.2", 6 * GIB, 0)).await;
    beat(&mut client, heartbeat("c1", "10.0.0.3", 5 * GIB, 0)).await;

    // Three servers: one per host, though a2 outranks b1 and c1 by memory.
    let l = layout(&mut client, request("app1", 6, 1, 3)).await;
    assert_eq!(
        used(&l),
        BTreeSet::from(["a1".into(), "b1".into(), "c1".into()])
    );
    // Four servers: the fourth comes from a shared host.
    let l = layout(&mut client, request("app2", 8, 1, 4)).await;
    assert_eq!(used(&l).len(), 4);

    // estimateTaskConcurrency 6 over 3 servers: pairs of adjacent partitions per server,
    // replica r on the next server (Java's CONTINUOUS).
    let req = proto::GetShuffleServerRequest {
        estimate_task_concurrency: 6,
        ..request("app3", 6, 2, 3)
    };
    let l = layout(&mut client, req).await;
    assert_eq!(l.len(), 6);
    for pair in l.chunks(2) {
        assert_eq!(pair[0], pair[1], "adjacent partitions share servers: {l:?}");
    }
    let primaries: BTreeSet<&String> = l.iter().map(|r| &r[0]).collect();
    assert_eq!(primaries.len(), 3);
    for replicas in &l {
        assert_ne!(replicas[0], replicas[1]);
    }
    server.running.shutdown().await;
}

#[tokio::test]
async fn must_diff_and_round_via_config() {
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.assignment_host_strategy = HostStrategy::MustDiff;
        c.coordinator.select_partition_strategy = PartitionStrategy::Round;
    })
    .await;
    beat(&mut client, heartbeat("a1", "10.0.0.1", 8 * GIB, 0)).await;
    beat(&mut client, heartbeat("a2", "10.0.0.1", 7 * GIB, 0)).await;
    beat(&mut client, heartbeat("b1", "10.0.0.2", 6 * GIB, 0)).await;
    // Four wanted, two hosts: MUST_DIFF gives two, ROUND alternates them.
    let l = layout(&mut client, request("app", 4, 1, 4)).await;
    assert_eq!(l, [["a1"], ["b1"], ["a1"], ["b1"]]);
    // Three replicas cannot be on distinct hosts.
    let resp = client
        .get_shuffle_assignments(request("app", 4, 3, 4))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(resp.status), StatusCode::InternalError);
    assert!(
        resp.ret_msg
            .starts_with("There isn't enough shuffle servers"),
        "{}",
        resp.ret_msg
    );
    server.running.shutdown().await;
}

async fn access(
    client: &mut Coord,
    access_id: &str,
    user: &str,
    properties: &[(&str, &str)],
) -> proto::AccessClusterResponse {
    client
        .access_cluster(proto::AccessClusterRequest {
            access_id: access_id.into(),
            tags: vec!["ss_v5".into()],
            user: user.into(),
            extra_properties: properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<HashMap<_, _>>(),
        })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn cluster_load_checker_denies_with_javas_message() {
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.access_checkers = vec![AccessCheckerKind::ClusterLoad];
        c.coordinator.shuffle_server_number = 3;
    })
    .await;
    beat(&mut client, heartbeat("a", "10.0.0.1", 50, 50)).await;
    beat(&mut client, heartbeat("b", "10.0.0.2", 10, 90)).await; // 10 % free: not available

    let resp = access(&mut client, "queue", "alice", &[]).await;
    assert_eq!(status_of(resp.status), StatusCode::AccessDenied);
    assert_eq!(resp.uuid, "");
    assert_eq!(
        resp.ret_msg,
        "Denied by AccessClusterLoadChecker accessInfo[AccessInfo{accessId='queue', user= alice, \
         tags=[ss_v5], extraProperties={}}], total 2 nodes, 1 available nodes, memory percent \
         threshold 15.0, available num threshold -1."
    );
    // The client may ask for fewer servers than shuffle_server_number.
    let resp = access(
        &mut client,
        "queue",
        "alice",
        &[("access_info_required_shuffle_nodes_num", "1")],
    )
    .await;
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
    assert_eq!(resp.ret_msg, "SUCCESS");
    assert!(!resp.uuid.is_empty());
    // A third healthy server meets the default.
    beat(&mut client, heartbeat("c", "10.0.0.3", 80, 20)).await;
    beat(&mut client, heartbeat("b", "10.0.0.2", 90, 10)).await;
    let resp = access(&mut client, "queue", "alice", &[]).await;
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
    server.running.shutdown().await;
}

#[tokio::test]
async fn quota_and_candidates_follow_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let quota = dir.path().join("quota");
    let candidates = dir.path().join("candidates");
    write_file(&quota, "# per-user app limits\nalice = 1\n");
    write_file(&candidates, "queue_a\nqueue_b\n");
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.access_checkers =
            vec![AccessCheckerKind::Candidates, AccessCheckerKind::Quota];
        c.coordinator.quota_default_app_num = 2;
        c.coordinator.quota_path = Some(quota.clone());
        c.coordinator.quota_update_interval = POLL * 2;
        c.coordinator.access_candidates_path = Some(candidates.clone());
        c.coordinator.access_candidates_update_interval = POLL;
    })
    .await;

    let resp = access(&mut client, "queue_c", "alice", &[]).await;
    assert_eq!(status_of(resp.status), StatusCode::AccessDenied);
    assert_eq!(
        resp.ret_msg,
        "Denied by AccessCandidatesChecker, accessInfo[AccessInfo{accessId='queue_c', user= \
         alice, tags=[ss_v5], extraProperties={}}]."
    );

    // alice may run one app: the first admission holds her slot, and the app that registers
    // with the admission's uuid takes it over.
    let first = access(&mut client, "queue_a", "alice", &[]).await;
    assert_eq!(
        status_of(first.status),
        StatusCode::Success,
        "{}",
        first.ret_msg
    );
    client
        .register_application_info(proto::ApplicationInfoRequest {
            app_id: format!("spark-1_{}", first.uuid),
            user: "alice".into(),
            version: None,
            git_commit_id: None,
        })
        .await
        .unwrap();
    let denied = access(&mut client, "queue_a", "alice", &[]).await;
    assert_eq!(status_of(denied.status), StatusCode::AccessDenied);
    assert!(
        denied.ret_msg.starts_with(
            "Denied by AccessQuotaChecker => User: alice, current app num is: 1, default app \
             num is: 1. We will reject this app[uuid="
        ),
        "{}",
        denied.ret_msg
    );
    // bob is not in the file: the default of 2.
    for _ in 0..2 {
        let ok = access(&mut client, "queue_b", "bob", &[]).await;
        assert_eq!(status_of(ok.status), StatusCode::Success, "{}", ok.ret_msg);
    }
    assert_eq!(
        status_of(access(&mut client, "queue_b", "bob", &[]).await.status),
        StatusCode::AccessDenied
    );

    // Raising alice's limit and listing queue_c take effect without a restart.
    write_file(&quota, "alice = 3\n");
    write_file(&candidates, "queue_c\n");
    until("the new quota and candidates", || {
        let mut client = client.clone();
        async move {
            let resp = access(&mut client, "queue_c", "alice", &[]).await;
            status_of(resp.status) == StatusCode::Success
        }
    })
    .await;
    // queue_a is no longer a candidate.
    let resp = access(&mut client, "queue_a", "alice", &[]).await;
    assert_eq!(status_of(resp.status), StatusCode::AccessDenied);
    assert!(resp
        .ret_msg
        .starts_with("Denied by AccessCandidatesChecker"));
    server.running.shutdown().await;
}

fn items(resp: proto::FetchClientConfResponse) -> BTreeMap<String, String> {
    assert_eq!(status_of(resp.status), StatusCode::Success);
    resp.client_conf
        .into_iter()
        .map(|i| (i.key, i.value))
        .collect()
}

async fn remote(client: &mut Coord, app: &str) -> proto::RemoteStorage {
    let resp = client
        .fetch_remote_storage(proto::FetchRemoteStorageRequest { app_id: app.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(resp.status), StatusCode::Success);
    resp.remote_storage.unwrap_or_default()
}

fn conf_of(storage: &proto::RemoteStorage) -> BTreeMap<String, String> {
    storage
        .remote_storage_conf
        .iter()
        .map(|i| (i.key.clone(), i.value.clone()))
        .collect()
}

#[tokio::test]
async fn dynamic_client_conf_reloads_and_sets_the_remote_storage() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dynamic_client.conf");
    write_file(
        &file,
        "spark.rss.storage.type MEMORY_LOCALFILE_HDFS\n\
         spark.rss.writer.buffer.size 4m\n\
         rss.coordinator.remote.storage.path hdfs://ns1/rss,hdfs://ns2/rss\n\
         rss.coordinator.remote.storage.cluster.conf ns2,dfs.replication=2,k=v\n",
    );
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.client_conf = BTreeMap::from([
            ("spark.rss.writer.buffer.size".into(), "1m".into()),
            ("only.static".into(), "s".into()),
        ]);
        c.coordinator.dynamic_client_conf_enabled = true;
        c.coordinator.dynamic_client_conf_path = Some(file.clone());
        c.coordinator.dynamic_client_conf_update_interval = POLL;
    })
    .await;

    let expected = BTreeMap::from([
        ("only.static".to_string(), "s".to_string()),
        (
            "spark.rss.storage.type".to_string(),
            "MEMORY_LOCALFILE_HDFS".to_string(),
        ),
        ("spark.rss.writer.buffer.size".to_string(), "4m".to_string()),
    ]);
    assert_eq!(
        items(client.fetch_client_conf(()).await.unwrap().into_inner()),
        expected
    );
    // fetchClientConfV2: the same for every user and property set, as Java's default strategy.
    for user in ["alice", "bob"] {
        let v2 = client
            .fetch_client_conf_v2(proto::FetchClientConfRequest {
                user: user.into(),
                properties: HashMap::from([("spark.app.name".to_string(), "x".to_string())]),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(items(v2), expected);
    }

    // APP_BALANCE: apps alternate over the paths, each with its cluster's conf, and keep
    // their path.
    let a = remote(&mut client, "app_a").await;
    let b = remote(&mut client, "app_b").await;
    assert_eq!(a.path, "hdfs://ns1/rss");
    assert!(a.remote_storage_conf.is_empty());
    assert_eq!(b.path, "hdfs://ns2/rss");
    assert_eq!(
        conf_of(&b),
        BTreeMap::from([
            ("dfs.replication".into(), "2".into()),
            ("k".into(), "v".into())
        ])
    );
    assert_eq!(remote(&mut client, "app_c").await.path, "hdfs://ns1/rss");
    assert_eq!(remote(&mut client, "app_a").await.path, "hdfs://ns1/rss");
    assert_eq!(
        server
            .running
            .coordinator()
            .unwrap()
            .remote_storage_counts(),
        BTreeMap::from([("hdfs://ns1/rss".into(), 2), ("hdfs://ns2/rss".into(), 1)])
    );

    // The operator edits the file: new items, one path.
    write_file(
        &file,
        "spark.rss.storage.type MEMORY_LOCALFILE\n\
         rss.coordinator.remote.storage.path hdfs://ns3/rss\n",
    );
    until("the new client conf", || {
        let mut client = client.clone();
        async move {
            let got = items(client.fetch_client_conf(()).await.unwrap().into_inner());
            got.get("spark.rss.storage.type").map(String::as_str) == Some("MEMORY_LOCALFILE")
        }
    })
    .await;
    assert_eq!(
        items(client.fetch_client_conf(()).await.unwrap().into_inner())
            ["spark.rss.writer.buffer.size"],
        "1m",
        "the static item is back once the file drops its own"
    );
    assert_eq!(remote(&mut client, "app_d").await.path, "hdfs://ns3/rss");
    assert_eq!(
        remote(&mut client, "app_b").await.path,
        "hdfs://ns2/rss",
        "apps keep theirs"
    );
    server.running.shutdown().await;
}

async fn fetch(client: &mut Coord) -> proto::FetchClientConfResponse {
    client.fetch_client_conf(()).await.unwrap().into_inner()
}

async fn fetch_v2(client: &mut Coord, user: &str) -> proto::FetchClientConfResponse {
    client
        .fetch_client_conf_v2(proto::FetchClientConfRequest {
            user: user.into(),
            properties: HashMap::from([("spark.app.name".to_string(), "x".to_string())]),
        })
        .await
        .unwrap()
        .into_inner()
}

fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Java's YAML format: items typed as SnakeYAML types them, each remote path with its own
/// conf (a mapping or a Hadoop XML string); a file that never parsed answers an error, and an
/// invalid edit keeps the last good conf until the file parses again.
#[tokio::test]
async fn yaml_client_conf_reloads_and_keeps_the_last_good_conf() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dynamic_client.yaml");
    write_file(&file, "rssClientConf: [not, a, mapping]\n");
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.client_conf = BTreeMap::from([("only.static".into(), "s".into())]);
        c.coordinator.remote_storage_path = Some("hdfs://static/rss".into());
        c.coordinator.dynamic_client_conf_enabled = true;
        c.coordinator.dynamic_client_conf_path = Some(file.clone());
        c.coordinator.dynamic_client_conf_parser = ClientConfFormat::Yaml;
        c.coordinator.dynamic_client_conf_update_interval = POLL;
    })
    .await;
    let coordinator = server.running.coordinator().unwrap();

    // Invalid since start-up: no conf to serve yet, said as an error status.
    let resp = fetch(&mut client).await;
    assert_eq!(status_of(resp.status), StatusCode::InternalError);
    assert!(
        resp.ret_msg.contains("dynamic_client.yaml"),
        "{}",
        resp.ret_msg
    );
    assert!(resp.client_conf.is_empty());
    assert_eq!(
        status_of(fetch_v2(&mut client, "alice").await.status),
        StatusCode::InternalError
    );
    assert!(coordinator.client_conf_rejected() >= 1);
    assert_eq!(remote(&mut client, "app_0").await.path, "hdfs://static/rss");

    write_file(
        &file,
        "rssClientConf:\n\
         \x20 spark.rss.storage.type: MEMORY_LOCALFILE_HDFS\n\
         \x20 rss.client.retry.max: 100\n\
         \x20 rss.client.remote.storage.useLocalConfAsDefault: yes\n\
         remoteStorageInfos:\n\
         \x20 hdfs://ns1/rss:\n\
         \x20   dfs.replication: 2\n\
         \x20 hdfs://ns2/rss: |\n\
         \x20   <configuration>\n\
         \x20     <property><name>dfs.nameservices</name><value>ns2</value></property>\n\
         \x20   </configuration>\n",
    );
    let expected = strings(&[
        ("only.static", "s"),
        ("rss.client.remote.storage.useLocalConfAsDefault", "true"),
        ("rss.client.retry.max", "100"),
        ("spark.rss.storage.type", "MEMORY_LOCALFILE_HDFS"),
    ]);
    until("the YAML client conf", || {
        let mut client = client.clone();
        async move { status_of(fetch(&mut client).await.status) == StatusCode::Success }
    })
    .await;
    assert_eq!(items(fetch(&mut client).await), expected);
    for user in ["alice", "bob"] {
        assert_eq!(items(fetch_v2(&mut client, user).await), expected);
    }
    // The file's paths replace `remote_storage_path`, each with its own conf.
    let a = remote(&mut client, "app_a").await;
    let b = remote(&mut client, "app_b").await;
    assert_eq!(a.path, "hdfs://ns1/rss");
    assert_eq!(conf_of(&a), strings(&[("dfs.replication", "2")]));
    assert_eq!(b.path, "hdfs://ns2/rss");
    assert_eq!(conf_of(&b), strings(&[("dfs.nameservices", "ns2")]));

    // An invalid edit: once the coordinator has read it, the last good conf still answers.
    let rejected = coordinator.client_conf_rejected();
    write_file(&file, "rssClientConf:\n  k: [unclosed\n");
    until("the invalid edit to be read", || {
        let rejected_now = coordinator.client_conf_rejected();
        async move { rejected_now > rejected }
    })
    .await;
    assert_eq!(items(fetch(&mut client).await), expected);
    assert_eq!(remote(&mut client, "app_c").await.path, "hdfs://ns1/rss");

    // Fixed again: the new conf replaces it.
    write_file(
        &file,
        "rssClientConf:\n  spark.rss.storage.type: MEMORY_LOCALFILE\n",
    );
    until("the fixed YAML client conf", || {
        let mut client = client.clone();
        async move {
            items(fetch(&mut client).await)
                .get("spark.rss.storage.type")
                .map(String::as_str)
                == Some("MEMORY_LOCALFILE")
        }
    })
    .await;
    assert_eq!(
        items(fetch(&mut client).await),
        strings(&[
            ("only.static", "s"),
            ("spark.rss.storage.type", "MEMORY_LOCALFILE")
        ])
    );
    // No `remoteStorageInfos`: `remote_storage_path` is back for new apps.
    assert_eq!(remote(&mut client, "app_d").await.path, "hdfs://static/rss");
    assert_eq!(remote(&mut client, "app_a").await.path, "hdfs://ns1/rss");
    server.running.shutdown().await;
}

/// MIXED is Java's LEGACY-then-YAML chain, in which LEGACY accepts every file: `key value`
/// lines are read as LEGACY reads them, and so is a YAML file.
#[tokio::test]
async fn mixed_client_conf_reads_files_as_legacy_like_java() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dynamic_client.conf");
    write_file(
        &file,
        "spark.rss.storage.type MEMORY_LOCALFILE_HDFS\n\
         rss.coordinator.remote.storage.path hdfs://ns1/rss\n",
    );
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.dynamic_client_conf_enabled = true;
        c.coordinator.dynamic_client_conf_path = Some(file.clone());
        c.coordinator.dynamic_client_conf_parser = ClientConfFormat::Mixed;
        c.coordinator.dynamic_client_conf_update_interval = POLL;
    })
    .await;
    assert_eq!(
        items(fetch(&mut client).await),
        strings(&[("spark.rss.storage.type", "MEMORY_LOCALFILE_HDFS")])
    );
    assert_eq!(remote(&mut client, "app_a").await.path, "hdfs://ns1/rss");

    write_file(
        &file,
        "rssClientConf:\n  spark.rss.storage.type: MEMORY_LOCALFILE\n",
    );
    until("the edited file", || {
        let mut client = client.clone();
        async move { !items(fetch(&mut client).await).contains_key("spark.rss.storage.type") }
    })
    .await;
    assert_eq!(
        items(fetch_v2(&mut client, "alice").await),
        strings(&[("spark.rss.storage.type:", "MEMORY_LOCALFILE")])
    );
    assert_eq!(
        server.running.coordinator().unwrap().client_conf_rejected(),
        0
    );
    server.running.shutdown().await;
}

#[tokio::test]
async fn remote_storage_paths_and_cluster_conf_from_toml() {
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.remote_storage_path = Some("hdfs://ns1/rss,hdfs://ns2:8020/rss".into());
        c.coordinator.remote_storage_cluster_conf = BTreeMap::from([(
            "ns1".into(),
            BTreeMap::from([("dfs.client.use.datanode.hostname".into(), "true".into())]),
        )]);
    })
    .await;
    let a = remote(&mut client, "a").await;
    assert_eq!(a.path, "hdfs://ns1/rss");
    assert_eq!(conf_of(&a)["dfs.client.use.datanode.hostname"], "true");
    let b = remote(&mut client, "b").await;
    assert_eq!(b.path, "hdfs://ns2:8020/rss");
    assert!(b.remote_storage_conf.is_empty());
    server.running.shutdown().await;
}

#[tokio::test]
async fn excluded_nodes_follow_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("exclude_nodes");
    write_file(&file, "# drained for maintenance\nb\n");
    let (server, mut client) = start_coordinator(|c| {
        c.coordinator.exclude_nodes_file_path = Some(file.clone());
        c.coordinator.exclude_nodes_check_interval = POLL;
        c.coordinator.access_checkers = vec![AccessCheckerKind::ClusterLoad];
        c.coordinator.access_load_server_num_threshold = Some(3);
    })
    .await;
    for (id, ip) in [("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3")] {
        beat(&mut client, heartbeat(id, ip, GIB, 0)).await;
    }
    let coordinator = server.running.coordinator().unwrap().clone();
    assert!(coordinator.is_excluded("b"));
    let l = layout(&mut client, request("app", 12, 1, -1)).await;
    assert_eq!(used(&l), BTreeSet::from(["a".into(), "c".into()]));
    // Excluded servers do not count as available either.
    let resp = access(&mut client, "q", "u", &[]).await;
    assert_eq!(status_of(resp.status), StatusCode::AccessDenied);
    assert!(
        resp.ret_msg.contains("total 2 nodes, 2 available nodes"),
        "{}",
        resp.ret_msg
    );

    write_file(&file, "c\n");
    until("c excluded and b back", || {
        let coordinator = coordinator.clone();
        async move { coordinator.is_excluded("c") && !coordinator.is_excluded("b") }
    })
    .await;
    let l = layout(&mut client, request("app", 12, 1, -1)).await;
    assert_eq!(used(&l), BTreeSet::from(["a".into(), "b".into()]));

    // Removing the file excludes nothing, as in Java.
    std::fs::remove_file(&file).unwrap();
    until("no exclusions", || {
        let coordinator = coordinator.clone();
        async move { !coordinator.is_excluded("c") }
    })
    .await;
    let l = layout(&mut client, request("app", 12, 1, -1)).await;
    assert_eq!(used(&l).len(), 3);
    let resp = access(&mut client, "q", "u", &[]).await;
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
    server.running.shutdown().await;
}

#[tokio::test]
async fn start_fails_like_java_on_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::test_config(&[tempfile::tempdir().unwrap()]);
    config.coordinator.enabled = true;
    config.coordinator.register_self = false;
    config.coordinator.dynamic_client_conf_enabled = true;
    config.coordinator.dynamic_client_conf_path = Some(dir.path().join("absent.conf"));
    let err = spillway::server::start(config.clone())
        .await
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("coordinator.dynamic_client_conf_path"),
        "{err}"
    );

    let empty = dir.path().join("candidates");
    write_file(&empty, "\n");
    config.coordinator.dynamic_client_conf_enabled = false;
    config.coordinator.access_checkers = vec![AccessCheckerKind::Candidates];
    config.coordinator.access_candidates_path = Some(empty);
    let err = spillway::server::start(config)
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("lists no candidate"), "{err}");
}
