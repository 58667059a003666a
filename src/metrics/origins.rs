//! Figures per origin, for the status page's origins table, `/stats` and
//! `/metrics`: requests, those served from the store (hit ratio), body
//! bytes served from the store (bytes saved), errors and the last one.
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

/// Figures by origin (see the module docs).
#[derive(Debug)]
pub struct OriginCounts {
    every: AtomicU64,
    sampled: AtomicBool,
    others: AtomicU64,
    shards: [Shard; SHARDS],
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct Shard(Mutex<HashMap<Box<str>, OriginFigures>>);

/// What one request adds to its origin's figures ([`OriginCounts::count`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted<'a> {
    /// The request's absolute URL.
    pub url: &'a str,
    /// Served from the store (a hit, a stale answer or a revalidation).
    pub from_store: bool,
    /// Body bytes sent to the client from the store (0 otherwise).
    pub bytes_from_cache: u64,
    /// The response's status when it was an error (crawlcache's own, or an
    /// origin's 5xx); `None` otherwise (a refusal is not an error).
    pub error_status: Option<u16>,
    /// When the request ended, milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// An origin's figures since start (estimates once sampling was on:
/// [`OriginCounts::is_estimate`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OriginFigures {
    /// Requests.
    pub requests: u64,
    /// Requests served from the store (hits, stale answers, revalidations).
    pub from_store: u64,
    /// Body bytes sent to clients from the store: what the cache saved.
    pub bytes_from_cache: u64,
    /// Requests answered with an error (see [`Counted::error_status`]).
    pub errors: u64,
    /// The last error recorded: its status and when (ms since the Unix
    /// epoch).
    pub last_error: Option<LastError>,
}

/// An origin's last error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LastError {
    /// The response's status code.
    pub status: u16,
    /// When, milliseconds since the Unix epoch.
    pub at_ms: u64,
}

impl OriginFigures {
    /// The share of requests served from the store, 0 to 1 (0 without
    /// requests).
    pub fn hit_ratio(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.from_store as f64 / self.requests as f64
        }
    }

    fn add(&mut self, c: &Counted<'_>, every: u64) {
        self.requests += every;
        self.from_store += every * u64::from(c.from_store);
        self.bytes_from_cache += every.saturating_mul(c.bytes_from_cache);
        if let Some(status) = c.error_status {
            self.errors += every;
            self.last_error = Some(LastError { status, at_ms: c.at_ms });
        }
    }

    fn absorb(&mut self, o: &OriginFigures) {
        self.requests += o.requests;
        self.from_store += o.from_store;
        self.bytes_from_cache += o.bytes_from_cache;
        self.errors += o.errors;
        if o.last_error.is_some_and(|e| self.last_error.is_none_or(|mine| e.at_ms > mine.at_ms)) {
            self.last_error = o.last_error;
        }
    }
}

impl Default for OriginCounts {
    fn default() -> OriginCounts {
        OriginCounts {
            every: AtomicU64::new(1),
            sampled: AtomicBool::new(false),
            others: AtomicU64::new(0),
            shards: Default::default(),
        }
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
    /// Counts one request (see the module docs for the sampling): a
    /// thread-local tick, and for a recorded request one entry of this
    /// thread's shard.
    pub fn count(&self, c: &Counted<'_>) {
        let every = self.every.load(Ordering::Relaxed);
        let tick = TICK.try_with(|t| {
            let n = t.get().wrapping_add(1);
            t.set(n);
            n
        });
        if tick.unwrap_or(0) & (every - 1) != 0 {
            return;
        }
        let Some(origin) = origin_of(c.url) else { return };
        let shard = &self.shards[crawlcache_base::shard::thread_ordinal() % SHARDS];
        let mut m = crawlcache_base::locks::lock(&shard.0);
        if let Some(f) = m.get_mut(origin) {
            f.add(c, every);
        } else if m.len() < ORIGINS_PER_SHARD {
            m.entry(origin.into()).or_default().add(c, every);
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
    /// with their figures summed over the shards.
    pub fn top(&self, n: usize) -> Vec<(String, OriginFigures)> {
        let mut all: HashMap<String, OriginFigures> = HashMap::new();
        for s in &self.shards {
            for (k, v) in crawlcache_base::locks::lock(&s.0).iter() {
                all.entry(k.to_string()).or_default().absorb(v);
            }
        }
        let mut v: Vec<(String, OriginFigures)> = all.into_iter().collect();
        v.sort_by(|a, b| b.1.requests.cmp(&a.1.requests).then_with(|| a.0.cmp(&b.0)));
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

    fn req(url: &str) -> Counted<'_> {
        Counted { url, from_store: false, bytes_from_cache: 0, error_status: None, at_ms: 0 }
    }

    fn requests(c: &OriginCounts, n: usize) -> Vec<(String, u64)> {
        c.top(n).into_iter().map(|(o, f)| (o, f.requests)).collect()
    }

    #[test]
    fn below_the_exact_rate_every_request_counts_and_above_counts_are_scaled() {
        let c = OriginCounts::default();
        for _ in 0..5 {
            c.count(&req("http://a.test/1"));
        }
        c.count(&req("http://b.test/1"));
        assert_eq!(
            requests(&c, 10),
            vec![("http://a.test".into(), 5), ("http://b.test".into(), 1)]
        );
        assert!(!c.is_estimate());
        c.set_rate(8 * EXACT_RATE);
        for _ in 0..800 {
            c.count(&req("http://b.test/2"));
        }
        assert!(c.is_estimate());
        // 800 requests, one in 8 recorded with a weight of 8.
        assert_eq!(requests(&c, 1), vec![("http://b.test".into(), 801)]);
        c.set_rate(10);
        c.count(&req("http://b.test/3"));
        assert_eq!(c.top(1)[0].1.requests, 802);
    }

    #[test]
    fn hits_bytes_from_the_store_and_the_last_error_are_kept_per_origin() {
        let c = OriginCounts::default();
        c.count(&Counted { from_store: true, bytes_from_cache: 100, ..req("http://a.test/1") });
        c.count(&Counted { from_store: true, bytes_from_cache: 50, ..req("http://a.test/2") });
        c.count(&Counted { error_status: Some(502), at_ms: 7, ..req("http://a.test/3") });
        c.count(&Counted { error_status: Some(504), at_ms: 9, ..req("http://a.test/4") });
        let (_, f) = &c.top(1)[0];
        assert_eq!((f.requests, f.from_store, f.bytes_from_cache, f.errors), (4, 2, 150, 2));
        assert_eq!(f.last_error, Some(LastError { status: 504, at_ms: 9 }));
        assert_eq!(f.hit_ratio(), 0.5);
    }
}
