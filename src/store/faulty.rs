//! FaultyTier: a real file tier wrapped so tests can make its appends fail, hang, its purges
//! hang, or its health go bad on command (after Neon's `UnreliableWrapper`). Spiller and server tests use
//! it to show that accepted blocks stay readable and clients get a status when storage fails.
//!
//! Every knob is an atomic, so a test flips it through a shared `Arc<FaultyTier>` while the
//! code under test holds the same tier as `Arc<dyn FileTier>`. Reads always pass through
//! unchanged; purges too unless stalled.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::ids::{AppId, PartitionKey};
use crate::store::{
    BlockBatch, DataRead, FileTier, Health, IndexRead, PurgeScope, Span, StorageSite, Tier,
    TierKind,
};

/// A [`FileTier`] wrapper that injects append failures, append stalls and bad health.
///
/// Order inside `append`: count the call, wait while stalled, then fail if a failure is armed
/// (the failure is `Error::Io`, which is retryable, and nothing reaches the inner tier), else
/// delegate.
pub struct FaultyTier {
    inner: Arc<dyn FileTier>,
    fail_next: AtomicU64,
    fail_all: AtomicBool,
    stalled: AtomicBool,
    purges_stalled: AtomicBool,
    release: Notify,
    unhealthy: AtomicBool,
    calls: AtomicU64,
    failed: AtomicU64,
    parked: AtomicU64,
}

impl FaultyTier {
    /// Wraps `inner` with every fault off.
    pub fn new(inner: Arc<dyn FileTier>) -> Self {
        FaultyTier {
            inner,
            fail_next: AtomicU64::new(0),
            fail_all: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            purges_stalled: AtomicBool::new(false),
            release: Notify::new(),
            unhealthy: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            parked: AtomicU64::new(0),
        }
    }

    /// The wrapped tier, for reading back what really landed.
    pub fn inner(&self) -> &Arc<dyn FileTier> {
        &self.inner
    }

    /// The next `n` appends fail (in addition to any already armed).
    pub fn fail_next_appends(&self, n: u64) {
        self.fail_next.fetch_add(n, Ordering::AcqRel);
    }

    /// While on, every append fails.
    pub fn fail_all_appends(&self, on: bool) {
        self.fail_all.store(on, Ordering::Release);
    }

    /// Appends started from now on wait (before touching the inner tier) until
    /// [`FaultyTier::release_appends`].
    pub fn stall_appends(&self) {
        self.stalled.store(true, Ordering::Release);
    }

    /// Lets every stalled append continue, and stops stalling new ones.
    pub fn release_appends(&self) {
        self.stalled.store(false, Ordering::Release);
        self.release.notify_waiters();
    }

    /// While on, `health()` reports the tier not writable.
    pub fn set_unhealthy(&self, on: bool) {
        self.unhealthy.store(on, Ordering::Release);
    }

    /// Appends waiting in a stall right now; tests poll this to know the code under test is
    /// stuck where they want it.
    pub fn stalled_appends(&self) -> u64 {
        self.parked.load(Ordering::Acquire)
    }

    /// Appends called so far (empty batches included).
    pub fn append_calls(&self) -> u64 {
        self.calls.load(Ordering::Acquire)
    }

    /// Appends failed by injection so far.
    pub fn failed_appends(&self) -> u64 {
        self.failed.load(Ordering::Acquire)
    }

    /// Purges wait (counted in [`FaultyTier::stalled_appends`] too) until
    /// [`FaultyTier::release_purges`].
    pub fn stall_purges(&self) {
        self.purges_stalled.store(true, Ordering::Release);
    }

    /// Lets stalled purges through.
    pub fn release_purges(&self) {
        self.purges_stalled.store(false, Ordering::Release);
        self.release.notify_waiters();
    }

    async fn wait_while_stalled(&self) {
        self.wait_while(&self.stalled).await;
    }

