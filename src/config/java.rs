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
//! "Absent" says what Spillway uses when the key is not in the file: the Java server's default
//! where it decides behaviour the operator tuned around (memory sizing and watermarks), else
//! Spillway's own default (they agree except where noted).
//!
//! | Java key | Spillway key | Conversion | Absent |
//! |---|---|---|---|
//! | `rss.rpc.server.port` | `grpc_port` | 0..=65535; 0 = any free port | 19999 |
//! | `rss.server.netty.port` | `netty_port` | a negative port turns the Netty plane off (0.9); 0 = any free port | see next row |
//! | `rss.rpc.server.type` | `netty_port` | only when no Netty port is set: `GRPC` turns the Netty plane off, `GRPC_NETTY` puts it on 17000 | 17000 (0.10's default `GRPC_NETTY`; a 0.9 server without either key served gRPC only) |
//! | `rss.jetty.http.port` | `metrics.http_port` | 0..=65535 | 19998 |
//! | `rss.http.basic.authorizationCredentials` | `metrics.basic_credentials` | as written (base64 of `user:password`), compared as-is with the `Authorization: Basic` value | none |
//! | `rss.storage.type` | `store_type` | `MEMORY_LOCALFILE`, `MEMORY_HDFS`, `MEMORY_LOCALFILE_HDFS`, and `LOCALFILE`, `HDFS`, `LOCALFILE_HDFS` (a commit waits for the shuffle's spill, as Java); `MEMORY` alone is refused (no tier to spill to) | `MEMORY_LOCALFILE` (Java has no default) |
//! | `rss.server.commit.timeout` | `app.commit_timeout` | ms > 0 | 600 s |
//! | `rss.storage.basePath` | `localfile_store.data_paths` | comma-separated | `/tmp/spillway/data` (Java has no default) |
//! | `rss.coordinator.quorum` | `coordinator_quorum` | comma-separated `host:port` | none (standalone) |
//! | `rss.server.tags` | `tags` | comma-separated | none |
//! | `rss.server.heartbeat.interval` | `heartbeat_interval` | ms | 10 s |
//! | `rss.server.buffer.capacity` | `memory_store.capacity` | size; negative = use the ratio | ratio below |
//! | `rss.server.buffer.capacity.ratio` | `memory_store.capacity` | × the memory the process may use (physical memory, or the cgroup limit when lower) instead of Java's max heap / max direct memory, rounded down to whole MiB; in (0, 1] | 0.6 |
//! | `rss.server.read.buffer.capacity` | `memory_store.read_capacity` | size; negative = use the ratio | ratio below |
//! | `rss.server.read.buffer.capacity.ratio` | `memory_store.read_capacity` | as the write ratio | 0.2 |
//! | `rss.server.memory.shuffle.highWaterMark.percentage` | `hybrid_store.memory_spill_high_watermark` | percent / 100 | 75 % (Java's) |
//! | `rss.server.memory.shuffle.lowWaterMark.percentage` | `hybrid_store.memory_spill_low_watermark` | percent / 100 | 25 % (Java's) |
//! | `rss.server.single.buffer.flush.threshold` | `hybrid_store.memory_single_buffer_max_spill_size` | size | 128 MiB |
//! | `rss.server.single.buffer.flush.enabled` | (behaviour) | `true` is what Spillway always does; `false` is warned | |
//! | `rss.server.preAllocation.expired` | `memory_store.buffer_ticket_timeout`, and half of it `memory_store.buffer_ticket_check_interval` (Java's sweep period) | ms | 20 s / 10 s |
//! | `rss.server.app.expired.withoutHeartbeat` | `app.app_heartbeat_timeout`, and half of it `app.expiry_check_interval` (Java's sweep period) | ms | 60 s / 10 s |
//! | `rss.server.flush.localfile.threadPool.size` | `hybrid_store.spill_concurrency` | ≥ 1 | 8 (Java: 10 threads) |
//! | `rss.server.flush.hadoop.threadPool.size` | `hdfs_store.max_concurrency` | ≥ 1 | 10 (Java: 60 threads) |
//! | `rss.server.max.concurrency.of.per-partition.write` (or its old name `rss.server.max.concurrency.of.single.partition.writer`) | `hdfs_store.partition_write_max_concurrency` | ≥ 1 | 20 (Java: 30) |
//! | `rss.server.flush.cold.storage.threshold.size` | `hdfs_store.cold_storage_threshold_size` | size > 0 | 64 MiB |
//! | `rss.server.storage.flushOperationTimeoutSec` | `localfile_store.write_timeout` and `hdfs_store.write_timeout` | seconds; ≤ 0 (Java: no timeout) keeps Spillway's hung-write timeouts | 60 s / 30 s |
//! | `rss.server.huge-partition.size.threshold` | `hybrid_store.huge_partition_size_threshold` | size > 0 | 20 GiB |
//! | `rss.server.huge-partition.memory.limit.ratio` | `hybrid_store.huge_partition_memory_limit_ratio` | in (0, 1] | 0.2 |
//! | `rss.server.huge-partition.size.hard.limit` | `hybrid_store.huge_partition_hard_limit` | size > 0; `9223372036854775807` = no limit | no limit |
//! | `rss.server.huge-partition.split.limit` | `hybrid_store.huge_partition_split_limit` | size; `9223372036854775807` = never split; negative (Java: split every partition) = 0, which splits every partition a client lists (each carries a block, ≥ 32 encoded bytes) | never split |
//! | `rss.server.high.watermark.write` | `localfile_store.disk_high_watermark` | percent / 100 | 95 % |
//! | `rss.server.low.watermark.write` | `localfile_store.disk_low_watermark` | percent / 100 | 85 % |
//! | `rss.server.health.check.enable` + `rss.server.health.min.storage.percentage` | `localfile_store.healthy_check_min_disks` | when enabled: ⌈percentage × disks / 100⌉ (default 80 %); off: 0 | 0 (off) |
//! | `rss.server.rpc.audit.log.enabled` | `audit.rpc_log` | boolean | true |
//! | `rss.server.rpc.audit.log.excludeList` | `audit.rpc_exclude` | comma list of command names | `appHeartbeat` |
//! | `rss.server.health.check.interval.ms` | `localfile_store.disk_health_check_interval` | ms | 10 s |
//! | `rss.client.netty.client.connection.timeout.ms` | `limits.idle_timeout` | ms (the Java server closes idle Netty connections after it) | 600 s |
//! | `rss.server.decommission.shutdown` | (behaviour) | `true` is what Spillway always does; `false` is warned | |
//! | `rss.metrics.reporter.class` | (turns pushing on) | must be `org.apache.uniffle.common.metrics.prometheus.PrometheusPushGatewayMetricReporter`; another class is warned | no pushing |
//! | `rss.metrics.prometheus.pushgateway.addr` | `metrics.push_gateway_endpoint` | `host:port` gets `http://`; required with the reporter | |
//! | `rss.metrics.prometheus.pushgateway.jobname` | `metrics.push_gateway_job` | required with the reporter | |
//! | `rss.metrics.prometheus.pushgateway.groupingkey` | `metrics.push_gateway_grouping_key` | `k1=v1;k2=v2` | empty |
//! | `rss.metrics.prometheus.pushgateway.report.interval.seconds` | `metrics.push_interval` | seconds > 0 | 10 s |
//! | `rss.server.topN.appShuffleDataSize.number` | `metrics.top_n_apps` | ≥ 0 | 10 |
//! | `rss.server.metrics.blockSizeStatisticsEnabled` | `metrics.block_size_statistics` | true / false | false |
//! | `rss.server.metrics.blockSizeStatistics.buckets` | `metrics.block_size_buckets` | comma-separated sizes | 32kb … 16mb (Java's ten) |
//! | `rss.server.topN.appShuffleDataSize.refreshIntervalMs` | (behaviour) | warned: Spillway computes the top-N families at each scrape, never older than Java's 1 s refresh | |
//! | `rss.security.hadoop.kerberos.enable` | (gates the next two) | with `false` the principal and keytab are warned | false |
//! | `rss.security.hadoop.kerberos.principal` | `hdfs_store.kerberos_principal` | required when enabled | |
//! | `rss.security.hadoop.kerberos.keytab.file` | `hdfs_store.kerberos_keytab` | required when enabled | |
//! | `rss.security.hadoop.kerberos.proxy.user.enable` | `hdfs_store.write_as` | `true`: `"auto"` (a proxy of the app's user under Kerberos, the server's own identity under simple authentication); `false`: `"server"` | true |
//!
//! `rss.server.hadoop.<item>` maps to `hdfs_store.hadoop_conf[<item>]` (on top of
//! `HADOOP_CONF_DIR`, under each app's remote-storage conf items).
//!
//! Warned (listed in the start-up warning, value unused):
//! `rss.security.hadoop.kerberos.krb5-conf.file` (set `KRB5_CONFIG` instead) and
//! `.relogin.interval.sec`, disk quotas (`rss.server.disk.capacity`, `.ratio`), the health
//! checker's other knobs, thread-pool tuning (`rss.rpc.executor.size`,
//! `rss.server.flush.thread.alive`, Netty and Jetty thread and buffer settings), retry and
//! timeout knobs of Java's flush queue (`rss.server.write.retry.max`,
//! `rss.server.pending.event.timeout.sec`),
//! `rss.server.decommission.check.interval`, `rss.rpc.message.max.size`, keys the Java
//! 0.9/0.10 server no longer reads
//! (`rss.server.flush.threadPool.size`, `rss.server.flush.hdfs.threadPool.size`), and every
//! other key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::{ByteSize, Config, ConfigError, HdfsWriteAs, StoreType};

