//! Curve 5 (`curves latency-apps`): `requireBuffer`, `sendShuffleData`, `reportShuffleResult`
//! and `getShuffleResult` latency (p50, p99, p999) against the number of apps writing at once,
//! 1 → 2,000 (issue 32, item 2).
//!
//! Every app registers its own shuffle of [`PARTITIONS`] partitions. The work is a list of map
//! tasks, round-robin over the apps; a task is what a Spark map task does, shrunk to one send:
//! requireBuffer, sendShuffleData of one block per partition, reportShuffleResult of its ids.
//! Then, as a reducer of the same app would, it asks getShuffleResult for one partition and
//! checks the bitmap: every id in it belongs to that app and partition (and to a task that
//! was started), its own id is there, and it holds at least one id per task of the app whose
//! report had been answered before the call. When every task is done, each app's partitions
//! are read once more and must hold exactly the ids written. A wrong answer fails the run.
//!
//! The offered load is fixed, not the work per app: the same number of tasks, started at the
//! same rate ([`RATE`] a second, open loop: a task starts on its schedule whether or not the
//! earlier ones are done), goes to the server at every point. With a fixed amount per app,
//! 2,000 apps would send 2,000 times as much and the latencies would measure the queue in
//! front of two cores; with the load fixed, a latency or a CPU cost per task that grows with
//! the apps is the server's cost of having them (a scan of every app on the request path, a
//! global lock held longer, a timer or task per app). The rate is below what the machine can
//! do, so a latency is the server's answer time, not a queue: a closed loop (a fixed number in
//! flight, as round 5 ran it) measures in-flight / throughput at its median. How late tasks
//! started against their schedule is reported with the figures (the machine is shared).
//! The capacity (1 GiB) holds every point's data below the high watermark, so nothing spills:
//! the latencies are the request path's alone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use bytes::Bytes;
use hdrhistogram::Histogram;
use parking_lot::Mutex;

use super::app_writer::{AppWriter, Rpc, Rpcs};
use super::{register, sizes, Curve, CurveOptions, Point};
use spillway::ids::BlockIdLayout;
use spillway::procstat::Proc;
use spillway::proto;

/// Partitions of each app's one shuffle; every task writes one block into each.
const PARTITIONS: usize = 4;
/// Bytes of a block: a small block, so the server's per-request work dominates the copies.
const BLOCK: usize = 4096;
/// Tasks started per second, at every point.
const RATE: f64 = 1_000.0;
/// Tasks that may be in flight at once (the rest wait, and start late).
const WORKERS: usize = 128;
/// gRPC connections the in-flight tasks share (each app's client would have its own; the
/// connections' own cost is not what this curve is about).
const CHANNELS: usize = 8;
/// How long the server's CPU is watched with every app registered and none sending.
const IDLE: Duration = Duration::from_secs(2);
/// Tasks per point (divided by `--shrink`): 10 s of load at [`RATE`], so a p99 is not one
/// scheduler hiccup and a p999 rests on 10 calls.
const TASKS: u64 = 10_000;
/// The server's capacity; the high watermark (0.8) is far above a point's 160 MiB.
const CAPACITY: &str = "1G";
/// No app waits this long for memory here (nothing spills); a safety net against a hang.
const STARVE: Duration = Duration::from_secs(60);

/// Block id of task `k`'s block in `partition`.
fn block_id(partition: i32, task: u64) -> i64 {
    BlockIdLayout::DEFAULT.block_id(0, partition, task as i64)
}

/// What the workers share at one point.
struct Shared {
    names: Vec<String>,
    tasks: u64,
    /// Per app: tasks whose report was answered.
    reported: Vec<AtomicU64>,
    payload: Bytes,
    /// `--check-fault`: task 0 does not report its ids but counts them as reported, so the
    /// reads must find them missing.
    fault: bool,
}

