//! Tests of the object-store tier against a real S3 server (moto's, one per test binary): the
//! shared conformance suites, then what only this tier does: the client's names, one object
//! pair per flush, multipart uploads, deletes that leave other servers' objects alone, and a
//! store that refuses. They fail (never skip) when the S3 server cannot start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::ObjectStore;

use super::*;
use crate::store::conformance::{
    self, assert_blocks_eq, part, payload, read_back, test_block, Registering,
};
use crate::store::index::IndexEntry;
use spillway_test_support::s3server;

const SERVER_ID: &str = "127.0.0.1-19999";

fn fresh_bucket(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let bucket = format!(
        "{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let server = s3server::shared();
    server.create_bucket(&bucket);
    bucket
}

fn conf(endpoint: &str) -> Vec<(String, String)> {
    [
        ("fs.s3a.endpoint", endpoint),
        ("fs.s3a.path.style.access", "true"),
        ("fs.s3a.access.key", "spillway-test"),
        ("fs.s3a.secret.key", "spillway-test-secret"),
        ("fs.s3a.endpoint.region", "us-east-1"),
        ("fs.s3a.retry.limit", "2"),
        ("fs.s3a.retry.interval", "50ms"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn options(prefix: &str) -> ObjectOptions {
    ObjectOptions {
        file_prefix: prefix.to_owned(),
        max_concurrency: 8,
        write_timeout: Duration::from_secs(60),
        failure_cooldown: Duration::from_secs(1),
        hadoop_conf: Vec::new(),
    }
}

fn remote(bucket: &str, endpoint: &str, extra: &[(&str, &str)]) -> RemoteStorage {
    let mut c = conf(endpoint);
    c.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    RemoteStorage {
        path: format!("s3a://{bucket}/rss/root"),
        conf: c,
    }
}

/// `prefix`'s tier on `remote`, registering each app the suites pick on first use.
fn registering_as(prefix: &str, remote: RemoteStorage) -> Registering<ObjectTier> {
    Registering::new(ObjectTier::new(options(prefix)), move |tier, app| {
        if !tier.serves(app) {
            tier.register_app(app, &remote).expect("register");
        }
    })
}

fn registering(bucket: &str, extra: &[(&str, &str)]) -> Registering<ObjectTier> {
    let endpoint = s3server::shared().endpoint.clone();
    registering_as(SERVER_ID, remote(bucket, &endpoint, extra))
}

/// A client of the test's own on the bucket, to look at what the tier wrote.
fn admin(bucket: &str) -> Arc<dyn ObjectStore> {
    let server = s3server::shared();
    let s = S3Settings::from_conf(bucket, &conf(&server.endpoint)).unwrap();
    Arc::new(s.builder(bucket).unwrap().build().unwrap())
}

async fn keys(store: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = store
        .list(Some(&Path::from(prefix)))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    keys.sort();
    keys
}

/// The conformance suites against the test's S3 server, or against your own store:
/// `SPILLWAY_S3_URL=s3a://bucket/some/root` plus any s3a keys as
/// `SPILLWAY_S3_CONF="fs.s3a.endpoint=https://…,fs.s3a.path.style.access=true"` (credentials
/// from the keys there, else the AWS default chain), e.g.
/// `SPILLWAY_S3_URL=s3a://my-bucket/spillway-conformance cargo test --lib object::tests::conformance`.
/// The suites write under `<root>/conformance-*` and delete what they wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance() {
    let tier = match std::env::var("SPILLWAY_S3_URL") {
        Ok(url) => {
            let conf = std::env::var("SPILLWAY_S3_CONF")
                .unwrap_or_default()
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .collect();
            registering_as(SERVER_ID, RemoteStorage { path: url, conf })
        }
        Err(_) => registering(&fresh_bucket("conformance"), &[]),
    };
    conformance::run_all(&tier).await;
}

/// Multipart uploads (a threshold and part size of 5 MiB, S3's smallest part) pass the same
/// suites and read back a 13 MiB flush intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_flushes() {
    let bucket = fresh_bucket("multipart");
    let t = registering(
        &bucket,
        &[
            ("fs.s3a.multipart.threshold", "5M"),
            ("fs.s3a.multipart.size", "5M"),
        ],
    );
    let app = AppId::parse("app_multipart").unwrap();
    let p = part(&app, 0, 1);
    let blocks: Vec<_> = (0..13)
        .map(|i| test_block(i, 1, payload(i as u64, 1 << 20)))
        .collect();
    t.append(&p, &BlockBatch::new(blocks.clone()))
        .await
        .unwrap();
    assert_blocks_eq(&read_back(&t, &p).await, &blocks);
    let admin = admin(&bucket);
    let listed = keys(&admin, "rss/root/app_multipart/0/1-1").await;
    assert_eq!(listed.len(), 2, "one pair: {listed:?}");
    conformance::run_all(&t).await;
}

/// The names the client lists: `<root>/<app>/<shuffle>/<start>-<end>/<serverId>_…` pairs, one
/// new pair per flush (never an append or overwrite), in write order by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_new_pair_per_flush_under_the_clients_folder() {
    let bucket = fresh_bucket("layout");
    let t = registering(&bucket, &[]);
    let app = AppId::parse("app_layout").unwrap();
    let p = part(&app, 3, 2);
    for i in 0..3 {
        t.append(
            &p,
            &BlockBatch::new(vec![test_block(i, 1, payload(i as u64, 100))]),
        )
        .await
        .unwrap();
    }
    let listed = keys(&admin(&bucket), "rss/root/app_layout/3/2-2").await;
    assert_eq!(listed.len(), 6, "{listed:?}");
    for pair in listed.chunks(2) {
        let data = pair[0].strip_prefix("rss/root/app_layout/3/2-2/").unwrap();
        assert!(data.starts_with(&format!("{SERVER_ID}_")), "{data}");
        assert!(
            data.ends_with(".data") && pair[1].ends_with(".index"),
            "{pair:?}"
        );
        assert_eq!(
            data.trim_end_matches(".data"),
            pair[1]
                .rsplit('/')
                .next()
                .unwrap()
                .trim_end_matches(".index")
        );
    }
    // Each index counts from 0 in its own data object.
    let admin = admin(&bucket);
    let index = admin
        .get(&Path::from(listed[1].as_str()))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let records = IndexEntry::decode_all(&index);
    assert_eq!((records.len(), records[0].offset), (1, 0));
}

/// A purge deletes this server's objects only: another server's pair in the same folder and a
/// server whose id this one's is a prefix of keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_leave_other_servers_objects() {
    let bucket = fresh_bucket("purge");
    let endpoint = s3server::shared().endpoint.clone();
    let ours = registering(&bucket, &[]);
    let theirs = registering_as(&format!("{SERVER_ID}0"), remote(&bucket, &endpoint, &[]));
    let app = AppId::parse("app_shared").unwrap();
    let p = part(&app, 0, 0);
    let batch = BlockBatch::new(vec![test_block(1, 1, payload(1, 10))]);
    ours.append(&p, &batch).await.unwrap();
    theirs.append(&p, &batch).await.unwrap();
    let freed = ours.purge(&PurgeScope::App(app.clone())).await.unwrap();
    assert!(freed > 0);
    let left = keys(&admin(&bucket), "rss/root/app_shared").await;
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter().all(|k| k.contains(&format!("{SERVER_ID}0_"))),
        "{left:?}"
    );
    assert_blocks_eq(&read_back(&theirs, &p).await, batch.blocks());
}

