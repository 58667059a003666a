//! Process-wide counters, written by the proxy and read by the admin
//! endpoints (Prometheus text on `/metrics`, JSON on `/stats`).
//!
//! The per-request classes (hits, stale, revalidated, misses, pass-through,
//! refused, errors) are counted from the request's typed [`CacheStatus`]
//! and its response status once the response is decided
//! ([`CacheStatus::outcome_for`], [`Metrics::record`]); each request counts
//! in exactly one class. Refused and errors are apart: a refusal is the
//! proxy declining by policy (robots.txt, `only-if-cached` or offline with
//! nothing stored, overload, a request it does not forward), an error is
//! something failing (an origin unreachable or timing out, TLS, the store,
//! an internal error).

//!
//! The status page's figures live beside them: [`history`] (the counters
//! sampled once a second), [`origins`] (figures per origin, sampled under
//! load) and [`recent`] (the last errors).

pub mod counter;
pub mod history;
pub mod latency;
pub mod origins;
pub mod recent;

#[cfg(doc)]
use crawlcache_policy::cache_status::CacheStatus;
use crawlcache_policy::cache_status::Outcome;
use std::sync::atomic::Ordering;

pub use counter::Counter;

/// Counters of the proxy. All are monotonic since start.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests proxied (admin requests excluded).
    pub requests: Counter,
    /// Answered from a fresh stored response without contacting the origin.
    pub hits: Counter,
    /// Answered from a stale stored response (stale-while-revalidate,
    /// stale-if-error, disconnected, `max-stale`, offline).
    pub stale_served: Counter,
    /// Answered from the store after the origin said `304 Not Modified`.
    pub revalidated: Counter,
    /// Answered with the origin's full response.
    pub misses: Counter,
    /// Requests with other methods passed through.
    pub passthrough: Counter,
    /// Declined by policy and answered by crawlcache itself
    /// ([`Outcome::Refused`]).
    pub refused: Counter,
    /// Answered by crawlcache itself because something failed
    /// ([`Outcome::Error`]).
    pub errors: Counter,
    /// Conditional requests sent to origins to validate a stored response.
    pub validation_requests: Counter,
    /// Responses written to the store.
    pub stored: Counter,
    /// Stores abandoned because of an I/O error (e.g. a full disk).
    pub store_errors: Counter,
    /// Upstream bodies that ended early (never stored).
    pub incomplete_bodies: Counter,
    /// Requests answered with an error because the origin failed.
    pub upstream_errors: Counter,
    /// Requests that waited for another request's upstream fetch.
    pub collapsed: Counter,
    /// Body bytes sent to clients from the store.
    pub bytes_from_cache: Counter,
    /// Body bytes sent to clients as they came from origins (misses and
    /// passed-through requests), counted when the response ends.
    pub bytes_from_origin: Counter,
    /// Client connections and requests answered 503 because
    /// `server.max_connections` were open.
    pub overload_refused: Counter,
    /// Admin requests refused by the access rules (foreign `Host`, another
    /// page's request, no token, not loopback: docs/CASES.md C54).
    pub admin_refused: Counter,
    /// Intercepted client connections served over HTTP/2 (ALPN `h2`).
    pub client_h2_connections: Counter,
    /// Requests that clients sent over HTTP/2.
    pub client_h2_requests: Counter,
    /// The counters sampled once a second ([`Metrics::sample`]).
    pub history: history::History,
    /// Request latency by class ([`latency`]), observed when a response
    /// body ends.
    pub latency: latency::Latency,
    /// Figures per origin ([`origins`]).
    pub origins: origins::OriginCounts,
    /// robots dispositions (`crawlcache_robots_disposition_total{disposition}`).
    pub robots_fetched: Counter,
    /// See `robots_fetched`.
    pub robots_cached: Counter,
    /// See `robots_fetched`.
    pub robots_stale_usable: Counter,
    /// See `robots_fetched`.
    pub robots_stale_degraded: Counter,
    /// See `robots_fetched`.
    pub robots_expired: Counter,
    /// See `robots_fetched`.
    pub robots_offline: Counter,
    /// robots verdicts (`crawlcache_robots_verdict_total{verdict}`).
    pub robots_allowed: Counter,
    /// See `robots_allowed`.
    pub robots_disallowed: Counter,
}

