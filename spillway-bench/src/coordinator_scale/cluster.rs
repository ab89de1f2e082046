//! The simulated cluster: N shuffle servers heartbeating every coordinator in the quorum as
//! Uniffle servers do, M apps registered and heartbeating as the Java client's driver does, and
//! a Spark-like stream of `getShuffleAssignments`, each answer checked (`check.rs`).
//!
//! Every simulated server has its own loopback address (`127.10.a.b`, so the coordinator's
//! `PREFER_DIFF` host spreading sees distinct hosts), its own gRPC connection to each
//! coordinator (as each real server holds one), and its own HTTP port on that address serving
//! the two counters the dashboard's sampler reads (`/metrics/server`), so the sampler does the
//! work it does in production. Its heartbeat carries what a 0.10 server sends
//! (`tasks::heartbeat::build_request`): 4–8 local disks with usage, the apps it holds (the
//! apps assignments placed on it) with their sizes, tags, memory figures, version and start
//! time. A few servers are UNHEALTHY or DECOMMISSIONING: they must never be assigned.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hdrhistogram::Histogram;
use parking_lot::{Mutex, RwLock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint};

use super::check::{self, Known};
use spillway::proto::coordinator_server_client::CoordinatorServerClient;
use spillway::proto::{self, ServerStatus};

/// Servers per shuffle: the coordinator's default `shuffle_server_number` (Java's
/// `rss.coordinator.shuffle.nodes.max`), which the simulated coordinators keep.
pub const NODES_MAX: usize = 9;
/// gRPC connections the apps' calls share per coordinator (a real cluster has one per
/// driver; thousands of idle drivers' connections are left out).
const APP_CHANNELS: usize = 64;
/// Grpc and Netty ports every simulated server advertises (they are on distinct hosts).
const GRPC_PORT: i32 = 19999;
const NETTY_PORT: i32 = 17000;
const GIB: i64 = 1 << 30;

/// A deterministic generator (splitmix64): the same run asks the same things.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// One simulated server.
pub struct SimServer {
    /// `<ip>-<grpc>-<netty>`, as a 0.10 server with Netty names itself.
    pub id: String,
    /// Its loopback address.
    pub ip: Ipv4Addr,
    tags: Vec<String>,
    status: ServerStatus,
    disks: usize,
    capacity: i64,
    start_ms: i64,
    /// Apps it holds (app index → partitions), as its heartbeat reports them.
    apps: Mutex<BTreeMap<u32, u32>>,
}

/// A coordinator the cluster talks to.
pub struct Target {
    /// Its gRPC address.
    pub addr: SocketAddr,
    /// One connection per simulated server (lazy: made at the first heartbeat).
    server_channels: Vec<Channel>,
    app_channels: Vec<Channel>,
}

impl Target {
    fn new(addr: SocketAddr, servers: usize) -> anyhow::Result<Target> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))?
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(10))
            .tcp_nodelay(true);
        Ok(Target {
            addr,
            server_channels: (0..servers).map(|_| endpoint.connect_lazy()).collect(),
            app_channels: (0..APP_CHANNELS).map(|_| endpoint.connect_lazy()).collect(),
        })
    }

    /// A client over app connection `n`.
    pub fn app_client(&self, n: usize) -> CoordinatorServerClient<Channel> {
        CoordinatorServerClient::new(self.app_channels[n % APP_CHANNELS].clone())
    }
}

/// Assignment outcomes since the last [`Cluster::take_stats`].
pub struct AssignStats {
    /// Latency of answered requests, µs (including a failed try of a dead coordinator first).
    pub latency: Histogram<u64>,
    /// Answers that passed the check.
    pub correct: u64,
    /// Answers that failed it (the first few reasons are in `errors`).
    pub wrong: u64,
    /// Requests no coordinator answered.
    pub unanswered: u64,
    /// The first reasons.
    pub errors: Vec<String>,
}

