//! `curves backpressure` (issue 32, item 2): many apps writing at once into a store smaller
//! than what they ask for, so `requireBuffer` answers `NO_BUFFER` and the server spills while
//! they write. What each app waited, and whether the waits were fair.
//!
//! Every app is a map task of its own, all started together: it writes [`SENDS`] sends of one
//! 32 KiB block into each of its [`PARTITIONS`] partitions (requireBuffer until granted, backing
//! off 10 ms doubling to 320 ms after a `NO_BUFFER`, then sendShuffleData), reports its ids,
//! and reads every partition's ids back with getShuffleResult, which must hold exactly them. At
//! 500 apps the requests in flight ask for about the whole 64 MiB capacity (so past the 0.8
//! high watermark); at 2,000 for four times it.
//!
//! Per send, the wait is the time from the start of its first refused requireBuffer until the
//! grant (zero when the first call is granted); an app's total wait is the sum over its sends.
//! An app's throughput is its bytes over the time from the common start until its last send was
//! answered; Jain's index over those (1 = every app the same, 1/n = one app got everything)
//! says how evenly the server shared its memory. An app refused for longer than [`STARVE`] in
//! one send fails the run, as does any app that does not complete.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::ensure;
use bytes::Bytes;
use hdrhistogram::Histogram;
use parking_lot::Mutex;

use super::app_writer::{AppWriter, Rpc, Rpcs};
use super::{register, sizes, Curve, CurveOptions, Point};
use spillway::ids::BlockIdLayout;
use spillway::proto;

/// Partitions of each app's shuffle; every send writes one block into each.
pub(super) const PARTITIONS: usize = 4;
/// Bytes of a block.
pub(super) const BLOCK: usize = 32 << 10;
/// Sends per app: 1 MiB per app.
pub(super) const SENDS: usize = 8;
/// The server's memory capacity.
const CAPACITY_MIB: u64 = 64;
/// Longest an app may be refused in one send before the run fails (the server's own bound is
/// one ticket lifetime, 20 s, and two spill passes: docs/backpressure.md).
pub(super) const STARVE: Duration = Duration::from_secs(30);
/// gRPC connections the apps share.
const CHANNELS: usize = 64;
/// The client's back-off after a `NO_BUFFER`, doubled per refusal up to 32 times this.
pub(super) const BACKOFF: Duration = Duration::from_millis(10);

/// One app's run.
pub(super) struct AppRun {
    /// Per send: from its first refusal until the grant.
    pub(super) waits: Vec<Duration>,
    /// Per send: from its first requireBuffer call until the grant.
    pub(super) took: Vec<Duration>,
    pub(super) refusals: u32,
    /// From the common start until its last send was answered.
    pub(super) done: Duration,
}

fn block_id(seq: usize, partition: i32, app: usize) -> i64 {
    BlockIdLayout::DEFAULT.block_id(seq as i64, partition, app as i64)
}

/// One app: its sends, its report, its reads (checked).
pub(super) async fn app_task(
    mut w: AppWriter,
    index: usize,
    fault: bool,
    payload: Bytes,
    start: Instant,
    rpcs: &mut Rpcs,
) -> anyhow::Result<AppRun> {
    let partitions: Vec<i32> = (0..PARTITIONS as i32).collect();
    let size = (PARTITIONS * (BLOCK + 32)) as i32;
    let mut run = AppRun {
        waits: Vec::with_capacity(SENDS),
        took: Vec::with_capacity(SENDS),
        refusals: 0,
        done: Duration::ZERO,
    };
    for seq in 0..SENDS {
        let grant = w.require(size, &partitions, BACKOFF, STARVE, rpcs).await?;
        run.waits.push(grant.waited);
        run.took.push(grant.took);
        run.refusals += grant.refusals;
        let blocks = partitions
            .iter()
            .map(|&p| {
                let block = proto::ShuffleBlock {
                    block_id: block_id(seq, p, index),
                    length: BLOCK as i32,
                    uncompress_length: BLOCK as i32,
                    crc: 0,
                    data: payload.clone(),
                    task_attempt_id: index as i64,
                };
                (p, vec![block])
            })
            .collect();
        w.send(grant.ticket, blocks, rpcs).await?;
    }
    run.done = start.elapsed();
    let ids: Vec<(i32, Vec<i64>)> = partitions
        .iter()
        .map(|&p| (p, (0..SENDS).map(|s| block_id(s, p, index)).collect()))
        .collect();
    if !(fault && index == 0) {
        w.report(index as i64, ids.clone(), rpcs).await?;
    }
    for (p, want) in ids {
        let got = w.result(p, Some(rpcs)).await?;
        let mut want: Vec<u64> = want.into_iter().map(|id| id as u64).collect();
        want.sort_unstable();
        ensure!(
            got == want,
            "getShuffleResult of {} partition {p}: {} ids, {} written and reported",
            w.app,
            got.len(),
            want.len()
        );
    }
    Ok(run)
}

