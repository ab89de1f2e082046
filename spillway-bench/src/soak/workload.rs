//! The generator apps. Each app: pick a server (the coordinator's assignment for every other
//! app, round-robin otherwise), register, write small blocks over every partition, report and
//! commit per map, `finishShuffle`, read back and verify every block, then unregister, or stay
//! registered (with heartbeats) for the final re-verification.
//!
//! How an app is counted (see the module doc of `soak` for why):
//! - **failed and retried**: any call failed before `finishShuffle` returned SUCCESS, or the
//!   server was SIGKILLed while the app was writing (its memory is not covered). The app is run
//!   again under a new id, as Spark retries the task, up to [`RETRIES`] times.
//! - **acknowledged durable**: `finishShuffle` returned SUCCESS with no SIGKILL of the server
//!   since registration. From then on every read that completes must return every block
//!   intact; reads that fail on a transport error (a restart) are retried.
//! - **lost** blocks: blocks of a durable app a completed read did not return (or a result
//!   bitmap without them); **corrupt**: a block returned with other bytes or a bad CRC, or an
//!   id that was never written, whatever the app's state.
//! - **gone** blocks: blocks an app with files on a disk that was removed (`disk_faults.rs`)
//!   did not get back, or all its blocks when its read fails: that data went with the disk.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::cluster::{Shared, COORDINATORS, SERVERS};
use super::remote_read::RemoteReader;
use super::schedule::Rng;
use crate::client::Transport;
use crate::driver::{self, Target, Verification, Workload};
use crate::payload::{Payloads, Shape};
use spillway::ids::BlockIdLayout;
use spillway::proto;

/// Attempts after the first one for an app that fails before it is durable.
pub const RETRIES: usize = 3;
/// A durable app's read is retried this long while the server is restarting.
const READ_PATIENCE: Duration = Duration::from_secs(120);
/// An unregister that has not answered in this long is given up: the server expires the app
/// after its heartbeats stop, and the settle check sees whether it did.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest block: the payload pool is cut for it.
pub const MAX_BLOCK: usize = 16 << 10;

/// What the apps did, counted as they finish.
#[derive(Default, Debug)]
pub struct Counts {
    /// Apps started (first attempts).
    pub started: AtomicU64,
    /// Apps whose blocks were all verified after finishShuffle.
    pub verified: AtomicU64,
    /// Attempts that failed before being durable and were run again.
    pub failed_retried: AtomicU64,
    /// Apps still failing after [`RETRIES`] retries (not a loss: nothing was acknowledged).
    pub abandoned: AtomicU64,
    /// Apps registered through the coordinator's assignment.
    pub via_coordinator: AtomicU64,
    /// Assignment requests that failed (a coordinator down), and fell back to round-robin.
    pub coordinator_fallbacks: AtomicU64,
    /// Blocks verified in all reads (including the final re-read).
    pub blocks_verified: AtomicU64,
    /// Blocks of durable apps not returned by a completed read.
    pub lost: AtomicU64,
    /// Blocks returned with wrong bytes, a wrong CRC or an unknown id.
    pub corrupt: AtomicU64,
    /// Blocks (and bad result bitmaps) of apps that had files on a removed disk, not read
    /// back: gone with the disk, not lost.
    pub gone: AtomicU64,
    /// Durable apps whose read never completed within the patience window.
    pub unreadable: AtomicU64,
    /// Apps re-verified at the end or when evicted from the kept set.
    pub reverified: AtomicU64,
    /// Apps whose data goes over gRPC.
    pub grpc_apps: AtomicU64,
    /// Of which verified.
    pub grpc_verified: AtomicU64,
    /// Apps whose data goes over the Netty plane.
    pub netty_apps: AtomicU64,
    /// Of which verified.
    pub netty_verified: AtomicU64,
    /// Apps (first attempts) registered with the soak's HDFS as remote storage.
    pub hdfs_apps: AtomicU64,
    /// Blocks verified that were read from HDFS (not served by the server).
    pub blocks_from_hdfs: AtomicU64,
    /// Reads of HDFS apps that missed blocks and were read again (as a Spark reduce task whose
    /// block-id check fails is retried), before any block counted as lost.
    pub hdfs_rereads: AtomicU64,
    /// Apps (first attempts) registered with the soak's S3 bucket as remote storage.
    pub s3_apps: AtomicU64,
    /// Blocks verified that were read from the bucket (not served by the server).
    pub blocks_from_s3: AtomicU64,
    /// Reads of S3 apps that missed blocks and were read again, as for HDFS. Object pairs are
    /// immutable and their index is written last, so this should stay 0.
    pub s3_rereads: AtomicU64,
}

