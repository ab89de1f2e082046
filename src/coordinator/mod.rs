//! The embedded Uniffle coordinator: with `[coordinator] enabled`, the `CoordinatorServer` gRPC
//! service runs on the shuffle server's own port, so one binary is a complete remote shuffle
//! service and Spark needs no JVM coordinator.
//!
//! - `registry.rs`: live shuffle servers from heartbeats, dropped after the heartbeat timeout
//! - `apps.rs`: apps from registration/heartbeats/assignments, with the load assigned to each
//! - `assign.rs`: the assignment rule (pure), see its module doc
//! - `access.rs`: `accessCluster`'s checkers (cluster load, per-user quota, candidates)
//! - `storage.rs`: remote storage paths for `fetchRemoteStorage`, balanced by app count
//! - `files.rs`: the operator files (exclude nodes, dynamic client conf, quota, candidates),
//!   re-read when they change
//! - `client_conf.rs`: the dynamic client conf's LEGACY, YAML and MIXED formats
//! - `service.rs`: the tonic handlers; every RPC answers with a status code, never a gRPC error
//! - `dashboard/`: the operator's web page (`/dashboard`), rendered from the registries above
//!   and a history the dashboard's sampler keeps
//! - `rest/`: the Java coordinator's REST API (`/api/server/*`, `/api/app/*`,
//!   `/api/coordinator/*`) on the HTTP port, including decommission over `ShuffleServerInternal`
//! - `process.rs`: a coordinator-only process (`role = "coordinator"`, a Java coordinator.conf)
//!
//! Shuffle servers, this one included, reach it through ordinary heartbeats to
//! `<host>:<grpc_port>`; nothing here special-cases the local server.

pub mod access;
mod apps;
pub mod assign;
mod client_conf;
pub mod dashboard;
mod files;
pub mod registry;
pub mod rest;
pub mod service;
pub mod storage;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::CoordinatorConfig;
use crate::proto;

pub use access::{AccessCheckerKind, AccessOptions, AccessRequest};
pub use apps::{AppDetail, AppSnapshot, ShuffleRecord};
pub use assign::RangeAssignment;
pub use assign::{AssignError, AssignPolicy, AssignRequest, HostStrategy, PartitionStrategy};
pub use client_conf::ClientConfFormat;
/// For the Java `coordinator.conf` mapping of `rss.coordinator.remote.storage.cluster.conf`.
pub use files::parse_cluster_conf;
pub use registry::{AppStorage, NodeReport, ServerCounts, ServerNode, ServerRegistry};
pub use storage::RemoteStorage;

use access::Quotas;
use apps::Apps;
use client_conf::ClientConfFile;
use files::{Poll, WatchedFile};
use storage::RemoteStorages;

/// Coordinator policy, from `[coordinator]`.
#[derive(Debug, Clone, PartialEq)]
pub struct CoordinatorOptions {
    /// Servers silent for longer are not assigned and are dropped.
    pub server_timeout: Duration,
    /// Apps silent for longer are forgotten, with their load.
    pub app_timeout: Duration,
    /// Servers per shuffle when the client asks for -1/0 or more; the most one shuffle gets
    /// (Java's `shuffle.nodes.max`).
    pub default_server_number: usize,
    /// Remote storage paths, comma-separated, for `fetchRemoteStorage`; `None` answers an
    /// empty path. The dynamic client conf file's own path list replaces it when it has one.
    pub remote_storage_path: Option<String>,
    /// Hadoop conf items per remote storage cluster (path host).
    pub remote_storage_cluster_conf: BTreeMap<String, BTreeMap<String, String>>,
    /// Served by `fetchClientConf`/`fetchClientConfV2`, in key order.
    pub client_conf: Vec<(String, String)>,
    /// How servers are picked and ranges laid out.
    pub host_strategy: HostStrategy,
    /// See [`PartitionStrategy`].
    pub partition_strategy: PartitionStrategy,
    /// `accessCluster` checkers and their settings.
    pub access: AccessOptions,
    /// The dynamic client conf file (set only when enabled) and its poll interval.
    pub dynamic_client_conf: Option<(PathBuf, Duration)>,
    /// How that file is parsed.
    pub dynamic_client_conf_format: ClientConfFormat,
    /// The exclude-nodes file and its poll interval.
    pub exclude_nodes_file: Option<(PathBuf, Duration)>,
    /// The per-user quota file and its poll interval.
    pub quota_file: Option<(PathBuf, Duration)>,
    /// The access candidates file and its poll interval.
    pub access_candidates_file: Option<(PathBuf, Duration)>,
    /// How often the dashboard samples memory and throughput.
    pub dashboard_sample_interval: Duration,
}

