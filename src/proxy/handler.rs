//! The one place a request's path through the proxy is decided:
//! admin endpoint, tunnel, cache hit, revalidation, miss, or pass-through.
//!
//! ```text
//! origin-form            -> admin (loopback clients only)
//! CONNECT                -> tunnel
//! GET / HEAD  absolute   -> lookup -> fresh: serve from the store
//!                                  -> stale-while-revalidate: serve, refresh in background
//!                                  -> stale / no-cache: revalidate (collapsed) -> 304: freshen, serve
//!                                                                            -> 200: store, stream
//!                                                                            -> error: stale-if-error?
//!                        -> miss   -> fetch (collapsed) -> stream to client while storing
//! other methods          -> pass through, then invalidate (RFC 9111 section 4.4)
//! ```

use super::body::ProxyBody;
use super::collapse::{self, Lead, Outcome, Role};
use super::headers::{add_via, remove_hop_by_hop, set_cache_status};
use super::meta_cache::Decoded;
use super::robots_gate;
use super::upstream::UpstreamError;
use super::ProxyState;
use crate::admin::metrics::Metrics;
use crate::cache::cache_control::CacheControl;
use crate::cache::policy::{self, OriginError, Reuse};
use crate::cache::{key, to_millis, StoredResponse};
use crate::store::{BodyWriter, Entry, StoreError};
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::mpsc;

/// Largest total size of a request's header fields, in bytes (as Squid's
/// default `request_header_max_size`). Larger requests get 431.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Entry point for every request on a client connection.
pub async fn handle(state: Arc<ProxyState>, req: Request<Incoming>, peer: SocketAddr) -> Result<Response<ProxyBody>, Infallible> {
    Ok(route(state, req, peer).await)
}

async fn route(state: Arc<ProxyState>, req: Request<Incoming>, peer: SocketAddr) -> Response<ProxyBody> {
    if req.method() == Method::CONNECT {
        return super::tunnel::connect(state, req, peer).await;
    }
    let uri = req.uri().clone();
    if uri.scheme().is_none() || uri.authority().is_none() {
        return crate::admin::handle(&state, req, peer).await;
    }
    proxy_request(state, req).await
}

/// Requests decrypted inside an intercepted CONNECT tunnel to `authority`:
/// an origin-form target becomes `https://authority/path`, then the request
/// takes the same path as a plain-HTTP one.
pub async fn handle_in_tunnel(
    state: Arc<ProxyState>,
    mut req: Request<Incoming>,
    authority: http::uri::Authority,
) -> Result<Response<ProxyBody>, Infallible> {
    if req.uri().scheme().is_none() {
        let pq = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string();
        match Uri::builder().scheme("https").authority(authority.clone()).path_and_query(pq).build() {
            Ok(u) => *req.uri_mut() = u,
            Err(e) => {
                return Ok(error_response(StatusCode::BAD_REQUEST, &format!("crawlcache: bad request target: {e}"), "fwd=bypass"));
            }
        }
    }
    if req.uri().authority() != Some(&authority) || req.uri().scheme_str() != Some("https") {
        return Ok(error_response(
            StatusCode::MISDIRECTED_REQUEST,
            &format!("crawlcache: this tunnel is for https://{authority} only"),
            "fwd=bypass",
        ));
    }
    Ok(proxy_request(state, req).await)
}

