//! Reading the Java Uniffle shuffle server's own `server.conf` (a Java properties file), so an
//! operator can swap the Java server for Spillway without rewriting the configuration first.
//!
//! # Which files are read this way
//!
//! A config file is read as Java properties when it has at least one `rss.*` key and no
//! `[section]` header line, whatever its name: such a file can never be a valid Spillway TOML
//! config (no Spillway key starts with `rss.`, so TOML would reject it as an unknown key), so
//! there is nothing to guess. A `*.conf` or `*.properties` file with no entries at all (only
//! comments) is a Java file too, so it gets the Java server's memory sizing. Everything else is
//! TOML, which stays the native format.
//!
//! # How a Java file is read
//!
//! As `java.util.Properties.load` reads it (the Java server loads it that way): `key=value`,
//! `key: value` and `key value`; `#` and `!` comment lines; a line ending in an odd number of
//! backslashes continues on the next one (its leading blanks dropped); `\t`, `\n`, `\r`, `\f`,
//! `\uXXXX` escapes, any other escaped character stands for itself; the last of duplicate keys
//! wins. Values are trimmed, and keys are matched case-insensitively, as the Java server does.
//!
//! Values are parsed as the Java server parses them:
//! - sizes: a byte count or digits with one of `b k kb m mb g gb t tb p pb` (any case, binary
//!   units: `40gb`, `512m`, `1024`); no fractions and no space before the unit;
//! - durations: milliseconds (seconds for keys ending in `.sec`/`.seconds`/`Sec`). Spillway
//!   also takes `us`, `ms`, `s`, `min`, `h` and `d` suffixes (`10s`), which the Java server
//!   rejects, so no file the Java server accepts changes meaning. `5m` is refused: the Java
//!   server reads it as 5 MiB of milliseconds (87 minutes), almost certainly not what was meant;
//! - percentages in `0..=100`, booleans `true`/`false` (any case), enums by name (any case),
//!   lists split on `,` (each item trimmed, empty items dropped; Java keeps the blanks).
//!
//! A value that does not parse fails start-up with the Java key named
//! (``config key `rss.server.buffer.capacity`: "abc" is not a size ...``), and so does a mapped
//! value that Spillway's validation refuses. Keys with no Spillway equivalent are never fatal:
//! they are listed once, in one warning logged at start-up. The env overlay (`WORKER_IP`,
//! `SPILLWAY_ADMIN_TOKEN`) still applies afterwards, and [`Config::validate`] runs last.
//!
//! # Mapping
//!
//! Every key of the Java server, of 0.9.2 and of 0.10, has one row in [`keys::KEYS`]: mapped
//! (with the Spillway keys it sets, the conversion, and what applies when it is absent), not
//! applicable (with the reason), or refused (with the reason). The mapping code sits in one file
//! per concern: `listeners`, `storage`, `memory`, `health`, `hdfs`, `metrics`,
//! `audit`, `coordination`. "Absent" is the Java server's default where it decides behaviour
//! the operator tuned around (memory sizing and watermarks), else Spillway's own default (they
//! agree except where the row says so).
//!
//! A key that is set but not used is named in one start-up warning with its reason: the row's
//! reason for a not-applicable key, the context for a mapped key that another key switches off
//! (Kerberos keys with Kerberos off), "not a key of the Java shuffle server" for the rest. A
//! refused key stops start-up unless it is set to Java's default.

mod audit;
mod coordination;
mod coordinator;
pub mod coordinator_keys;
mod hdfs;
mod health;
pub mod keys;
mod listeners;
mod mapper;
mod memory;
mod metrics;
pub mod names;
mod quota;
mod reload;
mod storage;
mod syntax;
#[cfg(test)]
mod table_checks;
#[cfg(test)]
mod tests;
mod values;

use std::path::Path;
use std::sync::Mutex;

use super::{Config, ConfigError};
pub use mapper::JavaConfig;
use mapper::Mapper;
use syntax::{logical_lines, looks_like_properties};
pub use syntax::{parse_properties, Property};
/// Java's value syntax, for the keys runtime reconfiguration takes by their Java names.
pub(crate) use values::{java_double, java_size};

/// The Java key of the HTTP Basic credentials (a secret: masked wherever config is shown).
pub const BASIC_CREDENTIALS_KEY: &str = "rss.http.basic.authorizationCredentials";

/// The reporter class the Java server pushes to a Prometheus push gateway with.
pub(super) const PUSH_GATEWAY_REPORTER: &str =
    "org.apache.uniffle.common.metrics.prometheus.PrometheusPushGatewayMetricReporter";

