//! The load generator as CI runs it: a few hundred MB written to a real `spillway` child
//! process and read back with every byte and CRC verified, over both planes (the Netty run
//! also measures the ceilings, so the discard server and the disk probe run too). No timing is
//! asserted. A run against the discard server, which stores nothing, must fail verification.

use std::process::{Command, Stdio};

const BENCH: &str = env!("CARGO_BIN_EXE_spillway-bench");
/// The server binary: another package of the workspace, so cargo builds it into the same
/// directory as this package's binary (`cargo test --workspace`, or `cargo build` first).
fn server() -> String {
    let bin = std::path::Path::new(BENCH).with_file_name("spillway");
    assert!(
        bin.exists(),
        "no server binary at {} (run `cargo test --workspace`, or `cargo build --bin spillway` first)",
        bin.display()
    );
    bin.display().to_string()
}

fn run_bench(extra: &[&str]) -> (bool, i32, String) {
    bench(&["run"], extra)
}

/// Runs `spillway-bench <command…> --server-bin … --data-dir <tmp> <extra…>`; (success, exit
/// code, stdout + stderr).
fn bench(command: &[&str], extra: &[&str]) -> (bool, i32, String) {
    let dir = tempfile::TempDir::new().unwrap();
    let out = Command::new(BENCH)
        .args(command)
        .args(["--server-bin", &server()])
        .arg("--data-dir")
        .arg(dir.path())
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("spillway-bench runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), out.status.code().unwrap_or(-1), text)
}

#[test]
fn grpc_round_trip_verifies_every_byte() {
    // 24 maps x 8 partitions x 4 blocks x 256 KiB = 192 MiB; memory smaller than that, so
    // the watermark spiller runs during the writes and reads come from memory and files.
    let (ok, code, out) = run_bench(&[
        "--transport",
        "grpc",
        "--total",
        "192M",
        "--maps",
        "24",
        "--partitions",
        "8",
        "--block-size",
        "256K",
        "--capacity",
        "96M",
        "--finish",
        "false",
        "--no-ceilings",
    ]);
    assert!(ok, "exit {code}:\n{out}");
    assert!(out.contains("verification: 768 blocks checked"), "{out}");
    assert!(out.contains(": OK"), "{out}");
}

#[test]
fn netty_round_trip_with_ceilings() {
    let (ok, code, out) = run_bench(&[
        "--transport",
        "netty",
        "--total",
        "128M",
        "--maps",
        "8",
        "--partitions",
        "4",
        "--block-size",
        "1M",
        "--capacity",
        "512M",
    ]);
    assert!(ok, "exit {code}:\n{out}");
    assert!(out.contains("verification: 128 blocks checked"), "{out}");
    assert!(out.contains("write (transport ceiling)"), "{out}");
    // The 128 MiB shuffle lives in memory until its app ends; a few seconds later most of that
    // heap is back with the OS (without the idle trim the server stayed at its peak).
    let mib_after = |prefix: &str| -> u64 {
        let rest = &out[out
            .find(prefix)
            .unwrap_or_else(|| panic!("no {prefix:?}:\n{out}"))
            + prefix.len()..];
        rest.split(" MiB").next().unwrap().trim().parse().unwrap()
    };
    let (peak, start) = (mib_after("server peak RSS "), mib_after("at start "));
    let idle = mib_after("after the apps ended: ");
    assert!(
        idle.saturating_sub(start) * 2 < peak.saturating_sub(start),
        "idle RSS {idle} MiB kept more than half of the load's {} MiB over start ({start} MiB):\n{out}",
        peak - start
    );
    assert!(out.contains("spill at finish (disk write)"), "{out}");
}

/// Kills the child when the test ends, failed or not.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_server_that_loses_data_fails_the_run() {
    let mut discard = KillOnDrop(
        Command::new(BENCH)
            .arg("discard")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("discard server starts"),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(discard.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let addr = |key: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key))
            .unwrap_or_else(|| panic!("{key} in {line:?}"))
            .to_owned()
    };
    let (grpc, netty) = (addr("grpc="), addr("netty="));
    let (ok, code, out) = run_bench(&[
        "--addr",
        &grpc,
        "--netty-addr",
        &netty,
        "--total",
        "8M",
        "--maps",
        "2",
        "--partitions",
        "2",
        "--no-ceilings",
    ]);
    drop(discard);
    assert!(!ok, "{out}");
    assert_eq!(code, 1, "verification failure exits 1:\n{out}");
    assert!(
        out.contains("FAILED") && out.contains("not read back"),
        "{out}"
    );
}

