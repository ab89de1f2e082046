//! `curves tenants` (issue 50, memory fairness): many small apps writing beside one heavy
//! writer into a store smaller than what the heavy one asks for. What the small apps waited,
//! the throughput each got and how evenly (Jain's index among them), three ways side by side
//! in one run:
//!
//! - **alone**: the small apps on a server of their own;
//! - **no share**: beside the heavy app, with `quota.app_memory_share = 1` (no memory share:
//!   every request competes for the same memory, as before the share existed);
//! - **fair**: beside the heavy app, with the default fair share (past the high watermark an
//!   app holding more than the capacity divided by the apps present is refused first).
//!
//! Every figure is the median of [`ROUNDS`] runs. The small apps are `curves backpressure`'s apps (8 sends of 4 × 32 KiB each, every id read
//! back and checked). The heavy app runs [`HEAVY_WRITERS`] writers of [`HEAVY_SEND`] each,
//! from [`HEAVY_LEAD`] before the small apps start until they are done (at most
//! [`HEAVY_MAX`]), so memory is past its high watermark the whole time. The goal (issue 50):
//! the small apps' p99 wait beside the heavy app within 2× of alone, and Jain's index among
//! them at least 0.95.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::ensure;
use bytes::Bytes;
use hdrhistogram::Histogram;

use super::app_writer::{AppWriter, Rpcs};
use super::fairness::{
    app_task, join_apps, quantile, throughputs, BACKOFF, BLOCK, PARTITIONS, SENDS, STARVE,
};
use super::{register, sizes, Curve, CurveOptions, Point};
use spillway::ids::BlockIdLayout;
use spillway::proto;

/// The server's memory capacity.
const CAPACITY_MIB: u64 = 64;
/// Concurrent writers of the heavy app.
const HEAVY_WRITERS: usize = 64;
/// Partitions of the heavy app; each of its sends writes one block into each.
const HEAVY_PARTITIONS: usize = 8;
/// Bytes of one heavy block: a send is 8 × 256 KiB = 2 MiB, 32 MiB in flight.
const HEAVY_BLOCK: usize = 256 << 10;
/// How long the heavy app writes before the small apps start.
const HEAVY_LEAD: Duration = Duration::from_secs(1);
/// The most the heavy app writes in one point.
const HEAVY_MAX: u64 = 4 << 30;
/// gRPC connections the small apps share (the heavy app has its own).
const CHANNELS: usize = 32;
/// Bytes of one heavy send.
const HEAVY_SEND: usize = HEAVY_PARTITIONS * HEAVY_BLOCK;

/// How the server shares memory in one scenario.
#[derive(Clone, Copy)]
enum Scenario {
    Alone,
    NoShare,
    Fair,
}

impl Scenario {
    fn tag(self) -> &'static str {
        match self {
            Scenario::Alone => "alone",
            Scenario::NoShare => "noshare",
            Scenario::Fair => "fair",
        }
    }
}

/// What one scenario measured.
struct Measured {
    /// p99 over every small send's time to its grant (first requireBuffer call until the
    /// grant, what the server held the calls included), ms.
    wait_p99: f64,
    /// The median small app's MB/s.
    median_mbs: f64,
    /// Jain's index over the small apps' MB/s.
    jain: f64,
    /// The heavy app's MB/s while the small apps ran (0 alone).
    heavy_mbs: f64,
    /// Requests refused for their memory share.
    share_refused: f64,
}

