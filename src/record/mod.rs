//! Record and replay (SPEC section 6): every final response the proxy
//! forwards can be kept for offline replay, beside the HTTP cache.
//!
//! # Design
//!
//! **Records are ordinary store entries under their own key namespace.**
//! The HTTP cache stores responses under the primary key, the target URI
//! (`http://example.com/a?b`, see [`crawlcache_policy::cache::key`]), with the
//! secondary key built from `Vary`. A record is stored under its
//! [`RecordKey`] (`record:GET http://example.com/a?b`; a POST's key names
//! the SHA-256 of its body) with, as secondary key, its [`crawlcache_policy::store_key::Selection`]: the
//! same RFC 9111 section 4.1 secondary key the cache would use, so every
//! `Vary` variant of a URL is recorded beside the others
//! ([`crawlcache_policy::store_key`] has the format, before and after). As metadata it
//! holds the encoded [`crawlcache_policy::cache::StoredResponse`] (the same encoding as
//! cache entries). Its body is an ordinary content-addressed body: the same
//! SHA-256 files, reference counts, size budget and LRU order as the cache,
//! so eviction, `cache verify` and `cache stats` cover records with no
//! change to the store. A cache key always starts with `http://` or
//! `https://`, so no online lookup (which looks up exactly the cache key)
//! can ever see a record, and a record can never be served online.
//!
//! **What is recorded** ([`RecordConfig::wants`]): with `record.mode =
//! "all"`, every final response to a method in `record.methods` (GET and
//! HEAD by default): 2xx, 3xx (each redirect hop is its own request, so a
//! chain replays hop by hop), 4xx, 5xx, `private`, `no-cache`, answers to
//! HEAD; `no-store` (request or response) only with `record.no_store`.
//! The header fields kept are those the cache keeps
//! ([`crawlcache_policy::cache::headers_to_store`]): `Set-Cookie` only when
//! `cache.store_set_cookie` allows it. Incomplete bodies are never kept
//! (the tee publishes only a complete body).
//!
//! **How it is written** (in [`crate::proxy::stages::forward`] and
//! [`crate::proxy::stages::passthrough`]):
//! - a response the cache stores is teed into the store under its cache key
//!   as before; the tee's collapse lead is relayed through [`relay_lead`],
//!   which, once the cache entry is published, indexes the same body (no
//!   second copy) under the record key as well, so the record survives the
//!   cache entry's replacement or invalidation;
//! - a response that is recorded but not storable is teed into the store
//!   under the record key only (with its selection as secondary key);
//! - a response without a body (HEAD) is indexed with no body;
//! - a request of another method in `record.methods` (POST) has its body
//!   forwarded as it arrives and hashed on the way ([`hash_request_body`]);
//!   the response is recorded under the key with that hash.
//!
//! **Replay** ([`crate::proxy::route`]): offline, a request is answered
//! from the HTTP cache when it holds a matching variant, else from the
//! latest recorded variant its own fields select ([`crawlcache_policy::store_key::Selection::admits`];
//! for HEAD: the HEAD record, else the GET one), with `Cache-Status:
//! crawlcache; hit; key=...; detail=offline`, the `key` parameter of RFC
//! 9211 naming the record key (it came from the record), else 504 naming the URL, the
//! key looked for and, when other variants were recorded, the request
//! fields that selected none of them: never another variant. Online,
//! nothing changes: RFC 9111 alone decides what is served from the cache.

use bytes::Bytes;
use crawlcache_base::collapse::{self, Lead, Outcome};
use crawlcache_policy::cache::cache_control::CacheControl;
use crawlcache_policy::store_key::RecordKey;
use crawlcache_store::Store;
use http::Method;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

/// `record.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordMode {
    /// Only what the HTTP cache stores (the cache is the record).
    Cacheable,
    /// Every final response to a method in `record.methods`.
    All,
}

