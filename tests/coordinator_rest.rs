//! The Java coordinator's REST API against a live cluster: Spillway A runs the embedded
//! coordinator and heartbeats to itself, Spillway B heartbeats to A. Apps are registered through
//! real gRPC clients; every endpoint is called over HTTP and its JSON compared field by field
//! with what the Java resources and VOs produce. Decommission goes from A's REST API to B over
//! `ShuffleServerInternal`, and the coordinator stops assigning B.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use spillway::proto::coordinator_server_client::CoordinatorServerClient;
use spillway::proto::{self, StatusCode};
use tonic::transport::Channel;

use common::{status_of, TestServer};

type Coord = CoordinatorServerClient<Channel>;

const BEAT: Duration = Duration::from_millis(100);

/// `Response.java` (common/web/resource): `code`, `data`, `errMsg` (from `getErrMsg`).
const ENVELOPE: [&str; 3] = ["code", "data", "errMsg"];

/// Jackson's view of `ServerNode` (apache/uniffle coordinator/.../ServerNode.java: one field per
/// public getter; `appIdToInfos` is `@JsonIgnore`).
const SERVER_NODE: [&str; 19] = [
    "availableMemory",
    "displayMetrics",
    "eventNumInFlush",
    "gitCommitId",
    "grpcPort",
    "id",
    "ip",
    "jettyPort",
    "nettyPort",
    "preAllocatedMemory",
    "registrationTime",
    "startTime",
    "status",
    "storageInfo",
    "tags",
    "timestamp",
    "totalMemory",
    "usedMemory",
    "version",
];

/// `StorageInfo.java` (common/storage): Jackson sees the getters `getStatus`, `getType`,
/// `getUsedBytes` only.
const STORAGE_INFO: [&str; 3] = ["status", "type", "usedBytes"];

/// `AppInfoVO.java` (coordinator/web/vo).
const APP_INFO_VO: [&str; 13] = [
    "appId",
    "gitCommitId",
    "hadoopFileNum",
    "hadoopTotalSize",
    "localFileNum",
    "localTotalSize",
    "memorySize",
    "partitionNum",
    "registrationTime",
    "totalSize",
    "updateTime",
    "userName",
    "version",
];

/// `UserAppNumVO.java` (coordinator/web/vo).
const USER_APP_NUM_VO: [&str; 2] = ["appNum", "userName"];

/// `Application.java` (common): its getters.
const APPLICATION: [&str; 5] = [
    "applicationId",
    "lastHeartBeatTime",
    "registerTime",
    "remoteStoragePath",
    "user",
];

/// `CoordinatorServerResource.getCoordinatorInfo` map keys.
const COORDINATOR_INFO: [&str; 7] = [
    "coordinatorId",
    "gitCommitId",
    "serverIp",
    "serverPort",
    "serverWebPort",
    "startTime",
    "version",
];

/// `CoordinatorConfVO.java` (coordinator/web/vo).
const CONF_VO: [&str; 2] = ["argumentKey", "argumentValue"];

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

fn assert_shape(v: &Value, expected: &[&str], what: &str) {
    assert_eq!(
        keys(v),
        expected.iter().copied().collect::<BTreeSet<_>>(),
        "{what}: {v}"
    );
}

struct Http {
    client: reqwest::Client,
    base: String,
}

