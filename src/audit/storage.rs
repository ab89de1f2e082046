//! The storage audit log of Uniffle 0.10 (`rss.server.storage.audit.log.enabled`, off by
//! default): one line per spill that reached a local disk or HDFS, and delete lines when an app
//! or a shuffle is purged, written by the logger `SHUFFLE_SERVER_STORAGE_AUDIT_LOG` through
//! log4j's `StorageAuditAppender`, whose layout is the bare message (`%m%n`, no timestamp):
//!
//! ```text
//! w|app_1|0|3_3|local|/data1/rssdata|1056|2025-09-01 12:00:00|2025-09-01 12:00:01|412
//! d|app_1|local|/data1/rssdata
//! d|app_1|0|hdfs-nn|hdfs://hdfs-nn:8020/rss
//! ```
//!
//! Fields as Java's `ShuffleFlushManager.processFlushEvent` (write), `LocalStorageManager` and
//! `HadoopStorageManager.removeResources` (delete) format them (`apache/incubator-uniffle`
//! master snapshots carrying the 0.10 code):
//! - write: `w`, app id, shuffle id, the partition range `start_end`, the storage host (`local`
//!   for a local disk, the host of the remote storage URI for HDFS), the storage path (the disk's
//!   base path, or the app's remote storage path), the event size (Σ block length + 32, what
//!   the batch costs in memory), the write's start and end as `yyyy-MM-dd HH:mm:ss` in the
//!   host's time zone, and the write time in ms (end − start, in epoch milliseconds);
//! - delete: `d`, app id, the purged shuffle ids (comma-joined; absent for a whole-app purge),
//!   host, path: one line per healthy local disk, and one for the app's remote storage when it
//!   has one, logged before the files go (as Java logs before deleting).

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::writer::{Record, Sink};
use crate::ids::{AppId, PartitionKey};

/// Java's `LocalStorage.STORAGE_HOST`: the host field of every local-disk line.
pub const LOCAL_HOST: &str = "local";

/// Where a storage's data lives, as Java's `Storage.getStorageHost()` / `getStoragePath()`
/// name it. Both are shared strings so a spill's line costs reference counts, not copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageSite {
    /// `local`, or the remote storage URI's host; `None` renders Java's `null` (a bare path,
    /// or an authority that is not a host name, has no `URI.getHost()`).
    pub host: Option<Arc<str>>,
    /// The local disk's base path, or the app's remote storage path as the client sent it.
    pub path: Arc<str>,
}

impl StorageSite {
    /// A local disk with base path `root`.
    pub fn local(root: &str) -> StorageSite {
        StorageSite {
            host: Some(Arc::from(LOCAL_HOST)),
            path: Arc::from(root),
        }
    }

    /// An app's remote storage `path` (`hdfs://ns/rss`); the host is what Java's
    /// `new URI(path).getHost()` gives.
    pub fn remote(path: &str) -> StorageSite {
        StorageSite {
            host: java_uri_host(path).map(Arc::from),
            path: Arc::from(path),
        }
    }
}

/// The host of `uri` as `java.net.URI.getHost()` parses it: the authority after `scheme://`
/// without user info and port, and only when it is a server-based host name (letters, digits,
/// `-`, `.`, no label starting or ending with `-`) or an IP literal; otherwise (no scheme, an
/// empty authority, a name with `_` such as an HA nameservice `ns_1`) Java has no host.
pub fn java_uri_host(uri: &str) -> Option<&str> {
    let (scheme, rest) = uri.split_once("://")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host_port.strip_prefix('[') {
        let end = v6.find(']')?;
        return v6[..end]
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(|_| &host_port[..end + 2]);
    }
    let host = match host_port.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        Some(_) => return None,
        None => host_port,
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    let last_ok = trimmed
        .rsplit('.')
        .next()
        .is_some_and(|l| l.starts_with(|c: char| c.is_ascii_alphabetic()))
        || trimmed.parse::<std::net::Ipv4Addr>().is_ok();
    (!trimmed.is_empty() && trimmed.split('.').all(label_ok) && last_ok).then_some(host)
}

/// One storage audit line, kept as values so formatting happens on the writer thread.
#[derive(Debug, Clone, PartialEq)]
pub enum StorageRecord {
    /// A spill that is durable.
    Write {
        /// The partition range spilled, of its app and shuffle.
        part: PartitionKey,
        /// Where it was written.
        site: StorageSite,
        /// Σ (block length + 32): Java's event size.
        size: u64,
        /// When the write started.
        start: SystemTime,
        /// When it was durable.
        end: SystemTime,
    },
    /// A purge about to delete the files under `site`.
    Delete {
        /// App.
        app: AppId,
        /// The shuffle purged; `None` for the whole app.
        shuffle: Option<i32>,
        /// Where the files are.
        site: StorageSite,
    },
}

fn epoch_millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

/// `DateFormatUtils.format(millis, "yyyy-MM-dd HH:mm:ss")`: the JVM's default (the host's)
/// time zone, seconds precision.
fn write_seconds(out: &mut dyn Write, at: SystemTime) -> io::Result<()> {
    let local: chrono::DateTime<chrono::Local> = at.into();
    write!(out, "{}", local.format("%Y-%m-%d %H:%M:%S"))
}

