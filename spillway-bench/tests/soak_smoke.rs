//! The chaos soak as every `cargo test` runs it, so the code cannot rot between the long runs:
//! a 30-second soak of the debug binaries (3 servers, 2 embedded coordinators) with a fault
//! every few seconds, through the real CLI. It must pass (no lost or corrupt block, no panic,
//! every server back to zero memory, tickets and apps), log the faults it fired, and write
//! the report, the CSV and one plot per resource. Slopes are printed but not judged: a
//! 30-second window is shorter than the report's minimum. No timing is asserted.
//!
//! As root (CI) the data paths are a tmpfs and a loop-mounted ext4 per server, disks get
//! filled, frozen and removed, and the soak runs in a network namespace of its own; otherwise
//! `--no-tmpfs` (and the host's loopback). Either way apps of both data planes, gRPC and
//! Netty, must be verified.
//! The MiniDFS runs (half the apps register it as remote storage, and some of their blocks
//! must come back from HDFS); it needs Java and `tests/hdfs`, and the test fails without them.
//! So does the S3 server (a quarter of the apps write to its bucket, and some of their blocks
//! must come back from it); it needs `tests/s3/install.sh` (Python 3, PyPI).
//! Spark jobs are left to the 5-minute CI soak (`--no-spark`): a JVM per job is too slow for
//! every `cargo test`.

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

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Uid:"))?;
            line.split_whitespace().nth(2).map(|e| e == "0")
        })
        .unwrap_or(false)
}

#[test]
fn short_soak_with_faults_passes_and_writes_its_report() {
    let out = tempfile::TempDir::new().unwrap();
    let mut cmd = Command::new(BENCH);
    cmd.args(["soak", "--server-bin", &server()])
        .args([
            "--duration",
            "30s",
            "--fault-interval",
            "4s",
            "--fault-hold",
            "3s",
        ])
        // Seed 316 as root: a NameNode restart at 13 s, a client network stall at 15 s and,
        // during it, at 16 s, the removal of an ext4 disk; without root: other kinds.
        .args(["--rate", "3", "--seed", "316", "--no-spark"])
        .arg("--out")
        .arg(out.path())
        .stdin(Stdio::null());
    if !is_root() {
        cmd.arg("--no-tmpfs");
    }
    let run = cmd.output().expect("spillway-bench runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "exit {:?}:\n{text}", run.status);
    assert!(text.contains("### Verdict: PASS"), "{text}");
    // The cluster is gone but for its logs: nothing mounted under the run's directory, no
    // server directory (mount points used to be left behind, unmounted after the removal).
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let root = out.path().to_string_lossy().into_owned();
    let left: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|m| m.starts_with(&*root))
        .collect();
    assert!(left.is_empty(), "still mounted: {left:?}");
    let dirs: Vec<_> = std::fs::read_dir(out.path().join("cluster"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name())
        .collect();
    assert!(dirs.is_empty(), "directories left in cluster/: {dirs:?}");
    assert!(out.path().join("cluster/server0.log").exists());
    // The seed's schedule fires faults in the 30 s (10 s in, until 13 s before the end).
    let faults: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("### Faults ("))
        .and_then(|l| l.trim_end_matches(')').parse().ok())
        .expect("fault log header");
    assert!(faults > 0, "no fault fired:\n{text}");
    if is_root() {
        assert!(text.contains("client network stall of ports"), "{text}");
        assert!(text.contains("disk removal of"), "{text}");
        // Faults overlap: another one starts while the stall holds (rows "| t | server | what
        // | took |").
        let rows: Vec<(f64, f64, &str)> = text
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains(" | server"))
            .filter_map(|l| {
                let c: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
                Some((c[0].parse().ok()?, c[3].parse().ok()?, c[2]))
            })
            .collect();
        let (at, took, _) = *rows
            .iter()
            .find(|r| r.2.starts_with("client network stall"))
            .expect("stall row");
        assert!(
            rows.iter().any(|r| r.0 > at && r.0 < at + took),
            "no fault started during the stall: {rows:?}"
        );
    }
    // Apps were verified, and none was lost.
    let row = text
        .lines()
        .skip_while(|l| !l.starts_with("| apps started"))
        .nth(2)
        .expect("app counts row");
    let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
    assert!(cells[1].parse::<u64>().unwrap() > 0, "{row}");
    assert_eq!(&cells[7..10], &["0", "0", "0"], "{row}");
    // Both data planes carried verified apps: "Data planes: G apps over gRPC (GV verified),
    // N over Netty (NV verified). Network: …".
    let planes = text
        .lines()
        .find(|l| l.starts_with("Data planes: "))
        .expect("data plane line");
    let (counts, network) = planes.split_once("Network:").expect("network part");
    let n: Vec<u64> = counts
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(n.len(), 4, "{planes}");
    assert!(
        n[1] > 0 && n[3] > 0,
        "a plane without verified apps: {planes}"
    );
    // As root the soak is in its own network namespace.
    assert_eq!(network.contains("own namespace"), is_root(), "{planes}");
    assert_eq!(
        cells.len(),
        12,
        "no 'gone with a removed disk' column: {row}"
    );
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(report.contains("#### server2"), "{report}");
    // HDFS apps and S3 apps ran, and blocks were read back from HDFS and from the bucket.
    for section in ["### HDFS", "### S3"] {
        let line = report
            .lines()
            .skip_while(|l| !l.starts_with(section))
            .nth(2)
            .unwrap_or_else(|| panic!("{section} section: {report}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        let apps: u64 = words[0].parse().expect("app count");
        let read_back: u64 = words[words.iter().position(|w| *w == "of").unwrap() - 1]
            .trim_end_matches(';')
            .parse()
            .expect("blocks read back");
        assert!(apps > 0 && read_back > 0, "{section}: {line}");
    }
    let csv = std::fs::read_to_string(out.path().join("samples.csv")).unwrap();
    assert!(csv.lines().count() > 30, "{csv}");
    for name in [
        "rss",
        "fds",
        "threads",
        "runtime_threads",
        "other_threads",
        "blocking_tasks",
        "used_buffer_size",
        "allocated_buffer_size",
        "require_buffer_count",
        "app_num_with_node",
        "journal_bytes",
    ] {
        let svg = std::fs::read_to_string(out.path().join(format!("{name}.svg"))).unwrap();
        assert!(svg.contains("<polyline"), "{name}.svg has no line");
    }
}
