//! A miss: the request goes to the origin (collapsed with concurrent
//! requests for the same key, C17), and the origin's response is either
//! teed into the store or passed through, as RFC 9111 section 3 decides.

use super::super::exchange::Exchange;
use super::super::state::ProxyState;
use super::tee::{self, TeeJob};
use super::Step;
use crate::metrics::Metrics;
use crate::upstream::error::UpstreamError;
use crate::wire::body::Inbound;
use crate::wire::body::ProxyBody;
use crate::wire::error::error_response;
use crawlcache_base::collapse::{self, Lead, Outcome, Role};
use crawlcache_fleet::tier::{BeforeOrigin, FleetRequest};
use crawlcache_fleet::Fleet;
use crawlcache_policy::cache::{self, key, to_millis};
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use crawlcache_policy::hop_by_hop::client_response_fields;
use crawlcache_policy::keep::{self, Keep};
use crawlcache_policy::store_key::RecordKey;
use crawlcache_store::Entry;
use http::{Method, Response, Version};
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::mpsc;

/// How many lookups a request may make while following collapsed fetches.
pub const MAX_COLLAPSED_LOOKUPS: u32 = 3;

/// How a forward takes part in collapsed forwarding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collapse {
    /// Lead the fetch for the key, or wait for the current leader.
    LeadOrWait,
    /// Wait for a fetch in flight, never lead (HEAD: no body to store).
    WaitOnly,
    /// Neither: go to the origin alone.
    Alone,
}

/// Carries out `Route::Forward`: joins or waits for a fetch in flight as
/// `collapse` allows, then fetches. [`Step::LookAgain`] when a fetch it
/// waited for stored a response.
pub async fn run(state: &Arc<ProxyState>, ex: &mut Exchange, fwd: Fwd, collapse: Collapse) -> Step {
    let primary = ex.primary().to_string();
    let lead = match collapse {
        Collapse::Alone => None,
        Collapse::WaitOnly => {
            if let Some(rx) = state.inflight.follow(&primary) {
                Metrics::inc(&state.metrics.collapsed);
                if collapse::wait(rx).await == Outcome::Stored {
                    return Step::LookAgain;
                }
            }
            None
        }
        Collapse::LeadOrWait => match state.inflight.join(&primary) {
            Role::Leader(lead) => {
                // The lookup that routed this request here ran before it
                // led: a fetch for the same key that stored its response
                // and finished in between left nothing to wait for, and
                // would be fetched twice. Nothing was stored then
                // (`uri-miss`): if something is now, look again. (Unless
                // the store's version of the key has not moved since.)
                let moved = ex.looked_up.is_none_or(|v| v != state.store.lookup_version(&primary));
                if moved && fwd == Fwd::UriMiss && ex.lookups <= MAX_COLLAPSED_LOOKUPS {
                    if let Ok(entries) = state.store.lookup(&primary) {
                        if !entries.is_empty() {
                            lead.finish(Outcome::Stored);
                            return Step::LookAgain;
                        }
                    }
                }
                Some(lead)
            }
            Role::Follower(rx) => {
                Metrics::inc(&state.metrics.collapsed);
                if collapse::wait(rx).await == Outcome::Stored {
                    return Step::LookAgain;
                }
                None
            }
        },
    };
    let lead = match state.fleet.clone() {
        Some(fleet) if !ex.fleet_checked && ex.parts.method == Method::GET => {
            ex.fleet_checked = true;
            match fleet_tier(state, &fleet, ex, lead).await {
                BeforeOrigin::Filled => {
                    ex.from_fleet = true;
                    return Step::LookAgain;
                }
                BeforeOrigin::Fetch(lead) => lead,
            }
        }
        _ => lead,
    };
    Step::Done(fetch(state, ex, lead, fwd, None).await)
}

/// Fleet mode: the fleet tier before the origin (`crawlcache_fleet::tier`),
/// asked with the request's URL, header fields and reuse decision.
async fn fleet_tier(
    state: &ProxyState,
    fleet: &Arc<Fleet>,
    ex: &Exchange,
    lead: Option<Lead>,
) -> BeforeOrigin {
    let (primary, request_cc) = (ex.primary(), &ex.request_cc);
    let decide = |stored: &crawlcache_policy::cache::StoredResponse| {
        let fresh = crawlcache_policy::cache::Freshness::of(stored, &state.policy);
        crawlcache_policy::cache_rules::reuse_decision(
            primary,
            request_cc,
            &fresh,
            SystemTime::now(),
            &state.policy,
            &state.config.cache.rules,
        )
        .reuse
    };
    let req = FleetRequest { primary, headers: &ex.parts.headers, decide: &decide };
    crawlcache_fleet::tier::before_origin(fleet, &req, lead).await
}

