//! Runtime reconfiguration: the keys the Java server lets an operator change without a restart,
//! and the two ways in that Java has.
//!
//! Java 0.10 (`ReconfigurableConfManager`, `ReconfigurableRegistry`, `ConfOpsResource`) has
//! components register listeners for a few keys; a change reaches them either from
//! `POST /api/shuffleServer/confOps/update` (see `src/http/conf_ops.rs`) or from the server
//! re-reading its config file every `rss.reconfigure.interval.sec` (5 s) once the file's
//! modification time moves. The shuffle server's listeners, and so Spillway's reconfigurable
//! keys, are:
//!
//! | Java key | Spillway key | What reacts |
//! |---|---|---|
//! | `rss.server.rpc.audit.log.enabled` | `audit.rpc_log` | the RPC audit log, on both planes, from the next request |
//! | `rss.server.rpc.audit.log.excludeList` | `audit.rpc_exclude` | the same |
//! | `rss.metrics.prometheus.pushgateway.report.interval.seconds` | `metrics.push_interval` | the push-gateway reporter: the next push is one new interval away |
//! | `rss.server.huge-partition.size.threshold` | `hybrid_store.huge_partition_size_threshold` | the next `requireBuffer`/`sendShuffleData` |
//! | `rss.server.huge-partition.size.hard.limit` | `hybrid_store.huge_partition_hard_limit` | the same |
//! | `rss.server.huge-partition.split.limit` | `hybrid_store.huge_partition_split_limit` | the same |
//! | `rss.server.memory.shuffle.highWaterMark.percentage` | `hybrid_store.memory_spill_high_watermark` | the memory budget's spill trigger (the spiller is woken if memory is already above the new mark) |
//! | `rss.server.memory.shuffle.lowWaterMark.percentage` | `hybrid_store.memory_spill_low_watermark` | where a watermark spill stops |
//! | `rss.server.quota.app.localfile.ratio`, `…app.localfile.size`, `…user.localfile.ratio`, `…user.localfile.size`, `…app.remote.size`, `…user.remote.size` (Spillway's) | `quota.*` | the next `requireBuffer`/`sendShuffleData` and the next spill's route |
//! | `rss.coordinator.shuffle.nodes.max` | `coordinator.shuffle_server_number` | the coordinator (embedded or coordinator-only): the next assignment and `accessCluster`'s cluster-load check |
//!
//! The last one is the Java coordinator's: its `CoordinatorServer` re-reads its coordinator.conf
//! every `rss.reconfigure.interval.sec` and hands this key to `SimpleClusterManager` and
//! `AccessClusterLoadChecker` (their `isPropertyReconfigurable`), the only coordinator keys it
//! reloads. A coordinator-only process watches its file for it, and the embedded coordinator
//! takes it like the server's keys; a process without a coordinator refuses it.
//!
//! (Read from apache/uniffle post-0.10 copies of `ShuffleServerGrpcService`,
//! `ShuffleServerNettyHandler`, `PrometheusPushGatewayMetricReporter`, `ShuffleBufferManager`
//! and `LocalStorageChecker`, and the JSON `ConfOpsResource`; no stored copy is exactly the
//! 0.10.0 tag.) The rest of Java's listeners belong to parts Spillway does not have (JVM
//! thread pools) or that it does not map (the local-storage checker's execution timeout).
//! Java's file polling refreshes only keys read through `getReconfigurableConf`, which the two
//! watermarks are not (their listener hears REST updates only); Spillway applies them both
//! ways, like the other keys.
//!
//! As in Java:
//! - a file change is applied to these keys only, and a key the file no longer sets goes back
//!   to its default; the file is compared with what is running, so it also undoes an earlier
//!   REST update of a key it sets differently;
//! - a REST update lasts until the next restart (or the next change of the file).
//!
//! Where Spillway differs on purpose:
//! - a file change to any other key is logged as needing a restart (Java ignores it silently),
//!   so an operator is never left believing it took effect;
//! - a REST update naming a key that is not reconfigurable, or a value that does not parse, is
//!   refused whole with 400 and the reason (Java stores any key and answers success, even when
//!   nothing reacts to it, and a value its listener cannot parse only reaches its log);
//! - a file that no longer parses is logged and changes nothing (so does Java).
//!
//! The running values live in one `watch` channel of `Arc<Config>` snapshots: readers
//! (`/api/shuffleServer/conf`, the push-gateway task) take a snapshot without a lock. What the
//! request path reads (the audit filter, the huge-partition limits, the watermarks) is pushed
//! into the component's own atomics or counters by listeners that `server.rs` registers
//! ([`Runtime::listen`], Java's `ReconfigurableRegistry.register`), so requests never look at
//! the config.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{ByteSize, Config};