/// A share of apps that registers one remote storage, and how to read them.
pub struct RemoteApps {
    /// Reads the apps' remote files back as the client does.
    pub reader: RemoteReader,
    /// Share of all apps (seeded) that register it.
    pub share: f64,
}

/// A durable app kept registered for a later re-read.
#[derive(Clone)]
struct Kept {
    node: usize,
    workload: Workload,
}

/// The workload's shared state.
pub struct Generator {
    shared: Arc<Shared>,
    payloads: Arc<Payloads>,
    /// The counts.
    pub counts: Counts,
    /// First problems seen, for the report.
    pub problems: Mutex<Vec<String>>,
    kept: Mutex<Vec<Kept>>,
    /// Apps registered now (id → server), heartbeated so none expires while waiting out a
    /// restart or NO_BUFFER.
    live: Mutex<HashMap<String, usize>>,
    next_rr: AtomicUsize,
    keep_share: f64,
    keep_max: usize,
    app_timeout: Duration,
    run_id: String,
    /// Set once before the first app: the soak's remote storages (HDFS, S3), each with its
    /// share of the apps.
    remotes: std::sync::OnceLock<Vec<RemoteApps>>,
}

impl Generator {
    /// A generator over `shared`'s servers.
    pub fn new(
        shared: Arc<Shared>,
        keep_share: f64,
        keep_max: usize,
        app_timeout: Duration,
    ) -> Arc<Generator> {
        let run_id = format!(
            "{}_{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis(),
            std::process::id()
        );
        Arc::new(Generator {
            shared,
            payloads: Arc::new(Payloads::new(MAX_BLOCK)),
            counts: Counts::default(),
            problems: Mutex::new(Vec::new()),
            kept: Mutex::new(Vec::new()),
            live: Mutex::new(HashMap::new()),
            next_rr: AtomicUsize::new(0),
            keep_share,
            keep_max,
            app_timeout,
            run_id,
            remotes: std::sync::OnceLock::new(),
        })
    }

    /// Makes each remote's seeded share of the apps started from now on register it as remote
    /// storage (the shares add up to at most 1; the rest use local disks only).
    pub fn use_remotes(&self, remotes: Vec<RemoteApps>) {
        let _ = self.remotes.set(remotes);
    }

    /// The counters of the remote storage at `path` (apps, blocks read from it, rereads).
    fn remote_counts(&self, path: Option<&str>) -> Option<[&AtomicU64; 3]> {
        let c = &self.counts;
        match path? {
            p if p.starts_with("s3a://") => Some([&c.s3_apps, &c.blocks_from_s3, &c.s3_rereads]),
            _ => Some([&c.hdfs_apps, &c.blocks_from_hdfs, &c.hdfs_rereads]),
        }
    }

    fn problem(&self, p: String) {
        eprintln!("spillway-bench soak: {p}");
        let mut v = self.problems.lock();
        if v.len() < 50 {
            v.push(p);
        }
    }

    fn target(&self, node: usize) -> Target {
        Target {
            grpc: self.shared.client_grpc(node),
            netty: Some(self.shared.client_netty(node)),
        }
    }

