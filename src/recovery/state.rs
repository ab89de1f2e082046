//! What a journal replays into: the apps a previous run served, as plain data. The registry
//! is rebuilt from it (`restore.rs`), and a snapshot is written back from the same shape.

use std::collections::BTreeMap;

use base64::Engine;
use roaring::RoaringTreemap;

use super::record::Record;

/// Every app the journal knows, by id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecoveredState {
    /// Apps by id.
    pub apps: BTreeMap<String, AppState>,
}

/// One app.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppState {
    /// Hadoop user.
    pub user: String,
    /// Remote storage path and conf items.
    pub remote: Option<(String, Vec<(String, String)>)>,
    /// Wall-clock ms the app was last known alive.
    pub last_seen_ms: u64,
    /// Shuffles by id.
    pub shuffles: BTreeMap<i32, ShuffleState>,
}

/// One shuffle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShuffleState {
    /// `LOCAL_ORDER` distribution.
    pub local_order: bool,
    /// Registered ranges `(start, end)`, sorted.
    pub ranges: Vec<(i32, i32)>,
    /// `commitShuffleTask` counter.
    pub commits: i32,
    /// `bitmapNum` of the first report.
    pub bitmap_num: Option<i32>,
    /// Reported block ids by partition id.
    pub ids: BTreeMap<i32, RoaringTreemap>,
    /// Reported record counts: partition id → task attempt → records.
    pub records: BTreeMap<i32, BTreeMap<i64, i64>>,
}

impl RecoveredState {
    /// Applies one record. Records about an app or shuffle that is not registered (dropped
    /// meanwhile) are ignored; so are header and snapshot markers.
    pub fn apply(&mut self, rec: Record) {
        match rec {
            Record::Header { .. } | Record::SnapshotEnd => {}
            Record::Register {
                app,
                shuffle,
                ranges,
                local_order,
                user,
                remote,
                at_ms,
            } => {
                let a = self.apps.entry(app).or_default();
                if !user.is_empty() {
                    a.user = user;
                }
                if remote.is_some() {
                    a.remote = remote;
                }
                a.last_seen_ms = a.last_seen_ms.max(at_ms);
                let s = a.shuffles.entry(shuffle).or_insert_with(|| ShuffleState {
                    local_order,
                    ..ShuffleState::default()
                });
                for r in ranges {
                    if let Err(at) = s.ranges.binary_search(&r) {
                        s.ranges.insert(at, r);
                    }
                }
            }
            Record::Report {
                app,
                shuffle,
                bitmap_num,
                parts,
                records,
                at_ms,
            } => {
                let Some(a) = self.apps.get_mut(&app) else {
                    return;
                };
                a.last_seen_ms = a.last_seen_ms.max(at_ms);
                let Some(s) = a.shuffles.get_mut(&shuffle) else {
                    return;
                };
                s.bitmap_num.get_or_insert(bitmap_num);
                for (p, ids) in parts {
                    let map = s.ids.entry(p).or_default();
                    for id in ids.into_iter().filter(|id| *id >= 0) {
                        map.insert(id as u64);
                    }
                }
                for (p, task, n) in records {
                    s.records.entry(p).or_default().insert(task, n);
                }
            }
            Record::Ids {
                app,
                shuffle,
                bitmap_num,
                partitions,
                records,
            } => {
                let Some(s) = self.shuffle_mut(&app, shuffle) else {
                    return;
                };
                for (p, tasks) in records {
                    s.records.entry(p).or_default().extend(tasks);
                }
                s.bitmap_num.get_or_insert(bitmap_num);
                for (p, encoded) in partitions {
                    match decode_treemap(&encoded) {
                        Some(map) => *s.ids.entry(p).or_default() |= map,
                        None => {
                            tracing::warn!(app_id = %app, shuffle_id = shuffle, partition = p, "journal: undecodable block-id bitmap skipped")
                        }
                    }
                }
            }
            Record::Commit {
                app,
                shuffle,
                count,
            } => {
                if let Some(s) = self.shuffle_mut(&app, shuffle) {
                    s.commits = s.commits.max(count);
                }
            }
            Record::DropShuffle { app, shuffle } => {
                if let Some(a) = self.apps.get_mut(&app) {
                    a.shuffles.remove(&shuffle);
                }
            }
            Record::DropApp { app } => {
                self.apps.remove(&app);
            }
            Record::Seen { apps } => {
                for (app, ms) in apps {
                    if let Some(a) = self.apps.get_mut(&app) {
                        a.last_seen_ms = a.last_seen_ms.max(ms);
                    }
                }
            }
        }
    }

