//! Header plumbing for the proxy: hop-by-hop removal (RFC 9110 section
//! 7.6.1), `Via` (section 7.6.3) and `Cache-Status` (RFC 9211).

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The `Via` entry crawlcache adds to requests and responses.
pub const VIA: &str = "1.1 crawlcache";

/// The `Cache-Status` cache name.
pub const CACHE_NAME: &str = "crawlcache";

/// Fields that describe one connection, never forwarded (RFC 9110 section
/// 7.6.1), plus the proxy-only `Proxy-Connection` and `Proxy-Authorization`.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Removes hop-by-hop fields, including every field named in `Connection`.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for n in named {
        headers.remove(n);
    }
    for n in HOP_BY_HOP {
        headers.remove(*n);
    }
}

/// Appends crawlcache's `Via` entry.
pub fn add_via(headers: &mut HeaderMap) {
    headers.append(http::header::VIA, HeaderValue::from_static(VIA));
}

/// Sets `Cache-Status` to `crawlcache; <params>` (RFC 9211 section 2).
pub fn set_cache_status(headers: &mut HeaderMap, params: &str) {
    let v = format!("{CACHE_NAME}; {params}");
    if let Ok(v) = HeaderValue::from_str(&v) {
        headers.insert(HeaderName::from_static("cache-status"), v);
    }
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
