//! Restart recovery of the local-file tier: the files are self-describing, so the partitions
//! a previous run of this server wrote are found again by walking the data paths.
//!
//! ```text
//! <data_path>/<appId>/<shuffleId>/<start>-<end>/<prefix>[.<seq>].{data,index}
//! ```
//!
//! Every part found is checked the way a reader would: index records must be whole,
//! contiguous from offset 0 and end inside the data file. The first record that is not is
//! where a write was cut by the crash: the index is cut there and the data file after the last
//! good record, so a later append continues a clean file. Files of another server id, and
//! anything that does not parse as the layout, are left alone and logged; partitions of apps
//! the caller does not keep are deleted (their files only).

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::disk::Disk;
use super::files::{parse_part_name, Committed, PartitionPaths};
use super::listing::{file_name, subdirs, ScanReport};
use super::{LocalFileTier, Part, PartState, PartitionFile, WriterState};
use crate::ids::{AppId, PartitionKey, PartitionRange};
use crate::store::index::IndexEntry;

/// One part as found on disk.
struct FoundPart {
    seq: u32,
    disk: Arc<Disk>,
    dir: PathBuf,
}

impl LocalFileTier {
    /// Walks every data path and adopts the partitions of apps for which `keep` holds; deletes
    /// our files of the others. Blocking: call it at start-up, before serving.
    ///
    /// A path that failed its start-up probe is walked too: the probe writes, and a disk that
    /// is full (or otherwise refuses writes) still holds readable, acknowledged data. Its
    /// partitions are adopted for reads only: nothing is cut or deleted there (a frozen file
    /// system would block the start on the first write), a partly written tail is cut before
    /// the next append instead, and appends move to another disk while it stays unhealthy.
    pub fn recover(&self, keep: &dyn Fn(&AppId) -> bool) -> ScanReport {
        let mut report = ScanReport::default();
        let mut found: BTreeMap<PartitionKey, Vec<FoundPart>> = BTreeMap::new();
        for disk in &self.disks {
            if !disk.is_healthy() {
                tracing::warn!(disk = %disk.root.display(), storage_id = disk.index, reason = %disk.reason(), "data path is unhealthy at start-up: its partitions are adopted for reads only");
            }
            self.walk_disk(disk, &mut found, &mut report);
        }
        for (key, mut parts) in found {
            if !keep(&key.app) {
                // On an unhealthy disk the files stay; the leaked-data sweep takes them once
                // the disk is healthy again.
                for p in parts.iter().filter(|p| p.disk.is_healthy()) {
                    self.delete_part_files(p, &mut report);
                }
                report.dropped_partitions += 1;
                continue;
            }
            parts.sort_by_key(|p| p.seq);
            self.adopt(key, parts, &mut report);
        }
        for why in &report.skipped {
            tracing::warn!(entry = %why, "recovery skipped an entry of a data path");
        }
        report
    }

    fn walk_disk(
        &self,
        disk: &Arc<Disk>,
        found: &mut BTreeMap<PartitionKey, Vec<FoundPart>>,
        report: &mut ScanReport,
    ) {
        for app_dir in subdirs(&disk.root, report) {
            let name = file_name(&app_dir);
            if name.starts_with('.') {
                continue; // the server's own (journal, probe)
            }
            let Ok(app) = AppId::parse(&name) else {
                report
                    .skipped
                    .push(format!("{}: not an app id", app_dir.display()));
                continue;
            };
            for shuffle_dir in subdirs(&app_dir, report) {
                let Ok(shuffle) = file_name(&shuffle_dir).parse::<i32>() else {
                    report
                        .skipped
                        .push(format!("{}: not a shuffle id", shuffle_dir.display()));
                    continue;
                };
                for range_dir in subdirs(&shuffle_dir, report) {
                    let Some(range) = parse_range(&file_name(&range_dir)) else {
                        report
                            .skipped
                            .push(format!("{}: not a partition range", range_dir.display()));
                        continue;
                    };
                    let key = PartitionKey::new(app.clone(), shuffle, range);
                    for seq in self.parts_in(&range_dir, report) {
                        found.entry(key.clone()).or_default().push(FoundPart {
                            seq,
                            disk: Arc::clone(disk),
                            dir: range_dir.clone(),
                        });
                    }
                }
            }
        }
    }

