//! Cache keys (RFC 9111 section 4 and 4.1).
//!
//! The primary key is the target URI with scheme and host lower-cased, the
//! default port elided, the fragment removed, path and query kept byte for
//! byte. (HEAD is answered from a stored GET, so the method is not part of
//! the key: only GET responses are stored.) The secondary key is built from
//! the request fields nominated by the stored response's `Vary`.

/// The primary cache key for an absolute URI such as
/// `HTTP://Example.COM:80/a?b#c` → `http://example.com/a?b`. Returns `None`
/// when the URI has no scheme or host, or the scheme is not http or https.
pub fn primary_key(uri: &http::Uri) -> Option<String> {
    let _ = uri;
    todo!()
}

/// The secondary key for a response whose `Vary` field lines are in
/// `response_headers`, given the request's `request_headers`.
///
/// For each nominated field (names lower-cased, in the order the Vary lines
/// list them, duplicates removed) the request's field lines are combined with
/// `, `, and whitespace runs folded to one space and trimmed; an absent field
/// differs from an empty one. Returns `Some(vec![])` when there is no `Vary`,
/// and `None` for `Vary: *` (a response that never matches a later request).
pub fn secondary_key(response_headers: &http::HeaderMap, request_headers: &http::HeaderMap) -> Option<Vec<u8>> {
    let _ = (response_headers, request_headers);
    todo!()
}

/// The request field lines nominated by `Vary` (for display in `cache show`).
pub fn nominated_fields(response_headers: &http::HeaderMap, request_headers: &http::HeaderMap) -> Vec<(String, Vec<u8>)> {
    let _ = (response_headers, request_headers);
    todo!()
}
