//! Requests per origin, for the status page's "top origins".
//!
//! Counting every request by origin would hash its URL's origin under a
//! lock on every request. Instead each thread counts requests in a plain
//! thread-local number and records only every `every`-th one (a power of
//! two), adding `every` to that origin: below [`EXACT_RATE`] requests per
//! second `every` is 1 and the counts are exact; above, the once-a-second
//! sampler ([`OriginCounts::set_rate`]) raises it so that about
//! [`EXACT_RATE`] requests a second are recorded, and the counts are
//! estimates (the status page says so). A request that is not recorded
//! costs a thread-local increment and one read of a shared, rarely
//! written number.
//!
//! Memory is bounded: each of the [`SHARDS`] shards (one per thread slot,
//! so threads do not contend) holds at most [`ORIGINS_PER_SHARD`]
//! origins; requests to origins beyond that count in
//! [`OriginCounts::others`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Requests per second counted exactly; above, they are sampled.
pub const EXACT_RATE: u64 = 1000;

/// Shards of the counts (threads pick one by their ordinal).
pub const SHARDS: usize = 8;

/// Origins each shard keeps at most.
pub const ORIGINS_PER_SHARD: usize = 4096;

/// Requests by origin (see the module docs).
#[derive(Debug)]
pub struct OriginCounts {
    every: AtomicU64,
    sampled: AtomicBool,
    others: AtomicU64,
    shards: [Shard; SHARDS],
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct Shard(Mutex<HashMap<Box<str>, u64>>);

impl Default for OriginCounts {
    fn default() -> OriginCounts {
        OriginCounts { every: AtomicU64::new(1), sampled: AtomicBool::new(false), others: AtomicU64::new(0), shards: Default::default() }
    }
}

thread_local! {
    static TICK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The origin of an absolute URL: `scheme://authority`, as the URL spells
/// it (a cache key has the scheme and host in lower case and the default
/// port left out); `None` when `url` is not absolute.
pub fn origin_of(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&url[..scheme.len() + 3 + end])
}

impl OriginCounts {
    /// Counts one request for `url` (see the module docs for the sampling).
    pub fn count(&self, url: &str) {
        let every = self.every.load(Ordering::Relaxed);
        let tick = TICK.try_with(|t| {
            let n = t.get().wrapping_add(1);
            t.set(n);
            n
        });
        if tick.unwrap_or(0) & (every - 1) != 0 {
            return;
        }
        let Some(origin) = origin_of(url) else { return };
        let shard = &self.shards[crawlcache_base::shard::thread_ordinal() % SHARDS];
        let mut m = crate::locks::lock(&shard.0);
        if let Some(n) = m.get_mut(origin) {
            *n += every;
        } else if m.len() < ORIGINS_PER_SHARD {
            m.insert(origin.into(), every);
        } else {
            self.others.fetch_add(every, Ordering::Relaxed);
        }
    }

    /// Sets the sampling for `requests_per_second` (the sampler's last
    /// reading): 1 below [`EXACT_RATE`], else the power of two that brings
    /// the recorded requests near [`EXACT_RATE`] a second.
    pub fn set_rate(&self, requests_per_second: u64) {
        let every = (requests_per_second / EXACT_RATE).max(1).next_power_of_two();
        if every > 1 {
            self.sampled.store(true, Ordering::Relaxed);
        }
        self.every.store(every, Ordering::Relaxed);
    }

    /// Whether any count is an estimate (sampling was on at some point).
    pub fn is_estimate(&self) -> bool {
        self.sampled.load(Ordering::Relaxed)
    }

    /// Requests to origins that did not fit in the counts.
    pub fn others(&self) -> u64 {
        self.others.load(Ordering::Relaxed)
    }

    /// The `n` origins with the most requests, most first (ties by name),
    /// with their counts summed over the shards.
    pub fn top(&self, n: usize) -> Vec<(String, u64)> {
        let mut all: HashMap<String, u64> = HashMap::new();
        for s in &self.shards {
            for (k, v) in crate::locks::lock(&s.0).iter() {
                *all.entry(k.to_string()).or_default() += v;
            }
        }
        let mut v: Vec<(String, u64)> = all.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_the_scheme_and_authority() {
        assert_eq!(origin_of("http://a.test/x?y"), Some("http://a.test"));
        assert_eq!(origin_of("https://b.test:8443"), Some("https://b.test:8443"));
        assert_eq!(origin_of("http://[::1]:80/p#f"), Some("http://[::1]:80"));
        assert_eq!(origin_of("/stats"), None);
    }

    #[test]
    fn below_the_exact_rate_every_request_counts_and_above_counts_are_scaled() {
        let c = OriginCounts::default();
        for _ in 0..5 {
            c.count("http://a.test/1");
        }
        c.count("http://b.test/1");
        assert_eq!(c.top(10), vec![("http://a.test".into(), 5), ("http://b.test".into(), 1)]);
        assert!(!c.is_estimate());
        c.set_rate(8 * EXACT_RATE);
        for _ in 0..800 {
            c.count("http://b.test/2");
        }
        assert!(c.is_estimate());
        // 800 requests, one in 8 recorded with a weight of 8.
        assert_eq!(c.top(1), vec![("http://b.test".into(), 801)]);
        c.set_rate(10);
        c.count("http://b.test/3");
        assert_eq!(c.top(1)[0].1, 802);
    }
}
