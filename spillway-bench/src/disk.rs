//! The storage ceiling: raw sequential writes and reads of scratch files in the data directory,
//! as many streams at once as the server spills, with the server's sync policy, and the page
//! cache dropped before reading (as for the server's files).

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

/// Writes `bytes` into `streams` scratch files under `dir` at once (Spillway spills several
/// partitions in parallel: `hybrid_store.spill_concurrency`), each in `chunk`-sized writes
/// with an `fdatasync` after each chunk when `sync` (Spillway syncs each spilled batch); then
/// drops their pages, reads them back in `read_size` reads with the same parallelism, and
/// deletes them. Blocking: run it on a blocking thread.
pub fn measure(
    dir: &Path,
    bytes: u64,
    streams: usize,
    chunk: usize,
    read_size: usize,
    sync: bool,
) -> anyhow::Result<DiskCeiling> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let streams = streams.max(1);
    let per_stream = bytes / streams as u64;
    let paths: Vec<_> = (0..streams)
        .map(|i| dir.join(format!(".spillway-bench-ceiling-{i}")))
        .collect();
    let buf: Vec<u8> = (0..chunk).map(|i| (i * 131 + 7) as u8).collect();
    let result = (|| {
        let start = Instant::now();
        parallel(&paths, |path| {
            let mut f = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(path)?;
            let mut left = per_stream;
            while left > 0 {
                let n = (chunk as u64).min(left) as usize;
                f.write_all(&buf[..n])?;
                if sync {
                    f.sync_data()?;
                }
                left -= n as u64;
            }
            Ok(0)
        })?;
        let write = start.elapsed();
        for path in &paths {
            let f = File::open(path)?;
            f.sync_data()?;
            drop_cache(&f);
        }
        let start = Instant::now();
        let total: u64 = parallel(&paths, |path| {
            let mut f = File::open(path)?;
            let mut rbuf = vec![0u8; read_size];
            let mut total = 0u64;
            loop {
                let n = f.read(&mut rbuf)?;
                if n == 0 {
                    return Ok(total);
                }
                total += n as u64;
            }
        })?
        .iter()
        .sum();
        let read = start.elapsed();
        let bytes = per_stream * streams as u64;
        anyhow::ensure!(total == bytes, "read back {total} of {bytes} bytes");
        Ok(DiskCeiling { bytes, write, read })
    })();
    for path in &paths {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// Runs `f` on every path, one thread each; the results in path order.
fn parallel(
    paths: &[std::path::PathBuf],
    f: impl Fn(&Path) -> std::io::Result<u64> + Sync,
) -> anyhow::Result<Vec<u64>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = paths.iter().map(|p| s.spawn(|| f(p))).collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => Ok(r?),
                Err(_) => Err(anyhow::anyhow!("a disk ceiling thread panicked")),
            })
            .collect()
    })
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
