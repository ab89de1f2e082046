//! Settings mistakes fail at once with their cause named, through the real gRPC interface,
//! against an S3 server that checks signatures (S3Proxy, started by this binary on 127.0.0.1;
//! moto accepts any signature, so a wrong secret would pass there): a wrong secret or a
//! bucket that does not exist is refused at `registerShuffle` under `MEMORY_HDFS`, served from
//! local disk under `MEMORY_LOCALFILE_HDFS`, and a bucket that goes away mid-job fails that
//! app's next `requireBuffer` while another app carries on. docs/operating.md, "When it does
//! not start or a job fails at once", lists each message.

mod common;
use spillway_test_support::s3proxy;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;

use common::*;
use spillway::config::{ByteSize, StoreType};
use spillway::proto;
use spillway::proto::StatusCode;

const WRONG_SECRET: &str = "spillway-wrong-secret-typo";

fn proxy() -> &'static s3proxy::S3Proxy {
    static PROXY: OnceLock<s3proxy::S3Proxy> = OnceLock::new();
    PROXY.get_or_init(|| {
        s3proxy::start_with(&s3proxy::Options {
            log_requests: true,
            ..Default::default()
        })
    })
}

/// The requests S3Proxy has served for `bucket` so far.
fn requests_to(bucket: &str) -> Vec<String> {
    let prefix = format!("/{bucket}/");
    proxy()
        .requests()
        .into_iter()
        .filter(|r| {
            r.split_once(' ')
                .is_some_and(|(_, p)| p.starts_with(&prefix))
        })
        .collect()
}

/// One partition's blocks as the Uniffle client reads them from the bucket: every index/data
/// object pair in the range's folder (S3Proxy's filesystem backend keeps an object as a file).
fn read_bucket(bucket: &str, app: &str, partition: i32) -> BTreeMap<i64, Bytes> {
    let dir = proxy()
        .data
        .join(bucket)
        .join(format!("rss/{app}/0/{partition}-{partition}"));
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let index = entry.unwrap().path();
        if index.extension().is_some_and(|e| e == "index") {
            let data = index.with_extension("data");
            blocks_of_pair(
                &Bytes::from(std::fs::read(&index).unwrap()),
                &Bytes::from(std::fs::read(&data).unwrap()),
                &mut out,
            );
        }
    }
    out
}

fn bucket(name: &str) -> String {
    let b = format!("{name}-{}", std::process::id());
    proxy().create_bucket(&b);
    b
}

