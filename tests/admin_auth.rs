//! The admin guard of the HTTP port against a real server on `0.0.0.0`: decommission and the
//! profiles answer loopback peers only without a token, and only `Authorization: Bearer
//! <token>` with one (loopback included); the read-only endpoints stay open to everyone;
//! refusals are counted and logged without the presented token; the conf endpoint never shows
//! the token; env `SPILLWAY_ADMIN_TOKEN` reaches the server through `Config::load`.
//!
//! The non-loopback peer is a local IPv4 address that is not 127/8: one of the machine's, or
//! `10.213.0.1/32` added to `lo` for the tests (as root) and removed after them.

mod common;

use std::collections::HashMap;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Mutex, OnceLock};

use common::{register, start, TestServer};
use spillway::config::{Config, ENV_ADMIN_TOKEN};

// ---- log capture -------------------------------------------------------------------------

/// Everything the servers of this binary log (all tests share one global subscriber).
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        lock(&LOG).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(|| LogWriter)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
    });
}

fn logs() -> String {
    String::from_utf8_lossy(&lock(&LOG)).into_owned()
}

/// A panicking test must not poison the shared state for the others.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- a non-loopback local address --------------------------------------------------------

const FALLBACK_IP: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);

struct PeerState {
    users: usize,
    ip: Option<Ipv4Addr>,
    /// The tests added `FALLBACK_IP` to `lo` and must remove it.
    added: bool,
}

static PEER: Mutex<PeerState> = Mutex::new(PeerState {
    users: 0,
    ip: None,
    added: false,
});

/// A local IPv4 address outside 127/8 that clients may bind to; held while a test uses it.
struct PeerIp(Ipv4Addr);

impl PeerIp {
    fn acquire() -> PeerIp {
        let mut s = lock(&PEER);
        if s.users == 0 {
            let (ip, added) = match local_ipv4s().into_iter().find(|ip| !ip.is_loopback()) {
                Some(ip) => (ip, false),
                None => {
                    ip(&["addr", "add", &format!("{FALLBACK_IP}/32"), "dev", "lo"]);
                    (FALLBACK_IP, true)
                }
            };
            s.ip = Some(ip);
            s.added = added;
        }
        s.users += 1;
        PeerIp(s.ip.expect("set by the first user"))
    }
}

impl Drop for PeerIp {
    fn drop(&mut self) {
        let mut s = lock(&PEER);
        s.users -= 1;
        if s.users == 0 && s.added {
            ip(&["addr", "del", &format!("{FALLBACK_IP}/32"), "dev", "lo"]);
            s.added = false;
        }
    }
}

/// Runs `ip <args>`; the tests need it, so a failure fails them.
fn ip(args: &[&str]) -> String {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .expect("the `ip` command (iproute2) is installed");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `inet` addresses of `ip -4 -o addr show`.
fn local_ipv4s() -> Vec<Ipv4Addr> {
    ip(&["-4", "-o", "addr", "show"])
        .lines()
        .filter_map(|l| l.split_whitespace().skip_while(|w| *w != "inet").nth(1))
        .filter_map(|cidr| cidr.split('/').next()?.parse().ok())
        .collect()
}

// ---- HTTP helpers ------------------------------------------------------------------------

/// A client whose connections come from `from`; no proxy, so the server sees that address.
fn client_from(from: Ipv4Addr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::V4(from))
        .no_proxy()
        .build()
        .unwrap()
}

/// Base URL of the HTTP port of `s` (bound on 0.0.0.0) as reached at `ip`.
fn base(s: &TestServer, ip: Ipv4Addr) -> String {
    format!("http://{ip}:{}", s.running.http_addr.port())
}

struct Answer {
    code: u16,
    challenge: Option<String>,
    body: String,
}

async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
) -> Answer {
    let mut req = client.request(method, url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("HTTP port answers");
    Answer {
        code: r.status().as_u16(),
        challenge: r
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned()),
        body: r.text().await.unwrap(),
    }
}

fn status_of(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).expect("JSON state");
    v["status"].as_str().unwrap().to_owned()
}

