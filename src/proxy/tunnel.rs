//! `CONNECT host:port` (RFC 9110 section 9.3.6).
//!
//! With `tls.intercept` (the default) the tunnel is terminated here: the
//! client's TLS is accepted with a leaf certificate for `host` signed by
//! crawlcache's local CA, and the HTTP/1.1 requests inside go through the
//! same cache path as plain HTTP, keyed as `https://host[:port]/...`.
//! Hosts matching `tls.bypass_hosts` (or every host, with interception off)
//! get a blind tunnel: bytes are copied both ways and nothing is cached.

use super::route::handle_in_tunnel;
use super::ProxyState;
use crate::wire::body::ProxyBody;
use crate::wire::cache_status::{CacheStatus, Detail, Fwd};
use crate::wire::error::error_response;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;

/// Answers a CONNECT request (200, then the tunnel runs in its own task),
/// or an error naming the cause.
pub async fn connect(state: Arc<ProxyState>, req: Request<Incoming>, peer: SocketAddr) -> Response<ProxyBody> {
    let bypass = CacheStatus::forward(Fwd::Bypass);
    let Some(authority) = req.uri().authority().cloned() else {
        return error_response(StatusCode::BAD_REQUEST, "crawlcache: CONNECT needs a host:port target", &bypass);
    };
    let port = authority.port_u16().unwrap_or(443);
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_string();
    if crate::wire::net::names_listener(&host, port, state.local_addr).await {
        return error_response(StatusCode::LOOP_DETECTED, "crawlcache: CONNECT to this proxy itself refused", &bypass.with_detail(Detail::Loop));
    }
    if state.config.tls.intercept && !state.config.tls.is_bypassed(&host) {
        return intercept(state, req, authority, host, peer);
    }
    if state.offline {
        return error_response(
            StatusCode::GATEWAY_TIMEOUT,
            &format!("crawlcache is offline: cannot open a tunnel to {authority}"),
            &bypass.with_detail(Detail::Offline),
        );
    }
    let timeout = state.config.upstream.connect_timeout;
    let upstream = match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host.as_str(), port))).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return error_response(StatusCode::BAD_GATEWAY, &format!("crawlcache: could not connect to {authority}: {e}"), &bypass)
        }
        Err(_) => {
            return error_response(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("crawlcache: connecting to {authority} timed out after {} s", timeout.as_secs_f64()),
                &bypass,
            )
        }
    };
    let tasks = state.tasks.clone();
    tokio::spawn(async move {
        let _task = tasks.enter();
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let mut client = TokioIo::new(upgraded);
                let mut upstream = upstream;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
            Err(e) => tracing::debug!("CONNECT upgrade to {authority} failed: {e}"),
        }
    });
    Response::new(ProxyBody::empty())
}

/// Terminates the client's TLS and serves the requests inside through the
/// cache. The leaf certificate names what the client asked for: the TLS
/// server name (SNI) when it sends one, else the CONNECT host.
fn intercept(
    state: Arc<ProxyState>,
    req: Request<Incoming>,
    authority: http::uri::Authority,
    host: String,
    peer: SocketAddr,
) -> Response<ProxyBody> {
    let server_config = match state.ca.server_config_for(&host) {
        Ok(c) => c,
        Err(e) => {
            return error_response(
                StatusCode::BAD_GATEWAY,
                &format!("crawlcache: cannot make a certificate for {host}: {e}"),
                &CacheStatus::forward(Fwd::Bypass).with_detail(Detail::Tls),
            )
        }
    };
    // Requests keep the CONNECT authority; the default port is elided by
    // the cache key.
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(req).await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!("CONNECT upgrade from {peer} to {authority} failed: {e}");
                return;
            }
        };
        let handshake = async {
            let start = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), TokioIo::new(upgraded)).await?;
            let config = match start.client_hello().server_name() {
                Some(sni) if !sni.eq_ignore_ascii_case(&host) => state.ca.server_config_for(sni).unwrap_or_else(|e| {
                    tracing::info!("cannot make a certificate for the server name {sni} (CONNECT {authority}): {e}; using {host}");
                    server_config.clone()
                }),
                _ => server_config.clone(),
            };
            start.into_stream(config).await
        };
        let tls = match tokio::time::timeout(std::time::Duration::from_secs(30), handshake).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::info!("TLS handshake with client {peer} for {authority} failed (does it trust the crawlcache CA? see `crawlcache ca`): {e}");
                return;
            }
            Err(_) => {
                tracing::info!("TLS handshake with client {peer} for {authority} timed out");
                return;
            }
        };
        let st = state.clone();
        let auth = authority.clone();
        let (io, interim) = crate::wire::interim::InterimIo::new(TokioIo::new(tls));
        let svc = service_fn(move |r| handle_in_tunnel(st.clone(), r, auth.clone(), peer, interim.clone()));
        let conn = super::client_http1().serve_connection(io, svc);
        // Counted and closed gracefully at shutdown, like plain connections.
        let _guard = state.conns.enter();
        let result = super::serve_until_closing(conn, state.closing.subscribe(), |c| c.graceful_shutdown()).await;
        if let Err(e) = result {
            tracing::debug!("intercepted connection from {peer} to {authority} ended with an error: {e}");
        }
    });
    Response::new(ProxyBody::empty())
}
