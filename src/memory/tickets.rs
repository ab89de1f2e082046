//! Require-buffer tickets: `requireBufferId → Reservation`, single use, expiring after
//! `buffer_ticket_timeout` (Uniffle's `rss.server.preAllocation.expired`, 20 s).
//!
//! The reservation inside a ticket is released exactly once: when the send takes it, when the
//! sweeper expires it, or when the app is purged — whichever comes first drops it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::budget::Reservation;
use crate::error::{Error, Result};
use crate::ids::AppId;
use crate::periodic::Schedule;

struct Ticket {
    /// `None` for legacy (0.6) clients that send no app id.
    app: Option<AppId>,
    reservation: Reservation,
    expires_at: Instant,
}

/// The ticket table. Ids come from one counter starting at 1, as in Java.
pub struct Tickets {
    next_id: AtomicI64,
    timeout: Duration,
    table: Mutex<HashMap<i64, Ticket>>,
    expired_total: AtomicU64,
}

impl Tickets {
    /// A table whose tickets live `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Tickets {
            next_id: AtomicI64::new(1),
            timeout,
            table: Mutex::new(HashMap::new()),
            expired_total: AtomicU64::new(0),
        }
    }

    /// Stores a reservation and returns its `requireBufferId` (≥ 1).
    pub fn issue(&self, app: Option<AppId>, reservation: Reservation) -> i64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let ticket = Ticket {
            app,
            reservation,
            expires_at: Instant::now() + self.timeout,
        };
        self.table.lock().insert(id, ticket);
        id
    }

    /// Takes a ticket for a send. Unknown, already used, expired, or belonging to another app
    /// → `TicketNotFound` (`INTERNAL_ERROR`: the client re-requires and resends).
    pub fn take(&self, id: i64, app: &AppId) -> Result<Reservation> {
        let not_found = || Error::TicketNotFound {
            ticket_id: id,
            app_id: app.to_string(),
        };
        let ticket = {
            let mut table = self.table.lock();
            match table.get(&id) {
                Some(t) if t.app.as_ref().is_none_or(|a| a == app) => table.remove(&id),
                _ => None,
            }
        }
        .ok_or_else(not_found)?;
        if ticket.expires_at <= Instant::now() {
            self.expired_total.fetch_add(1, Ordering::Relaxed);
            return Err(not_found());
        }
        Ok(ticket.reservation)
    }

    /// Drops every expired ticket (their bytes return to the budget); returns how many.
    pub fn sweep(&self) -> usize {
        let now = Instant::now();
        let expired: Vec<Ticket> = {
            let mut table = self.table.lock();
            let ids: Vec<i64> = table
                .iter()
                .filter(|(_, t)| t.expires_at <= now)
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| table.remove(id)).collect()
        };
        // Reservations are dropped here, outside the table lock.
        self.expired_total
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        expired.len()
    }

    /// Drops every ticket of `app`; returns how many.
    pub fn purge_app(&self, app: &AppId) -> usize {
        let removed: Vec<Ticket> = {
            let mut table = self.table.lock();
            let ids: Vec<i64> = table
                .iter()
                .filter(|(_, t)| t.app.as_ref() == Some(app))
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| table.remove(id)).collect()
        };
        removed.len()
    }

    /// Outstanding tickets.
    pub fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// True when no ticket is outstanding.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tickets that expired before use since start (metric `total_expired_preAllocated_buffer_num`).
    pub fn expired_total(&self) -> u64 {
        self.expired_total.load(Ordering::Relaxed)
    }

    /// Runs [`Tickets::sweep`] on `schedule`.
    pub fn spawn_sweeper(self: &Arc<Self>, schedule: Schedule) {
        let tickets = Arc::clone(self);
        schedule.run(move || {
            let n = tickets.sweep();
            if n > 0 {
                tracing::debug!(expired = n, "expired require-buffer tickets");
            }
            std::future::ready(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryBudget;

    fn app(s: &str) -> AppId {
        AppId::parse(s).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn tickets_are_single_use_and_expire() {
        let budget = MemoryBudget::new(1000, 0.8, 0.2);
        let tickets = Tickets::new(Duration::from_secs(20));
        let a = app("a");
        let id = tickets.issue(Some(a.clone()), budget.try_reserve(100).unwrap());
        assert!(id >= 1);
        assert!(tickets.take(id, &app("b")).is_err(), "another app's ticket");
        let r = tickets.take(id, &a).unwrap();
        assert!(tickets.take(id, &a).is_err(), "single use");
        drop(r);

        let id = tickets.issue(Some(a.clone()), budget.try_reserve(100).unwrap());
        tokio::time::advance(Duration::from_secs(21)).await;
        assert_eq!(budget.snapshot().reserved, 100, "not yet swept");
        assert!(tickets.take(id, &a).is_err(), "expired");
        assert_eq!(
            budget.snapshot().reserved,
            0,
            "expired ticket released on take"
        );

        let _id = tickets.issue(Some(a.clone()), budget.try_reserve(100).unwrap());
        tokio::time::advance(Duration::from_secs(21)).await;
        assert_eq!(tickets.sweep(), 1);
        assert_eq!(budget.snapshot().reserved, 0);
        assert_eq!(tickets.expired_total(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn sweeper_task_releases_expired_reservations() {
        let budget = MemoryBudget::new(1000, 0.8, 0.2);
        let tickets = Arc::new(Tickets::new(Duration::from_secs(20)));
        let every = Schedule::fresh(Duration::from_secs(10));
        tickets.spawn_sweeper(every.clone());
        tickets.issue(Some(app("a")), budget.try_reserve(300).unwrap());
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(budget.snapshot().reserved, 0);
        assert!(tickets.is_empty());
        every.end().await;
    }

    #[test]
    fn purge_app_drops_only_that_app() {
        let budget = MemoryBudget::new(1000, 0.8, 0.2);
        let tickets = Tickets::new(Duration::from_secs(20));
        tickets.issue(Some(app("a")), budget.try_reserve(100).unwrap());
        tickets.issue(Some(app("b")), budget.try_reserve(100).unwrap());
        assert_eq!(tickets.purge_app(&app("a")), 1);
        assert_eq!(budget.snapshot().reserved, 100);
    }
}
