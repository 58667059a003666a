//! The one place a request's path through the proxy is decided.
//!
//! [`route`] looks at the request's [`Exchange`] (and, for GET and HEAD,
//! what the store holds) and returns a [`Route`]; [`handle`] hands the
//! request to the stage that carries the route out, in one `match`. The
//! table below is [`route`], in order:
//!
//! ```text
//! CONNECT                                   -> Tunnel
//! origin-form                               -> SelfEndpoint (admin; loopback clients)
//! scheme not http/https, bad target         -> Refuse 400
//! Transfer-Encoding other than chunked      -> Refuse 501 (C51)
//! our own Via (a loop)                      -> Refuse 508
//! Host beside a tunnel's other authority    -> Refuse 421
//! target on the listener's port, unresolved -> ResolveTarget
//! target is this proxy, spelled as the listen
//!   address or localhost, loopback client   -> SelfEndpoint (what curl sends with http_proxy set)
//! target is this proxy, any other case      -> Refuse 508 (C48)
//! header fields > 256 KiB                   -> Refuse 431
//! TRACE                                     -> RefuseTrace (405, Allow; never forwarded)
//! OPTIONS, Max-Forwards: 0                  -> AnswerOptions (200, Allow; offline too)
//! OPTIONS, Max-Forwards not 1*DIGIT         -> Refuse 400
//! Upgrade: websocket                        -> Upgrade (relayed after the 101;
//!                                              offline: Refuse 504) (C50)
//! robots not checked yet                    -> CheckRobots
//! robots refuses, or the client's own
//!   /robots.txt                             -> RobotsAnswer (403 / 503 / snapshot)
//! offline, another method                   -> ReplayWithBody (the record for its body hash, else 504)
//! offline, GET/HEAD with content            -> Refuse 504
//! other methods                             -> PassThrough (fwd=method; invalidates;
//!                                              OPTIONS: Max-Forwards - 1, and
//!                                              `OPTIONS http://host` goes out as `OPTIONS *`)
//! GET/HEAD with content                     -> PassThrough (fwd=request; forwarded whole, never stored)
//! GET/HEAD, store not looked up yet         -> LookUp
//! stored and offline                        -> ServeStored (detail=offline)
//! stored, reusable (fresh, max-stale)       -> ServeStored (detail=fleet when the
//!                                              fleet tier just filled it)
//! stored, within stale-while-revalidate     -> ServeStaleRevalidate
//! stored, must be validated:
//!   only-if-cached                          -> Refuse 504
//!   HEAD                                    -> ValidateWithHead (RFC 9111 section 4.3.5)
//!   GET                                     -> Revalidate (collapsed)
//! nothing stored:
//!   offline, recorded (the variant the
//!   request selects)                        -> ServeRecorded (key=RECORD KEY; detail=offline)
//!   offline, only-if-cached                 -> Refuse 504 (naming the URL and the keys)
//!   GET                                     -> Forward (collapsed: leads or waits;
//!                                              in fleet mode the fleet tier first)
//!   HEAD                                    -> Forward (waits for a GET in flight, never leads)
//! ```
//!
//! A stage answers [`Step::Done`] with the response, or [`Step::LookAgain`]
//! when it waited for another request's fetch that stored something: the
//! store is then looked up again (at most [`MAX_COLLAPSED_LOOKUPS`] times
//! with collapsing; after that the request goes to the origin on its own).

