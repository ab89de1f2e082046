//! Registry tests that need control over time or storage faults: app expiry under paused
//! tokio time, spills that fail or hang, and huge-partition back-pressure.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::read::{MemoryReadArgs, ReadArgs};
use crate::app::write::{Require, TicketSeen};
use crate::app::{AppRegistry, Registration, RegistryOptions};
use crate::error::Error;
use crate::ids::{AppId, PartitionRange};
use crate::memory::{MemoryBudget, ReadBudget, Tickets};
use crate::periodic::Schedule;
use crate::proto::StatusCode;
use crate::status::ServerStatus;
use crate::store::faulty::FaultyTier;
use crate::store::localfile::{LocalFileOptions, LocalFileTier};
use crate::store::memory::MemoryTier;
use crate::store::spill::SpillOptions;
use crate::store::tiered::TieredStore;
use crate::store::Payloads;
use crate::store::{Block, FileTier};

/// A `requireBuffer` of shuffle 0 by `app`.
fn ask<'a>(app: &'a AppId, partitions: &'a [i32], sizes: &'a [i32], size: i32) -> Require<'a> {
    Require {
        app: Some(app),
        shuffle: 0,
        partitions,
        partition_sizes: sizes,
        size,
    }
}

struct Fixture {
    registry: Arc<AppRegistry>,
    faulty: Arc<FaultyTier>,
    budget: MemoryBudget,
    stop: CancellationToken,
    tracker: TaskTracker,
    _dir: TempDir,
}

impl Fixture {
    fn new(capacity: u64, opts: RegistryOptions) -> Self {
        Self::with_single_buffer(capacity, opts, 1 << 30, true)
    }

    fn with_single_buffer(
        capacity: u64,
        opts: RegistryOptions,
        single_buffer_limit: u64,
        single_buffer_spill: bool,
    ) -> Self {
        let dir = TempDir::new().unwrap();
        let local = LocalFileTier::new(LocalFileOptions {
            high_watermark: 0.99,
            low_watermark: 0.9,
            max_concurrency_per_disk: 4,
            ..LocalFileOptions::testing(vec![dir.path().to_path_buf()], "127.0.0.1-1")
        })
        .unwrap();
        let faulty = Arc::new(FaultyTier::new(local));
        let budget = MemoryBudget::new(capacity, 0.8, 0.2);
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        let warm: Arc<dyn FileTier> = faulty.clone();
        let store = Arc::new(TieredStore::new(
            Arc::new(MemoryTier::new(budget.clone())),
            warm,
            SpillOptions {
                concurrency: 2,
                single_buffer_limit,
                single_buffer_spill,
                max_backoff: Duration::from_millis(100),
                append_timeout: Duration::from_secs(60),
                hdfs_concurrency: None,
                audit: crate::audit::StorageAudit::off(),
            },
            stop.clone(),
            stop.clone(),
            tracker.clone(),
        ));
        let registry = Arc::new(AppRegistry::new(
            store,
            Arc::new(Tickets::new(Duration::from_secs(20))),
            ReadBudget::new(1 << 20),
            ServerStatus::default(),
            opts,
            tracker.clone(),
        ));
        Fixture {
            registry,
            faulty,
            budget,
            stop,
            tracker,
            _dir: dir,
        }
    }

    async fn register(&self, app: &AppId, partitions: i32) {
        self.registry
            .register(Registration {
                app: app.clone(),
                shuffle: 0,
                ranges: (0..partitions)
                    .map(|p| PartitionRange::new(p, p).unwrap())
                    .collect(),
                local_order: false,
                user: String::new(),
                remote_storage: None,
                properties: Default::default(),
                partition_writers: 0,
            })
            .await
            .unwrap();
    }

