//! The fault schedule: drawn up front from `--seed`, so the same seed and options give the
//! same faults at the same times on the same servers, and printed before the run starts.
//! Process faults (restarts, upgrades, coordinator stops) are applied one after the other by
//! one task. Faults with a hold (a full disk, a network stall, a NameNode restart, a frozen or
//! removed disk) last it in the background, and the schedule often puts the next fault inside
//! that hold: a restart while a disk is frozen or removed, a stall during a NameNode restart.
//! Two faults on the same thing (one loop disk, the NameNode, the network) never overlap: the
//! second waits for the first to end.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::cluster::{Cluster, COORDINATORS, LOOP_PATH, PATHS, SERVERS};
use super::disks::LoopDisk;
use super::minidfs::MiniDfs;
use super::s3::S3Server;

/// The server no process fault restarts: every other fault (stalls, disk fills, freezes and
/// removals, NameNode restarts) still hits it. A resource slope is only measurable over a long
/// process life: a fresh process's RSS and threads ramp up for minutes (a jemalloc arena touches
/// its huge pages, the blocking pool grows to the load), and with restarts every few minutes
/// that ramp is all a slope sees. This server lives for the whole run, so its slope over the
/// last half is a leak's, under every fault but a restart.
pub const LONG_LIVED: usize = SERVERS - 1;

/// A small deterministic generator (splitmix64): the schedule must not depend on a crate's
/// algorithm choice between versions.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SIGKILL, then start again on the same config.
    Kill,
    /// SIGTERM (final spill), then start again.
    Term,
    /// A new process with `--takeover` replaces the running one.
    Takeover,
    /// Fill one data path with a file until ENOSPC; the file is removed `hold` later.
    DiskFill,
    /// SIGTERM a server that embeds a coordinator, start it again `hold` later.
    CoordinatorStop,
    /// Drop the packets of one server's client-facing ports for `hold` (own namespace only;
    /// see `netstall`).
    NetStall,
    /// Stop the MiniDFS NameNode, start it again `hold` later (same port, same metadata).
    NameNodeRestart,
    /// `fsfreeze` the loop disk for `hold`: its writes block in the kernel, then resume.
    DiskFreeze,
    /// Pull the loop disk out (its path turns empty and read-only), put a new empty file
    /// system in `hold` later; the apps that had files on it are recorded as gone.
    DiskRemove,
    /// Freeze the S3 server (SIGSTOP) for `hold`, then resume it with its objects: every
    /// server's object-storage requests hang meanwhile.
    S3Freeze,
}

impl Kind {
    /// Whether the fault needs the soak's own mounts (it would hit the host's disk otherwise).
    fn needs_disks(self) -> bool {
        matches!(self, Kind::DiskFill | Kind::DiskFreeze | Kind::DiskRemove)
    }

    /// Whether the fault lasts its hold in the background while later faults fire.
    pub fn overlaps(self) -> bool {
        matches!(
            self,
            Kind::DiskFill
                | Kind::NetStall
                | Kind::NameNodeRestart
                | Kind::DiskFreeze
                | Kind::DiskRemove
                | Kind::S3Freeze
        )
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Kill => "SIGKILL + restart",
            Kind::Term => "SIGTERM + restart",
            Kind::Takeover => "--takeover upgrade",
            Kind::DiskFill => "disk fill",
            Kind::CoordinatorStop => "coordinator stopped",
            Kind::NetStall => "client network stall",
            Kind::NameNodeRestart => "NameNode stopped",
            Kind::DiskFreeze => "disk freeze",
            Kind::DiskRemove => "disk removal",
            Kind::S3Freeze => "S3 store frozen",
        }
    }
}

/// What the soak runs, which decides the faults it can plan.
#[derive(Clone, Copy, Debug)]
pub struct Parts {
    /// tmpfs data paths and loop disks of its own (disk fills, freezes, removals).
    pub disks: bool,
    /// Its own network namespace (client network stalls).
    pub net: bool,
    /// A MiniDFS (NameNode restarts).
    pub hdfs: bool,
    /// An S3 server (store freezes).
    pub s3: bool,
}

