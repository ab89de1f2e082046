//! The load generator's client: control calls over gRPC, block data over gRPC or the Netty
//! plane, each call timed into a latency histogram, every status checked.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use tonic::transport::Channel;

use spillway::ids::BlockIdLayout;
use spillway::netty::client::{send_message_len, NettyClient};
use spillway::netty::messages::{
    DataRequest, DataVersion, IndexRequest, MemoryRequest, Request, Response, SendBlock,
    SendRequest,
};
use spillway::proto::shuffle_server_client::ShuffleServerClient;
use spillway::proto::{self, StatusCode};
use spillway::store::memory::Segment;

/// Which plane carries block data (control calls are always gRPC, as with Java).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// `sendShuffleData`, `getLocalShuffleData`, … over gRPC.
    Grpc,
    /// Netty frames (types 3, 4, 5, 6) on the server's Netty port.
    Netty,
}

/// The timed operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `requireBuffer`.
    Require,
    /// `sendShuffleData` / type 3.
    Send,
    /// `getShuffleResult`.
    Result,
    /// `getMemoryShuffleData` / type 6.
    Memory,
    /// `getLocalShuffleIndex` / type 4.
    Index,
    /// `getLocalShuffleData` / type 5.
    Data,
}

impl Op {
    /// Every op, in report order.
    pub const ALL: [Op; 6] = [
        Op::Require,
        Op::Send,
        Op::Result,
        Op::Memory,
        Op::Index,
        Op::Data,
    ];

    /// The RPC name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Require => "requireBuffer",
            Op::Send => "sendShuffleData",
            Op::Result => "getShuffleResult",
            Op::Memory => "getMemoryShuffleData",
            Op::Index => "getLocalShuffleIndex",
            Op::Data => "getLocalShuffleData",
        }
    }
}

/// Latency histograms (µs), one per [`Op`]; one per worker, merged at the end.
pub struct Latencies(Vec<Histogram<u64>>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies(
            Op::ALL
                .iter()
                .map(|_| {
                    Histogram::new_with_bounds(1, 3_600_000_000, 3)
                        .expect("1 µs to 1 h at 3 digits is a valid range")
                })
                .collect(),
        )
    }
}

impl Latencies {
    /// Records one call that started at `start`.
    pub fn record(&mut self, op: Op, start: Instant) {
        let us = start.elapsed().as_micros().max(1) as u64;
        self.0[op as usize].saturating_record(us);
    }

    /// The histogram of `op`.
    pub fn of(&self, op: Op) -> &Histogram<u64> {
        &self.0[op as usize]
    }
}

/// A block as read back: id, CRC field and bytes.
pub struct ReadBlock {
    /// Block id.
    pub block_id: i64,
    /// The CRC the server returned with it.
    pub crc: i64,
    /// The payload.
    pub data: Bytes,
}

/// One worker's connection(s): a gRPC client (a clone of a shared channel) and, for the Netty
/// transport, its own Netty connection.
pub struct Client {
    grpc: ShuffleServerClient<Channel>,
    netty: Option<NettyClient>,
    app: String,
    shuffle: i32,
    next_request: i64,
    /// Where this worker's calls are timed (shared by the phase's workers).
    latencies: Arc<Mutex<Latencies>>,
    /// `NO_BUFFER` answers to requireBuffer (retried after a back-off).
    pub no_buffer: u64,
}

/// A gRPC channel with unlimited message sizes (the server enforces its own). Connecting is
/// bounded: a server whose network drops packets would otherwise hold the caller for the
/// kernel's SYN retries (about two minutes).
pub async fn channel(addr: SocketAddr) -> anyhow::Result<Channel> {
    Channel::from_shared(format!("http://{addr}"))
        .context("gRPC address")?
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .initial_stream_window_size(Some(4 << 20))
        .initial_connection_window_size(Some(16 << 20))
        .connect()
        .await
        .with_context(|| format!("connecting to gRPC {addr}"))
}

fn check(op: &str, status: i32, msg: &str) -> anyhow::Result<()> {
    match StatusCode::try_from(status) {
        Ok(StatusCode::Success) => Ok(()),
        Ok(other) => bail!("{op}: {other:?} {msg}"),
        Err(_) => bail!("{op}: unknown status {status} {msg}"),
    }
}

