//! Every metric family of the Java coordinator, against the embedded coordinator after real
//! traffic: `tests/fixtures/java_coordinator_metric_families.txt` lists Java's `server` and
//! `grpc` families (taken from the Java sources, see its header), and the `jvm` ones come from
//! `java_metric_families.txt`. Shuffle-server heartbeats (one server falling silent), access
//! requests, registrations, app heartbeats and assignments go over gRPC; then every family
//! marked "exported" must be on `/api/coordinator/prometheus/metrics/<registry>` with Java's
//! type and labels, every "absent" one missing and named in docs/monitoring.md, and the values must be
//! the ones this traffic determines. The push gateway gets them beside the shuffle server's.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use spillway::proto::coordinator_server_client::CoordinatorServerClient;
use spillway::proto::{self, ServerStatus, StatusCode};
use tonic::transport::Channel;

use common::status_of;

type Coord = CoordinatorServerClient<Channel>;

const FIXTURE: &str = include_str!("fixtures/java_coordinator_metric_families.txt");
const SERVER_FIXTURE: &str = include_str!("fixtures/java_metric_families.txt");
const README: &str = include_str!("../docs/monitoring.md");
const ABSENT_SECTION: &str = "#### Metrics Java has that Spillway does not";

struct Family {
    registry: String,
    name: String,
    ty: String,
    labels: String,
    status: String,
}

/// The coordinator fixture, plus the `jvm` lines of the shuffle server's (the same registry).
fn fixture() -> Vec<Family> {
    let mut out = Vec::new();
    for l in FIXTURE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let parts: Vec<&str> = l.split_whitespace().collect();
        assert!(parts.len() >= 5, "fixture line has five columns: {l}");
        out.push(Family {
            registry: parts[0].into(),
            name: parts[1].into(),
            ty: parts[2].into(),
            labels: parts[3].into(),
            status: parts[4..].join(" "),
        });
    }
    for l in SERVER_FIXTURE.lines().filter(|l| l.starts_with("jvm ")) {
        let parts: Vec<&str> = l.split_whitespace().collect();
        out.push(Family {
            registry: "jvm".into(),
            name: parts[1].into(),
            ty: parts[2].into(),
            labels: "jvm".into(),
            status: parts[5..].join(" "),
        });
    }
    out
}

async fn get(url: &str) -> String {
    let r = reqwest::get(url).await.expect("HTTP port answers");
    assert_eq!(r.status().as_u16(), 200, "{url}");
    r.text().await.unwrap()
}

fn types(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, t)| (n.to_owned(), t.to_owned()))
        .collect()
}

/// The sample lines of family `name` (its own samples; a summary's are `name{…quantile…}`).
fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .collect()
}

