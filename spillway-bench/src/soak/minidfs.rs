//! The soak's HDFS: the `tests/hdfs` launcher (`MiniHdfs`, Hadoop's `MiniDFSCluster` with one
//! NameNode and one DataNode on 127.0.0.1) as a child process, driven over its stdin/stdout.
//!
//! The tests' launcher (`tests/support/src/minicluster.rs`) panics when anything is missing, which is
//! right for a test and wrong for a CLI; this one returns errors that say what to install or
//! to pass `--no-hdfs`, and it is async so a NameNode restart never blocks the fault task's
//! runtime thread.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// A cold start (a JVM, a formatted NameNode and a DataNode) takes ~10 s on the 2-core CI
/// machine; the limit only guards against a hang.
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// `start-namenode` waits until the DataNode has registered again.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the launcher's Maven project is by default: this checkout's `tests/hdfs`.
pub fn default_launcher() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/hdfs"))
}

/// A running MiniHdfs; dropping it kills the JVM (and closing its stdin stops it anyway).
pub struct MiniDfs {
    /// `hdfs://127.0.0.1:<port>`: the same across NameNode restarts.
    pub url: String,
    /// The launcher's stderr.
    pub log: PathBuf,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    _child: Child,
}

impl MiniDfs {
    /// Builds the launcher if needed (`install.sh`, a stamp makes it ~0 s) and starts a fresh
    /// cluster under `base`.
    pub async fn start(launcher: &Path, base: &Path) -> anyhow::Result<MiniDfs> {
        let java = Command::new("java")
            .arg("-version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        if !matches!(java, Ok(s) if s.success()) {
            bail!(
                "the soak's HDFS needs Java 17 on PATH (apt-get install openjdk-17-jdk-headless \
                 maven, or run tests/hdfs/install.sh); pass --no-hdfs to run without HDFS"
            );
        }
        let install = launcher.join("install.sh");
        anyhow::ensure!(
            install.exists(),
            "no MiniHdfs launcher at {} (pass --hdfs-launcher <spillway checkout>/tests/hdfs, \
             or --no-hdfs)",
            launcher.display()
        );
        let built = Command::new("bash")
            .arg(&install)
            .stdin(Stdio::null())
            .output()
            .await
            .context("running tests/hdfs/install.sh")?;
        if !built.status.success() {
            bail!(
                "{} failed ({}): {}{} (pass --no-hdfs to run without HDFS)",
                install.display(),
                built.status,
                String::from_utf8_lossy(&built.stdout),
                String::from_utf8_lossy(&built.stderr)
            );
        }
        std::fs::create_dir_all(base)?;
        let log = base.with_extension("log");
        let stderr = std::fs::File::create(&log)?;
        let classpath = format!(
            "{}:{}/*",
            launcher.join("target/classes").display(),
            launcher.join("target/deps").display()
        );
        // Small heap, quick JIT: the soak's servers and Spark JVMs share the machine.
        let mut child = Command::new("java")
            .args([
                "-Xmx384m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-cp",
            ])
            .arg(classpath)
            .arg("io.spillway.hdfs.MiniHdfs")
            .arg(base)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .context("starting java (MiniHdfs)")?;
        let stdin = child.stdin.take().context("MiniHdfs stdin")?;
        let mut lines = BufReader::new(child.stdout.take().context("MiniHdfs stdout")?).lines();
        let url = tokio::time::timeout(START_TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.strip_prefix("HDFS_URL=") {
                    return Ok(url.to_owned());
                }
            }
            bail!("MiniHdfs exited before printing its URL")
        })
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("no URL within {START_TIMEOUT:?}")))
        .with_context(|| format!("MiniHdfs did not start; its log: {}", log.display()))?;
        Ok(MiniDfs {
            url,
            log,
            stdin,
            lines,
            _child: child,
        })
    }

    /// Sends one launcher command (`stop-namenode`, `start-namenode`, …) and waits for its
    /// `OK`; an `ERR` answer or no answer is an error.
    pub async fn command(&mut self, cmd: &str) -> anyhow::Result<()> {
        self.stdin.write_all(format!("{cmd}\n").as_bytes()).await?;
        self.stdin.flush().await?;
        let ok = format!("OK {cmd}");
        let err = format!("ERR {cmd}");
        tokio::time::timeout(COMMAND_TIMEOUT, async {
            while let Some(line) = self.lines.next_line().await? {
                if line == ok {
                    return Ok(());
                }
                if line.starts_with(&err) {
                    bail!("MiniHdfs {cmd}: {line}");
                }
            }
            bail!("MiniHdfs exited (log {})", self.log.display())
        })
        .await
        .unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "MiniHdfs {cmd}: no answer in {COMMAND_TIMEOUT:?}"
            ))
        })
    }
}