/// Forwards the request and streams the response back, storing it when it
/// is storable. `lead` is released once the outcome is known; `replaces`
/// is the stored variant a full response replaces.
pub async fn fetch(
    state: &Arc<ProxyState>,
    ex: &mut Exchange,
    lead: Option<Lead>,
    fwd: Fwd,
    replaces: Option<&Entry>,
) -> Response<ProxyBody> {
    super::robots::pace(state, ex).await;
    let request_time = SystemTime::now();
    let req = ex.upstream_request(&ex.parts.method, ProxyBody::empty());
    match state.upstream.send(req).await {
        Err(e) => upstream_failure(state, ex, &e, fwd),
        Ok(resp) => {
            ex.upstream_version = Some(resp.version());
            respond_with_upstream(state, ex, resp, request_time, lead, fwd, replaces).await
        }
    }
}

/// The origin failed: an error response naming the cause.
pub fn upstream_failure(
    state: &ProxyState,
    ex: &mut Exchange,
    e: &UpstreamError,
    fwd: Fwd,
) -> Response<ProxyBody> {
    Metrics::inc(&state.metrics.upstream_errors);
    tracing::info!("upstream error: {e}");
    ex.status = CacheStatus::forward(fwd).with_detail(Detail::UpstreamError);
    error_response(e.status(), &format!("crawlcache: {e}"), &ex.status)
}

/// What becomes of the origin's `response` to `ex` (cache key `primary`):
/// the one storable decision of the miss path, [`crawlcache_policy::keep()`] (RFC 9111
/// section 3, `[[cache.rules]]`, `cache.max_object_size`, `[record]`).
fn keep_or_not(
    state: &ProxyState,
    ex: &Exchange,
    primary: &str,
    response: &keep::Response<'_>,
) -> Keep {
    let request = keep::Request {
        method: &ex.parts.method,
        headers: &ex.parts.headers,
        cache_control: &ex.request_cc,
        primary,
    };
    let rules = keep::Rules {
        policy: &state.policy,
        cache_rules: &state.config.cache.rules,
        record: state.config.record.rules(),
    };
    let limits = keep::Limits { max_object_size: state.config.cache.max_object_size };
    crawlcache_policy::keep(&request, response, &rules, &limits)
}

/// The response to the client while `body` is copied into the store by
/// `job` through `writer`. `stored` (RFC 9211 section 2.5) is set in
/// `ex.status` only once the entry is committed: known before the head goes
/// out for a body read whole first (at most [`tee::BUFFER_MAX`] bytes); a
/// streamed body is still arriving then (it may be cut short, or outgrow
/// `cache.max_object_size`), so its head does not claim it.
async fn tee_response(
    ex: &mut Exchange,
    job: TeeJob,
    rparts: http::response::Parts,
    body: Inbound,
    writer: crawlcache_store::BodyWriter,
    content_length: Option<u64>,
) -> Response<ProxyBody> {
    if content_length.is_some_and(|l| l <= tee::BUFFER_MAX) {
        // A task of its own, so that the copy into the store goes on if the
        // client goes away meanwhile (as with `tee::run`).
        let body = match tokio::spawn(tee::buffered(job, body, writer, content_length)).await {
            Ok((body, stored)) => {
                ex.status.stored = stored;
                body
            }
            Err(e) => {
                let (tx, rx) = mpsc::channel(1);
                let _ = tx.try_send(Err(std::io::Error::other(format!(
                    "copying the origin's body failed: {e}"
                ))));
                ProxyBody::Channel { rx, len: None }
            }
        };
        return Response::from_parts(rparts, body);
    }
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(tee::run(job, body, writer, tx));
    Response::from_parts(rparts, ProxyBody::Channel { rx, len: content_length })
}

