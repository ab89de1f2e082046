//! The `CoordinatorServer` tonic service: converts requests, calls [`Coordinator`], and always
//! answers with a Uniffle status code (clients treat gRPC errors as an unreachable coordinator).
//!
//! Every method Java's `CoordinatorGrpcService` audits writes a line to the coordinator's RPC
//! audit log ([`crate::audit::rpc`]), with Java's `appId` and `args{…}` per command; the server
//! list, server count and storage-info calls are not audited, as in Java.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::audit::rpc::{status_name, Args, Command, Entry};
use crate::audit::RpcAudit;
use crate::proto::coordinator_server_server::{CoordinatorServer, CoordinatorServerServer};
use crate::proto::{self, StatusCode};

use super::access::AccessRequest;
use super::assign::AssignRequest;
use super::Coordinator;

/// The gRPC front end of a [`Coordinator`].
#[derive(Clone)]
pub struct CoordinatorService {
    coordinator: Arc<Coordinator>,
    audit: RpcAudit,
}

impl std::fmt::Debug for CoordinatorService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinatorService")
            .field("coordinator", &self.coordinator)
            .finish_non_exhaustive()
    }
}

impl CoordinatorService {
    /// A service over `coordinator`, writing no audit lines.
    pub fn new(coordinator: Arc<Coordinator>) -> Self {
        CoordinatorService {
            coordinator,
            audit: RpcAudit::off(),
        }
    }

    /// The same service, writing a line per audited call to `audit` (the coordinator's log).
    pub fn with_audit(mut self, audit: RpcAudit) -> Self {
        self.audit = audit;
        self
    }

    /// The tonic server to add to the router.
    pub fn into_server(self) -> CoordinatorServerServer<Self> {
        CoordinatorServerServer::new(self)
    }

    /// The one path of an audited call: the audit entry begun from the request's peer (`None`
    /// when off or excluded), `call` answering, `describe` filling the entry from the request
    /// (after the call, so it may take the request's fields), and the line finished with the
    /// status answered.
    fn handle<Req, Resp: Answer>(
        &self,
        command: Command,
        request: Request<Req>,
        call: impl FnOnce(&Req) -> Resp,
        describe: impl FnOnce(Req, &mut Entry),
    ) -> Rpc<Resp> {
        let entry = self.audit.begin(command, request.remote_addr());
        let req = request.into_inner();
        let response = call(&req);
        if let Some(mut entry) = entry {
            describe(req, &mut entry);
            entry.finish(status_name(response.status()));
        }
        Ok(Response::new(response))
    }

    fn client_conf(&self) -> proto::FetchClientConfResponse {
        match self.coordinator.client_conf() {
            Ok(items) => proto::FetchClientConfResponse {
                status: StatusCode::Success as i32,
                ret_msg: String::new(),
                client_conf: items
                    .into_iter()
                    .map(|(key, value)| proto::ClientConfItem { key, value })
                    .collect(),
            },
            Err(message) => {
                tracing::warn!(%message, "fetchClientConf failed");
                proto::FetchClientConfResponse {
                    status: StatusCode::InternalError as i32,
                    ret_msg: message,
                    client_conf: Vec::new(),
                }
            }
        }
    }
}

type Rpc<T> = std::result::Result<Response<T>, Status>;

#[tonic::async_trait]
impl CoordinatorServer for CoordinatorService {
    async fn get_shuffle_server_list(
        &self,
        _request: Request<()>,
    ) -> Rpc<proto::GetShuffleServerListResponse> {
        let servers = self.coordinator.servers().live();
        Ok(Response::new(proto::GetShuffleServerListResponse {
            servers: servers.iter().map(|s| s.to_proto()).collect(),
        }))
    }

    async fn get_shuffle_server_num(
        &self,
        _request: Request<()>,
    ) -> Rpc<proto::GetShuffleServerNumResponse> {
        let num = self.coordinator.servers().live_count();
        Ok(Response::new(proto::GetShuffleServerNumResponse {
            num: i32::try_from(num).unwrap_or(i32::MAX),
        }))
    }

