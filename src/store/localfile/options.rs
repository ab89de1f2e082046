//! The local-file tier's settings and their start-up validation.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Settings of the local-file tier. Validated by [`LocalFileTier::new`](super::LocalFileTier::new); defaults live in the
/// server config, not here.
#[derive(Clone, Debug)]
pub struct LocalFileOptions {
    /// The data paths (`rss.storage.basePath`), one per disk. Their order gives the storage
    /// ids readers see, so it must not change across restarts.
    pub data_paths: Vec<PathBuf>,
    /// The server id `<ip>-<port>`, used as the file name: `<prefix>.data` / `<prefix>.index`.
    /// Must be a valid file name (no `/`, not empty).
    pub file_prefix: String,
    /// What each path may hold of this server's files; `None` = `capacity_ratio` × the file
    /// system's size (Uniffle: unset).
    pub capacity: Option<u64>,
    /// See `capacity` (Uniffle: 0.9).
    pub capacity_ratio: f64,
    /// Ratio of a path's capacity at which it takes no *new* partitions (Uniffle: 0.95).
    pub high_watermark: f64,
    /// Ratio below which an overused path takes new partitions again (Uniffle: 0.85).
    pub low_watermark: f64,
    /// Hold the whole file system's usage to the watermarks too (Uniffle: false).
    pub whole_disk_watermark: bool,
    /// Paths that may fail to initialise before `new` fails (Uniffle: 0).
    pub init_max_failed_paths: usize,
    /// The tier reports itself not writable while fewer disks than this (and never fewer than
    /// one) are healthy and under the high watermark (riffle's `healthy_check_min_disks`).
    pub min_writable_disks: usize,
    /// Blocking writes allowed in flight per disk (at least 1).
    pub max_concurrency_per_disk: usize,
    /// fdatasync the data file, then the index file (and new directories) before an append
    /// returns `Ok`, so `Ok` survives a power loss, not just a process crash.
    pub sync_on_write: bool,
    /// Write the whole pages of appended data with `O_DIRECT` (`files::write_blocks_direct`).
    pub direct_io: bool,
    /// An append whose blocking write takes longer than this flags its disk unhealthy (a hung
    /// disk), and the partition's retry goes to another disk.
    pub write_timeout: std::time::Duration,
}

#[cfg(test)]
impl LocalFileOptions {
    /// Options for the tests of this tier and of those built on it: no capacity limit, no
    /// watermark, direct I/O, two writes per disk.
    pub fn testing(data_paths: Vec<PathBuf>, file_prefix: &str) -> Self {
        LocalFileOptions {
            data_paths,
            file_prefix: file_prefix.to_owned(),
            capacity: None,
            capacity_ratio: 0.9,
            high_watermark: 1.0,
            low_watermark: 1.0,
            whole_disk_watermark: false,
            init_max_failed_paths: 0,
            min_writable_disks: 0,
            max_concurrency_per_disk: 2,
            sync_on_write: false,
            direct_io: true,
            write_timeout: std::time::Duration::from_secs(60),
        }
    }
}

/// Checks the options once, at start-up: every error names the field.
pub(super) fn validate(opts: &LocalFileOptions) -> Result<()> {
    let bad = |why: String| Err(Error::Startup(format!("localfile options: {why}")));
    if opts.data_paths.is_empty() {
        return bad("no data path configured".to_owned());
    }
    let p = &opts.file_prefix;
    if p.is_empty() || p == "." || p == ".." || p.contains(['/', '\0']) {
        return bad(format!("file prefix {p:?} is not a valid file name"));
    }
    let (lo, hi) = (opts.low_watermark, opts.high_watermark);
    if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) || lo > hi {
        return bad(format!(
            "watermarks must satisfy 0 <= low ({lo}) <= high ({hi}) <= 1"
        ));
    }
    if opts.capacity == Some(0) || !(opts.capacity_ratio > 0.0 && opts.capacity_ratio <= 1.0) {
        return bad(format!(
            "capacity {:?} must be above 0 and capacity ratio {} in (0, 1]",
            opts.capacity, opts.capacity_ratio
        ));
    }
    if opts.write_timeout.is_zero() {
        return bad("write_timeout must be above zero".to_owned());
    }
    if opts.max_concurrency_per_disk == 0 {
        return bad("max_concurrency_per_disk must be at least 1".to_owned());
    }
    Ok(())
}
