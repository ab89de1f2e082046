//! One data path: its health and usage flags, its write permits, and the probe that checks it.
//!
//! A [`Disk`] never decides placement; it only answers "may I take new partitions" and "may I
//! be written at all". The tier reads those flags, the health pass sets them.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

/// File written, read back and deleted in a data path by every health pass. It starts with a
/// dot so a later walk of the data paths (restart recovery) cannot take it for an app dir.
pub(crate) const PROBE_FILE_NAME: &str = ".spillway-probe";

/// How long one health pass waits for a disk's probe before calling the disk unhealthy. A
/// probe still running from an earlier pass is not started again (see [`Disk::try_begin_probe`]),
/// so a hung disk costs at most one blocking thread.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a disk can do right now, for heartbeats and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskStatus {
    /// Healthy and under the high watermark: takes new partitions.
    Normal,
    /// The probe or a write failed: takes no writes until a probe succeeds again.
    Unhealthy,
    /// The server's own bytes there reached the high watermark of the path's capacity (or,
    /// with the whole-disk check on, the file system did) and have not yet fallen below the
    /// low one: existing partitions keep appending, new partitions go elsewhere.
    Overused,
}

impl DiskStatus {
    /// Short lowercase name for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskStatus::Normal => "normal",
            DiskStatus::Unhealthy => "unhealthy",
            DiskStatus::Overused => "overused",
        }
    }
}

/// A snapshot of one data path, as the heartbeat and `/metrics` report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskReport {
    /// Position in `data_paths`; also the storage id sent to readers in `storageIds`.
    pub index: i32,
    /// The data path.
    pub path: PathBuf,
    /// File-system size at the last health pass (0 before the first successful `statvfs`).
    pub capacity_bytes: u64,
    /// What this server may hold there (Java's `LocalStorage.capacity`): `disk_capacity`, or
    /// `disk_capacity_ratio` × the file-system size at start-up. The watermarks are ratios of it.
    pub service_capacity_bytes: u64,
    /// Bytes available to this process at the last health pass.
    pub available_bytes: u64,
    /// Bytes of data and index files this server has written there and not yet purged (live).
    pub written_bytes: u64,
    /// Status now.
    pub status: DiskStatus,
    /// The disk is unhealthy because a write hung past `write_timeout` (`local_storage_is_timeout`).
    pub timed_out: bool,
    /// Partitions that moved off this disk to another (failover), since start.
    pub partitions_moved_off: u64,
}

/// File-system numbers from one `statvfs`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Usage {
    pub capacity: u64,
    pub available: u64,
}

impl Usage {
    /// Used fraction in `[0, 1]`; 0 for a file system that reports no size.
    pub fn ratio(&self) -> f64 {
        if self.capacity == 0 {
            return 0.0;
        }
        1.0 - (self.available.min(self.capacity) as f64 / self.capacity as f64)
    }
}

/// How much a data path may hold, and when it stops taking new partitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SpaceLimits {
    /// Bytes of this server's files the path may hold (> 0).
    pub capacity: u64,
    /// Ratio of `capacity` at which the path stops taking new partitions.
    pub high: f64,
    /// Ratio of `capacity` below which it takes them again.
    pub low: f64,
    /// Whether the file system's own usage must also stay under the watermarks.
    pub whole_disk: bool,
}

/// One data path and everything the tier knows about it.
pub(crate) struct Disk {
    /// Position in `data_paths` (the storage id).
    pub index: i32,
    /// The data path; partitions live under `<root>/<appId>/<shuffleId>/<start>-<end>/`.
    pub root: PathBuf,
    /// Write permits: bounds the blocking writes in flight on this disk so one slow disk
    /// cannot take the whole blocking pool.
    pub permits: Arc<Semaphore>,
    healthy: AtomicBool,
    /// Java's `isSpaceEnough`: the watermark hysteresis state, moved by [`Disk::space_enough`].
    space_enough: AtomicBool,
    limits: SpaceLimits,
    capacity: AtomicU64,
    available: AtomicU64,
    written: AtomicU64,
    /// Set while a probe runs on the blocking pool; a hung probe is not started twice.
    probing: AtomicBool,
    /// Why the disk is unhealthy, for `Health::detail` (an overused disk describes its bytes
    /// instead, see [`Disk::reason`]); empty once a probe succeeds.
    reason: parking_lot::Mutex<String>,
    /// Set when a write hung; cleared by the next good probe.
    timed_out: AtomicBool,
    /// Partitions moved off this disk (failover).
    moved_off: AtomicU64,
    /// Set once its file system refused `O_DIRECT`: its appends then write through the page
    /// cache only.
    pub direct_refused: AtomicBool,
}

