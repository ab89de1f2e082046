//! The Netty listener and per-connection handler: a `Listener` accepts every connection
//! (admitted by the plane's [`ConnectionTable`], with backoff on accept errors) and a
//! `Handler` serves one connection, one request at a time: read a whole frame → call the
//! registry → write the response.

use crate::audit::rpc::{status_name, Args, Command, Entry, Ret};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::body::{send_files, Body, Slices};
use super::frame::{FrameError, Header, HEADER_LEN};
use super::messages::{decode_send, ty, DataRequest, Request, Response, ResponseHead, SendRequest};
use super::recv::Receiver;
use crate::app::read::MemoryReadArgs;
use crate::app::write::TicketSeen;
use crate::app::AppRegistry;
use crate::error::{Error, Result};
use crate::limits::{ConnectionTable, Lease, LimitMetrics, RequestLimits};
use crate::memory::ReadPermit;
use crate::metrics::NettyMetrics;
use crate::proto::StatusCode;
use crate::protocol::convert::{self, LocalRead};
use crate::protocol::outcome::outcome;
use crate::store::{DataRead, Payloads};

/// Limits of the Netty plane (`[limits]`; the frame cap follows the gRPC plane's).
#[derive(Debug, Clone, Copy)]
pub struct NettyOptions {
    /// Bytes of received frames not yet handled, server-wide. A frame waits for its share
    /// before its body is read, so many connections cannot make the server buffer unbounded
    /// data; a frame larger than the whole budget is refused by the length check.
    pub receive_budget: usize,
    /// Largest `msgLen + bodyLen` accepted (before the budget cap).
    pub max_frame: usize,
    /// Longest pause inside a frame being received or a response being written; the peer is
    /// then cut off and what its request held is released.
    pub stall_timeout: Duration,
}

impl Default for NettyOptions {
    fn default() -> Self {
        let limits = crate::config::LimitsConfig::default();
        NettyOptions {
            receive_budget: limits.receive_budget.as_u64() as usize,
            max_frame: crate::protocol::MAX_REQUEST_SIZE,
            stall_timeout: limits.stall_timeout,
        }
    }
}

impl NettyOptions {
    /// The effective frame limit: a frame must fit the receive budget as a whole (and one
    /// semaphore acquisition, which counts in `u32`).
    pub fn frame_limit(&self) -> usize {
        self.max_frame
            .min(self.receive_budget)
            .min(u32::MAX as usize)
    }
}

/// What the Netty plane shares with the rest of the server.
pub struct NettyShared {
    /// What every request calls.
    pub registry: Arc<AppRegistry>,
    /// Connection and request metrics.
    pub metrics: Arc<NettyMetrics>,
    /// The plane's connection table (caps, idle sweep).
    pub connections: Arc<ConnectionTable>,
    /// Per-request caps.
    pub limits: RequestLimits,
    /// Counts frames cut off by the stall timeout.
    pub limit_metrics: Arc<LimitMetrics>,
    /// The RPC audit log (Java audits this plane's requests like gRPC's).
    pub audit: crate::audit::RpcAudit,
}

/// Serves `listener` until `stop` fires, then stops accepting, lets every connection finish the
/// frame it is handling, and returns once all connections are closed. The caller bounds that
/// wait; dropping (aborting) the returned future's task closes the remaining connections.
pub async fn serve(
    listener: TcpListener,
    shared: NettyShared,
    options: NettyOptions,
    stop: CancellationToken,
) {
    Listener {
        listener,
        shared: Arc::new(shared),
        receive_budget: Arc::new(Semaphore::new(options.receive_budget)),
        options,
        stop,
    }
    .run()
    .await
}

/// The accept loop.
struct Listener {
    /// Bound by `server::start`, so the port is known before serving.
    listener: TcpListener,
    /// Registry, metrics, connection table, limits.
    shared: Arc<NettyShared>,
    /// Bytes of frames received and not yet handled (see [`NettyOptions::receive_budget`]).
    receive_budget: Arc<Semaphore>,
    /// Limits.
    options: NettyOptions,
    /// Fired with the gRPC stop (shutdown step 1): stop accepting and reading new frames.
    stop: CancellationToken,
}

