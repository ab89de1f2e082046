//! `ServerRegistry`: the shuffle servers that heartbeat to this coordinator, keyed by server id,
//! and when each was last heard from.

use std::collections::{BTreeSet, HashMap};
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

/// The live shuffle servers. A server silent for longer than the timeout is never returned,
/// even before [`ServerRegistry::sweep`] removes it, so expiry does not depend on sweep timing.
#[derive(Debug)]
pub struct ServerRegistry {
    timeout: Duration,
    /// `parking_lot` mutex: sections are map lookups and copies, never an await.
    servers: Mutex<HashMap<String, ServerNode>>,
    /// Ids swept for silence and not heard from since: Java's `lostNodes`, which
    /// `lost_server_num` counts. A heartbeat takes the id out again.
    lost: Mutex<BTreeSet<String>>,
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
            servers: Mutex::new(HashMap::new()),
            lost: Mutex::new(BTreeSet::new()),
        }
    }

    /// Inserts or replaces the server `node.id` (a heartbeat).
    pub fn upsert(&self, node: ServerNode) {
        let mut servers = self.servers.lock();
        if !servers.contains_key(&node.id) {
            tracing::info!(server_id = %node.id, ip = %node.ip, port = node.grpc_port,
                tags = ?node.tags, status = ?node.status, "shuffle server joined");
        }
        self.lost.lock().remove(&node.id);
        servers.insert(node.id.clone(), node);
    }

    /// The counts behind the coordinator's server gauges. A silent server counts as lost from
    /// the moment it passes the timeout, as every read here treats it, not only once swept.
    pub fn counts(&self) -> ServerCounts {
        let now = Instant::now();
        let servers = self.servers.lock();
        let mut counts = ServerCounts::default();
        let mut silent = 0;
        for s in servers.values() {
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
        let now = Instant::now();
        let mut live: Vec<ServerNode> = self
            .servers
            .lock()
            .values()
            .filter(|s| self.is_live(s, now))
            .cloned()
            .collect();
        live.sort_by(|a, b| a.id.cmp(&b.id));
        live
    }

    /// The live server `id`, if any.
    pub fn get(&self, id: &str) -> Option<ServerNode> {
        let now = Instant::now();
        self.servers
            .lock()
            .get(id)
            .filter(|s| self.is_live(s, now))
            .cloned()
    }

    /// How many servers are live.
    pub fn live_count(&self) -> usize {
        let now = Instant::now();
        self.servers
            .lock()
            .values()
            .filter(|s| self.is_live(s, now))
            .count()
    }

    /// Forgets servers silent for longer than the timeout; returns how many went.
    pub fn sweep(&self) -> usize {
        let now = Instant::now();
        let mut servers = self.servers.lock();
        let before = servers.len();
        let mut gone = Vec::new();
        servers.retain(|id, s| {
            let live = self.is_live(s, now);
            if !live {
                tracing::warn!(server_id = %id, silent_for = ?now.duration_since(s.last_seen),
                    "shuffle server lost: no heartbeat within the timeout");
                gone.push(id.clone());
            }
            live
        });
        let swept = before - servers.len();
        // Lock order servers → lost, as in `upsert`.
        self.lost.lock().extend(gone);
        swept
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
        assert_eq!(registry.sweep(), 1);
        assert_eq!(registry.sweep(), 0);

        assert_eq!(registry.counts().lost, 1, "a swept server stays lost");

        // A heartbeat brings a server back.
        registry.upsert(ServerNode::from_heartbeat(&heartbeat("a"), Instant::now()).unwrap());
        assert_eq!(registry.live_count(), 2);
        assert_eq!(registry.counts().lost, 0);
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
