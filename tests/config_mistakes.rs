//! Settings mistakes fail at once with their cause named, through the real gRPC interface,
//! against an S3 server that checks signatures (S3Proxy, started by this binary on 127.0.0.1;
//! moto accepts any signature, so a wrong secret would pass there): a wrong secret or a
//! bucket that does not exist is refused at `registerShuffle` under `MEMORY_HDFS`, served from
//! local disk under `MEMORY_LOCALFILE_HDFS`, and a bucket that goes away mid-job fails that
//! app's next `requireBuffer` while another app carries on. docs/operating.md, "When it does
//! not start or a job fails at once", lists each message.

mod common;
#[path = "../src/store/object/s3proxy.rs"]
#[allow(dead_code)]
mod s3proxy;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;
use spillway::config::{ByteSize, StoreType};
use spillway::proto;
use spillway::proto::StatusCode;

const WRONG_SECRET: &str = "spillway-wrong-secret-typo";

fn proxy() -> &'static s3proxy::S3Proxy {
    static PROXY: OnceLock<s3proxy::S3Proxy> = OnceLock::new();
    PROXY.get_or_init(s3proxy::start)
}

fn bucket(name: &str) -> String {
    let b = format!("{name}-{}", std::process::id());
    proxy().create_bucket(&b);
    b
}

