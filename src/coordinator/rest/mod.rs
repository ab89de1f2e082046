//! The Java coordinator's REST API on the HTTP port, so the Uniffle dashboard, the admin CLI and
//! the Kubernetes operator's decommission flow work against the embedded coordinator unchanged.
//!
//! Read from the Java source (apache/incubator-uniffle `coordinator/.../web/resource/`
//! `ServerResource.java`, `ApplicationResource.java`, `CoordinatorServerResource.java`, the VOs
//! in `web/vo/`, `common/.../web/resource/Response.java`, `BaseResource.java`,
//! `AuthorizationRequestFilter.java`; `SimpleClusterManager.java` and `ServerNode.java` from
//! apache/uniffle; `ApplicationManager.java`, `common/.../Application.java`). The stored
//! versions are master snapshots around 0.10, not the 0.10.0 tag; where they differ from each
//! other the notes below say which one is followed.
//!
//! Every answer is Java's envelope `{"code": 0|-1, "data": …, "errMsg": "success"|reason}` with
//! HTTP 200, errors included, as Java's `BaseResource.execute` turns exceptions into code -1.
//! Only the decommission calls sit behind the admin guard, where Java puts `@Authorization`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};

mod applications;
mod envelope;

pub(super) use envelope::walk;
pub use envelope::RestContext;
use envelope::{fail, json_body, success, Ctx, Refused};

use super::registry::{NodeReport, ServerNode};
use crate::proto::shuffle_server_internal_client::ShuffleServerInternalClient;
use crate::proto::{self, ServerStatus, StatusCode as WireCode};

/// How long a decommission call may take to reach a server; the operator's HTTP call waits for
/// it, so an unreachable server must answer an error rather than hang the request.
const INTERNAL_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The routes anyone may call (Java has no `@Authorization` on them).
pub fn open_routes(ctx: Arc<RestContext>) -> Router {
    Router::new()
        .route("/api/server/status", get(status))
        .route("/api/server/nodes", get(nodes))
        .route("/api/server/nodes/summary", get(summary))
        .route("/api/server/nodes/{id}", get(node))
        .route("/api/server/applications", post(applications::applications))
        .route("/api/server/deleteServer", delete(delete_server))
        .route("/api/server/addExcludeNodes", post(add_exclude))
        .route("/api/server/removeExcludeNodes", post(remove_exclude))
        .route("/api/app/total", get(app_total))
        .route("/api/app/userTotal", get(user_total))
        .route("/api/app/appInfos", get(app_infos))
        .route("/api/coordinator/info", get(info))
        .route("/api/admin/refreshChecker", get(refresh_checker))
        .with_state(ctx)
}

/// The routes Java guards with `@Authorization`: the caller puts the admin guard on them.
pub fn admin_routes(ctx: Arc<RestContext>) -> Router {
    Router::new()
        .route("/api/server/decommission", post(decommission_batch))
        .route("/api/server/cancelDecommission", post(cancel_batch))
        .route("/api/server/{id}/decommission", post(decommission_one))
        .route("/api/server/{id}/cancelDecommission", post(cancel_one))
        .with_state(ctx)
}

/// A server as Java's Jackson writes `ServerNode` (its public getters; apache/uniffle
/// `ServerNode.java`, whose `appIdToInfos` is `@JsonIgnore`d). Used for the list and for one
/// node alike: the newer incubator master nests the same fields in a `ServerNodeVO` for the
/// list only, with the same names.
fn node_json(node: &ServerNode, report: &NodeReport) -> Value {
    let storage: serde_json::Map<String, Value> = report
        .storage_info
        .iter()
        .map(|(mount, info)| (mount.clone(), storage_json(info)))
        .collect();
    json!({
        "id": node.id,
        "ip": node.ip,
        "grpcPort": node.grpc_port,
        "timestamp": report.timestamp_ms,
        "preAllocatedMemory": report.pre_allocated_memory,
        "availableMemory": node.available_memory,
        "eventNumInFlush": report.event_num_in_flush,
        "usedMemory": node.used_memory,
        "tags": node.tags,
        "status": node.status.as_str_name(),
        "storageInfo": storage,
        "registrationTime": report.registration_ms,
        "totalMemory": node.available_memory.saturating_add(node.used_memory),
        // Java keeps -1 unless the heartbeat carried a positive port.
        "nettyPort": if node.netty_port > 0 { node.netty_port } else { -1 },
        "jettyPort": if node.jetty_port > 0 { node.jetty_port } else { -1 },
        "startTime": report.start_time_ms,
        "version": report.version,
        "gitCommitId": report.git_commit_id,
        "displayMetrics": report.display_metrics,
    })
}

