//! Many concurrent writers far over capacity: every request succeeds or gets `NO_BUFFER`, the
//! budget never exceeds its capacity, and everything accepted reads back.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use spillway::config::ByteSize;
use spillway::proto;
use spillway::proto::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_far_over_capacity_get_no_buffer_never_more_memory() {
    const CAPACITY: u64 = 1 << 20;
    let s = start(2, |c| {
        c.memory_store.capacity = ByteSize(CAPACITY);
        // Answer NO_BUFFER at once, so the load is sure to see it (the wait is tested below).
        c.memory_store.require_buffer_wait = Duration::ZERO;
        c.hybrid_store.memory_single_buffer_max_spill_size = ByteSize(128 << 10);
    })
    .await;
    let mut client = s.client.clone();
    register(&mut client, "app_bp", 0, 0..16, false).await;

    // Sample the budget's own snapshot while the load runs.
    let budget = s.running.registry().store().memory().budget().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak, budget) = (stop.clone(), peak.clone(), budget.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let snap = budget.snapshot();
                assert!(
                    snap.reserved + snap.used <= snap.capacity,
                    "budget over capacity: {snap:?}"
                );
                peak.fetch_max(snap.reserved + snap.used, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        })
    };

    // 64 writers × 40 sends × 16 KiB ≈ 40 MiB through a 1 MiB budget.
    let no_buffer = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for task in 0..64i64 {
        let mut client = client.clone();
        let no_buffer = no_buffer.clone();
        writers.push(tokio::spawn(async move {
            let mut expected = std::collections::BTreeMap::new();
            let mut reported: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
            for seq in 0..40 {
                let p = ((task + seq) % 16) as i32;
                let b = make_block(seq, p, task, 16 << 10);
                expected.insert((p, b.block_id), b.data.clone());
                reported.entry(p).or_default().push(b.block_id);
                let n = send(&mut client, "app_bp", 0, vec![(p, vec![b])]).await;
                no_buffer.fetch_add(n as u64, Ordering::Relaxed);
            }
            report(&mut client, "app_bp", 0, task, &reported).await;
            expected
        }));
    }
    let mut expected: std::collections::BTreeMap<
        i32,
        std::collections::BTreeMap<i64, bytes::Bytes>,
    > = Default::default();
    for w in writers {
        for ((p, id), data) in w.await.unwrap() {
            expected.entry(p).or_default().insert(id, data);
        }
    }
    stop.store(true, Ordering::Relaxed);
    sampler.await.unwrap();

    assert!(
        no_buffer.load(Ordering::Relaxed) > 0,
        "the load must have hit back-pressure"
    );
    assert!(peak.load(Ordering::Relaxed) <= CAPACITY);
    let (_, files) = verify_shuffle(&mut client, "app_bp", 0, &expected).await;
    assert!(files > 0);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_buffer_larger_than_capacity_is_refused() {
    let mut s = start(1, |c| c.memory_store.capacity = ByteSize(1 << 20)).await;
    register(&mut s.client, "app_big", 0, 0..1, false).await;
    let r = s
        .client
        .require_buffer(proto::RequireBufferRequest {
            require_size: 2 << 20,
            app_id: "app_big".into(),
            partition_ids: vec![0],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(r.status),
        StatusCode::InvalidRequest,
        "{}",
        r.ret_msg
    );
    assert_eq!(r.require_buffer_id, -1);
    // Fill the budget with an unused ticket, then a regular request gets NO_BUFFER.
    let r = s
        .client
        .require_buffer(proto::RequireBufferRequest {
            require_size: (1 << 20) - 100,
            app_id: "app_big".into(),
            partition_ids: vec![0],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    let r = s
        .client
        .require_buffer(proto::RequireBufferRequest {
            require_size: 1000,
            app_id: "app_big".into(),
            partition_ids: vec![0],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::NoBuffer);
    assert_eq!(r.require_buffer_id, -1);
    s.running.shutdown().await;
}

async fn require(client: &mut Client, app: &str, size: i32) -> StatusCode {
    status_of(common::require_once(client, app, size).await.status)
}

/// Over full memory, requireBuffer waits for a release (here: the holder's app is
/// unregistered, which frees its ticket) and then succeeds; when nothing is released within
/// `require_buffer_wait` it answers NO_BUFFER.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_buffer_waits_for_memory_to_be_released() {
    const CAPACITY: i32 = 1 << 20;
    for (wait, released) in [
        (Duration::from_secs(60), true),
        (Duration::from_millis(50), false),
    ] {
        let s = start(1, |c| {
            c.memory_store.capacity = ByteSize(CAPACITY as u64);
            c.memory_store.require_buffer_wait = wait;
        })
        .await;
        let mut client = s.client.clone();
        register(&mut client, "app_hold", 0, 0..1, false).await;
        register(&mut client, "app_wait", 0, 0..1, false).await;
        // A ticket that takes all memory and is never used.
        assert_eq!(
            require(&mut client, "app_hold", CAPACITY).await,
            StatusCode::Success
        );
        // Several waiters: one release with room for all of them must serve all of them
        // (waiters take turns, each passing the turn on), not just the first.
        let waiters: Vec<_> = (0..if released { 3 } else { 1 })
            .map(|_| {
                let mut client = client.clone();
                tokio::spawn(async move { require(&mut client, "app_wait", 1024).await })
            })
            .collect();
        if released {
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(
                waiters.iter().all(|w| !w.is_finished()),
                "no answer while memory is full"
            );
            let r = client
                .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest {
                    app_id: "app_hold".into(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(status_of(r.status), StatusCode::Success);
            for w in waiters {
                // Far inside the 60 s wait and the 20 s ticket expiry (which frees the previous
                // waiter's unused ticket): an unserved waiter would answer only then.
                let answer = tokio::time::timeout(Duration::from_secs(10), w)
                    .await
                    .expect("every waiter is served by the release, not by its deadline");
                assert_eq!(answer.unwrap(), StatusCode::Success);
            }
        } else {
            for w in waiters {
                assert_eq!(w.await.unwrap(), StatusCode::NoBuffer);
            }
        }
        s.running.shutdown().await;
    }
}

/// The stall of issue 34: cached bytes sit just below the high watermark (so no watermark
/// spill starts) and the next request is larger than what is left above them. It must make the
/// server spill and then be granted, both when the server waits (`require_buffer_wait`) and
/// when it answers at once and the client retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_headroom_makes_the_server_spill() {
    const CAPACITY: u64 = 4 << 20;
    for wait in [Duration::from_millis(100), Duration::ZERO] {
        let s = start(1, |c| {
            c.memory_store.capacity = ByteSize(CAPACITY);
            c.memory_store.require_buffer_wait = wait;
            c.hybrid_store.memory_spill_high_watermark = 0.8;
            c.hybrid_store.memory_spill_low_watermark = 0.2;
            // No spill of a single buffer: only the watermarks (and the fix) spill.
            c.hybrid_store.memory_single_buffer_spill = false;
        })
        .await;
        let mut client = s.client.clone();
        register(&mut client, "app_stall", 0, 0..8, false).await;
        // 3.1 MiB cached of a 3.2 MiB high watermark: no watermark spill.
        let mut expected: std::collections::BTreeMap<
            i32,
            std::collections::BTreeMap<i64, bytes::Bytes>,
        > = Default::default();
        let mut reported: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
        for seq in 0..31i64 {
            let p = (seq % 8) as i32;
            let b = make_block(seq, p, 0, 100 << 10);
            expected
                .entry(p)
                .or_default()
                .insert(b.block_id, b.data.clone());
            reported.entry(p).or_default().push(b.block_id);
            assert_eq!(
                send(&mut client, "app_stall", 0, vec![(p, vec![b])]).await,
                0
            );
        }
        let budget = s.running.registry().store().memory().budget().clone();
        let before = budget.snapshot();
        assert!(before.unflushed() < before.high_watermark, "{before:?}");
        // 1.5 MiB: more than the 0.9 MiB left, less than the capacity.
        let big = make_block(100, 0, 1, 3 << 19);
        expected
            .entry(0)
            .or_default()
            .insert(big.block_id, big.data.clone());
        reported.entry(0).or_default().push(big.block_id);
        let refused = tokio::time::timeout(
            Duration::from_secs(30),
            send(&mut client, "app_stall", 0, vec![(0, vec![big])]),
        )
        .await
        .expect("the request is granted once the server has spilled");
        if wait.is_zero() {
            // Answered at once: refused first, granted on a retry after the spill.
            assert!(refused >= 1, "the first answer is NO_BUFFER");
        } else {
            assert_eq!(refused, 0, "the call waited for the spill it started");
        }
        report(&mut client, "app_stall", 0, 0, &reported).await;
        let (_, files) = verify_shuffle(&mut client, "app_stall", 0, &expected).await;
        assert!(files > 0, "the spill wrote files");
        s.running.shutdown().await;
    }
}

/// A partition that turned huge in one send holds more memory than a huge partition may,
/// under the watermarks and with no single-buffer spill: its next requireBuffer is refused
/// (`NO_BUFFER_FOR_HUGE_PARTITION`) and must make the server spill that partition, or no send
/// could ever bring it back under the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_huge_partition_is_spilled() {
    let s = start(1, |c| {
        c.memory_store.capacity = ByteSize(4 << 20);
        c.hybrid_store.memory_single_buffer_spill = false;
        c.hybrid_store.huge_partition_size_threshold = ByteSize(1 << 20);
        // 0.2 × 4 MiB = 0.8 MiB in memory at most for a huge partition.
        c.hybrid_store.huge_partition_memory_limit_ratio = 0.2;
    })
    .await;
    let mut client = s.client.clone();
    register(&mut client, "app_huge", 0, 0..1, false).await;
    let mut expected: std::collections::BTreeMap<
        i32,
        std::collections::BTreeMap<i64, bytes::Bytes>,
    > = Default::default();
    let mut reported: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
    for seq in 0..2 {
        // 1.5 MiB each: the first makes the partition huge with all of it in memory.
        let b = make_block(seq, 0, 0, 3 << 19);
        expected
            .entry(0)
            .or_default()
            .insert(b.block_id, b.data.clone());
        reported.entry(0).or_default().push(b.block_id);
        tokio::time::timeout(
            Duration::from_secs(30),
            send(&mut client, "app_huge", 0, vec![(0, vec![b])]),
        )
        .await
        .expect("the huge partition is spilled and the send goes through");
    }
    report(&mut client, "app_huge", 0, 0, &reported).await;
    let (_, files) = verify_shuffle(&mut client, "app_huge", 0, &expected).await;
    assert!(files > 0, "the huge partition was spilled");
    s.running.shutdown().await;
}

/// A request one byte under the capacity, over cached blocks that sit under the high
/// watermark: the server spills all of them for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_just_under_the_capacity_is_granted() {
    const CAPACITY: usize = 2 << 20;
    let s = start(1, |c| c.memory_store.capacity = ByteSize(CAPACITY as u64)).await;
    let mut client = s.client.clone();
    register(&mut client, "app_full", 0, 0..2, false).await;
    let mut expected: std::collections::BTreeMap<
        i32,
        std::collections::BTreeMap<i64, bytes::Bytes>,
    > = Default::default();
    let mut reported: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
    // 1 MiB cached, then a block whose requireBuffer asks for CAPACITY - 1 bytes (the helper
    // adds 32 bytes of overhead per block).
    for (seq, p, len) in [(0, 0, 1 << 20), (1, 1, CAPACITY - 33)] {
        let b = make_block(seq, p, 0, len);
        expected
            .entry(p)
            .or_default()
            .insert(b.block_id, b.data.clone());
        reported.entry(p).or_default().push(b.block_id);
        let refused = tokio::time::timeout(
            Duration::from_secs(30),
            send(&mut client, "app_full", 0, vec![(p, vec![b])]),
        )
        .await
        .expect("granted after the server spilled everything else");
        assert_eq!(refused, 0, "the call waited for its spill");
    }
    report(&mut client, "app_full", 0, 0, &reported).await;
    verify_shuffle(&mut client, "app_full", 0, &expected).await;
    s.running.shutdown().await;
}

/// Many apps, each with its own partitions, writing requests of up to 40 % of a small store at
/// once: every write goes through (none stalls on NO_BUFFER) and everything reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_apps_on_a_small_store_all_finish() {
    const CAPACITY: usize = 4 << 20;
    const APPS: usize = 24;
    let s = start(2, |c| c.memory_store.capacity = ByteSize(CAPACITY as u64)).await;
    let mut tasks = Vec::new();
    for a in 0..APPS {
        let mut client = s.client.clone();
        tasks.push(tokio::spawn(async move {
            let app = format!("app_many_{a}");
            register(&mut client, &app, 0, 0..4, false).await;
            let mut expected: std::collections::BTreeMap<
                i32,
                std::collections::BTreeMap<i64, bytes::Bytes>,
            > = Default::default();
            let mut reported: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
            for seq in 0..6i64 {
                let p = ((a as i64 + seq) % 4) as i32;
                // 64 KiB to 1.6 MiB: some requests are larger than the 0.8 MiB above the
                // high watermark.
                let len = (64 << 10) + ((a * 7 + seq as usize * 13) % 24) * (64 << 10);
                let b = make_block(seq, p, a as i64, len);
                expected
                    .entry(p)
                    .or_default()
                    .insert(b.block_id, b.data.clone());
                reported.entry(p).or_default().push(b.block_id);
                send(&mut client, &app, 0, vec![(p, vec![b])]).await;
            }
            report(&mut client, &app, 0, a as i64, &reported).await;
            (app, expected)
        }));
    }
    let mut client = s.client.clone();
    for t in tasks {
        let (app, expected) = tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("every app finishes its writes")
            .unwrap();
        verify_shuffle(&mut client, &app, 0, &expected).await;
    }
    s.running.shutdown().await;
}
