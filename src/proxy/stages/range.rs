//! Byte-range requests answered from a complete stored response
//! (RFC 9111 section 3.4, RFC 9110 section 14).
//!
//! Only complete `200` responses are stored, so a `Range: bytes=...` GET
//! that hits the cache is answered here from the stored body file:
//! - one satisfiable range: `206` with `Content-Range: bytes first-last/len`
//!   and only those bytes (RFC 9110 section 14.1.2, 15.3.7);
//! - no satisfiable range: `416` with `Content-Range: bytes */len`
//!   (section 15.5.17);
//! - several ranges, a unit other than `bytes`, a malformed value, or an
//!   `If-Range` that does not match the stored validator (section 13.1.5):
//!   the full `200`, which section 14.2 allows ("a server MAY ignore the
//!   Range header field").
//!
//! Misses and revalidations still forward the client's `Range` to the
//! origin; its `206` is passed through and never stored.

use crate::wire::body::ProxyBody;
use crawlcache_policy::cache::StoredResponse;
use http::header::{HeaderMap, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode};
use std::io::{Seek, SeekFrom};
use std::time::{Duration, SystemTime};

/// How to answer a range request from a representation of known length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAnswer {
    /// Send the whole representation with its original status.
    Full,
    /// Send bytes `first..=last` (inclusive offsets) as a `206`.
    Partial {
        /// Offset of the first byte sent.
        first: u64,
        /// Offset of the last byte sent (inclusive).
        last: u64,
    },
    /// No requested range overlaps the representation: `416`.
    Unsatisfiable,
}

/// One `range-spec` of RFC 9110 section 14.1.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RangeSpec {
    /// `first-pos "-" [ last-pos ]`.
    Int { first: u64, last: Option<u64> },
    /// `"-" suffix-length`.
    Suffix(u64),
}

/// RFC 9110 section 14.2: the answer to a request with `request_headers` for
/// a representation of `len` bytes whose stored fields are `stored`.
/// Without a usable `Range` field (absent, not `bytes`, malformed, several
/// ranges, or a failed `If-Range`) the answer is [`RangeAnswer::Full`].
pub fn select(request_headers: &HeaderMap, stored: &StoredResponse, len: u64) -> RangeAnswer {
    let mut lines = request_headers.get_all(http::header::RANGE).iter();
    let Some(value) = lines.next() else { return RangeAnswer::Full };
    if lines.next().is_some() {
        // Range is a singleton field; several lines are invalid.
        return RangeAnswer::Full;
    }
    let Some(specs) = parse_range(value.as_bytes()) else { return RangeAnswer::Full };
    if let Some(if_range) = request_headers.get(http::header::IF_RANGE) {
        if !if_range_matches(if_range.as_bytes(), stored) {
            return RangeAnswer::Full;
        }
    }
    if len == 0 {
        // Section 14.1.1: only a suffix range is satisfiable for an empty
        // representation, and it selects nothing; send it whole.
        return RangeAnswer::Full;
    }
    let satisfiable: Vec<(u64, u64)> = specs
        .iter()
        .filter_map(|spec| match *spec {
            RangeSpec::Int { first, last } if first < len => {
                Some((first, last.unwrap_or(u64::MAX).min(len - 1)))
            }
            RangeSpec::Int { .. } => None,
            RangeSpec::Suffix(0) => None,
            RangeSpec::Suffix(n) => Some((len - n.min(len), len - 1)),
        })
        .collect();
    match satisfiable.as_slice() {
        [] => RangeAnswer::Unsatisfiable,
        [(first, last)] if specs.len() == 1 => RangeAnswer::Partial { first: *first, last: *last },
        // Several ranges: a multipart/byteranges answer is optional; the
        // whole representation is always a correct answer.
        _ => RangeAnswer::Full,
    }
}

/// Parses `bytes=range-spec, ...` (RFC 9110 section 14.1.2, the unit
/// compared case-insensitively). `None` for another unit or any syntax
/// error, including an `int-range` whose last-pos is before its first-pos.
fn parse_range(value: &[u8]) -> Option<Vec<RangeSpec>> {
    let value = std::str::from_utf8(value).ok()?.trim_matches([' ', '\t']);
    let (unit, set) = value.split_once('=')?;
    if !unit.eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = Vec::new();
    for item in set.split(',') {
        let item = item.trim_matches([' ', '\t']);
        if item.is_empty() {
            // Empty list elements are allowed and ignored (RFC 9110 section 5.6.1).
            continue;
        }
        let (first, last) = item.split_once('-')?;
        let spec = if first.is_empty() {
            RangeSpec::Suffix(digits(last)?)
        } else {
            let first = digits(first)?;
            let last = if last.is_empty() { None } else { Some(digits(last)?) };
            if last.is_some_and(|l| l < first) {
                return None;
            }
            RangeSpec::Int { first, last }
        };
        specs.push(spec);
    }
    if specs.is_empty() {
        None
    } else {
        Some(specs)
    }
}