use super::exchange::{Exchange, Target, MAX_HEADER_BYTES};
use super::lookup::{look_up_variant, Found, Lookup};
use super::robots_gate::RobotsAction;
use super::stages::forward::{Collapse, MAX_COLLAPSED_LOOKUPS};
use super::stages::{self, Step};
use super::state::ProxyState;
use crate::wire::body::{AccessFields, AccessLine, AuditGuard, ProxyBody};
use crate::wire::error::error_response;
use crate::wire::interim::InterimSender;
use crawlcache_policy::cache::{Decision, PolicyConfig, Reuse};
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use http::{Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

/// Where a request goes.
pub enum Route {
    /// Origin-form: crawlcache's own endpoints.
    SelfEndpoint,
    /// `CONNECT`: intercepted or blind tunnel.
    Tunnel,
    /// A WebSocket upgrade (`Upgrade: websocket`): relayed to the origin,
    /// bytes copied both ways after its `101` (RFC 9110 section 7.8).
    Upgrade,
    /// Answered by crawlcache with an error naming the cause.
    Refuse {
        /// The status to send.
        status: StatusCode,
        /// The text to send.
        message: String,
        /// The outcome.
        cache_status: CacheStatus,
    },
    /// `TRACE`: refused with 405 and `Allow`, never forwarded (RFC 9110
    /// section 7.6.2 and 9.3.8; see [`stages::options_trace`]).
    RefuseTrace,
    /// `OPTIONS` with `Max-Forwards: 0`: answered by crawlcache as the
    /// final recipient, 200 with `Allow` (RFC 9110 section 7.6.2).
    AnswerOptions,
    /// The robots verdict is needed first.
    CheckRobots,
    /// robots enforcement refuses, or a client's own `/robots.txt`.
    RobotsAnswer,
    /// Forwarded with its body and passed through, never stored: a method
    /// the cache does not answer (`fwd=method`, then invalidation), or a
    /// GET/HEAD with content (`fwd=request`).
    PassThrough {
        /// `method` or `request`.
        fwd: Fwd,
    },
    /// The target is on the listener's port: resolve whether it names this
    /// proxy.
    ResolveTarget,
    /// The store must be looked up first.
    LookUp,
    /// Offline: a recorded response answers (SPEC section 6).
    ServeRecorded {
        /// The record.
        found: Found,
        /// Its record key.
        key: String,
    },
    /// Offline, a method other than GET and HEAD: the request body is
    /// hashed and the record for it answers, else 504.
    ReplayWithBody,
    /// A stored response answers as it is.
    ServeStored {
        /// The stored variant.
        found: Found,
        /// The policy's reuse decision.
        decision: Decision,
        /// Why, when not plainly fresh (`offline`).
        detail: Option<Detail>,
    },
    /// Served stale now; one background revalidation (RFC 5861 section 3).
    ServeStaleRevalidate {
        /// The stored variant.
        found: Found,
        /// The policy's reuse decision.
        decision: Decision,
    },
    /// A conditional GET to the origin (RFC 9111 section 4.3).
    Revalidate {
        /// The stored variant.
        found: Found,
        /// Whether to share the validation with concurrent requests.
        collapse: bool,
        /// `stale`, or `request` when the stored response is fresh but the
        /// request's directives did not allow its use (RFC 9211 section 2.2).
        fwd: Fwd,
    },
    /// The client's HEAD validates the stored GET (RFC 9111 section 4.3.5).
    ValidateWithHead {
        /// The stored variant.
        found: Found,
        /// As for [`Route::Revalidate`].
        fwd: Fwd,
    },
    /// Nothing usable stored: the origin is asked.
    Forward {
        /// `uri-miss` or `vary-miss`.
        fwd: Fwd,
        /// How the forward collapses with concurrent ones.
        collapse: Collapse,
    },
}

/// What routing needs besides the exchange.
pub struct RouteContext<'a> {
    /// Never contact an origin.
    pub offline: bool,
    /// The proxy's listening address (loop detection).
    pub local_addr: SocketAddr,
    /// The cache policy.
    pub policy: &'a PolicyConfig,
    /// The time to decide at.
    pub now: SystemTime,
    /// Per-URL policy rules (`[[cache.rules]]`).
    pub rules: &'a [crawlcache_policy::cache_rules::PolicyRule],
}

