//! Tests of the local-file tier: the shared conformance suites plus what only this tier does
//! (placement, disk health, rollback after a failed write, the exact on-disk layout).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use tempfile::TempDir;

use super::files::{Fault, FaultPoint};
use super::*;
use crate::ids::{AppId, PartitionRange};
use crate::store::conformance::{self, assert_blocks_eq, part, payload, read_back, test_block};
use crate::store::index::IndexEntry;
use crate::store::{Block, DataRead, FileTier, IndexRead, Span};

const PREFIX: &str = "10.0.0.7-19999";

fn opts(paths: Vec<PathBuf>) -> LocalFileOptions {
    LocalFileOptions::testing(paths, PREFIX)
}

/// The error the tier refuses to start with under `opts`.
fn start_error(opts: LocalFileOptions) -> String {
    match LocalFileTier::new(opts) {
        Ok(_) => panic!("the tier started with options it must refuse"),
        Err(e) => e.to_string(),
    }
}

/// A data path that exists but whose probe file cannot be written (a directory holds its name).
fn unprobeable(dir: &TempDir, name: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::create_dir_all(path.join(disk::PROBE_FILE_NAME)).unwrap();
    path
}

/// Counts the disk's whole capacity as this server's bytes: over any high watermark.
fn fill(d: &disk::Disk) {
    d.add_written(d.report().service_capacity_bytes);
    assert_eq!(d.status(), DiskStatus::Overused);
}

fn disks(dir: &TempDir, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| dir.path().join(format!("disk{i}")))
        .collect()
}

fn app(name: &str) -> AppId {
    AppId::parse(name).unwrap()
}

fn batch(first_id: i64, n: i64, len: usize) -> BlockBatch {
    BlockBatch::new(
        (first_id..first_id + n)
            .map(|id| test_block(id, id % 3, payload(id as u64, len)))
            .collect(),
    )
}

async fn storage_id(tier: &LocalFileTier, p: &PartitionKey) -> i32 {
    let idx = tier.read_index(p).await.unwrap();
    assert_eq!(idx.storage_ids.len(), 1);
    idx.storage_ids[0]
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_on_three_disks() {
    // Both write paths: buffered (the default) and O_DIRECT.
    for direct_io in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let tier = LocalFileTier::new(LocalFileOptions {
            direct_io,
            ..opts(disks(&dir, 3))
        })
        .unwrap();
        conformance::run_all(tier.as_ref()).await;
        // Every suite purges after itself: nothing of ours is left but empty data paths.
        for r in tier.disk_reports() {
            assert_eq!(r.written_bytes, 0, "{r:?}");
            assert_eq!(std::fs::read_dir(&r.path).unwrap().count(), 0, "{r:?}");
        }
    }
}

#[tokio::test]
async fn conformance_with_sync_on_write() {
    for direct_io in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let tier = LocalFileTier::new(LocalFileOptions {
            sync_on_write: true,
            direct_io,
            write_timeout: std::time::Duration::from_secs(60),
            max_concurrency_per_disk: 1,
            ..opts(disks(&dir, 2))
        })
        .unwrap();
        conformance::run_all(tier.as_ref()).await;
    }
}

#[tokio::test]
async fn files_are_at_exactly_the_uniffle_paths() {
    let (dir, tier) = fresh_tier(1);
    let a = app("application_1716900000000_0042_1716900000123");
    let p = PartitionKey::new(a.clone(), 3, PartitionRange::new(4, 7).unwrap());
    let b = batch(1, 4, 100);
    tier.append(&p, &b).await.unwrap();

    let range_dir = dir
        .path()
        .join("disk0")
        .join(a.as_str())
        .join("3")
        .join("4-7");
    let data = range_dir.join(format!("{PREFIX}.data"));
    let index = range_dir.join(format!("{PREFIX}.index"));
    assert_eq!(file_len(&data), 400);
    assert_eq!(file_len(&index), 4 * IndexEntry::SIZE as u64);
    let mut names: Vec<String> = std::fs::read_dir(&range_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![format!("{PREFIX}.data"), format!("{PREFIX}.index")]
    );
    // Nothing else anywhere under the data path (no hidden state, no probe file left).
    let top: Vec<_> = std::fs::read_dir(dir.path().join("disk0"))
        .unwrap()
        .collect();
    assert_eq!(top.len(), 1);

    // The files alone describe the partition: decode them without the tier.
    let entries = IndexEntry::decode_all(&std::fs::read(&index).unwrap());
    let bytes = std::fs::read(&data).unwrap();
    let from_files: Vec<Block> = entries
        .iter()
        .map(|e| Block {
            block_id: e.block_id,
            task_attempt_id: e.task_attempt_id,
            uncompress_length: e.uncompress_length,
            crc: e.crc,
            data: bytes[e.offset as usize..(e.offset + e.length as i64) as usize]
                .to_vec()
                .into(),
        })
        .collect();
    assert_blocks_eq(&from_files, b.blocks());
}

