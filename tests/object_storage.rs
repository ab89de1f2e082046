//! Object storage as the remote tier, through the real gRPC interface, against a real S3 server
//! (moto's, started by this test binary on 127.0.0.1; the tests fail when it cannot start).
//! Reads of remote data go straight to the bucket the way the Uniffle client does through s3a
//! (list the range folder, keep `<serverId>*.index`, whole records inside the data object's
//! length), never through the server.

mod common;
use spillway_test_support::s3server;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::ObjectStore;
use spillway::config::{ByteSize, StoreType};
use spillway::proto;
use spillway::proto::StatusCode;
use spillway::store::object::S3Settings;

const SECRET: &str = "s3cr3t-value-never-logged";

fn s3a_conf() -> Vec<(String, String)> {
    let server = s3server::shared();
    [
        ("fs.s3a.endpoint", server.endpoint.as_str()),
        ("fs.s3a.path.style.access", "true"),
        ("fs.s3a.access.key", "spillway"),
        ("fs.s3a.secret.key", SECRET),
        ("fs.s3a.endpoint.region", "us-east-1"),
        ("fs.s3a.retry.limit", "1"),
        ("fs.s3a.retry.interval", "50ms"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn bucket(name: &str) -> String {
    let b = format!("{name}-{}", std::process::id());
    s3server::shared().create_bucket(&b);
    b
}

/// The bucket as the client's s3a sees it.
fn reader(bucket: &str) -> Arc<dyn ObjectStore> {
    let s = S3Settings::from_conf(bucket, &s3a_conf()).unwrap();
    Arc::new(s.builder(bucket).unwrap().build().unwrap())
}

/// One partition read as `HadoopClientReadHandler` reads it: every own `*.index` of the range
/// folder, each with its data object (see `blocks_of_pair`).
async fn read_s3(
    store: &Arc<dyn ObjectStore>,
    root: &str,
    app: &str,
    shuffle: i32,
    partition: i32,
    server_id: &str,
) -> BTreeMap<i64, Bytes> {
    let folder = format!("{root}/{app}/{shuffle}/{partition}-{partition}");
    let listing: Vec<_> = store
        .list(Some(&Path::from(folder.as_str())))
        .try_collect()
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for meta in listing {
        let name = meta.location.filename().unwrap().to_owned();
        if !(name.starts_with(server_id) && name.ends_with(".index")) {
            continue;
        }
        let data_key = format!("{}.data", meta.location.as_ref().trim_end_matches(".index"));
        let index = get_all(store, meta.location.as_ref()).await;
        let data = get_all(store, &data_key).await;
        blocks_of_pair(&index, &data, &mut out);
    }
    out
}

async fn get_all(store: &Arc<dyn ObjectStore>, key: &str) -> Bytes {
    store
        .get(&Path::from(key))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
}

async fn keys_under(store: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<String> {
    store
        .list(Some(&Path::from(prefix)))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap()
}

async fn unregister(client: &mut Client, app: &str) {
    let r = client
        .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest { app_id: app.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
}

/// `MEMORY_HDFS` with an `s3a://` path: finishShuffle spills everything to the bucket as
/// immutable object pairs in the client's layout, the client reads them back byte-identical,
/// and unregistering deletes the app's objects. The secret key never reaches the server's
/// conf view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_hdfs_on_s3_round_trip() {
    let b = bucket("roundtrip");
    let mut s = start(0, |c| {
        c.store_type = StoreType::MemoryHdfs;
        // The embedded coordinator, so its `/api/app/appInfos` can be checked below.
        c.coordinator.enabled = true;
        c.heartbeat_interval = Duration::from_millis(100);
    })
    .await;
    let app = "application_1_0001_31";
    register_with_coordinator(&s, app).await;
    // The s3a keys in the request's RemoteStorageInfo conf, as a client sends what the
    // coordinator's cluster conf gave it.
    let path = format!("s3a://{b}/rss");
    register_remote_with(&mut s.client, app, 0, 0..4, &path, "alice", s3a_conf()).await;
    let expected = write_shuffle(&mut s.client, app, 0, 3, 4, 5, 10_000).await;
    finish(&mut s.client, app, 0).await;
    assert_eq!(
        s.running
            .registry()
            .store()
            .memory()
            .budget()
            .snapshot()
            .used,
        0,
        "all spilled"
    );
    let store = reader(&b);
    let id = s.running.server_id.clone();
    for (p, want) in &expected {
        let served = read_partition(&mut s.client, app, 0, *p).await;
        assert!(served.blocks.is_empty(), "nothing left on the server");
        let got = read_s3(&store, "rss", app, 0, *p, &id).await;
        assert_eq!(&got, want, "partition {p} from S3");
    }
    let keys = keys_under(&store, &format!("rss/{app}")).await;
    assert!(!keys.is_empty());
    for k in &keys {
        let name = k.rsplit('/').next().unwrap();
        assert!(name.starts_with(&format!("{id}_")), "{name}");
    }
    // The coordinator counts the objects as the app's remote ("hadoop") bytes, as Java's
    // counts any remote file system.
    let payload: i64 = expected
        .values()
        .flat_map(|blocks| blocks.values())
        .map(|b| b.len() as i64)
        .sum();
    let info = app_info_when(&s, app, |i| i["hadoopTotalSize"].as_i64() > Some(0)).await;
    assert_eq!(info["partitionNum"], 4, "{info}");
    assert_eq!(info["memorySize"], 0, "{info}");
    assert_eq!(info["localTotalSize"], 0, "{info}");
    assert!(
        info["hadoopTotalSize"].as_i64().unwrap() >= payload,
        "{info}: payload {payload}"
    );
    assert_eq!(info["totalSize"], payload, "{info}");
    // The flush metrics label the bucket as `storage_host`, as Java labels a NameNode.
    let metrics = reqwest::get(format!(
        "http://{}/metrics/server?name[]=total_hadoop_write_data",
        s.running.http_addr
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let metrics: serde_json::Value = serde_json::from_str(&metrics).unwrap();
    let by_host: BTreeMap<String, f64> = metrics["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let names = m["labelNames"].as_array().unwrap();
            let at = names.iter().position(|n| n == "storage_host").unwrap();
            (
                m["labelValues"][at].as_str().unwrap().to_owned(),
                m["value"].as_f64().unwrap(),
            )
        })
        .collect();
    assert!(by_host.get(&b).is_some_and(|v| *v > 0.0), "{metrics}");
    assert_eq!(by_host.get(&b), by_host.get("ALL"), "{metrics}");
    unregister(&mut s.client, app).await;
    let registry = s.running.registry().clone();
    eventually("app purge", || registry.purges_running() == 0).await;
    assert!(
        keys_under(&store, &format!("rss/{app}")).await.is_empty(),
        "the app's objects are deleted"
    );
    s.running.shutdown().await;
}

/// `registerApplicationInfo` to the embedded coordinator of `s`, as the client's driver does.
async fn register_with_coordinator(s: &TestServer, app: &str) {
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", s.running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let r = proto::coordinator_server_client::CoordinatorServerClient::new(channel)
        .register_application_info(proto::ApplicationInfoRequest {
            app_id: app.into(),
            user: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
}

/// The app's entry in the coordinator's `/api/app/appInfos`, once `ready` holds for it.
async fn app_info_when(
    s: &TestServer,
    app: &str,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let url = format!("http://{}/api/app/appInfos", s.running.http_addr);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        let info = body["data"]
            .as_array()
            .and_then(|apps| apps.iter().find(|a| a["appId"] == app).cloned());
        match info {
            Some(info) if ready(&info) => return info,
            other => assert!(
                tokio::time::Instant::now() < deadline,
                "appInfos never ready for {app}: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `MEMORY_LOCALFILE_HDFS` with every spill preferring the remote tier and a bucket that does
/// not exist: the registration check finds it, and the app is served from local files for the
/// rest of its life (a missing bucket is not a passing state; docs/operating.md). Once the
/// bucket exists, the next registration that is checked again (here another user's: a new
/// cache key) spills to S3. No block is lost on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_falls_back_to_local_disk() {
    let b = format!("fallback-{}", std::process::id());
    let mut s = start(1, |c| {
        c.store_type = StoreType::MemoryLocalfileHdfs;
        c.hdfs_store.cold_storage_threshold_size = ByteSize(1);
        c.hdfs_store.failure_cooldown = Duration::from_millis(500);
        // The server's own s3a keys (Java: rss.server.hadoop.fs.s3a.*), not the app's.
        for (k, v) in s3a_conf() {
            c.hdfs_store.hadoop_conf.insert(k, v);
        }
    })
    .await;
    let id = s.running.server_id.clone();
    let app = "application_1_0002_31";
    let path = format!("s3a://{b}/rss");
    register_remote(&mut s.client, app, 0, 0..2, &path, "alice").await;
    let expected = write_shuffle(&mut s.client, app, 0, 2, 2, 4, 8_000).await;
    finish(&mut s.client, app, 0).await;
    let store = reader(&b);
    for (p, want) in &expected {
        let served = read_partition(&mut s.client, app, 0, *p).await;
        assert_eq!(&served.blocks, want, "partition {p} on local disk");
        assert_eq!(served.from_files, want.len());
    }
    s3server::shared().create_bucket(&b);
    // The refused app stays on local disk, even for a new shuffle.
    register_remote(&mut s.client, app, 1, 0..1, &path, "alice").await;
    write_shuffle(&mut s.client, app, 1, 1, 1, 2, 8_000).await;
    finish(&mut s.client, app, 1).await;
    assert!(keys_under(&store, &format!("rss/{app}")).await.is_empty());
    unregister(&mut s.client, app).await;
    // A new app, checked again, reaches S3.
    let app = "application_1_0002_32";
    register_remote(&mut s.client, app, 1, 0..2, &path, "bob").await;
    let later = write_shuffle(&mut s.client, app, 1, 2, 2, 4, 8_000).await;
    finish(&mut s.client, app, 1).await;
    for (p, want) in &later {
        let folder = format!("rss/{app}/1/{p}-{p}");
        let keys = keys_under(&store, &folder).await;
        assert!(
            !keys.is_empty(),
            "partition {p} of the second shuffle is on S3"
        );
        assert!(
            keys.iter()
                .all(|k| k.rsplit('/').next().unwrap().starts_with(&format!("{id}_"))),
            "{keys:?}"
        );
        let mut all = read_partition(&mut s.client, app, 1, *p).await.blocks;
        all.extend(read_s3(&store, "rss", app, 1, *p, &id).await);
        assert_eq!(
            &all, want,
            "partition {p}: every block, from S3 or local disk"
        );
    }
    let conf_view = reqwest::get(format!(
        "http://{}/api/shuffleServer/conf",
        s.running.http_addr
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(conf_view.contains("fs.s3a.endpoint"), "{conf_view}");
    assert!(
        !conf_view.contains(SECRET),
        "the secret key is masked: {conf_view}"
    );
    unregister(&mut s.client, app).await;
    s.running.shutdown().await;
}

/// The S3 server stops answering mid-job (frozen: every request hangs) and comes back:
/// `MEMORY_LOCALFILE_HDFS` flushes time out and go to local disk meanwhile, later ones reach
/// S3 again, and every acknowledged block reads back: from the server, or from the bucket as
/// the client reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_stops_mid_job_loses_nothing() {
    // A server of this test's own: freezing the shared one would stall the other tests.
    let s3 = s3server::start();
    let b = format!("frozen-{}", std::process::id());
    s3.create_bucket(&b);
    let conf: Vec<(String, String)> = s3a_conf()
        .into_iter()
        .map(|(k, v)| {
            if k == "fs.s3a.endpoint" {
                (k, s3.endpoint.clone())
            } else {
                (k, v)
            }
        })
        .chain([("fs.s3a.connection.timeout".to_owned(), "1s".to_owned())])
        .collect();
    let mut s = start(1, |c| {
        c.store_type = StoreType::MemoryLocalfileHdfs;
        c.hdfs_store.cold_storage_threshold_size = ByteSize(1);
        c.hdfs_store.write_timeout = Duration::from_secs(3);
        c.hdfs_store.failure_cooldown = Duration::from_millis(500);
        for (k, v) in conf.clone() {
            c.hdfs_store.hadoop_conf.insert(k, v);
        }
    })
    .await;
    let id = s.running.server_id.clone();
    let app = "application_1_0003_31";
    let store = {
        let settings = S3Settings::from_conf(&b, &conf).unwrap();
        Arc::new(settings.builder(&b).unwrap().build().unwrap()) as Arc<dyn ObjectStore>
    };
    let mut expected = BTreeMap::new();
    for shuffle in 0..3 {
        register_remote(
            &mut s.client,
            app,
            shuffle,
            0..2,
            &format!("s3a://{b}/rss"),
            "alice",
        )
        .await;
        if shuffle == 1 {
            s3.freeze();
        }
        let written = write_shuffle(&mut s.client, app, shuffle, 2, 2, 4, 8_000).await;
        finish(&mut s.client, app, shuffle).await;
        if shuffle == 1 {
            s3.thaw();
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        expected.insert(shuffle, written);
    }
    for (shuffle, partitions) in &expected {
        for (p, want) in partitions {
            let served = read_partition(&mut s.client, app, *shuffle, *p).await;
            let remote = read_s3(&store, "rss", app, *shuffle, *p, &id).await;
            if *shuffle == 1 {
                // Frozen: every flush of this shuffle went to local disk.
                assert_eq!(served.from_files, want.len(), "shuffle 1 partition {p}");
                assert!(remote.is_empty(), "shuffle 1 partition {p}: nothing on S3");
            } else {
                assert!(
                    !remote.is_empty(),
                    "shuffle {shuffle} partition {p} reached S3"
                );
            }
            let mut all = served.blocks;
            all.extend(remote);
            assert_eq!(&all, want, "shuffle {shuffle} partition {p}: every block");
        }
    }
    unregister(&mut s.client, app).await;
    s.running.shutdown().await;
}

/// An app at its local-disk quota under `MEMORY_LOCALFILE_HDFS` with a bucket path is not
/// refused: its next spills go to the bucket, every block reads back (local ones from the
/// server, the rest from the bucket as the client reads it), and only its remote quota stops
/// it, with the final status naming that quota and its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_at_its_local_quota_overflows_to_the_bucket_until_its_remote_quota() {
    let b = bucket("overflow");
    let mut s = start(1, |c| {
        c.store_type = StoreType::MemoryLocalfileHdfs;
        // Only the quota sends batches to the bucket (none is this large).
        c.hdfs_store.cold_storage_threshold_size = ByteSize(1 << 30);
        c.quota.app_local_disk_bytes = Some(ByteSize(100 << 10));
        c.quota.app_remote_bytes = Some(ByteSize(200 << 10));
        for (k, v) in s3a_conf() {
            c.hdfs_store.hadoop_conf.insert(k, v);
        }
    })
    .await;
    let id = s.running.server_id.clone();
    let app = "application_1_0002_41";
    let path = format!("s3a://{b}/rss");
    let store = reader(&b);
    // Shuffle 0: 2 partitions × 2 maps × 4 blocks × 16 KB = 256 KB, to local disk (the quota is
    // checked per batch, and both partitions' batches leave memory at once).
    register_remote(&mut s.client, app, 0, 0..2, &path, "alice").await;
    let first = write_shuffle(&mut s.client, app, 0, 2, 2, 4, 16_000).await;
    finish(&mut s.client, app, 0).await;
    assert!(keys_under(&store, &format!("rss/{app}")).await.is_empty());
    // Over its local quota now, it still writes: shuffle 1 goes to the bucket.
    register_remote(&mut s.client, app, 1, 0..2, &path, "alice").await;
    let second = write_shuffle(&mut s.client, app, 1, 1, 2, 4, 16_000).await;
    finish(&mut s.client, app, 1).await;
    for (shuffle, expected) in [(0, &first), (1, &second)] {
        for (p, want) in expected {
            let mut all = read_partition(&mut s.client, app, shuffle, *p).await.blocks;
            all.extend(read_s3(&store, "rss", app, shuffle, *p, &id).await);
            assert_eq!(&all, want, "shuffle {shuffle} partition {p}: every block");
        }
    }
    for p in 0..2 {
        let keys = keys_under(&store, &format!("rss/{app}/1/{p}-{p}")).await;
        assert!(
            !keys.is_empty(),
            "shuffle 1 partition {p} overflowed to the bucket"
        );
    }
    // Shuffle 2 takes it past its remote quota: then it is refused, naming that quota.
    register_remote(&mut s.client, app, 2, 0..2, &path, "alice").await;
    write_shuffle(&mut s.client, app, 2, 1, 2, 4, 16_000).await;
    finish(&mut s.client, app, 2).await;
    let r = s
        .client
        .require_buffer(proto::RequireBufferRequest {
            require_size: 1024,
            app_id: app.into(),
            shuffle_id: 2,
            partition_ids: vec![0],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    assert!(r.ret_msg.contains("remote-storage quota"), "{}", r.ret_msg);
    assert!(
        r.ret_msg.contains("quota.app_remote_bytes"),
        "{}",
        r.ret_msg
    );
    unregister(&mut s.client, app).await;
    s.running.shutdown().await;
}