/// A request with an absolute target: the cache path for GET and HEAD,
/// pass-through for the other methods.
async fn proxy_request(state: Arc<ProxyState>, req: Request<Incoming>) -> Response<ProxyBody> {
    let uri = req.uri().clone();
    if !matches!(uri.scheme_str(), Some("http") | Some("https")) {
        return error_response(
            StatusCode::BAD_REQUEST,
            &format!("crawlcache: cannot proxy {uri}: only http:// and https:// targets are supported"),
            "fwd=bypass; detail=scheme",
        );
    }
    if targets_self(&state, &uri) {
        return error_response(
            StatusCode::LOOP_DETECTED,
            &format!("crawlcache: refusing a request to {uri}: it would loop back into this proxy"),
            "fwd=bypass; detail=loop",
        );
    }
    let Some(primary) = key::primary_key(&uri) else {
        return error_response(StatusCode::BAD_REQUEST, &format!("crawlcache: cannot use target URI {uri}"), "fwd=bypass");
    };
    let header_bytes: usize = req.headers().iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum();
    if header_bytes > MAX_HEADER_BYTES {
        return error_response(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            &format!("crawlcache: the request's header fields total {header_bytes} bytes; the limit is {MAX_HEADER_BYTES}"),
            "fwd=bypass",
        );
    }
    Metrics::inc(&state.metrics.requests);
    let started = std::time::Instant::now();
    let arrived = SystemTime::now();
    let method = req.method().clone();
    let user_agent = req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_string);
    let gate = robots_gate::gate(&state, &method, &primary, user_agent.as_deref()).await;
    let (check, mut response) = match gate {
        robots_gate::Gate::Answer { check, response } => (check, response),
        robots_gate::Gate::Forward { check, pace } => {
            let mut req = req;
            if let Some(p) = pace {
                req.extensions_mut().insert(p);
            }
            let response = if method == Method::GET || method == Method::HEAD {
                let (parts, _body) = req.into_parts();
                cached(state.clone(), parts, primary.clone()).await
            } else {
                passthrough(state.clone(), req, primary.clone()).await
            };
            (check, response)
        }
    };
    if let Some(c) = &check {
        robots_gate::annotate(&mut response, c);
    }
    let mut record = robots_gate::audit_record(arrived, &method, &primary, check.as_ref());
    let cache_status = response.headers().get("cache-status").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    record.upstream_status = cache_status
        .split(';')
        .find_map(|p| p.trim().strip_prefix("fwd-status="))
        .and_then(|v| v.parse().ok());
    record.cache_status = cache_status;
    let (parts, body) = response.into_parts();
    let guard = super::body::AuditGuard::new(state.audit.clone(), record, started);
    Response::from_parts(parts, ProxyBody::Audited(Box::new(body), guard))
}

/// True when `uri` names this proxy's own listening socket.
fn targets_self(state: &ProxyState, uri: &Uri) -> bool {
    let Some(auth) = uri.authority() else { return false };
    let default_port = if uri.scheme_str() == Some("https") { 443 } else { 80 };
    let port = auth.port_u16().unwrap_or(default_port);
    if port != state.local_addr.port() {
        return false;
    }
    let host = auth.host().trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback() || ip == state.local_addr.ip() || state.local_addr.ip().is_unspecified(),
        Err(_) => false,
    }
}