    /// Asks coordinator `c` for one server for the shuffle; the server's index.
    async fn assign(&self, c: usize, app: &str, partitions: usize) -> anyhow::Result<usize> {
        let ch = crate::client::channel(self.shared.client_grpc(c)).await?;
        let mut client = proto::coordinator_server_client::CoordinatorServerClient::new(ch);
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            client.get_shuffle_assignments(proto::GetShuffleServerRequest {
                application_id: app.to_owned(),
                shuffle_id: 0,
                partition_num: partitions as i32,
                partition_num_per_range: 1,
                data_replica: 1,
                assignment_shuffle_server_number: 1,
                ..Default::default()
            }),
        )
        .await??
        .into_inner();
        anyhow::ensure!(
            r.status == proto::StatusCode::Success as i32,
            "getShuffleAssignments: status {} {}",
            r.status,
            r.ret_msg
        );
        let port = r
            .assignments
            .first()
            .and_then(|a| a.server.first())
            .map(|s| s.port)
            .ok_or_else(|| anyhow::anyhow!("getShuffleAssignments: no server"))?;
        self.shared
            .nodes
            .iter()
            .position(|n| i32::from(n.grpc.port()) == port)
            .ok_or_else(|| anyhow::anyhow!("assigned an unknown server port {port}"))
    }

    /// Runs app number `n` (drawn from `rng`) with its retries.
    pub async fn app(self: Arc<Self>, n: u64, mut rng: Rng) {
        self.counts.started.fetch_add(1, Ordering::Relaxed);
        let block_size = (4 << 10) + rng.below(12 << 10) as usize + 1;
        let shape = Shape {
            maps: 2 + rng.below(4) as usize,
            partitions: 4 + rng.below(12) as usize,
            block_size: block_size.min(MAX_BLOCK),
            blocks_per_partition: 1 + rng.below(4) as usize,
            layout: BlockIdLayout::DEFAULT,
        };
        let keep = rng.unit() < self.keep_share;
        // Map outputs wait in memory for the last map before the shuffle is finished, as a
        // stage's reducers wait for its slowest map: this is the window a SIGKILL hits.
        let pause = Duration::from_millis(rng.below(3000));
        // Half the apps send and read their blocks over the Netty plane (control calls stay
        // gRPC), as a cluster serves clients configured either way. Drawn last, so the
        // shapes a seed gave before the Netty plane was added stay the same.
        let transport = if rng.unit() < 0.5 {
            self.counts.netty_apps.fetch_add(1, Ordering::Relaxed);
            Transport::Netty
        } else {
            self.counts.grpc_apps.fetch_add(1, Ordering::Relaxed);
            Transport::Grpc
        };
        // Drawn after the plane, so the shapes above are the same with and without remote
        // storage. One draw over the remotes' shares in order: HDFS apps are the same apps
        // with and without S3.
        let remote_storage = self.remotes.get().and_then(|remotes| {
            let draw = rng.unit();
            let mut upto = 0.0;
            remotes.iter().find_map(|r| {
                upto += r.share;
                (draw < upto).then(|| r.reader.remote_path())
            })
        });
        if let Some([apps, ..]) = self.remote_counts(remote_storage.as_deref()) {
            apps.fetch_add(1, Ordering::Relaxed);
        }
        for attempt in 0..=RETRIES {
            if attempt > 0 {
                // A Spark task retry comes after the failed task is reported and rescheduled,
                // not at once; 1, 2, 4 s lets a coordinator notice a stopped server.
                tokio::time::sleep(Duration::from_secs(1 << (attempt - 1))).await;
            }
            let app = format!("soak_{}_{n}_{attempt}", self.run_id);
            let node = if n.is_multiple_of(2) {
                let c = (n / 2) as usize % COORDINATORS;
                // Bounded as a whole (connect included): a stalled coordinator is a fallback.
                let assigned = tokio::time::timeout(
                    Duration::from_secs(5),
                    self.assign(c, &app, shape.partitions),
                )
                .await;
                match assigned {
                    Ok(Ok(node)) => {
                        self.counts.via_coordinator.fetch_add(1, Ordering::Relaxed);
                        node
                    }
                    _ => {
                        self.counts
                            .coordinator_fallbacks
                            .fetch_add(1, Ordering::Relaxed);
                        self.next_rr.fetch_add(1, Ordering::Relaxed) % SERVERS
                    }
                }
            } else {
                self.next_rr.fetch_add(1, Ordering::Relaxed) % SERVERS
            };
            let w = Workload {
                shape,
                app: app.clone(),
                shuffle: 0,
                request_bytes: 64 << 10,
                concurrency: 2,
                grpc_connections: 1,
                read_size: 1 << 20,
                backoff: Duration::from_millis(10),
                transport,
                remote_storage: remote_storage.clone(),
            };
            self.live.lock().insert(app.clone(), node);
            let kills = self.shared.nodes[node].kills.load(Ordering::Relaxed);
            let target = self.target(node);
            let written = tokio::time::timeout(self.app_timeout, async {
                driver::write(&target, &w, &self.payloads).await?;
                tokio::time::sleep(pause).await;
                driver::finish(&target, &w).await
            })
            .await;
            let killed = self.shared.nodes[node].kills.load(Ordering::Relaxed) != kills;
            match written {
                Ok(Ok(_)) if !killed => {}
                other => {
                    // Not acknowledged as durable: as a Spark task, give up this attempt,
                    // drop what the server holds of it and run again.
                    self.counts.failed_retried.fetch_add(1, Ordering::Relaxed);
                    let why = match other {
                        Ok(Ok(_)) => "its server was SIGKILLed before finishShuffle".to_string(),
                        Ok(Err(e)) => format!("{e:#}"),
                        Err(_) => format!("not durable within {:?}", self.app_timeout),
                    };
                    eprintln!(
                        "spillway-bench soak: t={:.1}s app {app} on server{node} failed and is retried: {why}",
                        self.shared.now()
                    );
                    let _ =
                        tokio::time::timeout(CLEANUP_TIMEOUT, driver::cleanup(&target, &w)).await;
                    self.live.lock().remove(&app);
                    continue;
                }
            }
            if self.verify(node, &w).await {
                self.counts.verified.fetch_add(1, Ordering::Relaxed);
                match transport {
                    Transport::Grpc => &self.counts.grpc_verified,
                    Transport::Netty => &self.counts.netty_verified,
                }
                .fetch_add(1, Ordering::Relaxed);
            }
            if keep {
                let evicted = {
                    let mut kept = self.kept.lock();
                    kept.push(Kept { node, workload: w });
                    (kept.len() > self.keep_max).then(|| kept.remove(0))
                };
                if let Some(old) = evicted {
                    self.reverify(old).await;
                }
            } else {
                // Bounded, as every call of an app: a stalled server must not hold the app.
                let _ = tokio::time::timeout(CLEANUP_TIMEOUT, driver::cleanup(&target, &w)).await;
                self.live.lock().remove(&app);
            }
            return;
        }
        self.counts.abandoned.fetch_add(1, Ordering::Relaxed);
        eprintln!("spillway-bench soak: app {n} abandoned after {RETRIES} retries");
    }

    /// Reads a durable app back, retrying reads that fail (a restarting server) for
    /// [`READ_PATIENCE`]; counts lost and corrupt blocks of the first read that completes.
    /// True when every block came back intact.
    async fn verify(&self, node: usize, w: &Workload) -> bool {
        let target = self.target(node);
        let deadline = tokio::time::Instant::now() + READ_PATIENCE;
        let extra = self.remote_read(node, w);
        loop {
            match tokio::time::timeout(
                Duration::from_secs(60),
                driver::read_verify_with(&target, w, &self.payloads, extra.clone()),
            )
            .await
            {
                // An HDFS file pair whose append failed (the NameNode went away) reads shorter
                // until the NameNode has recovered its lease; the client's block-id check then
                // fails the reduce task and Spark runs it again, so such a read is retried.
                Ok(Ok((_, v)))
                    if extra.is_some()
                        && v.lost > 0
                        && v.corrupt == 0
                        && !self.gone(node, w)
                        && tokio::time::Instant::now() < deadline =>
                {
                    if let Some([_, _, rereads]) = self.remote_counts(w.remote_storage.as_deref()) {
                        rereads.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                Ok(Ok((_, v))) => {
                    if !v.ok() {
                        // Blocks missing while a disk is being pulled out may be gone with it:
                        // judge them once the list of the apps it held is complete.
                        while self.shared.nodes[node].removing.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                    return self.account(node, w, v);
                }
                Ok(Err(_)) | Err(_) if self.gone(node, w) => {
                    // Failing is one of the answers allowed once its files went with a disk;
                    // waiting for the disk to come back would wait forever.
                    let s = w.shape;
                    let blocks = (s.maps * s.partitions * s.blocks_per_partition) as u64;
                    self.counts.gone.fetch_add(blocks, Ordering::Relaxed);
                    return false;
                }
                Ok(Err(e)) if tokio::time::Instant::now() >= deadline => {
                    self.counts.unreadable.fetch_add(1, Ordering::Relaxed);
                    self.problem(format!(
                        "server{node} app {}: durable, but no read completed in {} s: {e:#}",
                        w.app,
                        READ_PATIENCE.as_secs()
                    ));
                    return false;
                }
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    self.counts.unreadable.fetch_add(1, Ordering::Relaxed);
                    self.problem(format!("server{node} app {}: read hung", w.app));
                    return false;
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// The remote read of an app registered with remote storage: its server's files there.
    fn remote_read(&self, node: usize, w: &Workload) -> Option<driver::ExtraRead> {
        let path = w.remote_storage.as_ref()?;
        let reader = self
            .remotes
            .get()?
            .iter()
            .find(|r| r.reader.remote_path() == *path)?
            .reader
            .clone();
        let (app, shuffle, server) = (w.app.clone(), w.shuffle, self.shared.nodes[node].grpc);
        Some(Arc::new(move |p| {
            let (reader, app) = (reader.clone(), app.clone());
            Box::pin(async move { reader.partition(&app, shuffle, p, server).await })
        }))
    }

    fn account(&self, node: usize, w: &Workload, v: Verification) -> bool {
        self.counts
            .blocks_verified
            .fetch_add(v.blocks, Ordering::Relaxed);
        if let Some([_, from_remote, _]) = self.remote_counts(w.remote_storage.as_deref()) {
            from_remote.fetch_add(v.from_extra, Ordering::Relaxed);
        }
        // A result bitmap missing ids is a loss of the report, counted once per partition.
        let lost = v.lost + v.bad_results;
        let gone = self.gone(node, w);
        if gone {
            self.counts.gone.fetch_add(lost, Ordering::Relaxed);
        } else {
            self.counts.lost.fetch_add(lost, Ordering::Relaxed);
        }
        self.counts.corrupt.fetch_add(v.corrupt, Ordering::Relaxed);
        if !v.ok() && (!gone || v.corrupt > 0) {
            self.problem(format!(
                "server{node} app {}: {} lost, {} corrupt, {} bad results: {:?}",
                w.app, v.lost, v.corrupt, v.bad_results, v.problems
            ));
        }
        v.ok()
    }

    /// Whether the app had files on a disk of `node` that was removed.
    fn gone(&self, node: usize, w: &Workload) -> bool {
        self.shared.nodes[node].gone.lock().contains(&w.app)
    }

    async fn reverify(&self, k: Kept) {
        self.verify(k.node, &k.workload).await;
        self.counts.reverified.fetch_add(1, Ordering::Relaxed);
        let _ = tokio::time::timeout(
            CLEANUP_TIMEOUT,
            driver::cleanup(&self.target(k.node), &k.workload),
        )
        .await;
        self.live.lock().remove(&k.workload.app);
    }

    /// Re-reads every kept app (the end of the run).
    pub async fn reverify_all(&self) {
        let kept = std::mem::take(&mut *self.kept.lock());
        for k in kept {
            self.reverify(k).await;
        }
    }

    /// Sends `appHeartbeat` for every registered app every 5 s (as the client does every 10 s)
    /// until `stop`, so apps waiting out a fault are not expired by the server.
    pub async fn heartbeats(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let mut clients: HashMap<
            SocketAddr,
            proto::shuffle_server_client::ShuffleServerClient<tonic::transport::Channel>,
        > = HashMap::new();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            let apps: Vec<(String, usize)> = self
                .live
                .lock()
                .iter()
                .map(|(a, n)| (a.clone(), *n))
                .collect();
            // A server that failed once is skipped for the rest of the round: with its network
            // stalled every call would wait out its timeout, and a round of dozens of apps
            // would starve the other servers' apps of heartbeats until they expire.
            let mut down: HashSet<SocketAddr> = HashSet::new();
            for (app, node) in apps {
                let addr = self.shared.client_grpc(node);
                if down.contains(&addr) {
                    continue;
                }
                if let std::collections::hash_map::Entry::Vacant(slot) = clients.entry(addr) {
                    let connected =
                        tokio::time::timeout(Duration::from_secs(2), crate::client::channel(addr))
                            .await;
                    let Ok(Ok(ch)) = connected else {
                        down.insert(addr);
                        continue;
                    };
                    slot.insert(proto::shuffle_server_client::ShuffleServerClient::new(ch));
                }
                if let Some(c) = clients.get_mut(&addr) {
                    let req = proto::AppHeartBeatRequest { app_id: app };
                    if tokio::time::timeout(Duration::from_secs(2), c.app_heartbeat(req))
                        .await
                        .map_or(true, |r| r.is_err())
                    {
                        clients.remove(&addr);
                        down.insert(addr);
                    }
                }
            }
        }
    }
}
