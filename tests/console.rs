//! The `console` feature: the binary built with `--features console` and
//! `RUSTFLAGS="--cfg tokio_unstable"` serves tokio-console's gRPC API on
//! `[metrics] console_port`, and a client's `WatchUpdates` stream delivers updates.
//!
//! The test builds that binary itself (into `target/console`, its own target dir since the
//! RUSTFLAGS differ), so `cargo test` alone exercises the feature; later runs are incremental.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic_prost::ProstCodec;

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Builds the console binary (fails the test when it does not build).
fn build_console_binary() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = root.join("target").join("console");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "--locked",
            "--features",
            "console",
            "--bin",
            "spillway",
        ])
        .env("RUSTFLAGS", "--cfg tokio_unstable")
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the console feature builds");
    target.join("debug").join("spillway")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_feature_builds_and_serves_tokio_console() {
    let binary = build_console_binary();
    let dir = tempfile::TempDir::new().unwrap();
    let console_port = free_port();
    let config_path = dir.path().join("config.toml");
    std::fs::write(
        &config_path,
        format!(
            "grpc_port = 0\nnetty_port = -1\nbind_ip = \"127.0.0.1\"\n\
             [metrics]\nhttp_port = 0\nconsole_port = {console_port}\n\
             [localfile_store]\ndata_paths = [{:?}]\n",
            dir.path().join("d1")
        ),
    )
    .unwrap();
    let mut child = KillOnDrop(
        Command::new(&binary)
            .arg("--config")
            .arg(&config_path)
            .env("RUST_LOG", "info")
            .env("WORKER_IP", "127.0.0.1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("console binary starts"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("spillway> {line}");
            let _ = tx.send(line);
        }
    });
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the binary logs its listening line");
        if line.contains("spillway listening") {
            break;
        }
    }

    // tokio-console's first call: Instrument/WatchUpdates, a server stream of `Update`s. The
    // messages are decoded as `()` (unknown fields are skipped): receiving one proves the
    // console server speaks the protocol.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let channel = loop {
        match Channel::from_shared(format!("http://127.0.0.1:{console_port}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(c) => break c,
            Err(e) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "console port never accepted: {e}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = PathAndQuery::from_static("/rs.tokio.console.instrument.Instrument/WatchUpdates");
    let codec: ProstCodec<(), ()> = ProstCodec::default();
    let mut stream = grpc
        .server_streaming(tonic::Request::new(()), path, codec)
        .await
        .expect("WatchUpdates is served")
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(30), stream.message())
        .await
        .expect("an update arrives")
        .expect("the stream is healthy");
    assert!(first.is_some(), "the console server sent an update");
}
