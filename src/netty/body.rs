//! How a response body leaves the server without being copied in user space: memory payloads
//! as one vectored write of the buffers that hold them, file ranges with sendfile(2), which
//! moves the bytes from the page cache to the socket inside the kernel.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use bytes::{Buf, Bytes};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use tokio::net::TcpStream;

use super::frame::FrameError;
use crate::store::FileRange;

/// The bulk part of a response, written after its header and message.
#[derive(Debug)]
pub enum Body {
    /// Buffers written as they are (one vectored write per socket send).
    Slices(Vec<Bytes>),
    /// Ranges of open data files, sent with sendfile.
    Files(Vec<FileRange>),
}

impl Body {
    /// No body.
    pub fn empty() -> Self {
        Body::Slices(Vec::new())
    }

    /// Bytes in the body (the frame's `bodyLen`).
    pub fn len(&self) -> usize {
        match self {
            Body::Slices(slices) => slices.iter().map(Bytes::len).sum(),
            Body::Files(ranges) => ranges.iter().map(|r| r.len as usize).sum(),
        }
    }

    /// True when there is nothing after the message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A sequence of buffers as one [`Buf`] whose `chunks_vectored` names each of them, so a
/// vectored socket write takes up to 64 of them per system call and none is copied.
#[derive(Debug, Default)]
pub struct Slices {
    parts: VecDeque<Bytes>,
    remaining: usize,
}

impl Slices {
    /// The buffers in write order; empty ones are dropped.
    pub fn new(parts: impl IntoIterator<Item = Bytes>) -> Self {
        let parts: VecDeque<Bytes> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let remaining = parts.iter().map(Bytes::len).sum();
        Slices { parts, remaining }
    }
}

impl Buf for Slices {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts.front().map_or(&[], |p| &p[..])
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of the slices");
        self.remaining -= cnt;
        while cnt > 0 {
            let Some(front) = self.parts.front_mut() else {
                break;
            };
            if cnt < front.len() {
                front.advance(cnt);
                break;
            }
            cnt -= front.len();
            self.parts.pop_front();
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (slot, part) in dst.iter_mut().zip(&self.parts) {
            *slot = IoSlice::new(part);
            n += 1;
        }
        n
    }
}

/// Largest count asked of one sendfile call (the kernel's own cap is 0x7ffff000).
const SENDFILE_CHUNK: usize = 1 << 30;

/// Sends `ranges` in order on `stream` with sendfile. It runs on a blocking thread, with a
/// duplicate of the socket's descriptor: sendfile reads the file synchronously, so a page
/// that is not cached, or a hung disk, waits there and never on a runtime worker. A socket
/// that accepts nothing for `stall_timeout` ends the send with [`FrameError::Stalled`].
pub async fn send_files(
    stream: &TcpStream,
    ranges: Vec<FileRange>,
    stall_timeout: Duration,
) -> Result<(), FrameError> {
    if ranges.iter().all(|r| r.len == 0) {
        return Ok(());
    }
    let socket = stream.as_fd().try_clone_to_owned()?;
    crate::runtime::blocking(move || send_blocking(&socket, &ranges, stall_timeout))
        .await
        .map_err(|e| io::Error::other(format!("sendfile task failed: {e}")))?
}

fn send_blocking(
    socket: &OwnedFd,
    ranges: &[FileRange],
    stall_timeout: Duration,
) -> Result<(), FrameError> {
    for range in ranges {
        let end = range.offset + range.len;
        let mut offset = i64::try_from(range.offset)
            .map_err(|_| io::Error::other("file offset does not fit off_t"))?;
        while (offset as u64) < end {
            let count = ((end - offset as u64) as usize).min(SENDFILE_CHUNK);
            match nix::sys::sendfile::sendfile(socket, &range.file, Some(&mut offset), count) {
                // The file was checked to hold the range when it was opened; shorter now means
                // it was cut under us. The header promised the length, so the connection
                // cannot continue.
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
                Ok(_) => {}
                Err(Errno::EAGAIN) => wait_writable(socket, stall_timeout)?,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(io::Error::from(e).into()),
            }
        }
    }
    Ok(())
}

/// Waits until the socket takes more bytes, at most `stall_timeout`.
fn wait_writable(socket: &OwnedFd, stall_timeout: Duration) -> Result<(), FrameError> {
    let timeout = PollTimeout::try_from(stall_timeout).unwrap_or(PollTimeout::MAX);
    loop {
        let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLOUT)];
        match nix::poll::poll(&mut fds, timeout) {
            Ok(0) => return Err(FrameError::Stalled { phase: "response" }),
            // Writable, or an error or hang-up that the next sendfile reports.
            Ok(_) => return Ok(()),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(io::Error::from(e).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_advance_across_buffers_and_name_each_for_vectored_writes() {
        let mut s = Slices::new([
            Bytes::from_static(b"head"),
            Bytes::new(),
            Bytes::from_static(b"ab"),
            Bytes::from_static(b"cdef"),
        ]);
        assert_eq!(s.remaining(), 10);
        let mut io = [IoSlice::new(&[]); 8];
        assert_eq!(s.chunks_vectored(&mut io), 3, "the empty buffer is dropped");
        s.advance(5);
        assert_eq!(s.remaining(), 5);
        assert_eq!(s.chunk(), b"b");
        s.advance(2);
        assert_eq!(s.chunk(), b"def");
        let rest = s.copy_to_bytes(3);
        assert_eq!(&rest[..], b"def");
        assert_eq!(s.remaining(), 0);
        assert!(s.chunk().is_empty());
    }
}
