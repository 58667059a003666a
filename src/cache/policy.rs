//! RFC 9111 / RFC 5861 decisions as pure functions with an injected clock.
//!
//! Each function names the section it implements. None does I/O or reads
//! the clock; `now` is always a parameter.

use super::StoredResponse;
use http::{HeaderMap, Method};
use std::time::{Duration, SystemTime};

/// Tunables of the policy (from the `[cache]` configuration section).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    /// True for a shared cache (the default): `s-maxage` applies, unqualified
    /// `private` is not storable, `Authorization` needs `public`, `s-maxage`
    /// or `must-revalidate`, `proxy-revalidate` acts like `must-revalidate`.
    pub shared: bool,
    /// Heuristic freshness as a fraction of (`Date` − `Last-Modified`), RFC 9111 section 4.2.2.
    pub heuristic_fraction: f64,
    /// Upper bound of a heuristic freshness lifetime.
    pub heuristic_max: Duration,
    /// Lifetime given to heuristically cacheable responses without
    /// `Last-Modified` and without explicit freshness; zero for none.
    pub default_ttl: Duration,
    /// How long past its lifetime a stored response may be served when the
    /// origin cannot be reached at all (RFC 9111 section 4.2.4); zero disables.
    pub max_stale_on_error: Duration,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            shared: true,
            heuristic_fraction: 0.1,
            heuristic_max: Duration::from_secs(86_400),
            default_ttl: Duration::ZERO,
            max_stale_on_error: Duration::from_secs(86_400),
        }
    }
}

/// Why a response is not stored (RFC 9111 section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStorable {
    /// Only GET responses are stored.
    Method,
    /// The status code is not final, or is 206 / 304, or is not understood.
    Status,
    /// `no-store` in the request or the response.
    NoStore,
    /// Unqualified `private` in a shared cache.
    Private,
    /// The request carried `Authorization` and the response does not allow sharing it.
    Authorization,
    /// No explicit freshness, no validator-free heuristic, not heuristically
    /// cacheable: nothing would ever make it reusable.
    NoFreshnessOrValidator,
    /// `Vary: *`.
    VaryStar,
}

/// RFC 9111 section 3: may this response to this request be stored?
/// (Body completeness is checked by the caller: an incomplete body is never
/// stored.)
pub fn storable(
    method: &Method,
    request_headers: &HeaderMap,
    status: u16,
    response_headers: &HeaderMap,
    cfg: &PolicyConfig,
) -> Result<(), NotStorable> {
    let _ = (method, request_headers, status, response_headers, cfg);
    todo!()
}

/// The field lines to store for a response (RFC 9111 section 3.1): drops
/// hop-by-hop fields (and those named by `Connection`), `Set-Cookie` /
/// `Set-Cookie2` (never replayed from a shared cache), and fields named by
/// qualified `no-cache="..."` and, in a shared cache, `private="..."`.
/// Names lower-cased, order and repetitions kept.
pub fn headers_to_store(response_headers: &HeaderMap, cfg: &PolicyConfig) -> Vec<(String, Vec<u8>)> {
    let _ = (response_headers, cfg);
    todo!()
}

/// RFC 9111 section 4.2.1 / 4.2.2: the freshness lifetime of a stored
/// response: `s-maxage` (shared), `max-age`, `Expires` − `Date`, then a
/// heuristic for heuristically cacheable status codes (RFC 9110 section
/// 15.1) from `Last-Modified`, then `cfg.default_ttl` for those codes. An
/// invalid `Expires` means already expired. Never negative.
pub fn freshness_lifetime(stored: &StoredResponse, cfg: &PolicyConfig) -> Duration {
    let _ = (stored, cfg);
    todo!()
}

/// RFC 9111 section 4.2.3: the current age of a stored response at `now`
/// (`apparent_age`, `corrected_age_value` from `Age`, `resident_time`).
pub fn current_age(stored: &StoredResponse, now: SystemTime) -> Duration {
    let _ = (stored, now);
    todo!()
}

/// What to do with a stored response that matched the request (primary and
/// secondary key) at `now` (RFC 9111 section 4.2, 4.2.4, 5.2.1, 5.2.2; RFC 5861 section 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reuse {
    /// Fresh (or stale within the request's `max-stale`, when the response
    /// allows serving stale): serve it.
    Serve,
    /// Stale within `stale-while-revalidate`: serve it now and revalidate
    /// once in the background.
    ServeStaleAndRevalidate,
    /// Must be validated with the origin before use (stale, `no-cache` in the
    /// request or response, request `max-age` / `min-fresh` not met).
    Revalidate,
}

