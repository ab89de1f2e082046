//! `ServerRegistry`: the shuffle servers that heartbeat to this coordinator, keyed by server id,
//! and when each was last heard from; the servers lost to the heartbeat timeout, kept until an
//! operator deletes them (`DELETE /api/server/deleteServer`), as the Java coordinator keeps them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::proto::{self, ServerStatus};

/// One shuffle server as its last heartbeat described it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerNode {
    /// `<ip>-<grpcPort>[-<nettyPort>]`: the identity clients key their maps by, and what
    /// `faultyServerIds` names.
    pub id: String,
    /// Address clients connect to.
    pub ip: String,
    /// gRPC port.
    pub grpc_port: i32,
    /// Netty port (0 or -1 when the server has none).
    pub netty_port: i32,
    /// HTTP port (0.10 servers).
    pub jetty_port: i32,
    /// Tags the server advertises (`ss_v5`, `GRPC`, …); a client only gets servers carrying
    /// every tag it asks for.
    pub tags: BTreeSet<String>,
    /// Effective status: only `ACTIVE` servers are assigned. See [`ServerNode::from_heartbeat`].
    pub status: ServerStatus,
    /// Memory the server can still take; the balance rule divides it among assigned partitions.
    pub available_memory: i64,
    /// Memory in use, reported for operators.
    pub used_memory: i64,
    /// When the last heartbeat arrived (tokio time, so tests can pause it).
    pub last_seen: Instant,
}

impl ServerNode {
    /// An active server on 127.0.0.1 with `tags`, `available` memory and none used, seen now.
    #[cfg(test)]
    pub fn testing(id: &str, available: i64, tags: &[&str]) -> Self {
        ServerNode {
            id: id.into(),
            ip: "127.0.0.1".into(),
            grpc_port: 1,
            netty_port: 0,
            jetty_port: 0,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            status: ServerStatus::Active,
            available_memory: available,
            used_memory: 0,
            last_seen: Instant::now(),
        }
    }

    /// Reads a heartbeat the way the Java coordinator does: `status` if present, else ACTIVE;
    /// a present `isHealthy` overrides it (true → ACTIVE, false → UNHEALTHY) for ≤0.7 servers.
    /// A status number this build does not know counts as UNHEALTHY so it is never assigned.
    ///
    /// `None` when the heartbeat names no server id: there is nothing to key it by.
    pub fn from_heartbeat(
        req: &proto::ShuffleServerHeartBeatRequest,
        now: Instant,
    ) -> Option<Self> {
        let id = req.server_id.as_ref().filter(|id| !id.id.is_empty())?;
        let mut status = match req.status {
            None => ServerStatus::Active,
            Some(code) => ServerStatus::try_from(code).unwrap_or(ServerStatus::Unhealthy),
        };
        if let Some(healthy) = req.is_healthy {
            status = if healthy {
                ServerStatus::Active
            } else {
                ServerStatus::Unhealthy
            };
        }
        Some(ServerNode {
            id: id.id.clone(),
            ip: id.ip.clone(),
            grpc_port: id.port,
            netty_port: id.netty_port,
            jetty_port: id.jetty_port,
            tags: req.tags.iter().cloned().collect(),
            status,
            available_memory: req.available_memory,
            used_memory: req.used_memory,
            last_seen: now,
        })
    }

    /// The wire identity clients connect with.
    pub fn to_proto(&self) -> proto::ShuffleServerId {
        proto::ShuffleServerId {
            id: self.id.clone(),
            ip: self.ip.clone(),
            port: self.grpc_port,
            netty_port: self.netty_port,
            jetty_port: self.jetty_port,
        }
    }

    /// Whether the server carries every tag in `required`.
    pub fn has_tags(&self, required: &[String]) -> bool {
        required.iter().all(|tag| self.tags.contains(tag))
    }
}

/// What a heartbeat says beyond what assignment needs: the coordinator REST API shows it
/// (`/api/server/nodes`). Kept apart from [`ServerNode`] so the assignment rule's inputs stay
/// small.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeReport {
    /// Outstanding `requireBuffer` reservations.
    pub pre_allocated_memory: i64,
    /// Flush events queued or in progress.
    pub event_num_in_flush: i32,
    /// Per local disk, keyed by mount point.
    pub storage_info: BTreeMap<String, proto::StorageInfo>,
    /// Process start, ms since the epoch (0.10 servers; -1 when not sent, as Java's default).
    pub start_time_ms: i64,
    /// Uniffle version string (0.10 servers; empty when not sent).
    pub version: String,
    /// Short commit id (0.10 servers; empty when not sent).
    pub git_commit_id: String,
    /// `rss.server.displayMetricsList` values (0.10 servers).
    pub display_metrics: BTreeMap<String, String>,
    /// Wall clock of the first heartbeat of this registration, ms since the epoch.
    pub registration_ms: i64,
    /// Wall clock of the last heartbeat, ms since the epoch.
    pub timestamp_ms: i64,
    /// Per app on the server, sorted by app id (0.10 servers; Java's `appIdToInfos`). Empty both
    /// when the server holds no app and when it is older than 0.10 and never says.
    pub app_infos: Vec<proto::ApplicationInfo>,
}

