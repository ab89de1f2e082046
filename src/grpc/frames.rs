//! A request body kept as the DATA frames h2 received, and read as one buffer by prost.
//!
//! tonic joins a request's frames into one buffer before decoding (a copy of every byte), and
//! the memory tier then copies each partition's payloads out of that buffer again, so that a
//! small block kept in memory cannot pin a 16 MiB request ([`crate::store::Payloads`]). Read
//! through [`Frames`] instead, prost copies each `bytes` field straight from the frames into
//! an allocation of exactly its size (prost takes `bytes` fields with
//! [`Buf::copy_to_bytes`]): one copy, and payloads that need no compaction.
//!
//! A send's payloads are copied per partition: [`decode_send`] gives each `ShuffleData`
//! message one allocation of its length, and its blocks' payloads are consecutive slices of
//! it. One allocation per partition and request, as the memory tier's compaction of shared
//! requests ([`crate::store::Payloads::Shared`]) makes, so a stored block pins at most its own
//! partition's share of one request. One allocation per block cost jemalloc about a tenth of
//! the server's CPU with the real client's 4-16 KiB blocks (benches/README "Round 6"); blocks
//! from 14 KiB up are each a "large" jemalloc allocation with its own extent bookkeeping.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use prost::encoding::{decode_key, decode_varint, DecodeContext, WireType};
use prost::{DecodeError, Message};
use tonic::body::Body;
use tonic::Status;

use crate::proto;

/// `SendShuffleDataRequest.shuffleData`'s field number.
const SHUFFLE_DATA_FIELD: u32 = 4;

/// Why a send's body is not a `SendShuffleDataRequest`.
#[derive(Debug)]
pub(crate) enum SendDecodeError {
    /// What prost found.
    Prost(DecodeError),
    /// A partition's message claims more bytes than the body has left.
    PartitionLength { claimed: u64, left: usize },
}

impl From<DecodeError> for SendDecodeError {
    fn from(e: DecodeError) -> Self {
        SendDecodeError::Prost(e)
    }
}

impl std::fmt::Display for SendDecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendDecodeError::Prost(e) => e.fmt(f),
            SendDecodeError::PartitionLength { claimed, left } => write!(
                f,
                "shuffleData of {claimed} bytes, but {left} bytes are left in the message"
            ),
        }
    }
}

/// Decodes a `sendShuffleData` request from its frames, each partition's payloads in one
/// allocation of their own (see the module doc). Any other field goes to prost as it is.
pub(crate) fn decode_send(
    mut frames: Frames,
) -> Result<proto::SendShuffleDataRequest, SendDecodeError> {
    let mut request = proto::SendShuffleDataRequest::default();
    while frames.has_remaining() {
        let (tag, wire_type) = decode_key(&mut frames)?;
        if tag != SHUFFLE_DATA_FIELD || wire_type != WireType::LengthDelimited {
            request.merge_field(tag, wire_type, &mut frames, DecodeContext::default())?;
            continue;
        }
        let len = decode_varint(&mut frames)?;
        // Checked before anything is allocated: a length past the body is a lie.
        let len = match usize::try_from(len) {
            Ok(len) if len <= frames.remaining => len,
            _ => {
                return Err(SendDecodeError::PartitionLength {
                    claimed: len,
                    left: frames.remaining,
                })
            }
        };
        // The message's length bounds its payloads' (the rest is a few bytes of fields per
        // block), so every payload of the partition fits.
        frames.slab = BytesMut::with_capacity(len);
        let mut partition = proto::ShuffleData::default();
        let merged = partition.merge((&mut frames).take(len));
        frames.slab = BytesMut::new();
        merged?;
        request.shuffle_data.push(partition);
    }
    Ok(request)
}

/// The frames of one body, in order; never holds an empty frame, so [`Buf::chunk`] is empty
/// only at the end.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    frames: VecDeque<Bytes>,
    remaining: usize,
    /// Where [`Buf::copy_to_bytes`] puts payloads while [`decode_send`] reads a partition;
    /// empty otherwise.
    slab: BytesMut,
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

    /// Never a slice of a frame, even when the bytes lie in one: it would keep h2's whole
    /// read buffer alive for as long as the block is stored. The next bytes of the partition's
    /// slab while [`decode_send`] fills one, else a fresh allocation of exactly `len` bytes.
    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        assert!(len <= self.remaining, "copy past the end of the body");
        if len > 0 && self.slab.capacity() - self.slab.len() >= len {
            // The slab holds no bytes, only room: fill its front, split the rest off.
            let mut out = std::mem::take(&mut self.slab);
            self.copy_into(&mut out, len);
            self.slab = out.split_off(len);
            return out.freeze();
        }
        let mut out = BytesMut::with_capacity(len);
        self.copy_into(&mut out, len);
        out.freeze()
    }
}

impl Frames {
    /// Appends the next `len` bytes to `out` (which has the room) and consumes them.
    fn copy_into(&mut self, out: &mut BytesMut, len: usize) {
        let end = out.len() + len;
        while out.len() < end {
            let chunk = self.chunk();
            let n = chunk.len().min(end - out.len());
            out.extend_from_slice(&chunk[..n]);
            self.advance(n);
        }
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
            let (frames, _) = split(&encoded[..cut], 64);
            assert!(decode_send(frames).is_err(), "cut at {cut}");
        }
    }

    /// `decode_send` reads what prost reads, whatever the frame boundaries; each partition's
    /// payloads lie back to back in one allocation (not a slice of any frame), and the
    /// partitions' allocations are apart.
    #[test]
    fn decode_send_packs_each_partition_into_one_allocation() {
        let mut want = request(&[4096, 0, 16_384, 9000, 1]);
        let mut second = want.shuffle_data[0].clone();
        second.partition_id = 5;
        second.block.truncate(3);
        want.shuffle_data.push(second);
        want.stage_attempt_number = 2;
        let encoded = want.encode_to_vec();
        for every in [1, 7, 16_384, encoded.len()] {
            let (frames, kept) = split(&encoded, every);
            let got = decode_send(frames).unwrap();
            assert_eq!(got, want, "frames of {every} bytes");
            let mut ranges = Vec::new();
            for partition in &got.shuffle_data {
                let start = partition.block[0].data.as_ptr() as usize;
                let mut end = start;
                for block in &partition.block {
                    if !block.data.is_empty() {
                        assert_eq!(block.data.as_ptr() as usize, end, "not back to back");
                    }
                    end += block.data.len();
                }
                assert!(kept.iter().all(|f| {
                    let f0 = f.as_ptr() as usize;
                    start >= f0 + f.len() || f0 >= end
                }));
                ranges.push(start..end);
            }
            assert!(ranges[0].end <= ranges[1].start || ranges[1].end <= ranges[0].start);
        }
    }

    /// A partition whose length claims more than the body holds is refused before anything is
    /// allocated for it.
    #[test]
    fn decode_send_refuses_a_lying_partition_length() {
        // field 4, length-delimited, length 2^40, then 3 bytes
        let body = [0x22, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 1, 2, 3];
        let (frames, _) = split(&body, 4);
        assert!(matches!(
            decode_send(frames),
            Err(SendDecodeError::PartitionLength {
                claimed: 0x100_0000_0000,
                left: 3
            })
        ));
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
