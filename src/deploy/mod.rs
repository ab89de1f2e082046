//! `spillway deploy dockerfile|kubernetes|systemd`: deployment files rendered from the effective
//! config, so the ports, data paths, memory and stop budgets they carry cannot drift from the
//! config the server runs with. The repository has no place for such files at its top level,
//! and hand-kept copies would go stale with the first config change.
//!
//! A coordinator-only config (`role = "coordinator"`, a Java `coordinator.conf`) renders a
//! coordinator's deployment instead: no data paths, memory or decommission hook (it holds no
//! shuffle data), its two ports, a stop budget from its own shutdown steps, and in Kubernetes
//! one Deployment and one Service per coordinator, as the Uniffle operator deploys them
//! (`sync/coordinator/coordinator.go`), so that the servers' and clients' quorum can name every
//! coordinator.
//!
//! The templates (`templates/*.in`) are compiled into the binary and filled with minijinja in
//! strict mode: a name the template uses and the context lacks fails the render instead of
//! printing an empty string into a unit file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde::Serialize;
use spillway::config::{ByteSize, Config, Role};

const DOCKERFILE: &str = include_str!("templates/Dockerfile.in");
const KUBERNETES: &str = include_str!("templates/kubernetes.yaml.in");
const KUBERNETES_COORDINATOR: &str = include_str!("templates/kubernetes-coordinator.yaml.in");
const SYSTEMD: &str = include_str!("templates/spillway.service.in");
/// The builder image follows the pinned toolchain, read at compile time so they cannot differ.
const RUST_TOOLCHAIN: &str = include_str!("../../rust-toolchain.toml");

/// Where containers find the config: the image bakes it at the file the server reads when
/// nothing else names one, and the pod's `WORKER_CONFIG_PATH` points at its ConfigMap there.
const CONFIG_DIR: &str = "/etc/spillway";
const CONFIG_FILE: &str = spillway::config::DEFAULT_CONFIG_FILE;
/// A fixed non-root uid/gid, so `fsGroup` and volume ownership agree between image and pod.
const UID: u32 = 10001;
/// How long the Kubernetes preStop hook waits for a decommissioned server's apps to finish.
const DECOMMISSION_WAIT_SECS: u64 = 120;
/// Added to drain + spill in every stop budget: the journal flush and process exit come after
/// the spill, and a SIGKILL at the last second would lose what the spill just wrote.
const STOP_MARGIN_SECS: u64 = 30;
/// Memory beyond the configured caps: runtime, partition indexes, block-id bitmaps, connection
/// buffers (about 30 KiB per HTTP/2 connection, docs/security.md "Limits").
const MEMORY_OVERHEAD_MIB: u64 = 512;
/// Limit above the request, for allocator fragmentation under churn.
const MEMORY_HEADROOM_PERCENT: u64 = 25;
/// Per data path; no config key says how large the disks are.
const DATA_CLAIM_SIZE: &str = "100Gi";
const META_CLAIM_SIZE: &str = "1Gi";
const AUDIT_CLAIM_SIZE: &str = "10Gi";

/// Coordinators in the Kubernetes file: the Uniffle operator's default `spec.coordinator.count`,
/// so one can restart or move while the other assigns, and clients keep a live quorum member.
const COORDINATORS: usize = 2;
/// The Kubernetes names of the coordinators: the Deployment and Service of coordinator `i` are
/// `<prefix>-<i>`, as the operator names them `rss-coordinator-<name>-<i>`.
const COORDINATOR_PREFIX: &str = "spillway-coordinator";
/// After the coordinator's two bounded shutdown steps, `main` gives the runtime this long to
/// finish blocking calls.
const RUNTIME_SHUTDOWN_SECS: u64 = 5;
/// A coordinator flushes nothing but its audit log at the end: a small margin covers it.
const COORDINATOR_STOP_MARGIN_SECS: u64 = 5;
/// A coordinator keeps a few KiB per server and per app plus an hour of dashboard samples; no
/// store, so no config key sizes it. 256 MiB is tens of thousands of apps with room to spare.
const COORDINATOR_MEMORY_REQUEST_MIB: u64 = 256;
const COORDINATOR_MEMORY_LIMIT_MIB: u64 = 512;
/// Its descriptors: one gRPC connection per shuffle server and per app driver, the HTTP
/// clients, the audit log and the operator files it polls. The coordinator-only process does
/// not apply `limits.max_connections`, so the limit is a fixed, generous one.
const COORDINATOR_NOFILE: u64 = 65536;

