//! `spillway-bench soak`: a cluster of three `spillway` processes under a continuous stream of
//! generator apps while seeded faults fire, sampled every second, judged at the end.
//!
//! ```text
//!  cluster (3 servers, 2 embed a coordinator, all heartbeat both; data paths: a tmpfs and a
//!           loop-mounted ext4 each)
//!    ▲ apps: register (coordinator assignment / round-robin), write 4–16 KiB blocks,
//!    │       report+commit, finishShuffle, read + verify, unregister or keep
//!    │       (half over the Netty data plane, half over gRPC)
//!    ▲ apps with HDFS remote storage (MiniDFS, MEMORY_LOCALFILE_HDFS), read back from HDFS
//!    ▲ apps with S3 remote storage (an `s3a://` bucket on moto's S3 server), read back from it
//!    ▲ Spark jobs (tests/spark, replica 3/2/2), one at a time, checked against vanilla Spark
//!    ▲ faults: SIGKILL / SIGTERM restart, --takeover, disk fill, coordinator stop,
//!    │         disk freeze, disk removal, NameNode restart, S3 store frozen, client
//!    │         network stall (own network namespace only, see `netns`, `netstall`)
//!    ▲ sampler: RSS, fds, threads, used/allocated buffer, tickets, journal bytes (1/s)
//!  report: app counts, fault log, per-server table with slopes, SVG plots, CSV
//! ```
//!
//! **What counts as lost.** The server's guarantee (docs/reliability.md "What survives a restart") covers
//! blocks it acknowledged as durable: after `finishShuffle` returned SUCCESS every block is in
//! a file and survives SIGTERM, `--takeover` and SIGKILL. Blocks only acknowledged to
//! `sendShuffleData` are in memory and a SIGKILL loses them by design; their ids stay reported,
//! so a reader notices, and Spark retries. So:
//! - an app whose server was SIGKILLed between its registration and its `finishShuffle`
//!   answer, or whose calls failed before that answer (a restart, a coordinator stop, a
//!   network stall, a full disk past the app's timeout), is **failed and retried**: run again under a new app id,
//!   as a Spark task is, never counted as lost;
//! - a block is **lost** when it belongs to an app whose `finishShuffle` succeeded (with no
//!   SIGKILL of its server since it registered) and a read that completes does not return it,
//!   or its id is missing from the result bitmap;
//! - a block is **corrupt** when a read returns other bytes, a wrong CRC or an id never
//!   written, in any state (another app's bytes included: payloads depend on the app id);
//! - a block of an app that had files on a disk when the disk was removed is **gone with a
//!   removed disk** when a read does not return it (or fails): its only copy went with the
//!   disk. It is counted apart and is not a failure; every other app must stay whole.
//!
//! HDFS apps follow the same rules: a batch whose HDFS append fails (the NameNode down) must
//! go to local files or stay in memory, so `finishShuffle` SUCCESS still means durable. A
//! completed read of an HDFS app that misses blocks (none corrupt) is read again within the
//! same 120 s before they count as lost: a file pair whose append failed reads shorter until
//! its lease is recovered, and the Java client's block-id check fails that reduce task, which
//! Spark retries. S3 apps follow the same rules: a flush the frozen store does not take goes
//! to local files, and the apps read their objects back as the client's s3a does. Spark jobs
//! count the same way (`spark.rs`): a job that threw is failed and
//! retried, a result other than vanilla Spark's is a failure.
//!
//! Reads of durable apps that fail (the server restarting) are retried for up to 120 s; a
//! durable app that could not be read at all in that time is **unreadable**, a failure too.
//! A share of the apps (`--keep`) stays registered after its verification and is read again
//! when it leaves the kept set and at the end, so data is checked across later restarts.
//!
//! The run fails on a lost, corrupt or unreadable block, a fault that could not be applied
//! (a server that did not come back), "panicked" in a server's log, a slope above its bound,
//! no app verified at all, or a server whose write memory, tickets, apps or blocking calls are
//! not back to zero once every app is gone (`--settle`); with HDFS, also when HDFS received no byte; with
//! Spark, on a wrong result, a failed vanilla baseline, or no job succeeding.

