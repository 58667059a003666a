//! RFC 9111 section 4.3 (validation): the conditional request to send
//! ([`conditional_headers`], 4.3.1), answering a client's own conditional
//! ([`client_not_modified`], 4.3.2), which stored response a 304 or a HEAD
//! updates ([`not_modified_matches`], [`head_matches`], 4.3.4, 4.3.5), and
//! the update itself ([`freshen`], 4.3.4 with 3.2); entity-tag parsing.

use super::config::PolicyConfig;
use super::field_lines::{date_about, stored_date, stored_value};
use super::storable::headers_to_store;
use super::stored::{to_millis, StoredResponse};
use http::HeaderMap;
use std::time::SystemTime;

/// RFC 9111 section 4.3.1: the validators to send when revalidating `stored`:
/// `If-None-Match` with the stored `ETag`, and `If-Modified-Since` with the
/// stored `Last-Modified` (only when there is one).
pub fn conditional_headers(
    stored: &StoredResponse,
) -> Vec<(http::header::HeaderName, http::HeaderValue)> {
    let mut out = Vec::with_capacity(2);
    if let Some(etag) = stored_value(&stored.headers, "etag") {
        if let Ok(v) = http::HeaderValue::from_bytes(etag) {
            out.push((http::header::IF_NONE_MATCH, v));
        }
    }
    // Section 4.3.1: Last-Modified is sent as If-Modified-Since (only a valid date).
    if let Some(lm) = stored_value(&stored.headers, "last-modified") {
        if date_about(stored, lm).is_some() {
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
        return match (stored_date(stored, "last-modified"), date_about(stored, new_lm.as_bytes())) {
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
    let (Ok(etag), Ok(last_modified), Ok(length)) = (
        single(http::header::ETAG),
        single(http::header::LAST_MODIFIED),
        single(http::header::CONTENT_LENGTH),
    ) else {
        return false;
    };
    if let Some(etag) = etag {
        if stored_value(&stored.headers, "etag").map(|v| v.trim_ascii()) != Some(etag.trim_ascii())
        {
            return false;
        }
    }
    if let Some(lm) = last_modified {
        match (stored_date(stored, "last-modified"), date_about(stored, lm)) {
            (Some(old), Some(new)) if old == new => {}
            _ => return false,
        }
    }
    match length {
        Some(l) => {
            std::str::from_utf8(l).ok().and_then(|l| l.trim().parse::<u64>().ok()) == Some(body_len)
        }
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
    let updates =
        |name: &str| !NOT_UPDATED_BY_304.contains(&name) && update.iter().any(|(n, _)| n == name);
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
        if !NOT_UPDATED_BY_304.contains(&name.as_str())
            && !stored.headers.iter().any(|(n, _)| n == name)
        {
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
    let inm: Vec<&[u8]> =
        request_headers.get_all(http::header::IF_NONE_MATCH).iter().map(|v| v.as_bytes()).collect();
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
    let Some(ims) = request_headers
        .get(http::header::IF_MODIFIED_SINCE)
        .and_then(|v| date_about(stored, v.as_bytes()))
    else {
        return false;
    };
    let validator = stored_date(stored, "last-modified").or_else(|| stored_date(stored, "date"));
    validator.is_some_and(|lm| lm <= ims)
}

/// Fields a 304 never changes in the stored response (RFC 9111 section 3.2):
/// they describe the stored content itself (its length, coding, digest,
/// range, and the validator that identifies it).
const NOT_UPDATED_BY_304: &[&str] = &[
    "content-length",
    "content-encoding",
    "content-md5",
    "content-range",
    "digest",
    "content-digest",
    "repr-digest",
    "etag",
];

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
