//! A data read's answer before it is framed (`framed`): the message, and the payloads that
//! travel beside it rather than inside it.

use std::collections::VecDeque;

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

use crate::memory::ReadPermit;
use crate::proto;
use crate::protocol::MAX_RESPONSE_SIZE;

/// Payloads shorter than this travel copied into shared frames; longer ones as they are. h2's
/// default (and the Java client's) maximum frame size.
pub(super) const COALESCE_BELOW: usize = 16 << 10;

/// A data read's answer before encoding: the message with its `bytes` field left empty, the
/// bytes that belong in that field, and the read memory they hold until they are written.
pub(crate) struct DataAnswer<M> {
    pub message: M,
    pub data: Vec<Bytes>,
    pub permit: Option<ReadPermit>,
}

/// A response message with one large `bytes` field that [`DataAnswer`] carries apart.
pub(crate) trait DataMessage: Message + Default + Sized {
    /// Sets the `bytes` field (the tonic path, which needs it in the message).
    fn set_data(&mut self, data: Bytes);

    /// The message split around its `bytes` field: the fields numbered below it and the
    /// fields numbered above it, each as a message of its own (prost encodes fields in
    /// number order, so `below ‖ data field ‖ above` is the whole message's encoding).
    fn split(self) -> (Self, Self);

    /// The protobuf key of the `bytes` field (field number, wire type 2).
    const DATA_KEY: u8;
}

impl DataMessage for proto::GetMemoryShuffleDataResponse {
    fn set_data(&mut self, data: Bytes) {
        self.data = data;
    }

    fn split(self) -> (Self, Self) {
        let below = proto::GetMemoryShuffleDataResponse {
            shuffle_data_block_segments: self.shuffle_data_block_segments,
            ..Default::default()
        };
        let above = proto::GetMemoryShuffleDataResponse {
            status: self.status,
            ret_msg: self.ret_msg,
            is_end: self.is_end,
            ..Default::default()
        };
        (below, above)
    }

    const DATA_KEY: u8 = 2 << 3 | 2;
}

impl DataMessage for proto::GetLocalShuffleDataResponse {
    fn set_data(&mut self, data: Bytes) {
        self.data = data;
    }

    fn split(self) -> (Self, Self) {
        let above = proto::GetLocalShuffleDataResponse {
            status: self.status,
            ret_msg: self.ret_msg,
            ..Default::default()
        };
        (Self::default(), above)
    }

    const DATA_KEY: u8 = 1 << 3 | 2;
}

impl<M: DataMessage> DataAnswer<M> {
    /// The whole message, for tonic's codec: the payloads concatenated (one copy) and the read
    /// memory held until that buffer is dropped.
    pub fn into_message(self) -> M {
        let mut message = self.message;
        if self.data.is_empty() {
            return message;
        }
        let data = concat(&self.data);
        message.set_data(match self.permit {
            Some(permit) => permit.attach(data),
            None => data,
        });
        message
    }

    /// The gRPC message (prefix included) as body frames: a head buffer, the payloads as they
    /// are, a tail buffer. The message's length instead when it exceeds `max`.
    pub(super) fn into_frames(
        self,
        max: usize,
    ) -> Result<(VecDeque<Bytes>, Option<ReadPermit>), usize> {
        let data_len: usize = self.data.iter().map(Bytes::len).sum();
        let (below, above) = self.message.split();
        let mut field = [0u8; 11];
        let field_len = if data_len == 0 {
            0
        } else {
            field[0] = M::DATA_KEY;
            let mut rest = &mut field[1..];
            prost::encoding::encode_varint(data_len as u64, &mut rest);
            11 - rest.len()
        };
        let total = below.encoded_len() + field_len + data_len + above.encoded_len();
        if total > max.min(MAX_RESPONSE_SIZE) {
            return Err(total);
        }
        // Payloads under `COALESCE_BELOW` are copied together (with the head and tail) into
        // frames of about that size: h2 writes every large DATA frame with a syscall of its
        // own, so a frame per 1 KiB block would cost more than the copy it saves.
        let mut pending = BytesMut::with_capacity(COALESCE_BELOW * 2);
        pending.put_u8(0); // not compressed
        pending.put_u32(total as u32);
        below.encode_raw(&mut pending);
        pending.put_slice(&field[..field_len]);
        let mut frames = VecDeque::new();
        for payload in self.data {
            if payload.len() < COALESCE_BELOW {
                pending.extend_from_slice(&payload);
                if pending.len() >= COALESCE_BELOW {
                    frames.push_back(pending.split().freeze());
                }
            } else {
                if !pending.is_empty() {
                    frames.push_back(pending.split().freeze());
                }
                frames.push_back(payload);
            }
        }
        above.encode_raw(&mut pending);
        if !pending.is_empty() {
            frames.push_back(pending.freeze());
        }
        Ok((frames, self.permit))
    }
}

fn concat(parts: &[Bytes]) -> Bytes {
    if let [one] = parts {
        return one.clone();
    }
    let mut data = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
    for p in parts {
        data.extend_from_slice(p);
    }
    data.freeze()
}