/// Java's `rss.reconfigure.interval.sec` default.
pub const DEFAULT_INTERVAL: Duration = super::RECONFIGURE_INTERVAL;

/// The `[quota]` keys, all reconfigurable (Spillway names), for the quotas' listener.
pub const QUOTA_KEYS: [&str; 7] = [
    "quota.app_local_disk_share",
    "quota.app_local_disk_bytes",
    "quota.user_local_disk_share",
    "quota.user_local_disk_bytes",
    "quota.app_remote_bytes",
    "quota.user_remote_bytes",
    "quota.app_memory_share",
];

/// A memory watermark of `[hybrid_store]`: Java writes a percentage, Spillway a fraction; a
/// Java file that no longer sets it goes back to Java's default, a TOML one to Spillway's.
macro_rules! watermark {
    ($java:literal, $spillway:literal, $field:ident, $java_default:expr) => {
        Key {
            java: $java,
            spillway: $spillway,
            set: |c, v, java| {
                c.hybrid_store.$field = parse_fraction(v, java)?;
                Ok(())
            },
            reset: |c, java_file| {
                c.hybrid_store.$field = if java_file {
                    $java_default
                } else {
                    super::HybridStoreConfig::default().$field
                }
            },
            copy: |from, to| to.hybrid_store.$field = from.hybrid_store.$field,
            value: |c| c.hybrid_store.$field.to_string(),
            show: |c| (c.hybrid_store.$field * 100.0).to_string(),
        }
    };
}

/// A `[quota]` key: `parse` reads the value either way (`java`), `value` and `show` print it.
/// A share is a fraction in (0, 1] in both files; a size is above 0, or Java's
/// `Long.MAX_VALUE` for no limit (the default).
macro_rules! quota_key {
    ($java:literal, $spillway:literal, $field:ident, $parse:expr, $value:expr, $show:expr) => {
        Key {
            java: $java,
            spillway: $spillway,
            set: |c, v, java| {
                c.quota.$field = $parse(v, java)?;
                Ok(())
            },
            reset: |c, _| c.quota.$field = super::QuotaConfig::default().$field,
            copy: |from, to| to.quota.$field = from.quota.$field,
            value: |c| $value(&c.quota.$field),
            show: |c| $show(c.quota.$field),
        }
    };
    (share $java:literal, $spillway:literal, $field:ident) => {
        quota_key!(
            $java,
            $spillway,
            $field,
            |v, _| parse_share(v),
            f64::to_string,
            |x: f64| x.to_string()
        )
    };
    (size $java:literal, $spillway:literal, $field:ident) => {
        quota_key!(
            $java,
            $spillway,
            $field,
            parse_limit,
            |x: &Option<ByteSize>| format!("{x:?}"),
            show_limit
        )
    };
}

/// One reconfigurable key.
struct Key {
    /// As Java spells it (matched in any case, as Java matches keys).
    java: &'static str,
    /// The dotted Spillway key.
    spillway: &'static str,
    /// Sets the key from a value written as Java writes it (`java` is true) or as the TOML
    /// config writes it.
    set: fn(&mut Config, &str, bool) -> Result<(), String>,
    /// Back to the default (a deleted key, or one the file no longer sets); `java_file` says
    /// whether the running config came from a Java `server.conf`, whose defaults are Java's.
    reset: fn(&mut Config, bool),
    /// Copies the key from a re-read file.
    copy: fn(&Config, &mut Config),
    /// The value, exactly (to tell whether it changed).
    value: fn(&Config) -> String,
    /// The value as Java's `/conf` shows it.
    show: fn(&Config) -> String,
}

