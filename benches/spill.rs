//! Cost of spilling to local files: `LocalFileTier::append` of a 16 MiB batch, with and
//! without fdatasync, with `direct_io` on (the default) and off, for 64 KiB and 1 MiB blocks; and, to decide the spill I/O mode, buffered
//! writes + fdatasync against O_DIRECT for the same bytes, then the read that follows a spill
//! (a reader fetching what was just spilled) with the page cache against O_DIRECT.
//!
//! Writes land in a temporary directory (on the file system of `$TMPDIR`, `/tmp` by default;
//! a tmpfs there makes sync and no-sync look the same). The partition is purged, outside the
//! timed section, whenever its files pass `PURGE_AT`, so disk use stays bounded.
//! Quick check that it still builds and runs: `cargo bench --bench spill -- --test`.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput};
use spillway::ids::{AppId, BlockIdLayout, PartitionKey, PartitionRange};
use spillway::store::localfile::{LocalFileOptions, LocalFileTier};
use spillway::store::{Block, BlockBatch, PurgeScope, Tier};
use tempfile::TempDir;

const BATCH_BYTES: usize = 16 << 20;
/// Files are purged once this much was appended since the last purge.
const PURGE_AT: u64 = 256 << 20;

fn tier(dir: &TempDir, sync_on_write: bool, direct_io: bool) -> Arc<LocalFileTier> {
    LocalFileTier::new(LocalFileOptions {
        data_paths: vec![dir.path().to_path_buf()],
        file_prefix: "127.0.0.1-19999".to_owned(),
        high_watermark: 0.95,
        low_watermark: 0.85,
        capacity: None,
        capacity_ratio: 0.9,
        whole_disk_watermark: false,
        init_max_failed_paths: 0,
        min_writable_disks: 1,
        max_concurrency_per_disk: 2,
        sync_on_write,
        direct_io,
        write_timeout: std::time::Duration::from_secs(60),
    })
    .expect("a temporary directory is a usable data path")
}

/// `total` bytes of `block_len` blocks of one map task, all sharing one payload.
fn batch(block_len: usize, total: usize) -> BlockBatch {
    let payload = Bytes::from(vec![0xA5u8; block_len]);
    let blocks = (0..(total / block_len) as i64)
        .map(|seq| {
            let block_id = BlockIdLayout::DEFAULT.block_id(seq, 0, 7);
            Block {
                block_id,
                task_attempt_id: 7,
                uncompress_length: block_len as i32 * 2,
                crc: block_id,
                data: payload.clone(),
            }
        })
        .collect();
    BlockBatch::new(blocks)
}

/// "64KiB", "1MiB".
fn size_label(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{}MiB", bytes >> 20)
    } else {
        format!("{}KiB", bytes >> 10)
    }
}

fn bench_append(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let app = AppId::parse("bench_app").expect("valid app id");
    let part = PartitionKey::new(
        app.clone(),
        0,
        PartitionRange::new(0, 0).expect("valid range"),
    );
    let scope = PurgeScope::App(app);
    // Appended (untimed) after each purge so the timed appends never create directories.
    let prime = batch(4 << 10, 4 << 10);

    let mut group = c.benchmark_group("localfile_append");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Bytes(BATCH_BYTES as u64));
    for block_len in [64usize << 10, 1 << 20] {
        let batch = batch(block_len, BATCH_BYTES);
        // Spillway's default (`direct_io`: whole pages around the page cache), then buffered.
        for (sync, direct, label) in [
            (false, true, "no_sync"),
            (true, true, "sync"),
            (false, false, "no_sync_buffered"),
            (true, false, "sync_buffered"),
        ] {
            let dir = TempDir::new().expect("temporary directory");
            let owned_tier = tier(&dir, sync, direct);
            let id = BenchmarkId::new(format!("16MiB_of_{}_blocks", size_label(block_len)), label);
            let written = Cell::new(0u64);
            let (tier, written, batch, prime, part, scope) =
                (&*owned_tier, &written, &batch, &prime, &part, &scope);
            group.bench_function(id, |b| {
                b.to_async(&rt).iter_custom(move |iters| async move {
                    let mut elapsed = Duration::ZERO;
                    for _ in 0..iters {
                        if written.get() >= PURGE_AT {
                            tier.purge(scope).await.expect("purge");
                            written.set(0);
                        }
                        if written.get() == 0 {
                            tier.append(part, prime).await.expect("prime append");
                            written.set(prime.data_bytes());
                        }
                        let start = Instant::now();
                        tier.append(part, batch).await.expect("append");
                        elapsed += start.elapsed();
                        written.set(written.get() + batch.data_bytes());
                    }
                    elapsed
                })
            });
            rt.block_on(tier.purge(scope)).expect("purge");
        }
    }
    group.finish();
}

