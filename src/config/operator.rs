//! The shuffle-server and coordinator pods of the Uniffle Kubernetes operator, run unchanged on
//! Spillway's image.
//!
//! What the operator gives the pod (`deploy/kubernetes/operator/pkg/controller/sync/
//! shuffleserver/shuffleserver.go`, `pkg/controller/constants/constants.go`,
//! `pkg/controller/controller/rss.go` of `apache/incubator-uniffle` master): the env
//! `SERVER_RPC_PORT`, `SERVER_HTTP_PORT`, `RSS_COORDINATOR_QUORUM`, `XMX_SIZE`,
//! `SERVICE_NAME=server`, `NODE_NAME` (the node) and `RSS_IP` (the pod IP), and its ConfigMap's
//! `server.conf` mounted at the CR's `configDir`, into which the operator itself writes
//! `rss.rpc.server.port`, `rss.jetty.http.port`, `rss.coordinator.quorum` and
//! `rss.storage.basePath` (the same values as the env). The Java image
//! (`deploy/kubernetes/docker/`: `start.sh`, `rss-env.sh`, `Dockerfile`, and
//! `bin/start-shuffle-server.sh`, `bin/utils.sh`) then runs the server on
//! `$RSS_CONF_DIR/server.conf` (default `$RSS_HOME/conf`, `/data/rssadmin/rss/conf` in that
//! image, the `configDir` of the operator's examples) with `-Xmx$XMX_SIZE`; the Java server reads
//! `RSS_IP` itself (`RssUtils.getHostIp`) and sizes its buffers from the heap.
//!
//! Spillway does the same, in this order of precedence:
//! - config file: `--config`, else `WORKER_CONFIG_PATH`, else `$RSS_CONF_DIR/server.conf`
//!   (which must exist, as Java's script needs it), else [`OPERATOR_CONF_FILE`] if present;
//! - ports and quorum: the file's keys win, as in Java (the server reads only the file); the env
//!   fills in what the file does not set, so a file without them still gets the operator's
//!   values (the Java server would use its defaults there: a deliberate difference, since the
//!   env is what the operator meant);
//! - `XMX_SIZE`: the memory the `*.ratio` keys of a Java `server.conf` apply to, as the JVM heap
//!   is for Java (`rss.server.buffer.capacity.ratio` 0.6, `rss.server.read.buffer.capacity.ratio`
//!   0.2); explicit capacities and TOML configs are unaffected;
//! - `RSS_IP`: the address registered with the coordinators, over the file's (Java reads only the
//!   env); Spillway's own `WORKER_IP` wins over it. Not an IP literal: start-up fails, as Java's;
//! - `SERVICE_NAME`: `coordinator` runs the coordinator pod (below); any other value (`server`)
//!   runs the shuffle server;
//! - `NODE_NAME`: not read by the Java server either.
//!
//! The coordinator pod (`sync/coordinator/coordinator.go`): env `COORDINATOR_RPC_PORT`,
//! `COORDINATOR_HTTP_PORT`, `XMX_SIZE`, `SERVICE_NAME=coordinator`, `NODE_NAME`, `RSS_IP`, and
//! the ConfigMap's `coordinator.conf` in `configDir` (the operator writes the two ports and
//! `rss.coordinator.exclude.nodes.file.path` into it, the exclude file being a ConfigMap of its
//! own that the operator's decommission flow edits). The image's `start.sh` runs
//! `start-coordinator.sh` on `$RSS_CONF_DIR/coordinator.conf`. Spillway then starts the
//! coordinator-only process (`server::coordinator_process`) with the same precedence as the server:
//! - config file: `--config`, else `WORKER_CONFIG_PATH`, else `$RSS_CONF_DIR/coordinator.conf`,
//!   else [`OPERATOR_COORDINATOR_CONF_FILE`]; it must be a coordinator's config (a Java
//!   coordinator.conf, or TOML with `role = "coordinator"`), else start-up fails naming
//!   `SERVICE_NAME`, rather than run a shuffle server in the coordinator's place;
//! - ports: the file's keys win, the `COORDINATOR_*` env fills in what it does not set; the
//!   server's `SERVER_*` ports and `RSS_COORDINATOR_QUORUM` do not apply;
//! - `RSS_IP`: the coordinator's id (`<ip>-<port>`) and `/api/coordinator/info`'s `serverIp`,
//!   as Java's `RssUtils.getHostIp` reads it;
//! - `XMX_SIZE`: checked, then unused: it sizes the JVM's heap, and a coordinator has no buffers
//!   sized from it (nor does the Java coordinator size anything from it).