impl NodeReport {
    /// The report in `req`, received at `now_ms` (wall clock).
    pub fn from_heartbeat(req: &proto::ShuffleServerHeartBeatRequest, now_ms: i64) -> Self {
        NodeReport {
            pre_allocated_memory: req.pre_allocated_memory,
            event_num_in_flush: req.event_num_in_flush,
            storage_info: req
                .storage_info
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            start_time_ms: req.start_time_ms.unwrap_or(-1),
            version: req.version.clone().unwrap_or_default(),
            git_commit_id: req.git_commit_id.clone().unwrap_or_default(),
            display_metrics: req
                .display_metrics
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            registration_ms: now_ms,
            timestamp_ms: now_ms,
            app_infos: {
                let mut apps = req.application_info.clone();
                apps.sort_by(|a, b| a.app_id.cmp(&b.app_id));
                apps
            },
        }
    }
}

/// One app's storage figures, summed over servers (Java's `AppInfoVO` storage fields).
///
/// The file counts are what the servers send: Java's server and Spillway both leave them unset
/// (COORDINATOR.md §2.1), so they sum to 0 unless a server fills them. `servers` counts the
/// servers whose heartbeat named the app.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppStorage {
    /// Servers whose last heartbeat named the app.
    pub servers: u64,
    /// `partitionNum`.
    pub partition_num: i64,
    /// `memorySize`.
    pub memory_size: i64,
    /// `localFileNum`.
    pub local_file_num: i64,
    /// `localTotalSize`.
    pub local_total_size: i64,
    /// `hadoopFileNum`: remote files, object storage included.
    pub hadoop_file_num: i64,
    /// `hadoopTotalSize`: bytes on the remote tier, object storage included.
    pub hadoop_total_size: i64,
    /// `totalSize`.
    pub total_size: i64,
}

impl AppStorage {
    /// Adds one server's `ApplicationInfo`, saturating: a server cannot overflow the sum.
    pub fn add(&mut self, info: &proto::ApplicationInfo) {
        self.servers += 1;
        self.partition_num = self.partition_num.saturating_add(info.partition_num);
        self.memory_size = self.memory_size.saturating_add(info.memory_size);
        self.local_file_num = self.local_file_num.saturating_add(info.local_file_num);
        self.local_total_size = self.local_total_size.saturating_add(info.local_total_size);
        self.hadoop_file_num = self.hadoop_file_num.saturating_add(info.hadoop_file_num);
        self.hadoop_total_size = self
            .hadoop_total_size
            .saturating_add(info.hadoop_total_size);
        self.total_size = self.total_size.saturating_add(info.total_size);
    }

    /// Whether the tiers account for the total. A server that does not split its bytes by
    /// tier sends only `totalSize`, and proto3 cannot tell its unsent fields from 0.
    pub fn tiers_account_for_total(&self) -> bool {
        self.memory_size
            .saturating_add(self.local_total_size)
            .saturating_add(self.hadoop_total_size)
            >= self.total_size
    }
}

/// A server as the registry holds it. Both halves are shared so that readers copy pointers,
/// not servers, under the lock: an assignment takes the live nodes 200 times a second, and the
/// REST list and the dashboard take every report (each with its disks and its apps), while
/// heartbeats and assignments wait on the same lock.
#[derive(Debug, Clone)]
struct Entry {
    node: Arc<ServerNode>,
    report: Arc<NodeReport>,
}

/// A server and its last report, shared with the registry (see [`Entry`]).
pub type Reported = (Arc<ServerNode>, Arc<NodeReport>);

/// The live shuffle servers. A server silent for longer than the timeout is never returned,
/// even before [`ServerRegistry::sweep`] removes it, so expiry does not depend on sweep timing.
#[derive(Debug)]
pub struct ServerRegistry {
    timeout: Duration,
    /// `parking_lot` mutex: sections are map lookups and copies, never an await. Ordered by
    /// id, so the sorted lists every reader wants need no sort.
    servers: Mutex<BTreeMap<String, Entry>>,
    /// Servers the sweep found silent, with status LOST, until deleted or heard from again.
    lost: Mutex<BTreeMap<String, Entry>>,
}