const IO_FILE: usize = 64 << 20;
const IO_BLOCK: usize = 1 << 20;
const IO_READ: usize = 14 << 20; // the Java client's default read size
const ALIGN: usize = 4096;

/// A zeroed buffer of `len` bytes whose start is `ALIGN`-aligned, as O_DIRECT requires (no
/// unsafe: the alignment is found inside an over-allocated `Vec`).
struct Aligned {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Self {
        let buf = vec![0u8; len + ALIGN];
        let start = buf.as_ptr().align_offset(ALIGN);
        Aligned { buf, start, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

fn open(path: &std::path::Path, write: bool, direct: bool) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    if write {
        o.write(true).create(true).truncate(true);
    } else {
        o.read(true);
    }
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
        .expect("open (O_DIRECT needs a file system that supports it: not tmpfs)")
}

/// One spill as Spillway writes it: the batch's payloads (not aligned, each its own
/// allocation) as one `writev` per 16 MiB, then `fdatasync`.
fn write_buffered(path: &std::path::Path, blocks: &[Bytes]) {
    use std::io::{IoSlice, Write};
    let mut f = open(path, true, false);
    for chunk in blocks.chunks(16) {
        let slices: Vec<IoSlice<'_>> = chunk.iter().map(|b| IoSlice::new(b)).collect();
        let want: usize = chunk.iter().map(Bytes::len).sum();
        let n = f.write_vectored(&slices).expect("writev");
        assert_eq!(n, want, "short writev");
    }
    f.sync_data().expect("fdatasync");
}

/// The same spill through O_DIRECT: payloads are copied into an aligned staging buffer (the
/// copy O_DIRECT costs for payloads that arrive at arbitrary addresses), written in 16 MiB
/// aligned writes, then `fdatasync` for the file's size.
fn write_direct(path: &std::path::Path, blocks: &[Bytes], staging: &mut Aligned) {
    use std::os::unix::fs::FileExt;
    let f = open(path, true, true);
    let mut offset = 0u64;
    for chunk in blocks.chunks(16) {
        let buf = staging.as_mut();
        let mut at = 0;
        for b in chunk {
            buf[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
        f.write_all_at(&buf[..at], offset).expect("O_DIRECT write");
        offset += at as u64;
    }
    f.sync_data().expect("fdatasync");
}

/// The file read back in client-sized ranges, through the page cache or around it.
fn read_back(path: &std::path::Path, direct: bool, buf: &mut Aligned) -> usize {
    use std::os::unix::fs::FileExt;
    let f = open(path, false, direct);
    let mut total = 0;
    let buf = buf.as_mut();
    while total < IO_FILE {
        let n = f.read_at(buf, total as u64).expect("read");
        assert!(n > 0, "file shorter than written");
        total += n;
    }
    total
}

fn bench_io_mode(c: &mut Criterion) {
    let dir = TempDir::new().expect("temporary directory");
    let path = dir.path().join("spill.data");
    let blocks: Vec<Bytes> = (0..IO_FILE / IO_BLOCK)
        .map(|i| Bytes::from(vec![i as u8; IO_BLOCK]))
        .collect();
    let mut staging = Aligned::new(16 * IO_BLOCK);
    let mut read_buf = Aligned::new(IO_READ);

    let mut group = c.benchmark_group("spill_io");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Bytes(IO_FILE as u64));
    group.bench_function("write_64MiB/buffered_fdatasync", |b| {
        b.iter(|| write_buffered(&path, &blocks))
    });
    group.bench_function("write_64MiB/o_direct", |b| {
        b.iter(|| write_direct(&path, &blocks, &mut staging))
    });
    // Read after spill: the file was just written buffered (what the server does now), so the
    // buffered read finds it in the page cache; O_DIRECT goes to the disk every time.
    write_buffered(&path, &blocks);
    group.bench_function("read_after_spill_64MiB/buffered", |b| {
        b.iter(|| read_back(&path, false, &mut read_buf))
    });
    group.bench_function("read_after_spill_64MiB/o_direct", |b| {
        b.iter(|| read_back(&path, true, &mut read_buf))
    });
    group.finish();
}

/// `criterion_group!` defines an undocumented `pub fn`; a private module keeps `missing_docs`
/// quiet without silencing it for the whole file.
mod groups {
    use super::{bench_append, bench_io_mode};
    use criterion::criterion_group;

    criterion_group!(benches, bench_append, bench_io_mode);
}

criterion_main!(groups::benches);
