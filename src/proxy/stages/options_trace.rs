//! OPTIONS and TRACE, the two methods an intermediary has duties for (RFC
//! 9110 section 7.6.2, `Max-Forwards`), and OPTIONS for a whole server (RFC
//! 9112 section 3.2.4).
//!
//! - `OPTIONS` with `Max-Forwards: 0` is not forwarded: crawlcache answers
//!   as the final recipient (section 7.6.2), `200` with [`ALLOW`] and no
//!   content (section 9.3.7), offline too ([`answer_options`]).
//! - `OPTIONS` with `Max-Forwards: N`, N > 0, is forwarded with N − 1
//!   ([`update_max_forwards`]); a number beyond `u64` counts as
//!   `u64::MAX`.
//! - `OPTIONS` with a `Max-Forwards` that is not `1*DIGIT` (a sign, letters,
//!   a list, several lines, nothing) is refused with `400` and not
//!   forwarded: the field cannot be updated as section 7.6.2 requires, and
//!   forwarding it unchanged would take away the bound a chain of proxies
//!   relies on (Apache httpd's proxy refuses it the same way).
//! - `TRACE` is refused with `405` and [`ALLOW`], whatever its
//!   `Max-Forwards`, and never forwarded ([`refuse_trace`]): the origin's
//!   echo of the request would hand the client's cookies and credentials,
//!   and the fields crawlcache adds, to whatever page made the request
//!   (cross-site tracing).
//! - Other methods: `Max-Forwards` is forwarded unchanged (section 7.6.2
//!   lets a proxy ignore it for them).
//! - `OPTIONS http://host:port` (an empty path and no query) asks about the
//!   server as a whole, not about `/` ([`WholeServer`]): it goes to the
//!   origin as `OPTIONS *` (asterisk-form), and to a parent proxy in
//!   absolute form with the empty path, for the last proxy to do the same
//!   ([`crate::upstream::origin::Upstream::send_server_options`]). So does
//!   `OPTIONS *` received inside an intercepted tunnel.

use super::super::exchange::Exchange;
use crate::wire::body::ProxyBody;
use crate::wire::error::error_response;
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use http::header::{HeaderValue, ALLOW as ALLOW_FIELD, CONTENT_LENGTH, MAX_FORWARDS};
use http::{HeaderMap, Response, StatusCode};

/// The `Allow` of crawlcache's own answers to OPTIONS and TRACE (RFC 9110
/// section 10.2.1): the methods it forwards to origins. Methods beyond
/// these (WebDAV's, say) are forwarded too; `TRACE` never is, and `CONNECT`
/// opens a tunnel rather than addressing a resource.
pub const ALLOW: &str = "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH";

/// What a request's `Max-Forwards` says (RFC 9110 section 7.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxForwards {
    /// No `Max-Forwards` field.
    Absent,
    /// How many more times the request may be forwarded (`u64::MAX` for
    /// any larger number).
    Remaining(u64),
    /// Not `1*DIGIT`, or more than one field line.
    Invalid,
}

/// The `Max-Forwards` of `headers`: one field line of decimal digits (the
/// whitespace around a field value is not part of it), else
/// [`MaxForwards::Invalid`].
pub fn max_forwards(headers: &HeaderMap) -> MaxForwards {
    let mut lines = headers.get_all(MAX_FORWARDS).iter();
    let (Some(value), None) = (lines.next(), lines.next()) else {
        return if headers.contains_key(MAX_FORWARDS) {
            MaxForwards::Invalid
        } else {
            MaxForwards::Absent
        };
    };
    let digits = value.as_bytes().trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return MaxForwards::Invalid;
    }
    let n = digits
        .iter()
        .try_fold(0u64, |n, d| n.checked_mul(10).and_then(|n| n.checked_add(u64::from(d - b'0'))));
    MaxForwards::Remaining(n.unwrap_or(u64::MAX))
}

/// Updates the `Max-Forwards` of an OPTIONS request about to be forwarded
/// (RFC 9110 section 7.6.2): N becomes N − 1. Left alone when absent, and
/// when it is 0 or invalid (such a request is answered, never forwarded).
pub fn update_max_forwards(headers: &mut HeaderMap) {
    if let MaxForwards::Remaining(n @ 1..) = max_forwards(headers) {
        // A number is always a valid field value.
        if let Ok(v) = HeaderValue::from_str(&(n - 1).to_string()) {
            headers.insert(MAX_FORWARDS, v);
        }
    }
}

/// Marks an OPTIONS request about the whole server (a request extension):
/// its request line had an absolute target with an empty path
/// (`OPTIONS http://host:port`, which the URI type reads as `/`; see
/// [`crate::wire::request_line`]), or it was `OPTIONS *` inside a tunnel.
/// Such a request goes out as `OPTIONS *` (RFC 9112 section 3.2.4).
#[derive(Debug, Clone, Copy)]
pub struct WholeServer;