#[tokio::test]
async fn placement_spreads_partitions_and_keeps_each_on_its_disk() {
    let dir = tempfile::tempdir().unwrap();
    let paths = disks(&dir, 3);
    let tier = LocalFileTier::new(opts(paths.clone())).unwrap();
    let a = app("placement");
    let parts: Vec<PartitionKey> = (0..60).map(|p| part(&a, 0, p)).collect();
    let mut placed = Vec::new();
    for (n, p) in parts.iter().enumerate() {
        tier.append(p, &batch(n as i64 * 10, 1, 50)).await.unwrap();
        placed.push(storage_id(&tier, p).await);
    }
    let used: HashSet<i32> = placed.iter().copied().collect();
    assert_eq!(
        used.len(),
        3,
        "60 partitions should use all 3 disks: {placed:?}"
    );

    // Break disk 2: partitions placed elsewhere keep their disk, new ones avoid disk 2.
    std::fs::remove_dir_all(&paths[2]).unwrap();
    std::fs::write(&paths[2], b"not a directory").unwrap();
    tier.check_disks().await;
    assert_eq!(tier.disk_reports()[2].status, DiskStatus::Unhealthy);
    for (n, p) in parts.iter().enumerate() {
        if placed[n] == 2 {
            continue;
        }
        tier.append(p, &batch(n as i64 * 10 + 1, 1, 50))
            .await
            .unwrap();
        assert_eq!(storage_id(&tier, p).await, placed[n], "partition {p} moved");
        assert_eq!(read_back(tier.as_ref(), p).await.len(), 2);
    }
    for n in 0..30 {
        let p = part(&a, 1, n);
        tier.append(&p, &batch(1000 + n as i64, 1, 10))
            .await
            .unwrap();
        assert_ne!(storage_id(&tier, &p).await, 2);
    }
    // A partition on the broken disk moves: its next append opens a part on a healthy disk.
    if let Some(n) = placed.iter().position(|&d| d == 2) {
        tier.append(&parts[n], &batch(5000, 1, 10)).await.unwrap();
        let now = tier.location(&parts[n]).unwrap();
        assert_ne!(
            now,
            paths[2].to_string_lossy(),
            "partition stayed on the broken disk"
        );
    }
}

#[tokio::test]
async fn placement_is_a_pure_function_of_the_key() {
    let mk = || {
        let (dir, tier) = fresh_tier(3);
        (dir, tier)
    };
    let (_d1, t1) = mk();
    let (_d2, t2) = mk();
    let a = app("stable-placement");
    for n in 0..20 {
        let p = part(&a, 2, n);
        t1.append(&p, &batch(n as i64, 1, 8)).await.unwrap();
        t2.append(&p, &batch(n as i64, 1, 8)).await.unwrap();
        assert_eq!(storage_id(&t1, &p).await, storage_id(&t2, &p).await);
    }
}

#[tokio::test]
async fn an_unusable_data_path_starts_unhealthy_and_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = disks(&dir, 2);
    // Initialises (it exists and has a file system) but its write probe fails.
    paths.insert(1, unprobeable(&dir, "unprobeable"));
    let tier = LocalFileTier::new(opts(paths.clone())).unwrap();

    let reports = tier.disk_reports();
    assert_eq!(reports[1].status, DiskStatus::Unhealthy);
    assert_eq!(reports[1].path, paths[1]);
    assert_eq!(reports[0].status, DiskStatus::Normal);
    assert!(reports[0].capacity_bytes > 0 && reports[0].available_bytes > 0);
    assert_eq!(tier.healthy_disks(), 2);
    let health = tier.health();
    assert!(health.writable);
    assert!(
        health.detail.contains(&paths[1].display().to_string()),
        "{}",
        health.detail
    );

    let a = app("skip-bad-disk");
    for n in 0..30 {
        let p = part(&a, 0, n);
        tier.append(&p, &batch(n as i64, 1, 20)).await.unwrap();
        assert_ne!(storage_id(&tier, &p).await, 1);
    }
}

/// Java's `LocalStorageManager`: more failed paths than the maximum (default 0) stop
/// start-up with the key named; within it the failed path is left out.
#[tokio::test]
async fn paths_that_fail_to_initialise_are_skipped_up_to_the_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = disks(&dir, 2);
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    paths.push(blocker.join("data"));
    // One failure is above the default maximum 0.
    let msg = start_error(opts(paths.clone()));
    assert!(
        msg.contains("1 of 3") && msg.contains("init_max_failed_paths (0"),
        "{msg}"
    );
    assert!(
        msg.contains(&blocker.join("data").display().to_string()),
        "{msg}"
    );
    let tier = LocalFileTier::new(LocalFileOptions {
        init_max_failed_paths: 1,
        ..opts(paths.clone())
    })
    .unwrap();
    let reports = tier.disk_reports();
    assert_eq!(reports.len(), 2, "the failed path is left out");
    assert_eq!(
        reports.iter().map(|r| r.index).collect::<Vec<_>>(),
        [0, 1],
        "the others keep their storage ids"
    );
    assert!(tier.health().writable);
    // No path left at all.
    let err = start_error(LocalFileOptions {
        init_max_failed_paths: 5,
        ..opts(vec![blocker.join("a")])
    });
    assert!(err.contains("1 of 1"), "{err}");
}

