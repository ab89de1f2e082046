//! Applies the fault schedule (`schedule`). Process faults (restarts, upgrades, coordinator stops) are applied one after the other by
//! one task. Faults with a hold (a full disk, a network stall, a NameNode restart, a frozen or
//! removed disk) last it in the background, and the schedule often puts the next fault inside
//! that hold: a restart while a disk is frozen or removed, a stall during a NameNode restart.
//! Two faults on the same thing (one loop disk, the NameNode, the network) never overlap: the
//! second waits for the first to end.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::cluster::{Cluster, LOOP_PATH};
use super::disks::LoopDisk;
use super::minidfs::MiniDfs;
use super::s3::S3Server;
use super::schedule::{Fault, Kind};

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