/// The server counts the coordinator's metrics report, read at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// Live servers of any status (`total_server_num`: Java's node map after lost nodes left it).
    pub total: usize,
    /// Live servers whose status is ACTIVE (`active_server_num`).
    pub active: usize,
    /// Live servers whose status is UNHEALTHY (`unhealthy_server_num`).
    pub unhealthy: usize,
    /// Servers silent past the timeout, swept or not yet (`lost_server_num`).
    pub lost: usize,
}

impl ServerRegistry {
    /// An empty registry dropping servers silent for longer than `timeout`.
    pub fn new(timeout: Duration) -> Self {
        ServerRegistry {
            timeout,
            servers: Mutex::new(BTreeMap::new()),
            lost: Mutex::new(BTreeMap::new()),
        }
    }

    /// Inserts or replaces the server `node.id` (a heartbeat) with an empty report.
    pub fn upsert(&self, node: ServerNode) {
        self.upsert_report(node, NodeReport::default());
    }

    /// Inserts or replaces the server `node.id` with what its heartbeat reported. The
    /// registration time of a server already live is kept; a lost server that heartbeats again
    /// leaves the lost list and registers anew, as Java's node check does.
    pub fn upsert_report(&self, node: ServerNode, mut report: NodeReport) {
        let mut servers = self.servers.lock();
        match servers.get(&node.id) {
            Some(old) if self.is_live(&old.node, node.last_seen) => {
                report.registration_ms = old.report.registration_ms;
            }
            _ => {
                tracing::info!(server_id = %node.id, ip = %node.ip, port = node.grpc_port,
                    tags = ?node.tags, status = ?node.status, "shuffle server joined");
            }
        }
        let id = node.id.clone();
        servers.insert(
            id.clone(),
            Entry {
                node: Arc::new(node),
                report: Arc::new(report),
            },
        );
        drop(servers);
        self.lost.lock().remove(&id);
    }

    /// Each app's storage figures summed over the live servers' last heartbeats, as Java's
    /// `/api/app/appInfos` sums `appIdToInfos` over `ClusterManager.list()`. One pass over the
    /// servers under the lock, so the cost is servers × apps-per-server, not apps × servers.
    pub fn app_storage(&self) -> HashMap<String, AppStorage> {
        let now = Instant::now();
        let mut sums: HashMap<String, AppStorage> = HashMap::new();
        for e in self.servers.lock().values() {
            if !self.is_live(&e.node, now) {
                continue;
            }
            for info in &e.report.app_infos {
                let sum = match sums.get_mut(&info.app_id) {
                    Some(sum) => sum,
                    None => sums.entry(info.app_id.clone()).or_default(),
                };
                sum.add(info);
            }
        }
        sums
    }

    /// Live servers with their reports, sorted by id (the map's order).
    pub fn live_reports(&self) -> Vec<Reported> {
        let now = Instant::now();
        self.servers
            .lock()
            .values()
            .filter(|e| self.is_live(&e.node, now))
            .map(|e| (Arc::clone(&e.node), Arc::clone(&e.report)))
            .collect()
    }

    /// The live server `id` with its report.
    pub fn get_report(&self, id: &str) -> Option<Reported> {
        let now = Instant::now();
        self.servers
            .lock()
            .get(id)
            .filter(|e| self.is_live(&e.node, now))
            .map(|e| (Arc::clone(&e.node), Arc::clone(&e.report)))
    }

    /// Servers lost to the heartbeat timeout, status LOST, sorted by id: those the sweep moved
    /// out and those silent but not yet swept, so the answer does not depend on sweep timing.
    pub fn lost(&self) -> Vec<Reported> {
        let now = Instant::now();
        let mut lost: BTreeMap<String, Reported> = self
            .lost
            .lock()
            .iter()
            .map(|(id, e)| (id.clone(), (Arc::clone(&e.node), Arc::clone(&e.report))))
            .collect();
        for e in self.servers.lock().values() {
            if !self.is_live(&e.node, now) {
                let mut node = ServerNode::clone(&e.node);
                node.status = ServerStatus::Lost;
                lost.insert(node.id.clone(), (Arc::new(node), Arc::clone(&e.report)));
            }
        }
        lost.into_values().collect()
    }

