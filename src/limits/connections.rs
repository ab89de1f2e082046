//! Who may hold a connection: one table per plane that admits every accepted socket, keeps the
//! totals under `limits.max_connections` / `max_connections_per_address` by closing the
//! longest-idle connection when a newcomer arrives, and closes connections that sit idle past
//! `limits.idle_timeout` (or, on gRPC, that stall inside a request past `stall_timeout`).
//!
//! Why accept and then shed rather than stop accepting at the cap: a listener that stops
//! accepting leaves newcomers in the kernel's accept queue, invisible to the server and to
//! the client until its connect times out, while the connections holding the slots may be
//! idle for minutes. Closing an idle connection costs its owner one reconnect on its next
//! request; a newcomer is turned away (closed at once, which clients see as a failed request
//! and retry) only when every connection is inside a request.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::hits::LimitMetrics;

/// The caps and timeouts one plane's table enforces.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Open connections in total.
    pub max_total: usize,
    /// Open connections per client IP.
    pub max_per_address: usize,
    /// Close a connection with no request in flight after this long without traffic.
    pub idle_timeout: Duration,
    /// Close a connection that is sending a response ([`Slot::sending`]) after this long
    /// without traffic: its peer stopped reading. (The Netty handler times its own reads and
    /// writes; requests being handled are never timed, a slow disk is not the peer's fault.)
    pub stall_timeout: Duration,
}

/// How long a connection must have been quiet before it may be closed for a newcomer.
const SHED_MIN_IDLE: Duration = Duration::from_secs(1);

/// One open connection as the table sees it. The connection's owner reports activity and
/// requests in flight, and watches `close`.
#[derive(Debug)]
pub struct Slot {
    id: u64,
    peer: IpAddr,
    /// Milliseconds since the table's epoch at the last byte moved or request boundary.
    last_active_ms: AtomicU64,
    /// Requests in flight on this connection.
    busy: AtomicU32,
    /// Responses being sent, whose progress depends on the peer reading them.
    sending: AtomicU32,
    /// Fired when the table wants this connection gone (shed, idle, stalled, shutdown).
    close: CancellationToken,
    epoch: Instant,
}

impl Slot {
    /// Records traffic now.
    pub fn touch(&self) {
        self.last_active_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Marks a request in flight until the guard drops; traffic is recorded at both ends.
    pub fn busy(self: &Arc<Self>) -> BusyGuard {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.touch();
        BusyGuard(Arc::clone(self))
    }

    /// Marks a response being sent until the guard drops: no traffic for `stall_timeout`
    /// meanwhile closes the connection.
    pub fn sending(self: &Arc<Self>) -> SendingGuard {
        self.sending.fetch_add(1, Ordering::AcqRel);
        self.touch();
        SendingGuard(Arc::clone(self))
    }

    /// Fires when the connection must close.
    pub fn closing(&self) -> &CancellationToken {
        &self.close
    }

    fn idle_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.last_active_ms.load(Ordering::Relaxed))
    }

    fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0
    }
}

