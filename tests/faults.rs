//! The fault suite: the real binary on real file systems, over gRPC and the Netty plane.
//!
//! Each case starts `spillway` as a child process with two data paths, writes a shuffle the
//! way map tasks do (requireBuffer, send, report, commit; a map whose calls failed is retried,
//! as Spark retries a task), injects one fault in the middle, reads every partition back
//! (result bitmap, memory, index, data) and checks every block's bytes. It prints one row per
//! case:
//!
//! ```text
//! case  transport  acked  intact  lost  excluded  peak_rss_mib  outcome
//! ```
//!
//! `lost` must be 0. `excluded` counts blocks the documented guarantee does not cover: after
//! SIGKILL, acknowledged blocks that were still only in memory; after a data path is deleted,
//! the blocks that were on it. The faults are real: a tmpfs that fills up, a file system
//! remounted read-only, an ext4 loop file system frozen with `fsfreeze` (writes hang), a data
//! path deleted, SIGTERM, SIGKILL and an upgrade by `--takeover`. Mounting needs root, which
//! CI has; the suite fails (never skips) without it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use spillway::codec::bitmap;
use spillway::ids::BlockIdLayout;
use spillway::proto;
use spillway::store::index::IndexEntry;
use spillway_bench::client::{channel, Client, Latencies, Transport};
use spillway_bench::payload::{app_key, Payloads, Shape};
use tempfile::TempDir;

const BLOCK: usize = 32 << 10;
const PARTITIONS: usize = 8;
const MAPS: usize = 48;
const WORKERS: usize = 4;
/// A case takes seconds; one that runs this long hangs somewhere (see [`watchdog`]).
const CASE_LIMIT: Duration = Duration::from_secs(240);

/// Turns a hang into a failure that says where it hangs. A case that waits on a frozen disk
/// or a server that never answers would otherwise hold the whole test run until CI kills it,
/// with nothing printed. The watchdog thread prints the stuck case, the kernel stacks of the
/// server processes, the test's own thread backtraces (gdb, when installed), then thaws every
/// frozen mount, kills the servers and exits non-zero.
mod watchdog {
    use std::collections::BTreeSet;
    use std::path::PathBuf;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use parking_lot::Mutex;

    /// The running case and when it started; server pids alive; mounts made.
    static CASE: Mutex<Option<(String, Instant)>> = Mutex::new(None);
    static PIDS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
    static MOUNTS: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
    /// The log of the case's servers.
    static LOG: Mutex<Option<PathBuf>> = Mutex::new(None);

