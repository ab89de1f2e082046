//! Child processes of a run: the server under test and the discard server. Each runs in its
//! own process so its CPU time and RSS are its own, not the load generator's.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

use super::driver::Target;
use super::Options;

/// A port that was free a moment ago (the child binds it right after).
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Sends SIGTERM and waits up to `grace` before killing.
async fn terminate(child: &mut Child, grace: Duration) {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// A `spillway` server started for this run, with its own config and data directory.
pub struct Spillway {
    child: Child,
    /// Its pid.
    pub pid: u32,
    /// Its addresses.
    pub target: Target,
    /// Its metrics/admin HTTP address (the curves read jemalloc's counters there).
    pub http: SocketAddr,
    /// Its data path.
    pub data_dir: PathBuf,
    /// Whether the run created the data dir (and removes it).
    owns_dir: bool,
    /// The binary and the config it runs with (a restart runs the same again).
    pub bin: PathBuf,
    /// The config file written for it.
    pub config: PathBuf,
    /// Its RPC audit log (one line per call with the server's own execution time), beside
    /// the config: not the shared default under /tmp/spillway.
    pub audit_log: PathBuf,
}

impl Spillway {
    /// Writes a config (loopback ports, no coordinator, `--capacity`, `--sync`, the data
    /// dir), starts the binary and waits until gRPC accepts connections.
    pub async fn start(opts: &Options) -> anyhow::Result<Spillway> {
        let bin = match &opts.server_bin {
            Some(b) => b.clone(),
            None => std::env::current_exe()?
                .with_file_name("spillway")
                .with_extension(std::env::consts::EXE_EXTENSION),
        };
        anyhow::ensure!(
            bin.exists(),
            "no server binary at {} (build it with `cargo build --release`, or pass --server-bin / --addr)",
            bin.display()
        );
        let (owns_dir, data_dir) = match &opts.data_dir {
            Some(d) => (false, d.clone()),
            None => (
                true,
                std::env::temp_dir().join(format!("spillway-bench-{}", std::process::id())),
            ),
        };
        let data = data_dir.join("data");
        std::fs::create_dir_all(&data)?;
        let (grpc, netty, http) = (free_port()?, free_port()?, free_port()?);
        // A gRPC run gets a gRPC-only server, as operators run one for GRPC clients: its
        // connection cap then has the whole open-files limit to itself.
        let netty = match opts.transport {
            super::client::Transport::Grpc => None,
            super::client::Transport::Netty => Some(netty),
        };
        let netty_port = netty.map_or(-1, i32::from);
        let audit_log = data_dir.join("rpc_audit.log");
        let config = format!(
            "store_type = \"MEMORY_LOCALFILE\"\n\
             grpc_port = {grpc}\nnetty_port = {netty_port}\n\
             bind_ip = \"127.0.0.1\"\nworker_ip = \"127.0.0.1\"\n\
             [memory_store]\ncapacity = \"{cap}B\"\n\
             [localfile_store]\ndata_paths = [{data:?}]\nsync_on_write = {sync}\n\
             [metrics]\nhttp_port = {http}\n\
             [audit]\nrpc_log_path = {audit_log:?}\n\
             [coordinator]\nenabled = false\n{quota}",
            cap = opts.capacity.0,
            sync = opts.sync,
            quota = opts.app_memory_share.map_or(String::new(), |s| format!(
                "[quota]\napp_memory_share = {s:?}\n"
            )),
        );
        let config_path = data_dir.join("spillway-bench.toml");
        std::fs::write(&config_path, config)?;
        let mut child = Command::new(&bin)
            .arg("--config")
            .arg(&config_path)
            .env(
                "RUST_LOG",
                std::env::var("SPILLWAY_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child.id().context("server pid")?;
        let target = Target {
            grpc: SocketAddr::from(([127, 0, 0, 1], grpc)),
            netty: netty.map(|port| SocketAddr::from(([127, 0, 0, 1], port))),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait()? {
                bail!("{} exited during start-up: {status}", bin.display());
            }
            if tokio::net::TcpStream::connect(target.grpc).await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                terminate(&mut child, Duration::from_secs(1)).await;
                bail!(
                    "{} did not listen on {} within 30 s",
                    bin.display(),
                    target.grpc
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Spillway {
            child,
            pid,
            target,
            http: SocketAddr::from(([127, 0, 0, 1], http)),
            data_dir: data,
            owns_dir,
            bin,
            config: config_path,
            audit_log,
        })
    }

    /// The server process (a restart measurement signals and replaces it).
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Stops the server and removes a data dir the run created.
    pub async fn stop(mut self) {
        terminate(&mut self.child, Duration::from_secs(30)).await;
        if self.owns_dir {
            if let Some(parent) = self.data_dir.parent() {
                let _ = std::fs::remove_dir_all(parent);
            }
        }
    }
}

/// The discard server, started as `<this binary> discard`.
pub struct Discard {
    child: Child,
    /// Its pid.
    pub pid: u32,
    /// Its addresses.
    pub target: Target,
}

impl Discard {
    /// Starts it on ephemeral ports and reads them from its first line of output.
    pub async fn start() -> anyhow::Result<Discard> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("discard")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting the discard server")?;
        let pid = child.id().context("discard pid")?;
        let stdout = child.stdout.take().context("discard stdout")?;
        let mut line = String::new();
        tokio::time::timeout(
            Duration::from_secs(30),
            tokio::io::BufReader::new(stdout).read_line(&mut line),
        )
        .await
        .context("discard server did not start within 30 s")??;
        let mut grpc = None;
        let mut netty = None;
        for kv in line.split_whitespace() {
            match kv.split_once('=') {
                Some(("grpc", a)) => grpc = a.parse().ok(),
                Some(("netty", a)) => netty = a.parse().ok(),
                _ => {}
            }
        }
        let grpc = grpc.with_context(|| format!("discard server said {line:?}"))?;
        Ok(Discard {
            child,
            pid,
            target: Target { grpc, netty },
        })
    }

    /// Stops it.
    pub async fn stop(mut self) {
        terminate(&mut self.child, Duration::from_secs(5)).await;
    }
}
