//! `spillway-bench curves <which>`: what the server's costs do as a workload grows to
//! production scale (issue 23, item 2). Each point starts a release `spillway` child process
//! (`spawn.rs`) with a fresh data dir, drives it through the real gRPC interface, and reads
//! what it holds from outside: jemalloc's allocated bytes from its `/metrics`, its descriptors
//! from `/proc/<pid>/fd`, its journal's bytes on disk, and client-side latencies.
//!
//! ```text
//!  blockids    reportShuffleResult 10k → 10M ids over 1, 100, 10k partitions → heap B/id
//!  partitions  1k → 200k partitions, one 1 KiB block each, spilled → heap B/partition,
//!              peak/after fds, spill MB/s
//!  journal     apps × block ids, SIGTERM + start → journal bytes, time until it answers
//!  latency     report / getShuffleResult / getShuffleResultForMultiPart p50, p99
//!  latency-apps  1 → 2,000 apps writing at a fixed load → requireBuffer / send / report /
//!              getShuffleResult p50, p99, p999, server CPU and its own p99s
//!  backpressure  500 and 2,000 apps over a 64 MiB store → per-app requireBuffer waits,
//!              fairness (Jain's index), no app starved
//!  tenants     50 and 200 small apps alone, beside one heavy writer without a memory share,
//!              and with the fair share → their p99 requireBuffer wait, MB/s, Jain's index
//!  records     map tasks × partitions, each task one block id and one record count per
//!              partition → heap B per kept count (with counts minus without)
//! ```
//!
//! Heap, not RSS: jemalloc's `stats.allocated` counts the bytes the server's structures
//! hold right now, so a figure per block id is not blurred by pages the allocator keeps for
//! reuse, by the page cache of spilled files, or by a balloon driver (round 4's caveat).
//! RSS is printed beside it for the reader who wants the operator's view.
//!
//! Every curve goes to stdout as a markdown table, and to `<out>/<curve>.csv` and
//! `<out>/<curve>*.svg`. Sizes are divided by `--shrink` (the smoke test runs them tiny);
//! `--max` adds the largest points.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use tonic::transport::Channel;

use super::client::{self, Client, Latencies};
use super::spawn::Spillway;
use super::Options;
use spillway::ids::BlockIdLayout;
use spillway::procstat::Proc;
use spillway::proto::shuffle_server_client::ShuffleServerClient;
use spillway::proto::{self, StatusCode};

mod app_writer;
mod apps;
mod fairness;
mod tenants;

/// Which curve(s) to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// Heap per reported block id.
    Blockids,
    /// Heap, descriptors and spill throughput per partition.
    Partitions,
    /// Journal size and restart time against block ids and apps.
    Journal,
    /// Latency of the block-id calls against their size.
    Latency,
    /// requireBuffer, sendShuffleData, reportShuffleResult and getShuffleResult latency
    /// against concurrent apps.
    LatencyApps,
    /// Back-pressure with many apps over a small store: per-app waits and fairness.
    Backpressure,
    /// Heap per kept record count (post-0.10 `partitionStats`), per partition and task.
    Records,
    /// Many small apps beside one heavy writer: their waits, throughput and fairness alone,
    /// beside it without a memory share, and beside it with the fair share.
    Tenants,
    /// All of them, in this order.
    All,
}

/// Options of `spillway-bench curves`.
#[derive(Debug, Clone, clap::Args)]
pub struct CurveOptions {
    /// The curve to measure.
    #[arg(value_enum)]
    pub which: Which,
    /// Where the CSV and SVG files go (created).
    #[arg(long, default_value = "benches/curves")]
    pub out: PathBuf,
    /// Add the largest points (100M block ids, 200k partitions, 50M journaled ids).
    #[arg(long)]
    pub max: bool,
    /// Divide every count by this (`--shrink 1000` runs in seconds, for tests).
    #[arg(long, default_value_t = 1)]
    pub shrink: u64,
    /// The `spillway` binary to start (default: next to this one).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// Parent of the servers' data dirs (default: the temp dir); each point gets a fresh one.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// `quota.app_memory_share` of every server started (default: the server's, a fair
    /// share; `1` turns it off), to compare a curve with and without it side by side.
    #[arg(long)]
    pub app_memory_share: Option<f64>,
    /// Test only: the curves that read block ids back leave one report out but still expect
    /// its ids, so their checks must fail the run (the smoke test's proof that they can).
    #[arg(long, hide = true)]
    pub check_fault: bool,
}