impl Client {
    /// A worker client for `app`/`shuffle`; connects to `netty` when given.
    pub async fn new(
        channel: Channel,
        netty: Option<SocketAddr>,
        app: &str,
        shuffle: i32,
        latencies: Arc<Mutex<Latencies>>,
    ) -> anyhow::Result<Client> {
        let netty = match netty {
            Some(addr) => Some(
                NettyClient::connect(addr)
                    .await
                    .with_context(|| format!("connecting to Netty {addr}"))?,
            ),
            None => None,
        };
        Ok(Client {
            grpc: ShuffleServerClient::new(channel)
                .max_decoding_message_size(usize::MAX)
                .max_encoding_message_size(usize::MAX),
            netty,
            app: app.to_owned(),
            shuffle,
            next_request: 1,
            latencies,
            no_buffer: 0,
        })
    }

    /// `registerShuffle` of partitions `[p, p]` for `p in 0..partitions`, as Spark does.
    pub async fn register(&mut self, partitions: usize) -> anyhow::Result<()> {
        self.register_remote(partitions, None).await
    }

    /// [`Client::register`] with a `remoteStorage.path`, so a `*_HDFS` server may spill the
    /// app to HDFS.
    pub async fn register_remote(
        &mut self,
        partitions: usize,
        remote_storage: Option<&str>,
    ) -> anyhow::Result<()> {
        let r = self
            .grpc
            .register_shuffle(proto::ShuffleRegisterRequest {
                app_id: self.app.clone(),
                shuffle_id: self.shuffle,
                partition_ranges: (0..partitions as i32)
                    .map(|p| proto::ShufflePartitionRange { start: p, end: p })
                    .collect(),
                user: "spillway-bench".into(),
                remote_storage: remote_storage.map(|path| proto::RemoteStorage {
                    path: path.to_owned(),
                    remote_storage_conf: Vec::new(),
                }),
                ..Default::default()
            })
            .await?
            .into_inner();
        check("registerShuffle", r.status, &r.ret_msg)
    }

