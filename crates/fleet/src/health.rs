//! Whether an engine (Redis, the bucket) is usable right now, and the
//! degradation it causes made visible.
//!
//! A failed operation (error or timeout) marks the engine down for
//! [`RETRY_AFTER`]: meanwhile every fleet operation on it is skipped at once
//! (no request waits for an engine known to be gone), and the node works as
//! a single node does. The first operation after that tries the engine
//! again; a success marks it up. Warnings are rate-limited to one per
//! [`WARN_EVERY`] per engine; the `crawlcache_fleet_up{engine}` gauge and
//! `crawlcache_fleet_errors_total{engine}` counter show the state.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long an engine is left alone after a failure.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// At most one "unreachable" warning per engine this often.
pub const WARN_EVERY: Duration = Duration::from_secs(30);

/// The health of one engine.
#[derive(Debug)]
pub struct Health {
    /// `redis` or `bucket`, for logs and metric labels.
    pub engine: &'static str,
    down_until_ms: AtomicU64,
    up: AtomicBool,
    last_warn_ms: AtomicU64,
    /// Failed operations (errors and timeouts) since start.
    pub errors: AtomicU64,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Health {
    /// A healthy engine named `engine`.
    pub fn new(engine: &'static str) -> Health {
        Health {
            engine,
            down_until_ms: AtomicU64::new(0),
            up: AtomicBool::new(true),
            last_warn_ms: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// Whether an operation may be tried now (not within [`RETRY_AFTER`]
    /// of a failure).
    pub fn allows(&self) -> bool {
        now_ms() >= self.down_until_ms.load(Ordering::Relaxed)
    }

    /// Whether the last operation succeeded (the `crawlcache_fleet_up` gauge).
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Records a failed operation (`what` failed with `error`): the engine is
    /// down for [`RETRY_AFTER`]; a warning is logged at most every
    /// [`WARN_EVERY`].
    pub fn failed(&self, what: &str, error: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let now = now_ms();
        self.down_until_ms.store(now + RETRY_AFTER.as_millis() as u64, Ordering::Relaxed);
        let was_up = self.up.swap(false, Ordering::Relaxed);
        let last = self.last_warn_ms.load(Ordering::Relaxed);
        if (was_up || now.saturating_sub(last) >= WARN_EVERY.as_millis() as u64)
            && self
                .last_warn_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                engine = self.engine,
                "fleet: {} unusable ({what}: {error}); serving from the local tier and the origin, robots.txt from local snapshots, until it answers again",
                self.engine
            );
        }
    }

    /// Records a successful operation; logs the recovery after a failure.
    pub fn succeeded(&self) {
        self.down_until_ms.store(0, Ordering::Relaxed);
        if !self.up.swap(true, Ordering::Relaxed) {
            tracing::info!(
                engine = self.engine,
                "fleet: {} answers again; sharing with the fleet again",
                self.engine
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_closes_the_engine_for_a_while_and_a_success_reopens_it() {
        let h = Health::new("redis");
        assert!(h.allows() && h.is_up());
        h.failed("GET", "connection refused");
        assert!(!h.allows(), "skipped right after a failure");
        assert!(!h.is_up());
        assert_eq!(h.errors.load(Ordering::Relaxed), 1);
        h.succeeded();
        assert!(h.is_up());
        assert!(h.allows(), "an answer (the probe's) opens it at once");
    }
}
