//! `spillway-bench coordinator-scale`: the coordinator at cluster scale (issue 32, item 3). A
//! real coordinator-only `spillway` process (`process.rs`) serves a simulated cluster
//! (`cluster.rs`): N servers heartbeating every 10 s with their disks and apps, 5 N apps
//! registered and heartbeating every 10 s, and 200 `getShuffleAssignments` a second, each
//! answer checked (`check.rs`).
//!
//! ```text
//!  per size   servers 250 → 2,000, apps 5 × servers: assignment p50/p99/p999, REST
//!             /api/server/nodes and dashboard fetch times, headless Chromium load of the
//!             dashboard, coordinator CPU % and RSS (VmRSS, VmHWM) → bytes per server+app, fit
//!  fail-over  two coordinators at the largest size, servers and apps heartbeat both,
//!             assignments go to the first; SIGKILL it → time to the second's first correct
//!             answer (warm standby)
//!  cold       a third coordinator started fresh → time until it answers a request that needs
//!             the last server of the heartbeat round (bounded by one interval)
//! ```
//!
//! A wrong answer fails the run (exit 1); no timing is ever a failure. `--shrink k` divides
//! the sizes and the times by `k` so a smoke test runs it in seconds.

mod check;
mod cluster;
mod process;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;

use self::cluster::{Cluster, NODES_MAX};
use self::process::CoordinatorChild;
use super::curves::Curve;
use spillway::procstat::Proc;
use spillway::proto::{self, coordinator_server_client::CoordinatorServerClient};

/// Headless Chromium, used when present.
const CHROMIUM: &str = "/usr/bin/chromium";

/// Options of `spillway-bench coordinator-scale`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScaleOptions {
    /// Simulated servers per size.
    #[arg(long, value_delimiter = ',', default_values_t = [250usize, 500, 1000, 2000])]
    pub servers: Vec<usize>,
    /// Apps per server (10,000 apps at 2,000 servers).
    #[arg(long, default_value_t = 5)]
    pub apps_per_server: usize,
    /// Seconds measured per size (after every server has heartbeated once).
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Server and app heartbeat interval, ms (Uniffle's default for both: 10 s).
    #[arg(long, default_value_t = 10_000)]
    pub heartbeat_ms: u64,
    /// `getShuffleAssignments` per second.
    #[arg(long, default_value_t = 200.0)]
    pub assign_rate: f64,
    /// Divide servers, apps, seconds and the heartbeat interval by this (`--shrink 50`: a
    /// smoke run of a few seconds).
    #[arg(long, default_value_t = 1)]
    pub shrink: usize,
    /// Skip the fail-over and cold-start measurements.
    #[arg(long)]
    pub no_failover: bool,
    /// Skip the headless Chromium load of the dashboard.
    #[arg(long)]
    pub no_chromium: bool,
    /// The `shuffle.nodes.max` every answer is checked against. The coordinators run with
    /// their default, 9; another value makes every answer wrong (the smoke test's proof that
    /// the check can fail).
    #[arg(long, default_value_t = NODES_MAX)]
    pub nodes_max: usize,
    /// Where the CSV and SVG files go (created).
    #[arg(long, default_value = "benches/curves")]
    pub out: PathBuf,
    /// The `spillway` binary to start (default: next to this one).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// Parent of the coordinators' config and log dirs (default: the temp dir).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

impl ScaleOptions {
    fn interval(&self) -> Duration {
        Duration::from_millis((self.heartbeat_ms / self.shrink as u64).max(50))
    }
    fn seconds(&self) -> Duration {
        Duration::from_secs_f64((self.seconds as f64 / self.shrink as f64).max(1.0))
    }
    fn sizes(&self) -> Vec<(usize, usize)> {
        self.servers
            .iter()
            .map(|n| (n / self.shrink).max(NODES_MAX + 3))
            .map(|n| (n, n * self.apps_per_server))
            .collect()
    }
}

/// One size's figures.
#[derive(Debug, Clone)]
struct Point {
    servers: usize,
    apps: usize,
    heartbeats_per_s: f64,
    assign_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
    rest_nodes_ms: f64,
    dashboard_ms: f64,
    dashboard_server_ms: f64,
    dashboard_app_ms: f64,
    dashboard_bytes: usize,
    /// Headless Chromium's load of the dashboard, and of an empty page (its own start-up).
    chromium_ms: Option<(f64, f64)>,
    cpu_pct: f64,
    rss: u64,
    hwm: u64,
    correct: u64,
}

/// The fail-over figures.
#[derive(Debug, Clone)]
struct Failover {
    servers: usize,
    warm_ms: f64,
    cold_listen_ms: f64,
    cold_ready_ms: f64,
}

/// Runs every size, then the fail-over; prints the tables and writes the files. Ok(false)
/// when an answer was wrong.
pub async fn run(opts: &ScaleOptions) -> anyhow::Result<bool> {
    anyhow::ensure!(opts.shrink >= 1, "--shrink must be ≥ 1");
    anyhow::ensure!(opts.assign_rate > 0.0, "--assign-rate must be > 0");
    let bin = process::server_bin(opts.server_bin.as_ref())?;
    let base = opts
        .data_dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("spillway-coordinator-scale-{}", std::process::id()));
    let outcome = measure_all(opts, &bin, &base).await;
    let _ = std::fs::remove_dir_all(&base);
    outcome
}

