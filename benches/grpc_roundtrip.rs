//! Round trips through an in-process server over loopback gRPC: requireBuffer +
//! sendShuffleData of 1 MiB, and getMemoryShuffleData of 1 MiB.
//!
//! The server starts the way the integration tests start it (`tests/common`: port 0,
//! 127.0.0.1, temporary data paths) and is shut down at the end. Memory is sized so the
//! spiller never runs: the send bench moves to a fresh shuffle, outside the timed section,
//! every `SENDS_PER_SHUFFLE` sends. Quick check that it still builds and runs:
//! `cargo bench --bench grpc_roundtrip -- --test`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::cell::Cell;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{status_of, Client, LAYOUT};
use criterion::{criterion_main, Criterion, Throughput};
use spillway::config::ByteSize;
use spillway::proto::{self, StatusCode};

const APP: &str = "bench_app";
const BLOCKS: i64 = 16;
const BLOCK_LEN: usize = 64 << 10;
const PAYLOAD_BYTES: u64 = BLOCKS as u64 * BLOCK_LEN as u64;
/// Sends into one shuffle before it is unregistered (64 MiB, a quarter of the memory).
const SENDS_PER_SHUFFLE: u64 = 64;
/// The shuffle the read bench reads; send shuffles count up from 1.
const READ_SHUFFLE: i32 = 0;

/// The `n`th send: 16 blocks of one map task with fresh ids (so none is dropped as a
/// duplicate), sharing one payload.
fn send_blocks(n: u64, payload: &Bytes, crc: i64) -> Vec<(i32, Vec<proto::ShuffleBlock>)> {
    let task = (n % 1000) as i64;
    let blocks = (0..BLOCKS)
        .map(|j| proto::ShuffleBlock {
            block_id: LAYOUT.block_id((n / 1000) as i64 * BLOCKS + j, 0, task),
            length: BLOCK_LEN as i32,
            uncompress_length: BLOCK_LEN as i32 * 2,
            crc,
            data: payload.clone(),
            task_attempt_id: task,
        })
        .collect();
    vec![(0, blocks)]
}

async fn unregister(client: &mut Client, shuffle: i32) {
    let resp = client
        .unregister_shuffle(proto::ShuffleUnregisterRequest {
            app_id: APP.into(),
            shuffle_id: shuffle,
        })
        .await
        .expect("unregisterShuffle")
        .into_inner();
    assert_eq!(
        status_of(resp.status),
        StatusCode::Success,
        "{}",
        resp.ret_msg
    );
}

fn bench_grpc(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let server = rt.block_on(common::start(1, |c| {
        c.memory_store.capacity = ByteSize(256 << 20);
    }));
    let payload = Bytes::from(vec![0xA5u8; BLOCK_LEN]);
    let crc = crc32fast::hash(&payload) as i64;

    // The read bench's partition: exactly 1 MiB in memory.
    rt.block_on(async {
        let mut client = server.client.clone();
        common::register(&mut client, APP, READ_SHUFFLE, 0..1, false).await;
        let no_buffer = common::send(
            &mut client,
            APP,
            READ_SHUFFLE,
            send_blocks(0, &payload, crc),
        )
        .await;
        assert_eq!(no_buffer, 0, "memory is sized for the bench");
    });

    let mut group = c.benchmark_group("grpc");
    group.throughput(Throughput::Bytes(PAYLOAD_BYTES));

    let sends = Cell::new(0u64);
    let (client, sends, payload) = (&server.client, &sends, &payload);
    group.bench_function("require_send_1MiB", |b| {
        b.to_async(&rt).iter_custom(move |iters| async move {
            let mut client = client.clone();
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                let n = sends.get();
                let shuffle = (n / SENDS_PER_SHUFFLE) as i32 + 1;
                if n.is_multiple_of(SENDS_PER_SHUFFLE) {
                    if shuffle > 1 {
                        unregister(&mut client, shuffle - 1).await;
                    }
                    common::register(&mut client, APP, shuffle, 0..1, false).await;
                }
                let blocks = send_blocks(n, payload, crc);
                let start = Instant::now();
                let no_buffer = common::send(&mut client, APP, shuffle, blocks).await;
                elapsed += start.elapsed();
                assert_eq!(no_buffer, 0, "memory is sized for the bench");
                sends.set(n + 1);
            }
            elapsed
        })
    });

    let read = proto::GetMemoryShuffleDataRequest {
        app_id: APP.into(),
        shuffle_id: READ_SHUFFLE,
        partition_id: 0,
        last_block_id: -1,
        read_buffer_size: PAYLOAD_BYTES as i32,
        ..Default::default()
    };
    group.bench_function("get_memory_1MiB", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = client.clone();
            let read = read.clone();
            async move {
                let resp = client
                    .get_memory_shuffle_data(read)
                    .await
                    .expect("getMemoryShuffleData")
                    .into_inner();
                assert_eq!(resp.data.len() as u64, PAYLOAD_BYTES, "{}", resp.ret_msg);
                resp
            }
        })
    });
    group.finish();

    rt.block_on(async {
        let mut client = server.client.clone();
        let resp = client
            .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest {
                app_id: APP.into(),
            })
            .await
            .expect("unregisterShuffleByAppId")
            .into_inner();
        assert_eq!(
            status_of(resp.status),
            StatusCode::Success,
            "{}",
            resp.ret_msg
        );
        server.running.shutdown().await
    });
}

/// `criterion_group!` defines an undocumented `pub fn`; a private module keeps `missing_docs`
/// quiet without silencing it for the whole file.
mod groups {
    use super::bench_grpc;
    use criterion::criterion_group;

    criterion_group!(benches, bench_grpc);
}

criterion_main!(groups::benches);