mod cluster;
mod disk_faults;
mod disks;
mod faults;
mod hdfs;
mod minidfs;
pub mod netns;
mod netstall;
mod remote_read;
mod report;
mod report_hdfs;
mod s3;
mod sampler;
mod schedule;
mod spark;
mod workload;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use self::remote_read::RemoteReader;
use self::report::Bound;
use self::sampler::Resource;
use spillway::config::ByteSize;

fn seconds(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("not a duration: {s:?}"))?;
    let mul = match unit.trim() {
        "ms" => 0.001,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => return Err(format!("unknown unit {u:?} in {s:?} (ms, s, m, h)")),
    };
    Ok(n * mul)
}

/// Whether this process runs as root (mounting tmpfs needs it); read from `/proc/self/status`
/// so no extra `nix` feature is needed.
fn effective_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Uid:"))?;
            // Real, effective, saved, filesystem: the effective one decides.
            line.split_whitespace().nth(2).map(|e| e == "0")
        })
        .unwrap_or(false)
}

/// Options of a soak (`spillway-bench soak --help`).
#[derive(Debug, Clone, clap::Args)]
pub struct SoakOptions {
    /// How long apps are started for ("300", "5m", "1h").
    #[arg(long, default_value = "5m", value_parser = seconds)]
    pub duration: f64,
    /// Seed of the fault schedule and the apps' shapes.
    #[arg(long, default_value_t = 24)]
    pub seed: u64,
    /// Mean time between faults.
    #[arg(long, default_value = "20s", value_parser = seconds)]
    pub fault_interval: f64,
    /// How long a disk stays full and a coordinator stays stopped.
    #[arg(long, default_value = "10s", value_parser = seconds)]
    pub fault_hold: f64,
    /// New apps per second.
    #[arg(long, default_value_t = 2.0)]
    pub rate: f64,
    /// Apps running at once at most (a new one waits for a slot).
    #[arg(long, default_value_t = 16)]
    pub max_apps: usize,
    /// Share of apps kept registered after verification, for a later re-read.
    #[arg(long, default_value_t = 0.25)]
    pub keep: f64,
    /// Kept apps at most; the oldest is re-read and unregistered beyond it.
    #[arg(long, default_value_t = 48)]
    pub keep_max: usize,
    /// An app attempt not durable within this long is failed (and retried).
    #[arg(long, default_value = "60s", value_parser = seconds)]
    pub app_timeout: f64,
    /// `memory_store.capacity` of every server (small, so spills happen).
    #[arg(long, default_value = "32M")]
    pub capacity: ByteSize,
    /// Size of each data path (two per server: a tmpfs and a loop-mounted ext4).
    #[arg(long, default_value = "128M")]
    pub disk_size: ByteSize,
    /// Plain directories instead of mounts (no root needed; no disk fills, freezes or
    /// removals).
    #[arg(long)]
    pub no_tmpfs: bool,
    /// Run in a network namespace of the soak's own (the default as root), where client
    /// network stalls can be applied without touching the host's network.
    #[arg(long, conflicts_with = "no_netns")]
    pub netns: bool,
    /// Share the host's network namespace (servers on 127.0.0.1; no network stalls).
    #[arg(long)]
    pub no_netns: bool,
    /// Set by [`netns::enter`] once this process is in its own namespace.
    #[arg(skip)]
    pub own_netns: bool,
    /// Where the report, CSV, plots, server configs and logs go.
    #[arg(long, default_value = "soak-out")]
    pub out: PathBuf,
    /// The `spillway` binary (default: next to this one).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// Largest RSS growth per hour accepted over the slope window.
    #[arg(long, default_value = "64M")]
    pub max_rss_slope: ByteSize,
    /// Largest growth of open fds per hour.
    #[arg(long, default_value_t = 100.0)]
    pub max_fd_slope: f64,
    /// Largest growth per hour of the threads outside the tokio runtime (the journal's, the
    /// audit writers', the allocator's: fixed by design, so any steady growth is a leak). The
    /// runtime's own threads are shown and not judged: its blocking pool keeps as many threads
    /// as calls ran at once while the load lasts (`spillway::runtime`), a high-water mark whose
    /// steps read as growth in a half-hour window; a call that never returns is judged instead,
    /// by `--max-blocking-slope` and by the settle check.
    #[arg(long, default_value_t = 4.0)]
    pub max_other_thread_slope: f64,
    /// Largest growth per hour of blocking calls queued or running (`tokio_blocking_tasks`).
    #[arg(long, default_value_t = 10.0)]
    pub max_blocking_slope: f64,
    /// Shortest slope window judged against the bounds (shorter ones are reported only).
    #[arg(long, default_value = "10m", value_parser = seconds)]
    pub min_slope_window: f64,
    /// Left out of the slope window after every (re)start. A fresh server's blocking pool
    /// grows from ~12 to ~23 threads over its first 50-65 s under the soak's load (measured in
    /// a 60-minute run), then stays flat; with a 30 s warm-up that ramp, repeated at every
    /// restart, read as +16 threads/h on a server restarted every ~100 s.
    #[arg(long, default_value = "120s", value_parser = seconds)]
    pub slope_warmup: f64,
    /// Processes that lived less than this are left out of the slope window: a fresh
    /// process's RSS climbs to its working set over its first 3-5 minutes under the soak's load
    /// (jemalloc's arenas touching their huge pages; measured in a 60-minute run), and a
    /// process restarted soon after adds only that climb. The last server is never restarted
    /// (`schedule::LONG_LIVED`), so it is always judged over the whole window.
    #[arg(long, default_value = "10m", value_parser = seconds)]
    pub min_process_life: f64,
    /// Start nothing: judge the slopes of the run in `--out` again (see [`rejudge`]).
    #[arg(long)]
    pub rejudge: bool,
    /// After the last app, how long every server may take to be back to zero write memory,
    /// tickets, apps and blocking calls (apps whose cleanup failed expire after the server's
    /// 60 s).
    #[arg(long, default_value = "100s", value_parser = seconds)]
    pub settle: f64,
    /// No MiniDFS: `MEMORY_LOCALFILE` servers, no HDFS apps, no NameNode restarts (for a
    /// machine without Java). Without it a missing launcher or Java fails the soak.
    #[arg(long)]
    pub no_hdfs: bool,
    /// The MiniHdfs launcher's Maven project (default: this checkout's `tests/hdfs`).
    #[arg(long)]
    pub hdfs_launcher: Option<PathBuf>,
    /// Share of the generator apps (seeded) that register the MiniDFS as remote storage.
    #[arg(long, default_value_t = 0.5)]
    pub hdfs_share: f64,
    /// No S3 server: no apps on object storage, no store freezes. Without it a S3 server that
    /// cannot start (`tests/s3/install.sh` needs Python 3 and PyPI) fails the soak.
    #[arg(long)]
    pub no_s3: bool,
    /// Share of the generator apps (seeded) that register an `s3a://` bucket as remote
    /// storage; with `--hdfs-share` at most 1 (the rest use local disks only).
    #[arg(long, default_value_t = 0.25)]
    pub s3_share: f64,
    /// Run Spark jobs and fail when the harness's jars are missing (by default they run
    /// when `tests/spark/target/uniffle-0.9.2` is built: `tests/spark/run.sh --build-only`).
    #[arg(long, conflicts_with = "no_spark")]
    pub spark_jobs: bool,
    /// No Spark jobs.
    #[arg(long)]
    pub no_spark: bool,
    /// The Spark harness (default: this checkout's `tests/spark`).
    #[arg(long)]
    pub spark_harness: Option<PathBuf>,
    /// `SparkJobs` jobs run in turn, one at a time.
    #[arg(long, default_value = "sort,empty_partitions", value_delimiter = ',')]
    pub spark_job: Vec<String>,
    /// `-Xmx` of each Spark JVM.
    #[arg(long, default_value = "768m")]
    pub spark_heap: String,
}