/// The Java key of the HTTP Basic credentials (a secret: masked wherever config is shown).
pub const BASIC_CREDENTIALS_KEY: &str = "rss.http.basic.authorizationCredentials";

/// The reporter class the Java server pushes to a Prometheus push gateway with.
const PUSH_GATEWAY_REPORTER: &str =
    "org.apache.uniffle.common.metrics.prometheus.PrometheusPushGatewayMetricReporter";

/// Warnings from loading a Java file, kept until logging is set up: the config is loaded
/// before the log subscriber exists, so a warning logged at load time would be lost.
static DEFERRED_WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The warnings the config load produced, each one log line; empties the list, so each
/// warning is reported once.
pub fn take_warnings() -> Vec<String> {
    std::mem::take(&mut *DEFERRED_WARNINGS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A Java server config mapped onto Spillway's.
#[derive(Debug, Clone, PartialEq)]
pub struct JavaConfig {
    /// The mapped config, validated (without the env overlay).
    pub config: Config,
    /// Keys that have no Spillway equivalent, each once in file order, some followed by the
    /// reason in parentheses.
    pub ignored: Vec<String>,
}

/// One entry of a properties file, escapes resolved and the value trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The key as written (escapes resolved).
    pub key: String,
    /// The value, trimmed as the Java server trims it.
    pub value: String,
    /// 1-based line the entry starts on.
    pub line: usize,
}

/// Reads a `--config` file in whichever format it is in (see the module docs).
pub(super) fn parse_config_file(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let java_suffix = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("conf") || e.eq_ignore_ascii_case("properties"));
    let is_java = looks_like_properties(text) || (java_suffix && logical_lines(text).is_empty());
    if !is_java {
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
    let loaded = from_properties(text, available_memory())?;
    if !loaded.ignored.is_empty() {
        let warning = format!(
            "{}: {} Java server setting(s) have no Spillway equivalent and are ignored: {}",
            path.display(),
            loaded.ignored.len(),
            loaded.ignored.join(", ")
        );
        DEFERRED_WARNINGS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(warning);
    }
    Ok(loaded.config)
}

/// Whether `text` is a Java properties file by content: an `rss.*` key and no TOML table
/// header.
fn looks_like_properties(text: &str) -> bool {
    let mut rss_key = false;
    for (_, line) in logical_lines(text) {
        if line.starts_with('[') {
            return false;
        }
        let (key, _) = split_key_value(&line);
        rss_key |= key.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("rss."));
    }
    rss_key
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

// ---------------------------------------------------------------------------------------------
// The properties syntax.

/// Parses a properties file as `java.util.Properties.load` does; values are trimmed as the
/// Java server trims them. Fails only on a malformed `\uXXXX` escape.
pub fn parse_properties(text: &str) -> Result<Vec<Property>, ConfigError> {
    let mut out = Vec::new();
    for (line, logical) in logical_lines(text) {
        let (raw_key, raw_value) = split_key_value(&logical);
        let key =
            unescape(raw_key).map_err(|reason| ConfigError::new(format!("line {line}"), reason))?;
        let value = unescape(raw_value).map_err(|reason| {
            ConfigError::new(
                if key.is_empty() {
                    format!("line {line}")
                } else {
                    key.clone()
                },
                reason,
            )
        })?;
        out.push(Property {
            key,
            value: java_trim(&value).to_owned(),
            line,
        });
    }
    Ok(out)
}

/// Java's `String.trim`: every char up to U+0020 counts as blank.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// The blanks `Properties.load` skips and separates with.
fn is_java_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Lines ended by `\n`, `\r\n` or `\r`, as `Properties.load` splits them.
fn natural_lines(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&text[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&text[start..i]);
                i += if bytes.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < bytes.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Non-empty logical lines with the 1-based line each starts on: comments and blank lines
/// dropped, continuations joined (a comment line never continues).
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut start_line = 0;
    let mut continuing = false;
    for (index, natural) in natural_lines(text).into_iter().enumerate() {
        let stripped = natural.trim_start_matches(is_java_blank);
        if !continuing {
            if stripped.is_empty() || stripped.starts_with(['#', '!']) {
                continue;
            }
            start_line = index + 1;
        }
        let backslashes = stripped.bytes().rev().take_while(|&b| b == b'\\').count();
        if backslashes % 2 == 1 {
            buf.push_str(&stripped[..stripped.len() - 1]);
            continuing = true;
        } else {
            buf.push_str(stripped);
            continuing = false;
            if !buf.is_empty() {
                out.push((start_line, std::mem::take(&mut buf)));
            }
        }
    }
    if continuing && !buf.is_empty() {
        out.push((start_line, buf));
    }
    out
}

/// Splits a logical line into its raw (still escaped) key and value: the key ends at the first
/// unescaped `=`, `:` or blank; blanks and one `=`/`:` after it are skipped.
fn split_key_value(line: &str) -> (&str, &str) {
    // Separators are ASCII, and no byte of a multi-byte UTF-8 char is ASCII, so byte offsets of
    // separators are char boundaries.
    let bytes = line.as_bytes();
    let (mut key_end, mut value_start) = (bytes.len(), bytes.len());
    let mut has_separator = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if !escaped && (b == b'=' || b == b':') {
            (key_end, value_start, has_separator) = (i, i + 1, true);
            break;
        }
        if !escaped && is_java_blank(char::from(b)) {
            (key_end, value_start) = (i, i + 1);
            break;
        }
        escaped = b == b'\\' && !escaped;
    }
    while let Some(&b) = bytes.get(value_start) {
        if is_java_blank(char::from(b)) {
            value_start += 1;
        } else if !has_separator && (b == b'=' || b == b':') {
            has_separator = true;
            value_start += 1;
        } else {
            break;
        }
    }
    (&line[..key_end], &line[value_start..])
}

/// Resolves `Properties` escapes. A lone surrogate from `\uXXXX` becomes U+FFFD, since a Rust
/// string cannot hold one.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => {}
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let unit = hex4(&mut chars)?;
                if (0xD800..0xDC00).contains(&unit) {
                    let mut ahead = chars.clone();
                    let low = match (ahead.next(), ahead.next()) {
                        (Some('\\'), Some('u')) => hex4(&mut ahead).ok(),
                        _ => None,
                    };
                    match low.filter(|l| (0xDC00..0xE000).contains(l)) {
                        Some(low) => {
                            let code = 0x10000
                                + ((u32::from(unit) - 0xD800) << 10)
                                + (u32::from(low) - 0xDC00);
                            out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                            chars = ahead;
                        }
                        None => out.push('\u{FFFD}'),
                    }
                } else {
                    out.push(char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}'));
                }
            }
            Some(other) => out.push(other),
        }
    }
    Ok(out)
}

/// The four hex digits of a `\uXXXX` escape.
fn hex4(chars: &mut std::str::Chars<'_>) -> Result<u16, String> {
    let digits: String = chars.by_ref().take(4).collect();
    if digits.len() == 4 && digits.chars().all(|c| c.is_ascii_hexdigit()) {
        u16::from_str_radix(&digits, 16).map_err(|e| e.to_string())
    } else {
        Err(format!("malformed \\uxxxx escape: \\u{digits}"))
    }
}

// ---------------------------------------------------------------------------------------------
// The value syntax, as the Java server's `ConfigUtils` converts strings.

