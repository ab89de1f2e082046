//! `App` and `Shuffle`: what the server knows about one application — its shuffles, their
//! registered partition ranges, reported block ids and commit counters — and when it was last
//! seen (for expiry).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;

use crate::app::block_ids::ReportedBlockIds;
use crate::ids::{AppId, PartitionKey, PartitionRange};
use crate::memory::Tenant;

pub use crate::store::RemoteStorage;

/// A shuffle id's gate between its registration and its purge ([`App::shuffle_gate`]).
pub(crate) type ShuffleGate = Arc<tokio::sync::RwLock<()>>;

/// One application.
pub struct App {
    id: AppId,
    last_seen: Mutex<Instant>,
    user: Mutex<String>,
    remote_storage: Mutex<Option<RemoteStorage>>,
    /// Client properties whose key contains `.rss.` (0.10 sends the whole SparkConf).
    properties: Mutex<HashMap<String, String>>,
    shuffles: RwLock<HashMap<i32, Arc<Shuffle>>>,
    /// Per shuffle id: held shared by `registerShuffle` and exclusively by `unregisterShuffle`
    /// until its purge is done: a registration landing in between would reuse buffers the
    /// purge then drops, leaving registered ranges that answer every send with `NO_REGISTER`
    /// (Java takes its app lock in both places for the same reason). Per shuffle, not per app:
    /// a purge waits for the app's in-flight spills, and a SQL query registers its next shuffle
    /// while the last one is purged; only a registration of the shuffle being purged has to
    /// wait. Entries stay for the app's life (a removed entry could let a purge start beside a
    /// registration still holding the old one).
    shuffle_gates: Mutex<HashMap<i32, ShuffleGate>>,
    /// Charged bytes accepted for this app since it was registered (Java's
    /// `ShuffleTaskInfo.totalDataSize`, the `topN_of_total_data_size_for_app` value). Kept
    /// for the app's life, not per shuffle: Java does not lower it on `unregisterShuffle`.
    data_bytes: AtomicU64,
    /// Set when the first of its partitions became huge (`total_app_with_huge_partition_num`).
    has_huge: AtomicBool,
    /// The memory claim id of this app's first `requireBuffer` refused and not served since
    /// (0: none): its later requests wait in line from there (`memory::Claim::rank_by`).
    refused_since: AtomicU64,
    /// What it holds of the write budget: its reservations count against it, and past the
    /// high watermark an app over its share is refused first (`memory::budget`).
    memory: Tenant,
}

impl App {
    pub(crate) fn new(id: AppId, memory: Tenant) -> Self {
        App {
            id,
            last_seen: Mutex::new(Instant::now()),
            user: Mutex::new(String::new()),
            remote_storage: Mutex::new(None),
            properties: Mutex::new(HashMap::new()),
            shuffles: RwLock::new(HashMap::new()),
            shuffle_gates: Mutex::new(HashMap::new()),
            data_bytes: AtomicU64::new(0),
            has_huge: AtomicBool::new(false),
            refused_since: AtomicU64::new(0),
            memory,
        }
    }

    /// Its share of the write budget.
    pub fn memory(&self) -> &Tenant {
        &self.memory
    }

    /// Counts charged bytes accepted for the app.
    pub(crate) fn add_data(&self, bytes: u64) {
        self.data_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Charged bytes accepted since the app was registered.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes.load(Ordering::Relaxed)
    }

    /// Marks that the app has a huge partition; true only for the call that marked it.
    /// [`App::refused_since`]'s rank for this app's next waiting request (0: none).
    pub(crate) fn refused_since(&self) -> u64 {
        self.refused_since.load(Ordering::Relaxed)
    }

