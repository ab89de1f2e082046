//! `MemoryBudget`: the sole owner of write-memory counters. Every byte is moved between
//! counters by an RAII value, so each byte is released exactly once, on every path.
//!
//! ```text
//! try_reserve ─▶ Reservation ──commit──▶ Charge ──start_flush──▶ FlushCharge ──drop──▶ free
//!      (reserved)                 (used)                  (used + in_flush)
//! ```
//! Invariant (checked under the lock): `reserved + used <= capacity`. `requireBuffer` fails
//! with `NO_BUFFER` instead of ever crossing it, which is what bounds memory under any load.
//!
//! Progress: a refused reservation is also a demand for room. The spiller's target
//! ([`MemoryBudget::next_spill`]) covers it, so a request that cannot fit below the high
//! watermark makes the server spill instead of waiting for a watermark spill that would never
//! start (issue 34: 51 MB cached under a 54 MB high mark, 16 MB requests refused for good). A
//! waiting request may hold the one [`Claim`]: while it is unserved, other reservations must
//! leave its bytes free, so the room its spill makes is not taken by later, smaller requests.
//! The claim goes to the oldest waiter by rank ([`Claim::rank_by`]): a request whose app was
//! refused earlier, and came back after its client's back-off, takes it from a younger one.
//!
//! Tenants (issue 50): every reservation of an app carries its [`Tenant`], which counts what
//! the app holds (reserved and used). Below the high watermark any app may take what is free.
//! Past it, while another app waits for memory, an app already holding more than its share
//! (by default the capacity divided by the apps holding or waiting for memory, never below an
//! eighth of it) is refused first, without taking the claim: the band between the high watermark and the capacity is left to the apps
//! under their share, so one heavy writer cannot make every small app wait behind its spills.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::error::{Error, Result};

/// A point-in-time view of the counters, for heartbeats, metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemorySnapshot {
    /// Configured capacity.
    pub capacity: u64,
    /// Outstanding `requireBuffer` reservations.
    pub reserved: u64,
    /// Bytes of cached blocks, including those being spilled.
    pub used: u64,
    /// Part of `used` handed to the spiller and not yet durable.
    pub in_flush: u64,
    /// Spill starts when `used - in_flush` exceeds this.
    pub high_watermark: u64,
    /// A watermark spill goes down to this.
    pub low_watermark: u64,
    /// Bytes held back for the waiting request that holds the [`Claim`] (0: none).
    pub claimed: u64,
    /// The largest request refused since the spiller last took its target.
    pub wanted: u64,
    /// A request was refused for its app's share since the spiller last took its target:
    /// the spill goes down to the low watermark even when the request would fit. Without it
    /// an app refused for its share below the capacity could wait for a spill that never
    /// starts (nothing is over the high watermark but its own request).
    pub share_wanted: bool,
    /// Apps holding memory, or refused and not served since ([`Tenant`]).
    pub tenants: u64,
    /// Requests refused since start because their app held more than its share while memory
    /// was past the high watermark.
    pub share_refused: u64,
}

impl MemorySnapshot {
    /// `capacity - reserved - used`: what a new reservation may take (heartbeat
    /// `availableMemory`).
    pub fn available(&self) -> u64 {
        self.capacity.saturating_sub(self.reserved + self.used)
    }

    /// Whether memory is on its way out: a spill in flight, or one the spiller is about to
    /// start. A request refused for room may then wait for it.
    pub fn spill_under_way(&self) -> bool {
        self.in_flush > 0 || self.spill_target() > 0
    }

    /// Bytes the spiller should hand out now: down to the low watermark once unflushed bytes
    /// pass the high one, and, while a request is refused, enough that it fits once the
    /// spills in flight and this one are durable (never less than down to the low
    /// watermark, so one refusal frees room for the next requests too). Never more than is
    /// unflushed.
    pub fn spill_target(&self) -> u64 {
        let unflushed = self.unflushed();
        let down_to_low = unflushed.saturating_sub(self.low_watermark);
        let mut target = if unflushed > self.high_watermark {
            down_to_low
        } else {
            0
        };
        if self.share_wanted {
            target = target.max(down_to_low);
        }
        let demand = self.claimed + self.wanted;
        if demand > 0 {
            let missing = (self.reserved + self.used + demand).saturating_sub(self.capacity);
            let shortfall = missing.saturating_sub(self.in_flush);
            if shortfall > 0 {
                target = target.max(shortfall).max(down_to_low);
            }
        }
        target.min(unflushed)
    }

    /// Cached bytes not yet handed to the spiller.
    pub fn unflushed(&self) -> u64 {
        self.used.saturating_sub(self.in_flush)
    }
}

