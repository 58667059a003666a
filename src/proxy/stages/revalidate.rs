//! Validation of a stored response with the origin (RFC 9111 section 4.3):
//! a conditional GET; a 304 freshens the stored response (section 4.3.4);
//! a full response replaces it; an error may let the stale one be served
//! (RFC 5861 section 4, RFC 9111 section 4.2.4). Also the one background
//! revalidation of stale-while-revalidate (RFC 5861 section 3).

use super::super::exchange::Exchange;
use super::super::lookup::Found;
use super::super::state::ProxyState;
use super::forward::{fetch, respond_with_upstream, upstream_failure};
use super::Step;
use crate::metrics::Metrics;
use crate::upstream::error::UpstreamError;
use crate::wire::body::ProxyBody;
use crate::wire::error::error_response;
use crawlcache_base::collapse::{self, Lead, Outcome, Role};
use crawlcache_policy::cache::StoredResponse;
use crawlcache_policy::cache::{self, OriginError};
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use http::{Method, Response, StatusCode};
use std::sync::Arc;
use std::time::SystemTime;

/// Carries out `Route::Revalidate`: leads the validation for the key (or
/// waits for the current leader when `collapse`), then validates.
/// `fwd` is `stale`, or `request` when the request's directives alone
/// made the validation (RFC 9211 section 2.2).
pub async fn run(
    state: &Arc<ProxyState>,
    ex: &mut Exchange,
    found: Found,
    collapse: bool,
    fwd: Fwd,
) -> Step {
    let mut lead = None;
    if collapse {
        match state.inflight.join(ex.primary()) {
            Role::Leader(l) => lead = Some(l),
            Role::Follower(rx) => {
                Metrics::inc(&state.metrics.collapsed);
                if collapse::wait(rx).await == Outcome::Stored {
                    return Step::LookAgain;
                }
            }
        }
    }
    Step::Done(validate(state, ex, found, lead, fwd).await)
}

/// Sends the conditional GET for `found` and answers the client.
async fn validate(
    state: &Arc<ProxyState>,
    ex: &mut Exchange,
    found: Found,
    lead: Option<Lead>,
    fwd: Fwd,
) -> Response<ProxyBody> {
    Metrics::inc(&state.metrics.validation_requests);
    super::robots::pace(state, ex).await;
    let stored = &found.decoded.stored;
    let request_time = SystemTime::now();
    let mut req = ex.upstream_request(&Method::GET, ProxyBody::empty());
    let h = req.headers_mut();
    for n in ["if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range"] {
        h.remove(n);
    }
    for (n, v) in cache::conditional_headers(stored) {
        h.insert(n, v);
    }
    let result = state.upstream.send(req).await;
    ex.upstream_version = result.as_ref().ok().map(|r| r.version());
    let now = SystemTime::now();
    match result {
        Err(e) => {
            if cache::may_serve_stale_on_error(
                &ex.request_cc,
                stored,
                error_kind(&e),
                now,
                &state.policy,
            ) {
                let detail =
                    if e.unreachable() { Detail::Disconnected } else { Detail::StaleIfError };
                ex.status =
                    CacheStatus { fwd: Some(fwd), ..CacheStatus::default() }.with_detail(detail);
                if let Some(r) = serve_stale(state, ex, &found, now) {
                    return r;
                }
            }
            let mut r = upstream_failure(state, ex, &e, fwd);
            if e.unreachable() {
                *r.status_mut() = StatusCode::GATEWAY_TIMEOUT;
            }
            r
        }
        Ok(resp) if resp.status() == StatusCode::NOT_MODIFIED => {
            if !cache::not_modified_matches(stored, resp.headers()) {
                drop(resp);
                return fetch(state, ex, lead, fwd, Some(&found.entry)).await;
            }
            let (meta, fresh) =
                store_freshened(state, ex.primary(), &found, resp.headers(), request_time, now);
            // The freshened head, decoded once: for this answer and for the
            // next look-up of the entry (which reads these bytes).
            let fresh = state.meta_cache.replace(&found.decoded, meta, fresh);
            if let Some(l) = lead {
                l.finish(Outcome::Stored);
            }
            let age = cache::current_age(&fresh.stored, now).as_secs();
            let ttl = lifetime(state, ex.primary(), &fresh.stored).as_secs() as i64 - age as i64;
            ex.status =
                CacheStatus { fwd_status: Some(304), ttl: Some(ttl), ..CacheStatus::forward(fwd) };
            match super::serve::stored(state, ex, &found, &fresh.stored, Some(&fresh.headers), age)
            {
                Step::Done(r) => r,
                Step::LookAgain => error_response(
                    StatusCode::BAD_GATEWAY,
                    "crawlcache: stored body vanished during revalidation",
                    &ex.status,
                ),
            }
        }
        Ok(resp) => {
            let status = resp.status().as_u16();
            if cache::may_serve_stale_on_error(
                &ex.request_cc,
                stored,
                OriginError::Status(status),
                now,
                &state.policy,
            ) {
                drop(resp);
                ex.status = CacheStatus {
                    fwd: Some(fwd),
                    fwd_status: Some(status),
                    ..CacheStatus::default()
                }
                .with_detail(Detail::StaleIfError);
                if let Some(r) = serve_stale(state, ex, &found, now) {
                    return r;
                }
                return error_response(
                    StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                    "crawlcache: origin error",
                    &ex.status,
                );
            }
            respond_with_upstream(state, ex, resp, request_time, lead, fwd, Some(&found.entry))
                .await
        }
    }
}

