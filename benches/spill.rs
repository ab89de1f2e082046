//! Cost of spilling to local files: `LocalFileTier::append` of a 16 MiB batch, with and
//! without fdatasync, for 64 KiB and 1 MiB blocks.
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

fn tier(dir: &TempDir, sync_on_write: bool) -> Arc<LocalFileTier> {
    LocalFileTier::new(LocalFileOptions {
        data_paths: vec![dir.path().to_path_buf()],
        file_prefix: "127.0.0.1-19999".to_owned(),
        high_watermark: 0.95,
        low_watermark: 0.85,
        min_healthy_disks: 1,
        max_concurrency_per_disk: 2,
        sync_on_write,
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
        for sync in [false, true] {
            let dir = TempDir::new().expect("temporary directory");
            let owned_tier = tier(&dir, sync);
            let id = BenchmarkId::new(
                format!("16MiB_of_{}_blocks", size_label(block_len)),
                if sync { "sync" } else { "no_sync" },
            );
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

/// `criterion_group!` defines an undocumented `pub fn`; a private module keeps `missing_docs`
/// quiet without silencing it for the whole file.
mod groups {
    use super::bench_append;
    use criterion::criterion_group;

    criterion_group!(benches, bench_append);
}

criterion_main!(groups::benches);
