//! The messages of the Netty data plane (NETTY.md §4–§5), both directions: the server decodes
//! requests and encodes responses; the opposite directions exist for tests and tools that
//! play the client.

use bytes::{BufMut, Bytes, BytesMut};

use super::frame::{encode_frame, put_opt_bytes, put_string, ready, Cursor, FrameError, Source};
use crate::store::memory::Segment;

crate::protocol::convert::local_read!(IndexRequest, DataRequest);

/// Message type ids (`Message.Type`) this server speaks.
pub mod ty {
    /// `RPC_RESPONSE`: the answer to a send.
    pub const RPC_RESPONSE: i8 = 0;
    /// `SEND_SHUFFLE_DATA_REQUEST`.
    pub const SEND: i8 = 3;
    /// `GET_LOCAL_SHUFFLE_INDEX_REQUEST`.
    pub const INDEX: i8 = 4;
    /// `GET_LOCAL_SHUFFLE_DATA_REQUEST`.
    pub const DATA: i8 = 5;
    /// `GET_MEMORY_SHUFFLE_DATA_REQUEST`.
    pub const MEMORY: i8 = 6;
    /// `GET_LOCAL_SHUFFLE_INDEX_RESPONSE` (V1: decoded by 0.9 and 0.10 clients).
    pub const INDEX_RESPONSE: i8 = 14;
    /// `GET_LOCAL_SHUFFLE_DATA_RESPONSE`.
    pub const DATA_RESPONSE: i8 = 15;
    /// `GET_MEMORY_SHUFFLE_DATA_RESPONSE`.
    pub const MEMORY_RESPONSE: i8 = 16;
    /// `GET_SORTED_SHUFFLE_DATA_REQUEST` (0.10 remote merge).
    pub const SORTED: i8 = 21;
    /// `GET_SORTED_SHUFFLE_DATA_RESPONSE`.
    pub const SORTED_RESPONSE: i8 = 22;
    /// `GET_LOCAL_SHUFFLE_INDEX_V2_RESPONSE` (0.10 clients only).
    pub const INDEX_V2_RESPONSE: i8 = 23;
    /// `GET_LOCAL_SHUFFLE_DATA_V2_REQUEST` (adds storageId).
    pub const DATA_V2: i8 = 24;
    /// `GET_LOCAL_SHUFFLE_DATA_V3_REQUEST` (adds read-ahead segments and task attempt).
    pub const DATA_V3: i8 = 25;
}

/// One replica entry of a send's block (decoded, then ignored by the server).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Replica {
    /// Server id.
    pub id: Option<String>,
    /// Host.
    pub host: Option<String>,
    /// gRPC port.
    pub grpc_port: i32,
    /// Netty port.
    pub netty_port: i32,
}

/// A block of a type-3 send.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendBlock {
    /// Ignored: the enclosing partition rules.
    pub partition_id: i32,
    /// Block id.
    pub block_id: i64,
    /// Declared data length (must equal `data.len()`, checked by the handler).
    pub length: i32,
    /// Ignored.
    pub shuffle_id: i32,
    /// CRC as sent.
    pub crc: i64,
    /// Writer task attempt.
    pub task_attempt_id: i64,
    /// The payload, a slice of the received frame.
    pub data: Bytes,
    /// Ignored replica list.
    pub replicas: Vec<Replica>,
    /// Uncompressed length.
    pub uncompress_length: i32,
    /// Ignored.
    pub free_memory: i64,
}

impl crate::protocol::convert::WireBlock for SendBlock {
    fn declared_length(&self) -> i32 {
        self.length
    }

    fn into_block(self) -> crate::store::Block {
        crate::store::Block {
            block_id: self.block_id,
            task_attempt_id: self.task_attempt_id,
            uncompress_length: self.uncompress_length,
            crc: self.crc,
            data: self.data,
        }
    }
}

/// Type 3.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendRequest {
    /// Echoed in the response.
    pub request_id: i64,
    /// App id (null decodes as empty, which the handler rejects).
    pub app_id: String,
    /// Shuffle id.
    pub shuffle_id: i32,
    /// The `requireBuffer` ticket.
    pub require_buffer_id: i64,
    /// `(partitionId, blocks)` in request order.
    pub partitions: Vec<(i32, Vec<SendBlock>)>,
    /// Client timestamp (ms).
    pub timestamp: i64,
}

