//! RFC 9111 section 4.4 (invalidation): which stored responses an unsafe
//! request that succeeded makes unusable ([`invalidation_targets`]).

use http::{HeaderMap, Method};

/// RFC 9111 section 4.4: the primary keys to invalidate after a response
/// with `status` to an unsafe `method` on `primary_key`: the target itself,
/// and `Location` / `Content-Location` when same-origin (relative references
/// resolved against the target). Empty for safe methods and for error
/// statuses (only 2xx and 3xx invalidate).
pub fn invalidation_targets(
    method: &Method,
    status: u16,
    primary_key: &str,
    response_headers: &HeaderMap,
) -> Vec<String> {
    if is_safe(method) || !(200..400).contains(&status) {
        return Vec::new();
    }
    let mut out = vec![primary_key.to_string()];
    for name in [http::header::LOCATION, http::header::CONTENT_LOCATION] {
        for value in response_headers.get_all(name) {
            let Ok(reference) = std::str::from_utf8(value.as_bytes()) else { continue };
            let Some(resolved) = crawlcache_base::url::resolve(primary_key, reference.trim())
            else {
                continue;
            };
            let Some(key) = resolved
                .parse::<http::Uri>()
                .ok()
                .as_ref()
                .and_then(crate::cache::key::primary_key)
            else {
                continue;
            };
            if same_origin(&key, primary_key) && !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
}

/// RFC 9110 section 9.2.1: safe methods (all others invalidate, section 4.4).
fn is_safe(method: &Method) -> bool {
    matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS" | "TRACE")
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
