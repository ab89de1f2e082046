//! The Netty listener and per-connection handler: a `Listener` accepts (capped by a
//! semaphore, with backoff on accept errors) and a `Handler` serves one connection, one
//! request at a time: read a whole frame → call the registry → write the response.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::frame::{FrameError, Header, HEADER_LEN};
use super::messages::{DataRequest, Request, Response, ResponseHead, SendRequest};
use crate::app::{AppRegistry, MemoryReadArgs, ReadArgs};
use crate::error::{Error, Result};
use crate::grpc::{convert, reply};
use crate::metrics::NettyMetrics;
use crate::proto::StatusCode;
use crate::store::Block;

/// Limits of the Netty plane. Not configurable: the defaults follow Java's and the gRPC
/// plane's caps.
#[derive(Debug, Clone, Copy)]
pub struct NettyOptions {
    /// Bytes of received frames not yet handled, server-wide. A frame waits for its share
    /// before its body is read, so many connections cannot make the server buffer unbounded
    /// data; a frame larger than the whole budget is refused by the length check.
    pub receive_budget: usize,
    /// Largest `msgLen + bodyLen` accepted (before the budget cap).
    pub max_frame: usize,
    /// Open connections; further clients wait in the kernel's accept queue.
    pub max_connections: usize,
    /// A connection with no request for this long is closed (Java: 600 s); clients reconnect.
    pub idle_timeout: Duration,
}