/// Type 4.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexRequest {
    /// Echoed in the response.
    pub request_id: i64,
    /// App id.
    pub app_id: String,
    /// Shuffle id.
    pub shuffle_id: i32,
    /// Partition id.
    pub partition_id: i32,
    /// Partitions per range.
    pub partition_num_per_range: i32,
    /// Partitions of the shuffle.
    pub partition_num: i32,
}

/// Which encoding of the local-data request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataVersion {
    /// Type 5.
    #[default]
    V1,
    /// Type 24: adds storageId.
    V2,
    /// Type 25: adds read-ahead segments and taskAttemptId.
    V3,
}

/// Types 5, 24 and 25.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DataRequest {
    /// Encoding.
    pub version: DataVersion,
    /// Echoed in the response.
    pub request_id: i64,
    /// App id.
    pub app_id: String,
    /// Shuffle id.
    pub shuffle_id: i32,
    /// Partition id.
    pub partition_id: i32,
    /// Partitions per range.
    pub partition_num_per_range: i32,
    /// Partitions of the shuffle.
    pub partition_num: i32,
    /// Byte offset in the data file.
    pub offset: i64,
    /// Bytes to read.
    pub length: i32,
    /// Client timestamp (ms).
    pub timestamp: i64,
    /// Disk index from a V2 index response; `-1` for V1.
    pub storage_id: i32,
    /// V3 read-ahead hint: `(offset, length)` of the next reads (ignored by this server).
    pub next_segments: Vec<(i64, i64)>,
    /// V3 reader task attempt (ignored).
    pub task_attempt_id: i64,
}

/// Type 6.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryRequest {
    /// Echoed in the response.
    pub request_id: i64,
    /// App id.
    pub app_id: String,
    /// Shuffle id.
    pub shuffle_id: i32,
    /// Partition id.
    pub partition_id: i32,
    /// `-1` or the last block id received.
    pub last_block_id: i64,
    /// Soft cap on returned bytes.
    pub read_buffer_size: i32,
    /// Client timestamp (ms).
    pub timestamp: i64,
    /// Java-legacy bitmap of expected task ids; `None` = all tasks.
    pub expected_task_ids: Option<Bytes>,
}

/// Type 21 (remote merge, which this server does not offer).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SortedRequest {
    /// Echoed in the response.
    pub request_id: i64,
    /// App id.
    pub app_id: String,
    /// Shuffle id.
    pub shuffle_id: i32,
    /// Partition id.
    pub partition_id: i32,
    /// Block id.
    pub block_id: i64,
    /// Always 0.
    pub length: i32,
    /// Client timestamp (ms).
    pub timestamp: i64,
}

/// A request frame's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Type 3.
    Send(SendRequest),
    /// Type 4.
    Index(IndexRequest),
    /// Types 5, 24, 25.
    Data(DataRequest),
    /// Type 6.
    Memory(MemoryRequest),
    /// Type 21.
    Sorted(SortedRequest),
}

fn app(c: &mut Cursor) -> Result<String, FrameError> {
    Ok(c.string("appId")?.unwrap_or_default())
}

impl Request {
    /// Which of Java's Netty request metrics counts this request, and the client's send time
    /// (ms) when the request carries one (for the transport latency).
    pub fn metric_kind(&self) -> (crate::metrics::netty::RequestKind, Option<i64>) {
        use crate::metrics::netty::RequestKind;
        match self {
            Request::Send(r) => (RequestKind::Send, Some(r.timestamp)),
            Request::Data(r) => (RequestKind::Data, Some(r.timestamp)),
            Request::Index(_) => (RequestKind::Index, None),
            Request::Memory(r) => (RequestKind::Memory, Some(r.timestamp)),
            Request::Sorted(r) => (RequestKind::Sorted, Some(r.timestamp)),
        }
    }

