//! Wire → domain conversions for both data planes: every check of ids, lengths and layouts a
//! request needs before it reaches the registry, written once for gRPC and Netty.

use crate::app::read::ReadArgs;
use crate::audit::rpc::ReadTarget;
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

/// A block as a plane decodes it: the declared `length` beside the payload, which
/// [`blocks`] checks against each other.
pub trait WireBlock {
    /// The `length` field the client sent.
    fn declared_length(&self) -> i32;
    /// The block, trusting nothing yet.
    fn into_block(self) -> Block;
}

impl WireBlock for proto::ShuffleBlock {
    fn declared_length(&self) -> i32 {
        self.length
    }

    fn into_block(self) -> Block {
        Block {
            block_id: self.block_id,
            task_attempt_id: self.task_attempt_id,
            uncompress_length: self.uncompress_length,
            crc: self.crc,
            data: self.data,
        }
    }
}

/// Blocks of a send, grouped by partition in request order (see [`partition`] and [`block`]).
pub fn blocks<B: WireBlock>(
    parts: impl IntoIterator<Item = (i32, Vec<B>)>,
) -> Result<Vec<(i32, Vec<Block>)>> {
    parts
        .into_iter()
        .map(|(partition_id, wire)| {
            let p = partition(partition_id)?;
            let blocks = wire
                .into_iter()
                .map(|b| {
                    let declared = b.declared_length();
                    block(p, declared, b.into_block())
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((p, blocks))
        })
        .collect()
}

/// The partitions of a gRPC `sendShuffleData`, for [`blocks`].
pub fn grpc_parts(
    data: Vec<proto::ShuffleData>,
) -> impl Iterator<Item = (i32, Vec<proto::ShuffleBlock>)> {
    data.into_iter().map(|p| (p.partition_id, p.block))
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
        assert!(blocks(grpc_parts(vec![mk(1, 3)])).is_ok());
        assert!(blocks(grpc_parts(vec![mk(1, 4)])).is_err());
        assert!(blocks(grpc_parts(vec![mk(1, -3)])).is_err());
        assert!(blocks(grpc_parts(vec![mk(-1, 3)])).is_err());
        assert!(layout(Some(&proto::BlockIdLayout {
            sequence_no_bits: 20,
            partition_id_bits: 20,
            task_attempt_id_bits: 20
        }))
        .is_err());
        assert_eq!(layout(None).unwrap(), BlockIdLayout::DEFAULT);
    }
}

/// A local read (index or data) of either plane: both name the partition's fields alike, so
/// one implementation (see [`local_read`]) gives the registry's arguments and the audit's.
pub trait LocalRead {
    /// Shuffle, partition, partitions per range, partitions of the shuffle.
    fn fields(&self) -> [i32; 4];

    /// What the registry reads.
    fn read_args(&self) -> ReadArgs {
        let [shuffle, partition, per_range, partition_num] = self.fields();
        ReadArgs {
            shuffle,
            partition,
            per_range,
            partition_num,
        }
    }

    /// What the audit line names; `request_id` only on the Netty plane.
    fn target(&self, request_id: Option<i64>) -> ReadTarget {
        let [_, partition_id, per_range, partition_num] = self.fields();
        ReadTarget {
            request_id,
            partition_id,
            per_range,
            partition_num,
        }
    }
}

/// Implements [`LocalRead`] for request types with Uniffle's field names.
macro_rules! local_read {
    ($($request:ty),+) => {$(
        impl $crate::protocol::convert::LocalRead for $request {
            fn fields(&self) -> [i32; 4] {
                [self.shuffle_id, self.partition_id, self.partition_num_per_range, self.partition_num]
            }
        }
    )+};
}
pub(crate) use local_read;

local_read!(
    proto::GetLocalShuffleIndexRequest,
    proto::GetLocalShuffleDataRequest
);