/// The `scheme://authority` an OPTIONS request read as `scheme://authority/`
/// (no query) may have been written as, with an empty path; `None` for
/// any other request, which cannot be about the whole server.
pub fn whole_server_candidate<B>(req: &http::Request<B>) -> Option<String> {
    let uri = req.uri();
    if req.method() != http::Method::OPTIONS || uri.path() != "/" || uri.query().is_some() {
        return None;
    }
    Some(format!("{}://{}", uri.scheme_str()?, uri.authority()?))
}

/// Whether `ex` is an OPTIONS about the whole server ([`WholeServer`]).
pub fn is_whole_server(ex: &Exchange) -> bool {
    ex.parts.method == http::Method::OPTIONS && ex.parts.extensions.get::<WholeServer>().is_some()
}

/// crawlcache's own answer to an OPTIONS that may not be forwarded
/// (`Max-Forwards: 0`): `200`, [`ALLOW`], `Content-Length: 0` (RFC 9110
/// sections 7.6.2 and 9.3.7). Sets the outcome `fwd=bypass;
/// detail=max-forwards`.
pub fn answer_options(ex: &mut Exchange) -> Response<ProxyBody> {
    ex.status = CacheStatus::forward(Fwd::Bypass).with_detail(Detail::MaxForwards);
    let mut resp = Response::new(ProxyBody::empty());
    let h = resp.headers_mut();
    h.insert(ALLOW_FIELD, HeaderValue::from_static(ALLOW));
    h.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    resp
}

/// The refusal of a TRACE: `405` with [`ALLOW`] (RFC 9110 section
/// 15.5.6) and a sentence saying why. Sets the outcome `fwd=bypass;
/// detail=trace`.
pub fn refuse_trace(ex: &mut Exchange) -> Response<ProxyBody> {
    ex.status = CacheStatus::forward(Fwd::Bypass).with_detail(Detail::Trace);
    let message =
        format!("crawlcache: TRACE {} is not forwarded: the echo of the request would show its cookies and credentials to whoever sent it", ex.primary());
    let mut resp = error_response(StatusCode::METHOD_NOT_ALLOWED, &message, &ex.status);
    resp.headers_mut().insert(ALLOW_FIELD, HeaderValue::from_static(ALLOW));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(MAX_FORWARDS, HeaderValue::from_str(l).unwrap());
        }
        h
    }

    /// RFC 9110 section 7.6.2: `Max-Forwards = 1*DIGIT`.
    #[test]
    fn max_forwards_is_one_line_of_digits_rfc9110_7_6_2() {
        assert_eq!(max_forwards(&headers(&[])), MaxForwards::Absent);
        assert_eq!(max_forwards(&headers(&["0"])), MaxForwards::Remaining(0));
        assert_eq!(max_forwards(&headers(&["007"])), MaxForwards::Remaining(7));
        assert_eq!(max_forwards(&headers(&[" 3 "])), MaxForwards::Remaining(3));
        assert_eq!(
            max_forwards(&headers(&["18446744073709551615"])),
            MaxForwards::Remaining(u64::MAX)
        );
        assert_eq!(
            max_forwards(&headers(&["99999999999999999999999"])),
            MaxForwards::Remaining(u64::MAX)
        );
        for bad in ["", "-1", "+1", "1.0", "one", "1, 2", "0x10", "1 2"] {
            assert_eq!(max_forwards(&headers(&[bad])), MaxForwards::Invalid, "{bad:?}");
        }
        assert_eq!(max_forwards(&headers(&["1", "1"])), MaxForwards::Invalid, "two lines");
    }

    /// RFC 9110 section 7.6.2: N > 0 is forwarded as N − 1; nothing else changes.
    #[test]
    fn max_forwards_is_decremented_before_forwarding_rfc9110_7_6_2() {
        for (before, after) in [
            ("5", "4"),
            ("1", "0"),
            ("0", "0"),
            ("99999999999999999999999", "18446744073709551614"),
            ("abc", "abc"),
        ] {
            let mut h = headers(&[before]);
            update_max_forwards(&mut h);
            assert_eq!(h.get(MAX_FORWARDS).unwrap(), after, "{before}");
        }
        let mut none = HeaderMap::new();
        update_max_forwards(&mut none);
        assert!(none.is_empty());
    }

    /// RFC 9112 section 3.2.4: only an absolute OPTIONS for `/` without a
    /// query may have been written with an empty path.
    #[test]
    fn only_an_options_for_slash_may_be_about_the_whole_server_rfc9112_3_2_4() {
        let request = |method: &str, uri: &str| {
            http::Request::builder().method(method).uri(uri).body(()).unwrap()
        };
        for (method, uri, candidate) in [
            ("OPTIONS", "http://example.com", Some("http://example.com")),
            ("OPTIONS", "http://example.com:8080/", Some("http://example.com:8080")),
            ("OPTIONS", "https://Example.com", Some("https://Example.com")),
            ("OPTIONS", "http://example.com/?q", None),
            ("OPTIONS", "http://example.com/a", None),
            ("OPTIONS", "/", None),
            ("OPTIONS", "*", None),
            ("GET", "http://example.com", None),
        ] {
            assert_eq!(
                whole_server_candidate(&request(method, uri)).as_deref(),
                candidate,
                "{method} {uri}"
            );
        }
    }
}