impl Listener {
    async fn run(self) {
        // Handlers live in this set: when the serving task is aborted (drain timeout), the set
        // is dropped and every connection closes with it.
        let mut connections = JoinSet::new();
        loop {
            let (stream, peer) = tokio::select! {
                _ = self.stop.cancelled() => break,
                accepted = self.accept() => accepted,
            };
            while connections.try_join_next().is_some() {}
            // Always accepted, so nobody waits unseen in the kernel's queue; over a cap the
            // table closes an idle connection, or this one (dropping it closes the socket).
            let Ok(lease) = self.shared.connections.admit(peer) else {
                drop(stream);
                continue;
            };
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
            }
            let handler = Handler {
                stream,
                peer,
                buffer: BytesMut::new(),
                shared: Arc::clone(&self.shared),
                lease,
                receive_budget: Arc::clone(&self.receive_budget),
                frame_limit: self.options.frame_limit(),
                stall_timeout: self.options.stall_timeout,
                stop: self.stop.clone(),
            };
            connections.spawn(handler.run());
        }
        drop(self.listener);
        while connections.join_next().await.is_some() {}
    }

    /// Accepts one connection, backing off on errors (e.g. out of file descriptors) instead of
    /// spinning; never gives up, since the plane must come back when the condition clears.
    async fn accept(&self) -> (TcpStream, SocketAddr) {
        let mut backoff = Duration::from_millis(10);
        loop {
            match self.listener.accept().await {
                Ok(accepted) => return accepted,
                Err(e) => {
                    tracing::warn!(error = %e, ?backoff, "Netty accept failed; backing off");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
}

/// The plane label of this plane's limit hits.
const PLANE: &str = "netty";

/// Spare capacity kept for reading headers, so small frames need few reads.
const READ_CHUNK: usize = 8 << 10;

/// Serves one connection.
struct Handler {
    /// The client.
    stream: TcpStream,
    /// For log lines.
    peer: SocketAddr,
    /// Bytes read and not yet parsed; frames are split off it without copying. Empty (no
    /// allocation) while the connection is idle, so idle connections cost no buffer.
    buffer: BytesMut,
    /// Registry, metrics, connection table, limits.
    shared: Arc<NettyShared>,
    /// This connection's place in the table: activity is reported to it, and it says when
    /// the table closes the connection (idle, or shed for a newcomer).
    lease: Lease,
    /// Server-wide budget of received, unhandled bytes.
    receive_budget: Arc<Semaphore>,
    /// Largest `msgLen + bodyLen` accepted.
    frame_limit: usize,
    /// Longest pause inside a frame or a response.
    stall_timeout: Duration,
    /// Between frames, a fired stop closes the connection; a frame being handled finishes.
    stop: CancellationToken,
}

impl Handler {
    async fn run(mut self) {
        let _open = self.shared.metrics.connection();
        match self.serve().await {
            Ok(()) => tracing::debug!(peer = %self.peer, "Netty connection closed"),
            Err(FrameError::Stalled { phase }) => {
                self.shared
                    .limit_metrics
                    .count("netty", "stall_timeout", "closed");
                tracing::warn!(
                    peer = %self.peer,
                    phase,
                    stall_timeout = ?self.stall_timeout,
                    "closing Netty connection: the peer stalled inside a frame"
                )
            }
            Err(e) => {
                self.shared.metrics.exception();
                tracing::warn!(peer = %self.peer, error = %e, "closing Netty connection")
            }
        }
    }

    async fn serve(&mut self) -> Result<(), FrameError> {
        loop {
            // Between frames: wait for the first byte of the next one, or for the table to
            // close this connection (idle timeout, shed for a newcomer), or for shutdown.
            if self.buffer.is_empty() {
                let stop = self.stop.clone();
                let closing = self.lease.slot().closing().clone();
                // Nothing buffered: release the previous frame's spare capacity so an idle
                // connection holds no memory.
                self.buffer = BytesMut::new();
                let more = tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    _ = closing.cancelled() => return Ok(()),
                    more = self.read_some() => more?,
                };
                if !more {
                    return Ok(());
                }
            }
            let _busy = self.lease.slot().busy();
            if !self.fill(HEADER_LEN, "header").await? {
                return Ok(());
            }
            let header = Header::parse(&self.buffer[..HEADER_LEN], self.frame_limit)?;
            if !Request::is_request_type(header.ty) {
                return Err(FrameError::UnknownType(header.ty));
            }
            let payload = header.payload_len();
            // Fits u32: `frame_limit` caps it (see `NettyOptions::frame_limit`).
            let permit = Arc::clone(&self.receive_budget)
                .acquire_many_owned(u32::try_from(payload).unwrap_or(u32::MAX))
                .await
                .map_err(|_| FrameError::Invalid {
                    field: "receive budget",
                    reason: "closed",
                })?;
            let (request, frame) = if header.ty == ty::SEND {
                // Each payload straight into its own buffer (see `recv`): no frame buffer.
                self.buffer.advance(HEADER_LEN);
                let touch = || self.lease.slot().touch();
                let mut rx = Receiver::new(
                    &mut self.stream,
                    &mut self.buffer,
                    header.msg_len,
                    self.stall_timeout,
                    &touch,
                );
                let send = decode_send(&mut rx).await?;
                rx.skip_rest(header.body_len).await?;
                (Request::Send(send), None)
            } else {
                if !self.fill(HEADER_LEN + payload, "body").await? {
                    return Err(FrameError::Eof {
                        got: 0,
                        want: HEADER_LEN + payload,
                    });
                }
                let frame = self.buffer.split_to(HEADER_LEN + payload).freeze();
                let msg = frame.slice(HEADER_LEN..HEADER_LEN + header.msg_len);
                (Request::decode(header.ty, msg)?, Some(frame))
            };
            let (kind, sent_at) = request.metric_kind();
            let timing = self.shared.metrics.request(kind, sent_at);
            let reply = self.handle(request, header.msg_len).await;
            drop(timing);
            // The request's bytes are in the registry (accounted by the memory budget) or gone.
            drop(frame);
            drop(permit);
            self.write_reply(reply).await?;
        }
    }

    /// Writes a response: header, message and memory payloads as vectored writes of the
    /// buffers themselves, file ranges after them by sendfile. What the reply holds (its read
    /// permit) is released once everything is written.
    async fn write_reply(&mut self, reply: Reply) -> Result<(), FrameError> {
        let head = reply.response.encode_head_with(reply.body.len()).freeze();
        let (slices, files) = match reply.body {
            Body::Slices(slices) => (slices, Vec::new()),
            Body::Files(ranges) => (Vec::new(), ranges),
        };
        let mut out = Slices::new(std::iter::once(head).chain(slices));
        while out.has_remaining() {
            let n = tokio::time::timeout(self.stall_timeout, self.stream.write_buf(&mut out))
                .await
                .map_err(|_| FrameError::Stalled { phase: "response" })??;
            if n == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::WriteZero).into());
            }
            self.lease.slot().touch();
        }
        if !files.is_empty() {
            send_files(&self.stream, files, self.stall_timeout).await?;
            self.lease.slot().touch();
        }
        drop(reply.hold);
        Ok(())
    }

    /// One read into the buffer (the first bytes of a frame, not timed: the connection is
    /// idle until they come). `Ok(false)` on a clean end of stream.
    async fn read_some(&mut self) -> Result<bool, FrameError> {
        self.buffer.reserve(READ_CHUNK);
        let n = self.stream.read_buf(&mut self.buffer).await?;
        self.lease.slot().touch();
        Ok(n > 0)
    }

    /// Reads until `want` bytes are buffered, each read within the stall timeout. `Ok(false)`
    /// on a clean end of stream with nothing buffered; an end of stream inside a frame is
    /// [`FrameError::Eof`].
    async fn fill(&mut self, want: usize, phase: &'static str) -> Result<bool, FrameError> {
        let spare = want.saturating_sub(self.buffer.len()).max(READ_CHUNK);
        if self.buffer.capacity() - self.buffer.len() < spare {
            self.buffer.reserve(spare);
        }
        while self.buffer.len() < want {
            let n =
                tokio::time::timeout(self.stall_timeout, self.stream.read_buf(&mut self.buffer))
                    .await
                    .map_err(|_| FrameError::Stalled { phase })??;
            if n == 0 {
                if self.buffer.is_empty() {
                    return Ok(false);
                }
                return Err(FrameError::Eof {
                    got: self.buffer.len(),
                    want,
                });
            }
            self.lease.slot().touch();
        }
        Ok(true)
    }

    async fn handle(&self, request: Request, msg_len: usize) -> Reply {
        let request_id = request.request_id();
        match request {
            Request::Send(r) => {
                let app_id = r.app_id.clone();
                let entry = self.audit(Command::SendShuffleData, &r.app_id, r.shuffle_id, || {
                    Args::None
                });
                let (require_buffer_id, partition_count) =
                    (r.require_buffer_id, r.partitions.len());
                let mut seen = TicketSeen::default();
                let result = self.send(r, msg_len, &mut seen);
                let head = head(request_id, "sendShuffleData", &app_id, &result);
                if let Some(mut entry) = entry {
                    // Java's `requireSize` is the ticket's int size, and `requireBlocksSize`
                    // what is left of it after the frame's encoded length.
                    let require_size = seen
                        .require_size
                        .map_or(0, |n| n.min(i32::MAX as u64) as i32);
                    let frame = i32::try_from(msg_len).unwrap_or(i32::MAX);
                    entry.args(Args::SendNetty {
                        require_buffer_id,
                        require_size,
                        is_pre_allocated: seen.require_size.is_some(),
                        require_blocks_size: require_size.saturating_sub(frame).max(0),
                        stage_attempt_number: 0,
                        partition_count,
                    });
                    entry.finish(status_name(head.status));
                }
                Response::Rpc(head).into()
            }
            Request::Index(r) => {
                let entry = self.audit(
                    Command::GetLocalShuffleIndex,
                    &r.app_id,
                    r.shuffle_id,
                    || Args::LocalIndex(r.target(Some(request_id))),
                );
                let args = r.read_args();
                let result = match convert::app_id(&r.app_id) {
                    Ok(app) => self.shared.registry.read_index(&app, args).await,
                    Err(e) => Err(e),
                }
                .and_then(|read| {
                    self.shared.limits.response(PLANE, read.index.len())?;
                    fits_i32(read.index.len()).map(|()| read)
                });
                let head = head(request_id, "getLocalShuffleIndex", &r.app_id, &result);
                // Java's Netty handler logs the index bytes sent (its gRPC one the data length).
                finish(entry, &head, |_| match &result {
                    Ok(read) => Ret::Len(read.index.len() as u64),
                    Err(_) => Ret::None,
                });
                match result {
                    Ok(read) => Response::Index {
                        head,
                        data_file_len: read.data_len as i64,
                        index: read.index,
                    },
                    Err(_) => Response::Index {
                        head,
                        data_file_len: 0,
                        index: Bytes::new(),
                    },
                }
                .into()
            }
            Request::Data(r) => {
                let entry = self.audit(
                    Command::GetLocalShuffleData,
                    &r.app_id,
                    r.shuffle_id,
                    || Args::LocalData {
                        target: r.target(Some(request_id)),
                        offset: r.offset,
                        length: r.length,
                        storage_id: r.storage_id,
                    },
                );
                let result = self.read_data(&r).await;
                let head = head(request_id, "getLocalShuffleData", &r.app_id, &result);
                finish(entry, &head, |_| match &result {
                    Ok(read) => Ret::Len(read.len()),
                    Err(_) => Ret::None,
                });
                let body = match result {
                    Ok(DataRead::Files(ranges)) => Body::Files(ranges),
                    Ok(DataRead::Memory(data)) => Body::Slices(vec![data]),
                    Err(_) => Body::empty(),
                };
                Reply {
                    response: Response::Data {
                        head,
                        data: Bytes::new(),
                    },
                    body,
                    hold: None,
                }
            }
            Request::Memory(r) => {
                let entry = self.audit(
                    Command::GetMemoryShuffleData,
                    &r.app_id,
                    r.shuffle_id,
                    || Args::Memory {
                        request_id: Some(request_id),
                        partition_id: r.partition_id,
                        block_id: r.last_block_id,
                        read_buffer_size: r.read_buffer_size,
                    },
                );
                let result = convert::app_id(&r.app_id).and_then(|app| {
                    let limits = &self.shared.limits;
                    limits.response(PLANE, r.read_buffer_size.max(0) as usize)?;
                    limits.expected_tasks_bitmap(
                        PLANE,
                        r.expected_task_ids.as_ref().map_or(0, |b| b.len()),
                    )?;
                    self.shared.registry.read_memory(
                        &app,
                        MemoryReadArgs {
                            shuffle: r.shuffle_id,
                            partition: r.partition_id,
                            last_block_id: r.last_block_id,
                            read_buffer_size: r.read_buffer_size,
                            expected_tasks: r.expected_task_ids.clone().unwrap_or_default(),
                        },
                    )
                });
                let head = head(request_id, "getMemoryShuffleData", &r.app_id, &result);
                let (segments, payloads, hold) = result.unwrap_or_default().into_payloads();
                finish(entry, &head, |ok| match ok {
                    true => Ret::MemoryNetty {
                        len: payloads.iter().map(|p| p.len() as u64).sum(),
                        segments: segments.len(),
                    },
                    false => Ret::None,
                });
                Reply {
                    response: Response::Memory {
                        head,
                        segments,
                        data: Bytes::new(),
                    },
                    body: Body::Slices(payloads),
                    hold,
                }
            }
            Request::Sorted(r) => {
                let result: Result<()> = Err(Error::NotSupported {
                    what: "remote merge (getSortedShuffleData): Remote merge is disabled",
                });
                Response::Sorted {
                    head: head(request_id, "getSortedShuffleData", &r.app_id, &result),
                    next_block_id: -1,
                    merge_state: 3, // MergeState.INTERNAL_ERROR
                    data: Bytes::new(),
                }
                .into()
            }
        }
    }

    /// Starts the audit entry of a read (`None` when off or excluded); `args` runs only then.
    fn audit(
        &self,
        command: Command,
        app_id: &str,
        shuffle_id: i32,
        args: impl FnOnce() -> Args,
    ) -> Option<Entry> {
        let mut entry = self.shared.audit.begin(command, Some(self.peer))?;
        entry.app(app_id).shuffle(shuffle_id).args(args());
        Some(entry)
    }

    /// Type 3: the same checks and registry call as gRPC's sendShuffleData, with the frame's
    /// `msgLen` as the overhead the client reserved on top of its blocks (SEMANTICS §3.4).
    /// The payloads were received into buffers of their own, so they are stored as they are.
    fn send(&self, r: SendRequest, msg_len: usize, seen: &mut TicketSeen) -> Result<()> {
        let app = convert::app_id(&r.app_id)?;
        self.shared.limits.partitions(PLANE, r.partitions.len())?;
        self.shared
            .limits
            .blocks(PLANE, r.partitions.iter().map(|(_, b)| b.len()).sum())?;
        let parts = convert::blocks(r.partitions)?;
        self.shared.registry.send(
            &app,
            r.shuffle_id,
            r.require_buffer_id,
            parts,
            msg_len as u64,
            Payloads::Owned,
            seen,
        )
    }

    /// Types 5/24/25. The storage id and read-ahead hints are not needed: the file tier maps
    /// the logical range onto the partition's parts itself, and announces the next range to
    /// the kernel. Answered as open file ranges, sent by sendfile.
    async fn read_data(&self, r: &DataRequest) -> Result<DataRead> {
        let app = convert::app_id(&r.app_id)?;
        self.shared
            .limits
            .response(PLANE, r.length.max(0) as usize)?;
        self.shared
            .registry
            .read_data_ranges(&app, r.read_args(), r.offset, r.length)
            .await
    }
}