/// `Long.parseLong`: an optional sign and ASCII digits, nothing else.
fn java_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A Java `long` option's value: with any byte-unit letter in it, a size string (digits and a
/// unit, no sign, no fraction); otherwise `Long.parseLong`.
fn java_size(s: &str) -> Result<i64, String> {
    const HINT: &str = "expected a byte count or digits with b, k, kb, m, mb, g, gb, t, tb, p or \
                        pb, e.g. 40g";
    let lower = s.to_ascii_lowercase();
    if !lower.contains(['b', 'k', 'm', 'g', 't', 'p']) {
        return java_long(s).ok_or_else(|| format!("{s:?} is not a size ({HINT})"));
    }
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (number, suffix) = lower.split_at(digits_end);
    if number.is_empty() || !suffix.chars().all(|c| c.is_ascii_lowercase()) {
        let reason = if suffix.starts_with('.') {
            "fractions are not supported"
        } else {
            HINT
        };
        return Err(format!("{s:?} is not a size ({reason})"));
    }
    let unit: i64 = match suffix {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        "t" | "tb" => 1 << 40,
        "p" | "pb" => 1 << 50,
        _ => return Err(format!("{s:?} is not a size (unknown unit; {HINT})")),
    };
    number
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// A duration in `unit_ms` milliseconds per plain number (1 for `ms` keys, 1000 for seconds
/// keys), possibly negative; see the module docs for the suffixes.
fn java_duration(s: &str, unit_ms: i64) -> Result<i64, String> {
    if let Some(n) = java_long(s) {
        return n
            .checked_mul(unit_ms)
            .ok_or_else(|| format!("{s:?} is too large"));
    }
    let unit_name = if unit_ms == 1 {
        "milliseconds"
    } else {
        "seconds"
    };
    let lower = s.to_ascii_lowercase();
    let number_end = lower
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(lower.len(), |(i, _)| i);
    let (number, suffix) = lower.split_at(number_end);
    let per: Option<(i64, i64)> = match suffix {
        "us" => Some((1, 1000)),
        "ms" => Some((1, 1)),
        "s" => Some((1000, 1)),
        "min" => Some((60_000, 1)),
        "h" => Some((3_600_000, 1)),
        "d" => Some((86_400_000, 1)),
        _ => None,
    };
    match (java_long(number), per) {
        (Some(n), Some((mul, div))) => n
            .checked_mul(mul)
            .map(|v| v / div)
            .ok_or_else(|| format!("{s:?} is too large")),
        _ => match java_size(s) {
            Ok(v) => Err(format!(
                "{s:?}: the Java server reads this as {v} {unit_name} (a byte size); write \
                 {unit_name}, or a number with ms, s, min, h or d"
            )),
            Err(_) => Err(format!(
                "{s:?} is not a duration (expected {unit_name}, or a number with ms, s, min, h \
                 or d)"
            )),
        },
    }
}

/// `Double.parseDouble` for the finite values a config can mean (a `d`/`f` suffix allowed).
fn java_double(s: &str) -> Option<f64> {
    let t = s.trim();
    let t = t.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(t);
    if !t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        return None;
    }
    t.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A comma-separated list, items trimmed and empty items dropped.
fn java_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(java_trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The mapping.

/// A property of the file, taken for mapping.
struct Entry {
    /// The key as written in the file, for messages.
    key: String,
    value: String,
    /// Where the key first appears among the file's keys, to list ignored keys in file order.
    position: usize,
}

impl Entry {
    fn error(&self, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(self.key.clone(), reason)
    }
}

/// Walks the file's properties onto a [`Config`], remembering which Java key set which
/// Spillway key (so validation errors can name the key the operator wrote) and which keys were
/// never used.
struct Mapper {
    /// Last occurrence of each key (matched case-insensitively), in order of first occurrence.
    props: Vec<(Property, bool)>,
    index: HashMap<String, usize>,
    config: Config,
    /// Spillway dotted key → the Java key it came from.
    origins: HashMap<&'static str, String>,
    /// Ignored keys with their position among the file's keys.
    ignored: Vec<(usize, String)>,
}

impl Mapper {
    fn new(properties: Vec<Property>) -> Self {
        let mut props: Vec<(Property, bool)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for p in properties {
            let lower = p.key.to_ascii_lowercase();
            match index.get(&lower) {
                Some(&i) => props[i].0 = p,
                None => {
                    index.insert(lower, props.len());
                    props.push((p, false));
                }
            }
        }
        Mapper {
            props,
            index,
            config: Config::default(),
            origins: HashMap::new(),
            ignored: Vec::new(),
        }
    }

    /// Takes `key` (any case) for mapping; it will not be reported as ignored.
    fn take(&mut self, key: &str) -> Option<Entry> {
        let &i = self.index.get(&key.to_ascii_lowercase())?;
        let (p, used) = &mut self.props[i];
        *used = true;
        Some(Entry {
            key: p.key.clone(),
            value: p.value.clone(),
            position: i,
        })
    }

    /// Reports `entry` as ignored, with why.
    fn ignore(&mut self, entry: &Entry, reason: &str) {
        self.ignored
            .push((entry.position, format!("{} ({reason})", entry.key)));
    }

    /// Takes `key` and reports it as ignored with `reason`, if present.
    fn ignore_key(&mut self, key: &str, reason: &str) {
        if let Some(e) = self.take(key) {
            self.ignore(&e, reason);
        }
    }

    fn set_origin(&mut self, spillway: &'static str, entry: &Entry) {
        self.origins.insert(spillway, entry.key.clone());
    }

    fn string(&mut self, key: &str) -> Option<Entry> {
        self.take(key).filter(|e| !e.value.is_empty())
    }

    fn int(
        &mut self,
        key: &str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Result<Option<(Entry, i64)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = java_long(&e.value)
            .filter(|v| i32::try_from(*v).is_ok())
            .ok_or_else(|| e.error(format!("{:?} is not an integer", e.value)))?;
        if !range.contains(&v) {
            return Err(e.error(format!(
                "{v} is out of range ({}..={})",
                range.start(),
                range.end()
            )));
        }
        Ok(Some((e, v)))
    }

    fn positive_count(&mut self, key: &str) -> Result<Option<(Entry, usize)>, ConfigError> {
        Ok(self
            .int(key, 1..=i64::from(i32::MAX))?
            .map(|(e, v)| (e, v as usize)))
    }

    fn port(&mut self, key: &str) -> Result<Option<(Entry, u16)>, ConfigError> {
        Ok(self.int(key, 0..=65535)?.map(|(e, v)| (e, v as u16)))
    }

    /// A size, possibly negative (`-1` means "unset" for some keys).
    fn size(&mut self, key: &str) -> Result<Option<(Entry, i64)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = java_size(&e.value).map_err(|r| e.error(r))?;
        Ok(Some((e, v)))
    }

    fn positive_size(&mut self, key: &str) -> Result<Option<(Entry, ByteSize)>, ConfigError> {
        let Some((e, v)) = self.size(key)? else {
            return Ok(None);
        };
        if v <= 0 {
            return Err(e.error(format!("{v} must be above 0")));
        }
        Ok(Some((e, ByteSize(v as u64))))
    }

    /// A duration in milliseconds (`unit_ms` = 1) or seconds (1000), possibly ≤ 0.
    fn duration_ms(
        &mut self,
        key: &str,
        unit_ms: i64,
    ) -> Result<Option<(Entry, i64)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = java_duration(&e.value, unit_ms).map_err(|r| e.error(r))?;
        Ok(Some((e, v)))
    }

    fn positive_duration(
        &mut self,
        key: &str,
        unit_ms: i64,
    ) -> Result<Option<(Entry, Duration)>, ConfigError> {
        let Some((e, ms)) = self.duration_ms(key, unit_ms)? else {
            return Ok(None);
        };
        if ms <= 0 {
            return Err(e.error(format!("{:?} must be above 0", e.value)));
        }
        Ok(Some((e, Duration::from_millis(ms as u64))))
    }

    fn double(&mut self, key: &str) -> Result<Option<(Entry, f64)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = java_double(&e.value)
            .ok_or_else(|| e.error(format!("{:?} is not a number", e.value)))?;
        Ok(Some((e, v)))
    }

    /// A percentage in `0..=100` (Java's check), as a fraction.
    fn percentage(&mut self, key: &str) -> Result<Option<(Entry, f64)>, ConfigError> {
        let Some((e, v)) = self.double(key)? else {
            return Ok(None);
        };
        if !(0.0..=100.0).contains(&v) {
            return Err(e.error(format!("{v} is not a percentage in 0..=100")));
        }
        Ok(Some((e, v / 100.0)))
    }

    /// A fraction in `(0, 1]`.
    fn ratio(&mut self, key: &str) -> Result<Option<(Entry, f64)>, ConfigError> {
        let Some((e, v)) = self.double(key)? else {
            return Ok(None);
        };
        if !(v > 0.0 && v <= 1.0) {
            return Err(e.error(format!("{v} is not a ratio in (0, 1]")));
        }
        Ok(Some((e, v)))
    }

    fn boolean(&mut self, key: &str) -> Result<Option<(Entry, bool)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        let v = if e.value.eq_ignore_ascii_case("true") {
            true
        } else if e.value.eq_ignore_ascii_case("false") {
            false
        } else {
            return Err(e.error(format!("{:?} is not true or false", e.value)));
        };
        Ok(Some((e, v)))
    }

    /// One of `names` (any case), as its index.
    fn choice(&mut self, key: &str, names: &[&str]) -> Result<Option<(Entry, usize)>, ConfigError> {
        let Some(e) = self.take(key) else {
            return Ok(None);
        };
        match names.iter().position(|n| n.eq_ignore_ascii_case(&e.value)) {
            Some(i) => Ok(Some((e, i))),
            None => Err(e.error(format!(
                "{:?} is not supported (expected {})",
                e.value,
                names.join(", ")
            ))),
        }
    }

    /// A behaviour switch Spillway cannot turn: `expected` is accepted silently, the other
    /// value is warned.
    fn fixed_behaviour(
        &mut self,
        key: &str,
        expected: bool,
        reason: &str,
    ) -> Result<(), ConfigError> {
        if let Some((e, v)) = self.boolean(key)? {
            if v != expected {
                self.ignore(&e, reason);
            }
        }
        Ok(())
    }

    fn map_all(&mut self, memory: Option<u64>) -> Result<(), ConfigError> {
        self.map_listeners()?;
        self.map_storage()?;
        self.map_coordination()?;
        self.map_audit()?;
        self.map_memory(memory)?;
        self.map_spilling()?;
        self.map_disks()?;
        self.map_push_gateway()?;
        self.map_top_n()?;
        self.map_kerberos()?;
        self.fixed_behaviour(
            "rss.server.decommission.shutdown",
            true,
            "Spillway always stops once decommissioned",
        )
    }

    fn map_listeners(&mut self) -> Result<(), ConfigError> {
        if let Some((e, port)) = self.port("rss.rpc.server.port")? {
            self.config.grpc_port = port;
            self.set_origin("grpc_port", &e);
        }
        if let Some((e, port)) = self.port("rss.jetty.http.port")? {
            self.config.metrics.http_port = port;
            self.set_origin("metrics.http_port", &e);
        }
        if let Some(e) = self.string(BASIC_CREDENTIALS_KEY) {
            self.config.metrics.basic_credentials = Some(super::Secret(e.value.clone()));
            self.set_origin("metrics.basic_credentials", &e);
        }
        let server_type = self.choice("rss.rpc.server.type", &["GRPC", "GRPC_NETTY"])?;
        match self.int("rss.server.netty.port", i64::from(i32::MIN)..=65535)? {
            // 0.9 turns the plane on for any port >= 0, off for a negative one.
            Some((e, port)) => {
                self.config.netty_port = port.max(-1) as i32;
                self.set_origin("netty_port", &e);
            }
            None => {
                if let Some((e, kind)) = server_type {
                    self.config.netty_port = if kind == 0 { -1 } else { 17000 };
                    self.set_origin("netty_port", &e);
                }
            }
        }
        if let Some((e, timeout)) =
            self.positive_duration("rss.client.netty.client.connection.timeout.ms", 1)?
        {
            self.config.limits.idle_timeout = timeout;
            self.set_origin("limits.idle_timeout", &e);
        }
        Ok(())
    }

    fn map_storage(&mut self) -> Result<(), ConfigError> {
        let names = StoreType::ALL.map(|(n, _)| n);
        if let Some((e, i)) = self.choice("rss.storage.type", &names)? {
            self.config.store_type = StoreType::ALL[i].1;
            self.set_origin("store_type", &e);
        }
        if let Some(e) = self.take("rss.storage.basePath") {
            self.config.localfile_store.data_paths =
                java_list(&e.value).into_iter().map(PathBuf::from).collect();
            self.set_origin("localfile_store.data_paths", &e);
        }
        Ok(())
    }

    fn map_audit(&mut self) -> Result<(), ConfigError> {
        if let Some((e, on)) = self.boolean("rss.server.rpc.audit.log.enabled")? {
            self.config.audit.rpc_log = on;
            self.set_origin("audit.rpc_log", &e);
        }
        if let Some(e) = self.take("rss.server.rpc.audit.log.excludeList") {
            self.config.audit.rpc_exclude = java_list(&e.value);
            self.set_origin("audit.rpc_exclude", &e);
        }
        Ok(())
    }

    fn map_coordination(&mut self) -> Result<(), ConfigError> {
        if let Some(e) = self.take("rss.coordinator.quorum") {
            self.config.coordinator_quorum = java_list(&e.value);
            self.set_origin("coordinator_quorum", &e);
        }
        if let Some(e) = self.take("rss.server.tags") {
            self.config.tags = java_list(&e.value);
            self.set_origin("tags", &e);
        }
        if let Some((e, interval)) = self.positive_duration("rss.server.heartbeat.interval", 1)? {
            self.config.heartbeat_interval = interval;
            self.set_origin("heartbeat_interval", &e);
        }
        if let Some((e, timeout)) =
            self.positive_duration("rss.server.app.expired.withoutHeartbeat", 1)?
        {
            self.config.app.app_heartbeat_timeout = timeout;
            self.config.app.expiry_check_interval = half(timeout);
            self.set_origin("app.app_heartbeat_timeout", &e);
            self.set_origin("app.expiry_check_interval", &e);
        }
        if let Some((e, timeout)) = self.positive_duration("rss.server.preAllocation.expired", 1)? {
            self.config.memory_store.buffer_ticket_timeout = timeout;
            self.config.memory_store.buffer_ticket_check_interval = half(timeout);
            self.set_origin("memory_store.buffer_ticket_timeout", &e);
            self.set_origin("memory_store.buffer_ticket_check_interval", &e);
        }
        if let Some((e, timeout)) = self.positive_duration("rss.server.commit.timeout", 1)? {
            self.config.app.commit_timeout = timeout;
            self.set_origin("app.commit_timeout", &e);
        }
        Ok(())
    }

    fn map_memory(&mut self, memory: Option<u64>) -> Result<(), ConfigError> {
        if let Some(size) = self.capacity(
            "rss.server.buffer.capacity",
            "rss.server.buffer.capacity.ratio",
            0.6,
            memory,
            "memory_store.capacity",
        )? {
            self.config.memory_store.capacity = size;
        }
        if let Some(size) = self.capacity(
            "rss.server.read.buffer.capacity",
            "rss.server.read.buffer.capacity.ratio",
            0.2,
            memory,
            "memory_store.read_capacity",
        )? {
            self.config.memory_store.read_capacity = size;
        }
        // The Java server's watermarks apply when the file has none: they are part of how the
        // operator sized the buffers.
        let high = self.percentage("rss.server.memory.shuffle.highWaterMark.percentage")?;
        let low = self.percentage("rss.server.memory.shuffle.lowWaterMark.percentage")?;
        self.config.hybrid_store.memory_spill_high_watermark = high.as_ref().map_or(0.75, |h| h.1);
        self.config.hybrid_store.memory_spill_low_watermark = low.as_ref().map_or(0.25, |l| l.1);
        if let Some((e, _)) = &high {
            self.set_origin("hybrid_store.memory_spill_high_watermark", e);
        }
        if let Some((e, _)) = &low {
            self.set_origin("hybrid_store.memory_spill_low_watermark", e);
        }
        Ok(())
    }

    /// A capacity as Java sizes it: the size key when it is >= 0, else the ratio (the file's or
    /// Java's default) of `memory`. `None` keeps Spillway's default (memory unknown).
    fn capacity(
        &mut self,
        size_key: &str,
        ratio_key: &str,
        default_ratio: f64,
        memory: Option<u64>,
        spillway: &'static str,
    ) -> Result<Option<ByteSize>, ConfigError> {
        let size = self.size(size_key)?;
        let ratio = self.ratio(ratio_key)?;
        if let Some((e, bytes)) = &size {
            if *bytes == 0 {
                return Err(e.error(format!("0 must be above 0 (-1 sizes it from {ratio_key})")));
            }
            if *bytes > 0 {
                self.set_origin(spillway, e);
                return Ok(Some(ByteSize(*bytes as u64)));
            }
        }
        let Some(memory) = memory else {
            return Ok(None);
        };
        let fraction = ratio.as_ref().map_or(default_ratio, |r| r.1);
        if let Some(e) = ratio.as_ref().map(|r| &r.0).or(size.as_ref().map(|s| &s.0)) {
            self.set_origin(spillway, e);
        }
        // Whole MiB: the exact product would only print as an unreadable byte count.
        let bytes = ((memory as f64) * fraction) as u64;
        Ok(Some(ByteSize(bytes / ByteSize::MIB * ByteSize::MIB)))
    }

    fn map_spilling(&mut self) -> Result<(), ConfigError> {
        if let Some((e, size)) = self.positive_size("rss.server.single.buffer.flush.threshold")? {
            self.config.hybrid_store.memory_single_buffer_max_spill_size = size;
            self.set_origin("hybrid_store.memory_single_buffer_max_spill_size", &e);
        }
        self.fixed_behaviour(
            "rss.server.single.buffer.flush.enabled",
            true,
            "Spillway always spills a buffer over rss.server.single.buffer.flush.threshold",
        )?;
        if let Some((e, n)) = self.positive_count("rss.server.flush.localfile.threadPool.size")? {
            self.config.hybrid_store.spill_concurrency = n;
            self.set_origin("hybrid_store.spill_concurrency", &e);
        }
        if let Some((e, n)) = self.positive_count("rss.server.flush.hadoop.threadPool.size")? {
            self.config.hdfs_store.max_concurrency = n;
            self.set_origin("hdfs_store.max_concurrency", &e);
        }
        // The old name is read only when the new one is absent, as Java's fallback keys are.
        let per_partition = match self
            .positive_count("rss.server.max.concurrency.of.per-partition.write")?
        {
            Some(found) => {
                self.ignore_key(
                    "rss.server.max.concurrency.of.single.partition.writer",
                    "old name of rss.server.max.concurrency.of.per-partition.write, which is set",
                );
                Some(found)
            }
            None => self.positive_count("rss.server.max.concurrency.of.single.partition.writer")?,
        };
        if let Some((e, n)) = per_partition {
            self.config.hdfs_store.partition_write_max_concurrency = n;
            self.set_origin("hdfs_store.partition_write_max_concurrency", &e);
        }
        if let Some((e, size)) =
            self.positive_size("rss.server.flush.cold.storage.threshold.size")?
        {
            self.config.hdfs_store.cold_storage_threshold_size = size;
            self.set_origin("hdfs_store.cold_storage_threshold_size", &e);
        }
        if let Some((e, ms)) =
            self.duration_ms("rss.server.storage.flushOperationTimeoutSec", 1000)?
        {
            if ms > 0 {
                let timeout = Duration::from_millis(ms as u64);
                self.config.localfile_store.write_timeout = timeout;
                self.config.hdfs_store.write_timeout = timeout;
                self.set_origin("localfile_store.write_timeout", &e);
                self.set_origin("hdfs_store.write_timeout", &e);
            }
        }
        if let Some((e, size)) = self.positive_size("rss.server.huge-partition.size.threshold")? {
            self.config.hybrid_store.huge_partition_size_threshold = size;
            self.set_origin("hybrid_store.huge_partition_size_threshold", &e);
        }
        if let Some((e, ratio)) = self.ratio("rss.server.huge-partition.memory.limit.ratio")? {
            self.config.hybrid_store.huge_partition_memory_limit_ratio = ratio;
            self.set_origin("hybrid_store.huge_partition_memory_limit_ratio", &e);
        }
        if let Some((e, size)) = self.positive_size("rss.server.huge-partition.size.hard.limit")? {
            // Java's default, Long.MAX_VALUE, is its way of saying "no limit".
            self.config.hybrid_store.huge_partition_hard_limit =
                (size.as_u64() != i64::MAX as u64).then_some(size);
            self.set_origin("hybrid_store.huge_partition_hard_limit", &e);
        }
        if let Some((e, v)) = self.size("rss.server.huge-partition.split.limit")? {
            // Java compares `used > limit`, has no validator, and defaults to Long.MAX_VALUE
            // (never). Its integration tests set -1 to split everything; 0 does the same for
            // every partition a client can list, since each carries at least one block.
            self.config.hybrid_store.huge_partition_split_limit =
                (v != i64::MAX).then_some(ByteSize(v.max(0) as u64));
            self.set_origin("hybrid_store.huge_partition_split_limit", &e);
        }
        Ok(())
    }

    fn map_disks(&mut self) -> Result<(), ConfigError> {
        if let Some((e, v)) = self.percentage("rss.server.high.watermark.write")? {
            self.config.localfile_store.disk_high_watermark = v;
            self.set_origin("localfile_store.disk_high_watermark", &e);
        }
        if let Some((e, v)) = self.percentage("rss.server.low.watermark.write")? {
            self.config.localfile_store.disk_low_watermark = v;
            self.set_origin("localfile_store.disk_low_watermark", &e);
        }
        let enabled = self.boolean("rss.server.health.check.enable")?;
        let min_percentage = self.percentage("rss.server.health.min.storage.percentage")?;
        match &enabled {
            Some((e, true)) => {
                let fraction = min_percentage.as_ref().map_or(0.8, |p| p.1);
                let disks = self.config.localfile_store.data_paths.len() as f64;
                self.config.localfile_store.healthy_check_min_disks =
                    (disks * fraction).ceil() as usize;
                let origin = min_percentage.as_ref().map_or(e, |p| &p.0);
                self.origins.insert(
                    "localfile_store.healthy_check_min_disks",
                    origin.key.clone(),
                );
            }
            _ => {
                if let Some((e, _)) = &min_percentage {
                    self.ignore(
                        e,
                        "health checks are off: rss.server.health.check.enable is not true",
                    );
                }
            }
        }
        if let Some((e, interval)) =
            self.positive_duration("rss.server.health.check.interval.ms", 1)?
        {
            self.config.localfile_store.disk_health_check_interval = interval;
            self.set_origin("localfile_store.disk_health_check_interval", &e);
        }
        Ok(())
    }

    fn map_push_gateway(&mut self) -> Result<(), ConfigError> {
        const ADDR: &str = "rss.metrics.prometheus.pushgateway.addr";
        const JOB: &str = "rss.metrics.prometheus.pushgateway.jobname";
        const GROUPING: &str = "rss.metrics.prometheus.pushgateway.groupingkey";
        const INTERVAL: &str = "rss.metrics.prometheus.pushgateway.report.interval.seconds";
        let reporter = self.string("rss.metrics.reporter.class");
        let is_push_gateway = reporter.as_ref().is_some_and(|r| {
            r.value == PUSH_GATEWAY_REPORTER || r.value == "PrometheusPushGatewayMetricReporter"
        });
        if !is_push_gateway {
            let why = match &reporter {
                Some(r) => {
                    self.ignore(r, "Spillway reports only to a Prometheus push gateway");
                    "the push gateway reporter is not rss.metrics.reporter.class"
                }
                None => "no rss.metrics.reporter.class",
            };
            for key in [ADDR, JOB, GROUPING, INTERVAL] {
                self.ignore_key(key, why);
            }
            return Ok(());
        }
        let reporter = reporter.expect("checked above");
        let required = |e: Option<Entry>, key: &str| {
            e.ok_or_else(|| {
                ConfigError::new(
                    key,
                    format!(
                        "is required with rss.metrics.reporter.class = {}",
                        reporter.value
                    ),
                )
            })
        };
        let addr = required(self.string(ADDR), ADDR)?;
        let job = required(self.string(JOB), JOB)?;
        let lower = addr.value.to_ascii_lowercase();
        // The Java reporter prefixes `http://` to a bare `host:port`.
        let endpoint = if lower.starts_with("http://") || lower.starts_with("https://") {
            addr.value.clone()
        } else {
            format!("http://{}", addr.value)
        };
        self.config.metrics.push_gateway_endpoint = Some(endpoint);
        self.set_origin("metrics.push_gateway_endpoint", &addr);
        self.config.metrics.push_gateway_job = job.value.clone();
        self.set_origin("metrics.push_gateway_job", &job);
        if let Some(e) = self.take(GROUPING) {
            super::parse_grouping_key(&e.value)
                .map_err(|reason| e.error(format!("{reason}; expected k1=v1;k2=v2")))?;
            self.config.metrics.push_gateway_grouping_key = e.value.clone();
            self.set_origin("metrics.push_gateway_grouping_key", &e);
        }
        if let Some((e, interval)) = self.positive_duration(INTERVAL, 1000)? {
            self.config.metrics.push_interval = interval;
            self.set_origin("metrics.push_interval", &e);
        }
        Ok(())
    }

    fn map_top_n(&mut self) -> Result<(), ConfigError> {
        if let Some((e, n)) = self.int(
            "rss.server.topN.appShuffleDataSize.number",
            0..=i64::from(i32::MAX),
        )? {
            self.config.metrics.top_n_apps = n as usize;
            self.set_origin("metrics.top_n_apps", &e);
        }
        self.ignore_key(
            "rss.server.topN.appShuffleDataSize.refreshIntervalMs",
            "Spillway computes the top-N families at each scrape",
        );
        if let Some((e, on)) = self.boolean("rss.server.metrics.blockSizeStatisticsEnabled")? {
            self.config.metrics.block_size_statistics = on;
            self.set_origin("metrics.block_size_statistics", &e);
        }
        if let Some(e) = self.string("rss.server.metrics.blockSizeStatistics.buckets") {
            let bounds = e
                .value
                .split(',')
                .map(str::trim)
                .filter(|b| !b.is_empty())
                .map(|b| match java_size(b) {
                    Ok(n) if n > 0 => Ok(ByteSize(n as u64)),
                    Ok(n) => Err(e.error(format!("bound {n} is not above 0"))),
                    Err(reason) => Err(e.error(reason)),
                })
                .collect::<Result<Vec<_>, _>>()?;
            self.config.metrics.block_size_buckets = bounds;
            self.set_origin("metrics.block_size_buckets", &e);
        }
        Ok(())
    }

    /// `rss.server.hadoop.<item>` → `hdfs_store.hadoop_conf[<item>]`, as the Java server builds
    /// its Hadoop conf from them.
    fn map_hadoop_items(&mut self) {
        const PREFIX: &str = "rss.server.hadoop.";
        let keys: Vec<String> = self
            .props
            .iter()
            .map(|(p, _)| p.key.clone())
            .filter(|k| k.len() > PREFIX.len() && k.to_ascii_lowercase().starts_with(PREFIX))
            .collect();
        for key in keys {
            if let Some(e) = self.take(&key) {
                self.config
                    .hdfs_store
                    .hadoop_conf
                    .insert(e.key[PREFIX.len()..].to_owned(), e.value.clone());
                self.set_origin("hdfs_store.hadoop_conf", &e);
            }
        }
    }

    fn map_kerberos(&mut self) -> Result<(), ConfigError> {
        const PRINCIPAL: &str = "rss.security.hadoop.kerberos.principal";
        const KEYTAB: &str = "rss.security.hadoop.kerberos.keytab.file";
        const KRB5: &str = "rss.security.hadoop.kerberos.krb5-conf.file";
        const RELOGIN: &str = "rss.security.hadoop.kerberos.relogin.interval.sec";
        let enabled = self
            .boolean("rss.security.hadoop.kerberos.enable")?
            .is_some_and(|(_, v)| v);
        if enabled {
            let required = |e: Option<Entry>, key: &str| {
                e.ok_or_else(|| {
                    ConfigError::new(
                        key,
                        "is required with rss.security.hadoop.kerberos.enable = true",
                    )
                })
            };
            let principal = required(self.string(PRINCIPAL), PRINCIPAL)?;
            let keytab = required(self.string(KEYTAB), KEYTAB)?;
            self.config.hdfs_store.kerberos_principal = Some(principal.value.clone());
            self.config.hdfs_store.kerberos_keytab = Some(PathBuf::from(&keytab.value));
            self.set_origin("hdfs_store.kerberos_principal", &principal);
            self.set_origin("hdfs_store.kerberos_keytab", &keytab);
            self.ignore_key(KRB5, "set KRB5_CONFIG in Spillway's environment instead");
        } else {
            for key in [PRINCIPAL, KEYTAB, KRB5] {
                self.ignore_key(key, "rss.security.hadoop.kerberos.enable is not true");
            }
        }
        self.ignore_key(RELOGIN, "no equivalent");
        self.map_hadoop_items();
        if let Some((e, proxy)) = self.boolean("rss.security.hadoop.kerberos.proxy.user.enable")? {
            self.config.hdfs_store.write_as = if proxy {
                HdfsWriteAs::Auto
            } else {
                HdfsWriteAs::Server
            };
            self.set_origin("hdfs_store.write_as", &e);
        }
        Ok(())
    }

    /// Lists the unused keys, and validates with errors naming the Java key that set the
    /// offending value.
    fn finish(mut self) -> Result<JavaConfig, ConfigError> {
        for (position, (p, used)) in self.props.iter().enumerate() {
            if *used {
                continue;
            }
            self.ignored.push((position, p.key.clone()));
        }
        self.ignored.sort_by_key(|(position, _)| *position);
        self.config.java_properties = self
            .props
            .iter()
            .map(|(p, _)| (p.key.clone(), p.value.clone()))
            .collect();
        let origins = self.origins;
        self.config
            .validate()
            .map_err(|e| match origins.get(e.key.as_str()) {
                Some(java_key) => ConfigError::new(
                    java_key.clone(),
                    format!("{} (as Spillway's {})", e.reason, e.key),
                ),
                None => e,
            })?;
        Ok(JavaConfig {
            config: self.config,
            ignored: self.ignored.into_iter().map(|(_, listed)| listed).collect(),
        })
    }
}

