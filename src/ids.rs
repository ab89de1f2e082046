//! Validated identifiers: app ids (which become directory names), shuffle and partition keys,
//! and the block-id layout used to pull partition ids out of block ids.

use std::fmt;
use std::sync::Arc;

/// An id or range a request names that no Uniffle server would accept; the service answers it
/// as a bad request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IdError(pub String);

impl IdError {
    fn new(reason: impl Into<String>) -> Self {
        IdError(reason.into())
    }
}

type Result<T> = std::result::Result<T, IdError>;

/// A Uniffle app id, checked once at the edge so it is safe to use as a directory name.
///
/// App ids come from clients verbatim and become `<disk>/<appId>/...` paths, so this is a
/// security boundary: ids with path separators, NUL, `.`/`..`, or that are empty or absurdly
/// long are rejected with `INVALID_REQUEST` before they reach any path.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId(Arc<str>);

/// Longest app id accepted (a directory-name component must fit in NAME_MAX = 255).
pub const MAX_APP_ID_LEN: usize = 255;

impl AppId {
    /// Validates a client-supplied id.
    pub fn parse(raw: &str) -> Result<Self> {
        if raw.is_empty() {
            return Err(IdError::new("appId is empty"));
        }
        if raw.len() > MAX_APP_ID_LEN {
            return Err(IdError::new(format!(
                "appId is {} bytes long, the limit is {MAX_APP_ID_LEN}",
                raw.len()
            )));
        }
        if raw.starts_with('.') {
            // Covers `.` and `..`, and keeps app directories apart from the server's own
            // dot-files in the data paths (the disk health probe).
            return Err(IdError::new(format!(
                "appId {raw:?} must not start with '.'"
            )));
        }
        if let Some(c) = raw
            .chars()
            .find(|c| matches!(c, '/' | '\\' | '\0') || c.is_control())
        {
            return Err(IdError::new(format!(
                "appId {:?} contains the forbidden character {c:?}",
                raw.escape_debug().to_string()
            )));
        }
        Ok(AppId(Arc::from(raw)))
    }

    /// The id as sent by the client.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

/// An inclusive partition range `[start, end]` as registered by `registerShuffle`.
///
/// Buffers and files are kept per registered range, not per partition (Spark registers
/// `[p, p]`; MapReduce may register wider ranges).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionRange {
    /// First partition, inclusive.
    pub start: i32,
    /// Last partition, inclusive.
    pub end: i32,
}

impl PartitionRange {
    /// Checks `0 <= start <= end`.
    pub fn new(start: i32, end: i32) -> Result<Self> {
        if start < 0 || end < start {
            return Err(IdError::new(format!(
                "partition range [{start}, {end}] is invalid"
            )));
        }
        Ok(PartitionRange { start, end })
    }

    /// The range a reader addresses with `(partitionId, partitionNumPerRange, partitionNum)`.
    pub fn for_read(partition: i32, per_range: i32, partition_num: i32) -> Result<Self> {
        if per_range <= 0 {
            return Err(IdError::new(format!(
                "partitionNumPerRange {per_range} must be positive"
            )));
        }
        if partition < 0 || (partition_num > 0 && partition >= partition_num) {
            return Err(IdError::new(format!(
                "partitionId {partition} is outside [0, {partition_num})"
            )));
        }
        let start = (partition / per_range) * per_range;
        let end = start.checked_add(per_range - 1).unwrap_or(i32::MAX);
        Ok(PartitionRange { start, end })
    }

    /// True when `partition` lies in the range.
    pub fn contains(&self, partition: i32) -> bool {
        self.start <= partition && partition <= self.end
    }

    /// Directory name of the range: `<start>-<end>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.start, self.end)
    }
}

impl fmt::Display for PartitionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.start, self.end)
    }
}

/// An (app, shuffle) pair.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShuffleKey {
    /// The app.
    pub app: AppId,
    /// The shuffle id within the app.
    pub shuffle: i32,
}

/// One registered partition range of one shuffle: the unit of buffering, spilling and files.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionKey {
    /// The app.
    pub app: AppId,
    /// The shuffle id within the app.
    pub shuffle: i32,
    /// The registered range.
    pub range: PartitionRange,
}

impl PartitionKey {
    /// Builds a key.
    pub fn new(app: AppId, shuffle: i32, range: PartitionRange) -> Self {
        PartitionKey {
            app,
            shuffle,
            range,
        }
    }

    /// The shuffle this partition belongs to.
    pub fn shuffle_key(&self) -> ShuffleKey {
        ShuffleKey {
            app: self.app.clone(),
            shuffle: self.shuffle,
        }
    }
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.app, self.shuffle, self.range)
    }
}

