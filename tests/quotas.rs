//! Tenant quotas through the real gRPC interface: an app at its local-disk quota gets a final
//! status naming the quota, its usage and the key on its next requireBuffer and sendShuffleData;
//! what it wrote still reads back; another tenant on the same server writes and reads as
//! before; a user's apps share one quota; raising the quota through `confOps/update` admits
//! the app again at once.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::{make_block, start, status_of, Client};
use spillway::config::{ByteSize, Secret};
use spillway::proto::{self, StatusCode};

const BASIC: &str = "dXNlcjpwYXNz"; // user:pass

/// The server registry's families in the text format.
async fn scrape(running: &spillway::server::Running) -> String {
    let url = format!("http://{}/prometheus/metrics/server", running.http_addr);
    reqwest::get(url).await.unwrap().text().await.unwrap()
}

/// The value of the first sample of `family` whose labels contain `labels`.
fn sample(metrics: &str, family: &str, labels: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(&format!("{family}{{")) && l.contains(labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {family} sample with {labels}:\n{metrics}"))
}

/// Registers `app` (partitions 0..5 of shuffle 0) for `user`.
async fn register_as(client: &mut Client, app: &str, user: &str) {
    let r = client
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: app.into(),
            shuffle_id: 0,
            partition_ranges: (0..5)
                .map(|p| proto::ShufflePartitionRange { start: p, end: p })
                .collect(),
            user: user.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
}

/// One requireBuffer of `size` bytes for partition 0: its status, message and ticket.
async fn require(client: &mut Client, app: &str, size: i32) -> (StatusCode, String, i64) {
    let r = common::require_once(client, app, size).await;
    (status_of(r.status), r.ret_msg, r.require_buffer_id)
}

/// Sends `blocks` of partition `p` under `ticket`: the status and message.
async fn send_under(
    client: &mut Client,
    app: &str,
    ticket: i64,
    p: i32,
    blocks: Vec<proto::ShuffleBlock>,
) -> (StatusCode, String) {
    let r = client
        .send_shuffle_data(proto::SendShuffleDataRequest {
            app_id: app.into(),
            shuffle_id: 0,
            require_buffer_id: ticket,
            shuffle_data: vec![proto::ShuffleData {
                partition_id: p,
                block: blocks,
            }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    (status_of(r.status), r.ret_msg)
}

/// Writes `n` blocks of 32 KiB to each of partitions 0..4 of `app`, reports them, and spills
/// them to disk with finishShuffle; returns what each partition must read back.
async fn write_to_disk(
    client: &mut Client,
    app: &str,
    n: i64,
) -> BTreeMap<i32, BTreeMap<i64, Bytes>> {
    let expected = common::write_shuffle(client, app, 0, 1, 4, n, 32 << 10).await;
    common::finish(client, app, 0).await;
    expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_at_its_quota_fails_at_once_naming_it_and_another_tenant_goes_on() {
    let mut s = start(1, |c| {
        c.quota.app_local_disk_bytes = Some(ByteSize(512 << 10));
        c.metrics.basic_credentials = Some(Secret(BASIC.into()));
    })
    .await;
    let client = &mut s.client;
    register_as(client, "app_runaway", "alice").await;
    register_as(client, "app_neighbour", "bob").await;

    // 4 partitions × 3 blocks × 32 KiB = 384 KiB: under the quota, so the app goes on.
    let first = write_to_disk(client, "app_runaway", 3).await;
    let (status, msg, ticket) = require(client, "app_runaway", 200 << 10).await;
    assert_eq!(status, StatusCode::Success, "{msg}");
    // This ticket's send lands (partition 4, which the first writes left alone): the bytes are
    // in memory, then on disk, past the quota. Nothing acknowledged is dropped for it.
    let over: Vec<proto::ShuffleBlock> = (100..106)
        .map(|seq| make_block(seq, 4, 9, 32 << 10))
        .collect();
    let (status, msg) = send_under(client, "app_runaway", ticket, 4, over).await;
    assert_eq!(status, StatusCode::Success, "{msg}");
    common::finish(client, "app_runaway", 0).await;

    // Now at its quota: the next requireBuffer is refused with the final status and the cause.
    let (status, msg, _) = require(client, "app_runaway", 1024).await;
    assert_eq!(status, StatusCode::NoRegister, "{msg}");
    for part in [
        "app app_runaway is over its app local-disk quota on this server",
        "the quota is 512.0 KiB",
        "quota.app_local_disk_bytes",
        "rss.server.quota.app.localfile.size",
        "stay readable",
    ] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    // The server says who holds what, and that it refused.
    let metrics = scrape(&s.running).await;
    let runaway = sample(&metrics, "tenant_app_local_bytes", "app_id=\"app_runaway\"");
    assert!(runaway >= (512 << 10) as f64, "{runaway}");
    assert!(metrics.contains("user=\"alice\""), "{metrics}");
    assert!(sample(&metrics, "tenant_quota_refused_total", "") >= 1.0);
    assert_eq!(
        sample(&metrics, "tenant_app_local_quota_bytes", ""),
        (512 << 10) as f64
    );

    // What the runaway wrote before is still there, whole.
    let (from_memory, from_files) = common::verify_shuffle(client, "app_runaway", 0, &first).await;
    assert_eq!(from_memory, 0, "everything was spilled by finishShuffle");
    assert!(from_files > 0);

    // The neighbour (another user) writes and reads back as if the runaway were not there.
    let mine = write_to_disk(client, "app_neighbour", 2).await;
    common::verify_shuffle(client, "app_neighbour", 0, &mine).await;

    // Raised through Java's confOps endpoint: admitted again from the next request.
    let base = format!("http://{}", s.running.http_addr);
    let r = reqwest::Client::new()
        .post(format!("{base}/api/shuffleServer/confOps/update"))
        .header("content-type", "application/json")
        .header("authorization", format!("Basic {BASIC}"))
        .body(r#"{"update": {"rss.server.quota.app.localfile.size": "10m"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let (status, msg, _) = require(&mut s.client, "app_runaway", 1024).await;
    assert_eq!(status, StatusCode::Success, "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_apps_share_one_quota_and_a_send_under_an_old_ticket_is_refused_too() {
    let mut s = start(1, |c| {
        c.quota.user_local_disk_bytes = Some(ByteSize(300 << 10));
        c.metrics.top_n_apps = 1;
    })
    .await;
    let client = &mut s.client;
    register_as(client, "app_carol_1", "carol").await;
    register_as(client, "app_carol_2", "carol").await;
    register_as(client, "app_dave", "dave").await;
    // 4 × 2 × 32 KiB = 256 KiB for the first app: the user is under 300 KiB.
    write_to_disk(client, "app_carol_1", 2).await;
    let (status, msg, ticket) = require(client, "app_carol_2", 64 << 10).await;
    assert_eq!(status, StatusCode::Success, "{msg}");
    // The second app takes the user past the quota.
    write_to_disk(client, "app_carol_2", 1).await;
    let blocks = vec![make_block(50, 0, 3, 1024)];
    let (status, msg) = send_under(client, "app_carol_2", ticket, 0, blocks).await;
    assert_eq!(status, StatusCode::NoRegister, "{msg}");
    assert!(msg.contains("user \"carol\" (of app app_carol_2)"), "{msg}");
    assert!(msg.contains("quota.user_local_disk_bytes"), "{msg}");
    let (status, msg, _) = require(client, "app_carol_1", 1024).await;
    assert_eq!(status, StatusCode::NoRegister, "{msg}");
    // Labels stay bounded: the largest user by name, the rest summed as "other".
    let metrics = scrape(&s.running).await;
    assert_eq!(
        sample(&metrics, "tenant_user_local_bytes", "user=\"carol\""),
        (384 << 10) as f64 + 12.0 * 40.0,
        "{metrics}"
    );
    assert!(
        metrics.contains("tenant_app_local_bytes{") && metrics.contains("app_id=\"other\""),
        "{metrics}"
    );
    let client = &mut s.client;
    // Another user is not held to carol's quota.
    let (status, msg, _) = require(client, "app_dave", 1024).await;
    assert_eq!(status, StatusCode::Success, "{msg}");
    // Unregistering a shuffle gives its bytes back to the user.
    let r = client
        .unregister_shuffle(proto::ShuffleUnregisterRequest {
            app_id: "app_carol_1".into(),
            shuffle_id: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    let (status, msg, _) = require(client, "app_carol_2", 1024).await;
    assert_eq!(status, StatusCode::Success, "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_counts_the_files_it_finds_against_their_apps() {
    let disks: Vec<tempfile::TempDir> = (0..1).map(|_| tempfile::TempDir::new().unwrap()).collect();
    let mut config = common::test_config(&disks);
    // The journal belongs to a server id, which the ports make: fixed for the restart.
    let [grpc, netty] = common::free_ports();
    config.grpc_port = grpc;
    config.netty_port = i32::from(netty);
    config.quota.app_local_disk_bytes = Some(ByteSize(200 << 10));
    let running = spillway::server::start(config.clone())
        .await
        .expect("server starts");
    let mut client = common::connect(running.grpc_addr).await;
    register_as(&mut client, "app_before", "erin").await;
    // 4 × 2 × 32 KiB = 256 KiB: past the quota once spilled.
    let written = write_to_disk(&mut client, "app_before", 2).await;
    let (status, msg, _) = require(&mut client, "app_before", 1024).await;
    assert_eq!(status, StatusCode::NoRegister, "{msg}");
    drop(client);
    running.shutdown().await;

    let running = spillway::server::start(config)
        .await
        .expect("server restarts");
    let mut client = common::connect(running.grpc_addr).await;
    let (status, msg, _) = require(&mut client, "app_before", 1024).await;
    assert_eq!(status, StatusCode::NoRegister, "{msg}");
    assert!(
        msg.contains("app app_before is over its app local-disk quota"),
        "{msg}"
    );
    common::verify_shuffle(&mut client, "app_before", 0, &written).await;
    running.shutdown().await;
}

/// POSTs one Java key to `confOps/update`.
async fn conf_update(running: &spillway::server::Running, key: &str, value: &str) {
    let r = reqwest::Client::new()
        .post(format!(
            "http://{}/api/shuffleServer/confOps/update",
            running.http_addr
        ))
        .header("content-type", "application/json")
        .header("authorization", format!("Basic {BASIC}"))
        .body(format!(r#"{{"update": {{"{key}": "{value}"}}}}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_high_watermark_an_app_over_its_memory_share_waits_while_a_small_one_goes_first() {
    let mut s = start(1, |c| {
        c.memory_store.capacity = ByteSize(1000 << 10);
        c.hybrid_store.memory_spill_high_watermark = 0.8;
        c.hybrid_store.memory_spill_low_watermark = 0.2;
        // Answer at once: the test reads each answer, not a wait.
        c.memory_store.require_buffer_wait = std::time::Duration::ZERO;
        c.metrics.basic_credentials = Some(Secret(BASIC.into()));
    })
    .await;
    let client = &mut s.client;
    register_as(client, "app_heavy", "alice").await;
    register_as(client, "app_small", "bob").await;
    // Tickets that are not used hold their bytes (for 20 s), so nothing spills them away.
    let (status, msg, _) = require(client, "app_heavy", 700 << 10).await;
    assert_eq!(status, StatusCode::Success, "{msg}");
    // Refused for room: the small app waits, so memory is contended.
    let (status, msg, _) = require(client, "app_small", 400 << 10).await;
    assert_eq!(status, StatusCode::NoBuffer, "{msg}");

    // 900 KiB would pass the 800 KiB high mark, and the heavy app holds more than 1000 / 2.
    let (status, msg, _) = require(client, "app_heavy", 200 << 10).await;
    assert_eq!(status, StatusCode::NoBuffer, "{msg}");
    for part in [
        "this app holds 716800 bytes, more than its share 512000",
        "a fair share: 1024000 / 2 apps",
    ] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    // The small app takes the room above the high mark.
    let (status, msg, _) = require(client, "app_small", 200 << 10).await;
    assert_eq!(status, StatusCode::Success, "{msg}");
    let metrics = scrape(&s.running).await;
    assert_eq!(
        sample(&metrics, "tenant_memory_share_refused_total", ""),
        1.0
    );

    // The small app waits again (refused for room); a share of 1 turns the share off, from
    // the next request.
    let (status, msg, _) = require(&mut s.client, "app_small", 200 << 10).await;
    assert_eq!(status, StatusCode::NoBuffer, "{msg}");
    conf_update(&s.running, "rss.server.quota.app.memory.ratio", "1").await;
    let (status, msg, _) = require(&mut s.client, "app_heavy", 40 << 10).await;
    assert_eq!(status, StatusCode::Success, "{msg}");
    // And a share below the fair one holds an app to it.
    conf_update(&s.running, "rss.server.quota.app.memory.ratio", "0.1").await;
    let (status, msg, _) = require(&mut s.client, "app_heavy", 10 << 10).await;
    assert_eq!(status, StatusCode::NoBuffer, "{msg}");
    assert!(msg.contains("quota.app_memory_share 0.1"), "{msg}");
}
