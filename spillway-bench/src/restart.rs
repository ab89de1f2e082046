//! `spillway-bench restart`: how long a restart keeps clients waiting, with a given amount of
//! acknowledged data in memory. It writes the shuffle without `finishShuffle` (so the data is
//! only in memory), restarts the server (SIGTERM then a new start, or `--takeover`), probes
//! the gRPC port every 2 ms meanwhile, then reads everything back and verifies it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::process::Command;

use super::driver::{self, Target};
use super::spawn::Spillway;
use super::Options;
use spillway::proto;

/// How the server is replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// SIGTERM, wait for the exit, start again.
    Sigterm,
    /// Start the new process with `--takeover` while the old one runs.
    Takeover,
}

/// What one restart cost.
#[derive(Debug)]
pub struct RestartReport {
    /// Payload bytes in memory when the restart began.
    pub bytes_in_memory: u64,
    /// From the signal (or the new start) until the old process exited.
    pub old_exit: Duration,
    /// From the signal (or the new start) until the new process answered a request.
    pub unserved: Duration,
    /// Connection attempts refused meanwhile (probe every 2 ms).
    pub refused: u64,
    /// From the first to the last refused attempt (zero when none was refused).
    pub refused_window: Duration,
    /// Blocks read back and verified after the restart.
    pub verified_blocks: u64,
    /// True when every block came back intact.
    pub ok: bool,
}

impl std::fmt::Display for RestartReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "in memory at restart : {:.2} GiB",
            self.bytes_in_memory as f64 / (1u64 << 30) as f64
        )?;
        writeln!(f, "old process exited   : {} ms", self.old_exit.as_millis())?;
        writeln!(f, "requests unserved    : {} ms", self.unserved.as_millis())?;
        writeln!(
            f,
            "refused connections  : {} over {} ms",
            self.refused,
            self.refused_window.as_millis()
        )?;
        writeln!(
            f,
            "verified after       : {} blocks, {}",
            self.verified_blocks,
            if self.ok {
                "all intact"
            } else {
                "LOST OR CORRUPT BLOCKS"
            }
        )
    }
}

async fn answers(target: &Target) -> bool {
    let Ok(ch) = super::client::channel(target.grpc).await else {
        return false;
    };
    let mut c = proto::shuffle_server_client::ShuffleServerClient::new(ch);
    let req = proto::AppHeartBeatRequest {
        app_id: "restart-probe".into(),
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(5), c.app_heartbeat(req)).await,
        Ok(Ok(_))
    )
}

/// Runs one measurement; `opts` as for `run` (a server is always spawned).
pub async fn measure(opts: &Options, mode: Mode) -> anyhow::Result<RestartReport> {
    anyhow::ensure!(
        opts.addr.is_none(),
        "restart spawns its own server: drop --addr"
    );
    let (shape, payloads) = opts.shape()?;
    let mut server = Spillway::start(opts).await?;
    let target = server.target;
    let w = opts.workload(
        shape,
        format!("spillway_bench_restart_{}", std::process::id()),
    );
    driver::write(&target, &w, &payloads).await?;

    let refused = Arc::new(AtomicU64::new(0));
    let first_last = Arc::new(parking_lot::Mutex::new(None::<(Instant, Instant)>));
    let probing = Arc::new(AtomicBool::new(true));
    let prober = {
        let (refused, first_last, probing) = (
            Arc::clone(&refused),
            Arc::clone(&first_last),
            Arc::clone(&probing),
        );
        tokio::spawn(async move {
            while probing.load(Ordering::Relaxed) {
                if let Err(e) = tokio::net::TcpStream::connect(target.grpc).await {
                    if e.kind() == std::io::ErrorKind::ConnectionRefused {
                        refused.fetch_add(1, Ordering::Relaxed);
                        let now = Instant::now();
                        let mut fl = first_last.lock();
                        *fl = Some(fl.map_or((now, now), |(a, _)| (a, now)));
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let start = Instant::now();
    let (bin, config) = (server.bin.clone(), server.config.clone());
    let new_child = |takeover: bool| {
        let mut cmd = Command::new(&bin);
        cmd.arg("--config").arg(&config);
        if takeover {
            cmd.arg("--takeover");
        }
        cmd.env(
            "RUST_LOG",
            std::env::var("SPILLWAY_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
    };
    let (new, old_exit) = match mode {
        Mode::Sigterm => {
            let pid = server.pid as i32;
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
            server.child_mut().wait().await?;
            let old_exit = start.elapsed();
            (new_child(false)?, old_exit)
        }
        Mode::Takeover => {
            let new = new_child(true)?;
            server.child_mut().wait().await?;
            (new, start.elapsed())
        }
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !answers(&target).await {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the new server did not answer within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let unserved = start.elapsed();
    probing.store(false, Ordering::Relaxed);
    let _ = prober.await;
    let (_, verification) = driver::read_verify(&target, &w, &payloads).await?;
    let _ = driver::cleanup(&target, &w).await;
    let mut new = new;
    if let Some(pid) = new.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), new.wait()).await;
    server.stop().await;
    let refused_window = first_last.lock().map_or(Duration::ZERO, |(a, b)| b - a);
    Ok(RestartReport {
        bytes_in_memory: shape.total_bytes(),
        old_exit,
        unserved,
        refused: refused.load(Ordering::Relaxed),
        refused_window,
        verified_blocks: verification.blocks,
        ok: verification.ok(),
    })
}
