//! Uniffle's Netty frame (NETTY.md §2): the 9-byte header, the length checks made before any
//! body byte is allocated or read, and the big-endian primitives messages are built from.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// `msgLen` (i32) + `type` (i8) + `bodyLen` (i32).
pub const HEADER_LEN: usize = 9;

/// Why a connection is closed. Small and allocation-free on purpose: this is the hot path's
/// error, converted to a log line at the connection's edge and never sent to the client
/// (Java closes the connection on any decode failure, and so do we).
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the connection inside a frame.
    #[error("connection closed inside a frame ({got} of {want} bytes received)")]
    Eof {
        /// Bytes buffered when the stream ended.
        got: usize,
        /// Bytes the frame needed.
        want: usize,
    },
    /// `msgLen` or `bodyLen` is negative.
    #[error("negative length in frame header (msgLen {msg_len}, bodyLen {body_len})")]
    NegativeLength {
        /// Declared message length.
        msg_len: i32,
        /// Declared body length.
        body_len: i32,
    },
    /// The frame is larger than this server accepts (checked before reading it).
    #[error("frame of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// `msgLen + bodyLen`.
        len: u64,
        /// The limit.
        limit: usize,
    },
    /// A type id this side has no decoder for.
    #[error("unknown or unexpected message type {0}")]
    UnknownType(i8),
    /// A field extends past the end of the message.
    #[error("field {field} overruns the message ({need} bytes needed, {left} left)")]
    Overrun {
        /// The field being read.
        field: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes left in the message.
        left: usize,
    },
    /// A field's value cannot be decoded (negative count, bad UTF-8, …).
    #[error("field {field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The peer paused longer than `limits.stall_timeout` inside a frame or while its response
    /// was being written.
    #[error("peer stalled while the {phase} was in transit")]
    Stalled {
        /// "header", "body" or "response".
        phase: &'static str,
    },
    /// The socket failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// A checked frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Length of the message part.
    pub msg_len: usize,
    /// Message type id (NETTY.md §3).
    pub ty: i8,
    /// Length of the body part.
    pub body_len: usize,
}

impl Header {
    /// Parses the first [`HEADER_LEN`] bytes of `raw` and checks that both lengths are
    /// non-negative and that `msgLen + bodyLen <= limit`, so nothing is allocated for a
    /// hostile length. Fewer than [`HEADER_LEN`] bytes is [`FrameError::Eof`]: callers wait
    /// for a whole header first, but a decoder of untrusted bytes must not rely on that.
    pub fn parse(raw: &[u8], limit: usize) -> Result<Header, FrameError> {
        if raw.len() < HEADER_LEN {
            return Err(FrameError::Eof {
                got: raw.len(),
                want: HEADER_LEN,
            });
        }
        let mut raw = raw;
        let msg_len = raw.get_i32();
        let ty = raw.get_i8();
        let body_len = raw.get_i32();
        if msg_len < 0 || body_len < 0 {
            return Err(FrameError::NegativeLength { msg_len, body_len });
        }
        let len = msg_len as u64 + body_len as u64;
        if len > limit as u64 {
            return Err(FrameError::TooLarge { len, limit });
        }
        Ok(Header {
            msg_len: msg_len as usize,
            ty,
            body_len: body_len as usize,
        })
    }

    /// `msgLen + bodyLen`: the bytes after the header.
    pub fn payload_len(&self) -> usize {
        self.msg_len + self.body_len
    }
}

/// Builds a frame: header, then the message `write_msg` appends, with `msgLen` patched in
/// afterwards. `body_len` is the length of the body the caller sends after it (not included).
pub fn encode_frame(ty: i8, body_len: usize, write_msg: impl FnOnce(&mut BytesMut)) -> BytesMut {
    let mut buf = BytesMut::with_capacity(128);
    buf.put_bytes(0, HEADER_LEN);
    write_msg(&mut buf);
    let msg_len = (buf.len() - HEADER_LEN) as i32;
    buf[0..4].copy_from_slice(&msg_len.to_be_bytes());
    buf[4] = ty as u8;
    buf[5..9].copy_from_slice(&(body_len as i32).to_be_bytes());
    buf
}

