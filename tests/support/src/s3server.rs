//! A real S3 server for tests: moto's server (`moto_server`, from PyPI), installed into
//! `tests/s3/target/venv` by `tests/s3/install.sh` (idempotent, ~0 s when installed) and
//! started on 127.0.0.1 on a free port, once per test binary.
//!
//! Part of the test-support crate (std only), which the release build never links. The server runs under a `bash` that kills it when this process's end of
//! its stdin closes, so it never outlives the tests. Anything that keeps it from starting
//! panics: a test that needs S3 fails, it never skips.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a cold start may take (a Python interpreter importing moto: ~2-5 s).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// A running S3 server.
pub struct S3Server {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// Where the server logs.
    pub log: PathBuf,
    _child: Mutex<Child>,
}

/// The server of this test binary, started on first use.
pub fn shared() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(start)
}

/// The path of `tests/s3` in the source tree.
pub fn project_dir() -> PathBuf {
    crate::repo_root().join("tests/s3")
}

/// Starts a server of its own (most tests share [`shared`]); panics when it cannot.
pub fn start() -> S3Server {
    try_start().unwrap_or_else(|e| panic!("{e}"))
}

/// Starts a server of its own, or says why it could not (for callers that report instead of
/// panicking, such as the soak).
pub fn try_start() -> Result<S3Server, String> {
    let project = project_dir();
    let status = Command::new("bash")
        .arg(project.join("install.sh"))
        .status()
        .map_err(|e| format!("run tests/s3/install.sh: {e}"))?;
    if !status.success() {
        return Err(format!("tests/s3/install.sh failed: {status}"));
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("free port: {e}"))?
        .port();
    let log = std::env::temp_dir().join(format!("spillway-s3-{}-{port}.log", std::process::id()));
    let bin = project.join("target/venv/bin/moto_server");
    if !bin.exists() {
        return Err(format!("{} is missing after install.sh", bin.display()));
    }
    let command = format!("{} -H 127.0.0.1 -p {port}", bin.display());
    let child = spawn_tied(&command, &log).map_err(|e| format!("start moto_server: {e}"))?;
    if !answers_http(port, START_TIMEOUT) {
        return Err(format!(
            "moto_server did not answer on port {port} within {START_TIMEOUT:?}; log {}",
            log.display()
        ));
    }
    Ok(S3Server {
        endpoint: format!("http://127.0.0.1:{port}"),
        log,
        _child: Mutex::new(child),
    })
}

/// Runs `command` (output to `log`) under a `bash` that kills it when this process's end of
/// the bash's stdin closes, so a test server never outlives the tests.
pub fn spawn_tied(command: &str, log: &std::path::Path) -> std::io::Result<Child> {
    // `read` returns when our stdin end closes (this process exited), then the server dies.
    let script = format!(
        "{command} >{} 2>&1 & pid=$!; read -r _; kill $pid; wait $pid",
        log.display()
    );
    Command::new("bash")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .spawn()
}

/// Whether something answers HTTP on 127.0.0.1:`port` (any status) within `limit`.
pub fn answers_http(port: u16, limit: Duration) -> bool {
    let started = Instant::now();
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            use std::io::Write;
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = s.write_all(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
            let mut buf = [0u8; 12];
            if s.read_exact(&mut buf).is_ok() && buf.starts_with(b"HTTP/1.") {
                return true;
            }
        }
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl S3Server {
    /// Creates `bucket` (moto accepts the unsigned request; an existing bucket is fine).
    pub fn create_bucket(&self, bucket: &str) {
        use std::io::Write;
        let addr = self.endpoint.trim_start_matches("http://");
        let mut s = TcpStream::connect(addr).expect("connect to the S3 server");
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        write!(
            s,
            "PUT /{bucket} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n"
        )
        .expect("send CreateBucket");
        let mut answer = String::new();
        s.read_to_string(&mut answer).ok();
        assert!(
            answer.starts_with("HTTP/1.0 200")
                || answer.starts_with("HTTP/1.1 200")
                || answer.contains("BucketAlreadyOwnedByYou"),
            "CreateBucket {bucket}: {}",
            answer.lines().next().unwrap_or("")
        );
    }
}

impl S3Server {
    /// Freezes the server process (SIGSTOP): connections hang, as behind a dead network or a
    /// store that stopped answering. [`S3Server::thaw`] resumes it with its data.
    pub fn freeze(&self) {
        self.set_frozen(true).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Resumes a frozen server (SIGCONT).
    pub fn thaw(&self) {
        self.set_frozen(false).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Freezes (SIGSTOP) or resumes (SIGCONT) the server process.
    pub fn set_frozen(&self, frozen: bool) -> Result<(), String> {
        let sig = if frozen { "-STOP" } else { "-CONT" };
        let wrapper = self._child.lock().unwrap_or_else(|p| p.into_inner()).id();
        let status = Command::new("pkill")
            .args([sig, "-P", &wrapper.to_string()])
            .status()
            .map_err(|e| format!("run pkill: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("pkill {sig} of moto_server failed: {status}"))
        }
    }
}
