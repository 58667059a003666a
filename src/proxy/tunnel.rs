//! `CONNECT host:port` (RFC 9110 section 9.3.6): a blind tunnel. Nothing
//! that passes through it is cached.

use super::body::ProxyBody;
use super::handler::error_response;
use super::ProxyState;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::sync::Arc;

/// Answers a CONNECT request: opens the TCP connection to the target first
/// (so a failure becomes a 502 naming the cause), then answers 200 and
/// copies bytes both ways once the client's connection is upgraded.
pub async fn connect(state: Arc<ProxyState>, req: Request<Incoming>) -> Response<ProxyBody> {
    let Some(authority) = req.uri().authority().cloned() else {
        return error_response(StatusCode::BAD_REQUEST, "crawlcache: CONNECT needs a host:port target", "fwd=bypass");
    };
    if state.offline {
        return error_response(
            StatusCode::GATEWAY_TIMEOUT,
            &format!("crawlcache is offline: cannot open a tunnel to {authority}"),
            "fwd=bypass; detail=offline",
        );
    }
    let port = authority.port_u16().unwrap_or(443);
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_string();
    if port == state.local_addr.port()
        && (host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().map(|ip| ip.is_loopback()).unwrap_or(false))
    {
        return error_response(StatusCode::LOOP_DETECTED, "crawlcache: CONNECT to this proxy itself refused", "fwd=bypass; detail=loop");
    }
    let timeout = state.config.upstream.connect_timeout;
    let upstream = match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host.as_str(), port))).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return error_response(StatusCode::BAD_GATEWAY, &format!("crawlcache: could not connect to {authority}: {e}"), "fwd=bypass")
        }
        Err(_) => {
            return error_response(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("crawlcache: connecting to {authority} timed out after {} s", timeout.as_secs_f64()),
                "fwd=bypass",
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