const KEYS: [Key; 16] = [
    Key {
        java: "rss.server.rpc.audit.log.enabled",
        spillway: "audit.rpc_log",
        set: |c, v, _| {
            c.audit.rpc_log = parse_bool(v)?;
            Ok(())
        },
        reset: |c, _| c.audit.rpc_log = super::AuditConfig::default().rpc_log,
        copy: |from, to| to.audit.rpc_log = from.audit.rpc_log,
        value: |c| c.audit.rpc_log.to_string(),
        show: |c| c.audit.rpc_log.to_string(),
    },
    Key {
        java: "rss.server.rpc.audit.log.excludeList",
        spillway: "audit.rpc_exclude",
        set: |c, v, _| {
            // Java splits on `,` and trims; Spillway drops empty items too, as its loader does.
            c.audit.rpc_exclude = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            Ok(())
        },
        reset: |c, _| c.audit.rpc_exclude = super::AuditConfig::default().rpc_exclude,
        copy: |from, to| to.audit.rpc_exclude = from.audit.rpc_exclude.clone(),
        value: |c| c.audit.rpc_exclude.join(","),
        show: |c| c.audit.rpc_exclude.join(","),
    },
    Key {
        java: "rss.metrics.prometheus.pushgateway.report.interval.seconds",
        spillway: "metrics.push_interval",
        set: |c, v, java| {
            let v = v.trim();
            c.metrics.push_interval = if java {
                // Java reads it with `getInteger`: whole seconds.
                let secs: u32 = v
                    .parse()
                    .map_err(|_| format!("{v:?} is not a whole number of seconds"))?;
                Duration::from_secs(secs.into())
            } else {
                humantime_serde::re::humantime::parse_duration(v)
                    .map_err(|e| format!("{v:?}: {e}"))?
            };
            Ok(())
        },
        reset: |c, _| c.metrics.push_interval = super::MetricsConfig::default().push_interval,
        copy: |from, to| to.metrics.push_interval = from.metrics.push_interval,
        value: |c| format!("{:?}", c.metrics.push_interval),
        show: |c| c.metrics.push_interval.as_secs().to_string(),
    },
    Key {
        java: "rss.server.huge-partition.size.threshold",
        spillway: "hybrid_store.huge_partition_size_threshold",
        set: |c, v, java| {
            c.hybrid_store.huge_partition_size_threshold = ByteSize(parse_positive(v, java)?);
            Ok(())
        },
        reset: |c, _| {
            c.hybrid_store.huge_partition_size_threshold =
                super::HybridStoreConfig::default().huge_partition_size_threshold
        },
        copy: |from, to| {
            to.hybrid_store.huge_partition_size_threshold =
                from.hybrid_store.huge_partition_size_threshold
        },
        value: |c| {
            c.hybrid_store
                .huge_partition_size_threshold
                .as_u64()
                .to_string()
        },
        show: |c| {
            c.hybrid_store
                .huge_partition_size_threshold
                .as_u64()
                .to_string()
        },
    },
    Key {
        java: "rss.server.huge-partition.size.hard.limit",
        spillway: "hybrid_store.huge_partition_hard_limit",
        set: |c, v, java| {
            c.hybrid_store.huge_partition_hard_limit = parse_limit(v, java)?;
            Ok(())
        },
        reset: |c, _| c.hybrid_store.huge_partition_hard_limit = None,
        copy: |from, to| {
            to.hybrid_store.huge_partition_hard_limit = from.hybrid_store.huge_partition_hard_limit
        },
        value: |c| format!("{:?}", c.hybrid_store.huge_partition_hard_limit),
        show: |c| show_limit(c.hybrid_store.huge_partition_hard_limit),
    },
    Key {
        java: "rss.server.huge-partition.split.limit",
        spillway: "hybrid_store.huge_partition_split_limit",
        set: |c, v, java| {
            // As the loader maps it: a negative Java value splits every partition, as 0 does.
            let size = if java {
                super::java::java_size(v)?.max(0) as u64
            } else {
                parse_size(v, false)?
            };
            c.hybrid_store.huge_partition_split_limit =
                (size != JAVA_NO_LIMIT).then_some(ByteSize(size));
            Ok(())
        },
        reset: |c, _| c.hybrid_store.huge_partition_split_limit = None,
        copy: |from, to| {
            to.hybrid_store.huge_partition_split_limit =
                from.hybrid_store.huge_partition_split_limit
        },
        value: |c| format!("{:?}", c.hybrid_store.huge_partition_split_limit),
        show: |c| show_limit(c.hybrid_store.huge_partition_split_limit),
    },
    watermark!(
        "rss.server.memory.shuffle.highWaterMark.percentage",
        "hybrid_store.memory_spill_high_watermark",
        memory_spill_high_watermark,
        JAVA_HIGH_WATERMARK
    ),
    watermark!(
        "rss.server.memory.shuffle.lowWaterMark.percentage",
        "hybrid_store.memory_spill_low_watermark",
        memory_spill_low_watermark,
        JAVA_LOW_WATERMARK
    ),
    Key {
        java: "rss.coordinator.shuffle.nodes.max",
        spillway: "coordinator.shuffle_server_number",
        set: |c, v, _| {
            // A process without a coordinator has nothing that would take it.
            if !c.coordinator.enabled {
                return Err("this process runs no coordinator".into());
            }
            let n: usize = v
                .trim()
                .parse()
                .map_err(|_| format!("{v:?} is not a whole number"))?;
            if n == 0 {
                return Err("must be at least 1".into());
            }
            c.coordinator.shuffle_server_number = n;
            Ok(())
        },
        reset: |c, _| {
            c.coordinator.shuffle_server_number =
                super::CoordinatorConfig::default().shuffle_server_number
        },
        copy: |from, to| {
            to.coordinator.shuffle_server_number = from.coordinator.shuffle_server_number
        },
        value: |c| c.coordinator.shuffle_server_number.to_string(),
        show: |c| c.coordinator.shuffle_server_number.to_string(),
    },
    quota_key!(share "rss.server.quota.app.localfile.ratio",
        "quota.app_local_disk_share",
        app_local_disk_share
    ),
    quota_key!(size "rss.server.quota.app.localfile.size",
        "quota.app_local_disk_bytes",
        app_local_disk_bytes
    ),
    quota_key!(share "rss.server.quota.user.localfile.ratio",
        "quota.user_local_disk_share",
        user_local_disk_share
    ),
    quota_key!(size "rss.server.quota.user.localfile.size",
        "quota.user_local_disk_bytes",
        user_local_disk_bytes
    ),
    quota_key!(size "rss.server.quota.app.remote.size",
        "quota.app_remote_bytes",
        app_remote_bytes
    ),
    quota_key!(size "rss.server.quota.user.remote.size",
        "quota.user_remote_bytes",
        user_remote_bytes
    ),
    quota_key!(
        "rss.server.quota.app.memory.ratio",
        "quota.app_memory_share",
        app_memory_share,
        |v: &str, _| v.parse::<super::quota::MemoryShare>(),
        |x: &super::quota::MemoryShare| x.to_string(),
        |x: super::quota::MemoryShare| x.to_string()
    ),
];