/// A configured capacity the path has no room for fails it (Java: "Available Capacity ... is
/// smaller than configuration"); the ratio gives each path its share of its file system.
#[tokio::test]
async fn capacity_is_configured_or_a_share_of_the_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let paths = disks(&dir, 1);
    let tier = LocalFileTier::new(LocalFileOptions {
        capacity_ratio: 0.5,
        ..opts(paths.clone())
    })
    .unwrap();
    let r = &tier.disk_reports()[0];
    assert_eq!(
        r.service_capacity_bytes,
        (r.capacity_bytes as f64 * 0.5) as u64
    );
    let tier = LocalFileTier::new(LocalFileOptions {
        capacity: Some(1 << 20),
        ..opts(paths.clone())
    })
    .unwrap();
    assert_eq!(tier.disk_reports()[0].service_capacity_bytes, 1 << 20);
    // No file system here has that much room.
    let err = start_error(LocalFileOptions {
        capacity: Some(u64::MAX / 2),
        ..opts(paths)
    });
    assert!(err.contains("is less than"), "{err}");
}

#[tokio::test]
async fn no_usable_disk_at_all_fails_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let err = start_error(opts(vec![unprobeable(&dir, "a"), unprobeable(&dir, "b")]));
    assert!(err.contains("no usable"), "{err}");
    for bad in [
        opts(Vec::new()),
        LocalFileOptions {
            file_prefix: "a/b".into(),
            ..opts(disks(&dir, 1))
        },
        LocalFileOptions {
            low_watermark: 0.9,
            high_watermark: 0.8,
            ..opts(disks(&dir, 1))
        },
        LocalFileOptions {
            max_concurrency_per_disk: 0,
            ..opts(disks(&dir, 1))
        },
    ] {
        assert!(LocalFileTier::new(bad).is_err());
    }
}

#[tokio::test]
async fn overused_disks_take_no_new_partitions_but_keep_old_ones() {
    let (dir, tier) = fresh_tier(2);
    let a = app("overused");
    let old = part(&a, 0, 0);
    tier.append(&old, &batch(1, 1, 10)).await.unwrap();

    // Nothing is below 0% of the capacity: with both watermarks at 0 every disk is over the
    // high watermark and never comes back under the low one.
    let full = LocalFileTier::new(LocalFileOptions {
        high_watermark: 0.0,
        low_watermark: 0.0,
        ..opts(disks(&dir, 2))
    })
    .unwrap();
    assert!(full
        .disk_reports()
        .iter()
        .all(|r| r.status == DiskStatus::Overused));
    assert_eq!(full.healthy_disks(), 2);
    assert!(!full.health().writable);
    let err = full.append(&old, &batch(2, 1, 10)).await.unwrap_err();
    assert!(matches!(err, Error::TierFailed { .. }), "{err}");
    full.check_disks().await;
    assert!(full
        .disk_reports()
        .iter()
        .all(|r| r.status == DiskStatus::Overused));

    // Same instance: a partition placed before the disk filled keeps appending.
    let tier_full = Arc::clone(&tier);
    for d in &tier_full.disks {
        fill(d);
    }
    assert!(!tier_full.health().writable);
    tier_full.append(&old, &batch(2, 1, 10)).await.unwrap();
    assert_eq!(read_back(tier_full.as_ref(), &old).await.len(), 2);
    assert!(tier_full
        .append(&part(&a, 0, 1), &batch(3, 1, 10))
        .await
        .is_err());
}

#[tokio::test]
async fn a_failed_append_leaves_earlier_data_and_the_next_append_contiguous() {
    let (dir, tier) = fresh_tier(1);
    let a = app("rollback");
    let p = part(&a, 0, 0);
    let range_dir = dir
        .path()
        .join("disk0")
        .join("rollback")
        .join("0")
        .join("0-0");
    let data = range_dir.join(format!("{PREFIX}.data"));
    let index = range_dir.join(format!("{PREFIX}.index"));

    let first = batch(1, 3, 100);
    tier.append(&p, &first).await.unwrap();
    let mut want = first.blocks().to_vec();

    for at in [
        FaultPoint::BeforeData,
        FaultPoint::AfterData,
        FaultPoint::AfterIndex,
    ] {
        // Not a disk fault (EPERM): the disk stays healthy.
        tier.inject_fault(Fault {
            at,
            errno: Errno::EPERM as i32,
        });
        let err = tier.append(&p, &batch(100, 2, 333)).await.unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{at:?}: {err}");
        assert!(err.is_retryable());
        assert_blocks_eq(&read_back(tier.as_ref(), &p).await, &want);
        assert_eq!(file_len(&data), 300, "{at:?}: data not rolled back");
        assert_eq!(file_len(&index), 120, "{at:?}: index not rolled back");
        assert_eq!(tier.disk_reports()[0].status, DiskStatus::Normal);
    }

    // A disk fault (EIO) after the index was written: rolled back and the disk flagged.
    tier.inject_fault(Fault {
        at: FaultPoint::AfterIndex,
        errno: Errno::EIO as i32,
    });
    assert!(tier.append(&p, &batch(200, 2, 50)).await.is_err());
    assert_eq!(tier.disk_reports()[0].status, DiskStatus::Unhealthy);
    assert!(!tier.health().writable);
    let err = tier.append(&p, &batch(300, 1, 50)).await.unwrap_err();
    assert!(matches!(err, Error::TierFailed { .. }), "{err}");
    assert_blocks_eq(&read_back(tier.as_ref(), &p).await, &want);

    // The next probe finds the disk fine again; the retry lands right after the old data.
    tier.check_disks().await;
    assert_eq!(tier.disk_reports()[0].status, DiskStatus::Normal);
    let retry = batch(200, 2, 50);
    tier.append(&p, &retry).await.unwrap();
    want.extend(retry.blocks().iter().cloned());
    assert_blocks_eq(&read_back(tier.as_ref(), &p).await, &want);
    assert_eq!(file_len(&data), 400);
    assert_eq!(tier.disk_reports()[0].written_bytes, 400 + 5 * 40);
}