    /// Whether `ty` is a request this server decodes; anything else closes the connection
    /// before its body is read.
    pub fn is_request_type(t: i8) -> bool {
        matches!(
            t,
            ty::SEND | ty::INDEX | ty::DATA | ty::MEMORY | ty::SORTED | ty::DATA_V2 | ty::DATA_V3
        )
    }

    /// The request id, echoed in the response.
    pub fn request_id(&self) -> i64 {
        match self {
            Request::Send(r) => r.request_id,
            Request::Index(r) => r.request_id,
            Request::Data(r) => r.request_id,
            Request::Memory(r) => r.request_id,
            Request::Sorted(r) => r.request_id,
        }
    }

    /// Decodes the message of a frame of type `t`. Block data is sliced out of `msg`
    /// without a copy. Trailing bytes after the last field are ignored, as Java does.
    pub fn decode(t: i8, msg: Bytes) -> Result<Request, FrameError> {
        let mut c = Cursor::new(msg);
        let c = &mut c;
        Ok(match t {
            ty::SEND => Request::Send(ready(decode_send(c))?),
            ty::INDEX => Request::Index(IndexRequest {
                request_id: c.i64("requestId")?,
                app_id: app(c)?,
                shuffle_id: c.i32("shuffleId")?,
                partition_id: c.i32("partitionId")?,
                partition_num_per_range: c.i32("partitionNumPerRange")?,
                partition_num: c.i32("partitionNum")?,
            }),
            ty::DATA | ty::DATA_V2 | ty::DATA_V3 => Request::Data(decode_data(t, c)?),
            ty::MEMORY => Request::Memory(MemoryRequest {
                request_id: c.i64("requestId")?,
                app_id: app(c)?,
                shuffle_id: c.i32("shuffleId")?,
                partition_id: c.i32("partitionId")?,
                last_block_id: c.i64("lastBlockId")?,
                read_buffer_size: c.i32("readBufferSize")?,
                timestamp: c.i64("timestamp")?,
                expected_task_ids: c.opt_bytes("expectedTaskIds")?,
            }),
            ty::SORTED => Request::Sorted(SortedRequest {
                request_id: c.i64("requestId")?,
                app_id: app(c)?,
                shuffle_id: c.i32("shuffleId")?,
                partition_id: c.i32("partitionId")?,
                block_id: c.i64("blockId")?,
                length: c.i32("length")?,
                timestamp: c.i64("timestamp")?,
            }),
            other => return Err(FrameError::UnknownType(other)),
        })
    }