/// Java's `Long.MAX_VALUE`, its "no limit" for the huge-partition limits.
const JAVA_NO_LIMIT: u64 = i64::MAX as u64;

/// Java's watermark defaults (75 % and 25 %), which a `server.conf` without them runs with.
const JAVA_HIGH_WATERMARK: f64 = 0.75;
const JAVA_LOW_WATERMARK: f64 = 0.25;

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim() {
        t if t.eq_ignore_ascii_case("true") => Ok(true),
        t if t.eq_ignore_ascii_case("false") => Ok(false),
        t => Err(format!("{t:?} is not true or false")),
    }
}

/// A size in bytes: Java's syntax (`10g`, `1024`) or Spillway's (`"10G"`).
fn parse_size(v: &str, java: bool) -> Result<u64, String> {
    let v = v.trim();
    if java {
        let size = super::java::java_size(v)?;
        u64::try_from(size).map_err(|_| format!("{size} must not be negative"))
    } else {
        v.parse::<ByteSize>()
            .map(|b| b.as_u64())
            .map_err(|e| format!("{v:?}: {e}"))
    }
}

/// A fraction: Java's percentage in `0..=100`, or Spillway's fraction.
fn parse_fraction(v: &str, java: bool) -> Result<f64, String> {
    let v = v.trim();
    if java {
        let pct = super::java::java_double(v).ok_or_else(|| format!("{v:?} is not a number"))?;
        if !(0.0..=100.0).contains(&pct) {
            return Err(format!("{pct} is not a percentage in 0..=100"));
        }
        Ok(pct / 100.0)
    } else {
        v.parse().map_err(|_| format!("{v:?} is not a number"))
    }
}

/// A share in (0, 1].
fn parse_share(v: &str) -> Result<f64, String> {
    let v = v.trim();
    match v.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!("{v:?} is not a share in (0, 1]")),
    }
}

/// A size above 0.
fn parse_positive(v: &str, java: bool) -> Result<u64, String> {
    match parse_size(v, java)? {
        0 => Err("must be above 0".into()),
        size => Ok(size),
    }
}

/// A size above 0, or no limit for Java's `Long.MAX_VALUE` (its way of saying "no limit").
fn parse_limit(v: &str, java: bool) -> Result<Option<ByteSize>, String> {
    let size = parse_positive(v, java)?;
    Ok((size != JAVA_NO_LIMIT).then_some(ByteSize(size)))
}

fn show_limit(limit: Option<ByteSize>) -> String {
    limit.map_or(JAVA_NO_LIMIT, |b| b.as_u64()).to_string()
}

/// `(key, java)` for a key written either way; `java` says which.
fn find(name: &str) -> Option<(&'static Key, bool)> {
    let name = name.trim();
    KEYS.iter().find_map(|k| {
        if k.java.eq_ignore_ascii_case(name) {
            Some((k, true))
        } else if k.spillway == name {
            Some((k, false))
        } else {
            None
        }
    })
}

/// The Java and Spillway names of every reconfigurable key.
pub fn reconfigurable_keys() -> impl Iterator<Item = (&'static str, &'static str)> {
    KEYS.iter().map(|k| (k.java, k.spillway))
}

/// Why a change was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A component's reaction to a new config (Java's `ReconfigureListener`): it takes the keys it
/// listens for from the config it is given. It may refuse (the change is then undone).
pub type React = Box<dyn Fn(&Config) -> Result<(), String> + Send + Sync>;

struct Listener {
    /// Spillway names of the keys it listens for.
    keys: &'static [&'static str],
    react: React,
}

