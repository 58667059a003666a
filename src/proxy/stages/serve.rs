//! Serves a stored response (RFC 9111 section 4): `Age` (section 5.1), a
//! 304 for the client's own conditional request (section 4.3.2), and byte
//! ranges of the stored body (RFC 9110 section 14, see [`super::range`]).

use super::super::exchange::Exchange;
use super::super::lookup::{Found, HotVariant, HOT_BODY_MAX};
use super::super::state::ProxyState;
use super::Step;
use crate::metrics::Metrics;
use crate::wire::body::ProxyBody;
use crawlcache_policy::cache::{self, StoredResponse};
use crawlcache_policy::hop_by_hop::add_via;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Response, StatusCode};

/// Answers `ex` with `stored` (the response of `found`, possibly freshened;
/// `prebuilt`: its header map when already decoded) at `age` seconds.
/// [`Step::LookAgain`] when the body file has vanished (the entry is then
/// dropped).
pub fn stored(
    state: &ProxyState,
    ex: &mut Exchange,
    found: &Found,
    stored: &StoredResponse,
    prebuilt: Option<&HeaderMap>,
    age: u64,
) -> Step {
    let primary = ex.primary();
    let entry = &found.entry;
    let mut headers = match prebuilt {
        Some(h) => h.clone(),
        None => stored.header_map(),
    };
    headers.insert(http::header::AGE, HeaderValue::from(age));
    add_via(&mut headers);
    if found.hot.as_ref().is_none_or(|h| h.first_use_in_second(ex.arrived)) {
        state.store.touch(primary, &entry.secondary_key);
    }

    if (200..300).contains(&stored.status) && cache::client_not_modified(&ex.parts.headers, stored)
    {
        return Step::Done(not_modified_response(&headers));
    }
    let Ok(body) = stored_body(
        state,
        ex.is_head(),
        primary,
        entry,
        found.hot.as_deref(),
        stored.status,
        &mut headers,
    ) else {
        return Step::LookAgain;
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    *resp.headers_mut() = headers;
    Step::Done(super::range::narrow(&ex.parts, stored, resp))
}

/// A stored body that could not be read (missing, shorter than its
/// record, or failing its check): its entry has been dropped, and the
/// request looks the store up again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyDropped;

/// The body of a stored entry (under `key`) for a response with `status`,
/// and its `Content-Length` set in `headers`: the length of the stored body,
/// also for HEAD (RFC 9110 section 8.6), whatever framing the origin used;
/// none for 1xx, 204 and 304. `Err` when the body file is unusable: the
/// entry is then dropped. `hot`: what the serving thread keeps of the
/// variant, where a short body served from memory is kept for the next hit.
pub fn stored_body(
    state: &ProxyState,
    is_head: bool,
    key: &str,
    entry: &crawlcache_store::Entry,
    hot: Option<&HotVariant>,
    status: u16,
    headers: &mut HeaderMap,
) -> Result<ProxyBody, BodyDropped> {
    let len = entry.body.as_ref().map_or(0, |b| b.len);
    if status != 204 && status != 304 && !(100..200).contains(&status) {
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    match &entry.body {
        Some(_) if is_head => Ok(ProxyBody::empty()),
        Some(b) => {
            if let Some(bytes) = hot.and_then(|h| h.body.get()) {
                Metrics::add(&state.metrics.bytes_from_cache, b.len);
                return Ok(ProxyBody::Full(Some(bytes.clone())));
            }
            if let Some(bytes) = state.body_cache.get(&b.sha256) {
                Metrics::add(&state.metrics.bytes_from_cache, b.len);
                if let Some(h) =
                    hot.filter(|_| b.len <= HOT_BODY_MAX && bytes.len() as u64 == b.len)
                {
                    // Shared with the body cache, or a copy of the
                    // memo's own (see `HotKey::make_own` in route.rs).
                    let _ = h.body.set(if h.own {
                        bytes::Bytes::copy_from_slice(&bytes)
                    } else {
                        bytes.clone()
                    });
                }
                return Ok(ProxyBody::Full(Some(bytes)));
            }
            // Intercepted HTTPS (`https` keys) is encrypted: copied.
            let sendable = state.config.server.sendfile && !key.starts_with("https:");
            if !sendable {
                if let Some(bytes) =
                    state.body_cache.live_map(&b.sha256).filter(|m| m.len() as u64 == b.len)
                {
                    Metrics::add(&state.metrics.bytes_from_cache, b.len);
                    return Ok(ProxyBody::Full(Some(bytes)));
                }
            }
            match state.store.read_body(entry) {
                Ok(crawlcache_store::BodyData::File(file)) => {
                    Metrics::add(&state.metrics.bytes_from_cache, b.len);
                    if state.body_cache.admits(b.len) {
                        if let Some(bytes) = read_whole(file, b.len) {
                            state.body_cache.insert(&b.sha256, bytes.clone());
                            return Ok(ProxyBody::Full(Some(bytes)));
                        }
                        // Shorter than the index says: the file reader below
                        // would abort the response; drop the entry instead.
                        tracing::warn!(
                            "stored body for {key} is shorter than recorded; dropping the entry"
                        );
                        let _ = state.store.remove_variant(key, &entry.secondary_key);
                        return Err(BodyDropped);
                    }
                    // Otherwise the write (or the TLS encryption) copies
                    // straight from the page cache through a map, shared
                    // with any other response sending the same body.
                    let mapped = match (b.len >= MAP_FROM, sendable) {
                        (false, _) => None,
                        (true, true) => crate::wire::sendfile::MappedBody::bytes(&file, b.len),
                        (true, false) => crate::wire::sendfile::copy_map(&file, b.len)
                            .map(|m| state.body_cache.share_map(&b.sha256, m)),
                    };
                    match mapped {
                        Some(bytes) => Ok(ProxyBody::Full(Some(bytes))),
                        None => Ok(ProxyBody::File { file, remaining: b.len }),
                    }
                }
                // A short body, from its pack record (checked against its CRC).
                Ok(crawlcache_store::BodyData::Bytes(bytes)) => {
                    Metrics::add(&state.metrics.bytes_from_cache, b.len);
                    let bytes = bytes::Bytes::from(bytes);
                    state.body_cache.insert(&b.sha256, bytes.clone());
                    Ok(ProxyBody::Full(Some(bytes)))
                }
                Err(e) => {
                    tracing::warn!("stored body for {key} is unusable ({e}); dropping the entry");
                    let _ = state.store.remove_variant(key, &entry.secondary_key);
                    Err(BodyDropped)
                }
            }
        }
        None => Ok(ProxyBody::empty()),
    }
}

/// Exactly `len` bytes of `file` (a small stored body, almost always in the
/// page cache, so read synchronously); `None` when it is shorter or unreadable.
fn read_whole(mut file: std::fs::File, len: u64) -> Option<bytes::Bytes> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(len as usize);
    (&mut file).take(len).read_to_end(&mut buf).ok()?;
    (buf.len() as u64 == len).then(|| bytes::Bytes::from(buf))
}

/// Bodies at least this long are served from a map of their file.
const MAP_FROM: u64 = 64 * 1024;

/// A 304 built from a stored response's fields (RFC 9110 section 15.4.5).
fn not_modified_response(stored_headers: &HeaderMap) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::empty());
    *resp.status_mut() = StatusCode::NOT_MODIFIED;
    let h = resp.headers_mut();
    for name in [
        "cache-control",
        "content-location",
        "date",
        "etag",
        "expires",
        "vary",
        "last-modified",
        "age",
        "via",
    ] {
        for v in stored_headers.get_all(name) {
            if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
                h.append(n, v.clone());
            }
        }
    }
    resp
}
