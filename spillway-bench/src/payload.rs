//! Block contents and ids for the load generator.
//!
//! Every payload is a slice of one random pool at an offset derived from the block id and the
//! app's key ([`app_key`]), so writing costs no generation (the slice is shared, not copied)
//! and checking a block read back is one comparison against the same slice: every byte is
//! verified without keeping what was written. The key shifts the offset so that two apps'
//! blocks with the same id differ: a server answering one app's read with another app's data
//! (a mixed-up purge or lookup) fails the comparison instead of passing it.

use bytes::Bytes;

use spillway::ids::BlockIdLayout;

/// Pool size beyond the largest block: 8 Mi distinct 8-byte-aligned offsets.
const POOL_SPAN: usize = 64 << 20;

/// The shared random pool blocks are cut from.
pub struct Payloads {
    pool: Bytes,
    max_block: usize,
}

impl Payloads {
    /// A pool for blocks of at most `max_block` bytes (deterministic contents).
    pub fn new(max_block: usize) -> Payloads {
        let len = POOL_SPAN + max_block;
        let mut pool = Vec::with_capacity(len + 8);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        while pool.len() < len {
            x = splitmix(x);
            pool.extend_from_slice(&x.to_le_bytes());
        }
        pool.truncate(len);
        Payloads {
            pool: Bytes::from(pool),
            max_block,
        }
    }

    /// The payload of `block_id` of the app with `key` (`len <= max_block`): a shared slice,
    /// not a copy.
    pub fn block(&self, key: u64, block_id: i64, len: usize) -> Bytes {
        let len = len.min(self.max_block);
        // Adding the key (rather than hashing it in) keeps equal ids of two apps at different
        // offsets whenever their keys differ modulo the span, not merely with high probability.
        let slots = (POOL_SPAN / 8) as u64;
        let at = (splitmix(block_id as u64).wrapping_add(key) % slots) as usize * 8;
        self.pool.slice(at..at + len)
    }

    /// Whether a block read back is intact: its CRC field matches its bytes and the bytes are
    /// the ones this app (`key`) wrote under `block_id`.
    pub fn matches(&self, key: u64, block_id: i64, len: usize, data: &[u8], crc: i64) -> bool {
        i64::from(crc32fast::hash(data)) == crc && data == self.block(key, block_id, len)
    }

    /// Zeros-free bytes of any length up to the pool size, for the discard server's reads.
    pub fn prefix(&self, len: usize) -> Bytes {
        self.pool.slice(..len.min(self.pool.len()))
    }
}

/// The payload key of an app: blocks of apps with different ids have different bytes.
pub fn app_key(app: &str) -> u64 {
    // FNV-1a, then mixed: stable across runs and crate versions, unlike `DefaultHasher`.
    let h = app.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    splitmix(h)
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The shape of one shuffle: `maps` map tasks each write `blocks_per_partition` blocks of
/// `block_size` bytes into each of `partitions` partitions.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Map tasks (task attempt ids `0..maps`).
    pub maps: usize,
    /// Partitions (`0..partitions`).
    pub partitions: usize,
    /// Payload bytes per block.
    pub block_size: usize,
    /// Blocks per (map, partition).
    pub blocks_per_partition: usize,
    /// How block ids are packed (the client's `blockIdLayout`).
    pub layout: BlockIdLayout,
}

impl Shape {
    /// The shape closest to `total` bytes: at least one block per (map, partition).
    pub fn for_total(
        total: u64,
        maps: usize,
        partitions: usize,
        block_size: usize,
        layout: BlockIdLayout,
    ) -> Shape {
        let per_cell = (maps * partitions * block_size).max(1) as u64;
        Shape {
            maps,
            partitions,
            block_size,
            blocks_per_partition: (total / per_cell).max(1) as usize,
            layout,
        }
    }

    /// Payload bytes of the whole shuffle.
    pub fn total_bytes(&self) -> u64 {
        (self.maps * self.partitions * self.blocks_per_partition * self.block_size) as u64
    }

