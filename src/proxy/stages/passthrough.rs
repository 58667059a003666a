//! Requests the cache does not answer, forwarded whole with their body and
//! never stored: methods other than GET and HEAD (a successful unsafe
//! request invalidates what it names, RFC 9111 section 4.4), and a GET or
//! HEAD that carries content (its answer may depend on the content).

use super::super::exchange::Exchange;
use super::super::ProxyState;
use super::forward::upstream_failure;
use crate::cache::{policy, to_millis};
use crate::wire::body::ProxyBody;
use crate::wire::cache_status::{CacheStatus, Detail, Fwd};
use crate::wire::fields::client_response_fields;
use http::{Response, Version};
use std::sync::Arc;
use std::time::SystemTime;

/// Forwards `ex` with its body and passes the answer through; then removes
/// the stored responses the request invalidated.
pub async fn run(state: &Arc<ProxyState>, ex: &mut Exchange, fwd: Fwd) -> Response<ProxyBody> {
    super::robots::pace(state, ex).await;
    let body = ex.body.take().map(ProxyBody::Upstream).unwrap_or_else(ProxyBody::empty);
    let up = ex.upstream_request(&ex.parts.method, body);
    match state.upstream.send(up).await {
        Err(e) => upstream_failure(state, ex, &e, fwd),
        Ok(resp) => {
            let status = resp.status().as_u16();
            let primary = ex.primary();
            for target in policy::invalidation_targets(&ex.parts.method, status, primary, resp.headers()) {
                match state.invalidations.invalidate(&target, to_millis(SystemTime::now()), || state.store.remove(&target)) {
                    Ok(n) if n > 0 => tracing::debug!("invalidated {target} ({n} variants) after {} {primary}", ex.parts.method),
                    Ok(_) => {}
                    Err(e) => tracing::warn!("invalidating {target} failed: {e}"),
                }
            }
            let (mut rparts, body) = resp.into_parts();
            rparts.version = Version::HTTP_11;
            client_response_fields(&mut rparts.headers);
            ex.status = CacheStatus { fwd_status: Some(status), ..CacheStatus::forward(fwd) };
            if fwd == Fwd::Request {
                ex.status.detail = Some(Detail::RequestBody);
            }
            Response::from_parts(rparts, ProxyBody::Upstream(body))
        }
    }
}
