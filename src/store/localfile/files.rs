//! Blocking operations on one partition's data/index file pair. Everything here runs on the
//! blocking pool; nothing here knows about disks, health or placement.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice, Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::store::Block;

/// Where one part of a partition lives: `<root>/<appId>/<shuffleId>/<start>-<end>/<prefix>.{data,index}`
/// for part 0 (exactly Uniffle's names), `<prefix>.<seq>.{data,index}` for the parts a failover
/// opened after it.
#[derive(Debug)]
pub(crate) struct PartitionPaths {
    /// The range directory.
    pub dir: PathBuf,
    /// The data file.
    pub data: PathBuf,
    /// The index file.
    pub index: PathBuf,
}

impl PartitionPaths {
    /// Paths of part `seq` in a range directory with the server's file prefix.
    pub fn new(dir: PathBuf, prefix: &str, seq: u32) -> Self {
        let stem = part_stem(prefix, seq);
        PartitionPaths {
            data: dir.join(format!("{stem}.data")),
            index: dir.join(format!("{stem}.index")),
            dir,
        }
    }
}

/// The file name of part `seq` without its extension.
pub(crate) fn part_stem(prefix: &str, seq: u32) -> String {
    if seq == 0 {
        prefix.to_owned()
    } else {
        format!("{prefix}.{seq}")
    }
}

/// The part number of an index or data file name written with `prefix`, `None` for files of
/// another server id (or anything else).
pub(crate) fn parse_part_name(name: &str, prefix: &str, ext: &str) -> Option<u32> {
    let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
    let rest = stem.strip_prefix(prefix)?;
    if rest.is_empty() {
        return Some(0);
    }
    let digits = rest.strip_prefix('.')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    digits.parse().ok().filter(|&n: &u32| n > 0)
}

/// Lengths of the data and index files that readers may see: everything up to them was
/// written (and synced, when configured) by appends that returned `Ok`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Committed {
    /// Bytes of the data file.
    pub data_len: u64,
    /// Bytes of the index file (a multiple of 40).
    pub index_len: u64,
}

/// Test-only fault injected into the next append at a given step.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultPoint {
    /// Before anything is written.
    BeforeData,
    /// After the data was written, before the index.
    AfterData,
    /// After both were written, before the append returns.
    AfterIndex,
    /// Sleeps this many milliseconds before writing, then succeeds (a hung disk).
    StallMs(u64),
}

/// A fault to inject: where, and which OS error to report.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    /// Where the append fails.
    pub at: FaultPoint,
    /// The raw OS error it fails with.
    pub errno: i32,
}

/// Everything one blocking append needs.
pub(crate) struct AppendJob<'a> {
    /// The file pair.
    pub paths: &'a PartitionPaths,
    /// Where the new bytes go.
    pub committed: Committed,
    /// The blocks, in write order.
    pub blocks: &'a [Block],
    /// Create the range directory first (first append of the partition).
    pub create_dirs: bool,
    /// Truncate both files back to `committed` first (an earlier rollback failed).
    pub truncate_first: bool,
    /// fdatasync data, then index, before returning.
    pub sync: bool,
    /// Write the data's whole pages with `O_DIRECT` (see [`write_blocks_direct`]).
    pub direct: bool,
    /// Set when the file system refused `O_DIRECT`: the disk's later appends write buffered.
    pub direct_refused: &'a std::sync::atomic::AtomicBool,
    /// Injected fault, tests only.
    #[cfg(test)]
    pub fault: Option<Fault>,
}

/// Why an append failed, and whether the files were rolled back to the committed lengths.
#[derive(Debug)]
pub(crate) struct AppendFailure {
    /// The file or directory the failing operation touched.
    pub path: PathBuf,
    /// The OS error.
    pub source: io::Error,
    /// False when truncating back also failed: the next append must truncate first.
    pub rolled_back: bool,
}

/// Encodes the index records of `blocks` placed contiguously from `data_offset`.
pub(crate) fn encode_index(blocks: &[Block], data_offset: u64) -> Bytes {
    crate::store::index::encode_blocks(blocks, data_offset)
}