/// Java's `StorageInfo` has public getters for these three only, so Jackson writes only them;
/// the enums by Java name (the proto's `*_UNKNOWN` is Java's `UNKNOWN`).
fn storage_json(info: &proto::StorageInfo) -> Value {
    use proto::storage_info::{StorageMedia, StorageStatus};
    let media = match StorageMedia::try_from(info.storage_media) {
        Ok(StorageMedia::Hdd) => "HDD",
        Ok(StorageMedia::Ssd) => "SSD",
        Ok(StorageMedia::Hdfs) => "HDFS",
        Ok(StorageMedia::ObjectStore) => "OBJECT_STORE",
        Ok(StorageMedia::StorageTypeUnknown) | Err(_) => "UNKNOWN",
    };
    let status = match StorageStatus::try_from(info.status) {
        Ok(StorageStatus::Normal) => "NORMAL",
        Ok(StorageStatus::Unhealthy) => "UNHEALTHY",
        Ok(StorageStatus::Overused) => "OVERUSED",
        Ok(StorageStatus::Unknown) | Err(_) => "UNKNOWN",
    };
    json!({"status": status, "type": media, "usedBytes": info.used_bytes})
}

/// Java's `new ServerNode(id)` for an excluded id: every field at its default, status EXCLUDED.
fn excluded_json(id: &str, now_ms: i64) -> Value {
    json!({
        "id": id,
        "ip": "",
        "grpcPort": 0,
        "timestamp": now_ms,
        "preAllocatedMemory": 0,
        "availableMemory": 0,
        "eventNumInFlush": 0,
        "usedMemory": 0,
        "tags": [],
        "status": ServerStatus::Excluded.as_str_name(),
        "storageInfo": {},
        "registrationTime": now_ms,
        "totalMemory": 0,
        "nettyPort": -1,
        "jettyPort": -1,
        "startTime": -1,
        "version": "",
        "gitCommitId": "",
        "displayMetrics": {},
    })
}

/// `GET /api/server/status`: a liveness answer.
async fn status() -> Response {
    success(json!("success"))
}

#[derive(Deserialize)]
struct StatusQuery {
    status: Option<String>,
}

/// `GET /api/server/nodes[?status=…]`: UNHEALTHY, LOST and EXCLUDED (any case) pick their own
/// lists; anything else lists the live servers that are not excluded, filtered by status name
/// (so an unknown status answers an empty list). Sorted by id.
async fn nodes(State(ctx): Ctx, Query(q): Query<StatusQuery>) -> Response {
    walk(move || {
        let c = &ctx.coordinator;
        let wanted = q.status.as_deref();
        let is = |s: ServerStatus| wanted.is_some_and(|w| w.eq_ignore_ascii_case(s.as_str_name()));
        let excluded = c.excluded();
        let mut list: Vec<(String, Value)> = if is(ServerStatus::Unhealthy) {
            c.servers()
                .live_reports()
                .into_iter()
                .filter(|(n, _)| n.status == ServerStatus::Unhealthy)
                .map(|(n, r)| (n.id.clone(), node_json(&n, &r)))
                .collect()
        } else if is(ServerStatus::Lost) {
            c.servers()
                .lost()
                .into_iter()
                .map(|(n, r)| (n.id.clone(), node_json(&n, &r)))
                .collect()
        } else if is(ServerStatus::Excluded) {
            let now = crate::clock::now_ms();
            excluded
                .iter()
                .map(|id| (id.clone(), excluded_json(id, now)))
                .collect()
        } else {
            c.servers()
                .live_reports()
                .into_iter()
                .filter(|(n, _)| !excluded.contains(&n.id))
                .filter(|(n, _)| {
                    wanted.is_none_or(|w| w.eq_ignore_ascii_case(n.status.as_str_name()))
                })
                .map(|(n, r)| (n.id.clone(), node_json(&n, &r)))
                .collect()
        };
        list.sort_by(|a, b| a.0.cmp(&b.0));
        success(Value::Array(list.into_iter().map(|(_, v)| v).collect()))
    })
    .await
}

