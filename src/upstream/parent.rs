//! The parent (upstream) proxy: which origins are reached through it
//! (`upstream.proxy`, `upstream.no_proxy`) and the connector, under the TLS
//! layer of the origin client, that opens a connection directly or via the
//! parent.
//!
//! Built on hyper-util's own proxy support: its
//! [`hyper_util::client::proxy::matcher::Matcher`] decides per
//! origin (curl's `NO_PROXY` rules) and encodes the credentials, and its
//! [`Tunnel`] sends `CONNECT host:port` for `https://` origins. Plain
//! `http://` origins get a connection to the parent marked as proxied
//! ([`Connected::proxy`]), so that hyper-util's client writes the request
//! line in absolute form. The matcher is built from the configuration
//! only, never from the environment.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Uri};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

type BoxError = Box<dyn StdError + Send + Sync>;

/// The connector used for origins: plain TCP for `http://`, verified TLS for
/// `https://`, either directly or through the parent proxy.
pub type Connector = hyper_rustls::HttpsConnector<OriginConnector>;

/// hyper-util's `TunnelError` (public, but not re-exported by name).
type TunnelError = <Tunnel<HttpConnector> as tower_service::Service<Uri>>::Error;

/// A parent proxy and the origins reached without it.
pub struct ParentProxy {
    matcher: Matcher,
    /// `*` in `no_proxy`: the matcher applies it to host names only, not to
    /// IP addresses, so it is handled here.
    all_direct: bool,
    /// `host:port` of the parent, for messages; never the credentials.
    name: String,
}

impl fmt::Debug for ParentProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParentProxy").field("name", &self.name).finish_non_exhaustive()
    }
}

/// A parent proxy URL [`ParentProxy::new`] cannot use: `Display` quotes it
/// without its credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{redacted}' is not an http:// proxy URL")]
pub struct NotAProxyUrl {
    /// The URL as given, any password replaced by `***`.
    pub redacted: String,
}

impl ParentProxy {
    /// The parent at `url` (`http://[user:password@]host:port`), bypassed
    /// for origins matching one of `no_proxy` (host names matching
    /// themselves and their subdomains, with or without a leading dot; IP
    /// addresses; CIDR networks; `*`). Errors: [`NotAProxyUrl`], `url` is
    /// not a usable `http://` proxy URL.
    pub fn new(url: &str, no_proxy: &[String]) -> Result<ParentProxy, NotAProxyUrl> {
        let probe = Matcher::builder().http(url.to_string()).build();
        let name = probe
            .intercept(&Uri::from_static("http://origin.invalid/"))
            .and_then(|i| i.uri().authority().map(|a| a.to_string()))
            .ok_or_else(|| NotAProxyUrl { redacted: redact(url) })?;
        let matcher = Matcher::builder()
            .http(url.to_string())
            .https(url.to_string())
            .no(no_proxy.join(","))
            .build();
        let all_direct = no_proxy.iter().any(|e| e.trim() == "*");
        Ok(ParentProxy { matcher, all_direct, name })
    }

    /// The parent's address and credentials when `uri` goes through it.
    fn intercept(&self, uri: &Uri) -> Option<Intercept> {
        if self.all_direct {
            return None;
        }
        self.matcher.intercept(uri)
    }

    /// `host:port` of the parent.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the origin of `uri` is reached through the parent.
    pub fn routes(&self, uri: &Uri) -> bool {
        self.intercept(uri).is_some()
    }

    /// The `Proxy-Authorization` value to send with a plain `http://`
    /// request to `uri` when it goes through the parent and credentials are
    /// configured.
    pub fn authorization(&self, uri: &Uri) -> Option<HeaderValue> {
        self.intercept(uri).and_then(|i| i.basic_auth().cloned())
    }
}

/// `url` without the credentials it may carry.
fn redact(url: &str) -> String {
    match url.split_once('@') {
        Some((scheme_user, rest)) => match scheme_user.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://***@{rest}"),
            None => format!("***@{rest}"),
        },
        None => url.to_string(),
    }
}

/// The TCP-level connector of the origin client: `dst` directly, or via the
/// parent when one is configured and `dst` is not in `no_proxy`.
#[derive(Clone)]
pub struct OriginConnector {
    tcp: HttpConnector,
    parent: Option<Arc<ParentProxy>>,
}

impl OriginConnector {
    /// Connections opened with `tcp` (its connect timeout applies to the
    /// origin, or to the parent), via `parent` when given.
    pub fn new(tcp: HttpConnector, parent: Option<Arc<ParentProxy>>) -> OriginConnector {
        OriginConnector { tcp, parent }
    }
}

/// A connection opened by [`OriginConnector`]: a TCP stream to the origin,
/// to the parent (for a plain `http://` origin: marked as proxied so that
/// requests are written in absolute form), or a tunnel through the parent.
///
/// It counts the bytes received since it last sent any
/// ([`ReadSinceWrite`], given to the client as the connection's extra
/// information), so that a response head refused as too large can be told
/// apart: many bytes (over `upstream.max_head_bytes`) or many fields.
#[derive(Debug)]
pub struct OriginStream {
    io: TokioIo<TcpStream>,
    absolute_form: bool,
    read_since_write: ReadSinceWrite,
}

