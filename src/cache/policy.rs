//! RFC 9111 / RFC 5861 decisions as pure functions with an injected clock.
//!
//! Each function names the section it implements. None does I/O or reads
//! the clock; `now` is always a parameter.
//!
//! Choices where the RFCs leave room (pinned by tests in `tests.rs`):
//! - `Vary: *` (in any member of any line) is not storable ([`NotStorable::VaryStar`]).
//! - `Set-Cookie` / `Set-Cookie2` are stripped before storing (C08), unless
//!   `PolicyConfig::store_set_cookie`; a qualified `no-cache="set-cookie"` or
//!   `private="set-cookie"` strips them regardless.
//! - Heuristic freshness (section 4.2.2): `heuristic_fraction` of
//!   (`Date` − `Last-Modified`), capped at `heuristic_max`, for heuristically
//!   cacheable statuses or `public`, only without `max-age`, `s-maxage` or
//!   `Expires` (even an invalid one); without `Last-Modified`, `default_ttl`.
//! - An invalid `Age` (several lines, a list, a sign, a fraction) makes the
//!   response stale ([`age_value`]).
//! - `s-maxage` implies `proxy-revalidate` (section 5.2.2.10): no `max-stale`
//!   and no disconnected stale serving; but the origin's explicit
//!   `stale-while-revalidate` / `stale-if-error` still apply (C23).
//! - A response's own `stale-if-error` bounds stale serving on error, also
//!   when the origin is unreachable (C22 step 4); `max_stale_on_error` applies
//!   only to responses without it.
//! - A 304 never changes the fields that describe the stored content
//!   (`Content-Length`, `Content-Encoding`, `Content-MD5`, `Content-Range`,
//!   digests, `ETag`), and restarts the age calculation from its own `Age`
//!   and `Date`.

use super::cache_control::{delta_seconds, CacheControl, DELTA_SECONDS_MAX};
use super::{from_millis, to_millis, StoredResponse};
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
    /// Store and replay `Set-Cookie` / `Set-Cookie2` (false, the default: a
    /// shared crawler cache never replays one client's cookies to another;
    /// RFC 9111 section 7.3 leaves it to the cache). True only for a
    /// conformance run that expects cookies to be cached like any field.
    pub store_set_cookie: bool,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            shared: true,
            heuristic_fraction: 0.1,
            heuristic_max: Duration::from_secs(86_400),
            default_ttl: Duration::ZERO,
            max_stale_on_error: Duration::from_secs(86_400),
            store_set_cookie: false,
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
/// `req_cc` is the request's parsed `Cache-Control` ([`CacheControl::from_headers`]);
/// `request_headers` are read for `Authorization` only. (Body completeness
/// is checked by the caller: an incomplete body is never stored.)
pub fn storable(
    method: &Method,
    req_cc: &CacheControl,
    request_headers: &HeaderMap,
    status: u16,
    response_headers: &HeaderMap,
    cfg: &PolicyConfig,
) -> Result<(), NotStorable> {
    if method != Method::GET {
        return Err(NotStorable::Method);
    }
    if !(200..=999).contains(&status) || status == 206 || status == 304 {
        return Err(NotStorable::Status);
    }
    let cc = CacheControl::from_response_headers(response_headers);
    if cc.must_understand && !status_understood(status) {
        // Section 5.2.2.3: only a cache that understands the status may store.
        return Err(NotStorable::Status);
    }
    // Section 5.2.2.3: with must-understand and an understood status, the
    // response's no-store is ignored; the request's never is (5.2.1.5).
    if req_cc.no_store || (cc.no_store && !cc.must_understand) {
        return Err(NotStorable::NoStore);
    }
    if cfg.shared && cc.private {
        return Err(NotStorable::Private);
    }
    if cfg.shared
        && request_headers.contains_key(http::header::AUTHORIZATION)
        && !(cc.public || cc.s_maxage.is_some() || cc.must_revalidate)
    {
        return Err(NotStorable::Authorization);
    }
    if super::key::vary_names(response_headers).is_none() {
        return Err(NotStorable::VaryStar);
    }
    let explicit = cc.public
        || cc.max_age.is_some()
        || (cfg.shared && cc.s_maxage.is_some())
        || (!cfg.shared && cc.private)
        || response_headers.contains_key(http::header::EXPIRES);
    if !explicit && !heuristically_cacheable(status) {
        return Err(NotStorable::NoFreshnessOrValidator);
    }
    Ok(())
}