    fn write(&self, app: &AppId, partition: i32, id: i64, len: usize) -> crate::error::Result<()> {
        let t = self
            .registry
            .require_buffer(ask(app, &[partition], &[], len as i32 + 32))?;
        let block = Block {
            block_id: id,
            task_attempt_id: 1,
            uncompress_length: len as i32,
            crc: 0,
            data: Bytes::from(vec![7u8; len]),
        };
        self.registry.send(
            app,
            0,
            t.ticket_id,
            vec![(partition, vec![block])],
            0,
            Payloads::Shared,
            &mut TicketSeen::default(),
        )
    }

    fn memory_ids(&self, app: &AppId, partition: i32) -> Vec<i64> {
        self.registry
            .read_memory(
                app,
                MemoryReadArgs {
                    shuffle: 0,
                    partition,
                    last_block_id: -1,
                    read_buffer_size: 1 << 20,
                    expected_tasks: Bytes::new(),
                },
            )
            .unwrap()
            .read
            .segments
            .iter()
            .map(|s| s.block_id)
            .collect()
    }

    async fn file_ids(&self, app: &AppId, partition: i32) -> Vec<i64> {
        let read = self
            .registry
            .read_index(
                app,
                ReadArgs {
                    shuffle: 0,
                    partition,
                    per_range: 1,
                    partition_num: 100,
                },
            )
            .await
            .unwrap();
        crate::store::index::IndexEntry::decode_all(&read.index)
            .iter()
            .map(|e| e.block_id)
            .collect()
    }

