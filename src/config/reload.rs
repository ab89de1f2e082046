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
//!
//! The rest of Java's listeners belong to parts Spillway does not have (JVM thread pools) or
//! that it does not map (the local-storage checker's execution timeout).
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
//! (`/api/shuffleServer/conf`, the push-gateway task) take a snapshot without a lock, and the
//! audit filter, which the request path reads, is pushed into its atomics when it changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Config;
use crate::audit::RpcAudit;

/// Java's `rss.reconfigure.interval.sec` default.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// One reconfigurable key.
struct Key {
    /// As Java spells it (matched in any case, as Java matches keys).
    java: &'static str,
    /// The dotted Spillway key.
    spillway: &'static str,
    /// Sets the key from a value written as Java writes it (`java` is true) or as the TOML
    /// config writes it.
    set: fn(&mut Config, &str, bool) -> Result<(), String>,
    /// Back to the default (a deleted key, or one the file no longer sets).
    reset: fn(&mut Config),
    /// Whether the key differs between two configs.
    differs: fn(&Config, &Config) -> bool,
    /// The value as Java's `/conf` shows it.
    show: fn(&Config) -> String,
}

const KEYS: [Key; 3] = [
    Key {
        java: "rss.server.rpc.audit.log.enabled",
        spillway: "audit.rpc_log",
        set: |c, v, _| {
            c.audit.rpc_log = parse_bool(v)?;
            Ok(())
        },
        reset: |c| c.audit.rpc_log = super::AuditConfig::default().rpc_log,
        differs: |a, b| a.audit.rpc_log != b.audit.rpc_log,
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
        reset: |c| c.audit.rpc_exclude = super::AuditConfig::default().rpc_exclude,
        differs: |a, b| a.audit.rpc_exclude != b.audit.rpc_exclude,
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
        reset: |c| c.metrics.push_interval = super::MetricsConfig::default().push_interval,
        differs: |a, b| a.metrics.push_interval != b.metrics.push_interval,
        show: |c| c.metrics.push_interval.as_secs().to_string(),
    },
];

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim() {
        t if t.eq_ignore_ascii_case("true") => Ok(true),
        t if t.eq_ignore_ascii_case("false") => Ok(false),
        t => Err(format!("{t:?} is not true or false")),
    }
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

/// The running config and the components that react to it.
pub struct Runtime {
    current: watch::Sender<Arc<Config>>,
    /// Serialises changes (REST and file), so two never interleave their read-modify-write.
    /// Held only while nothing awaits.
    changing: parking_lot::Mutex<()>,
    audit: RpcAudit,
}

impl Runtime {
    /// `config` is the validated start-up config; `audit` the RPC audit log the planes share.
    pub fn new(config: Config, audit: RpcAudit) -> Arc<Runtime> {
        let (current, _) = watch::channel(Arc::new(config));
        Arc::new(Runtime {
            current,
            changing: parking_lot::Mutex::new(()),
            audit,
        })
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
        let _changing = self.changing.lock();
        let mut next = (*self.current()).clone();
        for (name, value) in update {
            let (key, java) = find(name).ok_or_else(|| not_reconfigurable(name))?;
            (key.set)(&mut next, value, java).map_err(|e| Refused(format!("{name}: {e}")))?;
        }
        for name in delete {
            let (key, _) = find(name).ok_or_else(|| not_reconfigurable(name))?;
            (key.reset)(&mut next);
        }
        // Java's `/conf` lists the keys as they were set (a deleted one disappears).
        let deleted: Vec<&str> = delete
            .iter()
            .filter_map(|n| find(n).map(|(k, _)| k.java))
            .collect();
        self.apply(next, "REST", &deleted)
    }

    /// Applies the reconfigurable keys of a re-read config file; returns the other keys whose
    /// change needs a restart.
    fn apply_file(&self, file: &Config, origin: &str) -> Result<Vec<String>, Refused> {
        let _changing = self.changing.lock();
        let running = self.current();
        let mut next = (*running).clone();
        let mut absent = Vec::new();
        for key in &KEYS {
            if (key.differs)(&next, file) {
                copy_key(key, file, &mut next);
            }
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
        self.apply(next, origin, &absent)?;
        Ok(restart)
    }

    /// Validates `next`, brings the components along, and publishes it. `removed` are Java
    /// keys `/conf` no longer lists.
    fn apply(&self, mut next: Config, origin: &str, removed: &[&str]) -> Result<(), Refused> {
        next.validate().map_err(|e| Refused(e.to_string()))?;
        let running = self.current();
        let changed: Vec<&Key> = KEYS
            .iter()
            .filter(|k| (k.differs)(&running, &next))
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
        if changed.iter().any(|k| k.spillway.starts_with("audit.")) {
            self.audit
                .reconfigure(&next.audit)
                .map_err(|e| Refused(format!("audit.rpc_log_path: {e}")))?;
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

fn copy_key(key: &Key, from: &Config, to: &mut Config) {
    match key.spillway {
        "audit.rpc_log" => to.audit.rpc_log = from.audit.rpc_log,
        "audit.rpc_exclude" => to.audit.rpc_exclude = from.audit.rpc_exclude.clone(),
        "metrics.push_interval" => to.metrics.push_interval = from.metrics.push_interval,
        other => tracing::error!(key = other, "no copy rule for a reconfigurable key"),
    }
}

fn not_reconfigurable(name: &str) -> Refused {
    let keys: Vec<&str> = KEYS.iter().map(|k| k.java).collect();
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
            (key.reset)(&mut c);
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

/// Re-reads `path` every `interval` once its modification time moves (Java polls the same
/// way), applying what changed; stops with `stop`.
pub fn spawn_file_watch(
    runtime: Arc<Runtime>,
    path: PathBuf,
    interval: Duration,
    env: fn(&str) -> Option<String>,
    stop: CancellationToken,
    tracker: &TaskTracker,
) {
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
    tokio::fs::metadata(path).await.ok()?.modified().ok()
}

async fn reload(runtime: &Runtime, path: &Path, env: fn(&str) -> Option<String>) {
    let owned = path.to_path_buf();
    let loaded = tokio::task::spawn_blocking(move || Config::load(Some(&owned), &env)).await;
    let file = match loaded {
        Ok(Ok(file)) => file,
        Ok(Err(e)) => {
            tracing::error!(path = %path.display(), error = %e, "the changed config file does not load; nothing reconfigured");
            return;
        }
        Err(e) => {
            tracing::error!(error = %e, "config reload task failed");
            return;
        }
    };
    match runtime.apply_file(&file, "file") {
        Ok(restart) if !restart.is_empty() => tracing::warn!(
            path = %path.display(),
            keys = %restart.join(", "),
            "the config file changed keys that only take effect after a restart"
        ),
        Ok(_) => {}
        Err(e) => tracing::error!(path = %path.display(), error = %e, "config file change refused"),
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
        Runtime::new(config, RpcAudit::off())
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