/// A request in flight on a [`Slot`].
#[derive(Debug)]
pub struct BusyGuard(Arc<Slot>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response being sent on a [`Slot`].
#[derive(Debug)]
pub struct SendingGuard(Arc<Slot>);

impl Drop for SendingGuard {
    fn drop(&mut self) {
        self.0.sending.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a connection was refused or closed, as logged and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Closed to make room for a newcomer under `max_connections`.
    ShedForTotal,
    /// Closed to make room for a newcomer from the same address.
    ShedForAddress,
    /// A newcomer refused: every connection is inside a request.
    RefusedTotal,
    /// A newcomer refused: every connection of its address is inside a request.
    RefusedAddress,
    /// No traffic and no request for `idle_timeout`.
    Idle,
    /// A request in flight and no traffic for `stall_timeout`.
    Stalled,
}

impl CloseReason {
    /// Counts a connection refused or closed for this reason on `plane`.
    pub fn count_in(self, metrics: &LimitMetrics, plane: &str) {
        let (limit, action) = self.labels();
        metrics.count(plane, limit, action);
    }

    /// The `limit` label and the action, for `total_limit_hits`.
    pub fn labels(self) -> (&'static str, &'static str) {
        match self {
            CloseReason::ShedForTotal => ("max_connections", "shed"),
            CloseReason::ShedForAddress => ("max_connections_per_address", "shed"),
            CloseReason::RefusedTotal => ("max_connections", "refused"),
            CloseReason::RefusedAddress => ("max_connections_per_address", "refused"),
            CloseReason::Idle => ("idle_timeout", "closed"),
            CloseReason::Stalled => ("stall_timeout", "closed"),
        }
    }
}

/// The lease of an admitted connection: holds its place in the table until dropped.
#[derive(Debug)]
pub struct Lease {
    slot: Arc<Slot>,
    table: Arc<ConnectionTable>,
}

impl Lease {
    /// The connection's slot.
    pub fn slot(&self) -> &Arc<Slot> {
        &self.slot
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.table.remove(self.slot.id);
    }
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    open: HashMap<u64, Arc<Slot>>,
    per_address: HashMap<IpAddr, usize>,
}

impl Table {
    fn take(&mut self, id: u64) -> Option<Arc<Slot>> {
        let slot = self.open.remove(&id)?;
        if let Some(n) = self.per_address.get_mut(&slot.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&slot.peer);
            }
        }
        Some(slot)
    }

    /// The connection idle longest, among those of `peer` when given, if it has been idle for
    /// `min_idle_ms`; busy ones never. A connection that moved bytes a moment ago may have a
    /// request on the wire that the server has not parsed yet, and closing it would fail that
    /// request (HTTP/2 clients retry only what a GOAWAY names, which a plain close cannot send).
    fn longest_idle(&self, peer: Option<IpAddr>, now_ms: u64, min_idle_ms: u64) -> Option<u64> {
        self.open
            .values()
            .filter(|s| peer.is_none_or(|p| s.peer == p) && !s.is_busy())
            .max_by_key(|s| s.idle_ms(now_ms))
            .filter(|s| s.idle_ms(now_ms) >= min_idle_ms)
            .map(|s| s.id)
    }
}

/// One plane's open connections.
#[derive(Debug)]
pub struct ConnectionTable {
    plane: &'static str,
    limits: ConnectionLimits,
    table: Mutex<Table>,
    epoch: Instant,
    metrics: Arc<LimitMetrics>,
}

impl ConnectionTable {
    /// An empty table for `plane` ("grpc" or "netty").
    pub fn new(
        plane: &'static str,
        limits: ConnectionLimits,
        metrics: Arc<LimitMetrics>,
    ) -> Arc<Self> {
        Arc::new(ConnectionTable {
            plane,
            limits,
            table: Mutex::new(Table::default()),
            epoch: Instant::now(),
            metrics,
        })
    }