/// Appends a Java-encoded string: i32 byte length then UTF-8, `-1` for null.
pub fn put_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        None => buf.put_i32(-1),
        Some(s) => {
            buf.put_i32(s.len() as i32);
            buf.put_slice(s.as_bytes());
        }
    }
}

/// Appends length-prefixed bytes, `-1` for none (the memory request's bitmap).
pub fn put_opt_bytes(buf: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        None => buf.put_i32(-1),
        Some(b) => {
            buf.put_i32(b.len() as i32);
            buf.put_slice(b);
        }
    }
}

/// Where a decoder takes a message's fields from. A [`Cursor`] holds the whole message in
/// memory; the Netty server reads a send off the socket as its decoder asks, so that each block
/// payload lands straight in a buffer of its own size (`netty::recv`). One decoder per
/// message type serves both.
///
/// Every read checks that the field fits in what is left of the message, so a lying length
/// closes the connection instead of reading past the message.
pub trait Source: Send {
    /// The next `n` bytes of the message, for fields.
    fn take(
        &mut self,
        field: &'static str,
        n: usize,
    ) -> impl Future<Output = Result<Bytes, FrameError>> + Send;

    /// The next `n` bytes as a block payload, which outlives the message; by default read as
    /// any field.
    fn payload(
        &mut self,
        field: &'static str,
        n: usize,
    ) -> impl Future<Output = Result<Bytes, FrameError>> + Send {
        self.take(field, n)
    }

    /// An int8.
    fn i8(&mut self, field: &'static str) -> impl Future<Output = Result<i8, FrameError>> + Send {
        async move { Ok(self.take(field, 1).await?.get_i8()) }
    }

    /// A big-endian int32.
    fn i32(&mut self, field: &'static str) -> impl Future<Output = Result<i32, FrameError>> + Send {
        async move { Ok(self.take(field, 4).await?.get_i32()) }
    }

    /// A big-endian int64.
    fn i64(&mut self, field: &'static str) -> impl Future<Output = Result<i64, FrameError>> + Send {
        async move { Ok(self.take(field, 8).await?.get_i64()) }
    }

    /// An int32 count that must be non-negative.
    fn count(
        &mut self,
        field: &'static str,
    ) -> impl Future<Output = Result<usize, FrameError>> + Send {
        async move {
            let n = self.i32(field).await?;
            usize::try_from(n).map_err(|_| FrameError::Invalid {
                field,
                reason: "negative count",
            })
        }
    }

    /// Length-prefixed bytes; `None` for length `-1`.
    fn opt_bytes(
        &mut self,
        field: &'static str,
    ) -> impl Future<Output = Result<Option<Bytes>, FrameError>> + Send {
        async move {
            match self.i32(field).await? {
                -1 => Ok(None),
                n if n < 0 => Err(FrameError::Invalid {
                    field,
                    reason: "negative length",
                }),
                n => self.take(field, n as usize).await.map(Some),
            }
        }
    }

    /// A Java string; `None` for null.
    fn string(
        &mut self,
        field: &'static str,
    ) -> impl Future<Output = Result<Option<String>, FrameError>> + Send {
        async move {
            match self.opt_bytes(field).await? {
                None => Ok(None),
                Some(b) => {
                    String::from_utf8(b.to_vec())
                        .map(Some)
                        .map_err(|_| FrameError::Invalid {
                            field,
                            reason: "not UTF-8",
                        })
                }
            }
        }
    }
}