/// The route for `ex`, given what the store holds (`None`: not looked up).
pub fn route(ex: &Exchange, lookup: Option<&Lookup>, ctx: &RouteContext<'_>) -> Route {
    let uri = &ex.parts.uri;
    match &ex.target {
        Target::Connect => return Route::Tunnel,
        Target::SelfEndpoint => return Route::SelfEndpoint,
        Target::UnsupportedScheme => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                "crawlcache: cannot proxy {uri}: only http:// and https:// targets are supported"
            ),
                Detail::Scheme,
            )
        }
        Target::Unusable => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("crawlcache: cannot use target URI {uri}"),
                Detail::BadTarget,
            )
        }
        Target::Absolute { .. } => {}
    }
    if let Some(codings) = &ex.transfer_codings {
        // RFC 9112 section 6.1: a server that does not understand a
        // transfer coding of a request SHOULD answer 501; nothing is sent.
        return Route::Refuse {
            status: StatusCode::NOT_IMPLEMENTED,
            message: format!(
                "crawlcache: the request applies Transfer-Encoding: {codings}; only chunked is understood (RFC 9112 section 6.1), so nothing was forwarded"
            ),
            cache_status: CacheStatus::forward(Fwd::Bypass).with_detail(Detail::TransferCoding),
        };
    }
    if ex.via_loop {
        return refuse(StatusCode::LOOP_DETECTED, format!("crawlcache: refusing a request to {uri}: it already passed through this proxy (Via)"), Detail::Loop);
    }
    if let Some(host) = &ex.misdirected {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            format!("crawlcache: Host {host} inside a tunnel to {}: this tunnel is for that authority only", uri.authority().map(|a| a.as_str()).unwrap_or("")),
            Detail::Misdirected,
        );
    }
    match ex.names_self {
        None if target_port(uri) == ctx.local_addr.port() => return Route::ResolveTarget,
        Some(true)
            if crate::wire::net::is_loopback(ex.peer.ip())
                && is_listen_spelling(uri, ctx.local_addr) =>
        {
            return Route::SelfEndpoint
        }
        Some(true) => {
            return refuse(
                StatusCode::LOOP_DETECTED,
                format!("crawlcache: refusing a request to {uri}: it names this proxy itself"),
                Detail::Loop,
            )
        }
        _ => {}
    }
    if ex.header_bytes > MAX_HEADER_BYTES {
        return refuse(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("crawlcache: the request's header fields total {} bytes; the limit is {MAX_HEADER_BYTES}", ex.header_bytes),
            Detail::HeaderTooLarge,
        );
    }
    if let Some(hop) = hop_duty(ex) {
        return hop;
    }
    if ex.upgrade {
        if ctx.offline {
            return Route::Refuse {
                status: StatusCode::GATEWAY_TIMEOUT,
                message: format!(
                    "crawlcache is offline: the WebSocket upgrade to {uri} cannot reach the origin"
                ),
                cache_status: CacheStatus::forward(Fwd::Bypass).with_detail(Detail::Offline),
            };
        }
        return Route::Upgrade;
    }
    if !ex.robots_checked {
        return Route::CheckRobots;
    }
    if ex.robots.as_ref().is_some_and(|g| !matches!(g.action, RobotsAction::Forward)) {
        return Route::RobotsAnswer;
    }
    let primary = ex.primary();
    if !ex.is_cacheable_method() || ex.has_body {
        let fwd = if ex.is_cacheable_method() { Fwd::Request } else { Fwd::Method };
        if ctx.offline && fwd == Fwd::Method {
            return Route::ReplayWithBody;
        }
        if ctx.offline {
            return Route::Refuse {
                status: StatusCode::GATEWAY_TIMEOUT,
                message: format!(
                    "crawlcache is offline: {} {primary} cannot be forwarded",
                    ex.method()
                ),
                cache_status: CacheStatus::forward(fwd).with_detail(Detail::Offline),
            };
        }
        return Route::PassThrough { fwd };
    }
    let Some(lookup) = lookup else { return Route::LookUp };
    let collapse = ex.lookups <= MAX_COLLAPSED_LOOKUPS;
    if let Some(found) = &lookup.found {
        let decision = crawlcache_policy::cache_rules::reuse_decision(
            ex.primary(),
            &ex.request_cc,
            found.decoded.freshness(ctx.policy),
            ctx.now,
            ctx.policy,
            ctx.rules,
        );
        if ctx.offline {
            return Route::ServeStored {
                found: found.clone(),
                decision,
                detail: Some(Detail::Offline),
            };
        }
        return match decision.reuse {
            Reuse::Serve => Route::ServeStored { found: found.clone(), decision, detail: ex.from_fleet.then_some(Detail::Fleet) },
            Reuse::ServeStaleAndRevalidate => Route::ServeStaleRevalidate { found: found.clone(), decision },
            Reuse::Revalidate if ex.request_cc.only_if_cached => Route::Refuse {
                status: StatusCode::GATEWAY_TIMEOUT,
                message: format!("crawlcache: {primary} is stored but stale, and the request said only-if-cached"),
                cache_status: CacheStatus::forward(Fwd::Stale).with_detail(Detail::OnlyIfCached),
            },
            Reuse::Revalidate if ex.is_head() => Route::ValidateWithHead { found: found.clone(), fwd: validation_fwd(ex, found, &decision, ctx) },
            Reuse::Revalidate => Route::Revalidate { found: found.clone(), collapse, fwd: validation_fwd(ex, found, &decision, ctx) },
        };
    }
    if let (true, Some((key, found))) = (ctx.offline, &lookup.recorded) {
        return Route::ServeRecorded { found: found.clone(), key: key.clone() };
    }
    if ctx.offline {
        return Route::Refuse {
            status: StatusCode::GATEWAY_TIMEOUT,
            message: stages::replay::missing_message(
                &format!("{} {primary}", ex.method()),
                &record_keys(ex),
                lookup.missed_variant.as_deref(),
            ),
            cache_status: CacheStatus::forward(Fwd::Miss).with_detail(Detail::Offline),
        };
    }
    if ex.request_cc.only_if_cached {
        return Route::Refuse {
            status: StatusCode::GATEWAY_TIMEOUT,
            message: format!(
                "crawlcache: {primary} is not stored, and the request said only-if-cached"
            ),
            cache_status: CacheStatus::forward(Fwd::Miss).with_detail(Detail::OnlyIfCached),
        };
    }
    let fwd = if lookup.had_any { Fwd::VaryMiss } else { Fwd::UriMiss };
    let collapse = match (collapse, ex.is_head()) {
        (false, _) => Collapse::Alone,
        (true, true) => Collapse::WaitOnly,
        (true, false) => Collapse::LeadOrWait,
    };
    Route::Forward { fwd, collapse }
}

