//! Every metric family of the Java shuffle server, against a real server after real traffic:
//! `tests/fixtures/java_metric_families.txt` lists Java's families per registry (taken from the
//! Java sources, see its header). After gRPC and Netty writes, a spill, reports, reads and
//! unregisters, every family marked "exported" must be on `/prometheus/metrics/<registry>` with
//! Java's type, and every family marked "absent" must be missing there (never faked) and named
//! in docs/monitoring.md's list of what Spillway does not have. A few of the new families are checked
//! for the values this traffic determines exactly.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use common::{make_block, register, report, start, status_of, write_shuffle};
use spillway::netty::client::{send_message_len, NettyClient};
use spillway::netty::messages::{IndexRequest, MemoryRequest, Request, SendBlock, SendRequest};
use spillway::netty::Response;
use spillway::proto::{self, StatusCode};

const APP: &str = "families_app";
const FIXTURE: &str = include_str!("fixtures/java_metric_families.txt");
const README: &str = include_str!("../docs/monitoring.md");
/// The docs/monitoring.md section that lists Java's families Spillway does not export.
const ABSENT_SECTION: &str = "#### Metrics Java has that Spillway does not";

struct Family {
    registry: String,
    name: String,
    ty: String,
    status: String,
}

fn fixture() -> Vec<Family> {
    FIXTURE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut parts = l.split_whitespace();
            let mut next = || {
                parts
                    .next()
                    .expect("fixture line has six columns")
                    .to_owned()
            };
            let (registry, name, ty, _labels, _v092) = (next(), next(), next(), next(), next());
            let status = parts.collect::<Vec<_>>().join(" ");
            assert!(!status.is_empty(), "fixture line without status: {l}");
            Family {
                registry,
                name,
                ty,
                status,
            }
        })
        .collect()
}

async fn get(url: &str) -> String {
    let r = reqwest::get(url).await.expect("HTTP port answers");
    assert_eq!(r.status().as_u16(), 200, "{url}");
    r.text().await.unwrap()
}

/// Family name → type, from the `# TYPE` lines of a Prometheus text page.
fn types(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, t)| (n.to_owned(), t.to_owned()))
        .collect()
}