/// `GET /api/server/nodes/{id}`: a live server, excluded or not.
async fn node(State(ctx): Ctx, Path(id): Path<String>) -> Response {
    match ctx.coordinator.servers().get_report(&id) {
        Some((n, r)) => success(node_json(&n, &r)),
        None => fail(not_found(&id)),
    }
}

/// Java's `InvalidRequestException` text for an unknown server id.
fn not_found(id: &str) -> String {
    format!("Server Id [{id}] not found!")
}

/// `GET /api/server/nodes/summary`: servers per status name. Each id counts once, first found
/// in this order, as Java's `distinct()` over its lists does: live and not excluded (their own
/// status), lost (LOST), excluded (EXCLUDED).
async fn summary(State(ctx): Ctx) -> Response {
    walk(move || {
        let c = &ctx.coordinator;
        let excluded = c.excluded();
        let mut seen = HashSet::new();
        let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
        let live = c.servers().live_reports();
        let lost = c.servers().lost();
        let statuses = live
            .iter()
            .filter(|(n, _)| !excluded.contains(&n.id))
            .map(|(n, _)| (n.id.as_str(), n.status))
            .chain(
                lost.iter()
                    .map(|(n, _)| (n.id.as_str(), ServerStatus::Lost)),
            )
            .chain(
                excluded
                    .iter()
                    .map(|id| (id.as_str(), ServerStatus::Excluded)),
            );
        for (id, status) in statuses {
            if seen.insert(id) {
                *counts.entry(status.as_str_name()).or_insert(0) += 1;
            }
        }
        success(json!(counts))
    })
    .await
}

/// Java's `DecommissionRequest` / `CancelDecommissionRequest`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ServerIds {
    #[serde(default)]
    server_ids: Option<Vec<String>>,
}

#[derive(Clone, Copy)]
enum Op {
    Decommission,
    Cancel,
}

async fn batch(ctx: &RestContext, body: &Bytes, op: Op) -> Response {
    let ids = match json_body::<ServerIds>(body) {
        Ok(req) => req.unwrap_or_default().server_ids.unwrap_or_default(),
        Err(refused) => return refused.into_response(),
    };
    if ids.is_empty() {
        return fail("Parameter[serverIds] should not be empty!");
    }
    // One by one, stopping at the first failure, as Java's forEach does: earlier servers stay
    // decommissioned.
    for id in &ids {
        if let Err(msg) = call_server(ctx, id, op).await {
            return fail(msg);
        }
    }
    success(Value::Null)
}

/// `POST /api/server/decommission` with `{"serverIds": [...]}`.
async fn decommission_batch(State(ctx): Ctx, body: Bytes) -> Response {
    batch(&ctx, &body, Op::Decommission).await
}

/// `POST /api/server/cancelDecommission` with `{"serverIds": [...]}`.
async fn cancel_batch(State(ctx): Ctx, body: Bytes) -> Response {
    batch(&ctx, &body, Op::Cancel).await
}

/// `POST /api/server/{id}/decommission`.
async fn decommission_one(State(ctx): Ctx, Path(id): Path<String>) -> Response {
    match call_server(&ctx, &id, Op::Decommission).await {
        Ok(()) => success(Value::Null),
        Err(msg) => fail(msg),
    }
}