#[tokio::test]
async fn a_first_append_that_fails_leaves_an_unknown_looking_partition() {
    let (_dir, tier) = fresh_tier(1);
    let p = part(&app("first-fails"), 0, 0);
    tier.inject_fault(Fault {
        at: FaultPoint::AfterData,
        errno: Errno::EPERM as i32,
    });
    assert!(tier.append(&p, &batch(1, 2, 10)).await.is_err());
    assert_eq!(tier.read_index(&p).await.unwrap(), IndexRead::default());
    let b = batch(5, 2, 10);
    tier.append(&p, &b).await.unwrap();
    assert_blocks_eq(&read_back(tier.as_ref(), &p).await, b.blocks());
}

#[tokio::test]
async fn read_errors_are_typed() {
    let (_dir, tier) = fresh_tier(1);
    let p = part(&app("read-errors"), 0, 0);
    let err = tier.read_data(&p, Span::at(0, 1)).await.unwrap_err();
    assert!(matches!(err, Error::Internal { .. }), "{err}");
    assert!(err.to_string().contains("no data file"), "{err}");
    tier.append(&p, &batch(1, 1, 10)).await.unwrap();
    let err = tier.read_data(&p, Span::at(5, 6)).await.unwrap_err();
    assert!(matches!(err, Error::BadRequest { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("offset 5") && msg.contains("length 6") && msg.contains("10"),
        "{msg}"
    );
}

#[tokio::test]
async fn written_bytes_are_live() {
    let (_dir, tier) = fresh_tier(1);
    let a = app("live-bytes");
    tier.append(&part(&a, 0, 0), &batch(1, 2, 100))
        .await
        .unwrap();
    tier.append(&part(&a, 1, 0), &batch(3, 1, 100))
        .await
        .unwrap();
    assert_eq!(tier.disk_reports()[0].written_bytes, 300 + 120);
    let freed = tier
        .purge(&PurgeScope::shuffle(a.clone(), 0))
        .await
        .unwrap();
    assert_eq!(freed, 280);
    assert_eq!(tier.disk_reports()[0].written_bytes, 140);
    assert_eq!(tier.purge(&PurgeScope::App(a)).await.unwrap(), 140);
    assert_eq!(tier.disk_reports()[0].written_bytes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_racing_appends_leave_a_consistent_partition() {
    let (_dir, tier) = fresh_tier(2);
    let a = app("purge-race");
    let p = part(&a, 0, 0);
    for round in 0..30i64 {
        let b = batch(round * 10, 3, 200);
        let (t1, t2) = (Arc::clone(&tier), Arc::clone(&tier));
        let (p1, a2, b1) = (p.clone(), a.clone(), b.clone());
        let append = tokio::spawn(async move { t1.append(&p1, &b1).await });
        let purge = tokio::spawn(async move { t2.purge(&PurgeScope::App(a2)).await });
        append.await.unwrap().unwrap();
        purge.await.unwrap().unwrap();
        // Either the purge came last (nothing left) or the append did (exactly its blocks).
        let got = read_back(tier.as_ref(), &p).await;
        if !got.is_empty() {
            assert_blocks_eq(&got, b.blocks());
        }
        tier.purge(&PurgeScope::App(a.clone())).await.unwrap();
    }
}

#[tokio::test]
async fn health_checks_run_until_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let paths = disks(&dir, 2);
    let tier = LocalFileTier::new(opts(paths.clone())).unwrap();
    let every = Schedule::fresh(Duration::from_millis(20));
    tier.spawn_health_checks(every.clone());

    std::fs::remove_dir_all(&paths[0]).unwrap();
    std::fs::write(&paths[0], b"x").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tier.disk_reports()[0].status != DiskStatus::Unhealthy {
        assert!(
            tokio::time::Instant::now() < deadline,
            "health pass never ran"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    std::fs::remove_file(&paths[0]).unwrap();
    while tier.disk_reports()[0].status != DiskStatus::Normal {
        assert!(
            tokio::time::Instant::now() < deadline,
            "disk never recovered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    every.end().await;
}

/// The disk a partition's first part was placed on, and another one.
async fn placed_and_other(tier: &LocalFileTier, p: &PartitionKey) -> (usize, usize) {
    let first = storage_id(tier, p).await as usize;
    (first, 1 - first)
}

fn part_files(root: &Path, p: &PartitionKey, seq: u32) -> (PathBuf, PathBuf) {
    let dir = root
        .join(p.app.as_str())
        .join(p.shuffle.to_string())
        .join(p.range.dir_name());
    let stem = files::part_stem(PREFIX, seq);
    (
        dir.join(format!("{stem}.data")),
        dir.join(format!("{stem}.index")),
    )
}

#[tokio::test]
async fn a_failing_disk_moves_the_partition_and_reads_see_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let paths = disks(&dir, 2);
    let tier = LocalFileTier::new(opts(paths.clone())).unwrap();
    let p = part(&app("failover"), 0, 0);
    let first = batch(1, 3, 100);
    tier.append(&p, &first).await.unwrap();
    let (home, other) = placed_and_other(&tier, &p).await;
    let mut want = first.blocks().to_vec();

    // The disk fails under a write (EIO): the write is rolled back, the disk flagged, and the
    // retry of the same batch goes to the other disk as part 1.
    tier.inject_fault(Fault {
        at: FaultPoint::AfterData,
        errno: Errno::EIO as i32,
    });
    let second = batch(10, 2, 70);
    assert!(tier.append(&p, &second).await.is_err());
    assert_eq!(tier.disk_reports()[home].status, DiskStatus::Unhealthy);
    tier.append(&p, &second).await.unwrap();
    want.extend(second.blocks().iter().cloned());
    let third = batch(20, 2, 30);
    tier.append(&p, &third).await.unwrap();
    want.extend(third.blocks().iter().cloned());

    // One logical file: contiguous offsets across both parts, ranges spanning them.
    assert_blocks_eq(&read_back(tier.as_ref(), &p).await, &want);
    let idx = tier.read_index(&p).await.unwrap();
    assert_eq!(idx.data_len, 300 + 140 + 60);
    let spanning = tier.read_data(&p, Span::at(250, 100)).await.unwrap();
    let mut expect = want[2].data[50..].to_vec();
    expect.extend_from_slice(&want[3].data);
    expect.extend_from_slice(&want[4].data[..]);
    assert_eq!(&spanning[..], &expect[..100]);
    let ranges = tier.read_data_ranges(&p, Span::at(250, 100)).await.unwrap();
    assert!(
        matches!(&ranges, DataRead::Files(r) if r.len() == 2),
        "a range spanning two parts is two file ranges: {ranges:?}"
    );
    assert_eq!(&conformance::materialize(ranges)[..], &expect[..100]);

    // The files: part 0 untouched on the failed disk, part 1 under its own name on the other.
    let (d0, i0) = part_files(&paths[home], &p, 0);
    let (d1, i1) = part_files(&paths[other], &p, 1);
    assert_eq!((file_len(&d0), file_len(&i0)), (300, 120));
    assert_eq!((file_len(&d1), file_len(&i1)), (200, 160));
    let local = IndexEntry::decode_all(&std::fs::read(&i1).unwrap());
    assert_eq!(local[0].offset, 0, "offsets inside a part file start at 0");

    // The recovered disk takes new partitions again; this one stays where it moved to.
    tier.check_disks().await;
    assert_eq!(tier.disk_reports()[home].status, DiskStatus::Normal);
    tier.append(&p, &batch(30, 1, 10)).await.unwrap();
    assert_eq!(file_len(&d1), 210);
    tier.purge(&PurgeScope::App(p.app.clone())).await.unwrap();
    assert!(!d0.exists() && !d1.exists());
    assert!(tier.disk_reports().iter().all(|r| r.written_bytes == 0));
}

#[tokio::test]
async fn a_partition_leaves_a_disk_over_the_high_watermark_when_another_has_room() {
    let (_dir, tier) = fresh_tier(2);
    let p = part(&app("watermark"), 0, 0);
    tier.append(&p, &batch(1, 2, 50)).await.unwrap();
    let (home, other) = placed_and_other(&tier, &p).await;
    fill(&tier.disks[home]);
    tier.append(&p, &batch(5, 2, 50)).await.unwrap();
    assert_eq!(
        tier.location(&p).unwrap(),
        tier.disks[other].root.to_string_lossy()
    );
    assert_eq!(read_back(tier.as_ref(), &p).await.len(), 4);
}

#[tokio::test]
async fn a_hung_write_times_out_flags_the_disk_and_is_cut_when_it_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let tier = LocalFileTier::new(LocalFileOptions {
        write_timeout: Duration::from_millis(300),
        ..opts(disks(&dir, 2))
    })
    .unwrap();
    let p = part(&app("hung"), 0, 0);
    let first = batch(1, 2, 40);
    tier.append(&p, &first).await.unwrap();
    let (home, _) = placed_and_other(&tier, &p).await;

    tier.inject_fault(Fault {
        at: FaultPoint::StallMs(1500),
        errno: 0,
    });
    let stalled = batch(10, 2, 40);
    let err = tier.append(&p, &stalled).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(tier.disk_reports()[home].status, DiskStatus::Unhealthy);
    // The retry does not wait for the hung write: it opens part 1 on the other disk.
    let retried = tokio::time::timeout(Duration::from_millis(1000), tier.append(&p, &stalled))
        .await
        .expect("the retry does not wait behind the hung write");
    retried.unwrap();
    // Once the hung write finishes it is cut back: its blocks are not read twice.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut want = first.blocks().to_vec();
    want.extend(stalled.blocks().iter().cloned());
    assert_blocks_eq(&read_back(tier.as_ref(), &p).await, &want);
    let (d0, _) = part_files(&tier.disks[home].root, &p, 0);
    assert_eq!(file_len(&d0), 80);
}

#[tokio::test]
async fn a_vanished_partition_directory_starts_a_new_part() {
    let (dir, tier) = fresh_tier(1);
    let p = part(&app("vanished"), 0, 0);
    tier.append(&p, &batch(1, 2, 40)).await.unwrap();
    std::fs::remove_dir_all(dir.path().join("disk0").join("vanished")).unwrap();
    assert!(tier.append(&p, &batch(10, 1, 40)).await.is_err());
    let later = batch(10, 1, 40);
    tier.append(&p, &later).await.unwrap();
    // The lost part's blocks are left out of the index; the new part reads back.
    let idx = tier.read_index(&p).await.unwrap();
    let entries = IndexEntry::decode_all(&idx.index);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].offset, 80);
    assert_eq!(
        tier.read_data(&p, Span::at(80, 40)).await.unwrap(),
        later.blocks()[0].data
    );
    assert!(tier.read_data(&p, Span::at(0, 40)).await.is_err());
}

#[test]
fn part_names_round_trip_and_reject_other_servers() {
    for seq in [0, 1, 17] {
        let name = format!("{}.index", files::part_stem(PREFIX, seq));
        assert_eq!(files::parse_part_name(&name, PREFIX, "index"), Some(seq));
    }
    for other in [
        "10.0.0.7-19998.index",
        "10.0.0.7-19999.01.index",
        "10.0.0.7-19999..index",
        "10.0.0.7-19999.x.index",
        "10.0.0.7-19999.0.index",
        "10.0.0.7-19999.data",
    ] {
        assert_eq!(
            files::parse_part_name(other, PREFIX, "index"),
            None,
            "{other}"
        );
    }
}

/// A tier over `n` fresh disks, and the directory that holds them.
fn fresh_tier(n: usize) -> (TempDir, Arc<LocalFileTier>) {
    let dir = tempfile::tempdir().unwrap();
    let tier = LocalFileTier::new(opts(disks(&dir, n))).unwrap();
    (dir, tier)
}

/// A tier over two fresh disks, with the directory that holds them and their paths.
fn two_disks() -> (TempDir, Vec<PathBuf>, Arc<LocalFileTier>) {
    let dir = tempfile::tempdir().unwrap();
    let paths = disks(&dir, 2);
    let tier = LocalFileTier::new(opts(paths.clone())).unwrap();
    (dir, paths, tier)
}

#[tokio::test]
async fn a_restart_adopts_every_part_and_drops_apps_not_kept() {
    let (_dir, paths, tier) = two_disks();
    let (kept, gone) = (part(&app("kept"), 0, 0), part(&app("gone"), 1, 3));
    let mut want = Vec::new();
    for (n, b) in [batch(1, 2, 64), batch(10, 3, 32)].into_iter().enumerate() {
        if n == 1 {
            // Fail the first disk over so the partition has two parts.
            let home = storage_id(&tier, &kept).await as usize;
            tier.disks[home].mark_unhealthy("test");
        }
        tier.append(&kept, &b).await.unwrap();
        want.extend(b.blocks().iter().cloned());
    }
    tier.append(&gone, &batch(50, 1, 10)).await.unwrap();
    // A crash in the middle of a write: half a record and data past the last record.
    let last_index = files::PartitionPaths::new(
        paths[tier.disks.iter().position(|d| d.is_healthy()).unwrap()].join("kept/0/0-0"),
        PREFIX,
        1,
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&last_index.index)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &[9; 17]))
        .unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&last_index.data)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &[7; 33]))
        .unwrap();
    // Another server's files in the same directory are left alone.
    let foreign = last_index.dir.join("10.0.0.8-19999.index");
    std::fs::write(&foreign, b"x").unwrap();
    drop(tier);

    let again = LocalFileTier::new(opts(paths.clone())).unwrap();
    let report = again.recover(&|a| a.as_str() == "kept");
    assert_eq!(report.partitions, 1, "{report:?}");
    assert_eq!(report.parts, 2, "{report:?}");
    assert_eq!(report.blocks, 5);
    assert_eq!(report.repaired, 1);
    assert_eq!(report.dropped_partitions, 1);
    assert!(foreign.exists());
    assert_blocks_eq(&read_back(again.as_ref(), &kept).await, &want);
    assert_eq!(again.read_index(&gone).await.unwrap(), IndexRead::default());
    assert!(!paths.iter().any(|p| p.join("gone").exists()));
    // Appends continue after the recovered data, in the last part.
    let more = batch(80, 1, 16);
    again.append(&kept, &more).await.unwrap();
    want.extend(more.blocks().iter().cloned());
    assert_blocks_eq(&read_back(again.as_ref(), &kept).await, &want);
    assert_eq!(file_len(&last_index.data), 3 * 32 + 16);
}