/// Turns an upstream response into the client's response, teeing the body
/// into the store when the response may be stored (RFC 9111 section 3). A
/// stored body announced at most `tee::BUFFER_MAX` bytes long is read
/// whole first (`tee::buffered`); a longer one streams.
pub async fn respond_with_upstream(
    state: &Arc<ProxyState>,
    ex: &mut Exchange,
    resp: Response<Inbound>,
    request_time: SystemTime,
    lead: Option<Lead>,
    fwd: Fwd,
    replaces: Option<&Entry>,
) -> Response<ProxyBody> {
    let response_time = SystemTime::now();
    let primary = ex.primary().to_string();
    let (mut rparts, body) = resp.into_parts();
    // RFC 9112 section 6.3: the body was framed by the transfer coding; a
    // length beside it is neither stored nor forwarded.
    crawlcache_policy::hop_by_hop::drop_length_beside_transfer_coding(&mut rparts.headers);
    let status = rparts.status.as_u16();
    let content_length: Option<u64> = rparts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());

    let response = keep::Response { status, headers: &rparts.headers, content_length };
    let keep = keep_or_not(state, ex, &primary, &response);
    // A successful full response replaces the stored variant it matches
    // even when it is not itself storable (RFC 9111 section 4.3.3 wants the
    // newest response used); an error status keeps the old one.
    if keep.not_stored().is_some() && (200..400).contains(&status) {
        if let Some(old) = replaces {
            let _ = state.store.remove_variant(&primary, &old.secondary_key);
        }
    }
    // Record and replay (SPEC section 6): the key this response is kept
    // under for offline replay besides the cache, if it is.
    let record_key = keep.records().then(|| RecordKey::new(&ex.parts.method, &primary, None));
    let (tee_into, not_stored) = match keep {
        Keep::Store { secondary_key, .. } => match state.store.begin_body() {
            Ok(writer) => (Some((writer, secondary_key)), None),
            Err(e) => {
                Metrics::inc(&state.metrics.store_errors);
                tracing::warn!("not storing {primary}: {e}");
                (None, Some(Detail::StoreError))
            }
        },
        _ => (None, keep.not_stored()),
    };
    ex.status = CacheStatus { fwd_status: Some(status), ..CacheStatus::forward(fwd) };
    let request_time_ms = to_millis(request_time);
    // The head to store, encoded from the origin's field lines before they
    // are changed for the client, when anything will be stored.
    let meta = if tee_into.is_some() || record_key.is_some() {
        let fields = cache::fields_to_store(&rparts.headers, &state.policy);
        let vary_request = key::nominated_fields(&rparts.headers, &ex.parts.headers);
        crawlcache_policy::cache::encode_head(
            status,
            request_time_ms,
            to_millis(response_time),
            &primary,
            fields.iter().copied(),
            vary_request.iter().map(|(n, v)| (n.as_str(), v.as_slice())),
        )
    } else {
        Vec::new()
    };
    // The client talks HTTP/1.1 with the proxy, whatever the origin spoke
    // (the server library sends HTTP/2 to a client that chose it); `Via`
    // names what the origin spoke.
    let received = std::mem::replace(&mut rparts.version, Version::HTTP_11);
    client_response_fields(&mut rparts.headers, received);

    match tee_into {
        Some((writer, secondary_key)) => {
            let lead = match record_key {
                Some(rk) => Some(crate::record::relay_lead(
                    state.store.clone(),
                    lead,
                    primary.clone(),
                    secondary_key.clone(),
                    rk,
                )),
                None => lead,
            };
            let job = TeeJob {
                state: state.clone(),
                primary,
                secondary_key,
                meta,
                request_time_ms,
                lead,
            };
            tee_response(ex, job, rparts, body, writer, content_length).await
        }
        None => {
            ex.status.detail = not_stored;
            if let Some(l) = lead {
                l.finish(Outcome::NotShared);
            }
            match record_key {
                Some(rk) => {
                    // The variant this request selects (RFC 9111 section 4.1).
                    let selection = crawlcache_policy::store_key::Selection::of_request(
                        &rparts.headers,
                        &ex.parts.headers,
                    );
                    record_only(
                        state,
                        ex.is_head(),
                        (rk, selection),
                        meta,
                        request_time_ms,
                        rparts,
                        body,
                        content_length,
                    )
                }
                None => Response::from_parts(rparts, ProxyBody::Upstream(body)),
            }
        }
    }
}

/// A response that is recorded but not stored in the cache: its body is
/// teed into the store under the record key and the variant's selection
/// only (SPEC section 6); the answer to a HEAD is indexed without a body.
/// `meta`: the stored head ([`crawlcache_policy::cache::encode_head`]);
/// `request_time_ms`: when the request was sent (milliseconds since the
/// Unix epoch).
#[allow(clippy::too_many_arguments)]
pub fn record_only(
    state: &Arc<ProxyState>,
    head: bool,
    (record_key, selection): (
        crawlcache_policy::store_key::RecordKey,
        crawlcache_policy::store_key::Selection,
    ),
    meta: Vec<u8>,
    request_time_ms: u64,
    rparts: http::response::Parts,
    body: Inbound,
    content_length: Option<u64>,
) -> Response<ProxyBody> {
    let secondary_key = selection.secondary_key();
    if head {
        let store = state.store.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = store.insert(&record_key.primary(), &secondary_key, &meta, None) {
                tracing::warn!("recording {record_key} failed: {e}");
            }
        });
        return Response::from_parts(rparts, ProxyBody::Upstream(body));
    }
    if content_length.is_some_and(|l| l > state.config.cache.max_object_size) {
        return Response::from_parts(rparts, ProxyBody::Upstream(body));
    }
    let writer = match state.store.begin_body() {
        Ok(w) => w,
        Err(e) => {
            Metrics::inc(&state.metrics.store_errors);
            tracing::warn!("not recording {record_key}: {e}");
            return Response::from_parts(rparts, ProxyBody::Upstream(body));
        }
    };
    let (tx, rx) = mpsc::channel(8);
    let job = TeeJob {
        state: state.clone(),
        primary: record_key.primary(),
        secondary_key,
        meta,
        request_time_ms,
        lead: None,
    };
    tokio::spawn(tee::run(job, body, writer, tx));
    Response::from_parts(rparts, ProxyBody::Channel { rx, len: content_length })
}