    async fn wait_while(&self, stalled: &AtomicBool) {
        if !stalled.load(Ordering::Acquire) {
            return;
        }
        let _parked = Parked::new(&self.parked);
        loop {
            let notified = self.release.notified();
            tokio::pin!(notified);
            // Register before re-checking, so a release between the check and the await is
            // not missed.
            notified.as_mut().enable();
            if !stalled.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    fn take_failure(&self) -> bool {
        if self.fail_all.load(Ordering::Acquire) {
            return true;
        }
        self.fail_next
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// Counts a stalled append for as long as it waits, even if its future is dropped.
struct Parked<'a>(&'a AtomicU64);

impl<'a> Parked<'a> {
    fn new(counter: &'a AtomicU64) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Parked(counter)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl Tier for FaultyTier {
    fn kind(&self) -> TierKind {
        self.inner.kind()
    }

    async fn append(&self, part: &PartitionKey, batch: &BlockBatch) -> Result<()> {
        self.calls.fetch_add(1, Ordering::AcqRel);
        self.wait_while_stalled().await;
        if self.take_failure() {
            self.failed.fetch_add(1, Ordering::AcqRel);
            return Err(Error::io(
                format!("<FaultyTier {}>", part),
                io::Error::other("FaultyTier: injected append failure"),
            ));
        }
        self.inner.append(part, batch).await
    }

    async fn purge(&self, scope: &PurgeScope) -> Result<u64> {
        self.wait_while(&self.purges_stalled).await;
        self.inner.purge(scope).await
    }

    async fn seal(&self, scope: &PurgeScope) {
        self.inner.seal(scope).await
    }

    fn location(&self, part: &PartitionKey) -> Option<String> {
        self.inner.location(part)
    }

    fn site(&self, part: &PartitionKey) -> Option<StorageSite> {
        self.inner.site(part)
    }

    fn sites(&self, app: &AppId) -> Vec<StorageSite> {
        self.inner.sites(app)
    }

    fn health(&self) -> Health {
        if self.unhealthy.load(Ordering::Acquire) {
            return Health {
                writable: false,
                detail: "FaultyTier: marked unhealthy".to_owned(),
            };
        }
        self.inner.health()
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl FileTier for FaultyTier {
    async fn read_index(&self, part: &PartitionKey) -> Result<IndexRead> {
        self.inner.read_index(part).await
    }

    async fn read_data(&self, part: &PartitionKey, span: Span) -> Result<Bytes> {
        self.inner.read_data(part, span).await
    }

    async fn read_data_ranges(&self, part: &PartitionKey, span: Span) -> Result<DataRead> {
        self.inner.read_data_ranges(part, span).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ids::AppId;
    use crate::store::conformance::{self, part, payload, test_block};
    use crate::store::localfile::{LocalFileOptions, LocalFileTier};

    fn faulty(dir: &tempfile::TempDir) -> Arc<FaultyTier> {
        let inner = LocalFileTier::new(LocalFileOptions::testing(
            vec![dir.path().join("d0"), dir.path().join("d1")],
            "127.0.0.1-19999",
        ))
        .unwrap();
        Arc::new(FaultyTier::new(inner))
    }

    fn batch(id: i64) -> BlockBatch {
        BlockBatch::new(vec![test_block(id, 0, payload(id as u64, 128))])
    }

    #[tokio::test]
    async fn passes_conformance_when_no_fault_is_armed() {
        let dir = tempfile::tempdir().unwrap();
        conformance::run_all(faulty(&dir).as_ref()).await;
    }

    #[tokio::test]
    async fn injected_failures_never_reach_the_inner_tier() {
        let dir = tempfile::tempdir().unwrap();
        let t = faulty(&dir);
        let p = part(&AppId::parse("faulty").unwrap(), 0, 0);
        t.fail_next_appends(2);
        for id in 0..2 {
            let err = t.append(&p, &batch(id)).await.unwrap_err();
            assert!(err.is_retryable(), "{err}");
        }
        t.append(&p, &batch(2)).await.unwrap();
        t.fail_all_appends(true);
        assert!(t.append(&p, &batch(3)).await.is_err());
        t.fail_all_appends(false);
        t.append(&p, &batch(4)).await.unwrap();
        assert_eq!((t.append_calls(), t.failed_appends()), (5, 3));
        let got = conformance::read_back(t.inner().as_ref(), &p).await;
        let ids: Vec<i64> = got.iter().map(|b| b.block_id).collect();
        assert_eq!(ids, vec![2, 4]);
    }

    #[tokio::test]
    async fn stalled_appends_wait_for_release() {
        let dir = tempfile::tempdir().unwrap();
        let t = faulty(&dir);
        let p = part(&AppId::parse("faulty-stall").unwrap(), 0, 0);
        t.stall_appends();
        let task = {
            let t = Arc::clone(&t);
            let p = p.clone();
            tokio::spawn(async move { t.append(&p, &batch(1)).await })
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while t.stalled_appends() == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "append never stalled"
            );
            tokio::task::yield_now().await;
        }
        assert!(t.read_index(&p).await.unwrap().index.is_empty());
        t.release_appends();
        task.await.unwrap().unwrap();
        assert_eq!(t.stalled_appends(), 0);
        assert_eq!(conformance::read_back(t.as_ref(), &p).await.len(), 1);
    }

    #[tokio::test]
    async fn health_can_be_forced_bad() {
        let dir = tempfile::tempdir().unwrap();
        let t = faulty(&dir);
        assert!(t.health().writable);
        t.set_unhealthy(true);
        assert!(!t.health().writable);
        t.set_unhealthy(false);
        assert!(t.health().writable);
        assert_eq!(t.kind(), TierKind::LocalFile);
    }
}
