//! `Cache-Control` parsing (RFC 9111 section 5.2) and `Pragma` (section 5.4).
//!
//! Tolerant: malformed, duplicate and conflicting directives never fail; they
//! resolve toward the most restrictive reading. Arguments may be tokens or
//! quoted strings. delta-seconds that overflow saturate at 2147483648
//! (section 1.2.2); a non-integer argument (`max-age=600s`) is invalid and
//! makes the directive count as `max-age=0` for a response (treated as stale).

/// Directives of one message (request or response), combined over all of its
/// `Cache-Control` field lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheControl {
    /// `max-age` in seconds (the smallest if repeated; `Some(0)` if invalid).
    pub max_age: Option<u64>,
    /// `s-maxage` in seconds (likewise).
    pub s_maxage: Option<u64>,
    /// `max-stale`: `Some(None)` without argument (any staleness), `Some(Some(n))` with one.
    pub max_stale: Option<Option<u64>>,
    /// `min-fresh` in seconds.
    pub min_fresh: Option<u64>,
    /// `no-cache` present unqualified.
    pub no_cache: bool,
    /// Field names of a qualified `no-cache="a, b"` (lower-case).
    pub no_cache_fields: Vec<String>,
    /// `no-store` present.
    pub no_store: bool,
    /// `no-transform` present.
    pub no_transform: bool,
    /// `only-if-cached` present.
    pub only_if_cached: bool,
    /// `must-revalidate` present.
    pub must_revalidate: bool,
    /// `proxy-revalidate` present.
    pub proxy_revalidate: bool,
    /// `must-understand` present.
    pub must_understand: bool,
    /// `public` present.
    pub public: bool,
    /// `private` present unqualified.
    pub private: bool,
    /// Field names of a qualified `private="a, b"` (lower-case).
    pub private_fields: Vec<String>,
    /// `immutable` present.
    pub immutable: bool,
    /// `stale-while-revalidate` in seconds (RFC 5861 section 3).
    pub stale_while_revalidate: Option<u64>,
    /// `stale-if-error` in seconds (RFC 5861 section 4).
    pub stale_if_error: Option<u64>,
}

impl CacheControl {
    /// Parses every `Cache-Control` field line in `headers`. When there is no
    /// `Cache-Control` at all and `Pragma: no-cache` is present, the result
    /// has `no_cache` set (RFC 9111 section 5.4).
    pub fn from_headers(headers: &http::HeaderMap) -> CacheControl {
        let _ = headers;
        todo!()
    }
}