#[cfg(test)]
impl Parts {
    /// Everything.
    pub fn all() -> Parts {
        Parts {
            disks: true,
            net: true,
            hdfs: true,
            s3: true,
        }
    }
}

/// A planned fault.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Seconds after the start.
    pub at: f64,
    /// What.
    pub kind: Kind,
    /// Which server.
    pub node: usize,
    /// Which data path (disk faults; always the loop disk for a freeze or a removal).
    pub path: usize,
}

/// Draws the schedule: gaps uniform in `[interval/2, 3*interval/2)`, from 10 s after the
/// start to `hold` + 10 s before the end (so the last restarts settle before the final
/// checks). After a fault that lasts its `hold` in the background ([`Kind::overlaps`]), half
/// the time the next one comes within that hold instead, uniform in `[hold/5, 4*hold/5)`, so
/// faults overlap. Kinds come in rounds holding each kind once, in a seeded order, so even a
/// 5-minute run meets every kind. Which kinds can be planned depends on the soak's [`Parts`].
pub fn schedule(seed: u64, duration: f64, interval: f64, hold: f64, parts: Parts) -> Vec<Fault> {
    let Parts {
        disks,
        net,
        hdfs,
        s3,
    } = parts;
    let tail = hold + 10.0;
    let mut rng = Rng::new(seed);
    let kinds: Vec<Kind> = [
        Kind::Kill,
        Kind::Term,
        Kind::Takeover,
        Kind::DiskFill,
        Kind::CoordinatorStop,
        Kind::NetStall,
        Kind::NameNodeRestart,
        Kind::DiskFreeze,
        Kind::DiskRemove,
        Kind::S3Freeze,
    ]
    .into_iter()
    .filter(|k| disks || !k.needs_disks())
    .filter(|k| net || *k != Kind::NetStall)
    .filter(|k| hdfs || *k != Kind::NameNodeRestart)
    .filter(|k| s3 || *k != Kind::S3Freeze)
    .collect();
    let mut round: Vec<Kind> = Vec::new();
    let mut out = Vec::new();
    let mut at = 10.0;
    let mut within_hold = false;
    loop {
        at += if within_hold {
            hold * (0.2 + 0.6 * rng.unit())
        } else {
            interval * (0.5 + rng.unit())
        };
        if at > duration - tail {
            return out;
        }
        if round.is_empty() {
            round = kinds.clone();
            // Fisher-Yates with the seeded generator.
            for i in (1..round.len()).rev() {
                round.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        let kind = round.pop().unwrap_or(Kind::Kill);
        let node = match kind {
            Kind::CoordinatorStop => rng.below(COORDINATORS as u64) as usize,
            // The last server is never restarted (see [`LONG_LIVED`]).
            Kind::Kill | Kind::Term | Kind::Takeover => rng.below(LONG_LIVED as u64) as usize,
            _ => rng.below(SERVERS as u64) as usize,
        };
        let drawn = rng.below(PATHS as u64) as usize;
        // Only the loop disk can be frozen (tmpfs cannot) or removed.
        let path = match kind {
            Kind::DiskFreeze | Kind::DiskRemove => LOOP_PATH,
            _ => drawn,
        };
        within_hold = kind.overlaps() && rng.unit() < 0.5;
        out.push(Fault {
            at,
            kind,
            node,
            path,
        });
    }
}

/// A fault as it happened.
#[derive(Clone, Debug)]
pub struct Logged {
    /// Seconds after the start when it began.
    pub at: f64,
    /// Seconds it took (until the server answered again, or the disk was full).
    pub took: f64,
    /// Which server.
    pub node: usize,
    /// What, and how it went.
    pub what: String,
    /// True when the fault could not be applied or the server did not come back.
    pub failed: bool,
}

/// A restart (a new process) of a server, for the plots.
#[derive(Clone, Copy, Debug)]
pub struct Restart {
    /// Seconds after the start.
    pub at: f64,
    /// Which server.
    pub node: usize,
}

/// Fills `dir` with one file until the file system says ENOSPC; returns the file and its size.
fn fill(dir: &Path) -> std::io::Result<(PathBuf, u64)> {
    use std::io::Write;
    let path = dir.join("soak-filler");
    let mut f = std::fs::File::create(&path)?;
    let chunk = vec![0x5a_u8; 1 << 20];
    let mut written = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => return Err(e),
        }
    }
    Ok((path, written))
}