impl Disk {
    /// A disk that is unhealthy until its first probe succeeds.
    pub fn new(index: i32, root: PathBuf, permits: usize, limits: SpaceLimits) -> Self {
        Disk {
            index,
            root,
            permits: Arc::new(Semaphore::new(permits)),
            healthy: AtomicBool::new(false),
            space_enough: AtomicBool::new(true),
            limits,
            capacity: AtomicU64::new(0),
            available: AtomicU64::new(0),
            written: AtomicU64::new(0),
            probing: AtomicBool::new(false),
            reason: parking_lot::Mutex::new("not probed yet".to_owned()),
            timed_out: AtomicBool::new(false),
            moved_off: AtomicU64::new(0),
            direct_refused: AtomicBool::new(false),
        }
    }

    /// True when writes (to any partition) may be attempted.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// True when the disk may take new partitions: healthy and not over the watermark.
    pub fn is_writable(&self) -> bool {
        self.is_healthy() && self.space_enough()
    }

    /// Current status; unhealthy wins over overused.
    pub fn status(&self) -> DiskStatus {
        if !self.is_healthy() {
            DiskStatus::Unhealthy
        } else if !self.space_enough() {
            DiskStatus::Overused
        } else {
            DiskStatus::Normal
        }
    }

    /// Why the disk is not normal (empty when it is).
    pub fn reason(&self) -> String {
        if self.is_healthy() && !self.space_enough() {
            return self.space_detail();
        }
        self.reason.lock().clone()
    }

    /// Java's `LocalStorage.canWrite` watermark rule (0.10 line of
    /// `storage/.../common/LocalStorage.java`; older versions compared the bytes recorded at
    /// each write, which is what Spillway counts), evaluated on every call (as Java does at
    /// each placement) against the live byte count: while the path has room, it keeps it until
    /// its own bytes reach `high` × capacity (and, with the whole-disk check, until the file
    /// system reaches `high` used); once full, it stays full until both are below `low`.
    /// Java refreshes its byte count only in the health checker's pass, so with health checks
    /// off its watermark never trips; Spillway counts every write and purge instead.
    pub fn space_enough(&self) -> bool {
        let was = self.space_enough.load(Ordering::Acquire);
        let now = space_rule(
            was,
            self.written.load(Ordering::Relaxed),
            self.file_system_usage(),
            &self.limits,
        );
        if now != was
            && self
                .space_enough
                .compare_exchange(was, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            if now {
                tracing::info!(disk = %self.root.display(), storage_id = self.index, detail = %self.space_detail(), "disk is below the low watermark; it takes new partitions again");
            } else {
                tracing::warn!(disk = %self.root.display(), storage_id = self.index, detail = %self.space_detail(), "disk reached the high watermark; it takes no new partitions");
            }
        }
        now
    }

    fn file_system_usage(&self) -> Usage {
        Usage {
            capacity: self.capacity.load(Ordering::Relaxed),
            available: self.available.load(Ordering::Relaxed),
        }
    }

    /// "holds 95.2% of its 1.0 GiB capacity; file system 40.0% used".
    fn space_detail(&self) -> String {
        let written = self.written.load(Ordering::Relaxed);
        format!(
            "holds {written} bytes, {:.1}% of its {} byte capacity; file system {:.1}% used",
            written as f64 * 100.0 / self.limits.capacity.max(1) as f64,
            self.limits.capacity,
            self.file_system_usage().ratio() * 100.0
        )
    }

    /// Flags the disk unhealthy; logs only on the transition.
    pub fn mark_unhealthy(&self, reason: &str) {
        *self.reason.lock() = reason.to_owned();
        if self.healthy.swap(false, Ordering::AcqRel) {
            tracing::warn!(disk = %self.root.display(), storage_id = self.index, reason, "disk became unhealthy; it takes no writes");
        }
    }