/// Waits for every app task: the runs that completed, and the first error of those that did
/// not (every task is awaited, so none outlives the point's server).
pub(super) async fn join_apps(
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<AppRun>>>,
) -> (Vec<AppRun>, Option<anyhow::Error>) {
    let mut runs = Vec::with_capacity(tasks.len());
    let mut failed = None;
    for t in tasks {
        match t.await.map_err(anyhow::Error::from).and_then(|r| r) {
            Ok(r) => runs.push(r),
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    (runs, failed)
}

/// Each app's MB/s (its bytes over the time from the common start to its last send's
/// answer), sorted, and Jain's index over them.
pub(super) fn throughputs(runs: &[AppRun]) -> (Vec<f64>, f64) {
    let app_bytes = (PARTITIONS * BLOCK * SENDS) as f64;
    let mut throughput: Vec<f64> = runs
        .iter()
        .map(|r| app_bytes / r.done.as_secs_f64().max(1e-6) / 1e6)
        .collect();
    let fairness = jain(&throughput);
    throughput.sort_by(f64::total_cmp);
    (throughput, fairness)
}

/// The `q` quantile of sorted `v`.
pub(super) fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Jain's fairness index of `x`: (Σx)² / (n Σx²).
pub(super) fn jain(x: &[f64]) -> f64 {
    let (sum, squares) = x.iter().fold((0.0, 0.0), |(s, q), v| (s + v, q + v * v));
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (x.len() as f64 * squares)
}

async fn point(opts: &CurveOptions, tag: &str, n: usize) -> anyhow::Result<Vec<f64>> {
    let point = Point::start(opts, tag, &format!("{CAPACITY_MIB}M")).await?;
    let names: Vec<String> = (0..n).map(|a| format!("curves_bp_{n}_{a}")).collect();
    let mut c = point.grpc.clone();
    for app in &names {
        register(&mut c, app, 0, PARTITIONS).await?;
    }
    let mut channels = vec![point.channel.clone()];
    for _ in 1..CHANNELS.min(n) {
        channels.push(crate::client::channel(point.server.target.grpc).await?);
    }
    let payload = Bytes::from(vec![0xa5; BLOCK]);
    let barrier = Arc::new(tokio::sync::Barrier::new(n + 1));
    let merged = Arc::new(Mutex::new(Rpcs::default()));
    let mut tasks = Vec::with_capacity(n);
    for (i, name) in names.iter().enumerate() {
        let w = AppWriter::new(channels[i % channels.len()].clone(), name, 0);
        let (barrier, merged, payload) =
            (Arc::clone(&barrier), Arc::clone(&merged), payload.clone());
        let fault = opts.check_fault;
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let start = Instant::now();
            let mut rpcs = Rpcs::default();
            let run = app_task(w, i, fault, payload, start, &mut rpcs).await;
            merged.lock().merge(&rpcs);
            run
        }));
    }
    let load0 = super::loadavg();
    barrier.wait().await;
    let started = Instant::now();
    let (runs, failed) = join_apps(tasks).await;
    let elapsed = started.elapsed().as_secs_f64();
    let metrics = point.metrics().await.unwrap_or_default();
    let spilled_files = super::metric(&metrics, "total_flush_file_num", None).unwrap_or(0.0);
    point.stop().await;
    if let Some(e) = failed {
        return Err(e.context(format!("{n} apps over {CAPACITY_MIB} MiB")));
    }
    ensure!(runs.len() == n, "{} of {n} apps completed", runs.len());
    let rpcs = merged.lock();

    let send_bytes = (PARTITIONS * BLOCK) as f64;
    let app_bytes = send_bytes * SENDS as f64;
    let mut waits = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
    let mut refused_waits = Vec::new();
    let mut refused_sends = 0usize;
    for r in &runs {
        for w in &r.waits {
            waits.saturating_record(w.as_micros().max(1) as u64);
            if !w.is_zero() {
                refused_sends += 1;
                refused_waits.push(w.as_secs_f64() * 1e3);
            }
        }
    }
    refused_waits.sort_by(f64::total_cmp);
    let mut totals: Vec<f64> = runs
        .iter()
        .map(|r| r.waits.iter().map(Duration::as_secs_f64).sum())
        .collect();
    totals.sort_by(f64::total_cmp);
    let (throughput, fairness) = throughputs(&runs);
    let refusals: u64 = runs.iter().map(|r| u64::from(r.refusals)).sum();
    let sends = (n * SENDS) as f64;
    eprintln!(
        "spillway-bench: backpressure {n} apps: {refusals} NO_BUFFER, {spilled_files} spill \
         files, {:.1} s; load average {load0} before, {} after",
        elapsed,
        super::loadavg()
    );
    Ok(vec![
        n as f64,
        n as f64 * send_bytes / (1 << 20) as f64,
        refused_sends as f64 / sends * 100.0,
        refusals as f64 / sends,
        quantile(&refused_waits, 0.5),
        waits.value_at_quantile(0.99) as f64 / 1e3,
        waits.max() as f64 / 1e3,
        rpcs.ms(Rpc::Require, 0.99),
        quantile(&totals, 0.5),
        quantile(&totals, 1.0),
        quantile(&throughput, 0.0),
        quantile(&throughput, 0.5),
        fairness,
        n as f64 * app_bytes / elapsed / 1e6,
        elapsed,
        spilled_files,
    ])
}