/// The result: the markdown report and whether the soak passed.
pub struct Outcome {
    /// The report (also written to `<out>/report.md`).
    pub report: String,
    /// True when nothing failed.
    pub ok: bool,
}

/// Runs the soak; Ctrl-C stops it early (servers killed, mounts removed) with an error.
pub async fn run(opts: &SoakOptions) -> anyhow::Result<Outcome> {
    let ctrl_c = CancellationToken::new();
    let watcher = {
        let c = ctrl_c.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                c.cancel();
            }
        })
    };
    let r = if opts.rejudge {
        rejudge(opts)
    } else {
        soak(opts, ctrl_c).await
    };
    watcher.abort();
    r
}

async fn soak(opts: &SoakOptions, ctrl_c: CancellationToken) -> anyhow::Result<Outcome> {
    anyhow::ensure!(opts.duration >= 20.0, "--duration must be at least 20 s");
    anyhow::ensure!(opts.rate > 0.0, "--rate must be > 0");
    anyhow::ensure!((0.0..=1.0).contains(&opts.keep), "--keep must be in [0, 1]");
    let bin = match &opts.server_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .with_file_name("spillway")
            .with_extension(std::env::consts::EXE_EXTENSION),
    };
    anyhow::ensure!(
        (0.0..=1.0).contains(&opts.hdfs_share),
        "--hdfs-share must be in [0, 1]"
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&opts.s3_share) && opts.hdfs_share + opts.s3_share <= 1.0,
        "--s3-share must be in [0, 1], and --hdfs-share + --s3-share at most 1"
    );
    let spark_cp = if opts.no_spark {
        None
    } else {
        let harness = opts
            .spark_harness
            .clone()
            .unwrap_or_else(spark::default_harness);
        match spark::classpath(&harness) {
            Some(cp) => Some(cp),
            None if opts.spark_jobs => anyhow::bail!(
                "--spark-jobs: the Spark harness is not built at {}/target/uniffle-{} (run \
                 `bash tests/spark/run.sh --build-only`, or pass --no-spark)",
                harness.display(),
                spark::CLIENT_VERSION
            ),
            None => {
                eprintln!(
                    "spillway-bench soak: no Spark jobs: the harness is not built at {}/target/uniffle-{} (`bash tests/spark/run.sh --build-only`)",
                    harness.display(),
                    spark::CLIENT_VERSION
                );
                None
            }
        }
    };
    let tmpfs = !opts.no_tmpfs;
    if tmpfs {
        anyhow::ensure!(
            effective_root(),
            "tmpfs data paths need root (mount); run as root or pass --no-tmpfs"
        );
    }
    std::fs::create_dir_all(&opts.out)?;
    let out = opts.out.canonicalize()?;
    let plan = schedule::schedule(
        opts.seed,
        opts.duration,
        opts.fault_interval,
        opts.fault_hold,
        schedule::Parts {
            disks: tmpfs,
            net: opts.own_netns,
            hdfs: !opts.no_hdfs,
            s3: !opts.no_s3,
        },
    );
    if opts.own_netns {
        netstall::probe().await?;
    } else {
        eprintln!(
            "spillway-bench soak: not in a network namespace of its own (--no-netns or not root): no client network stalls"
        );
    }
    eprintln!(
        "spillway-bench soak: seed {}, {} s, {} faults planned, output in {}",
        opts.seed,
        opts.duration,
        plan.len(),
        out.display()
    );
    for f in &plan {
        eprintln!(
            "spillway-bench soak:   planned t={:.1}s server{} {:?}",
            f.at, f.node, f.kind
        );
    }
    // HDFS first: the servers' HDFS clients connect lazily, but the apps need its URL.
    let mut dfs = if opts.no_hdfs {
        None
    } else {
        let launcher = opts
            .hdfs_launcher
            .clone()
            .unwrap_or_else(minidfs::default_launcher);
        let dfs = minidfs::MiniDfs::start(&launcher, &out.join("minidfs")).await?;
        eprintln!("spillway-bench soak: MiniDFS at {}", dfs.url);
        Some(dfs)
    };
    let s3 = if opts.no_s3 {
        None
    } else {
        let s3 = s3::SoakS3::start().await?;
        eprintln!("spillway-bench soak: S3 server at {}", s3.endpoint());
        Some(s3)
    };
    let mut cluster = cluster::Cluster::start(&cluster::Layout {
        bin,
        root: out.join("cluster"),
        keep_root: false,
        tmpfs: tmpfs.then_some(opts.disk_size.0),
        capacity: opts.capacity.0,
        netns: opts.own_netns,
        remote: dfs.is_some() || s3.is_some(),
        s3_conf: s3.as_ref().map(|s| s.conf()).unwrap_or_default(),
    })
    .await?;
    let shared = Arc::clone(&cluster.shared);
    let logs = cluster.logs();
    let data_paths: Vec<Vec<PathBuf>> =
        cluster.nodes.iter().map(|n| n.data_paths.clone()).collect();

    let stop_sampler = CancellationToken::new();
    let sampler = tokio::spawn(sampler::run(
        Arc::clone(&shared),
        data_paths,
        stop_sampler.clone(),
    ));
    let gen = workload::Generator::new(
        Arc::clone(&shared),
        opts.keep,
        opts.keep_max,
        Duration::from_secs_f64(opts.app_timeout),
    );
    let mut remotes = Vec::new();
    if let Some(dfs) = &dfs {
        remotes.push(workload::RemoteApps {
            reader: RemoteReader::Hdfs(remote_read::HdfsReader::new(&dfs.url, "/soak")?),
            share: opts.hdfs_share,
        });
    }
    if let Some(s3) = &s3 {
        remotes.push(workload::RemoteApps {
            reader: RemoteReader::S3(s3.reader()?),
            // After HDFS's share of the one draw, also when the soak runs without HDFS.
            share: opts.s3_share + if dfs.is_none() { opts.hdfs_share } else { 0.0 },
        });
    }
    gen.use_remotes(remotes);
    let stop_hdfs_stats = CancellationToken::new();
    let bucket = s3.as_ref().map(|s| s.bucket());
    let hdfs_stats = (dfs.is_some() || s3.is_some()).then(|| {
        tokio::spawn(hdfs::poll(
            Arc::clone(&shared),
            bucket,
            stop_hdfs_stats.clone(),
        ))
    });
    let spark_counts = Arc::new(spark::Counts::default());
    let spark_problems = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let spark_task = spark_cp.map(|classpath| {
        let jobs = Arc::new(spark::Jobs {
            classpath,
            jobs: opts.spark_job.clone(),
            dir: out.join("spark"),
            heap: opts.spark_heap.clone(),
            remote_storage: dfs.as_ref().map(|d| format!("{}/soak-spark", d.url)),
        });
        tokio::spawn(spark::run(
            jobs,
            Arc::clone(&shared),
            opts.duration,
            Arc::clone(&spark_counts),
            Arc::clone(&spark_problems),
            ctrl_c.child_token(),
        ))
    });
    let stop_beats = CancellationToken::new();
    let beats = tokio::spawn(Arc::clone(&gen).heartbeats(stop_beats.clone()));

    // Apps are started on their own tasks while this task applies the faults, so the cluster
    // stays owned by one task.
    let stop_apps = ctrl_c.child_token();
    let apps = {
        let (gen, stop, seed, rate, max) = (
            Arc::clone(&gen),
            stop_apps.clone(),
            opts.seed,
            opts.rate,
            opts.max_apps.max(1),
        );
        let duration = opts.duration;
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(max));
            let mut set = tokio::task::JoinSet::new();
            let mut rng = schedule::Rng::new(seed ^ 0x5eed_a995);
            let mut n = 0u64;
            let gap = Duration::from_secs_f64(1.0 / rate);
            while shared.now() < duration && !stop.is_cancelled() {
                let permit = tokio::select! {
                    _ = stop.cancelled() => break,
                    p = Arc::clone(&slots).acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                };
                let app_rng = schedule::Rng::new(rng.next_u64());
                let g = Arc::clone(&gen);
                set.spawn(async move {
                    g.app(n, app_rng).await;
                    drop(permit);
                });
                n += 1;
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(gap) => {}
                }
                while set.try_join_next().is_some() {}
            }
            while set.join_next().await.is_some() {}
        })
    };
    let (fault_log, restarts, dfs_back) = faults::run(
        &mut cluster,
        dfs.take(),
        s3.as_ref().map(|s| s.server()),
        &plan,
        Duration::from_secs_f64(opts.fault_hold),
        ctrl_c.clone(),
    )
    .await;
    let _ = apps.await;
    let spark_result = match spark_task {
        Some(t) => Some(t.await.map_err(anyhow::Error::from).and_then(|r| r)),
        None => None,
    };
    anyhow::ensure!(!ctrl_c.is_cancelled(), "interrupted (Ctrl-C)");
    eprintln!(
        "spillway-bench soak: t={:.1}s apps done; re-reading kept apps",
        shared.now()
    );
    gen.reverify_all().await;
    stop_beats.cancel();
    let _ = beats.await;
    let settle = settle(&shared, Duration::from_secs_f64(opts.settle), &ctrl_c).await;
    stop_sampler.cancel();
    let series = sampler.await.context("sampler task")?;
    stop_hdfs_stats.cancel();
    let hdfs_written = match hdfs_stats {
        Some(t) => Some(t.await.context("HDFS stats task")?.totals()),
        None => None,
    };
    let run_secs = shared.now();
    cluster.stop_all().await;
    drop(cluster);
    drop(dfs_back);

    // Judge and write.
    let (resources_md, slope_failures) = judge_slopes(opts, &series, &restarts);
    let mut failures: Vec<String> = Vec::new();
    let c = &gen.counts;
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    if get(&c.lost) > 0 {
        failures.push(format!("{} lost blocks", get(&c.lost)));
    }
    if get(&c.corrupt) > 0 {
        failures.push(format!("{} corrupt blocks", get(&c.corrupt)));
    }
    if get(&c.unreadable) > 0 {
        failures.push(format!("{} durable apps unreadable", get(&c.unreadable)));
    }
    if get(&c.verified) == 0 {
        failures.push("no app was verified".into());
    }
    for f in fault_log.iter().filter(|f| f.failed) {
        failures.push(format!("fault failed: server{} {}", f.node, f.what));
    }
    for (node, log) in logs.iter().enumerate() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("panicked")) {
            failures.push(format!("server{node} panicked: {line}"));
        }
    }
    failures.extend(slope_failures);
    failures.extend(settle);
    let hdfs_section = hdfs_written.as_ref().filter(|_| !opts.no_hdfs).map(|w| {
        report_hdfs::section(
            w,
            &logs,
            get(&c.hdfs_apps),
            get(&c.blocks_from_hdfs),
            get(&c.hdfs_rereads),
            &fault_log,
            &mut failures,
        )
    });
    let s3_section = hdfs_written.as_ref().filter(|_| s3.is_some()).map(|w| {
        report_hdfs::s3_section(
            w,
            get(&c.s3_apps),
            get(&c.blocks_from_s3),
            get(&c.s3_rereads),
            &fault_log,
            &mut failures,
        )
    });
    drop(s3);
    let spark_section = spark_result.map(|r| {
        report_hdfs::spark_section(
            &spark_counts,
            r,
            &opts.spark_job,
            !opts.no_hdfs,
            &mut failures,
        )
    });

    let mut md = String::new();
    let _ = writeln!(
        md,
        "### Soak: seed {}, {:.0} s of apps ({:.0} s in all), {} faults, {}\n",
        opts.seed,
        opts.duration,
        run_secs,
        fault_log
            .iter()
            .filter(|f| !f.what.starts_with("disk fill removed"))
            .count(),
        if tmpfs {
            format!("data paths of {} (a tmpfs and a loop ext4)", opts.disk_size)
        } else {
            "plain data directories (no disk fills)".into()
        }
    );
    let _ = writeln!(
        md,
        "| apps started | verified | failed and retried | abandoned | via coordinator | coordinator fallbacks | blocks verified | lost | corrupt | unreadable | re-read later | gone with a removed disk |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    let _ = writeln!(
        md,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        get(&c.started),
        get(&c.verified),
        get(&c.failed_retried),
        get(&c.abandoned),
        get(&c.via_coordinator),
        get(&c.coordinator_fallbacks),
        get(&c.blocks_verified),
        get(&c.lost),
        get(&c.corrupt),
        get(&c.unreadable),
        get(&c.reverified),
        get(&c.gone),
    );
    let _ = writeln!(
        md,
        "\nData planes: {} apps over gRPC ({} verified), {} over Netty ({} verified). Network: {}.",
        get(&c.grpc_apps),
        get(&c.grpc_verified),
        get(&c.netty_apps),
        get(&c.netty_verified),
        if opts.own_netns {
            "the soak's own namespace, apps on 127.0.0.2 (client network stalls possible)"
        } else {
            "the host's loopback (no client network stalls)"
        }
    );
    for s in hdfs_section.iter().chain(&s3_section).chain(&spark_section) {
        md.push('\n');
        md.push_str(s);
    }
    report::fault_log(&mut md, &fault_log);
    md.push_str(&resources_md);
    let mut problems = gen.problems.lock().clone();
    problems.extend(spark_problems.lock().iter().cloned());
    if !problems.is_empty() {
        let _ = writeln!(md, "\n### First problems\n");
        for p in problems {
            let _ = writeln!(md, "- {p}");
        }
    }
    let _ = writeln!(
        md,
        "\n### Verdict: {}",
        if failures.is_empty() {
            "PASS".to_string()
        } else {
            format!("FAIL\n\n- {}", failures.join("\n- "))
        }
    );
    std::fs::write(out.join("report.md"), &md)?;
    std::fs::write(out.join("samples.csv"), report::csv(&series))?;
    std::fs::write(out.join("restarts.csv"), report::restarts_csv(&restarts))?;
    for (k, r) in Resource::ALL.iter().enumerate() {
        std::fs::write(
            out.join(format!("{}.svg", r.name())),
            report::plot(*r, k, &series, &restarts),
        )?;
    }
    Ok(Outcome {
        report: md,
        ok: failures.is_empty(),
    })
}

