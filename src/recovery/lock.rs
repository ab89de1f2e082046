//! One server per state: an exclusive `flock` on `LOCK` in the journal directory, held for the
//! process's life. It keeps two processes from serving (and journaling) the same data paths,
//! and it is how an upgrade hands over: the new process binds the ports (`SO_REUSEPORT`, so
//! connections queue in its backlog instead of being refused), asks the holder to stop
//! (SIGTERM, `--takeover`), and recovers only once the old process released the lock, that is
//! after its final spill and journal flush.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::error::{Error, Result};

/// The held lock; released when dropped (or when the process dies, however it dies).
pub struct StateLock {
    _lock: Flock<File>,
    path: PathBuf,
}

impl StateLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Takes the lock in the first of `dirs` where the file can be created. When another process
/// holds it: an error naming its pid, or with `takeover` a SIGTERM to that pid and a wait of
/// up to `wait` for it to exit. Blocking.
pub fn acquire(dirs: &[PathBuf], takeover: bool, wait: Duration) -> Result<StateLock> {
    let mut why = Vec::new();
    for dir in dirs {
        let path = dir.join("LOCK");
        let file = match fs::create_dir_all(dir).and_then(|()| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
        }) {
            Ok(f) => f,
            Err(e) => {
                why.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        return lock_file(file, path, takeover, wait);
    }
    Err(Error::Startup(format!(
        "cannot create the state lock: {}",
        why.join("; ")
    )))
}

fn lock_file(mut file: File, path: PathBuf, takeover: bool, wait: Duration) -> Result<StateLock> {
    let deadline = Instant::now() + wait;
    let mut signalled = None;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                let pid = std::process::id().to_string();
                let written = lock
                    .set_len(0)
                    .and_then(|()| lock.seek(SeekFrom::Start(0)).map(|_| ()))
                    .and_then(|()| lock.write_all(pid.as_bytes()));
                if let Err(e) = written {
                    tracing::warn!(path = %path.display(), error = %e, "could not write the pid into the state lock");
                }
                if let Some(old) = signalled {
                    tracing::info!(old_pid = old, "took over from the previous server process");
                }
                return Ok(StateLock { _lock: lock, path });
            }
            Err((f, Errno::EWOULDBLOCK)) => {
                file = f;
                let holder = read_pid(&mut file);
                if !takeover {
                    return Err(Error::Startup(format!(
                        "{} is held by another spillway process (pid {}); stop it first, or \
                         start this one with --takeover to replace it",
                        path.display(),
                        holder.map_or("unknown".to_owned(), |p| p.to_string())
                    )));
                }
                if signalled.is_none() {
                    if let Some(pid) = holder {
                        tracing::info!(
                            old_pid = pid,
                            "asking the running server to stop (SIGTERM) and waiting for its state"
                        );
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGTERM,
                        );
                        signalled = Some(pid);
                    }
                }
                if Instant::now() >= deadline {
                    return Err(Error::Startup(format!(
                        "the previous server process did not release {} within {wait:?}",
                        path.display()
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err((_, e)) => {
                return Err(Error::Startup(format!(
                    "cannot lock {}: {e}",
                    path.display()
                )))
            }
        }
    }
}

fn read_pid(file: &mut File) -> Option<i32> {
    let mut s = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut s).ok()?;
    s.trim().parse().ok().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_and_names_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = vec![dir.path().join("m")];
        let held = acquire(&dirs, false, Duration::ZERO).unwrap();
        let err = acquire(&dirs, false, Duration::ZERO).err().unwrap();
        assert!(
            err.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(held);
        acquire(&dirs, false, Duration::ZERO).unwrap();
    }
}