fn write_site(out: &mut dyn Write, site: &StorageSite) -> io::Result<()> {
    write!(
        out,
        "{}|{}",
        site.host.as_deref().unwrap_or("null"),
        site.path
    )
}

impl Record for StorageRecord {
    fn write_line(&self, out: &mut dyn Write) -> io::Result<()> {
        match self {
            StorageRecord::Write {
                part,
                site,
                size,
                start,
                end,
            } => {
                let (app, shuffle, range) = (&part.app, part.shuffle, part.range);
                write!(out, "w|{app}|{shuffle}|{}_{}|", range.start, range.end)?;
                write_site(out, site)?;
                write!(out, "|{size}|")?;
                write_seconds(out, *start)?;
                out.write_all(b"|")?;
                write_seconds(out, *end)?;
                // Java subtracts the two `currentTimeMillis` readings.
                write!(out, "|{}", epoch_millis(*end) - epoch_millis(*start))
            }
            StorageRecord::Delete { app, shuffle, site } => {
                write!(out, "d|{app}|")?;
                if let Some(shuffle) = shuffle {
                    write!(out, "{shuffle}|")?;
                }
                write_site(out, site)
            }
        }
    }
}

/// The storage audit log as the spiller and the purges see it: `None` when
/// `audit.storage_log` is off, so an unaudited server pays one branch per spill.
#[derive(Clone, Default)]
pub struct StorageAudit {
    sink: Option<Sink<StorageRecord>>,
}

impl std::fmt::Debug for StorageAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageAudit")
            .field("on", &self.sink.is_some())
            .finish()
    }
}

impl StorageAudit {
    /// A log that records nothing.
    pub fn off() -> Self {
        StorageAudit { sink: None }
    }

    /// A log writing to `sink`.
    pub fn new(sink: Sink<StorageRecord>) -> Self {
        StorageAudit { sink: Some(sink) }
    }

    /// Whether lines are recorded (callers skip gathering sites otherwise).
    pub fn is_on(&self) -> bool {
        self.sink.is_some()
    }

    /// Queues a write line; `site` `None` (a tier that does not say where) logs nothing, as
    /// Java only audits the storages it has.
    pub fn written(
        &self,
        part: &PartitionKey,
        site: Option<StorageSite>,
        size: u64,
        (start, end): (SystemTime, SystemTime),
    ) {
        if let (Some(sink), Some(site)) = (&self.sink, site) {
            let part = part.clone();
            sink.send(StorageRecord::Write {
                part,
                site,
                size,
                start,
                end,
            });
        }
    }

    /// Queues one delete line per site.
    pub fn deleted(&self, app: &AppId, shuffle: Option<i32>, sites: Vec<StorageSite>) {
        if let Some(sink) = &self.sink {
            for site in sites {
                sink.send(StorageRecord::Delete {
                    app: app.clone(),
                    shuffle,
                    site,
                });
            }
        }
    }

    /// Flushes and stops the writer (shutdown).
    pub async fn close(&self) {
        if let Some(sink) = &self.sink {
            sink.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::PartitionRange;
    use std::time::Duration;

    fn line(r: &StorageRecord) -> String {
        let mut out = Vec::new();
        r.write_line(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn hosts_follow_java_uri_get_host() {
        assert_eq!(java_uri_host("hdfs://nn:8020/rss"), Some("nn"));
        assert_eq!(java_uri_host("hdfs://ns1/rss"), Some("ns1"));
        assert_eq!(
            java_uri_host("hdfs://user@nn.corp.example:9000"),
            Some("nn.corp.example")
        );
        assert_eq!(java_uri_host("hdfs://10.0.0.5:8020/x"), Some("10.0.0.5"));
        assert_eq!(java_uri_host("hdfs://[::1]:8020/x"), Some("[::1]"));
        assert_eq!(java_uri_host("/tmp/rss"), None);
        assert_eq!(java_uri_host("hdfs:///rss"), None);
        assert_eq!(java_uri_host("hdfs://ns_1/rss"), None);
        assert_eq!(java_uri_host("hdfs://-bad/rss"), None);
    }

    #[test]
    fn lines_render_javas_fields_in_order() {
        let app = AppId::parse("app_1").unwrap();
        let start = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        let end = start + Duration::from_millis(1_412);
        let write = StorageRecord::Write {
            part: PartitionKey::new(app.clone(), 0, PartitionRange::new(3, 4).unwrap()),
            site: StorageSite::local("/data1/rssdata"),
            size: 1056,
            start,
            end,
        };
        let text = line(&write);
        let fields: Vec<&str> = text.split('|').collect();
        assert_eq!(fields.len(), 10, "{text}");
        assert_eq!(
            &fields[..7],
            ["w", "app_1", "0", "3_4", "local", "/data1/rssdata", "1056"]
        );
        assert_eq!(fields[7].len(), "2023-11-14 22:13:20".len());
        assert_eq!(fields[9], "1412");

        let whole_app = StorageRecord::Delete {
            app: app.clone(),
            shuffle: None,
            site: StorageSite::remote("/tmp/rss"),
        };
        assert_eq!(line(&whole_app), "d|app_1|null|/tmp/rss");
        let one_shuffle = StorageRecord::Delete {
            app,
            shuffle: Some(7),
            site: StorageSite::remote("hdfs://nn:8020/rss"),
        };
        assert_eq!(line(&one_shuffle), "d|app_1|7|nn|hdfs://nn:8020/rss");
    }
}
