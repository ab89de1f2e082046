//! The transport ceiling: a server that speaks both planes but stores nothing. Sends are
//! decoded by the same transports (tonic + prost, or the Netty framing) and dropped with
//! `SUCCESS`; data reads are answered with `length` bytes of the load generator's payload pool
//! (no copy). Whatever
//! the load generator reaches against it is what the transports and the client allow; the
//! share of it Spillway reaches is what storing costs.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

use super::payload::Payloads;
use spillway::netty::messages::{Request as NettyRequest, Response as NettyResponse, ResponseHead};
use spillway::netty::{Header, HEADER_LEN};
use spillway::proto::shuffle_server_server::{ShuffleServer, ShuffleServerServer};
use spillway::proto::{self, StatusCode};

/// Largest read answered (bigger ranges are cut, which the reader reports).
const POOL: usize = 64 << 20;

/// Serves the discard endpoints on both listeners until the process ends.
pub async fn serve(grpc: TcpListener, netty: TcpListener) -> anyhow::Result<()> {
    // The load generator's own pool: its raw reads compare against it, so the ceiling's client
    // does the same checking work as a verified read.
    let pool = Payloads::new(0).prefix(POOL);
    let service = Discard { pool: pool.clone() };
    let router = tonic::transport::Server::builder()
        // The same windows as Spillway's server, so both see the same flow control.
        .initial_stream_window_size(Some(4 << 20))
        .initial_connection_window_size(Some(16 << 20))
        .add_service(
            ShuffleServerServer::new(service)
                .max_decoding_message_size(spillway::protocol::MAX_REQUEST_SIZE)
                .max_encoding_message_size(spillway::protocol::MAX_RESPONSE_SIZE),
        );
    let incoming = TcpIncoming::from(grpc).with_nodelay(Some(true));
    let netty_task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = netty.accept().await else {
                continue;
            };
            let pool = pool.clone();
            tokio::spawn(async move {
                if let Err(e) = netty_conn(stream, pool).await {
                    tracing::debug!(error = %e, "discard Netty connection closed");
                }
            });
        }
    });
    router.serve_with_incoming(incoming).await?;
    netty_task.abort();
    Ok(())
}

/// Binds both listeners on `ip` (port 0 = ephemeral): `(grpc addr, netty addr, listeners)`.
pub async fn bind(
    ip: std::net::IpAddr,
    grpc_port: u16,
    netty_port: u16,
) -> anyhow::Result<(SocketAddr, SocketAddr, TcpListener, TcpListener)> {
    let grpc = TcpListener::bind((ip, grpc_port)).await?;
    let netty = TcpListener::bind((ip, netty_port)).await?;
    Ok((grpc.local_addr()?, netty.local_addr()?, grpc, netty))
}

async fn netty_conn(mut stream: TcpStream, pool: Bytes) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = BytesMut::with_capacity(1 << 20);
    loop {
        while buf.len() < HEADER_LEN {
            if stream.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        let h = Header::parse(&buf[..HEADER_LEN], usize::MAX)?;
        let total = HEADER_LEN + h.payload_len();
        if buf.len() < total {
            buf.reserve(total - buf.len());
        }
        while buf.len() < total {
            if stream.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        let frame = buf.split_to(total).freeze();
        let req = NettyRequest::decode(h.ty, frame.slice(HEADER_LEN..HEADER_LEN + h.msg_len))?;
        let head = ResponseHead {
            request_id: req.request_id(),
            status: StatusCode::Success as i32,
            ret_message: None,
        };
        let resp = match req {
            NettyRequest::Data(r) => NettyResponse::Data {
                head,
                data: pool.slice(..(r.length.max(0) as usize).min(POOL)),
            },
            NettyRequest::Index(_) => NettyResponse::Index {
                head,
                data_file_len: 0,
                index: Bytes::new(),
            },
            NettyRequest::Memory(_) => NettyResponse::Memory {
                head,
                segments: Vec::new(),
                data: Bytes::new(),
            },
            _ => NettyResponse::Rpc(head),
        };
        let mut out = bytes::Buf::chain(resp.encode_head().freeze(), resp.body());
        stream.write_all_buf(&mut out).await?;
    }
}

/// The discard `ShuffleServer`.
struct Discard {
    pool: Bytes,
}

type Rpc<T> = Result<Response<T>, Status>;

/// The impl: `SUCCESS` with an empty message for every method listed, plus the two that need
/// content. A macro emitting the whole impl, because `async_trait` sees methods before macros
/// inside an impl are expanded.
macro_rules! discard_impl {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {
        #[tonic::async_trait]
        impl ShuffleServer for Discard {
            $(
                async fn $name(&self, _request: Request<$req>) -> Rpc<$resp> {
                    Ok(Response::new(<$resp>::default()))
                }
            )*

            async fn require_buffer(
                &self,
                _request: Request<proto::RequireBufferRequest>,
            ) -> Rpc<proto::RequireBufferResponse> {
                Ok(Response::new(proto::RequireBufferResponse {
                    require_buffer_id: 1,
                    ..Default::default()
                }))
            }

            async fn get_local_shuffle_data(
                &self,
                request: Request<proto::GetLocalShuffleDataRequest>,
            ) -> Rpc<proto::GetLocalShuffleDataResponse> {
                let len = (request.get_ref().length.max(0) as usize).min(POOL);
                Ok(Response::new(proto::GetLocalShuffleDataResponse {
                    data: self.pool.slice(..len),
                    ..Default::default()
                }))
            }
        }
    };
}

discard_impl! {
    register_shuffle(proto::ShuffleRegisterRequest) -> proto::ShuffleRegisterResponse;
    unregister_shuffle(proto::ShuffleUnregisterRequest) -> proto::ShuffleUnregisterResponse;
    unregister_shuffle_by_app_id(proto::ShuffleUnregisterByAppIdRequest) -> proto::ShuffleUnregisterByAppIdResponse;
    send_shuffle_data(proto::SendShuffleDataRequest) -> proto::SendShuffleDataResponse;
    get_local_shuffle_index(proto::GetLocalShuffleIndexRequest) -> proto::GetLocalShuffleIndexResponse;
    get_memory_shuffle_data(proto::GetMemoryShuffleDataRequest) -> proto::GetMemoryShuffleDataResponse;
    commit_shuffle_task(proto::ShuffleCommitRequest) -> proto::ShuffleCommitResponse;
    report_shuffle_result(proto::ReportShuffleResultRequest) -> proto::ReportShuffleResultResponse;
    get_shuffle_result(proto::GetShuffleResultRequest) -> proto::GetShuffleResultResponse;
    get_shuffle_result_for_multi_part(proto::GetShuffleResultForMultiPartRequest) -> proto::GetShuffleResultForMultiPartResponse;
    finish_shuffle(proto::FinishShuffleRequest) -> proto::FinishShuffleResponse;
    app_heartbeat(proto::AppHeartBeatRequest) -> proto::AppHeartBeatResponse;
    start_sort_merge(proto::StartSortMergeRequest) -> proto::StartSortMergeResponse;
    get_sorted_shuffle_data(proto::GetSortedShuffleDataRequest) -> proto::GetSortedShuffleDataResponse;
}