/// What a fault in a task of its own hands back when its hold is over: its log line, and the
/// disk or MiniDFS it held.
struct Back {
    logged: Logged,
    disk: Option<(usize, LoopDisk)>,
    dfs: Option<MiniDfs>,
}

/// What a fault in a task of its own holds; a later fault on the same thing waits for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// A server's loop disk (frozen or removed).
    Disk(usize),
    /// The NameNode.
    NameNode,
    /// The client network (one stall at a time: rules of two holds would interleave).
    Net,
    /// The S3 server.
    S3,
}

/// The faults running in tasks of their own, and what they took with them.
struct Background {
    /// Each with what it holds and the server its fault was drawn for.
    running: Vec<(Held, usize, tokio::task::JoinHandle<Back>)>,
    /// Per server, its loop disk while no fault holds it.
    disks: Vec<Option<LoopDisk>>,
    dfs: Option<MiniDfs>,
}

impl Background {
    fn restore(&mut self, back: Back, log: &mut Vec<Logged>) {
        if let Some((node, disk)) = back.disk {
            self.disks[node] = Some(disk);
        }
        if back.dfs.is_some() {
            self.dfs = back.dfs;
        }
        log.push(back.logged);
    }

    async fn finish(&mut self, i: usize, log: &mut Vec<Logged>, now: f64) {
        let (held, node, task) = self.running.swap_remove(i);
        match task.await {
            Ok(back) => self.restore(back, log),
            // What it held is lost with it (a dropped disk unmounts and thaws itself).
            Err(e) => log.push(Logged {
                at: now,
                took: 0.0,
                node,
                what: format!("{held:?} fault task: FAILED: {e}"),
                failed: true,
            }),
        }
    }

    /// Waits for the fault holding `held`, if one does.
    async fn free(&mut self, held: Held, log: &mut Vec<Logged>, now: f64) {
        while let Some(i) = self.running.iter().position(|(h, _, _)| *h == held) {
            self.finish(i, log, now).await;
        }
    }

    /// Collects the faults whose hold is over.
    async fn reap(&mut self, log: &mut Vec<Logged>, now: f64) {
        while let Some(i) = self.running.iter().position(|(_, _, t)| t.is_finished()) {
            self.finish(i, log, now).await;
        }
    }

    async fn finish_all(&mut self, log: &mut Vec<Logged>, now: f64) {
        while !self.running.is_empty() {
            self.finish(0, log, now).await;
        }
    }
}

/// A fault's log line, also printed as it ends.
fn logged(start: f64, now: f64, node: usize, what: String, result: anyhow::Result<()>) -> Logged {
    let took = now - start;
    let failed = result.is_err();
    let what = match result {
        Ok(()) => what,
        Err(e) => format!("{what}: FAILED: {e:#}"),
    };
    eprintln!("spillway-bench soak: t={start:.1}s server{node} {what} ({took:.2} s)");
    Logged {
        at: start,
        took,
        node,
        what,
        failed,
    }
}