/// A plain-text error response with `Cache-Status` and `Via`.
pub fn error_response(status: StatusCode, message: &str, cache_status: &str) -> Response<ProxyBody> {
    let mut body = message.to_string();
    body.push('\n');
    let mut resp = Response::new(ProxyBody::full(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    add_via(h);
    set_cache_status(h, cache_status);
    resp
}

/// The stored variant that matches the request, if any (RFC 9111 section
/// 4.1: when several match, the most recent response is used).
/// Also says whether any variant at all is stored under the URI (to tell a
/// `vary-miss` from a `uri-miss`).
fn lookup_variant(state: &ProxyState, primary: &str, request_headers: &HeaderMap) -> Result<(Option<(Entry, Arc<Decoded>)>, bool), StoreError> {
    let mut best: Option<(Entry, Arc<Decoded>)> = None;
    let entries = state.store.lookup(primary)?;
    let any = !entries.is_empty();
    for entry in entries {
        let Some(decoded) = state.meta_cache.decode(&entry.meta) else {
            tracing::warn!("dropping unreadable cache entry for {primary}");
            let _ = state.store.remove_variant(primary, &entry.secondary_key);
            continue;
        };
        let Some(sk) = key::secondary_key(&decoded.headers, request_headers) else { continue };
        if sk != entry.secondary_key {
            continue;
        }
        if best.as_ref().map(|(_, b)| decoded.stored.response_time_ms > b.stored.response_time_ms).unwrap_or(true) {
            best = Some((entry, decoded));
        }
    }
    Ok((best, any))
}

/// GET and HEAD: the cache path.
async fn cached(state: Arc<ProxyState>, parts: Parts, primary: String) -> Response<ProxyBody> {
    let req_cc = CacheControl::from_headers(&parts.headers);
    let is_head = parts.method == Method::HEAD;
    let mut rounds = 0;
    loop {
        rounds += 1;
        let collapse_allowed = rounds <= 3;
        let now = SystemTime::now();
        let (found, had_any) = match lookup_variant(&state, &primary, &parts.headers) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!("cache lookup for {primary} failed, forwarding: {e}");
                (None, false)
            }
        };
        if let Some((entry, decoded)) = found {
            let stored = &decoded.stored;
            if state.offline {
                let d = policy::decide(&parts.headers, &stored, now, &state.policy);
                let status = format!("hit; ttl={}; detail=offline", d.ttl);
                if d.stale {
                    Metrics::inc(&state.metrics.stale_served);
                }
                match serve_stored(&state, &parts, &primary, &entry, stored, Some(&decoded.headers), d.age, &status) {
                    Some(r) => return r,
                    None => continue,
                }
            }
            let d = policy::decide(&parts.headers, &stored, now, &state.policy);
            match d.reuse {
                Reuse::Serve => {
                    if d.stale {
                        Metrics::inc(&state.metrics.stale_served);
                    }
                    let status = format!("hit; ttl={}", d.ttl);
                    match serve_stored(&state, &parts, &primary, &entry, stored, Some(&decoded.headers), d.age, &status) {
                        Some(r) => return r,
                        None => continue,
                    }
                }
                Reuse::ServeStaleAndRevalidate => {
                    spawn_background_revalidation(&state, &parts, &primary, &entry, stored);
                    Metrics::inc(&state.metrics.stale_served);
                    let status = format!("hit; ttl={}; detail=stale-while-revalidate", d.ttl);
                    match serve_stored(&state, &parts, &primary, &entry, stored, Some(&decoded.headers), d.age, &status) {
                        Some(r) => return r,
                        None => continue,
                    }
                }
                Reuse::Revalidate => {
                    if req_cc.only_if_cached {
                        return error_response(
                            StatusCode::GATEWAY_TIMEOUT,
                            &format!("crawlcache: {primary} is stored but stale, and the request said only-if-cached"),
                            "fwd=stale; detail=only-if-cached",
                        );
                    }
                    if is_head {
                        return super::head::revalidate_with_head(&state, &parts, &primary, &entry, &stored).await;
                    }
                    if collapse_allowed {
                        match state.inflight.join(&primary) {
                            Role::Leader(lead) => return revalidate(&state, &parts, &primary, entry, stored.clone(), Some(lead)).await,
                            Role::Follower(rx) => {
                                Metrics::inc(&state.metrics.collapsed);
                                if collapse::wait(rx).await == Outcome::Stored {
                                    continue;
                                }
                            }
                        }
                    }
                    return revalidate(&state, &parts, &primary, entry, stored.clone(), None).await;
                }
            }
        }
        // Nothing stored that matches.
        if state.offline {
            return error_response(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("crawlcache is offline and {primary} was never stored (no origin is contacted in offline mode)"),
                "fwd=miss; detail=offline",
            );
        }
        if req_cc.only_if_cached {
            return error_response(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("crawlcache: {primary} is not stored, and the request said only-if-cached"),
                "fwd=miss; detail=only-if-cached",
            );
        }
        let fwd = if had_any { "vary-miss" } else { "uri-miss" };
        if is_head && collapse_allowed {
            // A HEAD never leads a fetch (its response has no body to
            // store), but it can wait for a GET that is being stored.
            if let Some(rx) = state.inflight.follow(&primary) {
                Metrics::inc(&state.metrics.collapsed);
                if collapse::wait(rx).await == Outcome::Stored {
                    continue;
                }
            }
        }
        if is_head || !collapse_allowed {
            return fetch(&state, &parts, &primary, None, fwd, None).await;
        }
        match state.inflight.join(&primary) {
            Role::Leader(lead) => return fetch(&state, &parts, &primary, Some(lead), fwd, None).await,
            Role::Follower(rx) => {
                Metrics::inc(&state.metrics.collapsed);
                if collapse::wait(rx).await == Outcome::Stored {
                    continue;
                }
                return fetch(&state, &parts, &primary, None, fwd, None).await;
            }
        }
    }
}