    /// Part numbers of our index files in a range directory (other servers' files skipped).
    fn parts_in(&self, dir: &Path, report: &mut ScanReport) -> Vec<u32> {
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                report.skipped.push(format!("{}: {e}", dir.display()));
                return Vec::new();
            }
        };
        let mut seqs = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(seq) = parse_part_name(&name, &self.prefix, "index") {
                seqs.push(seq);
            } else if parse_part_name(&name, &self.prefix, "data").is_none() {
                report.skipped.push(format!(
                    "{}: not a file of this server ({})",
                    dir.join(&name).display(),
                    self.prefix
                ));
            }
        }
        seqs
    }

    /// Checks and repairs each part, then installs the partition: every part sealed but the
    /// last, bases from the checked lengths.
    fn adopt(&self, key: PartitionKey, found: Vec<FoundPart>, report: &mut ScanReport) {
        let file = Arc::new(PartitionFile::default());
        let mut base = 0u64;
        {
            let mut parts = file.parts.lock();
            for f in found {
                let paths = PartitionPaths::new(f.dir.clone(), &self.prefix, f.seq);
                let writable = f.disk.is_healthy();
                let checked = match check_part(&paths, writable) {
                    Ok(c) => c,
                    Err(e) => {
                        report
                            .skipped
                            .push(format!("{}: {e}", paths.index.display()));
                        continue;
                    }
                };
                if checked.repaired {
                    report.repaired += 1;
                    tracing::warn!(partition = %key, path = %paths.index.display(), blocks = checked.blocks, cut_now = writable, "a partly written tail after the restart: reads stop before it, and it is cut before the next append");
                }
                report.parts += 1;
                report.blocks += checked.blocks;
                report.bytes += checked.committed.data_len;
                f.disk
                    .add_written(checked.committed.data_len + checked.committed.index_len);
                parts.push(Arc::new(Part {
                    seq: f.seq,
                    disk: f.disk,
                    paths,
                    base,
                    writer: Arc::new(tokio::sync::Mutex::new(WriterState {
                        dirs_created: true,
                        // A tail found on an unhealthy disk was not cut: cut it before appending.
                        needs_truncate: checked.repaired && !writable,
                    })),
                    state: parking_lot::Mutex::new(PartState {
                        committed: checked.committed,
                        sealed: false,
                        lost: false,
                    }),
                }));
                base += checked.committed.data_len;
            }
            // A part skipped above leaves its successor last: that one takes appends.
            if let Some(last) = parts.last() {
                last.state.lock().sealed = false;
            }
            for p in parts.iter().rev().skip(1) {
                p.state.lock().sealed = true;
            }
            if parts.is_empty() {
                return;
            }
        }
        report.partitions += 1;
        self.partitions.lock().insert(key, file);
    }

    fn delete_part_files(&self, p: &FoundPart, report: &mut ScanReport) {
        let paths = PartitionPaths::new(p.dir.clone(), &self.prefix, p.seq);
        for path in [&paths.data, &paths.index] {
            if let Err(e) = fs::remove_file(path) {
                if e.kind() != io::ErrorKind::NotFound {
                    report.skipped.push(format!("{}: {e}", path.display()));
                }
            }
        }
        // Empty range, shuffle and app directories go too (`remove_dir` keeps non-empty ones).
        let mut dir = Some(paths.dir.as_path());
        for _ in 0..3 {
            match dir {
                Some(d) if fs::remove_dir(d).is_ok() => dir = d.parent(),
                _ => break,
            }
        }
    }
}

/// A part after its check.
struct Checked {
    committed: Committed,
    blocks: u64,
    repaired: bool,
}

/// Reads a part's index and keeps the longest prefix of whole, contiguous records that end
/// inside the data file; with `cut`, both files are cut to it (without, the caller cuts later).
fn check_part(paths: &PartitionPaths, cut: bool) -> io::Result<Checked> {
    let index = fs::read(&paths.index)?;
    let data_len = match fs::metadata(&paths.data) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    let mut end = 0u64;
    let mut good = 0usize;
    for rec in index.chunks_exact(IndexEntry::SIZE) {
        let Some(e) = IndexEntry::decode(&mut &rec[..]) else {
            break;
        };
        let Ok(len) = u64::try_from(e.length) else {
            break;
        };
        if e.offset != end as i64 || end + len > data_len {
            break;
        }
        end += len;
        good += 1;
    }
    let committed = Committed {
        data_len: end,
        index_len: (good * IndexEntry::SIZE) as u64,
    };
    let repaired = committed.index_len != index.len() as u64 || committed.data_len != data_len;
    if repaired && cut {
        for (path, len) in [
            (&paths.index, committed.index_len),
            (&paths.data, committed.data_len),
        ] {
            match OpenOptions::new().write(true).open(path) {
                Ok(f) => f.set_len(len)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(Checked {
        committed,
        blocks: good as u64,
        repaired,
    })
}

fn parse_range(name: &str) -> Option<PartitionRange> {
    let (start, end) = name.split_once('-')?;
    PartitionRange::new(start.parse().ok()?, end.parse().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_tail_is_cut_to_the_last_whole_record() {
        let dir = tempfile::tempdir().unwrap();
        let paths = PartitionPaths::new(dir.path().to_path_buf(), "p", 0);
        let blocks: Vec<crate::store::Block> = (0..3)
            .map(|i| crate::store::conformance::test_block(i, 1, vec![i as u8; 10].into()))
            .collect();
        let index = crate::store::index::encode_blocks(&blocks, 0);
        fs::write(&paths.data, vec![0u8; 25]).unwrap(); // the third block is cut short
        let mut torn = index.to_vec();
        torn.extend_from_slice(&[1, 2, 3]); // and a partial record
        fs::write(&paths.index, &torn).unwrap();
        let c = check_part(&paths, true).unwrap();
        assert!(c.repaired);
        assert_eq!(c.blocks, 2);
        assert_eq!(c.committed.data_len, 20);
        assert_eq!(fs::metadata(&paths.index).unwrap().len(), 80);
        assert_eq!(fs::metadata(&paths.data).unwrap().len(), 20);
        // Checking again finds nothing to repair.
        assert!(!check_part(&paths, true).unwrap().repaired);
    }
}
