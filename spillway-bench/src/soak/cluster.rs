//! The soak's cluster: three `spillway` child processes on 127.0.0.1, the first two embedding
//! the coordinator, every server heartbeating both. Each server has two data paths (as root: a
//! small tmpfs, and a loop-mounted ext4 that can be frozen and removed, see `disks.rs`, so a
//! disk can be filled; plain directories otherwise).
//!
//! One task owns the [`Cluster`] (the fault task); what others need to read while it restarts
//! processes (the current pid, whether the process is up, how many times it was SIGKILLed) is
//! in [`Shared`] atomics, so no lock is ever held while a process starts or stops.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::process::{Child, Command};

use super::disks::LoopDisk;

/// Servers in the cluster, and how many of them embed a coordinator.
pub const SERVERS: usize = 3;
/// The first `COORDINATORS` servers run `[coordinator] enabled`.
pub const COORDINATORS: usize = 2;
/// Data paths per server: two, so a filled disk has somewhere to fail over to.
pub const PATHS: usize = 2;
/// The data path that is a loop-mounted ext4 (as root): the last, so the recovery journal,
/// which prefers the first writable path, is not on the disk that is frozen and removed.
pub const LOOP_PATH: usize = PATHS - 1;

/// What the workload, the sampler and the report read about one server while the fault task
/// replaces its process.
#[derive(Debug)]
pub struct NodeState {
    /// gRPC address (fixed for the run: the server id and its files are named after it).
    pub grpc: SocketAddr,
    /// HTTP metrics port.
    pub http: u16,
    /// Netty data-plane port (on the same addresses as gRPC).
    pub netty: u16,
    /// Pid of the process serving now; 0 while none is.
    pub pid: AtomicU32,
    /// False between stopping a process and the new one answering.
    pub up: AtomicBool,
    /// SIGKILLs so far: an app that saw this change before its finishShuffle returned is not
    /// covered by the durability guarantee (its memory may be gone).
    pub kills: AtomicU64,
    /// Apps that had files on a disk of this server when it was removed: their blocks there
    /// are legitimately gone (per server, as app ids are only unique to one server's files).
    pub gone: parking_lot::Mutex<std::collections::HashSet<String>>,
    /// True while a disk of this server is being removed and `gone` is not complete yet: a
    /// read that finds blocks missing waits for it before it is judged.
    pub removing: AtomicBool,
}

/// State shared with the workload and the sampler.
#[derive(Debug)]
pub struct Shared {
    /// Per server.
    pub nodes: Vec<NodeState>,
    /// The soak's start; every time in the report counts from it.
    pub t0: Instant,
    /// Where the apps reach the servers: 127.0.0.1, or in the soak's own network namespace
    /// [`CLIENT_IP`](super::netns::CLIENT_IP), so client traffic can be stalled alone.
    pub client_ip: IpAddr,
}

impl Shared {
    /// Seconds since the start.
    pub fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Server `i`'s gRPC address as the apps use it.
    pub fn client_grpc(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.client_ip, self.nodes[i].grpc.port())
    }

    /// Server `i`'s Netty address as the apps use it.
    pub fn client_netty(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.client_ip, self.nodes[i].netty)
    }
}

/// A tmpfs mounted for the run; unmounted (lazily, so a process still holding a file cannot
/// keep it) when dropped, also on an error or Ctrl-C.
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, size: u64) -> anyhow::Result<Tmpfs> {
        std::fs::create_dir_all(dir)?;
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size}"))
            .arg("tmpfs")
            .arg(dir)
            .status()
            .context("running mount")?;
        anyhow::ensure!(
            status.success(),
            "mount tmpfs on {}: {status}",
            dir.display()
        );
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}

/// One server: its config, log and current process.
pub struct Node {
    /// Its data paths.
    pub data_paths: Vec<PathBuf>,
    config: PathBuf,
    log: PathBuf,
    bin: PathBuf,
    child: Option<Child>,
}

/// The running cluster. Dropping it kills every server (`kill_on_drop`) and then unmounts the
/// tmpfs mounts (fields drop in order).
pub struct Cluster {
    /// The servers.
    pub nodes: Vec<Node>,
    /// What other tasks read.
    pub shared: Arc<Shared>,
    _mounts: Vec<Tmpfs>,
    /// Per server, its loop-mounted data path (empty without root).
    pub loop_disks: Vec<LoopDisk>,
    root: PathBuf,
    keep_root: bool,
}

