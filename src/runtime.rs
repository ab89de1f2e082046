//! The process's tokio runtime, built with its threads counted, and the one way request paths
//! run blocking file and socket calls ([`blocking`]), counted too.
//!
//! Why count: tokio keeps a blocking-pool thread alive while it gets work within its keep-alive
//! (10 s), and an idle thread waits on a condition variable whose wake-ups go to the longest
//! waiter first. Under steady I/O every parked thread is woken in turn, so the pool holds as
//! many threads as the highest number of blocking calls that ran at once, for as long as the
//! load lasts: a high-water mark, not a leak. What would be a leak is a blocking call that
//! never returns (a read on a dead disk, a send to a client that never drains), and that shows
//! in [`blocking_tasks`] staying above zero once the load is gone. Threads that are not the
//! runtime's (the journal's, the audit writers', jemalloc's) are the process's count minus
//! [`runtime_threads`]. The soak judges each of the three by the statistic that shows its leak.
//!
//! ```text
//!  /proc/<pid>/status Threads ─┬─ runtime_threads ─┬─ workers (fixed)
//!                              │                   └─ blocking pool ≥ blocking_tasks
//!                              └─ others (fixed by design)
//! ```

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

static BUILT: AtomicBool = AtomicBool::new(false);
static THREADS: AtomicI64 = AtomicI64::new(0);
static BLOCKING: AtomicI64 = AtomicI64::new(0);

/// The multi-threaded runtime `main` runs on: threads named `spillway`, each counted from its
/// start hook to its stop hook.
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    BUILT.store(true, Ordering::Relaxed);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("spillway")
        .on_thread_start(|| {
            THREADS.fetch_add(1, Ordering::Relaxed);
        })
        .on_thread_stop(|| {
            THREADS.fetch_sub(1, Ordering::Relaxed);
        })
        .build()
}

/// Threads alive in the runtime [`build`] made (workers and blocking pool); `None` in a
/// process whose runtime was built otherwise (a server inside a test), where nothing counts.
pub fn runtime_threads() -> Option<i64> {
    BUILT
        .load(Ordering::Relaxed)
        .then(|| THREADS.load(Ordering::Relaxed))
}

/// Calls given to [`blocking`] that have not returned: queued for a pool thread or running.
pub fn blocking_tasks() -> i64 {
    BLOCKING.load(Ordering::Relaxed)
}

/// Decrements [`BLOCKING`] when the call returns, panics, or is dropped unrun (the runtime
/// shutting down before a thread took it).
struct InFlight;

impl Drop for InFlight {
    fn drop(&mut self) {
        BLOCKING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// [`tokio::task::spawn_blocking`], counted in [`blocking_tasks`].
pub fn blocking<F, R>(f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    BLOCKING.fetch_add(1, Ordering::Relaxed);
    let in_flight = InFlight;
    tokio::task::spawn_blocking(move || {
        let _in_flight = in_flight;
        f()
    })
}
