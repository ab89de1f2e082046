//! The tonic front end: `ShuffleServer` and `ShuffleServerInternal`. Every handler is
//! convert → call the registry → `reply(result)`; no semantics live here.

mod answer;
pub mod framed;
mod frames;
mod reply;

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::app::read::MemoryReadArgs;
use crate::app::record_counts::RecordCount;
use crate::app::write::{Require, TicketSeen};
use crate::app::{AppRegistry, Registration, RemoteStorage};
use crate::audit::rpc::{self as audit, Args, Command, Entry, Ret};
use crate::audit::RpcAudit;
use crate::error::{Error, Result};
use crate::limits::RequestLimits;
use crate::proto::shuffle_server_internal_server::ShuffleServerInternal;
use crate::proto::shuffle_server_server::ShuffleServer;
use crate::proto::{self, DataDistribution, StatusCode};
use crate::protocol::convert::{self, LocalRead};
use crate::store::Payloads;
use answer::DataAnswer;
use reply::reply;

pub use reply::Reply;

/// The `ShuffleServer` service.
#[derive(Clone)]
pub struct ShuffleService {
    registry: Arc<AppRegistry>,
    limits: RequestLimits,
    audit: RpcAudit,
}

/// The plane label of this service's limit hits.
const PLANE: &str = "grpc";

impl ShuffleService {
    /// A service over `registry`, refusing requests beyond `limits`.
    pub fn new(registry: Arc<AppRegistry>, limits: RequestLimits) -> Self {
        ShuffleService {
            registry,
            limits,
            audit: RpcAudit::off(),
        }
    }

    /// The same service, writing an RPC audit line per request (Java audits every method of
    /// `ShuffleServer`).
    pub fn with_audit(mut self, audit: RpcAudit) -> Self {
        self.audit = audit;
        self
    }

    /// Starts the audit entry of `command` from `request`'s peer (Java's `from`: the
    /// transport's remote address).
    fn audit<T>(&self, command: Command, request: &Request<T>) -> Option<Entry> {
        self.audit.begin(command, request.remote_addr())
    }
}

