//! The `jemalloc` feature in the real binary: started with jemalloc's profiling switched on
//! (`_RJEM_MALLOC_CONF`), `/debug/pprof/heap` returns a heap profile that `go tool pprof`
//! reads, with function names from our code.
#![cfg(feature = "jemalloc")]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heap_profile_from_the_binary_is_read_by_go_pprof() {
    let dir = tempfile::TempDir::new().unwrap();
    let config_path = dir.path().join("config.toml");
    std::fs::write(
        &config_path,
        format!(
            "grpc_port = 0\nnetty_port = -1\nbind_ip = \"127.0.0.1\"\n\
             [metrics]\nhttp_port = 0\n\
             [localfile_store]\ndata_paths = [{:?}]\n",
            dir.path().join("d1")
        ),
    )
    .unwrap();
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_spillway"))
            .arg("--config")
            .arg(&config_path)
            .env("RUST_LOG", "info")
            .env("WORKER_IP", "127.0.0.1")
            .env(
                "_RJEM_MALLOC_CONF",
                "prof:true,prof_active:true,lg_prof_sample:10",
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("binary starts"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("spillway> {line}");
            let _ = tx.send(line);
        }
    });
    let field = |line: &str, key: &str| {
        line.split(&format!("{key}="))
            .nth(1)
            .map(|r| r.split_whitespace().next().unwrap().to_string())
    };
    let (grpc, http) = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the binary logs its listening addresses");
        if let (Some(g), Some(h)) = (field(&line, "grpc_addr"), field(&line, "http_addr")) {
            break (g, h);
        }
    };
    let mut client = connect(grpc.parse().unwrap()).await;
    register(&mut client, "heap_app", 0, 0..2, false).await;
    write_shuffle(&mut client, "heap_app", 0, 2, 2, 4, 64 << 10).await;

    let r = reqwest::get(format!("http://{http}/debug/pprof/heap"))
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body = r.bytes().await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let path = dir.path().join("heap.pb.gz");
    std::fs::write(&path, &body).unwrap();
    let go = if std::path::Path::new("/usr/local/go/bin/go").exists() {
        "/usr/local/go/bin/go"
    } else {
        "go"
    };
    let out = Command::new(go)
        // The profile carries function names (jemalloc_pprof symbolizes in the server).
        .args(["tool", "pprof", "-symbolize=none", "-raw"])
        .arg(&path)
        .output()
        .expect("go is installed (tests/run-all.sh installs it when missing)");
    let raw = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "go tool pprof failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(raw.contains("inuse_space"), "{raw}");
    assert!(
        raw.contains("spillway::"),
        "heap frames from our code: {raw}"
    );
}