impl From<&CoordinatorConfig> for CoordinatorOptions {
    fn from(config: &CoordinatorConfig) -> Self {
        CoordinatorOptions {
            server_timeout: config.server_heartbeat_timeout,
            app_timeout: config.app_heartbeat_timeout,
            default_server_number: config.shuffle_server_number,
            remote_storage_path: config.remote_storage_path.clone(),
            remote_storage_cluster_conf: config.remote_storage_cluster_conf.clone(),
            client_conf: config
                .client_conf
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            host_strategy: config.assignment_host_strategy,
            partition_strategy: config.select_partition_strategy,
            access: AccessOptions {
                checkers: config.access_checkers.clone(),
                memory_percentage: config.access_load_memory_percentage,
                server_num_threshold: config.access_load_server_num_threshold,
                default_app_num: config.quota_default_app_num,
            },
            dynamic_client_conf: config
                .dynamic_client_conf_enabled
                .then(|| config.dynamic_client_conf_path.clone())
                .flatten()
                .map(|p| (p, config.dynamic_client_conf_update_interval)),
            dynamic_client_conf_format: config.dynamic_client_conf_parser,
            exclude_nodes_file: config
                .exclude_nodes_file_path
                .clone()
                .map(|p| (p, config.exclude_nodes_check_interval)),
            quota_file: config
                .quota_path
                .clone()
                // Java polls at half the interval; kept above zero for the timer.
                .map(|p| {
                    let half = config.quota_update_interval / 2;
                    (p, half.max(Duration::from_millis(1)))
                }),
            access_candidates_file: config
                .access_candidates_path
                .clone()
                .map(|p| (p, config.access_candidates_update_interval)),
            dashboard_sample_interval: config.dashboard_sample_interval,
        }
    }
}

/// What the operator files currently say. Each part is replaced whole on a reload.
#[derive(Debug, Default)]
struct FileState {
    /// Server ids in the exclude-nodes file.
    excluded: HashSet<String>,
    /// The dynamic client conf, once read and accepted by its parser.
    client_conf: Option<ClientConfFile>,
    /// Access ids in the candidates file.
    candidates: HashSet<String>,
}

