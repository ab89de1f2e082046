//! The fault schedule: drawn up front from `--seed`, so the same seed and options give the
//! same faults at the same times on the same servers, and printed before the run starts.
//! Process faults are applied one after the other by one task; a disk stays full while later
//! faults fire, so disk-full overlaps restarts. A network stall, like a coordinator stop,
//! holds that task for its `hold`, and so does a frozen or removed disk: a server SIGTERMed
//! while its disk is frozen could not finish its final spill until the thaw, which only this
//! task would do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;

use super::cluster::{Cluster, COORDINATORS, LOOP_PATH, PATHS, SERVERS};

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
}

impl Kind {
    /// Whether the fault needs the soak's own mounts (it would hit the host's disk otherwise).
    fn needs_disks(self) -> bool {
        matches!(self, Kind::DiskFill | Kind::DiskFreeze | Kind::DiskRemove)
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
/// start to `tail` before the end (so the last restarts settle before the final checks).
/// Kinds come in rounds holding each kind once, in a seeded order, so even a 5-minute run
/// meets every kind. Disk fills need tmpfs data paths (`disks`), network stalls the soak's
/// own network namespace (`net`),
/// NameNode restarts a MiniDFS (`hdfs`).
pub fn schedule(
    seed: u64,
    duration: f64,
    interval: f64,
    tail: f64,
    disks: bool,
    net: bool,
    hdfs: bool,
) -> Vec<Fault> {
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
    ]
    .into_iter()
    .filter(|k| disks || !k.needs_disks())
    .filter(|k| net || *k != Kind::NetStall)
    .filter(|k| hdfs || *k != Kind::NameNodeRestart)
    .collect();
    let mut round: Vec<Kind> = Vec::new();
    let mut out = Vec::new();
    let mut at = 10.0;
    loop {
        at += interval * (0.5 + rng.unit());
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
            _ => rng.below(SERVERS as u64) as usize,
        };
        let drawn = rng.below(PATHS as u64) as usize;
        // Only the loop disk can be frozen (tmpfs cannot) or removed.
        let path = match kind {
            Kind::DiskFreeze | Kind::DiskRemove => LOOP_PATH,
            _ => drawn,
        };
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

/// Applies `plan` in order until `stop` is cancelled or the plan ends; fills stay for `hold`.
/// Returns the log and the restarts. Faults never overlap on the process level: one task
/// replaces processes, so each restart is measured on its own.
pub async fn run(
    cluster: &mut Cluster,
    mut hdfs: Option<&mut super::minidfs::MiniDfs>,
    plan: &[Fault],
    hold: Duration,
    stop: tokio_util::sync::CancellationToken,
) -> (Vec<Logged>, Vec<Restart>) {
    let shared = std::sync::Arc::clone(&cluster.shared);
    let mut log = Vec::new();
    let mut restarts = Vec::new();
    // Filler files to remove, with the time they go.
    let mut fillers: Vec<(f64, usize, PathBuf)> = Vec::new();
    for f in plan {
        loop {
            let now = shared.now();
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
                _ = stop.cancelled() => return cleanup(log, restarts, fillers, &shared),
                _ = tokio::time::sleep(Duration::from_secs_f64((next - now).max(0.0))) => {}
            }
        }
        if stop.is_cancelled() {
            break;
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
                let r = super::netstall::hold(shared.client_ip, &ports, hold, &stop).await;
                (
                    format!(
                        "{} of ports {} and {} for {} s",
                        f.kind.name(),
                        ports[0],
                        ports[1],
                        hold.as_secs()
                    ),
                    r,
                )
            }
            Kind::NameNodeRestart => {
                // One NameNode serves every server: the node drawn for it means nothing.
                let what = format!(
                    "{} for {} s (MiniDFS: every server's HDFS)",
                    f.kind.name(),
                    hold.as_secs()
                );
                match hdfs.as_deref_mut() {
                    Some(dfs) => (what, super::hdfs::restart(dfs, hold, &stop).await),
                    None => (what, Err(anyhow::anyhow!("the soak runs no HDFS"))),
                }
            }
            Kind::DiskFreeze | Kind::DiskRemove => {
                super::disk_faults::apply(cluster, f, hold, &stop).await
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
        let took = shared.now() - start;
        let failed = result.is_err();
        let what = match result {
            Ok(()) => what,
            Err(e) => format!("{what}: FAILED: {e:#}"),
        };
        eprintln!(
            "spillway-bench soak: t={start:.1}s server{} {what} ({took:.2} s)",
            f.node
        );
        log.push(Logged {
            at: start,
            took,
            node: f.node,
            what,
            failed,
        });
    }
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
    cleanup(log, restarts, fillers, &shared)
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
        let a = schedule(7, 600.0, 20.0, 30.0, true, true, true);
        let b = schedule(7, 600.0, 20.0, 30.0, true, true, true);
        let c = schedule(8, 600.0, 20.0, 30.0, true, true, true);
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
        rounds_of(&a, 9);
        // Without the soak's mounts, no disk is filled, frozen or removed (it would be the
        // host's disk).
        let no_disks = schedule(7, 600.0, 20.0, 30.0, false, true, true);
        assert!(no_disks.iter().all(|f| !f.kind.needs_disks()));
        rounds_of(&no_disks, 6);
        // Outside the soak's own network namespace, no stall (it would be the host's
        // firewall).
        let no_net = schedule(7, 600.0, 20.0, 30.0, true, false, true);
        assert!(no_net.iter().all(|f| f.kind != Kind::NetStall));
        rounds_of(&no_net, 8);
        // NameNode restarts only with a MiniDFS.
        let no_hdfs = schedule(7, 600.0, 20.0, 30.0, true, true, false);
        assert!(no_hdfs.iter().all(|f| f.kind != Kind::NameNodeRestart));
        rounds_of(&no_hdfs, 8);
    }
}
