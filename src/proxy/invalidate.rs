//! Invalidation that also covers responses still being stored
//! (RFC 9111 section 4.4).
//!
//! A GET's body is published to the store only after its last byte reached
//! the client, so an unsafe request that succeeds in between (the same
//! client's next request, or another client's) would find nothing to
//! invalidate and the older response would then appear in the cache. Each
//! invalidation is therefore recorded with its time, and a publish for a
//! request sent no later than that is dropped.
//!
//! A read-write gate makes this race-free: [`Invalidations::publish`]
//! checks and inserts under the shared side, [`Invalidations::invalidate`]
//! records and removes under the exclusive side. Either the insert happens
//! before the removal (which then deletes it), or the record is visible to
//! the check (which then skips the insert); no reader ever sees the entry
//! after the unsafe request's response was sent.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

/// Most keys remembered; beyond this the record is cleared and every
/// request sent before the clearing counts as invalidated.
const MAX_KEYS: usize = 4096;

/// Recent invalidations by primary key.
#[derive(Default)]
pub struct Invalidations {
    /// Shared by publishes, exclusive for an invalidation.
    gate: RwLock<()>,
    inner: Mutex<Recent>,
}

#[derive(Default)]
struct Recent {
    /// Primary key -> time of its latest invalidation, ms since the epoch.
    at_ms: HashMap<String, u64>,
    /// Requests sent at or before this time count as invalidated (set when
    /// `at_ms` is cleared to bound its size).
    floor_ms: u64,
}

impl Invalidations {
    /// Invalidates `primary` at `now_ms` (ms since the epoch): records it,
    /// then runs `remove` (the store removal) while no publish can run, and
    /// returns what `remove` returned.
    pub fn invalidate<R>(&self, primary: &str, now_ms: u64, remove: impl FnOnce() -> R) -> R {
        let _exclusive = crawlcache_base::locks::write(&self.gate);
        self.record(primary, now_ms);
        remove()
    }

    /// Runs `insert` (publishing a response to `primary` whose request was
    /// sent at `request_time_ms`) unless `primary` was invalidated at or
    /// after that time; `None` when it was (nothing inserted).
    pub fn publish<R>(
        &self,
        primary: &str,
        request_time_ms: u64,
        insert: impl FnOnce() -> R,
    ) -> Option<R> {
        let _shared = crawlcache_base::locks::read(&self.gate);
        if self.since(primary, request_time_ms) {
            return None;
        }
        Some(insert())
    }

    fn record(&self, primary: &str, now_ms: u64) {
        let mut r = crawlcache_base::locks::lock(&self.inner);
        if r.at_ms.len() >= MAX_KEYS && !r.at_ms.contains_key(primary) {
            let newest = r.at_ms.values().copied().max().unwrap_or(0);
            r.floor_ms = r.floor_ms.max(newest);
            r.at_ms.clear();
        }
        let entry = r.at_ms.entry(primary.to_string()).or_insert(0);
        *entry = (*entry).max(now_ms);
    }

    /// True when `primary` was invalidated at or after `request_time_ms`.
    fn since(&self, primary: &str, request_time_ms: u64) -> bool {
        let r = crawlcache_base::locks::lock(&self.inner);
        request_time_ms <= r.floor_ms
            || r.at_ms.get(primary).is_some_and(|&at| at >= request_time_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_runs_the_insert_unless_invalidated_since_the_request() {
        let inv = Invalidations::default();
        assert_eq!(inv.publish("http://a.test/x", 900, || 1), Some(1));
        assert_eq!(inv.invalidate("http://a.test/x", 1_000, || "removed"), "removed");
        assert_eq!(inv.publish("http://a.test/x", 900, || 1), None);
        assert_eq!(inv.publish("http://a.test/x", 1_001, || 1), Some(1));
    }

    #[test]
    fn an_invalidation_after_the_request_was_sent_counts() {
        let inv = Invalidations::default();
        inv.record("http://a.test/x", 1_000);
        assert!(inv.since("http://a.test/x", 900));
        assert!(inv.since("http://a.test/x", 1_000));
    }

    #[test]
    fn an_older_invalidation_or_another_key_does_not() {
        let inv = Invalidations::default();
        inv.record("http://a.test/x", 1_000);
        assert!(!inv.since("http://a.test/x", 1_001));
        assert!(!inv.since("http://a.test/y", 900));
    }

    #[test]
    fn clearing_a_full_record_stays_conservative() {
        let inv = Invalidations::default();
        for i in 0..MAX_KEYS as u64 {
            inv.record(&format!("http://a.test/{i}"), 10 + i);
        }
        inv.record("http://a.test/new", 50_000);
        // Every key invalidated before the clearing still counts.
        assert!(inv.since("http://a.test/0", 10));
        assert!(inv.since("http://a.test/new", 49_000));
        assert!(!inv.since("http://a.test/0", 60_000));
    }
}