/// `POST /api/server/{id}/cancelDecommission`.
async fn cancel_one(State(ctx): Ctx, Path(id): Path<String>) -> Response {
    match call_server(&ctx, &id, Op::Cancel).await {
        Ok(()) => success(Value::Null),
        Err(msg) => fail(msg),
    }
}

/// Calls `ShuffleServerInternal` on the live server `id` at the ip and gRPC port its heartbeat
/// gave, as Java's cluster manager does, so a server in another process (or this one) is
/// reached the same way. The server's next heartbeat carries its new status.
async fn call_server(ctx: &RestContext, id: &str, op: Op) -> Result<(), String> {
    let Some(node) = ctx.coordinator.servers().get(id) else {
        return Err(not_found(id));
    };
    let what = match op {
        Op::Decommission => "decommission",
        Op::Cancel => "cancelDecommission",
    };
    let addr = format!("http://{}:{}", node.ip, node.grpc_port);
    let channel = tonic::transport::Endpoint::from_shared(addr.clone())
        .map_err(|e| format!("{what} of server {id}: bad address {addr}: {e}"))?
        .connect_timeout(INTERNAL_CALL_TIMEOUT)
        .timeout(INTERNAL_CALL_TIMEOUT)
        .connect()
        .await
        .map_err(|e| format!("{what} of server {id}: cannot connect to {addr}: {e}"))?;
    let mut client = ShuffleServerInternalClient::new(channel);
    let (status, ret_msg) = match op {
        Op::Decommission => client
            .decommission(proto::DecommissionRequest {})
            .await
            .map(|r| (r.get_ref().status, r.get_ref().ret_msg.clone())),
        Op::Cancel => client
            .cancel_decommission(proto::CancelDecommissionRequest {})
            .await
            .map(|r| (r.get_ref().status, r.get_ref().ret_msg.clone())),
    }
    .map_err(|e| format!("{what} of server {id} at {addr} failed: {}", e.message()))?;
    if status != WireCode::Success as i32 {
        let name = WireCode::try_from(status).map_or("UNKNOWN", |s| s.as_str_name());
        return Err(format!("{what} of server {id} failed: {name} {ret_msg}"));
    }
    tracing::info!(server_id = id, %addr, op = what, "server asked through the coordinator REST API");
    Ok(())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerIdQuery {
    server_id: Option<String>,
}

/// `DELETE /api/server/deleteServer?serverId=`: forgets a lost server; "fail" when no lost
/// server has that id (a live one is never deleted).
async fn delete_server(State(ctx): Ctx, Query(q): Query<ServerIdQuery>) -> Response {
    let id = q.server_id.unwrap_or_default();
    if !id.trim().is_empty() && ctx.coordinator.servers().delete_lost(&id) {
        tracing::info!(server_id = %id, "lost server deleted through the REST API");
        return success(json!("success"));
    }
    fail("fail")
}

/// The body of add/removeExcludeNodes: `{"excludeNodes": [...]}`.
fn exclude_ids(body: &Bytes) -> Result<Vec<String>, Refused> {
    let map: HashMap<String, Option<Vec<String>>> = json_body(body)?.unwrap_or_default();
    match map.get("excludeNodes") {
        Some(Some(ids)) => Ok(ids.clone()),
        // Java dereferences the missing list and answers a bare 500.
        _ => Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            "the body needs {\"excludeNodes\": [<server id>, ...]}\n".to_owned(),
        )),
    }
}

/// `POST /api/server/addExcludeNodes`: the ids are not assigned from the next assignment on.
async fn add_exclude(State(ctx): Ctx, body: Bytes) -> Response {
    match exclude_ids(&body) {
        Ok(ids) => {
            ctx.coordinator.exclude(ids);
            success(json!("success"))
        }
        Err(refused) => refused.into_response(),
    }
}

/// `POST /api/server/removeExcludeNodes`.
async fn remove_exclude(State(ctx): Ctx, body: Bytes) -> Response {
    match exclude_ids(&body) {
        Ok(ids) => {
            ctx.coordinator.unexclude(ids.iter().map(String::as_str));
            success(json!("success"))
        }
        Err(refused) => refused.into_response(),
    }
}