impl OriginStream {
    fn new(io: TokioIo<TcpStream>, absolute_form: bool) -> OriginStream {
        OriginStream { io, absolute_form, read_since_write: ReadSinceWrite::default() }
    }

    /// Restarts the count of [`ReadSinceWrite`] when a write sent bytes.
    fn wrote(&self, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(n)) = written {
            if n > 0 {
                self.read_since_write.0.store(0, std::sync::atomic::Ordering::Relaxed);
            }
        }
        written
    }
}

/// Bytes a connection to an origin (or the parent) has received since it
/// last sent any: after a request is written, the bytes of its response
/// so far (on TLS connections, the encrypted bytes). Shared with the
/// client's record of the connection (`Connected::extra`), where it
/// survives the connection.
#[derive(Debug, Clone, Default)]
pub struct ReadSinceWrite(Arc<std::sync::atomic::AtomicUsize>);

impl ReadSinceWrite {
    /// The count, in bytes.
    pub fn bytes(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Connection for OriginStream {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.absolute_form).extra(self.read_since_write.clone())
    }
}

impl Read for OriginStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // As TokioIo reads (hyper_util::rt::tokio), counting what arrives.
        // SAFETY: tokio's ReadBuf over the cursor's unfilled bytes only
        // ever initializes them, never de-initializes; `n` bytes of them
        // were filled by the read, so advancing the cursor by `n` is sound.
        let n = unsafe {
            let mut tbuf = tokio::io::ReadBuf::uninit(buf.as_mut());
            match tokio::io::AsyncRead::poll_read(Pin::new(self.io.inner_mut()), cx, &mut tbuf) {
                Poll::Ready(Ok(())) => tbuf.filled().len(),
                other => return other,
            }
        };
        // SAFETY: see above: the read filled exactly `n` of those bytes.
        unsafe { buf.advance(n) };
        self.read_since_write.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        Poll::Ready(Ok(()))
    }
}

impl Write for OriginStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(written)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(written)
    }
}

impl tower_service::Service<Uri> for OriginConnector {
    type Response = OriginStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<OriginStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let route: Option<Intercept> = self.parent.as_ref().and_then(|p| p.intercept(&dst));
        let mut tcp = self.tcp.clone();
        let Some(route) = route else {
            return Box::pin(async move { Ok(OriginStream::new(tcp.call(dst).await?, false)) });
        };
        let parent_uri = route.uri().clone();
        let parent = ParentLeg {
            parent: self.parent.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
            origin: authority(&dst),
        };
        if dst.scheme() == Some(&http::uri::Scheme::HTTP) {
            // The request itself goes to the parent, in absolute form.
            Box::pin(async move {
                let io = tcp
                    .call(parent_uri)
                    .await
                    .map_err(|e| parent.error(ParentFailure::Connect, e.into()))?;
                Ok(OriginStream::new(io, true))
            })
        } else {
            // CONNECT host:port, then the TLS layer above talks to the origin.
            let mut tunnel = Tunnel::new(parent_uri, tcp);
            if let Some(auth) = route.basic_auth() {
                tunnel = tunnel.with_auth(auth.clone());
            }
            Box::pin(async move {
                let io = tunnel.call(dst).await.map_err(|e| parent.tunnel_error(e))?;
                Ok(OriginStream::new(io, false))
            })
        }
    }
}

/// `host:port` of `uri` (the scheme's default port when it names none).
fn authority(uri: &Uri) -> String {
    let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 });
    format!("{}:{port}", uri.host().unwrap_or(""))
}

/// The parent and origin of one connection attempt, for its error.
struct ParentLeg {
    parent: String,
    origin: String,
}

impl ParentLeg {
    fn error(self, failure: ParentFailure, source: BoxError) -> BoxError {
        Box::new(ParentError {
            parent: self.parent,
            origin: self.origin,
            failure,
            source: Some(source),
        })
    }

    fn tunnel_error(self, err: TunnelError) -> BoxError {
        let failure = match &err {
            TunnelError::ConnectFailed(_) => ParentFailure::Connect,
            TunnelError::ProxyAuthRequired => ParentFailure::AuthRequired,
            TunnelError::TunnelUnsuccessful => ParentFailure::Refused,
            TunnelError::TunnelUnexpectedEof | TunnelError::Io(_) => ParentFailure::Closed,
            _ => ParentFailure::Protocol,
        };
        // ConnectFailed and Io carry the underlying error as their source.
        self.error(failure, Box::new(err))
    }
}

/// What went wrong with the parent proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentFailure {
    /// The TCP connection to the parent could not be opened.
    Connect,
    /// The parent answered `CONNECT` with 407: credentials missing or wrong.
    AuthRequired,
    /// The parent answered `CONNECT` with a status other than 200 or 407.
    Refused,
    /// The parent closed the connection (or it broke) before answering `CONNECT`.
    Closed,
    /// Anything else in the `CONNECT` exchange.
    Protocol,
}