impl Shared {
    /// Checks one mid-run `getShuffleResult` of `app`'s `partition`; `at_least` = the app's
    /// answered reports before the call, `own` = the caller's task (reported just before).
    fn check_partial(
        &self,
        app: usize,
        partition: i32,
        ids: &[u64],
        at_least: u64,
        own: u64,
    ) -> anyhow::Result<()> {
        let n = self.names.len() as u64;
        let layout = BlockIdLayout::DEFAULT;
        for &id in ids {
            let (p, t) = (
                layout.partition_of(id as i64),
                layout.task_attempt_of(id as i64),
            );
            let seq = id as i64 >> (layout.partition_bits + layout.task_attempt_bits);
            if p != partition || seq != 0 || t as u64 % n != app as u64 || t as u64 >= self.tasks {
                bail!(
                    "getShuffleResult of {} partition {partition}: id {id} (partition {p}, task \
                     {t}) was never written there",
                    self.names[app]
                );
            }
        }
        ensure!(
            ids.binary_search(&(block_id(partition, own) as u64))
                .is_ok(),
            "getShuffleResult of {} partition {partition}: the id task {own} reported just \
             before is missing ({} ids)",
            self.names[app],
            ids.len()
        );
        ensure!(
            ids.len() as u64 >= at_least,
            "getShuffleResult of {} partition {partition}: {} ids, but {at_least} tasks of the \
             app had reported",
            self.names[app],
            ids.len()
        );
        Ok(())
    }

    /// One map task and one read, as described in the module doc.
    async fn task(&self, w: &mut AppWriter, k: u64, rpcs: &mut Rpcs) -> anyhow::Result<()> {
        let n = self.names.len() as u64;
        let app = (k % n) as usize;
        let partitions: Vec<i32> = (0..PARTITIONS as i32).collect();
        let size = (PARTITIONS * (BLOCK + 32)) as i32;
        let grant = w
            .require(size, &partitions, Duration::from_millis(10), STARVE, rpcs)
            .await?;
        let blocks = partitions
            .iter()
            .map(|&p| {
                let block = proto::ShuffleBlock {
                    block_id: block_id(p, k),
                    length: BLOCK as i32,
                    uncompress_length: BLOCK as i32,
                    crc: 0,
                    data: self.payload.clone(),
                    task_attempt_id: k as i64,
                };
                (p, vec![block])
            })
            .collect();
        w.send(grant.ticket, blocks, rpcs).await?;
        let ids = partitions
            .iter()
            .map(|&p| (p, vec![block_id(p, k)]))
            .collect();
        if !(self.fault && k == 0) {
            w.report(k as i64, ids, rpcs).await?;
        }
        self.reported[app].fetch_add(1, Ordering::Release);
        let at_least = self.reported[app].load(Ordering::Acquire);
        let partition = ((k / n) % PARTITIONS as u64) as i32;
        let got = w.result(partition, Some(rpcs)).await?;
        self.check_partial(app, partition, &got, at_least, k)
    }

    /// Every app's partitions hold exactly the ids its tasks wrote.
    async fn verify_all(&self, channel: tonic::transport::Channel) -> anyhow::Result<()> {
        let n = self.names.len() as u64;
        for (app, name) in self.names.iter().enumerate() {
            let mut w = AppWriter::new(channel.clone(), name, 0);
            for p in 0..PARTITIONS as i32 {
                let got = w.result(p, None).await?;
                let want: Vec<u64> = (app as u64..self.tasks)
                    .step_by(n as usize)
                    .map(|k| block_id(p, k) as u64)
                    .collect();
                if got != want {
                    let missing = want.iter().filter(|id| got.binary_search(id).is_err());
                    bail!(
                        "getShuffleResult of {name} partition {p}: {} ids, {} written; first \
                         missing: {:?}",
                        got.len(),
                        want.len(),
                        missing.take(3).collect::<Vec<_>>()
                    );
                }
            }
        }
        Ok(())
    }
}

/// One point's figures.
struct Row {
    rpcs: Rpcs,
    /// How late the tasks started against their schedule, p99.
    lag_p99_ms: f64,
    tasks_per_s: f64,
    cpu_us_per_task: f64,
    idle_ms_per_s: f64,
    register: Histogram<u64>,
    /// The server's own execution times (its RPC audit log).
    server: Rpcs,
    used_mib: f64,
    load: String,
}

fn lag_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("1 µs to 1 h at 3 digits is valid")
}