impl Default for NettyOptions {
    fn default() -> Self {
        NettyOptions {
            receive_budget: 256 << 20,
            max_frame: crate::grpc::MAX_REQUEST_SIZE,
            max_connections: 4096,
            idle_timeout: Duration::from_secs(600),
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

/// Serves `listener` until `stop` fires, then stops accepting, lets every connection finish the
/// frame it is handling, and returns once all connections are closed. The caller bounds that
/// wait; dropping (aborting) the returned future's task closes the remaining connections.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<AppRegistry>,
    options: NettyOptions,
    metrics: Arc<NettyMetrics>,
    stop: CancellationToken,
) {
    Listener {
        listener,
        registry,
        metrics,
        limit_connections: Arc::new(Semaphore::new(options.max_connections)),
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
    /// What every request calls.
    registry: Arc<AppRegistry>,
    /// Connection and request metrics.
    metrics: Arc<NettyMetrics>,
    /// One permit per open connection; a permit returns when its handler ends.
    limit_connections: Arc<Semaphore>,
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
            let permit = tokio::select! {
                _ = self.stop.cancelled() => break,
                p = Arc::clone(&self.limit_connections).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let (stream, peer) = tokio::select! {
                _ = self.stop.cancelled() => break,
                accepted = self.accept() => accepted,
            };
            while connections.try_join_next().is_some() {}
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
            }
            let handler = Handler {
                stream,
                peer,
                buffer: BytesMut::with_capacity(READ_CHUNK),
                registry: Arc::clone(&self.registry),
                metrics: Arc::clone(&self.metrics),
                receive_budget: Arc::clone(&self.receive_budget),
                frame_limit: self.options.frame_limit(),
                idle_timeout: self.options.idle_timeout,
                stop: self.stop.clone(),
            };
            connections.spawn(async move {
                handler.run().await;
                drop(permit);
            });
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

/// Spare capacity kept for reading headers, so small frames need few reads.
const READ_CHUNK: usize = 8 << 10;

/// Serves one connection.
struct Handler {
    /// The client.
    stream: TcpStream,
    /// For log lines.
    peer: SocketAddr,
    /// Bytes read and not yet parsed; frames are split off it without copying.
    buffer: BytesMut,
    /// What every request calls.
    registry: Arc<AppRegistry>,
    /// Connection and request metrics.
    metrics: Arc<NettyMetrics>,
    /// Server-wide budget of received, unhandled bytes.
    receive_budget: Arc<Semaphore>,
    /// Largest `msgLen + bodyLen` accepted.
    frame_limit: usize,
    /// Close after this long without a request.
    idle_timeout: Duration,
    /// Between frames, a fired stop closes the connection; a frame being handled finishes.
    stop: CancellationToken,
}

impl Handler {
    async fn run(mut self) {
        let _open = self.metrics.connection();
        match self.serve().await {
            Ok(()) => tracing::debug!(peer = %self.peer, "Netty connection closed"),
            Err(e) => {
                self.metrics.exception();
                tracing::warn!(peer = %self.peer, error = %e, "closing Netty connection")
            }
        }
    }

    async fn serve(&mut self) -> Result<(), FrameError> {
        loop {
            let stop = self.stop.clone();
            let idle = self.idle_timeout;
            let peer = self.peer;
            let more = tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                r = tokio::time::timeout(idle, self.fill(HEADER_LEN)) => match r {
                    Ok(more) => more?,
                    Err(_) => {
                        tracing::debug!(%peer, "idle Netty connection closed");
                        return Ok(());
                    }
                },
            };
            if !more {
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
            if !self.fill(HEADER_LEN + payload).await? {
                return Err(FrameError::Eof {
                    got: 0,
                    want: HEADER_LEN + payload,
                });
            }
            let frame = self.buffer.split_to(HEADER_LEN + payload).freeze();
            let msg = frame.slice(HEADER_LEN..HEADER_LEN + header.msg_len);
            let request = Request::decode(header.ty, msg)?;
            let timing = self.metrics.request(&request);
            let response = self.handle(request, header.msg_len).await;
            drop(timing);
            // The request's bytes are in the registry (accounted by the memory budget) or gone.
            drop(frame);
            drop(permit);
            let mut out = response.encode_head().freeze().chain(response.body());
            drop(response);
            self.stream.write_all_buf(&mut out).await?;
        }
    }

    /// Reads until `want` bytes are buffered. `Ok(false)` on a clean end of stream with
    /// nothing buffered; an end of stream inside a frame is [`FrameError::Eof`].
    async fn fill(&mut self, want: usize) -> Result<bool, FrameError> {
        let spare = want.saturating_sub(self.buffer.len()).max(READ_CHUNK);
        if self.buffer.capacity() - self.buffer.len() < spare {
            self.buffer.reserve(spare);
        }
        while self.buffer.len() < want {
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                if self.buffer.is_empty() {
                    return Ok(false);
                }
                return Err(FrameError::Eof {
                    got: self.buffer.len(),
                    want,
                });
            }
        }
        Ok(true)
    }

    async fn handle(&self, request: Request, msg_len: usize) -> Response {
        let request_id = request.request_id();
        match request {
            Request::Send(r) => {
                let app_id = r.app_id.clone();
                let result = self.send(r, msg_len);
                Response::Rpc(head(request_id, "sendShuffleData", &app_id, &result))
            }
            Request::Index(r) => {
                let args = ReadArgs {
                    shuffle: r.shuffle_id,
                    partition: r.partition_id,
                    per_range: r.partition_num_per_range,
                    partition_num: r.partition_num,
                };
                let result = match convert::app_id(&r.app_id) {
                    Ok(app) => self.registry.read_index(&app, args).await,
                    Err(e) => Err(e),
                }
                .and_then(|read| fits_i32(read.index.len()).map(|()| read));
                let head = head(request_id, "getLocalShuffleIndex", &r.app_id, &result);
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
            }
            Request::Data(r) => {
                let result = self.read_data(&r).await;
                let head = head(request_id, "getLocalShuffleData", &r.app_id, &result);
                Response::Data {
                    head,
                    data: result.unwrap_or_default(),
                }
            }
            Request::Memory(r) => {
                let result = convert::app_id(&r.app_id).and_then(|app| {
                    self.registry.read_memory(
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
                let read = result.unwrap_or_default();
                Response::Memory {
                    head,
                    segments: read.segments,
                    data: read.data,
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
            }
        }
    }

    /// Type 3: the same checks and registry call as gRPC, with the frame's `msgLen` as the
    /// overhead the client reserved on top of its blocks (SEMANTICS §3.4).
    /// Type 3: the same checks and registry call as gRPC's sendShuffleData; the block
    /// payloads are moved out of the request (slices of the frame), nothing is copied.
    fn send(&self, r: SendRequest, msg_len: usize) -> Result<()> {
        let app = convert::app_id(&r.app_id)?;
        let parts = r
            .partitions
            .into_iter()
            .map(|(partition, blocks)| {
                let p = convert::partition(partition)?;
                let blocks = blocks
                    .into_iter()
                    .map(|b| {
                        let declared = b.length;
                        convert::block(
                            p,
                            declared,
                            Block {
                                block_id: b.block_id,
                                task_attempt_id: b.task_attempt_id,
                                uncompress_length: b.uncompress_length,
                                crc: b.crc,
                                data: b.data,
                            },
                        )
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok((p, blocks))
            })
            .collect::<Result<Vec<_>>>()?;
        self.registry.send(
            &app,
            r.shuffle_id,
            r.require_buffer_id,
            parts,
            msg_len as u64,
        )
    }

    /// Types 5/24/25. The storage id and read-ahead hints are not needed: a partition's data
    /// lives in one file here. Read through the file tier as `Bytes` (no sendfile: the tier
    /// API hands back bytes so the read budget can be attached to them).
    async fn read_data(&self, r: &DataRequest) -> Result<Bytes> {
        let app = convert::app_id(&r.app_id)?;
        let args = ReadArgs {
            shuffle: r.shuffle_id,
            partition: r.partition_id,
            per_range: r.partition_num_per_range,
            partition_num: r.partition_num,
        };
        self.registry
            .read_data(&app, args, r.offset, r.length)
            .await
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
    match result {
        Ok(_) => ResponseHead {
            request_id,
            status: StatusCode::Success as i32,
            ret_message: Some("OK".into()),
        },
        Err(e) => {
            reply::log(method, app_id, e);
            ResponseHead {
                request_id,
                status: e.status() as i32,
                ret_message: Some(e.to_string()),
            }
        }
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
