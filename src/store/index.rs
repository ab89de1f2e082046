//! The 40-byte big-endian index record of Uniffle's data/index file pairs (DATA-FORMATS §3.3).
//!
//! Its own file because it is a wire format: clients parse these bytes directly.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::store::Block;

/// One index record: where a block lives in the data file, plus the metadata a reader checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Absolute byte offset of the block in the data file.
    pub offset: i64,
    /// Payload length.
    pub length: i32,
    /// Length before compression (opaque).
    pub uncompress_length: i32,
    /// CRC-32 of the payload as the client sent it.
    pub crc: i64,
    /// Block id.
    pub block_id: i64,
    /// Writer task attempt id.
    pub task_attempt_id: i64,
}

impl IndexEntry {
    /// Encoded size of one record.
    pub const SIZE: usize = 40;

    /// Appends the big-endian record to `buf`.
    pub fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i64(self.offset);
        buf.put_i32(self.length);
        buf.put_i32(self.uncompress_length);
        buf.put_i64(self.crc);
        buf.put_i64(self.block_id);
        buf.put_i64(self.task_attempt_id);
    }

    /// Reads one record from the front of `buf`; `None` when fewer than 40 bytes remain.
    pub fn decode(buf: &mut impl Buf) -> Option<IndexEntry> {
        if buf.remaining() < Self::SIZE {
            return None;
        }
        Some(IndexEntry {
            offset: buf.get_i64(),
            length: buf.get_i32(),
            uncompress_length: buf.get_i32(),
            crc: buf.get_i64(),
            block_id: buf.get_i64(),
            task_attempt_id: buf.get_i64(),
        })
    }

    /// Decodes every whole record of `bytes` (a trailing partial record is ignored, as the
    /// client does).
    pub fn decode_all(mut bytes: &[u8]) -> Vec<IndexEntry> {
        let mut out = Vec::with_capacity(bytes.len() / Self::SIZE);
        while let Some(e) = Self::decode(&mut bytes) {
            out.push(e);
        }
        out
    }
}

/// The index records of `blocks` placed contiguously from `data_offset` in the data file (both
/// file tiers write exactly this after the blocks' payloads).
pub fn encode_blocks(blocks: &[Block], data_offset: u64) -> Bytes {
    let mut buf = BytesMut::with_capacity(blocks.len() * IndexEntry::SIZE);
    let mut offset = data_offset;
    for b in blocks {
        IndexEntry {
            offset: offset as i64,
            length: b.len(),
            uncompress_length: b.uncompress_length,
            crc: b.crc,
            block_id: b.block_id,
            task_attempt_id: b.task_attempt_id,
        }
        .encode(&mut buf);
        offset += b.data.len() as u64;
    }
    buf.freeze()
}

/// Adds `by` to the offset of every whole record in `records` (in place). Used to present
/// several data files of a partition as one logical file whose offsets continue where the
/// previous file ended.
///
/// The records come back from disk, so a damaged one may hold any offset: the sum saturates
/// rather than overflowing (a panic in debug builds) or wrapping (which could turn it into a
/// plausible offset of another block). A saturated offset lies past the end of the data, so a
/// reader's request for it is refused.
pub fn shift_offsets(records: &mut [u8], by: u64) {
    if by == 0 {
        return;
    }
    let by = i64::try_from(by).unwrap_or(i64::MAX);
    for rec in records.chunks_exact_mut(IndexEntry::SIZE) {
        let old = i64::from_be_bytes(rec[..8].try_into().expect("8 bytes"));
        rec[..8].copy_from_slice(&old.saturating_add(by).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn matches_the_data_formats_example() {
        let e = IndexEntry {
            offset: 0,
            length: 3,
            uncompress_length: 10,
            crc: 0xCAFE,
            block_id: 6_291_463,
            task_attempt_id: 7,
        };
        let mut buf = Vec::new();
        e.encode(&mut buf);
        let want = hex::decode(
            "0000000000000000000000030000000a000000000000cafe00000000006000070000000000000007",
        )
        .unwrap();
        assert_eq!(buf, want);
        assert_eq!(IndexEntry::decode_all(&buf), vec![e]);
    }

    proptest! {
        #[test]
        fn round_trips(offset: i64, length: i32, ul: i32, crc: i64, id: i64, task: i64, tail in 0usize..40) {
            let e = IndexEntry { offset, length, uncompress_length: ul, crc, block_id: id, task_attempt_id: task };
            let mut buf = Vec::new();
            e.encode(&mut buf);
            e.encode(&mut buf);
            prop_assert_eq!(buf.len(), 80);
            buf.extend(std::iter::repeat_n(0u8, tail));
            prop_assert_eq!(IndexEntry::decode_all(&buf), vec![e, e]);
        }
    }
}
