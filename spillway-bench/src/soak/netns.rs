//! The soak's own network namespace: entered by `spillway-bench` itself before its runtime
//! starts, so every server, coordinator and child process of the soak runs on a loopback
//! that only the soak sees, and the network faults ([`super::netstall`]) change that
//! namespace's firewall, never the host's.
//!
//! The process calls `unshare(CLONE_NEWNET)` on itself instead of re-executing under
//! `unshare --net`: one process keeps its exit code, its stdout/stderr and its Ctrl-C as they
//! were, with no parent to forward them. `unshare` moves only the calling thread, so it must
//! run while that is the only thread: [`enter`] checks that and refuses otherwise. The mount
//! namespace is left alone, so the tmpfs data paths are mounted where the host sees (and the
//! soak unmounts) them.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

use anyhow::Context;

use super::SoakOptions;

/// The address the soak's apps reach the servers on when it has its own namespace. The
/// servers listen on every address of the namespace; their heartbeats go to the coordinators
/// on 127.0.0.1, so a stall of this address's ports cuts the clients off and leaves the
/// cluster's own traffic alone.
pub const CLIENT_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// Threads of this process, from `/proc/self/status`.
fn threads() -> anyhow::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status").context("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .context("no Threads: line in /proc/self/status")
}

/// Whether the soak should run in its own namespace: `--netns`, or by default as root (only
/// root may create one), unless `--no-netns`.
pub fn wanted(opts: &SoakOptions) -> bool {
    !opts.no_netns && (opts.netns || super::effective_root())
}

/// Moves this process into a new network namespace with `lo` up when [`wanted`], and records
/// it in `opts.own_netns`. Call it from `main` before any thread exists (before the tokio
/// runtime is built).
pub fn enter(opts: &mut SoakOptions) -> anyhow::Result<()> {
    opts.own_netns = false;
    if !wanted(opts) {
        return Ok(());
    }
    anyhow::ensure!(
        super::effective_root(),
        "--netns needs root (a network namespace); pass --no-netns"
    );
    let n = threads()?;
    anyhow::ensure!(
        n == 1,
        "the network namespace must be entered by a single-threaded process ({n} threads)"
    );
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).context("unshare(CLONE_NEWNET)")?;
    let status = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .context("running `ip link set lo up` in the soak's namespace")?;
    anyhow::ensure!(status.success(), "`ip link set lo up`: {status}");
    opts.own_netns = true;
    Ok(())
}
