//! Every kind of bad input gets a status code (never a panic or a gRPC error), and nothing
//! already accepted is lost.

mod common;

use std::time::Duration;

use common::*;
use spillway::config::ByteSize;
use spillway::proto;
use spillway::proto::StatusCode;

async fn send_raw(
    client: &mut Client,
    app: &str,
    shuffle: i32,
    ticket: i64,
    blocks: Vec<(i32, Vec<proto::ShuffleBlock>)>,
) -> proto::SendShuffleDataResponse {
    client
        .send_shuffle_data(proto::SendShuffleDataRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
            require_buffer_id: ticket,
            shuffle_data: blocks
                .into_iter()
                .map(|(p, block)| proto::ShuffleData {
                    partition_id: p,
                    block,
                })
                .collect(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_app_shuffle_and_ticket() {
    let mut s = start(1, |_| {}).await;
    let c = &mut s.client;
    let r = require_for(c, "nobody", vec![0], 100).await;
    assert_eq!(status_of(r.status), StatusCode::NoRegister);
    assert_eq!(
        r.require_buffer_id, 0,
        "Java leaves the id unset after verifyRequest"
    );
    let r = send_raw(c, "nobody", 0, 1, vec![(0, vec![make_block(0, 0, 0, 10)])]).await;
    assert_eq!(status_of(r.status), StatusCode::AppNotFound);
    let r = c
        .app_heartbeat(proto::AppHeartBeatRequest {
            app_id: "nobody".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::NoRegister);
    let r = c
        .unregister_shuffle(proto::ShuffleUnregisterRequest {
            app_id: "nobody".into(),
            shuffle_id: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(r.status),
        StatusCode::Success,
        "unregister is idempotent"
    );

    register(c, "app", 0, 0..2, false).await;
    // Unknown shuffle.
    let t = require_for(c, "app", vec![], 100).await;
    assert_eq!(status_of(t.status), StatusCode::Success);
    let r = send_raw(
        c,
        "app",
        9,
        t.require_buffer_id,
        vec![(0, vec![make_block(0, 0, 0, 10)])],
    )
    .await;
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    // Unknown and reused tickets.
    let r = send_raw(
        c,
        "app",
        0,
        424242,
        vec![(0, vec![make_block(0, 0, 0, 10)])],
    )
    .await;
    assert_eq!(status_of(r.status), StatusCode::InternalError);
    let t = require_for(c, "app", vec![0], 42).await;
    let r = send_raw(
        c,
        "app",
        0,
        t.require_buffer_id,
        vec![(0, vec![make_block(0, 0, 0, 10)])],
    )
    .await;
    assert_eq!(status_of(r.status), StatusCode::Success);
    let r = send_raw(
        c,
        "app",
        0,
        t.require_buffer_id,
        vec![(0, vec![make_block(1, 0, 0, 10)])],
    )
    .await;
    assert_eq!(
        status_of(r.status),
        StatusCode::InternalError,
        "tickets are single use"
    );
    // Results of a shuffle nobody reported: empty bitmap, SUCCESS.
    assert!(expected_ids(c, "app", 7, 0).await.is_empty());
    let got = read_partition(c, "app", 0, 0).await;
    assert_eq!(got.blocks.len(), 1, "the accepted block is still there");
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_ids_with_path_characters_never_touch_the_disk() {
    let mut s = start(1, |_| {}).await;
    for bad in ["../evil", "a/b", "a\0b", "..", ".", "", "x\\y"] {
        let r = s
            .client
            .register_shuffle(proto::ShuffleRegisterRequest {
                app_id: bad.into(),
                partition_ranges: vec![proto::ShufflePartitionRange { start: 0, end: 0 }],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status_of(r.status), StatusCode::InvalidRequest, "{bad:?}");
        let r = s
            .client
            .get_local_shuffle_index(proto::GetLocalShuffleIndexRequest {
                app_id: bad.into(),
                partition_num_per_range: 1,
                partition_num: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status_of(r.status), StatusCode::InvalidRequest, "{bad:?}");
    }
    let parent = s.disks[0].path().parent().unwrap();
    assert!(!parent.join("evil").exists());
    assert_eq!(s.running.registry().app_count(), 0);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_sends_are_refused_and_accepted_data_survives() {
    let mut s = start(1, |_| {}).await;
    let c = &mut s.client;
    register(c, "app", 0, 0..2, false).await;
    let good = make_block(0, 0, 1, 100);
    send(c, "app", 0, vec![(0, vec![good.clone()])]).await;

    // Partition outside the registered ranges.
    let r = require_for(c, "app", vec![5], 200).await;
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    let t = require_for(c, "app", vec![], 1000).await;
    let r = send_raw(
        c,
        "app",
        0,
        t.require_buffer_id,
        vec![(5, vec![make_block(0, 5, 1, 10)])],
    )
    .await;
    assert_eq!(status_of(r.status), StatusCode::NoRegister);

    // Empty request: the ticket is not consumed (Java).
    let t = require_for(c, "app", vec![0], 142).await;
    let r = send_raw(c, "app", 0, t.require_buffer_id, vec![]).await;
    assert_eq!(status_of(r.status), StatusCode::InternalError);
    assert!(r.ret_msg.contains("No data"));
    let r = send_raw(
        c,
        "app",
        0,
        t.require_buffer_id,
        vec![(1, vec![make_block(0, 1, 1, 110)])],
    )
    .await;
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);

    // Blocks larger than the ticket.
    let t = require_for(c, "app", vec![0], 50).await;
    let r = send_raw(
        c,
        "app",
        0,
        t.require_buffer_id,
        vec![(0, vec![make_block(1, 0, 1, 100)])],
    )
    .await;
    assert_eq!(
        status_of(r.status),
        StatusCode::InvalidRequest,
        "{}",
        r.ret_msg
    );

    // Length field that does not match the data.
    let mut lying = make_block(2, 0, 1, 100);
    lying.length = 1000;
    let t = require_for(c, "app", vec![0], 2000).await;
    let r = send_raw(c, "app", 0, t.require_buffer_id, vec![(0, vec![lying])]).await;
    assert_eq!(status_of(r.status), StatusCode::InvalidRequest);

    // Negative sizes.
    let r = require_for(c, "app", vec![0], -5).await;
    assert_eq!(status_of(r.status), StatusCode::InvalidRequest);

    // Everything refused left no trace in memory accounting: only the two good blocks.
    s.running.registry().store().memory().budget().snapshot();
    eventually("unused tickets released", || {
        let snap = s.running.registry().store().memory().budget().snapshot();
        snap.used == 132 + 142
    })
    .await;
    let got = read_partition(&mut s.client, "app", 0, 0).await;
    assert_eq!(got.blocks.get(&good.block_id), Some(&good.data));
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reads_get_status_codes() {
    let mut s = start(1, |c| c.memory_store.read_capacity = ByteSize(1 << 20)).await;
    let c = &mut s.client;
    register(c, "app", 0, 0..1, false).await;
    send(c, "app", 0, vec![(0, vec![make_block(0, 0, 1, 100)])]).await;
    c.finish_shuffle(proto::FinishShuffleRequest {
        app_id: "app".into(),
        shuffle_id: 0,
    })
    .await
    .unwrap();
    let data = |offset: i64, length: i32, per_range: i32| proto::GetLocalShuffleDataRequest {
        app_id: "app".into(),
        shuffle_id: 0,
        partition_id: 0,
        partition_num_per_range: per_range,
        partition_num: 1,
        offset,
        length,
        ..Default::default()
    };
    for (req, want) in [
        (data(-1, 10, 1), StatusCode::InvalidRequest),
        (data(0, -10, 1), StatusCode::InvalidRequest),
        (data(i64::MAX, 10, 1), StatusCode::InvalidRequest),
        (data(50, 100, 1), StatusCode::InvalidRequest),
        (data(0, 10, 0), StatusCode::InvalidRequest),
        (data(0, 100, 1), StatusCode::Success),
    ] {
        let r = c
            .get_local_shuffle_data(req.clone())
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status_of(r.status), want, "{req:?}: {}", r.ret_msg);
    }
    // Partition out of range for the index.
    let r = c
        .get_local_shuffle_index(proto::GetLocalShuffleIndexRequest {
            app_id: "app".into(),
            partition_id: 3,
            partition_num_per_range: 1,
            partition_num: 2,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::InvalidRequest);
    // A malformed expected-tasks bitmap.
    let r = c
        .get_memory_shuffle_data(proto::GetMemoryShuffleDataRequest {
            app_id: "app".into(),
            last_block_id: -1,
            read_buffer_size: 100,
            serialized_expected_task_ids_bitmap: Some(bytes::Bytes::from_static(&[0, 0, 0, 0, 9])),
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
    // Read memory exhausted → NO_BUFFER (the client backs off).
    let held = s
        .running
        .registry()
        .read_budget()
        .try_acquire((1 << 20) - 10)
        .unwrap();
    let r = c
        .get_memory_shuffle_data(proto::GetMemoryShuffleDataRequest {
            app_id: "app".into(),
            last_block_id: -1,
            read_buffer_size: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::NoBuffer);
    drop(held);
    // A layout that does not add up to 63 bits.
    let r = c
        .get_shuffle_result(proto::GetShuffleResultRequest {
            app_id: "app".into(),
            block_id_layout: Some(proto::BlockIdLayout {
                sequence_no_bits: 30,
                partition_id_bits: 30,
                task_attempt_id_bits: 30,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::InvalidRequest);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_with_changed_bitmap_num_is_refused() {
    let mut s = start(1, |_| {}).await;
    let c = &mut s.client;
    register(c, "app", 0, 0..1, false).await;
    let mk = |bitmap_num| proto::ReportShuffleResultRequest {
        app_id: "app".into(),
        bitmap_num,
        partition_to_block_ids: vec![proto::PartitionToBlockIds {
            partition_id: 0,
            block_ids: vec![1],
        }],
        ..Default::default()
    };
    let r = c.report_shuffle_result(mk(1)).await.unwrap().into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success);
    let r = c.report_shuffle_result(mk(2)).await.unwrap().into_inner();
    assert_eq!(status_of(r.status), StatusCode::InternalError);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_tickets_answer_internal_error_and_free_memory() {
    let mut s = start(1, |c| {
        c.memory_store.buffer_ticket_timeout = Duration::from_millis(50);
        c.memory_store.buffer_ticket_check_interval = Duration::from_millis(20);
    })
    .await;
    register(&mut s.client, "app", 0, 0..1, false).await;
    let t = require_for(&mut s.client, "app", vec![0], 1000).await;
    let budget = s.running.registry().store().memory().budget().clone();
    eventually("ticket swept", || budget.snapshot().reserved == 0).await;
    let r = send_raw(
        &mut s.client,
        "app",
        0,
        t.require_buffer_id,
        vec![(0, vec![make_block(0, 0, 0, 10)])],
    )
    .await;
    assert_eq!(status_of(r.status), StatusCode::InternalError);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_partition_hard_limit() {
    let mut s = start(1, |c| {
        c.hybrid_store.huge_partition_hard_limit = Some(ByteSize(1000));
    })
    .await;
    let c = &mut s.client;
    register(c, "app", 0, 0..1, false).await;
    send(c, "app", 0, vec![(0, vec![make_block(0, 0, 0, 900)])]).await;
    let t = require_for(c, "app", vec![0], 500).await;
    let r = send_raw(
        c,
        "app",
        0,
        t.require_buffer_id,
        vec![(0, vec![make_block(1, 0, 0, 200)])],
    )
    .await;
    assert_eq!(
        status_of(r.status),
        StatusCode::ExceedHugePartitionHardLimit
    );
    let r = c
        .require_buffer(proto::RequireBufferRequest {
            require_size: 300,
            app_id: "app".into(),
            partition_ids: vec![0],
            partition_require_sizes: vec![300],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(r.status),
        StatusCode::ExceedHugePartitionHardLimit
    );
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_ranges_are_refused_and_identical_ones_are_idempotent() {
    let s = start(1, |_| {}).await;
    let reg = |start: i32, end: i32| {
        let mut c = s.client.clone();
        async move {
            c.register_shuffle(proto::ShuffleRegisterRequest {
                app_id: "app".into(),
                partition_ranges: vec![proto::ShufflePartitionRange { start, end }],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
        }
    };
    assert_eq!(status_of(reg(4, 7).await.status), StatusCode::Success);
    assert_eq!(status_of(reg(4, 7).await.status), StatusCode::Success);
    assert_eq!(
        status_of(reg(5, 5).await.status),
        StatusCode::InvalidRequest
    );
    assert_eq!(
        status_of(reg(0, 10).await.status),
        StatusCode::InvalidRequest
    );
    assert_eq!(
        status_of(reg(-1, 3).await.status),
        StatusCode::InvalidRequest
    );
    assert_eq!(
        status_of(reg(3, 2).await.status),
        StatusCode::InvalidRequest
    );
    assert_eq!(s.running.registry().store().memory().partitions(), 1);
    s.running.shutdown().await;
}