/// Serves a stored response (`prebuilt`: its header map, when already
/// decoded); `None` if its body has vanished (the entry is
/// then dropped and the caller looks again).
fn serve_stored(
    state: &ProxyState,
    parts: &Parts,
    primary: &str,
    entry: &Entry,
    stored: &StoredResponse,
    prebuilt: Option<&HeaderMap>,
    age: u64,
    cache_status: &str,
) -> Option<Response<ProxyBody>> {
    let is_head = parts.method == Method::HEAD;
    let mut headers = match prebuilt {
        Some(h) => h.clone(),
        None => stored.header_map(),
    };
    headers.insert(http::header::AGE, HeaderValue::from(age));
    add_via(&mut headers);
    set_cache_status(&mut headers, cache_status);
    state.store.touch(primary, &entry.secondary_key);
    Metrics::inc(&state.metrics.hits);

    if (200..300).contains(&stored.status) && policy::client_not_modified(&parts.headers, stored) {
        return Some(not_modified_response(&headers));
    }
    let body = if is_head {
        ProxyBody::empty()
    } else {
        match &entry.body {
            Some(b) => match state.store.open_body(&b.sha256) {
                Ok(file) => {
                    headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(b.len));
                    Metrics::add(&state.metrics.bytes_from_cache, b.len);
                    ProxyBody::File { file, remaining: b.len }
                }
                Err(e) => {
                    tracing::warn!("stored body for {primary} is unusable ({e}); dropping the entry");
                    let _ = state.store.remove_variant(primary, &entry.secondary_key);
                    return None;
                }
            },
            None => {
                headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(0u64));
                ProxyBody::empty()
            }
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    *resp.headers_mut() = headers;
    Some(super::range::narrow(parts, stored, resp))
}

/// A 304 built from a stored response's fields (RFC 9110 section 15.4.5).
fn not_modified_response(stored_headers: &HeaderMap) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::empty());
    *resp.status_mut() = StatusCode::NOT_MODIFIED;
    let h = resp.headers_mut();
    for name in ["cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified", "age", "via", "cache-status"] {
        for v in stored_headers.get_all(name) {
            if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
                h.append(n, v.clone());
            }
        }
    }
    resp
}

/// The request to send upstream for a client's request head: same method,
/// target and fields, minus hop-by-hop fields, plus `Via`.
fn upstream_request(parts: &Parts, body: ProxyBody) -> Request<ProxyBody> {
    let mut headers = parts.headers.clone();
    remove_hop_by_hop(&mut headers);
    add_via(&mut headers);
    let mut req = Request::new(body);
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = parts.uri.clone();
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    req
}

/// The origin failed: an error response naming the cause.
fn upstream_failure(state: &ProxyState, e: &UpstreamError, fwd: &str) -> Response<ProxyBody> {
    Metrics::inc(&state.metrics.upstream_errors);
    tracing::info!("upstream error: {e}");
    error_response(e.status(), &format!("crawlcache: {e}"), &format!("fwd={fwd}; detail=upstream-error"))
}