#[test]
fn restart_keeps_what_was_in_memory_on_both_modes() {
    for mode in ["sigterm", "takeover"] {
        let (ok, code, text) = bench(
            &["restart", "--mode", mode],
            &[
                "--transport",
                "netty",
                "--total",
                "64M",
                "--maps",
                "8",
                "--partitions",
                "4",
                "--block-size",
                "256K",
                "--capacity",
                "256M",
            ],
        );
        assert!(ok, "{mode}: exit {code}:\n{text}");
        assert!(
            text.contains("verified after       : 256 blocks, all intact"),
            "{mode}: {text}"
        );
        if mode == "takeover" {
            assert!(text.contains("refused connections  : 0 over"), "{text}");
        }
    }
}

#[test]
fn curves_run_at_tiny_sizes_and_write_their_files() {
    // Every curve at a thousandth of its size: the same servers, calls, restarts and files as
    // the real run (the journal curve fails unless every block id comes back after the restart).
    let out = tempfile::TempDir::new().unwrap();
    let (ok, code, text) = bench(
        &["curves", "all"],
        &["--shrink", "1000", "--out", out.path().to_str().unwrap()],
    );
    assert!(ok, "exit {code}:\n{text}");
    for heading in [
        "#### Heap per reported block id",
        "#### Per partition:",
        "#### Journal and restart against block ids",
        "#### Journal and restart against apps",
        "#### Block-id calls against blocks per partition",
        "#### getShuffleResultForMultiPart against partitions per request",
        "#### requireBuffer, sendShuffleData, reportShuffleResult, getShuffleResult against concurrent apps",
        "#### The server against concurrent apps",
        "#### Back-pressure: apps x",
        "#### Small apps (8 sends of 4 x 32 KiB each) beside one heavy app",
    ] {
        assert!(text.contains(heading), "{heading:?} missing:\n{text}");
    }
    for (csv, points) in [
        ("blockids", 4),
        ("partitions", 3),
        ("journal-ids", 3),
        ("latency-blocks", 4),
        ("latency-multipart", 2),
        ("latency-apps", 2),
        ("latency-apps-server", 2),
        ("backpressure-apps", 1),
        ("tenants", 1),
    ] {
        let body = std::fs::read_to_string(out.path().join(format!("{csv}.csv"))).unwrap();
        assert!(body.lines().count() > points, "{csv}.csv:\n{body}");
        let svg = std::fs::read_to_string(out.path().join(format!("{csv}{}.svg", svg_suffix(csv))))
            .unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{csv}.svg"
        );
    }
    assert!(out.path().join("partitions-fds.svg").exists());
    assert!(out.path().join("journal-apps-restart.svg").exists());
    assert!(out.path().join("latency-apps-p999.svg").exists());
    assert!(out.path().join("backpressure-apps-apps.svg").exists());
}

/// The plot of `csv` the curve test opens (the server-side table has no plain one).
fn svg_suffix(csv: &str) -> &'static str {
    if csv == "latency-apps-server" {
        "-cpu"
    } else {
        ""
    }
}

/// The curves that read block ids back fail the run on a wrong answer: with `--check-fault`
/// one app leaves a report out but still expects its ids.
#[test]
fn curves_fail_when_get_shuffle_result_misses_reported_ids() {
    for curve in ["latency-apps", "backpressure", "tenants"] {
        let out = tempfile::TempDir::new().unwrap();
        let (ok, code, text) = bench(
            &["curves", curve],
            &[
                "--shrink",
                "1000",
                "--check-fault",
                "--out",
                out.path().to_str().unwrap(),
            ],
        );
        assert!(!ok, "{curve}: a missing report went unnoticed:\n{text}");
        assert_eq!(code, 2, "a curve that fails exits 2 ({curve}):\n{text}");
        assert!(text.contains("getShuffleResult of"), "{curve}:\n{text}");
    }
}

