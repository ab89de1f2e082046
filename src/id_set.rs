//! A set of 64-bit block ids that stays a sorted vector while small and becomes a Roaring
//! treemap past [`SMALL_MAX`] ids.
//!
//! Every partition holds two id sets (the memory buffer's received ids and the reported ids),
//! and most partitions of a wide shuffle hold few ids. An empty `RoaringTreemap` allocates
//! nothing, but its first id costs ~490 B (a B-tree leaf and a container), so two one-id maps
//! were more than half of a spilled partition's ~1.9 KB of heap (benches/README round 5). A
//! sorted `Vec<u64>` of one id costs 32 B.

use roaring::RoaringTreemap;

/// Most ids kept in the vector form; the next insert moves the set to a treemap.
///
/// Chosen from a measurement (benches/README round 5, "small id sets") of Spark-shaped ids
/// (one id per map task, `BlockIdLayout::DEFAULT`): in the densest shape, one sequence number
/// so all ids share one container, the vector is smaller up to 64 ids (512 B against 608 B)
/// and the treemap from 65 on, because the vector's next growth doubles it to 1,024 B. Ids
/// with several sequence numbers spread over several buckets, where the vector stays smaller
/// up to ~256 ids; 64 is the bound at which the vector is never the larger form.
pub const SMALL_MAX: usize = 64;

/// A set of block ids; see the module doc. Iterates in ascending order in both forms.
#[derive(Debug, Clone)]
pub enum IdSet {
    /// Sorted, no duplicates, at most [`SMALL_MAX`] ids.
    Small(Vec<u64>),
    /// Once promoted, a set stays a treemap: removals are rare (a failed memory charge undoes
    /// its inserts) and flipping back and forth around the bound would copy on every call.
    Large(RoaringTreemap),
}

impl Default for IdSet {
    fn default() -> Self {
        IdSet::Small(Vec::new())
    }
}

impl PartialEq for IdSet {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl IdSet {
    /// An empty set (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `id`; `true` when it was not there yet.
    pub fn insert(&mut self, id: u64) -> bool {
        match self {
            IdSet::Small(v) => match v.binary_search(&id) {
                Ok(_) => false,
                Err(at) if v.len() < SMALL_MAX => {
                    v.insert(at, id);
                    true
                }
                Err(_) => {
                    let mut map: RoaringTreemap = v.iter().copied().collect();
                    map.insert(id);
                    *self = IdSet::Large(map);
                    true
                }
            },
            IdSet::Large(map) => map.insert(id),
        }
    }

    /// Removes `id`; `true` when it was there.
    pub fn remove(&mut self, id: u64) -> bool {
        match self {
            IdSet::Small(v) => match v.binary_search(&id) {
                Ok(at) => {
                    v.remove(at);
                    true
                }
                Err(_) => false,
            },
            IdSet::Large(map) => map.remove(id),
        }
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u64) -> bool {
        match self {
            IdSet::Small(v) => v.binary_search(&id).is_ok(),
            IdSet::Large(map) => map.contains(id),
        }
    }

    /// Number of ids.
    pub fn len(&self) -> u64 {
        match self {
            IdSet::Small(v) => v.len() as u64,
            IdSet::Large(map) => map.len(),
        }
    }

    /// Whether the set holds no id.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            IdSet::Small(v) => Iter::Small(v.iter()),
            IdSet::Large(map) => Iter::Large(map.iter()),
        }
    }

    /// Adds every id of this set to `out` (building a query's union).
    pub fn union_into(&self, out: &mut RoaringTreemap) {
        match self {
            IdSet::Small(v) => out.extend(v.iter().copied()),
            IdSet::Large(map) => *out |= map,
        }
    }

    /// The set as a treemap: what the wire format and the journal serialize.
    pub fn to_treemap(&self) -> RoaringTreemap {
        match self {
            IdSet::Small(v) => v.iter().copied().collect(),
            IdSet::Large(map) => map.clone(),
        }
    }

    /// Adds every id of `ids`; how many were new.
    ///
    /// Stays small when the result fits, so ids recovered from a journal snapshot take the
    /// same form they had before the restart.
    pub fn extend_from(&mut self, ids: RoaringTreemap) -> u64 {
        let before = self.len();
        match self {
            IdSet::Small(v) if v.len() as u64 + ids.len() <= SMALL_MAX as u64 => {
                for id in ids {
                    if let Err(at) = v.binary_search(&id) {
                        v.insert(at, id);
                    }
                }
            }
            IdSet::Small(v) => {
                let mut map = ids;
                map.extend(v.iter().copied());
                *self = IdSet::Large(map);
            }
            IdSet::Large(map) => *map |= ids,
        }
        self.len() - before
    }
}

/// Ascending iterator over an [`IdSet`].
///
/// The treemap's iterator is much larger than the slice's, but an iterator lives on the stack
/// for one loop; boxing it would add an allocation to every query of a large partition.
#[allow(clippy::large_enum_variant)]
pub enum Iter<'a> {
    /// Over the vector form.
    Small(std::slice::Iter<'a, u64>),
    /// Over the treemap form.
    Large(roaring::treemap::Iter<'a>),
}

impl Iterator for Iter<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        match self {
            Iter::Small(it) => it.next().copied(),
            Iter::Large(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Small(it) => it.size_hint(),
            Iter::Large(it) => it.size_hint(),
        }
    }
}

