//! Tests of the HDFS tier against a real HDFS (the MiniHdfs launcher, one per test binary):
//! the shared conformance suites, then what only this tier does — Uniffle's file names, the
//! owner of the files, a retired pair after a failed append, torn index records, and purges
//! that leave other servers' files alone. They fail (never skip) when HDFS cannot start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use hdfs_native::{Client, ClientBuilder, HdfsError, WriteOptions};

use super::*;
use crate::store::conformance::{
    self, assert_blocks_eq, part, payload, read_back, test_block, Registering,
};
use crate::store::index::IndexEntry;
use crate::store::Block;
use spillway_test_support::minicluster;

const SERVER_ID: &str = "127.0.0.1-19999";

/// A root no other test (or earlier run) uses.
fn fresh_root(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("/{name}-{nanos}-{}", N.fetch_add(1, Ordering::Relaxed))
}

fn options(slots: usize) -> HdfsOptions {
    HdfsOptions {
        file_prefix: SERVER_ID.to_owned(),
        max_concurrency: 4,
        partition_write_max_concurrency: slots,
        partition_write_max_concurrency_limit: i32::MAX as usize,
        write_timeout: Duration::from_secs(60),
        failure_cooldown: Duration::from_secs(1),
        keep_open: Duration::from_secs(2),
        max_open_pairs: 40,
        identity: Identity::default(),
        hadoop_conf: Vec::new(),
    }
}

async fn cluster_url() -> String {
    tokio::task::spawn_blocking(|| minicluster::shared().url.clone())
        .await
        .expect("MiniHdfs start task")
}

/// A client of the test's own, as the superuser (the OS user running the cluster).
fn admin(url: &str) -> Client {
    ClientBuilder::new()
        .with_url(url)
        .build()
        .expect("admin client")
}

