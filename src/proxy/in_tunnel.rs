//! Requests inside a CONNECT tunnel (see [`super::tunnel`]): an
//! origin-form target made absolute with the tunnel's scheme and
//! authority, an HTTP/2 request's `:authority` checked against the tunnel
//! and its `Host` (RFC 9113 section 8.3.1), then the same route as a
//! plain-HTTP request ([`super::route`]).

use super::exchange::Exchange;
use super::route::{drive, mark_whole_server};
use super::stages;
use super::state::ProxyState;
use crate::wire::body::ProxyBody;
use crate::wire::error::error_response;
use crate::wire::interim::InterimSender;
use crawlcache_policy::cache_status::{CacheStatus, Fwd};
use http::{Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

/// Requests inside a CONNECT tunnel to `authority`: decrypted from an
/// intercepted TLS tunnel (`scheme` "https") or sent in clear inside it
/// (`scheme` "http", C50). An origin-form target becomes
/// `scheme://authority/path` (`OPTIONS *` becomes `scheme://authority/`,
/// marked as about the whole server), then the request takes the same
/// route as a plain-HTTP one.
pub async fn handle_in_tunnel(
    state: Arc<ProxyState>,
    mut req: Request<Incoming>,
    authority: http::uri::Authority,
    scheme: &'static str,
    peer: SocketAddr,
    interim: Option<InterimSender>,
) -> Result<Response<ProxyBody>, Infallible> {
    let bypass = CacheStatus::forward(Fwd::Bypass);
    if let Some(interim) = &interim {
        mark_whole_server(&mut req, interim);
    }
    if req.version() == http::Version::HTTP_2 {
        if let Some(refusal) = h2_authority(&mut req, &authority, scheme) {
            return Ok(refusal);
        }
    }
    // OPTIONS for the whole server, asked in asterisk-form: it goes out as
    // `OPTIONS *` again (RFC 9112 section 3.2.4).
    let asterisk = req.method() == http::Method::OPTIONS && req.uri() == "*";
    if asterisk {
        req.extensions_mut().insert(stages::options_trace::WholeServer);
    }
    if req.uri().scheme().is_none() {
        // From parts already parsed: no text is copied or parsed again.
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(if scheme == "https" {
            http::uri::Scheme::HTTPS
        } else {
            http::uri::Scheme::HTTP
        });
        parts.authority = Some(authority.clone());
        parts.path_and_query = match req.uri().path_and_query() {
            Some(p) if !asterisk => Some(p.clone()),
            _ => Some(http::uri::PathAndQuery::from_static("/")),
        };
        match Uri::from_parts(parts) {
            Ok(u) => *req.uri_mut() = u,
            Err(e) => {
                return Ok(error_response(
                    StatusCode::BAD_REQUEST,
                    &format!("crawlcache: bad request target: {e}"),
                    &bypass,
                ))
            }
        }
    }
    if req.uri().authority() != Some(&authority) || req.uri().scheme_str() != Some(scheme) {
        return Ok(error_response(
            StatusCode::MISDIRECTED_REQUEST,
            &format!("crawlcache: this tunnel is for {scheme}://{authority} only"),
            &bypass,
        ));
    }
    let default_port = if scheme == "https" { 443 } else { 80 };
    let misdirected = misdirected_host(req.headers(), &authority, default_port);
    let mut ex = Exchange::read(req, peer);
    ex.apply_key_rules(&state.config.cache.key_rules);
    ex.misdirected = misdirected;
    ex.interim = interim;
    Ok(drive(state, ex).await)
}

/// Checks an HTTP/2 request's `:authority` inside a tunnel to `authority`
/// (the refusal to answer with, if any) and gives the request the
/// tunnel's authority, so that its cache key is
/// the one an HTTP/1.1 request to the same URL gets. Refused: a `Host`
/// field naming another host or port than `:authority` (400, RFC 9113
/// section 8.3.1), an `:authority` naming another host or port than the
/// tunnel (421, as an HTTP/1.1 request with another absolute target). The
/// scheme's default port may be left out on either side.
fn h2_authority(
    req: &mut Request<Incoming>,
    authority: &http::uri::Authority,
    scheme: &str,
) -> Option<Response<ProxyBody>> {
    let default_port = if scheme == "https" { 443 } else { 80 };
    let same = |a: &http::uri::Authority, b: &http::uri::Authority| {
        a.host().eq_ignore_ascii_case(b.host())
            && a.port_u16().unwrap_or(default_port) == b.port_u16().unwrap_or(default_port)
    };
    let named = req.uri().authority().cloned()?;
    let bypass = CacheStatus::forward(Fwd::Bypass);
    if let Some(h) = req.headers().get(http::header::HOST) {
        let parsed = h.to_str().ok().and_then(|h| h.parse::<http::uri::Authority>().ok());
        if !parsed.is_some_and(|h| same(&h, &named)) {
            return Some(error_response(
                StatusCode::BAD_REQUEST,
                &format!("crawlcache: the Host field and :authority ({named}) of this HTTP/2 request differ (RFC 9113 section 8.3.1)"),
                &bypass,
            ));
        }
    }
    if !same(&named, authority) || req.uri().scheme_str() != Some(scheme) {
        return Some(error_response(
            StatusCode::MISDIRECTED_REQUEST,
            &format!("crawlcache: this tunnel is for {scheme}://{authority} only"),
            &bypass,
        ));
    }
    let mut parts = req.uri().clone().into_parts();
    parts.authority = Some(authority.clone());
    if let Ok(uri) = Uri::from_parts(parts) {
        *req.uri_mut() = uri;
    }
    None
}

/// The `Host` of a request inside a tunnel to `authority`, when it names
/// another host or port (the scheme's `default_port` may be omitted).
fn misdirected_host(
    headers: &http::HeaderMap,
    authority: &http::uri::Authority,
    default_port: u16,
) -> Option<String> {
    let host = headers.get(http::header::HOST)?;
    if host.as_bytes().eq_ignore_ascii_case(authority.as_str().as_bytes()) {
        return None;
    }
    let text = String::from_utf8_lossy(host.as_bytes()).into_owned();
    let same = text.parse::<http::uri::Authority>().is_ok_and(|a| {
        a.host().eq_ignore_ascii_case(authority.host())
            && a.port_u16().unwrap_or(default_port) == authority.port_u16().unwrap_or(default_port)
    });
    (!same).then_some(text)
}