/// Half of a Java expiry: the period Java sweeps at (never zero).
fn half(d: Duration) -> Duration {
    (d / 2).max(Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn props(text: &str) -> Vec<(String, String)> {
        parse_properties(text)
            .unwrap()
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn load(text: &str) -> JavaConfig {
        from_properties(text, Some(10 * GIB)).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    fn load_err(text: &str) -> ConfigError {
        match from_properties(text, Some(10 * GIB)) {
            Ok(c) => panic!("accepted:\n{text}\n{:?}", c.config),
            Err(e) => e,
        }
    }

    #[test]
    fn separators_comments_and_blanks() {
        let text =
            "# comment\n! also a comment\n\n   \na=1\nb = 2\nc:3\nd : 4\ne 5\n\tf\t \t6\ng\n\
                    h=\ni = x = y\nj:=k\n";
        assert_eq!(
            props(text),
            pairs(&[
                ("a", "1"),
                ("b", "2"),
                ("c", "3"),
                ("d", "4"),
                ("e", "5"),
                ("f", "6"),
                ("g", ""),
                ("h", ""),
                ("i", "x = y"),
                ("j", "=k"),
            ])
        );
    }

    #[test]
    fn continuations_escapes_and_line_ends() {
        let text = "list = a,\\\n       b,\\\r\n   c\r\
                    key\\ with\\:seps = v\\tw\n\
                    uni=\\u0041\\u00e9\\uD83D\\uDE00\\q\n\
                    even=ends\\\\\n\
                    next=1\n\
                    # a comment \\\n\
                    after=comment\n\
                    trailing=x\\";
        assert_eq!(
            props(text),
            pairs(&[
                ("list", "a,b,c"),
                ("key with:seps", "v\tw"),
                ("uni", "Aé😀q"),
                ("even", "ends\\"),
                ("next", "1"),
                ("after", "comment"),
                ("trailing", "x"),
            ])
        );
        let entries = parse_properties("a=1\n\nb=2\\\n  3\nc=4").unwrap();
        assert_eq!(
            entries.iter().map(|p| p.line).collect::<Vec<_>>(),
            vec![1, 3, 5]
        );
    }

    #[test]
    fn values_are_trimmed_like_the_java_server_does() {
        assert_eq!(props("a = 1 \t\n"), pairs(&[("a", "1")]));
        assert_eq!(props("a = \\t1\\t"), pairs(&[("a", "1")]));
    }

    #[test]
    fn malformed_unicode_escape_names_the_key() {
        let err = parse_properties("ok=1\nbad=\\u12g4\n").unwrap_err();
        assert_eq!(err.key, "bad");
        let err = parse_properties("b\\u12=1\n").unwrap_err();
        assert_eq!(err.key, "line 1");
    }

    #[test]
    fn java_sizes() {
        for (text, bytes) in [
            ("1024", 1024),
            ("-1", -1),
            ("+7", 7),
            ("100b", 100),
            ("512k", 512 << 10),
            ("512KB", 512 << 10),
            ("256m", 256 << 20),
            ("40gb", 40 << 30),
            ("40G", 40 << 30),
            ("1t", 1 << 40),
            ("2pb", 2 << 50),
        ] {
            assert_eq!(java_size(text), Ok(bytes), "{text}");
        }
        for text in [
            "", "abc", "1.5g", "10 g", "-1g", "10gib", "10q", "1e3", "0x10", "g", "9999999p",
        ] {
            assert!(java_size(text).is_err(), "{text:?} should fail");
        }
        assert!(java_size("abc").unwrap_err().contains("is not a size"));
    }

    #[test]
    fn java_durations() {
        for (text, ms) in [
            ("10000", 10_000),
            ("-1", -1),
            ("10s", 10_000),
            ("500ms", 500),
            ("2min", 120_000),
            ("1h", 3_600_000),
            ("1d", 86_400_000),
            ("1500us", 1),
        ] {
            assert_eq!(java_duration(text, 1), Ok(ms), "{text}");
        }
        assert_eq!(java_duration("30", 1000), Ok(30_000));
        assert_eq!(java_duration("30s", 1000), Ok(30_000));
        let err = java_duration("5m", 1).unwrap_err();
        assert!(err.contains("5242880 milliseconds"), "{err}");
        for text in ["", "ten", "10 s", "1.5s", "10x"] {
            assert!(java_duration(text, 1).is_err(), "{text:?} should fail");
        }
    }

    #[test]
    fn java_doubles() {
        assert_eq!(java_double("75"), Some(75.0));
        assert_eq!(java_double("75.5d"), Some(75.5));
        assert_eq!(java_double(".5"), Some(0.5));
        assert_eq!(java_double("1e1"), Some(10.0));
        for text in ["", "NaN", "Infinity", "inf", "75%", "seventy"] {
            assert_eq!(java_double(text), None, "{text:?}");
        }
    }

    /// `conf/server.conf` as the Java 0.9.2 and 0.10.0 source trees ship it (same keys in both;
    /// placeholder paths and hosts made concrete).
    const SHIPPED: &str = "\
# the Apache license header would be here
rss.rpc.server.port 19999
rss.jetty.http.port 19998
rss.storage.basePath /data1/rss,/data2/rss
rss.storage.type MEMORY_LOCALFILE_HDFS
rss.coordinator.quorum coord1:19999,coord2:19999
rss.server.buffer.capacity 40gb
rss.server.read.buffer.capacity 20gb
rss.server.flush.thread.alive 5
rss.server.flush.localfile.threadPool.size 10
rss.server.flush.hadoop.threadPool.size 60
rss.server.disk.capacity 1t
rss.server.single.buffer.flush.enabled true
rss.server.single.buffer.flush.threshold 128m
";

    #[test]
    fn shipped_server_conf() {
        let loaded = load(SHIPPED);
        let c = &loaded.config;
        assert_eq!(c.grpc_port, 19999);
        assert_eq!(c.metrics.http_port, 19998);
        assert_eq!(c.netty_port, 17000);
        assert_eq!(c.store_type, StoreType::MemoryLocalfileHdfs);
        assert_eq!(
            c.localfile_store.data_paths,
            vec![PathBuf::from("/data1/rss"), PathBuf::from("/data2/rss")]
        );
        assert_eq!(c.coordinator_quorum, vec!["coord1:19999", "coord2:19999"]);
        assert_eq!(c.memory_store.capacity, ByteSize(40 * GIB));
        assert_eq!(c.memory_store.read_capacity, ByteSize(20 * GIB));
        assert_eq!(c.hybrid_store.spill_concurrency, 10);
        assert_eq!(c.hdfs_store.max_concurrency, 60);
        assert_eq!(
            c.hybrid_store.memory_single_buffer_max_spill_size,
            ByteSize(128 << 20)
        );
        // Java's memory watermarks, since the file sets none.
        assert_eq!(c.hybrid_store.memory_spill_high_watermark, 0.75);
        assert_eq!(c.hybrid_store.memory_spill_low_watermark, 0.25);
        assert_eq!(
            loaded.ignored,
            vec!["rss.server.flush.thread.alive", "rss.server.disk.capacity"]
        );
    }

    #[test]
    fn ratios_size_memory_from_what_the_process_may_use() {
        let c = load("rss.storage.basePath /d\n").config;
        assert_eq!(c.memory_store.capacity, ByteSize(6 * GIB));
        assert_eq!(c.memory_store.read_capacity, ByteSize(2 * GIB));
        let c = load(
            "rss.server.buffer.capacity -1\nrss.server.buffer.capacity.ratio 0.5\n\
             rss.server.read.buffer.capacity.ratio 0.1\n",
        )
        .config;
        assert_eq!(c.memory_store.capacity, ByteSize(5 * GIB));
        assert_eq!(c.memory_store.read_capacity, ByteSize(GIB));
        // An explicit size wins over the ratio.
        let c =
            load("rss.server.buffer.capacity 1g\nrss.server.buffer.capacity.ratio 0.5\n").config;
        assert_eq!(c.memory_store.capacity, ByteSize(GIB));
        // Unknown memory keeps Spillway's defaults.
        let c = from_properties("rss.rpc.server.port 1\n", None)
            .unwrap()
            .config;
        assert_eq!(c.memory_store, crate::config::MemoryStoreConfig::default());
    }

    #[test]
    fn server_type_decides_netty_only_without_a_port() {
        assert_eq!(load("rss.rpc.server.type GRPC\n").config.netty_port, -1);
        assert_eq!(
            load("rss.rpc.server.type grpc_netty\n").config.netty_port,
            17000
        );
        assert_eq!(
            load("rss.rpc.server.type GRPC\nrss.server.netty.port 17001\n")
                .config
                .netty_port,
            17001
        );
        assert_eq!(load("rss.server.netty.port -1\n").config.netty_port, -1);
        assert_eq!(load("rss.server.netty.port -5\n").config.netty_port, -1);
        assert_eq!(load("rss.server.netty.port 0\n").config.netty_port, 0);
        assert_eq!(load("rss.rpc.server.port 1\n").config.netty_port, 17000);
    }

    #[test]
    fn every_mapped_key() {
        let text = "\
rss.rpc.server.port 21000
rss.server.netty.port 21001
rss.rpc.server.type GRPC_NETTY
rss.jetty.http.port 21002
rss.storage.type MEMORY_LOCALFILE
rss.storage.basePath /d1, /d2 ,/d3,
rss.coordinator.quorum c1:19999, c2:19999
rss.server.tags t1,t2
rss.server.heartbeat.interval 5000
rss.server.buffer.capacity 2g
rss.server.buffer.capacity.ratio 0.9
rss.server.read.buffer.capacity 512m
rss.server.read.buffer.capacity.ratio 0.1
rss.server.memory.shuffle.highWaterMark.percentage 70
rss.server.memory.shuffle.lowWaterMark.percentage 30.5
rss.server.single.buffer.flush.threshold 64m
rss.server.single.buffer.flush.enabled TRUE
rss.server.preAllocation.expired 30000
rss.server.app.expired.withoutHeartbeat 120000
rss.server.flush.localfile.threadPool.size 12
rss.server.flush.hadoop.threadPool.size 40
rss.server.max.concurrency.of.per-partition.write 5
rss.server.flush.cold.storage.threshold.size 32m
rss.server.storage.flushOperationTimeoutSec 90
rss.server.huge-partition.size.threshold 10g
rss.server.huge-partition.memory.limit.ratio 0.3
rss.server.huge-partition.size.hard.limit 50g
rss.server.huge-partition.split.limit 5g
rss.server.high.watermark.write 90
rss.server.low.watermark.write 70
rss.server.health.check.enable true
rss.server.health.min.storage.percentage 50
rss.server.health.check.interval.ms 3000
rss.client.netty.client.connection.timeout.ms 300000
rss.server.decommission.shutdown true
rss.metrics.reporter.class org.apache.uniffle.common.metrics.prometheus.PrometheusPushGatewayMetricReporter
rss.metrics.prometheus.pushgateway.addr gateway:9091
rss.metrics.prometheus.pushgateway.jobname rss-servers
rss.metrics.prometheus.pushgateway.groupingkey cluster=c1;zone=z
rss.metrics.prometheus.pushgateway.report.interval.seconds 30
rss.security.hadoop.kerberos.enable true
rss.security.hadoop.kerberos.principal rss/host@REALM
rss.security.hadoop.kerberos.keytab.file /etc/rss.keytab
rss.security.hadoop.kerberos.proxy.user.enable true
rss.http.basic.authorizationCredentials dXNlcjpzZWNyZXQ=
";
        let loaded = load(text);
        assert_eq!(loaded.ignored, Vec::<String>::new());
        let c = loaded.config;
        let mut e = Config {
            grpc_port: 21000,
            netty_port: 21001,
            store_type: StoreType::MemoryLocalfile,
            coordinator_quorum: vec!["c1:19999".into(), "c2:19999".into()],
            tags: vec!["t1".into(), "t2".into()],
            heartbeat_interval: Duration::from_secs(5),
            ..Config::default()
        };
        e.metrics.http_port = 21002;
        e.localfile_store.data_paths = ["/d1", "/d2", "/d3"].map(PathBuf::from).to_vec();
        e.memory_store.capacity = ByteSize(2 * GIB);
        e.memory_store.read_capacity = ByteSize(512 << 20);
        e.hybrid_store.memory_spill_high_watermark = 0.7;
        e.hybrid_store.memory_spill_low_watermark = 0.305;
        e.hybrid_store.memory_single_buffer_max_spill_size = ByteSize(64 << 20);
        e.memory_store.buffer_ticket_timeout = Duration::from_secs(30);
        e.memory_store.buffer_ticket_check_interval = Duration::from_secs(15);
        e.app.app_heartbeat_timeout = Duration::from_secs(120);
        e.app.expiry_check_interval = Duration::from_secs(60);
        e.hybrid_store.spill_concurrency = 12;
        e.hdfs_store.max_concurrency = 40;
        e.hdfs_store.partition_write_max_concurrency = 5;
        e.hdfs_store.cold_storage_threshold_size = ByteSize(32 << 20);
        e.localfile_store.write_timeout = Duration::from_secs(90);
        e.hdfs_store.write_timeout = Duration::from_secs(90);
        e.hybrid_store.huge_partition_size_threshold = ByteSize(10 * GIB);
        e.hybrid_store.huge_partition_memory_limit_ratio = 0.3;
        e.hybrid_store.huge_partition_hard_limit = Some(ByteSize(50 * GIB));
        e.hybrid_store.huge_partition_split_limit = Some(ByteSize(5 * GIB));
        e.localfile_store.disk_high_watermark = 0.9;
        e.localfile_store.disk_low_watermark = 0.7;
        e.localfile_store.healthy_check_min_disks = 2;
        e.localfile_store.disk_health_check_interval = Duration::from_secs(3);
        e.limits.idle_timeout = Duration::from_secs(300);
        e.metrics.push_gateway_endpoint = Some("http://gateway:9091".into());
        e.metrics.push_gateway_job = "rss-servers".into();
        e.metrics.push_gateway_grouping_key = "cluster=c1;zone=z".into();
        e.metrics.push_interval = Duration::from_secs(30);
        e.hdfs_store.kerberos_principal = Some("rss/host@REALM".into());
        e.hdfs_store.kerberos_keytab = Some(PathBuf::from("/etc/rss.keytab"));
        e.metrics.basic_credentials = Some(crate::config::Secret("dXNlcjpzZWNyZXQ=".into()));
        // The file as written, for the conf endpoint.
        e.java_properties = props(text);
        assert_eq!(c, e);
    }

    #[test]
    fn storage_types_without_memory_and_the_commit_timeout() {
        for (name, store_type) in StoreType::ALL {
            let c = load(&format!(
                "rss.storage.type {name}\nrss.server.commit.timeout 30000\n"
            ));
            assert_eq!(c.config.store_type, store_type, "{name}");
            assert_eq!(c.config.app.commit_timeout, Duration::from_secs(30));
            assert!(c.ignored.is_empty(), "{:?}", c.ignored);
        }
        let e = load_err("rss.storage.type MEMORY\n");
        assert_eq!(e.key, "rss.storage.type");
    }

    #[test]
    fn proxy_user_disabled_writes_as_the_server() {
        let on = "rss.security.hadoop.kerberos.enable true\n\
                  rss.security.hadoop.kerberos.principal rss/host@REALM\n\
                  rss.security.hadoop.kerberos.keytab.file /etc/rss.keytab\n";
        let c = load(&format!(
            "{on}rss.security.hadoop.kerberos.proxy.user.enable false\n"
        ))
        .config;
        assert_eq!(c.hdfs_store.write_as, HdfsWriteAs::Server);
        let c = load(on).config;
        assert_eq!(c.hdfs_store.write_as, HdfsWriteAs::Auto);
    }

    #[test]
    fn keys_match_in_any_case_and_the_last_duplicate_wins() {
        let loaded = load("RSS.RPC.SERVER.PORT 1\nrss.rpc.server.port 2\nrss.Rpc.Server.Port 3\n");
        assert_eq!(loaded.config.grpc_port, 3);
        assert!(loaded.ignored.is_empty());
    }

    #[test]
    fn unknown_keys_are_listed_once_in_file_order() {
        let loaded = load(
            "zz.other 1\nrss.server.disk.capacity 1t\nrss.server.hadoop.dfs.replication 2\n\
             rss.server.disk.capacity 2t\nrss.server.single.buffer.flush.enabled false\n\
             rss.server.decommission.shutdown false\nrss.metrics.prometheus.pushgateway.addr g:1\n\
             rss.security.hadoop.kerberos.principal p@R\nrss.server.health.min.storage.percentage 50\n\
             rss.server.max.concurrency.of.per-partition.write 4\n\
             rss.server.max.concurrency.of.single.partition.writer 9\n\
             rss.server.hadoop.fs.defaultFS hdfs://ns1\n",
        );
        let keys: Vec<&str> = loaded
            .ignored
            .iter()
            .map(|k| k.split(' ').next().unwrap())
            .collect();
        assert_eq!(
            keys,
            vec![
                "zz.other",
                "rss.server.disk.capacity",
                "rss.server.single.buffer.flush.enabled",
                "rss.server.decommission.shutdown",
                "rss.metrics.prometheus.pushgateway.addr",
                "rss.security.hadoop.kerberos.principal",
                "rss.server.health.min.storage.percentage",
                "rss.server.max.concurrency.of.single.partition.writer",
            ]
        );
        assert_eq!(loaded.config.hdfs_store.partition_write_max_concurrency, 4);
        let hadoop: Vec<(&str, &str)> = loaded
            .config
            .hdfs_store
            .hadoop_conf
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            hadoop,
            vec![("dfs.replication", "2"), ("fs.defaultFS", "hdfs://ns1")],
            "rss.server.hadoop.* items become the server's Hadoop conf, case kept"
        );
        // The old per-partition name is read when the new one is absent.
        let c = load("rss.server.max.concurrency.of.single.partition.writer 9\n").config;
        assert_eq!(c.hdfs_store.partition_write_max_concurrency, 9);
    }

    #[test]
    fn malformed_values_name_the_java_key() {
        for (text, key, needle) in [
            ("rss.server.buffer.capacity abc", "rss.server.buffer.capacity", "\"abc\" is not a size"),
            ("rss.server.buffer.capacity 1.5g", "rss.server.buffer.capacity", "fractions"),
            ("rss.server.buffer.capacity 0", "rss.server.buffer.capacity", "above 0"),
            ("rss.rpc.server.port 19999x", "rss.rpc.server.port", "not an integer"),
            ("rss.rpc.server.port 70000", "rss.rpc.server.port", "out of range"),
            ("rss.jetty.http.port -1", "rss.jetty.http.port", "out of range"),
            ("rss.server.netty.port abc", "rss.server.netty.port", "not an integer"),
            ("rss.rpc.server.type NETTY", "rss.rpc.server.type", "GRPC, GRPC_NETTY"),
            ("rss.storage.type MEMORY", "rss.storage.type", "MEMORY_LOCALFILE"),
            ("rss.server.heartbeat.interval 10m", "rss.server.heartbeat.interval", "byte size"),
            ("rss.server.heartbeat.interval 0", "rss.server.heartbeat.interval", "above 0"),
            ("rss.server.app.expired.withoutHeartbeat soon", "rss.server.app.expired.withoutHeartbeat", "not a duration"),
            ("rss.server.memory.shuffle.highWaterMark.percentage 150", "rss.server.memory.shuffle.highWaterMark.percentage", "percentage"),
            ("rss.server.memory.shuffle.lowWaterMark.percentage 80", "rss.server.memory.shuffle.lowWaterMark.percentage", "below"),
            ("rss.server.buffer.capacity.ratio 1.5", "rss.server.buffer.capacity.ratio", "ratio"),
            ("rss.server.single.buffer.flush.enabled yes", "rss.server.single.buffer.flush.enabled", "true or false"),
            ("rss.server.flush.localfile.threadPool.size 0", "rss.server.flush.localfile.threadPool.size", "out of range"),
            ("rss.server.huge-partition.size.hard.limit -1", "rss.server.huge-partition.size.hard.limit", "above 0"),
            ("rss.storage.basePath /a,/a", "rss.storage.basePath", "listed twice"),
            ("rss.server.topN.appShuffleDataSize.number -1", "rss.server.topN.appShuffleDataSize.number", "out of range"),
            ("rss.server.metrics.blockSizeStatistics.buckets 1k,0", "rss.server.metrics.blockSizeStatistics.buckets", "above 0"),
            ("rss.coordinator.quorum http://c:1", "rss.coordinator.quorum", "host"),
            ("rss.server.low.watermark.write 96", "rss.server.low.watermark.write", "below"),
            ("rss.rpc.server.port 19998\nrss.jetty.http.port 19998", "rss.jetty.http.port", "different ports"),
            ("rss.rpc.server.port 2000\nrss.server.netty.port 2000", "rss.server.netty.port", "its own port"),
            ("rss.metrics.reporter.class PrometheusPushGatewayMetricReporter", "rss.metrics.prometheus.pushgateway.addr", "required"),
            ("rss.metrics.reporter.class PrometheusPushGatewayMetricReporter\nrss.metrics.prometheus.pushgateway.addr g:1", "rss.metrics.prometheus.pushgateway.jobname", "required"),
            ("rss.metrics.reporter.class PrometheusPushGatewayMetricReporter\nrss.metrics.prometheus.pushgateway.addr g:1\nrss.metrics.prometheus.pushgateway.jobname j\nrss.metrics.prometheus.pushgateway.groupingkey instance=x", "rss.metrics.prometheus.pushgateway.groupingkey", "set by the server"),
            ("rss.metrics.reporter.class PrometheusPushGatewayMetricReporter\nrss.metrics.prometheus.pushgateway.addr g:1\nrss.metrics.prometheus.pushgateway.jobname a/b", "rss.metrics.prometheus.pushgateway.jobname", "without '/'"),
            ("rss.security.hadoop.kerberos.enable true", "rss.security.hadoop.kerberos.principal", "required"),
            ("rss.security.hadoop.kerberos.enable true\nrss.security.hadoop.kerberos.principal p@R", "rss.security.hadoop.kerberos.keytab.file", "required"),
            ("rss.server.health.check.enable true\nrss.server.health.min.storage.percentage 101", "rss.server.health.min.storage.percentage", "percentage"),
        ] {
            let err = load_err(text);
            assert_eq!(err.key, key, "{text}: {err}");
            assert!(err.reason.contains(needle), "{text}: {err}");
        }
        assert_eq!(
            load_err("rss.server.buffer.capacity abc").to_string(),
            "config key `rss.server.buffer.capacity`: \"abc\" is not a size (expected a byte \
             count or digits with b, k, kb, m, mb, g, gb, t, tb, p or pb, e.g. 40g)"
        );
    }

    #[test]
    fn push_gateway_addr_with_scheme_is_kept() {
        let c = load(
            "rss.metrics.reporter.class org.apache.uniffle.common.metrics.prometheus.PrometheusPushGatewayMetricReporter\n\
             rss.metrics.prometheus.pushgateway.addr https://gw.example.com:9091\n\
             rss.metrics.prometheus.pushgateway.jobname j\n",
        )
        .config;
        assert_eq!(
            c.metrics.push_gateway_endpoint.as_deref(),
            Some("https://gw.example.com:9091")
        );
    }

    #[test]
    fn split_limit_long_max_is_none_and_negative_is_zero() {
        let split = |v: &str| {
            load(&format!("rss.server.huge-partition.split.limit {v}\n"))
                .config
                .hybrid_store
                .huge_partition_split_limit
        };
        assert_eq!(split("9223372036854775807"), None);
        assert_eq!(split("-1"), Some(ByteSize(0)));
        assert_eq!(split("0"), Some(ByteSize(0)));
        assert_eq!(split("20g"), Some(ByteSize(20 * GIB)));
        assert_eq!(
            load("").config.hybrid_store.huge_partition_split_limit,
            None
        );
    }

    #[test]
    fn top_n_apps_maps_and_its_refresh_interval_is_listed_as_unused() {
        let loaded = load(
            "rss.server.topN.appShuffleDataSize.number 3\n\
             rss.server.topN.appShuffleDataSize.refreshIntervalMs 5000\n",
        );
        assert_eq!(loaded.config.metrics.top_n_apps, 3);
        assert_eq!(
            loaded.ignored,
            vec![
                "rss.server.topN.appShuffleDataSize.refreshIntervalMs (Spillway computes the \
                 top-N families at each scrape)"
            ]
        );
        assert_eq!(load("").config.metrics.top_n_apps, 10, "Java's default");
        let c = load(
            "rss.server.metrics.blockSizeStatisticsEnabled true\n\
             rss.server.metrics.blockSizeStatistics.buckets 1k, 2mb\n",
        )
        .config;
        assert!(c.metrics.block_size_statistics);
        assert_eq!(
            c.metrics.block_size_buckets,
            vec![ByteSize(1024), ByteSize(2 << 20)]
        );
    }

    #[test]
    fn hard_limit_of_long_max_means_none() {
        let c = load("rss.server.huge-partition.size.hard.limit 9223372036854775807\n").config;
        assert_eq!(c.hybrid_store.huge_partition_hard_limit, None);
    }

    #[test]
    fn format_is_recognised_by_content_and_suffix() {
        assert!(looks_like_properties("rss.rpc.server.port 1\n"));
        assert!(looks_like_properties(
            "# c\nRSS.rpc.server.port=1\nother=2\n"
        ));
        assert!(!looks_like_properties("grpc_port = 1\n"));
        assert!(!looks_like_properties("[memory_store]\nrss.x = 1\n"));
        assert!(!looks_like_properties(""));

        let dir = tempfile::TempDir::new().unwrap();
        let toml_named_conf = dir.path().join("spillway.conf");
        let c = parse_config_file(&toml_named_conf, "grpc_port = 1234\n").unwrap();
        assert_eq!(c.grpc_port, 1234);
        let err = parse_config_file(&toml_named_conf, "grpc_portt = 1\n").unwrap_err();
        assert!(err.reason.contains("no rss.* key"), "{err}");
        // A Java file without a suffix, and an all-comments server.conf.
        let c =
            parse_config_file(&dir.path().join("server"), "rss.rpc.server.port 1234\n").unwrap();
        assert_eq!(c.grpc_port, 1234);
        let c = parse_config_file(&dir.path().join("server.conf"), "# nothing\n").unwrap();
        assert_eq!(c.hybrid_store.memory_spill_high_watermark, 0.75);
        // A TOML file stays TOML.
        let c = parse_config_file(&dir.path().join("c.toml"), "grpc_port = 1\n").unwrap();
        assert_eq!(c.grpc_port, 1);
    }

    #[test]
    fn available_memory_is_plausible() {
        if let Some(bytes) = available_memory() {
            assert!(bytes >= 64 << 20, "{bytes}");
        }
    }
}
