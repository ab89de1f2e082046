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
    /// Usage went above the high watermark and has not yet fallen below the low one: existing
    /// partitions keep appending, new partitions go elsewhere.
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
    overused: AtomicBool,
    capacity: AtomicU64,
    available: AtomicU64,
    written: AtomicU64,
    /// Set while a probe runs on the blocking pool; a hung probe is not started twice.
    probing: AtomicBool,
    /// Why the disk is unhealthy or overused, for `Health::detail`; empty when normal.
    reason: parking_lot::Mutex<String>,
    /// Set when a write hung; cleared by the next good probe.
    timed_out: AtomicBool,
    /// Partitions moved off this disk (failover).
    moved_off: AtomicU64,
}

impl Disk {
    /// A disk that is unhealthy until its first probe succeeds.
    pub fn new(index: i32, root: PathBuf, permits: usize) -> Self {
        Disk {
            index,
            root,
            permits: Arc::new(Semaphore::new(permits)),
            healthy: AtomicBool::new(false),
            overused: AtomicBool::new(false),
            capacity: AtomicU64::new(0),
            available: AtomicU64::new(0),
            written: AtomicU64::new(0),
            probing: AtomicBool::new(false),
            reason: parking_lot::Mutex::new("not probed yet".to_owned()),
            timed_out: AtomicBool::new(false),
            moved_off: AtomicU64::new(0),
        }
    }

    /// True when writes (to any partition) may be attempted.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// True when the disk may take new partitions: healthy and not over the watermark.
    pub fn is_writable(&self) -> bool {
        self.is_healthy() && !self.overused.load(Ordering::Acquire)
    }

    /// Current status; unhealthy wins over overused.
    pub fn status(&self) -> DiskStatus {
        if !self.is_healthy() {
            DiskStatus::Unhealthy
        } else if self.overused.load(Ordering::Acquire) {
            DiskStatus::Overused
        } else {
            DiskStatus::Normal
        }
    }

    /// Why the disk is not normal (empty when it is).
    pub fn reason(&self) -> String {
        self.reason.lock().clone()
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

    /// Records a `statvfs` result and moves the overused flag with hysteresis: set above
    /// `high`, cleared below `low`, unchanged in between. Logs only on a transition.
    fn apply_usage(&self, usage: Usage, high: f64, low: f64) {
        self.capacity.store(usage.capacity, Ordering::Relaxed);
        self.available.store(usage.available, Ordering::Relaxed);
        let ratio = usage.ratio();
        let was = self.overused.load(Ordering::Acquire);
        let now = if ratio > high {
            true
        } else if ratio < low {
            false
        } else {
            was
        };
        if now && self.is_healthy() {
            *self.reason.lock() = format!("{:.1}% used", ratio * 100.0);
        }
        if now != was {
            self.overused.store(now, Ordering::Release);
            if now {
                tracing::warn!(disk = %self.root.display(), storage_id = self.index, used_pct = ratio * 100.0, "disk is above the high watermark; it takes no new partitions");
            } else {
                tracing::info!(disk = %self.root.display(), storage_id = self.index, used_pct = ratio * 100.0, "disk is below the low watermark; it takes new partitions again");
            }
        }
    }

    /// Applies the outcome of one probe (see [`inspect`]).
    pub fn apply_inspection(&self, outcome: Result<Usage, String>, high: f64, low: f64) {
        match outcome {
            Ok(usage) => {
                self.mark_healthy();
                self.apply_usage(usage, high, low);
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
    }

    /// Forgets bytes that were purged (never below zero).
    pub fn sub_written(&self, bytes: u64) {
        let _ = self
            .written
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                Some(w.saturating_sub(bytes))
            });
    }

    /// Snapshot for heartbeats and metrics.
    pub fn report(&self) -> DiskReport {
        DiskReport {
            index: self.index,
            path: self.root.clone(),
            capacity_bytes: self.capacity.load(Ordering::Relaxed),
            available_bytes: self.available.load(Ordering::Relaxed),
            written_bytes: self.written.load(Ordering::Relaxed),
            status: self.status(),
            timed_out: self.timed_out.load(Ordering::Acquire),
            partitions_moved_off: self.moved_off.load(Ordering::Relaxed),
        }
    }
}

/// One blocking health probe of a data path: creates it if missing, writes a small file,
/// syncs it, reads it back, deletes it, then reads the file-system usage. `Err` carries the
/// reason the disk is unhealthy. Runs on the blocking pool only.
pub(crate) fn inspect(root: &Path) -> Result<Usage, String> {
    probe(root).map_err(|e| format!("probe of {} failed: {e}", root.display()))?;
    usage(root).map_err(|e| format!("statvfs of {} failed: {e}", root.display()))
}

fn probe(root: &Path) -> io::Result<()> {
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
fn usage(root: &Path) -> io::Result<Usage> {
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

    #[test]
    fn watermarks_have_hysteresis() {
        let d = Disk::new(0, PathBuf::from("/nowhere"), 1);
        let at = |used: u64| Usage {
            capacity: 100,
            available: 100 - used,
        };
        d.apply_inspection(Ok(at(50)), 0.9, 0.8);
        assert_eq!(d.status(), DiskStatus::Normal);
        d.apply_inspection(Ok(at(95)), 0.9, 0.8);
        assert_eq!(d.status(), DiskStatus::Overused);
        assert!(!d.is_writable());
        d.apply_inspection(Ok(at(85)), 0.9, 0.8);
        assert_eq!(
            d.status(),
            DiskStatus::Overused,
            "between watermarks: unchanged"
        );
        d.apply_inspection(Ok(at(79)), 0.9, 0.8);
        assert_eq!(d.status(), DiskStatus::Normal);
        d.apply_inspection(Ok(at(85)), 0.9, 0.8);
        assert_eq!(
            d.status(),
            DiskStatus::Normal,
            "between watermarks: unchanged"
        );
        d.apply_inspection(Err("boom".into()), 0.9, 0.8);
        assert_eq!(d.status(), DiskStatus::Unhealthy);
        assert_eq!(d.reason(), "boom");
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