/// What crawlcache does itself with an OPTIONS or TRACE before anything
/// is forwarded (RFC 9110 section 7.6.2; see [`stages::options_trace`]):
/// `None` for anything it forwards.
fn hop_duty(ex: &Exchange) -> Option<Route> {
    use stages::options_trace::{max_forwards, MaxForwards};
    if ex.parts.method == http::Method::TRACE {
        return Some(Route::RefuseTrace);
    }
    if ex.parts.method != http::Method::OPTIONS {
        return None;
    }
    match max_forwards(&ex.parts.headers) {
        MaxForwards::Remaining(0) => Some(Route::AnswerOptions),
        MaxForwards::Invalid => Some(refuse(
            StatusCode::BAD_REQUEST,
            format!(
                "crawlcache: OPTIONS {} carries a Max-Forwards that is not one decimal number (RFC 9110 section 7.6.2), so it cannot be updated; nothing was forwarded",
                ex.primary()
            ),
            Detail::MaxForwards,
        )),
        _ => None,
    }
}

/// The record keys an offline GET or HEAD is answered from, in order: a
/// HEAD's own record, then the GET's.
fn record_keys(ex: &Exchange) -> Vec<String> {
    let get = crawlcache_policy::store_key::RecordKey::get(ex.primary()).primary();
    if ex.is_head() {
        vec![
            crawlcache_policy::store_key::RecordKey::new(&http::Method::HEAD, ex.primary(), None)
                .primary(),
            get,
        ]
    } else {
        vec![get]
    }
}

