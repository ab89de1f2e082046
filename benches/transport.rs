//! gRPC against the Netty data plane, side by side in one run: each group has a `grpc` and a
//! `netty` variant doing the same work against the same in-process server (`tests/common`:
//! port 0 for gRPC and Netty, 127.0.0.1, one temporary data path).
//!
//! - `write_1MiB`: requireBuffer (gRPC in both) + 16 × 64 KiB blocks, as `sendShuffleData`
//!   or as a Netty type-3 frame over one persistent connection. Every `SENDS_PER_SHUFFLE`
//!   sends the variant moves to a fresh shuffle (the old one unregistered), outside the timed
//!   section, so memory stays bounded and the spiller never runs.
//! - `read_memory_1MiB`: getMemoryShuffleData / type 6 of a partition holding 64 × 16 KiB
//!   in memory, readBufferSize 1 MiB, lastBlockId -1.
//! - `read_local_1MiB`: getLocalShuffleData / type 5 of the 1 MiB data file of a partition
//!   flushed by finishShuffle.
//!
//! Both clients build their request inside the timed section (gRPC: prost copies the payload
//! into the HTTP/2 body; Netty: `netty::client` writes the payload slices vectored, no copy).
//! Quick check: `cargo bench --bench transport -- --test`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::cell::Cell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{status_of, Client, LAYOUT};
use criterion::{criterion_main, Criterion, Throughput};
use spillway::config::ByteSize;
use spillway::netty::client::{send_message_len, NettyClient};
use spillway::netty::messages::{
    DataRequest, DataVersion, MemoryRequest, Request, Response, SendBlock, SendRequest,
};
use spillway::proto::{self, StatusCode};
use tokio::sync::Mutex;

const APP: &str = "transport_app";
const MIB: u64 = 1 << 20;
const WRITE_BLOCKS: i64 = 16;
const WRITE_BLOCK_LEN: usize = 64 << 10;
const READ_BLOCKS: i64 = 64;
const READ_BLOCK_LEN: usize = 16 << 10;
/// Sends into one shuffle before it is unregistered (64 MiB of 256 MiB).
const SENDS_PER_SHUFFLE: u64 = 64;
const MEMORY_SHUFFLE: i32 = 0;
const LOCAL_SHUFFLE: i32 = 1;
/// Write shuffles of the gRPC variant count up from here, the Netty ones from `+ 100_000`.
const WRITE_SHUFFLE_BASE: i32 = 100;

/// One persistent Netty connection: one request frame out, one response frame back.
struct Conn(NettyClient);

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        Conn(
            NettyClient::connect(addr)
                .await
                .expect("Netty port accepts"),
        )
    }

    async fn call(&mut self, req: &Request) -> Response {
        self.0.call(req).await.expect("a well-formed response")
    }
}

/// `count` blocks of one map task in partition 0 with fresh ids (`n` picks them), sharing one
/// payload.
fn blocks(n: u64, count: i64, payload: &Bytes) -> Vec<proto::ShuffleBlock> {
    let task = (n % 1000) as i64;
    let crc = crc32fast::hash(payload) as i64;
    (0..count)
        .map(|j| proto::ShuffleBlock {
            block_id: LAYOUT.block_id((n / 1000) as i64 * count + j, 0, task),
            length: payload.len() as i32,
            uncompress_length: payload.len() as i32 * 2,
            crc,
            data: payload.clone(),
            task_attempt_id: task,
        })
        .collect()
}

fn send_request(shuffle: i32, ticket: i64, blocks: &[proto::ShuffleBlock]) -> SendRequest {
    SendRequest {
        request_id: 1,
        app_id: APP.into(),
        shuffle_id: shuffle,
        require_buffer_id: ticket,
        partitions: vec![(
            0,
            blocks
                .iter()
                .map(|b| SendBlock {
                    partition_id: 0,
                    block_id: b.block_id,
                    length: b.length,
                    shuffle_id: shuffle,
                    crc: b.crc,
                    task_attempt_id: b.task_attempt_id,
                    data: b.data.clone(),
                    replicas: vec![],
                    uncompress_length: b.uncompress_length,
                    free_memory: 0,
                })
                .collect(),
        )],
        timestamp: 1_700_000_000_000,
    }
}