/// The "Resources" section of the report (per server: start, end, max and slope of every
/// resource) and the slopes over their bounds, from the samples and the restarts.
fn judge_slopes(
    opts: &SoakOptions,
    series: &sampler::Series,
    restarts: &[faults::Restart],
) -> (String, Vec<String>) {
    let bounds = [
        Bound {
            resource: Resource::Rss,
            per_hour: opts.max_rss_slope.0 as f64,
        },
        Bound {
            resource: Resource::Fds,
            per_hour: opts.max_fd_slope,
        },
        Bound {
            resource: Resource::OtherThreads,
            per_hour: opts.max_other_thread_slope,
        },
        Bound {
            resource: Resource::BlockingTasks,
            per_hour: opts.max_blocking_slope,
        },
    ];
    let rows = report::rows(
        series,
        restarts,
        opts.duration,
        report::Window {
            min_span: opts.min_slope_window,
            warmup: opts.slope_warmup,
            min_life: opts.min_process_life,
        },
        &bounds,
    );
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n### Resources\n\nSlope window: the last half of the run ({:.0} s to the last app's start at {:.0} s), cut at restarts, without {:.0} s of warm-up after each (`--slope-warmup`) and without processes that lived less than {:.0} s (`--min-process-life`); the slope is the one every process's segment shares. Judged against the bounds with at least {} samples covering {:.0} s (`--min-slope-window`). server{} is never restarted.",
        opts.duration / 2.0,
        opts.duration,
        opts.slope_warmup,
        opts.min_process_life,
        report::MIN_WINDOW_SAMPLES,
        opts.min_slope_window,
        schedule::LONG_LIVED
    );
    let mut failures = Vec::new();
    for (node, node_rows) in rows.iter().enumerate() {
        let n = restarts.iter().filter(|r| r.node == node).count();
        report::table(&mut md, node, n, node_rows);
        for r in node_rows {
            if let Some((b, true)) = r.bound {
                failures.push(format!(
                    "server{node} {} grows {:.1}/h over its window (bound {b:.1}/h)",
                    r.resource.name(),
                    r.slope.unwrap_or(0.0)
                ));
            }
        }
    }
    // A run long enough to judge a slope must judge the never-restarted server's: a verdict
    // with every slope "not judged" would pass a leak.
    let long_lived = rows
        .get(schedule::LONG_LIVED)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if opts.duration / 2.0 >= opts.min_slope_window
        && !long_lived.iter().any(|r| r.bound.is_some() && r.judged)
    {
        failures.push(format!(
            "server{}'s slopes could not be judged: it was restarted, or sampled too little",
            schedule::LONG_LIVED
        ));
    }
    (md, failures)
}