    /// Admits a connection from `peer`, closing the longest-idle connection(s) when a cap is
    /// reached. `Err` names the cap when no connection could make room: the caller closes
    /// the newcomer at once.
    pub fn admit(self: &Arc<Self>, peer: SocketAddr) -> Result<Lease, CloseReason> {
        let ip = canonical(peer.ip());
        let now_ms = self.now_ms();
        let mut shed = Vec::new();
        let slot = {
            let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
            let min_idle_ms = SHED_MIN_IDLE.min(self.limits.idle_timeout).as_millis() as u64;
            if t.open.len() >= self.limits.max_total {
                match t.longest_idle(None, now_ms, min_idle_ms) {
                    Some(id) => shed.extend(t.take(id).map(|s| (s, CloseReason::ShedForTotal))),
                    None => {
                        drop(t);
                        self.count(CloseReason::RefusedTotal, peer);
                        return Err(CloseReason::RefusedTotal);
                    }
                }
            }
            if t.per_address.get(&ip).copied().unwrap_or(0) >= self.limits.max_per_address {
                match t.longest_idle(Some(ip), now_ms, min_idle_ms) {
                    Some(id) => shed.extend(t.take(id).map(|s| (s, CloseReason::ShedForAddress))),
                    None => {
                        drop(t);
                        // Whatever was shed for the total stays closed: it was idle, and its
                        // place goes to the next newcomer.
                        self.close_all(shed, peer);
                        self.count(CloseReason::RefusedAddress, peer);
                        return Err(CloseReason::RefusedAddress);
                    }
                }
            }
            t.next_id += 1;
            let slot = Arc::new(Slot {
                id: t.next_id,
                peer: ip,
                last_active_ms: AtomicU64::new(now_ms),
                busy: AtomicU32::new(0),
                sending: AtomicU32::new(0),
                close: CancellationToken::new(),
                epoch: self.epoch,
            });
            t.open.insert(slot.id, Arc::clone(&slot));
            *t.per_address.entry(ip).or_default() += 1;
            slot
        };
        self.close_all(shed, peer);
        Ok(Lease {
            slot,
            table: Arc::clone(self),
        })
    }