    async fn get_shuffle_assignments(
        &self,
        request: Request<proto::GetShuffleServerRequest>,
    ) -> Rpc<proto::GetShuffleAssignmentsResponse> {
        let call = |req: &proto::GetShuffleServerRequest| {
            let assign = AssignRequest {
                partition_num: req.partition_num,
                partition_num_per_range: req.partition_num_per_range,
                replica: req.data_replica,
                server_number: req.assignment_shuffle_server_number,
                require_tags: &req.require_tags,
                faulty_server_ids: &req.faulty_server_ids,
                estimate_task_concurrency: req.estimate_task_concurrency,
            };
            match self.coordinator.assign(&req.application_id, &assign) {
                Ok(assignments) => {
                    tracing::info!(
                        app_id = %req.application_id,
                        shuffle_id = req.shuffle_id,
                        partition_num = req.partition_num,
                        replica = req.data_replica,
                        servers = ?distinct_ids(&assignments),
                        "shuffle assigned"
                    );
                    self.coordinator.record_shuffle(
                        &req.application_id,
                        req.shuffle_id,
                        req.partition_num,
                        &assignments,
                    );
                    proto::GetShuffleAssignmentsResponse {
                        status: StatusCode::Success as i32,
                        assignments,
                        ret_msg: String::new(),
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        app_id = %req.application_id,
                        shuffle_id = req.shuffle_id,
                        partition_num = req.partition_num,
                        partition_num_per_range = req.partition_num_per_range,
                        replica = req.data_replica,
                        require_tags = ?req.require_tags,
                        faulty = ?req.faulty_server_ids,
                        error = %e,
                        "getShuffleAssignments failed"
                    );
                    proto::GetShuffleAssignmentsResponse {
                        status: StatusCode::InternalError as i32,
                        assignments: Vec::new(),
                        ret_msg: e.to_string(),
                    }
                }
            }
        };
        let describe = |req: proto::GetShuffleServerRequest, entry: &mut Entry| {
            entry.app(&req.application_id).args(Args::Assignment {
                shuffle_id: req.shuffle_id,
                partition_num: req.partition_num,
                per_range: req.partition_num_per_range,
                replica: req.data_replica,
                tags: req.require_tags,
                server_number: req.assignment_shuffle_server_number,
                faulty: req.faulty_server_ids,
            });
        };
        self.handle(Command::GetShuffleAssignments, request, call, describe)
    }

    async fn heartbeat(
        &self,
        request: Request<proto::ShuffleServerHeartBeatRequest>,
    ) -> Rpc<proto::ShuffleServerHeartBeatResponse> {
        let call = |req: &proto::ShuffleServerHeartBeatRequest| {
            if !self.coordinator.heartbeat(req) {
                tracing::warn!("heartbeat without a server id ignored");
            }
            // SUCCESS even for malformed content, as the Java coordinator answers.
            proto::ShuffleServerHeartBeatResponse {
                status: StatusCode::Success as i32,
                ret_msg: String::new(),
            }
        };
        let describe = |req: proto::ShuffleServerHeartBeatRequest, entry: &mut Entry| {
            // Java logs the id of the node it built from the request: empty when unset.
            let id = req.server_id.map(|s| s.id).unwrap_or_default();
            entry.args(Args::ServerNode(id));
        };
        self.handle(Command::Heartbeat, request, call, describe)
    }

    async fn get_shuffle_data_storage_info(
        &self,
        _request: Request<()>,
    ) -> Rpc<proto::GetShuffleDataStorageInfoResponse> {
        // No released client calls this; the Java coordinator's fields are legacy.
        Ok(Response::new(proto::GetShuffleDataStorageInfoResponse {
            storage: String::new(),
            storage_path: self
                .coordinator
                .options()
                .remote_storage_path
                .clone()
                .unwrap_or_default(),
            storage_pattern: String::new(),
        }))
    }