impl AssignStats {
    fn new() -> AssignStats {
        AssignStats {
            latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("static bounds are valid"),
            correct: 0,
            wrong: 0,
            unanswered: 0,
            errors: Vec::new(),
        }
    }
}

/// The first correct answer from a given coordinator after a given instant (fail-over).
struct Watch {
    target: SocketAddr,
    since: Instant,
    first_ok: Option<Instant>,
}

/// The simulated cluster.
pub struct Cluster {
    /// The servers, in id order of creation.
    pub servers: Vec<SimServer>,
    /// What the checker knows of each.
    pub known: HashMap<String, Known>,
    /// App ids.
    pub apps: Vec<String>,
    interval: Duration,
    /// The port every server's HTTP counters listen on (one number, one address each).
    jetty_port: u16,
    targets: RwLock<Vec<Arc<Target>>>,
    /// Next server to heartbeat: the beats go round in index order.
    cursor: AtomicUsize,
    app_cursor: AtomicUsize,
    /// Heartbeats (server and app) that failed, all coordinators counted.
    pub beat_failures: AtomicU64,
    /// Server heartbeats sent, all coordinators counted.
    pub beats: AtomicU64,
    shuffle_seq: AtomicU64,
    stats: Mutex<AssignStats>,
    watch: Mutex<Option<Watch>>,
    assigning: AtomicBool,
    /// The `shuffle.nodes.max` answers are checked against.
    nodes_max: usize,
    rng: Mutex<Rng>,
    stop: CancellationToken,
}

impl Cluster {
    /// `servers` servers and `apps` apps, heartbeating every `interval` once started. Binds
    /// each server's HTTP port (the same port number on every server's address).
    pub async fn new(
        servers: usize,
        apps: usize,
        interval: Duration,
        nodes_max: usize,
    ) -> anyhow::Result<Arc<Cluster>> {
        anyhow::ensure!(servers > 0 && servers <= 250 * 256, "1 to 64,000 servers");
        let stop = CancellationToken::new();
        let ip_of = |i: usize| Ipv4Addr::new(127, 10, (i / 250) as u8, (i % 250 + 1) as u8);
        let jetty = serve_counters(servers, ip_of, &stop).await?;
        let now_ms = spillway::clock::now_ms();
        let mut sims = Vec::with_capacity(servers);
        let mut known = HashMap::with_capacity(servers);
        for i in 0..servers {
            let ip = ip_of(i);
            let id = format!("{ip}-{GRPC_PORT}-{NETTY_PORT}");
            // One in four servers runs gRPC only; 1 % UNHEALTHY, 0.5 % DECOMMISSIONING.
            let mut tags = vec!["ss_v5".to_owned(), "ss_v4".to_owned(), "GRPC".to_owned()];
            if i % 4 != 3 {
                tags.push("GRPC_NETTY".to_owned());
            }
            let status = match i % 200 {
                17 | 117 => ServerStatus::Unhealthy,
                67 => ServerStatus::Decommissioning,
                _ => ServerStatus::Active,
            };
            known.insert(
                id.clone(),
                Known {
                    ip: ip.to_string(),
                    port: GRPC_PORT,
                    tags: tags.clone(),
                    active: status == ServerStatus::Active,
                },
            );
            sims.push(SimServer {
                id,
                ip,
                tags,
                status,
                disks: 4 + i % 5,
                capacity: [48, 64, 96][i % 3] * GIB,
                start_ms: now_ms - (i as i64 % 97) * 3_600_000,
                apps: Mutex::new(BTreeMap::new()),
            });
        }
        let app_ids: Vec<String> = (0..apps)
            .map(|j| {
                format!(
                    "application_{}_{:04}_{j}",
                    1_764_000_000_000u64 + j as u64 / 500,
                    j % 10_000
                )
            })
            .collect();
        // Each app already holds data on NODES_MAX servers (its earlier shuffles).
        for j in 0..apps {
            for k in 0..NODES_MAX.min(servers) {
                let s = (j.wrapping_mul(2_654_435_761) + k * servers / NODES_MAX.min(servers))
                    % servers;
                sims[s].apps.lock().insert(j as u32, 100 + (j % 900) as u32);
            }
        }
        Ok(Arc::new(Cluster {
            servers: sims,
            known,
            apps: app_ids,
            interval,
            jetty_port: jetty,
            targets: RwLock::new(Vec::new()),
            cursor: AtomicUsize::new(0),
            app_cursor: AtomicUsize::new(0),
            beat_failures: AtomicU64::new(0),
            beats: AtomicU64::new(0),
            shuffle_seq: AtomicU64::new(0),
            stats: Mutex::new(AssignStats::new()),
            watch: Mutex::new(None),
            assigning: AtomicBool::new(false),
            nodes_max,
            rng: Mutex::new(Rng::new(0x5eed)),
            stop,
        }))
    }

