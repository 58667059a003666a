//! Process-wide counters, exported as Prometheus text on `/metrics` and as
//! JSON on `/stats`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the proxy. All are monotonic since start.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests proxied (admin requests excluded).
    pub requests: AtomicU64,
    /// Answered from a stored response without contacting the origin.
    pub hits: AtomicU64,
    /// Forwarded because nothing usable was stored.
    pub misses: AtomicU64,
    /// Conditional requests sent to revalidate a stored response.
    pub revalidations: AtomicU64,
    /// Revalidations answered 304 Not Modified.
    pub revalidated_not_modified: AtomicU64,
    /// Stale responses served (stale-while-revalidate, stale-if-error,
    /// disconnected, max-stale, offline).
    pub stale_served: AtomicU64,
    /// Responses written to the store.
    pub stored: AtomicU64,
    /// Stores abandoned because of an I/O error (e.g. a full disk).
    pub store_errors: AtomicU64,
    /// Upstream bodies that ended early (never stored).
    pub incomplete_bodies: AtomicU64,
    /// Requests answered with an error because the origin failed.
    pub upstream_errors: AtomicU64,
    /// Requests that waited for another request's upstream fetch.
    pub collapsed: AtomicU64,
    /// Body bytes sent to clients from the store.
    pub bytes_from_cache: AtomicU64,
    /// Non-GET/HEAD requests passed through.
    pub passthrough: AtomicU64,
    /// robots dispositions (`robots_disposition_total{disposition}`).
    pub robots_fetched: AtomicU64,
    pub robots_cached: AtomicU64,
    pub robots_stale_usable: AtomicU64,
    pub robots_stale_degraded: AtomicU64,
    pub robots_expired: AtomicU64,
    /// robots verdicts (`robots_verdict_total{verdict}`).
    pub robots_allowed: AtomicU64,
    pub robots_disallowed: AtomicU64,
}

impl Metrics {
    /// Adds one to a counter.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// `(name, help, value)` for each counter.
    pub fn counters(&self) -> Vec<(&'static str, &'static str, u64)> {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            ("crawlcache_requests_total", "Requests proxied.", g(&self.requests)),
            ("crawlcache_hits_total", "Requests answered from the store without contacting the origin.", g(&self.hits)),
            ("crawlcache_misses_total", "Requests forwarded because nothing usable was stored.", g(&self.misses)),
            ("crawlcache_revalidations_total", "Conditional requests sent to revalidate a stored response.", g(&self.revalidations)),
            ("crawlcache_revalidated_not_modified_total", "Revalidations answered 304.", g(&self.revalidated_not_modified)),
            ("crawlcache_stale_served_total", "Stale responses served.", g(&self.stale_served)),
            ("crawlcache_stored_total", "Responses written to the store.", g(&self.stored)),
            ("crawlcache_store_errors_total", "Stores abandoned because of an I/O error.", g(&self.store_errors)),
            ("crawlcache_incomplete_bodies_total", "Upstream bodies that ended early and were not stored.", g(&self.incomplete_bodies)),
            ("crawlcache_upstream_errors_total", "Requests answered with an error because the origin failed.", g(&self.upstream_errors)),
            ("crawlcache_collapsed_total", "Requests that shared another request's upstream fetch.", g(&self.collapsed)),
            ("crawlcache_bytes_from_cache_total", "Body bytes sent to clients from the store.", g(&self.bytes_from_cache)),
            ("crawlcache_passthrough_total", "Requests with other methods passed through.", g(&self.passthrough)),
        ]
    }
}