/// `registerShuffle` with the app's s3a settings; the raw answer.
async fn register_s3(
    client: &mut Client,
    app: &str,
    path: &str,
    secret: &str,
) -> proto::ShuffleRegisterResponse {
    client
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: app.into(),
            shuffle_id: 0,
            partition_ranges: (0..2)
                .map(|p| proto::ShufflePartitionRange { start: p, end: p })
                .collect(),
            remote_storage: Some(proto::RemoteStorage {
                path: path.into(),
                remote_storage_conf: proxy()
                    .s3a_conf(secret)
                    .into_iter()
                    .map(|(key, value)| proto::RemoteStorageConfItem { key, value })
                    .collect(),
            }),
            user: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

async fn require(client: &mut Client, app: &str, size: i32) -> proto::RequireBufferResponse {
    client
        .require_buffer(proto::RequireBufferRequest {
            require_size: size,
            app_id: app.into(),
            shuffle_id: 0,
            partition_ids: vec![0],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

/// What the user reads must name the path, the store's answer and the key to fix, and never
/// the secret.
fn assert_names_cause(msg: &str, path: &str, code: &str, key: &str) {
    assert!(msg.contains(path), "names the path: {msg}");
    assert!(msg.contains(code), "names the store's answer {code}: {msg}");
    assert!(msg.contains(key), "names the key {key}: {msg}");
    assert!(!msg.contains(WRONG_SECRET), "leaks the secret: {msg}");
    assert!(
        !msg.contains(s3proxy::SECRET_KEY),
        "leaks the secret: {msg}"
    );
}

/// `MEMORY_HDFS` has no local disk to fall back to: a wrong secret and a missing bucket are
/// refused at registration, with a final status and the cause, before a block is accepted;
/// the same settings corrected register fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_hdfs_refuses_a_wrong_secret_and_a_missing_bucket_at_registration() {
    let mut s = start(0, |c| c.store_type = StoreType::MemoryHdfs).await;
    let b = bucket("refuse");
    let path = format!("s3a://{b}/rss");

    let t = Instant::now();
    let r = register_s3(&mut s.client, "app_wrong_secret", &path, WRONG_SECRET).await;
    println!("wrong secret refused in {:?}: {}", t.elapsed(), r.ret_msg);
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    assert_names_cause(
        &r.ret_msg,
        &path,
        "SignatureDoesNotMatch",
        "fs.s3a.secret.key",
    );

    let missing = format!("s3a://{b}-missing/rss");
    let t = Instant::now();
    let r = register_s3(
        &mut s.client,
        "app_missing_bucket",
        &missing,
        s3proxy::SECRET_KEY,
    )
    .await;
    println!("missing bucket refused in {:?}: {}", t.elapsed(), r.ret_msg);
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    assert_names_cause(&r.ret_msg, &missing, "NoSuchBucket", "create the bucket");

    // The refused apps left nothing behind, and a fixed secret is a new check.
    assert_eq!(s.running.registry().app_count(), 0);
    let r = register_s3(&mut s.client, "app_fixed", &path, s3proxy::SECRET_KEY).await;
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    s.running.shutdown().await;
}

/// `MEMORY_LOCALFILE_HDFS` keeps serving from local disk: the app with the wrong secret
/// registers, its spills (all over the cold threshold, so all preferring the bucket) go to
/// local files without trying the bucket again, and every block reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_localfile_hdfs_serves_a_refused_app_from_local_disk() {
    let mut s = start(1, |c| {
        c.store_type = StoreType::MemoryLocalfileHdfs;
        c.hdfs_store.cold_storage_threshold_size = ByteSize(1);
    })
    .await;
    let b = bucket("fallback");
    let path = format!("s3a://{b}/rss");
    let app = "app_fallback";
    let r = register_s3(&mut s.client, app, &path, WRONG_SECRET).await;
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    let expected = write_shuffle(&mut s.client, app, 0, 2, 2, 4, 5_000).await;
    finish(&mut s.client, app, 0).await;
    let store = s.running.registry().store();
    eventually("all spilled", || {
        store.memory().budget().snapshot().used == 0
    })
    .await;
    for (p, want) in &expected {
        let got = read_partition(&mut s.client, app, 0, *p).await;
        assert_eq!(&got.blocks, want, "partition {p}");
        assert_eq!(got.from_memory, 0, "partition {p} read from local files");
    }
    assert!(
        std::fs::read_dir(proxy().data.join(&b))
            .unwrap()
            .next()
            .is_none(),
        "nothing was written to the bucket"
    );
    s.running.shutdown().await;
}

/// A bucket that goes away mid-job (credentials revoked, a lifecycle mistake): the app's next
/// flush is refused for good, its memory is released, and its next `requireBuffer` fails with
/// the cause within seconds, while another app on another bucket carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_gone_mid_job_fails_that_app_only() {
    let mut s = start(0, |c| {
        c.store_type = StoreType::MemoryHdfs;
        c.memory_store.capacity = ByteSize(16 << 20);
    })
    .await;
    let (doomed_bucket, fine_bucket) = (bucket("doomed"), bucket("fine"));
    let doomed_path = format!("s3a://{doomed_bucket}/rss");
    let fine_path = format!("s3a://{fine_bucket}/rss");
    for (app, path) in [("app_doomed", &doomed_path), ("app_fine", &fine_path)] {
        let r = register_s3(&mut s.client, app, path, s3proxy::SECRET_KEY).await;
        assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    }
    write_shuffle(&mut s.client, "app_doomed", 0, 2, 2, 2, 4_000).await;
    proxy().delete_bucket(&doomed_bucket);
    let started = Instant::now();
    // The flush that finds the bucket gone: nothing is durable, and finishShuffle says why.
    let r = s
        .client
        .finish_shuffle(proto::FinishShuffleRequest {
            app_id: "app_doomed".into(),
            shuffle_id: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    assert_names_cause(
        &r.ret_msg,
        &doomed_path,
        "NoSuchBucket",
        "create the bucket",
    );
    let registry = s.running.registry().clone();
    eventually("the doomed app's memory released", || {
        registry.store().memory().budget().snapshot().used == 0
    })
    .await;
    let r = require(&mut s.client, "app_doomed", 1_000).await;
    println!(
        "requireBuffer failed {:?} after the bucket went: {}",
        started.elapsed(),
        r.ret_msg
    );
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    assert_names_cause(
        &r.ret_msg,
        &doomed_path,
        "NoSuchBucket",
        "create the bucket",
    );

    let expected = write_shuffle(&mut s.client, "app_fine", 0, 2, 2, 3, 4_000).await;
    finish(&mut s.client, "app_fine", 0).await;
    eventually("the fine app spilled", || {
        registry.store().memory().budget().snapshot().used == 0
    })
    .await;
    let objects: usize = walk(&proxy().data.join(&fine_bucket));
    assert!(
        objects >= 2,
        "the fine app's pairs are in its bucket ({objects} files)"
    );
    assert!(!expected.is_empty());
    tokio::time::sleep(Duration::from_millis(10)).await;
    s.running.shutdown().await;
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        walk(&p)
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}