    fn shuffle_mut(&mut self, app: &str, shuffle: i32) -> Option<&mut ShuffleState> {
        self.apps.get_mut(app)?.shuffles.get_mut(&shuffle)
    }

    /// The state as snapshot records (without header and end marker): replaying them into an
    /// empty state gives this state back, except apps with no shuffle left (nothing to serve;
    /// they are not carried over).
    pub fn to_records(&self) -> Vec<Record> {
        let mut out = Vec::new();
        for (app, a) in &self.apps {
            for (id, s) in &a.shuffles {
                out.push(Record::Register {
                    app: app.clone(),
                    shuffle: *id,
                    ranges: s.ranges.clone(),
                    local_order: s.local_order,
                    user: a.user.clone(),
                    remote: a.remote.clone(),
                    at_ms: a.last_seen_ms,
                });
                if s.commits > 0 {
                    out.push(Record::Commit {
                        app: app.clone(),
                        shuffle: *id,
                        count: s.commits,
                    });
                }
                if let Some(bitmap_num) = s.bitmap_num {
                    out.push(Record::Ids {
                        app: app.clone(),
                        shuffle: *id,
                        bitmap_num,
                        partitions: s.ids.iter().map(|(p, m)| (*p, encode_treemap(m))).collect(),
                        records: s
                            .records
                            .iter()
                            .map(|(p, t)| (*p, t.iter().map(|(t, n)| (*t, *n)).collect()))
                            .collect(),
                    });
                }
            }
            out.push(Record::Seen {
                apps: vec![(app.clone(), a.last_seen_ms)],
            });
        }
        out
    }
}

/// A treemap in roaring's portable format, base64.
pub fn encode_treemap(map: &RoaringTreemap) -> String {
    let mut buf = Vec::with_capacity(map.serialized_size());
    // Writing into a Vec cannot fail.
    let _ = map.serialize_into(&mut buf);
    base64::engine::general_purpose::STANDARD.encode(buf)
}

fn decode_treemap(encoded: &str) -> Option<RoaringTreemap> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    RoaringTreemap::deserialize_from(&bytes[..]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(app: &str, shuffle: i32, ranges: Vec<(i32, i32)>) -> Record {
        Record::Register {
            app: app.into(),
            shuffle,
            ranges,
            local_order: true,
            user: "u".into(),
            remote: Some(("hdfs://x/rss".into(), vec![("k".into(), "v".into())])),
            at_ms: 1000,
        }
    }

    #[test]
    fn replay_then_snapshot_then_replay_is_the_same_state() {
        let mut s = RecoveredState::default();
        for r in [
            register("a", 0, vec![(0, 0), (1, 1)]),
            register("a", 0, vec![(1, 1), (2, 2)]),
            register("a", 1, vec![(0, 3)]),
            register("b", 0, vec![(0, 0)]),
            Record::Report {
                app: "a".into(),
                shuffle: 0,
                bitmap_num: 2,
                parts: vec![(0, vec![5, 6]), (1, vec![1 << 40])],
                records: vec![(0, 7, 40), (1, 7, 2)],
                at_ms: 2000,
            },
            Record::Commit {
                app: "a".into(),
                shuffle: 0,
                count: 3,
            },
            Record::Commit {
                app: "a".into(),
                shuffle: 0,
                count: 2,
            },
            Record::DropShuffle {
                app: "a".into(),
                shuffle: 1,
            },
            Record::DropApp { app: "b".into() },
            Record::Report {
                app: "b".into(),
                shuffle: 0,
                bitmap_num: 1,
                parts: vec![(0, vec![1])],
                records: Vec::new(),
                at_ms: 3000,
            },
            Record::Seen {
                apps: vec![("a".into(), 2500)],
            },
        ] {
            s.apply(r);
        }
        assert_eq!(s.apps.len(), 1, "b was dropped, its late report ignored");
        let a = &s.apps["a"];
        assert_eq!(a.last_seen_ms, 2500);
        let sh = &a.shuffles[&0];
        assert_eq!(sh.ranges, vec![(0, 0), (1, 1), (2, 2)]);
        assert_eq!(sh.commits, 3, "commit counters never go back");
        assert_eq!(sh.bitmap_num, Some(2));
        assert_eq!(sh.ids[&1].iter().collect::<Vec<_>>(), vec![1 << 40]);
        assert_eq!(
            sh.records[&0][&7], 40,
            "record counts replay beside the ids"
        );
        assert!(!a.shuffles.contains_key(&1));

        let mut again = RecoveredState::default();
        for r in s.to_records() {
            again.apply(Record::from_line(&r.to_line()[..r.to_line().len() - 1]).unwrap());
        }
        assert_eq!(again, s);
    }
}
