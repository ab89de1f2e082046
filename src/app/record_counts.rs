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

/// One shuffle's counts: partition id → its attempts' counts, sorted by attempt.
#[derive(Debug, Default)]
pub struct RecordCounts {
    inner: Mutex<HashMap<i32, Vec<AttemptRecords>>>,
}

/// One count as a report carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordCount {
    /// The partition the records were written to.
    pub partition: i32,
    /// The map task attempt that wrote them.
    pub task_attempt: i64,
    /// How many records.
    pub records: i64,
}

/// One attempt's count of a partition (16 bytes, as kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptRecords {
    /// The map task attempt.
    pub task_attempt: i64,
    /// How many records it wrote to the partition.
    pub records: i64,
}

/// One partition's counts as answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionCounts {
    /// The partition.
    pub partition: i32,
    /// Its attempts' counts, sorted by attempt.
    pub attempts: Vec<AttemptRecords>,
}

impl RecordCounts {
    /// Rejects a report whose counts make no sense (a negative partition or count), before
    /// anything of it is applied.
    pub fn validate(counts: &[RecordCount]) -> Result<()> {
        match counts.iter().find(|c| c.partition < 0 || c.records < 0) {
            Some(RecordCount {
                partition: p,
                task_attempt: t,
                records: n,
            }) => Err(Error::bad_request(format!(
                "partitionStats of partition {p}, task attempt {t}: {n} records is not a \
                 non-negative count of a non-negative partition"
            ))),
            None => Ok(()),
        }
    }

    /// Keeps `counts` (the registry has checked them against the report's block ids).
    pub fn report(&self, counts: &[RecordCount]) {
        let mut inner = self.inner.lock();
        for c in counts {
            let tasks = inner.entry(c.partition).or_default();
            let kept = AttemptRecords {
                task_attempt: c.task_attempt,
                records: c.records,
            };
            match tasks.binary_search_by_key(&c.task_attempt, |a| a.task_attempt) {
                Ok(at) => tasks[at] = kept,
                Err(at) => tasks.insert(at, kept),
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
            .filter_map(|p| {
                inner.get(p).map(|tasks| PartitionCounts {
                    partition: *p,
                    attempts: tasks.clone(),
                })
            })
            .collect()
    }

    /// Every count, for a journal snapshot.
    pub fn export(&self) -> Vec<PartitionCounts> {
        let mut out: Vec<_> = self
            .inner
            .lock()
            .iter()
            .map(|(p, t)| PartitionCounts {
                partition: *p,
                attempts: t.clone(),
            })
            .collect();
        out.sort_unstable_by_key(|c| c.partition);
        out
    }

    /// Counts recovered after a restart, as if reported.
    pub fn import(&self, counts: &[RecordCount]) {
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

    fn count(partition: i32, task_attempt: i64, records: i64) -> RecordCount {
        RecordCount {
            partition,
            task_attempt,
            records,
        }
    }

    fn answer(partition: i32, attempts: &[(i64, i64)]) -> PartitionCounts {
        PartitionCounts {
            partition,
            attempts: attempts
                .iter()
                .map(|&(task_attempt, records)| AttemptRecords {
                    task_attempt,
                    records,
                })
                .collect(),
        }
    }

    #[test]
    fn last_report_of_an_attempt_wins() {
        let c = RecordCounts::default();
        c.report(&[count(0, 7, 10), count(1, 7, 5)]);
        c.report(&[count(0, 9, 4), count(0, 7, 11)]);
        assert_eq!(
            c.get(&[1, 0, 0, 2]),
            vec![answer(1, &[(7, 5)]), answer(0, &[(7, 11), (9, 4)])]
        );
        assert_eq!(c.len(), 3);
        let copy = RecordCounts::default();
        for p in c.export() {
            let counts: Vec<RecordCount> = p
                .attempts
                .iter()
                .map(|a| count(p.partition, a.task_attempt, a.records))
                .collect();
            copy.import(&counts);
        }
        assert_eq!(copy.export(), c.export());
    }

    #[test]
    fn negative_counts_and_partitions_are_refused() {
        assert!(RecordCounts::validate(&[count(0, 1, 2)]).is_ok());
        for bad in [count(-1, 1, 2), count(0, 1, -2)] {
            let e = RecordCounts::validate(&[bad]).unwrap_err();
            assert!(e.to_string().contains("partitionStats"), "{e}");
        }
    }
}