/// A bucket that does not exist is an answer no retry changes: the flush fails with
/// `StorageRefused` naming the registered path, the store's code and the setting to fix, and
/// the tier itself stays healthy and tryable for other apps. Once the bucket exists, the same
/// append succeeds (the router decides whether to try again; the tier keeps no verdict).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_refuses_the_app_not_the_tier() {
    let bucket = fresh_bucket("refuse");
    let server = s3server::shared();
    let tier = ObjectTier::new(options(SERVER_ID));
    let app = AppId::parse("app_refused").unwrap();
    let missing = format!("{bucket}-missing");
    let remote = RemoteStorage {
        path: format!("s3a://{missing}/rss"),
        conf: conf(&server.endpoint),
    };
    tier.register_app(&app, &remote).unwrap();
    let p = part(&app, 0, 0);
    let batch = BlockBatch::new(vec![test_block(1, 1, payload(1, 10))]);
    let e = tier.append(&p, &batch).await.unwrap_err();
    let Error::StorageRefused { path, answer, fix } = &e else {
        panic!("{e}");
    };
    assert_eq!(path, &remote.path);
    assert!(answer.contains("NoSuchBucket"), "{answer}");
    assert!(fix.contains("create the bucket"), "{fix}");
    assert!(
        tier.health().writable,
        "one app's settings do not fail the tier"
    );
    assert!(tier.may_try());
    // The registration check finds the same, before any block is accepted.
    match tier.probe(&remote).await {
        Outcome::Refused(r) => assert!(r.answer.contains("NoSuchBucket"), "{r:?}"),
        other => panic!("{other:?}"),
    }
    server.create_bucket(&missing);
    assert!(matches!(tier.probe(&remote).await, Outcome::Usable));
    tier.append(&p, &batch).await.unwrap();
}