use std::path::{Path, PathBuf};

use super::{non_empty_env, Config, ConfigError, Role};

/// The `configDir` the operator mounts `server.conf` at in the Java image (`$RSS_HOME/conf`).
pub const OPERATOR_CONF_DIR: &str = "/data/rssadmin/rss/conf";

/// [`OPERATOR_CONF_DIR`]'s `server.conf`, read when no other config file is named.
pub const OPERATOR_CONF_FILE: &str = "/data/rssadmin/rss/conf/server.conf";

/// [`OPERATOR_CONF_DIR`]'s `coordinator.conf`, read instead with `SERVICE_NAME=coordinator`.
pub const OPERATOR_COORDINATOR_CONF_FILE: &str = "/data/rssadmin/rss/conf/coordinator.conf";

/// The Java scripts' config directory override.
pub const ENV_RSS_CONF_DIR: &str = "RSS_CONF_DIR";
/// The operator's gRPC port.
pub const ENV_SERVER_RPC_PORT: &str = "SERVER_RPC_PORT";
/// The operator's HTTP port.
pub const ENV_SERVER_HTTP_PORT: &str = "SERVER_HTTP_PORT";
/// The operator's coordinator list.
pub const ENV_RSS_COORDINATOR_QUORUM: &str = "RSS_COORDINATOR_QUORUM";
/// The JVM heap the operator gives the Java server.
pub const ENV_XMX_SIZE: &str = "XMX_SIZE";
/// The pod IP (`status.podIP`).
pub const ENV_RSS_IP: &str = "RSS_IP";
/// `server` or `coordinator`: which Uniffle process the image is to run.
pub const ENV_SERVICE_NAME: &str = "SERVICE_NAME";
/// The operator's gRPC port of a coordinator pod.
pub const ENV_COORDINATOR_RPC_PORT: &str = "COORDINATOR_RPC_PORT";
/// The operator's HTTP port of a coordinator pod.
pub const ENV_COORDINATOR_HTTP_PORT: &str = "COORDINATOR_HTTP_PORT";

/// Whether the pod is the operator's coordinator (`SERVICE_NAME=coordinator`).
pub(super) fn is_coordinator_pod(env: &dyn Fn(&str) -> Option<String>) -> bool {
    non_empty_env(env, ENV_SERVICE_NAME).is_some_and(|s| s.trim() == "coordinator")
}

/// The config file to read when neither `--config` nor `WORKER_CONFIG_PATH` names one, with the
/// origin errors name; `exists` is `Path::exists` outside tests.
pub(super) fn default_config_file(
    env: &dyn Fn(&str) -> Option<String>,
    exists: &dyn Fn(&Path) -> bool,
) -> Option<(&'static str, PathBuf)> {
    let (name, file) = if is_coordinator_pod(env) {
        ("coordinator.conf", OPERATOR_COORDINATOR_CONF_FILE)
    } else {
        ("server.conf", OPERATOR_CONF_FILE)
    };
    if let Some(dir) = non_empty_env(env, ENV_RSS_CONF_DIR) {
        return Some((ENV_RSS_CONF_DIR, Path::new(&dir).join(name)));
    }
    let file = Path::new(file);
    exists(file).then(|| ("the operator's configDir", file.to_path_buf()))
}

