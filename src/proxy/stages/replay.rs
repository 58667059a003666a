//! Offline replay from the record (SPEC section 6): a request the HTTP
//! cache cannot answer offline is answered with the latest recorded
//! variant its own fields select (see [`crate::record`]), marked
//! `Cache-Status: crawlcache; hit; key=...; detail=offline` (`key` names
//! the record key); when
//! nothing is recorded for it, 504 naming the URL, the key and, when other
//! variants of the URL were recorded, the request fields that selected
//! none of them.

use super::super::exchange::Exchange;
use super::super::lookup::Found;
use super::super::meta_cache::Decoded;
use super::super::state::ProxyState;
use crate::wire::body::ProxyBody;
use crate::wire::error::error_response;
use crawlcache_policy::cache::to_millis;
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use crawlcache_policy::hop_by_hop::add_via;
use crawlcache_policy::store_key::{RecordKey, Selection};
use crawlcache_store::Entry;
use http::header::HeaderValue;
use http::{Response, StatusCode};
use std::sync::Arc;
use std::time::SystemTime;

/// What the record holds for one request.
pub enum Recorded {
    /// The latest variant the request selects.
    Found(Found),
    /// Variants were recorded, none for this request: which request
    /// fields selected none of them (for the 504).
    OtherVariants(String),
    /// Nothing recorded under the key (or the lookup failed, which is
    /// logged).
    Nothing,
}

/// The latest record under `key` whose selection admits a request with
/// `request_headers` (RFC 9111 section 4.1), decoded.
pub fn find(state: &ProxyState, key: &str, request_headers: &http::HeaderMap) -> Recorded {
    let entries = match state.store.lookup(key) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("record lookup for {key} failed: {e}");
            return Recorded::Nothing;
        }
    };
    let mut missed: Option<String> = None;
    let decoded = entries
        .into_iter()
        .filter_map(|entry| Some((state.meta_cache.decode(&entry.meta)?, entry)));
    let admits = |(decoded, entry): &(Arc<Decoded>, Entry)| {
        let selection =
            Selection::of_entry(&entry.secondary_key, &decoded.stored, &decoded.headers);
        let admitted = selection.admits(&decoded.headers, request_headers);
        if !admitted && missed.is_none() {
            missed = Some(crawlcache_policy::store_key::describe_variant(
                &decoded.headers,
                request_headers,
            ));
        }
        admitted
    };
    let best =
        crawlcache_policy::cache::variant::select(decoded, admits, |(decoded, _)| &decoded.stored)
            .map(|(decoded, entry)| Found { entry: Arc::new(entry), decoded, hot: None });
    match (best, missed) {
        (Some(f), _) => Recorded::Found(f),
        (None, Some(m)) => Recorded::OtherVariants(m),
        (None, None) => Recorded::Nothing,
    }
}

/// Answers `ex` with the recorded response `found`, stored under `key`.
/// A record whose body file has vanished is dropped and answered with 504.
pub fn serve(
    state: &ProxyState,
    ex: &mut Exchange,
    found: &Found,
    key: &str,
) -> Response<ProxyBody> {
    let stored = &found.decoded.stored;
    let mut headers = found.decoded.headers.clone();
    let age = to_millis(SystemTime::now()).saturating_sub(stored.response_time_ms) / 1000;
    headers.insert(http::header::AGE, HeaderValue::from(age));
    add_via(&mut headers);
    state.store.touch(key, &found.entry.secondary_key);
    let Ok(body) = super::serve::stored_body(
        state,
        ex.is_head(),
        key,
        &found.entry,
        None,
        stored.status,
        &mut headers,
    ) else {
        return missing(ex, &[key.to_string()], None);
    };
    ex.status = CacheStatus {
        hit: true,
        key: Some(key.to_string()),
        detail: Some(Detail::Offline),
        ..CacheStatus::default()
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    *resp.headers_mut() = headers;
    resp
}

/// The 504 for a request neither cached nor recorded: names the URL, the
/// record keys looked for and, when other variants were recorded, the
/// request fields that selected none of them (`missed`).
pub fn missing(ex: &mut Exchange, keys: &[String], missed: Option<&str>) -> Response<ProxyBody> {
    ex.status = CacheStatus::forward(Fwd::Miss).with_detail(Detail::Offline);
    let message = missing_message(&format!("{} {}", ex.method(), ex.primary()), keys, missed);
    error_response(StatusCode::GATEWAY_TIMEOUT, &message, &ex.status)
}

/// The text of an offline 504 for `what` (`GET http://...`): see [`missing`].
pub fn missing_message(what: &str, keys: &[String], missed: Option<&str>) -> String {
    let keys = keys.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ");
    match missed {
        Some(m) => format!(
            "crawlcache is offline and {what} was recorded for other variants only: no recorded response matches this request's {m} \
             (looked for key {keys}; no origin is contacted in offline mode)"
        ),
        None => format!("crawlcache is offline and {what} was never stored or recorded (looked for key {keys}; no origin is contacted in offline mode)"),
    }
}

/// Offline, a request of another method (a form's POST): its body is read
/// and hashed, and the record for that body answers, else 504.
pub async fn with_body(state: &Arc<ProxyState>, ex: &mut Exchange) -> Response<ProxyBody> {
    use http_body_util::BodyExt;
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    if let Some(mut body) = ex.body.take() {
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => {
                    if let Ok(d) = f.into_data() {
                        h.update(&d);
                    }
                }
                Err(e) => {
                    ex.status = CacheStatus::forward(Fwd::Method).with_detail(Detail::Offline);
                    return error_response(
                        StatusCode::BAD_REQUEST,
                        &format!("crawlcache: reading the request body failed: {e}"),
                        &ex.status,
                    );
                }
            }
        }
    }
    let hash = hex::encode(h.finalize());
    let key = RecordKey::new(ex.method(), ex.primary(), Some(&hash)).primary();
    match find(state, &key, &ex.parts.headers) {
        Recorded::Found(found) => serve(state, ex, &found, &key),
        Recorded::OtherVariants(m) => missing(ex, &[key], Some(&m)),
        Recorded::Nothing => missing(ex, &[key], None),
    }
}
