//! The Netty data plane against the real server: `netty::client` (raw bytes for the bad
//! frames) to `running.netty_addr`, with the control calls (register, requireBuffer, finish)
//! over gRPC as the Java client does.

mod common;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::{make_block, register, start, status_of};
use spillway::netty::client::{send_message_len, NettyClient};
use spillway::netty::messages::{
    DataRequest, DataVersion, IndexRequest, MemoryRequest, Request, Response, SendBlock,
    SendRequest,
};
use spillway::netty::HEADER_LEN;
use spillway::proto::{self, StatusCode};
use spillway::store::index::IndexEntry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Guards against hangs only; never a speed claim.
const DEADLINE: Duration = Duration::from_secs(60);

struct Conn(NettyClient);

impl Conn {
    async fn open(addr: std::net::SocketAddr) -> Conn {
        Conn(
            NettyClient::connect(addr)
                .await
                .expect("Netty port accepts"),
        )
    }

    /// Writes one request and reads one response frame.
    async fn call(&mut self, req: &Request) -> Response {
        tokio::time::timeout(DEADLINE, self.0.call(req))
            .await
            .expect("a response")
            .expect("a well-formed response")
    }

    /// The socket, to write malformed frames.
    fn raw(&mut self) -> &mut TcpStream {
        self.0.stream_mut()
    }

    /// Asserts the server closes this connection without answering.
    async fn expect_closed(mut self) {
        let mut buf = [0u8; 64];
        let r = tokio::time::timeout(DEADLINE, self.raw().read(&mut buf))
            .await
            .expect("the server closes the connection");
        // Either a clean close or a reset: both mean the server dropped it.
        if let Ok(n) = r {
            assert_eq!(n, 0, "no response to a bad frame");
        }
    }
}

fn header(msg_len: i32, ty: i8, body_len: i32) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_i32(msg_len);
    b.put_i8(ty);
    b.put_i32(body_len);
    b
}

fn send_request(
    app: &str,
    shuffle: i32,
    ticket: i64,
    blocks: &[(i32, Vec<proto::ShuffleBlock>)],
) -> SendRequest {
    SendRequest {
        request_id: 1,
        app_id: app.into(),
        shuffle_id: shuffle,
        require_buffer_id: ticket,
        partitions: blocks
            .iter()
            .map(|(p, bs)| {
                (
                    *p,
                    bs.iter()
                        .map(|b| SendBlock {
                            partition_id: *p,
                            block_id: b.block_id,
                            length: b.length,
                            shuffle_id: shuffle,
                            crc: b.crc,
                            task_attempt_id: b.task_attempt_id,
                            data: b.data.clone(),
                            replicas: vec![],
                            uncompress_length: b.uncompress_length,
                            free_memory: 0,
                        })
                        .collect(),
                )
            })
            .collect(),
        timestamp: 1_700_000_000_000,
    }
}

