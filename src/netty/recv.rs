//! Receives a send (type 3) off the socket while it is decoded, so that every block payload
//! ends up in an allocation of exactly its size. Nothing is compacted afterwards and no small
//! block can pin a large receive buffer.
//!
//! Payloads above [`SMALL_PAYLOAD`] are read by the kernel straight into their allocation: the
//! socket-to-memory copy is the only one such a block gets before it is spilled. Fields between
//! payloads are read in small pieces into the connection's buffer; a piece may run into the
//! next payload, and those few bytes are moved into the payload's own buffer.
//!
//! Small payloads go through the connection's buffer instead, read ahead [`SMALL_READ`] bytes
//! at a time, and are copied out of it. Reading each straight into its allocation cost one
//! `recv` per block, and two when the fields' read ran into it: with the real client's 4-16 KiB
//! blocks (benches/README "Round 6") a 16 MiB send took some 3,000 system calls, each with its
//! wake-up. A memcpy of a few KiB is cheaper than a system call, and either way a payload byte
//! is copied in user space at most once.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::frame::{FrameError, Source};

/// Most bytes read ahead for fields: enough for the fields of many small blocks in one
/// system call, little enough that few payload bytes pass through the connection's buffer.
const FIELDS_READ: usize = 4 << 10;

/// Payloads up to this size are copied out of the connection's buffer rather than read into
/// their own allocation by a system call of their own.
const SMALL_PAYLOAD: usize = 16 << 10;

/// Bytes read ahead at a time while small payloads are taken from the connection's buffer:
/// the fields and payloads of several small blocks per system call.
const SMALL_READ: usize = 64 << 10;

/// The message of one frame being received: what has been buffered, what is still on the
/// socket.
pub struct Receiver<'a> {
    socket: Socket<'a>,
    /// The connection's buffer; its first bytes are the unread part of the message.
    buffer: &'a mut BytesMut,
    /// Bytes of the message not yet handed to the decoder (buffered or on the socket).
    left: usize,
}

/// The connection as the receiver reads it: every read held to the stall timeout.
struct Socket<'a> {
    stream: &'a mut TcpStream,
    stall_timeout: Duration,
    /// Reports traffic to the connection table (so a connection receiving a large send is
    /// not taken for idle).
    touch: &'a (dyn Fn() + Sync),
}

impl Socket<'_> {
    /// One read of at most `max` bytes into `into`; an end of stream is an error (the frame
    /// is not complete).
    async fn read(&mut self, into: &mut BytesMut, max: usize) -> Result<(), FrameError> {
        let n = tokio::time::timeout(
            self.stall_timeout,
            (&mut *self.stream).take(max as u64).read_buf(into),
        )
        .await
        .map_err(|_| FrameError::Stalled { phase: "body" })??;
        if n == 0 {
            return Err(FrameError::Eof {
                got: into.len(),
                want: into.len() + max,
            });
        }
        (self.touch)();
        Ok(())
    }
}

impl<'a> Receiver<'a> {
    /// A receiver of a message of `msg_len` bytes whose header has been consumed from
    /// `buffer`; `buffer` may already hold the start of the message (and, for a message
    /// shorter than what was read, bytes after it, which stay there).
    pub fn new(
        stream: &'a mut TcpStream,
        buffer: &'a mut BytesMut,
        msg_len: usize,
        stall_timeout: Duration,
        touch: &'a (dyn Fn() + Sync),
    ) -> Self {
        Receiver {
            socket: Socket {
                stream,
                stall_timeout,
                touch,
            },
            buffer,
            left: msg_len,
        }
    }

    /// Reads and drops what the decoder did not consume of the message, and `body_len` bytes
    /// after it (a send has no body; a client that sends one anyway is served as before).
    pub async fn skip_rest(&mut self, body_len: usize) -> Result<(), FrameError> {
        self.left += body_len;
        while self.left > 0 {
            let n = self.left.min(FIELDS_READ);
            self.take("trailing bytes", n).await?;
        }
        Ok(())
    }

    /// Message bytes on the socket, not yet buffered.
    fn unbuffered(&self) -> usize {
        self.left.saturating_sub(self.buffer.len())
    }

    /// Reads until `n` bytes are buffered, each read asking for at least `read` bytes (or
    /// the rest of the message), so small fields and payloads share system calls.
    async fn buffer_up_to(&mut self, n: usize, read: usize) -> Result<(), FrameError> {
        while self.buffer.len() < n {
            let max = (n - self.buffer.len()).max(read).min(self.unbuffered());
            self.buffer.reserve(max);
            self.socket.read(self.buffer, max).await?;
        }
        Ok(())
    }

    fn overrun(&self, field: &'static str, need: usize) -> FrameError {
        FrameError::Overrun {
            field,
            need,
            left: self.left,
        }
    }
}