/// Forwards the request and streams the response back, storing it when it
/// is storable. `lead` is released once the outcome is known.
async fn fetch(
    state: &Arc<ProxyState>,
    parts: &Parts,
    primary: &str,
    lead: Option<Lead>,
    fwd: &str,
    replaces: Option<&Entry>,
) -> Response<ProxyBody> {
    Metrics::inc(&state.metrics.misses);
    robots_gate::pace(state, parts.extensions.get()).await;
    let request_time = SystemTime::now();
    let req = upstream_request(parts, ProxyBody::empty());
    match state.upstream.send(req).await {
        Err(e) => upstream_failure(state, &e, fwd),
        Ok(resp) => respond_with_upstream(state, parts, primary, resp, request_time, lead, fwd, replaces),
    }
}

/// Turns an upstream response into the client's response, teeing the body
/// into the store when the response may be stored (RFC 9111 section 3).
#[allow(clippy::too_many_arguments)]
fn respond_with_upstream(
    state: &Arc<ProxyState>,
    parts: &Parts,
    primary: &str,
    resp: Response<Incoming>,
    request_time: SystemTime,
    lead: Option<Lead>,
    fwd: &str,
    replaces: Option<&Entry>,
) -> Response<ProxyBody> {
    let response_time = SystemTime::now();
    let (mut rparts, body) = resp.into_parts();
    let status = rparts.status.as_u16();
    let content_length: Option<u64> = rparts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());

    let mut not_stored: Option<String> = None;
    let secondary = key::secondary_key(&rparts.headers, &parts.headers);
    if parts.method != Method::GET {
        not_stored = Some("method".into());
    } else if let Err(why) = policy::storable(&parts.method, &parts.headers, status, &rparts.headers, &state.policy) {
        not_stored = Some(format!("{why:?}"));
    } else if secondary.is_none() {
        not_stored = Some("vary-star".into());
    } else if content_length.map(|l| l > state.config.cache.max_object_size).unwrap_or(false) {
        not_stored = Some("too-large".into());
    }
    // A successful full response replaces the stored variant it matches
    // even when it is not itself storable (RFC 9111 section 4.3.3 wants the
    // newest response used); an error status keeps the old one.
    if not_stored.is_some() && (200..400).contains(&status) {
        if let Some(old) = replaces {
            let _ = state.store.remove_variant(primary, &old.secondary_key);
        }
    }

    let origin_headers = rparts.headers.clone();
    // The client talks HTTP/1.1 with the proxy, whatever the origin spoke.
    rparts.version = Version::HTTP_11;
    remove_hop_by_hop(&mut rparts.headers);
    add_via(&mut rparts.headers);

    let writer = if not_stored.is_none() {
        match state.store.begin_body() {
            Ok(w) => Some(w),
            Err(e) => {
                Metrics::inc(&state.metrics.store_errors);
                tracing::warn!("not storing {primary}: {e}");
                not_stored = Some("store-error".into());
                None
            }
        }
    } else {
        None
    };

    match (writer, secondary) {
        (Some(writer), Some(secondary_key)) => {
            set_cache_status(&mut rparts.headers, &format!("fwd={fwd}; fwd-status={status}; stored"));
            let stored = StoredResponse {
                status,
                headers: policy::headers_to_store(&origin_headers, &state.policy),
                request_time_ms: to_millis(request_time),
                response_time_ms: to_millis(response_time),
                url: primary.to_string(),
                vary_request: key::nominated_fields(&origin_headers, &parts.headers),
            };
            let (tx, rx) = mpsc::channel(8);
            let job = TeeJob { state: state.clone(), primary: primary.to_string(), secondary_key, stored, lead };
            tokio::spawn(tee(job, body, writer, tx));
            Response::from_parts(rparts, ProxyBody::Channel { rx, len: content_length })
        }
        _ => {
            let detail = not_stored.unwrap_or_default();
            set_cache_status(&mut rparts.headers, &format!("fwd={fwd}; fwd-status={status}; detail={}", sf_token(&detail)));
            if let Some(l) = lead {
                l.finish(Outcome::NotShared);
            }
            Response::from_parts(rparts, ProxyBody::Upstream(body))
        }
    }
}