    pub fn start(limit: Duration) {
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            let stuck = CASE
                .lock()
                .as_ref()
                .filter(|(_, t)| t.elapsed() > limit)
                .map(|(n, _)| n.clone());
            if let Some(name) = stuck {
                report_and_exit(&name, limit);
            }
        });
    }

    pub fn case(name: &str) {
        *CASE.lock() = Some((name.to_owned(), Instant::now()));
    }

    pub fn log(path: PathBuf) {
        *LOG.lock() = Some(path);
    }

    pub fn done() {
        *CASE.lock() = None;
    }

    pub fn server(pid: i32, alive: bool) {
        let mut pids = PIDS.lock();
        if alive {
            pids.insert(pid);
        } else {
            pids.remove(&pid);
        }
    }

    pub fn mount(path: PathBuf, mounted: bool) {
        let mut mounts = MOUNTS.lock();
        if mounted {
            mounts.insert(path);
        } else {
            mounts.remove(&path);
        }
    }

    fn shell(cmd: &str) {
        eprintln!("$ {cmd}");
        let _ = Command::new("sh").arg("-c").arg(cmd).status();
    }

    fn report_and_exit(name: &str, limit: Duration) -> ! {
        eprintln!("FAULT SUITE HUNG: case `{name}` still running after {limit:?}");
        let pids: Vec<i32> = PIDS.lock().iter().copied().collect();
        if let Some(log) = LOG.lock().as_ref() {
            shell(&format!("tail -n 60 {}", log.display()));
        }
        // Threads of the servers, with the kernel stack of those in uninterruptible sleep.
        for pid in &pids {
            shell(&format!(
                "for t in /proc/{pid}/task/*; do st=$(awk '/^State/{{print $2}}' $t/status); \
                 echo \"$t $(cat $t/comm) $st $(cat $t/wchan)\"; \
                 [ \"$st\" = D ] && cat $t/stack; done"
            ));
        }
        shell("ps --ppid 2 -p 2 --deselect -o pid,ppid,stat,wchan:32,etime,args | cut -c1-200");
        shell("findmnt -l -o TARGET,SOURCE,FSTYPE,OPTIONS | grep -E 'tmp|loop'");
        // Where the test's own tasks wait (frames of this file and of the library).
        shell(&format!(
            "command -v gdb >/dev/null && timeout 120 gdb -p {} -batch -ex 'thread apply all bt' 2>&1 \
             | grep -E '^Thread|faults::|spillway::' | cut -c1-240 | head -300",
            std::process::id()
        ));
        for m in MOUNTS.lock().iter() {
            shell(&format!(
                "fsfreeze -u {0} 2>/dev/null; umount -l {0}",
                m.display()
            ));
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::process::exit(3);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process, killed if the test ends without stopping it.
struct Server {
    child: Option<Child>,
    grpc: SocketAddr,
    netty: SocketAddr,
    config: PathBuf,
    peak_rss: u64,
}

impl Server {
    fn spawn(config: &Path, grpc: SocketAddr, netty: SocketAddr, takeover: bool) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_spillway"));
        cmd.arg("--config").arg(config);
        if takeover {
            cmd.arg("--takeover");
        }
        // The server logs to stdout: kept beside the config, shown by the watchdog on a hang.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(config.with_file_name("server.log"))
            .expect("server log file");
        let child = cmd
            .env("RUST_LOG", "warn,spillway=info")
            .env("WORKER_IP", "127.0.0.1")
            .stdout(log)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the spillway binary starts");
        watchdog::server(child.id() as i32, true);
        watchdog::log(config.with_file_name("server.log"));
        Server {
            child: Some(child),
            grpc,
            netty,
            config: config.to_owned(),
            peak_rss: 0,
        }
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    /// Waits until the server answers gRPC.
    async fn ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(ch) = channel(self.grpc).await {
                let mut c = proto::shuffle_server_client::ShuffleServerClient::new(ch);
                let r = c
                    .app_heartbeat(proto::AppHeartBeatRequest {
                        app_id: "probe".into(),
                    })
                    .await;
                if r.is_ok() {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "server did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn sample_rss(&mut self) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let hwm = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
        self.peak_rss = self.peak_rss.max(hwm * 1024);
    }

    /// Sends `signal` and waits for the exit; returns the exit code (None: killed by a signal).
    fn stop(&mut self, signal: nix::sys::signal::Signal) -> Option<i32> {
        self.sample_rss();
        let mut child = self.child.take()?;
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal);
        let status = child.wait().unwrap();
        watchdog::server(child.id() as i32, false);
        status.code()
    }

    fn restart(&mut self) {
        let mut fresh = Server::spawn(&self.config, self.grpc, self.netty, false);
        self.child = fresh.child.take();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            watchdog::server(c.id() as i32, false);
        }
    }
}

/// A mount made for one case; unmounted (lazily, thawed first) when dropped.
struct Mount {
    path: PathBuf,
    loop_dev: Option<String>,
}

fn sh(cmd: &str) {
    let ok = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
    assert!(ok.success(), "`{cmd}` failed (the fault suite needs root)");
}

impl Mount {
    fn tmpfs(path: &Path, size_mib: u64) -> Mount {
        std::fs::create_dir_all(path).unwrap();
        sh(&format!(
            "mount -t tmpfs -o size={size_mib}m tmpfs {}",
            path.display()
        ));
        watchdog::mount(path.to_owned(), true);
        Mount {
            path: path.to_owned(),
            loop_dev: None,
        }
    }

    /// An ext4 file system on a loop device (`fsfreeze` needs a real file system).
    fn ext4(path: &Path, image: &Path, size_mib: u64) -> Mount {
        std::fs::create_dir_all(path).unwrap();
        sh(&format!("truncate -s {size_mib}M {}", image.display()));
        sh(&format!("mkfs.ext4 -q -F {}", image.display()));
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(image)
            .output()
            .unwrap();
        assert!(out.status.success(), "losetup failed (needs root)");
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        sh(&format!("mount {dev} {}", path.display()));
        watchdog::mount(path.to_owned(), true);
        Mount {
            path: path.to_owned(),
            loop_dev: Some(dev),
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let p = self.path.display();
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!("fsfreeze -u {p} 2>/dev/null; umount -l {p}"))
            .status();
        if let Some(dev) = &self.loop_dev {
            let _ = Command::new("losetup").args(["-d", dev]).status();
        }
        watchdog::mount(self.path.clone(), false);
    }
}

struct Case {
    name: &'static str,
    transport: Transport,
    /// Unmounted before `dir` is removed (fields drop in order).
    mount: Option<Mount>,
    /// The healthy data paths' own tmpfs: how full the host's disk is must not matter (a host
    /// disk that fills up mid-case would fail every spill with ENOSPC, and capacity is a share
    /// of the file system's size).
    _disks: Mount,
    _dir: TempDir,
    data: Vec<PathBuf>,
    grpc: SocketAddr,
    netty: SocketAddr,
    http: SocketAddr,
    /// Taken out while a case stops and restarts it (writers only need the addresses).
    server: Mutex<Option<Server>>,
    app: String,
    shape: Shape,
    payloads: Arc<Payloads>,
    /// Maps whose send, report and commit all succeeded.
    acked: Mutex<BTreeSet<usize>>,
    /// Blocks the guarantee does not cover, by id.
    excluded: Mutex<BTreeSet<i64>>,
    /// Peak RSS of server processes that already exited.
    peak_rss: Mutex<u64>,
    /// A frozen file system to thaw after the read-back, before the final stop (a process
    /// cannot exit while one of its threads waits on a frozen disk).
    thaw: Mutex<Option<PathBuf>>,
}

/// Extra config lines per case.
fn config_text(data: &[PathBuf], grpc: u16, netty: u16, http: u16, extra: &str) -> String {
    format!(
        r#"store_type = "MEMORY_LOCALFILE"
grpc_port = {grpc}
netty_port = {netty}
bind_ip = "127.0.0.1"
[memory_store]
capacity = "32M"
[localfile_store]
data_paths = {data:?}
disk_high_watermark = 0.9
disk_low_watermark = 0.8
disk_health_check_interval = "1s"
write_timeout = "2s"
[hybrid_store]
memory_spill_high_watermark = 0.5
memory_spill_low_watermark = 0.2
spill_retry_max_backoff = "1s"
[metrics]
http_port = {http}
[app]
app_heartbeat_timeout = "120s"
{extra}
"#
    )
}

impl Case {
    /// Two data paths: `first` (a mount made by the caller, or a directory on the case's own
    /// tmpfs) and a directory on that tmpfs.
    async fn start(
        name: &'static str,
        transport: Transport,
        prepare: impl FnOnce(&Path) -> Option<Mount>,
        extra: &str,
    ) -> Arc<Case> {
        watchdog::case(&format!("{name} over {transport:?}"));
        let dir = TempDir::new().unwrap();
        let mount = prepare(dir.path());
        let disks = Mount::tmpfs(&dir.path().join("disks"), 512);
        let first = mount
            .as_ref()
            .map_or_else(|| disks.path.join("d0"), |m| m.path.join("d0"));
        let data = vec![first, disks.path.join("d1")];
        let (g, n, h) = (free_port(), free_port(), free_port());
        let config = dir.path().join("config.toml");
        let extra = extra.replace(
            "JOURNAL_DIR",
            &dir.path().join("journal").display().to_string(),
        );
        std::fs::write(&config, config_text(&data, g, n, h, &extra)).unwrap();
        let grpc: SocketAddr = format!("127.0.0.1:{g}").parse().unwrap();
        let netty: SocketAddr = format!("127.0.0.1:{n}").parse().unwrap();
        let server = Server::spawn(&config, grpc, netty, false);
        server.ready().await;
        let layout = BlockIdLayout::DEFAULT;
        let case = Case {
            name,
            transport,
            mount,
            _disks: disks,
            _dir: dir,
            data,
            grpc,
            netty,
            http: format!("127.0.0.1:{h}").parse().unwrap(),
            server: Mutex::new(Some(server)),
            app: format!("app_faults_{name}_{transport:?}").replace('-', "_"),
            shape: Shape {
                maps: MAPS,
                partitions: PARTITIONS,
                block_size: BLOCK,
                blocks_per_partition: 8,
                layout,
            },
            payloads: Arc::new(Payloads::new(BLOCK)),
            acked: Mutex::new(BTreeSet::new()),
            excluded: Mutex::new(BTreeSet::new()),
            peak_rss: Mutex::new(0),
            thaw: Mutex::new(None),
        };
        Arc::new(case)
    }

    /// The mount point of the case's mounted data path.
    fn mount_path(&self) -> PathBuf {
        self.mount
            .as_ref()
            .expect("the case has a mount")
            .path
            .clone()
    }

    async fn client(&self) -> anyhow::Result<Client> {
        let ch = channel(self.grpc).await?;
        let netty = (self.transport == Transport::Netty).then_some(self.netty);
        Client::new(
            ch,
            netty,
            &self.app,
            0,
            Arc::new(Mutex::new(Latencies::default())),
        )
        .await
    }

    async fn register(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = async { self.client().await?.register(PARTITIONS).await }.await;
            match r {
                Ok(()) => return,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("register: {e:#}; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("register: {e:#}"),
            }
        }
    }

    /// Writes `maps` with `WORKERS` concurrent map tasks; a map whose calls fail is left
    /// unacknowledged (the caller retries it). Returns how many maps failed.
    async fn write(self: &Arc<Self>, maps: Vec<usize>) -> usize {
        let queue = Arc::new(Mutex::new(maps));
        let failed = Arc::new(Mutex::new(0usize));
        let mut tasks = Vec::new();
        for _ in 0..WORKERS {
            let (me, queue, failed) = (Arc::clone(self), Arc::clone(&queue), Arc::clone(&failed));
            tasks.push(tokio::spawn(async move {
                loop {
                    let Some(map) = queue.lock().pop() else {
                        return;
                    };
                    if let Err(e) = me.write_map(map).await {
                        *failed.lock() += 1;
                        eprintln!("[{}] map {map} failed: {e:#}", me.name);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let n = *failed.lock();
        n
    }

    async fn write_map(&self, map: usize) -> anyhow::Result<()> {
        let mut c = self.client().await?;
        for request in self.shape.requests(map, 256 << 10) {
            let blocks = request
                .into_iter()
                .map(|(p, id)| {
                    let data = self.payloads.block(app_key(&self.app), id, BLOCK);
                    (
                        p as i32,
                        proto::ShuffleBlock {
                            block_id: id,
                            length: data.len() as i32,
                            uncompress_length: data.len() as i32,
                            crc: i64::from(crc32fast::hash(&data)),
                            data,
                            task_attempt_id: map as i64,
                        },
                    )
                })
                .collect();
            c.send(blocks, Duration::from_millis(10)).await?;
        }
        let ids = (0..PARTITIONS)
            .map(|p| {
                let ids = (0..self.shape.blocks_per_partition)
                    .map(|s| self.shape.block_id(map, p, s))
                    .collect();
                (p as i32, ids)
            })
            .collect();
        c.report_and_commit(map as i64, ids).await?;
        self.acked.lock().insert(map);
        Ok(())
    }

    /// Writes every map until all are acknowledged (retrying failed ones, bounded).
    async fn write_all_remaining(self: &Arc<Self>) {
        for round in 0..20 {
            let todo: Vec<usize> = (0..MAPS)
                .filter(|m| !self.acked.lock().contains(m))
                .collect();
            if todo.is_empty() {
                return;
            }
            if round > 0 {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            self.write(todo).await;
        }
        panic!("[{}] maps still failing after 20 rounds", self.name);
    }

    fn expected(&self, map: usize, p: usize) -> impl Iterator<Item = i64> + '_ {
        (0..self.shape.blocks_per_partition).map(move |s| self.shape.block_id(map, p, s))
    }

    /// Reads every partition as the client does and checks every block against its payload.
    /// Returns (block ids read intact, corrupt descriptions).
    async fn read_all(&self) -> anyhow::Result<(BTreeSet<i64>, Vec<String>, BTreeSet<i64>)> {
        let mut c = self.client().await?;
        let mut intact = BTreeSet::new();
        let mut corrupt = Vec::new();
        let mut reported = BTreeSet::new();
        for p in 0..PARTITIONS as i32 {
            let bits = c.shuffle_result(p, BlockIdLayout::DEFAULT).await?;
            reported.extend(bitmap::decode(&bits)?.iter().map(|id| id as i64));
            let mut blocks: BTreeMap<i64, (i64, bytes::Bytes)> = BTreeMap::new();
            let mut last = -1;
            loop {
                let got = c.read_memory(p, last, 1 << 20).await?;
                let Some(tail) = got.last() else { break };
                last = tail.block_id;
                for b in got {
                    blocks.insert(b.block_id, (b.crc, b.data));
                }
            }
            let index = c.read_index(p, PARTITIONS as i32).await?;
            for e in IndexEntry::decode_all(&index) {
                let data = c
                    .read_data(p, PARTITIONS as i32, e.offset, e.length)
                    .await?;
                blocks.insert(e.block_id, (e.crc, data));
            }
            for (id, (crc, data)) in blocks {
                let want = self.payloads.block(app_key(&self.app), id, BLOCK);
                if data != want || crc != i64::from(crc32fast::hash(&data)) {
                    corrupt.push(format!("block {id} of partition {p}"));
                } else {
                    intact.insert(id);
                }
            }
        }
        Ok((intact, corrupt, reported))
    }

    /// Reads back, compares with what was acknowledged, prints the row, and asserts.
    async fn finish(self, outcome: &str) {
        let (intact, corrupt, reported) = self.read_all().await.expect("read back");
        let acked: Vec<usize> = self.acked.lock().iter().copied().collect();
        let mut want = BTreeSet::new();
        for &m in &acked {
            for p in 0..PARTITIONS {
                want.extend(self.expected(m, p));
            }
        }
        let excluded = self.excluded.lock().clone();
        let missing: Vec<i64> = want.difference(&intact).copied().collect();
        let lost = missing.iter().filter(|id| !excluded.contains(id)).count();
        let excl = missing.len() - lost;
        let unreported = want.difference(&reported).count();
        if let Some(p) = self.thaw.lock().take() {
            sh(&format!("fsfreeze -u {}", p.display()));
        }
        let mut server = self.take_server();
        server.sample_rss();
        let exit = server.stop(nix::sys::signal::Signal::SIGTERM);
        println!(
            "FAULT-ROW | {:<18} | {:<5} | acked {:>5} | intact {:>5} | lost {:>3} | excluded {:>4} | peak RSS {:>4} MiB | {}",
            self.name,
            format!("{:?}", self.transport).to_lowercase(),
            want.len(),
            want.intersection(&intact).count(),
            lost,
            excl,
            server.peak_rss.max(*self.peak_rss.lock()) >> 20,
            outcome
        );
        assert!(
            corrupt.is_empty(),
            "[{}] corrupt blocks: {corrupt:?}",
            self.name
        );
        assert_eq!(
            lost,
            0,
            "[{}] acknowledged blocks lost: {:?}",
            self.name,
            &missing[..missing.len().min(10)]
        );
        assert_eq!(unreported, 0, "[{}] acknowledged reports lost", self.name);
        assert_eq!(
            exit,
            Some(0),
            "[{}] server exit after the final SIGTERM",
            self.name
        );
    }

    /// The sample of metric `name` whose labels contain `label` (Prometheus text format).
    async fn metric(&self, name: &str, label: &str) -> f64 {
        let text = reqwest::get(format!("http://{}/prometheus/metrics/all", self.http))
            .await
            .expect("metrics answer")
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .next()
            .unwrap_or_else(|| panic!("no sample of {name} with {label}:\n{text}"))
    }

    fn take_server(&self) -> Server {
        self.server
            .lock()
            .take()
            .expect("the case's server is in place")
    }

    fn put_server(&self, s: Server) {
        let mut peak = self.peak_rss.lock();
        *peak = (*peak).max(s.peak_rss);
        *self.server.lock() = Some(s);
    }

    /// Write half, run `fault`, write the rest.
    async fn half_then(self: &Arc<Self>, fault: impl std::future::Future<Output = ()>) {
        self.register().await;
        self.write((0..MAPS / 2).collect()).await;
        fault.await;
        self.write_all_remaining().await;
    }
}

fn unwrap_case(c: Arc<Case>) -> Case {
    Arc::try_unwrap(c).unwrap_or_else(|_| panic!("case still shared"))
}

async fn disk_full(transport: Transport) {
    // The first data path is a 24 MiB tmpfs: a quarter of the shuffle's 96 MiB fits. Its
    // capacity is 0.9 x 24 MiB; partitions move off when the server's own bytes there reach the
    // 90 % write watermark of it, or earlier at ENOSPC.
    let case = Case::start(
        "disk-full",
        transport,
        |d| Some(Mount::tmpfs(&d.join("small"), 24)),
        "",
    )
    .await;
    case.register().await;
    case.write_all_remaining().await;
    let moved = case
        .metric("total_partition_failover", "local_disk_path=\"ALL\"")
        .await;
    assert!(moved > 0.0, "no partition moved off the full disk");
    let c = unwrap_case(case);
    c.finish(&format!(
        "served; {moved} partitions moved off the full disk"
    ))
    .await;
}

async fn read_only(transport: Transport) {
    // The kernel remounts read-only only with no file open for writing there, so the journal
    // (always open) lives elsewhere in this case; a disk that the kernel turns read-only after
    // errors does not wait for that.
    let case = Case::start(
        "read-only",
        transport,
        |d| Some(Mount::tmpfs(&d.join("ro"), 256)),
        "[recovery]\ndir = \"JOURNAL_DIR\"",
    )
    .await;
    let path = case.mount_path();
    case.half_then(async {
        // The kernel refuses while a file is open for writing there (an append in flight):
        // retry until an instant between appends.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&path)
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
        {
            assert!(
                Instant::now() < deadline,
                "could not remount {} read-only",
                path.display()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let c = unwrap_case(case);
    c.finish("served; partitions left the read-only disk").await;
}

async fn stall(transport: Transport) {
    let case = Case::start(
        "stalled-io",
        transport,
        |d| Some(Mount::ext4(&d.join("frozen"), &d.join("ext4.img"), 512)),
        "",
    )
    .await;
    let path = case.mount_path();
    case.half_then(async {
        sh(&format!("fsfreeze -f {}", path.display()));
        *case.thaw.lock() = Some(path.clone());
    })
    .await;
    // Reads of data already on the frozen disk work (page cache); the final spill avoids it.
    let frozen = format!("local_disk_path=\"{}\"", case.data[0].display());
    assert_eq!(case.metric("local_storage_is_timeout", &frozen).await, 1.0);
    assert!(case.metric("total_partition_failover", &frozen).await > 0.0);
    let c = unwrap_case(case);
    c.finish("served; writes to the frozen disk timed out and moved")
        .await;
}

async fn path_removed(transport: Transport) {
    let case = Case::start("path-removed", transport, |_| None, "").await;
    let removed = case.data[0].clone();
    let c2 = Arc::clone(&case);
    case.half_then(async move {
        // Blocks already spilled to the removed path are gone with it: the guarantee cannot
        // cover an operator deleting the data (they are counted as excluded).
        let gone = on_disk_ids(&removed);
        c2.excluded.lock().extend(gone);
        sh(&format!("rm -rf {}", removed.display()));
    })
    .await;
    let c = unwrap_case(case);
    c.finish("served; later spills went to new file pairs")
        .await;
}

/// Block ids in the index files under `root`.
fn on_disk_ids(root: &Path) -> Vec<i64> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "index") {
                let bytes = std::fs::read(&p).unwrap_or_default();
                out.extend(IndexEntry::decode_all(&bytes).iter().map(|e| e.block_id));
            }
        }
    }
    out
}

async fn restart_mid_write(transport: Transport, kill: bool) {
    let name = if kill {
        "sigkill-mid-write"
    } else {
        "sigterm-mid-write"
    };
    let case = Case::start(name, transport, |_| None, "").await;
    case.register().await;
    case.write((0..MAPS / 2).collect()).await;
    // Writers keep going while the server goes down and comes back.
    let writers = {
        let c = Arc::clone(&case);
        tokio::spawn(async move { c.write((MAPS / 2..MAPS).collect()).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut server = case.take_server();
    let window = Instant::now();
    if kill {
        // What the guarantee excludes: acknowledged blocks that were only in memory.
        let on_disk: BTreeSet<i64> = case.data.iter().flat_map(|d| on_disk_ids(d)).collect();
        server.stop(nix::sys::signal::Signal::SIGKILL);
        let acked: Vec<usize> = case.acked.lock().iter().copied().collect();
        let mut ex = case.excluded.lock();
        for m in acked {
            for p in 0..PARTITIONS {
                ex.extend(case.expected(m, p).filter(|id| !on_disk.contains(id)));
            }
        }
    } else {
        assert_eq!(server.stop(nix::sys::signal::Signal::SIGTERM), Some(0));
    }
    server.restart();
    server.ready().await;
    let down = window.elapsed();
    case.put_server(server);
    writers.await.unwrap();
    case.write_all_remaining().await;
    let c = unwrap_case(case);
    c.finish(&format!("restarted in {} ms", down.as_millis()))
        .await;
}

async fn restart_mid_read(transport: Transport, kill: bool) {
    let name = if kill {
        "sigkill-mid-read"
    } else {
        "sigterm-mid-read"
    };
    let case = Case::start(name, transport, |_| None, "").await;
    case.register().await;
    case.write_all_remaining().await;
    if kill {
        // SIGKILL keeps what was spilled: make it all durable first, as the reduce stage
        // starts after finishShuffle.
        case.client().await.unwrap().finish().await.unwrap();
    }
    let reader = {
        let c = Arc::clone(&case);
        tokio::spawn(async move { c.read_all().await.is_ok() })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut server = case.take_server();
    let window = Instant::now();
    server.stop(if kill {
        nix::sys::signal::Signal::SIGKILL
    } else {
        nix::sys::signal::Signal::SIGTERM
    });
    server.restart();
    server.ready().await;
    let down = window.elapsed();
    case.put_server(server);
    let _ = reader.await; // the read in flight may fail; the reader then reads again
    let c = unwrap_case(case);
    c.finish(&format!("restarted in {} ms", down.as_millis()))
        .await;
}

/// Upgrade: a second binary started with `--takeover` while writers run. Counts refused
/// connections on the gRPC port during the handover.
async fn takeover(transport: Transport) {
    let case = Case::start("takeover-mid-write", transport, |_| None, "").await;
    case.register().await;
    case.write((0..MAPS / 2).collect()).await;
    let writers = {
        let c = Arc::clone(&case);
        tokio::spawn(async move { c.write((MAPS / 2..MAPS).collect()).await })
    };
    let refused = Arc::new(Mutex::new(0u64));
    let probing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let prober = {
        let (refused, probing, addr) = (Arc::clone(&refused), Arc::clone(&probing), case.grpc);
        tokio::spawn(async move {
            while probing.load(std::sync::atomic::Ordering::Relaxed) {
                if let Err(e) = tokio::net::TcpStream::connect(addr).await {
                    if e.kind() == std::io::ErrorKind::ConnectionRefused {
                        *refused.lock() += 1;
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut old = case.take_server();
    let started = Instant::now();
    let new = Server::spawn(&old.config, old.grpc, old.netty, true);
    // The old process exits by itself once the new one asked it to (SIGTERM).
    old.sample_rss();
    let mut old_child = old.child.take().unwrap();
    let old_exit = old_child.wait().unwrap();
    watchdog::server(old_child.id() as i32, false);
    {
        let mut peak = case.peak_rss.lock();
        *peak = (*peak).max(old.peak_rss);
    }
    assert_eq!(
        old_exit.code(),
        Some(0),
        "the old server drained and exited cleanly"
    );
    new.ready().await;
    let handover = started.elapsed();
    case.put_server(new);
    writers.await.unwrap();
    case.write_all_remaining().await;
    probing.store(false, std::sync::atomic::Ordering::Relaxed);
    prober.await.unwrap();
    let refused = *refused.lock();
    let c = unwrap_case(case);
    c.finish(&format!(
        "handover {} ms, {refused} refused connections",
        handover.as_millis()
    ))
    .await;
    assert_eq!(refused, 0, "connections were refused during the handover");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fault_suite() {
    // Build-time check of the tools the cases use (fail, never skip).
    for tool in ["mount", "umount", "losetup", "mkfs.ext4", "fsfreeze"] {
        assert!(
            Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {tool}"))
                .status()
                .unwrap()
                .success(),
            "{tool} is missing"
        );
    }
    // FAULTS_CASE_LIMIT_SECS=3 shows what the watchdog prints.
    let limit = std::env::var("FAULTS_CASE_LIMIT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(CASE_LIMIT, Duration::from_secs);
    watchdog::start(limit);
    println!("FAULT-ROW | case               | plane | blocks acked | read intact | lost | excluded | peak RSS | outcome");
    disk_full(Transport::Grpc).await;
    disk_full(Transport::Netty).await;
    read_only(Transport::Grpc).await;
    stall(Transport::Netty).await;
    path_removed(Transport::Grpc).await;
    restart_mid_write(Transport::Grpc, false).await;
    restart_mid_write(Transport::Netty, false).await;
    restart_mid_write(Transport::Grpc, true).await;
    restart_mid_read(Transport::Netty, false).await;
    restart_mid_read(Transport::Grpc, true).await;
    takeover(Transport::Grpc).await;
    takeover(Transport::Netty).await;
    watchdog::done();
}