fn refuse(status: StatusCode, message: String, detail: Detail) -> Route {
    Route::Refuse {
        status,
        message,
        cache_status: CacheStatus::forward(Fwd::Bypass).with_detail(detail),
    }
}

/// True when `uri`'s host is the listening address as configured or
/// printed at start (`127.0.0.1`, `[::1]`), or `localhost`: the spelling
/// curl uses when `http_proxy` points at the proxy. Any other spelling
/// that resolves to the proxy is a loop (C48).
/// The `fwd` of a validation: `request` when the stored response is fresh
/// and would have answered but for the request's own directives
/// (`no-cache`, `max-age=0`, `min-fresh`: RFC 9211 section 2.2), else
/// `stale`.
fn validation_fwd(
    ex: &Exchange,
    found: &Found,
    decision: &Decision,
    ctx: &RouteContext<'_>,
) -> Fwd {
    if decision.stale {
        return Fwd::Stale;
    }
    let plain = crawlcache_policy::cache::cache_control::CacheControl::default();
    let without = crawlcache_policy::cache_rules::reuse_decision(
        ex.primary(),
        &plain,
        found.decoded.freshness(ctx.policy),
        ctx.now,
        ctx.policy,
        ctx.rules,
    );
    if without.reuse == Reuse::Serve {
        Fwd::Request
    } else {
        Fwd::Stale
    }
}

fn is_listen_spelling(uri: &Uri, local_addr: SocketAddr) -> bool {
    let host = uri.host().unwrap_or("").trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host == local_addr.ip().to_string()
}

/// The port `uri` addresses (the scheme's default when none is given).
fn target_port(uri: &Uri) -> u16 {
    uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 })
}

/// Entry point for every request on a plain client connection.
/// `interim` relays the origin's 1xx responses to this client connection.
pub async fn handle(
    state: Arc<ProxyState>,
    mut req: Request<Incoming>,
    peer: SocketAddr,
    interim: InterimSender,
) -> Result<Response<ProxyBody>, Infallible> {
    mark_whole_server(&mut req, &interim);
    let mut ex = Exchange::read(req, peer);
    ex.apply_key_rules(&state.config.cache.key_rules);
    ex.interim = Some(interim);
    Ok(drive(state, ex).await)
}

/// Marks `req` as an OPTIONS about the whole server when its request line
/// had an empty path (RFC 9112 section 3.2.4), as the connection noted it.
pub(super) fn mark_whole_server(req: &mut Request<Incoming>, interim: &InterimSender) {
    if let Some(target) = stages::options_trace::whole_server_candidate(req) {
        if interim.take_whole_server(&target) {
            req.extensions_mut().insert(stages::options_trace::WholeServer);
        }
    }
}