/// Makes `s` usable as an RFC 8941 token for `detail=`.
fn sf_token(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' { c.to_ascii_lowercase() } else { '-' })
        .collect();
    if t.is_empty() || !t.as_bytes()[0].is_ascii_alphabetic() {
        format!("x{t}")
    } else {
        t
    }
}

/// What the tee task needs to publish a body once complete.
struct TeeJob {
    state: Arc<ProxyState>,
    primary: String,
    secondary_key: Vec<u8>,
    stored: StoredResponse,
    lead: Option<Lead>,
}

/// Copies the upstream body to the client and into the store. The entry is
/// published only when the body arrived complete (C09); a write error (C18)
/// abandons the store but not the client's transfer. If the client goes
/// away the download continues into the store, bounded by
/// `cache.max_object_size`.
async fn tee(job: TeeJob, mut body: Incoming, writer: BodyWriter, tx: mpsc::Sender<Result<Bytes, std::io::Error>>) {
    use http_body_util::BodyExt;
    let state = job.state.clone();
    let _task = state.tasks.enter();
    let max = state.config.cache.max_object_size;
    let idle = state.config.upstream.response_timeout;
    let mut writer = Some(writer);
    let mut client_open = true;
    let complete = loop {
        let frame = match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => {
                let msg = format!("origin stalled for {} s in the middle of the body", idle.as_secs_f64());
                if client_open {
                    let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, msg))).await;
                }
                break false;
            }
            Ok(None) => break true,
            Ok(Some(Err(e))) => {
                if client_open {
                    let _ = tx.send(Err(std::io::Error::other(format!("origin body failed: {e}")))).await;
                }
                break false;
            }
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else { continue };
        if let Some(w) = writer.as_mut() {
            let result = if w.len() + data.len() as u64 > max {
                tracing::info!("{} is larger than cache.max_object_size; not storing it", job.primary);
                Err(None)
            } else {
                w.write(&data).map_err(Some)
            };
            if let Err(e) = result {
                if let Some(e) = e {
                    Metrics::inc(&state.metrics.store_errors);
                    tracing::warn!("storing {} failed, passing it through instead: {e}", job.primary);
                }
                writer = None;
            }
        }
        if client_open && tx.send(Ok(data)).await.is_err() {
            client_open = false;
        }
        if !client_open && writer.is_none() {
            break false;
        }
    };
    drop(tx);
    let outcome = if !complete {
        Metrics::inc(&state.metrics.incomplete_bodies);
        tracing::info!("body of {} ended early; nothing stored", job.primary);
        Outcome::NotShared
    } else if let Some(w) = writer {
        publish(&state, &job, w).await
    } else {
        Outcome::NotShared
    };
    if let Some(lead) = job.lead {
        lead.finish(outcome);
    }
}

/// Syncs and renames the body, then records the entry.
async fn publish(state: &Arc<ProxyState>, job: &TeeJob, writer: BodyWriter) -> Outcome {
    let committed = match tokio::task::spawn_blocking(move || writer.finish()).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            Metrics::inc(&state.metrics.store_errors);
            tracing::warn!("storing {} failed: {e}", job.primary);
            return Outcome::NotShared;
        }
        Err(e) => {
            tracing::warn!("storing {} failed: {e}", job.primary);
            return Outcome::NotShared;
        }
    };
    let (st, sent_ms) = (state.clone(), job.stored.request_time_ms);
    let (primary, sk, meta) = (job.primary.clone(), job.secondary_key.clone(), job.stored.to_bytes());
    let inserted = tokio::task::spawn_blocking(move || {
        // Not when the URL was invalidated after the request was sent (RFC 9111 section 4.4).
        let r = st.invalidations.publish(&primary, sent_ms, || st.store.insert(&primary, &sk, &meta, Some(&committed)));
        if !matches!(r, Some(Ok(_))) {
            // Release the finished file now rather than at close.
            st.store.discard_body(&committed);
        }
        r.ok_or(())
    })
    .await;
    match inserted {
        Ok(Err(())) => Outcome::NotShared,
        Ok(Ok(Ok(_evicted))) => {
            Metrics::inc(&state.metrics.stored);
            Outcome::Stored
        }
        Ok(Ok(Err(e))) => {
            Metrics::inc(&state.metrics.store_errors);
            tracing::warn!("indexing {} failed: {e}", job.primary);
            Outcome::NotShared
        }
        Err(e) => {
            tracing::warn!("indexing {} failed: {e}", job.primary);
            Outcome::NotShared
        }
    }
}