async fn server_status(client: &reqwest::Client, base: &str) -> String {
    let a = call(
        client,
        reqwest::Method::GET,
        &format!("{base}/status"),
        None,
    )
    .await;
    assert_eq!(a.code, 200);
    status_of(&a.body)
}

/// `total_admin_requests_denied{reason}` as the server registry exports it.
async fn denied(client: &reqwest::Client, base: &str, reason: &str) -> f64 {
    let a = call(
        client,
        reqwest::Method::GET,
        &format!("{base}/prometheus/metrics/server"),
        None,
    )
    .await;
    assert_eq!(a.code, 200);
    assert!(
        a.body
            .contains("# TYPE total_admin_requests_denied counter"),
        "{}",
        a.body
    );
    let label = format!("reason=\"{reason}\"");
    a.body
        .lines()
        .find(|l| l.starts_with("total_admin_requests_denied{") && l.contains(&label))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample for {reason}: {}", a.body))
}

/// The CPU profiler is process-wide: profiles of concurrent tests would get 409.
static PROFILER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PROTECTED: [(&str, &str); 5] = [
    ("POST", "/admin/decommission"),
    ("POST", "/admin/cancel_decommission"),
    ("GET", "/debug/pprof/profile?seconds=1"),
    ("GET", "/debug/pprof/flamegraph?seconds=1"),
    ("GET", "/debug/pprof/heap"),
];

const OPEN: [&str; 9] = [
    "/metrics",
    "/metrics/server",
    "/prometheus/metrics/all",
    "/api/shuffleServer/prometheus/metrics/server",
    "/api/shuffleServer/conf",
    "/api/shuffleServer/stacks",
    "/status",
    "/health",
    "/admin/state",
];

fn method(m: &str) -> reqwest::Method {
    m.parse().unwrap()
}

async fn on_all_interfaces(token: Option<String>) -> TestServer {
    capture_logs();
    let mut s = start(1, |c| {
        c.bind_ip = "0.0.0.0".into();
        c.metrics.admin_token = token.map(spillway::config::Secret);
    })
    .await;
    // An app keeps a decommissioning server from finishing (and stopping) at once.
    register(&mut s.client, "auth_app", 0, 0..1, false).await;
    s
}

