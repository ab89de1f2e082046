//! Memory accounting: the write budget (the one owner of capacity, reservations and usage),
//! require-buffer tickets that expire, and the separate read budget.

pub mod budget;
pub mod read_budget;
pub mod tickets;

#[cfg(test)]
mod progress_tests;

pub use budget::{Charge, Claim, FlushCharge, MemoryBudget, MemorySnapshot, Reservation, Tenant};
pub use read_budget::{ReadBudget, ReadPermit, ReadUse};
pub use tickets::Tickets;