/// Which deployment file to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// A multi-stage Dockerfile; build it with the repository root as the context (with
    /// `--prebuilt`: one stage that packages a binary built elsewhere).
    Dockerfile,
    /// ConfigMap, headless Service, PodDisruptionBudget and StatefulSet in one YAML stream.
    Kubernetes,
    /// A systemd unit for bare metal.
    Systemd,
}

/// A directory the server writes to, as the templates name and mount it.
#[derive(Serialize)]
struct Mount {
    /// Volume / claim name (Kubernetes DNS label).
    name: String,
    path: String,
    storage: &'static str,
}

#[derive(Serialize)]
struct Context {
    version: &'static str,
    rust_version: String,
    source: String,
    config_dir: &'static str,
    config_file: String,
    operator_conf_dir: &'static str,
    config_toml: String,
    config_lines: Vec<String>,
    config_crc32: String,
    grpc_port: u16,
    netty_port: Option<u16>,
    http_port: u16,
    probe_host: String,
    writable: Vec<Mount>,
    writable_joined: String,
    meta: bool,
    uid: u32,
    capacity: String,
    read_capacity: String,
    receive_budget: String,
    overhead_mib: u64,
    headroom_percent: u64,
    memory_request: String,
    memory_limit: String,
    drain_secs: u64,
    spill_secs: u64,
    stop_margin_secs: u64,
    stop_timeout_secs: u64,
    decommission_wait_secs: u64,
    decommission_polls: u64,
    grace_secs: u64,
    max_connections: usize,
    nofile: u64,
    replicas: u32,
    standalone_coordinator: bool,
    /// A coordinator-only process (`role = "coordinator"`).
    coordinator: bool,
    /// The coordinators' Deployment/Service names (Kubernetes).
    coordinators: Vec<String>,
    /// What the servers' `coordinator_quorum` and the clients' `spark.rss.coordinator.quorum`
    /// list for those coordinators (Service names, same namespace).
    quorum: String,
    https_port: Option<u16>,
    /// Files the coordinator reads (operator files, TLS material): to mount in containers.
    read_files: Vec<String>,
    cpu_request: &'static str,
    protect_home: &'static str,
    private_tmp: bool,
    low_ports: bool,
    exe: String,
    prebuilt: bool,
}

/// `spillway deploy KIND`: loads the config as a start-up would ([`Config::source`], else
/// defaults; the env applied; validated) and prints the file to stdout.
pub fn run(kind: Kind, config_path: Option<&Path>, prebuilt: bool) -> Result<()> {
    if prebuilt && kind != Kind::Dockerfile {
        bail!("--prebuilt applies to `deploy dockerfile` only");
    }
    let env = |key: &str| std::env::var(key).ok();
    let config = Config::load(config_path, &env)?;
    let source = Config::source(config_path, &env).map(|(_, path)| path);
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("locating the spillway binary")?;
    let text = render(kind, &config, source.as_deref(), &exe, prebuilt)?;
    for note in notes(&config) {
        eprintln!("note: {note}");
    }
    print!("{text}");
    Ok(())
}

/// Renders `kind` for `config`. `config_path` is the file the config came from (none: built-in
/// defaults); the systemd unit starts the server with it, and `exe` is the binary it starts.
/// `prebuilt` drops the Dockerfile's build stage: the image packages the `spillway` binary found
/// in the build context, for pipelines that build once and package several times.
pub fn render(
    kind: Kind,
    config: &Config,
    config_path: Option<&Path>,
    exe: &Path,
    prebuilt: bool,
) -> Result<String> {
    let mut context = context(kind, config, config_path, exe)?;
    context.prebuilt = prebuilt;
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    // Block tags on lines of their own leave no blank lines behind: a blank line inside a
    // Dockerfile continuation or a YAML list is at best a warning.
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .context("template syntax")?,
    );
    let (name, source) = match kind {
        Kind::Dockerfile => ("Dockerfile", DOCKERFILE),
        Kind::Kubernetes if context.coordinator => ("kubernetes.yaml", KUBERNETES_COORDINATOR),
        Kind::Kubernetes => ("kubernetes.yaml", KUBERNETES),
        Kind::Systemd => ("spillway.service", SYSTEMD),
    };
    env.add_template(name, source)
        .with_context(|| format!("template {name}"))?;
    env.get_template(name)?
        .render(minijinja::value::Serde(&context))
        .with_context(|| format!("rendering {name}"))
}