// ---- tests -------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_admin_endpoints_answer_loopback_only() {
    let peer = PeerIp::acquire();
    let s = on_all_interfaces(None).await;
    let local = client_from(Ipv4Addr::LOCALHOST);
    let remote = client_from(peer.0);
    let local_base = base(&s, Ipv4Addr::LOCALHOST);
    let remote_base = base(&s, peer.0);

    // A non-loopback peer: 403 saying how to allow it, before any work is done.
    for (m, path) in PROTECTED {
        let started = std::time::Instant::now();
        let a = call(&remote, method(m), &format!("{remote_base}{path}"), None).await;
        assert_eq!(a.code, 403, "{m} {path}: {}", a.body);
        assert!(a.body.contains("metrics.admin_token"), "{}", a.body);
        assert!(a.body.contains(ENV_ADMIN_TOKEN), "{}", a.body);
        assert!(
            started.elapsed() < std::time::Duration::from_millis(900),
            "{path} refused without sampling"
        );
    }
    assert_eq!(server_status(&remote, &remote_base).await, "ACTIVE");
    assert_eq!(denied(&remote, &remote_base, "not_loopback").await, 5.0);
    assert_eq!(denied(&remote, &remote_base, "no_token").await, 0.0);
    assert_eq!(denied(&remote, &remote_base, "bad_token").await, 0.0);

    // The read-only endpoints stay open to that peer.
    for path in OPEN {
        let a = call(
            &remote,
            reqwest::Method::GET,
            &format!("{remote_base}{path}"),
            None,
        )
        .await;
        assert_eq!(a.code, 200, "{path}: {}", a.body);
    }

    // Loopback: allowed, and the calls do their work.
    let a = call(
        &local,
        reqwest::Method::POST,
        &format!("{local_base}/admin/decommission"),
        None,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(status_of(&a.body), "DECOMMISSIONING");
    assert_eq!(
        server_status(&remote, &remote_base).await,
        "DECOMMISSIONING"
    );
    let a = call(
        &local,
        reqwest::Method::POST,
        &format!("{local_base}/admin/cancel_decommission"),
        None,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(server_status(&remote, &remote_base).await, "ACTIVE");
    {
        let _profiler = PROFILER.lock().await;
        let a = call(
            &local,
            reqwest::Method::GET,
            &format!("{local_base}/debug/pprof/profile?seconds=1"),
            None,
        )
        .await;
        assert_eq!(a.code, 200, "{}", a.body);
    }
    // The guard let it through: the handler itself answers (404 without the jemalloc feature).
    let a = call(
        &local,
        reqwest::Method::GET,
        &format!("{local_base}/debug/pprof/heap"),
        None,
    )
    .await;
    assert!(a.code == 200 || a.code == 404, "{}: {}", a.code, a.body);
    assert!(!a.body.contains("admin token"), "{}", a.body);
    assert_eq!(denied(&local, &local_base, "not_loopback").await, 5.0);

    let log = logs();
    assert!(
        log.contains("answer loopback clients only: no admin token is set"),
        "{log}"
    );
    assert!(log.contains("listens beyond loopback"), "{log}");
    let refusal = log
        .lines()
        .find(|l| {
            l.contains("admin request refused")
                && l.contains(&format!("peer={}:", peer.0))
                && l.contains("not_loopback")
                && l.contains("/admin/decommission")
        })
        .unwrap_or_else(|| panic!("a refusal line: {log}"));
    assert!(refusal.contains("WARN"), "{refusal}");
    assert!(refusal.contains("method=POST"), "{refusal}");

    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_every_peer_needs_it() {
    let token = "admin-token-7d1f0c2b9e4a";
    let wrong = "wrong-token-55c3a8e61f0b";
    let peer = PeerIp::acquire();
    let s = on_all_interfaces(Some(token.to_owned())).await;
    let local = client_from(Ipv4Addr::LOCALHOST);
    let remote = client_from(peer.0);
    let local_base = base(&s, Ipv4Addr::LOCALHOST);
    let remote_base = base(&s, peer.0);

    // No header, then a wrong token, from loopback and from the other address alike.
    for b in [&local_base, &remote_base] {
        let client = if b == &local_base { &local } else { &remote };
        for (m, path) in PROTECTED {
            let a = call(client, method(m), &format!("{b}{path}"), None).await;
            assert_eq!(a.code, 401, "{m} {b}{path}: {}", a.body);
            let challenge = a.challenge.expect("WWW-Authenticate on 401");
            assert!(challenge.starts_with("Bearer"), "{challenge}");
            assert!(a.body.contains("Authorization: Bearer"), "{}", a.body);

            let a = call(client, method(m), &format!("{b}{path}"), Some(wrong)).await;
            assert_eq!(a.code, 401, "{m} {b}{path}: {}", a.body);
            let challenge = a.challenge.expect("WWW-Authenticate on 401");
            assert!(challenge.starts_with("Bearer"), "{challenge}");
            assert!(!a.body.contains(wrong), "{}", a.body);
        }
    }
    // Another scheme is no bearer token.
    let r = local
        .post(format!("{local_base}/admin/decommission"))
        .basic_auth("admin", Some(token))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(server_status(&local, &local_base).await, "ACTIVE");
    assert_eq!(denied(&local, &local_base, "no_token").await, 11.0);
    assert_eq!(denied(&local, &local_base, "bad_token").await, 10.0);
    assert_eq!(denied(&local, &local_base, "not_loopback").await, 0.0);

    // The right token works from anywhere, and the calls do their work.
    let a = call(
        &remote,
        reqwest::Method::POST,
        &format!("{remote_base}/admin/decommission"),
        Some(token),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(server_status(&local, &local_base).await, "DECOMMISSIONING");
    let a = call(
        &local,
        reqwest::Method::POST,
        &format!("{local_base}/admin/cancel_decommission"),
        Some(token),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(server_status(&remote, &remote_base).await, "ACTIVE");
    {
        let _profiler = PROFILER.lock().await;
        let r = remote
            .get(format!("{remote_base}/debug/pprof/flamegraph?seconds=1"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        // An idle server may give no samples (an empty SVG): the test is about who may ask.
        assert_eq!(r.headers()["content-type"], "image/svg+xml");
    }
    // The scheme is case-insensitive.
    let r = local
        .post(format!("{local_base}/admin/cancel_decommission"))
        .header("authorization", format!("bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    // Open endpoints need nothing, from anywhere.
    for path in OPEN {
        let a = call(
            &remote,
            reqwest::Method::GET,
            &format!("{remote_base}{path}"),
            None,
        )
        .await;
        assert_eq!(a.code, 200, "{path}: {}", a.body);
    }

    // The conf endpoint lists the metrics keys but never the token.
    let a = call(
        &remote,
        reqwest::Method::GET,
        &format!("{remote_base}/api/shuffleServer/conf"),
        None,
    )
    .await;
    assert!(!a.body.contains(token), "{}", a.body);
    assert!(!a.body.contains("admin_token"), "{}", a.body);
    assert!(a.body.contains("metrics.http_port"), "{}", a.body);
    assert_eq!(denied(&local, &local_base, "bad_token").await, 10.0);

    let log = logs();
    assert!(
        log.contains("require credentials: `Authorization: Bearer <admin token>`"),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("admin request refused")
            && l.contains("bad_token")
            && l.contains(&format!("peer={}:", peer.0))),
        "{log}"
    );
    assert!(!log.contains(token), "the token is never logged");
    assert!(!log.contains(wrong), "a presented token is never logged");

    s.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_token_reaches_the_server_through_config_load() {
    let env_token = "env-token-0a9b8c7d6e5f";
    let file_token = "file-token-1f2e3d4c5b6a";
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("server.toml");
    let mut f = std::fs::File::create(&file).unwrap();
    writeln!(f, "[metrics]\nadmin_token = \"{file_token}\"").unwrap();
    drop(f);

    let with = |vars: &[(&str, &str)]| -> HashMap<String, String> {
        vars.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let env = with(&[(ENV_ADMIN_TOKEN, env_token)]);
    let lookup = |k: &str| env.get(k).cloned();
    // The env overrides the file, and sets the token without one.
    let loaded = Config::load(Some(file.as_path()), &lookup).expect("loads");
    assert_eq!(loaded.metrics.admin_token.as_deref(), Some(env_token));
    let no_file = Config::load(None, &lookup).expect("loads");
    assert_eq!(no_file.metrics.admin_token.as_deref(), Some(env_token));
    let empty = HashMap::<String, String>::new();
    let from_file = Config::load(Some(file.as_path()), &|k: &str| empty.get(k).cloned()).unwrap();
    assert_eq!(from_file.metrics.admin_token.as_deref(), Some(file_token));
    // The env token is validated as the file's is.
    let short = with(&[(ENV_ADMIN_TOKEN, "short")]);
    let err = Config::load(None, &|k: &str| short.get(k).cloned()).unwrap_err();
    assert!(err.to_string().contains("metrics.admin_token"), "{err}");

    capture_logs();
    let mut s = start(1, |c| {
        c.metrics.admin_token = loaded.metrics.admin_token.clone()
    })
    .await;
    register(&mut s.client, "env_app", 0, 0..1, false).await;
    let local = client_from(Ipv4Addr::LOCALHOST);
    let b = format!("http://{}", s.running.http_addr);
    let a = call(
        &local,
        reqwest::Method::POST,
        &format!("{b}/admin/decommission"),
        Some(file_token),
    )
    .await;
    assert_eq!(a.code, 401, "the file's token was overridden: {}", a.body);
    let a = call(
        &local,
        reqwest::Method::POST,
        &format!("{b}/admin/decommission"),
        Some(env_token),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(status_of(&a.body), "DECOMMISSIONING");
    let a = call(
        &local,
        reqwest::Method::POST,
        &format!("{b}/admin/cancel_decommission"),
        Some(env_token),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(server_status(&local, &b).await, "ACTIVE");
    let conf = call(
        &local,
        reqwest::Method::GET,
        &format!("{b}/api/shuffleServer/conf"),
        None,
    )
    .await;
    assert!(!conf.body.contains(env_token), "{}", conf.body);
    assert!(!logs().contains(env_token), "the token is never logged");

    s.running.shutdown().await;
}