/// `XMX_SIZE` in bytes, read as the JVM reads `-Xmx`: digits with an optional `k`, `m`, `g` or
/// `t` (any case, binary units); `None` when unset.
pub(super) fn heap_size(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<u64>, ConfigError> {
    let Some(raw) = non_empty_env(env, ENV_XMX_SIZE) else {
        return Ok(None);
    };
    let value = raw.trim();
    let bad = || {
        ConfigError::new(
            ENV_XMX_SIZE,
            format!("{value:?} is not a JVM heap size (digits with k, m, g or t)"),
        )
    };
    let (digits, shift) = match value.as_bytes().last().map(u8::to_ascii_lowercase) {
        Some(b'k') => (&value[..value.len() - 1], 10),
        Some(b'm') => (&value[..value.len() - 1], 20),
        Some(b'g') => (&value[..value.len() - 1], 30),
        Some(b't') => (&value[..value.len() - 1], 40),
        _ => (value, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(1 << shift).ok_or_else(bad)?;
    if bytes == 0 {
        return Err(ConfigError::new(ENV_XMX_SIZE, "0 is not a heap size"));
    }
    Ok(Some(bytes))
}

/// Which of the keys the operator's env stands for the config file sets itself.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileSets {
    /// `rss.rpc.server.port` / `grpc_port`.
    pub grpc_port: bool,
    /// `rss.jetty.http.port` / `metrics.http_port`.
    pub http_port: bool,
    /// `rss.coordinator.quorum` / `coordinator_quorum`.
    pub quorum: bool,
}

impl FileSets {
    /// Reads them off the file's text, in whichever format it is (`java` as detected).
    pub(super) fn of(text: &str, java: bool) -> FileSets {
        if java {
            let props = super::java::parse_properties(text).unwrap_or_default();
            let has = |k: &str| props.iter().any(|p| p.key.eq_ignore_ascii_case(k));
            FileSets {
                grpc_port: has("rss.rpc.server.port"),
                http_port: has("rss.jetty.http.port"),
                quorum: has("rss.coordinator.quorum"),
            }
        } else {
            let table: toml::Table = toml::from_str(text).unwrap_or_default();
            FileSets {
                grpc_port: table.contains_key("grpc_port"),
                http_port: table
                    .get("metrics")
                    .and_then(|m| m.as_table())
                    .is_some_and(|m| m.contains_key("http_port")),
                quorum: table.contains_key("coordinator_quorum"),
            }
        }
    }
}

/// Applies the operator's env to `config` (see the module doc for the precedence).
pub(super) fn apply_env(
    config: &mut Config,
    env: &dyn Fn(&str) -> Option<String>,
    file: FileSets,
) -> Result<(), ConfigError> {
    // The name is generic enough that unrelated environments set it; Java's start.sh acts on
    // `server` and `coordinator` alone, and only `coordinator` changes what runs.
    let coordinator = is_coordinator_pod(env);
    if coordinator && config.role != Role::Coordinator {
        return Err(ConfigError::new(
            ENV_SERVICE_NAME,
            "\"coordinator\" asks for the Uniffle coordinator, but the config file is a shuffle \
             server's: give the pod its coordinator.conf (or a TOML config with role = \
             \"coordinator\")",
        ));
    }
    let (rpc_env, http_env) = if coordinator {
        (ENV_COORDINATOR_RPC_PORT, ENV_COORDINATOR_HTTP_PORT)
    } else {
        (ENV_SERVER_RPC_PORT, ENV_SERVER_HTTP_PORT)
    };
    let port = |name: &'static str| -> Result<Option<u16>, ConfigError> {
        non_empty_env(env, name)
            .map(|v| {
                v.trim()
                    .parse::<u16>()
                    .map_err(|_| ConfigError::new(name, format!("{v:?} is not a port (0..=65535)")))
            })
            .transpose()
    };
    if let Some(p) = port(rpc_env)?.filter(|_| !file.grpc_port) {
        config.grpc_port = p;
    }
    if let Some(p) = port(http_env)?.filter(|_| !file.http_port) {
        config.metrics.http_port = p;
    }
    let quorum = non_empty_env(env, ENV_RSS_COORDINATOR_QUORUM).filter(|_| !coordinator);
    if let Some(q) = quorum.filter(|_| !file.quorum) {
        config.coordinator_quorum = q
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
    }
    if let Some(ip) = non_empty_env(env, ENV_RSS_IP) {
        let ip = ip.trim();
        if ip.parse::<std::net::IpAddr>().is_err() {
            return Err(ConfigError::new(
                ENV_RSS_IP,
                format!("{ip:?} is not an IP address"),
            ));
        }
        config.worker_ip = Some(ip.to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::map_env as env_of;

    const OPERATOR_ENV: &[(&str, &str)] = &[
        ("SERVER_RPC_PORT", "19997"),
        ("SERVER_HTTP_PORT", "19996"),
        (
            "RSS_COORDINATOR_QUORUM",
            "rss-coordinator-0:19997, rss-coordinator-1:19997",
        ),
        ("XMX_SIZE", "800M"),
        ("SERVICE_NAME", "server"),
        ("NODE_NAME", "node-7"),
        ("RSS_IP", "10.1.2.3"),
    ];

    #[test]
    fn the_config_file_is_rss_conf_dir_then_the_operator_mount() {
        let none = env_of(&[]);
        let mounted = |p: &Path| p == Path::new(OPERATOR_CONF_FILE);
        assert_eq!(
            default_config_file(&none, &mounted),
            Some((
                "the operator's configDir",
                PathBuf::from(OPERATOR_CONF_FILE)
            ))
        );
        assert_eq!(default_config_file(&none, &|_| false), None);
        let dir = env_of(&[("RSS_CONF_DIR", "/etc/rss")]);
        assert_eq!(
            default_config_file(&dir, &mounted),
            Some(("RSS_CONF_DIR", PathBuf::from("/etc/rss/server.conf")))
        );
    }

    #[test]
    fn xmx_size_reads_as_the_jvm_reads_xmx() {
        let h = |v: &str| heap_size(&env_of(&[("XMX_SIZE", v)]));
        assert_eq!(h("800M").unwrap(), Some(800 << 20));
        assert_eq!(h("10g").unwrap(), Some(10 << 30));
        assert_eq!(h("2T").unwrap(), Some(2 << 40));
        assert_eq!(h("512k").unwrap(), Some(512 << 10));
        assert_eq!(h("1048576").unwrap(), Some(1 << 20));
        assert_eq!(heap_size(&env_of(&[])).unwrap(), None);
        for bad in ["8gb", "1.5g", "g", "-1g", "0"] {
            let e = h(bad).unwrap_err();
            assert_eq!(e.key, "XMX_SIZE", "{bad}");
        }
    }

    #[test]
    fn env_fills_in_what_the_file_does_not_set() {
        let mut c = Config::default();
        apply_env(&mut c, &env_of(OPERATOR_ENV), FileSets::default()).unwrap();
        assert_eq!(c.grpc_port, 19997);
        assert_eq!(c.metrics.http_port, 19996);
        assert_eq!(
            c.coordinator_quorum,
            ["rss-coordinator-0:19997", "rss-coordinator-1:19997"]
        );
        assert_eq!(c.worker_ip.as_deref(), Some("10.1.2.3"));
    }

    #[test]
    fn the_files_ports_and_quorum_win_over_the_env() {
        let text = "rss.rpc.server.port 20001\nrss.jetty.http.port 20002\n\
                    rss.coordinator.quorum c:1\n";
        let sets = FileSets::of(text, true);
        assert_eq!(
            sets,
            FileSets {
                grpc_port: true,
                http_port: true,
                quorum: true
            }
        );
        let mut c = Config {
            grpc_port: 20001,
            coordinator_quorum: vec!["c:1".into()],
            ..Config::default()
        };
        c.metrics.http_port = 20002;
        apply_env(&mut c, &env_of(OPERATOR_ENV), sets).unwrap();
        assert_eq!(c.grpc_port, 20001);
        assert_eq!(c.metrics.http_port, 20002);
        assert_eq!(c.coordinator_quorum, ["c:1"]);
        // RSS_IP has no file key in Java: the env always applies.
        assert_eq!(c.worker_ip.as_deref(), Some("10.1.2.3"));

        let toml = "grpc_port = 20001\n[metrics]\nhttp_port = 20002\n";
        assert_eq!(
            FileSets::of(toml, false),
            FileSets {
                grpc_port: true,
                http_port: true,
                quorum: false
            }
        );
    }

    #[test]
    fn xmx_size_is_what_a_java_files_ratios_apply_to() {
        let dir = tempfile::TempDir::new().unwrap();
        let data = dir.path().join("rssdata");
        std::fs::write(
            dir.path().join("server.conf"),
            format!(
                "rss.storage.basePath {}\nrss.server.read.buffer.capacity.ratio 0.1\n",
                data.display()
            ),
        )
        .unwrap();
        let conf_dir = dir.path().to_string_lossy().into_owned();
        let env = env_of(&[("RSS_CONF_DIR", &conf_dir), ("XMX_SIZE", "1000m")]);
        let c = Config::load(None, &env).unwrap();
        // Java: 0.6 (its default) and 0.1 (the file's) of the heap.
        assert_eq!(c.memory_store.capacity.as_u64(), 600 << 20);
        assert_eq!(c.memory_store.read_capacity.as_u64(), 100 << 20);

        // An explicit capacity is the operator's, whatever the heap.
        std::fs::write(
            dir.path().join("server.conf"),
            format!(
                "rss.storage.basePath {}\nrss.server.buffer.capacity 300m\n",
                data.display()
            ),
        )
        .unwrap();
        let c = Config::load(None, &env).unwrap();
        assert_eq!(c.memory_store.capacity.as_u64(), 300 << 20);
        assert_eq!(c.memory_store.read_capacity.as_u64(), 200 << 20);

        // RSS_CONF_DIR names a directory whose server.conf must be there.
        let missing = env_of(&[("RSS_CONF_DIR", "/nonexistent/conf")]);
        assert_eq!(
            Config::load(None, &missing).unwrap_err().key,
            "RSS_CONF_DIR"
        );
    }

    #[test]
    fn the_coordinator_pod_reads_its_own_conf_and_ports_and_no_quorum() {
        let pod = [("SERVICE_NAME", "coordinator")];
        let mounted = |p: &Path| p == Path::new(OPERATOR_COORDINATOR_CONF_FILE);
        assert_eq!(
            default_config_file(&env_of(&pod), &mounted),
            Some((
                "the operator's configDir",
                PathBuf::from(OPERATOR_COORDINATOR_CONF_FILE)
            ))
        );
        let dir = env_of(&[
            ("SERVICE_NAME", "coordinator"),
            ("RSS_CONF_DIR", "/etc/rss"),
        ]);
        assert_eq!(
            default_config_file(&dir, &|_| false),
            Some(("RSS_CONF_DIR", PathBuf::from("/etc/rss/coordinator.conf")))
        );

        let env = env_of(&[
            ("SERVICE_NAME", "coordinator"),
            ("COORDINATOR_RPC_PORT", "19997"),
            ("COORDINATOR_HTTP_PORT", "19996"),
            ("SERVER_RPC_PORT", "20001"),
            ("RSS_COORDINATOR_QUORUM", "elsewhere:19999"),
            ("XMX_SIZE", "800M"),
            ("RSS_IP", "10.1.2.3"),
        ]);
        let mut c = Config {
            role: Role::Coordinator,
            ..Config::default()
        };
        apply_env(&mut c, &env, FileSets::default()).unwrap();
        assert_eq!((c.grpc_port, c.metrics.http_port), (19997, 19996));
        assert!(c.coordinator_quorum.is_empty());
        assert_eq!(c.worker_ip.as_deref(), Some("10.1.2.3"));

        let bad = env_of(&[
            ("SERVICE_NAME", "coordinator"),
            ("COORDINATOR_HTTP_PORT", "x"),
        ]);
        let mut c = Config {
            role: Role::Coordinator,
            ..Config::default()
        };
        let e = apply_env(&mut c, &bad, FileSets::default()).unwrap_err();
        assert_eq!(e.key, "COORDINATOR_HTTP_PORT");
    }

    #[test]
    fn bad_values_name_their_variable() {
        let cases: &[(&str, &str)] = &[
            ("SERVER_RPC_PORT", "70000"),
            ("SERVER_HTTP_PORT", "http"),
            ("RSS_IP", "pod-7.local"),
            // A shuffle server's config (the default) in the coordinator's pod.
            ("SERVICE_NAME", "coordinator"),
        ];
        for (name, value) in cases {
            let mut c = Config::default();
            let e = apply_env(&mut c, &env_of(&[(name, value)]), FileSets::default()).unwrap_err();
            assert_eq!(e.key, *name, "{e}");
        }
    }
}