/// The coordinator's state: servers, apps and policy. Built once by `server::start`, shared by
/// the gRPC service and the sweeper; tests read it through `Running::coordinator()`.
#[derive(Debug)]
pub struct Coordinator {
    options: CoordinatorOptions,
    servers: ServerRegistry,
    /// The apps and their load. Sections are short (a lookup, a snapshot of the load, an
    /// addition) and never await: app heartbeats take it a thousand times a second at 10,000
    /// apps, so the assignment rule does not run under it.
    apps: Mutex<Apps>,
    /// Held from reading the load to recording the new one, so that two concurrent
    /// assignments do not both pick the idlest servers (Java's balance strategy assigns under
    /// a lock too). Taken before `apps`, never the other way.
    assign_turn: Mutex<()>,
    /// Tells this instance's `accessCluster` ids apart from another's.
    instance_tag: u32,
    /// Counts `accessCluster` calls, so each id is unique within the instance; also
    /// `total_access_request`.
    access_count: AtomicU64,
    /// Server ids never assigned, whatever their status (Java's excluded nodes), changed at
    /// runtime through the REST API; the exclude-nodes file's ids are in `files`. Short
    /// sections, never held across an await.
    excluded: Mutex<BTreeSet<String>>,
    /// The operator files' content; read on every assignment, written by the watchers.
    files: RwLock<FileState>,
    /// Apps per user for the quota checker.
    quotas: Mutex<Quotas>,
    /// Remote storage paths and the apps on each.
    storages: Mutex<RemoteStorages>,
    /// `accessCluster` refusals by [`AccessDenial`], in its order.
    access_denied: [AtomicU64; 3],
    /// Reads of the dynamic client conf file that its parser rejected.
    client_conf_rejected: AtomicU64,
    /// The last hour of samples the dashboard charts; filled by `dashboard::sampler::spawn`.
    history: dashboard::history::History,
    /// `options.default_server_number` as running: Java's `rss.coordinator.shuffle.nodes.max`
    /// is the one coordinator key Java reloads at runtime (its cluster manager and cluster-load
    /// checker take it from a changed coordinator.conf), so it is kept apart from the options.
    shuffle_nodes_max: AtomicUsize,
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

impl crate::metrics::coordinator::CoordinatorFigures for Coordinator {
    fn figures(&self) -> crate::metrics::coordinator::CoordinatorSnapshot {
        let servers = self.servers().counts();
        crate::metrics::coordinator::CoordinatorSnapshot {
            total_servers: servers.total,
            active_servers: servers.active,
            lost_servers: servers.lost,
            unhealthy_servers: servers.unhealthy,
            excluded_servers: self.excluded_count(),
            running_apps: self.app_count(),
            total_apps: self.total_apps(),
            access_requests: self.access_requests(),
            candidates_denied: self.access_denied(AccessDenial::Candidates),
            load_denied: self.access_denied(AccessDenial::Load),
            quota_denied: self.access_denied(AccessDenial::Quota),
            apps_per_user: self.apps_per_user(),
        }
    }
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
        let nodes_max = options.default_server_number;
        let coordinator = Coordinator {
            servers: ServerRegistry::new(options.server_timeout),
            apps: Mutex::new(Apps::new(options.app_timeout)),
            assign_turn: Mutex::new(()),
            quotas: Mutex::new(Quotas::new(options.app_timeout)),
            instance_tag: hasher.finish() as u32,
            access_count: AtomicU64::new(0),
            shuffle_nodes_max: AtomicUsize::new(nodes_max),
            access_denied: Default::default(),
            client_conf_rejected: AtomicU64::new(0),
            excluded: Mutex::new(BTreeSet::new()),
            files: RwLock::new(FileState::default()),
            storages: Mutex::new(RemoteStorages::default()),
            history: dashboard::history::History::new(options.dashboard_sample_interval),
            options,
        };
        coordinator.refresh_storages();
        coordinator
    }

    /// [`Coordinator::new`] plus a first read of the operator files. Fails as the Java
    /// coordinator fails to start: when the dynamic client conf is enabled but its file is not
    /// a readable file, or the candidates checker is on but its file lists no candidate.
    pub fn open(options: CoordinatorOptions) -> Result<Self, String> {
        let coordinator = Coordinator::new(options);
        for kind in FileKind::ALL {
            let Some((path, _)) = coordinator.file_option(kind) else {
                continue;
            };
            let mut file = WatchedFile::new(path.clone());
            let poll = file.poll();
            match (kind, &poll) {
                (FileKind::ClientConf, Poll::Missing | Poll::Failed(_)) => {
                    return Err(format!(
                        "coordinator.dynamic_client_conf_path: {} is not a readable file",
                        path.display()
                    ));
                }
                (FileKind::Candidates, Poll::Missing | Poll::Failed(_)) => {
                    return Err(format!(
                        "coordinator.access_candidates_path: {} is not a readable file",
                        path.display()
                    ));
                }
                _ => {}
            }
            coordinator.apply(kind, &mut file, poll);
            if kind == FileKind::Candidates && coordinator.files.read().candidates.is_empty() {
                return Err(format!(
                    "coordinator.access_candidates_path: {} lists no candidate; it must be \
                     non-empty at start-up",
                    path.display()
                ));
            }
        }
        Ok(coordinator)
    }

    fn file_option(&self, kind: FileKind) -> Option<&(PathBuf, Duration)> {
        match kind {
            FileKind::Exclude => self.options.exclude_nodes_file.as_ref(),
            FileKind::ClientConf => self.options.dynamic_client_conf.as_ref(),
            FileKind::Quota => self.options.quota_file.as_ref(),
            FileKind::Candidates => self.options.access_candidates_file.as_ref(),
        }
    }