    /// Adds a coordinator to the quorum: servers and apps heartbeat it from their next beat on,
    /// assignments try it after the ones added before. Returns the index of the server whose
    /// beat comes next (the order the new coordinator will hear of them in).
    pub fn add_target(&self, addr: SocketAddr) -> anyhow::Result<usize> {
        let target = Arc::new(Target::new(addr, self.servers.len())?);
        self.targets.write().push(target);
        Ok(self.cursor.load(Ordering::Relaxed) % self.servers.len())
    }

    /// The coordinator at `addr` leaves the quorum.
    pub fn remove_target(&self, addr: SocketAddr) {
        self.targets.write().retain(|t| t.addr != addr);
    }

    fn targets(&self) -> Vec<Arc<Target>> {
        self.targets.read().clone()
    }

    /// Registers every app with `addr` (`registerApplicationInfo`, 64 at a time), as each
    /// driver does with every coordinator of its quorum when it starts.
    pub async fn register_apps(&self, addr: SocketAddr) -> anyhow::Result<()> {
        let target = self
            .targets()
            .into_iter()
            .find(|t| t.addr == addr)
            .ok_or_else(|| anyhow::anyhow!("{addr} is not a target"))?;
        let mut calls = futures::stream::iter(self.apps.iter().enumerate().map(|(j, app)| {
            let mut client = target.app_client(j);
            let req = proto::ApplicationInfoRequest {
                app_id: app.clone(),
                user: format!("user{}", j % 37),
                version: Some("0.10.0".into()),
                git_commit_id: Some("a1b2c3d".into()),
            };
            async move { client.register_application_info(req).await }
        }))
        .buffer_unordered(64);
        while let Some(r) = calls.next().await {
            let r = r?.into_inner();
            anyhow::ensure!(r.status == 0, "registerApplicationInfo: {}", r.ret_msg);
        }
        Ok(())
    }