impl Metrics {
    /// Adds one to a counter.
    pub fn inc(c: &Counter) {
        c.add(1);
    }

    /// Adds `n` to a counter.
    pub fn add(c: &Counter, n: u64) {
        c.add(n);
    }

    /// Counts one proxied request in its class ([`CacheStatus::outcome_for`]
    /// of its `Cache-Status` and response status).
    pub fn record(&self, outcome: Outcome) {
        Metrics::inc(&self.requests);
        Metrics::inc(match outcome {
            Outcome::Hit => &self.hits,
            Outcome::Stale => &self.stale_served,
            Outcome::Revalidated => &self.revalidated,
            Outcome::Miss => &self.misses,
            Outcome::Pass => &self.passthrough,
            Outcome::Refused => &self.refused,
            Outcome::Error => &self.errors,
        });
    }

    /// `(name, help, value)` for each counter.
    pub fn counters(&self) -> Vec<(&'static str, &'static str, u64)> {
        let g = Counter::get;
        vec![
            ("crawlcache_requests_total", "Requests proxied.", g(&self.requests)),
            ("crawlcache_hits_total", "Requests answered from a fresh stored response without contacting the origin.", g(&self.hits)),
            ("crawlcache_stale_served_total", "Requests answered from a stale stored response.", g(&self.stale_served)),
            ("crawlcache_revalidated_total", "Requests answered from the store after the origin said 304.", g(&self.revalidated)),
            ("crawlcache_misses_total", "Requests answered with the origin's full response.", g(&self.misses)),
            ("crawlcache_passthrough_total", "Requests with other methods passed through.", g(&self.passthrough)),
            (
                "crawlcache_refused_total",
                "Requests crawlcache declined by policy and answered itself: robots.txt, only-if-cached or offline with nothing stored (504), overload (503), a request it does not forward (4xx, 508). Its own errors count apart, in crawlcache_errors_total.",
                g(&self.refused),
            ),
            (
                "crawlcache_errors_total",
                "Requests crawlcache answered with an error because something failed: an origin unreachable, timing out or failing TLS (502, 504), the store, an internal error (earlier releases counted these in crawlcache_refused_total).",
                g(&self.errors),
            ),
            ("crawlcache_validation_requests_total", "Conditional requests sent to origins to validate a stored response.", g(&self.validation_requests)),
            ("crawlcache_stored_total", "Responses written to the store.", g(&self.stored)),
            ("crawlcache_store_errors_total", "Stores abandoned because of an I/O error.", g(&self.store_errors)),
            ("crawlcache_incomplete_bodies_total", "Upstream bodies that ended early and were not stored.", g(&self.incomplete_bodies)),
            ("crawlcache_upstream_errors_total", "Requests answered with an error because the origin failed.", g(&self.upstream_errors)),
            ("crawlcache_collapsed_total", "Requests that shared another request's upstream fetch.", g(&self.collapsed)),
            ("crawlcache_from_cache_bytes_total", "Body bytes sent to clients from the store.", g(&self.bytes_from_cache)),
            (
                "crawlcache_from_origin_bytes_total",
                "Body bytes sent to clients as they came from origins (misses, passed-through requests).",
                g(&self.bytes_from_origin),
            ),
            (
                "crawlcache_overload_refused_total",
                "Client connections and requests answered 503 because server.max_connections were open.",
                g(&self.overload_refused),
            ),
            (
                "crawlcache_admin_refused_total",
                "Admin requests refused: a Host that does not name the proxy, a request started by another page, no token, or not loopback.",
                g(&self.admin_refused),
            ),
            (
                "crawlcache_client_h2_connections_total",
                "Intercepted client connections served over HTTP/2 (the client chose h2 by ALPN).",
                g(&self.client_h2_connections),
            ),
            ("crawlcache_client_h2_requests_total", "Requests clients sent over HTTP/2.", g(&self.client_h2_requests)),
            (
                "crawlcache_origin_h2_connections_total",
                "Connections to origins opened over HTTP/2 (ALPN h2, or h2c with prior knowledge).",
                crate::upstream::h2::CONNECTIONS_OPENED.load(Ordering::Relaxed),
            ),
            (
                "crawlcache_origin_h2_requests_total",
                "Requests sent to origins over HTTP/2.",
                crate::upstream::h2::REQUESTS_SENT.load(Ordering::Relaxed),
            ),
            (
                "crawlcache_origin_h1_connections_total",
                "Connections to origins opened over HTTP/1.1 by the HTTP/2 client when the origin chose http/1.1 by ALPN (once per origin; later HTTP/1.1 connections are pooled apart).",
                crate::upstream::h2::H1_FALLBACKS.load(Ordering::Relaxed),
            ),
            (
                "crawlcache_sendfile_bytes_total",
                "Body bytes of stored files sent to clients with sendfile (no copy through user space).",
                crate::wire::sendfile::SENT_BYTES.load(Ordering::Relaxed),
            ),
        ]
    }
}

