//! Stamps: the hybrid clock of the store (microseconds since the Unix
//! epoch, raised to stay unique and increasing).

use std::sync::atomic::{AtomicU64, Ordering};

/// Stamps below this (2001-01-01T00:00:00Z in microseconds) are not clock
/// readings: a store written by a release whose stamps were a plain counter.
pub(crate) const CLOCK_STAMPS_FROM: u64 = 978_307_200_000_000;

/// `t` in microseconds since the Unix epoch (0 before it).
pub fn clock_micros(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Issues a stamp from `counter` (which holds the next stamp): the current
/// time in microseconds since the Unix epoch, or the previous stamp + 1 when
/// that is larger (a clock that stood still or went back). Stamps are
/// unique and increasing and also say when they were issued
/// ([`Entry::last_used_at`]); the counter ends one past the stamp returned.
pub(crate) fn issue_stamp(counter: &AtomicU64) -> u64 {
    let now = clock_micros(std::time::SystemTime::now());
    match counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.max(now).saturating_add(1)))
    {
        Ok(prev) | Err(prev) => prev.max(now),
    }
}