/// The running config and the components that react to it.
pub struct Runtime {
    current: watch::Sender<Arc<Config>>,
    /// The keys this process has something to react with (Spillway names), when not all: a
    /// coordinator-only process has no audit log or store, and takes no key for them.
    only: Option<&'static [&'static str]>,
    /// The listeners, and the lock that serialises changes (REST and file), so two never
    /// interleave their read-modify-write. Held only while nothing awaits.
    listeners: parking_lot::Mutex<Vec<Listener>>,
}

impl Runtime {
    /// `config` is the validated start-up config.
    pub fn new(config: Config) -> Arc<Runtime> {
        Self::with_keys(config, None)
    }

    /// [`Runtime::new`] for a process that reacts to `only` of the keys (Spillway names); the
    /// others are refused over REST and left alone in a re-read file.
    pub fn new_limited(config: Config, only: &'static [&'static str]) -> Arc<Runtime> {
        debug_assert!(only.iter().all(|k| KEYS.iter().any(|r| r.spillway == *k)));
        Self::with_keys(config, Some(only))
    }

    fn with_keys(config: Config, only: Option<&'static [&'static str]>) -> Arc<Runtime> {
        let (current, _) = watch::channel(Arc::new(config));
        Arc::new(Runtime {
            current,
            only,
            listeners: parking_lot::Mutex::new(Vec::new()),
        })
    }

    /// Whether this process takes `key`.
    fn takes(&self, key: &Key) -> bool {
        self.only.is_none_or(|only| only.contains(&key.spillway))
    }

    /// Calls `react` with the new config whenever one of `keys` (Spillway names) changes.
    /// Components that read the config themselves ([`Runtime::subscribe`]) need none.
    pub fn listen(&self, keys: &'static [&'static str], react: React) {
        debug_assert!(keys.iter().all(|k| KEYS.iter().any(|r| r.spillway == *k)));
        self.listeners.lock().push(Listener { keys, react });
    }

    /// The running config.
    pub fn current(&self) -> Arc<Config> {
        Arc::clone(&self.current.borrow())
    }

    /// Notified at every change.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Config>> {
        self.current.subscribe()
    }

    /// A REST update: `update` sets keys, `delete` puts keys back to their defaults. All or
    /// nothing: the first key that is not reconfigurable or value that does not parse refuses
    /// the whole request.
    pub fn update(&self, update: &[(String, String)], delete: &[String]) -> Result<(), Refused> {
        let listeners = self.listeners.lock();
        let mut next = (*self.current()).clone();
        let java_file = !next.java_properties.is_empty();
        let find = |name: &str| find(name).filter(|(k, _)| self.takes(k));
        for (name, value) in update {
            let (key, java) = find(name).ok_or_else(|| not_reconfigurable(self, name))?;
            (key.set)(&mut next, value, java).map_err(|e| Refused(format!("{name}: {e}")))?;
        }
        for name in delete {
            let (key, _) = find(name).ok_or_else(|| not_reconfigurable(self, name))?;
            (key.reset)(&mut next, java_file);
        }
        // Java's `/conf` lists the keys as they were set (a deleted one disappears).
        let deleted: Vec<&str> = delete
            .iter()
            .filter_map(|n| find(n).map(|(k, _)| k.java))
            .collect();
        self.apply(&listeners, next, "REST", &deleted)
    }

    /// Applies the reconfigurable keys of a re-read config file; returns the other keys whose
    /// change needs a restart.
    fn apply_file(&self, file: &Config, origin: &str) -> Result<Vec<String>, Refused> {
        let listeners = self.listeners.lock();
        let running = self.current();
        let mut next = (*running).clone();
        let mut absent = Vec::new();
        for key in KEYS.iter().filter(|k| self.takes(k)) {
            (key.copy)(file, &mut next);
            let java_file = !file.java_properties.is_empty();
            if java_file
                && !file
                    .java_properties
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case(key.java))
            {
                absent.push(key.java);
            }
        }
        let restart = restart_keys(&running, file);
        self.apply(&listeners, next, origin, &absent)?;
        Ok(restart)
    }

    /// Validates `next`, brings the components along, and publishes it. `removed` are Java
    /// keys `/conf` no longer lists.
    fn apply(
        &self,
        listeners: &[Listener],
        mut next: Config,
        origin: &str,
        removed: &[&str],
    ) -> Result<(), Refused> {
        next.validate().map_err(|e| Refused(e.to_string()))?;
        let running = self.current();
        let changed: Vec<&Key> = KEYS
            .iter()
            .filter(|k| (k.value)(&running) != (k.value)(&next))
            .collect();
        if !next.java_properties.is_empty() || !running.java_properties.is_empty() {
            for key in &KEYS {
                let shown = (key.show)(&next);
                let props = &mut next.java_properties;
                let at = props
                    .iter()
                    .position(|(k, _)| k.eq_ignore_ascii_case(key.java));
                if removed.contains(&key.java) {
                    if let Some(i) = at {
                        props.remove(i);
                    }
                } else if changed.iter().any(|c| c.java == key.java) {
                    match at {
                        Some(i) => props[i].1 = shown,
                        None => props.push((key.java.to_owned(), shown)),
                    }
                }
            }
        }
        let concerned = listeners
            .iter()
            .filter(|l| changed.iter().any(|k| l.keys.contains(&k.spillway)));
        let mut reacted: Vec<&Listener> = Vec::new();
        for listener in concerned {
            if let Err(e) = (listener.react)(&next) {
                // Back to the running values for those that already took the new ones.
                for done in reacted {
                    let _ = (done.react)(&running);
                }
                return Err(Refused(e));
            }
            reacted.push(listener);
        }
        for key in &changed {
            tracing::info!(
                key = key.java,
                spillway = key.spillway,
                from = %(key.show)(&running),
                to = %(key.show)(&next),
                origin,
                "reconfigured (until restart)"
            );
        }
        self.current.send_replace(Arc::new(next));
        Ok(())
    }
}

