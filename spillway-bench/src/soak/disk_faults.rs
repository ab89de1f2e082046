//! The loop disk's faults, each run in a task of its own by the fault runner (see
//! `faults.rs`), which owns the disk for the fault's `hold` while other faults go on.
//!
//! - **Freeze**: `fsfreeze -f` for `hold`, then `-u`. Spills to that disk block in the kernel;
//!   the server keeps its data in memory (or fails the append over to the other disk once
//!   `write_timeout` passes) and keeps serving from memory and the other disk. Nothing is
//!   allowed to go missing: whatever a client sees fail is classified as any failure is.
//! - **Removal**: the disk dies under the running server (every operation on it, open files
//!   included, fails with EIO) and its path turns empty and read-only; `hold` later a new
//!   empty file system is mounted there. The apps that
//!   had files on the removed disk are recorded in [`NodeState::gone`] before any of their reads
//!   can be judged: their blocks not read back count as gone with the disk, not lost, while a
//!   wrong byte stays corrupt. Every other app must stay whole: the server has to stop writing
//!   to the dead path and keep its other disk going.
//!
//! [`NodeState::gone`]: super::cluster::NodeState::gone

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::cluster::Shared;
use super::disks::LoopDisk;
use super::schedule::{Fault, Kind};

async fn wait(hold: Duration, stop: &CancellationToken) {
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::time::sleep(hold) => {}
    }
}

/// Applies a [`Kind::DiskFreeze`] or [`Kind::DiskRemove`] to `f.node`'s loop disk; what to
/// log, and whether it worked.
pub(super) async fn apply(
    disk: &mut LoopDisk,
    shared: &Shared,
    f: &Fault,
    hold: Duration,
    stop: &CancellationToken,
) -> (String, anyhow::Result<()>) {
    let dir = disk.dir().display().to_string();
    match f.kind {
        Kind::DiskFreeze => {
            let what = format!("disk freeze of {dir} for {} s", hold.as_secs());
            let frozen = match disk.freeze().await {
                Ok(frozen) => frozen,
                Err(e) => return (what, Err(e)),
            };
            wait(hold, stop).await;
            (what, frozen.thaw().await)
        }
        Kind::DiskRemove => {
            let node = &shared.nodes[f.node];
            node.removing.store(true, Ordering::SeqCst);
            let mut apps = 0;
            let removed = disk.remove(|names| {
                // Every name there is an app directory (the probe's dot-file lives for a
                // moment).
                apps = names.iter().filter(|n| !n.starts_with('.')).count();
                node.gone.lock().extend(names);
            });
            node.removing.store(false, Ordering::SeqCst);
            if let Err(e) = removed {
                return (format!("disk removal of {dir}"), Err(e));
            }
            wait(hold, stop).await;
            (
                format!(
                    "disk removal of {dir}: files of {apps} apps gone; an empty disk {} s later",
                    hold.as_secs()
                ),
                disk.replace(),
            )
        }
        _ => (
            format!("{:?}", f.kind),
            Err(anyhow::anyhow!("not a loop disk fault")),
        ),
    }
}