    /// Records a refusal under claim `id` unless an earlier one is still unserved.
    pub(crate) fn note_refused(&self, id: u64) {
        let _ = self
            .refused_since
            .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// A request ranked `rank` was served: the app's place in line is given up.
    pub(crate) fn note_served(&self, rank: u64) {
        let _ = self
            .refused_since
            .compare_exchange(rank, 0, Ordering::Relaxed, Ordering::Relaxed);
    }

    pub(crate) fn mark_huge(&self) -> bool {
        !self.has_huge.swap(true, Ordering::AcqRel)
    }

    /// The gate of one shuffle id (see the field): registrations read-lock it,
    /// `unregisterShuffle` write-locks it.
    pub(crate) fn shuffle_gate(&self, shuffle: i32) -> ShuffleGate {
        Arc::clone(self.shuffle_gates.lock().entry(shuffle).or_default())
    }

    /// The app id.
    pub fn id(&self) -> &AppId {
        &self.id
    }

    /// Marks the app as alive now.
    pub fn touch(&self) {
        *self.last_seen.lock() = Instant::now();
    }

    /// Sets when the app was last seen (restart recovery).
    pub(crate) fn set_last_seen(&self, at: Instant) {
        *self.last_seen.lock() = at;
    }

    /// When the app was last seen.
    pub fn last_seen(&self) -> Instant {
        *self.last_seen.lock()
    }

    /// The Hadoop user the client registered with.
    pub fn user(&self) -> String {
        self.user.lock().clone()
    }

    /// The remote storage the client registered, if any.
    pub fn remote_storage(&self) -> Option<RemoteStorage> {
        self.remote_storage.lock().clone()
    }

    /// Kept client properties.
    pub fn properties(&self) -> HashMap<String, String> {
        self.properties.lock().clone()
    }

    pub(crate) fn set_registration(
        &self,
        user: String,
        remote: Option<RemoteStorage>,
        properties: HashMap<String, String>,
    ) {
        if !user.is_empty() {
            *self.user.lock() = user;
        }
        if remote.is_some() {
            *self.remote_storage.lock() = remote;
        }
        if !properties.is_empty() {
            self.properties
                .lock()
                .extend(properties.into_iter().filter(|(k, _)| k.contains(".rss.")));
        }
    }

    /// A registered shuffle.
    pub fn shuffle(&self, id: i32) -> Option<Arc<Shuffle>> {
        self.shuffles.read().get(&id).cloned()
    }

    /// Gets or creates a shuffle.
    pub(crate) fn shuffle_or_insert(&self, id: i32, local_order: bool) -> Arc<Shuffle> {
        if let Some(s) = self.shuffle(id) {
            return s;
        }
        Arc::clone(
            self.shuffles
                .write()
                .entry(id)
                .or_insert_with(|| Arc::new(Shuffle::new(id, local_order))),
        )
    }

    /// Forgets a shuffle (unregister).
    pub(crate) fn remove_shuffle(&self, id: i32) -> Option<Arc<Shuffle>> {
        self.shuffles.write().remove(&id)
    }

    /// Ids of the registered shuffles.
    pub fn shuffle_ids(&self) -> Vec<i32> {
        self.shuffles.read().keys().copied().collect()
    }

    /// Registered partition ranges across all shuffles.
    pub fn partition_count(&self) -> usize {
        self.shuffles
            .read()
            .values()
            .map(|s| s.ranges().len())
            .sum()
    }
}

/// One shuffle of an app.
pub struct Shuffle {
    id: i32,
    local_order: bool,
    /// Registered ranges, sorted by start. Lookups binary-search it.
    ranges: RwLock<Vec<PartitionRange>>,
    /// Block ids reported by map tasks.
    pub block_ids: ReportedBlockIds,
    /// Record counts reported by map tasks, per partition and task attempt.
    pub records: crate::app::record_counts::RecordCounts,
    commits: AtomicI32,
}

impl Shuffle {
    fn new(id: i32, local_order: bool) -> Self {
        Shuffle {
            id,
            local_order,
            ranges: RwLock::new(Vec::new()),
            block_ids: ReportedBlockIds::default(),
            records: Default::default(),
            commits: AtomicI32::new(0),
        }
    }

    /// The shuffle id.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// Whether spills sort blocks by task attempt (client asked for `LOCAL_ORDER`).
    pub fn local_order(&self) -> bool {
        self.local_order
    }