/// The field lines to store for a response (RFC 9111 section 3.1): drops
/// hop-by-hop fields (and those named by `Connection`), `Set-Cookie` /
/// `Set-Cookie2` (never replayed from a shared cache), and fields named by
/// qualified `no-cache="..."` and, in a shared cache, `private="..."`.
/// Names lower-cased, order and repetitions kept.
pub fn headers_to_store(response_headers: &HeaderMap, cfg: &PolicyConfig) -> Vec<(String, Vec<u8>)> {
    let cc = CacheControl::from_response_headers(response_headers);
    let connection = crate::wire::fields::connection_named(response_headers);
    let mut out = Vec::with_capacity(response_headers.len());
    for (name, value) in response_headers {
        let n = name.as_str();
        if crate::wire::fields::is_hop_by_hop(n)
            || connection.iter().any(|c| c == n)
            || (!cfg.store_set_cookie && is_set_cookie(n))
            || cc.no_cache_fields.iter().any(|f| f == n)
            || (cfg.shared && cc.private_fields.iter().any(|f| f == n))
        {
            continue;
        }
        out.push((n.to_string(), value.as_bytes().to_vec()));
    }
    out
}

/// RFC 9111 section 4.2.1 / 4.2.2: the freshness lifetime of a stored
/// response: `s-maxage` (shared), `max-age`, `Expires` − `Date`, then a
/// heuristic for heuristically cacheable status codes (RFC 9110 section
/// 15.1) from `Last-Modified`, then `cfg.default_ttl` for those codes. An
/// invalid `Expires` means already expired. Never negative.
pub fn freshness_lifetime(stored: &StoredResponse, cfg: &PolicyConfig) -> Duration {
    lifetime_with(stored, &CacheControl::from_stored(&stored.headers), cfg)
}

/// [`freshness_lifetime`] with the stored response's directives already parsed.
fn lifetime_with(stored: &StoredResponse, cc: &CacheControl, cfg: &PolicyConfig) -> Duration {
    let headers = &stored.headers;
    if cfg.shared {
        if let Some(s) = cc.s_maxage {
            return Duration::from_secs(s);
        }
    }
    if let Some(m) = cc.max_age {
        return Duration::from_secs(m);
    }
    let date = || single_date(headers, "date").unwrap_or_else(|| from_millis(stored.response_time_ms));
    if headers.iter().any(|(n, _)| n == "expires") {
        // Section 5.3: an invalid Expires (or several) is a time in the past.
        return match single_date(headers, "expires") {
            Some(expires) => expires.duration_since(date()).unwrap_or(Duration::ZERO),
            None => Duration::ZERO,
        };
    }
    if !(heuristically_cacheable(stored.status) || cc.public) {
        return Duration::ZERO;
    }
    // Section 4.2.2: heuristic freshness, only without explicit expiration.
    match single_date(headers, "last-modified") {
        Some(lm) => {
            let since = date().duration_since(lm).unwrap_or(Duration::ZERO);
            let fraction = if cfg.heuristic_fraction.is_finite() { cfg.heuristic_fraction.max(0.0) } else { 0.0 };
            let secs = (since.as_secs_f64() * fraction).min(cfg.heuristic_max.as_secs_f64());
            Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO).min(cfg.heuristic_max)
        }
        None => cfg.default_ttl,
    }
}

