//! The one wall clock: milliseconds since the Unix epoch, as Java's `System.currentTimeMillis()`
//! (heartbeats, REST times, metric stamps, journal records, the clients' `timestamp` fields).
//! Durations and deadlines use `Instant`, never this.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch now; 0 if the clock is before 1970. An `i64` because that is
/// what the wire and Java carry; `.unsigned_abs()` gives the journal's `u64`.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_after_2020_and_moves_forward() {
        let a = super::now_ms();
        assert!(a > 1_577_836_800_000, "{a}");
        assert!(super::now_ms() >= a);
    }
}
