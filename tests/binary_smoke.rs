//! Smoke test of the real binary: starts from `config.toml.example`, answers gRPC, and on
//! SIGTERM spills its memory to disk and exits 0.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Kills the server if the test fails before it sends SIGTERM, so no process outlives the test.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_and_spills_on_sigterm() {
    let dir = tempfile::TempDir::new().unwrap();
    let (d1, d2) = (dir.path().join("d1"), dir.path().join("d2"));
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config.toml.example"))
            .unwrap();
    // The example as shipped, with only the ports and disks moved out of the way.
    let config = example
        .replace("grpc_port = 19999", "grpc_port = 0")
        .replace("netty_port = 17000", "netty_port = 0")
        .replace("bind_ip = \"0.0.0.0\"", "bind_ip = \"127.0.0.1\"")
        .replace("http_port = 19998", "http_port = 0")
        .replace(
            "data_paths = [\"/tmp/spillway/data1\", \"/tmp/spillway/data2\"]",
            &format!("data_paths = [{:?}, {:?}]", d1, d2),
        );
    assert_ne!(
        config, example,
        "the example still has the keys this test rewrites"
    );
    let config_path = dir.path().join("config.toml");
    std::fs::write(&config_path, config).unwrap();

    let child = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .arg("--config")
        .arg(&config_path)
        .env("RUST_LOG", "info")
        .env("WORKER_IP", "127.0.0.1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("binary starts");
    let mut child = KillOnDrop(Some(child));
    let stdout = child.0.as_mut().unwrap().stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("spillway> {line}");
            let _ = tx.send(line);
        }
    });
    let (addr, http) = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the binary logs its listening address");
        let field = |name: &str| {
            line.split(name)
                .nth(1)
                .map(|rest| rest.split_whitespace().next().unwrap().to_string())
        };
        if let (Some(grpc), Some(http)) = (field("grpc_addr="), field("http_addr=")) {
            break (grpc, http);
        }
    };
    let mut client = connect(addr.parse().unwrap()).await;
    register(&mut client, "smoke_app", 0, 0..2, false).await;
    let expected = write_shuffle(&mut client, "smoke_app", 0, 2, 2, 3, 2000).await;
    verify_shuffle(&mut client, "smoke_app", 0, &expected).await;
    drop(client);

    // The binary's runtime counts its threads: its workers at least, and fewer than the
    // process has (the main thread, the allocator's, the journal's are not the runtime's).
    let jvm = reqwest::get(format!("http://{http}/prometheus/metrics/jvm"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let gauge = |name: &str| -> f64 {
        jvm.lines()
            .find(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{jvm}"))
    };
    let (runtime, workers, all) = (
        gauge("tokio_threads"),
        gauge("tokio_workers"),
        gauge("process_threads"),
    );
    assert!(
        runtime >= workers && workers >= 1.0 && runtime < all,
        "{runtime} runtime threads, {workers} workers, {all} in all"
    );
    assert!(gauge("tokio_blocking_tasks") >= 0.0);

    // One arena for every thread (src/main.rs), so memory freed on one thread is reused by all.
    assert_eq!(gauge("jemalloc_arenas"), 1.0);

    // jemalloc asks for transparent huge pages (src/main.rs), which the kernel gives unless
    // its THP mode is `never`.
    let pid = child.0.as_ref().unwrap().id();
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    let huge_kib: u64 = rollup
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no AnonHugePages in\n{rollup}"));
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap();
    if mode.contains("[never]") {
        assert_eq!(huge_kib, 0, "THP mode: {mode}");
    } else {
        assert!(huge_kib >= 2048, "no huge page in use; THP mode: {mode}");
    }

    let mut child = child.0.take().unwrap();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    reader.join().unwrap();

    // Everything that was in memory is now in files on the two disks.
    let mut data_bytes = 0;
    for p in 0..2 {
        for d in [&d1, &d2] {
            let range = d.join(format!("smoke_app/0/{p}-{p}"));
            if let Ok(entries) = std::fs::read_dir(&range) {
                for e in entries {
                    let e = e.unwrap();
                    if e.path().extension().is_some_and(|x| x == "data") {
                        data_bytes += e.metadata().unwrap().len();
                    }
                }
            }
        }
    }
    assert_eq!(
        data_bytes,
        2 * 2 * 3 * 2000,
        "all blocks spilled at shutdown"
    );
}