async fn point(opts: &CurveOptions, tag: &str, n: u64, tasks: u64) -> anyhow::Result<Row> {
    let point = Point::start(opts, tag, CAPACITY).await?;
    let names: Vec<String> = (0..n).map(|a| format!("curves_apps_{n}_{a}")).collect();
    let mut c = point.grpc.clone();
    let mut register_h = Histogram::<u64>::new(3)?;
    for app in &names {
        let t = Instant::now();
        register(&mut c, app, 0, PARTITIONS).await?;
        register_h.record(t.elapsed().as_micros() as u64)?;
    }
    let mut channels = vec![point.channel.clone()];
    for _ in 1..CHANNELS {
        channels.push(crate::client::channel(point.server.target.grpc).await?);
    }
    let proc = Proc::new(point.server.pid);
    let cpu = || proc.as_ref().and_then(Proc::cpu_seconds).unwrap_or(0.0);
    // The registered apps alone, before any send: a timer or task per app shows here.
    let idle0 = cpu();
    tokio::time::sleep(IDLE).await;
    let idle = (cpu() - idle0) / IDLE.as_secs_f64() * 1e3;
    let shared = Arc::new(Shared {
        reported: (0..n).map(|_| AtomicU64::new(0)).collect(),
        names,
        tasks,
        payload: Bytes::from(vec![0x5a; BLOCK]),
        fault: opts.check_fault,
    });
    let merged = Arc::new(Mutex::new((Rpcs::default(), lag_histogram())));
    // The schedule: task k is due at `started + k / RATE`; a free worker takes it then.
    let (due_tx, due_rx) = tokio::sync::mpsc::channel::<(u64, Instant)>(WORKERS);
    let due_rx = Arc::new(tokio::sync::Mutex::new(due_rx));
    let cpu0 = cpu();
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (shared, merged, due_rx) = (
            Arc::clone(&shared),
            Arc::clone(&merged),
            Arc::clone(&due_rx),
        );
        let channel = channels[w % CHANNELS].clone();
        workers.push(tokio::spawn(async move {
            let mut rpcs = Rpcs::default();
            let mut lag = lag_histogram();
            let result = async {
                loop {
                    let next = due_rx.lock().await.recv().await;
                    let Some((k, due)) = next else {
                        return anyhow::Ok(());
                    };
                    lag.saturating_record(due.elapsed().as_micros().max(1) as u64);
                    let app = &shared.names[(k % shared.names.len() as u64) as usize];
                    let mut writer = AppWriter::new(channel.clone(), app, 0);
                    shared.task(&mut writer, k, &mut rpcs).await?;
                }
            }
            .await;
            let mut m = merged.lock();
            m.0.merge(&rpcs);
            let _ = m.1.add(&lag);
            result
        }));
    }
    for k in 0..tasks {
        let due = started + Duration::from_secs_f64(k as f64 / RATE);
        tokio::time::sleep_until(due.into()).await;
        // A closed channel means every worker failed: their errors say why.
        if due_tx.send((k, due)).await.is_err() {
            break;
        }
    }
    drop(due_tx);
    let mut failed = None;
    for w in workers {
        if let Err(e) = w.await.map_err(anyhow::Error::from).and_then(|r| r) {
            failed.get_or_insert(e);
        }
    }
    if let Some(e) = failed {
        // Stopped first, so its data dir goes too.
        point.stop().await;
        return Err(e.context(format!("{n} apps")));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let busy = cpu() - cpu0;
    let load = super::loadavg();
    let metrics = point.metrics().await?;
    let used = super::metric(&metrics, "used_buffer_size", None).unwrap_or(0.0);
    // Every call was answered, so its audit line is queued; the writer drains within ms.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let server =
        Rpcs::from_audit_log(&std::fs::read_to_string(&point.server.audit_log).unwrap_or_default());
    let verified = shared.verify_all(point.channel.clone()).await;
    point.stop().await;
    verified?;
    let (rpcs, lag) = Arc::try_unwrap(merged)
        .map_err(|_| anyhow::anyhow!("a worker still holds the histograms"))?
        .into_inner();
    Ok(Row {
        rpcs,
        lag_p99_ms: lag.value_at_quantile(0.99) as f64 / 1e3,
        tasks_per_s: tasks as f64 / elapsed,
        cpu_us_per_task: busy / tasks as f64 * 1e6,
        idle_ms_per_s: idle,
        register: register_h,
        server,
        used_mib: used / (1 << 20) as f64,
        load,
    })
}