#[derive(Default)]
struct Counters {
    reserved: u64,
    used: u64,
    in_flush: u64,
    /// The watermarks in bytes. Under the same lock as the counters: they change at runtime
    /// (Java's buffer manager listens for its watermark percentages), and a snapshot must
    /// never pair a new high mark with an old low one.
    high: u64,
    low: u64,
    /// The [`Claim`] that holds `claimed` bytes back (0: none). One at a time: the oldest
    /// waiter, so requests are served in turn instead of the largest one starving.
    claimant: u64,
    /// The claimant's rank ([`Claim::rank_by`]): an older waiter (lower rank) takes the claim.
    claimant_rank: u64,
    claimed: u64,
    /// Largest refused request not yet seen by the spiller (see [`MemoryBudget::next_spill`]).
    wanted: u64,
    /// See [`MemorySnapshot::share_wanted`].
    share_wanted: bool,
    /// Tenants present: holding bytes, or waiting (refused and not served since).
    tenants: u64,
    /// Tenants waiting.
    waiting_tenants: u64,
    /// The share of the capacity one app may hold while memory is past the high watermark;
    /// `None`: a fair share, the capacity divided by the tenants present.
    app_share: Option<f64>,
    share_refused: u64,
}

impl Counters {
    fn snapshot(&self, capacity: u64) -> MemorySnapshot {
        MemorySnapshot {
            capacity,
            reserved: self.reserved,
            used: self.used,
            in_flush: self.in_flush,
            high_watermark: self.high,
            low_watermark: self.low,
            claimed: self.claimed,
            wanted: self.wanted,
            share_wanted: self.share_wanted,
            tenants: self.tenants,
            share_refused: self.share_refused,
        }
    }

    /// Applies `change` to `tenant`'s counters, keeping the counts of tenants present and
    /// waiting exact.
    fn on_tenant(&mut self, tenant: &TenantInner, change: impl FnOnce(&TenantInner)) {
        let (present, waiting) = (tenant.present(), tenant.waiting.load(Relaxed));
        change(tenant);
        match (present, tenant.present()) {
            (false, true) => self.tenants += 1,
            (true, false) => self.tenants -= 1,
            _ => {}
        }
        match (waiting, tenant.waiting.load(Relaxed)) {
            (false, true) => self.waiting_tenants += 1,
            (true, false) => self.waiting_tenants -= 1,
            _ => {}
        }
    }

    /// When `tenant` must be refused for its share: memory would pass the high watermark with
    /// this request, another app is waiting for memory (refused and not served since), and
    /// the app already holds more than its share (or would with this request; an app holding
    /// nothing is never refused for its share). Returns the share and the tenants it was
    /// divided among.
    ///
    /// Only while another app waits: an app over its share gives up its place in line (the
    /// claim), and without someone to give it to, its own requests would lose the order that
    /// keeps each of them from starving (the tenants curve's heavy writer, alone once the
    /// small apps were done, had one request refused for 30 s).
    fn over_share(
        &self,
        capacity: u64,
        tenant: &TenantInner,
        len: u64,
        held_back: u64,
    ) -> Option<(u64, u64)> {
        let held = tenant.held.load(Relaxed);
        let present = self.tenants + u64::from(!tenant.present());
        let others_waiting = self.waiting_tenants > u64::from(tenant.waiting.load(Relaxed));
        if held == 0 || !others_waiting || self.reserved + self.used + held_back + len <= self.high
        {
            return None;
        }
        let share = match self.app_share {
            Some(ratio) if ratio >= 1.0 => return None,
            Some(ratio) => (capacity as f64 * ratio) as u64,
            None => capacity / present.min(FAIR_SHARE_FLOOR),
        };
        (held + len > share).then_some((share, present))
    }
}

/// The fair share is never less than the capacity divided by this. Many apps of equal size
/// each hold more than `capacity / apps` (one request of each can be larger than that), and
/// refusing all of them for a share only spills more and serves them later (`curves
/// backpressure`, 2,000 apps over 64 MiB: the longest wait 17-21 s against 7-12 s without a
/// share). An app holding an eighth of the memory or less cannot take it from the others.
const FAIR_SHARE_FLOOR: u64 = 8;

/// What one app holds in the budget. Its counters change only under the budget's lock (so
/// the count of tenants present stays exact); they are atomics so a reader outside the lock
/// (metrics) needs none.
struct TenantInner {
    budget: Arc<Inner>,
    /// Reserved and used bytes of this app.
    held: AtomicU64,
    /// Refused and not served since: it counts among the tenants sharing memory even while
    /// it holds nothing (a small app's first request is what memory is contended for).
    waiting: AtomicBool,
}

impl TenantInner {
    fn present(&self) -> bool {
        self.held.load(Relaxed) > 0 || self.waiting.load(Relaxed)
    }
}