/// Freshens the stored head of `found` with the fields of a 304 (RFC 9111
/// section 4.3.4) and writes it back: to the index, to the fleet tier in
/// fleet mode, and to the record copy of the same response. A failure to
/// write is logged; the answer goes on from the freshened head, returned
/// encoded and decoded.
fn store_freshened(
    state: &Arc<ProxyState>,
    primary: &str,
    found: &Found,
    headers: &http::HeaderMap,
    request_time: SystemTime,
    now: SystemTime,
) -> (Vec<u8>, StoredResponse) {
    let stored = &found.decoded.stored;
    let fresh = cache::freshen(stored, headers, request_time, now, &state.policy);
    let meta = fresh.to_bytes();
    match state.store.update_meta(primary, &found.entry.secondary_key, &meta) {
        Err(e) => tracing::warn!("freshening {} failed: {e}", primary),
        // Fleet mode: the freshened head goes to the fleet tier too.
        Ok(true) => {
            if let Some(f) = &state.fleet {
                crawlcache_fleet::tier::publish_later(f, primary, &found.entry.secondary_key);
            }
        }
        Ok(false) => {}
    }
    // The record copy of this response gets the same new fields.
    let refreshed = crate::record::freshen_record(
        &state.store,
        primary,
        &found.entry,
        |r| cache::not_modified_matches(r, headers),
        |r| cache::freshen(r, headers, request_time, now, &state.policy),
    );
    if let Err(e) = refreshed {
        tracing::warn!("freshening the record of {} failed: {e}", primary);
    }
    (meta, fresh)
}

/// The freshness lifetime of `stored` under `primary`, bounded by the
/// matching `[[cache.rules]]` (as the reuse decision bounds it).
fn lifetime(state: &ProxyState, primary: &str, stored: &StoredResponse) -> std::time::Duration {
    crawlcache_policy::cache_rules::freshness_lifetime(
        &state.config.cache.rules,
        primary,
        stored,
        &state.policy,
    )
}

/// What an upstream failure counts as for the stale-serving rules.
pub(super) fn error_kind(e: &UpstreamError) -> OriginError {
    if e.unreachable() {
        OriginError::Unreachable
    } else {
        OriginError::Status(502)
    }
}

/// Serves the stale stored response after an origin error; `ex.status`
/// already says why. `None` when its body has vanished. A HEAD gets the
/// stored GET's header fields without the body (RFC 9110 section 9.3.2).
pub(super) fn serve_stale(
    state: &ProxyState,
    ex: &mut Exchange,
    found: &Found,
    now: SystemTime,
) -> Option<Response<ProxyBody>> {
    let stored: &StoredResponse = &found.decoded.stored;
    let age = cache::current_age(stored, now).as_secs();
    ex.status.hit = true;
    ex.status.served_stale = true;
    ex.status.ttl = Some(lifetime(state, ex.primary(), stored).as_secs() as i64 - age as i64);
    match super::serve::stored(state, ex, found, stored, None, age) {
        Step::Done(r) => Some(r),
        Step::LookAgain => None,
    }
}

/// stale-while-revalidate: one background revalidation per key (none when
/// one is already running).
pub fn spawn_background(state: &Arc<ProxyState>, ex: &Exchange, found: &Found) {
    let Role::Leader(lead) = state.inflight.join(ex.primary()) else { return };
    let state = state.clone();
    let mut bg = ex.detached_get();
    let found = found.clone();
    tokio::spawn(async move {
        let _task = state.tasks.enter();
        let resp = validate(&state, &mut bg, found, Some(lead), Fwd::Stale).await;
        // Dropping the body lets a storing tee finish on its own.
        drop(resp);
    });
}
