//! Gives freed heap back to the OS once the server has gone idle.
//!
//! Shuffle blocks come and go in bursts of gigabytes. glibc keeps what is freed in its arenas
//! (one per thread that allocated, up to eight per core) and returns only the top of each heap,
//! so after a load the process stays near its peak RSS while holding no data, and an operator
//! sizing the host by RSS sees a leak that is not one. `malloc_trim(0)` walks every arena and
//! gives their free pages back. The walk takes the arena locks, so it runs once per idle period
//! (no app registered, nothing in the memory budget, no purge running), not on a timer under
//! load. With jemalloc (the default build) the same idle moment purges every arena; under load
//! jemalloc's decay, run by its background threads, returns pages without this.
//!
//! What the trim cannot reach: about 28 MiB per thread arena stays resident, because glibc never
//! trims the top chunk of a thread arena in `malloc_trim`, and a free into it shrinks the heap
//! only above a trim threshold that glibc slides up (to 64 MiB) after the first large free.
//! Fixing the thresholds (`MALLOC_MMAP_THRESHOLD_` and `MALLOC_TRIM_THRESHOLD_` at 4 MiB) brings
//! an idle server back to start-up + 10-18 MiB, but measured ~30 % more CPU per GB over gRPC
//! (heaps shrink and regrow under load), so it is an operator's choice, not the default
//! (docs/performance.md, "Memory that goes back").

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::AppRegistry;

/// Checks every `interval` whether the server just became idle, and if so trims the heap.
pub fn spawn(
    registry: Arc<AppRegistry>,
    interval: Duration,
    cancel: CancellationToken,
    tracker: &TaskTracker,
) {
    let mut trimmed = true;
    crate::periodic::periodic(tracker, interval, cancel, move || {
        let idle = is_idle(&registry);
        let trim = idle && !trimmed;
        trimmed = idle;
        async move {
            if trim {
                // A walk of every arena: off the runtime's worker threads.
                let _ = crate::runtime::blocking(release).await;
            }
        }
    });
}

fn is_idle(registry: &AppRegistry) -> bool {
    let m = registry.store().memory().budget().snapshot();
    registry.app_count() == 0
        && registry.purges_running() == 0
        && m.used == 0
        && m.reserved == 0
        && m.in_flush == 0
}

/// Returns the allocator's free pages to the OS; logs how much RSS that gave back.
pub fn release() {
    let before = resident_bytes();
    trim();
    let after = resident_bytes();
    if let (Some(b), Some(a)) = (before, after) {
        tracing::info!(
            rss_before_mib = b >> 20,
            rss_after_mib = a >> 20,
            "idle: returned {} MiB of freed heap to the OS",
            b.saturating_sub(a) >> 20
        );
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "jemalloc")))]
#[allow(unsafe_code)] // the one libc call with no safe wrapper; see SAFETY
fn trim() {
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks; no pointer of ours
    // is involved.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(feature = "jemalloc")]
#[allow(unsafe_code)] // jemalloc's control interface has no safe wrapper for a purge; see SAFETY
fn trim() {
    // `arena.<MALLCTL_ARENAS_ALL>.purge`: every arena's unused dirty pages, now.
    let name = c"arena.4096.purge";
    // SAFETY: the purge control neither reads nor writes a value; every pointer passed is null
    // and the name is a NUL-terminated string.
    let err = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if err != 0 {
        tracing::debug!(err, "jemalloc purge refused");
    }
}

#[cfg(not(any(feature = "jemalloc", all(target_os = "linux", target_env = "gnu"))))]
fn trim() {}

/// This process's resident set size.
fn resident_bytes() -> Option<u64> {
    let me = crate::procstat::Proc::new(std::process::id())?;
    me.rss().map(|(rss, _)| rss)
}
