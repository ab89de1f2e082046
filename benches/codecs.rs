//! Throughput of the byte codecs on request paths: block-id bitmaps and index records.
//!
//! Quick check that it still builds and runs: `cargo bench --bench codecs -- --test`.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use roaring::RoaringTreemap;
use spillway::codec::bitmap;
use spillway::ids::BlockIdLayout;
use spillway::store::index::IndexEntry;

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

/// `criterion_group!` defines an undocumented `pub fn`; a private module keeps `missing_docs`
/// quiet without silencing it for the whole file.
mod groups {
    use super::{bench_bitmap, bench_index};
    use criterion::criterion_group;

    criterion_group!(benches, bench_bitmap, bench_index);
}

criterion_main!(groups::benches);
