//! Cost of the restart-recovery journal on the request path: one `reportShuffleResult`-sized
//! record (a map task reporting 1 block id to each of 200 partitions) written by 1 caller or
//! by 64 concurrent callers (group commit: they share writes and syncs), with and without
//! fdatasync. The figure per element is the cost one report waits for.
//!
//! Writes land in a temporary directory (`$TMPDIR`, `/tmp` by default; a tmpfs there makes
//! sync and no-sync look the same). Quick check: `cargo bench --bench journal -- --test`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput};
use spillway::recovery::{Journal, JournalOptions, Record};
use tempfile::TempDir;

fn report(task: i64) -> Record {
    Record::Report {
        app: "application_1716900000000_0042".into(),
        shuffle: 0,
        bitmap_num: 1,
        parts: (0..200)
            .map(|p| (p, vec![(task << 20) | i64::from(p)]))
            .collect(),
        // As the released clients report: no record counts.
        records: Vec::new(),
        at_ms: 1_716_900_000_000,
    }
}

fn bench_journal(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut group = c.benchmark_group("journal_report");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for sync in [false, true] {
        for callers in [1usize, 64] {
            let dir = TempDir::new().expect("temporary directory");
            let journal = Arc::new(
                Journal::start(
                    JournalOptions {
                        dirs: vec![dir.path().to_path_buf()],
                        sync,
                        // Large: the bench measures appends, not compaction.
                        compact_size: u64::MAX,
                        server_id: "127.0.0.1-19999".into(),
                        write_timeout: Duration::from_secs(60),
                    },
                    1,
                    Vec::new(),
                )
                .expect("journal starts"),
            );
            group.throughput(Throughput::Elements(callers as u64));
            let id = BenchmarkId::new(
                format!("{callers}_callers"),
                if sync { "sync" } else { "no_sync" },
            );
            let j = &journal;
            group.bench_function(id, |b| {
                b.to_async(&rt).iter_custom(move |iters| async move {
                    let start = Instant::now();
                    for i in 0..iters {
                        let writes = (0..callers).map(|k| {
                            let j = Arc::clone(j);
                            tokio::spawn(async move {
                                j.write(&report((i as i64) * 64 + k as i64)).await
                            })
                        });
                        for w in writes.collect::<Vec<_>>() {
                            w.await.expect("task").expect("journal write");
                        }
                    }
                    start.elapsed()
                })
            });
        }
    }
    group.finish();
}

/// `criterion_group!` defines an undocumented `pub fn`; a private module keeps `missing_docs`
/// quiet without silencing it for the whole file.
mod groups {
    use super::bench_journal;
    use criterion::criterion_group;

    criterion_group!(benches, bench_journal);
}

criterion_main!(groups::benches);