/// How the cluster is laid out.
pub struct Layout {
    /// The server binary.
    pub bin: PathBuf,
    /// Where config files, data paths and logs go.
    pub root: PathBuf,
    /// Keep `root` at the end (it is `--out`'s work dir).
    pub keep_root: bool,
    /// Size of each data path (a tmpfs, and the loop disk's ext4); `None`: plain directories.
    pub tmpfs: Option<u64>,
    /// `memory_store.capacity` of every server.
    pub capacity: u64,
    /// The soak runs in its own network namespace: the servers listen on all of its
    /// addresses and the apps use [`CLIENT_IP`](super::netns::CLIENT_IP).
    pub netns: bool,
    /// `MEMORY_LOCALFILE_HDFS` with a small cold threshold, for apps that register a remote
    /// storage (HDFS or S3); `false`: `MEMORY_LOCALFILE`.
    pub remote: bool,
    /// s3a conf items every server gets in `[hdfs_store.hadoop_conf]` (the Java server's
    /// `rss.server.hadoop.fs.s3a.*`); empty without S3.
    pub s3_conf: Vec<(String, String)>,
}

/// `[hdfs_store]` of a soak with a remote tier. A generator app's partition is 8–320 KiB, so a
/// 64 KiB cold threshold sends about half of the remote apps' spill batches to HDFS or S3 (64
/// MiB, the default, would send none). The 10 s write timeout bounds an append that hangs
/// while the NameNode restarts or the S3 store is frozen, well inside the apps'
/// `--app-timeout`; after a failure the tier rests 5 s.
const HDFS_STORE: &str = "[hdfs_store]\ncold_storage_threshold_size = \"64K\"\n\
     write_timeout = \"10s\"\nfailure_cooldown = \"5s\"\n";