/// A failure on the way to an origin through the parent proxy. Found in the
/// error chain by the origin client, whose message then names the parent.
#[derive(Debug)]
pub struct ParentError {
    /// `host:port` of the parent.
    pub parent: String,
    /// `host:port` of the origin the connection was for.
    pub origin: String,
    /// What went wrong.
    pub failure: ParentFailure,
    source: Option<BoxError>,
}

impl fmt::Display for ParentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (parent, origin) = (&self.parent, &self.origin);
        match self.failure {
            ParentFailure::Connect => write!(f, "could not connect to the parent proxy {parent}"),
            ParentFailure::AuthRequired => write!(
                f,
                "the parent proxy {parent} refused CONNECT {origin} with 407 Proxy Authentication Required (credentials missing or wrong in upstream.proxy)"
            ),
            ParentFailure::Refused => write!(f, "the parent proxy {parent} refused CONNECT {origin}"),
            ParentFailure::Closed => write!(f, "the parent proxy {parent} closed the connection before answering CONNECT {origin}"),
            ParentFailure::Protocol => write!(f, "the parent proxy {parent} failed CONNECT {origin}"),
        }
    }
}

impl StdError for ParentError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn StdError + 'static))
    }
}

/// The [`ParentError`] in `err`'s chain of sources, if any.
pub fn find_parent_error<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a ParentError> {
    let mut src: Option<&(dyn StdError + 'static)> = Some(err);
    let mut depth = 0;
    while let Some(e) = src {
        if let Some(p) = e.downcast_ref::<ParentError>() {
            return Some(p);
        }
        depth += 1;
        if depth > 32 {
            break;
        }
        src = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(no_proxy: &[&str]) -> ParentProxy {
        let list: Vec<String> = no_proxy.iter().map(|s| s.to_string()).collect();
        ParentProxy::new("http://user:pass@parent.example:3128", &list).unwrap()
    }

    fn routes(p: &ParentProxy, uri: &str) -> bool {
        p.routes(&uri.parse().unwrap())
    }

    #[test]
    fn every_origin_goes_through_the_parent_without_no_proxy() {
        let p = parent(&[]);
        assert_eq!(p.name(), "parent.example:3128");
        assert!(routes(&p, "http://example.org/a"));
        assert!(routes(&p, "https://example.org/a"));
        assert!(routes(&p, "http://127.0.0.1:8080/"));
    }

    #[test]
    fn no_proxy_matches_hosts_subdomains_addresses_and_networks() {
        let p = parent(&["example.org", ".example.net", "192.0.2.7", "10.0.0.0/8", "::1"]);
        for direct in [
            "http://example.org/",
            "https://www.example.org/",
            "http://EXAMPLE.ORG/",
            "http://example.net/",
            "http://a.b.example.net/",
            "http://192.0.2.7:81/",
            "https://10.1.2.3/",
            "http://[::1]:8080/",
        ] {
            assert!(!routes(&p, direct), "{direct} must go direct");
        }
        for via in [
            "http://notexample.org/",
            "http://example.org.evil/",
            "http://192.0.2.8/",
            "http://11.0.0.1/",
            "https://localhost/",
        ] {
            assert!(routes(&p, via), "{via} must go through the parent");
        }
    }

    #[test]
    fn credentials_become_basic_authorization() {
        let p = parent(&[]);
        let uri: Uri = "http://example.org/".parse().unwrap();
        assert_eq!(p.authorization(&uri).unwrap(), "Basic dXNlcjpwYXNz");
        let bare = ParentProxy::new("http://parent.example:3128", &[]).unwrap();
        assert_eq!(bare.authorization(&uri), None);
    }

    #[test]
    fn a_star_sends_every_origin_direct() {
        let p = ParentProxy::new("http://parent.example:3128", &["*".to_string()]).unwrap();
        assert!(!routes(&p, "http://example.org/"));
        assert!(!routes(&p, "https://10.0.0.1/"));
    }

    #[test]
    fn bad_urls_are_refused_without_showing_credentials() {
        let e = ParentProxy::new("ftp://user:secret@parent.example:21", &[]).unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
    }

    #[test]
    fn parent_errors_are_found_in_a_chain() {
        let leg = ParentLeg { parent: "p:1".into(), origin: "o:443".into() };
        let err = leg.error(
            ParentFailure::Connect,
            Box::new(io::Error::from(io::ErrorKind::ConnectionRefused)),
        );
        let outer = io::Error::other(err);
        let found = find_parent_error(&outer)
            .or_else(|| outer.get_ref().and_then(|e| find_parent_error(e)));
        let found = found.expect("parent error in the chain");
        assert_eq!(found.parent, "p:1");
        assert_eq!(found.to_string(), "could not connect to the parent proxy p:1");
    }
}
