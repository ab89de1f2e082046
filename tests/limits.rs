//! `[limits]` against the real server, on both planes: connection caps that close the
//! longest-idle connection for a newcomer (and turn the newcomer away only when every
//! connection is busy), idle and stall timeouts that give back what a half-sent request held,
//! the gRPC receive budget, per-request caps answered with INVALID_REQUEST, and 10,000
//! concurrent clients per plane through the load generator with every block verified. Every
//! limit that bites must show in `total_limit_hits`.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::{finish, make_block, register, start, status_of, write_shuffle};
use prost::Message;
use spillway::config::ByteSize;
use spillway::netty::client::NettyClient;
use spillway::netty::messages::{
    ty, DataRequest, DataVersion, Request, Response, SendBlock, SendRequest,
};
use spillway::proto;
use spillway::proto::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Guards against hangs only; never a speed claim.
const DEADLINE: Duration = Duration::from_secs(60);

/// How long the table waits before it may close a quiet connection for a newcomer (1 s).
const QUIET: Duration = Duration::from_millis(1200);

/// `total_limit_hits` for `plane`, `limit`, `action` (0 when absent).
async fn hits(http: SocketAddr, plane: &str, limit: &str, action: &str) -> u64 {
    let text = reqwest::get(format!("http://{http}/prometheus/metrics/server"))
        .await
        .expect("HTTP port answers")
        .text()
        .await
        .unwrap();
    let labels = [
        format!("plane=\"{plane}\""),
        format!("limit=\"{limit}\""),
        format!("action=\"{action}\""),
    ];
    text.lines()
        .filter(|l| l.starts_with("total_limit_hits{"))
        .find(|l| labels.iter().all(|p| l.contains(p.as_str())))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Asserts the server closes `stream` (a clean close or a reset) without sending anything.
async fn closed(stream: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(DEADLINE, stream.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => {}
        Ok(Ok(n)) => panic!("{what}: {n} unexpected bytes instead of a close"),
        Err(_) => panic!("{what}: still open after {DEADLINE:?}"),
    }
}

/// Asserts the server closes the raw gRPC connection `stream`, after at most its HTTP/2
/// preface (the server's SETTINGS frame, sent on accept).
async fn grpc_closed(stream: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 256];
    let mut got = 0;
    loop {
        match tokio::time::timeout(DEADLINE, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) if got + n <= 64 => got += n,
            Ok(Ok(n)) => panic!("{what}: {} bytes instead of a close", got + n),
            Err(_) => panic!("{what}: still open after {DEADLINE:?}"),
        }
    }
}

/// Asserts `stream` is still open: nothing to read, no close, for `wait`.
async fn open(stream: &mut TcpStream, what: &str, wait: Duration) {
    let mut buf = [0u8; 64];
    if let Ok(r) = tokio::time::timeout(wait, stream.read(&mut buf)).await {
        panic!("{what}: expected to stay open, read {r:?}");
    }
}

/// A Netty data request of `length` bytes for an app that does not exist: answered with a
/// status, which is all these tests need from a well-formed request.
fn data_request(app: &str, length: i32) -> Request {
    Request::Data(DataRequest {
        version: DataVersion::V1,
        request_id: 7,
        app_id: app.into(),
        shuffle_id: 0,
        partition_id: 0,
        partition_num_per_range: 1,
        partition_num: 1,
        offset: 0,
        length,
        timestamp: 0,
        storage_id: -1,
        next_segments: vec![],
        task_attempt_id: 0,
    })
}

fn send_request(app: &str, blocks: usize, len: usize) -> SendRequest {
    SendRequest {
        request_id: 9,
        app_id: app.into(),
        shuffle_id: 0,
        require_buffer_id: 1,
        partitions: vec![(
            0,
            (0..blocks)
                .map(|i| {
                    let b = make_block(i as i64, 0, 1, len);
                    SendBlock {
                        partition_id: 0,
                        block_id: b.block_id,
                        length: b.length,
                        shuffle_id: 0,
                        crc: b.crc,
                        task_attempt_id: 1,
                        data: b.data,
                        replicas: vec![],
                        uncompress_length: b.uncompress_length,
                        free_memory: 0,
                    }
                })
                .collect(),
        )],
        timestamp: 0,
    }
}