/// Heap per spilled partition, measured at 10,000 partitions: 1,434 B with the dev build;
/// 2,258 B while a partition's two id sets were Roaring treemaps from the first id, 2,844 B
/// (release) before a spill gave its emptied tables back (benches/README round 5).
const HEAP_PER_SPILLED_PARTITION: f64 = 1_800.0;

/// Partitions cost no descriptor once spilled, and their memory after a spill is what their
/// metadata needs: 10,000 partitions of one 1 KiB block each are written through a 16 MiB
/// buffer (so all of them spill), then the server's descriptors and jemalloc heap are read.
#[test]
fn spilled_partitions_hold_no_descriptor_and_bounded_heap() {
    let out = tempfile::TempDir::new().unwrap();
    let (ok, code, text) = bench(
        &["curves", "partitions"],
        &[
            "--shrink",
            "20",
            "--max",
            "--out",
            out.path().to_str().unwrap(),
        ],
    );
    assert!(ok, "exit {code}:\n{text}");
    let csv = std::fs::read_to_string(out.path().join("partitions.csv")).unwrap();
    let last: Vec<f64> = csv
        .lines()
        .last()
        .unwrap()
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let (partitions, heap_per_partition, peak_fds, fds_after) =
        (last[0], last[1], last[2], last[3]);
    assert_eq!(partitions, 10_000.0, "{csv}");
    // The spill pool's writes in flight at most, never one per partition.
    assert!(
        peak_fds <= 64.0,
        "{peak_fds} descriptors while spilling:\n{csv}"
    );
    assert!(
        fds_after <= 8.0,
        "{fds_after} descriptors kept after spilling:\n{csv}"
    );
    assert!(
        heap_per_partition < HEAP_PER_SPILLED_PARTITION,
        "{heap_per_partition} heap bytes per spilled partition:\n{csv}"
    );
}

/// `coordinator-scale` run tiny: a real coordinator-only process under 12 then 40 simulated
/// servers (5 apps each), checked assignments, REST and dashboard fetches, the fail-over of a
/// pair and a cold start. Every answer must pass the check; no timing is asserted.
#[test]
fn coordinator_scale_checks_every_assignment() {
    let out = tempfile::TempDir::new().unwrap();
    let dir = out.path().display().to_string();
    let (ok, code, text) = bench(
        &["coordinator-scale"],
        &[
            "--servers",
            "600,2000",
            "--shrink",
            "50",
            // A debug build beside the other tests on 2 cores: 1 s heartbeats and 20
            // assignments a second keep the run about checking answers, not about load.
            "--heartbeat-ms",
            "50000",
            "--assign-rate",
            "20",
            "--no-chromium",
            "--out",
            &dir,
        ],
    );
    assert!(ok, "exit {code}:\n{text}");
    assert!(text.contains("assignments: all correct"), "{text}");
    assert!(text.contains("fail-over at 40 servers"), "{text}");
    let csv = std::fs::read_to_string(out.path().join("coordinator-scale.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "a header and two sizes:\n{csv}");
    assert!(out.path().join("coordinator-failover.csv").exists());
}

/// The same run checked against a wrong `shuffle.nodes.max`: every answer fails the check, and
/// the run must fail.
#[test]
fn coordinator_scale_fails_on_wrong_answers() {
    let out = tempfile::TempDir::new().unwrap();
    let dir = out.path().display().to_string();
    let (ok, code, text) = bench(
        &["coordinator-scale"],
        &[
            "--servers",
            "600",
            "--shrink",
            "50",
            // A debug build beside the other tests on 2 cores: 1 s heartbeats and 20
            // assignments a second keep the run about checking answers, not about load.
            "--heartbeat-ms",
            "50000",
            "--assign-rate",
            "20",
            "--no-chromium",
            "--no-failover",
            "--nodes-max",
            "5",
            "--out",
            &dir,
        ],
    );
    assert!(!ok, "a wrong answer must fail the run:\n{text}");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("WRONG answers"), "{text}");
}