/// requireBuffer (gRPC) for Σ(len+32) + msgLen, as the 0.10 Netty client does.
async fn require(client: &mut common::Client, req: &SendRequest) -> i64 {
    let msg_len = send_message_len(req) as i32;
    let size: i32 = req
        .partitions
        .iter()
        .flat_map(|(_, b)| b)
        .map(|b| b.length + 32)
        .sum::<i32>()
        + msg_len;
    let r = client
        .require_buffer(proto::RequireBufferRequest {
            require_size: size,
            app_id: req.app_id.clone(),
            shuffle_id: req.shuffle_id,
            partition_ids: req.partitions.iter().map(|(p, _)| *p).collect(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    r.require_buffer_id
}

/// Sends `blocks` over Netty (with a gRPC reservation) and asserts SUCCESS.
async fn netty_send(
    conn: &mut Conn,
    client: &mut common::Client,
    app: &str,
    shuffle: i32,
    blocks: &[(i32, Vec<proto::ShuffleBlock>)],
) {
    let mut req = send_request(app, shuffle, 0, blocks);
    req.require_buffer_id = require(client, &req).await;
    match conn.call(&Request::Send(req)).await {
        Response::Rpc(head) => {
            assert_eq!(head.request_id, 1);
            assert_eq!(
                status_of(head.status),
                StatusCode::Success,
                "{:?}",
                head.ret_message
            );
        }
        other => panic!("send answered with {other:?}"),
    }
}

fn memory_request(app: &str, shuffle: i32, partition: i32, last: i64) -> Request {
    Request::Memory(MemoryRequest {
        request_id: 2,
        app_id: app.into(),
        shuffle_id: shuffle,
        partition_id: partition,
        last_block_id: last,
        read_buffer_size: 1 << 20,
        timestamp: 0,
        expected_task_ids: None,
    })
}

/// Memory-reads a partition until an empty answer; block id → data, CRCs checked.
async fn read_memory(
    conn: &mut Conn,
    app: &str,
    shuffle: i32,
    partition: i32,
) -> Vec<(i64, Bytes)> {
    let mut out = Vec::new();
    let mut last = -1;
    loop {
        match conn
            .call(&memory_request(app, shuffle, partition, last))
            .await
        {
            Response::Memory {
                head,
                segments,
                data,
            } => {
                assert_eq!(head.request_id, 2);
                assert_eq!(
                    status_of(head.status),
                    StatusCode::Success,
                    "{:?}",
                    head.ret_message
                );
                if segments.is_empty() {
                    assert!(data.is_empty());
                    return out;
                }
                for s in segments {
                    let d = data.slice(s.offset as usize..s.offset as usize + s.length as usize);
                    assert_eq!(crc32fast::hash(&d) as i64, s.crc);
                    out.push((s.block_id, d));
                    last = s.block_id;
                }
            }
            other => panic!("memory read answered with {other:?}"),
        }
    }
}

fn data_request(
    app: &str,
    shuffle: i32,
    partition: i32,
    offset: i64,
    length: i32,
    version: DataVersion,
) -> Request {
    Request::Data(DataRequest {
        version,
        request_id: 4,
        app_id: app.into(),
        shuffle_id: shuffle,
        partition_id: partition,
        partition_num_per_range: 1,
        partition_num: 2,
        offset,
        length,
        timestamp: 0,
        storage_id: if version == DataVersion::V1 { -1 } else { 0 },
        next_segments: if version == DataVersion::V3 {
            vec![(offset + i64::from(length), 100)]
        } else {
            vec![]
        },
        task_attempt_id: 0,
    })
}

fn blocks_for(partitions: &[i32], task: i64, len: usize) -> Vec<(i32, Vec<proto::ShuffleBlock>)> {
    partitions
        .iter()
        .map(|p| {
            (
                *p,
                (0..3)
                    .map(|seq| make_block(seq, *p, task, len + seq as usize))
                    .collect(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netty_is_advertised_and_can_be_turned_off() {
    let s = start(1, |_| {}).await;
    let netty = s.running.netty_addr.expect("test config turns Netty on");
    assert_ne!(netty.port(), 0);
    assert_eq!(
        s.running.server_id,
        format!("127.0.0.1-{}-{}", s.running.grpc_addr.port(), netty.port())
    );
    // An idle connection does not hold shutdown up: it is closed between frames.
    let idle = Conn::open(netty).await;
    let report = s.running.shutdown().await;
    assert!(!report.drain_timed_out, "{report:?}");
    idle.expect_closed().await;

    let s = start(1, |c| c.netty_port = -1).await;
    assert_eq!(s.running.netty_addr, None);
    assert_eq!(
        s.running.server_id,
        format!("127.0.0.1-{}", s.running.grpc_addr.port())
    );
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_then_read_memory_index_and_data_over_netty() {
    let mut s = start(1, |_| {}).await;
    let addr = s.running.netty_addr.unwrap();
    let app = "netty_app";
    register(&mut s.client, app, 0, 0..2, false).await;
    let mut conn = Conn::open(addr).await;
    let blocks = blocks_for(&[0, 1], 7, 1000);
    netty_send(&mut conn, &mut s.client, app, 0, &blocks).await;

    // The frame overhead reserved on top of the blocks was given back: nothing stays reserved.
    let budget = s.running.registry().store().memory().budget().snapshot();
    assert_eq!(budget.reserved, 0, "{budget:?}");

    for (p, sent) in &blocks {
        let got = read_memory(&mut conn, app, 0, *p).await;
        let want: Vec<(i64, Bytes)> = sent.iter().map(|b| (b.block_id, b.data.clone())).collect();
        assert_eq!(got, want, "memory read of partition {p}");
    }

    let finished = s
        .client
        .finish_shuffle(proto::FinishShuffleRequest {
            app_id: app.into(),
            shuffle_id: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status_of(finished.status),
        StatusCode::Success,
        "{}",
        finished.ret_msg
    );

    for (version, (p, sent)) in [DataVersion::V1, DataVersion::V2, DataVersion::V3]
        .into_iter()
        .zip(blocks.iter().cycle())
    {
        let index = Request::Index(IndexRequest {
            request_id: 3,
            app_id: app.into(),
            shuffle_id: 0,
            partition_id: *p,
            partition_num_per_range: 1,
            partition_num: 2,
        });
        let (entries, data_file_len) = match conn.call(&index).await {
            Response::Index {
                head,
                data_file_len,
                index,
            } => {
                assert_eq!(head.request_id, 3);
                assert_eq!(
                    status_of(head.status),
                    StatusCode::Success,
                    "{:?}",
                    head.ret_message
                );
                assert_eq!(index.len() % IndexEntry::SIZE, 0);
                (IndexEntry::decode_all(&index), data_file_len)
            }
            other => panic!("index read answered with {other:?} (must be type 14)"),
        };
        let ids: Vec<i64> = entries.iter().map(|e| e.block_id).collect();
        let want_ids: Vec<i64> = sent.iter().map(|b| b.block_id).collect();
        assert_eq!(ids, want_ids);
        let total: i64 = entries.iter().map(|e| i64::from(e.length)).sum();
        assert_eq!(total, data_file_len);

        let data = match conn
            .call(&data_request(app, 0, *p, 0, total as i32, version))
            .await
        {
            Response::Data { head, data } => {
                assert_eq!(head.request_id, 4);
                assert_eq!(
                    status_of(head.status),
                    StatusCode::Success,
                    "{:?}",
                    head.ret_message
                );
                data
            }
            other => panic!("data read answered with {other:?}"),
        };
        let want: Vec<u8> = sent.iter().flat_map(|b| b.data.iter().copied()).collect();
        assert_eq!(
            &data[..],
            &want[..],
            "file bytes of partition {p} ({version:?})"
        );
        for e in &entries {
            let d = &data[e.offset as usize..(e.offset + i64::from(e.length)) as usize];
            assert_eq!(crc32fast::hash(d) as i64, e.crc);
        }

        // Past the end of the file: a status, an empty body, the connection stays usable.
        match conn
            .call(&data_request(app, 0, *p, data_file_len + 100, 10, version))
            .await
        {
            Response::Data { head, data } => {
                assert_eq!(status_of(head.status), StatusCode::InvalidRequest);
                assert!(head.ret_message.is_some());
                assert!(data.is_empty());
            }
            other => panic!("data read answered with {other:?}"),
        }
    }
    let budget = s.running.registry().store().memory().budget().snapshot();
    assert_eq!(budget.reserved, 0, "{budget:?}");
    drop(conn);
    s.running.shutdown().await;
}

/// apache/uniffle#2684 over Netty: a block id resent at the end of a partition's memory data
/// must not make a reader loop. Every client version reads with the type-16 answer (Spillway
/// never sends type 26, which 0.9 and 0.10 cannot decode); it ends when an answer comes back
/// empty, and the repeat is stored once, so the reads end after each block is seen once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_reads_end_over_netty_when_the_last_block_id_repeats() {
    let mut s = start(1, |_| {}).await;
    let addr = s.running.netty_addr.unwrap();
    let app = "netty_repeat";
    register(&mut s.client, app, 0, 0..1, false).await;
    let mut conn = Conn::open(addr).await;
    let blocks: Vec<_> = (0..6).map(|seq| make_block(seq, 0, 1, 100)).collect();
    netty_send(&mut conn, &mut s.client, app, 0, &[(0, blocks.clone())]).await;
    // The last block again, as a retried send delivers it.
    netty_send(
        &mut conn,
        &mut s.client,
        app,
        0,
        &[(0, vec![blocks[5].clone()])],
    )
    .await;
    let mut last = -1;
    let mut seen = Vec::new();
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds < 20, "memory reads never end: {seen:?}");
        let Request::Memory(mut req) = memory_request(app, 0, 0, last) else {
            unreachable!()
        };
        // 250-byte reads of 100-byte blocks: several rounds, the last one at the repeat.
        req.read_buffer_size = 250;
        match conn.call(&Request::Memory(req)).await {
            Response::Memory { head, segments, .. } => {
                assert_eq!(
                    status_of(head.status),
                    StatusCode::Success,
                    "{:?}",
                    head.ret_message
                );
                if segments.is_empty() {
                    break;
                }
                seen.extend(segments.iter().map(|s| s.block_id));
                last = segments.last().unwrap().block_id;
            }
            other => panic!("memory read answered with {other:?}"),
        }
    }
    let want: Vec<i64> = blocks.iter().map(|b| b.block_id).collect();
    assert_eq!(seen, want, "each block once, in order");
    assert_eq!(
        rounds, 3,
        "two reads of three blocks, then the empty answer"
    );
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_close_only_their_connection() {
    let mut s = start(1, |_| {}).await;
    let addr = s.running.netty_addr.unwrap();
    let app = "netty_bad";
    register(&mut s.client, app, 0, 0..1, false).await;
    let mut good = Conn::open(addr).await;
    let blocks = blocks_for(&[0], 1, 100);
    netty_send(&mut good, &mut s.client, app, 0, &blocks).await;

    // Truncated header, then end of stream.
    let mut c = Conn::open(addr).await;
    c.raw().write_all(&header(31, 4, 0)[..5]).await.unwrap();
    c.raw().shutdown().await.unwrap();
    c.expect_closed().await;

    // msgLen over the limit: refused from the header alone, nothing else is sent.
    let mut c = Conn::open(addr).await;
    c.raw().write_all(&header(1 << 30, 3, 0)).await.unwrap();
    c.expect_closed().await;
    let mut c = Conn::open(addr).await;
    c.raw()
        .write_all(&header(i32::MAX, 3, i32::MAX))
        .await
        .unwrap();
    c.expect_closed().await;

    // Negative lengths.
    let mut c = Conn::open(addr).await;
    c.raw().write_all(&header(-1, 3, 0)).await.unwrap();
    c.expect_closed().await;
    let mut c = Conn::open(addr).await;
    c.raw().write_all(&header(4, 4, -4)).await.unwrap();
    c.expect_closed().await;

    // Unknown type ids, and response types a client must not send.
    for ty in [99i8, -1, 0, 1, 14] {
        let mut c = Conn::open(addr).await;
        let mut f = header(4, ty, 0);
        f.put_i32(0);
        c.raw().write_all(&f).await.unwrap();
        c.expect_closed().await;
    }

    // Body shorter than declared, then end of stream.
    let mut c = Conn::open(addr).await;
    let mut f = header(100, 3, 0);
    f.put_bytes(7, 10);
    c.raw().write_all(&f).await.unwrap();
    c.raw().shutdown().await.unwrap();
    c.expect_closed().await;

    // Garbage fields: an appId length running past the message.
    let mut c = Conn::open(addr).await;
    let mut f = header(31, 4, 0);
    f.put_i64(7);
    f.put_i32(1000);
    f.put_bytes(b'a', 19);
    c.raw().write_all(&f).await.unwrap();
    c.expect_closed().await;

    // A send whose blocks overrun the message (data length past the end).
    let req = send_request(app, 0, 1, &blocks);
    let mut f = Request::Send(req).encode();
    let msg_len = (f.len() - HEADER_LEN) as i32;
    f[0..4].copy_from_slice(&(msg_len - 20).to_be_bytes());
    f.truncate(f.len() - 20);
    let mut c = Conn::open(addr).await;
    c.raw().write_all(&f).await.unwrap();
    c.expect_closed().await;

    // A client disconnecting mid-frame.
    let mut c = Conn::open(addr).await;
    let mut f = header(1000, 3, 0);
    f.put_bytes(1, 100);
    c.raw().write_all(&f).await.unwrap();
    drop(c);

    // The connection opened first is unaffected; the accepted data is still readable, over it
    // and over a new connection, and a new send round-trips.
    let want: Vec<(i64, Bytes)> = blocks[0]
        .1
        .iter()
        .map(|b| (b.block_id, b.data.clone()))
        .collect();
    assert_eq!(read_memory(&mut good, app, 0, 0).await, want);
    let mut fresh = Conn::open(addr).await;
    assert_eq!(read_memory(&mut fresh, app, 0, 0).await, want);
    let more = blocks_for(&[0], 2, 50);
    netty_send(&mut fresh, &mut s.client, app, 0, &more).await;
    assert_eq!(read_memory(&mut good, app, 0, 0).await.len(), 6);
    drop((good, fresh));
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_come_back_as_statuses() {
    let mut s = start(1, |_| {}).await;
    let addr = s.running.netty_addr.unwrap();
    let app = "netty_err";
    register(&mut s.client, app, 0, 0..1, false).await;
    let mut conn = Conn::open(addr).await;
    let blocks = blocks_for(&[0], 1, 10);

    let status = |r: Response| match r {
        Response::Rpc(head) => {
            assert!(head.ret_message.is_some());
            status_of(head.status)
        }
        other => panic!("send answered with {other:?}"),
    };
    // Unknown app on send.
    let r = conn
        .call(&Request::Send(send_request("no_such_app", 0, 1, &blocks)))
        .await;
    assert_eq!(status(r), StatusCode::AppNotFound);
    // Unknown ticket.
    let r = conn
        .call(&Request::Send(send_request(app, 0, 123_456, &blocks)))
        .await;
    assert_eq!(status(r), StatusCode::InternalError);
    // A block whose declared length disagrees with its data.
    let mut req = send_request(app, 0, 0, &blocks);
    req.require_buffer_id = require(&mut s.client, &req).await;
    req.partitions[0].1[0].length += 1;
    let r = conn.call(&Request::Send(req)).await;
    assert_eq!(status(r), StatusCode::InvalidRequest);
    // An unregistered app reading: index (type 14) and data (type 15) keep their types.
    match conn
        .call(&Request::Index(IndexRequest {
            request_id: 3,
            app_id: "no_such_app".into(),
            shuffle_id: 0,
            partition_id: 0,
            partition_num_per_range: 1,
            partition_num: 1,
        }))
        .await
    {
        Response::Index {
            head,
            data_file_len,
            index,
        } => {
            assert_eq!(status_of(head.status), StatusCode::NoRegister);
            assert_eq!(data_file_len, 0);
            assert!(index.is_empty());
        }
        other => panic!("index read answered with {other:?}"),
    }
    match conn
        .call(&data_request("no_such_app", 0, 0, 0, 10, DataVersion::V1))
        .await
    {
        Response::Data { head, data } => {
            assert_eq!(status_of(head.status), StatusCode::NoRegister);
            assert!(data.is_empty());
        }
        other => panic!("data read answered with {other:?}"),
    }
    // Memory read of an unknown app: type 16, zero segments.
    match conn.call(&memory_request("no_such_app", 0, 0, -1)).await {
        Response::Memory {
            head,
            segments,
            data,
        } => {
            assert_eq!(status_of(head.status), StatusCode::NoRegister);
            assert!(segments.is_empty() && data.is_empty());
        }
        other => panic!("memory read answered with {other:?}"),
    }
    // The connection survived every error status.
    netty_send(&mut conn, &mut s.client, app, 0, &blocks).await;
    drop(conn);
    s.running.shutdown().await;
}