/// Things worth saying on stderr that do not stop the render.
pub fn notes(config: &Config) -> Vec<String> {
    let mut notes = Vec::new();
    if config.metrics.admin_token.is_some() {
        notes.push(
            "metrics.admin_token is not copied into deployment files: pass it as env \
             SPILLWAY_ADMIN_TOKEN (Kubernetes: secret spillway-admin, key token; systemd: \
             /etc/default/spillway)"
                .to_owned(),
        );
    }
    if config.worker_ip.is_some() {
        notes.push(
            "worker_ip is left out of containers' config: each one registers the address in \
             env WORKER_IP"
                .to_owned(),
        );
    }
    if config.role == Role::Coordinator {
        for (key, path) in coordinator_read_files(config) {
            notes.push(format!(
                "{key} {} is read by the coordinator: in a container, mount it there",
                path.display()
            ));
        }
    }
    notes
}

fn context(kind: Kind, config: &Config, config_path: Option<&Path>, exe: &Path) -> Result<Context> {
    let container = kind != Kind::Systemd;
    let coordinator = config.role == Role::Coordinator;
    let grpc_port = fixed_port("grpc_port", config.grpc_port)?;
    let http_port = fixed_port("metrics.http_port", config.metrics.http_port)?;
    // A coordinator-only process has no Netty plane, whatever the key says.
    let netty_port = match u16::try_from(config.netty_port) {
        Err(_) => None,
        Ok(_) if coordinator => None,
        Ok(port) => Some(fixed_port("netty_port", port)?),
    };
    // Jetty's second connector (`rss.jetty.https.port`), published beside the HTTP port.
    let https_port = match &config.metrics.https {
        Some(https) => Some(fixed_port("metrics.https.port", https.port)?),
        None => None,
    };
    let bind: std::net::IpAddr = config
        .bind_ip
        .parse()
        .with_context(|| format!("bind_ip {:?} is not an IP address", config.bind_ip))?;
    if container && bind.is_loopback() {
        bail!(
            "bind_ip {} would keep the server private to its container; use 0.0.0.0",
            config.bind_ip
        );
    }
    if kind == Kind::Kubernetes && !bind.is_unspecified() {
        bail!(
            "bind_ip {} is not the pod's address; use 0.0.0.0 (or ::) in Kubernetes",
            config.bind_ip
        );
    }
    let probe_host = if bind.is_unspecified() {
        "127.0.0.1".to_owned()
    } else if bind.is_ipv6() {
        format!("[{bind}]")
    } else {
        bind.to_string()
    };

    let mut writable = Vec::new();
    // The coordinator-only process writes nothing of the store's: no data paths, no journal.
    if !coordinator && config.store_type.uses_localfile() {
        for (i, path) in config.localfile_store.data_paths.iter().enumerate() {
            let key = format!("localfile_store.data_paths[{i}]");
            writable.push(Mount {
                name: format!("data-{i}"),
                path: plain_path(&key, path)?,
                storage: DATA_CLAIM_SIZE,
            });
        }
    }
    let mut meta = false;
    if let (false, true, Some(dir)) = (coordinator, config.recovery.enabled, &config.recovery.dir) {
        let covered = config.store_type.uses_localfile()
            && config
                .localfile_store
                .data_paths
                .iter()
                .any(|data| dir.starts_with(data));
        if !covered {
            meta = true;
            writable.push(Mount {
                name: "meta".to_owned(),
                path: plain_path("recovery.dir", dir)?,
                storage: META_CLAIM_SIZE,
            });
        }
    }
    // The audit logs' directories: the rendered unit and container leave nothing else
    // writable, and an audit file that cannot be opened stops start-up.
    let audit_logs = [
        (
            !coordinator && config.audit.rpc_log,
            &config.audit.rpc_log_path,
            "audit.rpc_log_path",
            "audit-log",
        ),
        (
            !coordinator && config.audit.storage_log,
            &config.audit.storage_log_path,
            "audit.storage_log_path",
            "storage-audit-log",
        ),
        // Written whenever the process serves a coordinator: embedded, or coordinator-only,
        // which opens it whatever `coordinator.enabled` says.
        (
            (coordinator || config.coordinator.enabled) && config.audit.coordinator_rpc_log,
            &config.audit.coordinator_rpc_log_path,
            "audit.coordinator_rpc_log_path",
            "coordinator-audit-log",
        ),
    ];
    for (on, file, key, name) in audit_logs {
        if let Some(dir) = file.parent().filter(|_| on) {
            let covered = writable.iter().any(|m| dir.starts_with(&m.path));
            if !covered {
                writable.push(Mount {
                    name: name.to_owned(),
                    path: plain_path(key, dir)?,
                    storage: AUDIT_CLAIM_SIZE,
                });
            }
        }
    }
    let writable_joined = writable
        .iter()
        .map(|m| m.path.as_str())
        .collect::<Vec<_>>()
        .join(" ");

    let config_file = match kind {
        Kind::Systemd => match config_path {
            Some(path) => plain_path("--config", &absolute(path)?)?,
            None => CONFIG_FILE.to_owned(),
        },
        _ => CONFIG_FILE.to_owned(),
    };
    let source = match config_path {
        Some(path) => path.display().to_string(),
        None => "the built-in defaults".to_owned(),
    };
    let config_toml = container_config(config)?;

    let caps = config.memory_store.capacity.as_u64()
        + config.memory_store.read_capacity.as_u64()
        + config.limits.receive_budget.as_u64();
    let request_mib = caps.div_ceil(ByteSize::MIB) + MEMORY_OVERHEAD_MIB;
    let limit_mib = (request_mib * (100 + MEMORY_HEADROOM_PERCENT)).div_ceil(100);

    let (request_mib, limit_mib) = if coordinator {
        (COORDINATOR_MEMORY_REQUEST_MIB, COORDINATOR_MEMORY_LIMIT_MIB)
    } else {
        (request_mib, limit_mib)
    };

    let drain_secs = secs(config.shutdown.drain_timeout);
    let spill_secs = secs(config.shutdown.spill_timeout);
    // A coordinator neither drains nor spills: its stop is its own two bounded steps.
    let stop_timeout_secs = if coordinator {
        2 * secs(spillway::server::coordinator_process::STEP_BUDGET)
            + RUNTIME_SHUTDOWN_SECS
            + COORDINATOR_STOP_MARGIN_SECS
    } else {
        drain_secs + spill_secs + STOP_MARGIN_SECS
    };
    let max_connections = config.limits.max_connections;
    let read_files = if coordinator {
        coordinator_read_files(config)
            .into_iter()
            .map(|(key, path)| plain_path(key, path))
            .collect::<Result<Vec<_>>>()?
    } else {
        Vec::new()
    };
    // The paths the service must see as they are: what it writes and reads, and its config.
    let uses_under = |prefixes: &[&str]| {
        writable
            .iter()
            .map(|m| m.path.as_str())
            .chain(read_files.iter().map(String::as_str))
            .chain(std::iter::once(config_file.as_str()))
            .any(|p| {
                prefixes
                    .iter()
                    .any(|prefix| Path::new(p).starts_with(prefix))
            })
    };
    let protect_home = if uses_under(&["/home", "/root", "/run/user"]) {
        "read-only"
    } else {
        "yes"
    };
    let private_tmp = !uses_under(&["/tmp", "/var/tmp"]);
    let standalone_coordinator =
        !coordinator && config.coordinator.enabled && config.coordinator_quorum.is_empty();
    let coordinators: Vec<String> = (0..COORDINATORS)
        .map(|i| format!("{COORDINATOR_PREFIX}-{i}"))
        .collect();
    let quorum = coordinators
        .iter()
        .map(|name| format!("{name}:{grpc_port}"))
        .collect::<Vec<_>>()
        .join(",");

    Ok(Context {
        version: env!("CARGO_PKG_VERSION"),
        rust_version: toolchain_channel()?,
        source,
        config_dir: CONFIG_DIR,
        config_file,
        operator_conf_dir: spillway::config::operator::OPERATOR_CONF_DIR,
        config_lines: config_toml.lines().map(shell_quote).collect(),
        config_crc32: format!("{:08x}", crc32fast::hash(config_toml.as_bytes())),
        config_toml,
        grpc_port,
        netty_port,
        http_port,
        probe_host,
        writable,
        writable_joined,
        meta,
        uid: UID,
        capacity: config.memory_store.capacity.to_string(),
        read_capacity: config.memory_store.read_capacity.to_string(),
        receive_budget: config.limits.receive_budget.to_string(),
        overhead_mib: MEMORY_OVERHEAD_MIB,
        headroom_percent: MEMORY_HEADROOM_PERCENT,
        memory_request: format!("{request_mib}Mi"),
        memory_limit: format!("{limit_mib}Mi"),
        drain_secs,
        spill_secs,
        stop_margin_secs: STOP_MARGIN_SECS,
        stop_timeout_secs,
        decommission_wait_secs: DECOMMISSION_WAIT_SECS,
        decommission_polls: DECOMMISSION_WAIT_SECS / 2,
        grace_secs: if coordinator {
            stop_timeout_secs
        } else {
            DECOMMISSION_WAIT_SECS + stop_timeout_secs
        },
        max_connections,
        nofile: if coordinator {
            COORDINATOR_NOFILE
        } else {
            2 * max_connections as u64 + 4096
        },
        replicas: match (coordinator, standalone_coordinator) {
            (true, _) => COORDINATORS as u32,
            (false, true) => 1,
            (false, false) => 3,
        },
        standalone_coordinator,
        coordinator,
        coordinators,
        quorum,
        https_port,
        read_files,
        cpu_request: if coordinator { "500m" } else { "1" },
        protect_home,
        private_tmp,
        low_ports: [Some(grpc_port), netty_port, Some(http_port), https_port]
            .into_iter()
            .flatten()
            .any(|port| port < 1024),
        exe: plain_path("the spillway binary", exe)?,
        prebuilt: false,
    })
}