#[test]
fn unknown_apps_and_bad_paths_are_refused() {
    let tier = ObjectTier::new(options(SERVER_ID));
    let app = AppId::parse("app_bad").unwrap();
    for path in ["s3a://Bad_Bucket/x", "hdfs://nn/x"] {
        let e = tier
            .register_app(
                &app,
                &RemoteStorage {
                    path: path.into(),
                    conf: Vec::new(),
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains(path), "{e}");
    }
    assert!(!tier.serves(&app));
}

/// The leaked-data sweep deletes this server's objects of apps the registry no longer knows
/// (a purge that could not run), keeps live apps' and other servers' objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_deletes_leaked_apps_only() {
    let bucket = fresh_bucket("sweep");
    let endpoint = s3server::shared().endpoint.clone();
    let ours = registering(&bucket, &[]);
    let theirs = registering_as("10.0.0.9-19999", remote(&bucket, &endpoint, &[]));
    let batch = BlockBatch::new(vec![test_block(1, 1, payload(1, 10))]);
    let (leaked, live) = (
        AppId::parse("app_leaked").unwrap(),
        AppId::parse("app_live").unwrap(),
    );
    for app in [&leaked, &live] {
        ours.append(&part(app, 0, 0), &batch).await.unwrap();
        theirs.append(&part(app, 0, 0), &batch).await.unwrap();
    }
    // The leaked app's entry is gone (its app purge "failed"); its objects are not.
    ours.tier.apps.lock().remove(&leaked);
    let swept = ours.tier.sweep_leaked(|app| app == &live).await;
    assert_eq!(swept, vec![leaked.clone()]);
    let admin = admin(&bucket);
    let left = keys(&admin, "rss/root/app_leaked").await;
    assert_eq!(left.len(), 2, "only the other server's pair: {left:?}");
    assert!(left.iter().all(|k| k.contains("10.0.0.9-19999_")));
    assert_eq!(keys(&admin, "rss/root/app_live").await.len(), 4);
    assert!(ours.tier.sweep_leaked(|app| app == &live).await.is_empty());
}

/// A loopback proxy in front of the S3 server whose first `faults` connections fail: `503
/// SlowDown` (S3's throttling answer) or, with `hang`, no answer at all (a timeout). Later
/// connections are forwarded. Returns its endpoint and the count of faults served.
async fn faulty_proxy(faults: usize, hang: bool) -> (String, Arc<AtomicU64>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = s3server::shared()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let served = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&served);
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let n = count.load(Ordering::SeqCst) as usize;
            if n < faults {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    // Read the request head, then answer (or not).
                    let mut buf = vec![0u8; 64 << 10];
                    let _ = conn.read(&mut buf).await;
                    if hang {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    }
                    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
                    let answer = format!(
                        "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
                continue;
            }
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                }
            });
        }
    });
    (endpoint, served)
}

/// Throttling (503 SlowDown) and timeouts are retried with backoff by the S3 client: the flush
/// succeeds after them, with nothing lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_and_timeouts_are_retried() {
    for hang in [false, true] {
        let bucket = fresh_bucket(if hang { "timeout" } else { "slowdown" });
        let (endpoint, served) = faulty_proxy(2, hang).await;
        let t = registering_as(
            SERVER_ID,
            remote(
                &bucket,
                &endpoint,
                &[
                    ("fs.s3a.retry.limit", "4"),
                    ("fs.s3a.connection.timeout", "1s"),
                ],
            ),
        );
        let app = AppId::parse("app_retried").unwrap();
        let p = part(&app, 0, 0);
        let batch = BlockBatch::new(vec![test_block(1, 1, payload(1, 1000))]);
        t.append(&p, &batch).await.expect("retried to success");
        assert_eq!(served.load(Ordering::SeqCst), 2, "both faults were met");
        assert_blocks_eq(&read_back(&t, &p).await, batch.blocks());
        assert!(t.tier.health().writable);
    }
}
