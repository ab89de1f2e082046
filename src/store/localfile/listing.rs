//! Listing the data paths: what a start-up scan reports, and the app directories the
//! leaked-data sweep looks at.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::ids::AppId;

/// What a scan found, for the start-up log and the tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ScanReport {
    /// Partitions adopted (readable and appendable again).
    pub partitions: usize,
    /// File pairs adopted (more than `partitions` when some had failed over).
    pub parts: usize,
    /// Index records adopted.
    pub blocks: u64,
    /// Data bytes adopted.
    pub bytes: u64,
    /// Parts whose tail was cut (a write interrupted by the crash).
    pub repaired: usize,
    /// Partitions deleted because their app is not kept (expired or unknown).
    pub dropped_partitions: usize,
    /// Entries that did not parse as our layout, or that failed to read; left alone.
    pub skipped: Vec<String>,
}

/// The app ids with a directory on any of `roots`, for the leaked-data sweep: hidden entries
/// (the recovery journal's), names no app id can have, and a file system's `lost+found` are not
/// apps. A root that cannot be read is logged and skipped.
pub(super) fn app_dirs(roots: &[PathBuf]) -> std::collections::BTreeSet<AppId> {
    let mut report = ScanReport::default();
    let apps = roots
        .iter()
        .flat_map(|root| subdirs(root, &mut report))
        .filter_map(|dir| {
            let name = file_name(&dir);
            if name.starts_with('.') || name == "lost+found" {
                return None;
            }
            AppId::parse(&name).ok()
        })
        .collect();
    for skipped in report.skipped {
        tracing::warn!(%skipped, "leaked-data sweep could not list a data path");
    }
    apps
}

pub(super) fn subdirs(dir: &Path, report: &mut ScanReport) -> Vec<PathBuf> {
    match fs::read_dir(dir) {
        Ok(entries) => entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            report.skipped.push(format!("{}: {e}", dir.display()));
            Vec::new()
        }
    }
}

pub(super) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
