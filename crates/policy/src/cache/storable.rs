//! RFC 9111 section 3 (storing responses) and 3.1 (which header fields
//! are stored): [`storable`], [`headers_to_store`], and the status-code
//! tables they read ([`heuristically_cacheable`], [`status_understood`]).

use super::config::PolicyConfig;
use crate::cache::cache_control::CacheControl;
use http::{HeaderMap, Method};

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
    if crate::cache::key::vary_names(response_headers).is_none() {
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
pub fn headers_to_store(
    response_headers: &HeaderMap,
    cfg: &PolicyConfig,
) -> Vec<(String, Vec<u8>)> {
    fields_to_store(response_headers, cfg)
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.to_vec()))
        .collect()
}

/// [`headers_to_store`] borrowing the names and values from
/// `response_headers` (one allocation, not two per field line: the miss
/// path encodes them into the stored head at once,
/// [`crate::cache::encode_head`]).
pub fn fields_to_store<'a>(
    response_headers: &'a HeaderMap,
    cfg: &PolicyConfig,
) -> Vec<(&'a str, &'a [u8])> {
    let cc = CacheControl::from_response_headers(response_headers);
    let connection = crate::hop_by_hop::connection_named(response_headers);
    let mut out = Vec::with_capacity(response_headers.len());
    for (name, value) in response_headers {
        let n = name.as_str();
        if crate::hop_by_hop::is_hop_by_hop(n)
            || connection.iter().any(|c| c == n)
            || (!cfg.store_set_cookie && is_set_cookie(n))
            || cc.no_cache_fields.iter().any(|f| f == n)
            || (cfg.shared && cc.private_fields.iter().any(|f| f == n))
        {
            continue;
        }
        out.push((n, value.as_bytes()));
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

fn is_set_cookie(name: &str) -> bool {
    name == "set-cookie" || name == "set-cookie2"
}