    /// Payload bytes of one partition.
    pub fn partition_bytes(&self) -> u64 {
        (self.maps * self.blocks_per_partition * self.block_size) as u64
    }

    /// The id of a map's `seq`th block of `partition`, as the Java client builds it.
    pub fn block_id(&self, map: usize, partition: usize, seq: usize) -> i64 {
        self.layout
            .block_id(seq as i64, partition as i32, map as i64)
    }

    /// Every block id of `partition`, sorted.
    pub fn partition_ids(&self, partition: usize) -> Vec<i64> {
        let mut ids: Vec<i64> = (0..self.maps)
            .flat_map(|m| {
                (0..self.blocks_per_partition).map(move |s| self.block_id(m, partition, s))
            })
            .collect();
        ids.sort_unstable();
        ids
    }

    /// A map task's blocks in send order, cut into requests of about `request_bytes`: blocks
    /// of all partitions interleaved as a map's write buffers fill, like the Java client's.
    pub fn requests(&self, map: usize, request_bytes: usize) -> Vec<Vec<(usize, i64)>> {
        let per_request = (request_bytes / self.block_size.max(1)).max(1);
        let mut out = Vec::new();
        let mut current = Vec::with_capacity(per_request);
        for seq in 0..self.blocks_per_partition {
            for p in 0..self.partitions {
                current.push((p, self.block_id(map, p, seq)));
                if current.len() == per_request {
                    out.push(std::mem::replace(
                        &mut current,
                        Vec::with_capacity(per_request),
                    ));
                }
            }
        }
        if !current.is_empty() {
            out.push(current);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_stable_and_distinct() {
        let p = Payloads::new(1024);
        assert_eq!(p.block(0, 7, 1024), p.block(0, 7, 1024));
        assert_ne!(p.block(0, 7, 1024), p.block(0, 8, 1024));
        let s = Shape::for_total(1 << 20, 4, 8, 1024, BlockIdLayout::DEFAULT);
        assert_eq!(s.blocks_per_partition, 32);
        assert_eq!(s.total_bytes(), 1 << 20);
        let reqs = s.requests(1, 10 * 1024);
        assert_eq!(reqs.iter().map(Vec::len).sum::<usize>(), 8 * 32);
        assert!(reqs.iter().all(|r| r.len() <= 10));
        let ids = s.partition_ids(3);
        assert_eq!(ids.len(), 4 * 32);
        assert!(ids
            .iter()
            .all(|id| BlockIdLayout::DEFAULT.partition_of(*id) == 3));
    }

    /// Two apps' blocks with the same id differ, and a block of one app served for the other
    /// (with its own, correct CRC) is rejected, while each app's own block passes.
    #[test]
    fn apps_blocks_differ_and_a_swap_is_rejected() {
        let p = Payloads::new(4096);
        let (a, b) = (app_key("app_1_0"), app_key("app_2_0"));
        assert_ne!(a, b);
        for id in [0i64, 1, 7, 1 << 40, -1] {
            let of_a = p.block(a, id, 4096);
            let of_b = p.block(b, id, 4096);
            assert_ne!(of_a, of_b, "block {id}");
            let crc_b = i64::from(crc32fast::hash(&of_b));
            let crc_a = i64::from(crc32fast::hash(&of_a));
            assert!(p.matches(a, id, 4096, &of_a, crc_a));
            assert!(p.matches(b, id, 4096, &of_b, crc_b));
            assert!(
                !p.matches(a, id, 4096, &of_b, crc_b),
                "b's block {id} passed as a's"
            );
            assert!(
                !p.matches(b, id, 4096, &of_a, crc_a),
                "a's block {id} passed as b's"
            );
            // A right block under a wrong CRC field is rejected too.
            assert!(!p.matches(a, id, 4096, &of_a, crc_a ^ 1));
        }
    }
}
