//! The soak's real disk: one data path per server is an ext4 file system on a loop device, so
//! it can be frozen (`fsfreeze`; tmpfs cannot be) and pulled out from under the server.
//!
//! ```text
//!  <server>/disk1   ext4 on /dev/loopN   ← the data path, on top of
//!                   tmpfs, read-only     ← what the path shows once the disk is removed
//! ```
//!
//! Removing the disk first shuts the ext4 down (`EXT4_IOC_SHUTDOWN`, as a pulled disk: every
//! read and write on it, through files the server already has open too, fails with EIO), then
//! unmounts it lazily. The read-only tmpfs underneath is mounted first, so the path is then an
//! empty directory that refuses every write (EROFS), with no moment in which the server could
//! write into the host's directory under the mount point. A lazy unmount alone would not do:
//! open files keep working on a detached file system, so a server would go on appending (its
//! recovery journal, say) to a disk that is no longer there and never notice.
//! A replacement disk is a freshly made file system mounted on top again. Each image file is
//! unlinked once mounted: the loop device keeps it alive (`mount -o loop` detaches on the last
//! unmount), so no image is left on the host's disk once the mounts are gone (a SIGKILLed
//! soak leaves its mounts, as it leaves its tmpfs mounts).
//!
//! A frozen file system that outlives the soak would hang every later writer and `umount` on
//! the machine, so thawing depends neither on the fault finishing nor on the soak surviving:
//! [`Frozen`] thaws on drop, [`LoopDisk`] thaws again (harmless when not frozen) before it
//! unmounts, and a watchdog process thaws once the soak's process is gone (SIGKILL).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// Runs a mount-like tool and turns a non-zero exit into an error with its stderr.
fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    anyhow::ensure!(
        out.status.success(),
        "{:?} {:?}: {}: {}",
        cmd.get_program(),
        cmd.get_args().collect::<Vec<_>>(),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// A loop-mounted ext4 data path; unmounted (thawed first) when dropped.
pub struct LoopDisk {
    dir: PathBuf,
    size: u64,
    /// Images made so far: each disk (the first, and every replacement) has its own file, so a
    /// replacement never overwrites the blocks the removed file system may still be writing.
    made: u32,
    /// The ext4 is mounted on top of the read-only tmpfs (false while removed).
    mounted: bool,
}

impl LoopDisk {
    /// Mounts the read-only base and a fresh ext4 of `size` bytes on `dir`.
    pub fn mount(dir: &Path, size: u64) -> anyhow::Result<LoopDisk> {
        std::fs::create_dir_all(dir)?;
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", "ro,size=64k,mode=0755", "tmpfs"])
            .arg(dir))
        .context("mounting the read-only base of a loop disk")?;
        let mut disk = LoopDisk {
            dir: dir.to_path_buf(),
            size,
            made: 0,
            mounted: false,
        };
        disk.attach()?;
        Ok(disk)
    }

    /// The data path.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes a new image next to the mount point, mounts it on top and unlinks the file.
    fn attach(&mut self) -> anyhow::Result<()> {
        let image = self.dir.with_extension(format!("img{}", self.made));
        self.made += 1;
        std::fs::File::create(&image)?.set_len(self.size)?;
        let made = run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0"])
            .arg(&image))
        .and_then(|()| {
            run(Command::new("mount")
                .args(["-o", "loop"])
                .arg(&image)
                .arg(&self.dir))
        });
        let _ = std::fs::remove_file(&image);
        made.with_context(|| format!("making an ext4 data path at {}", self.dir.display()))?;
        self.mounted = true;
        // Not an app directory: a server sweeping leaked app data would take it for one.
        let _ = std::fs::remove_dir(self.dir.join("lost+found"));
        Ok(())
    }

    /// Freezes the file system: writes to it block in the kernel until the guard is thawed or
    /// dropped, or this process dies (see [`Watchdog`]).
    pub async fn freeze(&self) -> anyhow::Result<Frozen> {
        self.freeze_for(std::process::id()).await
    }

    /// [`LoopDisk::freeze`], thawed by the watchdog once process `owner` is gone.
    async fn freeze_for(&self, owner: u32) -> anyhow::Result<Frozen> {
        anyhow::ensure!(self.mounted, "{} has no disk to freeze", self.dir.display());
        let dir = self.dir.clone();
        // The guard exists before the command runs, so even a freeze that completes after a
        // cancelled wait is thawed.
        let guard = Frozen {
            dir: Some(dir.clone()),
            _watchdog: Watchdog::start(owner, &dir)?,
        };
        tokio::task::spawn_blocking(move || run(Command::new("fsfreeze").arg("-f").arg(&dir)))
            .await??;
        Ok(guard)
    }

    /// Pulls the disk out: the ext4 is shut down (EIO for everything on it from then on) and
    /// detached, and the path shows the empty read-only base. `record` first gets the names in
    /// the file system's root, that is the apps that have files there, so they are known
    /// before any read can miss them; the shutdown follows the listing at once (no process is
    /// started in between), and from then on no app can put anything there.
    pub fn remove(&mut self, record: impl FnOnce(Vec<String>)) -> anyhow::Result<()> {
        anyhow::ensure!(self.mounted, "{} has no disk to remove", self.dir.display());
        let root = std::fs::File::open(&self.dir)?;
        record(list(&self.dir)?);
        let shut = shutdown(&root)
            .with_context(|| format!("shutting down the ext4 at {}", self.dir.display()));
        // Unmounted even when the shutdown failed, so the disk is gone either way.
        run(Command::new("umount").arg("-l").arg(&self.dir))?;
        self.mounted = false;
        shut
    }

    /// Mounts a new empty file system where the removed one was (the operator replaced it).
    pub fn replace(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.mounted, "{} still has its disk", self.dir.display());
        self.attach()
    }
}

