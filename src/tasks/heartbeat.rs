//! Coordinator heartbeats: one independent loop per coordinator sends a
//! `ShuffleServerHeartBeatRequest` built from live state (COORDINATOR.md §2), so coordinators
//! can place apps here and notice when this server is gone, unhealthy or decommissioning.
//!
//! ```text
//! spawn ─▶ loop per coordinator: snapshot ─▶ build_request (pure) ─▶ heartbeat RPC
//!            success: next one `interval` after this one started
//!            failure: next one after a backoff that doubles up to `interval`
//! ```
//!
//! A loop never waits on another one or on the request path: a coordinator that hangs only
//! costs its own loop one deadline per beat. Each loop logs once per change of reachability,
//! not once per failure, so a coordinator that is down for an hour costs one warning.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::transport::{Channel, Endpoint};

use crate::app::AppRegistry;
use crate::memory::MemorySnapshot;
use crate::proto::coordinator_server_client::CoordinatorServerClient;
use crate::proto::storage_info::{StorageMedia, StorageStatus};
use crate::proto::{self, ServerStatus as WireStatus, StatusCode};
use crate::store::localfile::{DiskReport, DiskStatus, LocalFileTier};
use crate::version::{GIT_COMMIT, VERSION};

/// Tag of 0.9/0.10 clients' assignment requests (COORDINATOR.md §2.4).
pub const TAG_SS_V5: &str = "ss_v5";
/// Tag of 0.8 clients' assignment requests.
pub const TAG_SS_V4: &str = "ss_v4";
/// Transport tag while only the gRPC data plane runs.
pub const TAG_GRPC: &str = "GRPC";
/// Transport tag to add (in [`Identity::transport_tags`]) while a Netty data plane runs.
pub const TAG_GRPC_NETTY: &str = "GRPC_NETTY";

/// Shortest per-call deadline: a very short interval (tests) must not make a healthy but
/// briefly busy coordinator look unreachable.
pub const MIN_DEADLINE: Duration = Duration::from_secs(1);

/// Shortest time a coordinator may stay silent since start before the server says, once, that
/// its quorum entry looks wrong (otherwise three heartbeat intervals).
const NEVER_ANSWERED_GRACE: Duration = Duration::from_secs(10);

/// Shortest wait after a failure, so a refusing coordinator is not hammered when the
/// interval is tiny.
const MIN_BACKOFF: Duration = Duration::from_millis(100);

/// Who this server is, as coordinators and clients see it. Fixed for the life of the process;
/// the server builds it once in `server::start`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `<ip>-<grpcPort>` (later `<ip>-<grpcPort>-<nettyPort>`): must stay stable, clients
    /// name files and maps by it.
    pub server_id: String,
    /// Address clients connect to.
    pub ip: String,
    /// gRPC port.
    pub grpc_port: u16,
    /// Netty data-plane port; 0 while there is none.
    pub netty_port: u16,
    /// HTTP port (`jetty_port`: the coordinator dashboard proxies to it).
    pub jetty_port: u16,
    /// One tag per running data plane: [`TAG_GRPC`], plus [`TAG_GRPC_NETTY`] with Netty.
    pub transport_tags: Vec<String>,
    /// Operator tags (`tags` in the config), sent after the built-in ones.
    pub tags: Vec<String>,
    /// Process start, ms since the epoch.
    pub start_time_ms: i64,
}

impl Identity {
    /// Every tag to send: `ss_v5`, `ss_v4`, the transport tags, then the configured ones;
    /// duplicates dropped, first occurrence kept, so the order is stable between beats.
    pub fn all_tags(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        [TAG_SS_V5, TAG_SS_V4]
            .into_iter()
            .chain(self.transport_tags.iter().map(String::as_str))
            .chain(self.tags.iter().map(String::as_str))
            .filter(|t| seen.insert(*t))
            .map(str::to_owned)
            .collect()
    }
}

/// Everything a heartbeat reports that changes over time, read at once so that
/// [`build_request`] is a pure function (and testable without a server).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Write-memory counters.
    pub memory: MemorySnapshot,
    /// Spill batches handed out and not yet finished (`eventNumInFlush`).
    pub flush_events: usize,
    /// Lifecycle status.
    pub status: WireStatus,
    /// One entry per data path, with its storage media.
    pub disks: Vec<(DiskReport, StorageMedia)>,
    /// One entry per live app.
    pub apps: Vec<AppSnapshot>,
}

