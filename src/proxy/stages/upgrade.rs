//! WebSocket upgrades (`Upgrade: websocket`, RFC 6455 section 4, RFC 9110
//! section 7.8): the handshake request is sent to the origin with its
//! `Upgrade` and `Connection` fields kept (they are hop-by-hop and would
//! otherwise be removed), the origin's answer goes back to the client, and
//! after a `101 Switching Protocols` the bytes are copied both ways
//! untouched until either side closes. Nothing is stored (C50).
//!
//! Used for absolute-form requests on the plain proxy
//! (`GET http://host/chat`), and for requests inside a tunnel (plain HTTP
//! or intercepted TLS). The origin is reached directly over TCP (TLS,
//! verified as for every origin, for `https://` targets); with a parent
//! proxy configured (`upstream.proxy`) the upgrade is refused with a 502
//! that says so.

use super::super::exchange::Exchange;
use super::super::state::ProxyState;
use crate::wire::body::ProxyBody;
use crate::wire::error::error_response;
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use http::{HeaderMap, Response, StatusCode};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest origin response head read for an upgrade, in bytes.
const MAX_HEAD: usize = 64 * 1024;

/// Largest body of a refused upgrade (a non-101 answer) relayed to the
/// client, in bytes; the rest is dropped.
const MAX_REFUSAL_BODY: usize = 1024 * 1024;

