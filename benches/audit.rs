//! Cost of one RPC audit line on the request path: starting the entry, filling a
//! requireBuffer record and queueing it (the writer thread formats it off the path), against
//! the excluded / switched-off cases; and of one storage audit line on the spill path (a
//! write record with a shared site), on and off.

use criterion::{criterion_main, Criterion};
use spillway::audit::rpc::{Args, Command, Ret, RpcAudit};
use spillway::audit::storage::{StorageAudit, StorageSite};
use spillway::audit::writer::Sink;
use spillway::ids::{AppId, PartitionKey, PartitionRange};

fn bench(c: &mut Criterion) {
    let dir = tempfile::TempDir::new().unwrap();
    let sink = Sink::open(
        &dir.path().join("rpc_audit.log"),
        "audit-bench",
        prometheus::IntCounter::new("dropped", "dropped").unwrap(),
    )
    .unwrap();
    let on = RpcAudit::new(sink, &["appHeartbeat".into()]);
    let off = RpcAudit::off();
    let from = Some("10.0.0.7:51234".parse().unwrap());
    let partitions: Vec<i32> = (0..8).collect();
    let mut g = c.benchmark_group("rpc_audit");
    g.bench_function("record_and_enqueue", |b| {
        b.iter(|| {
            if let Some(mut e) = on.begin(Command::RequireBuffer, from) {
                e.app("application_1700000000000_0001")
                    .shuffle(3)
                    .args(Args::RequireBuffer {
                        require_size: 1 << 20,
                        partition_ids: partitions.clone(),
                    })
                    .ret(Ret::RequireBufferId(42));
                e.finish("SUCCESS");
            }
        })
    });
    g.bench_function("excluded", |b| {
        b.iter(|| on.begin(Command::AppHeartbeat, from).is_some())
    });
    g.bench_function("off", |b| {
        b.iter(|| off.begin(Command::RequireBuffer, from).is_some())
    });
    g.finish();

    let sink = Sink::open(
        &dir.path().join("storage_audit.log"),
        "audit-bench-storage",
        prometheus::IntCounter::new("dropped", "dropped").unwrap(),
    )
    .unwrap();
    let on = StorageAudit::new(sink);
    let off = StorageAudit::off();
    let app = AppId::parse("application_1700000000000_0001").unwrap();
    let site = StorageSite::local("/data1/rssdata");
    let part = PartitionKey::new(app, 3, PartitionRange::new(3, 3).unwrap());
    let now = std::time::SystemTime::now();
    let mut g = c.benchmark_group("storage_audit");
    g.bench_function("spill_line", |b| {
        b.iter(|| on.written(&part, Some(site.clone()), 1 << 20, (now, now)))
    });
    g.bench_function("off", |b| {
        b.iter(|| off.written(&part, Some(site.clone()), 1 << 20, (now, now)))
    });
    g.finish();
}

/// `criterion_group!` defines an undocumented `pub fn`; a private module keeps `missing_docs`
/// quiet without silencing it for the whole file.
mod groups {
    use super::bench;
    use criterion::criterion_group;

    criterion_group!(benches, bench);
}

criterion_main!(groups::benches);