/// What a heartbeat says about one app (`ApplicationInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppSnapshot {
    /// The app id.
    pub app_id: String,
    /// Registered partition ranges on this server.
    pub partitions: u64,
    /// Charged bytes in memory (staged and being spilled).
    pub memory_bytes: u64,
    /// Payload bytes received for the app's live shuffles.
    pub total_bytes: u64,
    /// Charged bytes spilled to local files (Java's `onLocalFileDataSize`).
    pub local_bytes: u64,
    /// Charged bytes spilled to HDFS (Java's `onHadoopDataSize`).
    pub hdfs_bytes: u64,
}

/// Builds the request from `id` and `snap`. Follows COORDINATOR.md §2.1: `isHealthy` stays
/// unset because it would override `status` on 0.8+ coordinators (a decommissioning server
/// would be reported ACTIVE).
pub fn build_request(id: &Identity, snap: &Snapshot) -> proto::ShuffleServerHeartBeatRequest {
    let mem = &snap.memory;
    // Uniffle's usedMemory counts reservations too (SEMANTICS §5.2); our `used` already
    // includes bytes being spilled.
    let used = mem.reserved.saturating_add(mem.used);
    let partitions: u64 = snap.apps.iter().map(|a| a.partitions).sum();
    proto::ShuffleServerHeartBeatRequest {
        server_id: Some(proto::ShuffleServerId {
            id: id.server_id.clone(),
            ip: id.ip.clone(),
            port: i32::from(id.grpc_port),
            netty_port: i32::from(id.netty_port),
            jetty_port: i32::from(id.jetty_port),
        }),
        used_memory: to_i64(used),
        pre_allocated_memory: to_i64(mem.reserved),
        available_memory: to_i64(mem.available()),
        event_num_in_flush: i32::try_from(snap.flush_events).unwrap_or(i32::MAX),
        tags: id.all_tags(),
        is_healthy: None,
        status: Some(snap.status as i32),
        storage_info: snap
            .disks
            .iter()
            .map(|(d, media)| {
                let key = d.path.display().to_string();
                let info = proto::StorageInfo {
                    mount_point: key.clone(),
                    storage_media: *media as i32,
                    // Java's `LocalStorage.getCapacity()`: what the server may hold there.
                    capacity: to_i64(d.service_capacity_bytes),
                    used_bytes: to_i64(d.written_bytes),
                    status: storage_status(d.status) as i32,
                    ..Default::default()
                };
                (key, info)
            })
            .collect(),
        version: Some(VERSION.to_owned()),
        git_commit_id: Some(GIT_COMMIT.to_owned()),
        start_time_ms: Some(id.start_time_ms),
        application_info: snap
            .apps
            .iter()
            .map(|a| proto::ApplicationInfo {
                app_id: a.app_id.clone(),
                partition_num: to_i64(a.partitions),
                memory_size: to_i64(a.memory_bytes),
                local_total_size: to_i64(a.local_bytes),
                hadoop_total_size: to_i64(a.hdfs_bytes),
                total_size: to_i64(a.total_bytes),
                // Java leaves the file counts unset too (COORDINATOR.md §2.1).
                ..Default::default()
            })
            .collect(),
        display_metrics: HashMap::from([
            ("app".to_owned(), snap.apps.len().to_string()),
            ("partition".to_owned(), partitions.to_string()),
        ]),
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn storage_status(s: DiskStatus) -> StorageStatus {
    match s {
        DiskStatus::Normal => StorageStatus::Normal,
        DiskStatus::Unhealthy => StorageStatus::Unhealthy,
        DiskStatus::Overused => StorageStatus::Overused,
    }
}

/// Starts one heartbeat loop per address in `quorum` (`host:port`) on `tracker`; each sends
/// its first beat at once, then one per `interval`, until `cancel` fires. An empty quorum
/// starts nothing (standalone server). Returns at once; nothing here blocks start-up on a
/// coordinator.
pub fn spawn(
    registry: Arc<AppRegistry>,
    local: Option<Arc<LocalFileTier>>,
    identity: Identity,
    quorum: Vec<String>,
    interval: Duration,
    cancel: CancellationToken,
    tracker: &TaskTracker,
) {
    if quorum.is_empty() {
        tracing::info!("no coordinator quorum configured: not sending heartbeats");
        return;
    }
    // Media cannot change while we run; a few sysfs reads, once.
    let media = local
        .iter()
        .flat_map(|l| l.disk_reports())
        .map(|d| {
            let m = detect_media(&d.path);
            (d.path, m)
        })
        .collect();
    let reporter = Arc::new(Reporter {
        registry,
        local,
        identity,
        media,
    });
    for addr in quorum {
        tracker.spawn(beat_loop(
            Arc::clone(&reporter),
            addr,
            interval,
            cancel.clone(),
        ));
    }
}

/// Reads live state for [`build_request`]; shared by every coordinator loop.
struct Reporter {
    registry: Arc<AppRegistry>,
    local: Option<Arc<LocalFileTier>>,
    identity: Identity,
    media: HashMap<PathBuf, StorageMedia>,
}

impl Reporter {
    fn snapshot(&self) -> Snapshot {
        let store = self.registry.store();
        let mut per_app: HashMap<String, (u64, u64)> = HashMap::new();
        for buffer in store.memory().all_buffers() {
            let entry = per_app
                .entry(buffer.key().app.as_str().to_owned())
                .or_default();
            entry.0 += buffer.memory_bytes();
            entry.1 += buffer.total_bytes();
        }
        let written: HashMap<_, _> = store.spiller().stats().per_app().into_iter().collect();
        let apps = self
            .registry
            .apps()
            .into_iter()
            .map(|app| {
                let app_id = app.id().as_str().to_owned();
                let (memory_bytes, total_bytes) = per_app.get(&app_id).copied().unwrap_or((0, 0));
                let spilled = written.get(app.id()).copied().unwrap_or_default();
                AppSnapshot {
                    app_id,
                    partitions: app.partition_count() as u64,
                    memory_bytes,
                    total_bytes,
                    local_bytes: spilled.local_bytes,
                    hdfs_bytes: spilled.hdfs_bytes,
                }
            })
            .collect();
        Snapshot {
            memory: store.memory().budget().snapshot(),
            flush_events: store.spiller().pending(),
            status: self.registry.status().get(),
            disks: self
                .local
                .iter()
                .flat_map(|l| l.disk_reports())
                .map(|d| {
                    let media = self
                        .media
                        .get(&d.path)
                        .copied()
                        .unwrap_or(StorageMedia::StorageTypeUnknown);
                    (d, media)
                })
                .chain(self.hdfs_report())
                .collect(),
            apps,
        }
    }

    /// The HDFS tier as one storage entry (`hdfs`, media HDFS): UNHEALTHY while its appends
    /// fail, so coordinators and operators see it.
    fn hdfs_report(&self) -> Option<(DiskReport, StorageMedia)> {
        let hdfs = self.registry.store().router().hdfs()?;
        let healthy = crate::store::Tier::health(hdfs.as_ref()).writable;
        let report = DiskReport {
            index: -1,
            path: PathBuf::from("hdfs"),
            capacity_bytes: 0,
            service_capacity_bytes: 0,
            available_bytes: 0,
            written_bytes: 0,
            status: if healthy {
                DiskStatus::Normal
            } else {
                DiskStatus::Unhealthy
            },
            timed_out: false,
            partitions_moved_off: 0,
        };
        Some((report, StorageMedia::Hdfs))
    }

    fn request(&self) -> proto::ShuffleServerHeartBeatRequest {
        build_request(&self.identity, &self.snapshot())
    }
}

/// Whether the last beat to one coordinator got through; drives the one-line-per-change log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    Unknown,
    Reachable,
    Unreachable,
}

/// Heartbeats one coordinator until `cancel` fires. The channel is lazy (start-up never waits
/// on a coordinator) and rebuilt after a failure, so a restarted coordinator, or one whose name
/// now resolves elsewhere, is reached with a fresh connection.
async fn beat_loop(
    reporter: Arc<Reporter>,
    addr: String,
    interval: Duration,
    cancel: CancellationToken,
) {
    let deadline = interval.max(MIN_DEADLINE);
    let endpoint = match Endpoint::from_shared(format!("http://{addr}")) {
        Ok(e) => e
            .connect_timeout(deadline)
            .timeout(deadline)
            .tcp_nodelay(true),
        Err(e) => {
            tracing::error!(coordinator = %addr, error = %e, "bad coordinator address: no heartbeats to it");
            return;
        }
    };
    let mut client: Option<CoordinatorServerClient<Channel>> = None;
    let mut reach = Reach::Unknown;
    let mut failures: u32 = 0;
    let mut next = Instant::now();
    // A coordinator that never answered since start is most likely a wrong quorum entry (a
    // typo, a closed port, a name that does not resolve): said once as an ERROR naming the
    // key, after a grace that lets coordinators starting beside the server come up.
    let since = Instant::now();
    let grace = (interval * 3).max(NEVER_ANSWERED_GRACE);
    let mut ever_reached = false;
    let mut escalated = false;
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep_until(next) => {}
        }
        let started = Instant::now();
        let c = client.get_or_insert_with(|| CoordinatorServerClient::new(endpoint.connect_lazy()));
        let request = reporter.request();
        let outcome = tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            r = tokio::time::timeout(deadline, c.heartbeat(request)) => r,
        };
        match check(outcome, deadline) {
            Ok(()) => {
                if reach != Reach::Reachable {
                    if reach == Reach::Unknown {
                        tracing::info!(coordinator = %addr, "heartbeats reach the coordinator");
                    } else {
                        tracing::info!(coordinator = %addr, failed_beats = failures, "coordinator reachable again");
                    }
                }
                reach = Reach::Reachable;
                ever_reached = true;
                failures = 0;
                next = started + interval;
            }
            Err(error) => {
                let error = if error.contains("not known") {
                    format!("{error} (the host name does not resolve)")
                } else {
                    error
                };
                if reach != Reach::Unreachable {
                    tracing::warn!(coordinator = %addr, %error, "coordinator unreachable: retrying with backoff (coordinator_quorum; Java: rss.coordinator.quorum)");
                }
                if !ever_reached && !escalated && since.elapsed() >= grace {
                    escalated = true;
                    tracing::error!(coordinator = %addr, %error, waited_secs = since.elapsed().as_secs(),
                        "this coordinator has not answered a heartbeat since start: no app is assigned to this server through it. Correct its entry in coordinator_quorum (Java: rss.coordinator.quorum) or start it; heartbeats go on");
                }
                reach = Reach::Unreachable;
                failures = failures.saturating_add(1);
                client = None;
                next = Instant::now() + backoff(interval, failures);
            }
        }
    }
}

