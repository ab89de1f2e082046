//! Register → require → send → report → read round trips through the real gRPC service,
//! verified byte for byte, with the data in memory, in files, and split between both.

mod common;

use common::*;
use spillway::config::ByteSize;
use spillway::proto;
use spillway::proto::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_only_in_memory() {
    let mut s = start(2, |_| {}).await;
    register(&mut s.client, "app_mem", 0, 0..4, false).await;
    let expected = write_shuffle(&mut s.client, "app_mem", 0, 3, 4, 5, 1000).await;
    let (mem, files) = verify_shuffle(&mut s.client, "app_mem", 0, &expected).await;
    assert_eq!((mem, files), (60, 0));
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_only_in_files_after_finish_shuffle() {
    let mut s = start(2, |_| {}).await;
    register(&mut s.client, "app_files", 3, 0..4, false).await;
    let expected = write_shuffle(&mut s.client, "app_files", 3, 3, 4, 5, 1000).await;
    let r = s
        .client
        .finish_shuffle(proto::FinishShuffleRequest {
            app_id: "app_files".into(),
            shuffle_id: 3,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    assert_eq!(
        s.running
            .registry()
            .store()
            .memory()
            .budget()
            .snapshot()
            .used,
        0
    );
    let (mem, files) = verify_shuffle(&mut s.client, "app_files", 3, &expected).await;
    assert_eq!((mem, files), (0, 60));

    // Uniffle's layout: <disk>/<appId>/<shuffleId>/<p>-<p>/<serverId>.{data,index}
    let id = s.running.server_id.clone();
    let mut found = 0;
    for p in 0..4 {
        let on_disks: Vec<_> = s
            .disks
            .iter()
            .map(|d| d.path().join(format!("app_files/3/{p}-{p}/{id}.index")))
            .filter(|f| f.exists())
            .collect();
        assert_eq!(on_disks.len(), 1, "partition {p} lives on exactly one disk");
        assert!(on_disks[0].with_extension("data").exists());
        found += 1;
    }
    assert_eq!(found, 4);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_split_between_memory_and_files_while_spilling() {
    // A small memory tier: the watermark spiller runs while we write and read.
    let mut s = start(3, |c| {
        c.memory_store.capacity = ByteSize(1 << 20);
        c.hybrid_store.memory_single_buffer_max_spill_size = ByteSize(256 << 10);
    })
    .await;
    register(&mut s.client, "app_split", 1, 0..8, false).await;
    let expected = write_shuffle(&mut s.client, "app_split", 1, 4, 8, 12, 4000).await;
    let (mem, files) = verify_shuffle(&mut s.client, "app_split", 1, &expected).await;
    assert!(
        files > 0,
        "some blocks were spilled (mem {mem}, files {files})"
    );
    assert!(
        mem > 0,
        "some blocks were still in memory (mem {mem}, files {files})"
    );
    // Partitions spread over the disks.
    let used = s
        .disks
        .iter()
        .filter(|d| d.path().join("app_split/1").exists())
        .count();
    assert!(used >= 2, "partitions spread over disks, used {used}");
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_race_a_running_spill() {
    let mut s = start(2, |c| {
        c.memory_store.capacity = ByteSize(8 << 20);
    })
    .await;
    register(&mut s.client, "app_race", 0, 0..2, false).await;
    let expected = write_shuffle(&mut s.client, "app_race", 0, 2, 2, 40, 8000).await;
    // Start a spill of everything and read while it runs.
    let registry = s.running.registry().clone();
    let flush = tokio::spawn(async move {
        let scope =
            spillway::store::PurgeScope::App(spillway::ids::AppId::parse("app_race").unwrap());
        registry.store().flush(&scope).await;
    });
    for _ in 0..3 {
        verify_shuffle(&mut s.client, "app_race", 0, &expected).await;
    }
    flush.await.unwrap();
    let (mem, files) = verify_shuffle(&mut s.client, "app_race", 0, &expected).await;
    assert_eq!(mem, 0);
    assert_eq!(files, 160);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_apps_are_isolated() {
    let mut s = start(2, |_| {}).await;
    register(&mut s.client, "app_a", 0, 0..3, false).await;
    register(&mut s.client, "app_b", 0, 0..3, false).await;
    let a = write_shuffle(&mut s.client, "app_a", 0, 2, 3, 3, 500).await;
    let b = write_shuffle(&mut s.client, "app_b", 0, 2, 3, 3, 700).await;
    for app in ["app_a", "app_b"] {
        s.client
            .finish_shuffle(proto::FinishShuffleRequest {
                app_id: app.into(),
                shuffle_id: 0,
            })
            .await
            .unwrap();
    }
    let r = s
        .client
        .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest {
            app_id: "app_a".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    let paths: Vec<_> = s.disks.iter().map(|d| d.path().join("app_a")).collect();
    eventually("app_a purged from disk", || {
        paths.iter().all(|p| !p.exists())
    })
    .await;
    verify_shuffle(&mut s.client, "app_b", 0, &b).await;
    // app_a is gone: reads answer NO_REGISTER.
    let r = s
        .client
        .get_memory_shuffle_data(proto::GetMemoryShuffleDataRequest {
            app_id: "app_a".into(),
            partition_id: 0,
            last_block_id: -1,
            read_buffer_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::NoRegister);
    drop(a);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_order_sorts_each_spill_by_task_attempt() {
    let mut s = start(1, |_| {}).await;
    register(&mut s.client, "app_lo", 0, 0..1, true).await;
    let mut expected = std::collections::BTreeMap::new();
    for task in [5i64, 2, 9, 1, 7] {
        let blocks: Vec<_> = (0..3).map(|seq| make_block(seq, 0, task, 300)).collect();
        for b in &blocks {
            expected.insert(b.block_id, b.data.clone());
        }
        send(&mut s.client, "app_lo", 0, vec![(0, blocks)]).await;
    }
    s.client
        .finish_shuffle(proto::FinishShuffleRequest {
            app_id: "app_lo".into(),
            shuffle_id: 0,
        })
        .await
        .unwrap();
    let got = read_partition(&mut s.client, "app_lo", 0, 0).await;
    assert_eq!(got.blocks, expected);
    let mut sorted = got.index_tasks.clone();
    sorted.sort();
    assert_eq!(
        got.index_tasks, sorted,
        "one spill, sorted by task attempt id"
    );
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resent_blocks_are_stored_once() {
    let mut s = start(1, |_| {}).await;
    register(&mut s.client, "app_dup", 0, 0..1, false).await;
    let blocks: Vec<_> = (0..4).map(|seq| make_block(seq, 0, 1, 100)).collect();
    send(&mut s.client, "app_dup", 0, vec![(0, blocks.clone())]).await;
    send(&mut s.client, "app_dup", 0, vec![(0, blocks.clone())]).await;
    let snapshot = s.running.registry().store().memory().budget().snapshot();
    assert_eq!(snapshot.used, 4 * 132, "duplicates' memory returned");
    let got = read_partition(&mut s.client, "app_dup", 0, 0).await;
    assert_eq!(got.from_memory, 4);
    s.running.shutdown().await;
}

/// `commitShuffleTask` as the Java client sends it after each map task when the storage type
/// has no `MEMORY_` prefix.
async fn commit(client: &mut Client, app: &str, shuffle: i32) -> i32 {
    let r = client
        .commit_shuffle_task(proto::ShuffleCommitRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    r.commit_count
}

/// `LOCALFILE` clients read files only, right after the last commit: the commit is answered
/// once every buffered block of the shuffle is on disk (Java's commitShuffle). Under
/// `MEMORY_LOCALFILE` a commit leaves the blocks in memory, where those clients read them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localfile_commit_answers_once_the_shuffle_is_on_disk() {
    for (store_type, spilled) in [
        (spillway::config::StoreType::Localfile, true),
        (spillway::config::StoreType::MemoryLocalfile, false),
    ] {
        let mut s = start(1, |c| c.store_type = store_type).await;
        let app = "app_commit";
        register(&mut s.client, app, 0, 0..3, false).await;
        let mut expected = std::collections::BTreeMap::new();
        for task in 0..2i64 {
            let batch: Vec<(i32, Vec<proto::ShuffleBlock>)> = (0..3)
                .map(|p| (p, (0..4).map(|seq| make_block(seq, p, task, 700)).collect()))
                .collect();
            let mut reported = std::collections::BTreeMap::new();
            for (p, blocks) in &batch {
                for b in blocks {
                    expected
                        .entry(*p)
                        .or_insert_with(std::collections::BTreeMap::new)
                        .insert(b.block_id, b.data.clone());
                    reported.entry(*p).or_insert_with(Vec::new).push(b.block_id);
                }
            }
            send(&mut s.client, app, 0, batch).await;
            assert_eq!(commit(&mut s.client, app, 0).await, task as i32 + 1);
            report(&mut s.client, app, 0, task, &reported).await;
        }
        let (mem, files) = verify_shuffle(&mut s.client, app, 0, &expected).await;
        if spilled {
            assert_eq!(
                (mem, files),
                (0, 24),
                "{store_type:?}: all on disk at the commit"
            );
        } else {
            assert_eq!(
                (mem, files),
                (24, 0),
                "{store_type:?}: the commit spills nothing"
            );
        }
        s.running.shutdown().await;
    }
}

/// `getShuffleResultForMultiPart` checks that every id it returns carries one of the requested
/// partitions under the query's layout. The check compares each partition's ids with that
/// partition first and searches the request only for the others: an id reported under
/// partition 5 that carries partition 6 passes when 6 is requested too, and is still an
/// `INTERNAL_ERROR` ("Inconsistent block number") when it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_part_result_checks_ids_reported_under_another_requested_partition() {
    let mut s = start(1, |_| {}).await;
    let app = unique("multipart_stray");
    register(&mut s.client, &app, 0, 0..8, false).await;
    let own: Vec<i64> = (0..100).map(|t| LAYOUT.block_id(0, 5, t)).collect();
    let foreign = LAYOUT.block_id(1, 6, 7);
    let mut ids = std::collections::BTreeMap::new();
    ids.insert(5, own.iter().copied().chain([foreign]).collect::<Vec<_>>());
    ids.insert(6, vec![LAYOUT.block_id(0, 6, 0)]);
    report(&mut s.client, &app, 0, 1, &ids).await;

    let query = |partitions: Vec<i32>| proto::GetShuffleResultForMultiPartRequest {
        app_id: app.clone(),
        shuffle_id: 0,
        partitions,
        block_id_layout: None,
    };
    let r = s
        .client
        .get_shuffle_result_for_multi_part(query(vec![6, 5]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    let got = spillway::codec::bitmap::decode(&r.serialized_bitmap).unwrap();
    assert_eq!(got.len(), 102);
    assert!(got.contains(foreign as u64));

    let r = s
        .client
        .get_shuffle_result_for_multi_part(query(vec![5, 4]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::InternalError);
    assert!(
        r.ret_msg.contains("Inconsistent block number") && r.ret_msg.contains("1 of them"),
        "{}",
        r.ret_msg
    );
}

/// apache/uniffle#2684: a block id that repeats at the end of a partition's memory data made
/// readers that restart from "the block after lastBlockId" read the same tail forever. Here the
/// last block is sent again at the end, and memory is read the way every client does (from
/// the last block id it got, a small buffer so it takes several rounds): the reads end, each
/// block comes once, and the post-0.10 `is_end` (field 5) is set exactly on the answer that
/// reaches the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_reads_end_when_the_last_block_id_repeats() {
    let mut s = start(1, |_| {}).await;
    let app = "app_repeat";
    register(&mut s.client, app, 0, 0..1, false).await;
    let blocks: Vec<_> = (0..6).map(|seq| make_block(seq, 0, 1, 100)).collect();
    send(&mut s.client, app, 0, vec![(0, blocks.clone())]).await;
    // The last block again, as a retried send delivers it.
    send(&mut s.client, app, 0, vec![(0, vec![blocks[5].clone()])]).await;
    let mut last = -1;
    let mut seen = Vec::new();
    let mut ends = Vec::new();
    for round in 0.. {
        assert!(round < 20, "memory reads never end: {seen:?}");
        let r = s
            .client
            .get_memory_shuffle_data(proto::GetMemoryShuffleDataRequest {
                app_id: app.into(),
                shuffle_id: 0,
                partition_id: 0,
                last_block_id: last,
                read_buffer_size: 250,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
        ends.push(r.is_end);
        if r.shuffle_data_block_segments.is_empty() {
            break;
        }
        for seg in &r.shuffle_data_block_segments {
            seen.push(seg.block_id);
        }
        last = r.shuffle_data_block_segments.last().unwrap().block_id;
    }
    let want: Vec<i64> = blocks.iter().map(|b| b.block_id).collect();
    assert_eq!(seen, want, "each block once, in order");
    // 250-byte rounds of 100-byte blocks: 3, 3, then the empty answer; the second reaches
    // the end.
    assert_eq!(ends, vec![Some(false), Some(true), Some(true)]);
    s.running.shutdown().await;
}