/// The value of the first sample of `name` whose line contains every `labels` part.
fn value(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| labels.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A Netty send of `blocks` with a gRPC reservation, as the 0.10 Netty client makes them.
async fn netty_send(
    netty: &mut NettyClient,
    client: &mut common::Client,
    blocks: Vec<proto::ShuffleBlock>,
    partition: i32,
) {
    let mut req = SendRequest {
        request_id: 11,
        app_id: APP.into(),
        shuffle_id: 0,
        require_buffer_id: 0,
        partitions: vec![(
            partition,
            blocks
                .iter()
                .map(|b| SendBlock {
                    partition_id: partition,
                    block_id: b.block_id,
                    length: b.length,
                    shuffle_id: 0,
                    crc: b.crc,
                    task_attempt_id: b.task_attempt_id,
                    data: b.data.clone(),
                    replicas: vec![],
                    uncompress_length: b.uncompress_length,
                    free_memory: 0,
                })
                .collect(),
        )],
        timestamp: spillway_now_ms(),
    };
    let size = blocks.iter().map(|b| b.length + 32).sum::<i32>() + send_message_len(&req) as i32;
    let r = client
        .require_buffer(proto::RequireBufferRequest {
            require_size: size,
            app_id: APP.into(),
            shuffle_id: 0,
            partition_ids: vec![partition],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    req.require_buffer_id = r.require_buffer_id;
    match netty.call(&Request::Send(req)).await.unwrap() {
        Response::Rpc(h) => assert_eq!(status_of(h.status), StatusCode::Success),
        other => panic!("a Netty send answered {other:?}"),
    }
}

fn spillway_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_java_family_is_exported_or_documented_absent() {
    let mut s = start(1, |c| {
        c.tags = vec!["fam".into()];
        c.metrics.block_size_statistics = true;
    })
    .await;
    let base = format!("http://{}", s.running.http_addr);
    let tags = r#"tags="ss_v5,ss_v4,GRPC,GRPC_NETTY,fam""#;

    // gRPC: 2 maps × 2 partitions × 2 blocks of 1000 bytes, each map reporting its ids.
    register(&mut s.client, APP, 0, 0..2, false).await;
    let mut expected = write_shuffle(&mut s.client, APP, 0, 2, 2, 2, 1000).await;
    // Netty: 2 more blocks of partition 0 from a third map, reported over gRPC.
    let mut netty = NettyClient::connect(s.running.netty_addr.expect("netty plane on"))
        .await
        .unwrap();
    let blocks: Vec<_> = (0..2).map(|seq| make_block(seq, 0, 2, 1000)).collect();
    netty_send(&mut netty, &mut s.client, blocks.clone(), 0).await;
    let ids: BTreeMap<i32, Vec<i64>> = [(0, blocks.iter().map(|b| b.block_id).collect())].into();
    report(&mut s.client, APP, 0, 2, &ids).await;
    for b in &blocks {
        expected
            .get_mut(&0)
            .unwrap()
            .insert(b.block_id, b.data.clone());
    }
    const BLOCKS: f64 = 10.0;

    // Spill everything to the local disk, then read it all back (gRPC), and from Netty a
    // memory read and an index read.
    common::finish(&mut s.client, APP, 0).await;
    common::verify_shuffle(&mut s.client, APP, 0, &expected).await;
    let memory = Request::Memory(MemoryRequest {
        request_id: 12,
        app_id: APP.into(),
        shuffle_id: 0,
        partition_id: 1,
        last_block_id: -1,
        read_buffer_size: 1 << 20,
        timestamp: spillway_now_ms(),
        expected_task_ids: None,
    });
    match netty.call(&memory).await.unwrap() {
        Response::Memory { head, data, .. } => {
            assert_eq!(status_of(head.status), StatusCode::Success);
            assert!(data.is_empty(), "partition 1 was spilled");
        }
        other => panic!("a Netty memory read answered {other:?}"),
    }
    let index = Request::Index(IndexRequest {
        request_id: 13,
        app_id: APP.into(),
        shuffle_id: 0,
        partition_id: 0,
        partition_num_per_range: 1,
        partition_num: 2,
    });
    match netty.call(&index).await.unwrap() {
        Response::Index { head, index, .. } => {
            assert_eq!(status_of(head.status), StatusCode::Success);
            assert_eq!(index.len(), 6 * 40, "partition 0's six blocks");
        }
        other => panic!("a Netty index read answered {other:?}"),
    }

    // The diff: every registry against the fixture.
    let mut pages = HashMap::new();
    for registry in ["server", "grpc", "netty", "jvm"] {
        pages.insert(
            registry,
            get(&format!("{base}/prometheus/metrics/{registry}")).await,
        );
    }
    let exported: HashMap<&str, HashMap<String, String>> =
        pages.iter().map(|(r, t)| (*r, types(t))).collect();
    let readme_absent = README
        .split_once(ABSENT_SECTION)
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or(rest))
        .expect("docs/monitoring.md has the section listing Java's families Spillway lacks");
    let mut wrong = Vec::new();
    let families = fixture();
    assert!(families.len() > 200, "the fixture lists Java's families");
    for f in &families {
        let here = exported
            .get(f.registry.as_str())
            .unwrap_or_else(|| panic!("unknown registry {}", f.registry));
        let found = here.get(&f.name);
        if f.status == "exported" {
            match found {
                None => wrong.push(format!("{}: {} missing", f.registry, f.name)),
                Some(t) if *t != f.ty => wrong.push(format!(
                    "{}: {} is a {t}, Java's is a {}",
                    f.registry, f.name, f.ty
                )),
                Some(_) => {}
            }
        } else if f.status == "exported when the store type has HDFS" {
            // This server is MEMORY_LOCALFILE: like Java's, it has no Hadoop pool.
            if found.is_some() {
                wrong.push(format!("{} exported without HDFS", f.name));
            }
        } else if f.status.starts_with("absent: ") {
            if exported.values().any(|m| m.contains_key(&f.name)) {
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
    assert_eq!(v("reported_block_count", &[tags]), Some(BLOCKS));
    assert_eq!(v("committed_block_count", &[tags]), Some(BLOCKS));
    assert_eq!(v("cached_block_count", &[tags]), Some(0.0));
    assert_eq!(v("block_count_in_buffer_pool", &[tags]), Some(0.0));
    assert_eq!(v("in_flush_block_count_in_buffer_pool", &[tags]), Some(0.0));
    let disk = s.disks[0].path().to_string_lossy().into_owned();
    assert_eq!(
        v(
            "total_localfile_write_data",
            &[&format!(r#"local_disk_path="{disk}""#)]
        ),
        Some(BLOCKS * 1000.0)
    );
    // One file "per flush event", as Java counts them; all of them this app's.
    let events = v("storage_success_write_local", &[tags]).unwrap();
    assert!(events >= 2.0, "finishShuffle spilled both partitions");
    assert_eq!(v("total_flush_file_num", &[tags]), Some(events));
    assert_eq!(v("flush_file_num", &[tags]), Some(events));
    // Top-N: everything received (charged: payload + 32 bytes) is on local files now.
    let app = format!(r#"app_id="{APP}""#);
    assert_eq!(
        v("topN_of_total_data_size_for_app", &[&app]),
        Some(BLOCKS * 1032.0)
    );
    assert_eq!(
        v("topN_of_on_localfile_data_size_for_app", &[&app]),
        Some(BLOCKS * 1032.0)
    );
    assert_eq!(v("topN_of_in_memory_data_size_for_app", &[&app]), Some(0.0));
    assert_eq!(v("topN_of_on_hadoop_data_size_for_app", &[&app]), Some(0.0));
    // Every block was 1000 bytes: all in the first bucket (32 KiB).
    let app_label = format!(r#"appId="{APP}""#);
    assert_eq!(
        v("write_block_size_bucket", &[&app_label, r#"le="32768""#]),
        Some(BLOCKS)
    );
    assert_eq!(v("write_block_size_count", &[&app_label]), Some(BLOCKS));
    assert_eq!(
        v("write_block_size_sum", &[&app_label]),
        Some(BLOCKS * 1000.0)
    );
    // Reads are over: their memory is back.
    for name in [
        "read_local_data_file_buffer_size",
        "read_local_index_file_buffer_size",
        "read_memory_data_buffer_size",
    ] {
        assert_eq!(v(name, &[tags]), Some(0.0), "{name}");
    }
    // The pools: every spill event ran once in the local-file pool (no retries); the gRPC
    // handlers ran on this test's 2 runtime workers.
    let pool = |suffix: &str| v(&format!("LocalFileFlushEventThreadPool_{suffix}"), &[tags]);
    assert_eq!(pool("CompleteTaskCount"), Some(events));
    assert_eq!(pool("ThreadMaxCount"), Some(8.0), "spill_concurrency");
    assert_eq!(pool("ThreadActiveCount"), Some(0.0));
    assert_eq!(
        v("FallBackFlushEventThreadPool_CompleteTaskCount", &[tags]),
        Some(0.0)
    );
    assert_eq!(v("Grpc_ThreadMaxCount", &[tags]), Some(2.0));
    assert!(v("Grpc_CompleteTaskCount", &[tags]).unwrap() >= 10.0);
    assert_eq!(v("Grpc_RejectCount", &[tags]), Some(0.0));

    // The JSON endpoint lists the new families' samples too.
    let json: serde_json::Value = serde_json::from_str(
        &get(&format!(
            "{base}/metrics/server?name[]=reported_block_count&name[]=Grpc_ThreadMaxCount"
        ))
        .await,
    )
    .unwrap();
    let samples = json["metrics"].as_array().unwrap();
    let of = |n: &str| {
        samples
            .iter()
            .find(|m| m["name"] == n)
            .map(|m| m["value"].clone())
    };
    assert_eq!(of("reported_block_count"), Some(serde_json::json!(BLOCKS)));
    assert_eq!(of("Grpc_ThreadMaxCount"), Some(serde_json::json!(2.0)));

    // Unregistering the shuffle removes its blocks from the counts and is timed.
    let r = s
        .client
        .unregister_shuffle(proto::ShuffleUnregisterRequest {
            app_id: APP.into(),
            shuffle_id: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.ret_msg);
    let server = get(&format!("{base}/prometheus/metrics/server")).await;
    assert_eq!(value(&server, "reported_block_count", &[tags]), Some(0.0));
    assert_eq!(value(&server, "committed_block_count", &[tags]), Some(0.0));
    assert_eq!(
        value(
            &server,
            "total_remove_resource_by_shuffle_ids_time_count",
            &[]
        ),
        Some(1.0)
    );
    // The app's flushed files count until the app goes, then move to the deleted total.
    assert_eq!(value(&server, "flush_file_num", &[tags]), Some(events));
    let r = s
        .client
        .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest { app_id: APP.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, 0, "{}", r.ret_msg);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let server = loop {
        let text = get(&format!("{base}/prometheus/metrics/server")).await;
        if value(&text, "total_remove_resource_time_count", &[]) == Some(1.0) {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "app purge never timed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(value(&server, "flush_file_num", &[tags]), Some(0.0));
    assert_eq!(
        value(&server, "total_delete_file_num", &[tags]),
        Some(events)
    );
    assert_eq!(
        value(&server, "total_flush_file_num", &[tags]),
        Some(events)
    );
    // No app left: the top-N families and the histogram are still there, without samples.
    assert!(server.contains("# TYPE write_block_size histogram"));
    assert_eq!(value(&server, "write_block_size_count", &[]), None);
    assert!(server.contains("# TYPE topN_of_total_data_size_for_app gauge"));
    assert_eq!(value(&server, "topN_of_total_data_size_for_app", &[]), None);

    drop(netty);
    s.running.shutdown().await;
}
