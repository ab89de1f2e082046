//! Three methods answered in front of tonic's generated service: the two data reads
//! (`getMemoryShuffleData`, `getLocalShuffleData`) and `sendShuffleData`.
//!
//! Reads: tonic's codec encodes a response into one buffer, so a protobuf `bytes` field is
//! copied there, and a memory read would first be concatenated into that field: two
//! user-space copies of every byte read. Here the response is framed by hand: the gRPC prefix
//! and the message's other fields are encoded (by prost) into small buffers, and the payloads
//! travel as the `Bytes` the tiers hold (memory buffers, or the buffer a file range was read
//! into), which h2 writes as they are; payloads under 16 KiB are gathered into shared frames,
//! since h2 spends a write syscall per large frame. The bytes on the wire are exactly what
//! prost would encode for the whole message (fields in number order), so any protobuf reader
//! sees no difference; a test checks that byte for byte.
//!
//! Sends: requests are decoded from the received frames ([`Frames`]), each payload copied once
//! into one allocation per partition, where tonic would join the frames and the memory tier
//! would then compact the payloads out of the joined buffer.
//!
//! Requests that are not plain gRPC (a `grpc-encoding` other than identity, a non-gRPC
//! content type) and every other method go to tonic's generated service unchanged.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue};
use http_body::{Body as HttpBody, Frame};
use prost::Message;
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

use super::answer::{DataAnswer, DataMessage};
use super::frames::{self, Frames};
use super::ShuffleService;
use crate::memory::ReadPermit;
use crate::proto::shuffle_server_server::ShuffleServerServer;
use crate::protocol::MAX_RESPONSE_SIZE;
use crate::store::Payloads;

const MEMORY_PATH: &str = "/rss.common.ShuffleServer/getMemoryShuffleData";
const LOCAL_PATH: &str = "/rss.common.ShuffleServer/getLocalShuffleData";
const SEND_PATH: &str = "/rss.common.ShuffleServer/sendShuffleData";

impl ShuffleService {
    /// The service's routes with the message-size limits: `max_request` is the smaller of
    /// `limits.max_request_size` and the plane's receive budget.
    pub fn into_server(self, max_request: usize) -> ShuffleRoutes {
        let max_response = self.limits.response.min(MAX_RESPONSE_SIZE);
        let tonic = ShuffleServerServer::new(self.clone())
            .max_decoding_message_size(max_request)
            .max_encoding_message_size(max_response);
        ShuffleRoutes::new(self, tonic, max_request, max_response)
    }
}

/// The `ShuffleServer` routes: the two data reads framed here, everything else by tonic.
#[derive(Clone)]
pub struct ShuffleRoutes {
    service: ShuffleService,
    tonic: ShuffleServerServer<ShuffleService>,
    max_request: usize,
    max_response: usize,
}

impl ShuffleRoutes {
    pub(crate) fn new(
        service: ShuffleService,
        tonic: ShuffleServerServer<ShuffleService>,
        max_request: usize,
        max_response: usize,
    ) -> Self {
        ShuffleRoutes {
            service,
            tonic,
            max_request,
            max_response,
        }
    }
}