    /// Encodes the whole frame (header and message; requests have no body).
    pub fn encode(&self) -> BytesMut {
        match self {
            Request::Send(r) => encode_frame(ty::SEND, 0, |b| {
                b.put_i64(r.request_id);
                put_string(b, Some(&r.app_id));
                b.put_i32(r.shuffle_id);
                b.put_i64(r.require_buffer_id);
                b.put_i32(r.partitions.len() as i32);
                for (partition, blocks) in &r.partitions {
                    b.put_i32(*partition);
                    b.put_i32(blocks.len() as i32);
                    for k in blocks {
                        b.put_i32(k.partition_id);
                        b.put_i64(k.block_id);
                        b.put_i32(k.length);
                        b.put_i32(k.shuffle_id);
                        b.put_i64(k.crc);
                        b.put_i64(k.task_attempt_id);
                        b.put_i32(k.data.len() as i32);
                        b.put_slice(&k.data);
                        b.put_i32(k.replicas.len() as i32);
                        for s in &k.replicas {
                            put_string(b, s.id.as_deref());
                            put_string(b, s.host.as_deref());
                            b.put_i32(s.grpc_port);
                            b.put_i32(s.netty_port);
                        }
                        b.put_i32(k.uncompress_length);
                        b.put_i64(k.free_memory);
                    }
                }
                b.put_i64(r.timestamp);
            }),
            Request::Index(r) => encode_frame(ty::INDEX, 0, |b| {
                b.put_i64(r.request_id);
                put_string(b, Some(&r.app_id));
                b.put_i32(r.shuffle_id);
                b.put_i32(r.partition_id);
                b.put_i32(r.partition_num_per_range);
                b.put_i32(r.partition_num);
            }),
            Request::Data(r) => {
                let t = match r.version {
                    DataVersion::V1 => ty::DATA,
                    DataVersion::V2 => ty::DATA_V2,
                    DataVersion::V3 => ty::DATA_V3,
                };
                encode_frame(t, 0, |b| {
                    b.put_i64(r.request_id);
                    put_string(b, Some(&r.app_id));
                    b.put_i32(r.shuffle_id);
                    b.put_i32(r.partition_id);
                    b.put_i32(r.partition_num_per_range);
                    b.put_i32(r.partition_num);
                    b.put_i64(r.offset);
                    b.put_i32(r.length);
                    b.put_i64(r.timestamp);
                    if r.version != DataVersion::V1 {
                        b.put_i32(r.storage_id);
                    }
                    if r.version == DataVersion::V3 {
                        b.put_i32(r.next_segments.len() as i32);
                        for (offset, length) in &r.next_segments {
                            b.put_i64(*offset);
                            b.put_i64(*length);
                        }
                        b.put_i64(r.task_attempt_id);
                    }
                })
            }
            Request::Memory(r) => encode_frame(ty::MEMORY, 0, |b| {
                b.put_i64(r.request_id);
                put_string(b, Some(&r.app_id));
                b.put_i32(r.shuffle_id);
                b.put_i32(r.partition_id);
                b.put_i64(r.last_block_id);
                b.put_i32(r.read_buffer_size);
                b.put_i64(r.timestamp);
                put_opt_bytes(b, r.expected_task_ids.as_deref());
            }),
            Request::Sorted(r) => encode_frame(ty::SORTED, 0, |b| {
                b.put_i64(r.request_id);
                put_string(b, Some(&r.app_id));
                b.put_i32(r.shuffle_id);
                b.put_i32(r.partition_id);
                b.put_i64(r.block_id);
                b.put_i32(r.length);
                b.put_i64(r.timestamp);
            }),
        }
    }
}

/// Type 3, from any [`Source`]: the server reads it off the socket with each payload in a
/// buffer of its own; tests and tools decode it from memory.
pub async fn decode_send<S: Source>(c: &mut S) -> Result<SendRequest, FrameError> {
    let request_id = c.i64("requestId").await?;
    let app_id = c.string("appId").await?.unwrap_or_default();
    let shuffle_id = c.i32("shuffleId").await?;
    let require_buffer_id = c.i64("requireBufferId").await?;
    let partition_count = c.count("partitionCount").await?;
    // Counts are not trusted for preallocation: each element needs bytes, so the message
    // length bounds the loop.
    let mut partitions = Vec::new();
    for _ in 0..partition_count {
        let partition = c.i32("partitionId").await?;
        let block_count = c.count("blockCount").await?;
        let mut blocks = Vec::new();
        for _ in 0..block_count {
            let partition_id = c.i32("block.partitionId").await?;
            let block_id = c.i64("block.blockId").await?;
            let length = c.i32("block.length").await?;
            let shuffle_id = c.i32("block.shuffleId").await?;
            let crc = c.i64("block.crc").await?;
            let task_attempt_id = c.i64("block.taskAttemptId").await?;
            let data_len = c.count("block.dataLength").await?;
            let data = c.payload("block.data", data_len).await?;
            let server_count = c.count("block.serverCount").await?;
            let mut replicas = Vec::new();
            for _ in 0..server_count {
                replicas.push(Replica {
                    id: c.string("server.id").await?,
                    host: c.string("server.host").await?,
                    grpc_port: c.i32("server.grpcPort").await?,
                    netty_port: c.i32("server.nettyPort").await?,
                });
            }
            blocks.push(SendBlock {
                partition_id,
                block_id,
                length,
                shuffle_id,
                crc,
                task_attempt_id,
                data,
                replicas,
                uncompress_length: c.i32("block.uncompressLength").await?,
                free_memory: c.i64("block.freeMemory").await?,
            });
        }
        partitions.push((partition, blocks));
    }
    Ok(SendRequest {
        request_id,
        app_id,
        shuffle_id,
        require_buffer_id,
        partitions,
        timestamp: c.i64("timestamp").await?,
    })
}