/// The config as containers get it: every default written out, so the file shows what runs;
/// without `worker_ip`, which differs per pod and comes from `WORKER_IP`; `admin_token` is never
/// serialized.
fn container_config(config: &Config) -> Result<String> {
    let mut config = config.clone();
    config.worker_ip = None;
    toml::to_string(&config).context("serializing the config")
}

/// The files a coordinator reads, with their keys: a container needs them mounted (a missing
/// client-conf or candidates file stops start-up, a missing exclude or quota file leaves the
/// list empty) and a sandbox must not hide them.
fn coordinator_read_files(config: &Config) -> Vec<(&'static str, &Path)> {
    let c = &config.coordinator;
    let mut files = vec![
        (
            "coordinator.exclude_nodes_file_path",
            &c.exclude_nodes_file_path,
        ),
        (
            "coordinator.access_candidates_path",
            &c.access_candidates_path,
        ),
        ("coordinator.quota_path", &c.quota_path),
    ];
    if c.dynamic_client_conf_enabled {
        files.push((
            "coordinator.dynamic_client_conf_path",
            &c.dynamic_client_conf_path,
        ));
    }
    if let Some(https) = &config.metrics.https {
        files.extend([
            ("metrics.https.cert_path", &https.cert_path),
            ("metrics.https.key_path", &https.key_path),
            ("metrics.https.keystore_path", &https.keystore_path),
        ]);
    }
    files
        .into_iter()
        .filter_map(|(key, path)| path.as_deref().map(|p| (key, p)))
        .collect()
}