/// `1*DIGIT`, saturating at `u64::MAX`.
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, b| n.saturating_mul(10).saturating_add(u64::from(b - b'0'))))
}

/// RFC 9110 section 13.1.5: `If-Range` holds when it is an entity tag that
/// strongly matches the stored `ETag`, or an HTTP-date equal to the stored
/// `Last-Modified` when that is a strong validator (at least one second
/// before the stored `Date`, section 8.8.2.2).
fn if_range_matches(value: &[u8], stored: &StoredResponse) -> bool {
    let value = value.trim_ascii();
    let field = |name: &str| {
        let mut lines = stored.headers.iter().filter(|(n, _)| n == name);
        match (lines.next(), lines.next()) {
            (Some((_, v)), None) => Some(v.trim_ascii()),
            _ => None,
        }
    };
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        // Strong comparison: neither may be weak.
        return !value.starts_with(b"W/") && field("etag").is_some_and(|etag| etag == value);
    }
    let date = |v: &[u8]| {
        std::str::from_utf8(v).ok().and_then(|s| httpdate::parse_http_date(s.trim()).ok())
    };
    let (Some(wanted), Some(last_modified)) = (date(value), field("last-modified").and_then(date))
    else {
        return false;
    };
    let strong = field("date").and_then(date).is_some_and(|d: SystemTime| {
        d.duration_since(last_modified).unwrap_or(Duration::ZERO) >= Duration::from_secs(1)
    });
    strong && wanted == last_modified
}