impl Drop for TenantInner {
    fn drop(&mut self) {
        // Every reservation and charge holds a handle, so nothing is held any more; a tenant
        // that was still waiting (its app ended while refused) leaves the count here.
        if self.waiting.load(Relaxed) {
            let mut c = self.budget.counters.lock();
            c.tenants -= 1;
            c.waiting_tenants -= 1;
        }
    }
}

/// One app's handle on the budget ([`MemoryBudget::tenant`]): its reservations, and the
/// charges and flush charges made from them, count against it until they are released.
#[derive(Clone)]
pub struct Tenant {
    inner: Arc<TenantInner>,
}

impl Tenant {
    /// Bytes the app holds in memory: reserved for coming sends, and cached.
    pub fn held(&self) -> u64 {
        self.inner.held.load(Relaxed)
    }
}

struct Inner {
    capacity: u64,
    counters: Mutex<Counters>,
    /// Woken when unflushed bytes pass the high watermark; the spiller waits on it.
    over_high: Notify,
    /// Woken when reserved or used bytes go down, so a `requireBuffer` waiting for room retries
    /// the moment a spill completes instead of after a client back-off. One waiter at a time:
    /// a waiter that gets its reservation passes the turn on ([`MemoryBudget::pass_on`]), so
    /// a release wakes as many waiters as it can serve instead of all of them.
    freed: Notify,
    /// Woken with `freed` on every release, waited on by the claimant only: `freed` wakes one
    /// waiter, and when that is not the claimant it cannot take the claimed bytes.
    freed_for_claimant: Notify,
    next_claim: std::sync::atomic::AtomicU64,
}

/// Cheap-to-clone handle on the write budget.
///
/// A `parking_lot::Mutex` guards the three counters: the critical sections are a few
/// additions, nothing inside awaits, and one lock keeps the invariant exact (atomics would
/// need a CAS loop over two counters).
#[derive(Clone)]
pub struct MemoryBudget {
    inner: Arc<Inner>,
}

impl MemoryBudget {
    /// A budget of `capacity` bytes spilling above `high_ratio` down to `low_ratio`.
    pub fn new(capacity: u64, high_ratio: f64, low_ratio: f64) -> Self {
        MemoryBudget {
            inner: Arc::new(Inner {
                capacity,
                counters: Mutex::new(Counters {
                    high: (capacity as f64 * high_ratio) as u64,
                    low: (capacity as f64 * low_ratio) as u64,
                    ..Counters::default()
                }),
                over_high: Notify::new(),
                freed: Notify::new(),
                freed_for_claimant: Notify::new(),
                next_claim: std::sync::atomic::AtomicU64::new(1),
            }),
        }
    }

    /// Reserves `len` bytes for a coming send, or answers `NO_BUFFER` (back-pressure). A
    /// refusal is also a demand for room: it wakes the spiller (see [`MemoryBudget::next_spill`]).
    /// The bytes count against no tenant (legacy clients that send no app id, and tests).
    pub fn try_reserve(&self, len: u64) -> Result<Reservation> {
        self.reserve_for(len, None, None)
    }

    /// [`MemoryBudget::try_reserve`] for a request that waits for room under `claim`.
    pub fn try_reserve_claimed(&self, len: u64, claim: &Claim) -> Result<Reservation> {
        self.reserve_for(len, None, Some(claim))
    }

    /// Reserves `len` bytes for `tenant`'s coming send. Past the high watermark, while
    /// another tenant waits, a tenant over its share is refused (see the module doc). Under `claim`, a request refused for
    /// room takes the claim when none is held (or an older one than the holder's), so the
    /// room the spill makes is kept for it; a request refused for its share never does.
    pub fn reserve_for(
        &self,
        len: u64,
        tenant: Option<&Tenant>,
        claim: Option<&Claim>,
    ) -> Result<Reservation> {
        let result = self.reserve(len, tenant, claim);
        if result.is_err() {
            if let Some(claim) = claim {
                claim.refused.store(true, Relaxed);
            }
        }
        result
    }