/// A response as the handler hands it to the writer.
struct Reply {
    /// Header fields and message; its own body field is empty when `body` carries the bytes.
    response: Response,
    /// The bulk bytes, written after the message.
    body: Body,
    /// Read memory held until the body is written.
    hold: Option<ReadPermit>,
}

impl From<Response> for Reply {
    /// A response that carries its (small) body itself.
    fn from(response: Response) -> Self {
        let body = response.body();
        Reply {
            response,
            body: Body::Slices(vec![body]),
            hold: None,
        }
    }
}

/// The response prefix for `result`: SUCCESS/"OK" or the error's status and message, logged
/// once the way the gRPC plane logs it.
fn head<T>(
    request_id: i64,
    method: &'static str,
    app_id: &str,
    result: &Result<T>,
) -> ResponseHead {
    let (status, message) = outcome(method, app_id, result);
    ResponseHead {
        request_id,
        status: status as i32,
        ret_message: Some(message),
    }
}

/// Queues `entry` with `head`'s status; `ret` is told whether the request succeeded.
fn finish(entry: Option<Entry>, head: &ResponseHead, ret: impl FnOnce(bool) -> Ret) {
    if let Some(mut entry) = entry {
        let ok = head.status == StatusCode::Success as i32;
        entry.ret(ret(ok));
        entry.finish(status_name(head.status));
    }
}

/// A body must fit the frame's int32 `bodyLen`.
fn fits_i32(len: usize) -> Result<()> {
    if len > i32::MAX as usize {
        return Err(Error::Internal {
            reason: format!("response of {len} bytes does not fit a Netty frame"),
        });
    }
    Ok(())
}