impl<'a> IntoIterator for &'a IdSet {
    type Item = u64;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::bitmap;
    use crate::ids::BlockIdLayout;
    use proptest::prelude::*;

    const L: BlockIdLayout = BlockIdLayout::DEFAULT;

    fn spark_ids(n: u64, seqs: u64) -> Vec<u64> {
        (0..n)
            .map(|j| L.block_id((j % seqs) as i64, 12_345, (j / seqs) as i64) as u64)
            .collect()
    }

    #[test]
    fn stays_small_up_to_the_bound_and_promotes_past_it() {
        let ids = spark_ids(SMALL_MAX as u64 + 1, 1);
        let mut set = IdSet::new();
        // Reverse order: every insert lands at the front of the vector.
        for &id in ids[..SMALL_MAX].iter().rev() {
            assert!(set.insert(id));
        }
        assert!(matches!(&set, IdSet::Small(v) if v.len() == SMALL_MAX));
        assert!(!set.insert(ids[3]), "a duplicate at the bound is no insert");
        assert!(matches!(set, IdSet::Small(_)), "nor a promotion");
        assert!(set.insert(ids[SMALL_MAX]));
        assert!(matches!(set, IdSet::Large(_)));
        assert_eq!(set.len(), ids.len() as u64);
        assert!(set.iter().eq(ids.iter().copied()));
        assert!(!set.insert(ids[0]), "duplicates after the promotion too");
        assert_eq!(set.len(), ids.len() as u64);
    }

    #[test]
    fn removal_in_both_forms() {
        let ids = spark_ids(SMALL_MAX as u64 + 10, 3);
        let mut set = IdSet::new();
        set.insert(ids[0]);
        set.insert(ids[1]);
        assert!(set.remove(ids[0]));
        assert!(!set.remove(ids[0]));
        assert!(set.iter().eq([ids[1]]));
        for &id in &ids {
            set.insert(id);
        }
        assert!(matches!(set, IdSet::Large(_)));
        assert!(set.remove(ids[5]));
        assert!(!set.contains(ids[5]));
        assert_eq!(set.len(), ids.len() as u64 - 1);
    }

    #[test]
    fn wire_bytes_equal_the_roaring_path_at_every_size_around_the_bound() {
        for seqs in [1, 4] {
            for n in [
                0,
                1,
                2,
                SMALL_MAX as u64 - 1,
                SMALL_MAX as u64,
                SMALL_MAX as u64 + 1,
                500,
            ] {
                let ids = spark_ids(n, seqs);
                let mut set = IdSet::new();
                let mut reference = RoaringTreemap::new();
                for &id in &ids {
                    set.insert(id);
                    reference.insert(id);
                }
                assert_eq!(
                    bitmap::encode(&set.to_treemap()),
                    bitmap::encode(&reference),
                    "{n} ids, {seqs} sequence numbers"
                );
                let mut union = RoaringTreemap::new();
                set.union_into(&mut union);
                assert_eq!(bitmap::encode(&union), bitmap::encode(&reference));
            }
        }
    }

    #[test]
    fn extend_from_keeps_the_small_form_when_it_fits() {
        let ids = spark_ids(SMALL_MAX as u64 + 1, 1);
        let mut set = IdSet::new();
        set.insert(ids[0]);
        let added = set.extend_from(ids[1..SMALL_MAX].iter().copied().collect());
        assert_eq!(added, SMALL_MAX as u64 - 1);
        assert!(matches!(set, IdSet::Small(_)));
        let added = set.extend_from(ids.iter().copied().collect());
        assert_eq!(added, 1);
        assert!(matches!(set, IdSet::Large(_)));
        assert!(set.iter().eq(ids.iter().copied()));
    }

    proptest! {
        /// Any sequence of inserts and removals answers, iterates and serializes as a
        /// `RoaringTreemap` given the same calls.
        #[test]
        fn behaves_as_a_treemap(
            ops in proptest::collection::vec((any::<bool>(), 0u64..200, 0u64..4), 0..400)
        ) {
            let mut set = IdSet::new();
            let mut reference = RoaringTreemap::new();
            for (insert, low, high) in ops {
                // Few distinct values, in a few buckets: duplicates and removals hit.
                let id = high << 40 | low;
                if insert {
                    prop_assert_eq!(set.insert(id), reference.insert(id));
                } else {
                    prop_assert_eq!(set.remove(id), reference.remove(id));
                }
                prop_assert_eq!(set.len(), reference.len());
                prop_assert_eq!(set.contains(id), reference.contains(id));
            }
            prop_assert!(set.iter().eq(reference.iter()));
            prop_assert_eq!(bitmap::encode(&set.to_treemap()), bitmap::encode(&reference));
        }
    }
}