    fn reserve(
        &self,
        len: u64,
        tenant: Option<&Tenant>,
        claim: Option<&Claim>,
    ) -> Result<Reservation> {
        let capacity = self.inner.capacity;
        let mut c = self.inner.counters.lock();
        let claim = claim.map(|claim| (claim.id, claim.rank.load(Relaxed)));
        let mine = claim.is_some_and(|(id, _)| id == c.claimant);
        let held_back = if mine { 0 } else { c.claimed };
        let handle = tenant;
        let tenant = tenant.map(|t| &*t.inner);
        let over_share = tenant.and_then(|t| c.over_share(capacity, t, len, held_back));
        if over_share.is_some() || c.reserved + c.used + held_back + len > capacity {
            if let Some(t) = tenant {
                c.on_tenant(t, |t| t.waiting.store(true, Relaxed));
            }
            let reason = match over_share {
                Some((share, tenants)) => {
                    c.share_refused += 1;
                    if mine {
                        // Over its share it may not keep memory held back for it: its bytes
                        // stay a demand for room, the next waiter may take the claim.
                        c.wanted = c.wanted.max(c.claimed);
                        c.claimant = 0;
                        c.claimant_rank = 0;
                        c.claimed = 0;
                    }
                    c.share_wanted = true;
                    let held = tenant.map_or(0, |t| t.held.load(Relaxed));
                    let of = match c.app_share {
                        Some(ratio) => format!("quota.app_memory_share {ratio} of {capacity}"),
                        None if tenants > FAIR_SHARE_FLOOR => format!(
                            "a fair share of {tenants} apps, never below {capacity} / {FAIR_SHARE_FLOOR}"
                        ),
                        None => format!("a fair share: {capacity} / {tenants} apps"),
                    };
                    format!(
                        "No Buffer For Regular Partition, requireSize: {len}: memory is past its high watermark {} and this app holds {held} bytes, more than its share {share} ({of}); apps under their share go first",
                        c.high
                    )
                }
                None => {
                    match claim {
                        Some((id, rank))
                            if c.claimant == 0 || (!mine && rank < c.claimant_rank) =>
                        {
                            // Taken from a younger claimant: its bytes stay a demand for room
                            // (it is still waiting, and retries as an ordinary waiter).
                            if c.claimant != 0 {
                                c.wanted = c.wanted.max(c.claimed);
                            }
                            c.claimant = id;
                            c.claimant_rank = rank;
                            c.claimed = len;
                        }
                        Some(_) if mine => c.claimed = len,
                        _ => c.wanted = c.wanted.max(len),
                    }
                    format!(
                        "No Buffer For Regular Partition, requireSize: {len}, capacity: {capacity}, reserved: {}, used: {}, held for an earlier request: {held_back}",
                        c.reserved, c.used
                    )
                }
            };
            let spill = c.snapshot(capacity).spill_target() > 0;
            drop(c);
            if spill {
                self.inner.over_high.notify_one();
            }
            return Err(Error::NoBuffer { reason });
        }
        if mine {
            c.claimant = 0;
            c.claimant_rank = 0;
            c.claimed = 0;
        }
        c.reserved += len;
        if let Some(t) = tenant {
            c.on_tenant(t, |t| {
                t.held.fetch_add(len, Relaxed);
                t.waiting.store(false, Relaxed);
            });
        }
        Ok(Reservation {
            budget: self.clone(),
            bytes: len,
            tenant: handle.cloned(),
        })
    }

    /// A claim handle for one waiting request (it holds nothing until a refusal under it).
    pub fn claim(&self) -> Claim {
        let id = self
            .inner
            .next_claim
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Claim {
            budget: self.clone(),
            refused: std::sync::atomic::AtomicBool::new(false),
            id,
            rank: std::sync::atomic::AtomicU64::new(id),
        }
    }

    /// A new tenant (one per app) whose reservations this budget counts.
    pub fn tenant(&self) -> Tenant {
        Tenant {
            inner: Arc::new(TenantInner {
                budget: Arc::clone(&self.inner),
                held: AtomicU64::new(0),
                waiting: AtomicBool::new(false),
            }),
        }
    }

    /// The share of the capacity one app may hold while memory is past the high watermark
    /// (`quota.app_memory_share`); `None`: a fair share, the capacity divided by the apps
    /// holding or waiting for memory. `Some(1.0)` never refuses for a share.
    pub fn set_app_share(&self, share: Option<f64>) {
        self.inner.counters.lock().app_share = share;
    }

    /// Current counters.
    pub fn snapshot(&self) -> MemorySnapshot {
        self.inner.counters.lock().snapshot(self.inner.capacity)
    }

    /// Bytes the spiller should hand out now ([`MemorySnapshot::spill_target`]). It takes
    /// the record of refused requests: a request still refused after this spill records
    /// itself again, and one that gave up stops asking for room.
    pub fn next_spill(&self) -> u64 {
        let mut c = self.inner.counters.lock();
        let target = c.snapshot(self.inner.capacity).spill_target();
        c.wanted = 0;
        c.share_wanted = false;
        target
    }

    /// Waits until a commit pushes unflushed bytes over the high watermark, or a refused
    /// request asks for room.
    pub async fn spill_wanted(&self) {
        self.inner.over_high.notified().await
    }