/// The reuse decision plus the numbers behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub reuse: Reuse,
    /// `current_age` in whole seconds (the `Age` header to send).
    pub age: u64,
    /// `freshness_lifetime` − `current_age` in seconds; negative when stale
    /// (the `ttl` parameter of `Cache-Status`).
    pub ttl: i64,
    /// True when the response is stale.
    pub stale: bool,
}

/// Decides whether `stored` may answer a request with `request_headers` at
/// `now` (RFC 9111 section 4.2 and 4.2.4; request directives of 5.2.1;
/// response `no-cache`, `must-revalidate`, `proxy-revalidate`; RFC 5861
/// `stale-while-revalidate`).
pub fn decide(request_headers: &HeaderMap, stored: &StoredResponse, now: SystemTime, cfg: &PolicyConfig) -> Decision {
    let _ = (request_headers, stored, now, cfg);
    todo!()
}

/// Why an origin failed, for [`may_serve_stale_on_error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginError {
    /// The origin answered with this status (500, 502, 503 or 504 count as errors).
    Status(u16),
    /// The origin could not be reached (refused, timed out, DNS failure): the
    /// cache is disconnected (RFC 9111 section 4.2.4).
    Unreachable,
}

/// Whether a stale stored response may be served because the origin failed:
/// within `stale-if-error` (RFC 5861 section 4; request or response
/// directive) for status 500/502/503/504 or an unreachable origin; or, when
/// unreachable, within `cfg.max_stale_on_error` of staleness. Never for
/// `must-revalidate`, `proxy-revalidate` (shared), `no-cache` responses, or a
/// request with `no-cache`.
pub fn may_serve_stale_on_error(
    request_headers: &HeaderMap,
    stored: &StoredResponse,
    error: OriginError,
    now: SystemTime,
    cfg: &PolicyConfig,
) -> bool {
    let _ = (request_headers, stored, error, now, cfg);
    todo!()
}

/// RFC 9111 section 4.3.1: the validators to send when revalidating `stored`:
/// `If-None-Match` with the stored `ETag`, and `If-Modified-Since` with the
/// stored `Last-Modified` (only when there is one).
pub fn conditional_headers(stored: &StoredResponse) -> Vec<(http::header::HeaderName, http::HeaderValue)> {
    let _ = stored;
    todo!()
}

/// RFC 9111 section 4.3.3 / 4.3.4: does a 304 with `response_headers` apply
/// to `stored`? (Strong ETag match when the 304 has an ETag; otherwise
/// Last-Modified; otherwise true for a single stored response.)
pub fn not_modified_matches(stored: &StoredResponse, response_headers: &HeaderMap) -> bool {
    let _ = (stored, response_headers);
    todo!()
}

/// RFC 9111 section 4.3.4: the stored response freshened by a 304: each
/// field the 304 carries replaces all stored lines of the same name (except
/// `Content-Length` and the fields [`headers_to_store`] drops); fields the
/// 304 does not carry are kept in place; request/response times updated.
pub fn freshen(
    stored: &StoredResponse,
    response_headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
    cfg: &PolicyConfig,
) -> StoredResponse {
    let _ = (stored, response_headers, request_time, response_time, cfg);
    todo!()
}

/// RFC 9111 section 4.3.2: may a fresh stored response answer the client's
/// own conditional request with 304? True when `If-None-Match` matches the
/// stored ETag (weak comparison; `*` matches), or, without `If-None-Match`,
/// when `If-Modified-Since` is not earlier than the stored `Last-Modified`
/// (or `Date`) and the status is 200.
pub fn client_not_modified(request_headers: &HeaderMap, stored: &StoredResponse) -> bool {
    let _ = (request_headers, stored);
    todo!()
}

/// RFC 9111 section 4.4: the primary keys to invalidate after a response
/// with `status` to an unsafe `method` on `primary_key`: the target itself,
/// and `Location` / `Content-Location` when same-origin (relative references
/// resolved against the target). Empty for safe methods and for error
/// statuses (only 2xx and 3xx invalidate).
pub fn invalidation_targets(method: &Method, status: u16, primary_key: &str, response_headers: &HeaderMap) -> Vec<String> {
    let _ = (method, status, primary_key, response_headers);
    todo!()
}