    /// What server `i` sends now.
    pub fn heartbeat(&self, i: usize) -> proto::ShuffleServerHeartBeatRequest {
        let s = &self.servers[i];
        let apps = s.apps.lock().clone();
        let t = spillway::clock::now_ms();
        // Memory moves with time so every beat differs a little, as a busy server's does.
        let used = (s.capacity / 100) * (20 + ((t / 1000) as i64 + i as i64) % 50);
        let pre = used / 10;
        let partitions: u64 = apps.values().map(|p| u64::from(*p)).sum();
        let disk_capacity = 3_600_000_000_000i64;
        proto::ShuffleServerHeartBeatRequest {
            server_id: Some(proto::ShuffleServerId {
                id: s.id.clone(),
                ip: s.ip.to_string(),
                port: GRPC_PORT,
                netty_port: NETTY_PORT,
                jetty_port: i32::from(self.jetty_port),
            }),
            used_memory: used,
            pre_allocated_memory: pre,
            available_memory: s.capacity - used,
            event_num_in_flush: (i % 5) as i32,
            tags: s.tags.clone(),
            is_healthy: None,
            status: Some(s.status as i32),
            storage_info: (0..s.disks)
                .map(|d| {
                    let mount = format!("/data{d}/rssdata");
                    let info = proto::StorageInfo {
                        mount_point: mount.clone(),
                        storage_media: if d % 2 == 0 { 1 } else { 2 },
                        capacity: disk_capacity,
                        used_bytes: disk_capacity / 100 * ((i + d) % 80) as i64,
                        status: 1,
                        ..Default::default()
                    };
                    (mount, info)
                })
                .collect(),
            version: Some("0.10.0".into()),
            git_commit_id: Some("a1b2c3d".into()),
            start_time_ms: Some(s.start_ms),
            application_info: apps
                .iter()
                .map(|(j, p)| {
                    let bytes = (i64::from(*p) * 8) << 20;
                    proto::ApplicationInfo {
                        app_id: self.apps[*j as usize].clone(),
                        partition_num: i64::from(*p),
                        memory_size: bytes / 8,
                        local_total_size: bytes - bytes / 8,
                        hadoop_total_size: 0,
                        total_size: bytes,
                        ..Default::default()
                    }
                })
                .collect(),
            display_metrics: HashMap::from([
                ("app".to_owned(), apps.len().to_string()),
                ("partition".to_owned(), partitions.to_string()),
            ]),
        }
    }