/// Routes `ex` until a stage answers, then finishes the response.
pub(super) async fn drive(state: Arc<ProxyState>, mut ex: Exchange) -> Response<ProxyBody> {
    let mut lookup: Option<Lookup> = None;
    // Read again after every step that may have waited.
    let mut now = ex.arrived;
    loop {
        let ctx = RouteContext {
            offline: state.offline,
            local_addr: state.local_addr,
            policy: &state.policy,
            now,
            rules: &state.config.cache.rules,
        };
        let step = match route(&ex, lookup.as_ref(), &ctx) {
            Route::SelfEndpoint => {
                let Some(req) = ex.take_request() else {
                    return finish(state, ex, internal_error());
                };
                return (state.endpoints)(state.clone(), req, ex.peer).await;
            }
            Route::Tunnel => {
                let Some(req) = ex.take_request() else {
                    return finish(state, ex, internal_error());
                };
                return Box::pin(super::tunnel::connect(state.clone(), req, ex.peer)).await;
            }
            Route::Refuse { status, message, cache_status } => {
                ex.status = cache_status;
                Step::Done(error_response(status, &message, &ex.status))
            }
            Route::CheckRobots => {
                ex.robots = stages::robots::gate(&state, &ex).await;
                ex.robots_checked = true;
                now = SystemTime::now();
                continue;
            }
            Route::LookUp => {
                ex.lookups += 1;
                let found = look_up(&state, &ex);
                ex.looked_up = found.version;
                lookup = Some(found);
                continue;
            }
            Route::RefuseTrace => Step::Done(stages::options_trace::refuse_trace(&mut ex)),
            Route::AnswerOptions => Step::Done(stages::options_trace::answer_options(&mut ex)),
            Route::RobotsAnswer => Step::Done(stages::robots::answer(&mut ex)),
            Route::Upgrade => Step::Done(Box::pin(stages::upgrade::run(&state, &mut ex)).await),
            Route::ResolveTarget => {
                let (host, port) =
                    (ex.parts.uri.host().unwrap_or("").to_string(), target_port(&ex.parts.uri));
                ex.names_self = Some(
                    Box::pin(crate::wire::net::names_listener(&host, port, state.local_addr)).await,
                );
                now = SystemTime::now();
                continue;
            }
            Route::ServeRecorded { found, key } => {
                Step::Done(stages::replay::serve(&state, &mut ex, &found, &key))
            }
            Route::ReplayWithBody => {
                Step::Done(Box::pin(stages::replay::with_body(&state, &mut ex)).await)
            }
            Route::PassThrough { fwd } => {
                Step::Done(Box::pin(stages::passthrough::run(&state, &mut ex, fwd)).await)
            }
            Route::ServeStored { found, decision, detail } => {
                ex.status = CacheStatus {
                    served_stale: decision.stale,
                    detail,
                    ..CacheStatus::hit(decision.ttl)
                };
                stages::serve::stored(
                    &state,
                    &mut ex,
                    &found,
                    &found.decoded.stored,
                    Some(&found.decoded.headers),
                    decision.age,
                )
            }
            Route::ServeStaleRevalidate { found, decision } => {
                stages::revalidate::spawn_background(&state, &ex, &found);
                ex.status = CacheStatus {
                    served_stale: true,
                    ..CacheStatus::hit(decision.ttl).with_detail(Detail::StaleWhileRevalidate)
                };
                stages::serve::stored(
                    &state,
                    &mut ex,
                    &found,
                    &found.decoded.stored,
                    Some(&found.decoded.headers),
                    decision.age,
                )
            }
            Route::Revalidate { found, collapse, fwd } => {
                Box::pin(stages::revalidate::run(&state, &mut ex, found, collapse, fwd)).await
            }
            Route::ValidateWithHead { found, fwd } => {
                Step::Done(Box::pin(stages::head::run(&state, &mut ex, &found, fwd)).await)
            }
            Route::Forward { fwd, collapse } => {
                Box::pin(stages::forward::run(&state, &mut ex, fwd, collapse)).await
            }
        };
        match step {
            Step::Done(response) => return finish(state, ex, response),
            Step::LookAgain => {
                lookup = None;
                now = SystemTime::now();
            }
        }
    }
}

fn internal_error() -> Response<ProxyBody> {
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        "crawlcache: request already consumed",
        &CacheStatus::default(),
    )
}

/// The stored variant that matches the request, if any (RFC 9111 section
/// 4.1: when several match, the most recent response is used). A lookup
/// that fails is logged and treated as nothing stored.
fn look_up(state: &ProxyState, ex: &Exchange) -> Lookup {
    let mut lookup = match look_up_variant(state, ex.primary(), &ex.parts.headers) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cache lookup for {} failed, forwarding: {e}", ex.primary());
            Lookup {
                found: None,
                had_any: false,
                recorded: None,
                missed_variant: None,
                version: None,
            }
        }
    };
    // Offline, a request the cache cannot answer is answered from the
    // record: the variant its own fields select, never another.
    if state.offline && lookup.found.is_none() {
        for k in record_keys(ex) {
            match stages::replay::find(state, &k, &ex.parts.headers) {
                stages::replay::Recorded::Found(f) => {
                    lookup.recorded = Some((k, f));
                    lookup.missed_variant = None;
                    break;
                }
                stages::replay::Recorded::OtherVariants(m) => {
                    lookup.missed_variant.get_or_insert(m);
                }
                stages::replay::Recorded::Nothing => {}
            }
        }
    }
    lookup
}

