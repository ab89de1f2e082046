//! Huge-partition split (0.10): a server with `huge_partition_split_limit` lists a partition in
//! `needSplitPartitionIds` once a requireBuffer takes it past the limit; the 0.10 client still
//! sends that request's blocks there, has the driver reassign the partition to another server,
//! and sends the partition's later blocks to it. Readers then read the partition from both.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::*;
use spillway::config::ByteSize;
use spillway::proto;
use spillway::proto::StatusCode;

const APP: &str = "spark-split_1716900000123";
/// Encoded size of a block as the 0.10 client counts it in `partitionRequireSizes`.
const OVERHEAD: i32 = 32;

/// One 0.10 send: requireBuffer with per-partition sizes, then sendShuffleData under the
/// ticket. Returns `needSplitPartitionIds`.
async fn require_and_send(
    client: &mut Client,
    parts: &[(i32, Vec<proto::ShuffleBlock>)],
) -> Vec<i32> {
    let sizes: Vec<i32> = parts
        .iter()
        .map(|(_, blocks)| blocks.iter().map(|b| b.length + OVERHEAD).sum())
        .collect();
    let t = client
        .require_buffer(proto::RequireBufferRequest {
            require_size: sizes.iter().sum(),
            app_id: APP.into(),
            shuffle_id: 0,
            partition_ids: parts.iter().map(|(p, _)| *p).collect(),
            partition_require_sizes: sizes,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(t.status), StatusCode::Success, "{}", t.ret_msg);
    assert!(t.require_buffer_id > 0);
    let r = client
        .send_shuffle_data(proto::SendShuffleDataRequest {
            app_id: APP.into(),
            shuffle_id: 0,
            require_buffer_id: t.require_buffer_id,
            shuffle_data: parts
                .iter()
                .map(|(p, blocks)| proto::ShuffleData {
                    partition_id: *p,
                    block: blocks.clone(),
                })
                .collect(),
            timestamp: 1,
            stage_attempt_number: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    t.need_split_partition_ids
}

async fn register_ranges(client: &mut Client, partitions: &[i32]) {
    let r = client
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: APP.into(),
            shuffle_id: 0,
            partition_ranges: partitions
                .iter()
                .map(|&p| proto::ShufflePartitionRange { start: p, end: p })
                .collect(),
            user: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
}

/// Block ids sent to one server, per task and partition, as the writer reports them.
#[derive(Default)]
struct Sent {
    by_task: BTreeMap<i64, BTreeMap<i32, Vec<i64>>>,
    data: BTreeMap<i32, BTreeMap<i64, Bytes>>,
}

impl Sent {
    fn add(&mut self, task: i64, parts: &[(i32, Vec<proto::ShuffleBlock>)]) {
        for (p, blocks) in parts {
            for b in blocks {
                let ids = self.by_task.entry(task).or_default().entry(*p).or_default();
                ids.push(b.block_id);
                self.data
                    .entry(*p)
                    .or_default()
                    .insert(b.block_id, b.data.clone());
            }
        }
    }

    async fn report(&self, client: &mut Client) {
        for (task, ids) in &self.by_task {
            report(client, APP, 0, *task, ids).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_partition_moves_to_another_server_and_reads_back_from_both() {
    // Three 500-byte blocks, as the client counts them, fill partition 0 on A exactly.
    let limit = 3 * (500 + OVERHEAD) as u64;
    let mut a = start(1, |c| {
        c.hybrid_store.huge_partition_split_limit = Some(ByteSize(limit));
    })
    .await;
    let mut b = start(1, |_| {}).await;
    let (mut sent_a, mut sent_b) = (Sent::default(), Sent::default());

    // The driver assigned partitions 0 and 1 to A.
    register_ranges(&mut a.client, &[0, 1]).await;

    // Map task 1. Partition 0 grows to 1064 encoded bytes, then to exactly the limit: not
    // above it, so not listed.
    let parts = vec![
        (0, vec![make_block(0, 0, 1, 500), make_block(1, 0, 1, 500)]),
        (1, vec![make_block(2, 1, 1, 500)]),
    ];
    assert_eq!(
        require_and_send(&mut a.client, &parts).await,
        Vec::<i32>::new()
    );
    sent_a.add(1, &parts);
    let parts = vec![(0, vec![make_block(3, 0, 1, 500)])];
    assert_eq!(
        require_and_send(&mut a.client, &parts).await,
        Vec::<i32>::new()
    );
    sent_a.add(1, &parts);

    // One more byte of payload (33 encoded) takes partition 0 above the limit: the ticket is
    // granted, the blocks are kept on A, and partition 0 (only) is listed.
    let parts = vec![
        (1, vec![make_block(4, 1, 1, 100)]),
        (0, vec![make_block(5, 0, 1, 1)]),
    ];
    assert_eq!(require_and_send(&mut a.client, &parts).await, vec![0]);
    sent_a.add(1, &parts);

    // The driver reassigns partition 0 to B and registers it there; task 1's later blocks of
    // partition 0 go to B, partition 1 stays on A.
    register_ranges(&mut b.client, &[0]).await;
    let parts = vec![(0, vec![make_block(6, 0, 1, 700), make_block(7, 0, 1, 300)])];
    assert_eq!(
        require_and_send(&mut b.client, &parts).await,
        Vec::<i32>::new()
    );
    sent_b.add(1, &parts);
    let parts = vec![(1, vec![make_block(8, 1, 1, 100)])];
    assert_eq!(
        require_and_send(&mut a.client, &parts).await,
        Vec::<i32>::new()
    );
    sent_a.add(1, &parts);

    // Map task 2 still has the old assignment: A keeps its first blocks of partition 0 and lists
    // the partition again (nothing is remembered, the size alone decides), but not partition 1
    // (796 + 432 encoded bytes); then task 2 learns the new assignment and sends the rest of
    // partition 0 to B.
    let parts = vec![
        (0, vec![make_block(0, 0, 2, 400)]),
        (1, vec![make_block(1, 1, 2, 400)]),
    ];
    assert_eq!(require_and_send(&mut a.client, &parts).await, vec![0]);
    sent_a.add(2, &parts);
    let parts = vec![(0, vec![make_block(2, 0, 2, 900)])];
    assert_eq!(
        require_and_send(&mut b.client, &parts).await,
        Vec::<i32>::new()
    );
    sent_b.add(2, &parts);

    // Each server is told the blocks it received.
    sent_a.report(&mut a.client).await;
    sent_b.report(&mut b.client).await;
    // A's blocks are read from its files, B's from memory.
    finish(&mut a.client, APP, 0).await;

    // The reader asks both servers of partition 0: together they name every block once.
    let ids_a = expected_ids(&mut a.client, APP, 0, 0).await;
    let ids_b = expected_ids(&mut b.client, APP, 0, 0).await;
    let want_a: Vec<u64> = sent_a.data[&0].keys().map(|&id| id as u64).collect();
    let want_b: Vec<u64> = sent_b.data[&0].keys().map(|&id| id as u64).collect();
    assert_eq!(ids_a, want_a);
    assert_eq!(ids_b, want_b);
    assert!(ids_a.iter().all(|id| !ids_b.contains(id)));

    let read_a = read_partition(&mut a.client, APP, 0, 0).await;
    let read_b = read_partition(&mut b.client, APP, 0, 0).await;
    assert_eq!(read_a.blocks, sent_a.data[&0]);
    assert_eq!(read_b.blocks, sent_b.data[&0]);
    assert_eq!((read_a.from_files, read_a.from_memory), (5, 0));
    assert_eq!((read_b.from_memory, read_b.from_files), (3, 0));
    let mut all = read_a.blocks.clone();
    for (id, data) in read_b.blocks {
        assert!(all.insert(id, data).is_none(), "block {id} on both servers");
    }
    assert_eq!(all.len(), 8);

    // Partition 1 never split: all of it is on A.
    let read_1 = read_partition(&mut a.client, APP, 0, 1).await;
    assert_eq!(read_1.blocks, sent_a.data[&1]);

    a.running.shutdown().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_split_limit_a_partition_is_never_listed() {
    let mut s = start(1, |_| {}).await;
    register_ranges(&mut s.client, &[0]).await;
    for seq in 0..4 {
        let parts = vec![(0, vec![make_block(seq, 0, 1, 64 << 10)])];
        assert_eq!(
            require_and_send(&mut s.client, &parts).await,
            Vec::<i32>::new()
        );
    }
    s.running.shutdown().await;
}
