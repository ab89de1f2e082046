//! A coordinator-only `spillway` child process (`role = "coordinator"`) on loopback ephemeral
//! ports, with its own config, audit log and log file, so its CPU and RSS are its own.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::process::{Child, Command};

/// A running coordinator process.
pub struct CoordinatorChild {
    child: Child,
    /// Its pid.
    pub pid: u32,
    /// Its gRPC address (`CoordinatorServer`).
    pub grpc: SocketAddr,
    /// Its HTTP port: REST API, dashboard, metrics.
    pub http: SocketAddr,
    /// When the process was spawned.
    pub spawned: Instant,
    /// When both ports first accepted a connection.
    pub listening: Instant,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl CoordinatorChild {
    /// Writes `<dir>/<name>.toml` and starts `bin` on it; returns once gRPC and HTTP accept
    /// connections. The coordinator keeps Java's defaults (30 s server timeout, 60 s app
    /// timeout, 9 servers per shuffle, 10 s dashboard samples, the RPC audit log on).
    pub async fn start(bin: &Path, dir: &Path, name: &str) -> anyhow::Result<CoordinatorChild> {
        anyhow::ensure!(
            bin.exists(),
            "no server binary at {} (build it with `cargo build --release`, or pass --server-bin)",
            bin.display()
        );
        std::fs::create_dir_all(dir)?;
        let (grpc, http) = (free_port()?, free_port()?);
        let audit = dir.join(format!("{name}-rpc-audit.log"));
        let config = format!(
            "role = \"coordinator\"\n\
             grpc_port = {grpc}\n\
             bind_ip = \"127.0.0.1\"\nworker_ip = \"127.0.0.1\"\n\
             [metrics]\nhttp_port = {http}\n\
             [audit]\ncoordinator_rpc_log_path = {audit:?}\n"
        );
        let config_path = dir.join(format!("{name}.toml"));
        std::fs::write(&config_path, config)?;
        let log = std::fs::File::create(dir.join(format!("{name}.log")))?;
        let spawned = Instant::now();
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(&config_path)
            .env(
                "RUST_LOG",
                std::env::var("SPILLWAY_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .env_remove("SPILLWAY_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child.id().context("coordinator pid")?;
        let grpc = SocketAddr::from(([127, 0, 0, 1], grpc));
        let http = SocketAddr::from(([127, 0, 0, 1], http));
        let deadline = spawned + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "{} exited during start-up: {status} (log: {})",
                    bin.display(),
                    dir.join(format!("{name}.log")).display()
                );
            }
            if tokio::net::TcpStream::connect(grpc).await.is_ok()
                && tokio::net::TcpStream::connect(http).await.is_ok()
            {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill().await;
                bail!("the coordinator did not listen on {grpc} within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(CoordinatorChild {
            child,
            pid,
            grpc,
            http,
            spawned,
            listening: Instant::now(),
        })
    }

    /// SIGKILL, as a crashed host or an OOM kill ends a coordinator; returns when it is gone.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGTERM, waiting up to 10 s before killing.
    pub async fn stop(mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// The `spillway` binary: `explicit`, else next to this one.
pub fn server_bin(explicit: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    Ok(match explicit {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .with_file_name("spillway")
            .with_extension(std::env::consts::EXE_EXTENSION),
    })
}