/// Narrows a response built from the stored `200` (status 200, body the
/// whole stored body: a file, or the bytes of a short body read from the
/// store's pack) to what a GET with `Range` asked for: a `206` with
/// `Content-Range` and the selected bytes, a `416`, or `resp` unchanged
/// (no `Range`, another method or status, several ranges, failed
/// `If-Range`, or a body that is not a whole stored body).
pub fn narrow(
    request: &Parts,
    stored: &StoredResponse,
    resp: Response<ProxyBody>,
) -> Response<ProxyBody> {
    if request.method != Method::GET
        || resp.status() != StatusCode::OK
        || !request.headers.contains_key(http::header::RANGE)
    {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let len = match &body {
        ProxyBody::File { remaining, .. } => *remaining,
        ProxyBody::Full(Some(bytes)) => bytes.len() as u64,
        _ => return Response::from_parts(parts, body),
    };
    match select(&request.headers, stored, len) {
        RangeAnswer::Full => Response::from_parts(parts, body),
        RangeAnswer::Partial { first, last } => {
            let count = last - first + 1;
            let body = match body {
                ProxyBody::File { mut file, remaining } => {
                    if let Err(e) = file.seek(SeekFrom::Start(first)) {
                        tracing::warn!("cannot seek in a stored body ({e}); sending it whole");
                        let _ = file.seek(SeekFrom::Start(0));
                        return Response::from_parts(parts, ProxyBody::File { file, remaining });
                    }
                    ProxyBody::File { file, remaining: count }
                }
                // `select` keeps first <= last < len.
                ProxyBody::Full(Some(bytes)) if first <= last && last < len => {
                    ProxyBody::Full(Some(bytes.slice(first as usize..=last as usize)))
                }
                other => return Response::from_parts(parts, other),
            };
            parts.status = StatusCode::PARTIAL_CONTENT;
            let h = &mut parts.headers;
            h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(count));
            if let Ok(v) = HeaderValue::from_str(&format!("bytes {first}-{last}/{len}")) {
                h.insert(http::header::CONTENT_RANGE, v);
            }
            Response::from_parts(parts, body)
        }
        RangeAnswer::Unsatisfiable => {
            let mut out = Response::new(ProxyBody::empty());
            *out.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            let h = out.headers_mut();
            for name in ["date", "etag", "last-modified", "age", "via", "cache-status"] {
                for v in parts.headers.get_all(name) {
                    if let Ok(n) = http::header::HeaderName::from_bytes(name.as_bytes()) {
                        h.append(n, v.clone());
                    }
                }
            }
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                h.insert(http::header::CONTENT_RANGE, v);
            }
            h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(0u64));
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(headers: &[(&str, &str)]) -> StoredResponse {
        StoredResponse {
            status: 200,
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect(),
            request_time_ms: 0,
            response_time_ms: 0,
            url: "http://example.test/".into(),
            vary_request: Vec::new(),
        }
    }

    fn req(fields: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in fields {
            h.append(*n, HeaderValue::from_static(v));
        }
        h
    }

    fn answer(range: &'static str, len: u64) -> RangeAnswer {
        select(&req(&[("range", range)]), &stored(&[]), len)
    }

    #[test]
    fn section_14_1_2_int_range_selects_inclusive_offsets() {
        assert_eq!(answer("bytes=0-1", 11), RangeAnswer::Partial { first: 0, last: 1 });
        assert_eq!(answer("bytes=3-3", 11), RangeAnswer::Partial { first: 3, last: 3 });
    }

    #[test]
    fn section_14_1_2_absent_last_pos_runs_to_the_end() {
        assert_eq!(answer("bytes=1-", 11), RangeAnswer::Partial { first: 1, last: 10 });
    }

    #[test]
    fn section_14_1_2_last_pos_beyond_the_end_is_clamped() {
        assert_eq!(answer("bytes=5-1000", 11), RangeAnswer::Partial { first: 5, last: 10 });
        assert_eq!(
            answer("bytes=5-99999999999999999999999", 11),
            RangeAnswer::Partial { first: 5, last: 10 }
        );
    }

    #[test]
    fn section_14_1_2_suffix_range_selects_the_last_bytes() {
        assert_eq!(answer("bytes=-1", 11), RangeAnswer::Partial { first: 10, last: 10 });
        assert_eq!(answer("bytes=-100", 11), RangeAnswer::Partial { first: 0, last: 10 });
    }

    #[test]
    fn section_14_1_1_unsatisfiable_ranges_get_416() {
        assert_eq!(answer("bytes=11-", 11), RangeAnswer::Unsatisfiable);
        assert_eq!(answer("bytes=-0", 11), RangeAnswer::Unsatisfiable);
        assert_eq!(answer("bytes=20-30, 40-50", 11), RangeAnswer::Unsatisfiable);
    }

    #[test]
    fn section_14_2_unit_is_case_insensitive_and_ows_is_allowed() {
        assert_eq!(answer("Bytes=0-1", 11), RangeAnswer::Partial { first: 0, last: 1 });
        assert_eq!(answer(" bytes=0-1 ,", 11), RangeAnswer::Partial { first: 0, last: 1 });
    }

    #[test]
    fn section_14_2_malformed_or_foreign_ranges_are_ignored() {
        for r in [
            "bytes=5-1",
            "bytes=a-b",
            "bytes=",
            "bytes=1",
            "items=0-1",
            "bytes 0-1",
            "bytes=--1",
            "bytes=+1-2",
        ] {
            assert_eq!(answer(r, 11), RangeAnswer::Full, "{r}");
        }
    }

    #[test]
    fn section_14_2_several_ranges_are_answered_whole() {
        assert_eq!(answer("bytes=0-1, 4-5", 11), RangeAnswer::Full);
        // One satisfiable among unsatisfiable ones: still a multi-range request.
        assert_eq!(answer("bytes=0-1, 40-50", 11), RangeAnswer::Full);
    }

    #[test]
    fn an_empty_representation_is_sent_whole() {
        assert_eq!(answer("bytes=0-1", 0), RangeAnswer::Full);
        assert_eq!(answer("bytes=-5", 0), RangeAnswer::Full);
    }

    #[test]
    fn several_range_lines_are_ignored() {
        let h = req(&[("range", "bytes=0-1"), ("range", "bytes=2-3")]);
        assert_eq!(select(&h, &stored(&[]), 11), RangeAnswer::Full);
    }

    #[test]
    fn section_13_1_5_if_range_etag_needs_a_strong_match() {
        let s = stored(&[("etag", "\"abc\"")]);
        let with =
            |v: &'static str| select(&req(&[("range", "bytes=0-1"), ("if-range", v)]), &s, 11);
        assert_eq!(with("\"abc\""), RangeAnswer::Partial { first: 0, last: 1 });
        assert_eq!(with("\"other\""), RangeAnswer::Full);
        assert_eq!(with("W/\"abc\""), RangeAnswer::Full);
        let weak = stored(&[("etag", "W/\"abc\"")]);
        assert_eq!(
            select(&req(&[("range", "bytes=0-1"), ("if-range", "W/\"abc\"")]), &weak, 11),
            RangeAnswer::Full
        );
    }

    #[test]
    fn section_13_1_5_if_range_date_needs_a_strong_last_modified() {
        let lm = "Tue, 01 Jan 2030 00:00:00 GMT";
        let strong = stored(&[("last-modified", lm), ("date", "Tue, 01 Jan 2030 00:00:05 GMT")]);
        let weak = stored(&[("last-modified", lm), ("date", lm)]);
        let h = req(&[("range", "bytes=0-1"), ("if-range", "Tue, 01 Jan 2030 00:00:00 GMT")]);
        assert_eq!(select(&h, &strong, 11), RangeAnswer::Partial { first: 0, last: 1 });
        assert_eq!(select(&h, &weak, 11), RangeAnswer::Full);
        let other = req(&[("range", "bytes=0-1"), ("if-range", "Wed, 02 Jan 2030 00:00:00 GMT")]);
        assert_eq!(select(&other, &strong, 11), RangeAnswer::Full);
    }
}
