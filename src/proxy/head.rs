//! A HEAD for a stored GET response that needs validation
//! (RFC 9111 section 4.3.5).
//!
//! The HEAD is forwarded as is and the origin's answer passed to the
//! client. A `200` whose validators and `Content-Length` agree with the
//! stored response freshens it like a `304` would (section 4.3.4), so the
//! next GET can be served from the cache; one that disagrees means the
//! stored body is outdated, and the stored response is dropped.

use super::body::ProxyBody;
use super::handler::error_response;
use super::headers::{add_via, remove_hop_by_hop, set_cache_status};
use super::ProxyState;
use crate::admin::metrics::Metrics;
use crate::cache::{policy, StoredResponse};
use crate::store::Entry;
use http::request::Parts;
use http::{Request, Response, StatusCode, Version};
use std::sync::Arc;
use std::time::SystemTime;

/// Forwards the client's HEAD for `primary`, whose stored GET response
/// (`entry`, `stored`) must be validated, and updates or drops that stored
/// response from a `200` answer (RFC 9111 section 4.3.5).
pub async fn revalidate_with_head(
    state: &Arc<ProxyState>,
    parts: &Parts,
    primary: &str,
    entry: &Entry,
    stored: &StoredResponse,
) -> Response<ProxyBody> {
    Metrics::inc(&state.metrics.revalidations);
    let mut headers = parts.headers.clone();
    remove_hop_by_hop(&mut headers);
    add_via(&mut headers);
    let mut req = Request::new(ProxyBody::empty());
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = parts.uri.clone();
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    let request_time = SystemTime::now();
    let resp = match state.upstream.send(req).await {
        Ok(r) => r,
        Err(e) => {
            Metrics::inc(&state.metrics.upstream_errors);
            return error_response(e.status(), &format!("crawlcache: {e}"), "fwd=stale; detail=upstream-error");
        }
    };
    let now = SystemTime::now();
    let status = resp.status();
    let mut detail = "";
    if status == StatusCode::OK {
        let body_len = entry.body.as_ref().map_or(0, |b| b.len);
        if policy::head_matches(stored, resp.headers(), body_len) {
            let fresh = policy::freshen(stored, resp.headers(), request_time, now, &state.policy);
            match state.store.update_meta(primary, &entry.secondary_key, &fresh.to_bytes()) {
                Ok(_) => detail = "; detail=head-freshened",
                Err(e) => tracing::warn!("freshening {primary} from a HEAD failed: {e}"),
            }
        } else {
            let _ = state.store.remove_variant(primary, &entry.secondary_key);
            detail = "; detail=head-mismatch";
        }
    }
    let (mut rparts, body) = resp.into_parts();
    remove_hop_by_hop(&mut rparts.headers);
    add_via(&mut rparts.headers);
    set_cache_status(&mut rparts.headers, &format!("fwd=stale; fwd-status={}{detail}", status.as_u16()));
    Response::from_parts(rparts, ProxyBody::Upstream(body))
}
