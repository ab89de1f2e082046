//! A real HDFS for tests: starts `tests/hdfs` (`MiniHdfs`, a Hadoop `MiniDFSCluster` with one
//! NameNode and one DataNode on 127.0.0.1) once per test binary, and talks to it over its
//! stdin/stdout. Building the launcher is `tests/hdfs/install.sh` (idempotent, ~0 s when built).
//!
//! Part of the test-support crate (std only), which the release build never links: the crate's
//! unit tests, the integration tests and the soak use it. Anything that keeps HDFS from
//! starting panics: a test that needs HDFS fails, it never skips.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a cold start may take (a JVM plus a formatted NameNode and a DataNode; ~10 s on
/// the 2-core CI machine).
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// How long one stop/start command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// A running MiniHdfs. It stops when this process exits (its stdin closes).
pub struct MiniHdfs {
    /// `hdfs://127.0.0.1:<port>`.
    pub url: String,
    /// How long start-up took.
    pub started_in: Duration,
    /// Where the launcher logs (its stderr), for failure messages.
    pub log: PathBuf,
    /// What the launcher printed before the URL (`KRB5_CONF`, `KEYTABS` in secure mode).
    pub info: std::collections::HashMap<String, String>,
    io: Mutex<(ChildStdin, mpsc::Receiver<String>)>,
    _child: Mutex<Child>,
}

/// The cluster of this test binary, started on first use.
pub fn shared() -> &'static MiniHdfs {
    static CLUSTER: OnceLock<MiniHdfs> = OnceLock::new();
    CLUSTER.get_or_init(|| start(&[]))
}

/// A kerberized cluster with its own KDC (`MiniHdfs --secure`; see MiniHdfs.java for the
/// principals and keytabs); tickets live `ticket_lifetime`.
pub fn start_secure(ticket_lifetime: Duration) -> MiniHdfs {
    start(&["--secure", &ticket_lifetime.as_secs().max(1).to_string()])
}

fn start(extra: &[&str]) -> MiniHdfs {
    let started = Instant::now();
    let project = crate::repo_root().join("tests/hdfs");
    let status = Command::new("bash")
        .arg(project.join("install.sh"))
        .status()
        .expect("run tests/hdfs/install.sh");
    assert!(status.success(), "tests/hdfs/install.sh failed: {status}");
    let base = std::env::temp_dir().join(format!(
        "spillway-minihdfs-{}-{}",
        std::process::id(),
        started.elapsed().as_nanos()
    ));
    std::fs::create_dir_all(&base).expect("create MiniHdfs base dir");
    let log = base.with_extension("log");
    let stderr = std::fs::File::create(&log).expect("create MiniHdfs log");
    let classpath = format!(
        "{}:{}/*",
        project.join("target/classes").display(),
        project.join("target/deps").display()
    );
    let mut child = Command::new("java")
        .args([
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
        ])
        .arg(classpath)
        .arg("io.spillway.hdfs.MiniHdfs")
        .arg(&base)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start java (MiniHdfs)");
    let stdin = child.stdin.take().expect("piped stdin");
    let lines = spawn_line_reader(child.stdout.take().expect("piped stdout"));
    let deadline = Instant::now() + START_TIMEOUT;
    let mut info = std::collections::HashMap::new();
    let url = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                if let Some(url) = line.strip_prefix("HDFS_URL=") {
                    break url.to_owned();
                }
                if let Some((k, v)) = line.split_once('=') {
                    info.insert(k.to_owned(), v.to_owned());
                }
            }
            Err(e) => {
                let _ = child.kill();
                panic!(
                    "MiniHdfs did not start ({e}); its log: {}\n{}",
                    log.display(),
                    tail(&log)
                );
            }
        }
    };
    MiniHdfs {
        url,
        started_in: started.elapsed(),
        log,
        info,
        io: Mutex::new((stdin, lines)),
        _child: Mutex::new(child),
    }
}

impl MiniHdfs {
    /// The NameNode's audit log so far for paths under `prefix`: one `cmd=… src=… allowed=…`
    /// per call the NameNode answered (allowed or refused), from the launcher's log.
    pub fn audit(&self, prefix: &str) -> Vec<String> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines()
            .filter(|l| l.contains(" audit - "))
            .filter_map(|l| {
                let field = |name: &str| {
                    l.split('\t')
                        .find_map(|f| f.trim().strip_prefix(name))
                        .map(str::to_owned)
                };
                let src = field("src=")?;
                // The first field follows the logger's prefix: `… audit - allowed=true`.
                let (_, rest) = l.split_once("allowed=")?;
                let allowed = rest.split('\t').next().unwrap_or("");
                let cmd = field("cmd=")?;
                src.starts_with(prefix)
                    .then(|| format!("cmd={cmd} src={src} allowed={allowed}"))
            })
            .collect()
    }

    /// Sends one command (`stop-datanode`, `start-datanode`, `stop-namenode`,
    /// `start-namenode`) and waits for its `OK`. Blocking: call it from `spawn_blocking`.
    pub fn command(&self, cmd: &str) {
        let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
        writeln!(io.0, "{cmd}").expect("write to MiniHdfs");
        io.0.flush().expect("flush MiniHdfs stdin");
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match io.1.recv_timeout(left) {
                Ok(line) if line == format!("OK {cmd}") => return,
                Ok(line) if line.starts_with(&format!("ERR {cmd}")) => {
                    panic!("MiniHdfs {cmd}: {line}")
                }
                Ok(_) => {}
                Err(e) => panic!(
                    "MiniHdfs {cmd}: no answer ({e}); log {}",
                    self.log.display()
                ),
            }
        }
    }
}

fn spawn_line_reader(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    rx
}

fn tail(log: &PathBuf) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
