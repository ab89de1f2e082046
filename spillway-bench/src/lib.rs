//! `spillway-bench`, the load generator: writes a shuffle to any Uniffle-compatible server as
//! the Java client does, reads it back verifying every byte and CRC, and puts the figures next
//! to ceilings measured in the same run.
//!
//! ```text
//!  run ─┬─ transport ceiling: discard server (child process) ◀─ driver::write + read_raw
//!       ├─ storage ceiling:   disk::measure (raw sequential write/read in the data dir)
//!       └─ server:            spillway (child process) or --addr ◀─ driver::write, finish,
//!                             read_verify;  spillway::procstat: its CPU seconds and peak RSS
//! ```
//! Everything the report divides comes from the same run on the same machine, so the ratios
//! hold even when absolute figures move with the machine's load.

pub mod client;
pub mod coordinator_scale;
pub mod curves;
pub mod discard;
pub mod disk;
pub mod driver;
pub mod payload;
mod report;
pub mod restart;
pub mod skew_records;
pub mod soak;
mod spawn;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

pub use self::client::Transport;
use self::driver::{Target, Workload};
use self::payload::{Payloads, Shape};
pub use self::report::Report;
use spillway::config::ByteSize;
use spillway::ids::BlockIdLayout;
use spillway::procstat::Proc;

/// How long after its apps end the server's RSS is read for [`Report::server_idle_rss`].
pub const IDLE_AFTER: Duration = Duration::from_secs(5);

/// Parallel streams of the storage ceiling: `hybrid_store.spill_concurrency`'s default.
const SPILL_STREAMS: usize = 8;

/// Options of a run (`spillway-bench run --help`).
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Plane carrying block data (control calls always use gRPC).
    #[arg(long, value_enum, default_value = "grpc")]
    pub transport: Transport,
    /// Map tasks.
    #[arg(long, default_value_t = 32)]
    pub maps: usize,
    /// Partitions.
    #[arg(long, default_value_t = 16)]
    pub partitions: usize,
    /// Payload bytes per block.
    #[arg(long, default_value = "256K")]
    pub block_size: ByteSize,
    /// Total payload bytes (rounded to whole blocks per map and partition).
    #[arg(long, default_value = "1G")]
    pub total: ByteSize,
    /// Map tasks writing at once (and partitions read at once).
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Bytes per send request (Java: `rss.client.send.size.limit`).
    #[arg(long, default_value = "4M")]
    pub request_size: ByteSize,
    /// Bytes per read request (Java: `rss.client.read.buffer.size`).
    #[arg(long, default_value = "14M")]
    pub read_size: ByteSize,
    /// First back-off after NO_BUFFER, in ms (doubles up to 32x while it repeats).
    #[arg(long, default_value_t = 10)]
    pub backoff_ms: u64,
    /// gRPC connections shared by the workers.
    #[arg(long, default_value_t = 2)]
    pub grpc_connections: usize,
    /// Call finishShuffle after writing (the whole shuffle is then read from files).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub finish: bool,
    /// An external server's gRPC address; without it a `spillway` child process is started.
    #[arg(long)]
    pub addr: Option<SocketAddr>,
    /// An external server's Netty address (for `--transport netty`).
    #[arg(long)]
    pub netty_addr: Option<SocketAddr>,
    /// An external server's pid, to report its CPU and RSS (local servers only).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// The server's data directory (the spawned server's, or an external one's): the
    /// storage ceiling is measured there and its files are evicted from the page cache
    /// before reading. Default for a spawned server: a fresh directory under the temp dir.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The `spillway` binary to start (default: next to this one).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// Memory capacity of a spawned server (`memory_store.capacity`).
    #[arg(long, default_value = "2G")]
    pub capacity: ByteSize,
    /// `localfile_store.sync_on_write` of a spawned server, and the storage ceiling's policy.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub sync: bool,
    /// Rounds against the same server (fresh app each); the report shows the last one, so
    /// `--rounds 2` measures a warmed-up server. Peak RSS covers all rounds.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Skip the transport and storage ceilings.
    #[arg(long)]
    pub no_ceilings: bool,
    /// `quota.app_memory_share` of a spawned server (default: its own, a fair share); `1`
    /// turns the memory share off.
    #[arg(long)]
    pub app_memory_share: Option<f64>,
}

