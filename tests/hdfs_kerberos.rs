//! The HDFS tier against a kerberized HDFS and a real KDC (`MiniHdfs --secure`: Hadoop's
//! MiniKdc and a MiniDFSCluster with Kerberos on, one per test binary; see MiniHdfs.java for its
//! principals). Each case runs the `spillway` binary as operators do: `HADOOP_CONF_DIR` with
//! `hadoop.security.authentication = kerberos`, `KRB5_CONFIG`, a keytab or a ticket cache
//! (`KRB5CCNAME`, filled by `kinit`). Shuffles go in over gRPC and are read back straight from
//! HDFS as the job's user (`alice`) with her own Kerberos login, as the Uniffle client reads them.
//!
//! Tickets live [`TICKET_LIFETIME`], so the renewal case can outlive one. The cases share the
//! cluster and one of them restarts the NameNode, so every case holds one lock.

mod common;
use spillway_test_support::minicluster;

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use hdfs_native::{Client as Hdfs, ClientBuilder};
use spillway::proto;
use spillway::proto::StatusCode;
use tempfile::TempDir;

const TICKET_LIFETIME: Duration = Duration::from_secs(60);
const REALM: &str = "EXAMPLE.COM";
const SERVER_PRINCIPAL: &str = "rss/localhost@EXAMPLE.COM";

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The kerberized cluster of this binary. The test process itself talks Kerberos too (as the
/// superuser and as alice), so `KRB5_CONFIG` and a ticket cache of its own are set before any
/// GSSAPI call.
fn cluster() -> &'static minicluster::MiniHdfs {
    static CLUSTER: OnceLock<minicluster::MiniHdfs> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let c = minicluster::start_secure(TICKET_LIFETIME);
        let cache = c.log.with_extension("ccache");
        std::env::set_var("KRB5_CONFIG", &c.info["KRB5_CONF"]);
        std::env::set_var("KRB5CCNAME", format!("FILE:{}", cache.display()));
        c
    })
}

async fn kerberized() -> (
    tokio::sync::MutexGuard<'static, ()>,
    &'static minicluster::MiniHdfs,
) {
    let guard = ONE_AT_A_TIME.lock().await;
    let c = tokio::task::spawn_blocking(cluster).await.expect("cluster");
    (guard, c)
}

fn keytab(c: &minicluster::MiniHdfs, name: &str) -> PathBuf {
    Path::new(&c.info["KEYTABS"]).join(format!("{name}.keytab"))
}

/// A client of the test's own, logged in from a keytab.
fn login(c: &minicluster::MiniHdfs, principal: &str, keytab_name: &str) -> Hdfs {
    ClientBuilder::new()
        .with_url(&c.url)
        .with_config([("hadoop.security.authentication", "kerberos")])
        .with_kerberos_principal(principal)
        .with_kerberos_keytab(keytab(c, keytab_name).display().to_string())
        .build()
        .expect("kerberized client")
}

/// How a case's server logs in.
enum Login<'a> {
    /// `hdfs_store.kerberos_principal` + `kerberos_keytab` (a keytab file name in KEYTABS).
    Keytab(&'a str, &'a str),
    /// No principal in the config: the default principal of `KRB5CCNAME`, filled by `kinit`.
    TicketCache,
}

/// A `spillway` process set up for the kerberized cluster.
struct Server {
    child: Child,
    grpc: std::net::SocketAddr,
    log: PathBuf,
    _dir: TempDir,
}

impl Server {
    async fn start(
        c: &minicluster::MiniHdfs,
        login: Login<'_>,
        store_type: &str,
        krb5_conf: &Path,
    ) -> Server {
        Self::start_with_clock(c, login, store_type, krb5_conf, None).await
    }