    /// Forgets the lost server `id` (Java's `deleteLostServerById`); false when no lost server
    /// has that id.
    pub fn delete_lost(&self, id: &str) -> bool {
        if self.lost.lock().remove(id).is_some() {
            return true;
        }
        let now = Instant::now();
        let mut servers = self.servers.lock();
        match servers.get(id) {
            Some(e) if !self.is_live(&e.node, now) => servers.remove(id).is_some(),
            _ => false,
        }
    }

    /// The counts behind the coordinator's server gauges. A silent server counts as lost from
    /// the moment it passes the timeout, as every read here treats it, not only once swept.
    pub fn counts(&self) -> ServerCounts {
        let now = Instant::now();
        let servers = self.servers.lock();
        let mut counts = ServerCounts::default();
        let mut silent = 0;
        for e in servers.values() {
            let s = &e.node;
            if !self.is_live(s, now) {
                silent += 1;
                continue;
            }
            counts.total += 1;
            match s.status {
                ServerStatus::Active => counts.active += 1,
                ServerStatus::Unhealthy => counts.unhealthy += 1,
                _ => {}
            }
        }
        drop(servers);
        counts.lost = self.lost.lock().len() + silent;
        counts
    }

    /// Live servers (heard from within the timeout), any status, sorted by id so callers are
    /// deterministic.
    pub fn live(&self) -> Vec<ServerNode> {
        self.live_shared()
            .iter()
            .map(|n| ServerNode::clone(n))
            .collect()
    }

    /// [`ServerRegistry::live`] without copying the servers: what an assignment reads, 200
    /// times a second over thousands of servers.
    pub fn live_shared(&self) -> Vec<Arc<ServerNode>> {
        let now = Instant::now();
        self.servers
            .lock()
            .values()
            .filter(|e| self.is_live(&e.node, now))
            .map(|e| Arc::clone(&e.node))
            .collect()
    }

    /// The live server `id`, if any.
    pub fn get(&self, id: &str) -> Option<ServerNode> {
        self.get_report(id)
            .map(|(node, _)| ServerNode::clone(&node))
    }

    /// How many servers are live.
    pub fn live_count(&self) -> usize {
        let now = Instant::now();
        self.servers
            .lock()
            .values()
            .filter(|e| self.is_live(&e.node, now))
            .count()
    }

    /// Moves servers silent for longer than the timeout to the lost list (status LOST);
    /// returns how many went.
    pub fn sweep(&self) -> usize {
        let now = Instant::now();
        let mut gone = Vec::new();
        self.servers.lock().retain(|id, e| {
            let live = self.is_live(&e.node, now);
            if !live {
                tracing::warn!(server_id = %id, silent_for = ?now.duration_since(e.node.last_seen),
                    "shuffle server lost: no heartbeat within the timeout");
                let mut lost = e.clone();
                Arc::make_mut(&mut lost.node).status = ServerStatus::Lost;
                gone.push(lost);
            }
            live
        });
        let n = gone.len();
        let mut lost = self.lost.lock();
        for e in gone {
            lost.insert(e.node.id.clone(), e);
        }
        n
    }