    /// Open connections.
    pub fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .open
            .len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes idle and stalled connections every `period` until
    /// `stop` fires.
    pub fn spawn_sweeper(self: &Arc<Self>, stop: CancellationToken, tracker: &TaskTracker) {
        let this = Arc::clone(self);
        let period = (self.limits.idle_timeout.min(self.limits.stall_timeout) / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(5));
        tracker.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(period) => this.sweep(),
                }
            }
        });
    }

    /// One pass of the sweeper.
    pub fn sweep(&self) {
        let now_ms = self.now_ms();
        let idle_ms = self.limits.idle_timeout.as_millis() as u64;
        let stall_ms = self.limits.stall_timeout.as_millis() as u64;
        let closed: Vec<(Arc<Slot>, CloseReason)> = {
            let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
            let due: Vec<(u64, CloseReason)> = t
                .open
                .values()
                .filter_map(|s| {
                    let quiet = s.idle_ms(now_ms);
                    if s.sending.load(Ordering::Acquire) > 0 {
                        (quiet >= stall_ms).then_some((s.id, CloseReason::Stalled))
                    } else if s.is_busy() {
                        None
                    } else {
                        (quiet >= idle_ms).then_some((s.id, CloseReason::Idle))
                    }
                })
                .collect();
            due.into_iter()
                .filter_map(|(id, why)| t.take(id).map(|s| (s, why)))
                .collect()
        };
        for (slot, why) in closed {
            let (limit, _) = why.labels();
            tracing::info!(
                plane = self.plane,
                peer = %slot.peer,
                limit,
                quiet = ?Duration::from_millis(slot.idle_ms(now_ms)),
                "closing connection"
            );
            why.count_in(&self.metrics, self.plane);
            slot.close.cancel();
        }
    }

    fn close_all(&self, shed: Vec<(Arc<Slot>, CloseReason)>, newcomer: SocketAddr) {
        for (slot, why) in shed {
            let (limit, _) = why.labels();
            tracing::info!(
                plane = self.plane,
                peer = %slot.peer,
                %newcomer,
                limit,
                "connection cap reached: closing the longest-idle connection"
            );
            why.count_in(&self.metrics, self.plane);
            slot.close.cancel();
        }
    }

    fn count(&self, why: CloseReason, peer: SocketAddr) {
        let (limit, _) = why.labels();
        tracing::warn!(
            plane = self.plane,
            %peer,
            limit,
            max_connections = self.limits.max_total,
            max_connections_per_address = self.limits.max_per_address,
            "connection refused: at the cap, and every connection is busy or was active within the last second"
        );
        why.count_in(&self.metrics, self.plane);
    }

    fn remove(&self, id: u64) {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(id);
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

/// IPv4-mapped IPv6 peers count as their IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(total: usize, per: usize) -> Arc<ConnectionTable> {
        ConnectionTable::new(
            "netty",
            ConnectionLimits {
                max_total: total,
                max_per_address: per,
                idle_timeout: Duration::from_millis(200),
                stall_timeout: Duration::from_millis(100),
            },
            Arc::new(LimitMetrics::unregistered()),
        )
    }

    fn peer(last: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, last], port))
    }

    #[test]
    fn at_the_cap_the_longest_idle_goes_and_busy_ones_stay() {
        let t = table(2, 10);
        let a = t.admit(peer(1, 1)).unwrap();
        let b = t.admit(peer(2, 1)).unwrap();
        let _busy = b.slot().busy();
        std::thread::sleep(Duration::from_millis(210));
        // `a` is idle, `b` is inside a request: the newcomer takes `a`'s place.
        let c = t.admit(peer(3, 1)).unwrap();
        assert!(a.slot().closing().is_cancelled());
        assert!(!b.slot().closing().is_cancelled());
        assert_eq!(t.len(), 2);
        // Dropping the shed lease later does not free another place.
        drop(a);
        assert_eq!(t.len(), 2);
        let _busy_c = c.slot().busy();
        assert_eq!(
            t.admit(peer(4, 1)).unwrap_err(),
            CloseReason::RefusedTotal,
            "every connection is busy"
        );
        drop(_busy_c);
        assert_eq!(
            t.admit(peer(4, 1)).unwrap_err(),
            CloseReason::RefusedTotal,
            "active a moment ago: not shed"
        );
        std::thread::sleep(Duration::from_millis(210));
        assert!(t.admit(peer(4, 1)).is_ok());
        assert!(c.slot().closing().is_cancelled());
    }

    #[test]
    fn per_address_cap_sheds_only_that_address() {
        let t = table(10, 2);
        let other = t.admit(peer(9, 1)).unwrap();
        let a1 = t.admit(peer(1, 1)).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let a2 = t.admit(peer(1, 2)).unwrap();
        std::thread::sleep(Duration::from_millis(210));
        a2.slot().touch();
        let a3 = t.admit(peer(1, 3)).unwrap();
        assert!(a1.slot().closing().is_cancelled(), "the idlest of 10.0.0.1");
        std::thread::sleep(Duration::from_millis(210));
        a3.slot().touch();
        assert!(!a2.slot().closing().is_cancelled());
        assert!(!other.slot().closing().is_cancelled());
        // IPv4-mapped IPv6 is the same address.
        let mapped: SocketAddr = "[::ffff:10.0.0.1]:4".parse().unwrap();
        let _a4 = t.admit(mapped).unwrap();
        assert!(a2.slot().closing().is_cancelled());
    }

    #[test]
    fn sweeper_closes_idle_and_stalled() {
        let t = table(10, 10);
        let idle = t.admit(peer(1, 1)).unwrap();
        let stalled = t.admit(peer(2, 1)).unwrap();
        let _req = stalled.slot().busy();
        let _answer = stalled.slot().sending();
        let working = t.admit(peer(4, 1)).unwrap();
        let _handling = working.slot().busy();
        let fresh = t.admit(peer(3, 1)).unwrap();
        std::thread::sleep(Duration::from_millis(120));
        fresh.slot().touch();
        t.sweep();
        assert!(
            !idle.slot().closing().is_cancelled(),
            "idle 120 ms < 200 ms"
        );
        assert!(
            stalled.slot().closing().is_cancelled(),
            "busy, quiet 120 ms > 100 ms"
        );
        std::thread::sleep(Duration::from_millis(100));
        t.sweep();
        assert!(idle.slot().closing().is_cancelled());
        assert!(!fresh.slot().closing().is_cancelled());
        assert!(
            !working.slot().closing().is_cancelled(),
            "a request being handled is never timed"
        );
        assert_eq!(t.len(), 2);
    }
}
