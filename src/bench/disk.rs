//! The storage ceiling: raw sequential write and read of one file in the data directory, with
//! the server's sync policy, and the page cache dropped before reading (as for the server's
//! files), so both sides of the ratio read from the disk.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;

/// Raw disk figures.
#[derive(Debug, Clone, Copy)]
pub struct DiskCeiling {
    /// Bytes written and read.
    pub bytes: u64,
    /// Write time (including the syncs).
    pub write: Duration,
    /// Read time.
    pub read: Duration,
}

impl DiskCeiling {
    /// Write GB/s.
    pub fn write_gb_s(&self) -> f64 {
        self.bytes as f64 / self.write.as_secs_f64().max(1e-9) / 1e9
    }

    /// Read GB/s.
    pub fn read_gb_s(&self) -> f64 {
        self.bytes as f64 / self.read.as_secs_f64().max(1e-9) / 1e9
    }
}

/// Writes `bytes` into a scratch file under `dir` in `chunk`-sized writes, `fdatasync` after
/// each chunk when `sync` (Spillway syncs each spilled batch), drops its pages, reads it back
/// in `read_size` reads, and deletes it. Blocking: run it on a blocking thread.
pub fn measure(
    dir: &Path,
    bytes: u64,
    chunk: usize,
    read_size: usize,
    sync: bool,
) -> anyhow::Result<DiskCeiling> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(".spillway-bench-ceiling");
    let buf: Vec<u8> = (0..chunk).map(|i| (i * 131 + 7) as u8).collect();
    let result = (|| {
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)?;
        let start = Instant::now();
        let mut left = bytes;
        while left > 0 {
            let n = (chunk as u64).min(left) as usize;
            f.write_all(&buf[..n])?;
            if sync {
                f.sync_data()?;
            }
            left -= n as u64;
        }
        if !sync {
            f.flush()?;
        }
        let write = start.elapsed();
        f.sync_data()?;
        drop_cache(&f);
        drop(f);
        let mut f = File::open(&path)?;
        let mut rbuf = vec![0u8; read_size];
        let start = Instant::now();
        let mut total = 0u64;
        loop {
            let n = f.read(&mut rbuf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        let read = start.elapsed();
        anyhow::ensure!(total == bytes, "read back {total} of {bytes} bytes");
        Ok(DiskCeiling { bytes, write, read })
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// Evicts a file's clean pages from the page cache (best effort).
pub fn drop_cache(f: &File) {
    let _ = nix::fcntl::posix_fadvise(
        f.as_fd(),
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    );
}

/// Evicts every file under `dir` from the page cache (the server's data files, after
/// `finishShuffle` made them durable), so reads come from the disk as in the ceiling.
pub fn drop_cache_tree(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => drop_cache_tree(&path),
            Ok(t) if t.is_file() => {
                if let Ok(f) = File::open(&path) {
                    let _ = f.sync_data();
                    drop_cache(&f);
                }
            }
            _ => {}
        }
    }
}
