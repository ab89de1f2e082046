//! The embedded Uniffle coordinator: with `[coordinator] enabled`, the `CoordinatorServer` gRPC
//! service runs on the shuffle server's own port, so one binary is a complete remote shuffle
//! service and Spark needs no JVM coordinator.
//!
//! - `registry.rs`: live shuffle servers from heartbeats, dropped after the heartbeat timeout
//! - `apps.rs`: apps from registration/heartbeats/assignments, with the load assigned to each
//! - `assign.rs`: the assignment rule (pure), see its module doc
//! - `service.rs`: the tonic handlers; every RPC answers with a status code, never a gRPC error
//! - `process.rs`: a coordinator-only process (`role = "coordinator"`, a Java coordinator.conf)
//!
//! Shuffle servers, this one included, reach it through ordinary heartbeats to
//! `<host>:<grpc_port>`; nothing here special-cases the local server.

mod apps;
pub mod assign;
pub mod process;
pub mod registry;
mod service;

use std::collections::HashMap;
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

pub use assign::{AssignError, AssignRequest, RangeAssignment};
pub use registry::{ServerCounts, ServerNode, ServerRegistry};
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
    /// Counts `accessCluster` calls, so each id is unique within the instance; also
    /// `total_access_request`.
    access_count: AtomicU64,
    /// `accessCluster` refusals by [`AccessDenial`], in its order.
    access_denied: [AtomicU64; 3],
}

/// Which of Java's access checkers refused an `accessCluster` request; each has its counter
/// (`total_candidates_denied_request`, `total_load_denied_request`,
/// `total_quota_denied_request`). The checker that refuses calls
/// [`Coordinator::record_access_denied`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessDenial {
    /// `AccessCandidatesChecker`: the access id is not in the candidates file.
    Candidates,
    /// `AccessClusterLoadChecker`: too few servers with enough free memory.
    Load,
    /// `AccessQuotaChecker`: the user runs as many apps as the quota allows.
    Quota,
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
            access_denied: Default::default(),
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
                self.servers.upsert(node);
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
        let live = self.servers.live();
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

    /// Apps heard from within the app timeout.
    pub fn app_count(&self) -> usize {
        self.apps.lock().live_count(Instant::now())
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

    /// `accessCluster` requests so far (`total_access_request`).
    pub fn access_requests(&self) -> u64 {
        self.access_count.load(Ordering::Relaxed)
    }

    /// Counts one refusal of `accessCluster` by `why`.
    pub fn record_access_denied(&self, why: AccessDenial) {
        self.access_denied[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Refusals by `why` so far.
    pub fn access_denied(&self, why: AccessDenial) -> u64 {
        self.access_denied[why as usize].load(Ordering::Relaxed)
    }

    /// Apps ever seen (`total_app_num`), including expired ones.
    pub fn total_apps(&self) -> u64 {
        self.apps.lock().created()
    }

    /// Live apps registered through `registerApplicationInfo`, per user (`app_num`).
    pub fn apps_per_user(&self) -> std::collections::BTreeMap<String, u64> {
        self.apps.lock().per_user(Instant::now())
    }

    /// Servers excluded from assignment (`exclude_server_num`). This coordinator has no
    /// exclude list yet, so none is excluded: the count is truly 0, and the exclude list, when
    /// it comes, reports its size here.
    pub fn excluded_count(&self) -> usize {
        0
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
