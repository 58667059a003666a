//! A HEAD for a stored GET response that needs validation
//! (RFC 9111 section 4.3.5).
//!
//! The HEAD is forwarded as is and the origin's answer passed to the
//! client. A `200` whose validators and `Content-Length` agree with the
//! stored response freshens it like a `304` would (section 4.3.4), so the
//! next GET can be served from the cache; one that disagrees means the
//! stored body is outdated, and the stored response is dropped.
//!
//! An origin that errs or cannot be reached lets the stale stored response
//! answer the HEAD under exactly the rules a GET's revalidation follows
//! (stale-if-error, RFC 5861 section 4; a disconnected cache, RFC 9111
//! section 4.2.4): a stored GET answers HEAD (RFC 9110 section 9.3.2), so
//! every way it may answer a GET applies to HEAD (C52).

use super::super::exchange::Exchange;
use super::super::lookup::Found;
use super::super::state::ProxyState;
use super::forward::upstream_failure;
use super::revalidate::{error_kind, serve_stale};
use crate::metrics::Metrics;
use crate::wire::body::ProxyBody;
use crawlcache_policy::cache::{self, OriginError};
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use crawlcache_policy::hop_by_hop::client_response_fields;
use http::{Response, StatusCode};
use std::sync::Arc;
use std::time::SystemTime;

/// Forwards the client's HEAD for a stored GET (`found`) that must be
/// validated, and updates or drops that stored response from a `200`
/// answer (RFC 9111 section 4.3.5).
/// `fwd` is `stale`, or `request` when the request's directives alone
/// made the validation (RFC 9211 section 2.2).
pub async fn run(
    state: &Arc<ProxyState>,
    ex: &mut Exchange,
    found: &Found,
    fwd: Fwd,
) -> Response<ProxyBody> {
    Metrics::inc(&state.metrics.validation_requests);
    let req = ex.upstream_request(&ex.parts.method, ProxyBody::empty());
    let request_time = SystemTime::now();
    let resp = match state.upstream.send(req).await {
        Ok(r) => {
            ex.upstream_version = Some(r.version());
            r
        }
        Err(e) => {
            let now = SystemTime::now();
            if cache::may_serve_stale_on_error(
                &ex.request_cc,
                &found.decoded.stored,
                error_kind(&e),
                now,
                &state.policy,
            ) {
                let detail =
                    if e.unreachable() { Detail::Disconnected } else { Detail::StaleIfError };
                ex.status =
                    CacheStatus { fwd: Some(fwd), ..CacheStatus::default() }.with_detail(detail);
                if let Some(r) = serve_stale(state, ex, found, now) {
                    return r;
                }
            }
            let mut r = upstream_failure(state, ex, &e, fwd);
            if e.unreachable() {
                *r.status_mut() = StatusCode::GATEWAY_TIMEOUT;
            }
            return r;
        }
    };
    let now = SystemTime::now();
    let status = resp.status();
    if cache::may_serve_stale_on_error(
        &ex.request_cc,
        &found.decoded.stored,
        OriginError::Status(status.as_u16()),
        now,
        &state.policy,
    ) {
        drop(resp);
        ex.status = CacheStatus {
            fwd: Some(fwd),
            fwd_status: Some(status.as_u16()),
            ..CacheStatus::default()
        }
        .with_detail(Detail::StaleIfError);
        if let Some(r) = serve_stale(state, ex, found, now) {
            return r;
        }
        return crate::wire::error::error_response(status, "crawlcache: origin error", &ex.status);
    }
    let (primary, entry, stored) = (ex.primary(), &found.entry, &found.decoded.stored);
    let mut detail = None;
    if status == StatusCode::OK {
        let body_len = entry.body.as_ref().map_or(0, |b| b.len);
        if cache::head_matches(stored, resp.headers(), body_len) {
            let fresh = cache::freshen(stored, resp.headers(), request_time, now, &state.policy);
            match state.store.update_meta(primary, &entry.secondary_key, &fresh.to_bytes()) {
                Ok(_) => detail = Some(Detail::HeadFreshened),
                Err(e) => tracing::warn!("freshening {primary} from a HEAD failed: {e}"),
            }
            let refreshed = crate::record::freshen_record(
                &state.store,
                primary,
                entry,
                |r| cache::head_matches(r, resp.headers(), body_len),
                |r| cache::freshen(r, resp.headers(), request_time, now, &state.policy),
            );
            if let Err(e) = refreshed {
                tracing::warn!("freshening the record of {primary} from a HEAD failed: {e}");
            }
        } else {
            let _ = state.store.remove_variant(primary, &entry.secondary_key);
            detail = Some(Detail::HeadMismatch);
        }
    }
    let (mut rparts, body) = resp.into_parts();
    client_response_fields(&mut rparts.headers, rparts.version);
    ex.status =
        CacheStatus { fwd_status: Some(status.as_u16()), detail, ..CacheStatus::forward(fwd) };
    Response::from_parts(rparts, ProxyBody::Upstream(body))
}
