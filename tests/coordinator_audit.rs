//! The coordinator's RPC audit log against real gRPC calls, from the coordinator embedded in a
//! server and from a coordinator-only process: Java's line layout (`appId=` and no
//! `shuffleId=`), the per-command `args{…}`, the default and a configured exclude list, and
//! nothing written when it is off.

mod common;

use std::path::{Path, PathBuf};

use spillway::config::{Config, Role};
use spillway::proto::coordinator_server_client::CoordinatorServerClient;
use spillway::proto::{self, StatusCode};
use tonic::transport::Channel;

type Coord = CoordinatorServerClient<Channel>;

async fn coord_client(addr: std::net::SocketAddr) -> Coord {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connects");
    CoordinatorServerClient::new(channel)
}

/// The file's records, each split into its tab-separated fields. A record is a line that
/// starts with its timestamp: Java's `reportClientOperation` args carry the server in protobuf
/// text format, whose newlines continue the record on further lines (checked on the raw file).
fn lines(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

fn cmd(line: &[String]) -> &str {
    line[0].split_once("] cmd=").expect("a cmd field").1
}

/// The line of `name`; panics when there is none.
fn line_of<'a>(lines: &'a [Vec<String>], name: &str) -> &'a [String] {
    lines
        .iter()
        .find(|l| cmd(l) == name)
        .unwrap_or_else(|| panic!("no {name} line in {lines:?}"))
}

/// A 0.10 server's heartbeat with `tags`.
fn heartbeat(id: &str, tags: &[&str]) -> proto::ShuffleServerHeartBeatRequest {
    proto::ShuffleServerHeartBeatRequest {
        server_id: Some(proto::ShuffleServerId {
            id: id.into(),
            ip: "127.0.0.1".into(),
            port: 20001,
            netty_port: 0,
            jetty_port: 0,
        }),
        used_memory: 0,
        available_memory: 1 << 30,
        tags: tags.iter().map(|t| t.to_string()).collect(),
        status: Some(proto::ServerStatus::Active as i32),
        ..Default::default()
    }
}