/// RFC 9111 section 4.2.3: the current age of a stored response at `now`
/// (`apparent_age`, `corrected_age_value` from `Age`, `resident_time`).
pub fn current_age(stored: &StoredResponse, now: SystemTime) -> Duration {
    let request_time = from_millis(stored.request_time_ms.min(stored.response_time_ms));
    let response_time = from_millis(stored.response_time_ms);
    let age_value = Duration::from_secs(age_value(&stored.headers));
    let date_value = single_date(&stored.headers, "date").unwrap_or(response_time);
    let apparent_age = response_time.duration_since(date_value).unwrap_or(Duration::ZERO);
    let response_delay = response_time.duration_since(request_time).unwrap_or(Duration::ZERO);
    let corrected_age_value = age_value + response_delay;
    let corrected_initial_age = apparent_age.max(corrected_age_value);
    let resident_time = now.duration_since(response_time).unwrap_or(Duration::ZERO);
    corrected_initial_age + resident_time
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

/// Decides whether `stored` may answer a request whose parsed
/// `Cache-Control` (and `Pragma`) is `req` at `now` (RFC 9111 section 4.2 and 4.2.4; request directives of 5.2.1;
/// response `no-cache`, `must-revalidate`, `proxy-revalidate`; RFC 5861
/// `stale-while-revalidate`).
pub fn decide(req: &CacheControl, stored: &StoredResponse, now: SystemTime, cfg: &PolicyConfig) -> Decision {
    let cc = CacheControl::from_stored(&stored.headers);
    let lifetime_ms = lifetime_with(stored, &cc, cfg).as_millis() as i128;
    let age_ms = current_age(stored, now).as_millis() as i128;
    // Section 4.2: fresh when freshness_lifetime > current_age.
    let stale = lifetime_ms <= age_ms;
    let remaining_ms = lifetime_ms - age_ms;
    let decision = |reuse| Decision {
        reuse,
        age: (age_ms / 1000).min(u64::MAX as i128) as u64,
        ttl: remaining_ms.div_euclid(1000).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        stale,
    };
    // 5.2.1.4 (and Pragma, 5.4): the client wants validation.
    // 5.2.2.4: unqualified no-cache in the response: always validate.
    if req.no_cache || cc.no_cache {
        return decision(Reuse::Revalidate);
    }
    // 5.2.1.1: the client does not accept an age beyond max-age.
    if let Some(max_age) = req.max_age {
        if age_ms > i128::from(max_age) * 1000 {
            return decision(Reuse::Revalidate);
        }
    }
    // 5.2.1.3: the client wants it fresh for at least min-fresh more seconds.
    if let Some(min_fresh) = req.min_fresh {
        if remaining_ms < i128::from(min_fresh) * 1000 {
            return decision(Reuse::Revalidate);
        }
    }
    if !stale {
        return decision(Reuse::Serve);
    }
    let staleness_ms = age_ms - lifetime_ms;
    if forbids_stale(&cc, cfg) {
        return decision(Reuse::Revalidate);
    }
    // 5.2.1.2: max-stale lets the client accept a stale response, unless the
    // response forbids it; s-maxage implies proxy-revalidate (5.2.2.10).
    if !(cfg.shared && cc.s_maxage.is_some()) {
        match req.max_stale {
            Some(None) => return decision(Reuse::Serve),
            Some(Some(n)) if staleness_ms <= i128::from(n) * 1000 => return decision(Reuse::Serve),
            _ => {}
        }
    }
    // RFC 5861 section 3: stale-while-revalidate.
    if let Some(swr) = cc.stale_while_revalidate {
        if staleness_ms <= i128::from(swr) * 1000 {
            return decision(Reuse::ServeStaleAndRevalidate);
        }
    }
    decision(Reuse::Revalidate)
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

/// Whether a stale stored response may be served because the origin failed
/// (`req`: the request's parsed `Cache-Control`):
/// within `stale-if-error` (RFC 5861 section 4; request or response
/// directive) for status 500/502/503/504 or an unreachable origin; or, when
/// unreachable and the response carries no `stale-if-error` of its own,
/// within `cfg.max_stale_on_error` of staleness (not for `s-maxage`, which
/// implies `proxy-revalidate`). Never for `must-revalidate`,
/// `proxy-revalidate` (shared), `no-cache` responses, or a request with
/// `no-cache`. A fresh response is trivially allowed (staleness 0).
pub fn may_serve_stale_on_error(
    req: &CacheControl,
    stored: &StoredResponse,
    error: OriginError,
    now: SystemTime,
    cfg: &PolicyConfig,
) -> bool {
    let cc = CacheControl::from_stored(&stored.headers);
    if req.no_cache || forbids_stale(&cc, cfg) {
        return false;
    }
    let is_error = match error {
        OriginError::Status(code) => matches!(code, 500 | 502 | 503 | 504),
        OriginError::Unreachable => true,
    };
    if !is_error {
        return false;
    }
    let lifetime = lifetime_with(stored, &cc, cfg);
    let age = current_age(stored, now);
    let staleness = age.saturating_sub(lifetime);
    // RFC 5861 section 4: stale-if-error in the response or the request.
    let window = match (cc.stale_if_error, req.stale_if_error) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    if let Some(window) = window {
        if staleness <= Duration::from_secs(window) {
            return true;
        }
    }
    // RFC 9111 section 4.2.4: a disconnected cache may serve stale, within
    // the configured bound, unless s-maxage (implied proxy-revalidate)
    // forbids it, or the origin set its own bound with stale-if-error (C22:
    // past that window an unreachable origin is an error).
    error == OriginError::Unreachable
        && cc.stale_if_error.is_none()
        && !(cfg.shared && cc.s_maxage.is_some())
        && !cfg.max_stale_on_error.is_zero()
        && staleness <= cfg.max_stale_on_error
}

/// RFC 9111 section 4.3.1: the validators to send when revalidating `stored`:
/// `If-None-Match` with the stored `ETag`, and `If-Modified-Since` with the
/// stored `Last-Modified` (only when there is one).
pub fn conditional_headers(stored: &StoredResponse) -> Vec<(http::header::HeaderName, http::HeaderValue)> {
    let mut out = Vec::with_capacity(2);
    if let Some(etag) = stored_value(&stored.headers, "etag") {
        if let Ok(v) = http::HeaderValue::from_bytes(etag) {
            out.push((http::header::IF_NONE_MATCH, v));
        }
    }
    // Section 4.3.1: Last-Modified is sent as If-Modified-Since (only a valid date).
    if let Some(lm) = stored_value(&stored.headers, "last-modified") {
        if parse_date(lm).is_some() {
            if let Ok(v) = http::HeaderValue::from_bytes(lm) {
                out.push((http::header::IF_MODIFIED_SINCE, v));
            }
        }
    }
    out
}

/// RFC 9111 section 4.3.3 / 4.3.4: does a 304 with `response_headers` apply
/// to `stored`? (Strong ETag match when the 304 has an ETag; otherwise
/// Last-Modified; otherwise true for a single stored response.)
pub fn not_modified_matches(stored: &StoredResponse, response_headers: &HeaderMap) -> bool {
    let new_etag = response_headers.get(http::header::ETAG).map(|v| v.as_bytes());
    if let Some(new_etag) = new_etag {
        return match (stored_value(&stored.headers, "etag"), parse_etag(new_etag)) {
            (Some(old), Some(new)) if !new.weak => {
                parse_etag(old).is_some_and(|old| !old.weak && old.tag == new.tag)
            }
            // A weak validator in the 304: weak comparison (section 4.3.4
            // selects by weak validators only when no strong one is sent).
            (Some(old), Some(new)) => parse_etag(old).is_some_and(|old| old.tag == new.tag),
            _ => false,
        };
    }
    if let Some(new_lm) = response_headers.get(http::header::LAST_MODIFIED) {
        return match (stored_value(&stored.headers, "last-modified").and_then(parse_date), parse_date(new_lm.as_bytes())) {
            (Some(old), Some(new)) => old == new,
            _ => false,
        };
    }
    true
}

/// RFC 9111 section 4.3.5: may a `200` response to a HEAD update `stored`
/// (a stored GET response of `body_len` bytes)? True when every validator
/// the HEAD response carries (`ETag`, `Last-Modified`) equals the stored
/// one, and its `Content-Length`, if any, equals `body_len`. When false the
/// stored response is to be considered stale.
pub fn head_matches(stored: &StoredResponse, head_headers: &HeaderMap, body_len: u64) -> bool {
    let single = |name: http::header::HeaderName| {
        let mut lines = head_headers.get_all(name).iter();
        match (lines.next(), lines.next()) {
            (None, _) => Ok(None),
            (Some(v), None) => Ok(Some(v.as_bytes())),
            _ => Err(()),
        }
    };
    let (Ok(etag), Ok(last_modified), Ok(length)) =
        (single(http::header::ETAG), single(http::header::LAST_MODIFIED), single(http::header::CONTENT_LENGTH))
    else {
        return false;
    };
    if let Some(etag) = etag {
        if stored_value(&stored.headers, "etag").map(|v| v.trim_ascii()) != Some(etag.trim_ascii()) {
            return false;
        }
    }
    if let Some(lm) = last_modified {
        match (stored_value(&stored.headers, "last-modified").and_then(parse_date), parse_date(lm)) {
            (Some(old), Some(new)) if old == new => {}
            _ => return false,
        }
    }
    match length {
        Some(l) => std::str::from_utf8(l).ok().and_then(|l| l.trim().parse::<u64>().ok()) == Some(body_len),
        None => true,
    }
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
    let mut headers: Vec<(String, Vec<u8>)> = Vec::with_capacity(stored.headers.len() + 4);
    let update = headers_to_store(response_headers, cfg);
    let updates = |name: &str| !NOT_UPDATED_BY_304.contains(&name) && update.iter().any(|(n, _)| n == name);
    let mut placed: Vec<&str> = Vec::new();
    for (name, value) in &stored.headers {
        if updates(name) {
            // Replace all same-named lines, at the position of the first one.
            if !placed.contains(&name.as_str()) {
                placed.push(name.as_str());
                headers.extend(update.iter().filter(|(n, _)| n == name).cloned());
            }
        } else {
            headers.push((name.clone(), value.clone()));
        }
    }
    for (name, value) in &update {
        if !NOT_UPDATED_BY_304.contains(&name.as_str()) && !stored.headers.iter().any(|(n, _)| n == name) {
            headers.push((name.clone(), value.clone()));
        }
    }
    // Section 4.2.3 restarts from the 304: its Age (none: 0) and its Date
    // (none: the time it was received, RFC 9110 section 6.6.1), so that the
    // stored response's old Age and Date are not counted again.
    if !update.iter().any(|(n, _)| n == "age") {
        headers.retain(|(n, _)| n != "age");
    }
    if !update.iter().any(|(n, _)| n == "date") {
        let date = httpdate::fmt_http_date(response_time).into_bytes();
        match headers.iter_mut().find(|(n, _)| n == "date") {
            Some(line) => line.1 = date,
            None => headers.push(("date".to_string(), date)),
        }
        let mut seen = false;
        headers.retain(|(n, _)| n != "date" || !std::mem::replace(&mut seen, true));
    }
    StoredResponse {
        status: stored.status,
        headers,
        request_time_ms: to_millis(request_time),
        response_time_ms: to_millis(response_time),
        url: stored.url.clone(),
        vary_request: stored.vary_request.clone(),
    }
}

/// RFC 9111 section 4.3.2: may a fresh stored response answer the client's
/// own conditional request with 304? True when `If-None-Match` matches the
/// stored ETag (weak comparison; `*` matches), or, without `If-None-Match`,
/// when `If-Modified-Since` is not earlier than the stored `Last-Modified`
/// (or `Date`) and the status is 200.
pub fn client_not_modified(request_headers: &HeaderMap, stored: &StoredResponse) -> bool {
    let inm: Vec<&[u8]> = request_headers.get_all(http::header::IF_NONE_MATCH).iter().map(|v| v.as_bytes()).collect();
    if !inm.is_empty() {
        let stored_etag = stored_value(&stored.headers, "etag").and_then(parse_etag);
        return inm.iter().flat_map(|line| split_etag_list(line)).any(|candidate| {
            if candidate == b"*" {
                return true;
            }
            // RFC 9110 section 13.1.2: weak comparison.
            matches!((&stored_etag, parse_etag(candidate)), (Some(s), Some(c)) if s.tag == c.tag)
        });
    }
    if stored.status != 200 {
        return false;
    }
    let Some(ims) = request_headers.get(http::header::IF_MODIFIED_SINCE).and_then(|v| parse_date(v.as_bytes())) else {
        return false;
    };
    let validator = single_date(&stored.headers, "last-modified").or_else(|| single_date(&stored.headers, "date"));
    validator.is_some_and(|lm| lm <= ims)
}

/// RFC 9111 section 4.4: the primary keys to invalidate after a response
/// with `status` to an unsafe `method` on `primary_key`: the target itself,
/// and `Location` / `Content-Location` when same-origin (relative references
/// resolved against the target). Empty for safe methods and for error
/// statuses (only 2xx and 3xx invalidate).
pub fn invalidation_targets(method: &Method, status: u16, primary_key: &str, response_headers: &HeaderMap) -> Vec<String> {
    if is_safe(method) || !(200..400).contains(&status) {
        return Vec::new();
    }
    let mut out = vec![primary_key.to_string()];
    for name in [http::header::LOCATION, http::header::CONTENT_LOCATION] {
        for value in response_headers.get_all(name) {
            let Ok(reference) = std::str::from_utf8(value.as_bytes()) else { continue };
            let Some(resolved) = crate::wire::url::resolve(primary_key, reference.trim()) else { continue };
            let Some(key) = resolved.parse::<http::Uri>().ok().as_ref().and_then(super::key::primary_key) else {
                continue;
            };
            if same_origin(&key, primary_key) && !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
}

/// RFC 9110 section 15.1: status codes that are heuristically cacheable.
pub fn heuristically_cacheable(status: u16) -> bool {
    matches!(status, 200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501)
}

/// Status codes whose caching requirements this cache implements (RFC 9111
/// section 5.2.2.3, `must-understand`): the final codes defined by RFC 9110
/// except 206 (no partial storage) and 304.
pub fn status_understood(status: u16) -> bool {
    matches!(status, 200..=205 | 300..=303 | 305 | 307 | 308 | 400..=417 | 421..=426 | 500..=505)
}

/// RFC 9110 section 9.2.1: safe methods (all others invalidate, section 4.4).
fn is_safe(method: &Method) -> bool {
    matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS" | "TRACE")
}


fn is_set_cookie(name: &str) -> bool {
    name == "set-cookie" || name == "set-cookie2"
}

/// Fields a 304 never changes in the stored response (RFC 9111 section 3.2):
/// they describe the stored content itself (its length, coding, digest,
/// range, and the validator that identifies it).
const NOT_UPDATED_BY_304: &[&str] =
    &["content-length", "content-encoding", "content-md5", "content-range", "digest", "content-digest", "repr-digest", "etag"];

/// When a stale response must not be served at all (RFC 9111 section 4.2.4,
/// 5.2.2.2, 5.2.2.4, 5.2.2.8): must-revalidate, no-cache, and in a shared
/// cache proxy-revalidate.
fn forbids_stale(cc: &CacheControl, cfg: &PolicyConfig) -> bool {
    cc.must_revalidate || cc.no_cache || (cfg.shared && cc.proxy_revalidate)
}

/// The value of the only line named `name`; `None` when absent or repeated.
fn stored_value<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    let mut lines = headers.iter().filter(|(n, _)| n == name);
    let first = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    Some(first.1.as_slice())
}

/// An HTTP-date (RFC 9110 section 5.6.7, all three formats); `None` if invalid.
fn parse_date(value: &[u8]) -> Option<SystemTime> {
    let s = std::str::from_utf8(value).ok()?.trim();
    httpdate::parse_http_date(s).ok()
}

/// The date in the only line named `name`; `None` when absent, repeated or invalid.
fn single_date(headers: &[(String, Vec<u8>)], name: &str) -> Option<SystemTime> {
    stored_value(headers, name).and_then(parse_date)
}

/// `age_value` of RFC 9111 section 4.2.3, in seconds, from the stored `Age`.
///
/// Absent: 0. A single line holding delta-seconds: that value (saturated at
/// 2147483648). Anything else (several lines, a list, a sign, a fraction, a
/// parameter, junk) is invalid and makes the response as old as possible,
/// hence stale: the conservative reading the HTTP caching test suite
/// (http-cache-tests 0.4.5, `age-parse-*`) requires. RFC 9111 section 5.1
/// would use a list's first member instead.
pub fn age_value(headers: &[(String, Vec<u8>)]) -> u64 {
    let mut lines = headers.iter().filter(|(n, _)| n == "age");
    let Some((_, first)) = lines.next() else { return 0 };
    if lines.next().is_some() {
        return DELTA_SECONDS_MAX;
    }
    delta_seconds(first.trim_ascii()).unwrap_or(DELTA_SECONDS_MAX)
}

/// An entity tag (RFC 9110 section 8.8.3).
struct EntityTag<'a> {
    weak: bool,
    /// The opaque tag including its quotes.
    tag: &'a [u8],
}

fn parse_etag(value: &[u8]) -> Option<EntityTag<'_>> {
    let v = value.trim_ascii();
    let (weak, tag) = match v.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, v),
    };
    if tag.len() >= 2 && tag[0] == b'"' && tag[tag.len() - 1] == b'"' {
        Some(EntityTag { weak, tag })
    } else if !tag.is_empty() && !tag.contains(&b'"') && !tag.contains(&b',') {
        // Unquoted (invalid but common): compared as is.
        Some(EntityTag { weak, tag })
    } else {
        None
    }
}

/// Splits an `If-None-Match` list on commas outside quoted strings.
fn split_etag_list(line: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let (mut start, mut in_quote) = (0, false);
    for (i, &b) in line.iter().enumerate() {
        match b {
            b'"' => in_quote = !in_quote,
            b',' if !in_quote => {
                out.push(line[start..i].trim_ascii());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(line[start..].trim_ascii());
    out.retain(|t| !t.is_empty());
    out
}

/// The origin (`scheme://host[:port]`) of a primary key.
fn origin_of(key: &str) -> &str {
    let after = key.find("://").map_or(0, |i| i + 3);
    match key[after..].find(['/', '?']) {
        Some(i) => &key[..after + i],
        None => key,
    }
}

fn same_origin(a: &str, b: &str) -> bool {
    origin_of(a) == origin_of(b)
}