/// Warnings from loading a Java file, kept until logging is set up: the config is loaded
/// before the log subscriber exists, so a warning logged at load time would be lost.
static DEFERRED_WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The warnings the config load produced, each one log line; empties the list, so each
/// warning is reported once.
pub fn take_warnings() -> Vec<String> {
    std::mem::take(&mut *DEFERRED_WARNINGS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Whether a Java properties file is the Java coordinator's `coordinator.conf` rather than a
/// shuffle server's `server.conf` (see the module docs): it is named `coordinator.conf`, as
/// Java's `start-coordinator.sh` names it, or it sets a key only the coordinator reads (a row
/// of [`coordinator_keys::COORDINATOR_KEYS`] that the server's table does not have) and no key
/// of the shuffle server's own (`rss.server.*`, `rss.storage.*`). A server.conf always has
/// `rss.storage.*` keys, and a coordinator.conf has no reason to; `rss.coordinator.quorum` is
/// the server's and does not count.
pub(super) fn is_coordinator_file(path: &Path, text: &str) -> bool {
    if path
        .file_name()
        .is_some_and(|n| n.eq_ignore_ascii_case("coordinator.conf"))
    {
        return true;
    }
    let Ok(props) = parse_properties(text) else {
        return false;
    };
    let lower = |p: &Property| p.key.to_ascii_lowercase();
    let server_only = props.iter().any(|p| {
        let k = lower(p);
        k.starts_with("rss.server.") || k.starts_with("rss.storage.")
    });
    let coordinator_only = props
        .iter()
        .any(|p| coordinator_keys::lookup(&p.key).is_some() && keys::lookup(&p.key).is_none());
    coordinator_only && !server_only
}

/// Whether a config file is read as a Java `server.conf` (see the module docs).
pub(super) fn is_java_file(path: &Path, text: &str) -> bool {
    looks_like_properties(text) || (has_java_suffix(path) && logical_lines(text).is_empty())
}

fn has_java_suffix(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("conf") || e.eq_ignore_ascii_case("properties"))
}

/// Reads a `--config` file in whichever format it is in (see the module docs). `heap` is the
/// Java heap the operator's `XMX_SIZE` names, which the `*.ratio` keys then apply to instead of
/// [`available_memory`].
pub(super) fn parse_config_file(
    path: &Path,
    text: &str,
    heap: Option<u64>,
) -> Result<Config, ConfigError> {
    let java_suffix = has_java_suffix(path);
    if !is_java_file(path, text) {
        return Config::parse_toml(text).map_err(|mut e| {
            if java_suffix {
                e.reason = format!(
                    "{} (read as TOML: the file has no rss.* key of a Java server.conf)",
                    e.reason
                );
            }
            e
        });
    }
    let coordinator = is_coordinator_file(path, text);
    let loaded = if coordinator {
        from_coordinator_properties(text)?
    } else {
        from_properties(text, heap.or_else(available_memory))?
    };
    if !loaded.ignored.is_empty() {
        let warning = format!(
            "{}: {} Java {} setting(s) are not used: {}",
            path.display(),
            loaded.ignored.len(),
            if coordinator { "coordinator" } else { "server" },
            loaded.ignored.join(", ")
        );
        DEFERRED_WARNINGS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(warning);
    }
    Ok(loaded.config)
}

/// Maps a Java server config onto a validated [`Config`].
///
/// `memory` is what the `*.ratio` keys are fractions of (see [`available_memory`]); `None`
/// leaves Spillway's fixed capacity defaults where a ratio would apply.
pub fn from_properties(text: &str, memory: Option<u64>) -> Result<JavaConfig, ConfigError> {
    let mut m = Mapper::new(parse_properties(text)?);
    m.map_all(memory)?;
    m.finish()
}

/// Maps a Java coordinator's `coordinator.conf` onto a validated [`Config`] whose `role` is
/// the coordinator.
pub fn from_coordinator_properties(text: &str) -> Result<JavaConfig, ConfigError> {
    let mut m = Mapper::new(parse_properties(text)?);
    m.map_coordinator_conf()?;
    m.finish()
}

/// Bytes of memory this process may use: physical memory, or its cgroup's limit when lower.
/// The Java server sizes its buffers from the JVM's heap or direct-memory limit; Spillway has
/// neither, and this is the budget those limits were carved from.
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let total_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let total = total_kib.checked_mul(1024)?;
    // cgroup v2, then v1; "max" (v2) and an absurd number (v1) mean no limit.
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok());
    Some(limit.map_or(total, |l| l.min(total)))
}