fn not_reconfigurable(runtime: &Runtime, name: &str) -> Refused {
    let keys: Vec<&str> = KEYS
        .iter()
        .filter(|k| runtime.takes(k))
        .map(|k| k.java)
        .collect();
    Refused(format!(
        "{name}: not reconfigurable at runtime; the keys that are: {} (or their Spillway \
         names); change others in the config file and restart",
        keys.join(", ")
    ))
}

/// The dotted keys, other than the reconfigurable ones, whose values differ.
fn restart_keys(running: &Config, file: &Config) -> Vec<String> {
    let mask = |c: &Config| {
        let mut c = c.clone();
        for key in &KEYS {
            (key.reset)(&mut c, false);
        }
        flatten(&c)
    };
    let (a, b) = (mask(running), mask(file));
    let mut out: Vec<String> = b
        .iter()
        .filter(|kv| !a.contains(kv))
        .map(|(k, _)| k.clone())
        .chain(
            a.iter()
                .filter(|(k, _)| !b.iter().any(|(k2, _)| k2 == k))
                .map(|(k, _)| k.clone()),
        )
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Re-reads the file `config` was loaded from every `reconfigure_interval` once its
/// modification time moves (Java polls the same way), applying what changed; stops with
/// `stop`. A config that came from no file has nothing to watch.
pub fn spawn_file_watch(
    runtime: Arc<Runtime>,
    config: &Config,
    stop: CancellationToken,
    tracker: &TaskTracker,
) {
    let Some(path) = config.source_path.clone() else {
        return;
    };
    let interval = config.reconfigure_interval;
    let env: fn(&str) -> Option<String> = |name| std::env::var(name).ok();
    tracing::info!(path = %path.display(), ?interval, "watching the config file for reconfigurable keys");
    tracker.spawn(async move {
        // Nothing seen yet, as Java starts: the first check reads the file once, so an edit
        // made while the server was starting is not missed.
        let mut seen = None;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let now = modified(&path).await;
            if now.is_none() || now <= seen {
                if now.is_none() && seen.is_some() {
                    tracing::warn!(path = %path.display(), "the config file is gone; nothing reconfigured");
                }
                continue;
            }
            seen = now;
            reload(&runtime, &path, env).await;
        }
    });
}

async fn modified(path: &Path) -> Option<SystemTime> {
    let path = path.to_path_buf();
    crate::runtime::blocking(move || std::fs::metadata(path))
        .await
        .ok()?
        .ok()?
        .modified()
        .ok()
}

/// Loads the file and applies it, on the blocking pool: loading reads the file, and turning
/// the audit log on opens one.
async fn reload(runtime: &Arc<Runtime>, path: &Path, env: fn(&str) -> Option<String>) {
    let owned = path.to_path_buf();
    let runtime = Arc::clone(runtime);
    let done = crate::runtime::blocking(move || {
        let file = Config::load(Some(&owned), &env).map_err(|e| {
            format!("the changed config file does not load; nothing reconfigured: {e}")
        })?;
        runtime
            .apply_file(&file, "file")
            .map_err(|e| format!("config file change refused: {e}"))
    })
    .await;
    match done {
        Ok(Ok(restart)) if !restart.is_empty() => tracing::warn!(
            path = %path.display(),
            keys = %restart.join(", "),
            "the config file changed keys that only take effect after a restart"
        ),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::error!(path = %path.display(), "{e}"),
        Err(e) => tracing::error!(error = %e, "config reload task failed"),
    }
}