async fn registering(slots: usize, name: &str) -> Registering<HdfsTier> {
    let url = cluster_url().await;
    let remote = RemoteStorage {
        path: format!("{url}{}", fresh_root(name)),
        conf: vec![("dfs.client.socket-timeout".into(), "30000".into())],
    };
    Registering::new(HdfsTier::new(options(slots)), move |tier, app| {
        if !tier.serves(app) {
            tier.register_app(app, "alice", &remote).expect("register");
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_one_writer_per_partition() {
    let t = registering(1, "conformance-1").await;
    conformance::run_all(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_pooled_writers() {
    let t = registering(4, "conformance-4").await;
    conformance::run_all(&t).await;
}

/// `keep_open = 0s`: every append closes its pair, as the Java server does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_closing_after_every_append() {
    let url = cluster_url().await;
    let remote = RemoteStorage {
        path: format!("{url}{}", fresh_root("conformance-closing")),
        conf: Vec::new(),
    };
    let t = Registering::new(
        HdfsTier::new(HdfsOptions {
            keep_open: Duration::ZERO,
            ..options(2)
        }),
        move |tier, app| {
            if !tier.serves(app) {
                tier.register_app(app, "alice", &remote).expect("register");
            }
        },
    );
    conformance::run_all(&t).await;
}

/// A tier with `opts` on a fresh root, the app registered there, and an admin client of the
/// cluster.
async fn tier_for(name: &str, app: &AppId, opts: HdfsOptions) -> (Arc<HdfsTier>, Client, String) {
    let url = cluster_url().await;
    let root = fresh_root(name);
    let tier = HdfsTier::new(opts);
    tier.register_app(
        app,
        "",
        &RemoteStorage {
            path: format!("{url}{root}"),
            conf: Vec::new(),
        },
    )
    .unwrap();
    (tier, admin(&url), root)
}

/// Registers `app` for the user alice at `path`; its partition 0 of shuffle 0.
fn registered_by_alice(tier: &HdfsTier, app: &str, path: String) -> PartitionKey {
    let app = AppId::parse(app).unwrap();
    let remote = RemoteStorage {
        path,
        conf: Vec::new(),
    };
    tier.register_app(&app, "alice", &remote).unwrap();
    PartitionKey::new(app, 0, crate::ids::PartitionRange::new(0, 0).unwrap())
}

/// HDFS lengths as the Uniffle client takes them (`getFileStatus`), 0 for a missing file.
async fn length(client: &Client, path: &str) -> u64 {
    match client.get_file_info(path).await {
        Ok(s) => s.length as u64,
        Err(HdfsError::FileNotFound(_)) => 0,
        Err(e) => panic!("stat {path}: {e}"),
    }
}

/// Whether the tier holds `p`'s first writer slot's file pair open.
async fn slot_open(tier: &HdfsTier, p: &PartitionKey) -> bool {
    let entry = tier.entry(&p.app).unwrap();
    let slots = entry
        .partitions
        .lock()
        .get(&(p.shuffle, p.range))
        .cloned()
        .unwrap();
    let open = slots.slots[0].lock().await.open.is_some();
    open
}

/// The pair stays open between appends, and what an append wrote is visible the moment it
/// returns (when the spiller frees its memory): the NameNode reports the data and index
/// lengths a reader checks records against. A reader polling throughout never sees more
/// index records than data to back them. Closed, every block reads back once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_are_visible_before_their_files_close() {
    const BLOCK: usize = 1000;
    let app = AppId::parse("app-visible").unwrap();
    let opts = HdfsOptions {
        keep_open: Duration::from_secs(30),
        ..options(1)
    };
    let (tier, admin, root) = tier_for("visible", &app, opts).await;
    let p = part(&app, 0, 0);
    let dir = format!("{root}/app-visible/0/0-0");
    let (data, index) = (
        format!("{dir}/{SERVER_ID}_0.data"),
        format!("{dir}/{SERVER_ID}_0.index"),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let (admin, data, index, stop) = (admin.clone(), data.clone(), index.clone(), stop.clone());
        tokio::spawn(async move {
            let mut looks = 0u32;
            while !stop.load(Ordering::Relaxed) {
                // Index first: the data can only have grown by the time it is asked.
                let records = length(&admin, &index).await / 40;
                let data_len = length(&admin, &data).await;
                assert!(
                    data_len >= records * BLOCK as u64,
                    "{records} index records visible over {data_len} data bytes"
                );
                looks += 1;
            }
            looks
        })
    };
    let mut want = Vec::new();
    for i in 0..20i64 {
        let blocks: Vec<Block> = (0..3)
            .map(|j| test_block(i * 3 + j, i, payload((i * 3 + j) as u64, BLOCK)))
            .collect();
        want.extend(blocks.iter().cloned());
        tier.append(&p, &BlockBatch::new(blocks)).await.unwrap();
        let n = want.len() as u64;
        assert_eq!(
            length(&admin, &data).await,
            n * BLOCK as u64,
            "data visible after append {i}"
        );
        assert_eq!(
            length(&admin, &index).await,
            n * 40,
            "index visible after append {i}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    assert!(poller.await.expect("the reader's view stayed consistent") > 0);
    // Still open after twenty appends: the tier holds the pair, and the NameNode refuses
    // another writer the lease (a closed file would be opened for append).
    assert!(slot_open(&tier, &p).await, "the tier closed the pair");
    for f in [&data, &index] {
        match admin.append(f).await {
            Err(HdfsError::AlreadyExists(m)) if m.contains("lease is currently owned") => {}
            Err(e) => panic!("append to {f}: {e}"),
            Ok(_) => panic!("{f} was closed between appends: another writer got its lease"),
        }
    }
    tier.close_open_pairs().await;
    assert!(
        admin.recover_lease(&data).await.unwrap(),
        "closed: no lease to recover"
    );
    assert!(
        admin.recover_lease(&index).await.unwrap(),
        "closed: no lease to recover"
    );
    assert_blocks_eq(&read_back(tier.as_ref(), &p).await, &want);
    tier.purge(&PurgeScope::App(app)).await.unwrap();
}

/// An idle pair is closed by itself after `keep_open`; past `max_open_pairs`, an append
/// closes its own pair at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_pairs_close_and_open_pairs_are_capped() {
    let app = AppId::parse("app-idle").unwrap();
    let opts = HdfsOptions {
        keep_open: Duration::from_millis(300),
        max_open_pairs: 1,
        ..options(1)
    };
    let (tier, admin, root) = tier_for("idle", &app, opts).await;
    let (kept, capped) = (part(&app, 0, 0), part(&app, 0, 1));
    let batch = BlockBatch::new(vec![test_block(1, 0, payload(1, 100))]);
    tier.append(&kept, &batch).await.unwrap();
    tier.append(&capped, &batch).await.unwrap();
    let capped_data = format!("{root}/app-idle/0/1-1/{SERVER_ID}_0.data");
    assert!(
        admin.recover_lease(&capped_data).await.unwrap(),
        "over the cap, the append closed its pair"
    );
    let kept_data = format!("{root}/app-idle/0/0-0/{SERVER_ID}_0.data");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        // Looked at through the tier's slot, not the NameNode: asking it to recover the
        // lease of a pair still open would take the file from the writer.
        if !slot_open(&tier, &kept).await {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the idle pair was never closed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        admin.recover_lease(&kept_data).await.unwrap(),
        "closed once idle"
    );
    // The permit came back: the next append keeps its pair open again.
    tier.append(&capped, &batch).await.unwrap();
    assert!(slot_open(&tier, &capped).await);
    let mut want = batch.blocks().to_vec();
    want.extend(batch.blocks().iter().cloned());
    assert_blocks_eq(&read_back(tier.as_ref(), &capped).await, &want);
    tier.purge(&PurgeScope::App(app)).await.unwrap();
}

/// A remote root only `owner` may write (755), as an operator prepares it for the server.
async fn root_owned_by(admin: &Client, name: &str, owner: &str) -> String {
    let root = fresh_root(name);
    admin.mkdirs(&root, 0o755, true).await.expect("mkdirs");
    admin
        .set_owner(&root, Some(owner), None)
        .await
        .expect("chown");
    root
}

fn identity(simple_user: &str, write_as: WriteAs) -> HdfsOptions {
    let mut o = options(1);
    o.identity = Identity {
        simple_user: Some(simple_user.to_owned()),
        write_as,
        ..Identity::default()
    };
    o
}

/// An app's `maxConcurrencyPerPartitionToWrite`, as Java's `getMaxConcurrencyWriting`: above 0
/// it is capped by the server's limit, else the server's own value applies. Seen in the file
/// names: one writer names its pair `<id>_<fail>`, several `<id>_<writer>_<fail>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_ask_for_their_own_partition_writers_up_to_the_limit() {
    let url = cluster_url().await;
    let admin = admin(&url);
    for (requested, writers, name) in [
        (0, 1, format!("{SERVER_ID}_0")),
        (5, 2, format!("{SERVER_ID}_0_0")),
        (1, 1, format!("{SERVER_ID}_0")),
    ] {
        let root = root_owned_by(&admin, "writers", "rss").await;
        let mut opts = identity("rss", WriteAs::Auto);
        opts.partition_write_max_concurrency = 1;
        opts.partition_write_max_concurrency_limit = 2;
        let tier = HdfsTier::new(opts);
        assert_eq!(
            tier.writers_for(requested),
            writers,
            "requested {requested}"
        );
        let p = registered_by_alice(&tier, "app-writers_1", format!("{url}{root}/"));
        tier.set_partition_writers(&p.app, requested);
        let batch = BlockBatch::new(vec![test_block(1, 0, payload(1, 64))]);
        tier.append(&p, &batch).await.expect("append");
        let mut names: Vec<String> = admin
            .list_status(&format!("{root}/app-writers_1/0/0-0"), false)
            .await
            .expect("list")
            .into_iter()
            .map(|s| s.path.rsplit('/').next().unwrap().to_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![format!("{name}.data"), format!("{name}.index")],
            "requested {requested}"
        );
    }
}

/// The Uniffle layout, names and identity: `<root>/<app>/<shuffle>/<s>-<e>/<id>_<fail>.{data,index}`
/// with one slot, `<id>_<slot>_<fail>` with several; under simple authentication owned by the
/// server's own user (not the app's, as the Java server does), in a root only that user may
/// write; mode 644, directories 755; the data file is the blocks back to back and the index
/// their records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_follow_uniffle_naming_and_belong_to_the_server_user() {
    let url = cluster_url().await;
    let admin = admin(&url);
    for (slots, name) in [
        (1, format!("{SERVER_ID}_0")),
        (3, format!("{SERVER_ID}_0_0")),
    ] {
        let root = root_owned_by(&admin, "naming", "rss").await;
        let mut opts = identity("rss", WriteAs::Auto);
        opts.partition_write_max_concurrency = slots;
        let tier = HdfsTier::new(opts);
        let app = AppId::parse("app-naming_1").unwrap();
        let remote = RemoteStorage {
            path: format!("{url}{root}/"),
            conf: Vec::new(),
        };
        tier.register_app(&app, "alice", &remote).unwrap();
        let p = PartitionKey::new(
            app.clone(),
            7,
            crate::ids::PartitionRange::new(2, 3).unwrap(),
        );
        let b1 = BlockBatch::new(vec![
            test_block(1, 0, payload(1, 300)),
            test_block(2, 0, payload(2, 5)),
        ]);
        let b2 = BlockBatch::new(vec![test_block(3, 1, payload(3, 70))]);
        tier.append(&p, &b1).await.expect("append 1");
        tier.append(&p, &b2).await.expect("append 2");

        let dir = format!("{root}/app-naming_1/7/2-3");
        let mut names: Vec<String> = admin
            .list_status(&dir, false)
            .await
            .expect("list")
            .into_iter()
            .map(|s| s.path.rsplit('/').next().unwrap().to_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![format!("{name}.data"), format!("{name}.index")],
            "{slots} slots"
        );

        let data = admin
            .get_file_info(&format!("{dir}/{name}.data"))
            .await
            .unwrap();
        assert_eq!(data.owner, "rss");
        assert_eq!(data.permission, 0o644);
        assert_eq!(data.length, 375);
        for d in [dir.clone(), format!("{root}/app-naming_1")] {
            let d = admin.get_file_info(&d).await.unwrap();
            assert_eq!((d.owner.as_str(), d.permission), ("rss", 0o755));
        }

        // hdfs-native reads only the completed blocks of a file still open (Hadoop's client
        // also reads the synced part of the last): close the pair to read it whole.
        tier.close_open_pairs().await;
        let index = read_file(&admin, &format!("{dir}/{name}.index")).await;
        let want: Vec<Block> = b1.blocks().iter().chain(b2.blocks()).cloned().collect();
        assert_eq!(index, crate::store::index::encode_blocks(&want, 0));
        let data_bytes = read_file(&admin, &format!("{dir}/{name}.data")).await;
        let concat: Vec<u8> = want.iter().flat_map(|b| b.data.to_vec()).collect();
        assert_eq!(data_bytes, Bytes::from(concat));
        tier.purge(&PurgeScope::App(app)).await.unwrap();
    }
}

/// `write_as = "app_user"`: the app's user owns its files, so a root only the server's user may
/// write refuses them (the error names the cause), and one the app's user owns takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_user_opt_in_writes_as_the_app_user() {
    let url = cluster_url().await;
    let admin = admin(&url);
    let tier = HdfsTier::new(identity("rss", WriteAs::AppUser));
    let block = BlockBatch::new(vec![test_block(1, 0, payload(1, 64))]);

    let servers = root_owned_by(&admin, "as-app-refused", "rss").await;
    let p = registered_by_alice(&tier, "app-as-user_1", format!("{url}{servers}"));
    let err = tier.append(&p, &block).await.unwrap_err().to_string();
    assert!(
        err.contains("Permission denied") && err.contains("alice"),
        "{err}"
    );

    let alices = root_owned_by(&admin, "as-app", "alice").await;
    let p = registered_by_alice(&tier, "app-as-user_2", format!("{url}{alices}"));
    tier.append(&p, &block).await.expect("append as alice");
    let file = admin
        .get_file_info(&format!("{alices}/app-as-user_2/0/0-0/{SERVER_ID}_0.data"))
        .await
        .unwrap();
    assert_eq!(file.owner, "alice");
    tier.purge(&PurgeScope::App(p.app)).await.unwrap();
}

async fn read_file(client: &Client, path: &str) -> Bytes {
    let r = client.read(path).await.expect("open");
    r.read_range(0, r.file_length()).await.expect("read")
}

/// An append that fails half-way (the index cannot be created: a directory sits at its name)
/// retires the pair: the next append of that slot writes `_1`, the data orphaned in `_0` is
/// never read, and the blocks of the retried batch are read once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_append_moves_to_the_next_pair() {
    let app = AppId::parse("app-fail").unwrap();
    let (tier, admin, root) = tier_for("failtimes", &app, options(1)).await;
    let p = part(&app, 0, 0);
    let dir = format!("{root}/app-fail/0/0-0");
    admin
        .mkdirs(&format!("{dir}/{SERVER_ID}_0.index"), 0o755, true)
        .await
        .unwrap();
    let b1 = BlockBatch::new(vec![test_block(1, 0, payload(1, 1000))]);
    let err = tier
        .append(&p, &b1)
        .await
        .expect_err("index cannot be created");
    assert!(
        matches!(err, Error::TierFailed { tier: "hdfs", .. }),
        "{err}"
    );
    assert!(!tier.health().writable, "a failed append shows in health");
    assert!(
        read_back(tier.as_ref(), &p).await.is_empty(),
        "nothing of the failed batch is readable"
    );

    tier.append(&p, &b1).await.expect("retry");
    let b2 = BlockBatch::new(vec![test_block(2, 0, payload(2, 10))]);
    tier.append(&p, &b2).await.expect("next");
    assert!(tier.health().writable, "a success clears the failure");
    let got = read_back(tier.as_ref(), &p).await;
    let want: Vec<Block> = b1.blocks().iter().chain(b2.blocks()).cloned().collect();
    assert_blocks_eq(&got, &want);
    let orphan = admin
        .get_file_info(&format!("{dir}/{SERVER_ID}_0.data"))
        .await
        .unwrap();
    assert_eq!(orphan.length, 1000, "the orphaned data stays, unindexed");
    assert!(admin
        .get_file_info(&format!("{dir}/{SERVER_ID}_1.index"))
        .await
        .is_ok());
    tier.purge(&PurgeScope::App(app)).await.unwrap();
}

/// What a reader does with a torn pair (a writer that died mid-index): whole records only,
/// and none that ends past the data file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_index_records_are_not_read() {
    let app = AppId::parse("app-torn").unwrap();
    let (tier, admin, root) = tier_for("torn", &app, options(1)).await;
    let p = part(&app, 0, 0);
    let good = BlockBatch::new(vec![test_block(1, 0, payload(1, 100))]);
    tier.append(&p, &good).await.unwrap();

    // A pair as a dead writer leaves it: two blocks of data but only the first complete,
    // three records of which the second points past the data and the third is cut.
    let dir = format!("{root}/app-torn/0/0-0");
    let blocks = [
        test_block(10, 3, payload(10, 50)),
        test_block(11, 3, payload(11, 60)),
    ];
    let mut data = admin
        .create(
            &format!("{dir}/{SERVER_ID}_5.data"),
            WriteOptions::default(),
        )
        .await
        .unwrap();
    data.write_bytes(blocks[0].data.clone()).await.unwrap();
    data.write_bytes(blocks[1].data.slice(0..20)).await.unwrap();
    data.close().await.unwrap();
    let mut idx = BytesMut::from(&crate::store::index::encode_blocks(&blocks, 0)[..]);
    idx.put_slice(&crate::store::index::encode_blocks(&blocks[..1], 110)[..17]);
    let mut index = admin
        .create(
            &format!("{dir}/{SERVER_ID}_5.index"),
            WriteOptions::default(),
        )
        .await
        .unwrap();
    index.write_bytes(idx.freeze()).await.unwrap();
    index.close().await.unwrap();

    let got = read_back(tier.as_ref(), &p).await;
    let want: Vec<Block> = good.blocks().iter().chain(&blocks[..1]).cloned().collect();
    assert_blocks_eq(&got, &want);
    let idx = tier.read_index(&p).await.unwrap();
    assert_eq!(IndexEntry::decode_all(&idx.index).len(), 2);
    tier.purge(&PurgeScope::App(app)).await.unwrap();
}