/// Port 0 means "any free port", which a Service, EXPOSE or firewall rule cannot name.
fn fixed_port(key: &str, port: u16) -> Result<u16> {
    if port == 0 {
        bail!("{key} is 0 (a free port chosen at start-up); deployment files need a fixed port");
    }
    Ok(port)
}

/// Paths go unquoted into shell lines, YAML, VOLUME and systemd directives; keeping them to a
/// plain character set is simpler and safer than quoting for four languages.
fn plain_path(key: &str, path: &Path) -> Result<String> {
    let text = path
        .to_str()
        .with_context(|| format!("{key}: {} is not UTF-8", path.display()))?;
    if !path.is_absolute() {
        bail!("{key}: {text:?} must be an absolute path in deployment files");
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+@=,".contains(c);
    if let Some(bad) = text.chars().find(|&c| !plain(c)) {
        bail!("{key}: {text:?} contains {bad:?}; deployment files take letters, digits and / . _ - + @ = , only");
    }
    match text.trim_end_matches('/') {
        "" => Ok("/".to_owned()),
        trimmed => Ok(trimmed.to_owned()),
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))
}

/// Whole seconds, rounded up: a budget must never come out shorter than configured.
fn secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// One POSIX-shell word holding `line` literally.
fn shell_quote(line: &str) -> String {
    format!("'{}'", line.replace('\'', r"'\''"))
}