/// Writes the blocks at `committed.data_len`, then their index records at
/// `committed.index_len` (data strictly first, so an index record never points at bytes that
/// are not there). On error both files are truncated back to `committed` (best effort).
pub(crate) fn append(job: &AppendJob<'_>, index: &[u8]) -> Result<(), AppendFailure> {
    let fail = |path: &Path, source: io::Error| AppendFailure {
        path: path.to_owned(),
        source,
        rolled_back: true,
    };
    if job.create_dirs {
        fs::create_dir_all(&job.paths.dir).map_err(|e| fail(&job.paths.dir, e))?;
        if job.sync {
            // The range, shuffle, app and root directories may all be new: make their entries
            // durable so the files survive a crash.
            for dir in job.paths.dir.ancestors().take(4) {
                sync_dir(dir).map_err(|e| fail(dir, e))?;
            }
        }
    }
    if job.truncate_first {
        rollback(job.paths, job.committed).map_err(|(path, e)| AppendFailure {
            path,
            source: e,
            rolled_back: false,
        })?;
    }
    match write_pair(job, index) {
        Ok(()) => Ok(()),
        Err((path, source)) => {
            let rolled_back = match rollback(job.paths, job.committed) {
                Ok(()) => true,
                Err((rpath, re)) => {
                    tracing::warn!(path = %rpath.display(), error = %re, "could not truncate a partition file back after a failed append; the next append retries");
                    false
                }
            };
            Err(AppendFailure {
                path,
                source,
                rolled_back,
            })
        }
    }
}

fn write_pair(job: &AppendJob<'_>, index: &[u8]) -> Result<(), (PathBuf, io::Error)> {
    let data_path = &job.paths.data;
    let index_path = &job.paths.index;
    #[cfg(test)]
    let injected = |at: FaultPoint, path: &Path| -> Result<(), (PathBuf, io::Error)> {
        match job.fault {
            Some(f) if f.at == at => Err((path.to_owned(), io::Error::from_raw_os_error(f.errno))),
            _ => Ok(()),
        }
    };
    #[cfg(test)]
    injected(FaultPoint::BeforeData, data_path)?;
    #[cfg(test)]
    if let Some(Fault {
        at: FaultPoint::StallMs(ms),
        ..
    }) = job.fault
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }

    let mut data = open_for_write(data_path).map_err(|e| (data_path.clone(), e))?;
    let data_len: u64 = job.blocks.iter().map(|b| b.data.len() as u64).sum();
    reserve_extent(&data, job.committed.data_len, data_len).map_err(|e| (data_path.clone(), e))?;
    write_data(job, &mut data).map_err(|e| (data_path.clone(), e))?;
    if job.sync {
        data.sync_data().map_err(|e| (data_path.clone(), e))?;
    }
    #[cfg(test)]
    injected(FaultPoint::AfterData, index_path)?;

    let index_file = open_for_write(index_path).map_err(|e| (index_path.clone(), e))?;
    index_file
        .write_all_at(index, job.committed.index_len)
        .map_err(|e| (index_path.clone(), e))?;
    if job.sync {
        index_file
            .sync_data()
            .map_err(|e| (index_path.clone(), e))?;
    }
    #[cfg(test)]
    injected(FaultPoint::AfterIndex, index_path)?;
    Ok(())
}

/// The job's blocks into its open data file: direct where the job asks for it and the file
/// system allows it, else through the page cache.
fn write_data(job: &AppendJob<'_>, data: &mut File) -> io::Result<()> {
    let offset = job.committed.data_len;
    if !job.direct {
        return write_blocks_at(data, offset, job.blocks);
    }
    match write_blocks_direct(&job.paths.data, data, offset, job.blocks) {
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {
            if !job
                .direct_refused
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(path = %job.paths.data.display(), error = %e,
                    "the file system refuses O_DIRECT writes: this data path's spills go through the page cache");
            }
            // Rewrites any bytes the direct attempt wrote: the same bytes at the same offsets.
            write_blocks_at(data, offset, job.blocks)
        }
        other => other,
    }
}

fn open_for_write(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// Allocates `[offset, offset + len)` of the file before it is written, without changing its
/// size.
///
/// On ext4 a buffered write into unallocated space reserves and tracks every 4 KiB page as a
/// delayed allocation; into an allocated range it only maps pages, and the whole range costs one
/// extent update. Measured on this VM (benches/README, round 7): a third less of the server's
/// system time for a spill's write and fdatasync, a fifth less of the whole machine's (the rest
/// moves to the kernel worker that converts the extents once written). A full disk is also
/// refused here, before any byte is written. File systems without `fallocate` (or this mode of
/// it) get a plain write.
fn reserve_extent(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use nix::errno::Errno;
    use nix::fcntl::{fallocate, FallocateFlags};
    if len == 0 {
        return Ok(());
    }
    let (Ok(off), Ok(n)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::ErrorKind::InvalidInput.into());
    };
    loop {
        match fallocate(file.as_fd(), FallocateFlags::FALLOC_FL_KEEP_SIZE, off, n) {
            Ok(()) | Err(Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::EINVAL) => return Ok(()),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(io::Error::from(e)),
        }
    }
}

