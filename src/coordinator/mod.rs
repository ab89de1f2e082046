//! The embedded Uniffle coordinator: with `[coordinator] enabled`, the `CoordinatorServer` gRPC
//! service runs on the shuffle server's own port, so one binary is a complete remote shuffle
//! service and Spark needs no JVM coordinator.
//!
//! - `registry.rs`: live shuffle servers from heartbeats, dropped after the heartbeat timeout
//! - `apps.rs`: apps from registration/heartbeats/assignments, with the load assigned to each
//! - `assign.rs`: the assignment rule (pure), see its module doc
//! - `service.rs`: the tonic handlers; every RPC answers with a status code, never a gRPC error
//! - `rest/`: the Java coordinator's REST API (`/api/server/*`, `/api/app/*`,
//!   `/api/coordinator/*`) on the HTTP port, including decommission over `ShuffleServerInternal`
//!
//! Shuffle servers, this one included, reach it through ordinary heartbeats to
//! `<host>:<grpc_port>`; nothing here special-cases the local server.

mod apps;
pub mod assign;
pub mod registry;
pub mod rest;
mod service;

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::CoordinatorConfig;
use crate::proto;

pub use apps::AppSnapshot;
pub use assign::{AssignError, AssignRequest, RangeAssignment};
pub use registry::{NodeReport, ServerNode, ServerRegistry};
pub use service::CoordinatorService;

use apps::Apps;

/// Coordinator policy, from `[coordinator]`.
#[derive(Debug, Clone, PartialEq)]
pub struct CoordinatorOptions {
    /// Servers silent for longer are not assigned and are dropped.
    pub server_timeout: Duration,
    /// Apps silent for longer are forgotten, with their load.
    pub app_timeout: Duration,
    /// Servers per shuffle when the client asks for -1/0.
    pub default_server_number: usize,
    /// Served by `fetchRemoteStorage`; `None` answers an empty path.
    pub remote_storage_path: Option<String>,
    /// Served by `fetchClientConf`/`fetchClientConfV2`, in key order.
    pub client_conf: Vec<(String, String)>,
}