    /// New watermarks, as fractions of the capacity (runtime reconfiguration); wakes the
    /// spiller when memory is already over the new high mark.
    pub fn set_watermarks(&self, high_ratio: f64, low_ratio: f64) {
        let over = {
            let mut c = self.inner.counters.lock();
            c.high = (self.inner.capacity as f64 * high_ratio) as u64;
            c.low = (self.inner.capacity as f64 * low_ratio) as u64;
            c.used.saturating_sub(c.in_flush) > c.high
        };
        if over {
            self.inner.over_high.notify_one();
        }
    }

    /// Configured capacity.
    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    /// A future that completes at the next release of memory. Create it (and `enable` it)
    /// before the reservation attempt it follows, so a release in between is not missed.
    pub fn freed(&self) -> Notified<'_> {
        self.inner.freed.notified()
    }

    /// Like [`MemoryBudget::freed`], for the waiter that holds the claim: woken by every
    /// release too, whichever waiter `freed` wakes.
    pub fn freed_for_claimant(&self) -> Notified<'_> {
        self.inner.freed_for_claimant.notified()
    }

    /// Wakes the next waiter of [`MemoryBudget::freed`]: called by a waiter that got its
    /// reservation, because the release that woke it may have room for more than one.
    pub fn pass_on(&self) {
        self.inner.freed.notify_one();
    }

    fn released(&self) {
        self.inner.freed.notify_one();
        self.inner.freed_for_claimant.notify_one();
    }

    fn release_reserved(&self, bytes: u64, tenant: Option<&Tenant>) {
        if bytes > 0 {
            {
                let mut c = self.inner.counters.lock();
                c.reserved -= bytes;
                Self::release_tenant(&mut c, tenant, bytes);
            }
            self.released();
        }
    }

    fn release_used(&self, bytes: u64, flushing: bool, tenant: Option<&Tenant>) {
        if bytes > 0 {
            {
                let mut c = self.inner.counters.lock();
                c.used -= bytes;
                if flushing {
                    c.in_flush -= bytes;
                }
                Self::release_tenant(&mut c, tenant, bytes);
            }
            self.released();
        }
    }

    fn release_tenant(c: &mut Counters, tenant: Option<&Tenant>, bytes: u64) {
        if let Some(t) = tenant {
            c.on_tenant(&t.inner, |t| {
                t.held.fetch_sub(bytes, Relaxed);
            });
        }
    }

    /// Moves `bytes` held by `from` to `to` (a charge merged into another app's: only a
    /// legacy client's reservation, which has no tenant, can meet a tenant's in one buffer).
    fn move_held(&self, bytes: u64, from: Option<&Tenant>, to: Option<&Tenant>) {
        let same = match (from, to) {
            (Some(a), Some(b)) => Arc::ptr_eq(&a.inner, &b.inner),
            (None, None) => true,
            _ => false,
        };
        if bytes == 0 || same {
            return;
        }
        let mut c = self.inner.counters.lock();
        Self::release_tenant(&mut c, from, bytes);
        if let Some(t) = to {
            c.on_tenant(&t.inner, |t| {
                t.held.fetch_add(bytes, Relaxed);
            });
        }
    }
}

/// One waiting request's place in line for room (see the module doc). Dropping it gives the
/// claimed bytes back and lets the next waiter try.
pub struct Claim {
    budget: MemoryBudget,
    id: u64,
    /// Set by a refusal under this claim, the only way it can come to be held: a request
    /// granted at once (the common case) never takes the budget's lock for its claim.
    refused: std::sync::atomic::AtomicBool,
    /// Its place in line: its own id, or an earlier claim's ([`Claim::rank_by`]).
    rank: std::sync::atomic::AtomicU64,
}