    /// requireBuffer (retrying `NO_BUFFER` with a growing back-off, as the client does) and
    /// the send. `blocks` are `(partition, block)` in request order.
    pub async fn send(
        &mut self,
        blocks: Vec<(i32, proto::ShuffleBlock)>,
        backoff: Duration,
    ) -> anyhow::Result<()> {
        let mut partitions: Vec<(i32, Vec<proto::ShuffleBlock>)> = Vec::new();
        for (p, b) in blocks {
            match partitions.last_mut() {
                Some((last, v)) if *last == p => v.push(b),
                _ => partitions.push((p, vec![b])),
            }
        }
        let netty_req = self.netty.as_ref().map(|_| SendRequest {
            request_id: 0,
            app_id: self.app.clone(),
            shuffle_id: self.shuffle,
            require_buffer_id: 0,
            partitions: partitions
                .iter()
                .map(|(p, blocks)| {
                    let blocks = blocks
                        .iter()
                        .map(|b| SendBlock {
                            partition_id: *p,
                            block_id: b.block_id,
                            length: b.length,
                            shuffle_id: self.shuffle,
                            crc: b.crc,
                            task_attempt_id: b.task_attempt_id,
                            data: b.data.clone(),
                            replicas: Vec::new(),
                            uncompress_length: b.uncompress_length,
                            free_memory: 0,
                        })
                        .collect();
                    (*p, blocks)
                })
                .collect(),
            timestamp: 0,
        });
        let mut size: i64 = partitions
            .iter()
            .flat_map(|(_, b)| b)
            .map(|b| i64::from(b.length) + 32)
            .sum();
        if let Some(req) = &netty_req {
            // The 0.10 Netty client reserves the message too.
            size += send_message_len(req) as i64;
        }
        let size = i32::try_from(size).context("request larger than 2 GiB")?;
        let partition_ids: Vec<i32> = partitions.iter().map(|(p, _)| *p).collect();
        // As the Java client: a send answered with anything but success or a no-retry code
        // (an expired ticket is INTERNAL_ERROR) is re-required and resent, up to
        // `rss.client.rpc.maxAttempts` (3) times in all.
        const MAX_ATTEMPTS: u32 = 3;
        let mut attempt = 1;
        loop {
            let ticket = self.require(size, &partition_ids, backoff).await?;
            let start = Instant::now();
            let (status, msg, op) = match (self.netty.as_mut(), netty_req.clone()) {
                (Some(conn), Some(mut req)) => {
                    req.request_id = self.next_request;
                    self.next_request += 1;
                    req.require_buffer_id = ticket;
                    match conn.call_reconnecting(&Request::Send(req)).await? {
                        Response::Rpc(h) => {
                            (h.status, h.ret_message.unwrap_or_default(), "send (Netty)")
                        }
                        other => bail!("send (Netty) answered with type {:?}", other.head()),
                    }
                }
                _ => {
                    let r = self
                        .grpc
                        .send_shuffle_data(proto::SendShuffleDataRequest {
                            app_id: self.app.clone(),
                            shuffle_id: self.shuffle,
                            require_buffer_id: ticket,
                            shuffle_data: partitions
                                .iter()
                                .map(|(partition_id, block)| proto::ShuffleData {
                                    partition_id: *partition_id,
                                    block: block.clone(),
                                })
                                .collect(),
                            ..Default::default()
                        })
                        .await?
                        .into_inner();
                    (r.status, r.ret_msg, "sendShuffleData")
                }
            };
            let retry = !matches!(
                StatusCode::try_from(status),
                Ok(StatusCode::Success
                    | StatusCode::NoRegister
                    | StatusCode::AppNotFound
                    | StatusCode::InternalNotRetryError
                    | StatusCode::ExceedHugePartitionHardLimit)
            );
            if retry && attempt < MAX_ATTEMPTS {
                eprintln!("spillway-bench: {op} attempt {attempt}: {status} {msg}; re-requiring");
                attempt += 1;
                continue;
            }
            check(op, status, &msg)?;
            self.latencies.lock().record(Op::Send, start);
            return Ok(());
        }
    }

    /// `requireBuffer` until granted, backing off on `NO_BUFFER`; the ticket.
    async fn require(
        &mut self,
        size: i32,
        partition_ids: &[i32],
        backoff: Duration,
    ) -> anyhow::Result<i64> {
        let mut wait = backoff;
        loop {
            let start = Instant::now();
            let r = self
                .grpc
                .require_buffer(proto::RequireBufferRequest {
                    require_size: size,
                    app_id: self.app.clone(),
                    shuffle_id: self.shuffle,
                    partition_ids: partition_ids.to_vec(),
                    ..Default::default()
                })
                .await?
                .into_inner();
            self.latencies.lock().record(Op::Require, start);
            match StatusCode::try_from(r.status) {
                Ok(StatusCode::Success) => return Ok(r.require_buffer_id),
                Ok(StatusCode::NoBuffer | StatusCode::NoBufferForHugePartition) => {
                    self.no_buffer += 1;
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(backoff * 32);
                }
                _ => {
                    check("requireBuffer", r.status, &r.ret_msg)?;
                    bail!("requireBuffer: status {} {}", r.status, r.ret_msg);
                }
            }
        }
    }

    /// `reportShuffleResult` of one map task, then `commitShuffleTask`.
    pub async fn report_and_commit(
        &mut self,
        task: i64,
        ids: Vec<(i32, Vec<i64>)>,
    ) -> anyhow::Result<()> {
        let r = self
            .grpc
            .report_shuffle_result(crate::client::report_request(
                &self.app,
                self.shuffle,
                task,
                ids,
            ))
            .await?
            .into_inner();
        check("reportShuffleResult", r.status, &r.ret_msg)?;
        let r = self
            .grpc
            .commit_shuffle_task(proto::ShuffleCommitRequest {
                app_id: self.app.clone(),
                shuffle_id: self.shuffle,
            })
            .await?
            .into_inner();
        check("commitShuffleTask", r.status, &r.ret_msg)
    }