impl Source for Receiver<'_> {
    async fn take(&mut self, field: &'static str, n: usize) -> Result<Bytes, FrameError> {
        if n > self.left {
            return Err(self.overrun(field, n));
        }
        self.buffer_up_to(n, FIELDS_READ).await?;
        self.left -= n;
        Ok(self.buffer.split_to(n).freeze())
    }

    async fn payload(&mut self, field: &'static str, n: usize) -> Result<Bytes, FrameError> {
        if n > self.left {
            return Err(self.overrun(field, n));
        }
        if n <= SMALL_PAYLOAD {
            self.buffer_up_to(n, SMALL_READ).await?;
            self.left -= n;
            // A copy, not `split_to(n).freeze()`: a slice would keep the connection's buffer
            // alive for as long as the block is stored.
            let data = Bytes::copy_from_slice(&self.buffer[..n]);
            self.buffer.advance(n);
            return Ok(data);
        }
        let mut data = BytesMut::with_capacity(n);
        let buffered = self.buffer.len().min(n);
        data.extend_from_slice(&self.buffer.split_to(buffered));
        while data.len() < n {
            let max = n - data.len();
            self.socket.read(&mut data, max).await?;
        }
        self.left -= n;
        Ok(data.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netty::frame::{Header, HEADER_LEN};
    use crate::netty::messages::{decode_send, Request, SendBlock, SendRequest};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    fn send(sizes: &[usize]) -> SendRequest {
        let blocks = |p: i32| {
            sizes
                .iter()
                .enumerate()
                .map(|(i, &len)| SendBlock {
                    partition_id: p,
                    block_id: i as i64 * 10 + p as i64,
                    length: len as i32,
                    crc: i as i64,
                    task_attempt_id: 3,
                    data: Bytes::from((0..len).map(|b| (b * 7 + i) as u8).collect::<Vec<_>>()),
                    replicas: vec![Default::default(); i % 3],
                    uncompress_length: len as i32 * 2,
                    ..Default::default()
                })
                .collect()
        };
        SendRequest {
            request_id: 5,
            app_id: "app_1".into(),
            shuffle_id: 1,
            require_buffer_id: 9,
            partitions: vec![(0, blocks(0)), (1, blocks(1))],
            timestamp: 77,
        }
    }

    /// Reads one type-3 frame from `server` through a [`Receiver`] over `buffer`, leaving
    /// what follows it in `buffer`.
    async fn receive_send(
        server: &mut TcpStream,
        buffer: &mut BytesMut,
        touch: &(dyn Fn() + Sync),
    ) -> SendRequest {
        while buffer.len() < HEADER_LEN {
            server.read_buf(buffer).await.unwrap();
        }
        let header = Header::parse(buffer, usize::MAX).unwrap();
        buffer.advance(HEADER_LEN);
        let mut rx = Receiver::new(
            server,
            buffer,
            header.msg_len,
            Duration::from_secs(10),
            touch,
        );
        let got = decode_send(&mut rx).await.unwrap();
        rx.skip_rest(header.body_len).await.unwrap();
        got
    }

    /// The same send decoded off a socket that delivers it in awkward pieces (splitting
    /// fields and payloads, with the next frame behind it) equals the in-memory decoding, and
    /// the bytes after the message stay buffered for the next frame.
    #[tokio::test]
    async fn decodes_off_the_socket_as_from_memory_whatever_the_pieces() {
        let request = send(&[0, 1, 100, 5000, 70_000, 3]);
        let mut wire = Request::Send(request.clone()).encode();
        let next = Request::Send(send(&[2])).encode();
        wire.extend_from_slice(&next);
        for piece in [1usize, 7, 4096, 65_536] {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let mut client = TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let (mut server, _) = listener.accept().await.unwrap();
            let bytes = wire.clone();
            let writer = tokio::spawn(async move {
                for chunk in bytes.chunks(piece) {
                    client.write_all(chunk).await.unwrap();
                }
                client
            });
            let mut buffer = BytesMut::new();
            let got = receive_send(&mut server, &mut buffer, &|| {}).await;
            assert_eq!(got, request, "pieces of {piece} bytes");
            let _client = writer.await.unwrap();
            while buffer.len() < next.len() {
                server.read_buf(&mut buffer).await.unwrap();
            }
            assert_eq!(&buffer[..], &next[..], "the next frame is left whole");
        }
    }

    /// Small payloads share system calls: a send of 16 blocks of 4 KiB, already on the socket
    /// when decoding starts, is read in a few reads (one per block and more before), each
    /// payload in an allocation of its own, not a slice of the connection's buffer.
    #[tokio::test]
    async fn small_payloads_share_reads_and_own_their_bytes() {
        let request = send(&[4096; 8]);
        let wire = Request::Send(request.clone()).encode();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        // About 70 KiB: fits loopback's socket buffers, so the whole send is queued before the
        // first read.
        client.write_all(&wire).await.unwrap();
        let mut buffer = BytesMut::new();
        let reads = AtomicUsize::new(0);
        let touch = || {
            reads.fetch_add(1, Ordering::Relaxed);
        };
        let got = receive_send(&mut server, &mut buffer, &touch).await;
        assert_eq!(got, request);
        let reads = reads.load(Ordering::Relaxed);
        assert!(reads <= 4, "{reads} reads for 16 small payloads");
        for (_, blocks) in got.partitions {
            for block in blocks {
                // `try_into_mut` succeeds only for the sole owner of a whole allocation.
                assert!(block.data.try_into_mut().is_ok(), "a payload is a slice");
            }
        }
    }

    /// A payload longer than what is left of the message is refused before anything is
    /// allocated for it, and a peer that stops mid-payload is cut off by the stall timeout.
    #[tokio::test]
    async fn lying_lengths_and_stalls_end_the_frame() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        client.write_all(&[0u8; 8]).await.unwrap();
        let mut buffer = BytesMut::new();
        let touch = || {};
        let mut rx = Receiver::new(
            &mut server,
            &mut buffer,
            100,
            Duration::from_millis(200),
            &touch,
        );
        assert!(matches!(
            rx.payload("block.data", 101).await,
            Err(FrameError::Overrun { .. })
        ));
        assert!(matches!(
            rx.payload("block.data", 50).await,
            Err(FrameError::Stalled { .. })
        ));
    }
}