/// `[record]`: what is kept for offline replay.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordConfig {
    /// `cacheable` (default) or `all`.
    pub mode: RecordMode,
    /// Record `no-store` responses too.
    pub no_store: bool,
    /// Methods whose responses are recorded.
    pub methods: Vec<String>,
}

impl RecordConfig {
    /// Checks `record.methods`.
    pub fn validate(&self) -> Result<(), String> {
        for m in &self.methods {
            match Method::from_bytes(m.as_bytes()) {
                Ok(Method::CONNECT) | Err(_) => return Err(format!("bad value for key `record.methods`: {m:?} is not a method that can be recorded")),
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// True when responses to `method` are recorded at all.
    pub fn records_method(&self, method: &Method) -> bool {
        self.mode == RecordMode::All
            && self.methods.iter().any(|m| m.as_bytes() == method.as_str().as_bytes())
    }

    /// True when the final response (`response_cc` being its
    /// `Cache-Control`) to a `method` request with `request_cc` is recorded.
    pub fn wants(
        &self,
        method: &Method,
        request_cc: &CacheControl,
        response_headers: &http::HeaderMap,
    ) -> bool {
        if !self.records_method(method) {
            return false;
        }
        if self.no_store {
            return true;
        }
        !request_cc.no_store && !CacheControl::from_headers(response_headers).no_store
    }
}

/// A lead for the tee of a response the cache stores under `primary` /
/// `secondary_key`: when the tee reports the entry published, its body and
/// head are indexed under `record_key` too, with the same secondary key
/// (a response the cache stores has a `Vary` naming fields or none, so its
/// [`crawlcache_policy::store_key::Selection`] is its cache secondary key), then `lead` (the request's
/// own collapse lead, if any) is released with the same outcome.
pub fn relay_lead(
    store: Store,
    lead: Option<Lead>,
    primary: String,
    secondary_key: Vec<u8>,
    record_key: RecordKey,
) -> Lead {
    let key = primary.clone();
    collapse::relay(&key, move |outcome| async move {
        if outcome == Outcome::Stored {
            let copy = tokio::task::spawn_blocking(move || {
                copy_entry(&store, &primary, &secondary_key, &record_key)
            })
            .await;
            if let Ok(Err(e)) = copy {
                tracing::warn!("recording failed: {e}");
            }
        }
        if let Some(l) = lead {
            l.finish(outcome);
        }
    })
}

/// Indexes the cache entry `(primary, secondary_key)` under `record_key`
/// and the same secondary key. Errors: the store's (logged).
fn copy_entry(
    store: &Store,
    primary: &str,
    secondary_key: &[u8],
    record_key: &RecordKey,
) -> Result<(), RecordingError> {
    let entries = store.lookup(primary)?;
    if let Some(e) = entries.into_iter().find(|e| e.secondary_key == secondary_key) {
        store
            .insert(&record_key.primary(), secondary_key, &e.meta, e.body.as_ref())
            .map_err(|source| RecordingError::Key { key: record_key.to_string(), source })?;
    }
    Ok(())
}

/// Why a response was not recorded, or its record not freshened (logged:
/// the cache entry is served and kept either way).
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The index could not be read.
    #[error("{0}")]
    Store(#[from] crawlcache_store::StoreError),
    /// The record under `key` could not be read or written.
    #[error("{key}: {source}")]
    Key {
        /// The record's store key.
        key: String,
        /// The store's error.
        source: crawlcache_store::StoreError,
    },
}

/// After a `304` (or a `200` answering a HEAD, RFC 9111 section 4.3.5)
/// freshened the cache entry `cached` (under the cache key `primary`):
/// freshens the record copy of the same response (the GET record of
/// `primary` under the same secondary key) the same way, so an offline re-run replays the newest header fields
/// (RFC 9111 sections 3.2 and 4.3.4) rather than those of the first fetch.
///
/// The record is updated only when it holds the same content as `cached`
/// (the same body, by SHA-256) and `selects` (the caller's validator check
/// on the record's stored head) accepts it; a record of another response
/// (a later answer that was recorded but not cached) is left alone.
/// Returns whether the record was updated. Errors: the store's
/// ([`RecordingError::Key`]).
pub fn freshen_record(
    store: &Store,
    primary: &str,
    cached: &crawlcache_store::Entry,
    selects: impl Fn(&crawlcache_policy::cache::StoredResponse) -> bool,
    freshen: impl Fn(
        &crawlcache_policy::cache::StoredResponse,
    ) -> crawlcache_policy::cache::StoredResponse,
) -> Result<bool, RecordingError> {
    let key = RecordKey::get(primary).primary();
    // One index row read: most cached responses have no record.
    let Some(record) = store
        .lookup_variant(&key, &cached.secondary_key)
        .map_err(|source| RecordingError::Key { key: key.clone(), source })?
    else {
        return Ok(false);
    };
    if record.body != cached.body {
        return Ok(false);
    }
    let Some(stored) = crawlcache_policy::cache::StoredResponse::from_bytes(&record.meta) else {
        return Ok(false);
    };
    if !selects(&stored) {
        return Ok(false);
    }
    store
        .update_meta(&key, &cached.secondary_key, &freshen(&stored).to_bytes())
        .map_err(|source| RecordingError::Key { key, source })
}

/// Forwards a request body as it arrives while hashing it: returns the body
/// to send upstream and a receiver for the hex SHA-256 of the whole body
/// (dropped without a value when the body failed or was not read to its end).
pub fn hash_request_body(
    body: Option<hyper::body::Incoming>,
    len: Option<u64>,
) -> (crate::wire::body::ProxyBody, oneshot::Receiver<String>) {
    use http_body_util::BodyExt;
    let (hash_tx, hash_rx) = oneshot::channel();
    let Some(mut body) = body else {
        let _ = hash_tx.send(hex::encode(Sha256::digest(b"")));
        return (crate::wire::body::ProxyBody::empty(), hash_rx);
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(8);
    tokio::spawn(async move {
        let mut h = Sha256::new();
        loop {
            match body.frame().await {
                None => break,
                Some(Err(e)) => {
                    let _ = tx
                        .send(Err(std::io::Error::other(format!("client body failed: {e}"))))
                        .await;
                    return;
                }
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        h.update(&data);
                        if tx.send(Ok(data)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        let _ = hash_tx.send(hex::encode(h.finalize()));
    });
    (crate::wire::body::ProxyBody::Channel { rx, len }, hash_rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(mode: RecordMode, no_store: bool) -> RecordConfig {
        RecordConfig { mode, no_store, methods: vec!["GET".into(), "HEAD".into(), "POST".into()] }
    }

    #[test]
    fn mode_methods_and_no_store_decide_what_is_recorded() {
        let none = http::HeaderMap::new();
        let mut ns = http::HeaderMap::new();
        ns.insert("cache-control", "no-store".parse().unwrap());
        let cc = CacheControl::default();
        assert!(!cfg(RecordMode::Cacheable, true).wants(&Method::GET, &cc, &none));
        assert!(cfg(RecordMode::All, false).wants(&Method::GET, &cc, &none));
        assert!(cfg(RecordMode::All, false).wants(&Method::POST, &cc, &none));
        assert!(!cfg(RecordMode::All, false).wants(&Method::PUT, &cc, &none));
        assert!(!cfg(RecordMode::All, false).wants(&Method::GET, &cc, &ns));
        assert!(cfg(RecordMode::All, true).wants(&Method::GET, &cc, &ns));
        let mut req_ns = http::HeaderMap::new();
        req_ns.insert("cache-control", "no-store".parse().unwrap());
        assert!(!cfg(RecordMode::All, false).wants(
            &Method::GET,
            &CacheControl::from_headers(&req_ns),
            &none
        ));
    }

    #[test]
    fn methods_are_validated() {
        let mut c = cfg(RecordMode::All, false);
        assert!(c.validate().is_ok());
        c.methods.push("CONNECT".into());
        assert!(c.validate().is_err());
    }
}