impl ShuffleService {
    /// `sendShuffleData`; `payloads` says how the request's payloads are held (slices of
    /// tonic's buffer, or allocations of their own when decoded by [`framed`]).
    async fn send_data(
        &self,
        request: Request<proto::SendShuffleDataRequest>,
        payloads: Payloads,
    ) -> Rpc<proto::SendShuffleDataResponse> {
        crate::metrics::handler_start(&request, request.get_ref().timestamp);
        let describe = |r: &proto::SendShuffleDataRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id).args(Args::Send {
                require_buffer_id: r.require_buffer_id,
                timestamp: r.timestamp,
                stage_attempt_number: r.stage_attempt_number,
                shuffle_data_size: r.shuffle_data.len(),
            });
        };
        let call = |req: proto::SendShuffleDataRequest| {
            let sent = (|| {
                let app = convert::app_id(&req.app_id)?;
                self.limits.partitions(PLANE, req.shuffle_data.len())?;
                self.limits
                    .blocks(PLANE, req.shuffle_data.iter().map(|p| p.block.len()).sum())?;
                let parts = convert::blocks(convert::grpc_parts(req.shuffle_data))?;
                self.registry.send(
                    &app,
                    req.shuffle_id,
                    req.require_buffer_id,
                    parts,
                    0,
                    payloads,
                    &mut TicketSeen::default(),
                )
            })();
            std::future::ready(sent.map(|()| Default::default()))
        };
        self.handle(Command::SendShuffleData, request, describe, call, no_ret)
            .await
    }

    /// `getLocalShuffleData`, its bytes kept apart (see [`framed`]).
    async fn local_data(
        &self,
        request: Request<proto::GetLocalShuffleDataRequest>,
    ) -> Rpc<DataAnswer<proto::GetLocalShuffleDataResponse>> {
        crate::metrics::handler_start(&request, request.get_ref().timestamp);
        let mut entry = self.audit(Command::GetLocalShuffleData, &request);
        let req = request.into_inner();
        if let Some(e) = &mut entry {
            e.app(&req.app_id)
                .shuffle(req.shuffle_id)
                .args(Args::LocalData {
                    target: req.target(None),
                    offset: req.offset,
                    length: req.length,
                    storage_id: req.storage_id,
                });
        }
        let args = req.read_args();
        let result = match convert::app_id(&req.app_id) {
            Ok(app) => match self.limits.response(PLANE, req.length.max(0) as usize) {
                Ok(()) => {
                    self.registry
                        .read_data(&app, args, req.offset, req.length)
                        .await
                }
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let (result, data) = match result {
            Ok(data) => (Ok(Default::default()), vec![data]),
            Err(e) => (Err(e), Vec::new()),
        };
        let len = data.iter().map(|d| d.len() as u64).sum();
        let response = reply("getLocalShuffleData", &req.app_id, result);
        Ok(
            audited(entry, response, |_| Ret::Len(len))?.map(|message| DataAnswer {
                message,
                data,
                permit: None,
            }),
        )
    }

    /// `getMemoryShuffleData`, its payloads kept as the memory tier holds them (see
    /// [`framed`]).
    async fn memory_data(
        &self,
        request: Request<proto::GetMemoryShuffleDataRequest>,
    ) -> Rpc<DataAnswer<proto::GetMemoryShuffleDataResponse>> {
        crate::metrics::handler_start(&request, request.get_ref().timestamp);
        let mut entry = self.audit(Command::GetMemoryShuffleData, &request);
        let req = request.into_inner();
        if let Some(e) = &mut entry {
            e.app(&req.app_id)
                .shuffle(req.shuffle_id)
                .args(Args::Memory {
                    request_id: None,
                    partition_id: req.partition_id,
                    block_id: req.last_block_id,
                    read_buffer_size: req.read_buffer_size,
                });
        }
        let result = convert::app_id(&req.app_id).and_then(|app| {
            self.limits
                .response(PLANE, req.read_buffer_size.max(0) as usize)?;
            self.limits.expected_tasks_bitmap(
                PLANE,
                req.serialized_expected_task_ids_bitmap
                    .as_ref()
                    .map_or(0, |b| b.len()),
            )?;
            self.registry.read_memory(
                &app,
                MemoryReadArgs {
                    shuffle: req.shuffle_id,
                    partition: req.partition_id,
                    last_block_id: req.last_block_id,
                    read_buffer_size: req.read_buffer_size,
                    expected_tasks: req.serialized_expected_task_ids_bitmap.unwrap_or_default(),
                },
            )
        });
        let (result, data, permit) = match result {
            Ok(served) => {
                let more = served.read.more;
                let (segments, payloads, permit) = served.into_payloads();
                let message = proto::GetMemoryShuffleDataResponse {
                    // Post-0.10 readers stop reading memory on it; older ones skip field 5.
                    is_end: Some(!more),
                    shuffle_data_block_segments: segments
                        .iter()
                        .map(|s| proto::ShuffleDataBlockSegment {
                            block_id: s.block_id,
                            offset: s.offset,
                            length: s.length,
                            uncompress_length: s.uncompress_length,
                            crc: s.crc,
                            task_attempt_id: s.task_attempt_id,
                        })
                        .collect(),
                    ..Default::default()
                };
                (Ok(message), payloads, permit)
            }
            Err(e) => (Err(e), Vec::new(), None),
        };
        let len = data.iter().map(|d| d.len() as u64).sum();
        let response = reply("getMemoryShuffleData", &req.app_id, result);
        // Java sets `return{}` only when the read succeeded.
        let ret = |r: &proto::GetMemoryShuffleDataResponse| match r.status {
            0 => Ret::MemoryGrpc {
                len,
                segments: r.shuffle_data_block_segments.len(),
            },
            _ => Ret::None,
        };
        Ok(audited(entry, response, ret)?.map(|message| DataAnswer {
            message,
            data,
            permit,
        }))
    }
}

type Rpc<T> = std::result::Result<Response<T>, Status>;

/// A `ShuffleServer` request: every one names its app.
trait AppRequest {
    /// The `appId` field as sent.
    fn app_id(&self) -> &str;
}

macro_rules! app_requests {
    ($($t:ident),* $(,)?) => {
        $(impl AppRequest for proto::$t {
            fn app_id(&self) -> &str {
                &self.app_id
            }
        })*
    };
}

app_requests!(
    ShuffleRegisterRequest,
    ShuffleUnregisterRequest,
    ShuffleUnregisterByAppIdRequest,
    SendShuffleDataRequest,
    GetLocalShuffleIndexRequest,
    ShuffleCommitRequest,
    ReportShuffleResultRequest,
    GetShuffleResultRequest,
    GetShuffleResultForMultiPartRequest,
    FinishShuffleRequest,
    AppHeartBeatRequest,
    StartSortMergeRequest,
    GetSortedShuffleDataRequest,
);

impl ShuffleService {
    /// The one path of a request through the service: the audit entry begun with the
    /// request's peer and its app, filled by `describe`; `call` (which converts what it
    /// needs, in its own order, and asks the registry); the reply with its status and
    /// message; the audit line finished with that status, `ret` being Java's `return{}` part
    /// taken from the answer.
    async fn handle<Req, Resp, Fut>(
        &self,
        command: Command,
        request: Request<Req>,
        describe: impl FnOnce(&Req, &mut Entry),
        call: impl FnOnce(Req) -> Fut,
        ret: impl FnOnce(&Resp) -> Ret,
    ) -> Rpc<Resp>
    where
        Req: AppRequest,
        Resp: Reply,
        Fut: std::future::Future<Output = Result<Resp>>,
    {
        let mut entry = self.audit(command, &request);
        let req = request.into_inner();
        let app_id = req.app_id().to_owned();
        if let Some(e) = &mut entry {
            e.app(&app_id);
            describe(&req, e);
        }
        let result = call(req).await;
        audited(entry, reply(command.name(), &app_id, result), ret)
    }
}

/// Queues `entry` with the status `response` carries, returning the response. `ret` is taken
/// from the response, for the commands whose Java line has a `return{}` part.
fn audited<R: Reply>(
    entry: Option<Entry>,
    response: Rpc<R>,
    ret: impl FnOnce(&R) -> Ret,
) -> Rpc<R> {
    if let (Some(mut entry), Ok(r)) = (entry, &response) {
        entry.ret(ret(r.get_ref()));
        entry.finish(audit::status_name(r.get_ref().status()));
    }
    response
}

/// [`audited`] with no `return{}` part.
fn no_ret<R>(_: &R) -> Ret {
    Ret::None
}

/// Java's `BlockIdLayout` as the request carries it (0.8 clients send none: the default).
fn audit_layout(l: Option<&proto::BlockIdLayout>) -> audit::Layout {
    match l {
        Some(l) => audit::Layout {
            seq: l.sequence_no_bits,
            part: l.partition_id_bits,
            task: l.task_attempt_id_bits,
        },
        None => audit::Layout {
            seq: 18,
            part: 24,
            task: 21,
        },
    }
}

#[tonic::async_trait]
impl ShuffleServer for ShuffleService {
    async fn register_shuffle(
        &self,
        request: Request<proto::ShuffleRegisterRequest>,
    ) -> Rpc<proto::ShuffleRegisterResponse> {
        let describe = |r: &proto::ShuffleRegisterRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id).args(Args::Register {
                remote_storage_path: r
                    .remote_storage
                    .as_ref()
                    .map(|s| s.path.clone())
                    .unwrap_or_default(),
                user: r.user.clone(),
            });
        };
        let call = |req: proto::ShuffleRegisterRequest| async move {
            let limits = &self.limits;
            limits.partitions(PLANE, req.partition_ranges.len())?;
            limits.partitions(PLANE, req.properties.len())?;
            limits.strings(PLANE, [("user", req.user.as_str())])?;
            limits.strings(
                PLANE,
                req.properties.iter().flat_map(|(k, v)| {
                    [("property key", k.as_str()), ("property value", v.as_str())]
                }),
            )?;
            if let Some(r) = &req.remote_storage {
                limits.partitions(PLANE, r.remote_storage_conf.len())?;
                limits.strings(PLANE, [("remote storage path", r.path.as_str())])?;
                limits.strings(
                    PLANE,
                    r.remote_storage_conf.iter().flat_map(|i| {
                        [
                            ("remote storage conf key", i.key.as_str()),
                            ("remote storage conf value", i.value.as_str()),
                        ]
                    }),
                )?;
            }
            let remote = req
                .remote_storage
                .filter(|r| !r.path.is_empty())
                .map(|r| RemoteStorage {
                    path: r.path,
                    conf: r
                        .remote_storage_conf
                        .into_iter()
                        .map(|i| (i.key, i.value))
                        .collect(),
                });
            self.registry
                .register(Registration {
                    app: convert::app_id(&req.app_id)?,
                    shuffle: req.shuffle_id,
                    ranges: convert::ranges(&req.partition_ranges)?,
                    local_order: req.shuffle_data_distribution
                        == DataDistribution::LocalOrder as i32,
                    user: req.user,
                    remote_storage: remote,
                    properties: req.properties.into_iter().collect(),
                    partition_writers: req.max_concurrency_per_partition_to_write,
                })
                .await
                .map(|()| Default::default())
        };
        self.handle(Command::RegisterShuffle, request, describe, call, no_ret)
            .await
    }

    async fn unregister_shuffle(
        &self,
        request: Request<proto::ShuffleUnregisterRequest>,
    ) -> Rpc<proto::ShuffleUnregisterResponse> {
        let call = |req: proto::ShuffleUnregisterRequest| async move {
            let app = convert::app_id(&req.app_id)?;
            self.registry
                .unregister_shuffle(&app, req.shuffle_id)
                .await?;
            Ok(Default::default())
        };
        let describe = |r: &proto::ShuffleUnregisterRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id);
        };
        self.handle(Command::UnregisterShuffle, request, describe, call, no_ret)
            .await
    }

    async fn unregister_shuffle_by_app_id(
        &self,
        request: Request<proto::ShuffleUnregisterByAppIdRequest>,
    ) -> Rpc<proto::ShuffleUnregisterByAppIdResponse> {
        let call = |req: proto::ShuffleUnregisterByAppIdRequest| async move {
            self.registry.unregister_app(&convert::app_id(&req.app_id)?);
            Ok(Default::default())
        };
        self.handle(
            Command::UnregisterShuffleByAppId,
            request,
            |_, _| {},
            call,
            no_ret,
        )
        .await
    }

    async fn send_shuffle_data(
        &self,
        request: Request<proto::SendShuffleDataRequest>,
    ) -> Rpc<proto::SendShuffleDataResponse> {
        self.send_data(request, Payloads::Shared).await
    }

    async fn get_local_shuffle_index(
        &self,
        request: Request<proto::GetLocalShuffleIndexRequest>,
    ) -> Rpc<proto::GetLocalShuffleIndexResponse> {
        let describe = |r: &proto::GetLocalShuffleIndexRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id)
                .args(Args::LocalIndex(r.target(None)));
        };
        let call = |req: proto::GetLocalShuffleIndexRequest| async move {
            let app = convert::app_id(&req.app_id)?;
            let read = self.registry.read_index(&app, req.read_args()).await?;
            self.limits.response(PLANE, read.index.len())?;
            Ok(proto::GetLocalShuffleIndexResponse {
                index_data: read.index,
                data_file_len: read.data_len as i64,
                storage_ids: read.storage_ids,
                ..Default::default()
            })
        };
        // Java's `return{len=…}` is the data file's length, set only on success.
        let ret = |r: &proto::GetLocalShuffleIndexResponse| match r.status {
            0 => Ret::Len(r.data_file_len.max(0) as u64),
            _ => Ret::None,
        };
        self.handle(Command::GetLocalShuffleIndex, request, describe, call, ret)
            .await
    }

    async fn get_local_shuffle_data(
        &self,
        request: Request<proto::GetLocalShuffleDataRequest>,
    ) -> Rpc<proto::GetLocalShuffleDataResponse> {
        Ok(self
            .local_data(request)
            .await?
            .map(DataAnswer::into_message))
    }

    async fn get_memory_shuffle_data(
        &self,
        request: Request<proto::GetMemoryShuffleDataRequest>,
    ) -> Rpc<proto::GetMemoryShuffleDataResponse> {
        Ok(self
            .memory_data(request)
            .await?
            .map(DataAnswer::into_message))
    }

    async fn commit_shuffle_task(
        &self,
        request: Request<proto::ShuffleCommitRequest>,
    ) -> Rpc<proto::ShuffleCommitResponse> {
        let describe = |r: &proto::ShuffleCommitRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id);
        };
        let call = |req: proto::ShuffleCommitRequest| async move {
            let app = convert::app_id(&req.app_id)?;
            let commit_count = self.registry.commit_task(&app, req.shuffle_id).await?;
            Ok(proto::ShuffleCommitResponse {
                commit_count,
                ..Default::default()
            })
        };
        let ret = |r: &proto::ShuffleCommitResponse| match r.status {
            0 => Ret::CommitCount(r.commit_count),
            _ => Ret::None,
        };
        self.handle(Command::CommitShuffleTask, request, describe, call, ret)
            .await
    }

    async fn report_shuffle_result(
        &self,
        request: Request<proto::ReportShuffleResultRequest>,
    ) -> Rpc<proto::ReportShuffleResultResponse> {
        let describe = |r: &proto::ReportShuffleResultRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id).args(Args::Report {
                task_attempt_id: r.task_attempt_id,
                bitmap_num: r.bitmap_num,
                // Java's map keeps only partitions with block ids, one entry per id.
                partitions: r
                    .partition_to_block_ids
                    .iter()
                    .filter(|p| !p.block_ids.is_empty())
                    .map(|p| p.partition_id)
                    .collect::<std::collections::HashSet<_>>()
                    .len(),
            });
        };
        let call = |req: proto::ReportShuffleResultRequest| async move {
            self.limits
                .partitions(PLANE, req.partition_to_block_ids.len())?;
            self.limits.partitions(PLANE, req.partition_stats.len())?;
            // A record count rides with block ids; the ids' limit bounds both.
            self.limits.block_ids(
                PLANE,
                req.partition_to_block_ids
                    .iter()
                    .map(|p| p.block_ids.len())
                    .chain(
                        req.partition_stats
                            .iter()
                            .map(|s| s.task_attempt_id_to_records.len()),
                    )
                    .sum(),
            )?;
            let records: Vec<RecordCount> = req
                .partition_stats
                .iter()
                .flat_map(|s| {
                    s.task_attempt_id_to_records
                        .iter()
                        .map(move |t| RecordCount {
                            partition: s.partition_id,
                            task_attempt: t.task_attempt_id,
                            records: t.record_number,
                        })
                })
                .collect();
            let parts: Vec<(i32, Vec<i64>)> = req
                .partition_to_block_ids
                .into_iter()
                .map(|p| (p.partition_id, p.block_ids))
                .collect();
            let app = convert::app_id(&req.app_id)?;
            self.registry
                .report(
                    &app,
                    req.shuffle_id,
                    req.bitmap_num,
                    req.task_attempt_id,
                    &parts,
                    &records,
                )
                .await?;
            Ok(Default::default())
        };
        self.handle(
            Command::ReportShuffleResult,
            request,
            describe,
            call,
            no_ret,
        )
        .await
    }

    async fn get_shuffle_result(
        &self,
        request: Request<proto::GetShuffleResultRequest>,
    ) -> Rpc<proto::GetShuffleResultResponse> {
        let describe = |r: &proto::GetShuffleResultRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id).args(Args::Result {
                partition_id: r.partition_id,
                layout: audit_layout(r.block_id_layout.as_ref()),
            });
        };
        let call = |req: proto::GetShuffleResultRequest| async move {
            let app = convert::app_id(&req.app_id)?;
            let layout = convert::layout(req.block_id_layout.as_ref())?;
            let serialized_bitmap =
                self.registry
                    .block_ids(&app, req.shuffle_id, &[req.partition_id], layout)?;
            self.limits.response(PLANE, serialized_bitmap.len())?;
            Ok(proto::GetShuffleResultResponse {
                serialized_bitmap,
                ..Default::default()
            })
        };
        self.handle(Command::GetShuffleResult, request, describe, call, no_ret)
            .await
    }

    async fn get_shuffle_result_for_multi_part(
        &self,
        request: Request<proto::GetShuffleResultForMultiPartRequest>,
    ) -> Rpc<proto::GetShuffleResultForMultiPartResponse> {
        let describe = |r: &proto::GetShuffleResultForMultiPartRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id).args(Args::ResultMulti {
                partitions: r.partitions.clone(),
                layout: audit_layout(r.block_id_layout.as_ref()),
            });
        };
        let call = |req: proto::GetShuffleResultForMultiPartRequest| async move {
            let app = convert::app_id(&req.app_id)?;
            let layout = convert::layout(req.block_id_layout.as_ref())?;
            self.limits.partitions(PLANE, req.partitions.len())?;
            let serialized_bitmap =
                self.registry
                    .block_ids(&app, req.shuffle_id, &req.partitions, layout)?;
            // Post-0.10 readers check these against the records they read; older ones skip
            // the field.
            let partition_stats: Vec<proto::PartitionStats> = self
                .registry
                .record_counts(&app, req.shuffle_id, &req.partitions)?
                .into_iter()
                .map(|c| proto::PartitionStats {
                    partition_id: c.partition,
                    task_attempt_id_to_records: c
                        .attempts
                        .into_iter()
                        .map(|a| proto::TaskAttemptIdToRecords {
                            task_attempt_id: a.task_attempt,
                            record_number: a.records,
                        })
                        .collect(),
                })
                .collect();
            let counts: usize = partition_stats
                .iter()
                .map(|s| s.task_attempt_id_to_records.len())
                .sum();
            self.limits
                .response(PLANE, serialized_bitmap.len() + counts * 16)?;
            Ok(proto::GetShuffleResultForMultiPartResponse {
                serialized_bitmap,
                partition_stats,
                ..Default::default()
            })
        };
        self.handle(
            Command::GetShuffleResultForMultiPart,
            request,
            describe,
            call,
            no_ret,
        )
        .await
    }

    async fn finish_shuffle(
        &self,
        request: Request<proto::FinishShuffleRequest>,
    ) -> Rpc<proto::FinishShuffleResponse> {
        let describe = |r: &proto::FinishShuffleRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id);
        };
        let call = |req: proto::FinishShuffleRequest| async move {
            let app = convert::app_id(&req.app_id)?;
            self.registry.finish_shuffle(&app, req.shuffle_id).await?;
            Ok(Default::default())
        };
        self.handle(Command::FinishShuffle, request, describe, call, no_ret)
            .await
    }

    async fn require_buffer(
        &self,
        request: Request<proto::RequireBufferRequest>,
    ) -> Rpc<proto::RequireBufferResponse> {
        let mut entry = self.audit(Command::RequireBuffer, &request);
        let mut req = request.into_inner();
        // An empty app id is a legacy (0.6) client: reserve without checks, as Java does.
        let app = match req.app_id.is_empty() {
            true => Ok(None),
            false => convert::app_id(&req.app_id).map(Some),
        };
        let result = match app.and_then(|app| {
            self.limits
                .partitions(
                    PLANE,
                    req.partition_ids
                        .len()
                        .max(req.partition_require_sizes.len()),
                )
                .map(|()| app)
        }) {
            Ok(app) => {
                self.registry
                    .require_buffer_waiting(Require {
                        app: app.as_ref(),
                        shuffle: req.shuffle_id,
                        partitions: &req.partition_ids,
                        partition_sizes: &req.partition_require_sizes,
                        size: req.require_size,
                    })
                    .await
            }
            Err(e) => Err(e),
        };
        // The partition ids are moved into the audit entry once the registry is done with
        // them: requireBuffer is the busiest call, and a copy per request is not needed.
        if let Some(e) = &mut entry {
            e.app(&req.app_id)
                .shuffle(req.shuffle_id)
                .args(Args::RequireBuffer {
                    require_size: req.require_size,
                    partition_ids: std::mem::take(&mut req.partition_ids),
                });
        }
        let failed_id = match &result {
            // Java leaves the id unset when verifyRequest fails and puts -1 otherwise.
            Err(Error::AppNotFound { .. }) => 0,
            _ => -1,
        };
        let mut response = reply(
            "requireBuffer",
            &req.app_id,
            result.map(|o| proto::RequireBufferResponse {
                require_buffer_id: o.ticket_id,
                need_split_partition_ids: o.need_split,
                ..Default::default()
            }),
        )?;
        let body = response.get_mut();
        if body.status != StatusCode::Success as i32 {
            body.require_buffer_id = failed_id;
        } else {
            body.ret_msg.clear();
        }
        // Java logs -1 when verifyRequest refused (it sets the return value only after that
        // check), else the id it answers.
        let ret = match failed_id {
            0 if body.status != StatusCode::Success as i32 => None,
            _ => Some(body.require_buffer_id),
        };
        audited(entry, Ok(response), |_| {
            ret.map_or(Ret::None, Ret::RequireBufferId)
        })
    }

    async fn app_heartbeat(
        &self,
        request: Request<proto::AppHeartBeatRequest>,
    ) -> Rpc<proto::AppHeartBeatResponse> {
        let call = |req: proto::AppHeartBeatRequest| async move {
            self.registry.heartbeat(&convert::app_id(&req.app_id)?)?;
            Ok(Default::default())
        };
        let mut response: Response<proto::AppHeartBeatResponse> = self
            .handle(Command::AppHeartbeat, request, |_, _| {}, call, no_ret)
            .await?;
        // Java answers a heartbeat with no message.
        if response.get_ref().status == StatusCode::Success as i32 {
            response.get_mut().ret_msg.clear();
        }
        Ok(response)
    }

    async fn start_sort_merge(
        &self,
        request: Request<proto::StartSortMergeRequest>,
    ) -> Rpc<proto::StartSortMergeResponse> {
        let describe = |r: &proto::StartSortMergeRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id).args(Args::SortMerge {
                partition_id: r.partition_id,
            });
        };
        let call = |_| async {
            Err(Error::NotSupported {
                what: "remote merge (startSortMerge): Remote merge is disabled",
            })
        };
        self.handle(Command::StartSortMerge, request, describe, call, no_ret)
            .await
    }

    async fn get_sorted_shuffle_data(
        &self,
        request: Request<proto::GetSortedShuffleDataRequest>,
    ) -> Rpc<proto::GetSortedShuffleDataResponse> {
        let describe = |r: &proto::GetSortedShuffleDataRequest, e: &mut Entry| {
            e.shuffle(r.shuffle_id).args(Args::Sorted {
                partition_id: r.partition_id,
                block_id: r.merged_block_id,
            });
        };
        let call = |_| async {
            Err(Error::NotSupported {
                what: "remote merge (getSortedShuffleData): Remote merge is disabled",
            })
        };
        let mut response: Response<proto::GetSortedShuffleDataResponse> = self
            .handle(
                Command::GetSortedShuffleData,
                request,
                describe,
                call,
                no_ret,
            )
            .await?;
        response.get_mut().next_block_id = -1;
        response.get_mut().m_state = 3; // MergeState.INTERNAL_ERROR
        Ok(response)
    }
}

/// The `ShuffleServerInternal` service (decommission), called by coordinators.
#[derive(Clone)]
pub struct InternalService {
    registry: Arc<AppRegistry>,
}

impl InternalService {
    /// A service over `registry`.
    pub fn new(registry: Arc<AppRegistry>) -> Self {
        InternalService { registry }
    }

    /// The tonic server.
    pub fn into_server(
        self,
    ) -> proto::shuffle_server_internal_server::ShuffleServerInternalServer<Self> {
        proto::shuffle_server_internal_server::ShuffleServerInternalServer::new(self)
    }
}

#[tonic::async_trait]
impl ShuffleServerInternal for InternalService {
    async fn decommission(
        &self,
        _request: Request<proto::DecommissionRequest>,
    ) -> Rpc<proto::DecommissionResponse> {
        let result: Result<()> = self.registry.decommission();
        reply("decommission", "", result.map(|()| Default::default()))
    }

    async fn cancel_decommission(
        &self,
        _request: Request<proto::CancelDecommissionRequest>,
    ) -> Rpc<proto::CancelDecommissionResponse> {
        self.registry.cancel_decommission();
        reply("cancelDecommission", "", Ok(Default::default()))
    }
}