/// Purges delete this server's files only; directories go only when nothing else is left
/// in them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_keeps_other_servers_files() {
    let app = AppId::parse("app-purge").unwrap();
    let (tier, admin, root) = tier_for("purge", &app, options(2)).await;
    let shared = part(&app, 1, 0);
    let alone = part(&app, 1, 1);
    let other_shuffle = part(&app, 2, 0);
    for p in [&shared, &alone, &other_shuffle] {
        tier.append(p, &BlockBatch::new(vec![test_block(1, 0, payload(1, 64))]))
            .await
            .unwrap();
    }
    // Another server (whose id extends ours) wrote into the same range directory.
    let foreign = format!("{root}/app-purge/1/0-0/{SERVER_ID}0_0_0.index");
    admin
        .create(&foreign, WriteOptions::default())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();

    let freed = tier
        .purge(&PurgeScope::shuffle(app.clone(), 1))
        .await
        .unwrap();
    assert!(freed >= 128, "freed {freed}");
    assert!(
        admin.get_file_info(&foreign).await.is_ok(),
        "foreign file kept"
    );
    assert!(
        admin
            .get_file_info(&format!("{root}/app-purge/1/1-1"))
            .await
            .is_err(),
        "a directory left empty is removed"
    );
    assert!(read_back(tier.as_ref(), &shared).await.is_empty());
    assert_eq!(
        read_back(tier.as_ref(), &other_shuffle).await.len(),
        1,
        "other shuffle kept"
    );

    tier.purge(&PurgeScope::App(app.clone())).await.unwrap();
    assert!(!tier.serves(&app), "an app purge forgets the app");
    assert!(admin
        .get_file_info(&format!("{root}/app-purge/2"))
        .await
        .is_err());
    assert!(
        admin.get_file_info(&foreign).await.is_ok(),
        "foreign file survives the app purge"
    );
    let apps = admin
        .list_status(&format!("{root}/app-purge"), true)
        .await
        .unwrap();
    assert!(
        apps.iter().all(|s| s.isdir || s.path == foreign),
        "{apps:?}"
    );
}

/// An app without remote storage, or with one this tier cannot write, is refused with a
/// retryable error; nothing panics.
#[tokio::test]
async fn apps_without_usable_remote_storage_are_refused() {
    let tier = HdfsTier::new(options(1));
    let app = AppId::parse("app-none").unwrap();
    tier.register_app(&app, "", &RemoteStorage::default())
        .unwrap();
    assert!(!tier.serves(&app));
    let batch = BlockBatch::new(vec![test_block(1, 0, payload(1, 8))]);
    assert!(matches!(
        tier.append(&part(&app, 0, 0), &batch).await,
        Err(Error::TierFailed { .. })
    ));
    assert!(tier
        .register_app(
            &app,
            "",
            &RemoteStorage {
                path: "s3a://bucket/x".into(),
                conf: Vec::new()
            }
        )
        .is_err());
    assert_eq!(tier.purge(&PurgeScope::App(app)).await.unwrap(), 0);
}
