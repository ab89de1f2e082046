//! Throughput of the byte codecs on request paths: block-id bitmaps, index records, and the
//! decode of a send request into domain blocks on both planes.
//!
//! Quick check that it still builds and runs: `cargo bench --bench codecs -- --test`.

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use prost::Message;
use roaring::RoaringTreemap;
use spillway::codec::bitmap;
use spillway::ids::BlockIdLayout;
use spillway::netty::messages::{ty, Request, SendBlock, SendRequest};
use spillway::netty::HEADER_LEN;
use spillway::proto;
use spillway::protocol::convert;
use spillway::store::index::IndexEntry;
use spillway::store::Block;

const BLOCK_IDS: u64 = 100_000;
const INDEX_RECORDS: u64 = 10_000;

/// `BLOCK_IDS` ids in the default layout, spread round-robin over `partitions` partitions with
/// up to 1000 task attempts each, as a map stage reports them.
fn block_ids(partitions: u64) -> RoaringTreemap {
    let layout = BlockIdLayout::DEFAULT;
    (0..BLOCK_IDS)
        .map(|i| {
            let partition = (i % partitions) as i32;
            let task = ((i / partitions) % 1000) as i64;
            let seq = (i / (partitions * 1000)) as i64;
            layout.block_id(seq, partition, task) as u64
        })
        .collect()
}

fn bench_bitmap(c: &mut Criterion) {
    let mut group = c.benchmark_group("bitmap");
    group.throughput(Throughput::Elements(BLOCK_IDS));
    for partitions in [1u64, 1000] {
        let map = block_ids(partitions);
        assert_eq!(map.len(), BLOCK_IDS, "ids are distinct");
        let bytes = bitmap::encode(&map);
        let label = format!("{partitions}_partitions");
        group.bench_function(BenchmarkId::new("encode", &label), |b| {
            b.iter(|| bitmap::encode(black_box(&map)))
        });
        group.bench_function(BenchmarkId::new("decode", &label), |b| {
            b.iter(|| bitmap::decode(black_box(&bytes)).expect("own output decodes"))
        });
    }
    group.finish();
}

fn index_entries() -> Vec<IndexEntry> {
    let layout = BlockIdLayout::DEFAULT;
    (0..INDEX_RECORDS as i64)
        .map(|i| IndexEntry {
            offset: i * 4096,
            length: 4096,
            uncompress_length: 16384,
            crc: i * 7919 % (1 << 32),
            block_id: layout.block_id(i / 100, 3, i % 100),
            task_attempt_id: i % 100,
        })
        .collect()
}

fn bench_index(c: &mut Criterion) {
    let entries = index_entries();
    let mut encoded = BytesMut::with_capacity(entries.len() * IndexEntry::SIZE);
    for e in &entries {
        e.encode(&mut encoded);
    }
    let encoded = encoded.freeze();

    let mut group = c.benchmark_group("index");
    group.throughput(Throughput::Elements(INDEX_RECORDS));
    group.bench_function("encode", |b| {
        b.iter(|| {
            let mut buf = BytesMut::with_capacity(entries.len() * IndexEntry::SIZE);
            for e in black_box(&entries) {
                e.encode(&mut buf);
            }
            buf
        })
    });
    group.bench_function("decode_all", |b| {
        b.iter(|| IndexEntry::decode_all(black_box(&encoded)))
    });
    group.finish();
}

/// A 16 MiB send (the Java client's request limit): `partitions` × (16 MiB / partitions) of
/// `block_len` blocks, as protobuf bytes and as a Netty type-3 message.
fn send_request(block_len: usize, partitions: i32) -> (Bytes, Bytes) {
    let payload = Bytes::from(vec![0x33u8; block_len]);
    let blocks_per_partition = (16 << 20) / block_len / partitions as usize;
    let layout = BlockIdLayout::DEFAULT;
    let block = |p: i32, i: usize| proto::ShuffleBlock {
        block_id: layout.block_id(i as i64, p, 7),
        length: block_len as i32,
        uncompress_length: block_len as i32,
        crc: 1,
        data: payload.clone(),
        task_attempt_id: 7,
    };
    let grpc = proto::SendShuffleDataRequest {
        app_id: "app".into(),
        shuffle_id: 1,
        require_buffer_id: 1,
        shuffle_data: (0..partitions)
            .map(|p| proto::ShuffleData {
                partition_id: p,
                block: (0..blocks_per_partition).map(|i| block(p, i)).collect(),
            })
            .collect(),
        ..Default::default()
    };
    let netty = SendRequest {
        request_id: 1,
        app_id: "app".into(),
        shuffle_id: 1,
        require_buffer_id: 1,
        partitions: grpc
            .shuffle_data
            .iter()
            .map(|d| {
                let blocks = d
                    .block
                    .iter()
                    .map(|b| SendBlock {
                        partition_id: d.partition_id,
                        block_id: b.block_id,
                        length: b.length,
                        shuffle_id: 1,
                        crc: b.crc,
                        task_attempt_id: b.task_attempt_id,
                        data: b.data.clone(),
                        replicas: vec![],
                        uncompress_length: b.uncompress_length,
                        free_memory: 0,
                    })
                    .collect();
                (d.partition_id, blocks)
            })
            .collect(),
        timestamp: 0,
    };
    let netty = Request::Send(netty).encode().freeze().slice(HEADER_LEN..);
    (Bytes::from(grpc.encode_to_vec()), netty)
}

/// Netty send → domain blocks, as the server's handler converts them.
fn netty_blocks(msg: Bytes) -> Vec<(i32, Vec<Block>)> {
    let Request::Send(r) = Request::decode(ty::SEND, msg).expect("own frame decodes") else {
        unreachable!("a type-3 frame decodes as a send")
    };
    convert::blocks(r.partitions).expect("valid blocks")
}

/// Decoding a received 16 MiB send into domain blocks (payloads sliced, not copied): prost +
/// `protocol::convert::blocks` on each plane's decoded blocks.
fn bench_decode_send(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode_send_16MiB");
    group.throughput(Throughput::Bytes(16 << 20));
    for (block_len, label) in [(4 << 10, "4KiB_blocks"), (256 << 10, "256KiB_blocks")] {
        let (grpc, netty) = send_request(block_len, 16);
        group.bench_function(BenchmarkId::new("grpc", label), |b| {
            b.iter(|| {
                let req = proto::SendShuffleDataRequest::decode(black_box(grpc.clone()))
                    .expect("own encoding decodes");
                convert::blocks(convert::grpc_parts(req.shuffle_data)).expect("valid blocks")
            })
        });
        group.bench_function(BenchmarkId::new("netty", label), |b| {
            b.iter(|| netty_blocks(black_box(netty.clone())))
        });
    }
    group.finish();
}

/// `criterion_group!` defines an undocumented `pub fn`; a private module keeps `missing_docs`
/// quiet without silencing it for the whole file.
mod groups {
    use super::{bench_bitmap, bench_decode_send, bench_index};
    use criterion::criterion_group;

    criterion_group!(benches, bench_bitmap, bench_index, bench_decode_send);
}

criterion_main!(groups::benches);