/// Validates a stored response with the origin (RFC 9111 section 4.3) and
/// answers the client: a 304 freshens the stored response (section 4.3.4);
/// a full response replaces it; an error may let the stale one be served
/// (RFC 5861 section 4, RFC 9111 section 4.2.4).
async fn revalidate(
    state: &Arc<ProxyState>,
    parts: &Parts,
    primary: &str,
    entry: Entry,
    stored: StoredResponse,
    lead: Option<Lead>,
) -> Response<ProxyBody> {
    Metrics::inc(&state.metrics.revalidations);
    robots_gate::pace(state, parts.extensions.get()).await;
    let request_time = SystemTime::now();
    let mut req = upstream_request(parts, ProxyBody::empty());
    *req.method_mut() = Method::GET;
    let h = req.headers_mut();
    for n in ["if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range"] {
        h.remove(n);
    }
    for (n, v) in policy::conditional_headers(&stored) {
        h.insert(n, v);
    }
    let result = state.upstream.send(req).await;
    let now = SystemTime::now();
    match result {
        Err(e) => {
            if policy::may_serve_stale_on_error(&parts.headers, &stored, error_kind(&e), now, &state.policy) {
                return serve_stale_on_error(state, parts, primary, &entry, &stored, now, &format!("detail={}", if e.unreachable() { "disconnected" } else { "stale-if-error" }))
                    .unwrap_or_else(|| upstream_failure(state, &e, "stale"));
            }
            let mut r = upstream_failure(state, &e, "stale");
            if e.unreachable() {
                *r.status_mut() = StatusCode::GATEWAY_TIMEOUT;
            }
            r
        }
        Ok(resp) if resp.status() == StatusCode::NOT_MODIFIED => {
            if !policy::not_modified_matches(&stored, resp.headers()) {
                drop(resp);
                return fetch(state, parts, primary, lead, "stale", Some(&entry)).await;
            }
            Metrics::inc(&state.metrics.revalidated_not_modified);
            let fresh = policy::freshen(&stored, resp.headers(), request_time, now, &state.policy);
            match state.store.update_meta(primary, &entry.secondary_key, &fresh.to_bytes()) {
                Ok(_) => {}
                Err(e) => tracing::warn!("freshening {primary} failed: {e}"),
            }
            if let Some(l) = lead {
                l.finish(Outcome::Stored);
            }
            let age = policy::current_age(&fresh, now).as_secs();
            let ttl = policy::freshness_lifetime(&fresh, &state.policy).as_secs() as i64 - age as i64;
            serve_stored(state, parts, primary, &entry, &fresh, None, age, &format!("fwd=stale; fwd-status=304; ttl={ttl}"))
                .unwrap_or_else(|| error_response(StatusCode::BAD_GATEWAY, "crawlcache: stored body vanished during revalidation", "fwd=stale"))
        }
        Ok(resp) => {
            let status = resp.status().as_u16();
            if matches!(status, 500 | 502 | 503 | 504)
                && policy::may_serve_stale_on_error(&parts.headers, &stored, OriginError::Status(status), now, &state.policy)
            {
                drop(resp);
                if let Some(r) = serve_stale_on_error(state, parts, primary, &entry, &stored, now, &format!("fwd-status={status}; detail=stale-if-error")) {
                    return r;
                }
                return error_response(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY), "crawlcache: origin error", "fwd=stale");
            }
            respond_with_upstream(state, parts, primary, resp, request_time, lead, "stale", Some(&entry))
        }
    }
}