    /// `clock`: a `faketime` offset for the server process (its clock only).
    async fn start_with_clock(
        c: &minicluster::MiniHdfs,
        login: Login<'_>,
        store_type: &str,
        krb5_conf: &Path,
        clock: Option<&str>,
    ) -> Server {
        let dir = TempDir::new().unwrap();
        let hadoop = dir.path().join("hadoop");
        std::fs::create_dir_all(&hadoop).unwrap();
        std::fs::write(
            hadoop.join("core-site.xml"),
            "<configuration><property><name>hadoop.security.authentication</name>\
             <value>kerberos</value></property></configuration>\n",
        )
        .unwrap();
        let cache = dir.path().join("ccache");
        let kerberos = match login {
            Login::Keytab(principal, file) => format!(
                "kerberos_principal = \"{principal}\"\nkerberos_keytab = \"{}\"\n",
                keytab(c, file).display()
            ),
            Login::TicketCache => {
                let out = Command::new("kinit")
                    .arg("-kt")
                    .arg(keytab(c, "rss"))
                    .arg(SERVER_PRINCIPAL)
                    .env("KRB5_CONFIG", krb5_conf)
                    .env("KRB5CCNAME", format!("FILE:{}", cache.display()))
                    .output()
                    .expect("kinit runs (Debian package krb5-user)");
                assert!(out.status.success(), "kinit: {out:?}");
                String::new()
            }
        };
        let [port, netty, http] = free_ports();
        let data = dir.path().join("d1");
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "store_type = \"{store_type}\"\ngrpc_port = {port}\nnetty_port = {netty}\n\
                 bind_ip = \"127.0.0.1\"\n[memory_store]\ncapacity = \"64M\"\n\
                 [localfile_store]\ndata_paths = [{data:?}]\n[metrics]\nhttp_port = {http}\n\
                 [hdfs_store]\nwrite_timeout = \"30s\"\nfailure_cooldown = \"1s\"\n\
                 cold_storage_threshold_size = \"1K\"\n{kerberos}",
            ),
        )
        .unwrap();
        let log = dir.path().join("server.log");
        let mut cmd = match clock {
            Some(offset) => {
                let mut cmd = Command::new("faketime");
                cmd.args(["-f", offset]).arg(env!("CARGO_BIN_EXE_spillway"));
                cmd
            }
            None => Command::new(env!("CARGO_BIN_EXE_spillway")),
        };
        // Its own process group: faketime runs the server as a child of its own, and both
        // must go when the case ends.
        let child = cmd
            .process_group(0)
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info")
            .env("WORKER_IP", "127.0.0.1")
            .env("HADOOP_CONF_DIR", &hadoop)
            .env("KRB5_CONFIG", krb5_conf)
            .env("KRB5CCNAME", format!("FILE:{}", cache.display()))
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spillway starts");
        let server = Server {
            child,
            grpc: format!("127.0.0.1:{port}").parse().unwrap(),
            log,
            _dir: dir,
        };
        server.ready().await;
        server
    }

    async fn ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let connecting = proto::shuffle_server_client::ShuffleServerClient::connect(format!(
                "http://{}",
                self.grpc
            ));
            if let Ok(Ok(mut client)) =
                tokio::time::timeout(Duration::from_secs(2), connecting).await
            {
                if client
                    .app_heartbeat(proto::AppHeartBeatRequest {
                        app_id: "probe".into(),
                    })
                    .await
                    .is_ok()
                {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "server did not come up:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn client(&self) -> Client {
        connect(self.grpc).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(-(self.child.id() as i32));
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// Writes a small shuffle for `app` (job user alice) under `root`, finishes it (everything
/// spills), and returns what was written.
async fn write_as_alice(
    s: &Server,
    c: &minicluster::MiniHdfs,
    app: &str,
    root: &str,
) -> BTreeMap<i32, BTreeMap<i64, Bytes>> {
    let mut client = s.client().await;
    register_remote(
        &mut client,
        app,
        0,
        0..2,
        &format!("{}{root}", c.url),
        "alice",
    )
    .await;
    let expected = write_shuffle(&mut client, app, 0, 2, 2, 3, 4096).await;
    finish(&mut client, app, 0).await;
    expected
}

/// Every partition read back from HDFS as alice must equal what was written, and every file
/// the server wrote must belong to `owner`.
async fn check_on_hdfs(
    c: &minicluster::MiniHdfs,
    server_id: &str,
    root: &str,
    app: &str,
    expected: &BTreeMap<i32, BTreeMap<i64, Bytes>>,
    owner: &str,
) {
    let alice = login(c, &format!("alice@{REALM}"), "alice");
    for (p, want) in expected {
        let got = read_hdfs(&alice, root, app, 0, *p, server_id).await;
        assert_eq!(&got, want, "partition {p} read back from HDFS as alice");
        let dir = format!("{root}/{app}/0/{p}-{p}");
        for f in alice.list_status(&dir, false).await.unwrap() {
            assert_eq!(f.owner, owner, "{}", f.path);
        }
    }
}

/// A case whose HDFS spills must fail: writes a shuffle for alice under a fresh root, checks
/// that every block is still served by the server (from local files in
/// `MEMORY_LOCALFILE_HDFS`), and that the server log contains `cause`.
async fn spills_fall_back_and_name(s: &Server, c: &minicluster::MiniHdfs, app: &str, cause: &str) {
    let root = format!("/{}", unique("krb-refused"));
    let expected = write_as_alice(s, c, app, &root).await;
    let log = s.log_text();
    let mut client = s.client().await;
    for (p, want) in &expected {
        let got = read_partition(&mut client, app, 0, *p).await;
        assert!(
            &got.blocks == want,
            "partition {p} served from local files:\n{log}"
        );
    }
    assert!(
        log.to_lowercase().contains(&cause.to_lowercase()),
        "the log names the cause ({cause}):\n{log}"
    );
}

fn server_id(s: &Server) -> String {
    // The id (`<ip>-<grpc port>-<netty port>`) as the server announces it at start-up.
    let log = s.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("spillway listening"))
        .unwrap_or_else(|| panic!("no listening line:\n{log}"));
    let id = line.split("server_id=\"").nth(1).unwrap();
    id[..id.find('"').unwrap()].to_owned()
}

/// Logged in from a keytab, the server writes each app's files as a proxy user of the app's
/// user (the NameNode allows `rss` to impersonate), and alice reads them back with her own
/// Kerberos login.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keytab_login_writes_as_a_proxy_of_the_job_user() {
    let (_one, c) = kerberized().await;
    let krb5 = PathBuf::from(&c.info["KRB5_CONF"]);
    let s = Server::start(
        c,
        Login::Keytab(SERVER_PRINCIPAL, "rss"),
        "MEMORY_HDFS",
        &krb5,
    )
    .await;
    assert!(
        s.log_text().contains(&format!(
            "Kerberos authentication: HDFS files are written by the principal {SERVER_PRINCIPAL} as a proxy of each app's user"
        )),
        "{}",
        s.log_text()
    );
    let root = format!("/{}", unique("krb-keytab"));
    let app = "application_7_0001_1";
    let expected = write_as_alice(&s, c, app, &root).await;
    check_on_hdfs(c, &server_id(&s), &root, app, &expected, "alice").await;
}