/// The status and message of a Netty RPC answer.
fn rpc_status(r: Response) -> (StatusCode, String) {
    match r {
        Response::Rpc(h) | Response::Data { head: h, .. } => {
            (status_of(h.status), h.ret_message.unwrap_or_default())
        }
        other => panic!("unexpected answer {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netty_cap_sheds_the_longest_idle_and_turns_newcomers_away_only_when_all_are_busy() {
    let s = start(1, |c| {
        c.limits.max_connections = 3;
        c.limits.stall_timeout = Duration::from_secs(2);
    })
    .await;
    let addr = s.running.netty_addr.unwrap();
    let http = s.running.http_addr;
    let mut a = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut b = TcpStream::connect(addr).await.unwrap();
    let mut c = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(QUIET).await;

    // At the cap: the newcomer is served, the connection idle longest (a) is closed.
    let mut d = NettyClient::connect(addr).await.unwrap();
    let (status, _) = rpc_status(d.call(&data_request("nobody", 16)).await.unwrap());
    assert_eq!(status, StatusCode::NoRegister, "no such app");
    closed(&mut a, "a, idle longest").await;
    open(&mut b, "b", Duration::from_millis(200)).await;
    assert_eq!(hits(http, "netty", "max_connections", "shed").await, 1);

    // b, c and d start frames (3 of the 9 header bytes) and stop: all busy, so a newcomer is
    // closed at once instead of waiting unseen in the kernel's queue.
    for stream in [&mut b, &mut c, d.stream_mut()] {
        stream.write_all(&[0, 0, 0]).await.unwrap();
    }
    tokio::time::sleep(QUIET).await;
    let mut e = TcpStream::connect(addr).await.unwrap();
    closed(&mut e, "e, newcomer while all are busy").await;
    assert_eq!(hits(http, "netty", "max_connections", "refused").await, 1);

    // Half-sent headers are cut off after the stall timeout.
    closed(&mut b, "b, stalled").await;
    closed(&mut c, "c, stalled").await;
    closed(d.stream_mut(), "d, stalled").await;
    assert_eq!(hits(http, "netty", "stall_timeout", "closed").await, 3);
    // And the plane serves again.
    let mut f = NettyClient::connect(addr).await.unwrap();
    let (status, _) = rpc_status(f.call(&data_request("nobody", 16)).await.unwrap());
    assert_eq!(status, StatusCode::NoRegister, "no such app");
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netty_half_sent_frame_gives_its_receive_budget_back() {
    let s = start(1, |c| {
        c.limits.receive_budget = ByteSize(1 << 20);
        c.limits.stall_timeout = Duration::from_secs(1);
    })
    .await;
    let addr = s.running.netty_addr.unwrap();
    // a declares a 700 KiB frame, sends 100 KiB of it and stops: it holds 700 KiB of the
    // 1 MiB budget.
    let mut a = TcpStream::connect(addr).await.unwrap();
    let mut frame = BytesMut::new();
    frame.put_i32(700 << 10);
    frame.put_i8(ty::SEND);
    frame.put_i32(0);
    frame.put_bytes(0, 100 << 10);
    a.write_all(&frame).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // b's 600 KiB send waits for that budget, and gets it when a is cut off.
    let mut b = NettyClient::connect(addr).await.unwrap();
    let answer = tokio::time::timeout(
        DEADLINE,
        b.call(&Request::Send(send_request("nobody", 1, 600 << 10))),
    )
    .await
    .expect("the stalled frame's budget comes back")
    .unwrap();
    let (status, _) = rpc_status(answer);
    // A send names its app's missing state, as Java's does.
    assert_eq!(status, StatusCode::AppNotFound, "no such app");
    closed(&mut a, "a, stalled inside its body").await;
    assert_eq!(
        hits(s.running.http_addr, "netty", "stall_timeout", "closed").await,
        1
    );
    s.running.shutdown().await;
}

/// Local data goes out by sendfile on a blocking thread. A reader that asks for a large range
/// and stops reading must still be cut off by the stall timeout (the send cannot hold its
/// thread and the connection for ever), and the same range must then read back whole and
/// intact on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netty_reader_that_stops_reading_a_file_range_is_cut_off() {
    let mut s = start(1, |c| {
        c.limits.stall_timeout = Duration::from_secs(1);
    })
    .await;
    let app = "stalled_reader";
    register(&mut s.client, app, 0, 0..1, false).await;
    // 48 MiB in one partition, all of it spilled: far more than the loopback socket buffers.
    let expected = write_shuffle(&mut s.client, app, 0, 1, 1, 48, 1 << 20).await;
    finish(&mut s.client, app, 0).await;
    let want: Vec<u8> = expected[&0]
        .values()
        .flat_map(|b| b.iter().copied())
        .collect();
    let read = |version| {
        let mut r = data_request(app, want.len() as i32);
        if let Request::Data(d) = &mut r {
            d.version = version;
        }
        r
    };

    let addr = s.running.netty_addr.unwrap();
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    stalled
        .write_all(&read(DataVersion::V1).encode())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while hits(s.running.http_addr, "netty", "stall_timeout", "closed").await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a reader that stopped reading was never cut off"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut reader = NettyClient::connect(addr).await.unwrap();
    for version in [DataVersion::V1, DataVersion::V3] {
        match tokio::time::timeout(DEADLINE, reader.call(&read(version)))
            .await
            .expect("the read is answered")
            .unwrap()
        {
            Response::Data { head, data } => {
                assert_eq!(status_of(head.status), StatusCode::Success, "{head:?}");
                assert!(
                    data[..] == want[..],
                    "{version:?}: bytes differ from those written"
                );
            }
            other => panic!("data read answered with {other:?}"),
        }
    }
    drop(stalled);
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_close_on_both_planes_and_clients_come_back() {
    let s = start(1, |c| {
        c.limits.idle_timeout = Duration::from_secs(1);
    })
    .await;
    let http = s.running.http_addr;
    let mut netty = NettyClient::connect(s.running.netty_addr.unwrap())
        .await
        .unwrap();
    let mut grpc_raw = TcpStream::connect(s.running.grpc_addr).await.unwrap();
    closed(netty.stream_mut(), "idle Netty connection").await;
    grpc_closed(&mut grpc_raw, "idle gRPC connection").await;
    assert!(hits(http, "netty", "idle_timeout", "closed").await >= 1);
    assert!(hits(http, "grpc", "idle_timeout", "closed").await >= 1);
    // The Netty client reopens its connection on the next request.
    let (status, _) = rpc_status(
        netty
            .call_reconnecting(&data_request("nobody", 16))
            .await
            .unwrap(),
    );
    assert_eq!(status, StatusCode::NoRegister, "no such app");
    // A fresh gRPC client is served.
    let mut client = common::connect(s.running.grpc_addr).await;
    register(&mut client, "app-idle", 0, 0..1, false).await;
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_cap_sheds_the_longest_idle() {
    let s = start(1, |c| {
        c.limits.max_connections = 3;
    })
    .await;
    let grpc = s.running.grpc_addr;
    let http = s.running.http_addr;
    // The test client's connection (1) and two raw connections that never speak (2, 3).
    let mut client = s.client.clone();
    let mut r1 = TcpStream::connect(grpc).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut r2 = TcpStream::connect(grpc).await.unwrap();
    tokio::time::sleep(QUIET).await;
    register(&mut client, "app-cap", 0, 0..1, false).await;
    // A fourth connection takes r1's place; the busy client and the younger r2 stay.
    let mut fresh = common::connect(grpc).await;
    register(&mut fresh, "app-cap", 1, 0..1, false).await;
    grpc_closed(&mut r1, "r1, idle longest").await;
    // r2 got the server's SETTINGS frame on accept and nothing else: no close.
    let mut preface = [0u8; 256];
    let n = r2.read(&mut preface).await.unwrap();
    assert!(n > 0, "r2 closed");
    open(&mut r2, "r2", Duration::from_millis(200)).await;
    register(&mut client, "app-cap", 2, 0..1, false).await;
    assert_eq!(hits(http, "grpc", "max_connections", "shed").await, 1);
    s.running.shutdown().await;
}

/// A raw HTTP/2 client for what tonic clients never send: half a request, or more than the
/// budget at once.
async fn h2_client(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::Builder::new()
        .initial_window_size(16 << 20)
        .initial_connection_window_size(64 << 20)
        .handshake(tcp)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// Starts a unary `sendShuffleData` call whose gRPC message claims `claimed` bytes, sends
/// `payload` of it (`end`: and ends the stream).
async fn h2_send(
    client: &mut h2::client::SendRequest<Bytes>,
    claimed: usize,
    payload: Bytes,
    end: bool,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    h2_call(client, "sendShuffleData", claimed, payload, end).await
}

/// [`h2_send`] for any `ShuffleServer` method.
async fn h2_call(
    client: &mut h2::client::SendRequest<Bytes>,
    method: &str,
    claimed: usize,
    payload: Bytes,
    end: bool,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let request = http::Request::post(format!("/rss.common.ShuffleServer/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut ready = client.clone().ready().await.unwrap();
    let (response, mut stream) = ready.send_request(request, false).unwrap();
    let mut body = BytesMut::with_capacity(5 + payload.len());
    body.put_u8(0);
    body.put_u32(claimed as u32);
    body.extend_from_slice(&payload);
    stream.reserve_capacity(body.len());
    stream.send_data(body.freeze(), end).unwrap();
    *client = ready;
    (response, stream)
}

/// The `grpc-status` and `grpc-message` of an answer (trailers-only or after the body).
async fn grpc_status(response: h2::client::ResponseFuture) -> (String, String) {
    let response = tokio::time::timeout(DEADLINE, response)
        .await
        .expect("an answer")
        .expect("an HTTP/2 response");
    let header =
        |h: &http::HeaderMap, k: &str| h.get(k).map(|v| v.to_str().unwrap_or_default().to_owned());
    if let Some(status) = header(response.headers(), "grpc-status") {
        let message = header(response.headers(), "grpc-message").unwrap_or_default();
        return (status, message);
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await.unwrap().unwrap_or_default();
    (
        header(&trailers, "grpc-status").unwrap_or_default(),
        header(&trailers, "grpc-message").unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_stalled_body_and_exhausted_budget_are_refused_and_give_memory_back() {
    let s = start(1, |c| {
        c.memory_store.capacity = ByteSize(1 << 20);
        c.limits.receive_budget = ByteSize(1 << 20);
        c.limits.stall_timeout = Duration::from_secs(2);
    })
    .await;
    let grpc = s.running.grpc_addr;
    let http = s.running.http_addr;
    // The gRPC budget is receive_budget + write capacity = 2 MiB. a holds 1.5 MiB of a
    // 1.9 MiB message and stops.
    let mut a = h2_client(grpc).await;
    let (a_response, _a_stream) = h2_send(
        &mut a,
        1900 << 10,
        Bytes::from(vec![0u8; 1536 << 10]),
        false,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // b's 1 MiB does not fit beside it: refused at once, not parked.
    let mut b = h2_client(grpc).await;
    let (b_response, _b_stream) =
        h2_send(&mut b, 1 << 20, Bytes::from(vec![0u8; 1 << 20]), true).await;
    let (status, message) = grpc_status(b_response).await;
    assert_eq!(status, "8", "RESOURCE_EXHAUSTED: {message}");
    assert!(message.contains("receive_budget"), "{message}");
    // a is dropped after the stall timeout, with a status naming the limit.
    let (status, message) = grpc_status(a_response).await;
    assert_ne!(status, "0", "{message}");
    assert!(message.contains("stall"), "{message}");
    assert_eq!(hits(http, "grpc", "receive_budget", "refused").await, 1);
    assert_eq!(hits(http, "grpc", "stall_timeout", "refused").await, 1);
    // The budget is whole again: a real 1.5 MiB send reaches the handler (and is answered
    // with the app's status, not a transport error).
    let request = proto::SendShuffleDataRequest {
        app_id: "nobody".into(),
        shuffle_id: 0,
        require_buffer_id: 1,
        shuffle_data: vec![proto::ShuffleData {
            partition_id: 0,
            block: vec![make_block(0, 0, 1, 1536 << 10)],
        }],
        ..Default::default()
    };
    let encoded = Bytes::from(request.encode_to_vec());
    let mut c = h2_client(grpc).await;
    let (c_response, _c_stream) = h2_send(&mut c, encoded.len(), encoded, true).await;
    let (status, message) = grpc_status(c_response).await;
    assert_eq!(status, "0", "{message}");
    s.running.shutdown().await;
}

/// The two data reads are decoded by Spillway itself (`grpc/framed.rs`), not by tonic: a
/// malformed request gets a gRPC error status, as tonic would answer, and the server goes on
/// serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_data_requests_get_an_error_status() {
    let mut s = start(1, |_| {}).await;
    let grpc = s.running.grpc_addr;
    // All three are decoded by the server's own framing (not tonic's codec).
    for method in [
        "getLocalShuffleData",
        "getMemoryShuffleData",
        "sendShuffleData",
    ] {
        let mut h = h2_client(grpc).await;
        // The prefix claims 10 bytes, the stream ends after 3.
        let (r, _s) = h2_call(&mut h, method, 10, Bytes::from_static(&[1, 2, 3]), true).await;
        let (status, message) = grpc_status(r).await;
        assert_eq!(status, "13", "{method} truncated: {message}");
        // Not protobuf.
        let (r, _s) = h2_call(&mut h, method, 3, Bytes::from_static(&[0xff; 3]), true).await;
        let (status, message) = grpc_status(r).await;
        assert_eq!(status, "13", "{method} garbage: {message}");
        assert!(message.contains("decode"), "{message}");
        // A well-formed request for an unknown app: a Uniffle status inside a gRPC success.
        let (r, _s) = h2_call(&mut h, method, 0, Bytes::new(), true).await;
        let (status, message) = grpc_status(r).await;
        assert_eq!(status, "0", "{method} empty request: {message}");
    }
    // Still serving through tonic's client.
    common::register(&mut s.client, "app-after-malformed", 0, 0..1, false).await;
    s.running.shutdown().await;
}

/// `limits.max_request_size` (Java's `rss.rpc.message.max.size`): a gRPC message over it is
/// refused as gRPC refuses an oversized message, before it is read; smaller ones pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_messages_over_max_request_size_are_refused() {
    let mut s = start(1, |c| c.limits.max_request_size = ByteSize(64 << 10)).await;
    register(&mut s.client, "app-big", 0, 0..1, false).await;
    let send = |len: usize| proto::SendShuffleDataRequest {
        app_id: "app-big".into(),
        shuffle_id: 0,
        require_buffer_id: 0,
        shuffle_data: vec![proto::ShuffleData {
            partition_id: 0,
            block: vec![make_block(0, 0, 1, len)],
        }],
        ..Default::default()
    };
    let err = s
        .client
        .send_shuffle_data(send(100 << 10))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::OutOfRange, "{err:?}");
    assert!(err.message().contains("too large"), "{}", err.message());
    // The server is unharmed and a message under the limit goes through.
    common::send(
        &mut s.client,
        "app-big",
        0,
        vec![(0, vec![make_block(1, 0, 1, 16 << 10)])],
    )
    .await;
    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_request_caps_answer_invalid_request_on_both_planes() {
    let mut s = start(1, |c| {
        c.limits.max_blocks_per_request = 4;
        c.limits.max_partitions_per_request = 3;
        c.limits.max_string_length = ByteSize(64);
        c.limits.max_response_size = ByteSize(1024);
    })
    .await;
    let http = s.running.http_addr;
    let c = &mut s.client;
    let registration = |ranges: i32, user: &str| proto::ShuffleRegisterRequest {
        app_id: "app-caps".into(),
        shuffle_id: 0,
        partition_ranges: (0..ranges)
            .map(|p| proto::ShufflePartitionRange { start: p, end: p })
            .collect(),
        user: user.into(),
        ..Default::default()
    };
    let r = c
        .register_shuffle(registration(4, "u"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::InvalidRequest);
    assert!(
        r.ret_msg.contains("limits.max_partitions_per_request"),
        "{}",
        r.ret_msg
    );
    let r = c
        .register_shuffle(registration(1, &"u".repeat(65)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::InvalidRequest);
    assert!(
        r.ret_msg.contains("limits.max_string_length"),
        "{}",
        r.ret_msg
    );
    register(c, "app-caps", 0, 0..1, false).await;

    // Five blocks in one send, over gRPC and over Netty.
    let r = c
        .send_shuffle_data(proto::SendShuffleDataRequest {
            app_id: "app-caps".into(),
            shuffle_id: 0,
            require_buffer_id: 1,
            shuffle_data: vec![proto::ShuffleData {
                partition_id: 0,
                block: (0..5).map(|i| make_block(i, 0, 1, 8)).collect(),
            }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::InvalidRequest);
    assert!(
        r.ret_msg.contains("limits.max_blocks_per_request"),
        "{}",
        r.ret_msg
    );
    let mut netty = NettyClient::connect(s.running.netty_addr.unwrap())
        .await
        .unwrap();
    let (status, message) = rpc_status(
        netty
            .call(&Request::Send(send_request("app-caps", 5, 8)))
            .await
            .unwrap(),
    );
    assert_eq!(status, StatusCode::InvalidRequest);
    assert!(
        message.contains("limits.max_blocks_per_request"),
        "{message}"
    );

    // A read asking for more than max_response_size.
    let (status, message) = rpc_status(netty.call(&data_request("app-caps", 2048)).await.unwrap());
    assert_eq!(status, StatusCode::InvalidRequest);
    assert!(message.contains("limits.max_response_size"), "{message}");
    let r = c
        .get_local_shuffle_data(proto::GetLocalShuffleDataRequest {
            app_id: "app-caps".into(),
            shuffle_id: 0,
            partition_id: 0,
            partition_num_per_range: 1,
            partition_num: 1,
            offset: 0,
            length: 2048,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::InvalidRequest);

    assert_eq!(
        hits(http, "grpc", "max_partitions_per_request", "refused").await,
        1
    );
    assert_eq!(hits(http, "grpc", "max_string_length", "refused").await, 1);
    assert_eq!(
        hits(http, "grpc", "max_blocks_per_request", "refused").await,
        1
    );
    assert_eq!(
        hits(http, "netty", "max_blocks_per_request", "refused").await,
        1
    );
    assert_eq!(hits(http, "netty", "max_response_size", "refused").await, 1);
    assert_eq!(hits(http, "grpc", "max_response_size", "refused").await, 1);
    // Nothing above hurt the app: a proper send still works.
    common::send(c, "app-caps", 0, vec![(0, vec![make_block(9, 0, 1, 8)])]).await;
    s.running.shutdown().await;
}

const SERVER: &str = env!("CARGO_BIN_EXE_spillway");

/// The load generator: the workspace's tools package, built into the same directory as the
/// server (`cargo test --workspace`, or `cargo build` first).
fn bench_bin() -> std::path::PathBuf {
    let bin = std::path::Path::new(SERVER).with_file_name("spillway-bench");
    assert!(
        bin.exists(),
        "no load generator at {} (run `cargo test --workspace`, or `cargo build --bin spillway-bench` first)",
        bin.display()
    );
    bin
}

/// 10,000 map tasks writing at once, each on its own connection, through the load generator
/// against a real `spillway` process: every block must verify, and the server's peak RSS must
/// stay under what its budgets allow (write capacity, read capacity, receive budget, all at
/// their defaults but the 64 MiB capacity) plus `per_connection` bytes for each connection.
fn ten_thousand_clients(transport: &str, per_connection: u64) {
    let dir = tempfile::TempDir::new().unwrap();
    let mut args = vec![
        "run",
        "--transport",
        transport,
        "--maps",
        "10000",
        "--concurrency",
        "10000",
        "--partitions",
        "8",
        "--block-size",
        "4K",
        "--total",
        "320M",
        "--capacity",
        "64M",
        "--no-ceilings",
    ];
    if transport == "grpc" {
        // One HTTP/2 connection per map task, as 10,000 executors would hold.
        args.extend(["--grpc-connections", "10000"]);
    }
    let out = common::output_within(
        std::process::Command::new(bench_bin())
            .args(&args)
            .args(["--server-bin", SERVER])
            .arg("--data-dir")
            .arg(dir.path())
            .stdin(std::process::Stdio::null()),
        Duration::from_secs(900),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{transport}:\n{text}");
    assert!(
        text.contains("verification: 80000 blocks checked") && text.contains(": OK"),
        "{text}"
    );
    let peak_mib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("server peak RSS "))
        .and_then(|l| l.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS line:\n{text}"));
    let limits = spillway::config::LimitsConfig::default();
    let memory = spillway::config::MemoryStoreConfig::default();
    let bound = (64 << 20)
        + memory.read_capacity.as_u64()
        + limits.receive_budget.as_u64()
        + 10_000 * per_connection;
    assert!(
        peak_mib << 20 <= bound,
        "{transport}: peak RSS {peak_mib} MiB above {} MiB:\n{text}",
        bound >> 20
    );
}

#[test]
fn ten_thousand_netty_clients_are_all_served_within_the_memory_bound() {
    ten_thousand_clients("netty", 8 << 10);
}

#[test]
fn ten_thousand_grpc_clients_are_all_served_within_the_memory_bound() {
    // An HTTP/2 connection costs the server about 30 KiB (codec buffers, HPACK tables).
    ten_thousand_clients("grpc", 48 << 10);
}
