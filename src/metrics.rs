//! Process-wide counters, written by the proxy and read by the admin
//! endpoints (Prometheus text on `/metrics`, JSON on `/stats`).
//!
//! The per-request classes (hits, stale, revalidated, misses, pass-through,
//! refused) are counted from the request's typed [`CacheStatus`] once the
//! response is decided ([`Metrics::record`]); each request counts in
//! exactly one class.

use crate::wire::cache_status::{CacheStatus, Outcome};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the proxy. All are monotonic since start.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests proxied (admin requests excluded).
    pub requests: AtomicU64,
    /// Answered from a fresh stored response without contacting the origin.
    pub hits: AtomicU64,
    /// Answered from a stale stored response (stale-while-revalidate,
    /// stale-if-error, disconnected, `max-stale`, offline).
    pub stale_served: AtomicU64,
    /// Answered from the store after the origin said `304 Not Modified`.
    pub revalidated: AtomicU64,
    /// Answered with the origin's full response.
    pub misses: AtomicU64,
    /// Requests with other methods passed through.
    pub passthrough: AtomicU64,
    /// Answered by crawlcache itself with an error or a refusal.
    pub refused: AtomicU64,
    /// Conditional requests sent to origins to validate a stored response.
    pub validation_requests: AtomicU64,
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
    /// robots dispositions (`crawlcache_robots_disposition_total{disposition}`).
    pub robots_fetched: AtomicU64,
    /// See `robots_fetched`.
    pub robots_cached: AtomicU64,
    /// See `robots_fetched`.
    pub robots_stale_usable: AtomicU64,
    /// See `robots_fetched`.
    pub robots_stale_degraded: AtomicU64,
    /// See `robots_fetched`.
    pub robots_expired: AtomicU64,
    /// See `robots_fetched`.
    pub robots_offline: AtomicU64,
    /// robots verdicts (`crawlcache_robots_verdict_total{verdict}`).
    pub robots_allowed: AtomicU64,
    /// See `robots_allowed`.
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

    /// Counts one proxied request in its class, read from its `Cache-Status`.
    pub fn record(&self, status: &CacheStatus) {
        Metrics::inc(&self.requests);
        Metrics::inc(match status.outcome() {
            Outcome::Hit => &self.hits,
            Outcome::Stale => &self.stale_served,
            Outcome::Revalidated => &self.revalidated,
            Outcome::Miss => &self.misses,
            Outcome::Pass => &self.passthrough,
            Outcome::Refused => &self.refused,
        });
    }

    /// `(name, help, value)` for each counter.
    pub fn counters(&self) -> Vec<(&'static str, &'static str, u64)> {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            ("crawlcache_requests_total", "Requests proxied.", g(&self.requests)),
            ("crawlcache_hits_total", "Requests answered from a fresh stored response without contacting the origin.", g(&self.hits)),
            ("crawlcache_stale_served_total", "Requests answered from a stale stored response.", g(&self.stale_served)),
            ("crawlcache_revalidated_total", "Requests answered from the store after the origin said 304.", g(&self.revalidated)),
            ("crawlcache_misses_total", "Requests answered with the origin's full response.", g(&self.misses)),
            ("crawlcache_passthrough_total", "Requests with other methods passed through.", g(&self.passthrough)),
            ("crawlcache_refused_total", "Requests answered by crawlcache with an error or a refusal.", g(&self.refused)),
            ("crawlcache_validation_requests_total", "Conditional requests sent to origins to validate a stored response.", g(&self.validation_requests)),
            ("crawlcache_stored_total", "Responses written to the store.", g(&self.stored)),
            ("crawlcache_store_errors_total", "Stores abandoned because of an I/O error.", g(&self.store_errors)),
            ("crawlcache_incomplete_bodies_total", "Upstream bodies that ended early and were not stored.", g(&self.incomplete_bodies)),
            ("crawlcache_upstream_errors_total", "Requests answered with an error because the origin failed.", g(&self.upstream_errors)),
            ("crawlcache_collapsed_total", "Requests that shared another request's upstream fetch.", g(&self.collapsed)),
            ("crawlcache_from_cache_bytes_total", "Body bytes sent to clients from the store.", g(&self.bytes_from_cache)),
            ("crawlcache_sendfile_bytes_total", "Body bytes of stored files sent to clients with sendfile (no copy through user space).", crate::wire::sendfile::SENT_BYTES.load(Ordering::Relaxed)),
        ]
    }
}

impl Metrics {
    /// Counts a robots disposition.
    pub fn robots_disposition(&self, d: crate::robots::snapshot::Disposition) {
        use crate::robots::snapshot::Disposition;
        Metrics::inc(match d {
            Disposition::Fetched => &self.robots_fetched,
            Disposition::Cached => &self.robots_cached,
            Disposition::StaleUsable => &self.robots_stale_usable,
            Disposition::StaleDegraded => &self.robots_stale_degraded,
            Disposition::Expired => &self.robots_expired,
            Disposition::Offline => &self.robots_offline,
        });
    }

    /// Counts a robots verdict.
    pub fn robots_verdict(&self, allowed: bool) {
        Metrics::inc(if allowed { &self.robots_allowed } else { &self.robots_disallowed });
    }
}