impl Http {
    fn new(s: &TestServer) -> Self {
        Http {
            client: reqwest::Client::new(),
            base: format!("http://{}", s.running.http_addr),
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, String) {
        let resp = req.send().await.expect("HTTP call");
        let code = resp.status().as_u16();
        (code, resp.text().await.unwrap())
    }

    async fn raw_get(&self, path: &str) -> (u16, String) {
        self.send(self.client.get(format!("{}{path}", self.base)))
            .await
    }

    /// A call answered with Java's envelope: checks its shape and HTTP 200, returns it.
    async fn envelope(&self, req: reqwest::RequestBuilder) -> Value {
        let (code, body) = self.send(req).await;
        assert_eq!(code, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_shape(&v, &ENVELOPE, "envelope");
        v
    }

    /// GET with a success envelope; returns `data`.
    async fn get(&self, path: &str) -> Value {
        let v = self
            .envelope(self.client.get(format!("{}{path}", self.base)))
            .await;
        assert_eq!(v["code"], 0, "{path}: {v}");
        assert_eq!(v["errMsg"], "success");
        v["data"].clone()
    }

    async fn post(&self, path: &str, body: &str) -> Value {
        self.envelope(
            self.client
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .body(body.to_owned()),
        )
        .await
    }
}

async fn coordinator_client(s: &TestServer) -> Coord {
    let channel = Channel::from_shared(format!("http://{}", s.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    CoordinatorServerClient::new(channel)
}

/// A with the embedded coordinator (heartbeating to itself), B heartbeating to A.
async fn cluster(tweak_a: impl FnOnce(&mut spillway::config::Config)) -> (TestServer, TestServer) {
    let a = common::start(1, |c| {
        c.coordinator.enabled = true;
        c.heartbeat_interval = BEAT;
        tweak_a(c);
    })
    .await;
    let quorum = vec![a.running.grpc_addr.to_string()];
    let b = common::start(1, |c| {
        c.coordinator_quorum = quorum;
        c.heartbeat_interval = BEAT;
    })
    .await;
    let coordinator = a
        .running
        .coordinator()
        .expect("coordinator enabled")
        .clone();
    let (ida, idb) = (a.running.server_id.clone(), b.running.server_id.clone());
    common::eventually("both servers registered", || {
        coordinator.servers().get(&ida).is_some() && coordinator.servers().get(&idb).is_some()
    })
    .await;
    (a, b)
}

/// The server ids a fresh assignment of 8 partitions over every server hands out.
async fn assigned(client: &mut Coord, app: &str) -> BTreeSet<String> {
    let resp = client
        .get_shuffle_assignments(proto::GetShuffleServerRequest {
            application_id: app.into(),
            partition_num: 8,
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

async fn register_app(client: &mut Coord, app: &str, user: &str) {
    let resp = client
        .register_application_info(proto::ApplicationInfoRequest {
            app_id: app.into(),
            user: user.into(),
            version: Some("0.10.0".into()),
            git_commit_id: Some("abc1234".into()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(resp.status), StatusCode::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers_javas_shapes() {
    let (a, b) =
        cluster(|c| c.coordinator.remote_storage_path = Some("hdfs://ns1/rss".into())).await;
    let http = Http::new(&a);
    let mut coord = coordinator_client(&a).await;
    let (ida, idb) = (a.running.server_id.clone(), b.running.server_id.clone());

    register_app(&mut coord, "app_alice_1", "alice").await;
    register_app(&mut coord, "app_alice_2", "alice").await;
    register_app(&mut coord, "app_bob_1", "bob").await;
    // bob's app asks for its remote storage (as a MEMORY_LOCALFILE_HDFS client does); the
    // applications listing then names that path, and null for the others, as Java's.
    let storage = coord
        .fetch_remote_storage(proto::FetchRemoteStorageRequest {
            app_id: "app_bob_1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(storage.remote_storage.unwrap().path, "hdfs://ns1/rss");
    // An app only heard from by heartbeat lands under the user "", as in Java.
    coord
        .app_heartbeat(proto::AppHeartBeatRequest {
            app_id: "app_anon".into(),
        })
        .await
        .unwrap();

    assert_eq!(http.get("/api/server/status").await, "success");

    // Nodes: both servers, sorted by id, Java's ServerNode fields.
    let nodes = http.get("/api/server/nodes").await;
    let list = nodes.as_array().unwrap();
    let ids: Vec<&str> = list.iter().map(|n| n["id"].as_str().unwrap()).collect();
    let mut want = vec![ida.as_str(), idb.as_str()];
    want.sort();
    assert_eq!(ids, want);
    for n in list {
        assert_shape(n, &SERVER_NODE, "ServerNode");
        assert_eq!(n["status"], "ACTIVE");
        assert_eq!(n["ip"], "127.0.0.1");
        assert!(n["tags"].as_array().unwrap().contains(&"ss_v5".into()));
        assert_eq!(
            n["totalMemory"].as_i64().unwrap(),
            n["availableMemory"].as_i64().unwrap() + n["usedMemory"].as_i64().unwrap()
        );
        assert!(n["registrationTime"].as_i64().unwrap() > 0);
        assert!(n["startTime"].as_i64().unwrap() > 0);
        assert!(!n["version"].as_str().unwrap().is_empty());
        let disks = n["storageInfo"].as_object().unwrap();
        assert!(!disks.is_empty(), "{n}");
        for d in disks.values() {
            assert_shape(d, &STORAGE_INFO, "StorageInfo");
            assert_eq!(d["status"], "NORMAL");
        }
    }
    let nb = http.get(&format!("/api/server/nodes/{idb}")).await;
    assert_shape(&nb, &SERVER_NODE, "ServerNode");
    assert_eq!(nb["id"], idb.as_str());
    assert_eq!(
        nb["grpcPort"].as_u64().unwrap(),
        u64::from(b.running.grpc_addr.port())
    );
    assert_eq!(
        nb["jettyPort"].as_u64().unwrap(),
        u64::from(b.running.http_addr.port())
    );
    let missing = http
        .envelope(
            http.client
                .get(format!("{}/api/server/nodes/nope-1", http.base)),
        )
        .await;
    assert_eq!(missing["code"], -1);
    assert_eq!(missing["data"], Value::Null);
    assert_eq!(missing["errMsg"], "Server Id [nope-1] not found!");
    assert_eq!(
        http.get("/api/server/nodes?status=active")
            .await
            .as_array()
            .unwrap()
            .len(),
        2,
        "the status filter ignores case"
    );
    for status in ["UNHEALTHY", "LOST", "EXCLUDED", "DECOMMISSIONED", "bogus"] {
        let got = http
            .get(&format!("/api/server/nodes?status={status}"))
            .await;
        assert_eq!(got, Value::Array(vec![]), "{status}");
    }
    let summary = http.get("/api/server/nodes/summary").await;
    assert_eq!(summary, serde_json::json!({"ACTIVE": 2}));

    // Apps.
    let total = http.get("/api/app/total").await;
    assert_eq!(
        total,
        serde_json::json!({"appCurrent": 4, "appTotality": 4})
    );
    let users = http.get("/api/app/userTotal").await;
    for u in users.as_array().unwrap() {
        assert_shape(u, &USER_APP_NUM_VO, "UserAppNumVO");
    }
    assert_eq!(
        users,
        serde_json::json!([
            {"userName": "alice", "appNum": 2},
            {"userName": "", "appNum": 1},
            {"userName": "bob", "appNum": 1},
        ])
    );
    let infos = http.get("/api/app/appInfos").await;
    let infos = infos.as_array().unwrap();
    assert_eq!(infos.len(), 4);
    for i in infos {
        assert_shape(i, &APP_INFO_VO, "AppInfoVO");
    }
    let times: Vec<i64> = infos
        .iter()
        .map(|i| i["registrationTime"].as_i64().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );
    let bob = infos.iter().find(|i| i["appId"] == "app_bob_1").unwrap();
    assert_eq!(bob["userName"], "bob");
    assert_eq!(bob["version"], "0.10.0");
    assert_eq!(bob["gitCommitId"], "abc1234");

    // Applications: filters and paging as ApplicationManager.getApplications.
    let page = http.post("/api/server/applications", "{}").await;
    assert_eq!(page["code"], 0);
    let apps = page["data"].as_array().unwrap();
    for app in apps {
        assert_shape(app, &APPLICATION, "Application");
    }
    let names: Vec<&str> = apps
        .iter()
        .map(|a| a["applicationId"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["app_alice_1", "app_alice_2", "app_anon", "app_bob_1"]
    );
    assert_eq!(
        apps[0]["remoteStoragePath"],
        Value::Null,
        "alice never asked"
    );
    let last = apps[0]["lastHeartBeatTime"].as_str().unwrap();
    assert_eq!(last.len(), "yyyy-MM-dd HH:mm:ss".len(), "{last}");
    let page = http
        .post(
            "/api/server/applications",
            r#"{"appIdRegex": "app_alice_.*", "pageSize": 1, "currentPage": 2}"#,
        )
        .await;
    assert_eq!(page["data"][0]["applicationId"], "app_alice_2");
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    let page = http
        .post(
            "/api/server/applications",
            r#"{"applications": ["app_bob_1"]}"#,
        )
        .await;
    assert_eq!(page["data"][0]["user"], "bob");
    assert_eq!(page["data"][0]["remoteStoragePath"], "hdfs://ns1/rss");
    // The admin CLI sends the heartbeat range as JSON numbers (ms).
    let page = http
        .post(
            "/api/server/applications",
            r#"{"heartBeatStartTime": 0, "heartBeatEndTime": 4102444800000, "pageSize": 2}"#,
        )
        .await;
    assert_eq!(page["code"], 0, "{page}");
    assert_eq!(page["data"].as_array().unwrap().len(), 2);
    let page = http
        .post(
            "/api/server/applications",
            r#"{"heartBeatStartTime": 4102444800000}"#,
        )
        .await;
    assert_eq!(page["data"], Value::Array(vec![]));
    let empty = http.post("/api/server/applications", "").await;
    assert_eq!(empty["code"], -1);
    assert_eq!(empty["errMsg"], "ApplicationRequest Is not null");

    // Coordinator info and conf.
    let info = http.get("/api/coordinator/info").await;
    assert_shape(&info, &COORDINATOR_INFO, "coordinator info");
    let port = a.running.grpc_addr.port().to_string();
    assert_eq!(info["coordinatorId"], format!("127.0.0.1-{port}"));
    assert_eq!(info["serverPort"], port.as_str());
    assert_eq!(
        info["serverWebPort"],
        a.running.http_addr.port().to_string().as_str()
    );
    let conf = http.get("/api/coordinator/conf").await;
    let conf = conf.as_array().unwrap();
    assert!(!conf.is_empty());
    for item in conf {
        assert_shape(item, &CONF_VO, "CoordinatorConfVO");
    }
    assert!(conf
        .iter()
        .any(|i| i["argumentKey"] == "coordinator.enabled" && i["argumentValue"] == "true"));

    // The admin CLI's refreshAccessChecker: no checker is configured, so nothing to reload.
    assert_eq!(http.get("/api/admin/refreshChecker").await, Value::Null);

    // Java's metrics resource on this path belongs to the coordinator metrics work; a server
    // without the coordinator answers these paths as a Java shuffle server does.
    let (code, _) = Http::new(&b).raw_get("/api/server/nodes").await;
    assert_eq!(code, 404);
    let (code, _) = Http::new(&b).raw_get("/api/coordinator/info").await;
    assert_eq!(code, 404);

    b.running.shutdown().await;
    a.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decommission_through_the_coordinator_reaches_the_other_process() {
    let (a, mut b) = cluster(|_| {}).await;
    let http = Http::new(&a);
    let http_b = Http::new(&b);
    let mut coord = coordinator_client(&a).await;
    let (ida, idb) = (a.running.server_id.clone(), b.running.server_id.clone());
    let coordinator = a.running.coordinator().unwrap().clone();
    let both: BTreeSet<String> = [ida.clone(), idb.clone()].into();
    assert_eq!(assigned(&mut coord, "app_x").await, both);
    // B holds an app, so decommissioning stays in DECOMMISSIONING rather than finishing.
    common::register(&mut b.client, "app_on_b", 0, 0..2, false).await;

    let v = http
        .post(&format!("/api/server/{idb}/decommission"), "")
        .await;
    assert_eq!(
        (v["code"].clone(), v["data"].clone()),
        (0.into(), Value::Null),
        "{v}"
    );
    // B's own view: its status JSON.
    let (_, status_b) = http_b.raw_get("/status").await;
    let status_b: Value = serde_json::from_str(&status_b).unwrap();
    assert_eq!(status_b["status"], "DECOMMISSIONING");
    // The coordinator learns it from B's next heartbeat and stops assigning B.
    let idb2 = idb.clone();
    common::eventually("B reported DECOMMISSIONING", || {
        coordinator
            .servers()
            .get(&idb2)
            .is_some_and(|n| n.status == proto::ServerStatus::Decommissioning)
    })
    .await;
    assert_eq!(
        http.get(&format!("/api/server/nodes/{idb}")).await["status"],
        "DECOMMISSIONING"
    );
    assert_eq!(
        http.get("/api/server/nodes/summary").await,
        serde_json::json!({"ACTIVE": 1, "DECOMMISSIONING": 1})
    );
    assert_eq!(assigned(&mut coord, "app_y").await, [ida.clone()].into());

    // Cancel, in batch form: B is ACTIVE again and assigned again.
    let v = http
        .post(
            "/api/server/cancelDecommission",
            &format!(r#"{{"serverIds": ["{idb}"]}}"#),
        )
        .await;
    assert_eq!(v["code"], 0, "{v}");
    let (_, status_b) = http_b.raw_get("/status").await;
    assert!(status_b.contains("\"ACTIVE\""), "{status_b}");
    let idb2 = idb.clone();
    common::eventually("B reported ACTIVE", || {
        coordinator
            .servers()
            .get(&idb2)
            .is_some_and(|n| n.status == proto::ServerStatus::Active)
    })
    .await;
    assert_eq!(assigned(&mut coord, "app_z").await, both);

    // Batch decommission, then the single-server cancel.
    let v = http
        .post(
            "/api/server/decommission",
            &format!(r#"{{"serverIds": ["{idb}"]}}"#),
        )
        .await;
    assert_eq!(v["code"], 0, "{v}");
    let (_, status_b) = http_b.raw_get("/status").await;
    assert!(status_b.contains("DECOMMISSIONING"), "{status_b}");
    let v = http
        .post(&format!("/api/server/{idb}/cancelDecommission"), "")
        .await;
    assert_eq!(v["code"], 0, "{v}");
    let (_, status_b) = http_b.raw_get("/status").await;
    assert!(status_b.contains("\"ACTIVE\""), "{status_b}");

    // Java's refusals: no ids, an unknown id (the batch stops there).
    let v = http
        .post("/api/server/decommission", r#"{"serverIds": []}"#)
        .await;
    assert_eq!(
        (v["code"].clone(), v["errMsg"].clone()),
        (
            (-1).into(),
            "Parameter[serverIds] should not be empty!".into()
        )
    );
    let v = http.post("/api/server/cancelDecommission", "").await;
    assert_eq!(v["errMsg"], "Parameter[serverIds] should not be empty!");
    let v = http.post("/api/server/nope-1/decommission", "").await;
    assert_eq!(
        (v["code"].clone(), v["errMsg"].clone()),
        ((-1).into(), "Server Id [nope-1] not found!".into())
    );

    b.running.shutdown().await;
    a.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excluded_servers_are_not_assigned_until_removed() {
    let (a, b) = cluster(|_| {}).await;
    let http = Http::new(&a);
    let mut coord = coordinator_client(&a).await;
    let (ida, idb) = (a.running.server_id.clone(), b.running.server_id.clone());
    let both: BTreeSet<String> = [ida.clone(), idb.clone()].into();
    assert_eq!(assigned(&mut coord, "app_1").await, both);

    let body = format!(r#"{{"excludeNodes": ["{idb}"]}}"#);
    let v = http.post("/api/server/addExcludeNodes", &body).await;
    assert_eq!(
        (v["code"].clone(), v["data"].clone()),
        (0.into(), "success".into())
    );
    assert_eq!(assigned(&mut coord, "app_2").await, [ida.clone()].into());
    let excluded = http.get("/api/server/nodes?status=EXCLUDED").await;
    assert_eq!(excluded.as_array().unwrap().len(), 1);
    let e = &excluded[0];
    assert_shape(e, &SERVER_NODE, "excluded ServerNode");
    assert_eq!(
        (
            e["id"].as_str().unwrap(),
            e["status"].as_str().unwrap(),
            e["ip"].as_str().unwrap()
        ),
        (idb.as_str(), "EXCLUDED", "")
    );
    let listed = http.get("/api/server/nodes").await;
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "excluded servers leave the list"
    );
    assert_eq!(listed[0]["id"], ida.as_str());
    assert_eq!(
        http.get("/api/server/nodes/summary").await,
        serde_json::json!({"ACTIVE": 1, "EXCLUDED": 1})
    );
    // Still reachable by id, as Java's getServerNodeById.
    assert_eq!(
        http.get(&format!("/api/server/nodes/{idb}")).await["status"],
        "ACTIVE"
    );

    let v = http.post("/api/server/removeExcludeNodes", &body).await;
    assert_eq!(v["data"], "success");
    assert_eq!(assigned(&mut coord, "app_3").await, both);
    assert_eq!(
        http.get("/api/server/nodes?status=EXCLUDED").await,
        Value::Array(vec![])
    );

    // Without the list, Java fails with a bare 500.
    let (code, _) = http
        .send(
            http.client
                .post(format!("{}/api/server/addExcludeNodes", http.base))
                .header("content-type", "application/json")
                .body("{}"),
        )
        .await;
    assert_eq!(code, 500);

    b.running.shutdown().await;
    a.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_servers_are_listed_until_deleted() {
    let a = common::start(1, |c| {
        c.coordinator.enabled = true;
        c.coordinator.register_self = false;
        c.coordinator.server_heartbeat_timeout = Duration::from_millis(300);
    })
    .await;
    let http = Http::new(&a);
    let mut coord = coordinator_client(&a).await;
    coord
        .heartbeat(proto::ShuffleServerHeartBeatRequest {
            server_id: Some(proto::ShuffleServerId {
                id: "10.0.0.9-19999".into(),
                ip: "10.0.0.9".into(),
                port: 19999,
                netty_port: 0,
                jetty_port: 19998,
            }),
            available_memory: 1 << 30,
            tags: vec!["ss_v5".into()],
            status: Some(proto::ServerStatus::Unhealthy as i32),
            ..Default::default()
        })
        .await
        .unwrap();
    let unhealthy = http.get("/api/server/nodes?status=unhealthy").await;
    assert_eq!(unhealthy[0]["id"], "10.0.0.9-19999");
    assert_eq!(
        unhealthy[0]["nettyPort"], -1,
        "Java keeps -1 for a port <= 0"
    );
    assert_eq!(
        http.get("/api/server/nodes/summary").await,
        serde_json::json!({"UNHEALTHY": 1})
    );
    // Deleting a live server is refused.
    let v = http
        .envelope(http.client.delete(format!(
            "{}/api/server/deleteServer?serverId=10.0.0.9-19999",
            http.base
        )))
        .await;
    assert_eq!(
        (v["code"].clone(), v["errMsg"].clone()),
        ((-1).into(), "fail".into())
    );

    let coordinator = a.running.coordinator().unwrap().clone();
    common::eventually("the silent server is lost", || {
        coordinator.servers().lost().len() == 1
    })
    .await;
    let lost = http.get("/api/server/nodes?status=LOST").await;
    assert_eq!(lost[0]["status"], "LOST");
    assert_shape(&lost[0], &SERVER_NODE, "lost ServerNode");
    assert_eq!(
        http.get("/api/server/nodes/summary").await,
        serde_json::json!({"LOST": 1})
    );
    let v = http
        .envelope(http.client.delete(format!(
            "{}/api/server/deleteServer?serverId=10.0.0.9-19999",
            http.base
        )))
        .await;
    assert_eq!(
        (v["code"].clone(), v["data"].clone()),
        (0.into(), "success".into())
    );
    assert_eq!(
        http.get("/api/server/nodes?status=LOST").await,
        Value::Array(vec![])
    );
    a.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decommission_needs_basic_credentials_where_java_asks_for_them() {
    let credentials = "dXNlcjpzZWNyZXQ=";
    let a = common::start(1, |c| {
        c.coordinator.enabled = true;
        c.heartbeat_interval = BEAT;
        c.metrics.basic_credentials = Some(spillway::config::Secret(credentials.into()));
    })
    .await;
    let http = Http::new(&a);
    let url = |p: &str| format!("{}{p}", http.base);
    for path in [
        "/api/server/decommission",
        "/api/server/cancelDecommission",
        "/api/server/x-1/decommission",
        "/api/server/x-1/cancelDecommission",
    ] {
        let (code, body) = http.send(http.client.post(url(path)).body("{}")).await;
        assert_eq!(
            (code, body.as_str()),
            (401, "Authentication Failed"),
            "{path}"
        );
        let (code, _) = http
            .send(
                http.client
                    .post(url(path))
                    .header("authorization", "Basic d3Jvbmc=")
                    .body("{}"),
            )
            .await;
        assert_eq!(code, 401, "{path}");
    }
    // With the credentials the call goes through (and fails on the unknown id, as Java does).
    let v = http
        .envelope(
            http.client
                .post(url("/api/server/x-1/decommission"))
                .header("authorization", format!("Basic {credentials}")),
        )
        .await;
    assert_eq!(v["errMsg"], "Server Id [x-1] not found!");
    // Java leaves every other path open.
    http.get("/api/server/nodes").await;
    let v = http
        .post(
            "/api/server/addExcludeNodes",
            r#"{"excludeNodes": ["x-1"]}"#,
        )
        .await;
    assert_eq!(v["code"], 0);
    a.running.shutdown().await;
}

/// `/api/app/appInfos` sums each app's storage figures over the servers' heartbeats, as the
/// 0.10 coordinator does: A spilled its shuffle to local files, B keeps its own in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_infos_sum_the_storage_the_servers_report() {
    let (mut a, mut b) = cluster(|_| {}).await;
    let http = Http::new(&a);
    let mut coord = coordinator_client(&a).await;
    const APP: &str = "app_storage_1";
    register_app(&mut coord, APP, "alice").await;
    register_app(&mut coord, "app_idle_1", "bob").await;
    let mut per_server = Vec::new();
    for (server, shuffle, partitions) in [(&mut a, 0, 0..4), (&mut b, 1, 0..3)] {
        let n = partitions.end;
        common::register(&mut server.client, APP, shuffle, partitions, false).await;
        let written =
            common::write_shuffle(&mut server.client, APP, shuffle, 2, n, 3, 8 << 10).await;
        per_server.push(
            written
                .values()
                .flat_map(|blocks| blocks.values())
                .map(|b| b.len() as i64)
                .sum::<i64>(),
        );
    }
    let payload: i64 = per_server.iter().sum();
    let (payload_a, payload_b) = (per_server[0], per_server[1]);
    common::finish(&mut a.client, APP, 0).await;
    let coordinator = a.running.coordinator().unwrap().clone();
    let (ida, idb) = (a.running.server_id.clone(), b.running.server_id.clone());
    let reported = |id: &str| {
        coordinator
            .servers()
            .get_report(id)
            .and_then(|(_, r)| r.app_infos.iter().find(|i| i.app_id == APP).cloned())
    };
    // Each server's report must be one sent after all of its writes (a heartbeat can fall in
    // the middle of them).
    common::eventually("A reports its spill, B its memory", || {
        reported(&ida).is_some_and(|i| i.memory_size == 0 && i.local_total_size >= payload_a)
            && reported(&idb).is_some_and(|i| i.memory_size >= payload_b)
    })
    .await;
    let (ra, rb) = (reported(&ida).unwrap(), reported(&idb).unwrap());

    let infos = http.get("/api/app/appInfos").await;
    let infos = infos.as_array().unwrap();
    let info = infos.iter().find(|i| i["appId"] == APP).unwrap();
    assert_shape(info, &APP_INFO_VO, "AppInfoVO");
    assert_eq!(info["userName"], "alice");
    assert_eq!(info["partitionNum"], 7, "4 on A + 3 on B: {info}");
    assert_eq!(info["memorySize"], ra.memory_size + rb.memory_size);
    assert_eq!(info["memorySize"], rb.memory_size, "only B holds memory");
    assert_eq!(
        info["localTotalSize"],
        ra.local_total_size + rb.local_total_size
    );
    assert!(info["localTotalSize"].as_i64().unwrap() >= ra.local_total_size);
    assert_eq!(info["hadoopTotalSize"], 0);
    assert_eq!(
        info["totalSize"], payload,
        "every payload byte received: {info}"
    );
    assert_eq!(info["localFileNum"], 0, "unset by the servers, as Java's");
    assert_eq!(info["hadoopFileNum"], 0, "unset by the servers, as Java's");
    let idle = infos.iter().find(|i| i["appId"] == "app_idle_1").unwrap();
    for key in ["partitionNum", "memorySize", "localTotalSize", "totalSize"] {
        assert_eq!(idle[key], 0, "no server holds the idle app: {idle}");
    }
    b.running.shutdown().await;
    a.running.shutdown().await;
}
