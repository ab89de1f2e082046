//! The `CoordinatorServer` tonic service: converts requests, calls [`Coordinator`], and always
//! answers with a Uniffle status code (clients treat gRPC errors as an unreachable coordinator).

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::proto::coordinator_server_server::{CoordinatorServer, CoordinatorServerServer};
use crate::proto::{self, StatusCode};

use super::{AccessRequest, AssignRequest, Coordinator};

/// The gRPC front end of a [`Coordinator`].
#[derive(Debug, Clone)]
pub struct CoordinatorService {
    coordinator: Arc<Coordinator>,
}

impl CoordinatorService {
    /// A service over `coordinator`.
    pub fn new(coordinator: Arc<Coordinator>) -> Self {
        CoordinatorService { coordinator }
    }

    /// The tonic server to add to the router.
    pub fn into_server(self) -> CoordinatorServerServer<Self> {
        CoordinatorServerServer::new(self)
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
        let req = request.into_inner();
        let assign = AssignRequest {
            partition_num: req.partition_num,
            partition_num_per_range: req.partition_num_per_range,
            replica: req.data_replica,
            server_number: req.assignment_shuffle_server_number,
            require_tags: &req.require_tags,
            faulty_server_ids: &req.faulty_server_ids,
            estimate_task_concurrency: req.estimate_task_concurrency,
        };
        let response = match self.coordinator.assign(&req.application_id, &assign) {
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
        };
        Ok(Response::new(response))
    }

    async fn heartbeat(
        &self,
        request: Request<proto::ShuffleServerHeartBeatRequest>,
    ) -> Rpc<proto::ShuffleServerHeartBeatResponse> {
        let req = request.into_inner();
        if !self.coordinator.heartbeat(&req) {
            tracing::warn!("heartbeat without a server id ignored");
        }
        // SUCCESS even for malformed content, as the Java coordinator answers.
        Ok(Response::new(proto::ShuffleServerHeartBeatResponse {
            status: StatusCode::Success as i32,
            ret_msg: String::new(),
        }))
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
        _request: Request<()>,
    ) -> Rpc<proto::CheckServiceAvailableResponse> {
        Ok(Response::new(proto::CheckServiceAvailableResponse {
            status: StatusCode::Success as i32,
            available: self.coordinator.servers().live_count() > 0,
        }))
    }

    async fn app_heartbeat(
        &self,
        request: Request<proto::AppHeartBeatRequest>,
    ) -> Rpc<proto::AppHeartBeatResponse> {
        let req = request.into_inner();
        self.coordinator.app_heartbeat(&req.app_id);
        Ok(Response::new(proto::AppHeartBeatResponse {
            status: StatusCode::Success as i32,
            ret_msg: String::new(),
        }))
    }

    async fn report_client_operation(
        &self,
        request: Request<proto::ReportShuffleClientOpRequest>,
    ) -> Rpc<proto::ReportShuffleClientOpResponse> {
        let req = request.into_inner();
        tracing::info!(
            client = %format!("{}:{}", req.client_host, req.client_port),
            server_id = req.server.as_ref().map_or("", |s| s.id.as_str()),
            operation = %req.operation,
            "client reported an operation"
        );
        Ok(Response::new(proto::ReportShuffleClientOpResponse {
            status: StatusCode::Success as i32,
            ret_msg: String::new(),
        }))
    }

    async fn register_application_info(
        &self,
        request: Request<proto::ApplicationInfoRequest>,
    ) -> Rpc<proto::ApplicationInfoResponse> {
        let req = request.into_inner();
        self.coordinator.register_app(&req.app_id, &req.user);
        self.coordinator.set_app_client(
            &req.app_id,
            req.version.as_deref().unwrap_or_default(),
            req.git_commit_id.as_deref().unwrap_or_default(),
        );
        tracing::info!(app_id = %req.app_id, user = %req.user,
            version = req.version.as_deref().unwrap_or(""), "app registered with the coordinator");
        Ok(Response::new(proto::ApplicationInfoResponse {
            status: StatusCode::Success as i32,
            ret_msg: String::new(),
        }))
    }

    async fn access_cluster(
        &self,
        request: Request<proto::AccessClusterRequest>,
    ) -> Rpc<proto::AccessClusterResponse> {
        let req = request.into_inner();
        let access = AccessRequest {
            access_id: &req.access_id,
            tags: &req.tags,
            properties: &req.extra_properties,
            user: &req.user,
        };
        // With no checkers configured everyone is let in, as a Java coordinator with an empty
        // `rss.coordinator.access.checkers`.
        let response = match self.coordinator.access(&access) {
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
        };
        Ok(Response::new(response))
    }

    async fn fetch_client_conf(
        &self,
        _request: Request<()>,
    ) -> Rpc<proto::FetchClientConfResponse> {
        Ok(Response::new(self.client_conf()))
    }

    async fn fetch_client_conf_v2(
        &self,
        _request: Request<proto::FetchClientConfRequest>,
    ) -> Rpc<proto::FetchClientConfResponse> {
        // The same items for every user and property set, as Java's default (and only shipped)
        // apply strategy answers; see `Coordinator::client_conf`.
        Ok(Response::new(self.client_conf()))
    }

    async fn fetch_remote_storage(
        &self,
        request: Request<proto::FetchRemoteStorageRequest>,
    ) -> Rpc<proto::FetchRemoteStorageResponse> {
        let req = request.into_inner();
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
        Ok(Response::new(proto::FetchRemoteStorageResponse {
            status: StatusCode::Success as i32,
            remote_storage: Some(remote_storage),
        }))
    }
}

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