/// `registerShuffle` with the app's s3a settings; the raw answer.
async fn register_s3(
    client: &mut Client,
    app: &str,
    path: &str,
    secret: &str,
) -> proto::ShuffleRegisterResponse {
    client
        .register_shuffle(proto::ShuffleRegisterRequest {
            app_id: app.into(),
            shuffle_id: 0,
            partition_ranges: (0..2)
                .map(|p| proto::ShufflePartitionRange { start: p, end: p })
                .collect(),
            remote_storage: Some(proto::RemoteStorage {
                path: path.into(),
                remote_storage_conf: proxy()
                    .s3a_conf(secret)
                    .into_iter()
                    .map(|(key, value)| proto::RemoteStorageConfItem { key, value })
                    .collect(),
            }),
            user: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

async fn require(client: &mut Client, app: &str, size: i32) -> proto::RequireBufferResponse {
    common::require_once(client, app, size).await
}

/// What the user reads must name the path, the store's answer and the key to fix, and never
/// the secret.
fn assert_names_cause(msg: &str, path: &str, code: &str, key: &str) {
    assert!(msg.contains(path), "names the path: {msg}");
    assert!(msg.contains(code), "names the store's answer {code}: {msg}");
    assert!(msg.contains(key), "names the key {key}: {msg}");
    assert!(!msg.contains(WRONG_SECRET), "leaks the secret: {msg}");
    assert!(
        !msg.contains(s3proxy::SECRET_KEY),
        "leaks the secret: {msg}"
    );
}

/// `MEMORY_HDFS` has no local disk to fall back to: a wrong secret and a missing bucket are
/// refused at registration, with a final status and the cause, before a block is accepted;
/// the same settings corrected register fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_hdfs_refuses_a_wrong_secret_and_a_missing_bucket_at_registration() {
    let mut s = start(0, |c| c.store_type = StoreType::MemoryHdfs).await;
    let b = bucket("refuse");
    let path = format!("s3a://{b}/rss");

    let t = Instant::now();
    let r = register_s3(&mut s.client, "app_wrong_secret", &path, WRONG_SECRET).await;
    println!("wrong secret refused in {:?}: {}", t.elapsed(), r.ret_msg);
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    assert_names_cause(
        &r.ret_msg,
        &path,
        "SignatureDoesNotMatch",
        "fs.s3a.secret.key",
    );

    let missing = format!("s3a://{b}-missing/rss");
    let t = Instant::now();
    let r = register_s3(
        &mut s.client,
        "app_missing_bucket",
        &missing,
        s3proxy::SECRET_KEY,
    )
    .await;
    println!("missing bucket refused in {:?}: {}", t.elapsed(), r.ret_msg);
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    assert_names_cause(&r.ret_msg, &missing, "NoSuchBucket", "create the bucket");

    // The refused apps left nothing behind, and a fixed secret is a new check.
    assert_eq!(s.running.registry().app_count(), 0);
    let r = register_s3(&mut s.client, "app_fixed", &path, s3proxy::SECRET_KEY).await;
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    s.running.shutdown().await;
}

/// `MEMORY_LOCALFILE_HDFS` keeps serving from local disk: the app with the wrong secret
/// registers, its spills (all over the cold threshold, so all preferring the bucket) go to
/// local files without trying the bucket again, and every block reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_localfile_hdfs_serves_a_refused_app_from_local_disk() {
    let mut s = start(1, |c| {
        c.store_type = StoreType::MemoryLocalfileHdfs;
        c.hdfs_store.cold_storage_threshold_size = ByteSize(1);
    })
    .await;
    let b = bucket("fallback");
    let path = format!("s3a://{b}/rss");
    let app = "app_fallback";
    let r = register_s3(&mut s.client, app, &path, WRONG_SECRET).await;
    assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    // The registration check asked the bucket (and was refused); nothing asks it after that.
    let checked = requests_to(&b);
    assert!(
        checked.iter().any(|r| r.starts_with("PUT ")),
        "the check's PUT is in S3Proxy's request log: {checked:?}"
    );
    let expected = write_shuffle(&mut s.client, app, 0, 2, 2, 4, 5_000).await;
    finish(&mut s.client, app, 0).await;
    let store = s.running.registry().store();
    eventually("all spilled", || {
        store.memory().budget().snapshot().used == 0
    })
    .await;
    for (p, want) in &expected {
        let got = read_partition(&mut s.client, app, 0, *p).await;
        assert_eq!(&got.blocks, want, "partition {p}");
        assert_eq!(got.from_memory, 0, "partition {p} read from local files");
    }
    assert_eq!(
        requests_to(&b),
        checked,
        "the bucket was asked again after it refused the app"
    );
    assert!(
        std::fs::read_dir(proxy().data.join(&b))
            .unwrap()
            .next()
            .is_none(),
        "nothing was written to the bucket"
    );
    s.running.shutdown().await;
}

/// A bucket that goes away mid-job (credentials revoked, a lifecycle mistake): the app's next
/// flush is refused for good, its memory is released, and its next `requireBuffer` fails with
/// the cause within seconds, while another app on another bucket carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_gone_mid_job_fails_that_app_only() {
    let mut s = start(0, |c| {
        c.store_type = StoreType::MemoryHdfs;
        c.memory_store.capacity = ByteSize(16 << 20);
    })
    .await;
    let (doomed_bucket, fine_bucket) = (bucket("doomed"), bucket("fine"));
    let doomed_path = format!("s3a://{doomed_bucket}/rss");
    let fine_path = format!("s3a://{fine_bucket}/rss");
    for (app, path) in [("app_doomed", &doomed_path), ("app_fine", &fine_path)] {
        let r = register_s3(&mut s.client, app, path, s3proxy::SECRET_KEY).await;
        assert_eq!(status_of(r.status), StatusCode::Success, "{}", r.ret_msg);
    }
    write_shuffle(&mut s.client, "app_doomed", 0, 2, 2, 2, 4_000).await;
    proxy().delete_bucket(&doomed_bucket);
    let started = Instant::now();
    // The flush that finds the bucket gone: nothing is durable, and finishShuffle says why.
    let r = s
        .client
        .finish_shuffle(proto::FinishShuffleRequest {
            app_id: "app_doomed".into(),
            shuffle_id: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    assert_names_cause(
        &r.ret_msg,
        &doomed_path,
        "NoSuchBucket",
        "create the bucket",
    );
    let registry = s.running.registry().clone();
    eventually("the doomed app's memory released", || {
        registry.store().memory().budget().snapshot().used == 0
    })
    .await;
    let r = require(&mut s.client, "app_doomed", 1_000).await;
    println!(
        "requireBuffer failed {:?} after the bucket went: {}",
        started.elapsed(),
        r.ret_msg
    );
    assert_eq!(status_of(r.status), StatusCode::NoRegister, "{}", r.ret_msg);
    assert_names_cause(
        &r.ret_msg,
        &doomed_path,
        "NoSuchBucket",
        "create the bucket",
    );

    let expected = write_shuffle(&mut s.client, "app_fine", 0, 2, 2, 3, 4_000).await;
    finish(&mut s.client, "app_fine", 0).await;
    eventually("the fine app spilled", || {
        registry.store().memory().budget().snapshot().used == 0
    })
    .await;
    // The fine app's every block reads back from its bucket, as its readers take them.
    assert_eq!(expected.len(), 2);
    for (p, want) in &expected {
        assert_eq!(
            &read_bucket(&fine_bucket, "app_fine", *p),
            want,
            "partition {p}"
        );
    }
    s.running.shutdown().await;
}

/// A config for the binary: loopback, free ports, the given data paths and extra lines.
fn binary_config(
    dir: &std::path::Path,
    data_paths: &[std::path::PathBuf],
    extra: &str,
) -> std::path::PathBuf {
    let paths: Vec<String> = data_paths
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    let text = format!(
        "grpc_port = 0\nnetty_port = 0\nbind_ip = \"127.0.0.1\"\nworker_ip = \"127.0.0.1\"\n{extra}\n\
         [metrics]\nhttp_port = 0\n[audit]\nrpc_log = false\ncoordinator_rpc_log = false\n\
         [localfile_store]\ndata_paths = [{}]\n",
        paths.join(", ")
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the binary on `config` until it exits by itself (a start-up mistake); its exit code
/// and everything it printed.
fn exits_with(config: &std::path::Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_spillway"));
    cmd.arg("--config").arg(config).env("RUST_LOG", "info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = Instant::now();
    let out = output_within(&mut cmd, Duration::from_secs(60));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = text
        .lines()
        .find(|l| l.starts_with("Error:"))
        .unwrap_or_default();
    println!(
        "exited {:?} after {:?}: {said}",
        out.status.code(),
        t.elapsed()
    );
    (out.status.code(), text)
}

/// A data path that cannot be created and one on a read-only mount stop the server at
/// start-up, exit code 1, with the key, the path and the OS's answer named (the state lock's
/// file used to be what the message named).
#[test]
fn data_paths_that_cannot_be_created_or_written_stop_the_start() {
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let bad = file.join("data");
    let good = dir.path().join("good");
    let config = binary_config(dir.path(), &[good.clone(), bad.clone()], "");
    let (code, text) = exits_with(&config, &[]);
    assert_eq!(code, Some(1), "{text}");
    for part in [
        "localfile_store.data_paths",
        &bad.display().to_string(),
        "cannot create it",
        "init_max_failed_paths",
    ] {
        assert!(text.contains(part), "names {part}: {text}");
    }

    // Read-only: a tmpfs mounted ro (root writes through file modes, not through ro mounts).
    let ro = dir.path().join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
        .arg(&ro)
        .status()
        .expect("run mount (the test needs root, as CI has)");
    assert!(
        mounted.success(),
        "mount a read-only tmpfs on {}",
        ro.display()
    );
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(ro.clone());
    let config = binary_config(dir.path(), std::slice::from_ref(&ro), "");
    let (code, text) = exits_with(&config, &[]);
    assert_eq!(code, Some(1), "{text}");
    for part in [
        "localfile_store.data_paths",
        &ro.display().to_string(),
        "cannot write to it",
        "Read-only file system",
    ] {
        assert!(text.contains(part), "names {part}: {text}");
    }
}

/// A Hadoop conf file that does not parse stops a server with a remote tier at start-up,
/// naming the variable, the file and the position, instead of failing every flush later.
#[test]
fn a_hadoop_conf_file_that_does_not_parse_stops_the_start() {
    let dir = tempfile::TempDir::new().unwrap();
    let conf = dir.path().join("hadoop-conf");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("core-site.xml"),
        "<configuration><property><name>fs.defaultFS</name><value>hdfs://nn:8020</value></property></configuration>",
    )
    .unwrap();
    std::fs::write(
        conf.join("hdfs-site.xml"),
        "<configuration>\n<property><name>dfs.nameservices</name><value>ns</value></propety>\n</configuration>",
    )
    .unwrap();
    let data = dir.path().join("data");
    let config = binary_config(
        dir.path(),
        &[data],
        "store_type = \"MEMORY_LOCALFILE_HDFS\"",
    );
    let conf_dir = conf.display().to_string();
    let (code, text) = exits_with(&config, &[("HADOOP_CONF_DIR", &conf_dir)]);
    assert_eq!(code, Some(1), "{text}");
    for part in ["HADOOP_CONF_DIR=", "hdfs-site.xml does not parse"] {
        assert!(text.contains(part), "names {part}: {text}");
    }
    // The parser's position of the mistake: line 2 (a timestamp's "12:" must not pass).
    let cause = text
        .lines()
        .find_map(|l| l.split_once("does not parse as XML:").map(|(_, c)| c))
        .unwrap_or_else(|| panic!("no parse error named: {text}"));
    assert!(cause.contains(" 2:"), "names line 2: {cause}");
}

/// A tag that promises the Netty plane on a server without one is refused at start-up.
#[test]
fn the_netty_tag_without_a_netty_port_stops_the_start() {
    let dir = tempfile::TempDir::new().unwrap();
    let config = binary_config(
        dir.path(),
        &[dir.path().join("d")],
        "tags = [\"GRPC_NETTY\"]",
    );
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("netty_port = 0", "netty_port = -1");
    std::fs::write(&config, text).unwrap();
    let (code, text) = exits_with(&config, &[]);
    assert_eq!(code, Some(1), "{text}");
    for part in ["tags", "netty_port = -1"] {
        assert!(text.contains(part), "names {part}: {text}");
    }
}

/// A quorum whose coordinators never answer (a closed port, a name that does not resolve) does
/// not stop the server (coordinators may start after it), but each entry is reported: one
/// WARN when its heartbeats start failing, with the cause, and once it stayed silent since
/// start for the grace period, one ERROR naming the key. Then nothing more while it stays
/// down.
#[test]
fn a_coordinator_quorum_that_does_not_answer_is_named_once() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::TempDir::new().unwrap();
    let closed = free_port();
    let quorum = format!(
        "coordinator_quorum = [\"127.0.0.1:{closed}\", \"no-such-coordinator.invalid:19999\"]\nheartbeat_interval = \"1s\""
    );
    let config = binary_config(dir.path(), &[dir.path().join("d")], &quorum);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_spillway"))
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("binary starts");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let started = Instant::now();
    let mut lines = Vec::new();
    let mut errors = 0;
    // Until both ERRORs, then a few seconds more to see nothing repeats.
    let mut quiet_until: Option<Instant> = None;
    while quiet_until.is_none_or(|t| Instant::now() < t) {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no ERROR per entry: {lines:#?}"
        );
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            if line.contains("ERROR") && line.contains("has not answered a heartbeat since start") {
                errors += 1;
                if errors == 2 {
                    println!("both entries named after {:?}", started.elapsed());
                    quiet_until = Some(Instant::now() + Duration::from_secs(4));
                }
            }
            lines.push(line);
        }
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
    let about = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    let closed_entry = format!("127.0.0.1:{closed}");
    for entry in [closed_entry.as_str(), "no-such-coordinator.invalid:19999"] {
        let named: Vec<&String> = lines.iter().filter(|l| l.contains(entry)).collect();
        // The level is a log line's second field, after the timestamp.
        let levels: Vec<&str> = named
            .iter()
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        assert_eq!(
            levels,
            ["WARN", "ERROR"],
            "one WARN and one ERROR for {entry}: {named:#?}"
        );
        assert!(
            named.iter().all(|l| l.contains("coordinator_quorum")),
            "{named:#?}"
        );
    }
    assert_eq!(
        about("has not answered a heartbeat since start"),
        2,
        "{lines:#?}"
    );
    assert_eq!(
        about("does not resolve"),
        2,
        "the DNS cause in both lines of that entry: {lines:#?}"
    );
}