fn decode_data(t: i8, c: &mut Cursor) -> Result<DataRequest, FrameError> {
    let mut r = DataRequest {
        version: match t {
            ty::DATA_V2 => DataVersion::V2,
            ty::DATA_V3 => DataVersion::V3,
            _ => DataVersion::V1,
        },
        request_id: c.i64("requestId")?,
        app_id: app(c)?,
        shuffle_id: c.i32("shuffleId")?,
        partition_id: c.i32("partitionId")?,
        partition_num_per_range: c.i32("partitionNumPerRange")?,
        partition_num: c.i32("partitionNum")?,
        offset: c.i64("offset")?,
        length: c.i32("length")?,
        timestamp: c.i64("timestamp")?,
        storage_id: -1,
        next_segments: Vec::new(),
        task_attempt_id: 0,
    };
    if r.version != DataVersion::V1 {
        r.storage_id = c.i32("storageId")?;
    }
    if r.version == DataVersion::V3 {
        let n = c.count("segmentCount")?;
        for _ in 0..n {
            r.next_segments
                .push((c.i64("segment.offset")?, c.i64("segment.length")?));
        }
        r.task_attempt_id = c.i64("taskAttemptId")?;
    }
    Ok(r)
}

/// The prefix every response message starts with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponseHead {
    /// The request's id.
    pub request_id: i64,
    /// `StatusCode` number.
    pub status: i32,
    /// Message; `None` encodes as null.
    pub ret_message: Option<String>,
}

/// A response frame: message fields plus the body sent after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// Type 0.
    Rpc(ResponseHead),
    /// Type 14.
    Index {
        /// Prefix.
        head: ResponseHead,
        /// Data file length when the index was read.
        data_file_len: i64,
        /// 40-byte index records (body).
        index: Bytes,
    },
    /// Type 23 (0.10 clients only; not sent by this server by default).
    IndexV2 {
        /// Prefix.
        head: ResponseHead,
        /// Data file length.
        data_file_len: i64,
        /// One disk index per index part.
        storage_ids: Vec<i32>,
        /// Index records (body).
        index: Bytes,
    },
    /// Type 15.
    Data {
        /// Prefix.
        head: ResponseHead,
        /// File bytes (body).
        data: Bytes,
    },
    /// Type 16.
    Memory {
        /// Prefix.
        head: ResponseHead,
        /// One per block, in `data` order.
        segments: Vec<Segment>,
        /// Concatenated block bytes (body).
        data: Bytes,
    },
    /// Type 22.
    Sorted {
        /// Prefix.
        head: ResponseHead,
        /// Next block id, `-1` on error.
        next_block_id: i64,
        /// Merge state, 3 (`INTERNAL_ERROR`) on error.
        merge_state: i32,
        /// Merged bytes (body).
        data: Bytes,
    },
}

impl Response {
    /// The prefix.
    pub fn head(&self) -> &ResponseHead {
        match self {
            Response::Rpc(head)
            | Response::Index { head, .. }
            | Response::IndexV2 { head, .. }
            | Response::Data { head, .. }
            | Response::Memory { head, .. }
            | Response::Sorted { head, .. } => head,
        }
    }

    /// The body, sent after the message without copying it.
    pub fn body(&self) -> Bytes {
        match self {
            Response::Rpc(_) => Bytes::new(),
            Response::Index { index, .. } | Response::IndexV2 { index, .. } => index.clone(),
            Response::Data { data, .. }
            | Response::Memory { data, .. }
            | Response::Sorted { data, .. } => data.clone(),
        }
    }

    /// Header and message as one small buffer; the caller writes [`Response::body`] after
    /// it (a vectored write, no copy of the body). The body must fit an int32 length, which
    /// the handler guarantees (reads are bounded by int32 request fields).
    pub fn encode_head(&self) -> BytesMut {
        self.encode_head_with(self.body().len())
    }