/// Applies `plan` until `stop` is cancelled or the plan ends. Process faults (restarts,
/// upgrades, coordinator stops) run one after the other in this task, so each restart is
/// measured on its own. Faults with a hold (network stalls, NameNode restarts, disk freezes
/// and removals) run in tasks of their own, so later faults fire during their hold: a server
/// SIGTERMed while its disk is frozen, a NameNode down during a stall. A disk stays full for
/// `hold` the same way. Returns the log (in start order), the restarts, and the MiniDFS back.
pub async fn run(
    cluster: &mut Cluster,
    hdfs: Option<MiniDfs>,
    s3: Option<Arc<S3Server>>,
    plan: &[Fault],
    hold: Duration,
    stop: tokio_util::sync::CancellationToken,
) -> (Vec<Logged>, Vec<Restart>, Option<MiniDfs>) {
    let shared = Arc::clone(&cluster.shared);
    let mut bg = Background {
        running: Vec::new(),
        disks: std::mem::take(&mut cluster.loop_disks)
            .into_iter()
            .map(Some)
            .collect(),
        dfs: hdfs,
    };
    let mut log = Vec::new();
    let mut restarts = Vec::new();
    // Filler files to remove, with the time they go.
    let mut fillers: Vec<(f64, usize, PathBuf)> = Vec::new();
    'plan: for f in plan {
        loop {
            let now = shared.now();
            bg.reap(&mut log, now).await;
            // Remove fillers that are due before the next fault.
            if let Some(pos) = fillers.iter().position(|(t, ..)| *t <= now) {
                let (_, node, path) = fillers.swap_remove(pos);
                let failed = remove_filler(&path);
                log.push(Logged {
                    at: now,
                    took: 0.0,
                    node,
                    what: format!("disk fill removed ({})", path.display()),
                    failed,
                });
                continue;
            }
            let next = fillers.iter().map(|(t, ..)| *t).fold(f.at, f64::min);
            if now >= f.at {
                break;
            }
            tokio::select! {
                _ = stop.cancelled() => break 'plan,
                _ = tokio::time::sleep(Duration::from_secs_f64((next - now).max(0.0))) => {}
            }
        }
        if stop.is_cancelled() {
            break;
        }
        // A fault on something a running fault holds waits for it.
        let held = match f.kind {
            Kind::DiskFreeze | Kind::DiskRemove => Some(Held::Disk(f.node)),
            Kind::DiskFill if f.path == LOOP_PATH => Some(Held::Disk(f.node)),
            Kind::NameNodeRestart => Some(Held::NameNode),
            Kind::NetStall => Some(Held::Net),
            Kind::S3Freeze => Some(Held::S3),
            _ => None,
        };
        if let Some(held) = held {
            bg.free(held, &mut log, shared.now()).await;
        }
        let start = shared.now();
        let (what, result) = match f.kind {
            Kind::Kill | Kind::Term => {
                let sig = if f.kind == Kind::Kill {
                    Signal::SIGKILL
                } else {
                    Signal::SIGTERM
                };
                let r = async {
                    cluster.stop_node(f.node, sig).await?;
                    cluster.start_node(f.node, false).await
                }
                .await;
                restarts.push(Restart {
                    at: shared.now(),
                    node: f.node,
                });
                (f.kind.name().to_string(), r)
            }
            Kind::Takeover => {
                let r = cluster.start_node(f.node, true).await;
                restarts.push(Restart {
                    at: shared.now(),
                    node: f.node,
                });
                (f.kind.name().to_string(), r)
            }
            Kind::CoordinatorStop => {
                let r = async {
                    cluster.stop_node(f.node, Signal::SIGTERM).await?;
                    tokio::select! {
                        _ = stop.cancelled() => {}
                        _ = tokio::time::sleep(hold) => {}
                    }
                    cluster.start_node(f.node, false).await
                }
                .await;
                restarts.push(Restart {
                    at: shared.now(),
                    node: f.node,
                });
                (format!("{} for {} s", f.kind.name(), hold.as_secs()), r)
            }
            Kind::NetStall => {
                let ports = [shared.nodes[f.node].grpc.port(), shared.nodes[f.node].netty];
                let (ip, sh, stop, node) = (shared.client_ip, shared.clone(), stop.clone(), f.node);
                let task = tokio::spawn(async move {
                    let r = super::netstall::hold(ip, &ports, hold, &stop).await;
                    let what = format!(
                        "{} of ports {} and {} for {} s",
                        Kind::NetStall.name(),
                        ports[0],
                        ports[1],
                        hold.as_secs()
                    );
                    Back {
                        logged: logged(start, sh.now(), node, what, r),
                        disk: None,
                        dfs: None,
                    }
                });
                bg.running.push((Held::Net, node, task));
                continue;
            }
            Kind::NameNodeRestart => {
                // One NameNode serves every server: the node drawn for it means nothing.
                let what = format!(
                    "{} for {} s (MiniDFS: every server's HDFS)",
                    f.kind.name(),
                    hold.as_secs()
                );
                match bg.dfs.take() {
                    None => (what, Err(anyhow::anyhow!("the soak runs no HDFS"))),
                    Some(mut dfs) => {
                        let (sh, stop, node) = (shared.clone(), stop.clone(), f.node);
                        let task = tokio::spawn(async move {
                            let r = super::hdfs::restart(&mut dfs, hold, &stop).await;
                            Back {
                                logged: logged(start, sh.now(), node, what, r),
                                disk: None,
                                dfs: Some(dfs),
                            }
                        });
                        bg.running.push((Held::NameNode, node, task));
                        continue;
                    }
                }
            }
            Kind::S3Freeze => {
                // One S3 server serves every server: the node drawn for it means nothing.
                let what = format!(
                    "{} for {} s (every server's object storage)",
                    f.kind.name(),
                    hold.as_secs()
                );
                match &s3 {
                    None => (what, Err(anyhow::anyhow!("the soak runs no S3 server"))),
                    Some(server) => {
                        let (sh, stop, node) = (shared.clone(), stop.clone(), f.node);
                        let server = Arc::clone(server);
                        let task = tokio::spawn(async move {
                            let r = super::s3::freeze(&server, hold, &stop).await;
                            Back {
                                logged: logged(start, sh.now(), node, what, r),
                                disk: None,
                                dfs: None,
                            }
                        });
                        bg.running.push((Held::S3, node, task));
                        continue;
                    }
                }
            }
            Kind::DiskFreeze | Kind::DiskRemove => {
                match bg.disks.get_mut(f.node).and_then(Option::take) {
                    None => (
                        f.kind.name().to_string(),
                        Err(anyhow::anyhow!("server{} has no loop disk", f.node)),
                    ),
                    Some(mut disk) => {
                        let (sh, stop, f) = (shared.clone(), stop.clone(), f.clone());
                        let node = f.node;
                        let task = tokio::spawn(async move {
                            let (what, r) =
                                super::disk_faults::apply(&mut disk, &sh, &f, hold, &stop).await;
                            Back {
                                logged: logged(start, sh.now(), f.node, what, r),
                                disk: Some((f.node, disk)),
                                dfs: None,
                            }
                        });
                        bg.running.push((Held::Disk(node), node, task));
                        continue;
                    }
                }
            }
            Kind::DiskFill => {
                let dir = cluster.nodes[f.node].data_paths[f.path].clone();
                let r = tokio::task::spawn_blocking(move || fill(&dir)).await;
                match r {
                    Ok(Ok((path, bytes))) => {
                        fillers.push((shared.now() + hold.as_secs_f64(), f.node, path.clone()));
                        (
                            format!(
                                "disk fill: {} MiB into {}",
                                bytes >> 20,
                                path.parent().unwrap_or(&path).display()
                            ),
                            Ok(()),
                        )
                    }
                    Ok(Err(e)) => (f.kind.name().to_string(), Err(e.into())),
                    Err(e) => (f.kind.name().to_string(), Err(e.into())),
                }
            }
        };
        log.push(logged(start, shared.now(), f.node, what, result));
    }
    // The running holds end on their own (or at once on `stop`), and give their disks back.
    bg.finish_all(&mut log, shared.now()).await;
    // Wait out the last fillers so every disk is empty again for the final checks.
    while !fillers.is_empty() && !stop.is_cancelled() {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        if fillers.iter().all(|(t, ..)| *t > shared.now()) {
            continue;
        }
        break;
    }
    cluster.loop_disks = bg.disks.into_iter().flatten().collect();
    let (mut log, restarts) = cleanup(log, restarts, fillers, &shared);
    log.sort_by(|a, b| a.at.total_cmp(&b.at));
    (log, restarts, bg.dfs)
}