fn error_kind(e: &UpstreamError) -> OriginError {
    if e.unreachable() {
        OriginError::Unreachable
    } else {
        OriginError::Status(502)
    }
}

fn serve_stale_on_error(
    state: &ProxyState,
    parts: &Parts,
    primary: &str,
    entry: &Entry,
    stored: &StoredResponse,
    now: SystemTime,
    detail: &str,
) -> Option<Response<ProxyBody>> {
    Metrics::inc(&state.metrics.stale_served);
    let age = policy::current_age(stored, now).as_secs();
    let ttl = policy::freshness_lifetime(stored, &state.policy).as_secs() as i64 - age as i64;
    serve_stored(state, parts, primary, entry, stored, None, age, &format!("hit; ttl={ttl}; fwd=stale; {detail}"))
}

/// stale-while-revalidate: one background revalidation per key.
fn spawn_background_revalidation(state: &Arc<ProxyState>, parts: &Parts, primary: &str, entry: &Entry, stored: &StoredResponse) {
    let Role::Leader(lead) = state.inflight.join(primary) else { return };
    let state = state.clone();
    let mut parts_clone = Request::new(());
    *parts_clone.method_mut() = Method::GET;
    *parts_clone.uri_mut() = parts.uri.clone();
    *parts_clone.headers_mut() = parts.headers.clone();
    let (bg_parts, ()) = parts_clone.into_parts();
    let (primary, entry, stored) = (primary.to_string(), entry.clone(), stored.clone());
    tokio::spawn(async move {
        let _task = state.tasks.enter();
        let resp = revalidate(&state, &bg_parts, &primary, entry, stored, Some(lead)).await;
        // Dropping the body lets a storing tee finish on its own.
        drop(resp);
    });
}

/// Methods other than GET and HEAD: forwarded with their body; a
/// successful unsafe request invalidates what it names (RFC 9111 section 4.4).
async fn passthrough(state: Arc<ProxyState>, req: Request<Incoming>, primary: String) -> Response<ProxyBody> {
    Metrics::inc(&state.metrics.passthrough);
    if state.offline {
        return error_response(
            StatusCode::GATEWAY_TIMEOUT,
            &format!("crawlcache is offline: {} {primary} cannot be forwarded", req.method()),
            "fwd=method; detail=offline",
        );
    }
    let (parts, body) = req.into_parts();
    robots_gate::pace(&state, parts.extensions.get()).await;
    let up = upstream_request(&parts, ProxyBody::Upstream(body));
    match state.upstream.send(up).await {
        Err(e) => upstream_failure(&state, &e, "method"),
        Ok(resp) => {
            let status = resp.status().as_u16();
            for target in policy::invalidation_targets(&parts.method, status, &primary, resp.headers()) {
                match state.invalidations.invalidate(&target, to_millis(SystemTime::now()), || state.store.remove(&target)) {
                    Ok(n) if n > 0 => tracing::debug!("invalidated {target} ({n} variants) after {} {primary}", parts.method),
                    Ok(_) => {}
                    Err(e) => tracing::warn!("invalidating {target} failed: {e}"),
                }
            }
            let (mut rparts, body) = resp.into_parts();
            rparts.version = Version::HTTP_11;
            remove_hop_by_hop(&mut rparts.headers);
            add_via(&mut rparts.headers);
            set_cache_status(&mut rparts.headers, &format!("fwd=method; fwd-status={status}"));
            Response::from_parts(rparts, ProxyBody::Upstream(body))
        }
    }
}
