//! Object storage over HTTPS: the payload goes unhashed (`UNSIGNED-PAYLOAD`), over plain HTTP
//! it stays signed. Against S3Proxy (it checks signatures) with a certificate of a CA made for
//! the test, and with `s3proxy.v4-max-non-chunked-request-size` at 1 KiB: S3Proxy hashes a
//! signed payload to check it and refuses one past that size, while an unsigned payload has
//! nothing to check. So flushes of objects far larger than 1 KiB reaching the bucket over
//! HTTPS show the payload was not signed, and the same flush refused over HTTP shows it is
//! there. The HTTPS server runs the spillway binary, which trusts the test CA the way an
//! operator makes it trust a private CA: `SSL_CERT_FILE`.

mod common;
use spillway_test_support::s3proxy;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use spillway::ids::{AppId, PartitionKey, PartitionRange};
use spillway::store::object::{ObjectOptions, ObjectTier};
use spillway::store::{Block, BlockBatch, RemoteStorage, Tier};

/// The largest signed payload the S3 server takes; every object below is larger.
const MAX_SIGNED: u64 = 1024;

fn proxy() -> s3proxy::S3Proxy {
    s3proxy::start_with(&s3proxy::Options {
        tls: true,
        max_signed_payload: Some(MAX_SIGNED),
        ..Default::default()
    })
}

/// Every file under `dir` (S3Proxy's filesystem backend keeps an object as a file), by its
/// path below `dir`.
fn files_under(dir: &Path) -> BTreeMap<String, Bytes> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, Bytes::from(std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

/// The spillway binary, `MEMORY_HDFS`, its object tier trusting only the test CA; flushes of
/// 20 KiB blocks reach the bucket over HTTPS and read back as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_flushes_send_unsigned_payloads() {
    let proxy = proxy();
    let tls = proxy.tls.as_ref().expect("started with TLS");
    let bucket = "rss-https";
    proxy.create_bucket(bucket);
    let dir = tempfile::TempDir::new().unwrap();
    let grpc = free_port();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "grpc_port = {grpc}\nnetty_port = -1\nbind_ip = \"127.0.0.1\"\n\
             store_type = \"MEMORY_HDFS\"\n\
             [localfile_store]\ndata_paths = [\"{}\"]\n[metrics]\nhttp_port = 0\n",
            dir.path().join("d1").display()
        ),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let _server = KillOnDrop(
        std::process::Command::new(env!("CARGO_BIN_EXE_spillway"))
            .arg("--config")
            .arg(&config)
            .env("WORKER_IP", "127.0.0.1")
            .env("RUST_LOG", "info")
            // Instead of the system's roots: only a server with the test CA's certificate is
            // trusted, so a flush that lands went over verified TLS.
            .env("SSL_CERT_FILE", &tls.ca_pem)
            .env_remove("SSL_CERT_DIR")
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the spillway binary starts"),
    );
    let mut c = connect_when_up(grpc).await;
    let app = "application_7_0001_1";
    let path = format!("s3a://{bucket}/rss");
    register_remote_with(
        &mut c,
        app,
        0,
        0..2,
        &path,
        "alice",
        proxy.s3a_conf_at(&tls.endpoint, s3proxy::SECRET_KEY),
    )
    .await;
    let expected = write_shuffle(&mut c, app, 0, 2, 2, 3, 20 << 10).await;
    finish(&mut c, app, 0).await;

    let objects = files_under(&proxy.data.join(bucket));
    let mut got: BTreeMap<i32, BTreeMap<i64, Bytes>> = BTreeMap::new();
    for p in 0..2 {
        let dir = format!("rss/{app}/0/{p}-{p}/");
        let mut blocks = BTreeMap::new();
        for (name, index) in objects
            .iter()
            .filter(|(n, _)| n.starts_with(&dir) && n.ends_with(".index"))
        {
            let data = &objects[&format!("{}.data", name.trim_end_matches(".index"))];
            assert!(
                data.len() as u64 > MAX_SIGNED,
                "{name}: {} bytes",
                data.len()
            );
            blocks_of_pair(index, data, &mut blocks);
        }
        got.insert(p, blocks);
    }
    assert_eq!(got, expected, "the flushed objects hold every block");
    let server_log = std::fs::read_to_string(&log).unwrap();
    assert!(
        !server_log.contains("MaxMessageLengthExceeded"),
        "a flush was refused: {server_log}"
    );
}

/// Over plain HTTP the same flush is signed, payload included: S3Proxy refuses it past
/// 1 KiB, naming the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_flushes_stay_signed() {
    let proxy = proxy();
    let bucket = "rss-http";
    proxy.create_bucket(bucket);
    let tier = ObjectTier::new(ObjectOptions {
        file_prefix: "127.0.0.1-1".to_owned(),
        max_concurrency: 1,
        write_timeout: Duration::from_secs(30),
        failure_cooldown: Duration::from_secs(1),
        hadoop_conf: Vec::new(),
    });
    let app = AppId::parse("app_http").unwrap();
    tier.register_app(
        &app,
        &RemoteStorage {
            path: format!("s3a://{bucket}/rss"),
            conf: proxy.s3a_conf(s3proxy::SECRET_KEY),
        },
    )
    .unwrap();
    let key = PartitionKey::new(app, 0, PartitionRange::new(0, 0).unwrap());
    let small = BlockBatch::new(vec![block(1, 100)]);
    tier.append(&key, &small)
        .await
        .expect("a signed payload under the limit is taken");
    let large = BlockBatch::new(vec![block(2, 20 << 10)]);
    let err = tier
        .append(&key, &large)
        .await
        .expect_err("a signed payload over the limit is refused");
    assert!(
        err.to_string().contains("MaxMessageLengthExceeded"),
        "{err}"
    );
}

fn block(id: i64, len: usize) -> Block {
    Block {
        block_id: id,
        task_attempt_id: 0,
        uncompress_length: len as i32,
        crc: 0,
        data: Bytes::from(vec![id as u8; len]),
    }
}

/// A client of the server on `port` once it listens (the binary is still starting).
async fn connect_when_up(port: u16) -> Client {
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "no server on {addr}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    connect(addr).await
}