/// requireBuffer (gRPC) for Σ(len+32) + msgLen, as the 0.10 Netty client does.
async fn require(client: &mut Client, shuffle: i32, size: i32) -> i64 {
    let r = client
        .require_buffer(proto::RequireBufferRequest {
            require_size: size,
            app_id: APP.into(),
            shuffle_id: shuffle,
            partition_ids: vec![0],
            ..Default::default()
        })
        .await
        .expect("requireBuffer")
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    r.require_buffer_id
}

fn assert_ok(head: &spillway::netty::ResponseHead) {
    assert_eq!(
        status_of(head.status),
        StatusCode::Success,
        "{:?}",
        head.ret_message
    );
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

/// The shuffle of the `n`th send of a variant; registers it (and unregisters the previous
/// one) on its first send. Untimed.
async fn write_shuffle(client: &mut Client, base: i32, n: u64) -> i32 {
    let shuffle = base + (n / SENDS_PER_SHUFFLE) as i32;
    if n.is_multiple_of(SENDS_PER_SHUFFLE) {
        if n > 0 {
            unregister(client, shuffle - 1).await;
        }
        common::register(client, APP, shuffle, 0..1, false).await;
    }
    shuffle
}

fn bench_transport(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let server = rt.block_on(common::start(1, |c| {
        c.memory_store.capacity = ByteSize(256 << 20);
    }));
    let netty_addr = server
        .running
        .netty_addr
        .expect("test config turns Netty on");
    let write_payload = Bytes::from(vec![0xA5u8; WRITE_BLOCK_LEN]);
    let read_payload = Bytes::from(vec![0x5Au8; READ_BLOCK_LEN]);

    // The read partitions: 1 MiB in memory, and 1 MiB flushed to a data file.
    let netty = rt.block_on(async {
        let mut client = server.client.clone();
        for shuffle in [MEMORY_SHUFFLE, LOCAL_SHUFFLE] {
            common::register(&mut client, APP, shuffle, 0..1, false).await;
            let batch = vec![(0, blocks(0, READ_BLOCKS, &read_payload))];
            let no_buffer = common::send(&mut client, APP, shuffle, batch).await;
            assert_eq!(no_buffer, 0, "memory is sized for the bench");
        }
        let finished = client
            .finish_shuffle(proto::FinishShuffleRequest {
                app_id: APP.into(),
                shuffle_id: LOCAL_SHUFFLE,
            })
            .await
            .expect("finishShuffle")
            .into_inner();
        assert_eq!(
            status_of(finished.status),
            StatusCode::Success,
            "{}",
            finished.ret_msg
        );
        Mutex::new(Conn::open(netty_addr).await)
    });

    // The Netty reservation: Σ(len+32) + msgLen; msgLen does not depend on the block ids.
    let probe = send_request(0, 0, &blocks(0, WRITE_BLOCKS, &write_payload));
    let netty_require =
        (WRITE_BLOCKS as i32) * (WRITE_BLOCK_LEN as i32 + 32) + send_message_len(&probe) as i32;

    let (client, conn, write_payload) = (&server.client, &netty, &write_payload);

    let mut group = c.benchmark_group("write_1MiB");
    group
        .throughput(Throughput::Bytes(
            WRITE_BLOCKS as u64 * WRITE_BLOCK_LEN as u64,
        ))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    let grpc_sends = Cell::new(0u64);
    let grpc_sends = &grpc_sends;
    group.bench_function("grpc", |b| {
        b.to_async(&rt).iter_custom(move |iters| async move {
            let mut client = client.clone();
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                let n = grpc_sends.get();
                let shuffle = write_shuffle(&mut client, WRITE_SHUFFLE_BASE, n).await;
                let batch = vec![(0, blocks(n, WRITE_BLOCKS, write_payload))];
                let start = Instant::now();
                let no_buffer = common::send(&mut client, APP, shuffle, batch).await;
                elapsed += start.elapsed();
                assert_eq!(no_buffer, 0, "memory is sized for the bench");
                grpc_sends.set(n + 1);
            }
            elapsed
        })
    });
    let netty_sends = Cell::new(0u64);
    let netty_sends = &netty_sends;
    group.bench_function("netty", |b| {
        b.to_async(&rt).iter_custom(move |iters| async move {
            let mut client = client.clone();
            let mut conn = conn.lock().await;
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                let n = netty_sends.get();
                let shuffle = write_shuffle(&mut client, WRITE_SHUFFLE_BASE + 100_000, n).await;
                let batch = blocks(n, WRITE_BLOCKS, write_payload);
                let start = Instant::now();
                let ticket = require(&mut client, shuffle, netty_require).await;
                let req = Request::Send(send_request(shuffle, ticket, &batch));
                match conn.call(&req).await {
                    Response::Rpc(head) => assert_ok(&head),
                    other => panic!("send answered with {other:?}"),
                }
                elapsed += start.elapsed();
                netty_sends.set(n + 1);
            }
            elapsed
        })
    });
    group.finish();

    let mut group = c.benchmark_group("read_memory_1MiB");
    group
        .throughput(Throughput::Bytes(MIB))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    let read = proto::GetMemoryShuffleDataRequest {
        app_id: APP.into(),
        shuffle_id: MEMORY_SHUFFLE,
        partition_id: 0,
        last_block_id: -1,
        read_buffer_size: MIB as i32,
        ..Default::default()
    };
    group.bench_function("grpc", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = client.clone();
            let read = read.clone();
            async move {
                let resp = client
                    .get_memory_shuffle_data(read)
                    .await
                    .expect("getMemoryShuffleData")
                    .into_inner();
                assert_eq!(resp.data.len() as u64, MIB, "{}", resp.ret_msg);
                resp
            }
        })
    });
    let read = Request::Memory(MemoryRequest {
        request_id: 2,
        app_id: APP.into(),
        shuffle_id: MEMORY_SHUFFLE,
        partition_id: 0,
        last_block_id: -1,
        read_buffer_size: MIB as i32,
        timestamp: 0,
        expected_task_ids: None,
    });
    let read = &read;
    group.bench_function("netty", |b| {
        b.to_async(&rt).iter(|| async move {
            match conn.lock().await.call(read).await {
                Response::Memory { head, data, .. } => {
                    assert_ok(&head);
                    assert_eq!(data.len() as u64, MIB);
                    data
                }
                other => panic!("memory read answered with {other:?}"),
            }
        })
    });
    group.finish();

    let mut group = c.benchmark_group("read_local_1MiB");
    group
        .throughput(Throughput::Bytes(MIB))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    let read = proto::GetLocalShuffleDataRequest {
        app_id: APP.into(),
        shuffle_id: LOCAL_SHUFFLE,
        partition_id: 0,
        partition_num_per_range: 1,
        partition_num: 1,
        offset: 0,
        length: MIB as i32,
        storage_id: -1,
        ..Default::default()
    };
    group.bench_function("grpc", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = client.clone();
            let read = read.clone();
            async move {
                let resp = client
                    .get_local_shuffle_data(read)
                    .await
                    .expect("getLocalShuffleData")
                    .into_inner();
                assert_eq!(resp.data.len() as u64, MIB, "{}", resp.ret_msg);
                resp
            }
        })
    });
    let read = Request::Data(DataRequest {
        version: DataVersion::V1,
        request_id: 4,
        app_id: APP.into(),
        shuffle_id: LOCAL_SHUFFLE,
        partition_id: 0,
        partition_num_per_range: 1,
        partition_num: 1,
        offset: 0,
        length: MIB as i32,
        timestamp: 0,
        storage_id: -1,
        next_segments: vec![],
        task_attempt_id: 0,
    });
    let read = &read;
    group.bench_function("netty", |b| {
        b.to_async(&rt).iter(|| async move {
            match conn.lock().await.call(read).await {
                Response::Data { head, data } => {
                    assert_ok(&head);
                    assert_eq!(data.len() as u64, MIB);
                    data
                }
                other => panic!("data read answered with {other:?}"),
            }
        })
    });
    group.finish();

    drop(netty);
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
    use super::bench_transport;
    use criterion::criterion_group;

    criterion_group!(benches, bench_transport);
}

criterion_main!(groups::benches);