    /// Takes in what a poll of `kind`'s file found, keeping Java's rules for each file: a
    /// missing exclude file excludes nothing; an unreadable one, or a quota, client conf or
    /// candidates file that is missing or cannot be read, keeps the last content; an empty
    /// candidates file is ignored; a client conf its parser rejects keeps the last good conf
    /// and is read again at the next poll, as Java retries it.
    fn apply(&self, kind: FileKind, file: &mut WatchedFile, poll: Poll) {
        let path = file.path().display();
        let text = match poll {
            Poll::Unchanged => return,
            Poll::Changed(text) => text,
            Poll::Missing if kind == FileKind::Exclude => String::new(),
            Poll::Missing => {
                tracing::warn!(file = %path, ?kind, "coordinator file not found; keeping its last content");
                return;
            }
            Poll::Failed(e) => {
                tracing::warn!(file = %path, ?kind, error = %e, "coordinator file unreadable; keeping its last content");
                return;
            }
        };
        match kind {
            FileKind::Exclude => {
                let excluded = files::parse_lines(&text, true);
                let mut state = self.files.write();
                if state.excluded != excluded {
                    tracing::info!(file = %path, nodes = ?excluded, "exclude nodes updated");
                }
                state.excluded = excluded;
            }
            FileKind::ClientConf => {
                let format = self.options.dynamic_client_conf_format;
                match client_conf::parse(format, &text) {
                    Ok(conf) => {
                        tracing::info!(file = %path, ?format, items = conf.items.len(), "dynamic client conf updated");
                        self.files.write().client_conf = Some(conf);
                        self.refresh_storages();
                    }
                    Err(error) => {
                        tracing::error!(file = %path, ?format, error, "dynamic client conf rejected; keeping the last good conf");
                        self.client_conf_rejected.fetch_add(1, Ordering::Relaxed);
                        file.forget();
                    }
                }
            }
            FileKind::Quota => {
                let (limits, error) = files::parse_quota(&text);
                if let Some(error) = error {
                    tracing::error!(file = %path, error, "quota file has a bad line; later lines ignored");
                }
                tracing::info!(file = %path, users = limits.len(), "user quotas updated");
                self.quotas.lock().set_limits(limits);
            }
            FileKind::Candidates => {
                let candidates = files::parse_lines(&text, false);
                if candidates.is_empty() {
                    tracing::warn!(file = %path, "candidates file is empty; keeping the last candidates");
                    return;
                }
                self.files.write().candidates = candidates;
            }
        }
    }