    async fn stop(self) {
        self.stop.cancel();
        self.faulty.release_appends();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

fn opts() -> RegistryOptions {
    RegistryOptions {
        app_timeout: Duration::from_secs(60),
        huge_partition_threshold: u64::MAX,
        huge_partition_memory_limit: u64::MAX,
        huge_partition_hard_limit: None,
        huge_partition_split_limit: None,
        index_read_hint: 1024,
        commit_timeout: Duration::from_secs(5),
        commit_waits_for_spill: false,
        require_buffer_wait: Duration::ZERO,
    }
}

fn app(s: &str) -> AppId {
    AppId::parse(s).unwrap()
}

#[tokio::test(start_paused = true)]
async fn apps_without_heartbeat_expire_and_are_purged_everywhere() {
    let f = Fixture::new(1 << 20, opts());
    let (a, b) = (app("app_a"), app("app_b"));
    f.register(&a, 2).await;
    f.register(&b, 2).await;
    f.write(&a, 0, 1, 100).unwrap();
    f.write(&b, 0, 1, 100).unwrap();
    f.registry.finish_shuffle(&a, 0).await.unwrap();
    f.write(&a, 1, 2, 100).unwrap(); // one block in memory, one on disk
                                     // An unused ticket of a.
    f.registry.require_buffer(ask(&a, &[0], &[], 500)).unwrap();

    tokio::time::advance(Duration::from_secs(40)).await;
    f.registry.heartbeat(&b).unwrap(); // b stays alive
    tokio::time::advance(Duration::from_secs(21)).await;
    assert_eq!(f.registry.expire().await, 1);
    assert!(matches!(
        f.registry.verify(&a),
        Err(Error::AppNotFound { .. })
    ));
    assert_eq!(
        f.registry.heartbeat(&a).unwrap_err().status(),
        StatusCode::NoRegister
    );
    assert!(f.registry.verify(&b).is_ok());
    assert_eq!(f.budget.snapshot().reserved, 0, "a's ticket released");
    assert_eq!(
        f.budget.snapshot().used,
        132,
        "only b's block stays in memory"
    );
    assert!(!f._dir.path().join("app_a").exists(), "a's files deleted");
    assert_eq!(f.memory_ids(&b, 0), vec![1]);

    // An expired-but-not-yet-swept app is NO_REGISTER for reads (0.10 verifyRequest).
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(
        f.registry
            .read_index(
                &b,
                ReadArgs {
                    shuffle: 0,
                    partition: 0,
                    per_range: 1,
                    partition_num: 2
                }
            )
            .await
            .unwrap_err()
            .status(),
        StatusCode::NoRegister
    );
    f.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expiry_task_runs_on_tokio_time() {
    let f = Fixture::new(1 << 20, opts());
    f.registry.spawn_expiry(Schedule::new(
        Duration::from_secs(10),
        f.stop.clone(),
        &f.tracker,
    ));
    let a = app("app_a");
    f.register(&a, 1).await;
    tokio::time::sleep(Duration::from_secs(75)).await;
    assert_eq!(f.registry.app_count(), 0);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_spills_keep_blocks_readable_until_they_succeed() {
    let f = Fixture::new(1 << 20, opts());
    let a = app("app_a");
    f.register(&a, 1).await;
    f.write(&a, 0, 1, 1000).unwrap();
    f.faulty.fail_next_appends(3);
    let flush = {
        let registry = f.registry.clone();
        let a = a.clone();
        tokio::spawn(async move { registry.finish_shuffle(&a, 0).await })
    };
    // While the spill fails and retries, the block is still served from memory.
    while f.faulty.failed_appends() < 2 {
        assert_eq!(f.memory_ids(&a, 0), vec![1]);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    flush.await.unwrap().unwrap();
    assert_eq!(f.file_ids(&a, 0).await, vec![1]);
    assert!(f.memory_ids(&a, 0).is_empty());
    assert_eq!(f.budget.snapshot().used, 0);
    // The flush statistics saw three failed attempts and one success on the local tier.
    let stats = f.registry.store().spiller().stats();
    let local = stats.kind(crate::store::TierKind::LocalFile);
    let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(n(&local.attempts), 4);
    assert_eq!(n(&local.retries), 3);
    assert_eq!(n(&local.successes), 1);
    assert_eq!(n(&stats.write_exceptions), 3);
    assert_eq!(n(&local.bytes), 1000);
    assert_eq!(
        stats.by_location().len(),
        1,
        "bytes land under the disk path"
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_disk_becomes_back_pressure_not_data_loss() {
    let f = Fixture::new(4000, opts());
    let a = app("app_a");
    f.register(&a, 1).await;
    f.faulty.stall_appends();
    let mut accepted = Vec::new();
    let mut refused = 0;
    for id in 0..20 {
        match f.write(&a, 0, id, 500) {
            Ok(()) => accepted.push(id),
            Err(e) => {
                assert_eq!(e.status(), StatusCode::NoBuffer);
                refused += 1;
            }
        }
        f.registry.store().spiller().spill_to_target();
        let s = f.budget.snapshot();
        assert!(s.reserved + s.used <= s.capacity);
    }
    assert!(refused > 0 && !accepted.is_empty());
    let mut seen = f.memory_ids(&a, 0);
    seen.sort();
    assert_eq!(
        seen, accepted,
        "every accepted block readable while the disk hangs"
    );
    f.faulty.release_appends();
    f.registry.finish_shuffle(&a, 0).await.unwrap();
    let mut on_disk = f.file_ids(&a, 0).await;
    on_disk.sort();
    assert_eq!(on_disk, accepted);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_partition_gets_its_own_no_buffer() {
    let f = Fixture::new(
        100_000,
        RegistryOptions {
            huge_partition_threshold: 1000,
            huge_partition_memory_limit: 2000,
            ..opts()
        },
    );
    let a = app("app_a");
    f.register(&a, 2).await;
    f.faulty.stall_appends(); // keep the huge partition's bytes in memory
                              // Once over the threshold, the partition may hold at most 2000 bytes in memory.
    let err = (0..10)
        .find_map(|id| f.write(&a, 0, id, 600).err())
        .expect("the huge partition is refused at some point");
    assert_eq!(err.status(), StatusCode::NoBufferForHugePartition);
    assert!(f.registry.store().memory().budget().snapshot().used <= 2000 + 632);
    // Other partitions are not affected.
    f.write(&a, 1, 100, 600).unwrap();
    f.faulty.release_appends();
    f.registry.finish_shuffle(&a, 0).await.unwrap();
    f.write(&a, 0, 99, 600).unwrap();
    f.stop().await;
}

/// Java's `rss.server.single.buffer.flush.enabled = false`: a buffer over the single-buffer
/// threshold stays in memory (the watermarks still apply), unless its partition is huge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_buffer_spill_off_keeps_big_buffers_unless_huge() {
    for spill in [true, false] {
        let f = Fixture::with_single_buffer(
            1 << 20,
            RegistryOptions {
                huge_partition_threshold: 5000,
                huge_partition_memory_limit: 1 << 20,
                ..opts()
            },
            1000,
            spill,
        );
        let a = app("app_a");
        f.register(&a, 1).await;
        f.faulty.stall_appends(); // a started spill stays visible as "in flight"
        f.write(&a, 0, 1, 1500).unwrap();
        let in_flight = f.registry.store().memory().budget().snapshot().in_flush;
        assert_eq!(in_flight > 0, spill, "spill enabled: {spill}");
        if !spill {
            // Past the huge threshold, the partition spills at the single-buffer size anyway.
            for id in 2..6 {
                f.write(&a, 0, id, 1500).unwrap();
            }
            assert!(f.registry.store().memory().budget().snapshot().in_flush > 0);
        }
        f.faulty.release_appends();
        f.stop().await;
    }
}

/// requireBuffer with 0.10's per-partition sizes, for `partitions` with `sizes`.
fn require_sized(
    f: &Fixture,
    app: &AppId,
    partitions: &[i32],
    sizes: &[i32],
) -> crate::error::Result<crate::app::write::RequireOutcome> {
    f.registry
        .require_buffer(ask(app, partitions, sizes, sizes.iter().sum()))
}

#[tokio::test]
async fn split_limit_lists_partitions_strictly_above_it() {
    let f = Fixture::new(
        1 << 20,
        RegistryOptions {
            huge_partition_split_limit: Some(300),
            ..opts()
        },
    );
    let a = app("app_a");
    f.register(&a, 2).await;
    f.write(&a, 0, 1, 100).unwrap(); // 132 encoded bytes
                                     // A resent duplicate is dropped, and not counted.
    f.write(&a, 0, 1, 100).unwrap();
    // 132 + 168 = 300 is not above the limit; partition 1's 0 + 301 is.
    let t = require_sized(&f, &a, &[0, 1], &[168, 301]).unwrap();
    assert!(t.ticket_id > 0);
    assert_eq!(t.need_split, vec![1]);
    // 132 + 169 = 301 is; 300 for partition 1 is not.
    let t = require_sized(&f, &a, &[1, 0], &[300, 169]).unwrap();
    assert_eq!(t.need_split, vec![0]);
    // The ticket covers the whole request, split partitions included.
    f.registry
        .send(
            &a,
            0,
            t.ticket_id,
            vec![(0, vec![block(2, 137)]), (1, vec![block(3, 268)])],
            0,
            Payloads::Shared,
            &mut TicketSeen::default(),
        )
        .unwrap();
    // Without per-partition sizes (before 0.10) nothing is ever listed.
    let t = f
        .registry
        .require_buffer(ask(&a, &[0, 1], &[], 10_000))
        .unwrap();
    assert!(t.need_split.is_empty());
    f.stop().await;
}

#[tokio::test]
async fn no_split_limit_never_lists_a_partition() {
    let f = Fixture::new(1 << 20, opts());
    let a = app("app_a");
    f.register(&a, 1).await;
    f.write(&a, 0, 1, 100_000).unwrap();
    let t = require_sized(&f, &a, &[0], &[500_000]).unwrap();
    assert!(t.need_split.is_empty());
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_memory_limit_then_hard_limit_then_split_as_java_orders_them() {
    let f = Fixture::new(
        1 << 20,
        RegistryOptions {
            huge_partition_threshold: 100,
            huge_partition_memory_limit: 100,
            huge_partition_hard_limit: Some(150),
            huge_partition_split_limit: Some(0),
            ..opts()
        },
    );
    let a = app("app_a");
    f.register(&a, 2).await;
    f.faulty.stall_appends(); // keep partition 0's bytes in memory
    f.write(&a, 0, 1, 100).unwrap();
    // Partition 0 is past all three: the memory limit answers (the client waits and retries).
    let err = require_sized(&f, &a, &[1, 0], &[10, 100]).unwrap_err();
    assert_eq!(err.status(), StatusCode::NoBufferForHugePartition);
    // Once its memory is spilled, the hard limit answers, and no split list is given.
    f.faulty.release_appends();
    f.registry.finish_shuffle(&a, 0).await.unwrap();
    let err = require_sized(&f, &a, &[1, 0], &[10, 100]).unwrap_err();
    assert_eq!(err.status(), StatusCode::ExceedHugePartitionHardLimit);
    // Within the hard limit, both are listed: 132 + 1 > 0 and 0 + 10 > 0.
    let t = require_sized(&f, &a, &[1, 0], &[10, 1]).unwrap();
    assert_eq!(t.need_split, vec![1, 0]);
    f.stop().await;
}

fn block(id: i64, len: usize) -> Block {
    Block {
        block_id: id,
        task_attempt_id: 1,
        uncompress_length: len as i32,
        crc: 0,
        data: Bytes::from(vec![id as u8; len]),
    }
}

#[tokio::test]
async fn decommissioning_refuses_new_apps_only() {
    let f = Fixture::new(1 << 20, opts());
    let a = app("app_a");
    f.register(&a, 1).await;
    f.registry.status().decommission().unwrap();
    let err = f
        .registry
        .register(shuffle_registration(&app("app_new"), 0))
        .await
        .unwrap_err();
    assert_eq!(err.status(), StatusCode::InvalidRequest);
    f.register(&a, 1).await; // live apps keep working
    f.write(&a, 0, 1, 10).unwrap();
    f.registry.status().cancel_decommission();
    f.register(&app("app_new"), 1).await;
    f.stop().await;
}

fn shuffle_registration(app: &AppId, shuffle: i32) -> Registration {
    Registration {
        app: app.clone(),
        shuffle,
        ranges: vec![PartitionRange::new(0, 0).unwrap()],
        local_order: false,
        user: String::new(),
        remote_storage: None,
        properties: Default::default(),
        partition_writers: 0,
    }
}

/// A SQL query registers its next shuffle while Spark's cleaner unregisters the last one, and
/// a purge waits for the app's in-flight spills: the next shuffle must not wait for it. A
/// registration of the shuffle being purged still waits, so it cannot land between the purge's
/// steps.
#[tokio::test]
async fn a_purge_holds_back_only_its_own_shuffle() {
    let f = Fixture::new(1 << 20, opts());
    let a = app("app_sql");
    f.registry
        .register(shuffle_registration(&a, 0))
        .await
        .unwrap();
    f.faulty.stall_purges();
    let registry = Arc::clone(&f.registry);
    let purged = {
        let a = a.clone();
        tokio::spawn(async move { registry.unregister_shuffle(&a, 0).await })
    };
    tokio::time::timeout(Duration::from_secs(10), async {
        while f.faulty.stalled_appends() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the purge reaches the file tier");

    // Another shuffle of the same app registers while the purge hangs.
    tokio::time::timeout(
        Duration::from_secs(5),
        f.registry.register(shuffle_registration(&a, 1)),
    )
    .await
    .expect("shuffle 1 registers beside the purge of shuffle 0")
    .unwrap();

    // The purged shuffle itself waits for the purge.
    let again = {
        let registry = Arc::clone(&f.registry);
        let a = a.clone();
        tokio::spawn(async move { registry.register(shuffle_registration(&a, 0)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !again.is_finished(),
        "shuffle 0 re-registered during its own purge"
    );
    f.faulty.release_purges();
    purged.await.unwrap().unwrap();
    again.await.unwrap().unwrap();
    // Both shuffles are live after the purge: each takes a write.
    f.write(&a, 0, 1, 10).unwrap();
    f.stop().await;
}
