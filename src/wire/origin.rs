//! The one client for origins: the only code that talks to them, used by
//! the proxy and by the robots.txt fetcher.

use super::body::ProxyBody;
pub use super::upstream_fields::{host_field, upstream_fields};
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;

/// The connector used for origins: plain TCP for `http://`, verified TLS for
/// `https://`.
pub type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// Why an upstream exchange failed, with a sentence for the client.
#[derive(Debug, Clone)]
pub struct UpstreamError {
    /// What kind of failure this was.
    pub kind: UpstreamErrorKind,
    /// Human-readable cause, used in the error body and logs.
    pub message: String,
}

/// Kinds of upstream failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamErrorKind {
    /// The host name did not resolve.
    Dns,
    /// The TCP connection could not be opened (refused, unreachable, connect timeout).
    Connect,
    /// The origin did not send its response head in time.
    Timeout,
    /// The origin's TLS certificate could not be verified.
    Tls,
    /// The origin broke the protocol or closed the connection.
    Protocol,
}

impl UpstreamError {
    /// True when the origin could not be reached at all: the cache is then
    /// disconnected in the sense of RFC 9111 section 4.2.4.
    pub fn unreachable(&self) -> bool {
        matches!(self.kind, UpstreamErrorKind::Dns | UpstreamErrorKind::Connect | UpstreamErrorKind::Timeout)
    }

    /// The status to answer the client with: 504 for a timeout, 502 otherwise.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            UpstreamErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::BAD_GATEWAY,
        }
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The pooled HTTP client for origins.
#[derive(Clone)]
pub struct Upstream {
    client: Client<Connector, ProxyBody>,
    response_timeout: Duration,
}

impl Upstream {
    /// A client verifying origins' TLS with `tls`, with the given connect
    /// timeout, response-head timeout and idle-connection lifetime.
    pub fn new(
        tls: Arc<rustls::ClientConfig>,
        connect_timeout: Duration,
        response_timeout: Duration,
        pool_idle_timeout: Duration,
    ) -> Upstream {
        let connector = crate::tls::upstream_connector(tls, connect_timeout);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(pool_idle_timeout)
            .pool_max_idle_per_host(32)
            .build(connector);
        Upstream { client, response_timeout }
    }

    /// Sends `req` (absolute URI) and waits for the response head, at most the
    /// configured response timeout. `host` is used in error messages.
    pub async fn send(&self, req: Request<ProxyBody>) -> Result<Response<Incoming>, UpstreamError> {
        let host = req.uri().authority().map(|a| a.to_string()).unwrap_or_default();
        match tokio::time::timeout(self.response_timeout, self.client.request(req)).await {
            Err(_) => Err(UpstreamError {
                kind: UpstreamErrorKind::Timeout,
                message: format!("origin {host} did not answer within {} s", self.response_timeout.as_secs_f64()),
            }),
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(classify(&host, &e)),
        }
    }
}

/// The request to send to the origin for a client's request: `method` on
/// `uri` with the fields [`upstream_fields`] makes from the client's
/// `headers` (addressing and framing from what is sent, never from what
/// was received), as HTTP/1.1.
pub fn forward_request(method: &Method, uri: &Uri, headers: &HeaderMap, body: ProxyBody) -> Request<ProxyBody> {
    let unknown_length = !http_body::Body::is_end_stream(&body) && http_body::Body::size_hint(&body).exact().is_none();
    let headers = upstream_fields(uri, headers, unknown_length);
    let mut req = Request::new(body);
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri.clone();
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    req
}

/// Turns a client error into a kind and a sentence naming the cause.
fn classify(host: &str, err: &hyper_util::client::legacy::Error) -> UpstreamError {
    let mut chain = String::new();
    let mut io_kind = None;
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = src {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
        }
        let s = e.to_string();
        if !s.is_empty() && !chain.contains(&s) {
            if !chain.is_empty() {
                chain.push_str(": ");
            }
            chain.push_str(&s);
        }
        src = e.source();
    }
    if let Some(sentence) = crate::tls::describe_tls_error(err) {
        return UpstreamError { kind: UpstreamErrorKind::Tls, message: format!("TLS with origin {host} failed: {sentence}") };
    }
    let lower = chain.to_ascii_lowercase();
    let kind = if lower.contains("dns error") || lower.contains("failed to lookup") || lower.contains("name or service not known") {
        UpstreamErrorKind::Dns
    } else if io_kind == Some(std::io::ErrorKind::TimedOut) || lower.contains("timed out") {
        UpstreamErrorKind::Timeout
    } else if err.is_connect() {
        UpstreamErrorKind::Connect
    } else {
        UpstreamErrorKind::Protocol
    };
    let message = match kind {
        UpstreamErrorKind::Dns => format!("could not resolve origin host {host}: {chain}"),
        UpstreamErrorKind::Connect => format!("could not connect to origin {host}: {chain}"),
        UpstreamErrorKind::Timeout => format!("connecting to origin {host} timed out: {chain}"),
        UpstreamErrorKind::Tls => format!("TLS with origin {host} failed: {chain}"),
        UpstreamErrorKind::Protocol => format!("origin {host} failed: {chain}"),
    };
    UpstreamError { kind, message }
}
