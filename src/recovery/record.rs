//! The journal's records and their line format.
//!
//! One record per line: `<crc32 of the JSON, 8 hex digits> <JSON>\n`. Lines are written whole
//! by one `write` each batch, so a crash can only leave the last line torn; a reader stops at
//! the first line whose CRC or JSON does not check. JSON because the records are small and
//! rare next to block data (one per registration, report, commit or drop), and because an
//! operator can read the journal with `cut -d' ' -f2- | jq`.
//!
//! Every record is idempotent (a commit carries the counter's value, not an increment), so
//! replaying a snapshot followed by records that it already contains gives the same state.

use serde::{Deserialize, Serialize};

/// One journal entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Record {
    /// First line of every generation.
    Header {
        /// Generation number (the file name carries it too).
        gen: u64,
        /// The server id that wrote it; a journal of another id is not replayed.
        server_id: String,
    },
    /// Closes the snapshot that opens a generation; a generation without it is incomplete.
    SnapshotEnd,
    /// `registerShuffle` (or a snapshot of a registered shuffle).
    Register {
        /// App id.
        app: String,
        /// Shuffle id.
        shuffle: i32,
        /// Registered ranges `(start, end)`.
        ranges: Vec<(i32, i32)>,
        /// `LOCAL_ORDER` distribution.
        local_order: bool,
        /// Hadoop user.
        user: String,
        /// Remote storage path and conf items.
        remote: Option<(String, Vec<(String, String)>)>,
        /// Wall-clock ms of the registration (the app was alive then).
        at_ms: u64,
    },
    /// `reportShuffleResult`: block ids per partition id.
    Report {
        /// App id.
        app: String,
        /// Shuffle id.
        shuffle: i32,
        /// The report's `bitmapNum`.
        bitmap_num: i32,
        /// `(partition id, block ids)`.
        parts: Vec<(i32, Vec<i64>)>,
        /// Post-0.10 record counts `(partition, task attempt, records)`; absent in journals
        /// written before they were kept.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        records: Vec<(i32, i64, i64)>,
        /// Wall-clock ms of the report.
        at_ms: u64,
    },
    /// Snapshot form of a shuffle's reported ids: portable roaring treemaps, base64.
    Ids {
        /// App id.
        app: String,
        /// Shuffle id.
        shuffle: i32,
        /// The shuffle's `bitmapNum`.
        bitmap_num: i32,
        /// `(partition id, serialized RoaringTreemap)`.
        partitions: Vec<(i32, String)>,
        /// Record counts: `(partition id, [(task attempt, records)])`; absent in journals
        /// written before they were kept.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        records: Vec<(i32, Vec<(i64, i64)>)>,
    },
    /// `commitShuffleTask`: the counter's value after it.
    Commit {
        /// App id.
        app: String,
        /// Shuffle id.
        shuffle: i32,
        /// Commits so far.
        count: i32,
    },
    /// `unregisterShuffle`.
    DropShuffle {
        /// App id.
        app: String,
        /// Shuffle id.
        shuffle: i32,
    },
    /// `unregisterShuffleByAppId`, or expiry.
    DropApp {
        /// App id.
        app: String,
    },
    /// When apps were last seen (written periodically and at shutdown), for expiry across a
    /// restart.
    Seen {
        /// `(app id, wall-clock ms)`.
        apps: Vec<(String, u64)>,
    },
}

impl Record {
    /// The record as one journal line (with its newline).
    pub fn to_line(&self) -> Vec<u8> {
        // Serializing plain data to JSON cannot fail.
        let json = serde_json::to_string(self).unwrap_or_default();
        format!("{:08x} {json}\n", crc32fast::hash(json.as_bytes())).into_bytes()
    }

    /// Parses one line (without its newline); `None` for a torn or corrupt line.
    pub fn from_line(line: &[u8]) -> Option<Record> {
        let line = std::str::from_utf8(line).ok()?;
        let (crc, json) = line.split_once(' ')?;
        let crc = u32::from_str_radix(crc, 16).ok()?;
        if crc32fast::hash(json.as_bytes()) != crc {
            return None;
        }
        serde_json::from_str(json).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_torn_lines_are_refused() {
        let r = Record::Report {
            app: "a b".into(),
            shuffle: 1,
            bitmap_num: 3,
            parts: vec![(0, vec![1, 2]), (5, vec![])],
            records: vec![(0, 9, 120)],
            at_ms: 7,
        };
        let line = r.to_line();
        assert_eq!(line.last(), Some(&b'\n'));
        let body = &line[..line.len() - 1];
        assert_eq!(Record::from_line(body), Some(r));
        for cut in [1, 9, body.len() - 1] {
            assert_eq!(Record::from_line(&body[..cut]), None, "cut at {cut}");
        }
        let mut flipped = body.to_vec();
        let last = flipped.len() - 2;
        flipped[last] ^= 1;
        assert_eq!(Record::from_line(&flipped), None);
    }
}