/// `--rejudge`: the slopes of an earlier run in `--out` (its `samples.csv` and `restarts.csv`)
/// judged again under this run's `--duration`, bounds and windows, into `rejudge.md`, without
/// starting anything. Only the slopes: every other verdict stays the run's own (`report.md`).
fn rejudge(opts: &SoakOptions) -> anyhow::Result<Outcome> {
    let read = |name: &str| {
        let path = opts.out.join(name);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    };
    let series = report::parse_csv(&read("samples.csv")?)?;
    let restarts = report::parse_restarts_csv(&read("restarts.csv")?)?;
    let (section, failures) = judge_slopes(opts, &series, &restarts);
    let mut md = format!(
        "### Slopes of {} judged again ({} samples, {} restarts)\n",
        opts.out.display(),
        series.per_node.iter().map(Vec::len).sum::<usize>(),
        restarts.len()
    );
    md.push_str(&section);
    let _ = writeln!(
        md,
        "\n### Slope verdict: {}",
        if failures.is_empty() {
            "PASS".to_string()
        } else {
            format!("FAIL\n\n- {}", failures.join("\n- "))
        }
    );
    std::fs::write(opts.out.join("rejudge.md"), &md)?;
    Ok(Outcome {
        report: md,
        ok: failures.is_empty(),
    })
}