/// The heavy app: writers that require and send until told to stop; returns the bytes sent.
async fn heavy(point: &Point, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) -> anyhow::Result<()> {
    let channel = crate::client::channel(point.server.target.grpc).await?;
    let payload = Bytes::from(vec![0x5a; HEAVY_BLOCK]);
    let partitions: Vec<i32> = (0..HEAVY_PARTITIONS as i32).collect();
    let size = (HEAVY_PARTITIONS * (HEAVY_BLOCK + 32)) as i32;
    let mut writers = Vec::with_capacity(HEAVY_WRITERS);
    for task in 0..HEAVY_WRITERS {
        let mut w = AppWriter::new(channel.clone(), "curves_tenants_heavy", 0);
        let (stop, sent, payload, partitions) = (
            Arc::clone(&stop),
            Arc::clone(&sent),
            payload.clone(),
            partitions.clone(),
        );
        writers.push(tokio::spawn(async move {
            let mut rpcs = Rpcs::default();
            let mut seq = 0i64;
            while !stop.load(Ordering::Relaxed) && sent.load(Ordering::Relaxed) < HEAVY_MAX {
                let grant = w
                    .require(size, &partitions, BACKOFF, STARVE, &mut rpcs)
                    .await?;
                let blocks = partitions
                    .iter()
                    .map(|&p| {
                        let block = proto::ShuffleBlock {
                            block_id: BlockIdLayout::DEFAULT.block_id(seq, p, task as i64),
                            length: HEAVY_BLOCK as i32,
                            uncompress_length: HEAVY_BLOCK as i32,
                            crc: 0,
                            data: payload.clone(),
                            task_attempt_id: task as i64,
                        };
                        (p, vec![block])
                    })
                    .collect();
                w.send(grant.ticket, blocks, &mut rpcs).await?;
                sent.fetch_add(HEAVY_SEND as u64, Ordering::Relaxed);
                seq += 1;
            }
            anyhow::Ok(())
        }));
    }
    for w in writers {
        w.await??;
    }
    Ok(())
}

async fn scenario(opts: &CurveOptions, n: usize, s: Scenario) -> anyhow::Result<Measured> {
    let share = match s {
        Scenario::NoShare => Some(1.0),
        Scenario::Alone | Scenario::Fair => None,
    };
    let tag = format!("tenants{n}{}", s.tag());
    let point =
        Arc::new(Point::start_sharing(opts, &tag, &format!("{CAPACITY_MIB}M"), share).await?);
    let names: Vec<String> = (0..n).map(|a| format!("curves_tenants_{a}")).collect();
    let mut c = point.grpc.clone();
    for app in &names {
        register(&mut c, app, 0, PARTITIONS).await?;
    }
    register(&mut c, "curves_tenants_heavy", 0, HEAVY_PARTITIONS).await?;
    let mut channels = vec![point.channel.clone()];
    for _ in 1..CHANNELS.min(n) {
        channels.push(crate::client::channel(point.server.target.grpc).await?);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let heavy_task = match s {
        Scenario::Alone => None,
        _ => {
            let (point, stop, sent) = (Arc::clone(&point), Arc::clone(&stop), Arc::clone(&sent));
            Some(tokio::spawn(async move { heavy(&point, stop, sent).await }))
        }
    };
    if heavy_task.is_some() {
        tokio::time::sleep(HEAVY_LEAD).await;
    }

    let payload = Bytes::from(vec![0xa5; BLOCK]);
    let start = Instant::now();
    let heavy_before = sent.load(Ordering::Relaxed);
    let mut tasks = Vec::with_capacity(n);
    for (i, name) in names.iter().enumerate() {
        let w = AppWriter::new(channels[i % channels.len()].clone(), name, 0);
        let payload = payload.clone();
        let fault = opts.check_fault;
        tasks.push(tokio::spawn(async move {
            let mut rpcs = Rpcs::default();
            app_task(w, i, fault, payload, start, &mut rpcs).await
        }));
    }
    let (runs, mut failed) = join_apps(tasks).await;
    let elapsed = start.elapsed().as_secs_f64();
    let heavy_bytes = sent.load(Ordering::Relaxed) - heavy_before;
    stop.store(true, Ordering::Relaxed);
    if let Some(t) = heavy_task {
        if let Err(e) = t.await.map_err(anyhow::Error::from).and_then(|r| r) {
            failed.get_or_insert(e.context("the heavy app"));
        }
    }
    let metrics = point.metrics().await.unwrap_or_default();
    let share_refused =
        super::metric(&metrics, "tenant_memory_share_refused_total", None).unwrap_or(0.0);
    match Arc::try_unwrap(point) {
        Ok(point) => {
            point.stop().await;
        }
        Err(_) => anyhow::bail!("the point's server is still in use"),
    }
    if let Some(e) = failed {
        return Err(e.context(format!("{n} small apps, {}", s.tag())));
    }
    ensure!(
        runs.len() == n,
        "{} of {n} small apps completed",
        runs.len()
    );

    let mut waits = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
    for r in &runs {
        for w in &r.took {
            waits.saturating_record(w.as_micros().max(1) as u64);
        }
    }
    let (throughput, fairness) = throughputs(&runs);
    eprintln!(
        "spillway-bench: tenants {n} small apps, {}: {elapsed:.1} s, heavy {:.0} MiB, {share_refused} share refusals",
        s.tag(),
        heavy_bytes as f64 / (1 << 20) as f64
    );
    Ok(Measured {
        wait_p99: waits.value_at_quantile(0.99) as f64 / 1e3,
        median_mbs: quantile(&throughput, 0.5),
        jain: fairness,
        heavy_mbs: heavy_bytes as f64 / elapsed.max(1e-6) / 1e6,
        share_refused,
    })
}

/// Each figure is the median of this many runs of its scenario, taken in turn (alone, no
/// share, fair, alone, …): one run lasts a second or two, and on two cores one slow run
/// would decide the table.
const ROUNDS: usize = 3;

/// The median of `runs` by each figure.
fn median(runs: &[Measured]) -> Measured {
    let mid = |f: fn(&Measured) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        quantile(&v, 0.5)
    };
    Measured {
        wait_p99: mid(|m| m.wait_p99),
        median_mbs: mid(|m| m.median_mbs),
        jain: mid(|m| m.jain),
        heavy_mbs: mid(|m| m.heavy_mbs),
        share_refused: mid(|m| m.share_refused),
    }
}