    /// Flags the disk unhealthy because a write hung (reported as `local_storage_is_timeout`).
    pub fn mark_timed_out(&self, reason: &str) {
        self.timed_out.store(true, Ordering::Release);
        self.mark_unhealthy(reason);
    }

    /// Counts a partition that moved off this disk.
    pub fn count_moved_off(&self) {
        self.moved_off.fetch_add(1, Ordering::Relaxed);
    }

    /// Flags the disk healthy after a good probe; logs only on the transition.
    fn mark_healthy(&self) {
        self.timed_out.store(false, Ordering::Release);
        if !self.healthy.swap(true, Ordering::AcqRel) {
            self.reason.lock().clear();
            tracing::info!(disk = %self.root.display(), storage_id = self.index, "disk is healthy");
        }
    }

    /// Records a `statvfs` result and re-evaluates the watermarks with it.
    fn apply_usage(&self, usage: Usage) {
        self.capacity.store(usage.capacity, Ordering::Relaxed);
        self.available.store(usage.available, Ordering::Relaxed);
        self.space_enough();
    }

    /// Applies the outcome of one probe (see [`inspect`]).
    pub fn apply_inspection(&self, outcome: Result<Usage, String>) {
        match outcome {
            Ok(usage) => {
                self.mark_healthy();
                self.apply_usage(usage);
            }
            Err(reason) => self.mark_unhealthy(&reason),
        }
    }

    /// Claims the right to start a probe; false while an earlier probe is still running.
    pub fn try_begin_probe(&self) -> bool {
        !self.probing.swap(true, Ordering::AcqRel)
    }

    /// Releases the claim taken by [`Disk::try_begin_probe`].
    pub fn end_probe(&self) {
        self.probing.store(false, Ordering::Release);
    }

    /// Counts bytes that became durable on this disk.
    pub fn add_written(&self, bytes: u64) {
        self.written.fetch_add(bytes, Ordering::Relaxed);
        self.space_enough();
    }

    /// Forgets bytes that were purged (never below zero).
    pub fn sub_written(&self, bytes: u64) {
        let _ = self
            .written
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                Some(w.saturating_sub(bytes))
            });
        self.space_enough();
    }

    /// Snapshot for heartbeats and metrics.
    pub fn report(&self) -> DiskReport {
        DiskReport {
            index: self.index,
            path: self.root.clone(),
            capacity_bytes: self.capacity.load(Ordering::Relaxed),
            service_capacity_bytes: self.limits.capacity,
            available_bytes: self.available.load(Ordering::Relaxed),
            written_bytes: self.written.load(Ordering::Relaxed),
            status: self.status(),
            timed_out: self.timed_out.load(Ordering::Acquire),
            partitions_moved_off: self.moved_off.load(Ordering::Relaxed),
        }
    }
}

/// The watermark hysteresis (Java's `LocalStorage.canWrite`), pure for testing: `was` is the
/// previous verdict, which picks the threshold (`high` while there is room, `low` once full).
/// A zero capacity or file-system size never has room (Java divides by it and gets NaN).
pub(crate) fn space_rule(was: bool, written: u64, fs: Usage, limits: &SpaceLimits) -> bool {
    let threshold = if was { limits.high } else { limits.low };
    let own_ok = limits.capacity > 0 && (written as f64 / limits.capacity as f64) < threshold;
    let disk_ok = !limits.whole_disk || (fs.capacity > 0 && fs.ratio() < threshold);
    own_ok && disk_ok
}

/// One blocking health probe of a data path: creates it if missing, writes a small file,
/// syncs it, reads it back, deletes it, then reads the file-system usage. `Err` carries the
/// reason the disk is unhealthy. Runs on the blocking pool only.
pub(crate) fn inspect(root: &Path) -> Result<Usage, String> {
    probe(root).map_err(|e| format!("probe of {} failed: {e}", root.display()))?;
    usage(root).map_err(|e| format!("statvfs of {} failed: {e}", root.display()))
}