/// Waits until every server reports zero write memory, tickets, apps and blocking calls; the
/// failures left when `limit` passes. This is where leaked reservations, buffers or app
/// records show, and blocking calls that never return (a read stuck on a removed disk).
async fn settle(
    shared: &cluster::Shared,
    limit: Duration,
    ctrl_c: &CancellationToken,
) -> Vec<String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap_or_default();
    let names = [
        "used_buffer_size",
        "allocated_buffer_size",
        "require_buffer_count",
        "app_num_with_node",
    ];
    let query = names
        .iter()
        .map(|n| format!("name[]={n}"))
        .collect::<Vec<_>>()
        .join("&");
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let mut left = Vec::new();
        for (i, node) in shared.nodes.iter().enumerate() {
            let server = sampler::server_metrics(&http, node.http, &query).await;
            let jvm = sampler::jvm_metrics(&http, node.http).await;
            let (Some(server), Some(jvm)) = (server, jvm) else {
                left.push(format!("server{i}: /metrics did not answer"));
                continue;
            };
            let values = sampler::gauges_of(&server, &names)
                .into_iter()
                .chain([sampler::runtime_values(Some(&jvm))[1]]);
            for (name, v) in names.iter().chain(&["tokio_blocking_tasks"]).zip(values) {
                match v {
                    Some(0.0) => {}
                    Some(v) => left.push(format!(
                        "server{i}: {name} = {v} with every app gone ({} s after the last)",
                        limit.as_secs()
                    )),
                    None => left.push(format!("server{i}: no {name} in /metrics")),
                }
            }
        }
        if left.is_empty() || tokio::time::Instant::now() >= deadline || ctrl_c.is_cancelled() {
            return left;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