/// Vectored write of the blocks' payloads (no copy into one buffer) starting at `offset`.
fn write_blocks_at(file: &mut File, offset: u64, blocks: &[Block]) -> io::Result<()> {
    file.seek(SeekFrom::Start(offset))?;
    let mut slices: Vec<IoSlice<'_>> = blocks
        .iter()
        .filter(|b| !b.data.is_empty())
        .map(|b| IoSlice::new(&b.data))
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        // std caps the slice count at IOV_MAX per call; the loop writes the remainder.
        match file.write_vectored(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The alignment of `O_DIRECT` offsets, lengths and buffers: 4 KiB suits every block device
/// and file system block size in use (512-byte devices accept it too).
const DIRECT_ALIGN: u64 = 4096;

/// The most bytes one `O_DIRECT` write carries, and the size of the staging buffer each
/// blocking thread keeps for them.
const DIRECT_CHUNK: usize = 1 << 20;

thread_local! {
    /// A blocking thread's staging buffer for `O_DIRECT` writes: allocated once per thread and
    /// reused, so its pages stay resident (a fresh buffer per append would fault its pages in
    /// every time, which is the cost direct I/O is here to avoid).
    static STAGING: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Writes the blocks' payloads at `offset` as [`write_blocks_at`] does, but the whole 4 KiB
/// pages of the range go to the disk with `O_DIRECT`, around the page cache.
///
/// Why: a buffered spill copies every byte into page-cache pages, then the kernel writes them
/// back, and at the app's end evicts them. Where fresh pages are dear (a host short of free
/// memory; the benchmark VM with free page reporting) that copy was 27 % of the server's CPU on
/// the Netty plane with the real client, and writing direct saved 13-25 % of it. Here the bytes
/// are copied once into a resident staging buffer and the device reads them from there. Where
/// pages are cheap it saves nothing, and a reader of the range just spilled then reads the disk,
/// hence `direct_io` is off by default (benches/README, round 9).
///
/// Only whole aligned pages can go direct. The partial page at each end of the range (the
/// previous append's last page, and this append's) is written through the page cache as
/// before, so the file's size stays the exact byte count, nothing is read back, and the next
/// append continues that cached page. The direct range never overlaps a cached page of this
/// writer: it starts at or after the end of the head page and ends before the tail page.
/// Readers see a consistent file: the kernel drops cached pages of a range after writing it
/// directly, and readers only read below the committed length.
///
/// `O_DIRECT` refused (`EINVAL` from the open or a write: file systems without direct I/O,
/// such as ramfs, tmpfs before Linux 6.6 and some FUSE ones, or a device whose blocks are larger than
/// 4 KiB) is returned as [`io::ErrorKind::Unsupported`]; the caller writes the range buffered.
fn write_blocks_direct(
    path: &Path,
    buffered: &File,
    offset: u64,
    blocks: &[Block],
) -> io::Result<()> {
    let total: u64 = blocks.iter().map(|b| b.data.len() as u64).sum();
    let end = offset + total;
    let head_end = offset.next_multiple_of(DIRECT_ALIGN).min(end);
    let tail_start = (end / DIRECT_ALIGN * DIRECT_ALIGN).max(head_end);
    let mut payloads = Cursor {
        rest: blocks.iter(),
        current: &[],
    };
    let mut slices = Vec::new();
    if tail_start == head_end {
        // No whole page: nothing to gain.
        payloads.take(total as usize, &mut slices);
        return write_slices_at(buffered, offset, &slices);
    }
    let refused = |e: io::Error| match e.raw_os_error() {
        Some(libc::EINVAL) => io::Error::new(io::ErrorKind::Unsupported, e),
        _ => e,
    };
    let direct = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(refused)?;
    payloads.take((head_end - offset) as usize, &mut slices);
    write_slices_at(buffered, offset, &slices)?;
    STAGING.with_borrow_mut(|staging| -> io::Result<()> {
        if staging.is_empty() {
            staging.resize(DIRECT_CHUNK + DIRECT_ALIGN as usize, 0);
        }
        let start = staging.as_ptr().align_offset(DIRECT_ALIGN as usize);
        let buf = &mut staging[start..start + DIRECT_CHUNK];
        let mut pos = head_end;
        while pos < tail_start {
            let n = DIRECT_CHUNK.min((tail_start - pos) as usize);
            slices.clear();
            payloads.take(n, &mut slices);
            let mut at = 0;
            for s in &slices {
                buf[at..at + s.len()].copy_from_slice(s);
                at += s.len();
            }
            direct.write_all_at(&buf[..n], pos).map_err(refused)?;
            pos += n as u64;
        }
        Ok(())
    })?;
    slices.clear();
    payloads.take((end - tail_start) as usize, &mut slices);
    write_slices_at(buffered, tail_start, &slices)
}

/// The blocks' payloads as one byte sequence, handed out in slices.
struct Cursor<'a> {
    rest: std::slice::Iter<'a, Block>,
    current: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// Appends the next `n` bytes to `out`, as slices of the payloads. The caller asks for no
    /// more than the payloads' total.
    fn take(&mut self, mut n: usize, out: &mut Vec<&'a [u8]>) {
        while n > 0 {
            while self.current.is_empty() {
                self.current = &self.rest.next().expect("within the payloads' total").data;
            }
            let k = n.min(self.current.len());
            out.push(&self.current[..k]);
            self.current = &self.current[k..];
            n -= k;
        }
    }
}

/// Positioned vectored write of `slices` at `offset`.
fn write_slices_at(file: &File, offset: u64, slices: &[&[u8]]) -> io::Result<()> {
    // The kernel takes at most `IOV_MAX` (1,024) slices per call.
    const MAX_SLICES: usize = 1024;
    let mut io: Vec<IoSlice<'_>> = slices.iter().map(|s| IoSlice::new(s)).collect();
    let mut rest = &mut io[..];
    let mut at = offset;
    while !rest.is_empty() {
        let upto = rest.len().min(MAX_SLICES);
        match nix::sys::uio::pwritev(file.as_fd(), &rest[..upto], at as i64) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                IoSlice::advance_slices(&mut rest, n);
                at += n as u64;
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Cuts both files back to `committed` (a write that finished after its part was sealed).
pub(crate) fn truncate_to(paths: &PartitionPaths, committed: Committed) -> io::Result<()> {
    rollback(paths, committed).map_err(|(_, e)| e)
}

/// Truncates both files to the committed lengths (a missing file counts as done).
fn rollback(paths: &PartitionPaths, committed: Committed) -> Result<(), (PathBuf, io::Error)> {
    for (path, len) in [
        (&paths.data, committed.data_len),
        (&paths.index, committed.index_len),
    ] {
        match OpenOptions::new().write(true).open(path) {
            Ok(f) => f.set_len(len).map_err(|e| (path.clone(), e))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err((path.clone(), e)),
        }
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Reads exactly `len` bytes at `offset` of `path`, then asks the kernel to start reading the
/// `read_ahead` bytes that follow in the background.
///
/// Readers walk a partition's file front to back in ranges of their read buffer size, one
/// request at a time: without the hint each range waits for the disk only once it is asked
/// for; with it, the next range is (being) read while this one travels to the client. The
/// buffer is filled from its spare capacity, so a large read is not zeroed first.
pub(crate) fn read_at(path: &Path, offset: u64, len: usize, read_ahead: u64) -> io::Result<Bytes> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::with_capacity(len);
    (&mut file).take(len as u64).read_to_end(&mut buf)?;
    if buf.len() != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    if read_ahead > 0 {
        // A hint: failure only costs the prefetch.
        let _ = nix::fcntl::posix_fadvise(
            file.as_fd(),
            (offset + len as u64) as i64,
            read_ahead as i64,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_WILLNEED,
        );
    }
    Ok(Bytes::from(buf))
}

/// Opens a data file for sending `[offset, offset + len)` straight from the page cache. The
/// file must already hold the range (a shorter file is `UnexpectedEof`, as for
/// [`read_at`]). The range and the next `read_ahead` bytes are announced to the kernel, so the
/// disk reads start now rather than when the socket asks for them.
pub(crate) fn open_range(path: &Path, offset: u64, len: u64, read_ahead: u64) -> io::Result<File> {
    let file = File::open(path)?;
    if file.metadata()?.len() < offset + len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    // A hint: failure only costs the prefetch.
    let _ = nix::fcntl::posix_fadvise(
        file.as_fd(),
        offset as i64,
        (len + read_ahead) as i64,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_WILLNEED,
    );
    Ok(file)
}

/// Removes a directory tree; a missing directory is fine.
pub(crate) fn remove_tree(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Total length of the regular files under `dir` (symlinks not followed; unreadable entries
/// count 0, as in Java's `getServiceUsedSpace`). Blocking.
pub(crate) fn tree_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}