async fn measure_all(opts: &ScaleOptions, bin: &Path, base: &Path) -> anyhow::Result<bool> {
    let mut points = Vec::new();
    let mut ok = true;
    for (servers, apps) in opts.sizes() {
        eprintln!("coordinator-scale: {servers} servers, {apps} apps …");
        let (point, errors) = measure(opts, bin, base, servers, apps).await?;
        if !errors.is_empty() {
            ok = false;
            eprintln!("coordinator-scale: WRONG answers at {servers} servers:");
            for e in &errors {
                eprintln!("  {e}");
            }
        }
        points.push(point);
    }
    let failover = if opts.no_failover {
        None
    } else {
        let (servers, apps) = *opts.sizes().last().context("no size given")?;
        eprintln!("coordinator-scale: fail-over at {servers} servers, {apps} apps …");
        let (f, errors) = failover(opts, bin, base, servers, apps).await?;
        if !errors.is_empty() {
            ok = false;
            eprintln!("coordinator-scale: WRONG answers in the fail-over:");
            for e in &errors {
                eprintln!("  {e}");
            }
        }
        Some(f)
    };
    let curve = table(&points);
    println!("{}", curve.markdown());
    println!("{}", fit(&points));
    if let Some(f) = &failover {
        println!(
            "fail-over at {} servers: warm standby answers correctly {:.0} ms after SIGKILL of \
             the first coordinator; a cold coordinator listens {:.0} ms after spawn and answers \
             a request needing the whole heartbeat round {:.0} ms after spawn (interval {} ms)",
            f.servers,
            f.warm_ms,
            f.cold_listen_ms,
            f.cold_ready_ms,
            opts.interval().as_millis()
        );
    }
    curve.write(&opts.out)?;
    if let Some(f) = &failover {
        std::fs::write(
            opts.out.join("coordinator-failover.csv"),
            format!(
                "servers,warm_failover_ms,cold_listen_ms,cold_ready_ms\n{},{},{},{}\n",
                f.servers, f.warm_ms, f.cold_listen_ms, f.cold_ready_ms
            ),
        )?;
    }
    println!(
        "assignments: {}",
        if ok {
            "all correct"
        } else {
            "WRONG answers (see stderr)"
        }
    );
    Ok(ok)
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `GET url` and checks it answers 200; (ms, body length, body).
async fn fetch(client: &reqwest::Client, url: &str) -> anyhow::Result<(f64, String)> {
    let t = Instant::now();
    let resp = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    anyhow::ensure!(resp.status().is_success(), "GET {url}: {}", resp.status());
    let body = resp.text().await?;
    Ok((t.elapsed().as_secs_f64() * 1000.0, body))
}

/// Waits until the coordinator's REST API lists `servers` live servers (every server has
/// heartbeated it once).
async fn wait_known(
    client: &reqwest::Client,
    http: std::net::SocketAddr,
    servers: usize,
    within: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let (_, body) = fetch(client, &format!("http://{http}/api/server/nodes")).await?;
        let v: serde_json::Value = serde_json::from_str(&body)?;
        let n = v["data"].as_array().map_or(0, Vec::len);
        if n == servers {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the coordinator knows {n} of {servers} servers after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One size: a fresh coordinator and cluster, a warm-up round, then the measured window.
async fn measure(
    opts: &ScaleOptions,
    bin: &Path,
    base: &Path,
    servers: usize,
    apps: usize,
) -> anyhow::Result<(Point, Vec<String>)> {
    let interval = opts.interval();
    let cluster = Cluster::new(servers, apps, interval, opts.nodes_max).await?;
    let coord =
        CoordinatorChild::start(bin, &base.join(format!("n{servers}")), "coordinator").await?;
    let http = coord.http;
    let proc_ = Proc::new(coord.pid).context("reading the coordinator's /proc")?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    cluster.add_target(coord.grpc)?;
    cluster.register_apps(coord.grpc).await?;
    cluster.start_beats();
    wait_known(
        &client,
        http,
        servers,
        interval * 3 + Duration::from_secs(5),
    )
    .await?;
    cluster.start_assignments(opts.assign_rate);
    // Warm-up: a full heartbeat round with assignments running, so every server has sent the
    // apps assigned to it and the dashboard has samples; then the window.
    tokio::time::sleep(interval).await;
    let _ = cluster.take_stats();
    let beats0 = cluster.beats.load(std::sync::atomic::Ordering::Relaxed);
    let cpu0 = proc_.cpu_seconds().unwrap_or(0.0);
    let t0 = Instant::now();
    let window = opts.seconds();
    let probe_every = (window / 6).max(Duration::from_millis(500));
    let (mut nodes_ms, mut dash_ms) = (Vec::new(), Vec::new());
    let mut dash_bytes = 0;
    while t0.elapsed() + probe_every / 2 < window {
        tokio::time::sleep(probe_every / 2).await;
        let (t, body) = fetch(&client, &format!("http://{http}/api/server/nodes")).await?;
        let v: serde_json::Value = serde_json::from_str(&body)?;
        let listed: std::collections::HashSet<&str> = v["data"]
            .as_array()
            .map(|a| a.iter().filter_map(|n| n["id"].as_str()).collect())
            .unwrap_or_default();
        if listed.len() != servers {
            let missing: Vec<&str> = cluster
                .servers
                .iter()
                .map(|s| s.id.as_str())
                .filter(|id| !listed.contains(id))
                .take(5)
                .collect();
            anyhow::bail!(
                "/api/server/nodes listed {} of {servers} servers (missing {missing:?}; {} \
                 heartbeat(s) failed)",
                listed.len(),
                cluster
                    .beat_failures
                    .load(std::sync::atomic::Ordering::Relaxed)
            );
        }
        nodes_ms.push(t);
        // The first page, as an operator opens it: it counts every server and lists the
        // first hundred by id.
        let (t, body) = fetch(&client, &format!("http://{http}/dashboard")).await?;
        anyhow::ensure!(
            body.contains(&format!("Servers ({servers})")),
            "the dashboard does not count all {servers} servers"
        );
        dash_bytes = body.len();
        dash_ms.push(t);
        tokio::time::sleep(probe_every / 2).await;
    }
    if let Some(left) = window.checked_sub(t0.elapsed()) {
        tokio::time::sleep(left).await;
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let stats = cluster.take_stats();
    let cpu = proc_.cpu_seconds().unwrap_or(0.0) - cpu0;
    let beats = cluster.beats.load(std::sync::atomic::Ordering::Relaxed) - beats0;
    let (rss, hwm) = proc_.rss().unwrap_or((0, 0));
    // The pages of one server and one app (outside the window: the cluster keeps beating).
    let mut server_ms = Vec::new();
    let mut app_ms = Vec::new();
    for k in 0..3 {
        let s = &cluster.servers[(k * 7919) % servers];
        let (t, body) = fetch(&client, &format!("http://{http}/dashboard/server/{}", s.id)).await?;
        anyhow::ensure!(body.contains(&s.id), "server page without its id");
        server_ms.push(t);
        let app = &cluster.apps[(k * 7919) % apps];
        let (t, _) = fetch(&client, &format!("http://{http}/dashboard/app/{app}")).await?;
        app_ms.push(t);
    }
    let chromium_ms = if opts.no_chromium || !Path::new(CHROMIUM).exists() {
        None
    } else {
        // The servers' last page (100 rows a page, like every other page but a partial last
        // one), which must show the server last by id.
        let url = format!(
            "http://{http}/dashboard?server_page={}",
            servers.div_ceil(100)
        );
        let profile = base.join(format!("chromium-{servers}"));
        let last = cluster
            .servers
            .iter()
            .map(|s| s.id.clone())
            .max()
            .context("no server")?;
        // The browser's own start-up, on a page with nothing in it, is the baseline.
        let blank = base.join(format!("chromium-blank-{servers}"));
        Some(
            tokio::task::spawn_blocking(move || -> anyhow::Result<(f64, f64)> {
                let empty = chromium("data:text/html,<p>empty</p>", &blank, "empty")?;
                Ok((chromium(&url, &profile, &last)?, empty))
            })
            .await
            .context("chromium task")??,
        )
    };
    let mut errors = stats.errors.clone();
    if stats.correct == 0 {
        errors.push("no correct assignment in the window".into());
    }
    if stats.unanswered > 0 {
        errors.push(format!("{} assignment(s) unanswered", stats.unanswered));
    }
    let point = Point {
        servers,
        apps,
        heartbeats_per_s: beats as f64 / elapsed,
        assign_per_s: stats.latency.len() as f64 / elapsed,
        p50_ms: ms(&stats.latency, 0.5),
        p99_ms: ms(&stats.latency, 0.99),
        p999_ms: ms(&stats.latency, 0.999),
        max_ms: stats.latency.max() as f64 / 1000.0,
        rest_nodes_ms: median(&mut nodes_ms),
        dashboard_ms: median(&mut dash_ms),
        dashboard_server_ms: median(&mut server_ms),
        dashboard_app_ms: median(&mut app_ms),
        dashboard_bytes: dash_bytes,
        chromium_ms,
        cpu_pct: cpu / elapsed * 100.0,
        rss,
        hwm,
        correct: stats.correct,
    };
    eprintln!("  {point:?}");
    cluster.stop();
    coord.stop().await;
    Ok((point, errors))
}

/// Headless Chromium's wall time to load and render `url` (`--dump-dom`), as
/// `tests/dashboard.rs` drives it; checks the DOM shows `expect`.
fn chromium(url: &str, profile: &Path, expect: &str) -> anyhow::Result<f64> {
    std::fs::create_dir_all(profile)?;
    let t = Instant::now();
    let out = std::process::Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdin(std::process::Stdio::null())
        .output()
        .context("running chromium")?;
    let took = t.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        dom.contains(expect),
        "chromium's DOM does not show {expect}"
    );
    let _ = std::fs::remove_dir_all(profile);
    Ok(took)
}

/// The fail-over of a pair at full size, then a cold coordinator.
async fn failover(
    opts: &ScaleOptions,
    bin: &Path,
    base: &Path,
    servers: usize,
    apps: usize,
) -> anyhow::Result<(Failover, Vec<String>)> {
    let interval = opts.interval();
    let dir = base.join("failover");
    let cluster = Cluster::new(servers, apps, interval, opts.nodes_max).await?;
    let first = CoordinatorChild::start(bin, &dir, "first").await?;
    let second = CoordinatorChild::start(bin, &dir, "second").await?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    for c in [&first, &second] {
        cluster.add_target(c.grpc)?;
        cluster.register_apps(c.grpc).await?;
    }
    cluster.start_beats();
    for c in [&first, &second] {
        wait_known(
            &client,
            c.http,
            servers,
            interval * 3 + Duration::from_secs(5),
        )
        .await?;
    }
    cluster.start_assignments(opts.assign_rate);
    tokio::time::sleep(interval.min(Duration::from_secs(5))).await;
    // A slow build on a busy machine may not have answered within one interval yet: wait for
    // a first correct answer (bounded), so the fail-over starts from a working pair.
    let started = Instant::now();
    while cluster.correct_so_far() == 0 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = cluster.take_stats();
    let mut errors = before.errors.clone();
    anyhow::ensure!(
        before.correct > 0,
        "no correct assignment before the fail-over"
    );

    // Warm: SIGKILL the first; the client's next requests find it gone and ask the second.
    let (first_addr, second_addr) = (first.grpc, second.grpc);
    let killed_at = Instant::now();
    cluster.watch_first_ok(second_addr, killed_at);
    first.kill().await;
    let warm = wait_first_ok(&cluster, killed_at, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = cluster.take_stats();
    errors.extend(after.errors.clone());
    let warm_ms = warm
        .map(|t| t.duration_since(killed_at).as_secs_f64() * 1000.0)
        .context("the second coordinator never answered correctly after the fail-over")?;
    eprintln!(
        "  warm fail-over: {warm_ms:.1} ms; after it: {} correct, {} wrong, p99 {:.2} ms",
        after.correct,
        after.wrong,
        ms(&after.latency, 0.99)
    );

    // Cold: a third coordinator; the dead first leaves the quorum (an operator would replace
    // it). Servers and apps heartbeat it from their next beat; the probe needs the servers
    // whose beats come last in the round.
    cluster.remove_target(first_addr);
    let cold = CoordinatorChild::start(bin, &dir, "cold").await?;
    let from = cluster.add_target(cold.grpc)?;
    let tags = vec!["ss_v5".to_owned(), "GRPC".to_owned()];
    let last = cluster.last_to_beat(from, NODES_MAX, &tags);
    let all: Vec<String> = cluster.servers.iter().map(|s| s.id.clone()).collect();
    let req = proto::GetShuffleServerRequest {
        application_id: "application_cold_probe_0001".into(),
        shuffle_id: 0,
        partition_num: 200,
        partition_num_per_range: 1,
        data_replica: 1,
        require_tags: tags,
        assignment_shuffle_server_number: -1,
        estimate_task_concurrency: 200,
        faulty_server_ids: all.into_iter().filter(|id| !last.contains(id)).collect(),
        ..Default::default()
    };
    let probe = CoordinatorServerClient::new(
        tonic::transport::Endpoint::from_shared(format!("http://{}", cold.grpc))?
            .timeout(Duration::from_secs(5))
            .connect_lazy(),
    );
    let deadline = Instant::now() + interval * 3 + Duration::from_secs(5);
    let ready = loop {
        let mut c = probe.clone();
        if let Ok(resp) = c.get_shuffle_assignments(req.clone()).await {
            let resp = resp.into_inner();
            let known = &cluster.known;
            if let Ok(used) = check::check(&req, &resp, known, NODES_MAX) {
                if used.len() == last.len() {
                    break Some(Instant::now());
                }
            }
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let cold_ready = ready.context("the cold coordinator never answered the probe correctly")?;
    let f = Failover {
        servers,
        warm_ms,
        cold_listen_ms: cold.listening.duration_since(cold.spawned).as_secs_f64() * 1000.0,
        cold_ready_ms: cold_ready.duration_since(cold.spawned).as_secs_f64() * 1000.0,
    };
    cluster.stop();
    let _ = tokio::join!(second.stop(), cold.stop());
    if after.correct == 0 {
        errors.push("no correct assignment after the fail-over".into());
    }
    Ok((f, errors))
}

async fn wait_first_ok(cluster: &Cluster, since: Instant, within: Duration) -> Option<Instant> {
    while since.elapsed() < within {
        if let Some(t) = cluster.first_ok() {
            return Some(t);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

/// The per-size table (and its plots).
fn table(points: &[Point]) -> Curve {
    let columns = [
        "servers",
        "apps",
        "heartbeats/s",
        "assignments/s",
        "assign p50 ms",
        "assign p99 ms",
        "assign p999 ms",
        "assign max ms",
        "REST nodes ms",
        "dashboard ms",
        "dashboard server ms",
        "dashboard app ms",
        "dashboard KiB",
        "chromium ms",
        "chromium empty page ms",
        "CPU %",
        "RSS MiB",
        "HWM MiB",
        "B per server+app",
        "answers checked",
    ];
    let rows = points
        .iter()
        .map(|p| {
            vec![
                p.servers as f64,
                p.apps as f64,
                (p.heartbeats_per_s * 10.0).round() / 10.0,
                (p.assign_per_s * 10.0).round() / 10.0,
                p.p50_ms,
                p.p99_ms,
                p.p999_ms,
                p.max_ms,
                (p.rest_nodes_ms * 10.0).round() / 10.0,
                (p.dashboard_ms * 10.0).round() / 10.0,
                (p.dashboard_server_ms * 10.0).round() / 10.0,
                (p.dashboard_app_ms * 10.0).round() / 10.0,
                (p.dashboard_bytes / 1024) as f64,
                p.chromium_ms.map_or(f64::NAN, |c| c.0.round()),
                p.chromium_ms.map_or(f64::NAN, |c| c.1.round()),
                (p.cpu_pct * 10.0).round() / 10.0,
                (p.rss as f64 / (1 << 20) as f64).round(),
                (p.hwm as f64 / (1 << 20) as f64).round(),
                (p.rss as f64 / (p.servers + p.apps) as f64).round(),
                p.correct as f64,
            ]
        })
        .collect();
    Curve {
        name: "coordinator-scale",
        title: "The coordinator at cluster scale (200 assignments/s, heartbeats every 10 s)".into(),
        columns: columns.iter().map(|s| s.to_string()).collect(),
        rows,
        plots: vec![
            ("-latency", "ms", vec![4, 5, 6, 8, 9]),
            ("-memory", "MiB", vec![16, 17]),
        ],
    }
}

/// Least squares of RSS against servers + apps: the slope is the bytes each adds, the
/// intercept the fixed cost; R² near 1 means linear.
fn fit(points: &[Point]) -> String {
    let xs: Vec<f64> = points.iter().map(|p| (p.servers + p.apps) as f64).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.rss as f64).collect();
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return "RSS fit: needs two sizes".into();
    }
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let ss_res: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (y - (intercept + slope * x)).powi(2))
        .sum();
    let ss_tot: f64 = ys.iter().map(|y| (y - my).powi(2)).sum();
    format!(
        "RSS fit: {:.1} MiB + {:.0} B × (servers + apps), R² = {:.4}",
        intercept / (1 << 20) as f64,
        slope,
        1.0 - ss_res / ss_tot.max(1.0)
    )
}