/// A table and the plots drawn from it.
pub struct Curve {
    /// File stem of the CSV and the SVGs.
    pub name: &'static str,
    /// Plot caption and table heading.
    pub title: String,
    /// Column names; column 0 is the x axis (plotted on a log scale).
    pub columns: Vec<String>,
    /// One row per point.
    pub rows: Vec<Vec<f64>>,
    /// `(file suffix, y label, columns drawn)`, one SVG each.
    pub plots: Vec<(&'static str, &'static str, Vec<usize>)>,
}

impl Curve {
    /// The table as markdown.
    pub fn markdown(&self) -> String {
        let mut s = format!("#### {}\n\n| {} |\n|", self.title, self.columns.join(" | "));
        for _ in &self.columns {
            s.push_str("---:|");
        }
        s.push('\n');
        for row in &self.rows {
            s.push('|');
            for v in row {
                let _ = write!(s, " {} |", fmt_num(*v));
            }
            s.push('\n');
        }
        s
    }

    /// Writes `<dir>/<name>.csv` and the SVGs.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut csv = self.columns.join(",");
        csv.push('\n');
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|v| format!("{v}")).collect();
            csv.push_str(&cells.join(","));
            csv.push('\n');
        }
        std::fs::write(dir.join(format!("{}.csv", self.name)), csv)?;
        for (suffix, y_label, cols) in &self.plots {
            let path = dir.join(format!("{}{suffix}.svg", self.name));
            self.svg(&path, y_label, cols)
                .with_context(|| format!("drawing {}", path.display()))?;
        }
        Ok(())
    }

    fn svg(&self, path: &Path, y_label: &str, cols: &[usize]) -> anyhow::Result<()> {
        use plotters::prelude::*;
        let xs: Vec<f64> = self.rows.iter().map(|r| r[0].max(1.0)).collect();
        let (xmin, xmax) = xs
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
        let ymax = self
            .rows
            .iter()
            .flat_map(|r| cols.iter().map(move |c| r[*c]))
            .fold(0.0f64, f64::max);
        if xs.is_empty() {
            return Ok(());
        }
        let root = SVGBackend::new(path, (760, 440)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 17))
            .margin(14)
            .x_label_area_size(42)
            .y_label_area_size(72)
            // Log x: every curve's x spans decades. Linear y from zero: a flat line is a
            // cost linear in x, a rising one is not.
            .build_cartesian_2d(
                (xmin..xmax.max(xmin * 1.01)).log_scale(),
                0.0..(ymax * 1.15).max(1e-9),
            )?;
        chart
            .configure_mesh()
            .x_desc(self.columns[0].as_str())
            .y_desc(y_label)
            .x_label_formatter(&|x| fmt_num(*x))
            .y_label_formatter(&|y| fmt_num(*y))
            .draw()?;
        for (i, c) in cols.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = xs
                .iter()
                .zip(&self.rows)
                .map(|(x, r)| (*x, r[*c]))
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(self.columns[*c].as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
        Ok(())
    }
}