/// The access log's fields of `ex` answered with `response`.
fn access_fields(
    state: &ProxyState,
    ex: &Exchange,
    response: &Response<ProxyBody>,
    status: u16,
) -> Box<AccessFields> {
    let text = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let peer = ex.upstream_version.map(|_| {
        let target = ex.upstream_target();
        match state.upstream.parent_name(target) {
            Some(parent) => ("FIRSTUP_PARENT", parent.to_string()),
            None => ("HIER_DIRECT", target.host().unwrap_or("-").to_string()),
        }
    });
    Box::new(AccessFields {
        client: ex.peer,
        user_agent: ex.parts.headers.get(http::header::USER_AGENT).map(text),
        client_version: ex.parts.version,
        upstream_version: ex.upstream_version,
        squid_code: crate::access::format::squid_code(&ex.status, status),
        peer,
        content_type: response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .map(|v| crate::access::format::media_type(&text(v)).to_string()),
    })
}

/// Writes the outcome onto the response (`Cache-Status`, `Robots-Status`),
/// counts it, and attaches the audit line, written when the body is done.
fn finish(
    state: Arc<ProxyState>,
    mut ex: Exchange,
    mut response: Response<ProxyBody>,
) -> Response<ProxyBody> {
    if ex.parts.version == http::Version::HTTP_2 {
        crate::metrics::Metrics::inc(&state.metrics.client_h2_requests);
    }
    if ex.is_cacheable_method()
        && matches!(ex.target, Target::Absolute { .. })
        && ex.status.key.is_none()
    {
        ex.status.rule =
            crawlcache_policy::cache_rules::find(&state.config.cache.rules, ex.primary())
                .map(|r| r.label());
    }
    // Built once: the response field and the audit line carry the same value.
    let cache_status = ex.status.apply(response.headers_mut());
    let outcome = ex.status.outcome_for(response.status().as_u16());
    state.metrics.record(outcome);
    if !matches!(ex.target, Target::Absolute { .. }) {
        return response;
    }
    let check = ex.robots.take().map(|g| g.check);
    if let Some(c) = &check {
        stages::robots::annotate(&mut response, c);
    }
    let robots = match &check {
        Some(c) if c.verdict.allowed => "allowed",
        Some(_) => "disallowed",
        None => "-",
    };
    let mut record = crate::audit::AuditRecord::with_cache_status(
        ex.arrived,
        ex.method().as_str(),
        ex.url(),
        check,
        cache_status,
    );
    record.upstream_status = ex.status.fwd_status;
    let h2 = || Some(std::borrow::Cow::Borrowed("HTTP/2"));
    if ex.parts.version == http::Version::HTTP_2 {
        record.client_version = h2();
    }
    if ex.upstream_version == Some(http::Version::HTTP_2) {
        record.upstream_version = h2();
    }
    if ex.exact_url.is_some() {
        record.key = Some(ex.primary().to_string());
    }
    let status = response.status().as_u16();
    let access = AccessLine {
        level: AccessLine::level_if_enabled(state.config.server.access_log.level()),
        status,
        outcome,
        robots,
        fields: state.access_log.is_some().then(|| access_fields(&state, &ex, &response, status)),
    };
    let (parts, body) = response.into_parts();
    // The request's own reference to the state keeps the log until the line
    // is written (a clone of the log's would count on a line the serving
    // threads share).
    let guard = AuditGuard::new(state, record, access, ex.started);
    Response::from_parts(parts, ProxyBody::Audited(Box::new(body), guard))
}