impl NamedService for ShuffleRoutes {
    const NAME: &'static str = <ShuffleServerServer<ShuffleService> as NamedService>::NAME;
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

impl tower_service::Service<http::Request<Body>> for ShuffleRoutes {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        tower_service::Service::<http::Request<Body>>::poll_ready(&mut self.tonic, cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> BoxFuture {
        let path = req.uri().path();
        let route = match path {
            MEMORY_PATH => Route::Memory,
            LOCAL_PATH => Route::Local,
            SEND_PATH => Route::Send,
            _ => return Box::pin(self.tonic.call(req)),
        };
        if !plain_grpc(req.headers()) {
            return Box::pin(self.tonic.call(req));
        }
        let service = self.service.clone();
        let (max_request, max_response) = (self.max_request, self.max_response);
        Box::pin(async move {
            let response = match route {
                Route::Memory => match decode(req, max_request).await {
                    Ok(req) => service.memory_data(req).await,
                    Err(status) => Err(status),
                }
                .map(|r| respond(r, max_response)),
                Route::Local => match decode(req, max_request).await {
                    Ok(req) => service.local_data(req).await,
                    Err(status) => Err(status),
                }
                .map(|r| respond(r, max_response)),
                // Payloads decoded from the frames are in one allocation per partition
                // already, with nothing to compact.
                Route::Send => match decode_with(req, max_request, frames::decode_send).await {
                    Ok(req) => service.send_data(req, Payloads::Owned).await,
                    Err(status) => Err(status),
                }
                .map(respond_message),
            };
            Ok(response.unwrap_or_else(Status::into_http))
        })
    }
}

/// The methods answered here.
#[derive(Clone, Copy)]
enum Route {
    Memory,
    Local,
    Send,
}

/// True for a request tonic would decode with no decompression.
fn plain_grpc(headers: &HeaderMap) -> bool {
    let grpc = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    let identity = headers
        .get("grpc-encoding")
        .is_none_or(|v| v.as_bytes() == b"identity");
    grpc && identity
}

/// The unary request message, read by prost from the frames as received (see [`Frames`]).
async fn decode<T: Message + Default>(
    req: http::Request<Body>,
    max_request: usize,
) -> Result<Request<T>, Status> {
    decode_with(req, max_request, T::decode).await
}

/// [`decode`] with a decoder of its own (a send's, [`frames::decode_send`]).
async fn decode_with<T, E: std::fmt::Display>(
    req: http::Request<Body>,
    max_request: usize,
    decoder: fn(Frames) -> Result<T, E>,
) -> Result<Request<T>, Status> {
    let (parts, body) = req.into_parts();
    let mut frames = Frames::collect(body, max_request).await?;
    frames.unframe()?;
    let message =
        decoder(frames).map_err(|e| Status::internal(format!("failed to decode request: {e}")))?;
    Ok(Request::from_parts(
        MetadataMap::from_headers(parts.headers),
        parts.extensions,
        message,
    ))
}

/// A data read's answer, its payloads as frames of their own.
fn respond<M: DataMessage>(
    response: Response<DataAnswer<M>>,
    max_response: usize,
) -> http::Response<Body> {
    let (metadata, answer, _) = response.into_parts();
    match answer.into_frames(max_response) {
        Ok((frames, permit)) => framed_response(metadata, frames, permit),
        // What tonic's encoder answers for a message over `max_encoding_message_size`.
        Err(total) => Status::out_of_range(format!(
            "Error, encoded message length too large: found {total} bytes, the limit is: {max_response} bytes"
        ))
        .into_http(),
    }
}

/// A small answer (status and message), encoded whole.
fn respond_message<M: Message>(response: Response<M>) -> http::Response<Body> {
    let (metadata, message, _) = response.into_parts();
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(5 + len);
    buf.put_u8(0); // not compressed
    buf.put_u32(len as u32);
    message.encode_raw(&mut buf);
    framed_response(metadata, VecDeque::from([buf.freeze()]), None)
}

fn framed_response(
    metadata: MetadataMap,
    frames: VecDeque<Bytes>,
    permit: Option<ReadPermit>,
) -> http::Response<Body> {
    let mut head = http::Response::new(Body::new(FramedBody {
        frames,
        trailers: Some(ok_trailers()),
        _permit: permit,
    }));
    let headers = head.headers_mut();
    *headers = metadata.into_headers();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    head
}

fn ok_trailers() -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(1);
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    trailers
}

/// The response body: the frames in order, then the `grpc-status` trailer. Holds the read
/// memory until hyper has taken the last frame and dropped the body.
struct FramedBody {
    frames: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
    _permit: Option<ReadPermit>,
}

impl HttpBody for FramedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(data) = self.frames.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty() && self.trailers.is_none()
    }

    // No exact size hint: hyper would turn it into a `content-length` header, which tonic's
    // streamed bodies never carry; the answer should look like tonic's at the HTTP level too.
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;
    use crate::grpc::answer::COALESCE_BELOW;
    use crate::proto;

    async fn body_bytes(frames: VecDeque<Bytes>) -> Vec<u8> {
        let mut body = FramedBody {
            frames,
            trailers: Some(ok_trailers()),
            _permit: None,
        };
        let mut out = Vec::new();
        let mut trailers = None;
        while let Some(frame) = body.frame().await {
            match frame.unwrap().into_data() {
                Ok(d) => out.extend_from_slice(&d),
                Err(f) => trailers = f.into_trailers().ok(),
            }
        }
        assert_eq!(trailers.unwrap()["grpc-status"], "0");
        out
    }

    fn grpc_message(m: &impl Message) -> Vec<u8> {
        let encoded = m.encode_to_vec();
        let mut out = vec![0u8];
        out.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
        out.extend_from_slice(&encoded);
        out
    }

    fn segments(n: usize) -> Vec<proto::ShuffleDataBlockSegment> {
        (0..n)
            .map(|i| proto::ShuffleDataBlockSegment {
                block_id: i as i64 + 1,
                offset: i as i64 * 100,
                length: 100,
                uncompress_length: 300,
                crc: 7,
                task_attempt_id: 3,
            })
            .collect()
    }

    /// The framed encoding is byte for byte what prost encodes for the whole message, for
    /// empty, one-chunk and many-chunk data (lengths around the varint boundaries), with and
    /// without an error message.
    #[tokio::test]
    async fn frames_are_the_prost_encoding_of_the_whole_message() {
        for sizes in [
            vec![],
            vec![0],
            vec![1],
            vec![127],
            vec![128],
            vec![100, 27, 0, 1],
            vec![16_383, 1],
            vec![70_000, 5, 1 << 20],
        ] {
            let data: Vec<Bytes> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| Bytes::from(vec![i as u8 + 1; n]))
                .collect();
            for ret_msg in ["OK", ""] {
                let memory = proto::GetMemoryShuffleDataResponse {
                    shuffle_data_block_segments: segments(sizes.len()),
                    status: if ret_msg.is_empty() { 0 } else { 3 },
                    ret_msg: ret_msg.into(),
                    // Field 5 follows the data like status and retMsg.
                    is_end: Some(ret_msg.is_empty()),
                    ..Default::default()
                };
                let answer = DataAnswer {
                    message: memory.clone(),
                    data: data.clone(),
                    permit: None,
                };
                let whole = DataAnswer {
                    message: memory.clone(),
                    data: data.clone(),
                    permit: None,
                }
                .into_message();
                let (frames, _) = answer.into_frames(usize::MAX).unwrap();
                let bytes = body_bytes(frames).await;
                assert_eq!(bytes, grpc_message(&whole), "memory {sizes:?} {ret_msg:?}");

                let local = proto::GetLocalShuffleDataResponse {
                    status: if ret_msg.is_empty() { 0 } else { 3 },
                    ret_msg: ret_msg.into(),
                    ..Default::default()
                };
                let whole = DataAnswer {
                    message: local.clone(),
                    data: data.clone(),
                    permit: None,
                }
                .into_message();
                let (frames, _) = DataAnswer {
                    message: local,
                    data: data.clone(),
                    permit: None,
                }
                .into_frames(usize::MAX)
                .unwrap();
                let bytes = body_bytes(frames).await;
                assert_eq!(bytes, grpc_message(&whole), "local {sizes:?} {ret_msg:?}");
                let decoded = proto::GetLocalShuffleDataResponse::decode(&bytes[5..]).unwrap();
                assert_eq!(decoded.data.len(), sizes.iter().sum::<usize>());
            }
        }
    }

    /// Large payloads reach the body as the same allocations (no copy); small ones are
    /// gathered into frames of at least `COALESCE_BELOW` bytes (but the last).
    #[tokio::test]
    async fn large_payloads_are_not_copied_small_ones_are_gathered() {
        let large = Bytes::from(vec![9u8; COALESCE_BELOW]);
        let small: Vec<Bytes> = (0..40).map(|i| Bytes::from(vec![i as u8; 1000])).collect();
        let mut data = small.clone();
        data.push(large.clone());
        data.extend(small.iter().cloned());
        let (frames, _) = DataAnswer {
            message: proto::GetLocalShuffleDataResponse::default(),
            data,
            permit: None,
        }
        .into_frames(usize::MAX)
        .unwrap();
        assert!(frames.iter().any(|f| f.as_ptr() == large.as_ptr()));
        assert!(frames
            .iter()
            .all(|f| small.iter().all(|s| f.as_ptr() != s.as_ptr())));
        let short = frames.iter().filter(|f| f.len() < COALESCE_BELOW).count();
        assert!(
            short <= 2,
            "only the frames before the large payload and at the end are short"
        );
        assert!(frames.len() <= 7, "{} frames for 81 payloads", frames.len());
    }

    #[test]
    fn only_plain_grpc_is_framed_here() {
        let mut h = HeaderMap::new();
        assert!(!plain_grpc(&h));
        h.insert("content-type", HeaderValue::from_static("application/grpc"));
        assert!(plain_grpc(&h));
        h.insert("grpc-encoding", HeaderValue::from_static("identity"));
        assert!(plain_grpc(&h));
        h.insert("grpc-encoding", HeaderValue::from_static("gzip"));
        assert!(!plain_grpc(&h));
    }
}