/// `EXT4_IOC_SHUTDOWN` (`_IOR('X', 125, __u32)`, XFS's `GOINGDOWN` number) with
/// `EXT4_GOING_FLAGS_NOLOGFLUSH`: the file system stops at once without flushing its journal,
/// as when the disk is pulled, and fails every later operation with EIO.
#[allow(unsafe_code)] // an ioctl with no safe wrapper (nix's needs a feature); see SAFETY
fn shutdown(root: &std::fs::File) -> std::io::Result<()> {
    const EXT4_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587d;
    const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;
    let flags = EXT4_GOING_FLAGS_NOLOGFLUSH;
    let fd = std::os::fd::AsRawFd::as_raw_fd(root);
    // SAFETY: `fd` is open for the whole call (borrowed from `root`), and the kernel reads one
    // u32 through the pointer, which points at a live local of that type.
    let r = unsafe { libc::ioctl(fd, EXT4_IOC_SHUTDOWN as _, &flags as *const u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn list(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        out.push(e?.file_name().to_string_lossy().into_owned());
    }
    Ok(out)
}

fn thaw(dir: &Path) -> anyhow::Result<()> {
    run(Command::new("fsfreeze").arg("-u").arg(dir))
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        // Fails harmlessly ("Invalid argument") when not frozen.
        let _ = thaw(&self.dir);
        let layers = if self.mounted { 2 } else { 1 };
        for _ in 0..layers {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// A frozen file system; thawed by [`Frozen::thaw`] or, on any other way out, when dropped.
pub struct Frozen {
    dir: Option<PathBuf>,
    /// Dropped after `dir` is thawed (fields drop after [`Drop::drop`]).
    _watchdog: Watchdog,
}

/// A shell loop that thaws a frozen file system once the soak's process is gone.
///
/// [`Frozen`]'s drop does not run when the soak is SIGKILLed (or dies under `timeout -s KILL`),
/// and a file system left frozen hangs every later writer and `umount` on the machine. The loop
/// runs in a process group of its own, so a signal to the soak's group (Ctrl-C) does not stop
/// it; it is killed when the guard thaws normally.
struct Watchdog(std::process::Child);

impl Watchdog {
    fn start(owner: u32, dir: &Path) -> anyhow::Result<Watchdog> {
        use std::os::unix::process::CommandExt;
        let child = Command::new("sh")
            .arg("-c")
            .arg(r#"while kill -0 "$1" 2>/dev/null; do sleep 0.2; done; exec fsfreeze -u "$2""#)
            .arg("soak-thaw-watchdog")
            .arg(owner.to_string())
            .arg(dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .context("starting the thaw watchdog")?;
        Ok(Watchdog(child))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Frozen {
    /// Thaws now, reporting a failure (dropping thaws too, silently).
    pub async fn thaw(mut self) -> anyhow::Result<()> {
        let Some(dir) = self.dir.take() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || thaw(&dir)).await?
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let _ = thaw(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fsfreeze -f` of a file system that is already frozen fails (EBUSY): a way to ask
    /// whether it is frozen that cannot hang, unlike a write.
    fn freezable(dir: &Path) -> bool {
        let ok = Command::new("fsfreeze")
            .arg("-f")
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        if ok {
            thaw(dir).unwrap();
        }
        ok
    }

    fn mounted(dir: &Path) -> bool {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let dir = dir.to_string_lossy();
        mounts
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(&*dir))
    }

    /// The whole life of a loop disk: mounted without `lost+found`; frozen and thawed by the
    /// guard's drop, by `thaw` and by the watchdog once the owning process died; removed (its apps listed, the path empty and read-only);
    /// replaced by an empty writable disk; and, dropped while frozen with its guard leaked,
    /// thawed and unmounted with no image file left.
    #[test]
    fn loop_disk_freezes_thaws_is_removed_replaced_and_cleaned_up() {
        assert!(
            super::super::effective_root(),
            "this test mounts file systems: run it as root"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let tmp = tempfile::TempDir::new().unwrap();
        let dir = tmp.path().join("disk1");
        let mut disk = LoopDisk::mount(&dir, 16 << 20).unwrap();
        assert!(mounted(&dir));
        assert!(!dir.join("lost+found").exists());
        std::fs::create_dir(dir.join("app_a")).unwrap();
        std::fs::write(dir.join("app_a").join("f"), b"x").unwrap();
        let mut open = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("app_a").join("f"))
            .unwrap();

        let frozen = rt.block_on(disk.freeze()).unwrap();
        assert!(!freezable(&dir), "not frozen after freeze()");
        drop(frozen);
        assert!(freezable(&dir), "still frozen after the guard was dropped");
        let frozen = rt.block_on(disk.freeze()).unwrap();
        rt.block_on(frozen.thaw()).unwrap();
        assert!(freezable(&dir), "still frozen after thaw()");

        let mut names = Vec::new();
        disk.remove(|n| names.extend(n)).unwrap();
        assert!(names.iter().any(|n| n == "app_a"), "{names:?}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let refused = std::fs::write(dir.join("x"), b"x").unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EROFS), "{refused}");
        // A file opened before the removal fails too, as on a pulled disk.
        let dead = std::io::Write::write_all(&mut open, b"y")
            .and_then(|()| open.sync_data())
            .unwrap_err();
        assert_eq!(dead.raw_os_error(), Some(libc::EIO), "{dead}");
        drop(open);
        assert!(disk.remove(|_| {}).is_err(), "removed twice");

        disk.replace().unwrap();
        assert!(!dir.join("app_a").exists());
        std::fs::write(dir.join("x"), b"x").unwrap();

        // The soak's process dying (SIGKILL: no drop runs) thaws through the watchdog.
        let mut owner = Command::new("sleep").arg("600").spawn().unwrap();
        let frozen = rt.block_on(disk.freeze_for(owner.id())).unwrap();
        assert!(!freezable(&dir), "not frozen after freeze_for()");
        owner.kill().unwrap();
        owner.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !freezable(&dir) {
            assert!(
                std::time::Instant::now() < deadline,
                "still frozen 10 s after its owner died"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        drop(frozen);

        std::mem::forget(rt.block_on(disk.freeze()).unwrap());
        drop(disk);
        assert!(!mounted(&dir), "a mount is left on {}", dir.display());
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("disk1")]);
    }
}