    /// `finishShuffle`: the server spills the shuffle and answers when it is durable.
    pub async fn finish(&mut self) -> anyhow::Result<()> {
        let r = self
            .grpc
            .finish_shuffle(proto::FinishShuffleRequest {
                app_id: self.app.clone(),
                shuffle_id: self.shuffle,
            })
            .await?
            .into_inner();
        check("finishShuffle", r.status, &r.ret_msg)
    }

    /// `unregisterShuffleByAppId`: frees everything the run left on the server.
    pub async fn unregister_app(&mut self) -> anyhow::Result<()> {
        let r = self
            .grpc
            .unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest {
                app_id: self.app.clone(),
            })
            .await?
            .into_inner();
        check("unregisterShuffleByAppId", r.status, &r.ret_msg)
    }

    /// `getShuffleResult`: the Java-legacy bitmap bytes of `partition`.
    pub async fn shuffle_result(
        &mut self,
        partition: i32,
        layout: BlockIdLayout,
    ) -> anyhow::Result<Bytes> {
        let start = Instant::now();
        let r = self
            .grpc
            .get_shuffle_result(proto::GetShuffleResultRequest {
                app_id: self.app.clone(),
                shuffle_id: self.shuffle,
                partition_id: partition,
                block_id_layout: Some(proto::BlockIdLayout {
                    sequence_no_bits: layout.sequence_bits as i32,
                    partition_id_bits: layout.partition_bits as i32,
                    task_attempt_id_bits: layout.task_attempt_bits as i32,
                }),
            })
            .await?
            .into_inner();
        self.latencies.lock().record(Op::Result, start);
        check("getShuffleResult", r.status, &r.ret_msg)?;
        Ok(r.serialized_bitmap)
    }

    /// One memory read after `last_block_id`: the blocks returned (empty at the end).
    pub async fn read_memory(
        &mut self,
        partition: i32,
        last_block_id: i64,
        read_size: i32,
    ) -> anyhow::Result<Vec<ReadBlock>> {
        let start = Instant::now();
        let (segments, data) = match self.netty.as_mut() {
            Some(conn) => {
                let req = Request::Memory(MemoryRequest {
                    request_id: self.next_request,
                    app_id: self.app.clone(),
                    shuffle_id: self.shuffle,
                    partition_id: partition,
                    last_block_id,
                    read_buffer_size: read_size,
                    timestamp: 0,
                    expected_task_ids: None,
                });
                self.next_request += 1;
                match conn.call_reconnecting(&req).await? {
                    Response::Memory {
                        head,
                        segments,
                        data,
                    } => {
                        check(
                            "getMemoryShuffleData (Netty)",
                            head.status,
                            head.ret_message.as_deref().unwrap_or(""),
                        )?;
                        (segments, data)
                    }
                    other => bail!("memory read answered with {:?}", other.head()),
                }
            }
            None => {
                let r = self
                    .grpc
                    .get_memory_shuffle_data(proto::GetMemoryShuffleDataRequest {
                        app_id: self.app.clone(),
                        shuffle_id: self.shuffle,
                        partition_id: partition,
                        last_block_id,
                        read_buffer_size: read_size,
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                check("getMemoryShuffleData", r.status, &r.ret_msg)?;
                let segments = r
                    .shuffle_data_block_segments
                    .iter()
                    .map(|s| Segment {
                        block_id: s.block_id,
                        offset: s.offset,
                        length: s.length,
                        uncompress_length: s.uncompress_length,
                        crc: s.crc,
                        task_attempt_id: s.task_attempt_id,
                    })
                    .collect();
                (segments, r.data)
            }
        };
        self.latencies.lock().record(Op::Memory, start);
        segments
            .iter()
            .map(|s| {
                let (at, len) = (s.offset as usize, s.length as usize);
                if at.checked_add(len).is_none_or(|end| end > data.len()) {
                    return Err(anyhow!(
                        "memory segment of block {} is outside the data",
                        s.block_id
                    ));
                }
                Ok(ReadBlock {
                    block_id: s.block_id,
                    crc: s.crc,
                    data: data.slice(at..at + len),
                })
            })
            .collect()
    }

    /// `getLocalShuffleIndex` of `partition` (one partition per range): the index bytes.
    pub async fn read_index(&mut self, partition: i32, partitions: i32) -> anyhow::Result<Bytes> {
        let start = Instant::now();
        let index = match self.netty.as_mut() {
            Some(conn) => {
                let req = Request::Index(IndexRequest {
                    request_id: self.next_request,
                    app_id: self.app.clone(),
                    shuffle_id: self.shuffle,
                    partition_id: partition,
                    partition_num_per_range: 1,
                    partition_num: partitions,
                });
                self.next_request += 1;
                match conn.call_reconnecting(&req).await? {
                    Response::Index { head, index, .. } | Response::IndexV2 { head, index, .. } => {
                        check(
                            "getLocalShuffleIndex (Netty)",
                            head.status,
                            head.ret_message.as_deref().unwrap_or(""),
                        )?;
                        index
                    }
                    other => bail!("index read answered with {:?}", other.head()),
                }
            }
            None => {
                let r = self
                    .grpc
                    .get_local_shuffle_index(proto::GetLocalShuffleIndexRequest {
                        app_id: self.app.clone(),
                        shuffle_id: self.shuffle,
                        partition_id: partition,
                        partition_num_per_range: 1,
                        partition_num: partitions,
                    })
                    .await?
                    .into_inner();
                check("getLocalShuffleIndex", r.status, &r.ret_msg)?;
                r.index_data
            }
        };
        self.latencies.lock().record(Op::Index, start);
        Ok(index)
    }

    /// `getLocalShuffleData`: exactly `[offset, offset + length)` of the partition's file.
    pub async fn read_data(
        &mut self,
        partition: i32,
        partitions: i32,
        offset: i64,
        length: i32,
    ) -> anyhow::Result<Bytes> {
        let start = Instant::now();
        let data = match self.netty.as_mut() {
            Some(conn) => {
                let req = Request::Data(DataRequest {
                    version: DataVersion::V1,
                    request_id: self.next_request,
                    app_id: self.app.clone(),
                    shuffle_id: self.shuffle,
                    partition_id: partition,
                    partition_num_per_range: 1,
                    partition_num: partitions,
                    offset,
                    length,
                    timestamp: 0,
                    storage_id: -1,
                    next_segments: Vec::new(),
                    task_attempt_id: 0,
                });
                self.next_request += 1;
                match conn.call_reconnecting(&req).await? {
                    Response::Data { head, data } => {
                        check(
                            "getLocalShuffleData (Netty)",
                            head.status,
                            head.ret_message.as_deref().unwrap_or(""),
                        )?;
                        data
                    }
                    other => bail!("data read answered with {:?}", other.head()),
                }
            }
            None => {
                let r = self
                    .grpc
                    .get_local_shuffle_data(proto::GetLocalShuffleDataRequest {
                        app_id: self.app.clone(),
                        shuffle_id: self.shuffle,
                        partition_id: partition,
                        partition_num_per_range: 1,
                        partition_num: partitions,
                        offset,
                        length,
                        storage_id: -1,
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                check("getLocalShuffleData", r.status, &r.ret_msg)?;
                r.data
            }
        };
        self.latencies.lock().record(Op::Data, start);
        if data.len() != length as usize {
            bail!(
                "getLocalShuffleData of partition {partition} at {offset}: {} bytes instead of {length}",
                data.len()
            );
        }
        Ok(data)
    }
}

/// One map task's `reportShuffleResult`: its ids per partition, in one bitmap as the Java
/// client sends them by default.
pub(crate) fn report_request(
    app: &str,
    shuffle: i32,
    task: i64,
    ids: Vec<(i32, Vec<i64>)>,
) -> proto::ReportShuffleResultRequest {
    proto::ReportShuffleResultRequest {
        app_id: app.to_owned(),
        shuffle_id: shuffle,
        task_attempt_id: task,
        bitmap_num: 1,
        partition_to_block_ids: ids
            .into_iter()
            .map(|(partition_id, block_ids)| proto::PartitionToBlockIds {
                partition_id,
                block_ids,
            })
            .collect(),
        // Record counts come only from post-0.10 clients with integrity validation on.
        partition_stats: Vec::new(),
    }
}
