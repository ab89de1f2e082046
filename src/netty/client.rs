//! The client side of the Netty data plane: one persistent connection, one request in flight,
//! as the load generator, the benches and the tests use it. Sends go out as one vectored write
//! whose block payloads are the caller's `Bytes` (not copied into a frame buffer), so a client
//! measuring the server spends as little CPU as the protocol allows.

use std::io::IoSlice;
use std::net::SocketAddr;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::frame::{put_string, FrameError, Header, HEADER_LEN};
use super::messages::{ty, Request, Response, SendRequest};

/// One connection to a Netty data-plane port.
pub struct NettyClient {
    addr: SocketAddr,
    stream: TcpStream,
    /// Bytes read past the current frame (a server never sends them unasked, but a read may
    /// return them).
    buffer: BytesMut,
}

impl NettyClient {
    /// Connects with TCP_NODELAY (request/response traffic: Nagle would add 40 ms stalls).
    pub async fn connect(addr: SocketAddr) -> std::io::Result<NettyClient> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(NettyClient {
            addr,
            stream,
            buffer: BytesMut::with_capacity(64 << 10),
        })
    }

    /// The socket, for callers that write raw bytes (tests of malformed frames).
    pub fn stream_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Sends `req` and waits for its response frame.
    pub async fn call(&mut self, req: &Request) -> Result<Response, FrameError> {
        match req {
            Request::Send(send) => self.write_send(send).await?,
            other => self.stream.write_all(&other.encode()).await?,
        }
        self.read_response().await
    }

    /// [`call`](Self::call), reopening the connection when the server closed it before
    /// answering (a few tries, with a short pause): servers close idle connections, and shed
    /// them for newcomers at their connection cap, between requests, as the Java client's
    /// connection factory expects (it reopens inactive connections). A request the server was
    /// handling is never cut off that way, so a retried request was not handled.
    pub async fn call_reconnecting(&mut self, req: &Request) -> Result<Response, FrameError> {
        let mut pause = std::time::Duration::from_millis(10);
        for _ in 0..5 {
            match self.call(req).await {
                Err(e) if closed_before_answer(&e) => {
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                    let fresh = NettyClient::connect(self.addr).await?;
                    *self = fresh;
                }
                other => return other,
            }
        }
        self.call(req).await
    }

    /// Writes a type-3 frame with the payloads as their own slices of one vectored write.
    async fn write_send(&mut self, req: &SendRequest) -> std::io::Result<()> {
        let parts = send_parts(req);
        let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            let n = self.stream.write_vectored(rest).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut rest, n);
        }
        Ok(())
    }

    /// Reads one response frame.
    pub async fn read_response(&mut self) -> Result<Response, FrameError> {
        self.fill(HEADER_LEN).await?;
        let header = Header::parse(&self.buffer[..HEADER_LEN], usize::MAX)?;
        let total = HEADER_LEN + header.payload_len();
        self.fill(total).await?;
        let frame = self.buffer.split_to(total).freeze();
        let msg = frame.slice(HEADER_LEN..HEADER_LEN + header.msg_len);
        let body = frame.slice(HEADER_LEN + header.msg_len..);
        Response::decode(header.ty, msg, body)
    }

    /// Reads until `want` bytes are buffered, reserving them at once so a large body lands in
    /// one allocation.
    async fn fill(&mut self, want: usize) -> Result<(), FrameError> {
        if self.buffer.len() < want {
            self.buffer.reserve(want - self.buffer.len());
        }
        while self.buffer.len() < want {
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                return Err(FrameError::Eof {
                    got: self.buffer.len(),
                    want,
                });
            }
        }
        Ok(())
    }
}