/// Small apps beside a heavy writer at 50 and 200 small apps.
pub(super) async fn tenants(opts: &CurveOptions) -> anyhow::Result<Curve> {
    let mut rows = Vec::new();
    for n in sizes(opts, &[50, 200], &[1_000]) {
        let n = n as usize;
        let mut runs: [Vec<Measured>; 3] = Default::default();
        for _ in 0..ROUNDS {
            for (i, s) in [Scenario::Alone, Scenario::NoShare, Scenario::Fair]
                .into_iter()
                .enumerate()
            {
                runs[i].push(scenario(opts, n, s).await?);
            }
        }
        let [alone, no_share, fair] = runs.map(|r| median(&r));
        rows.push(vec![
            n as f64,
            alone.wait_p99,
            no_share.wait_p99,
            fair.wait_p99,
            alone.median_mbs,
            no_share.median_mbs,
            fair.median_mbs,
            alone.jain,
            no_share.jain,
            fair.jain,
            no_share.heavy_mbs,
            fair.heavy_mbs,
            fair.share_refused,
        ]);
    }
    Ok(Curve {
        name: "tenants",
        title: format!(
            "Small apps ({SENDS} sends of {PARTITIONS} x 32 KiB each) beside one heavy app \
             ({HEAVY_WRITERS} writers of {} MiB) in {CAPACITY_MIB} MiB: alone, beside it with no \
             memory share, beside it with the fair share",
            HEAVY_SEND >> 20
        ),
        columns: [
            "small apps",
            "requireBuffer p99 ms: alone",
            "requireBuffer p99 ms: no share",
            "requireBuffer p99 ms: fair share",
            "small app MB/s median: alone",
            "small app MB/s median: no share",
            "small app MB/s median: fair share",
            "Jain's index: alone",
            "Jain's index: no share",
            "Jain's index: fair share",
            "heavy MB/s: no share",
            "heavy MB/s: fair share",
            "share refusals: fair share",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        plots: vec![
            ("", "ms", vec![1, 2, 3]),
            ("-throughput", "MB/s per small app", vec![4, 5, 6]),
        ],
    })
}