impl Claim {
    /// Its id: claims are numbered in the order they were made, so an id is also a time.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// This claim's place in line: its own id, or the earlier `rank` when lower. The caller
    /// passes the id of the first refused claim of the same app that has not been served
    /// since: a client refused with `NO_BUFFER` backs off and comes back as a new request,
    /// and without its rank it would queue behind every request that arrived meanwhile and
    /// could be overtaken again and again. Set before the first reservation attempt.
    pub fn rank_by(&self, rank: u64) {
        self.rank
            .fetch_min(rank.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Its place in line ([`Claim::rank_by`]).
    pub fn rank(&self) -> u64 {
        self.rank.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a refusal under this claim happened, so that it may be held.
    pub fn may_be_held(&self) -> bool {
        self.refused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether this request is the one memory is held back for.
    pub fn is_held(&self) -> bool {
        self.may_be_held() && self.budget.inner.counters.lock().claimant == self.id
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.may_be_held() {
            return;
        }
        let held = {
            let mut c = self.budget.inner.counters.lock();
            let held = c.claimant == self.id;
            if held {
                // Still a demand for room: the client retries after its back-off, and the
                // spill for it must go on (with `require_buffer_wait = 0s` the claim lives
                // only as long as the refused call).
                c.wanted = c.wanted.max(c.claimed);
                c.claimant = 0;
                c.claimant_rank = 0;
                c.claimed = 0;
            }
            held
        };
        if held {
            // Given up without being served: the next waiter may take the room or the claim.
            self.budget.pass_on();
        }
    }
}

/// Reserved bytes for a coming send. Dropping it returns them.
#[must_use = "dropping a reservation releases it at once"]
pub struct Reservation {
    budget: MemoryBudget,
    bytes: u64,
    /// The app the bytes count against (`None`: a legacy request without an app id).
    tenant: Option<Tenant>,
}

impl Reservation {
    /// Reserved bytes still held.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Turns `actual` reserved bytes into a [`Charge`] for cached blocks; the rest stays
    /// reserved in `self`. Fails (changing nothing) when the blocks need more than is
    /// reserved: a client may not send more than its ticket covers.
    pub fn commit(&mut self, actual: u64) -> Result<Charge> {
        if actual > self.bytes {
            return Err(Error::bad_request(format!(
                "blocks need {actual} bytes but only {} remain on the requireBuffer ticket",
                self.bytes
            )));
        }
        let notify = {
            let mut c = self.budget.inner.counters.lock();
            c.reserved -= actual;
            c.used += actual;
            // Past the high mark, or bytes a claimant waits for are now spillable.
            c.snapshot(self.budget.inner.capacity).spill_target() > 0
        };
        self.bytes -= actual;
        if notify {
            self.budget.inner.over_high.notify_one();
        }
        Ok(Charge {
            budget: self.budget.clone(),
            bytes: actual,
            tenant: self.tenant.clone(),
        })
    }

    /// Gives back part of the reservation now (the Netty plane returns its frame bytes).
    pub fn release(&mut self, bytes: u64) {
        let bytes = bytes.min(self.bytes);
        self.budget.release_reserved(bytes, self.tenant.as_ref());
        self.bytes -= bytes;
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget
            .release_reserved(self.bytes, self.tenant.as_ref());
    }
}

/// Memory held by cached blocks. Dropping it frees the bytes.
#[must_use = "dropping a charge frees the memory it accounts for"]
pub struct Charge {
    budget: MemoryBudget,
    bytes: u64,
    tenant: Option<Tenant>,
}

impl Charge {
    /// An empty charge on `budget`, to merge others into.
    pub fn empty(budget: &MemoryBudget) -> Self {
        Charge {
            budget: budget.clone(),
            bytes: 0,
            tenant: None,
        }
    }

    /// Bytes held.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Takes over `other`'s bytes (both must be on the same budget). They count against this
    /// charge's app from now on.
    pub fn merge(&mut self, mut other: Charge) {
        debug_assert!(Arc::ptr_eq(&self.budget.inner, &other.budget.inner));
        if self.bytes == 0 && self.tenant.is_none() {
            self.tenant = other.tenant.clone();
        }
        self.budget
            .move_held(other.bytes, other.tenant.as_ref(), self.tenant.as_ref());
        self.bytes += other.bytes;
        other.bytes = 0;
    }

    /// Moves everything into a new charge, leaving this one empty.
    pub fn take(&mut self) -> Charge {
        let bytes = std::mem::take(&mut self.bytes);
        Charge {
            budget: self.budget.clone(),
            bytes,
            tenant: self.tenant.clone(),
        }
    }

    /// Marks the bytes as handed to the spiller (`in_flush`); they stay `used` until the
    /// returned value is dropped after the spill is durable.
    pub fn start_flush(mut self) -> FlushCharge {
        let bytes = std::mem::take(&mut self.bytes);
        self.budget.inner.counters.lock().in_flush += bytes;
        FlushCharge {
            budget: self.budget.clone(),
            bytes,
            tenant: self.tenant.take(),
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget
            .release_used(self.bytes, false, self.tenant.as_ref());
    }
}

/// Memory of blocks being spilled. Dropped once the tier acknowledged the write (or the
/// partition was purged), which frees the bytes.
#[must_use = "dropping a flush charge frees the memory it accounts for"]
pub struct FlushCharge {
    budget: MemoryBudget,
    bytes: u64,
    tenant: Option<Tenant>,
}

impl FlushCharge {
    /// Bytes held.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl Drop for FlushCharge {
    fn drop(&mut self) {
        self.budget
            .release_used(self.bytes, true, self.tenant.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_commit_flush_release_is_exact() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let mut r = b.try_reserve(600).unwrap();
        assert!(
            b.try_reserve(401).is_err(),
            "over capacity must be NO_BUFFER"
        );
        let c = r.commit(500).unwrap();
        assert_eq!(b.snapshot().reserved, 100);
        assert_eq!(b.snapshot().used, 500);
        assert!(r.commit(101).is_err());
        drop(r);
        assert_eq!(b.snapshot().reserved, 0);
        let f = c.start_flush();
        assert_eq!(b.snapshot().in_flush, 500);
        assert_eq!(b.snapshot().unflushed(), 0);
        drop(f);
        assert_eq!(
            b.snapshot(),
            MemorySnapshot {
                capacity: 1000,
                high_watermark: 800,
                low_watermark: 200,
                // The refused request stays on record until the spiller takes it.
                wanted: 401,
                ..Default::default()
            }
        );
        assert_eq!(b.next_spill(), 0, "nothing to spill");
        assert_eq!(b.snapshot().wanted, 0);
    }

    #[test]
    fn spill_target_goes_down_to_low_watermark() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let mut r = b.try_reserve(900).unwrap();
        let _c = r.commit(850).unwrap();
        assert_eq!(b.next_spill(), 650);
    }

    #[test]
    fn an_older_waiter_takes_the_claim_from_a_younger_one() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let full = b.try_reserve(900).unwrap();
        let first = b.claim(); // an app refused earlier, now sleeping its back-off
        let young = b.claim();
        assert!(b.try_reserve_claimed(200, &young).is_err());
        assert!(young.is_held(), "the only waiter holds the claim");
        // The first app's next request: a new claim, ranked by its first refusal.
        let back = b.claim();
        back.rank_by(first.id());
        assert_eq!(back.rank(), first.id());
        assert!(b.try_reserve_claimed(300, &back).is_err());
        assert!(
            back.is_held() && !young.is_held(),
            "the older waiter took the claim"
        );
        assert_eq!(b.snapshot().claimed, 300);
        assert_eq!(
            b.snapshot().wanted,
            200,
            "the younger one's bytes are still wanted"
        );
        // A younger claim cannot take it back.
        assert!(b.try_reserve_claimed(200, &young).is_err());
        assert!(back.is_held());
        drop(full);
        // Room for both: the claimant first, then the other.
        let r = b.try_reserve_claimed(300, &back).unwrap();
        assert_eq!(b.snapshot().claimed, 0);
        let r2 = b.try_reserve_claimed(200, &young).unwrap();
        assert_eq!(b.snapshot().reserved, r.len() + r2.len());
        // A rank never moves a claim behind its own id.
        let late = b.claim();
        late.rank_by(late.id() + 10);
        assert_eq!(late.rank(), late.id());
    }

    #[test]
    fn a_younger_waiter_leaves_the_older_claim_alone() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let _full = b.try_reserve(900).unwrap();
        let old = b.claim();
        let young = b.claim();
        assert!(b.try_reserve_claimed(200, &old).is_err());
        assert!(b.try_reserve_claimed(200, &young).is_err());
        assert!(old.is_held() && !young.is_held());
        drop(old);
        assert_eq!(
            b.snapshot().claimed,
            0,
            "a dropped claim gives its bytes back"
        );
        assert!(b.try_reserve_claimed(200, &young).is_err());
        assert!(young.is_held(), "the next waiter takes the free claim");
    }

    #[test]
    fn merged_charges_release_once() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let mut r = b.try_reserve(300).unwrap();
        let mut c = Charge::empty(&b);
        c.merge(r.commit(100).unwrap());
        c.merge(r.commit(200).unwrap());
        let t = c.take();
        assert_eq!(t.len(), 300);
        drop(c);
        assert_eq!(b.snapshot().used, 300);
        drop(t);
        assert_eq!(b.snapshot().used, 0);
    }

    #[test]
    fn past_the_high_watermark_an_app_over_its_share_is_refused_while_another_waits() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let (heavy, small) = (b.tenant(), b.tenant());
        let mut h1 = b.reserve_for(900, Some(&heavy), None).unwrap();
        // Refused for room: the small app now waits, and memory is contended.
        assert!(b.reserve_for(200, Some(&small), None).is_err());
        assert_eq!(b.snapshot().tenants, 2);
        // 950 would pass the high mark, and 900 held is more than 1000 / 2.
        let claim = b.claim();
        let err = b.reserve_for(50, Some(&heavy), Some(&claim)).unwrap_err();
        let Error::NoBuffer { reason } = err else {
            panic!("{err:?}")
        };
        assert!(
            reason
                .contains("holds 900 bytes, more than its share 500 (a fair share: 1000 / 2 apps)"),
            "{reason}"
        );
        assert!(
            !claim.is_held(),
            "a request over its share never holds room back"
        );
        assert_eq!(b.snapshot().share_refused, 1);
        assert!(b.snapshot().share_wanted);
        // Room comes back: the small app is served first, and waits no more.
        h1.release(200);
        let _s1 = b.reserve_for(200, Some(&small), None).unwrap();
        // With nobody waiting, the heavy app takes what is free past the high mark too.
        let _h2 = b.reserve_for(50, Some(&heavy), None).unwrap();
        assert_eq!(b.snapshot().share_refused, 1);
        // The small app waits again: the heavy one is refused for its share again.
        assert!(b.reserve_for(100, Some(&small), None).is_err());
        assert!(b.reserve_for(10, Some(&heavy), None).is_err());
        assert_eq!(b.snapshot().share_refused, 2);
        // Below the high mark the heavy app takes what is free, waiter or not.
        drop(_s1);
        let _h3 = b.reserve_for(40, Some(&heavy), None).unwrap();
    }

    #[test]
    fn an_app_alone_or_holding_nothing_is_never_refused_for_its_share() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let (heavy, fresh) = (b.tenant(), b.tenant());
        let _h = b.reserve_for(900, Some(&heavy), None).unwrap();
        let _all = b
            .reserve_for(100, Some(&heavy), None)
            .expect("alone, an app may fill the budget");
        // A refusal for room makes the fresh app present: now the heavy one has company.
        assert!(b.reserve_for(10, Some(&fresh), None).is_err());
        assert_eq!(b.snapshot().tenants, 2);
        assert_eq!(b.snapshot().share_refused, 0, "refused for room, not share");
        drop(fresh);
        assert_eq!(
            b.snapshot().tenants,
            1,
            "a dropped waiting tenant leaves the count"
        );
    }