/// Curve 5: the four calls' client-side p50/p99/p999 against concurrent apps, and beside it
/// the server's own view (CPU, its p99s, memory held).
pub(super) async fn latency_apps(opts: &CurveOptions) -> anyhow::Result<Vec<Curve>> {
    let apps_at = sizes(opts, &[1, 10, 100, 500, 1_000, 2_000], &[]);
    // At least two tasks per app, so every app writes and reads.
    let tasks = (TASKS / opts.shrink).max(2 * apps_at.last().copied().unwrap_or(1));
    let mut latency = Vec::new();
    let mut server = Vec::new();
    for (i, &n) in apps_at.iter().enumerate() {
        let r = point(opts, &format!("apps{i}"), n, tasks).await?;
        let mut row = vec![n as f64];
        for rpc in Rpc::ALL {
            for q in [0.5, 0.99, 0.999] {
                row.push(r.rpcs.ms(rpc, q));
            }
        }
        latency.push(row);
        let ms = |q: f64| r.register.value_at_quantile(q) as f64 / 1e3;
        server.push(vec![
            n as f64,
            r.tasks_per_s,
            r.cpu_us_per_task,
            r.idle_ms_per_s,
            ms(0.5),
            ms(0.99),
        ]);
        for rpc in Rpc::ALL {
            server
                .last_mut()
                .expect("pushed above")
                .push(r.server.ms(rpc, 0.99));
        }
        for rpc in Rpc::ALL {
            server
                .last_mut()
                .expect("pushed above")
                .push(r.server.ms(rpc, 0.999));
        }
        let last = server.last_mut().expect("pushed above");
        last.push(r.used_mib);
        last.push(r.lag_p99_ms);
        ensure!(
            r.server.count(Rpc::Require) >= tasks,
            "the audit log has {} requireBuffer lines for {tasks} tasks",
            r.server.count(Rpc::Require)
        );
        eprintln!(
            "spillway-bench: latency-apps {n} apps: {} requireBuffer calls for {tasks} tasks, \
             load average {}",
            r.rpcs.count(Rpc::Require),
            r.load
        );
    }
    let mut server_columns: Vec<String> = [
        "apps",
        "tasks/s",
        "server CPU us per task",
        "idle server CPU ms/s",
        "registerShuffle p50 ms",
        "registerShuffle p99 ms",
    ]
    .map(String::from)
    .to_vec();
    for q in ["p99", "p999"] {
        for rpc in Rpc::ALL {
            server_columns.push(format!("server {} {q} ms", rpc.name()));
        }
    }
    server_columns.push("memory used MiB (end)".into());
    server_columns.push("start lag p99 ms".into());
    let mut columns = vec!["apps".to_owned()];
    for rpc in Rpc::ALL {
        for q in ["p50", "p99", "p999"] {
            columns.push(format!("{} {q} ms", rpc.name()));
        }
    }
    Ok(vec![
        Curve {
            name: "latency-apps",
            title: format!(
                "requireBuffer, sendShuffleData, reportShuffleResult, getShuffleResult against \
                 concurrent apps ({tasks} tasks of {PARTITIONS} x 4 KiB, {RATE} a second)"
            ),
            columns,
            rows: latency,
            plots: vec![
                ("", "p99 ms", vec![2, 5, 8, 11]),
                ("-p50", "p50 ms", vec![1, 4, 7, 10]),
                ("-p999", "p999 ms", vec![3, 6, 9, 12]),
            ],
        },
        Curve {
            name: "latency-apps-server",
            title: format!(
                "The server against concurrent apps ({tasks} tasks, capacity {CAPACITY}): CPU, \
                 its own p99 and p999 (RPC audit log), memory held"
            ),
            columns: server_columns,
            rows: server,
            plots: vec![
                ("-cpu", "server CPU us per task, idle ms/s", vec![2, 3]),
                (
                    "-p99",
                    "server's own p99 ms (RPC audit log)",
                    vec![6, 7, 8, 9],
                ),
            ],
        },
    ])
}