impl From<&CoordinatorConfig> for CoordinatorOptions {
    fn from(config: &CoordinatorConfig) -> Self {
        CoordinatorOptions {
            server_timeout: config.server_heartbeat_timeout,
            app_timeout: config.app_heartbeat_timeout,
            default_server_number: config.shuffle_server_number,
            remote_storage_path: config.remote_storage_path.clone(),
            client_conf: config
                .client_conf
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// The coordinator's state: servers, apps and policy. Built once by `server::start`, shared by
/// the gRPC service and the sweeper; tests read it through `Running::coordinator()`.
#[derive(Debug)]
pub struct Coordinator {
    options: CoordinatorOptions,
    servers: ServerRegistry,
    /// One lock over all apps so that reading the load, choosing servers and recording the new
    /// load is a single step: two concurrent assignments do not both pick the idlest server.
    /// Sections are short and never await.
    apps: Mutex<Apps>,
    /// Tells this instance's `accessCluster` ids apart from another's.
    instance_tag: u32,
    /// Counts `accessCluster` calls, so each id is unique within the instance.
    access_count: AtomicU64,
    /// Server ids never assigned, whatever their status (Java's excluded nodes). Changed at
    /// runtime through the REST API; short sections, never held across an await.
    excluded: Mutex<BTreeSet<String>>,
}

impl Coordinator {
    /// A coordinator with no servers and no apps.
    pub fn new(options: CoordinatorOptions) -> Self {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        Coordinator {
            servers: ServerRegistry::new(options.server_timeout),
            apps: Mutex::new(Apps::new(options.app_timeout)),
            options,
            instance_tag: hasher.finish() as u32,
            access_count: AtomicU64::new(0),
            excluded: Mutex::new(BTreeSet::new()),
        }
    }

    /// The policy in force.
    pub fn options(&self) -> &CoordinatorOptions {
        &self.options
    }

    /// The shuffle servers known from heartbeats.
    pub fn servers(&self) -> &ServerRegistry {
        &self.servers
    }

    /// Records a shuffle-server heartbeat. Returns false (and records nothing) when it names no
    /// server id; the caller still answers SUCCESS, as the Java coordinator does.
    pub fn heartbeat(&self, req: &proto::ShuffleServerHeartBeatRequest) -> bool {
        match ServerNode::from_heartbeat(req, Instant::now()) {
            Some(node) => {
                let report = NodeReport::from_heartbeat(req, crate::tasks::heartbeat::now_ms());
                self.servers.upsert_report(node, report);
                true
            }
            None => false,
        }
    }

    /// `getShuffleAssignments`: applies [`assign::assign`] to the live servers and the load of
    /// the live apps, then adds the result to `app_id`'s load (which also marks the app alive).
    pub fn assign(
        &self,
        app_id: &str,
        req: &AssignRequest<'_>,
    ) -> Result<Vec<proto::PartitionRangeAssignment>, AssignError> {
        let mut live = self.servers.live();
        {
            let excluded = self.excluded.lock();
            live.retain(|s| !excluded.contains(&s.id));
        }
        let mut apps = self.apps.lock();
        let now = Instant::now();
        let load = apps.load(now);
        let ranges = assign::assign(&live, &load, req, self.options.default_server_number)?;
        apps.add_load(app_id, assign::partitions_per_server(&ranges), now);
        drop(apps);
        Ok(ranges
            .iter()
            .map(|range| proto::PartitionRangeAssignment {
                start_partition: range.start,
                end_partition: range.end,
                server: range.servers.iter().map(|s| s.to_proto()).collect(),
            })
            .collect())
    }

    /// `appHeartbeat`: keeps the app (and its load) alive.
    pub fn app_heartbeat(&self, app_id: &str) {
        self.apps.lock().touch(app_id, Instant::now());
    }

    /// `registerApplicationInfo`: starts tracking the app.
    pub fn register_app(&self, app_id: &str, user: &str) {
        self.apps.lock().register(app_id, user, Instant::now());
    }

    /// Records the client version of a registered app (0.10 `registerApplicationInfo`).
    pub fn set_app_client(&self, app_id: &str, version: &str, git_commit_id: &str) {
        self.apps.lock().set_client(app_id, version, git_commit_id);
    }

    /// Apps heard from within the app timeout.
    pub fn app_count(&self) -> usize {
        self.apps.lock().live_count(Instant::now())
    }

    /// Apps ever heard from since start (Java's `total_app_num`).
    pub fn app_total(&self) -> u64 {
        self.apps.lock().total()
    }

    /// The live apps, sorted by app id.
    pub fn apps(&self) -> Vec<AppSnapshot> {
        self.apps.lock().snapshots(Instant::now())
    }

    /// Adds server ids to the exclude set: they are not assigned from the next assignment on,
    /// live or not (an id may be excluded before its server first heartbeats).
    pub fn exclude(&self, ids: impl IntoIterator<Item = String>) {
        let mut excluded = self.excluded.lock();
        for id in ids {
            if excluded.insert(id.clone()) {
                tracing::info!(server_id = %id, "server excluded from assignment");
            }
        }
    }

    /// Takes server ids out of the exclude set.
    pub fn unexclude<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        let mut excluded = self.excluded.lock();
        for id in ids {
            if excluded.remove(id) {
                tracing::info!(server_id = %id, "server no longer excluded from assignment");
            }
        }
    }

    /// The excluded server ids, sorted.
    pub fn excluded(&self) -> BTreeSet<String> {
        self.excluded.lock().clone()
    }

    /// Partitions assigned per server id, over the live apps: the load the next assignment
    /// balances against.
    pub fn load(&self) -> HashMap<String, u64> {
        self.apps.lock().load(Instant::now())
    }

    /// A fresh id for `accessCluster`. Clients may append it to their app id, so it holds only
    /// digits and a dash (path-safe), like the Java coordinator's `<hash>-<counter>`.
    pub fn access_id(&self) -> String {
        let n = self.access_count.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}-{n}", self.instance_tag)
    }

    /// Drops silent servers and expired apps. Reads already ignore them; this only frees memory.
    pub fn sweep(&self) {
        self.servers.sweep();
        self.apps.lock().sweep(Instant::now());
    }

    /// Runs [`Coordinator::sweep`] every half of the shorter timeout until `cancel` fires.
    pub fn spawn_sweeper(self: &Arc<Self>, cancel: CancellationToken, tracker: &TaskTracker) {
        let interval = (self.options.server_timeout.min(self.options.app_timeout) / 2)
            .max(Duration::from_millis(10));
        let coordinator = Arc::clone(self);
        crate::tasks::periodic(tracker, interval, cancel, move || {
            coordinator.sweep();
            std::future::ready(())
        });
    }
}