impl Metrics {
    /// What the end of a proxied response adds (the audit line's figures):
    /// its body bytes to `bytes_from_origin` when they came from the
    /// origin (`outcome` `miss` or `pass`), its origin's figures, and a
    /// recent error when it was one: crawlcache's own error (`outcome`
    /// `error`) or an origin's 5xx, never a refusal (an `only-if-cached`
    /// or offline 504, an overload 503).
    pub fn request_done(&self, record: &crate::audit::AuditRecord, status: u16, outcome: &str) {
        if matches!(outcome, "miss" | "pass") {
            Metrics::add(&self.bytes_from_origin, record.bytes);
        }
        let from_store = matches!(outcome, "hit" | "stale" | "revalidated");
        let error = outcome == "error" || (status >= 500 && outcome != "refused");
        // The clock is read for errors only.
        let at = error.then(std::time::SystemTime::now);
        self.origins.count(&origins::Counted {
            url: &record.url,
            from_store,
            bytes_from_cache: if from_store { record.bytes } else { 0 },
            error_status: error.then_some(status),
            at_ms: at.map_or(0, history::unix_ms),
        });
        if let Some(now) = at {
            recent::RECENT.push(
                now,
                "response",
                status.to_string(),
                format!("{} {} ({})", record.method, record.url, record.cache_status),
            );
        }
    }

    /// One sample of the counters into [`Metrics::history`], taken at
    /// `now`; also sets the sampling of [`Metrics::origins`] from the
    /// request rate since the previous sample.
    pub fn sample(&self, now: std::time::SystemTime) {
        let g = Counter::get;
        let s = history::Sample {
            at_ms: history::unix_ms(now),
            requests: g(&self.requests),
            hits: g(&self.hits),
            revalidated: g(&self.revalidated),
            stale: g(&self.stale_served),
            misses: g(&self.misses),
            passthrough: g(&self.passthrough),
            refused: g(&self.refused),
            bytes_from_cache: g(&self.bytes_from_cache),
            bytes_from_origin: g(&self.bytes_from_origin),
        };
        if let Some(prev) = self.history.latest() {
            let d = s.since(&prev);
            let per_second = d.requests.saturating_mul(1000).checked_div(d.at_ms).unwrap_or(0);
            self.origins.set_rate(per_second);
        }
        self.history.push(s);
    }

    /// Counts a robots disposition.
    pub fn robots_disposition(&self, d: crawlcache_robots::snapshot::Disposition) {
        use crawlcache_robots::snapshot::Disposition;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crawlcache_policy::cache_status::CacheStatus;

    /// Counts added from many threads (more threads than slots, so some
    /// share one) all show in the value, and the classes of `record` add up.
    #[test]
    fn a_counter_sums_what_every_thread_added() {
        let m = std::sync::Arc::new(Metrics::default());
        let threads: Vec<_> = (0..counter::SLOTS + 3)
            .map(|i| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        Metrics::add(&m.bytes_from_cache, i as u64 + 1);
                        m.record(CacheStatus::hit(60).outcome_for(200));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = (counter::SLOTS + 3) as u64;
        assert_eq!(m.bytes_from_cache.get(), 1000 * n * (n + 1) / 2);
        assert_eq!(m.requests.get(), 1000 * n);
        assert_eq!(m.hits.get(), m.requests.get());
        let listed = m.counters().into_iter().find(|c| c.0 == "crawlcache_hits_total").unwrap().2;
        assert_eq!(listed, 1000 * n);
    }
}