    fn is_live(&self, server: &ServerNode, now: Instant) -> bool {
        now.saturating_duration_since(server.last_seen) <= self.timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heartbeat(id: &str) -> proto::ShuffleServerHeartBeatRequest {
        proto::ShuffleServerHeartBeatRequest {
            server_id: Some(proto::ShuffleServerId {
                id: id.into(),
                ip: "10.0.0.1".into(),
                port: 19999,
                netty_port: 19990,
                jetty_port: 19998,
            }),
            available_memory: 100,
            tags: vec!["ss_v5".into(), "GRPC".into()],
            ..Default::default()
        }
    }

    #[test]
    fn status_rules_follow_the_java_coordinator() {
        let now = Instant::now();
        let read = |req: &proto::ShuffleServerHeartBeatRequest| {
            ServerNode::from_heartbeat(req, now).unwrap().status
        };
        let mut req = heartbeat("a");
        assert_eq!(read(&req), ServerStatus::Active);
        req.status = Some(ServerStatus::Decommissioning as i32);
        assert_eq!(read(&req), ServerStatus::Decommissioning);
        req.is_healthy = Some(true);
        assert_eq!(
            read(&req),
            ServerStatus::Active,
            "isHealthy overrides status"
        );
        req.status = Some(ServerStatus::Active as i32);
        req.is_healthy = Some(false);
        assert_eq!(read(&req), ServerStatus::Unhealthy);
        req.is_healthy = None;
        req.status = Some(77);
        assert_eq!(read(&req), ServerStatus::Unhealthy, "unknown status");
    }

    #[test]
    fn heartbeat_without_id_is_ignored() {
        let now = Instant::now();
        let mut req = heartbeat("");
        assert!(ServerNode::from_heartbeat(&req, now).is_none());
        req.server_id = None;
        assert!(ServerNode::from_heartbeat(&req, now).is_none());
    }

    #[test]
    fn proto_round_trip_keeps_ports() {
        let node = ServerNode::from_heartbeat(&heartbeat("a"), Instant::now()).unwrap();
        assert_eq!(node.to_proto(), heartbeat("a").server_id.unwrap());
        assert!(node.has_tags(&["GRPC".into()]));
        assert!(node.has_tags(&[]));
        assert!(!node.has_tags(&["GRPC".into(), "GRPC_NETTY".into()]));
    }

    #[tokio::test(start_paused = true)]
    async fn silent_servers_drop_out_then_are_swept() {
        let registry = ServerRegistry::new(Duration::from_secs(30));
        registry.upsert(ServerNode::from_heartbeat(&heartbeat("a"), Instant::now()).unwrap());
        tokio::time::advance(Duration::from_secs(20)).await;
        registry.upsert(ServerNode::from_heartbeat(&heartbeat("b"), Instant::now()).unwrap());
        assert_eq!(registry.live_count(), 2);

        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(registry.live_count(), 1);
        assert!(registry.get("a").is_none());
        assert_eq!(registry.live()[0].id, "b");
        // Silent but not yet swept: already listed as lost.
        assert_eq!(registry.lost()[0].0.status, ServerStatus::Lost);
        assert_eq!(registry.sweep(), 1);
        assert_eq!(registry.sweep(), 0);
        let lost = registry.lost();
        assert_eq!(lost.len(), 1);
        assert_eq!(
            (lost[0].0.id.as_str(), lost[0].0.status),
            ("a", ServerStatus::Lost)
        );
        assert!(!registry.delete_lost("b"), "b is live, not lost");

        // A heartbeat brings a server back, off the lost list.
        registry.upsert(ServerNode::from_heartbeat(&heartbeat("a"), Instant::now()).unwrap());
        assert_eq!(registry.live_count(), 2);
        assert!(registry.lost().is_empty());

        // Lost again, then deleted by the operator.
        tokio::time::advance(Duration::from_secs(31)).await;
        registry.sweep();
        assert_eq!(registry.lost().len(), 2);
        assert!(registry.delete_lost("a"));
        assert!(!registry.delete_lost("a"));
        assert_eq!(registry.lost()[0].0.id, "b");
    }

    #[tokio::test(start_paused = true)]
    async fn a_report_keeps_its_first_registration_time() {
        let registry = ServerRegistry::new(Duration::from_secs(30));
        let mut req = heartbeat("a");
        req.pre_allocated_memory = 7;
        req.version = Some("0.10.0".into());
        let node = || ServerNode::from_heartbeat(&heartbeat("a"), Instant::now()).unwrap();
        registry.upsert_report(node(), NodeReport::from_heartbeat(&req, 1_000));
        registry.upsert_report(node(), NodeReport::from_heartbeat(&req, 2_000));
        let (_, report) = registry.get_report("a").unwrap();
        assert_eq!(
            (report.registration_ms, report.timestamp_ms),
            (1_000, 2_000)
        );
        assert_eq!(report.pre_allocated_memory, 7);
        assert_eq!(report.version, "0.10.0");
        assert_eq!(report.start_time_ms, -1, "not sent: Java's -1");
    }

    #[tokio::test(start_paused = true)]
    async fn counts_split_live_servers_by_status_and_lost_ones() {
        let registry = ServerRegistry::new(Duration::from_secs(30));
        let mut sick = heartbeat("sick");
        sick.status = Some(ServerStatus::Unhealthy as i32);
        let mut leaving = heartbeat("leaving");
        leaving.status = Some(ServerStatus::Decommissioning as i32);
        registry.upsert(ServerNode::from_heartbeat(&heartbeat("old"), Instant::now()).unwrap());
        tokio::time::advance(Duration::from_secs(31)).await;
        for req in [heartbeat("a"), sick, leaving] {
            registry.upsert(ServerNode::from_heartbeat(&req, Instant::now()).unwrap());
        }
        let expected = ServerCounts {
            total: 3,
            active: 1,
            unhealthy: 1,
            lost: 1,
        };
        assert_eq!(registry.counts(), expected, "silent before the sweep");
        registry.sweep();
        assert_eq!(registry.counts(), expected, "and after it");
    }
}