/// Whether `e` means the server closed the connection without answering.
fn closed_before_answer(e: &FrameError) -> bool {
    use std::io::ErrorKind;
    match e {
        FrameError::Eof { got: 0, .. } => true,
        FrameError::Io(io) => matches!(
            io.kind(),
            ErrorKind::ConnectionReset
                | ErrorKind::BrokenPipe
                | ErrorKind::ConnectionAborted
                | ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

/// The message length (`msgLen`) of a type-3 frame: the 0.10 client adds it to the
/// `requireBuffer` size, so a client needs it before it encodes the frame.
pub fn send_message_len(req: &SendRequest) -> usize {
    let string = |s: Option<&str>| 4 + s.map_or(0, str::len);
    let mut n = 8 + string(Some(&req.app_id)) + 4 + 8 + 4;
    for (_, blocks) in &req.partitions {
        n += 4 + 4;
        for b in blocks {
            n += 4 + 8 + 4 + 4 + 8 + 8 + 4 + b.data.len() + 4 + 4 + 8;
            for s in &b.replicas {
                n += string(s.id.as_deref()) + string(s.host.as_deref()) + 4 + 4;
            }
        }
    }
    n + 8
}

/// A type-3 frame as a list of buffers: small encoded runs between the blocks' payloads, which
/// are the request's own `Bytes` (clones of a refcount, not copies).
pub fn send_parts(req: &SendRequest) -> Vec<Bytes> {
    let blocks: usize = req.partitions.iter().map(|(_, b)| b.len()).sum();
    let mut parts = Vec::with_capacity(2 * blocks + 1);
    let mut meta = BytesMut::with_capacity(128);
    meta.put_i32(send_message_len(req) as i32);
    meta.put_i8(ty::SEND);
    meta.put_i32(0);
    meta.put_i64(req.request_id);
    put_string(&mut meta, Some(&req.app_id));
    meta.put_i32(req.shuffle_id);
    meta.put_i64(req.require_buffer_id);
    meta.put_i32(req.partitions.len() as i32);
    for (partition, blocks) in &req.partitions {
        meta.put_i32(*partition);
        meta.put_i32(blocks.len() as i32);
        for k in blocks {
            meta.put_i32(k.partition_id);
            meta.put_i64(k.block_id);
            meta.put_i32(k.length);
            meta.put_i32(k.shuffle_id);
            meta.put_i64(k.crc);
            meta.put_i64(k.task_attempt_id);
            meta.put_i32(k.data.len() as i32);
            if !k.data.is_empty() {
                parts.push(meta.split().freeze());
                parts.push(k.data.clone());
            }
            meta.put_i32(k.replicas.len() as i32);
            for s in &k.replicas {
                put_string(&mut meta, s.id.as_deref());
                put_string(&mut meta, s.host.as_deref());
                meta.put_i32(s.grpc_port);
                meta.put_i32(s.netty_port);
            }
            meta.put_i32(k.uncompress_length);
            meta.put_i64(k.free_memory);
        }
    }
    meta.put_i64(req.timestamp);
    parts.push(meta.freeze());
    parts
}

/// Concatenates [`send_parts`] (tests: must equal [`Request::encode`]).
pub fn send_frame(req: &SendRequest) -> Bytes {
    let parts = send_parts(req);
    let mut out = BytesMut::with_capacity(parts.iter().map(Buf::remaining).sum());
    for p in parts {
        out.put(p);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netty::messages::{Replica, SendBlock};

    #[test]
    fn vectored_send_frame_equals_the_encoded_frame() {
        let block = |id: i64, len: usize| SendBlock {
            partition_id: 1,
            block_id: id,
            length: len as i32,
            shuffle_id: 2,
            crc: 7,
            task_attempt_id: 3,
            data: Bytes::from(vec![id as u8; len]),
            replicas: vec![Replica {
                id: Some("s".into()),
                host: None,
                grpc_port: 1,
                netty_port: 2,
            }],
            uncompress_length: 9,
            free_memory: 0,
        };
        let req = SendRequest {
            request_id: 5,
            app_id: "app".into(),
            shuffle_id: 2,
            require_buffer_id: 11,
            partitions: vec![(1, vec![block(1, 10), block(2, 0)]), (4, vec![block(3, 3)])],
            timestamp: 99,
        };
        let encoded = Request::Send(req.clone()).encode();
        assert_eq!(send_frame(&req), encoded.freeze());
        assert_eq!(send_message_len(&req), send_frame(&req).len() - HEADER_LEN);
    }
}