fn value(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    samples(text, name)
        .into_iter()
        .find(|l| labels.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn heartbeat(id: &str, status: ServerStatus) -> proto::ShuffleServerHeartBeatRequest {
    proto::ShuffleServerHeartBeatRequest {
        server_id: Some(proto::ShuffleServerId {
            id: id.into(),
            ip: "127.0.0.1".into(),
            port: 20000 + id.len() as i32,
            netty_port: -1,
            jetty_port: 0,
        }),
        used_memory: 1024,
        available_memory: 1 << 30,
        tags: vec!["ss_v5".into(), "GRPC".into()],
        status: Some(status as i32),
        ..Default::default()
    }
}

async fn send_heartbeat(client: &mut Coord, req: proto::ShuffleServerHeartBeatRequest) {
    let resp = client.heartbeat(req).await.unwrap().into_inner();
    assert_eq!(status_of(resp.status), StatusCode::Success);
}

async fn assign(client: &mut Coord, app: &str, shuffle: i32) {
    let r = client
        .get_shuffle_assignments(proto::GetShuffleServerRequest {
            application_id: app.into(),
            shuffle_id: shuffle,
            partition_num: 4,
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
}

/// The traffic of the test: returns how many heartbeats were sent before the silent server is
/// lost (the live servers keep beating while the test waits for that).
async fn traffic(client: &mut Coord) {
    for (user, n) in [("alice", 1), ("alice", 2), ("bob", 3)] {
        let r = client
            .access_cluster(proto::AccessClusterRequest {
                access_id: format!("access{n}"),
                user: user.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status_of(r.status), StatusCode::Success);
        let r = client
            .register_application_info(proto::ApplicationInfoRequest {
                app_id: format!("app{n}"),
                user: user.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status_of(r.status), StatusCode::Success);
    }
    let r = client
        .app_heartbeat(proto::AppHeartBeatRequest {
            app_id: "app1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    assign(client, "app1", 0).await;
    assign(client, "app1", 1).await;
    // An app the coordinator first hears of through an assignment: running, without a user.
    assign(client, "app4", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_java_coordinator_family_is_exported_or_documented_absent() {
    let s = common::start(1, |c| {
        c.coordinator.enabled = true;
        c.coordinator.register_self = false;
        c.coordinator.server_heartbeat_timeout = Duration::from_secs(2);
    })
    .await;
    let channel = Channel::from_shared(format!("http://{}", s.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = CoordinatorServerClient::new(channel);
    let base = format!("http://{}", s.running.http_addr);

    // "gone" beats once and falls silent; the others beat until it is lost.
    send_heartbeat(&mut client, heartbeat("gone", ServerStatus::Active)).await;
    let mut beats = 1.0;
    let live = [
        ("s1", ServerStatus::Active),
        ("s2", ServerStatus::Active),
        ("sick", ServerStatus::Unhealthy),
        ("leaving", ServerStatus::Decommissioning),
    ];
    for (id, status) in live {
        send_heartbeat(&mut client, heartbeat(id, status)).await;
        beats += 1.0;
    }
    traffic(&mut client).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let server = loop {
        for (id, status) in live {
            send_heartbeat(&mut client, heartbeat(id, status)).await;
            beats += 1.0;
        }
        let page = get(&format!("{base}/api/coordinator/prometheus/metrics/server")).await;
        if value(&page, "lost_server_num", &[]) == Some(1.0)
            && value(&page, "total_server_num", &[]) == Some(4.0)
        {
            break page;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the silent server was never lost:\n{page}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    // The diff: every registry against the fixture.
    let mut pages = HashMap::new();
    pages.insert("server", server);
    for registry in ["grpc", "jvm"] {
        pages.insert(
            registry,
            get(&format!(
                "{base}/api/coordinator/prometheus/metrics/{registry}"
            ))
            .await,
        );
    }
    let exported: HashMap<&str, HashMap<String, String>> =
        pages.iter().map(|(r, t)| (*r, types(t))).collect();
    let readme_absent = README
        .split_once(ABSENT_SECTION)
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or(rest))
        .expect("docs/monitoring.md lists Java's families Spillway lacks");
    let families = fixture();
    assert_eq!(
        families
            .iter()
            .filter(|f| f.registry != "jvm" && f.status == "exported")
            .count(),
        28,
        "issue 22 counts 28 coordinator families"
    );
    let mut wrong = Vec::new();
    for f in &families {
        let page = &pages[f.registry.as_str()];
        let here = &exported[f.registry.as_str()];
        if f.status == "exported" {
            match here.get(&f.name) {
                None => wrong.push(format!("{}: {} missing", f.registry, f.name)),
                Some(t) if *t != f.ty => wrong.push(format!(
                    "{}: {} is a {t}, Java's is a {}",
                    f.registry, f.name, f.ty
                )),
                Some(_) => {}
            }
            let lines = samples(page, &f.name);
            let label_ok = |l: &&str| match f.labels.as_str() {
                "-" => l.starts_with(&format!("{} ", f.name)),
                "tags" => l.contains(r#"tags="coordinator""#),
                "user_name" => l.contains("user_name=\""),
                _ => true,
            };
            if !lines.iter().all(label_ok) {
                wrong.push(format!("{}: labels are not Java's {}", f.name, f.labels));
            }
        } else if let Some(reason) = f.status.strip_prefix("absent: ") {
            assert!(!reason.is_empty());
            let prefix = f.name.split('<').next().unwrap_or(&f.name);
            if exported.values().any(|m| {
                m.keys()
                    .any(|n| n == &f.name || (prefix != f.name && n.starts_with(prefix)))
            }) {
                wrong.push(format!("{} is marked absent but exported", f.name));
            }
            if !readme_absent.contains(&format!("`{}`", f.name)) {
                wrong.push(format!(
                    "{} is absent but not listed in docs/monitoring.md",
                    f.name
                ));
            }
        } else {
            wrong.push(format!("{}: unknown status {:?}", f.name, f.status));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} differences:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // Values this traffic determines.
    let server = &pages["server"];
    let v = |name: &str, labels: &[&str]| value(server, name, labels);
    assert_eq!(
        v("total_server_num", &[]),
        Some(4.0),
        "s1, s2, sick, leaving"
    );
    assert_eq!(v("active_server_num", &[]), Some(2.0));
    assert_eq!(v("unhealthy_server_num", &[]), Some(1.0));
    assert_eq!(v("lost_server_num", &[]), Some(1.0));
    assert_eq!(v("exclude_server_num", &[]), Some(0.0));
    assert_eq!(v("running_app_num", &[]), Some(4.0), "app1..3 and app4");
    assert_eq!(v("total_app_num", &[]), Some(4.0));
    assert_eq!(v("app_num", &[r#"user_name="alice""#]), Some(2.0));
    assert_eq!(v("app_num", &[r#"user_name="bob""#]), Some(1.0));
    assert_eq!(samples(server, "app_num").len(), 2, "app4 has no user");
    assert_eq!(v("total_access_request", &[]), Some(3.0));
    for denied in [
        "total_candidates_denied_request",
        "total_load_denied_request",
        "total_quota_denied_request",
    ] {
        assert_eq!(
            v(denied, &[]),
            Some(0.0),
            "{denied}: no checker is configured"
        );
    }
    assert_eq!(
        v("Grpc_ThreadMaxCount", &[]),
        Some(2.0),
        "the runtime's workers"
    );
    assert_eq!(v("Grpc_ThreadActiveCount", &[]), Some(0.0));
    // 3 accessCluster + 3 registrations + 1 appHeartbeat + 3 assignments + the heartbeats,
    // all before this scrape (HTTP is not gRPC).
    let calls = 10.0 + beats;
    assert_eq!(v("Grpc_CompleteTaskCount", &[]), Some(calls));

    let grpc = &pages["grpc"];
    let tags = r#"tags="coordinator""#;
    assert_eq!(value(grpc, "grpc_heartbeat_total", &[tags]), Some(beats));
    assert_eq!(
        value(grpc, "grpc_get_shuffle_assignments_total", &[tags]),
        Some(3.0)
    );
    assert_eq!(value(grpc, "grpc_total", &[tags]), Some(calls));
    assert_eq!(value(grpc, "grpc_open", &[tags]), Some(0.0));
    assert_eq!(value(grpc, "grpc_heartbeat", &[tags]), Some(0.0));
    assert!(value(grpc, "grpc_server_connection_number", &[tags]).unwrap() >= 1.0);

    // The coordinator's calls are its own: the shuffle server's gRPC registry did not count
    // the coordinator's appHeartbeat as its own appHeartbeat.
    let shuffle_grpc = get(&format!("{base}/prometheus/metrics/grpc")).await;
    assert_eq!(
        value(&shuffle_grpc, "grpc_app_heartbeat_total", &[]),
        Some(0.0)
    );
    assert!(samples(&shuffle_grpc, "grpc_heartbeat_total").is_empty());

    // JSON, Java's MetricResource shape, on /api/coordinator/metrics (all without a type).
    let json: serde_json::Value = serde_json::from_str(
        &get(&format!(
            "{base}/api/coordinator/metrics?name[]=running_app_num&name[]=grpc_get_shuffle_assignments_total"
        ))
        .await,
    )
    .unwrap();
    let metrics = json["metrics"].as_array().unwrap();
    let of = |n: &str| {
        metrics
            .iter()
            .find(|m| m["name"] == n)
            .map(|m| m["value"].clone())
    };
    assert_eq!(of("running_app_num"), Some(serde_json::json!(4.0)));
    assert_eq!(
        of("grpc_get_shuffle_assignments_total"),
        Some(serde_json::json!(3.0))
    );
    assert!(json["timeStamp"].is_number());
    let json: serde_json::Value =
        serde_json::from_str(&get(&format!("{base}/api/coordinator/metrics/server")).await)
            .unwrap();
    assert!(json["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "total_server_num"));
    // The coordinator has no netty registry: Java answers an unknown type with a 500.
    let r = reqwest::get(format!("{base}/api/coordinator/prometheus/metrics/netty"))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 500);

    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_coordinator_its_paths_are_not_served() {
    let s = common::start(1, |c| c.coordinator.enabled = false).await;
    let r = reqwest::get(format!(
        "http://{}/api/coordinator/prometheus/metrics/server",
        s.running.http_addr
    ))
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    s.running.shutdown().await;
}