    /// Starts the server and app heartbeats: every server once per interval, every app once per
    /// interval (the client's `rss.client.heartBeat.interval` default is also 10 s), each
    /// spread evenly over the interval, to every coordinator in the quorum.
    pub fn start_beats(self: &Arc<Self>) {
        let me = Arc::clone(self);
        spread(
            self.servers.len() as f64 / self.interval.as_secs_f64(),
            self.stop.clone(),
            move || {
                let i = me.cursor.fetch_add(1, Ordering::Relaxed) % me.servers.len();
                let req = me.heartbeat(i);
                for target in me.targets() {
                    let mut client =
                        CoordinatorServerClient::new(target.server_channels[i].clone());
                    let (req, me) = (req.clone(), Arc::clone(&me));
                    tokio::spawn(async move {
                        me.beats.fetch_add(1, Ordering::Relaxed);
                        if client.heartbeat(req).await.is_err() {
                            me.beat_failures.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            },
        );
        let me = Arc::clone(self);
        spread(
            self.apps.len() as f64 / self.interval.as_secs_f64(),
            self.stop.clone(),
            move || {
                let j = me.app_cursor.fetch_add(1, Ordering::Relaxed) % me.apps.len();
                for target in me.targets() {
                    let mut client = target.app_client(j);
                    let req = proto::AppHeartBeatRequest {
                        app_id: me.apps[j].clone(),
                    };
                    let me = Arc::clone(&me);
                    tokio::spawn(async move {
                        if client.app_heartbeat(req).await.is_err() {
                            me.beat_failures.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            },
        );
    }

    /// Starts `rate` assignments per second (stopped with the cluster). Each goes to the
    /// quorum's coordinators in order until one answers, as the Java client's does.
    pub fn start_assignments(self: &Arc<Self>, rate: f64) {
        self.assigning.store(true, Ordering::Relaxed);
        let me = Arc::clone(self);
        spread(rate, self.stop.clone(), move || {
            if !me.assigning.load(Ordering::Relaxed) {
                return;
            }
            let (app, req) = me.next_request();
            let me = Arc::clone(&me);
            tokio::spawn(async move { me.assign_one(app, req).await });
        });
    }

    fn next_request(&self) -> (usize, proto::GetShuffleServerRequest) {
        let mut rng = self.rng.lock();
        let app = (rng.next() % self.apps.len() as u64) as usize;
        let partitions = rng.pick(&[200, 200, 400, 500, 1000, 2000]);
        let concurrency = rng.pick(&[100, 200, 400, 800]).min(partitions);
        let transport = if rng.next().is_multiple_of(3) {
            "GRPC_NETTY"
        } else {
            "GRPC"
        };
        let shuffle = self.shuffle_seq.fetch_add(1, Ordering::Relaxed) as i32;
        (
            app,
            proto::GetShuffleServerRequest {
                client_host: String::new(),
                client_port: String::new(),
                client_property: String::new(),
                application_id: self.apps[app].clone(),
                shuffle_id: shuffle,
                partition_num: partitions,
                partition_num_per_range: 1,
                data_replica: 1,
                require_tags: vec!["ss_v5".into(), transport.into()],
                assignment_shuffle_server_number: -1,
                estimate_task_concurrency: concurrency,
                faulty_server_ids: Vec::new(),
            },
        )
    }

    /// Sends `req` to the quorum in order; Ok(answer, who answered) from the first that answers.
    pub async fn ask(
        &self,
        req: &proto::GetShuffleServerRequest,
        channel: usize,
    ) -> Option<(proto::GetShuffleAssignmentsResponse, SocketAddr)> {
        for target in self.targets() {
            let mut client = target.app_client(channel);
            if let Ok(resp) = client.get_shuffle_assignments(req.clone()).await {
                return Some((resp.into_inner(), target.addr));
            }
        }
        None
    }

    async fn assign_one(&self, app: usize, req: proto::GetShuffleServerRequest) {
        let started = Instant::now();
        let answer = self.ask(&req, app).await;
        let took = started.elapsed();
        let Some((resp, from)) = answer else {
            self.stats.lock().unanswered += 1;
            return;
        };
        let verdict = check::check(&req, &resp, &self.known, self.nodes_max);
        if let Ok(used) = &verdict {
            // The servers now hold the app: their next heartbeats say so.
            let per = (req.partition_num as usize / used.len().max(1)) as u32;
            for id in used {
                if let Some(i) = self.index_of(id) {
                    *self.servers[i].apps.lock().entry(app as u32).or_insert(0) += per;
                }
            }
            let mut watch = self.watch.lock();
            if let Some(w) = watch.as_mut() {
                if w.target == from && started >= w.since && w.first_ok.is_none() {
                    w.first_ok = Some(Instant::now());
                }
            }
        }
        let mut stats = self.stats.lock();
        let _ = stats.latency.record(took.as_micros().max(1) as u64);
        match verdict {
            Ok(_) => stats.correct += 1,
            Err(why) => {
                stats.wrong += 1;
                if stats.errors.len() < 5 {
                    stats.errors.push(format!(
                        "{} shuffle {}: {why}",
                        req.application_id, req.shuffle_id
                    ));
                }
            }
        }
    }

    fn index_of(&self, id: &str) -> Option<usize> {
        // `127.10.a.b-…` → a * 250 + b - 1.
        let ip: Ipv4Addr = id.split('-').next()?.parse().ok()?;
        let [_, _, a, b] = ip.octets();
        let i = usize::from(a) * 250 + usize::from(b).checked_sub(1)?;
        (i < self.servers.len() && self.servers[i].id == id).then_some(i)
    }

    /// The outcomes since the last call, and a fresh record.
    /// Correct answers counted since the last [`Cluster::take_stats`].
    pub fn correct_so_far(&self) -> u64 {
        self.stats.lock().correct
    }

    pub fn take_stats(&self) -> AssignStats {
        std::mem::replace(&mut *self.stats.lock(), AssignStats::new())
    }

    /// From now on, remembers the first correct answer `target` gives to a request sent after
    /// `since`.
    pub fn watch_first_ok(&self, target: SocketAddr, since: Instant) {
        *self.watch.lock() = Some(Watch {
            target,
            since,
            first_ok: None,
        });
    }

    /// The watched first correct answer, if it came.
    pub fn first_ok(&self) -> Option<Instant> {
        self.watch.lock().as_ref().and_then(|w| w.first_ok)
    }

    /// Stops every loop (beats, assignments, HTTP counters).
    pub fn stop(&self) {
        self.assigning.store(false, Ordering::Relaxed);
        self.stop.cancel();
    }

    /// The `n` eligible servers (ACTIVE, carrying `tags`) whose beat comes last after the beat
    /// of server `from`, in beat order: the last a coordinator that starts listening now hears
    /// of.
    pub fn last_to_beat(&self, from: usize, n: usize, tags: &[String]) -> Vec<String> {
        let len = self.servers.len();
        let mut out = Vec::new();
        for back in 1..=len {
            let s = &self.servers[(from + len - back) % len];
            let k = &self.known[&s.id];
            if k.active && tags.iter().all(|t| k.tags.contains(t)) {
                out.push(s.id.clone());
                if out.len() == n {
                    break;
                }
            }
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Calls `f` `rate` times per second, evenly, until `stop`: ticks of at least 5 ms, each
/// calling `f` as often as the elapsed time owes.
fn spread(rate: f64, stop: CancellationToken, mut f: impl FnMut() + Send + 'static) {
    if rate <= 0.0 {
        return;
    }
    let tick = Duration::from_secs_f64((1.0 / rate).max(0.005));
    tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut done = 0u64;
        let mut ticker = tokio::time::interval(tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let owed = (start.elapsed().as_secs_f64() * rate) as u64;
            while done < owed {
                f();
                done += 1;
            }
        }
    });
}

/// Binds every server's HTTP port and answers `GET /metrics/server` with its two monotonic
/// byte counters (the JSON shape of Uniffle's `/metrics/server`), over keep-alive HTTP/1.1.
async fn serve_counters(
    servers: usize,
    ip_of: impl Fn(usize) -> Ipv4Addr,
    stop: &CancellationToken,
) -> anyhow::Result<u16> {
    let started = Instant::now();
    'attempt: for _ in 0..20 {
        let first = tokio::net::TcpListener::bind((ip_of(0), 0)).await?;
        let port = first.local_addr()?.port();
        let mut listeners = vec![first];
        for i in 1..servers {
            match tokio::net::TcpListener::bind(SocketAddr::new(IpAddr::V4(ip_of(i)), port)).await {
                Ok(l) => listeners.push(l),
                Err(_) => continue 'attempt,
            }
        }
        for (i, listener) in listeners.into_iter().enumerate() {
            let stop = stop.clone();
            tokio::spawn(async move {
                loop {
                    let conn = tokio::select! {
                        _ = stop.cancelled() => return,
                        c = listener.accept() => c,
                    };
                    let Ok((stream, _)) = conn else { continue };
                    let stop = stop.clone();
                    tokio::spawn(async move {
                        tokio::select! {
                            _ = stop.cancelled() => {}
                            _ = counters_conn(stream, i, started) => {}
                        }
                    });
                }
            });
        }
        return Ok(port);
    }
    anyhow::bail!("no port free on every simulated server's address")
}

async fn counters_conn(mut stream: tokio::net::TcpStream, i: usize, started: Instant) {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let Ok(n) = stream.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            // ~ (i % 7 + 1) × 20 MB/s written, half of it read.
            let secs = started.elapsed().as_secs_f64();
            let received = secs * 20e6 * (i % 7 + 1) as f64;
            let body = format!(
                "{{\"metrics\":[{{\"name\":\"total_received_data\",\"labelNames\":[\"tags\"],\
                 \"labelValues\":[\"ss_v5\"],\"value\":{received:.0}}},\
                 {{\"name\":\"total_read_data\",\"labelNames\":[\"tags\"],\
                 \"labelValues\":[\"ss_v5\"],\"value\":{:.0}}}],\"timeStamp\":{}}}",
                received / 2.0,
                spillway::clock::now_ms()
            );
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            if stream.write_all(head.as_bytes()).await.is_err()
                || stream.write_all(body.as_bytes()).await.is_err()
            {
                return;
            }
        }
    }
}