/// Turns a call's outcome into Ok or a one-line reason.
fn check(
    outcome: Result<
        Result<tonic::Response<proto::ShuffleServerHeartBeatResponse>, tonic::Status>,
        tokio::time::error::Elapsed,
    >,
    deadline: Duration,
) -> Result<(), String> {
    match outcome {
        Err(_) => Err(format!("no answer within {deadline:?}")),
        Ok(Err(status)) => Err(describe(&status)),
        Ok(Ok(resp)) => {
            let resp = resp.into_inner();
            match StatusCode::try_from(resp.status) {
                Ok(StatusCode::Success) => Ok(()),
                Ok(code) => Err(format!("answered {}: {}", code.as_str_name(), resp.ret_msg)),
                Err(_) => Err(format!("answered status {}: {}", resp.status, resp.ret_msg)),
            }
        }
    }
}

/// Code, message and the causes under them ("Unavailable: tcp connect error: Connection
/// refused"), so the one warning per outage says why.
fn describe(status: &tonic::Status) -> String {
    let mut text = format!("{:?}: {}", status.code(), status.message());
    let mut cause = std::error::Error::source(status);
    while let Some(e) = cause {
        let line = e.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        cause = e.source();
    }
    text
}

/// Wait before retry number `failures` (1-based): an eighth of the interval (at least
/// [`MIN_BACKOFF`]), doubling per failure, never more than the interval, so a coordinator that
/// comes back is heard from within one interval.
fn backoff(interval: Duration, failures: u32) -> Duration {
    let base = (interval / 8).max(MIN_BACKOFF).min(interval);
    let factor = 1u32 << failures.saturating_sub(1).min(16);
    base.saturating_mul(factor).min(interval)
}