    /// Header and message for a body of `body_len` bytes that the caller writes from
    /// elsewhere (memory payloads as they are stored, file ranges by sendfile) while this
    /// response's own body field is left empty.
    pub fn encode_head_with(&self, body_len: usize) -> BytesMut {
        let put_head = |b: &mut BytesMut, h: &ResponseHead| {
            b.put_i64(h.request_id);
            b.put_i32(h.status);
            put_string(b, h.ret_message.as_deref());
        };
        match self {
            Response::Rpc(h) => encode_frame(ty::RPC_RESPONSE, 0, |b| put_head(b, h)),
            Response::Index {
                head,
                data_file_len,
                ..
            } => encode_frame(ty::INDEX_RESPONSE, body_len, |b| {
                put_head(b, head);
                b.put_i64(*data_file_len);
            }),
            Response::IndexV2 {
                head,
                data_file_len,
                storage_ids,
                ..
            } => encode_frame(ty::INDEX_V2_RESPONSE, body_len, |b| {
                put_head(b, head);
                b.put_i64(*data_file_len);
                b.put_i32(storage_ids.len() as i32);
                for id in storage_ids {
                    b.put_i32(*id);
                }
            }),
            Response::Data { head, .. } => {
                encode_frame(ty::DATA_RESPONSE, body_len, |b| put_head(b, head))
            }
            Response::Memory { head, segments, .. } => {
                encode_frame(ty::MEMORY_RESPONSE, body_len, |b| {
                    put_head(b, head);
                    b.put_i32(segments.len() as i32);
                    for s in segments {
                        b.put_i64(s.block_id);
                        // int32 on this wire: offsets stay below the int32 body length.
                        b.put_i32(s.offset as i32);
                        b.put_i32(s.length);
                        b.put_i32(s.uncompress_length);
                        b.put_i64(s.crc);
                        b.put_i64(s.task_attempt_id);
                    }
                })
            }
            Response::Sorted {
                head,
                next_block_id,
                merge_state,
                ..
            } => encode_frame(ty::SORTED_RESPONSE, body_len, |b| {
                put_head(b, head);
                b.put_i64(*next_block_id);
                b.put_i32(*merge_state);
            }),
        }
    }

    /// The whole frame in one buffer (tests).
    pub fn encode(&self) -> BytesMut {
        let mut b = self.encode_head();
        b.put_slice(&self.body());
        b
    }

    /// Decodes a response frame of type `t` (the client side).
    pub fn decode(t: i8, msg: Bytes, body: Bytes) -> Result<Response, FrameError> {
        let mut c = Cursor::new(msg);
        let c = &mut c;
        let head = ResponseHead {
            request_id: c.i64("requestId")?,
            status: c.i32("status")?,
            ret_message: c.string("retMessage")?,
        };
        Ok(match t {
            ty::RPC_RESPONSE => Response::Rpc(head),
            ty::INDEX_RESPONSE => Response::Index {
                head,
                data_file_len: c.i64("dataFileLen")?,
                index: body,
            },
            ty::INDEX_V2_RESPONSE => {
                let data_file_len = c.i64("dataFileLen")?;
                let n = c.count("storageIdCount")?;
                let mut storage_ids = Vec::new();
                for _ in 0..n {
                    storage_ids.push(c.i32("storageId")?);
                }
                Response::IndexV2 {
                    head,
                    data_file_len,
                    storage_ids,
                    index: body,
                }
            }
            ty::DATA_RESPONSE => Response::Data { head, data: body },
            ty::MEMORY_RESPONSE => {
                let n = c.count("segmentCount")?;
                let mut segments = Vec::new();
                for _ in 0..n {
                    segments.push(Segment {
                        block_id: c.i64("segment.blockId")?,
                        offset: i64::from(c.i32("segment.offset")?),
                        length: c.i32("segment.length")?,
                        uncompress_length: c.i32("segment.uncompressLength")?,
                        crc: c.i64("segment.crc")?,
                        task_attempt_id: c.i64("segment.taskAttemptId")?,
                    });
                }
                Response::Memory {
                    head,
                    segments,
                    data: body,
                }
            }
            ty::SORTED_RESPONSE => Response::Sorted {
                head,
                next_block_id: c.i64("nextBlockId")?,
                merge_state: c.i32("mergeState")?,
                data: body,
            },
            other => return Err(FrameError::UnknownType(other)),
        })
    }
}

#[cfg(test)]
mod tests;