impl Options {
    /// The shuffle these options describe, and the payload pool its blocks are cut from.
    pub fn shape(&self) -> anyhow::Result<(Shape, Arc<Payloads>)> {
        let block_size = usize::try_from(self.block_size.0).context("--block-size")?;
        anyhow::ensure!(block_size > 0, "--block-size must be > 0");
        let shape = Shape::for_total(
            self.total.0,
            self.maps.max(1),
            self.partitions.max(1),
            block_size,
            BlockIdLayout::DEFAULT,
        );
        Ok((shape, Arc::new(Payloads::new(block_size))))
    }

    /// The workload these options describe, writing `shape` as app `app`.
    pub fn workload(&self, shape: Shape, app: String) -> Workload {
        Workload {
            shape,
            app,
            shuffle: 0,
            request_bytes: self.request_size.0 as usize,
            concurrency: self.concurrency.max(1),
            grpc_connections: self.grpc_connections.max(1),
            read_size: self.read_size.0 as usize,
            backoff: Duration::from_millis(self.backoff_ms.max(1)),
            transport: self.transport,
            remote_storage: None,
        }
    }
}

/// Runs the server and the ceilings phase by phase and returns the report.
pub async fn run(opts: &Options) -> anyhow::Result<Report> {
    let (shape, payloads) = opts.shape()?;
    // Each Netty worker and each gRPC connection is a descriptor here; a shell's usual soft
    // limit of 1024 would fail thousands of them with EMFILE half-way through a run.
    let sockets = match opts.transport {
        Transport::Netty => opts.concurrency + opts.grpc_connections,
        Transport::Grpc => opts.grpc_connections,
    };
    let fits = spillway::limits::fit_open_files(sockets, 1);
    anyhow::ensure!(
        fits >= sockets,
        "{sockets} client sockets do not fit the open-files limit (raise `ulimit -n`)"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let workload = |tag: &str| {
        opts.workload(
            shape,
            format!("spillway_bench_{tag}_{now}_{}", std::process::id()),
        )
    };
    let mut report = Report::new(opts, &shape);

    // The server under test; its data dir is also where the storage ceiling runs.
    let (target, server, data_dir) = match opts.addr {
        Some(grpc) => (
            Target {
                grpc,
                netty: opts.netty_addr,
            },
            None,
            opts.data_dir.clone(),
        ),
        None => {
            let s = spawn::Spillway::start(opts).await?;
            let dir = Some(s.data_dir.clone());
            (s.target, Some(s), dir)
        }
    };
    let pid = server.as_ref().map(|s| s.pid).or(opts.server_pid);
    let proc = pid.and_then(Proc::new);
    let discard = match opts.no_ceilings {
        true => None,
        false => Some(spawn::Discard::start().await?),
    };
    let dproc = discard.as_ref().and_then(|d| Proc::new(d.pid));
    let dcpu = || dproc.and_then(|p| p.cpu_seconds());
    report.server_base_rss = proc.and_then(|p| p.rss()).map(|(rss, _)| rss);
    let sampler = proc.map(|p| p.sample_rss());
    let window_peak = || {
        let now = proc.and_then(|p| p.rss()).map_or(0, |(rss, _)| rss);
        sampler.as_ref().map(|s| s.take_peak().max(now))
    };
    let result = async {
        for round in 1..=opts.rounds.max(1) {
            // Earlier rounds warm the servers up (each round writes a new app); the report
            // keeps the last round. Every server phase runs right after the same phase
            // against the discard server, so both meet the same machine load.
            let w = workload(&format!("run{round}"));
            let wc = workload(&format!("ceiling{round}"));
            let mut ceiling_cpu = 0.0;
            if let Some(d) = &discard {
                let c0 = dcpu();
                report.ceiling_write = Some(driver::write(&d.target, &wc, &payloads).await?);
                ceiling_cpu += dcpu().zip(c0).map_or(0.0, |(b, a)| b - a);
            }
            let cpu0 = proc.and_then(|p| p.cpu_seconds());
            window_peak();
            let write = driver::write(&target, &w, &payloads).await?;
            let cpu_written = proc.and_then(|p| p.cpu_seconds());
            let finish = if opts.finish {
                Some(driver::finish(&target, &w).await?)
            } else {
                None
            };
            let cpu_finished = proc.and_then(|p| p.cpu_seconds());
            report.server_write_rss = window_peak();
            if let (Some(dir), Some(_)) = (&data_dir, &discard) {
                let (dir, bytes, read_size, sync) = (
                    dir.clone(),
                    shape.total_bytes(),
                    opts.read_size.0 as usize,
                    opts.sync,
                );
                // One synced write per partition's batch, as finishShuffle spills them, on as
                // many streams as the server spills at once (its default spill_concurrency).
                let chunk = shape.partition_bytes().clamp(1 << 20, 64 << 20) as usize;
                let streams = shape.partitions.min(SPILL_STREAMS);
                report.disk = Some(
                    tokio::task::spawn_blocking(move || {
                        disk::measure(&dir, bytes, streams, chunk, read_size, sync)
                    })
                    .await??,
                );
            }
            if let Some(dir) = &data_dir {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || disk::drop_cache_tree(&dir)).await?;
            }
            if let Some(d) = &discard {
                let c0 = dcpu();
                report.ceiling_read = Some(driver::read_raw(&d.target, &wc, &payloads).await?);
                ceiling_cpu += dcpu().zip(c0).map_or(0.0, |(b, a)| b - a);
                report.ceiling_cpu = dproc.map(|_| ceiling_cpu);
            }
            let cpu_read0 = proc.and_then(|p| p.cpu_seconds());
            window_peak();
            let (read, verification) = driver::read_verify(&target, &w, &payloads).await?;
            let cpu1 = proc.and_then(|p| p.cpu_seconds());
            report.server_read_rss = window_peak();
            driver::cleanup(&target, &w).await?;
            report.server_cpu_phases = match (cpu0, cpu_written, cpu_finished, cpu_read0, cpu1) {
                (Some(a), Some(b), Some(c), Some(d), Some(e)) => Some([b - a, c - b, e - d]),
                _ => None,
            };
            report.server_cpu = report.server_cpu_phases.map(|p| p.iter().sum());
            let failed = !verification.ok();
            report.write = Some(write);
            report.finish = finish;
            report.read = Some(read);
            report.verification = Some(verification);
            if failed {
                break;
            }
        }
        anyhow::Ok(())
    }
    .await;
    if result.is_ok() {
        tokio::time::sleep(IDLE_AFTER).await;
        report.server_idle_rss = proc.and_then(|p| p.rss()).map(|(rss, _)| rss);
    }
    report.server_peak_rss = match (&sampler, proc.and_then(|p| p.rss())) {
        // A spawned server's VmHWM is this run's peak; an external one's covers its life.
        (Some(s), Some((_, hwm))) if server.is_some() => Some(hwm.max(s.peak())),
        (Some(s), _) => Some(s.peak()),
        _ => None,
    };
    drop(sampler);
    if let Some(s) = server {
        s.stop().await;
    }
    if let Some(d) = discard {
        d.stop().await;
    }
    result?;
    Ok(report)
}

/// Serves the discard endpoints (the `discard` subcommand): prints
/// `grpc=<addr> netty=<addr>` on one line, then serves until killed.
pub async fn serve_discard(grpc_port: u16, netty_port: u16) -> anyhow::Result<()> {
    let ip = std::net::IpAddr::from([127, 0, 0, 1]);
    let (g, n, gl, nl) = discard::bind(ip, grpc_port, netty_port).await?;
    println!("grpc={g} netty={n}");
    discard::serve(gl, nl).await
}
