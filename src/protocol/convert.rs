//! Wire → domain conversions for the gRPC handlers: every check of ids, lengths and layouts a
//! request needs before it reaches the registry.

use crate::error::{Error, Result};
use crate::ids::{AppId, BlockIdLayout, PartitionRange};
use crate::proto;
use crate::store::Block;

/// Parses the app id; path characters and other unsafe ids become `INVALID_REQUEST`.
pub fn app_id(raw: &str) -> Result<AppId> {
    Ok(AppId::parse(raw)?)
}

/// The layout sent by 0.9+ clients, or 18/24/21 when absent (0.8 clients).
pub fn layout(wire: Option<&proto::BlockIdLayout>) -> Result<BlockIdLayout> {
    match wire {
        None => Ok(BlockIdLayout::DEFAULT),
        Some(l) => Ok(BlockIdLayout::new(
            l.sequence_no_bits,
            l.partition_id_bits,
            l.task_attempt_id_bits,
        )?),
    }
}

/// Registered ranges; each must be `0 <= start <= end`.
pub fn ranges(wire: &[proto::ShufflePartitionRange]) -> Result<Vec<PartitionRange>> {
    wire.iter()
        .map(|r| Ok(PartitionRange::new(r.start, r.end)?))
        .collect()
}

/// Blocks of a send, grouped by partition in request order (see [`partition`] and [`block`]).
pub fn blocks(data: Vec<proto::ShuffleData>) -> Result<Vec<(i32, Vec<Block>)>> {
    data.into_iter()
        .map(|part| {
            let p = partition(part.partition_id)?;
            let blocks = part
                .block
                .into_iter()
                .map(|b| {
                    let declared = b.length;
                    block(
                        p,
                        declared,
                        Block {
                            block_id: b.block_id,
                            task_attempt_id: b.task_attempt_id,
                            uncompress_length: b.uncompress_length,
                            crc: b.crc,
                            data: b.data,
                        },
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((p, blocks))
        })
        .collect()
}

/// A partition id of a send: must not be negative.
pub fn partition(id: i32) -> Result<i32> {
    if id < 0 {
        return Err(Error::bad_request(format!("partitionId {id} is negative")));
    }
    Ok(id)
}

/// Checks one sent block, for both planes. Its declared `length` must equal its payload's
/// length (Java trusts it and would write a corrupt index) and its id must be non-negative.
pub fn block(partition: i32, declared_length: i32, b: Block) -> Result<Block> {
    if declared_length < 0 || declared_length as usize != b.data.len() {
        return Err(Error::bad_request(format!(
            "block {} of partition {partition}: length {declared_length} does not match its {} data bytes",
            b.block_id,
            b.data.len()
        )));
    }
    if b.block_id < 0 {
        return Err(Error::bad_request(format!(
            "block id {} of partition {partition} is negative",
            b.block_id
        )));
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn rejects_length_mismatch_and_negative_ids() {
        let mk = |id: i64, len: i32| proto::ShuffleData {
            partition_id: 1,
            block: vec![proto::ShuffleBlock {
                block_id: id,
                length: len,
                data: Bytes::from_static(b"abc"),
                ..Default::default()
            }],
        };
        assert!(blocks(vec![mk(1, 3)]).is_ok());
        assert!(blocks(vec![mk(1, 4)]).is_err());
        assert!(blocks(vec![mk(1, -3)]).is_err());
        assert!(blocks(vec![mk(-1, 3)]).is_err());
        assert!(layout(Some(&proto::BlockIdLayout {
            sequence_no_bits: 20,
            partition_id_bits: 20,
            task_attempt_id_bits: 20
        }))
        .is_err());
        assert_eq!(layout(None).unwrap(), BlockIdLayout::DEFAULT);
    }
}
