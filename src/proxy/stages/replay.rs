//! Offline replay from the record (SPEC section 6): a request the HTTP
//! cache cannot answer offline is answered with the latest recorded
//! response for its record key (see [`crate::record`]), marked
//! `Cache-Status: crawlcache; hit; key="record:..."; detail=offline`; when
//! nothing is recorded either, 504 naming the URL and the key.

use super::super::exchange::Exchange;
use super::super::route::Found;
use super::super::ProxyState;
use crate::cache::to_millis;
use crate::wire::body::ProxyBody;
use crate::wire::cache_status::{CacheStatus, Detail, Fwd};
use crate::wire::error::error_response;
use crate::wire::fields::add_via;
use http::header::HeaderValue;
use http::{Response, StatusCode};
use std::sync::Arc;
use std::time::SystemTime;

/// The latest record under `key`, decoded; `None` when there is none (or
/// the lookup failed, which is logged).
pub fn find(state: &ProxyState, key: &str) -> Option<Found> {
    let entries = match state.store.lookup(key) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("record lookup for {key} failed: {e}");
            return None;
        }
    };
    let mut best: Option<Found> = None;
    for entry in entries {
        let Some(decoded) = state.meta_cache.decode(&entry.meta) else { continue };
        if best.as_ref().map(|b| decoded.stored.response_time_ms > b.decoded.stored.response_time_ms).unwrap_or(true) {
            best = Some(Found { entry: Arc::new(entry), decoded, hot: None });
        }
    }
    best
}

/// Answers `ex` with the recorded response `found`, stored under `key`.
/// A record whose body file has vanished is dropped and answered with 504.
pub fn serve(state: &ProxyState, ex: &mut Exchange, found: &Found, key: &str) -> Response<ProxyBody> {
    let stored = &found.decoded.stored;
    let mut headers = found.decoded.headers.clone();
    let age = to_millis(SystemTime::now()).saturating_sub(stored.response_time_ms) / 1000;
    headers.insert(http::header::AGE, HeaderValue::from(age));
    add_via(&mut headers);
    state.store.touch(key, &found.entry.secondary_key);
    let Ok(body) = super::serve::stored_body(state, ex.is_head(), key, &found.entry, None, stored.status, &mut headers) else {
        return missing(ex, &[key.to_string()]);
    };
    ex.status = CacheStatus { hit: true, key: Some(key.to_string()), detail: Some(Detail::Offline), ..CacheStatus::default() };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    *resp.headers_mut() = headers;
    resp
}

/// The 504 for a request neither cached nor recorded: names the URL and
/// the record keys looked for.
pub fn missing(ex: &mut Exchange, keys: &[String]) -> Response<ProxyBody> {
    ex.status = CacheStatus::forward(Fwd::Miss).with_detail(Detail::Offline);
    let message = format!(
        "crawlcache is offline and {} {} was never stored or recorded (looked for key {}; no origin is contacted in offline mode)",
        ex.method(),
        ex.primary(),
        keys.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ")
    );
    error_response(StatusCode::GATEWAY_TIMEOUT, &message, &ex.status)
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
                    return error_response(StatusCode::BAD_REQUEST, &format!("crawlcache: reading the request body failed: {e}"), &ex.status);
                }
            }
        }
    }
    let hash = hex::encode(h.finalize());
    let key = crate::record::record_key(ex.method(), ex.primary(), Some(&hash));
    match find(state, &key) {
        Some(found) => serve(state, ex, &found, &key),
        None => missing(ex, &[key]),
    }
}