/// Removes a filler; true when that failed. A filler already gone is fine: its disk was
/// removed (and replaced by an empty one) while it was full.
fn remove_filler(path: &Path) -> bool {
    match std::fs::remove_file(path) {
        Ok(()) => false,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// Removes any filler still present (the final checks run on empty disks) and logs it.
fn cleanup(
    mut log: Vec<Logged>,
    restarts: Vec<Restart>,
    fillers: Vec<(f64, usize, PathBuf)>,
    shared: &super::cluster::Shared,
) -> (Vec<Logged>, Vec<Restart>) {
    for (_, node, path) in fillers {
        let failed = remove_filler(&path);
        log.push(Logged {
            at: shared.now(),
            took: 0.0,
            node,
            what: format!("disk fill removed ({})", path.display()),
            failed,
        });
    }
    (log, restarts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind comes once per round of `n`.
    fn rounds_of(s: &[Fault], n: usize) {
        assert!(s.len() >= n, "{s:?}");
        for round in s.chunks_exact(n) {
            let mut kinds: Vec<String> = round.iter().map(|f| format!("{:?}", f.kind)).collect();
            kinds.sort();
            kinds.dedup();
            assert_eq!(kinds.len(), n, "{round:?}");
        }
    }

    #[test]
    fn same_seed_same_schedule() {
        let a = schedule(7, 600.0, 20.0, 20.0, Parts::all());
        let b = schedule(7, 600.0, 20.0, 20.0, Parts::all());
        let c = schedule(8, 600.0, 20.0, 20.0, Parts::all());
        let key = |s: &[Fault]| {
            s.iter()
                .map(|f| (f.at.to_bits(), f.kind, f.node, f.path))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
        assert!(a.iter().all(|f| f.at >= 10.0 && f.at <= 570.0));
        assert!(a
            .iter()
            .filter(|f| f.kind == Kind::CoordinatorStop)
            .all(|f| f.node < COORDINATORS));
        assert!(a
            .iter()
            .filter(|f| matches!(f.kind, Kind::DiskFreeze | Kind::DiskRemove))
            .all(|f| f.path == LOOP_PATH));
        rounds_of(&a, 10);
        assert!(a
            .iter()
            .filter(|f| matches!(f.kind, Kind::Kill | Kind::Term | Kind::Takeover))
            .all(|f| f.node < LONG_LIVED));
        assert!(
            a.iter().any(|f| f.node == LONG_LIVED),
            "other faults still hit it"
        );
        // Faults come within the hold (20 s) of a background fault, and only after one
        // (other gaps are 20-60 s here).
        let o = schedule(7, 1200.0, 40.0, 20.0, Parts::all());
        let close: Vec<(&Fault, &Fault)> = o
            .windows(2)
            .map(|w| (&w[0], &w[1]))
            .filter(|(x, y)| y.at - x.at < 20.0)
            .collect();
        assert!(close.len() >= 3, "{o:?}");
        assert!(close
            .iter()
            .all(|(x, y)| x.kind.overlaps() && y.at - x.at >= 4.0));
        // Without the soak's mounts, no disk is filled, frozen or removed (it would be the
        // host's disk).
        let no_disks = schedule(
            7,
            600.0,
            20.0,
            20.0,
            Parts {
                disks: false,
                ..Parts::all()
            },
        );
        assert!(no_disks.iter().all(|f| !f.kind.needs_disks()));
        rounds_of(&no_disks, 7);
        // Outside the soak's own network namespace, no stall (it would be the host's
        // firewall).
        let no_net = schedule(
            7,
            600.0,
            20.0,
            20.0,
            Parts {
                net: false,
                ..Parts::all()
            },
        );
        assert!(no_net.iter().all(|f| f.kind != Kind::NetStall));
        rounds_of(&no_net, 9);
        // NameNode restarts only with a MiniDFS.
        let no_hdfs = schedule(
            7,
            600.0,
            20.0,
            20.0,
            Parts {
                hdfs: false,
                ..Parts::all()
            },
        );
        assert!(no_hdfs.iter().all(|f| f.kind != Kind::NameNodeRestart));
        rounds_of(&no_hdfs, 9);
        // Store freezes only with an S3 server.
        let no_s3 = schedule(
            7,
            600.0,
            20.0,
            20.0,
            Parts {
                s3: false,
                ..Parts::all()
            },
        );
        assert!(no_s3.iter().all(|f| f.kind != Kind::S3Freeze));
        rounds_of(&no_s3, 9);
    }
}