pub(crate) fn probe(root: &Path) -> io::Result<()> {
    const PAYLOAD: &[u8] = b"spillway disk probe\n";
    fs::create_dir_all(root)?;
    let path = root.join(PROBE_FILE_NAME);
    {
        let mut file = File::create(&path)?;
        file.write_all(PAYLOAD)?;
        file.sync_data()?;
    }
    let back = fs::read(&path)?;
    fs::remove_file(&path)?;
    if back != PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "probe file read back different bytes",
        ));
    }
    Ok(())
}

// `statvfs` field types differ between platforms; on Linux some casts are no-ops.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn usage(root: &Path) -> io::Result<Usage> {
    let st = nix::sys::statvfs::statvfs(root).map_err(io::Error::from)?;
    let frag = st.fragment_size() as u64;
    Ok(Usage {
        capacity: (st.blocks() as u64).saturating_mul(frag),
        available: (st.blocks_available() as u64).saturating_mul(frag),
    })
}

/// True for errors that say the disk itself is in trouble (as opposed to, say, a file that
/// was purged under a reader): the disk is then flagged unhealthy.
pub(crate) fn is_disk_fault(e: &io::Error) -> bool {
    use nix::errno::Errno;
    match e.raw_os_error().map(Errno::from_raw) {
        Some(Errno::EIO | Errno::ENOSPC | Errno::EROFS | Errno::EDQUOT | Errno::ENXIO) => true,
        _ => matches!(
            e.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::ReadOnlyFilesystem
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: SpaceLimits = SpaceLimits {
        capacity: 100,
        high: 0.95,
        low: 0.8,
        whole_disk: false,
    };

    fn fs(used: u64) -> Usage {
        Usage {
            capacity: 1000,
            available: 1000 - used,
        }
    }

    /// Java's `LocalStorageTest.canWriteTest` steps: capacity 100, watermarks 95/80.
    #[test]
    fn own_bytes_watermarks_have_hysteresis() {
        let d = Disk::new(0, PathBuf::from("/nowhere"), 1, LIMITS);
        d.apply_inspection(Ok(fs(0)));
        d.add_written(20);
        assert_eq!(d.status(), DiskStatus::Normal);
        d.add_written(65);
        assert!(d.is_writable(), "85 of 100: under the high watermark");
        d.add_written(10);
        assert_eq!(d.status(), DiskStatus::Overused, "95 of 100 reaches it");
        assert!(!d.is_writable());
        d.sub_written(10);
        assert_eq!(d.status(), DiskStatus::Overused, "85: still above low");
        d.sub_written(10);
        assert_eq!(d.status(), DiskStatus::Normal, "75: below low");
        d.add_written(10);
        assert_eq!(d.status(), DiskStatus::Normal, "85 again: below high");
        assert!(d.reason().is_empty());
        d.apply_inspection(Err("boom".into()));
        assert_eq!(d.status(), DiskStatus::Unhealthy);
        assert_eq!(d.reason(), "boom");
    }

    #[test]
    fn whole_disk_usage_counts_only_when_enabled() {
        // 10 own bytes of 100, but the file system is 96 % used by others.
        assert!(space_rule(true, 10, fs(960), &LIMITS));
        let whole = SpaceLimits {
            whole_disk: true,
            ..LIMITS
        };
        assert!(!space_rule(true, 10, fs(960), &whole));
        assert!(
            !space_rule(false, 10, fs(850), &whole),
            "above low: still full"
        );
        assert!(space_rule(false, 10, fs(790), &whole));
        assert!(!space_rule(
            true,
            10,
            Usage {
                capacity: 0,
                available: 0
            },
            &whole
        ));
        let none = SpaceLimits {
            capacity: 0,
            ..LIMITS
        };
        assert!(!space_rule(true, 0, fs(0), &none), "no capacity, no room");
    }

    #[test]
    fn probe_cleans_up_after_itself() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("new");
        let usage = inspect(&root).unwrap();
        assert!(usage.capacity > 0);
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
    }

    #[test]
    fn disk_faults_are_classified() {
        let eio = nix::errno::Errno::EIO as i32;
        assert!(is_disk_fault(&io::Error::from_raw_os_error(eio)));
        assert!(!is_disk_fault(&io::Error::from(io::ErrorKind::NotFound)));
    }
}
