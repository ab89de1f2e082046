//! The block ids map tasks reported for one shuffle (`reportShuffleResult`), and the per-reducer
//! queries on them (`getShuffleResult`, `getShuffleResultForMultiPart`); SEMANTICS §4.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use roaring::RoaringTreemap;

use crate::error::{Error, Result};
use crate::id_set::IdSet;
use crate::ids::BlockIdLayout;

/// Reported block ids of one shuffle, kept per reported partition id.
///
/// Java keeps `bitmapNum` bitmaps and files partition `p` under `p % bitmapNum`, so a query
/// scans ids of unrelated partitions. Here each partition id gets its own [`IdSet`] (a
/// sorted vector while small: most partitions of a wide shuffle hold few ids), so a
/// reducer's query costs O(its own ids) whatever the shuffle's size; `bitmapNum` is only
/// remembered to answer a mismatching report the way Java does.
///
/// Maps are shared with readers through `Arc` (copy-on-write): a query clones the `Arc`s
/// under the lock and builds its union after releasing it, so reports are never stuck behind
/// a large query. A report that lands while a query still holds a partition's `Arc` pays one
/// copy of that partition; shuffle results are normally read after the map stage, so this is
/// rare.
#[derive(Debug, Default)]
pub struct ReportedBlockIds {
    /// Short critical sections only: map lookups, `Arc` clones and per-id inserts.
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// `bitmapNum` of the first report; `None` until this shuffle got a report.
    bitmap_num: Option<i32>,
    /// Ids as reported, keyed by the partition id the client reported them under.
    by_partition: HashMap<i32, Arc<IdSet>>,
    /// Sum of the per-partition cardinalities.
    total: u64,
}

impl ReportedBlockIds {
    /// Records one `reportShuffleResult`; returns how many ids were new to their partition.
    ///
    /// Duplicates (task retries, speculative attempts, replicas reporting the same block) are
    /// ignored, and ids from failed attempts are kept: readers filter by task id. The request
    /// is validated as a whole before anything is applied, so a rejected report leaves no
    /// trace: `bitmap_num <= 0`, a negative partition id or a negative block id is
    /// [`Error::BadRequest`]. `bitmap_num` is fixed by the first report; a later one with
    /// another value is [`Error::Internal`], as Java answers `INTERNAL_ERROR`. A report with
    /// no ids still marks the shuffle as reported (see [`ReportedBlockIds::get`]).
    pub fn report(&self, bitmap_num: i32, parts: &[(i32, Vec<i64>)]) -> Result<u64> {
        if bitmap_num <= 0 {
            return Err(Error::bad_request(format!(
                "bitmapNum {bitmap_num} must be positive"
            )));
        }
        for (partition, ids) in parts {
            if *partition < 0 {
                return Err(Error::bad_request(format!(
                    "partitionId {partition} in reportShuffleResult is negative"
                )));
            }
            if let Some(id) = ids.iter().find(|id| **id < 0) {
                return Err(Error::bad_request(format!(
                    "block id {id} reported for partition {partition} is negative"
                )));
            }
        }

        let mut inner = self.inner.lock();
        match inner.bitmap_num {
            None => inner.bitmap_num = Some(bitmap_num),
            Some(fixed) if fixed != bitmap_num => {
                return Err(Error::Internal {
                    reason: format!(
                        "reportShuffleResult with bitmapNum {bitmap_num}, but this shuffle's \
                         first report fixed it at {fixed}"
                    ),
                });
            }
            Some(_) => {}
        }
        let mut added = 0u64;
        for (partition, ids) in parts.iter().filter(|(_, ids)| !ids.is_empty()) {
            let map = match inner.by_partition.entry(*partition) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(Arc::default()),
            };
            let map = Arc::make_mut(map);
            // Validated above: every id is non-negative, so the cast keeps its value.
            added += ids
                .iter()
                .map(|&id| u64::from(map.insert(id as u64)))
                .sum::<u64>();
        }
        inner.total += added;
        Ok(added)
    }

    /// The union of the ids reported under `partitions`, for `getShuffleResult*`.
    ///
    /// `None` when this shuffle never got a report: the caller answers `SUCCESS` with empty
    /// bytes, as Java does. Partitions nothing was reported for contribute nothing.
    ///
    /// Consistency check (Java's "Inconsistent block number for partitions"): every returned id
    /// must carry, under `layout`, one of the requested partition ids, else
    /// [`Error::Internal`]. It fires when the client queries with a different block-id layout
    /// than it built the ids with, which would otherwise silently lose or invent blocks.
    pub fn get(&self, partitions: &[i32], layout: BlockIdLayout) -> Result<Option<RoaringTreemap>> {
        let mut wanted = partitions.to_vec();
        wanted.sort_unstable();
        wanted.dedup();

        let maps: Vec<(i32, Arc<IdSet>)> = {
            let inner = self.inner.lock();
            if inner.bitmap_num.is_none() {
                return Ok(None);
            }
            wanted
                .iter()
                .filter_map(|p| inner.by_partition.get(p).map(|m| (*p, Arc::clone(m))))
                .collect()
        };

        let mut union = match maps.split_first() {
            Some(((_, first), _)) => first.to_treemap(),
            None => RoaringTreemap::new(),
        };
        for (_, map) in maps.iter().skip(1) {
            map.union_into(&mut union);
        }

        let stray = |id: &u64| {
            wanted
                .binary_search(&layout.partition_of(*id as i64))
                .is_err()
        };
        // An id normally carries the partition it was reported under, so each map is checked
        // against its own partition id: linear in the ids. Only an id that carries another
        // partition pays the search among the requested ones (a search per id made a
        // 10k-partition query cost O(ids x log partitions); benches/README round 5).
        let any_stray = maps.iter().any(|(p, map)| {
            map.iter()
                .any(|id| layout.partition_of(id as i64) != *p && stray(&id))
        });
        if let Some(first_stray) = any_stray.then(|| union.iter().find(stray)).flatten() {
            let strays = union.iter().filter(stray).count();
            return Err(Error::Internal {
                reason: format!(
                    "Inconsistent block number for partitions {}: {} block ids reported, {} of \
                     them not in these partitions under blockIdLayout {}/{}/{} (e.g. block id \
                     {first_stray} → partition {}); the client queries with a different layout \
                     than it built the block ids with",
                    list_partitions(&wanted),
                    union.len(),
                    strays,
                    layout.sequence_bits,
                    layout.partition_bits,
                    layout.task_attempt_bits,
                    layout.partition_of(first_stray as i64),
                ),
            });
        }
        Ok(Some(union))
    }

    /// Ids held for this shuffle (memory accounting, status pages).
    ///
    /// Exact as long as each id is reported under one partition id, which is what clients do:
    /// an id reported under two partition ids is stored, and counted, once per partition.
    /// Kept as a running counter so that reading it never walks the bitmaps.
    pub fn total(&self) -> u64 {
        self.inner.lock().total
    }

    /// `bitmapNum` and every partition's ids (shared, not copied), for a journal snapshot.
    pub fn export(&self) -> (Option<i32>, Vec<(i32, Arc<IdSet>)>) {
        let inner = self.inner.lock();
        (
            inner.bitmap_num,
            inner
                .by_partition
                .iter()
                .map(|(p, m)| (*p, Arc::clone(m)))
                .collect(),
        )
    }

    /// Adds ids recovered after a restart (as if reported), fixing `bitmapNum` if unset.
    pub fn import(&self, bitmap_num: i32, parts: Vec<(i32, RoaringTreemap)>) {
        let mut inner = self.inner.lock();
        inner.bitmap_num.get_or_insert(bitmap_num);
        for (p, ids) in parts {
            let map = Arc::make_mut(inner.by_partition.entry(p).or_default());
            let added = map.extend_from(ids);
            inner.total += added;
        }
    }

    /// Whether `partition` has reported block ids.
    pub fn has(&self, partition: i32) -> bool {
        self.inner.lock().by_partition.contains_key(&partition)
    }

    /// Number of partition ids with at least one reported block id.
    pub fn partition_count(&self) -> usize {
        self.inner.lock().by_partition.len()
    }
}

