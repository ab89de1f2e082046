//! The runtime's thread and blocking-call counts (`spillway::runtime`), in a test binary of
//! their own: the counts are process-wide, and library tests running beside this one make
//! blocking calls of their own.

use spillway::runtime::{blocking, blocking_tasks, build, runtime_threads};

/// The only test in this binary, so nothing else moves the counters.
#[test]
fn threads_and_blocking_calls_are_counted_until_they_end() {
    assert_eq!(
        runtime_threads(),
        None,
        "nothing counts before the runtime is built"
    );
    let rt = build().expect("runtime");
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let base = blocking_tasks();
    let (held, panicked) = rt.block_on(async {
        // Workers run their start hook once they are scheduled, soon after `build`.
        for _ in 0..500 {
            if runtime_threads() > Some(0) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(runtime_threads() > Some(0), "workers are counted");
        let held = blocking(move || {
            started_tx.send(()).expect("send");
            release_rx.recv().expect("release");
            7
        });
        started_rx.recv().expect("started");
        assert_eq!(blocking_tasks(), base + 1, "a running call is counted");
        let panicked = blocking(|| panic!("a failing call")).await;
        assert_eq!(blocking_tasks(), base + 1, "a panicked call is not");
        release_tx.send(()).expect("release");
        (held.await.expect("join"), panicked.is_err())
    });
    assert_eq!((held, panicked), (7, true));
    assert_eq!(blocking_tasks(), base, "a returned call is not");
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    assert_eq!(runtime_threads(), Some(0), "stopped threads are uncounted");
}