/// With no principal configured the server takes the default principal of its ticket cache
/// (`kinit` as an operator or a sidecar does) and still writes as a proxy of the job's user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticket_cache_login_writes_as_a_proxy_of_the_job_user() {
    let (_one, c) = kerberized().await;
    let krb5 = PathBuf::from(&c.info["KRB5_CONF"]);
    let s = Server::start(c, Login::TicketCache, "MEMORY_HDFS", &krb5).await;
    let root = format!("/{}", unique("krb-cache"));
    let app = "application_7_0002_1";
    let expected = write_as_alice(&s, c, app, &root).await;
    check_on_hdfs(c, &server_id(&s), &root, app, &expected, "alice").await;
}

/// A principal the NameNode does not let impersonate (no `hadoop.proxyuser.mallory.*`): every
/// HDFS spill is refused, the log names the cause, and in `MEMORY_LOCALFILE_HDFS` the blocks go
/// to local disks instead; nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_refused_is_named_and_blocks_go_to_local_disks() {
    let (_one, c) = kerberized().await;
    let krb5 = PathBuf::from(&c.info["KRB5_CONF"]);
    let s = Server::start(
        c,
        Login::Keytab("mallory/localhost@EXAMPLE.COM", "mallory"),
        "MEMORY_LOCALFILE_HDFS",
        &krb5,
    )
    .await;
    let cause = "does not let the server's principal impersonate alice";
    spills_fall_back_and_name(&s, c, "application_7_0003_1", cause).await;
}

/// A keytab that holds no key of the configured principal: the login fails with the cause in
/// the log, and in `MEMORY_HDFS` (no local fallback) the blocks stay in memory, still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_keytab_fails_with_the_cause_and_keeps_the_blocks() {
    let (_one, c) = kerberized().await;
    let krb5 = PathBuf::from(&c.info["KRB5_CONF"]);
    let s = Server::start(
        c,
        Login::Keytab(SERVER_PRINCIPAL, "alice"),
        "MEMORY_HDFS",
        &krb5,
    )
    .await;
    let root = format!("/{}", unique("krb-wrong-keytab"));
    let app = "application_7_0004_1";
    let mut client = s.client().await;
    register_remote(
        &mut client,
        app,
        0,
        0..2,
        &format!("{}{root}", c.url),
        "alice",
    )
    .await;
    let expected = write_shuffle(&mut client, app, 0, 2, 2, 3, 4096).await;
    // finishShuffle spills everything; every attempt fails, so it cannot succeed (it would
    // wait for the commit timeout): give it long enough to try a few times.
    let finished = tokio::time::timeout(
        Duration::from_secs(10),
        client.finish_shuffle(proto::FinishShuffleRequest {
            app_id: app.into(),
            shuffle_id: 0,
        }),
    )
    .await;
    if let Ok(Ok(r)) = finished {
        assert_ne!(
            status_of(r.into_inner().status),
            StatusCode::Success,
            "nothing could be spilled"
        );
    }
    let mut client = s.client().await;
    for (p, want) in &expected {
        let got = read_partition(&mut client, app, 0, *p).await;
        assert_eq!(&got.blocks, want, "partition {p} still in memory");
    }
    let log = s.log_text();
    assert!(
        log.contains("rss/localhost@EXAMPLE.COM") && log.to_lowercase().contains("keytab"),
        "the log names the principal and the keytab:\n{log}"
    );
}