fn toolchain_channel() -> Result<String> {
    #[derive(serde::Deserialize)]
    struct File {
        toolchain: Toolchain,
    }
    #[derive(serde::Deserialize)]
    struct Toolchain {
        channel: String,
    }
    let file: File = toml::from_str(RUST_TOOLCHAIN).context("parsing rust-toolchain.toml")?;
    Ok(file.toolchain.channel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting_keeps_quotes() {
        assert_eq!(shell_quote("a = 'b'"), r"'a = '\''b'\'''");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(secs(Duration::from_millis(1500)), 2);
        assert_eq!(secs(Duration::from_secs(30)), 30);
        assert_eq!(secs(Duration::ZERO), 0);
    }

    #[test]
    fn paths_must_be_absolute_and_plain() {
        assert_eq!(plain_path("k", Path::new("/data/1/")).unwrap(), "/data/1");
        assert!(plain_path("k", Path::new("data")).is_err());
        assert!(plain_path("k", Path::new("/data 1")).is_err());
        assert!(plain_path("k", Path::new("/data$x")).is_err());
    }

    #[test]
    fn toolchain_is_pinned() {
        let channel = toolchain_channel().unwrap();
        assert!(
            channel.chars().next().unwrap().is_ascii_digit(),
            "{channel}"
        );
    }

    #[test]
    fn every_kind_renders_the_defaults() {
        for (kind, expected) in [
            (Kind::Dockerfile, "EXPOSE 19999 17000 19998"),
            (Kind::Kubernetes, "terminationGracePeriodSeconds: 240"),
            (Kind::Systemd, "TimeoutStopSec=120"),
        ] {
            let exe = Path::new("/usr/bin/spillway");
            let out = render(kind, &Config::default(), None, exe, false).unwrap();
            assert!(out.contains(expected), "{kind:?}:\n{out}");
        }
    }

    #[test]
    fn a_coordinator_renders_without_the_servers_parts() {
        let exe = Path::new("/usr/bin/spillway");
        // Netty 0 would be refused for a server; a coordinator has no Netty plane.
        let config = Config {
            role: Role::Coordinator,
            netty_port: 0,
            ..Config::default()
        };
        for (kind, expected, absent) in [
            (Kind::Dockerfile, "EXPOSE 19999 19998\n", ":19998/health"),
            (Kind::Kubernetes, "kind: Deployment", "StatefulSet"),
            (Kind::Systemd, "TimeoutStopSec=30\n", "/tmp/spillway/data"),
        ] {
            let out = render(kind, &config, None, exe, false).unwrap();
            assert!(out.contains(expected), "{kind:?}:\n{out}");
            assert!(!out.contains(absent), "{kind:?}:\n{out}");
        }
    }

    /// A server with `[metrics.https]` publishes Jetty's second connector beside the HTTP port,
    /// and a free (0) HTTPS port is refused as the others are.
    #[test]
    fn a_servers_https_port_is_published() {
        let exe = Path::new("/usr/bin/spillway");
        let mut config = Config::default();
        config.metrics.https = Some(spillway::config::HttpsConfig {
            port: 19443,
            cert_path: Some("/etc/spillway/tls/cert.pem".into()),
            key_path: Some("/etc/spillway/tls/key.pem".into()),
            keystore_path: None,
            keystore_password: None,
            key_password: None,
        });
        let docker = render(Kind::Dockerfile, &config, None, exe, false).unwrap();
        assert!(
            docker.contains("EXPOSE 19999 17000 19998 19443\n"),
            "{docker}"
        );
        let k8s = render(Kind::Kubernetes, &config, None, exe, false).unwrap();
        assert!(k8s.contains("port: 19443"), "{k8s}");
        assert!(k8s.contains("containerPort: 19443"), "{k8s}");
        config.metrics.https.as_mut().unwrap().port = 0;
        let err = render(Kind::Kubernetes, &config, None, exe, false).unwrap_err();
        assert!(err.to_string().contains("metrics.https.port"), "{err:#}");
    }

    #[test]
    fn free_ports_and_loopback_are_refused() {
        let exe = Path::new("/usr/bin/spillway");
        let mut config = Config {
            grpc_port: 0,
            ..Config::default()
        };
        let err = render(Kind::Systemd, &config, None, exe, false).unwrap_err();
        assert!(err.to_string().contains("grpc_port"), "{err:#}");
        config.grpc_port = 19999;
        config.bind_ip = "127.0.0.1".into();
        assert!(render(Kind::Systemd, &config, None, exe, false).is_ok());
        assert!(render(Kind::Kubernetes, &config, None, exe, false).is_err());
        assert!(render(Kind::Dockerfile, &config, None, exe, false).is_err());
    }
}