/// `GET /api/app/total`: `appCurrent` (live apps) and `appTotality` (apps since start).
async fn app_total(State(ctx): Ctx) -> Response {
    let c = &ctx.coordinator;
    success(json!({
        "appCurrent": c.app_count(),
        "appTotality": c.app_total(),
    }))
}

/// `GET /api/app/userTotal`: `[{userName, appNum}]`, most apps first (ties by name).
async fn user_total(State(ctx): Ctx) -> Response {
    walk(move || {
        let mut per_user: BTreeMap<String, u64> = BTreeMap::new();
        for app in ctx.coordinator.apps() {
            *per_user.entry(app.user).or_insert(0) += 1;
        }
        let mut rows: Vec<(String, u64)> = per_user.into_iter().collect();
        rows.sort_by_key(|(user, n)| (Reverse(*n), user.clone()));
        success(Value::Array(
            rows.into_iter()
                .map(|(user, n)| json!({"userName": user, "appNum": n}))
                .collect(),
        ))
    })
    .await
}

/// `GET /api/app/appInfos`: Java's `AppInfoVO` per live app, newest registration first, with
/// the 0.10 storage figures summed over the live servers' heartbeats (object storage counts
/// as "hadoop", as Java counts any remote file system).
///
/// Differs on purpose: Java 0.10 fills `userName` with the app id here (it passes the inner
/// map's key); we give the user, as `/api/app/userTotal` and the 0.9 coordinator do.
async fn app_infos(State(ctx): Ctx) -> Response {
    walk(move || {
        let storage = ctx.coordinator.servers().app_storage();
        let mut apps = ctx.coordinator.apps();
        apps.sort_by(|a, b| {
            b.registration_ms
                .cmp(&a.registration_ms)
                .then_with(|| a.app_id.cmp(&b.app_id))
        });
        success(Value::Array(
            apps.into_iter()
                .map(|a| {
                    let s = storage.get(&a.app_id).copied().unwrap_or_default();
                    json!({
                        "userName": a.user,
                        "appId": a.app_id,
                        "updateTime": a.update_ms,
                        "registrationTime": a.registration_ms,
                        "version": a.version,
                        "gitCommitId": a.git_commit_id,
                        "partitionNum": s.partition_num,
                        "memorySize": s.memory_size,
                        "localFileNum": s.local_file_num,
                        "localTotalSize": s.local_total_size,
                        "hadoopFileNum": s.hadoop_file_num,
                        "hadoopTotalSize": s.hadoop_total_size,
                        "totalSize": s.total_size,
                    })
                })
                .collect(),
        ))
    })
    .await
}

/// `GET /api/admin/refreshChecker` (the admin CLI's `refreshAccessChecker`): Java reloads each
/// configured access checker and answers `data: null`. The embedded coordinator admits every
/// app (no checker is configured, as in Java with `rss.coordinator.access.checkers` empty), so
/// there is nothing to reload; access checkers added later must reload here.
async fn refresh_checker(State(ctx): Ctx) -> Response {
    // The files are small; reading them on the blocking pool keeps the runtime free.
    let coordinator = Arc::clone(&ctx.coordinator);
    let read = crate::runtime::blocking(move || coordinator.refresh_access_files())
        .await
        .unwrap_or(0);
    tracing::info!(files = read, "refreshChecker: access checker files re-read");
    success(Value::Null)
}

/// `GET /api/coordinator/info`: string values, as Java's `Map<String, String>`; the id is
/// Java's `<ip>-<rpc port>`.
async fn info(State(ctx): Ctx) -> Response {
    success(json!({
        "coordinatorId": format!("{}-{}", ctx.ip, ctx.grpc_port),
        "serverIp": ctx.ip,
        "serverPort": ctx.grpc_port.to_string(),
        "serverWebPort": ctx.http_port.to_string(),
        "version": crate::version::VERSION,
        "gitCommitId": crate::version::GIT_COMMIT,
        "startTime": ctx.start_time_ms.to_string(),
    }))
}