/// Found by the soak: a server restarted while one data path was full skipped that path at
/// recovery (its write probe failed), and the acknowledged partitions there read back as lost.
/// A path that fails the probe is still read: its partitions are adopted for reads, nothing is
/// cut or deleted on it, and appends move to a healthy path.
#[tokio::test]
async fn a_restart_adopts_the_partitions_of_a_disk_that_fails_its_probe() {
    let (_dir, paths, tier) = two_disks();
    let (kept, gone) = (part(&app("kept"), 0, 0), part(&app("gone"), 1, 3));
    let first = batch(1, 3, 40);
    tier.append(&kept, &first).await.unwrap();
    let home = storage_id(&tier, &kept).await as usize;
    tier.disks[1 - home].mark_unhealthy("test: keep `gone` on the same disk");
    tier.append(&gone, &batch(50, 1, 10)).await.unwrap();
    drop(tier);
    // A torn tail, as a crash mid-write leaves it.
    let paths0 = files::PartitionPaths::new(paths[home].join("kept/0/0-0"), PREFIX, 0);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&paths0.data)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &[7; 33]))
        .unwrap();
    let torn_len = file_len(&paths0.data);
    // The disk now refuses the probe's write, as a full one does.
    std::fs::create_dir_all(paths[home].join(disk::PROBE_FILE_NAME)).unwrap();

    let again = LocalFileTier::new(opts(paths.clone())).unwrap();
    assert!(!again.disks[home].is_healthy());
    let report = again.recover(&|a| a.as_str() == "kept");
    assert_eq!(report.partitions, 1, "{report:?}");
    assert_eq!(report.blocks, 3, "{report:?}");
    assert_eq!(report.repaired, 1, "{report:?}");
    let mut want: Vec<Block> = first.blocks().to_vec();
    assert_blocks_eq(&read_back(again.as_ref(), &kept).await, &want);
    // Nothing written on the unhealthy disk: the tail is still there, `gone` too.
    assert_eq!(file_len(&paths0.data), torn_len);
    assert!(paths[home].join("gone").exists());
    // The next append goes to the healthy disk, and both parts read back.
    let more = batch(80, 2, 16);
    again.append(&kept, &more).await.unwrap();
    want.extend(more.blocks().iter().cloned());
    assert_blocks_eq(&read_back(again.as_ref(), &kept).await, &want);
    assert!(paths[1 - home].join("kept/0/0-0").exists());
}