/// The calls a Spark driver and a shuffle server make, in order.
async fn client_session(c: &mut Coord, app: &str) {
    let ok = StatusCode::Success as i32;
    let hb = c.heartbeat(heartbeat("s-1", &["ss_v5", "GRPC"])).await;
    assert_eq!(hb.unwrap().into_inner().status, ok);
    let access = c
        .access_cluster(proto::AccessClusterRequest {
            access_id: "acc-1".into(),
            tags: vec!["ss_v5".into()],
            extra_properties: [("z".to_owned(), "2".to_owned()), ("a".into(), "1".into())]
                .into_iter()
                .collect(),
            user: "alice".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(access.status, ok);
    let conf = c
        .fetch_client_conf_v2(proto::FetchClientConfRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(conf.status, ok);
    let reg = c
        .register_application_info(proto::ApplicationInfoRequest {
            app_id: app.into(),
            user: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reg.status, ok);
    let storage = c
        .fetch_remote_storage(proto::FetchRemoteStorageRequest { app_id: app.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(storage.status, ok);
    let assigned = c
        .get_shuffle_assignments(proto::GetShuffleServerRequest {
            application_id: app.into(),
            shuffle_id: 3,
            partition_num: 4,
            partition_num_per_range: 1,
            data_replica: 1,
            // The client's order; Java logs its HashSet's.
            require_tags: vec!["GRPC".into(), "ss_v5".into()],
            assignment_shuffle_server_number: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(assigned.status, ok);
    // Tags no server has: an INTERNAL_ERROR answer, logged with that status.
    let refused = c
        .get_shuffle_assignments(proto::GetShuffleServerRequest {
            application_id: app.into(),
            shuffle_id: 4,
            partition_num: 1,
            partition_num_per_range: 1,
            data_replica: 1,
            require_tags: vec!["nowhere".into()],
            assignment_shuffle_server_number: 1,
            faulty_server_ids: vec!["s-9".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(refused.status, ok);
    let app_hb = c
        .app_heartbeat(proto::AppHeartBeatRequest { app_id: app.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(app_hb.status, ok);
    let available = c.check_service_available(()).await.unwrap().into_inner();
    assert!(available.available);
    let report = c
        .report_client_operation(proto::ReportShuffleClientOpRequest {
            client_host: "10.1.1.1".into(),
            client_port: 7077,
            server: Some(proto::ShuffleServerId {
                id: "s-1".into(),
                ip: "127.0.0.1".into(),
                port: 20001,
                netty_port: 0,
                jetty_port: 0,
            }),
            operation: "SEND_FAILED".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(report.status, ok);
    // Not audited by Java: no line.
    c.get_shuffle_server_num(()).await.unwrap();
}

fn embedded(path: PathBuf, tweak: impl FnOnce(&mut Config)) -> impl FnOnce(&mut Config) {
    move |c: &mut Config| {
        c.coordinator.enabled = true;
        c.coordinator.register_self = false;
        c.audit.coordinator_rpc_log = true;
        c.audit.coordinator_rpc_log_path = path;
        tweak(c);
    }
}

#[tokio::test]
async fn embedded_coordinator_lines_match_javas_layout_and_default_exclude_list() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("logs/coordinator_rpc_audit.log");
    // The default exclude list (appHeartbeat, heartbeat) is left as it is.
    let s = common::start(1, embedded(path.clone(), |_| {})).await;
    let mut c = coord_client(s.running.grpc_addr).await;
    client_session(&mut c, "app_caudit_1").await;
    // Nothing is asked of the writer before shutdown: the lines must be there after it.
    s.running.shutdown().await;
    let lines = lines(&path);

    for l in &lines {
        let stamp = &l[0][1..24];
        assert!(
            l[0].starts_with('[') && l[0].as_bytes()[24] == b']',
            "{l:?}"
        );
        assert!(
            stamp.chars().enumerate().all(|(i, ch)| match i {
                4 | 7 => ch == '-',
                10 => ch == ' ',
                13 | 16 => ch == ':',
                19 => ch == '.',
                _ => ch.is_ascii_digit(),
            }),
            "{stamp}"
        );
        assert!(l[1].starts_with("statusCode="), "{l:?}");
        assert!(l[2].starts_with("from=/127.0.0.1:"), "{l:?}");
        let micros = l[3].strip_prefix("executionTimeUs=").expect("time");
        micros.parse::<u64>().expect("a number of microseconds");
        assert!(l[4].starts_with("appId="), "{l:?}");
        assert!(
            l.iter().all(|f| !f.starts_with("shuffleId=")),
            "the coordinator's context has no shuffleId field: {l:?}"
        );
        assert!(
            l.iter().all(|f| !f.starts_with("return{")),
            "nor a return part: {l:?}"
        );
    }
    let cmds: Vec<&str> = lines.iter().map(|l| cmd(l)).collect();
    assert_eq!(
        cmds,
        [
            "accessCluster",
            "fetchClientConfV2",
            "registerApplicationInfo",
            "fetchRemoteStorage",
            "getShuffleAssignments",
            "getShuffleAssignments",
            "checkServiceAvailable",
            "reportClientOperation",
        ],
        "both heartbeats excluded by default; getShuffleServerNum never audited"
    );

    let access = line_of(&lines, "accessCluster");
    assert_eq!(access[1], "statusCode=SUCCESS");
    assert_eq!(
        access[4..],
        [
            "appId=N/A",
            "args{accessInfo=AccessInfo{accessId='acc-1', user= alice, tags=[ss_v5], \
             extraProperties={a=1, z=2}}}",
        ]
    );
    let conf = line_of(&lines, "fetchClientConfV2");
    assert_eq!(conf[1..2], ["statusCode=SUCCESS"]);
    assert_eq!(conf[4..], ["appId=N/A"]);
    assert_eq!(
        line_of(&lines, "registerApplicationInfo")[4..],
        ["appId=app_caudit_1", "args{user=alice}"]
    );
    assert_eq!(
        line_of(&lines, "fetchRemoteStorage")[4..],
        ["appId=app_caudit_1"]
    );
    let assigns: Vec<&Vec<String>> = lines
        .iter()
        .filter(|l| cmd(l) == "getShuffleAssignments")
        .collect();
    assert_eq!(assigns[0][1], "statusCode=SUCCESS");
    assert_eq!(
        assigns[0][4..],
        [
            "appId=app_caudit_1",
            "args{shuffleId=3, partitionNum=4, partitionNumPerRange=1, replica=1, \
             requiredTags=[ss_v5, GRPC], requiredShuffleServerNumber=1, faultyServerIds=[]}",
        ]
    );
    assert_eq!(assigns[1][1], "statusCode=INTERNAL_ERROR");
    assert_eq!(
        assigns[1][5],
        "args{shuffleId=4, partitionNum=1, partitionNumPerRange=1, replica=1, \
         requiredTags=[nowhere], requiredShuffleServerNumber=1, faultyServerIds=[s-9]}"
    );
    let check = line_of(&lines, "checkServiceAvailable");
    assert_eq!(
        (check[1].as_str(), &check[4..]),
        ("statusCode=SUCCESS", &["appId=N/A".to_owned()][..])
    );
    // Java formats the server with protobuf's text format, newlines included.
    let report = line_of(&lines, "reportClientOperation");
    assert_eq!(
        report[5], "args{10.1.1.1:7077->SEND_FAILED->id: \"s-1\"",
        "{report:?}"
    );
    let raw = std::fs::read_to_string(&path).unwrap();
    assert!(
        raw.contains("->SEND_FAILED->id: \"s-1\"\nip: \"127.0.0.1\"\nport: 20001\n}\n"),
        "{raw}"
    );
}

#[tokio::test]
async fn a_configured_exclude_list_replaces_the_default_and_off_writes_nothing() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("coordinator_rpc_audit.log");
    let s = common::start(
        1,
        embedded(path.clone(), |c| {
            c.audit.coordinator_rpc_exclude = vec!["registerApplicationInfo".into()];
        }),
    )
    .await;
    let mut c = coord_client(s.running.grpc_addr).await;
    client_session(&mut c, "app_caudit_2").await;
    s.running.shutdown().await;
    let lines = lines(&path);
    let cmds: Vec<&str> = lines.iter().map(|l| cmd(l)).collect();
    assert!(!cmds.contains(&"registerApplicationInfo"), "{cmds:?}");
    assert_eq!(
        line_of(&lines, "heartbeat")[4..],
        ["appId=N/A", "args{serverNode=s-1}"]
    );
    let app_hb = line_of(&lines, "appHeartbeat");
    assert_eq!(
        (app_hb[1].as_str(), &app_hb[4..]),
        ("statusCode=SUCCESS", &["appId=app_caudit_2".to_owned()][..])
    );

    let off_dir = tempfile::TempDir::new().unwrap();
    let off_path = off_dir.path().join("coordinator_rpc_audit.log");
    let s = common::start(
        1,
        embedded(off_path.clone(), |c| c.audit.coordinator_rpc_log = false),
    )
    .await;
    let mut c = coord_client(s.running.grpc_addr).await;
    client_session(&mut c, "app_caudit_3").await;
    s.running.shutdown().await;
    assert!(!off_path.exists(), "the log is off: no file");
}

/// A coordinator-only process started from a Java coordinator.conf: its audit keys reach the
/// log (here an exclude list that lets the heartbeats through and drops the app's register).
#[tokio::test]
async fn the_coordinator_only_process_from_a_coordinator_conf_writes_the_same_log() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("coordinator_rpc_audit.log");
    let conf = "\
rss.rpc.server.port 0
rss.jetty.http.port 0
rss.coordinator.access.checkers org.apache.uniffle.coordinator.access.checker.AccessQuotaChecker
rss.coordinator.rpc.audit.log.enabled true
rss.coordinator.rpc.audit.log.excludeList registerApplicationInfo,fetchClientConfV2
";
    let mut config = spillway::config::java::from_coordinator_properties(conf)
        .expect("maps")
        .config;
    assert_eq!(config.role, Role::Coordinator);
    config.bind_ip = "127.0.0.1".into();
    config.worker_ip = Some("127.0.0.1".into());
    // Java's file name; the directory is the test's.
    config.audit.coordinator_rpc_log_path = path.clone();
    let running = spillway::server::coordinator_process::start(config)
        .await
        .expect("starts");
    let mut c = coord_client(running.grpc_addr).await;
    client_session(&mut c, "app_caudit_4").await;
    running.shutdown().await;
    let lines = lines(&path);
    let cmds: Vec<&str> = lines.iter().map(|l| cmd(l)).collect();
    assert!(
        !cmds.contains(&"registerApplicationInfo") && !cmds.contains(&"fetchClientConfV2"),
        "{cmds:?}"
    );
    assert_eq!(
        line_of(&lines, "heartbeat")[4..],
        ["appId=N/A", "args{serverNode=s-1}"]
    );
    assert_eq!(
        line_of(&lines, "fetchRemoteStorage")[4..],
        ["appId=app_caudit_4"]
    );
}