    /// Recomputes the remote storage paths from the dynamic client conf (when it names them)
    /// or `[coordinator]`.
    fn refresh_storages(&self) {
        let (paths, cluster_conf) = {
            let state = self.files.read();
            let file = state.client_conf.as_ref();
            if let Some(storages) = file.and_then(|f| f.remote_storages.clone()) {
                drop(state);
                self.storages.lock().set(storages);
                return;
            }
            let paths = file
                .and_then(|f| f.remote_storage_path.clone())
                .or_else(|| self.options.remote_storage_path.clone())
                .unwrap_or_default();
            let cluster_conf = match file.and_then(|f| f.remote_storage_cluster_conf.as_ref()) {
                Some(text) => files::parse_cluster_conf(text).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "remote storage cluster conf is malformed; using none");
                    BTreeMap::new()
                }),
                None => self.options.remote_storage_cluster_conf.clone(),
            };
            (paths, cluster_conf)
        };
        self.storages.lock().refresh(&paths, &cluster_conf);
    }

    /// Polls every configured operator file at its interval until `cancel` fires.
    pub fn spawn_watchers(self: &Arc<Self>, cancel: CancellationToken, tracker: &TaskTracker) {
        for kind in FileKind::ALL {
            let Some((path, interval)) = self.file_option(kind).cloned() else {
                continue;
            };
            let file = Arc::new(Mutex::new(WatchedFile::new(path)));
            // The first poll re-reads what `open` read, which is harmless.
            let coordinator = Arc::clone(self);
            crate::periodic::periodic(tracker, interval, cancel.clone(), move || {
                let file = Arc::clone(&file);
                let coordinator = Arc::clone(&coordinator);
                async move {
                    let polled = crate::runtime::blocking(move || {
                        let mut file = file.lock();
                        let poll = file.poll();
                        coordinator.apply(kind, &mut file, poll);
                    })
                    .await;
                    if let Err(e) = polled {
                        tracing::warn!(error = %e, ?kind, "coordinator file poll failed");
                    }
                }
            });
        }
    }

    /// Re-reads the access checkers' files (quota, candidates) now, whatever their poll
    /// interval: Java's `/api/admin/refreshChecker`. Returns how many files were read.
    pub fn refresh_access_files(&self) -> usize {
        let mut read = 0;
        for kind in [FileKind::Quota, FileKind::Candidates] {
            if let Some((path, _)) = self.file_option(kind) {
                let mut file = WatchedFile::new(path.clone());
                let poll = file.poll();
                self.apply(kind, &mut file, poll);
                read += 1;
            }
        }
        read
    }

    /// Whether server `id` is excluded, by the exclude-nodes file or at runtime through the REST
    /// API (Java keeps both in one set). Excluded servers are never assigned and do not count
    /// as available for `accessCluster`.
    pub fn is_excluded(&self, id: &str) -> bool {
        let in_file = self.files.read().excluded.contains(id);
        in_file || self.excluded.lock().contains(id)
    }

    /// Live servers not excluded: the ones assignment and the load checker look at. Both
    /// exclude sets are read once per call, not once per server.
    fn assignable(&self) -> Vec<ServerNode> {
        let mut live = self.servers.live();
        let excluded = self.excluded();
        live.retain(|s| !excluded.contains(&s.id));
        live
    }

    /// [`Coordinator::assignable`] without copying the servers, for assignments.
    fn assignable_shared(&self) -> Vec<Arc<ServerNode>> {
        let mut live = self.servers.live_shared();
        let excluded = self.excluded();
        if !excluded.is_empty() {
            live.retain(|s| !excluded.contains(&s.id));
        }
        live
    }

    /// `accessCluster`: runs the configured checkers in order. Ok carries the access uuid
    /// (recorded as one of the user's apps when the quota checker is on); Err the first
    /// denial's message.
    pub fn access(&self, req: &AccessRequest<'_>) -> Result<String, String> {
        let uuid = self.access_id();
        for checker in &self.options.access.checkers {
            let (verdict, denial) = match checker {
                AccessCheckerKind::ClusterLoad => (
                    access::check_cluster_load(
                        &self.assignable(),
                        req,
                        &self.options.access,
                        self.shuffle_nodes_max(),
                    ),
                    AccessDenial::Load,
                ),
                AccessCheckerKind::Quota => (
                    self.quotas.lock().check(
                        req.user,
                        &uuid,
                        self.options.access.default_app_num,
                        Instant::now(),
                    ),
                    AccessDenial::Quota,
                ),
                AccessCheckerKind::Candidates => (
                    access::check_candidates(&self.files.read().candidates, req),
                    AccessDenial::Candidates,
                ),
            };
            if let Err(why) = verdict {
                self.record_access_denied(denial);
                return Err(why);
            }
        }
        Ok(uuid)
    }

    /// Client conf items for `fetchClientConf(V2)`: `[coordinator] client_conf`, overridden
    /// by the dynamic client conf file's items. Java 0.10 applies the file through
    /// `rss.coordinator.client.confApplyStrategy`, whose only shipped strategy (the default,
    /// `BypassRssClientConfApplyStrategy`) answers every user and property set alike; so does
    /// this.
    ///
    /// Err while the dynamic client conf is on but no version of its file has parsed yet (a
    /// YAML file that was invalid at start-up): Java has no conf then and its handler fails
    /// with a null pointer; this says why instead, and the caller answers an error status.
    pub fn client_conf(&self) -> Result<Vec<(String, String)>, String> {
        let mut items: BTreeMap<String, String> =
            self.options.client_conf.iter().cloned().collect();
        match &self.files.read().client_conf {
            Some(file) => items.extend(file.items.iter().map(|(k, v)| (k.clone(), v.clone()))),
            None => {
                if let Some((path, _)) = &self.options.dynamic_client_conf {
                    return Err(format!(
                        "the dynamic client conf {} has not parsed as {:?} yet",
                        path.display(),
                        self.options.dynamic_client_conf_format
                    ));
                }
            }
        }
        Ok(items.into_iter().collect())
    }

    /// Reads of the dynamic client conf file that its parser rejected so far; each interval
    /// re-reads a rejected file until it parses, so this keeps rising while it is invalid.
    pub fn client_conf_rejected(&self) -> u64 {
        self.client_conf_rejected.load(Ordering::Relaxed)
    }

    /// `fetchRemoteStorage`: the app's remote storage, chosen once by app count (APP_BALANCE).
    /// The choice is released when the app expires; like Java, this call alone does not make
    /// the app known (clients register and heartbeat it first).
    pub fn remote_storage(&self, app_id: &str) -> Option<RemoteStorage> {
        self.storages.lock().pick(app_id)
    }

    /// The remote storage path each app was given by `fetchRemoteStorage` (Java's
    /// `appIdToRemoteStorageInfo`); apps that never asked are absent.
    pub fn remote_storage_paths(&self) -> HashMap<String, String> {
        let storages = self.storages.lock();
        self.apps()
            .into_iter()
            .filter_map(|a| storages.of(&a.app_id).map(|p| (a.app_id, p.to_owned())))
            .collect()
    }

    /// Apps per remote storage path.
    pub fn remote_storage_counts(&self) -> BTreeMap<String, u64> {
        self.storages.lock().counts()
    }

    /// Apps and pending admissions per user, as the quota checker counts them.
    pub fn user_app_counts(&self) -> HashMap<String, usize> {
        self.quotas.lock().counts(Instant::now())
    }

    /// Servers per shuffle by default and at most (Java's `rss.coordinator.shuffle.nodes.max`),
    /// as running.
    pub fn shuffle_nodes_max(&self) -> usize {
        self.shuffle_nodes_max.load(Ordering::Relaxed)
    }

    /// Runtime reconfiguration of [`Coordinator::shuffle_nodes_max`]; the next assignment and
    /// `accessCluster` use it.
    pub fn set_shuffle_nodes_max(&self, n: usize) {
        self.shuffle_nodes_max.store(n.max(1), Ordering::Relaxed);
    }

    /// Follows `coordinator.shuffle_server_number` through runtime reconfiguration (the file
    /// or a REST update), as Java's `rss.coordinator.shuffle.nodes.max` does.
    pub fn follow_reloads(self: &Arc<Self>, runtime: &crate::config::reload::Runtime) {
        let coordinator = Arc::clone(self);
        runtime.listen(
            &["coordinator.shuffle_server_number"],
            Box::new(move |c| {
                coordinator.set_shuffle_nodes_max(c.coordinator.shuffle_server_number);
                Ok(())
            }),
        );
    }

    /// The policy in force (`default_server_number` as at start-up: see
    /// [`Coordinator::shuffle_nodes_max`]).
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
                let report = NodeReport::from_heartbeat(req, crate::clock::now_ms());
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
        let live = self.assignable_shared();
        let policy = AssignPolicy {
            shuffle_nodes_max: self.shuffle_nodes_max(),
            host: self.options.host_strategy,
            partition: self.options.partition_strategy,
        };
        let turn = self.assign_turn.lock();
        let now = Instant::now();
        let (load, expired) = self.apps.lock().load(now);
        let ranges = assign::assign(&live, &load, req, &policy);
        // Dropped before the load changes, so adding to it does not copy it.
        drop(load);
        if let Ok(ranges) = &ranges {
            let added = assign::partitions_per_server(ranges);
            self.apps.lock().add_load(app_id, added, now);
        }
        drop(turn);
        self.release_storages(&expired);
        Ok(ranges?
            .iter()
            .map(|range| proto::PartitionRangeAssignment {
                start_partition: range.start,
                end_partition: range.end,
                server: range.servers.iter().map(|s| s.to_proto()).collect(),
            })
            .collect())
    }

    /// Remembers which servers shuffle `shuffle_id` of `app_id` went to (after a successful
    /// [`Coordinator::assign`]), for the dashboard's app page.
    pub fn record_shuffle(
        &self,
        app_id: &str,
        shuffle_id: i32,
        partitions: i32,
        assignments: &[proto::PartitionRangeAssignment],
    ) {
        // Thousands of ranges over a few servers: each id is copied once, not once per range.
        let servers = assignments
            .iter()
            .flat_map(|a| a.server.iter().map(|s| s.id.as_str()))
            .collect::<BTreeSet<&str>>()
            .into_iter()
            .map(str::to_owned)
            .collect();
        self.apps.lock().record_shuffle(
            app_id,
            ShuffleRecord {
                shuffle_id,
                partitions,
                servers,
            },
        );
    }

    /// The live app `app_id` with its shuffles and load.
    pub fn app_detail(&self, app_id: &str) -> Option<AppDetail> {
        self.apps.lock().detail(app_id, Instant::now())
    }

    /// The dashboard's history of samples.
    pub fn history(&self) -> &dashboard::history::History {
        &self.history
    }

    /// `appHeartbeat`: keeps the app (and its load) alive.
    pub fn app_heartbeat(&self, app_id: &str) {
        let now = Instant::now();
        self.apps.lock().touch(app_id, now);
        self.quotas.lock().touch(app_id, now);
    }

    /// `registerApplicationInfo`: starts tracking the app, in the quota's count too.
    pub fn register_app(&self, app_id: &str, user: &str) {
        let now = Instant::now();
        self.apps.lock().register(app_id, user, now);
        self.quotas.lock().register(app_id, user, now);
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
        let mut apps = self.apps.lock().snapshots(Instant::now());
        apps.sort_unstable_by(|a, b| a.app_id.cmp(&b.app_id));
        apps
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

    /// The excluded server ids, sorted: the runtime set and the exclude-nodes file's.
    pub fn excluded(&self) -> BTreeSet<String> {
        let mut all = self.excluded.lock().clone();
        all.extend(self.files.read().excluded.iter().cloned());
        all
    }

    /// Partitions assigned per server id, over the live apps: the load the next assignment
    /// balances against.
    pub fn load(&self) -> HashMap<String, u64> {
        let mut apps = self.apps.lock();
        let (load, expired) = apps.load(Instant::now());
        drop(apps);
        let load = HashMap::clone(&load);
        self.release_storages(&expired);
        load
    }

    /// Releases the remote storage choice of apps that expired.
    fn release_storages(&self, expired: &[String]) {
        if !expired.is_empty() {
            let mut storages = self.storages.lock();
            for app_id in expired {
                storages.release(app_id);
            }
        }
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

    /// Servers excluded from assignment (`exclude_server_num`): the REST API's runtime list
    /// and the exclude-nodes file's, each id once.
    pub fn excluded_count(&self) -> usize {
        self.excluded().len()
    }

    /// Drops silent servers and expired apps. Reads already ignore them; this only frees memory.
    pub fn sweep(&self) {
        self.servers.sweep();
        let now = Instant::now();
        let expired = self.apps.lock().sweep(now);
        self.release_storages(&expired);
        self.quotas.lock().expire(now);
    }

    /// Runs [`Coordinator::sweep`] every half of the shorter timeout until `cancel` fires.
    pub fn spawn_sweeper(self: &Arc<Self>, cancel: CancellationToken, tracker: &TaskTracker) {
        let interval = (self.options.server_timeout.min(self.options.app_timeout) / 2)
            .max(Duration::from_millis(10));
        let coordinator = Arc::clone(self);
        crate::periodic::periodic(tracker, interval, cancel, move || {
            coordinator.sweep();
            std::future::ready(())
        });
    }
}

/// The operator files the coordinator watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Exclude,
    ClientConf,
    Quota,
    Candidates,
}

impl FileKind {
    const ALL: [FileKind; 4] = [
        FileKind::Exclude,
        FileKind::ClientConf,
        FileKind::Quota,
        FileKind::Candidates,
    ];
}
