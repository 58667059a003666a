//! Field plumbing: the one hop-by-hop list (RFC 9110 section 7.6.1) and
//! `Via` (section 7.6.3).

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The `Via` entry crawlcache adds to requests and responses.
pub const VIA: &str = "1.1 crawlcache";

/// Fields that describe one connection and are never forwarded nor stored
/// (RFC 9110 section 7.6.1; RFC 9111 section 3.1), plus the proxy-only
/// `Proxy-Connection`, `Proxy-Authenticate` and `Proxy-Authorization`
/// and `Proxy-Authentication-Info` (RFC 9110 section 11.7). Lower-case.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authentication-info",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// True when `name` (lower-case) is in [`HOP_BY_HOP`].
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.contains(&name)
}

/// The field names listed in `Connection` (lower-cased, RFC 9110 section
/// 7.6.1): they describe this connection only.
pub fn connection_named(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Removes hop-by-hop fields, including every field named in `Connection`.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    for n in connection_named(headers) {
        if let Ok(n) = HeaderName::from_bytes(n.as_bytes()) {
            headers.remove(n);
        }
    }
    for n in HOP_BY_HOP {
        headers.remove(*n);
    }
}

/// Appends crawlcache's `Via` entry.
pub fn add_via(headers: &mut HeaderMap) {
    headers.append(http::header::VIA, HeaderValue::from_static(VIA));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_named_fields_are_removed() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, X-Private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("proxy-authorization", HeaderValue::from_static("Basic x"));
        h.insert("etag", HeaderValue::from_static("\"a\""));
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("etag"));
    }
}