/// The KDC cannot be reached (krb5.conf names a port nobody listens on): the failure says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_kdc_is_named() {
    let (_one, c) = kerberized().await;
    let dir = TempDir::new().unwrap();
    let krb5 = dir.path().join("krb5.conf");
    let dead = free_port();
    let text = std::fs::read_to_string(&c.info["KRB5_CONF"]).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("kdc =") {
                format!("        kdc = 127.0.0.1:{dead}")
            } else if l.trim_start().starts_with("kdc_tcp_port") {
                format!("    kdc_tcp_port = {dead}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&krb5, text).unwrap();
    let s = Server::start(
        c,
        Login::Keytab(SERVER_PRINCIPAL, "rss"),
        "MEMORY_LOCALFILE_HDFS",
        &krb5,
    )
    .await;
    spills_fall_back_and_name(&s, c, "application_7_0005_1", "Cannot contact any KDC").await;
}

/// Tickets expire after [`TICKET_LIFETIME`]; a server logged in from a keytab gets new ones by
/// itself. After the lifetime has passed, the NameNode restarts (so the server must
/// authenticate a new connection) and a second app still spills to HDFS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keytab_login_outlives_its_tickets() {
    let (_one, c) = kerberized().await;
    let krb5 = PathBuf::from(&c.info["KRB5_CONF"]);
    let s = Server::start(
        c,
        Login::Keytab(SERVER_PRINCIPAL, "rss"),
        "MEMORY_HDFS",
        &krb5,
    )
    .await;
    let id = server_id(&s);
    let root = format!("/{}", unique("krb-renew"));
    let first = "application_7_0006_1";
    let expected = write_as_alice(&s, c, first, &root).await;
    check_on_hdfs(c, &id, &root, first, &expected, "alice").await;

    tokio::time::sleep(TICKET_LIFETIME + Duration::from_secs(5)).await;
    for cmd in ["stop-namenode", "start-namenode"] {
        tokio::task::spawn_blocking(move || cluster().command(cmd))
            .await
            .unwrap();
    }
    let second = "application_7_0006_2";
    let expected = write_as_alice(&s, c, second, &root).await;
    check_on_hdfs(c, &id, &root, second, &expected, "alice").await;
}

/// The server's clock is ten minutes ahead of the KDC's (beyond Kerberos' five-minute
/// tolerance). With `kdc_timesync = 0` in krb5.conf the login fails, the log says the clocks
/// disagree, and the blocks go to local disks; with MIT's default (`kdc_timesync = 1`) the
/// client learns the KDC's clock from its first answer and HDFS takes the spills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_skew_is_named_unless_kerberos_corrects_it() {
    let (_one, c) = kerberized().await;
    let dir = TempDir::new().unwrap();
    let strict = dir.path().join("krb5.conf");
    let text = std::fs::read_to_string(&c.info["KRB5_CONF"]).unwrap();
    std::fs::write(
        &strict,
        text.replace("[libdefaults]", "[libdefaults]\n    kdc_timesync = 0"),
    )
    .unwrap();
    let s = Server::start_with_clock(
        c,
        Login::Keytab(SERVER_PRINCIPAL, "rss"),
        "MEMORY_LOCALFILE_HDFS",
        &strict,
        Some("+10m"),
    )
    .await;
    spills_fall_back_and_name(&s, c, "application_7_0007_1", "clock skew").await;
    drop(s);

    let krb5 = PathBuf::from(&c.info["KRB5_CONF"]);
    let s = Server::start_with_clock(
        c,
        Login::Keytab(SERVER_PRINCIPAL, "rss"),
        "MEMORY_HDFS",
        &krb5,
        Some("+10m"),
    )
    .await;
    let root = format!("/{}", unique("krb-skew"));
    let app = "application_7_0007_2";
    let expected = write_as_alice(&s, c, app, &root).await;
    check_on_hdfs(c, &server_id(&s), &root, app, &expected, "alice").await;
}