/// [`HDFS_STORE`] with the s3a conf items as `[hdfs_store.hadoop_conf]`.
fn remote_store(s3_conf: &[(String, String)]) -> String {
    let mut toml = HDFS_STORE.to_owned();
    if !s3_conf.is_empty() {
        toml.push_str("[hdfs_store.hadoop_conf]\n");
        for (k, v) in s3_conf {
            toml.push_str(&format!("{k:?} = {v:?}\n"));
        }
    }
    toml
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Cluster {
    /// Writes the configs, mounts the data paths and starts every server.
    pub async fn start(layout: &Layout) -> anyhow::Result<Cluster> {
        anyhow::ensure!(
            layout.bin.exists(),
            "no server binary at {} (build it with `cargo build --release`, or pass --server-bin)",
            layout.bin.display()
        );
        std::fs::create_dir_all(&layout.root)?;
        let mut ports = Vec::new();
        for _ in 0..SERVERS {
            ports.push((free_port()?, free_port()?));
        }
        let mut netty_ports = Vec::new();
        for _ in 0..SERVERS {
            netty_ports.push(free_port()?);
        }
        // Outside an own namespace, listening on every address would expose the servers on
        // the host's network.
        let bind_ip = if layout.netns { "0.0.0.0" } else { "127.0.0.1" };
        let quorum: Vec<String> = ports[..COORDINATORS]
            .iter()
            .map(|(g, _)| format!("\"127.0.0.1:{g}\""))
            .collect();
        let mut mounts = Vec::new();
        let mut loop_disks = Vec::new();
        let mut nodes = Vec::new();
        let mut states = Vec::new();
        for (idx, (grpc, http)) in ports.iter().copied().enumerate() {
            let dir = layout.root.join(format!("server{idx}"));
            let mut data_paths = Vec::new();
            for p in 0..PATHS {
                let path = dir.join(format!("disk{p}"));
                match layout.tmpfs {
                    Some(size) if p == LOOP_PATH => loop_disks.push(LoopDisk::mount(&path, size)?),
                    Some(size) => mounts.push(Tmpfs::mount(&path, size)?),
                    None => std::fs::create_dir_all(&path)?,
                }
                data_paths.push(path);
            }
            let coordinator = idx < COORDINATORS;
            // Heartbeats every second, so a restarted server is assignable again quickly and a
            // stopped coordinator is noticed within the soak's short fault windows.
            // A spill stuck on a frozen disk past 5 s fails over to the other disk (the default
            // 60 s would outlast every freeze), and disks are probed every 2 s, so a removed or
            // thawed disk changes state within a fault's hold.
            let config = format!(
                "store_type = \"{store_type}\"\n\
                 grpc_port = {grpc}\nnetty_port = {netty}\n\
                 bind_ip = \"{bind_ip}\"\nworker_ip = \"127.0.0.1\"\n\
                 coordinator_quorum = [{quorum}]\nheartbeat_interval = \"1s\"\n\
                 [memory_store]\ncapacity = \"{cap}B\"\n\
                 [localfile_store]\ndata_paths = {paths:?}\n\
                 write_timeout = \"5s\"\ndisk_health_check_interval = \"2s\"\n\
                 [metrics]\nhttp_port = {http}\n\
                 [coordinator]\nenabled = {coordinator}\nregister_self = false\n{hdfs}",
                store_type = if layout.remote {
                    "MEMORY_LOCALFILE_HDFS"
                } else {
                    "MEMORY_LOCALFILE"
                },
                hdfs = if layout.remote {
                    remote_store(&layout.s3_conf)
                } else {
                    String::new()
                },
                quorum = quorum.join(", "),
                cap = layout.capacity,
                paths = data_paths,
                netty = netty_ports[idx],
            );
            let config_path = dir.join("spillway.toml");
            std::fs::write(&config_path, config)?;
            nodes.push(Node {
                data_paths,
                config: config_path,
                log: layout.root.join(format!("server{idx}.log")),
                bin: layout.bin.clone(),
                child: None,
            });
            states.push(NodeState {
                grpc: SocketAddr::from(([127, 0, 0, 1], grpc)),
                http,
                netty: netty_ports[idx],
                pid: AtomicU32::new(0),
                up: AtomicBool::new(false),
                kills: AtomicU64::new(0),
                gone: Default::default(),
                removing: AtomicBool::new(false),
            });
        }
        let mut cluster = Cluster {
            nodes,
            shared: Arc::new(Shared {
                nodes: states,
                t0: Instant::now(),
                client_ip: if layout.netns {
                    super::netns::CLIENT_IP
                } else {
                    IpAddr::from([127, 0, 0, 1])
                },
            }),
            _mounts: mounts,
            loop_disks,
            root: layout.root.clone(),
            keep_root: layout.keep_root,
        };
        for i in 0..SERVERS {
            cluster.start_node(i, false).await?;
        }
        Ok(cluster)
    }

    fn spawn(&self, i: usize, takeover: bool) -> anyhow::Result<Child> {
        let node = &self.nodes[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)?;
        let mut cmd = Command::new(&node.bin);
        cmd.arg("--config").arg(&node.config);
        if takeover {
            cmd.arg("--takeover");
        }
        cmd.env(
            "RUST_LOG",
            std::env::var("SPILLWAY_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true);
        cmd.spawn()
            .with_context(|| format!("starting {}", node.bin.display()))
    }

    /// Starts server `i` (with `--takeover` while the old process still runs) and waits until
    /// it answers on gRPC.
    pub async fn start_node(&mut self, i: usize, takeover: bool) -> anyhow::Result<()> {
        let mut child = self.spawn(i, takeover)?;
        let state = &self.shared.nodes[i];
        let pid = child.id().context("server pid")?;
        if takeover {
            // The old process drains, spills and exits on the new one's SIGTERM.
            if let Some(mut old) = self.nodes[i].child.take() {
                let _ = tokio::time::timeout(Duration::from_secs(150), old.wait()).await;
                let _ = old.kill().await;
            }
        }
        state.up.store(false, Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait()? {
                bail!("server {i} exited during start-up: {status}");
            }
            if tokio::net::TcpStream::connect(state.grpc).await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill().await;
                bail!("server {i} did not listen on {} within 60 s", state.grpc);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        state.pid.store(pid, Ordering::Relaxed);
        state.up.store(true, Ordering::Relaxed);
        self.nodes[i].child = Some(child);
        Ok(())
    }

    /// Stops server `i` with `signal` and waits for the exit (a SIGTERM'd server that has
    /// not drained within 150 s is killed, and that is an error of the soak).
    pub async fn stop_node(
        &mut self,
        i: usize,
        signal: nix::sys::signal::Signal,
    ) -> anyhow::Result<()> {
        let state = &self.shared.nodes[i];
        let Some(mut child) = self.nodes[i].child.take() else {
            return Ok(());
        };
        state.up.store(false, Ordering::Relaxed);
        if signal == nix::sys::signal::Signal::SIGKILL {
            state.kills.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(pid) = child.id() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
        }
        let waited = tokio::time::timeout(Duration::from_secs(150), child.wait()).await;
        state.pid.store(0, Ordering::Relaxed);
        if waited.is_err() {
            let _ = child.kill().await;
            bail!("server {i} did not exit within 150 s of {signal}");
        }
        Ok(())
    }

    /// Stops every server with SIGTERM (their final spill runs, as in production).
    pub async fn stop_all(&mut self) {
        for i in 0..self.nodes.len() {
            if let Err(e) = self.stop_node(i, nix::sys::signal::Signal::SIGTERM).await {
                eprintln!("spillway-bench soak: {e:#}");
            }
        }
    }

    /// The server logs, for the panic scan.
    pub fn logs(&self) -> Vec<PathBuf> {
        self.nodes.iter().map(|n| n.log.clone()).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Children first (kill_on_drop), so the lazy unmounts free the memory at once; then
        // the mounts, so the directories below are plain directories again and can go (a
        // mount point cannot be removed while mounted).
        self.nodes.clear();
        self.loop_disks.clear();
        self._mounts.clear();
        if !self.keep_root {
            for n in 0..SERVERS {
                let _ = std::fs::remove_dir_all(self.root.join(format!("server{n}")));
            }
        }
    }
}
