//! The health script checker (Java 0.10 `HealthScriptChecker`): runs an operator's script and
//! calls the server unhealthy when the script fails, hangs, or prints an `ERROR` line.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::error::{Error, Result};

/// Runs one script with a deadline, a fresh process each pass (so an edited script takes
/// effect at the next pass, as in Java).
pub(crate) struct ScriptChecker {
    path: PathBuf,
    timeout: Duration,
}

/// Why a pass failed; the names are Java's `HealthCheckerExitStatus` values, so an operator
/// grepping logs of both servers finds the same words.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScriptFailure {
    /// Did not exit within the timeout (killed, with its process group).
    TimedOut,
    /// Exited with a non-zero code (or was killed by a signal).
    FailedWithExitCode(Option<i32>),
    /// Could not be started or waited for.
    FailedWithException(String),
    /// Exited 0 but a line of its standard output starts with `ERROR`.
    Failed(String),
}

impl ScriptChecker {
    /// Refuses a script that is missing or not executable, as Java refuses to start with one.
    pub(crate) fn new(path: &Path, timeout: Duration) -> Result<Self> {
        let runnable = std::fs::metadata(path)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false);
        if !runnable {
            return Err(Error::Startup(format!(
                "health.script_path: health check script {} is missing or not executable",
                path.display()
            )));
        }
        Ok(ScriptChecker {
            path: path.to_owned(),
            timeout,
        })
    }

    /// One pass. The script runs in a process group of its own so that a timeout kills its
    /// children too: a child left holding the output pipe would keep the pass waiting.
    pub(crate) async fn check(&self) -> std::result::Result<(), ScriptFailure> {
        let mut cmd = Command::new(&self.path);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        let child = cmd
            .spawn()
            .map_err(|e| ScriptFailure::FailedWithException(e.to_string()))?;
        let pid = child.id();
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Err(_) => {
                if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                Err(ScriptFailure::TimedOut)
            }
            Ok(Err(e)) => Err(ScriptFailure::FailedWithException(e.to_string())),
            Ok(Ok(out)) if !out.status.success() => {
                Err(ScriptFailure::FailedWithExitCode(out.status.code()))
            }
            Ok(Ok(out)) => match error_line(&out.stdout) {
                Some(line) => Err(ScriptFailure::Failed(line)),
                None => Ok(()),
            },
        }
    }
}

/// The first output line that starts with `ERROR` (Java splits the output on `\n` and
/// tests each piece with `startsWith("ERROR")`).
fn error_line(stdout: &[u8]) -> Option<String> {
    stdout
        .split(|b| *b == b'\n')
        .find(|line| line.starts_with(b"ERROR"))
        .map(|line| String::from_utf8_lossy(line).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &tempfile::TempDir, body: &str) -> PathBuf {
        let path = dir.path().join("check.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[tokio::test]
    async fn exit_code_error_lines_and_timeouts_decide() {
        let dir = tempfile::tempdir().unwrap();
        let t = Duration::from_secs(30);
        let check = |body: &str| {
            let c = ScriptChecker::new(&script(&dir, body), t).unwrap();
            async move { c.check().await }
        };
        assert_eq!(check("echo fine; echo 'an ERROR inside'").await, Ok(()));
        assert_eq!(
            check("echo ok; echo 'ERROR disk gone'").await,
            Err(ScriptFailure::Failed("ERROR disk gone".into()))
        );
        assert_eq!(
            check("echo ERROR >&2; exit 3").await,
            Err(ScriptFailure::FailedWithExitCode(Some(3)))
        );
        // A child holding the output pipe open past the timeout is killed with the script.
        let slow = ScriptChecker::new(
            &script(&dir, "sleep 600 & sleep 600"),
            Duration::from_millis(200),
        )
        .unwrap();
        assert_eq!(slow.check().await, Err(ScriptFailure::TimedOut));
    }

    #[test]
    fn a_missing_or_plain_file_stops_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let t = Duration::from_secs(1);
        let err = ScriptChecker::new(&dir.path().join("none"), t)
            .err()
            .unwrap();
        assert!(err.to_string().contains("health.script_path"), "{err}");
        let plain = dir.path().join("plain.sh");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        assert!(ScriptChecker::new(&plain, t).is_err(), "not executable");
    }
}