/// Every config key as `(dotted.key, value)`, lists joined with `,`: what
/// `/api/shuffleServer/conf` shows for a TOML config, and what a file change is compared by.
/// Secrets are never serialized, so never listed.
pub fn flatten(config: &Config) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &toml::Value, out: &mut Vec<(String, String)>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            toml::Value::String(s) => out.push((prefix.to_owned(), s.clone())),
            toml::Value::Array(a) => out.push((
                prefix.to_owned(),
                a.iter()
                    .map(|v| match v {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            )),
            other => out.push((prefix.to_owned(), other.to_string())),
        }
    }
    let mut out = Vec::new();
    match toml::Value::try_from(config) {
        Ok(v) => walk("", &v, &mut out),
        Err(e) => tracing::warn!(error = %e, "config does not serialize"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(config: Config) -> Arc<Runtime> {
        Runtime::new(config)
    }

    fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn java_and_spillway_names_set_the_same_keys() {
        let r = runtime(Config::default());
        r.update(
            &set(&[
                ("RSS.server.rpc.audit.log.enabled", "FALSE"),
                (
                    "rss.server.rpc.audit.log.excludeList",
                    "appHeartbeat, requireBuffer,",
                ),
                (
                    "rss.metrics.prometheus.pushgateway.report.interval.seconds",
                    "30",
                ),
            ]),
            &[],
        )
        .unwrap();
        let c = r.current();
        assert!(!c.audit.rpc_log);
        assert_eq!(c.audit.rpc_exclude, ["appHeartbeat", "requireBuffer"]);
        assert_eq!(c.metrics.push_interval, Duration::from_secs(30));
        r.update(&set(&[("metrics.push_interval", "1m 30s")]), &[])
            .unwrap();
        assert_eq!(r.current().metrics.push_interval, Duration::from_secs(90));
        // Delete: back to the default, as Java's `conf.remove`.
        r.update(&[], &["audit.rpc_exclude".into(), "audit.rpc_log".into()])
            .unwrap();
        assert_eq!(r.current().audit, Config::default().audit);
    }

    /// Java's coordinator reloads `rss.coordinator.shuffle.nodes.max`; a process runs it only
    /// with a coordinator, and a coordinator-only process takes none of the server's keys.
    #[test]
    fn shuffle_nodes_max_needs_a_coordinator_and_a_limited_runtime_takes_only_its_keys() {
        let r = runtime(Config::default());
        let e = r
            .update(&set(&[("rss.coordinator.shuffle.nodes.max", "3")]), &[])
            .unwrap_err();
        assert!(e.0.contains("runs no coordinator"), "{e}");

        let mut config = Config::default();
        config.coordinator.enabled = true;
        let r = Runtime::new_limited(config, &["coordinator.shuffle_server_number"]);
        r.update(&set(&[("rss.coordinator.shuffle.nodes.max", "3")]), &[])
            .unwrap();
        assert_eq!(r.current().coordinator.shuffle_server_number, 3);
        let e = r
            .update(&set(&[("audit.rpc_log", "false")]), &[])
            .unwrap_err();
        assert!(e.0.contains("not reconfigurable"), "{e}");
        assert!(
            !e.0.contains("rss.server.rpc.audit.log.enabled"),
            "lists only what it takes: {e}"
        );
        let e = r
            .update(&set(&[("rss.coordinator.shuffle.nodes.max", "0")]), &[])
            .unwrap_err();
        assert!(e.0.contains("at least 1"), "{e}");
        r.update(&[], &["coordinator.shuffle_server_number".into()])
            .unwrap();
        assert_eq!(r.current().coordinator.shuffle_server_number, 9);
    }

    #[test]
    fn a_refused_request_changes_nothing() {
        let r = runtime(Config::default());
        let before = r.current();
        for (update, why) in [
            (
                set(&[("audit.rpc_log", "false"), ("rss.jetty.http.port", "1")]),
                "not reconfigurable",
            ),
            (
                set(&[
                    ("audit.rpc_log", "false"),
                    ("audit.rpc_exclude", "x"),
                    ("rss.server.rpc.audit.log.enabled", "yes"),
                ]),
                "is not true or false",
            ),
            (
                set(&[(
                    "rss.metrics.prometheus.pushgateway.report.interval.seconds",
                    "0",
                )]),
                "metrics.push_interval",
            ),
            (
                set(&[(
                    "rss.metrics.prometheus.pushgateway.report.interval.seconds",
                    "10s",
                )]),
                "whole number of seconds",
            ),
        ] {
            let e = r.update(&update, &[]).unwrap_err();
            assert!(e.0.contains(why), "{e}");
            assert_eq!(r.current(), before);
        }
        let e = r.update(&[], &["grpc_port".into()]).unwrap_err();
        assert!(e.0.starts_with("grpc_port: not reconfigurable"), "{e}");
    }

    #[test]
    fn java_properties_follow_the_running_values() {
        let config = Config {
            java_properties: vec![
                ("rss.rpc.server.port".into(), "19999".into()),
                (
                    "rss.server.rpc.audit.log.excludeList".into(),
                    "appHeartbeat".into(),
                ),
            ],
            ..Config::default()
        };
        let r = runtime(config);
        r.update(
            &set(&[("audit.rpc_exclude", "a,b"), ("audit.rpc_log", "false")]),
            &[],
        )
        .unwrap();
        assert_eq!(
            r.current().java_properties,
            [
                ("rss.rpc.server.port".to_owned(), "19999".to_owned()),
                ("rss.server.rpc.audit.log.excludeList".into(), "a,b".into()),
                ("rss.server.rpc.audit.log.enabled".into(), "false".into()),
            ]
        );
        r.update(&[], &["rss.server.rpc.audit.log.excludeList".into()])
            .unwrap();
        assert!(!r
            .current()
            .java_properties
            .iter()
            .any(|(k, _)| k.contains("excludeList")));
    }

    #[test]
    fn a_file_change_applies_reconfigurable_keys_and_names_the_rest() {
        let r = runtime(Config::default());
        // An earlier REST change the file does not repeat is undone, as in Java.
        r.update(&set(&[("audit.rpc_exclude", "requireBuffer")]), &[])
            .unwrap();
        let mut file = Config::default();
        file.audit.rpc_log = false;
        file.grpc_port = 20000;
        file.memory_store.capacity = crate::config::ByteSize(1 << 20);
        let restart = r.apply_file(&file, "test").unwrap();
        assert_eq!(restart, ["grpc_port", "memory_store.capacity"]);
        let c = r.current();
        assert!(!c.audit.rpc_log);
        assert_eq!(c.audit.rpc_exclude, ["appHeartbeat"]);
        assert_eq!(
            c.grpc_port, 19999,
            "not reconfigurable: stays until restart"
        );
    }
}

#[cfg(test)]
mod java_syntax_tests {
    use super::*;

    #[test]
    fn huge_partition_and_watermark_keys_take_javas_syntax() {
        let r = Runtime::new(Config::default());
        let set = |k: &str, v: &str| r.update(&[(k.to_owned(), v.to_owned())], &[]);
        set("rss.server.huge-partition.size.threshold", "10g").unwrap();
        set(
            "rss.server.huge-partition.size.hard.limit",
            "9223372036854775807",
        )
        .unwrap();
        set("rss.server.huge-partition.split.limit", "-1").unwrap();
        set("rss.server.memory.shuffle.highWaterMark.percentage", "70").unwrap();
        set("rss.server.memory.shuffle.lowWaterMark.percentage", "30.5").unwrap();
        let h = r.current().hybrid_store.clone();
        assert_eq!(h.huge_partition_size_threshold, ByteSize(10 << 30));
        assert_eq!(
            h.huge_partition_hard_limit, None,
            "Long.MAX_VALUE is no limit"
        );
        assert_eq!(h.huge_partition_split_limit, Some(ByteSize(0)));
        assert_eq!(h.memory_spill_high_watermark, 0.7);
        assert_eq!(h.memory_spill_low_watermark, 0.305);
        // Spillway's names take Spillway's syntax.
        set("hybrid_store.huge_partition_hard_limit", "64M").unwrap();
        assert_eq!(
            r.current().hybrid_store.huge_partition_hard_limit,
            Some(ByteSize(64 << 20))
        );
        // Cross-field validation still applies: low above high is refused.
        let e = set("hybrid_store.memory_spill_low_watermark", "0.9").unwrap_err();
        assert!(
            e.0.contains("hybrid_store.memory_spill_low_watermark"),
            "{e}"
        );
        assert!(set("rss.server.memory.shuffle.highWaterMark.percentage", "101").is_err());
    }

    #[test]
    fn a_refusing_listener_undoes_the_others() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let r = Runtime::new(Config::default());
        let seen = Arc::new(AtomicBool::new(true));
        let s = Arc::clone(&seen);
        r.listen(
            &["audit.rpc_log"],
            Box::new(move |c| {
                s.store(c.audit.rpc_log, Ordering::SeqCst);
                Ok(())
            }),
        );
        r.listen(
            &["audit.rpc_log"],
            Box::new(|c| {
                if c.audit.rpc_log {
                    Ok(())
                } else {
                    Err("no".into())
                }
            }),
        );
        let e = r
            .update(&[("audit.rpc_log".into(), "false".into())], &[])
            .unwrap_err();
        assert_eq!(e.0, "no");
        assert!(
            seen.load(Ordering::SeqCst),
            "the first listener is back on the running value"
        );
        assert!(r.current().audit.rpc_log);
    }
}