/// Why the handshake with the origin gave no usable answer (a 502 naming
/// it).
#[derive(Debug, thiserror::Error)]
enum OriginError {
    /// The TLS client configuration (`upstream.extra_ca_file`) is unusable.
    #[error(transparent)]
    Config(#[from] crate::tls::TlsError),
    /// The host is not a name TLS can verify.
    #[error("{host} cannot be a TLS server name: {source}")]
    ServerName {
        /// The origin's host.
        host: String,
        /// rustls's reason.
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// The TLS handshake failed (a certificate problem, named when it is
    /// one).
    #[error("{}", crate::upstream::describe_tls_error(.source).unwrap_or_else(|| format!("the TLS handshake with {host} failed: {source}")))]
    Handshake {
        /// The origin's host.
        host: String,
        /// The handshake's error.
        source: std::io::Error,
    },
    /// Reading the answer failed.
    #[error("{0}")]
    Read(#[from] std::io::Error),
    /// The connection closed before the head was whole.
    #[error("the connection closed before a complete response head")]
    Closed,
    /// The head is larger than [`MAX_HEAD`] bytes.
    #[error("the response head is larger than {MAX_HEAD} bytes")]
    TooLarge,
    /// The status line has no valid status code.
    #[error("no valid status code")]
    NoStatus,
    /// Not an HTTP/1.x response head.
    #[error("{0}")]
    Malformed(#[from] httparse::Error),
}

/// An origin connection: TCP, or TLS over it.
trait OriginIo: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> OriginIo for T {}

/// Carries out `Route::Upgrade`: sends the handshake to the origin, answers
/// the client with the origin's response, and after a `101` relays the
/// connection both ways in a task of its own. Errors (the origin cannot be
/// reached, its TLS cannot be verified, its answer is not HTTP) give a 502
/// or 504 naming the cause.
pub async fn run(state: &Arc<ProxyState>, ex: &mut Exchange) -> Response<ProxyBody> {
    ex.status = CacheStatus::forward(Fwd::Bypass).with_detail(Detail::Upgrade);
    let uri = ex.upstream_target().clone();
    let fail = |ex: &Exchange, status: StatusCode, msg: String| {
        tracing::info!("WebSocket upgrade to {uri} failed: {msg}");
        error_response(status, &format!("crawlcache: {msg}"), &ex.status)
    };
    if !state.config.upstream.proxy.is_empty() {
        return fail(
            ex,
            StatusCode::BAD_GATEWAY,
            format!("cannot relay the WebSocket upgrade to {uri}: upgrades are not sent through the parent proxy (upstream.proxy)"),
        );
    }
    let (mut origin, host, port) = match connect(state, &uri).await {
        Ok(c) => c,
        Err((status, msg)) => return fail(ex, status, msg),
    };
    let head = request_head(&uri, &ex.parts.headers);
    if let Err(e) = origin.write_all(&head).await {
        return fail(
            ex,
            StatusCode::BAD_GATEWAY,
            format!("could not send the WebSocket handshake to {host}:{port}: {e}"),
        );
    }
    let response_timeout = state.config.upstream.response_timeout;
    let (status, headers, leftover) = match tokio::time::timeout(response_timeout, read_head(&mut origin)).await {
        Ok(Ok(h)) => h,
        Ok(Err(msg)) => {
            return fail(ex, StatusCode::BAD_GATEWAY, format!("origin {host}:{port} answered the WebSocket handshake with no usable HTTP response: {msg}"))
        }
        Err(_) => {
            return fail(
                ex,
                StatusCode::GATEWAY_TIMEOUT,
                format!("origin {host}:{port} did not answer the WebSocket handshake within {} s", response_timeout.as_secs_f64()),
            )
        }
    };
    ex.status.fwd_status = Some(status.as_u16());
    // The handshake is read by hand, always HTTP/1.1.
    ex.upstream_version = Some(http::Version::HTTP_11);
    if status != StatusCode::SWITCHING_PROTOCOLS {
        // The origin refused the upgrade: its answer, as an ordinary one.
        let mut body = leftover;
        let len = headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<usize>().ok());
        if let Some(len) = len.map(|l| l.min(MAX_REFUSAL_BODY)) {
            let mut rest = vec![0u8; len.saturating_sub(body.len())];
            if tokio::time::timeout(response_timeout, origin.read_exact(&mut rest))
                .await
                .is_ok_and(|r| r.is_ok())
            {
                body.extend_from_slice(&rest);
            }
            body.truncate(len);
        }
        let mut resp = Response::new(ProxyBody::full(bytes::Bytes::from(body)));
        *resp.status_mut() = status;
        *resp.headers_mut() = headers;
        crawlcache_policy::hop_by_hop::client_response_fields(
            resp.headers_mut(),
            http::Version::HTTP_11,
        );
        return resp;
    }
    let Some(req) = ex.take_request() else {
        return fail(
            ex,
            StatusCode::INTERNAL_SERVER_ERROR,
            "the request was already consumed".into(),
        );
    };
    spawn_relay(state, req, origin, leftover, uri.clone());
    let mut resp = Response::new(ProxyBody::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *resp.headers_mut() = headers;
    resp
}

/// A connection to the origin of `uri` for a WebSocket handshake: TCP
/// within `upstream.connect_timeout`, then TLS for `https`/`wss` targets.
/// Returns the connection with the host and port it reached.
///
/// Errors: the status to answer with (400 no host, 502 refused or TLS
/// failure, 504 timeout) and a sentence naming the cause.
async fn connect(
    state: &Arc<ProxyState>,
    uri: &http::Uri,
) -> Result<(Box<dyn OriginIo>, String, u16), (StatusCode, String)> {
    let https = uri.scheme_str() == Some("https");
    let Some(host) =
        uri.host().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string())
    else {
        return Err((StatusCode::BAD_REQUEST, format!("the upgrade target {uri} names no host")));
    };
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let timeout = state.config.upstream.connect_timeout;
    let tcp =
        match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host.as_str(), port)))
            .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err((
                    StatusCode::BAD_GATEWAY,
                    format!("could not connect to {host}:{port} for a WebSocket upgrade: {e}"),
                ))
            }
            Err(_) => {
                return Err((
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "connecting to {host}:{port} timed out after {} s",
                        timeout.as_secs_f64()
                    ),
                ))
            }
        };
    let _ = tcp.set_nodelay(true);
    let origin: Box<dyn OriginIo> = if https {
        match tls_to_origin(state, &host, tcp).await {
            Ok(s) => s,
            Err(e) => return Err((StatusCode::BAD_GATEWAY, e.to_string())),
        }
    } else {
        Box::new(tcp)
    };
    Ok((origin, host, port))
}

/// Relays the WebSocket's bytes both ways once the client has switched
/// protocols: first what the origin sent right behind its 101
/// (`leftover`), then both directions until either side closes.
fn spawn_relay(
    state: &Arc<ProxyState>,
    mut req: http::Request<hyper::body::Incoming>,
    mut origin: Box<dyn OriginIo>,
    leftover: Vec<u8>,
    target: http::Uri,
) {
    let tasks = state.tasks.clone();
    tokio::spawn(async move {
        let _task = tasks.enter();
        match hyper::upgrade::on(&mut req).await {
            Ok(upgraded) => {
                let mut client = hyper_util::rt::TokioIo::new(upgraded);
                // Frames the origin sent right behind its 101.
                if !leftover.is_empty() && client.write_all(&leftover).await.is_err() {
                    return;
                }
                match tokio::io::copy_bidirectional(&mut client, &mut origin).await {
                    Ok((up, down)) => tracing::debug!(
                        "WebSocket relay to {target} closed ({up} bytes up, {down} down)"
                    ),
                    Err(e) => tracing::debug!("WebSocket relay to {target} ended: {e}"),
                }
            }
            Err(e) => tracing::debug!(
                "the client of the WebSocket upgrade to {target} did not switch protocols: {e}"
            ),
        }
    });
}

