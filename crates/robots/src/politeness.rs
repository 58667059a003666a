//! Politeness: spacing requests to one origin by its `Crawl-delay`.
//!
//! `Crawl-delay` is not part of RFC 9309 (§2.2.4 lets crawlers read other
//! records); crawlcache honours it when `robots.honor_crawl_delay` is set,
//! bounded by `robots.min_delay` and `robots.max_delay`. Cache hits are
//! never delayed: only requests that go to the origin (including robots.txt
//! refreshes) take a slot.
//!
//! [`effective_delay`] and [`next_slot`] are pure; [`Pacer`] keeps the
//! per-origin next-allowed times and hands out slots. In fleet mode the
//! slots come from Redis for the fleet as a whole (`crawlcache::fleet::pace`),
//! and this node's [`Pacer`] is used while Redis cannot be.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The spacing between two requests to one origin (C34): `max(min_delay,
/// crawl_delay)` capped at `max_delay`. A missing, negative, NaN or
/// infinite `crawl_delay` (seconds) is ignored, giving `min_delay` (capped
/// at `max_delay`).
pub fn effective_delay(
    crawl_delay: Option<f64>,
    min_delay: Duration,
    max_delay: Duration,
) -> Duration {
    let asked = crawl_delay
        .filter(|d| d.is_finite() && *d >= 0.0)
        .map(|d| if d >= max_delay.as_secs_f64() { max_delay } else { Duration::from_secs_f64(d) })
        .unwrap_or(Duration::ZERO);
    asked.max(min_delay).min(max_delay)
}

/// A request arriving at `now` when the origin's next allowed time is
/// `next_allowed` (`None`: no earlier request) may start at the returned
/// `start`, and the following one at the returned next allowed time
/// (`start + delay`).
pub fn next_slot(
    next_allowed: Option<SystemTime>,
    delay: Duration,
    now: SystemTime,
) -> (SystemTime, SystemTime) {
    let start = match next_allowed {
        Some(t) if t > now => t,
        _ => now,
    };
    (start, start.checked_add(delay).unwrap_or(start))
}

/// Per-origin next-allowed times. `reserve` takes the next slot for an
/// origin; the caller sleeps until the returned time (if later than now)
/// before contacting the origin.
#[derive(Debug, Default)]
pub struct Pacer {
    next: Mutex<HashMap<String, SystemTime>>,
}

impl Pacer {
    /// An empty pacer.
    pub fn new() -> Pacer {
        Pacer::default()
    }

    /// Reserves the next slot for `origin_key` with spacing `delay`, for a
    /// request arriving at `now`; returns when it may start. A zero `delay`
    /// still records the request (so a later, longer delay counts from it).
    pub fn reserve(&self, origin_key: &str, delay: Duration, now: SystemTime) -> SystemTime {
        let mut map = match self.next.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let (start, next) = next_slot(map.get(origin_key).copied(), delay, now);
        map.insert(origin_key.to_string(), next);
        start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine_delay(body: &str) -> Option<f64> {
        crate::robots_txt::RobotsTxt::parse(body.as_bytes()).crawl_delay("Bot")
    }

    #[test]
    fn c34_crawl_delay_bounded_by_min_and_max() {
        let (min, max) = (Duration::from_secs(2), Duration::from_secs(30));
        let d = |v: &str| {
            effective_delay(engine_delay(&format!("User-agent: *\nCrawl-delay: {v}\n")), min, max)
        };
        assert_eq!(d("0.2"), Duration::from_secs(2));
        assert_eq!(d("10"), Duration::from_secs(10));
        assert_eq!(d("0"), Duration::from_secs(2));
        assert_eq!(d("abc"), Duration::from_secs(2));
        assert_eq!(d("1e9"), Duration::from_secs(30));
        assert_eq!(effective_delay(None, min, max), min);
        assert_eq!(effective_delay(Some(f64::NAN), min, max), min);
        assert_eq!(effective_delay(Some(f64::INFINITY), min, max), min);
        assert_eq!(effective_delay(Some(-3.0), min, max), min);
        assert_eq!(effective_delay(Some(2.5), Duration::ZERO, max), Duration::from_millis(2500));
    }

    #[test]
    fn slots_are_spaced_by_the_delay() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let p = Pacer::new();
        let d = Duration::from_secs(10);
        assert_eq!(p.reserve("o", d, t0), t0);
        assert_eq!(p.reserve("o", d, t0), t0 + d);
        assert_eq!(p.reserve("o", d, t0 + Duration::from_secs(1)), t0 + 2 * d);
        assert_eq!(p.reserve("other", d, t0), t0);
        assert_eq!(p.reserve("o", d, t0 + Duration::from_secs(100)), t0 + Duration::from_secs(100));
    }
}
