//! The coordinator's operator files, re-read when they change: the exclude-nodes file, the
//! dynamic client conf, the per-user quota file and the access candidates. Like the Java
//! coordinator, each file is polled at its own interval and re-parsed only when its
//! modification time moved, so an operator edits a file in place and the coordinator follows
//! without a restart. Reads are blocking `std::fs` calls on the blocking pool.
//!
//! The parsers are pure and follow the Java 0.10 formats (read from `SimpleClusterManager`,
//! `QuotaManager`, `AccessCandidatesChecker` and `CoordinatorUtils.extractRemoteStorageConf`);
//! the dynamic client conf's formats are in `client_conf.rs`.

pub use crate::config::coordinator::parse_cluster_conf;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A file and the modification time of its last read.
#[derive(Debug)]
pub(super) struct WatchedFile {
    path: PathBuf,
    seen: Option<SystemTime>,
}

/// What one poll found.
#[derive(Debug, PartialEq)]
pub(super) enum Poll {
    /// Same modification time as the last read: nothing to do.
    Unchanged,
    /// The file is absent (or not a regular file).
    Missing,
    /// New content.
    Changed(String),
    /// It exists but could not be read; the caller keeps what it had.
    Failed(String),
}

impl WatchedFile {
    pub(super) fn new(path: PathBuf) -> Self {
        WatchedFile { path, seen: None }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the next poll read the file again whatever its modification time: for content
    /// that was read but rejected, which Java retries at every interval until it parses.
    pub(super) fn forget(&mut self) {
        self.seen = None;
    }

    /// Reads the file if its modification time differs from the last read's. A file that goes
    /// missing is read again whenever it comes back.
    pub(super) fn poll(&mut self) -> Poll {
        let modified = match std::fs::metadata(&self.path) {
            Ok(meta) if meta.is_file() => meta.modified().ok(),
            Ok(_) => {
                self.seen = None;
                return Poll::Missing;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.seen = None;
                return Poll::Missing;
            }
            Err(e) => return Poll::Failed(e.to_string()),
        };
        if modified.is_some() && modified == self.seen {
            return Poll::Unchanged;
        }
        match std::fs::read_to_string(&self.path) {
            Ok(text) => {
                self.seen = modified;
                Poll::Changed(text)
            }
            Err(e) => Poll::Failed(e.to_string()),
        }
    }
}

/// One trimmed entry per non-empty line; lines starting with `#` are comments. The
/// exclude-nodes file (server ids) and, without comments, the access candidates file.
pub(super) fn parse_lines(text: &str, comments: bool) -> HashSet<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !(line.is_empty() || comments && line.starts_with('#')))
        .map(str::to_owned)
        .collect()
}

/// The quota file: `user = appNum` per line, `#` comments. Java stops at the first bad line
/// and keeps what it read before it; so does this, returning the error with what was read.
pub(super) fn parse_quota(text: &str) -> (HashMap<String, i64>, Option<String>) {
    let mut quotas = HashMap::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.split('=');
        let user = parts.next().unwrap_or("").trim();
        let num = parts
            .next()
            .map(str::trim)
            .and_then(|n| n.parse::<i64>().ok());
        match num {
            Some(num) => {
                quotas.insert(user.to_owned(), num);
            }
            None => return (quotas, Some(format!("bad quota line {line:?}"))),
        }
    }
    (quotas, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclude_and_candidate_lines() {
        let set = parse_lines("a-1\n\n # comment\n  b-2  \n#c\n", true);
        assert_eq!(set, HashSet::from(["a-1".into(), "b-2".into()]));
        let set = parse_lines("q1\n#q2\n", false);
        assert_eq!(set, HashSet::from(["q1".into(), "#q2".into()]));
    }

    #[test]
    fn quota_lines_stop_at_the_first_bad_one() {
        let (q, err) = parse_quota("# users\nalice = 2\nbob=0\n");
        assert_eq!(q, HashMap::from([("alice".into(), 2), ("bob".into(), 0)]));
        assert!(err.is_none());
        let (q, err) = parse_quota("alice = 2\nbob\ncarol = 1\n");
        assert_eq!(q, HashMap::from([("alice".into(), 2)]));
        assert!(err.unwrap().contains("bob"));
    }

    #[test]
    fn cluster_conf_format() {
        let conf = parse_cluster_conf("ns1,k1=v1,k2=v2;ns2,k=v").unwrap();
        assert_eq!(conf.len(), 2);
        assert_eq!(conf["ns1"]["k2"], "v2");
        assert_eq!(conf["ns2"]["k"], "v");
        assert!(parse_cluster_conf("").unwrap().is_empty());
        for bad in ["ns1", "ns1,k1", "ns1,k1=v1=x", "ns1,=v", "ns1,k=v;ns2"] {
            assert!(parse_cluster_conf(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn watched_file_reports_changes_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = WatchedFile::new(path.clone());
        assert_eq!(file.poll(), Poll::Missing);
        std::fs::write(&path, "a").unwrap();
        assert_eq!(file.poll(), Poll::Changed("a".into()));
        assert_eq!(file.poll(), Poll::Unchanged);
        // A different modification time, whatever the clock's granularity.
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::write(&path, "b").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(file.poll(), Poll::Changed("b".into()));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file.poll(), Poll::Missing);
    }
}
