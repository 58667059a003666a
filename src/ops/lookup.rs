//! A URL as the admin endpoints and `cache show` / `cache purge` take it:
//! normalised, then rewritten by `cache.key_rules`; and the stored
//! variants and records of one URL as JSON.

use crawlcache_policy::cache::{key, StoredResponse};
use crawlcache_store::{Entry, Store, StoreError};

/// Why a URL's stored responses could not be looked up.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The text is not a URI at all.
    #[error("'{url}' is not a URL: {reason}")]
    NotAUrl {
        /// The text given.
        url: String,
        /// What the URI parser said.
        reason: String,
    },
    /// A URI, but not an absolute `http://` or `https://` one.
    #[error("'{0}' is not an absolute http:// or https:// URL")]
    NotAbsolute(String),
    /// The index could not be read.
    #[error("the index cannot be read: {0}")]
    Store(#[from] StoreError),
}

impl LookupError {
    /// The status an admin answer gives it: 400 for what the caller sent,
    /// 500 for the store.
    pub fn status(&self) -> http::StatusCode {
        match self {
            LookupError::Store(_) => http::StatusCode::INTERNAL_SERVER_ERROR,
            _ => http::StatusCode::BAD_REQUEST,
        }
    }
}

fn normalise(url: &str) -> Result<String, LookupError> {
    let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| LookupError::NotAUrl {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    key::primary_key(&uri).ok_or_else(|| LookupError::NotAbsolute(url.to_string()))
}

/// The stored variants of `url` as JSON (for `cache show`).
/// `key` is the cache key under `rules` (`cache.key_rules`); `records` the
/// recorded responses for it (SPEC section 6).
pub fn show_json(
    store: &Store,
    url: &str,
    rules: &[crawlcache_policy::key_rules::KeyRule],
) -> Result<serde_json::Value, LookupError> {
    let exact = normalise(url)?;
    let primary = crawlcache_policy::key_rules::apply(rules, &exact);
    let entries = store.lookup(&primary)?;
    let variants: Vec<serde_json::Value> = entries.iter().map(entry_json).collect();
    let mut records = Vec::new();
    for m in [http::Method::GET, http::Method::HEAD] {
        let key = crawlcache_policy::store_key::RecordKey::new(&m, &primary, None).primary();
        for e in store.lookup(&key)? {
            let mut j = entry_json(&e);
            j["key"] = serde_json::Value::String(key.clone());
            records.push(j);
        }
    }
    Ok(
        serde_json::json!({ "url": exact, "key": primary, "variants": variants, "records": records }),
    )
}

fn entry_json(e: &Entry) -> serde_json::Value {
    let stored = StoredResponse::from_bytes(&e.meta);
    let headers: Vec<serde_json::Value> = stored
        .as_ref()
        .map(|s| {
            s.headers
                .iter()
                .map(|(n, v)| serde_json::json!([n, String::from_utf8_lossy(v)]))
                .collect()
        })
        .unwrap_or_default();
    let vary: Vec<serde_json::Value> = stored
        .as_ref()
        .map(|s| {
            s.vary_request
                .iter()
                .map(|(n, v)| serde_json::json!([n, String::from_utf8_lossy(v)]))
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "status": stored.as_ref().map(|s| s.status),
        "headers": headers,
        "vary_request": vary,
        "request_time_ms": stored.as_ref().map(|s| s.request_time_ms),
        "response_time_ms": stored.as_ref().map(|s| s.response_time_ms),
        "body_sha256": e.body.as_ref().map(|b| b.sha256.clone()),
        "body_bytes": e.body.as_ref().map(|b| b.len),
        "last_used": e.last_used,
    })
}

/// The cache key of `url`: normalised ([`key::primary_key`]), then
/// rewritten by the first of `rules` (`cache.key_rules`) that matches.
/// Errors: `url` is not an absolute http:// or https:// URL.
pub fn cache_key(
    url: &str,
    rules: &[crawlcache_policy::key_rules::KeyRule],
) -> Result<String, LookupError> {
    Ok(crawlcache_policy::key_rules::apply(rules, &normalise(url)?))
}

/// The keys a purge of `url` removes: its cache key under `rules`, and the
/// exact (normalised) URL when the rules rewrote it (entries stored before
/// the rule was added). Errors: `url` is not an absolute http(s) URL.
pub fn url_keys(
    url: &str,
    rules: &[crawlcache_policy::key_rules::KeyRule],
) -> Result<Vec<String>, LookupError> {
    let exact = normalise(url)?;
    let key = crawlcache_policy::key_rules::apply(rules, &exact);
    Ok(if key == exact { vec![key] } else { vec![key, exact] })
}