    async fn check_service_available(
        &self,
        request: Request<()>,
    ) -> Rpc<proto::CheckServiceAvailableResponse> {
        let call = |_: &()| proto::CheckServiceAvailableResponse {
            status: StatusCode::Success as i32,
            available: self.coordinator.servers().live_count() > 0,
        };
        self.handle(Command::CheckServiceAvailable, request, call, |_, _| {})
    }

    async fn app_heartbeat(
        &self,
        request: Request<proto::AppHeartBeatRequest>,
    ) -> Rpc<proto::AppHeartBeatResponse> {
        let call = |req: &proto::AppHeartBeatRequest| {
            self.coordinator.app_heartbeat(&req.app_id);
            proto::AppHeartBeatResponse {
                status: StatusCode::Success as i32,
                ret_msg: String::new(),
            }
        };
        let describe = |req: proto::AppHeartBeatRequest, entry: &mut Entry| {
            entry.app(&req.app_id);
        };
        self.handle(Command::CoordinatorAppHeartbeat, request, call, describe)
    }

    async fn report_client_operation(
        &self,
        request: Request<proto::ReportShuffleClientOpRequest>,
    ) -> Rpc<proto::ReportShuffleClientOpResponse> {
        let call = |req: &proto::ReportShuffleClientOpRequest| {
            tracing::info!(
                client = %format!("{}:{}", req.client_host, req.client_port),
                server_id = req.server.as_ref().map_or("", |s| s.id.as_str()),
                operation = %req.operation,
                "client reported an operation"
            );
            proto::ReportShuffleClientOpResponse {
                status: StatusCode::Success as i32,
                ret_msg: String::new(),
            }
        };
        let describe = |req: proto::ReportShuffleClientOpRequest, entry: &mut Entry| {
            entry.args(Args::ClientOperation {
                host: req.client_host,
                port: req.client_port,
                operation: req.operation,
                server: req.server,
            });
        };
        self.handle(Command::ReportClientOperation, request, call, describe)
    }

    async fn register_application_info(
        &self,
        request: Request<proto::ApplicationInfoRequest>,
    ) -> Rpc<proto::ApplicationInfoResponse> {
        let call = |req: &proto::ApplicationInfoRequest| {
            self.coordinator.register_app(&req.app_id, &req.user);
            self.coordinator.set_app_client(
                &req.app_id,
                req.version.as_deref().unwrap_or_default(),
                req.git_commit_id.as_deref().unwrap_or_default(),
            );
            tracing::info!(app_id = %req.app_id, user = %req.user,
                version = req.version.as_deref().unwrap_or(""), "app registered with the coordinator");
            proto::ApplicationInfoResponse {
                status: StatusCode::Success as i32,
                ret_msg: String::new(),
            }
        };
        let describe = |req: proto::ApplicationInfoRequest, entry: &mut Entry| {
            entry.app(&req.app_id).args(Args::User(req.user));
        };
        self.handle(Command::RegisterApplicationInfo, request, call, describe)
    }

    async fn access_cluster(
        &self,
        request: Request<proto::AccessClusterRequest>,
    ) -> Rpc<proto::AccessClusterResponse> {
        let call = |req: &proto::AccessClusterRequest| {
            let access = AccessRequest {
                access_id: &req.access_id,
                tags: &req.tags,
                properties: &req.extra_properties,
                user: &req.user,
            };
            // With no checkers configured everyone is let in, as a Java coordinator with an
            // empty `rss.coordinator.access.checkers`.
            match self.coordinator.access(&access) {
                Ok(uuid) => {
                    tracing::info!(access_id = %req.access_id, user = %req.user, uuid, "cluster access granted");
                    proto::AccessClusterResponse {
                        status: StatusCode::Success as i32,
                        ret_msg: "SUCCESS".into(),
                        uuid,
                    }
                }
                Err(message) => {
                    tracing::warn!(access_id = %req.access_id, user = %req.user, %message, "cluster access denied");
                    // Java answers a denial with an empty uuid.
                    proto::AccessClusterResponse {
                        status: StatusCode::AccessDenied as i32,
                        ret_msg: message,
                        uuid: String::new(),
                    }
                }
            }
        };
        let describe = |req: proto::AccessClusterRequest, entry: &mut Entry| {
            let mut properties: Vec<(String, String)> = req.extra_properties.into_iter().collect();
            properties.sort_unstable();
            entry.args(Args::Access {
                access_id: req.access_id,
                user: req.user,
                tags: req.tags,
                properties,
            });
        };
        self.handle(Command::AccessCluster, request, call, describe)
    }

