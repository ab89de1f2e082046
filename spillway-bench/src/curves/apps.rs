//! Curve 5 (`curves latency-apps`): `requireBuffer` and `sendShuffleData` latency against the
//! number of apps writing at once, 1 → 2,000.
//!
//! The offered load is fixed, not the work per app: the same number of sends, with the same
//! number in flight, goes to the server at every point, spread round-robin over the apps. With
//! a fixed amount per app, 2,000 apps would send 2,000 times as much and the latencies would
//! measure the queue in front of two cores; with the load fixed, a latency or a CPU cost per
//! send that grows with the apps is the server's cost of having them (a scan of every app
//! on the request path, a global lock held longer, a timer or task per app).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use parking_lot::Mutex;

use super::{register, sizes, Curve, CurveOptions, Point};
use crate::client::{Client, Latencies, Op};
use spillway::ids::BlockIdLayout;
use spillway::procstat::Proc;
use spillway::proto;

/// Partitions of each app's one shuffle; every send writes one block into each.
const PARTITIONS: usize = 4;
/// Bytes of a block: a small block, so the server's per-request work dominates the copies.
const BLOCK: usize = 4096;
/// Sends in flight at any time, at every point.
const IN_FLIGHT: usize = 32;
/// gRPC connections the in-flight sends share (each app's client would have its own; the
/// connections' own cost is not what this curve is about).
const CHANNELS: usize = 8;
/// How long the server's CPU is watched with every app registered and none sending.
const IDLE: Duration = Duration::from_secs(2);

/// Curve 5: requireBuffer + sendShuffleData p50 and p99 against concurrent apps.
pub(super) async fn latency_apps(opts: &CurveOptions) -> anyhow::Result<Curve> {
    let apps_at = sizes(opts, &[1, 10, 100, 500, 1_000, 2_000], &[]);
    // A few seconds per point, so a cost that comes in ticks (CPU time is counted in 10 ms
    // ticks) or from a periodic task is seen; at least two sends per app, so every app writes.
    let sends = (20_000 / opts.shrink).max(2 * apps_at.last().copied().unwrap_or(1));
    let payload = Bytes::from(vec![0x5a; BLOCK]);
    let mut rows = Vec::new();
    for (i, &n) in apps_at.iter().enumerate() {
        let point = Point::start(opts, &format!("apps{i}"), "1G").await?;
        let names: Arc<Vec<String>> =
            Arc::new((0..n).map(|a| format!("curves_apps_{n}_{a}")).collect());
        let mut c = point.grpc.clone();
        let mut reg = Histogram::<u64>::new(3)?;
        for app in names.iter() {
            let t = Instant::now();
            register(&mut c, app, 0, PARTITIONS).await?;
            reg.record(t.elapsed().as_micros() as u64)?;
        }
        let channels: Vec<_> = {
            let mut v = vec![point.channel.clone()];
            for _ in 1..CHANNELS {
                v.push(crate::client::channel(point.server.target.grpc).await?);
            }
            v
        };
        let proc = Proc::new(point.server.pid);
        let cpu = || proc.as_ref().and_then(Proc::cpu_seconds).unwrap_or(0.0);
        // The registered apps alone, before any send: a timer or task per app shows here.
        let idle0 = cpu();
        tokio::time::sleep(IDLE).await;
        let idle = (cpu() - idle0) / IDLE.as_secs_f64() * 1e3;
        let cpu0 = cpu();
        let lat = Arc::new(Mutex::new(Latencies::default()));
        let next = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut workers = Vec::new();
        for w in 0..IN_FLIGHT {
            let (names, next, lat, payload) = (
                Arc::clone(&names),
                Arc::clone(&next),
                Arc::clone(&lat),
                payload.clone(),
            );
            let channel = channels[w % CHANNELS].clone();
            workers.push(tokio::spawn(async move {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= sends {
                        return anyhow::Ok(());
                    }
                    let app = &names[(k % n) as usize];
                    let mut client =
                        Client::new(channel.clone(), None, app, 0, Arc::clone(&lat)).await?;
                    // Task attempt id = the send's number: ids never repeat within an app.
                    let blocks = (0..PARTITIONS as i32)
                        .map(|p| {
                            (
                                p,
                                proto::ShuffleBlock {
                                    block_id: BlockIdLayout::DEFAULT.block_id(0, p, k as i64),
                                    length: BLOCK as i32,
                                    uncompress_length: BLOCK as i32,
                                    crc: 0,
                                    data: payload.clone(),
                                    task_attempt_id: k as i64,
                                },
                            )
                        })
                        .collect();
                    client.send(blocks, Duration::from_millis(10)).await?;
                }
            }));
        }
        for w in workers {
            w.await??;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let busy = cpu() - cpu0;
        let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
        let row = {
            let lat = lat.lock();
            let (req, send) = (lat.of(Op::Require), lat.of(Op::Send));
            vec![
                n as f64,
                ms(req, 0.5),
                ms(req, 0.99),
                ms(send, 0.5),
                ms(send, 0.99),
                sends as f64 / elapsed,
                busy / sends as f64 * 1e6,
                idle,
                ms(&reg, 0.5),
                ms(&reg, 0.99),
            ]
        };
        rows.push(row);
        point.stop().await;
    }
    Ok(Curve {
        name: "latency-apps",
        title: format!(
            "requireBuffer + sendShuffleData against concurrent apps ({sends} sends of \
             {PARTITIONS} x 4 KiB, {IN_FLIGHT} in flight)"
        ),
        columns: [
            "apps",
            "requireBuffer p50 ms",
            "requireBuffer p99 ms",
            "sendShuffleData p50 ms",
            "sendShuffleData p99 ms",
            "sends/s",
            "server CPU us per send",
            "idle server CPU ms/s",
            "registerShuffle p50 ms",
            "registerShuffle p99 ms",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        plots: vec![
            ("", "ms", vec![1, 2, 3, 4]),
            ("-cpu", "server CPU us per send, idle ms/s", vec![6, 7]),
        ],
    })
}