    /// Adds a range. Registering the same range again is a no-op (Java re-registration is
    /// idempotent); a range that overlaps a different registered one is refused, because a
    /// partition must map to exactly one buffer and one file.
    pub(crate) fn add_range(&self, range: PartitionRange) -> crate::error::Result<()> {
        let mut ranges = self.ranges.write();
        let at = ranges.partition_point(|r| r.start < range.start);
        let clash = [at.checked_sub(1), Some(at)]
            .into_iter()
            .flatten()
            .filter_map(|i| ranges.get(i))
            .find(|r| r.start <= range.end && range.start <= r.end);
        match clash {
            Some(r) if *r == range => Ok(()),
            Some(r) => Err(crate::error::Error::bad_request(format!(
                "partition range {range} overlaps the registered range {r} of shuffle {}",
                self.id
            ))),
            None => {
                ranges.insert(at, range);
                Ok(())
            }
        }
    }

    /// The registered range containing `partition`.
    pub fn range_of(&self, partition: i32) -> Option<PartitionRange> {
        find(&self.ranges.read(), partition)
    }

    /// All registered ranges.
    pub fn ranges(&self) -> Vec<PartitionRange> {
        self.ranges.read().clone()
    }

    /// The key of the range containing `partition`.
    pub fn key_of(&self, app: &AppId, partition: i32) -> Option<PartitionKey> {
        self.range_of(partition)
            .map(|r| PartitionKey::new(app.clone(), self.id, r))
    }

    /// [`Shuffle::key_of`] for a write: a partition outside every registered range is the
    /// client's mistake, named in the answer.
    pub fn registered_key(
        &self,
        app: &AppId,
        partition: i32,
    ) -> crate::error::Result<PartitionKey> {
        self.key_of(app, partition)
            .ok_or_else(|| crate::error::Error::NotRegistered {
                app_id: app.to_string(),
                shuffle_id: self.id,
                what: format!("partition {partition}"),
            })
    }

    /// `commitShuffleTask`s counted so far.
    pub fn commits(&self) -> i32 {
        self.commits.load(Ordering::Acquire)
    }

    /// Raises the counter to `count` (restart recovery; never lowers it).
    pub(crate) fn restore_commits(&self, count: i32) {
        self.commits.fetch_max(count, Ordering::AcqRel);
    }

    /// Counts one `commitShuffleTask`; returns the new count.
    pub fn commit(&self) -> i32 {
        self.commits.fetch_add(1, Ordering::AcqRel) + 1
    }
}

fn find(ranges: &[PartitionRange], partition: i32) -> Option<PartitionRange> {
    // Ranges are sorted by start; the candidate is the last one starting at or before p.
    let at = ranges.partition_point(|r| r.start <= partition);
    at.checked_sub(1)
        .map(|i| ranges[i])
        .filter(|r| r.contains(partition))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_lookup() {
        let s = Shuffle::new(0, false);
        s.add_range(PartitionRange::new(4, 7).unwrap()).unwrap();
        s.add_range(PartitionRange::new(0, 1).unwrap()).unwrap();
        s.add_range(PartitionRange::new(4, 7).unwrap())
            .expect("re-registration is idempotent");
        assert!(
            s.add_range(PartitionRange::new(5, 5).unwrap()).is_err(),
            "inside 4-7"
        );
        assert!(
            s.add_range(PartitionRange::new(1, 4).unwrap()).is_err(),
            "spans two"
        );
        assert!(
            s.add_range(PartitionRange::new(2, 9).unwrap()).is_err(),
            "covers 4-7"
        );
        assert_eq!(s.range_of(6), Some(PartitionRange::new(4, 7).unwrap()));
        assert_eq!(s.range_of(1), Some(PartitionRange::new(0, 1).unwrap()));
        assert_eq!(s.range_of(2), None);
        assert_eq!(s.range_of(8), None);
        assert_eq!(s.range_of(-1), None);
    }
}
