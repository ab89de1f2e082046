//! The record counts map task attempts reported per partition (`reportShuffleResult`
//! `partitionStats`, post-0.10), answered in `getShuffleResultForMultiPart` so that a reader
//! with integrity validation on can check that it read as many records as were written
//! (apache/uniffle#2669; no Uniffle server keeps them: #2673 is open).
//!
//! The registry keeps a count only when it is the reporting attempt's own, for a partition the
//! same report carries block ids for (`AppRegistry::report`): a record count without blocks is
//! nothing a reader could check, and so every kept count stands beside at least one block id.
//! Each kept count costs 16 bytes (task attempt id and count) in a vector per partition
//! (measured with the vectors' growth: 21-26 bytes, `spillway-bench curves records`); a task
//! attempt that reports again (a replica, a retried report) replaces its count, as the
//! client's map does.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// One shuffle's counts: partition id → (task attempt id, records), sorted by attempt.
#[derive(Debug, Default)]
pub struct RecordCounts {
    inner: Mutex<HashMap<i32, Vec<(i64, i64)>>>,
}

/// `(partition, task attempt, records)` as a report carries them.
pub type Count = (i32, i64, i64);

/// One partition's counts as answered: `(partition, [(task attempt, records)])`.
pub type PartitionCounts = (i32, Vec<(i64, i64)>);

impl RecordCounts {
    /// Rejects a report whose counts make no sense (a negative partition or count), before
    /// anything of it is applied.
    pub fn validate(counts: &[Count]) -> Result<()> {
        match counts.iter().find(|(p, _, n)| *p < 0 || *n < 0) {
            Some((p, t, n)) => Err(Error::bad_request(format!(
                "partitionStats of partition {p}, task attempt {t}: {n} records is not a \
                 non-negative count of a non-negative partition"
            ))),
            None => Ok(()),
        }
    }

    /// Keeps `counts` (the registry has checked them against the report's block ids).
    pub fn report(&self, counts: &[Count]) {
        let mut inner = self.inner.lock();
        for &(p, task, n) in counts {
            let tasks = inner.entry(p).or_default();
            match tasks.binary_search_by_key(&task, |(t, _)| *t) {
                Ok(at) => tasks[at].1 = n,
                Err(at) => tasks.insert(at, (task, n)),
            }
        }
    }

    /// The counts of `partitions` (each once, in the order asked; partitions without counts
    /// are left out), for `getShuffleResultForMultiPart`.
    pub fn get(&self, partitions: &[i32]) -> Vec<PartitionCounts> {
        let inner = self.inner.lock();
        if inner.is_empty() {
            return Vec::new();
        }
        let mut seen = std::collections::HashSet::new();
        partitions
            .iter()
            .filter(|p| seen.insert(**p))
            .filter_map(|p| inner.get(p).map(|tasks| (*p, tasks.clone())))
            .collect()
    }

    /// Every count, for a journal snapshot.
    pub fn export(&self) -> Vec<PartitionCounts> {
        let mut out: Vec<_> = self
            .inner
            .lock()
            .iter()
            .map(|(p, t)| (*p, t.clone()))
            .collect();
        out.sort_unstable_by_key(|(p, _)| *p);
        out
    }

    /// Counts recovered after a restart, as if reported.
    pub fn import(&self, counts: &[Count]) {
        self.report(counts);
    }

    /// Counts held (memory accounting: 16 bytes each).
    pub fn len(&self) -> usize {
        self.inner.lock().values().map(Vec::len).sum()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.inner.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_report_of_an_attempt_wins() {
        let c = RecordCounts::default();
        c.report(&[(0, 7, 10), (1, 7, 5)]);
        c.report(&[(0, 9, 4), (0, 7, 11)]);
        assert_eq!(
            c.get(&[1, 0, 0, 2]),
            vec![(1, vec![(7, 5)]), (0, vec![(7, 11), (9, 4)])]
        );
        assert_eq!(c.len(), 3);
        let copy = RecordCounts::default();
        for (p, tasks) in c.export() {
            let counts: Vec<Count> = tasks.into_iter().map(|(t, n)| (p, t, n)).collect();
            copy.import(&counts);
        }
        assert_eq!(copy.export(), c.export());
    }

    #[test]
    fn negative_counts_and_partitions_are_refused() {
        assert!(RecordCounts::validate(&[(0, 1, 2)]).is_ok());
        for bad in [(-1, 1, 2), (0, 1, -2)] {
            let e = RecordCounts::validate(&[bad]).unwrap_err();
            assert!(e.to_string().contains("partitionStats"), "{e}");
        }
    }
}