    /// Java logs SUCCESS whatever it answered, and its answer is always SUCCESS; Spillway can
    /// answer INTERNAL_ERROR (an unreadable conf file), and logs what it answered.
    async fn fetch_client_conf(&self, request: Request<()>) -> Rpc<proto::FetchClientConfResponse> {
        let call = |_: &()| self.client_conf();
        self.handle(Command::FetchClientConf, request, call, |_, _| {})
    }

    async fn fetch_client_conf_v2(
        &self,
        request: Request<proto::FetchClientConfRequest>,
    ) -> Rpc<proto::FetchClientConfResponse> {
        // The same items for every user and property set, as Java's default (and only shipped)
        // apply strategy answers; see `Coordinator::client_conf`.
        let call = |_: &proto::FetchClientConfRequest| self.client_conf();
        self.handle(Command::FetchClientConfV2, request, call, |_, _| {})
    }

    async fn fetch_remote_storage(
        &self,
        request: Request<proto::FetchRemoteStorageRequest>,
    ) -> Rpc<proto::FetchRemoteStorageResponse> {
        let call = |req: &proto::FetchRemoteStorageRequest| {
            let storage = self.coordinator.remote_storage(&req.app_id);
            tracing::debug!(app_id = %req.app_id, path = storage.as_ref().map_or("", |s| s.path.as_str()),
                "remote storage picked");
            // No path configured: SUCCESS with an empty path, as Java answers.
            let remote_storage =
                storage.map_or_else(proto::RemoteStorage::default, |s| proto::RemoteStorage {
                    path: s.path,
                    remote_storage_conf: s
                        .conf
                        .into_iter()
                        .map(|(key, value)| proto::RemoteStorageConfItem { key, value })
                        .collect(),
                });
            proto::FetchRemoteStorageResponse {
                status: StatusCode::Success as i32,
                remote_storage: Some(remote_storage),
            }
        };
        let describe = |req: proto::FetchRemoteStorageRequest, entry: &mut Entry| {
            entry.app(&req.app_id);
        };
        self.handle(Command::FetchRemoteStorage, request, call, describe)
    }
}

/// A coordinator answer the audit line takes its status from.
trait Answer {
    /// The Uniffle status code answered.
    fn status(&self) -> i32;
}

macro_rules! answers {
    ($($t:ident),* $(,)?) => {
        $(impl Answer for proto::$t {
            fn status(&self) -> i32 {
                self.status
            }
        })*
    };
}

answers!(
    GetShuffleAssignmentsResponse,
    ShuffleServerHeartBeatResponse,
    CheckServiceAvailableResponse,
    AppHeartBeatResponse,
    ReportShuffleClientOpResponse,
    ApplicationInfoResponse,
    AccessClusterResponse,
    FetchClientConfResponse,
    FetchRemoteStorageResponse,
);

/// The server ids used by `assignments`, sorted, for the log line.
fn distinct_ids(assignments: &[proto::PartitionRangeAssignment]) -> Vec<&str> {
    let mut ids: Vec<&str> = assignments
        .iter()
        .flat_map(|a| a.server.iter().map(|s| s.id.as_str()))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}