/// HDD or SSD from `/sys/dev/block/<major>:<minor>/queue/rotational` of the device holding
/// `path` (or of its parent device, for a partition); UNKNOWN when that cannot be read (tmpfs,
/// overlay, non-Linux).
fn detect_media(path: &Path) -> StorageMedia {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return StorageMedia::StorageTypeUnknown;
    };
    let dev = meta.dev();
    let base = PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        nix::sys::stat::major(dev),
        nix::sys::stat::minor(dev)
    ));
    for rotational in [
        base.join("queue/rotational"),
        base.join("../queue/rotational"),
    ] {
        match std::fs::read_to_string(rotational)
            .as_deref()
            .map(str::trim)
        {
            Ok("0") => return StorageMedia::Ssd,
            Ok("1") => return StorageMedia::Hdd,
            _ => {}
        }
    }
    StorageMedia::StorageTypeUnknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            server_id: "10.0.0.1-19999".into(),
            ip: "10.0.0.1".into(),
            grpc_port: 19999,
            netty_port: 0,
            jetty_port: 19998,
            transport_tags: vec![TAG_GRPC.into()],
            tags: vec!["blue".into(), "GRPC".into(), "ss_v5".into(), "green".into()],
            start_time_ms: 1_700_000_000_000,
        }
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            memory: MemorySnapshot {
                capacity: 1000,
                reserved: 100,
                used: 300,
                in_flush: 50,
                high_watermark: 750,
                low_watermark: 250,
                ..Default::default()
            },
            flush_events: 3,
            status: WireStatus::Decommissioning,
            disks: vec![
                (
                    DiskReport {
                        index: 0,
                        path: "/data/a".into(),
                        capacity_bytes: 10_000,
                        service_capacity_bytes: 9_000,
                        available_bytes: 4_000,
                        written_bytes: 1_234,
                        status: DiskStatus::Normal,
                        timed_out: false,
                        partitions_moved_off: 0,
                    },
                    StorageMedia::Ssd,
                ),
                (
                    DiskReport {
                        index: 1,
                        path: "/data/b".into(),
                        capacity_bytes: 20_000,
                        service_capacity_bytes: 5_000,
                        available_bytes: 100,
                        written_bytes: 7,
                        status: DiskStatus::Overused,
                        timed_out: false,
                        partitions_moved_off: 0,
                    },
                    StorageMedia::StorageTypeUnknown,
                ),
            ],
            apps: vec![
                AppSnapshot {
                    app_id: "app-1".into(),
                    partitions: 4,
                    memory_bytes: 300,
                    total_bytes: 900,
                    local_bytes: 500,
                    hdfs_bytes: 100,
                },
                AppSnapshot {
                    app_id: "app-2".into(),
                    partitions: 2,
                    memory_bytes: 0,
                    total_bytes: 0,
                    local_bytes: 0,
                    hdfs_bytes: 0,
                },
            ],
        }
    }

    #[test]
    fn tags_are_builtin_first_then_configured_without_duplicates() {
        assert_eq!(
            identity().all_tags(),
            ["ss_v5", "ss_v4", "GRPC", "blue", "green"]
        );
        let mut netty = identity();
        netty.transport_tags.push(TAG_GRPC_NETTY.into());
        netty.tags.clear();
        assert_eq!(netty.all_tags(), ["ss_v5", "ss_v4", "GRPC", "GRPC_NETTY"]);
    }

    #[test]
    fn request_carries_every_field() {
        let r = build_request(&identity(), &snapshot());
        assert_eq!(
            r.server_id,
            Some(proto::ShuffleServerId {
                id: "10.0.0.1-19999".into(),
                ip: "10.0.0.1".into(),
                port: 19999,
                netty_port: 0,
                jetty_port: 19998,
            })
        );
        // usedMemory includes reservations; available = capacity - usedMemory.
        assert_eq!(r.used_memory, 400);
        assert_eq!(r.pre_allocated_memory, 100);
        assert_eq!(r.available_memory, 600);
        assert_eq!(r.event_num_in_flush, 3);
        assert_eq!(r.is_healthy, None);
        assert_eq!(r.status, Some(WireStatus::Decommissioning as i32));
        assert_eq!(r.storage_info.len(), 2);
        let a = &r.storage_info["/data/a"];
        assert_eq!(a.mount_point, "/data/a");
        assert_eq!(a.storage_media, StorageMedia::Ssd as i32);
        assert_eq!(
            a.capacity, 9_000,
            "the capacity this server may fill, not the file system's size"
        );
        assert_eq!(a.used_bytes, 1_234);
        assert_eq!(a.status, StorageStatus::Normal as i32);
        assert_eq!(
            r.storage_info["/data/b"].status,
            StorageStatus::Overused as i32
        );
        assert_eq!(r.version.as_deref(), Some(env!("CARGO_PKG_VERSION")));
        assert!(r.git_commit_id.as_deref().is_some_and(|c| !c.is_empty()));
        assert_eq!(r.start_time_ms, Some(1_700_000_000_000));
        assert_eq!(r.application_info.len(), 2);
        assert_eq!(r.application_info[0].app_id, "app-1");
        assert_eq!(r.application_info[0].partition_num, 4);
        assert_eq!(r.application_info[0].memory_size, 300);
        assert_eq!(r.application_info[0].total_size, 900);
        assert_eq!(r.application_info[0].local_total_size, 500);
        assert_eq!(r.application_info[0].hadoop_total_size, 100);
        assert_eq!(r.application_info[0].local_file_num, 0, "unset, as Java's");
        assert_eq!(r.display_metrics["app"], "2");
        assert_eq!(r.display_metrics["partition"], "6");
    }

    #[test]
    fn empty_server_reports_zeros_not_garbage() {
        let snap = Snapshot {
            memory: MemorySnapshot {
                capacity: 64,
                ..Default::default()
            },
            ..Default::default()
        };
        let r = build_request(&identity(), &snap);
        assert_eq!((r.used_memory, r.available_memory), (0, 64));
        assert!(r.storage_info.is_empty() && r.application_info.is_empty());
        assert_eq!(r.display_metrics["app"], "0");
        assert_eq!(r.display_metrics["partition"], "0");
    }

    #[test]
    fn backoff_doubles_up_to_the_interval() {
        let i = Duration::from_secs(10);
        let waits: Vec<_> = (1..=6).map(|n| backoff(i, n)).collect();
        assert_eq!(
            waits,
            [1250, 2500, 5000, 10_000, 10_000, 10_000].map(Duration::from_millis)
        );
        assert_eq!(backoff(i, u32::MAX), i);
        // A tiny interval is never undercut by the floor.
        assert_eq!(
            backoff(Duration::from_millis(50), 1),
            Duration::from_millis(50)
        );
        assert_eq!(
            backoff(Duration::from_millis(400), 1),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn media_detection_never_fails() {
        let m = detect_media(Path::new("/definitely/not/here"));
        assert_eq!(m, StorageMedia::StorageTypeUnknown);
        // Whatever the machine, a real path gives some answer without panicking.
        let _ = detect_media(&std::env::temp_dir());
    }

    #[test]
    fn non_success_answers_count_as_failures() {
        let d = Duration::from_secs(1);
        let ok = proto::ShuffleServerHeartBeatResponse::default();
        assert!(check(Ok(Ok(tonic::Response::new(ok))), d).is_ok());
        let bad = proto::ShuffleServerHeartBeatResponse {
            status: StatusCode::InternalError as i32,
            ret_msg: "boom".into(),
        };
        let e = check(Ok(Ok(tonic::Response::new(bad))), d).unwrap_err();
        assert!(e.contains("INTERNAL_ERROR") && e.contains("boom"), "{e}");
        let e = check(Ok(Err(tonic::Status::unavailable("refused"))), d).unwrap_err();
        assert!(e.contains("refused"), "{e}");
    }
}