    #[test]
    fn a_configured_share_replaces_the_fair_one() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let (heavy, small) = (b.tenant(), b.tenant());
        let _s = b.reserve_for(10, Some(&small), None).unwrap();
        let _h = b.reserve_for(900, Some(&heavy), None).unwrap();
        assert!(b.reserve_for(100, Some(&small), None).is_err(), "waits");
        b.set_app_share(Some(1.0));
        let _h2 = b.reserve_for(10, Some(&heavy), None).unwrap();
        b.set_app_share(Some(0.1));
        let err = b.reserve_for(10, Some(&heavy), None).unwrap_err();
        assert!(
            err.to_string()
                .contains("quota.app_memory_share 0.1 of 1000"),
            "{err}"
        );
    }

    #[test]
    fn charges_count_against_their_app_until_durable() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let t = b.tenant();
        let mut r = b.reserve_for(300, Some(&t), None).unwrap();
        let mut c = r.commit(200).unwrap();
        drop(r);
        assert_eq!(t.held(), 200, "the unused reservation returned");
        // A legacy client's charge (no app id) merged into the app's buffer counts for it.
        let mut legacy = b.try_reserve(50).unwrap();
        c.merge(legacy.commit(50).unwrap());
        assert_eq!(t.held(), 250);
        let f = c.take().start_flush();
        drop(c);
        assert_eq!(t.held(), 250, "in flush is still held");
        drop(f);
        assert_eq!(t.held(), 0);
        assert_eq!(b.snapshot().tenants, 0);
        assert_eq!(b.snapshot().used + b.snapshot().reserved, 0);
    }

    #[test]
    fn a_share_refusal_makes_the_server_spill_down_to_the_low_watermark() {
        let b = MemoryBudget::new(1000, 0.8, 0.2);
        let (heavy, small) = (b.tenant(), b.tenant());
        let mut r = b.reserve_for(600, Some(&heavy), None).unwrap();
        let _cached = r.commit(300).unwrap();
        assert!(b.reserve_for(500, Some(&small), None).is_err(), "waits");
        b.next_spill();
        assert_eq!(b.snapshot().spill_target(), 0, "under the high watermark");
        // 900 fits the capacity, so only the share refuses it; without a spill for it the
        // heavy app would wait for good.
        assert!(b.reserve_for(300, Some(&heavy), None).is_err());
        assert_eq!(b.next_spill(), 100, "down to the low watermark");
        assert_eq!(b.next_spill(), 0, "taken once");
    }

    #[test]
    fn the_fair_share_is_never_below_an_eighth_of_the_capacity() {
        let b = MemoryBudget::new(1600, 0.5, 0.1);
        let many: Vec<Tenant> = (0..16).map(|_| b.tenant()).collect();
        let _held: Vec<Reservation> = many
            .iter()
            .map(|t| b.reserve_for(50, Some(t), None).unwrap())
            .collect();
        let late = b.tenant();
        assert!(b.reserve_for(900, Some(&late), None).is_err(), "waits");
        // 800 held by 16 apps: past the high mark, but 50 + 100 is under 1600 / 8.
        let _more = b.reserve_for(100, Some(&many[0]), None).unwrap();
        let err = b.reserve_for(100, Some(&many[0]), None).unwrap_err();
        assert!(
            err.to_string().contains(
                "more than its share 200 (a fair share of 17 apps, never below 1600 / 8)"
            ),
            "{err}"
        );
    }
}