/// TLS to the origin `host` over `tcp`, verified as every origin is
/// (public roots plus `upstream.extra_ca_file`). Errors: [`OriginError`]
/// (`Config`, `ServerName`, `Handshake`).
async fn tls_to_origin(
    state: &ProxyState,
    host: &str,
    tcp: tokio::net::TcpStream,
) -> Result<Box<dyn OriginIo>, OriginError> {
    let extra = &state.config.upstream.extra_ca_file;
    let extra = if extra.as_os_str().is_empty() { None } else { Some(extra.as_path()) };
    let config = crate::upstream::upstream_client_config(extra)?;
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|source| OriginError::ServerName { host: host.to_string(), source })?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|source| OriginError::Handshake { host: host.to_string(), source })?;
    Ok(Box::new(stream))
}

/// The handshake request sent to the origin: `GET path` with the client's
/// fields but for `Host` (made from the target, RFC 9112 section 3.2.2)
/// and the proxy's own (`Proxy-*`, `Keep-Alive`); `Upgrade`, `Connection`
/// and the `Sec-WebSocket-*` fields are kept.
fn request_head(uri: &http::Uri, headers: &HeaderMap) -> Vec<u8> {
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut head = format!("GET {path} HTTP/1.1\r\n").into_bytes();
    if let Some(host) = crawlcache_policy::upstream_fields::host_field(uri) {
        head.extend_from_slice(b"Host: ");
        head.extend_from_slice(host.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    for (name, value) in headers {
        let n = name.as_str();
        if n == "host"
            || n.starts_with("proxy-")
            || n == "keep-alive"
            || n == "te"
            || n == "transfer-encoding"
            || n == "content-length"
        {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// Reads the origin's response head: its status, fields, and the bytes
/// read beyond it. Errors: the connection closed first, the head is larger
/// than [`MAX_HEAD`], or it is not an HTTP/1.x response head
/// ([`OriginError`]).
async fn read_head(
    io: &mut Box<dyn OriginIo>,
) -> Result<(StatusCode, HeaderMap, Vec<u8>), OriginError> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Err(OriginError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut fields = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Response::new(&mut fields);
        match parsed.parse(&buf) {
            Ok(httparse::Status::Complete(end)) => {
                let status = parsed
                    .code
                    .and_then(|c| StatusCode::from_u16(c).ok())
                    .ok_or(OriginError::NoStatus)?;
                let mut headers = HeaderMap::new();
                for f in parsed.headers.iter() {
                    if let (Ok(n), Ok(v)) = (
                        http::header::HeaderName::from_bytes(f.name.as_bytes()),
                        http::HeaderValue::from_bytes(f.value),
                    ) {
                        headers.append(n, v);
                    }
                }
                return Ok((status, headers, buf[end..].to_vec()));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => continue,
            Ok(httparse::Status::Partial) => return Err(OriginError::TooLarge),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                http::header::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn a_websocket_upgrade_needs_get_upgrade_and_connection() {
        use crawlcache_policy::hop_by_hop::is_websocket_upgrade;
        let ws = headers(&[("upgrade", "WebSocket"), ("connection", "keep-alive, Upgrade")]);
        assert!(is_websocket_upgrade(&http::Method::GET, &ws));
        assert!(!is_websocket_upgrade(&http::Method::POST, &ws));
        assert!(!is_websocket_upgrade(&http::Method::GET, &headers(&[("upgrade", "websocket")])));
        assert!(!is_websocket_upgrade(
            &http::Method::GET,
            &headers(&[("upgrade", "h2c"), ("connection", "upgrade")])
        ));
    }

    #[test]
    fn the_handshake_keeps_the_upgrade_fields_and_addresses_the_target() {
        let uri: http::Uri = "http://example.com:8080/chat?room=1".parse().unwrap();
        let h = headers(&[
            ("host", "evil.example"),
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("proxy-authorization", "Basic eA=="),
        ]);
        let head = String::from_utf8(request_head(&uri, &h)).unwrap();
        assert!(
            head.starts_with("GET /chat?room=1 HTTP/1.1\r\nHost: example.com:8080\r\n"),
            "{head}"
        );
        assert!(
            head.contains("upgrade: websocket\r\n") && head.contains("connection: Upgrade\r\n"),
            "{head}"
        );
        assert!(head.contains("sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), "{head}");
        assert!(!head.contains("evil.example") && !head.contains("proxy-authorization"), "{head}");
        assert!(head.ends_with("\r\n\r\n"));
    }
}