/// Back-pressure fairness at 500 and 2,000 apps over a 64 MiB store.
pub(super) async fn backpressure(opts: &CurveOptions) -> anyhow::Result<Curve> {
    let mut rows = Vec::new();
    for (i, n) in sizes(opts, &[500, 2_000], &[]).into_iter().enumerate() {
        rows.push(point(opts, &format!("bp{i}"), n as usize).await?);
    }
    Ok(Curve {
        name: "backpressure-apps",
        title: format!(
            "Back-pressure: apps x {SENDS} sends of {PARTITIONS} x 32 KiB at once into \
             {CAPACITY_MIB} MiB"
        ),
        columns: [
            "apps",
            "MiB asked at once",
            "sends refused %",
            "NO_BUFFER per send",
            "wait p50 ms (refused sends)",
            "wait p99 ms (all sends)",
            "wait max ms",
            "requireBuffer call p99 ms",
            "total wait s: median app",
            "total wait s: slowest app",
            "app MB/s: slowest",
            "app MB/s: median",
            "Jain's index (app MB/s)",
            "all apps MB/s",
            "elapsed s",
            "spill files",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        plots: vec![
            ("", "ms", vec![4, 5, 6, 7]),
            ("-apps", "s per app, MB/s per app", vec![8, 9, 10, 11]),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_when_even_and_one_over_n_when_one_takes_all() {
        assert!((jain(&[2.0, 2.0, 2.0, 2.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[4.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert!((jain(&[1.0, 3.0]) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn quantile_of_sorted_values() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 1.0), 5.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
