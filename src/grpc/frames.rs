//! A request body kept as the DATA frames h2 received, and read as one buffer by prost.
//!
//! tonic joins a request's frames into one buffer before decoding (a copy of every byte), and
//! the memory tier then copies each partition's payloads out of that buffer again, so that a
//! small block kept in memory cannot pin a 16 MiB request ([`crate::store::Payloads`]). Read
//! through [`Frames`] instead, prost copies each `bytes` field straight from the frames into
//! an allocation of exactly its size (prost takes `bytes` fields with
//! [`Buf::copy_to_bytes`]): one copy, and payloads that need no compaction.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use tonic::body::Body;
use tonic::Status;

/// The frames of one body, in order; never holds an empty frame, so [`Buf::chunk`] is empty
/// only at the end.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    frames: VecDeque<Bytes>,
    remaining: usize,
}

impl Frames {
    /// Appends a received frame.
    pub fn push(&mut self, frame: Bytes) {
        if !frame.is_empty() {
            self.remaining += frame.len();
            self.frames.push_back(frame);
        }
    }

    /// Collects a body's DATA frames, refusing a body longer than a message of `max_message`
    /// bytes and its 5-byte gRPC prefix with what tonic answers for an oversized message.
    pub async fn collect(mut body: Body, max_message: usize) -> Result<Frames, Status> {
        let max_body = max_message.saturating_add(5);
        let mut frames = Frames::default();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                if frames.remaining + data.len() > max_body {
                    return Err(Status::out_of_range(format!(
                        "Error, decoded message length too large: found more than {max_message} bytes"
                    )));
                }
                frames.push(data);
            }
        }
        Ok(frames)
    }

    /// Takes the gRPC prefix off a unary call's body and checks that exactly one uncompressed
    /// message follows; the same refusals as tonic's decoder.
    pub fn unframe(&mut self) -> Result<(), Status> {
        if self.remaining < 5 {
            return Err(Status::internal(format!(
                "request body of {} bytes has no complete gRPC message",
                self.remaining
            )));
        }
        if self.get_u8() != 0 {
            return Err(Status::internal(
                "compressed message, but no grpc-encoding was declared",
            ));
        }
        let len = self.get_u32() as usize;
        if len != self.remaining {
            return Err(Status::internal(format!(
                "request body holds {} bytes after the prefix, the prefix says {len}",
                self.remaining
            )));
        }
        Ok(())
    }
}

impl Buf for Frames {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.frames.front().map_or(&[], |f| f.chunk())
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of the body");
        self.remaining -= cnt;
        while cnt > 0 {
            let front = self
                .frames
                .front_mut()
                .expect("remaining counts the frames");
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.frames.pop_front();
        }
    }

    /// Always a fresh allocation of exactly `len` bytes, even when they lie in one frame: a
    /// slice would keep h2's whole read buffer alive for as long as the block is stored.
    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        assert!(len <= self.remaining, "copy past the end of the body");
        let mut out = BytesMut::with_capacity(len);
        while out.len() < len {
            let chunk = self.chunk();
            let n = chunk.len().min(len - out.len());
            out.extend_from_slice(&chunk[..n]);
            self.advance(n);
        }
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::proto;

    fn split(bytes: &[u8], every: usize) -> (Frames, Vec<Bytes>) {
        let mut frames = Frames::default();
        let mut kept = Vec::new();
        for piece in bytes.chunks(every.max(1)) {
            let b = Bytes::copy_from_slice(piece);
            kept.push(b.clone());
            frames.push(b);
        }
        (frames, kept)
    }

    fn request(sizes: &[usize]) -> proto::SendShuffleDataRequest {
        proto::SendShuffleDataRequest {
            app_id: "app_1".into(),
            shuffle_id: 3,
            require_buffer_id: 9,
            shuffle_data: vec![proto::ShuffleData {
                partition_id: 2,
                block: sizes
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| proto::ShuffleBlock {
                        block_id: i as i64,
                        length: n as i32,
                        data: Bytes::from(vec![i as u8 + 1; n]),
                        ..Default::default()
                    })
                    .collect(),
            }],
            timestamp: 77,
            ..Default::default()
        }
    }

    /// Whatever the frame boundaries, prost reads the same message, and every payload is an
    /// allocation of its own (not a slice of any frame).
    #[test]
    fn decodes_across_any_frame_boundaries_into_own_allocations() {
        let want = request(&[0, 1, 127, 128, 5000, 70_000]);
        let encoded = want.encode_to_vec();
        for every in [1, 2, 7, 100, 16_384, encoded.len()] {
            let (frames, kept) = split(&encoded, every);
            let got = proto::SendShuffleDataRequest::decode(frames).unwrap();
            assert_eq!(got, want, "frames of {every} bytes");
            for block in &got.shuffle_data[0].block {
                let p = block.data.as_ptr() as usize;
                assert!(
                    block.data.is_empty()
                        || kept.iter().all(|f| {
                            let start = f.as_ptr() as usize;
                            p < start || p >= start + f.len()
                        }),
                    "payload of {} bytes is a slice of a frame",
                    block.data.len()
                );
            }
        }
    }

    #[test]
    fn truncated_bodies_are_decode_errors() {
        let encoded = request(&[300, 300]).encode_to_vec();
        for cut in [1, 10, encoded.len() / 2, encoded.len() - 1] {
            let (frames, _) = split(&encoded[..cut], 64);
            assert!(proto::SendShuffleDataRequest::decode(frames).is_err());
        }
    }

    #[test]
    fn unframe_refuses_what_tonic_refuses() {
        let unframe = |bytes: &[u8]| {
            let (mut f, _) = split(bytes, 2);
            f.unframe().map(|()| f.copy_to_bytes(f.remaining()))
        };
        assert!(unframe(&[0, 0, 0]).is_err());
        assert!(unframe(&[1, 0, 0, 0, 0]).is_err());
        assert!(unframe(&[0, 0, 0, 0, 2, 1]).is_err());
        assert!(unframe(&[0, 0, 0, 0, 1, 1, 2]).is_err());
        assert_eq!(unframe(&[0, 0, 0, 0, 1, 7]).unwrap(), &[7][..]);
        assert_eq!(unframe(&[0, 0, 0, 0, 0]).unwrap(), &[][..]);
    }
}