/// Runs a decoder over an in-memory [`Cursor`] to its end. Cursor reads never wait, so the
/// future is ready at its first poll; one that is not is refused rather than spun.
pub fn ready<T>(fut: impl Future<Output = Result<T, FrameError>>) -> Result<T, FrameError> {
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(r) => r,
        Poll::Pending => Err(FrameError::Invalid {
            field: "message",
            reason: "an in-memory decoder waited",
        }),
    }
}

/// Reads fields from one message held in memory.
#[derive(Debug)]
pub struct Cursor {
    buf: Bytes,
}

impl Source for Cursor {
    async fn take(&mut self, field: &'static str, n: usize) -> Result<Bytes, FrameError> {
        self.bytes(field, n)
    }
}

impl Cursor {
    /// A cursor over a message.
    pub fn new(buf: Bytes) -> Self {
        Cursor { buf }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// `n` bytes, sliced out of the message without a copy.
    pub fn bytes(&mut self, field: &'static str, n: usize) -> Result<Bytes, FrameError> {
        if self.buf.len() < n {
            return Err(FrameError::Overrun {
                field,
                need: n,
                left: self.buf.len(),
            });
        }
        Ok(self.buf.split_to(n))
    }

    /// An int8.
    pub fn i8(&mut self, field: &'static str) -> Result<i8, FrameError> {
        ready(Source::i8(self, field))
    }

    /// A big-endian int32.
    pub fn i32(&mut self, field: &'static str) -> Result<i32, FrameError> {
        ready(Source::i32(self, field))
    }

    /// A big-endian int64.
    pub fn i64(&mut self, field: &'static str) -> Result<i64, FrameError> {
        ready(Source::i64(self, field))
    }

    /// An int32 count that must be non-negative.
    pub fn count(&mut self, field: &'static str) -> Result<usize, FrameError> {
        ready(Source::count(self, field))
    }

    /// Length-prefixed bytes; `None` for length `-1`.
    pub fn opt_bytes(&mut self, field: &'static str) -> Result<Option<Bytes>, FrameError> {
        ready(Source::opt_bytes(self, field))
    }

    /// A Java string; `None` for null.
    pub fn string(&mut self, field: &'static str) -> Result<Option<String>, FrameError> {
        ready(Source::string(self, field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_checks_lengths_before_anything_is_read() {
        let h = |msg: i32, ty: i8, body: i32| {
            let mut b = BytesMut::new();
            b.put_i32(msg);
            b.put_i8(ty);
            b.put_i32(body);
            Header::parse(&b, 1000)
        };
        assert_eq!(
            h(31, 4, 0).unwrap(),
            Header {
                msg_len: 31,
                ty: 4,
                body_len: 0
            }
        );
        assert!(matches!(
            h(-1, 3, 0),
            Err(FrameError::NegativeLength { .. })
        ));
        assert!(matches!(
            h(1, 3, -5),
            Err(FrameError::NegativeLength { .. })
        ));
        assert!(matches!(h(900, 3, 101), Err(FrameError::TooLarge { .. })));
        assert!(matches!(
            h(i32::MAX, 3, i32::MAX),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn cursor_refuses_overruns_and_bad_strings() {
        let mut c = Cursor::new(Bytes::from_static(&[0, 0, 0, 9, b'a']));
        assert!(matches!(c.string("s"), Err(FrameError::Overrun { .. })));
        let mut c = Cursor::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]));
        assert_eq!(c.string("s").unwrap(), None);
        let mut c = Cursor::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xfe]));
        assert!(matches!(c.string("s"), Err(FrameError::Invalid { .. })));
        let mut c = Cursor::new(Bytes::from_static(&[0, 0, 0, 1, 0xff]));
        assert!(matches!(c.string("s"), Err(FrameError::Invalid { .. })));
        let mut c = Cursor::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]));
        assert!(matches!(c.count("n"), Err(FrameError::Invalid { .. })));
        let mut c = Cursor::new(Bytes::from_static(&[1, 2, 3]));
        assert!(matches!(c.i64("x"), Err(FrameError::Overrun { .. })));
    }
}
