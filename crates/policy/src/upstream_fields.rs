//! The fields of a request sent to an origin, made from the client's and
//! the target alone: pure, so that the fuzz target `request_target`
//! compiles it from its source without the HTTP client around it.

use crate::hop_by_hop::{add_via_received, remove_hop_by_hop};
use http::{HeaderMap, Uri, Version};

/// The fields to send upstream for a request to `uri` with the client's
/// `headers`: hop-by-hop fields removed (RFC 9110 section 7.6.1), `Via`
/// added naming the version the request was `received` over (section
/// 7.6.3).
///
/// Addressing and framing come from what is sent, never from what was
/// received: `Host` is generated from `uri` (RFC 9112 section 3.2.2:
/// userinfo dropped, default port elided), and the client's
/// `Content-Length` is removed so that the client library frames the body
/// itself (`Transfer-Encoding` is hop-by-hop and already gone). A body of
/// unknown length (`unknown_length`) is sent chunked, and says so: the
/// client library would otherwise send a GET or HEAD without it.
pub fn upstream_fields(
    uri: &Uri,
    headers: &HeaderMap,
    unknown_length: bool,
    received: Version,
) -> HeaderMap {
    let mut headers = headers.clone();
    remove_hop_by_hop(&mut headers);
    headers.remove(http::header::CONTENT_LENGTH);
    headers.remove(http::header::HOST);
    if let Some(host) = host_field(uri) {
        headers.insert(http::header::HOST, host);
    }
    if unknown_length {
        headers.insert(http::header::TRANSFER_ENCODING, http::HeaderValue::from_static("chunked"));
    }
    add_via_received(&mut headers, received);
    headers
}

/// The `Host` field value for `uri` (RFC 9112 section 3.2.2): its host
/// (IPv6 in brackets) and, unless it is the scheme's default, its port;
/// never userinfo. `None` without an authority.
pub fn host_field(uri: &Uri) -> Option<http::HeaderValue> {
    let host = uri.host()?;
    let default = match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    let value = match uri.port_u16() {
        Some(p) if p != default => format!("{host}:{p}"),
        _ => host.to_string(),
    };
    http::HeaderValue::from_str(&value).ok()
}