/// `[p0, p1, …]`, cut short for multi-partition queries so the error stays one readable line.
fn list_partitions(partitions: &[i32]) -> String {
    const SHOWN: usize = 8;
    let head: Vec<String> = partitions.iter().take(SHOWN).map(i32::to_string).collect();
    if partitions.len() > SHOWN {
        format!("[{}, … ({} in all)]", head.join(", "), partitions.len())
    } else {
        format!("[{}]", head.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::StatusCode;

    const L: BlockIdLayout = BlockIdLayout::DEFAULT;

    fn ids(map: &RoaringTreemap) -> Vec<u64> {
        map.iter().collect()
    }

    #[test]
    fn data_formats_worked_example() {
        // Partition 3, task 7, sequence numbers 0 and 1 (DATA-FORMATS §1).
        let seq0 = L.block_id(0, 3, 7);
        let seq1 = L.block_id(1, 3, 7);
        assert_eq!((seq0, seq1), (6_291_463, 35_184_378_380_295));
        let r = ReportedBlockIds::default();
        assert_eq!(r.report(1, &[(3, vec![seq0, seq1])]).expect("report"), 2);
        let got = r.get(&[3], L).expect("get").expect("reported");
        assert_eq!(ids(&got), vec![6_291_463, 35_184_378_380_295]);
        assert_eq!(r.total(), 2);
        assert_eq!(r.partition_count(), 1);
    }

    #[test]
    fn never_reported_is_none_but_an_empty_report_counts() {
        let r = ReportedBlockIds::default();
        assert!(r.get(&[0], L).expect("get").is_none());
        assert_eq!(r.report(5, &[]).expect("empty report"), 0);
        let got = r.get(&[0], L).expect("get").expect("reported now");
        assert!(got.is_empty());
        assert_eq!(r.partition_count(), 0);
    }

    #[test]
    fn duplicates_are_ignored() {
        let r = ReportedBlockIds::default();
        let a = L.block_id(0, 1, 1);
        let b = L.block_id(1, 1, 1);
        assert_eq!(r.report(2, &[(1, vec![a, a, b])]).expect("first"), 2);
        // a retry, and a replica reporting the same blocks in a second entry
        assert_eq!(
            r.report(2, &[(1, vec![b]), (1, vec![a, b])])
                .expect("retry"),
            0
        );
        assert_eq!(r.total(), 2);
        assert_eq!(ids(&r.get(&[1], L).expect("get").expect("some")).len(), 2);
    }

    #[test]
    fn queries_return_only_the_requested_partitions() {
        let r = ReportedBlockIds::default();
        let parts: Vec<(i32, Vec<i64>)> = (0..10)
            .map(|p| {
                (
                    p,
                    (0..3)
                        .map(|seq| L.block_id(seq, p, 100 + p as i64))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(r.report(3, &parts).expect("report"), 30);
        assert_eq!(r.partition_count(), 10);
        assert_eq!(r.total(), 30);

        let one = r.get(&[4], L).expect("get").expect("some");
        assert_eq!(one.len(), 3);
        assert!(one.iter().all(|id| L.partition_of(id as i64) == 4));

        let multi = r.get(&[7, 2, 7, 9], L).expect("get").expect("some");
        assert_eq!(multi.len(), 9);
        let seen: std::collections::BTreeSet<i32> =
            multi.iter().map(|id| L.partition_of(id as i64)).collect();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![2, 7, 9]);

        // A partition nobody reported for, in a shuffle that has reports: empty, not None.
        assert!(r.get(&[42], L).expect("get").expect("some").is_empty());
    }

    #[test]
    fn bitmap_num_is_fixed_by_the_first_report() {
        let r = ReportedBlockIds::default();
        r.report(4, &[(0, vec![1])]).expect("first");
        let err = r.report(5, &[(0, vec![2])]).expect_err("mismatch");
        assert!(matches!(err, Error::Internal { .. }), "{err}");
        assert_eq!(err.status(), StatusCode::InternalError);
        assert_eq!(r.total(), 1, "the mismatching report applied nothing");
        r.report(4, &[(0, vec![2])]).expect("same bitmapNum");
        assert_eq!(r.total(), 2);
    }

    #[test]
    fn invalid_reports_apply_nothing() {
        let r = ReportedBlockIds::default();
        for bitmap_num in [0, -1] {
            let err = r
                .report(bitmap_num, &[(0, vec![1])])
                .expect_err("bitmapNum");
            assert_eq!(err.status(), StatusCode::InvalidRequest);
        }
        let err = r
            .report(1, &[(0, vec![1, 2]), (1, vec![3, -4])])
            .expect_err("negative id");
        assert_eq!(err.status(), StatusCode::InvalidRequest);
        assert!(err.to_string().contains("-4"), "{err}");
        let err = r
            .report(1, &[(0, vec![1]), (-1, vec![3])])
            .expect_err("negative partition");
        assert_eq!(err.status(), StatusCode::InvalidRequest);

        // Nothing above was applied, not even bitmapNum.
        assert!(r.get(&[0, 1], L).expect("get").is_none());
        assert_eq!((r.total(), r.partition_count()), (0, 0));
        r.report(7, &[(0, vec![1])])
            .expect("first valid report fixes bitmapNum");
    }

    #[test]
    fn layout_mismatch_is_an_internal_error() {
        // Spark with maxPartitions set builds ids with 21/20/22; a reader using the default
        // 18/24/21 layout decodes other partition ids from them.
        let built = BlockIdLayout::new(21, 20, 22).expect("valid layout");
        let r = ReportedBlockIds::default();
        let id = built.block_id(0, 5, 3);
        r.report(1, &[(5, vec![id])]).expect("report");
        assert_eq!(
            ids(&r.get(&[5], built).expect("same layout").expect("some")),
            vec![id as u64]
        );

        let err = r.get(&[5], L).expect_err("different layout");
        assert!(matches!(err, Error::Internal { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with("Inconsistent block number for partitions [5]"),
            "{msg}"
        );
        assert!(msg.contains("18/24/21"), "{msg}");
    }

    #[test]
    fn readers_holding_a_result_do_not_see_later_reports() {
        let r = ReportedBlockIds::default();
        r.report(1, &[(0, vec![1])]).expect("report");
        let before = r.get(&[0], L).expect("get").expect("some");
        r.report(1, &[(0, vec![2])]).expect("report");
        assert_eq!(ids(&before), vec![1]);
        assert_eq!(
            ids(&r.get(&[0], L).expect("get").expect("some")),
            vec![1, 2]
        );
    }

    #[test]
    fn long_partition_lists_are_cut_in_messages() {
        assert_eq!(list_partitions(&[1, 2]), "[1, 2]");
        let many: Vec<i32> = (0..20).collect();
        assert_eq!(
            list_partitions(&many),
            "[0, 1, 2, 3, 4, 5, 6, 7, … (20 in all)]"
        );
    }
}