/// A number as a table shows it: integers plainly, fractions with 3 significant digits.
fn fmt_num(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Runs the curves `opts.which` names; prints each table and writes its files.
pub async fn run(opts: &CurveOptions) -> anyhow::Result<Vec<Curve>> {
    anyhow::ensure!(opts.shrink >= 1, "--shrink must be ≥ 1");
    let which = match opts.which {
        Which::All => vec![
            Which::Blockids,
            Which::Partitions,
            Which::Journal,
            Which::Latency,
            Which::LatencyApps,
            Which::Backpressure,
            Which::Records,
            Which::Tenants,
        ],
        one => vec![one],
    };
    let mut out = Vec::new();
    for w in &which {
        let started = Instant::now();
        let curves = match w {
            Which::Blockids => vec![block_ids(opts).await?],
            Which::Partitions => vec![partitions(opts).await?],
            Which::Journal => journal(opts).await?,
            Which::LatencyApps => apps::latency_apps(opts).await?,
            Which::Backpressure => vec![fairness::backpressure(opts).await?],
            Which::Records => vec![records(opts).await?],
            Which::Tenants => vec![tenants::tenants(opts).await?],
            _ => latency(opts).await?,
        };
        for c in curves {
            c.write(&opts.out)?;
            println!("{}", c.markdown());
            out.push(c);
        }
        eprintln!(
            "spillway-bench: {w:?} took {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(out)
}

/// The options `Spillway::start` takes, for a server with `capacity` in `dir`.
fn server_options(
    opts: &CurveOptions,
    capacity: &str,
    dir: &Path,
    memory_share: Option<f64>,
) -> anyhow::Result<Options> {
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        o: Options,
    }
    let mut args: Vec<std::ffi::OsString> = vec![
        "curves".into(),
        "--capacity".into(),
        capacity.into(),
        // Spilling 200k partitions with an fdatasync each measures the VM's disk flushes,
        // not the server; descriptors and heap do not depend on it.
        "--sync".into(),
        "false".into(),
        "--data-dir".into(),
        dir.into(),
    ];
    if let Some(b) = &opts.server_bin {
        args.push("--server-bin".into());
        args.push(b.into());
    }
    if let Some(share) = memory_share {
        args.push("--app-memory-share".into());
        args.push(share.to_string().into());
    }
    Ok(Wrap::try_parse_from(args)?.o)
}

/// One server for one point, in a fresh data dir removed when it stops.
struct Point {
    server: Spillway,
    dir: PathBuf,
    grpc: ShuffleServerClient<Channel>,
    channel: Channel,
    http: reqwest::Client,
}

impl Point {
    async fn start(opts: &CurveOptions, tag: &str, capacity: &str) -> anyhow::Result<Point> {
        Self::start_sharing(opts, tag, capacity, opts.app_memory_share).await
    }

    /// [`Point::start`] with `quota.app_memory_share` set (`None`: the server's default).
    async fn start_sharing(
        opts: &CurveOptions,
        tag: &str,
        capacity: &str,
        memory_share: Option<f64>,
    ) -> anyhow::Result<Point> {
        let parent = opts.data_dir.clone().unwrap_or_else(std::env::temp_dir);
        let dir = parent.join(format!("spillway-curves-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let server = Spillway::start(&server_options(opts, capacity, &dir, memory_share)?).await?;
        let channel = client::channel(server.target.grpc).await?;
        Ok(Point {
            grpc: grpc_client(channel.clone()),
            channel,
            server,
            dir,
            http: reqwest::Client::new(),
        })
    }

    /// The server's metrics, every registry, as Prometheus text.
    async fn metrics(&self) -> anyhow::Result<String> {
        let url = format!("http://{}/prometheus/metrics/all", self.server.http);
        Ok(self.http.get(url).send().await?.text().await?)
    }

    /// jemalloc's allocated bytes, read from the server's metrics.
    async fn heap(&self) -> anyhow::Result<u64> {
        metric(&self.metrics().await?, "jemalloc_allocated_bytes", None)
            .map(|v| v as u64)
            .context("no jemalloc_allocated_bytes in /metrics (a server built without jemalloc?)")
    }

    fn rss(&self) -> u64 {
        Proc::new(self.server.pid)
            .and_then(|p| p.rss())
            .map_or(0, |(rss, _)| rss)
    }

    fn fds(&self) -> u64 {
        count_fds(self.server.pid)
    }

    /// Stops the server; returns how long it took to exit after SIGTERM.
    async fn stop(self) -> Duration {
        let t = Instant::now();
        self.server.stop().await;
        let exit = t.elapsed();
        let dir = self.dir;
        let t = Instant::now();
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir)).await;
        tracing::info!("data dir removed in {:.1} s", t.elapsed().as_secs_f64());
        exit
    }
}

/// The value of the first sample of family `name` in Prometheus `text` (with `quantile`: the
/// sample carrying that quantile label).
fn metric(text: &str, name: &str, quantile: Option<&str>) -> Option<f64> {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .find(|l| quantile.is_none_or(|q| l.contains(&format!("quantile=\"{q}\""))))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
}

/// The machine's load averages (1, 5, 15 min), printed with the latency figures: the machine
/// is shared, and a p99 is its scheduling as much as the server's.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn count_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

fn grpc_client(ch: Channel) -> ShuffleServerClient<Channel> {
    ShuffleServerClient::new(ch)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX)
}

fn ok(op: &str, status: i32, msg: &str) -> anyhow::Result<()> {
    if status == StatusCode::Success as i32 {
        Ok(())
    } else {
        bail!("{op}: status {status} {msg}")
    }
}

async fn register(
    c: &mut ShuffleServerClient<Channel>,
    app: &str,
    shuffle: i32,
    partitions: usize,
) -> anyhow::Result<()> {
    let r = c
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
            partition_ranges: (0..partitions as i32)
                .map(|p| proto::ShufflePartitionRange { start: p, end: p })
                .collect(),
            user: "spillway-bench".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    ok("registerShuffle", r.status, &r.ret_msg)
}

async fn report(
    c: &mut ShuffleServerClient<Channel>,
    app: &str,
    shuffle: i32,
    task: i64,
    parts: Vec<proto::PartitionToBlockIds>,
) -> anyhow::Result<()> {
    let r = c
        .report_shuffle_result(proto::ReportShuffleResultRequest {
            app_id: app.into(),
            shuffle_id: shuffle,
            task_attempt_id: task,
            bitmap_num: 1,
            partition_to_block_ids: parts,
            // As the released clients report: no record counts.
            partition_stats: Vec::new(),
        })
        .await?
        .into_inner();
    ok("reportShuffleResult", r.status, &r.ret_msg)
}

/// Block ids as a Spark shuffle makes them: partition `p`'s `j`-th id belongs to map task
/// `j / per_task` with sequence number `j % per_task` (a task writes a few blocks per
/// partition, one per spill), so a partition holds about as many ids as the stage has tasks.
#[derive(Clone, Copy)]
struct Ids {
    partitions: u64,
    per_task: u64,
}

impl Ids {
    fn new(partitions: u64, total: u64) -> Ids {
        let per_partition = total.div_ceil(partitions.max(1));
        let max_tasks = 1u64 << BlockIdLayout::DEFAULT.task_attempt_bits;
        Ids {
            partitions: partitions.max(1),
            per_task: per_partition.div_ceil(max_tasks).max(8),
        }
    }

    /// The `k`-th id in report order (round-robin over partitions).
    fn id(&self, k: u64) -> (i32, i64) {
        let p = (k % self.partitions) as i32;
        let j = k / self.partitions;
        let id = BlockIdLayout::DEFAULT.block_id(
            (j % self.per_task) as i64,
            p,
            (j / self.per_task) as i64,
        );
        (p, id)
    }

    /// Reports ids `from..to` in requests of at most `chunk` ids, grouped by partition.
    async fn report_range(
        &self,
        c: &mut ShuffleServerClient<Channel>,
        app: &str,
        shuffle: i32,
        from: u64,
        to: u64,
    ) -> anyhow::Result<()> {
        const CHUNK: u64 = 100_000;
        let mut k = from;
        while k < to {
            let end = (k + CHUNK).min(to);
            let n = (end - k).min(self.partitions) as usize;
            let mut parts: Vec<proto::PartitionToBlockIds> = Vec::with_capacity(n);
            for i in k..end {
                let (p, id) = self.id(i);
                let slot = ((i - k) % self.partitions) as usize;
                if slot == parts.len() {
                    parts.push(proto::PartitionToBlockIds {
                        partition_id: p,
                        block_ids: Vec::new(),
                    });
                }
                parts[slot].block_ids.push(id);
            }
            report(c, app, shuffle, (k / CHUNK) as i64, parts).await?;
            k = end;
        }
        Ok(())
    }
}

fn sizes(opts: &CurveOptions, base: &[u64], max: &[u64]) -> Vec<u64> {
    let mut v: Vec<u64> = base.to_vec();
    if opts.max {
        v.extend_from_slice(max);
    }
    let mut v: Vec<u64> = v.into_iter().map(|n| (n / opts.shrink).max(1)).collect();
    v.dedup();
    v
}

/// Curve 1: heap per reported block id, at 1, 100 and 10k partitions.
async fn block_ids(opts: &CurveOptions) -> anyhow::Result<Curve> {
    let totals = sizes(
        opts,
        &[10_000, 100_000, 1_000_000, 10_000_000],
        &[100_000_000],
    );
    let partition_counts = [1u64, 100, 10_000];
    let mut rows: Vec<Vec<f64>> = totals.iter().map(|t| vec![*t as f64]).collect();
    for (i, &parts) in partition_counts.iter().enumerate() {
        let parts = (parts / opts.shrink.min(parts)).max(1);
        let point = Point::start(opts, &format!("ids{i}"), "1G").await?;
        let mut c = point.grpc.clone();
        let app = format!("curves_ids_{parts}");
        register(&mut c, &app, 0, parts as usize).await?;
        let base = point.heap().await?;
        let last = *totals.last().unwrap_or(&0);
        let ids = Ids::new(parts, last);
        let mut done = 0;
        for (row, &total) in rows.iter_mut().zip(&totals) {
            ids.report_range(&mut c, &app, 0, done, total).await?;
            done = total;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let heap = point.heap().await?;
            row.push(heap.saturating_sub(base) as f64 / total as f64);
            if i == partition_counts.len() - 1 {
                row.push(point.rss() as f64 / (1u64 << 20) as f64);
            }
        }
        point.stop().await;
    }
    let mut columns = vec!["block ids".to_owned()];
    for p in partition_counts {
        columns.push(format!(
            "B/id @ {} partitions",
            (p / opts.shrink.min(p)).max(1)
        ));
    }
    columns.push("RSS MiB (last)".into());
    Ok(Curve {
        name: "blockids",
        title: "Heap per reported block id (jemalloc allocated)".into(),
        columns,
        rows,
        plots: vec![("", "heap bytes per block id", vec![1, 2, 3])],
    })
}

/// Curve 7: what the kept record counts cost. Two servers get the same reports, each map task
/// one block id per partition; one server's reports also carry each task's record count per
/// partition, as a master client with integrity validation sends them. The heap difference
/// divided by the counts kept (partitions × tasks) is the cost of one count.
async fn records(opts: &CurveOptions) -> anyhow::Result<Curve> {
    let totals = sizes(opts, &[10_000, 100_000, 1_000_000], &[10_000_000]);
    let partition_counts = [100u64, 10_000];
    let mut rows: Vec<Vec<f64>> = totals.iter().map(|t| vec![*t as f64]).collect();
    for (i, &parts) in partition_counts.iter().enumerate() {
        let parts = (parts / opts.shrink.min(parts)).max(1);
        let mut heaps: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        for (with, heaps) in heaps.iter_mut().enumerate() {
            let point = Point::start(opts, &format!("records{i}{with}"), "1G").await?;
            let mut c = point.grpc.clone();
            let app = format!("curves_records_{parts}");
            register(&mut c, &app, 0, parts as usize).await?;
            let base = point.heap().await?;
            let mut task = 0i64;
            for &total in &totals {
                let tasks = (total / parts).max(1) as i64;
                while task < tasks {
                    let parts_ids = (0..parts as i32)
                        .map(|p| proto::PartitionToBlockIds {
                            partition_id: p,
                            block_ids: vec![BlockIdLayout::DEFAULT.block_id(0, p, task)],
                        })
                        .collect();
                    let stats = if with == 1 {
                        (0..parts as i32)
                            .map(|p| proto::PartitionStats {
                                partition_id: p,
                                task_attempt_id_to_records: vec![proto::TaskAttemptIdToRecords {
                                    task_attempt_id: task,
                                    record_number: 1000,
                                }],
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    let r = c
                        .report_shuffle_result(proto::ReportShuffleResultRequest {
                            app_id: app.clone(),
                            shuffle_id: 0,
                            task_attempt_id: task,
                            bitmap_num: 1,
                            partition_to_block_ids: parts_ids,
                            partition_stats: stats,
                        })
                        .await?
                        .into_inner();
                    ok("reportShuffleResult", r.status, &r.ret_msg)?;
                    task += 1;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
                heaps.push(point.heap().await?.saturating_sub(base));
            }
            point.stop().await;
        }
        for (k, row) in rows.iter_mut().enumerate() {
            let counts = parts * (totals[k] / parts).max(1);
            row.push(heaps[1][k].saturating_sub(heaps[0][k]) as f64 / counts as f64);
            row.push(heaps[0][k] as f64 / counts as f64);
        }
    }
    let mut columns = vec!["counts (partitions x tasks)".to_owned()];
    for p in partition_counts {
        let p = (p / opts.shrink.min(p)).max(1);
        columns.push(format!("B/count @ {p} partitions"));
        columns.push(format!("B/block id @ {p} partitions (same run, no counts)"));
    }
    Ok(Curve {
        name: "records",
        title: "Heap per kept record count (integrity records; jemalloc allocated)".into(),
        columns,
        rows,
        plots: vec![("", "heap bytes per record count", vec![1, 3])],
    })
}

/// Curve 2: per partition, one small block each, everything spilled: heap, descriptors,
/// spill throughput.
async fn partitions(opts: &CurveOptions) -> anyhow::Result<Curve> {
    const BLOCK: usize = 1024;
    const PER_SEND: usize = 512;
    // 200k partitions leave 200k directories that take minutes to create and delete on a
    // busy VM: behind `--max`, so that `curves all` stays within 15 minutes.
    let counts = sizes(opts, &[1_000, 10_000, 100_000], &[200_000]);
    let mut rows = Vec::new();
    let payload = Bytes::from(vec![0x5a; BLOCK]);
    for (i, &n) in counts.iter().enumerate() {
        let point = Point::start(opts, &format!("parts{i}"), "16M").await?;
        let app = format!("curves_parts_{n}");
        let mut c = point.grpc.clone();
        let fds0 = point.fds();
        register(&mut c, &app, 0, n as usize).await?;
        let heap0 = point.heap().await?;
        // Peak descriptors while writing and spilling, sampled from outside.
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let sampler = {
            let (peak, pid) = (Arc::clone(&peak), point.server.pid);
            tokio::spawn(async move {
                loop {
                    peak.fetch_max(count_fds(pid), std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        let started = Instant::now();
        let lat = Arc::new(Mutex::new(Latencies::default()));
        let workers = 4usize;
        let mut tasks = Vec::new();
        for w in 0..workers {
            let mut client =
                Client::new(point.channel.clone(), None, &app, 0, Arc::clone(&lat)).await?;
            let payload = payload.clone();
            tasks.push(tokio::spawn(async move {
                let mut p = (w * PER_SEND) as u64;
                while p < n {
                    let end = (p + PER_SEND as u64).min(n);
                    let blocks: Vec<(i32, proto::ShuffleBlock)> = (p..end)
                        .map(|p| {
                            let id = BlockIdLayout::DEFAULT.block_id(0, p as i32, 0);
                            (
                                p as i32,
                                proto::ShuffleBlock {
                                    block_id: id,
                                    length: BLOCK as i32,
                                    uncompress_length: BLOCK as i32,
                                    crc: 0,
                                    data: payload.clone(),
                                    task_attempt_id: 0,
                                },
                            )
                        })
                        .collect();
                    let ids = blocks.iter().map(|(p, b)| (*p, vec![b.block_id])).collect();
                    client.send(blocks, Duration::from_millis(10)).await?;
                    client.report_and_commit(0, ids).await?;
                    p += (workers * PER_SEND) as u64;
                }
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        let written = started.elapsed().as_secs_f64();
        let r = c
            .finish_shuffle(proto::FinishShuffleRequest {
                app_id: app.clone(),
                shuffle_id: 0,
            })
            .await?
            .into_inner();
        ok("finishShuffle", r.status, &r.ret_msg)?;
        let elapsed = started.elapsed().as_secs_f64();
        sampler.abort();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = point.fds();
        let heap = point.heap().await?.saturating_sub(heap0);
        let peak = peak.load(std::sync::atomic::Ordering::Relaxed).max(after);
        rows.push(vec![
            n as f64,
            heap as f64 / n as f64,
            peak.saturating_sub(fds0) as f64,
            after.saturating_sub(fds0) as f64,
            (n as usize * BLOCK) as f64 / elapsed / 1e6,
            n as f64 / elapsed,
            elapsed - written,
        ]);
        let exit = point.stop().await;
        if let Some(r) = rows.last_mut() {
            r.push(exit.as_secs_f64());
        }
    }
    Ok(Curve {
        name: "partitions",
        title: "Per partition: 1 KiB block each, spilled to localfile (capacity 16 MiB)".into(),
        columns: [
            "partitions",
            "heap B/partition",
            "peak extra fds",
            "extra fds after",
            "write+spill MB/s",
            "partitions/s",
            "finishShuffle s",
            "SIGTERM to exit s",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        plots: vec![
            ("", "heap bytes per partition", vec![1]),
            ("-fds", "descriptors over the idle server's", vec![2, 3]),
            (
                "-throughput",
                "partitions written + spilled per second",
                vec![5],
            ),
        ],
    })
}

/// Bytes of the files under `dir`.
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => tree_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// One journal point: `apps` apps of one 100-partition shuffle share `total` ids; returns
/// `[journal bytes, old exit s, until answering s, verify s]`.
async fn journal_point(
    opts: &CurveOptions,
    tag: &str,
    apps: u64,
    total: u64,
) -> anyhow::Result<[f64; 4]> {
    const PARTS: u64 = 100;
    let mut point = Point::start(opts, tag, "1G").await?;
    let mut c = point.grpc.clone();
    let per_app = (total / apps).max(1);
    let names: Vec<String> = (0..apps).map(|a| format!("curves_journal_{a}")).collect();
    for app in &names {
        register(&mut c, app, 0, PARTS as usize).await?;
        Ids::new(PARTS, per_app)
            .report_range(&mut c, app, 0, 0, per_app)
            .await?;
    }
    let journal = tree_bytes(&point.server.data_dir.join(spillway::recovery::META_DIR));
    for app in &names {
        c.app_heartbeat(proto::AppHeartBeatRequest {
            app_id: app.clone(),
        })
        .await?;
    }
    drop(c);
    let start = Instant::now();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(point.server.pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    point.server.child_mut().wait().await?;
    let old_exit = start.elapsed();
    let start = Instant::now();
    let mut new = tokio::process::Command::new(&point.server.bin)
        .arg("--config")
        .arg(&point.server.config)
        .env(
            "RUST_LOG",
            std::env::var("SPILLWAY_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    // Recovery finishes before the ports accept requests, so the first answer is the end of
    // the restart; every id is then checked.
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut c = loop {
        if let Ok(ch) = client::channel(point.server.target.grpc).await {
            let mut c = grpc_client(ch);
            let hb = c
                .app_heartbeat(proto::AppHeartBeatRequest {
                    app_id: names[0].clone(),
                })
                .await;
            if hb.is_ok() {
                break c;
            }
        }
        anyhow::ensure!(Instant::now() < deadline, "no answer within 300 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let answering = start.elapsed();
    let v0 = Instant::now();
    let mut found = 0u64;
    for app in &names {
        let r = c
            .get_shuffle_result_for_multi_part(proto::GetShuffleResultForMultiPartRequest {
                app_id: app.clone(),
                shuffle_id: 0,
                partitions: (0..PARTS as i32).collect(),
                block_id_layout: None,
            })
            .await?
            .into_inner();
        ok("getShuffleResultForMultiPart", r.status, &r.ret_msg)?;
        found += spillway::codec::bitmap::decode(&r.serialized_bitmap)?.len();
    }
    let verify = v0.elapsed();
    if let Some(pid) = new.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let _ = tokio::time::timeout(Duration::from_secs(60), new.wait()).await;
    point.stop().await;
    anyhow::ensure!(
        found == per_app * apps,
        "after the restart {found} of {} block ids came back",
        per_app * apps
    );
    Ok([
        journal as f64,
        old_exit.as_secs_f64(),
        answering.as_secs_f64(),
        verify.as_secs_f64(),
    ])
}

/// Curve 3: journal bytes and restart time, against block ids (10 apps) and apps (1M ids).
async fn journal(opts: &CurveOptions) -> anyhow::Result<Vec<Curve>> {
    let mut by_ids = Vec::new();
    for (i, total) in sizes(opts, &[100_000, 1_000_000, 10_000_000], &[50_000_000])
        .into_iter()
        .enumerate()
    {
        let [bytes, exit, up, verify] = journal_point(opts, &format!("jids{i}"), 10, total).await?;
        by_ids.push(vec![
            total as f64,
            bytes / total as f64,
            bytes / 1e6,
            exit,
            up,
            verify,
        ]);
    }
    let mut by_apps = Vec::new();
    let total = (1_000_000 / opts.shrink).max(1);
    for (i, apps) in sizes(opts, &[1, 10, 100, 1_000, 2_000], &[5_000])
        .into_iter()
        .enumerate()
    {
        let apps = apps.min(total);
        let [bytes, exit, up, verify] =
            journal_point(opts, &format!("japps{i}"), apps, total).await?;
        by_apps.push(vec![
            apps as f64,
            bytes / 1e6,
            bytes / apps as f64,
            exit,
            up,
            verify,
        ]);
    }
    let restart_plot = |first: usize| ("-restart", "seconds", vec![first, first + 1]);
    Ok(vec![
        Curve {
            name: "journal-ids",
            title: "Journal and restart against block ids (10 apps x 100 partitions)".into(),
            columns: [
                "block ids",
                "journal B/id",
                "journal MB",
                "SIGTERM to exit s",
                "start to answering s",
                "verify all ids s",
            ]
            .map(String::from)
            .to_vec(),
            rows: by_ids,
            plots: vec![("", "journal bytes per block id", vec![1]), restart_plot(3)],
        },
        Curve {
            name: "journal-apps",
            title: format!("Journal and restart against apps ({total} block ids in all)"),
            columns: [
                "apps",
                "journal MB",
                "journal B/app",
                "SIGTERM to exit s",
                "start to answering s",
                "verify all ids s",
            ]
            .map(String::from)
            .to_vec(),
            rows: by_apps,
            plots: vec![("", "journal bytes per app", vec![2]), restart_plot(3)],
        },
    ])
}

/// p50 and p99 in ms of `reps` calls of `call`.
async fn time<F, Fut>(reps: usize, mut call: F) -> anyhow::Result<(f64, f64)>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut h = Histogram::<u64>::new(3)?;
    for i in 0..reps {
        let t = Instant::now();
        call(i).await?;
        h.record(t.elapsed().as_micros() as u64)?;
    }
    Ok((
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
    ))
}

/// Curve 4: block-id call latencies against blocks per partition and partitions per request.
async fn latency(opts: &CurveOptions) -> anyhow::Result<Vec<Curve>> {
    const PARTS: u64 = 10;
    const REPS: usize = 200;
    let point = Point::start(opts, "latency", "1G").await?;
    let app = "curves_latency";
    let mut c = point.grpc.clone();
    let mut by_blocks = Vec::new();
    let per_partition = sizes(opts, &[100, 1_000, 10_000, 100_000, 1_000_000], &[]);
    for (s, &b) in per_partition.iter().enumerate() {
        let shuffle = s as i32;
        register(&mut c, app, shuffle, PARTS as usize).await?;
        let ids = Ids::new(PARTS, b * PARTS);
        ids.report_range(&mut c, app, shuffle, 0, b * PARTS).await?;
        // A map task's report into the full shuffle: one new id per partition.
        let next = b * PARTS;
        let (rep50, rep99) = time(REPS, |i| {
            let mut c = c.clone();
            let parts = (0..PARTS)
                .map(|p| proto::PartitionToBlockIds {
                    partition_id: p as i32,
                    block_ids: vec![ids.id(next + i as u64 * PARTS + p).1],
                })
                .collect();
            async move { report(&mut c, app, shuffle, 1 << 20, parts).await }
        })
        .await?;
        let (get50, get99) = time(REPS, |i| {
            let mut c = c.clone();
            async move {
                let r = c
                    .get_shuffle_result(proto::GetShuffleResultRequest {
                        app_id: app.into(),
                        shuffle_id: shuffle,
                        partition_id: (i as u64 % PARTS) as i32,
                        block_id_layout: None,
                    })
                    .await?
                    .into_inner();
                ok("getShuffleResult", r.status, &r.ret_msg)
            }
        })
        .await?;
        by_blocks.push(vec![b as f64, rep50, rep99, get50, get99]);
    }
    // Partitions per request: one shuffle of 10k partitions x 100 ids.
    let parts_total = (10_000 / opts.shrink).max(1);
    let shuffle = per_partition.len() as i32;
    register(&mut c, app, shuffle, parts_total as usize).await?;
    let ids = Ids::new(parts_total, parts_total * 100);
    ids.report_range(&mut c, app, shuffle, 0, parts_total * 100)
        .await?;
    let mut by_parts = Vec::new();
    for n in sizes(opts, &[1, 10, 100, 1_000, 10_000], &[]) {
        let n = n.min(parts_total);
        let reps = if n >= 1_000 { 40 } else { REPS };
        let (m50, m99) = time(reps, |i| {
            let mut c = c.clone();
            let first = (i as u64 * n) % parts_total;
            let partitions = (0..n).map(|k| ((first + k) % parts_total) as i32).collect();
            async move {
                let r = c
                    .get_shuffle_result_for_multi_part(proto::GetShuffleResultForMultiPartRequest {
                        app_id: app.into(),
                        shuffle_id: shuffle,
                        partitions,
                        block_id_layout: None,
                    })
                    .await?
                    .into_inner();
                ok("getShuffleResultForMultiPart", r.status, &r.ret_msg)
            }
        })
        .await?;
        by_parts.push(vec![n as f64, m50, m99, m50 / n as f64 * 1e3]);
    }
    point.stop().await;
    Ok(vec![
        Curve {
            name: "latency-blocks",
            title: format!("Block-id calls against blocks per partition ({PARTS} partitions)"),
            columns: [
                "blocks per partition",
                "report p50 ms",
                "report p99 ms",
                "getShuffleResult p50 ms",
                "getShuffleResult p99 ms",
            ]
            .map(String::from)
            .to_vec(),
            rows: by_blocks,
            plots: vec![("", "ms", vec![1, 2, 3, 4])],
        },
        Curve {
            name: "latency-multipart",
            title: "getShuffleResultForMultiPart against partitions per request (100 ids each)"
                .into(),
            columns: [
                "partitions per request",
                "p50 ms",
                "p99 ms",
                "p50 us per partition",
            ]
            .map(String::from)
            .to_vec(),
            rows: by_parts,
            plots: vec![
                ("", "ms", vec![1, 2]),
                ("-per-partition", "us per partition", vec![3]),
            ],
        },
    ])
}