/// The extents FIEMAP reports for `path`, as (logical offset, length, flags). Flags are not
/// synced first, so a range still only in the page cache shows how it is held.
#[allow(unsafe_code)] // FIEMAP has no safe wrapper; see SAFETY
fn extents(path: &Path) -> Vec<(u64, u64, u32)> {
    use std::os::fd::AsRawFd;
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const MAX: usize = 64;
    // struct fiemap (32 bytes) followed by MAX struct fiemap_extent (56 bytes each).
    let mut buf = vec![0u64; (32 + 56 * MAX) / 8];
    buf[1] = u64::MAX; // fm_length
    buf[3] = MAX as u64; // fm_extent_count (low half); fm_reserved 0
    let file = std::fs::File::open(path).unwrap();
    // SAFETY: `buf` is a properly sized, 8-byte aligned struct fiemap with room for MAX extents.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, buf.as_mut_ptr()) };
    assert_eq!(
        rc,
        0,
        "FIEMAP on {} failed: {} (the test needs a disk file system such as ext4 or xfs under $TMPDIR)",
        path.display(),
        std::io::Error::last_os_error()
    );
    let mapped = (buf[2] >> 32) as usize;
    (0..mapped.min(MAX))
        .map(|i| {
            let e = &buf[4 + i * 7..4 + (i + 1) * 7];
            (e[0], e[2], e[5] as u32)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_allocate_their_range_without_growing_the_file() {
    const DELALLOC: u32 = 0x4;
    let (dir, tier) = fresh_tier(1);
    let a = app("prealloc");
    let p = part(&a, 0, 0);
    // 2 MiB, then 1 MiB more: neither synced (sync_on_write is off), so without an allocation
    // ahead of the write the kernel would hold both as delayed allocations.
    tier.append(&p, &batch(1, 8, 256 << 10)).await.unwrap();
    tier.append(&p, &batch(9, 4, 256 << 10)).await.unwrap();
    let (data, index) = part_files(&dir.path().join("disk0"), &p, 0);
    assert_eq!(
        file_len(&data),
        3 << 20,
        "the size is the bytes written, nothing reserved past it"
    );
    assert_eq!(file_len(&index), 12 * 40);
    let ext = extents(&data);
    let covered: u64 = ext.iter().map(|e| e.1).sum();
    assert!(
        covered >= 3 << 20,
        "the written range is allocated: {ext:?}"
    );
    assert!(
        ext.iter().all(|e| e.2 & DELALLOC == 0),
        "no extent waits for a delayed allocation: {ext:?}"
    );
    let got = read_back(tier.as_ref(), &p).await;
    assert_eq!(got.len(), 12);
}

/// Resident page-cache bytes of `path` (util-linux `fincore`).
fn cached_bytes(path: &Path) -> u64 {
    let out = std::process::Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(path)
        .output()
        .expect("fincore (util-linux) runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Appends of sizes that start and end anywhere in a page, across the 1 MiB staging chunk and
/// with many blocks inside one page: each leaves the file exactly as long as the bytes written,
/// every block reads back, and only the partial pages at the appends' ends went through the page
/// cache (the rest was written with `O_DIRECT`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_appends_keep_exact_sizes_and_skip_the_page_cache() {
    let (dir, tier) = fresh_tier(1);
    let p = part(&app("direct"), 0, 0);
    // (blocks, block length): 1 B; within a page; to a page boundary; 4 KiB + 1; 3 MiB + 3 in
    // 1 MiB + 1 blocks (several staging chunks); 1,500 blocks of 3 B (more slices than one
    // vectored write takes); 8 KiB blocks from an unaligned offset.
    let shapes = [
        (1, 1),
        (2, 1000),
        (1, 4096 - 2001),
        (1, 4097),
        (3, (1 << 20) + 1),
        (1500, 3),
        (40, 8192),
    ];
    let (data, _) = part_files(&dir.path().join("disk0"), &p, 0);
    let mut want = Vec::new();
    let (mut next_id, mut len, mut partial_pages) = (1, 0u64, 0u64);
    for (n, size) in shapes {
        let b = batch(next_id, n, size);
        next_id += n;
        tier.append(&p, &b).await.unwrap();
        let start = len;
        len += n as u64 * size as u64;
        want.extend(b.blocks().iter().cloned());
        assert_eq!(file_len(&data), len, "the size is the bytes written");
        partial_pages += u64::from(start % 4096 != 0) + u64::from(len % 4096 != 0);
        if start / 4096 + 1 < len / 4096 {
            // Whole pages went around the cache: at most the two partial ones per append
            // were cached (and kept), whatever the append's size.
            assert!(
                cached_bytes(&data) <= partial_pages * 4096,
                "after {n} x {size} B: {} B cached",
                cached_bytes(&data)
            );
        }
    }
    assert_blocks_eq(&read_back(tier.as_ref(), &p).await, &want);
}

/// A ramfs mounted for a test (needs root, as CI has), unmounted when dropped.
struct Ramfs(PathBuf);

impl Ramfs {
    fn mount(at: PathBuf) -> Self {
        std::fs::create_dir_all(&at).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "ramfs", "ramfs"])
            .arg(&at)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mount a ramfs at {} (root?): {status}",
            at.display()
        );
        Ramfs(at)
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A file system that refuses `O_DIRECT` (ramfs: `EINVAL` from the open) gets every byte
/// through the page cache, and its disk is not asked again: the real refusal, not an
/// injected one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_system_refusing_direct_io_is_written_through_the_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    // The app's folder is a ramfs inside the data path: ramfs reports no size, so it could not
    // be a data path of its own, and the tier writes the app's files there.
    let ramfs = Ramfs::mount(dir.path().join("disk0").join("nodirect"));
    let tier = LocalFileTier::new(opts(disks(&dir, 1))).unwrap();
    let p = part(&app("nodirect"), 0, 0);
    let first = batch(1, 4, 64 << 10);
    tier.append(&p, &first).await.unwrap();
    assert!(
        tier.disks[0]
            .direct_refused
            .load(std::sync::atomic::Ordering::Relaxed),
        "the refusal was seen"
    );
    let second = batch(5, 4, 64 << 10);
    tier.append(&p, &second).await.unwrap();
    let (data, _) = part_files(&dir.path().join("disk0"), &p, 0);
    assert!(data.starts_with(&ramfs.0));
    assert_eq!(file_len(&data), 8 * (64 << 10));
    let want: Vec<_> = first
        .blocks()
        .iter()
        .chain(second.blocks())
        .cloned()
        .collect();
    assert_blocks_eq(&read_back(tier.as_ref(), &p).await, &want);
}
