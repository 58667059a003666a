//! Requests the cache does not answer, forwarded whole with their body and
//! never stored: methods other than GET and HEAD (a successful unsafe
//! request invalidates what it names, RFC 9111 section 4.4), and a GET or
//! HEAD that carries content (its answer may depend on the content). An
//! OPTIONS goes out with its `Max-Forwards` updated, and as `OPTIONS *`
//! when it is about the whole server ([`super::options_trace`]).

use super::super::exchange::Exchange;
use super::super::state::ProxyState;
use super::forward::upstream_failure;
use crate::wire::body::ProxyBody;
use crawlcache_policy::cache::{self, to_millis};
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use crawlcache_policy::hop_by_hop::client_response_fields;
use http::{Method, Response, Version};
use std::sync::Arc;
use std::time::SystemTime;

/// Forwards `ex` with its body and passes the answer through; then removes
/// the stored responses the request invalidated.
pub async fn run(state: &Arc<ProxyState>, ex: &mut Exchange, fwd: Fwd) -> Response<ProxyBody> {
    super::robots::pace(state, ex).await;
    // Record and replay (SPEC section 6): a method in `record.methods` has
    // its body hashed on the way to the origin, for the record key.
    let recording = fwd == Fwd::Method && state.config.record.records_method(&ex.parts.method);
    let request_time = SystemTime::now();
    let (body, body_hash) = if recording {
        let len = ex
            .parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let (b, rx) = crate::record::hash_request_body(ex.body.take(), len);
        (b, Some(rx))
    } else {
        (
            ex.body.take().map(|b| ProxyBody::Upstream(b.into())).unwrap_or_else(ProxyBody::empty),
            None,
        )
    };
    let mut up = ex.upstream_request(&ex.parts.method, body);
    // RFC 9110 section 7.6.2 and RFC 9112 section 3.2.4 (see options_trace).
    let whole_server = super::options_trace::is_whole_server(ex);
    if ex.parts.method == Method::OPTIONS {
        super::options_trace::update_max_forwards(up.headers_mut());
    }
    let sent = if whole_server {
        state.upstream.send_server_options(up).await
    } else {
        state.upstream.send(up).await
    };
    ex.upstream_version = sent.as_ref().ok().map(|r| r.version());
    match sent {
        Err(e) => upstream_failure(state, ex, &e, fwd),
        Ok(resp) => {
            let response_time = SystemTime::now();
            let status = resp.status().as_u16();
            let primary = ex.primary();
            for target in
                cache::invalidation_targets(&ex.parts.method, status, primary, resp.headers())
            {
                match state.invalidations.invalidate(&target, to_millis(SystemTime::now()), || {
                    state.store.remove(&target)
                }) {
                    Ok(n) if n > 0 => tracing::debug!(
                        "invalidated {target} ({n} variants) after {} {primary}",
                        ex.parts.method
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!("invalidating {target} failed: {e}"),
                }
            }
            let (mut rparts, body) = resp.into_parts();
            let origin_headers = rparts.headers.clone();
            let received = std::mem::replace(&mut rparts.version, Version::HTTP_11);
            client_response_fields(&mut rparts.headers, received);
            ex.status = CacheStatus { fwd_status: Some(status), ..CacheStatus::forward(fwd) };
            if fwd == Fwd::Request {
                ex.status.detail = Some(Detail::RequestBody);
            }
            if let Some(rx) = body_hash {
                if state.config.record.wants(&ex.parts.method, &ex.request_cc, &origin_headers) {
                    // The body has normally been sent whole by now; an
                    // origin that answers before reading it is not recorded.
                    match tokio::time::timeout(std::time::Duration::from_secs(5), rx).await {
                        Ok(Ok(hash)) => {
                            let key = crawlcache_policy::store_key::RecordKey::new(
                                &ex.parts.method,
                                ex.primary(),
                                Some(&hash),
                            );
                            // The variant this request selects (RFC 9111 section 4.1).
                            let selection = crawlcache_policy::store_key::Selection::of_request(
                                &origin_headers,
                                &ex.parts.headers,
                            );
                            let vary_request = crawlcache_policy::cache::key::nominated_fields(
                                &origin_headers,
                                &ex.parts.headers,
                            );
                            let meta = crawlcache_policy::cache::encode_head(
                                status,
                                to_millis(request_time),
                                to_millis(response_time),
                                ex.primary(),
                                cache::fields_to_store(&origin_headers, &state.policy).into_iter(),
                                vary_request.iter().map(|(n, v)| (n.as_str(), v.as_slice())),
                            );
                            let len = rparts
                                .headers
                                .get(http::header::CONTENT_LENGTH)
                                .and_then(|v| v.to_str().ok())
                                .and_then(|v| v.trim().parse().ok());
                            return super::forward::record_only(
                                state,
                                false,
                                (key, selection),
                                meta,
                                to_millis(request_time),
                                rparts,
                                body,
                                len,
                            );
                        }
                        _ => tracing::info!(
                            "not recording {} {}: the request body was not read whole",
                            ex.parts.method,
                            ex.primary()
                        ),
                    }
                }
            }
            Response::from_parts(rparts, ProxyBody::Upstream(body))
        }
    }
}