/// How a client packs sequence number, partition id and task attempt id into a block id.
///
/// Sent by 0.9+ clients with every `getShuffleResult*`; 0.8 clients send nothing and use the
/// fixed 18/24/21 layout ([`BlockIdLayout::DEFAULT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockIdLayout {
    /// Bits of the sequence number (top).
    pub sequence_bits: u32,
    /// Bits of the partition id (middle).
    pub partition_bits: u32,
    /// Bits of the task attempt id (bottom).
    pub task_attempt_bits: u32,
}

impl BlockIdLayout {
    /// The layout of ≤0.8 clients and the default of 0.9/0.10.
    pub const DEFAULT: BlockIdLayout = BlockIdLayout {
        sequence_bits: 18,
        partition_bits: 24,
        task_attempt_bits: 21,
    };

    /// Validates a client layout: each part in 1..=31, sum exactly 63 (Java's rule).
    pub fn new(sequence_bits: i32, partition_bits: i32, task_attempt_bits: i32) -> Result<Self> {
        let ok = |b: i32| (1..=31).contains(&b);
        if !(ok(sequence_bits) && ok(partition_bits) && ok(task_attempt_bits))
            || sequence_bits + partition_bits + task_attempt_bits != 63
        {
            return Err(IdError::new(format!(
                "blockIdLayout {sequence_bits}/{partition_bits}/{task_attempt_bits} is invalid: \
                 each part must be in 1..=31 and they must sum to 63"
            )));
        }
        Ok(BlockIdLayout {
            sequence_bits: sequence_bits as u32,
            partition_bits: partition_bits as u32,
            task_attempt_bits: task_attempt_bits as u32,
        })
    }

    /// The partition id encoded in `block_id`.
    pub fn partition_of(&self, block_id: i64) -> i32 {
        ((block_id as u64 >> self.task_attempt_bits) & ((1u64 << self.partition_bits) - 1)) as i32
    }

    /// The task attempt id encoded in `block_id`.
    pub fn task_attempt_of(&self, block_id: i64) -> i64 {
        (block_id as u64 & ((1u64 << self.task_attempt_bits) - 1)) as i64
    }

    /// Builds a block id (used by tests and the load generator, as the Java client does).
    pub fn block_id(&self, sequence: i64, partition: i32, task_attempt: i64) -> i64 {
        ((sequence << (self.partition_bits + self.task_attempt_bits))
            | ((partition as i64) << self.task_attempt_bits)
            | task_attempt)
            & i64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn app_ids_with_path_characters_are_rejected() {
        for bad in [
            "", ".", "..", ".hidden", "a/b", "../x", "a\\b", "a\0b", "a\nb",
        ] {
            let err = crate::error::Error::from(AppId::parse(bad).expect_err(bad));
            assert_eq!(
                err.status(),
                crate::proto::StatusCode::InvalidRequest,
                "{bad:?}"
            );
        }
        assert!(AppId::parse(&"x".repeat(256)).is_err());
        for good in [
            "local-1716900000000_1716900000123",
            "application_1_0042_17",
            "a..b",
        ] {
            AppId::parse(good).expect(good);
        }
    }

    #[test]
    fn worked_example_from_data_formats() {
        let l = BlockIdLayout::DEFAULT;
        assert_eq!(l.block_id(0, 3, 7), 6_291_463);
        assert_eq!(l.block_id(1, 3, 7), 35_184_378_380_295);
        assert_eq!(l.partition_of(35_184_378_380_295), 3);
        assert_eq!(l.task_attempt_of(35_184_378_380_295), 7);
    }

    #[test]
    fn read_ranges() {
        assert_eq!(
            PartitionRange::for_read(5, 1, 10).unwrap(),
            PartitionRange { start: 5, end: 5 }
        );
        assert_eq!(
            PartitionRange::for_read(5, 4, 10).unwrap(),
            PartitionRange { start: 4, end: 7 }
        );
        assert!(PartitionRange::for_read(5, 0, 10).is_err());
        assert!(PartitionRange::for_read(10, 1, 10).is_err());
        assert!(PartitionRange::for_read(-1, 1, 10).is_err());
    }

    proptest! {
        #[test]
        fn layout_round_trips(s in 1i32..=31, p in 1i32..=31, seq in any::<i64>(), part in any::<i32>(), task in any::<i64>()) {
            let t = 63 - s - p;
            prop_assume!((1..=31).contains(&t));
            let l = BlockIdLayout::new(s, p, t).unwrap();
            let part = (part as i64 & ((1 << p) - 1)) as i32;
            let task = task & ((1 << t) - 1);
            let seq = seq & ((1 << s) - 1);
            let id = l.block_id(seq, part, task);
            prop_assert!(id >= 0);
            prop_assert_eq!(l.partition_of(id), part);
            prop_assert_eq!(l.task_attempt_of(id), task);
        }
    }
}
