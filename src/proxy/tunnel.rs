//! `CONNECT host:port` (RFC 9110 section 9.3.6).
//!
//! With `tls.intercept` (the default) the tunnel is terminated here: the
//! client's TLS is accepted with a leaf certificate for `host` signed by
//! crawlcache's local CA, and the requests inside (HTTP/1.1, or HTTP/2 when
//! the client chooses `h2` by ALPN and `tls.http2` allows it) go through the
//! same cache path as plain HTTP, keyed as `https://host[:port]/...`.
//! Hosts matching `tls.bypass_hosts` (or every host, with interception off)
//! get a blind tunnel: bytes are copied both ways and nothing is cached.
//!
//! What an intercepted tunnel carries is decided by its first bytes (C50,
//! RFC 9110 section 9.3.6: after a 2xx to CONNECT the proxy relays bytes;
//! interception is an addition):
//!
//! ```text
//! first byte 0x16 (a TLS handshake record)  -> TLS, intercepted as above
//! an HTTP/1.x request head                  -> plain HTTP: served through the
//!                                              cache as http://host[:port]/...
//!   ... whose first request is a WebSocket
//!       upgrade                             -> relayed untouched
//! anything else                             -> relayed untouched
//! nothing within SILENT_RELAY_AFTER (a port
//!   other than 443: a server-speaks-first
//!   protocol)                               -> relayed untouched
//! ```
//!
//! A relayed tunnel is logged as what it is ("carries neither TLS nor
//! HTTP"), not as a certificate problem; offline, it is closed (no origin
//! may be contacted).

use super::in_tunnel::handle_in_tunnel;
use super::state::ProxyState;
use crate::wire::body::ProxyBody;
use crate::wire::error::error_response;
use crate::wire::interim::InterimIo;
use crate::wire::sendfile::SendfileIo;
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// Answers a CONNECT request (200, then the tunnel runs in its own task),
/// or an error naming the cause.
pub async fn connect(
    state: Arc<ProxyState>,
    req: Request<Incoming>,
    peer: SocketAddr,
) -> Response<ProxyBody> {
    let bypass = CacheStatus::forward(Fwd::Bypass);
    let Some(authority) = req.uri().authority().cloned() else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "crawlcache: CONNECT needs a host:port target",
            &bypass,
        );
    };
    let port = authority.port_u16().unwrap_or(443);
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_string();
    if crate::wire::net::names_listener(&host, port, state.local_addr).await {
        return error_response(
            StatusCode::LOOP_DETECTED,
            "crawlcache: CONNECT to this proxy itself refused",
            &bypass.with_detail(Detail::Loop),
        );
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
    let upstream = match open_upstream(&state, &host, port).await {
        Ok(s) => s,
        Err((status, message)) => return error_response(status, &message, &bypass),
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

/// A TCP connection to the CONNECT target, within `upstream.connect_timeout`.
/// Errors: the status (502, or 504 on a timeout) and a sentence.
async fn open_upstream(
    state: &ProxyState,
    host: &str,
    port: u16,
) -> Result<tokio::net::TcpStream, (StatusCode, String)> {
    let timeout = state.config.upstream.connect_timeout;
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => Err((
            StatusCode::BAD_GATEWAY,
            format!("crawlcache: could not connect to {host}:{port}: {e}"),
        )),
        Err(_) => Err((
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "crawlcache: connecting to {host}:{port} timed out after {} s",
                timeout.as_secs_f64()
            ),
        )),
    }
}

/// How long an intercepted tunnel to a port other than 443 may stay
/// silent before it is taken for a protocol where the server speaks first
/// (SMTP, FTP) and relayed untouched.
pub const SILENT_RELAY_AFTER: Duration = Duration::from_secs(3);

/// How long the client of an intercepted tunnel may take to send its first
/// bytes (a TLS ClientHello, a request head) before the tunnel is closed.
const FIRST_BYTES_TIMEOUT: Duration = Duration::from_secs(30);

/// Most bytes read to recognise a plain HTTP request head in a tunnel
/// before deciding (a longer head is still served as HTTP).
const SNIFF_MAX: usize = 64 * 1024;

/// What the first bytes of a tunnel are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelContent {
    /// A TLS handshake record (first byte 0x16): a ClientHello.
    Tls,
    /// An HTTP/1.x request head.
    Http,
    /// An HTTP/1.x request head asking for a WebSocket upgrade.
    WebSocket,
    /// Anything else.
    Other,
    /// Not enough bytes yet to tell.
    Unknown,
    /// The client closed the tunnel before its bytes could be told apart.
    Closed,
}

/// Classifies the first bytes `first` of a tunnel (pure; the more bytes,
/// the surer): TLS by its record type 0x16 (RFC 8446 section 5.1); HTTP by
/// a request line `METHOD SP target SP HTTP/1.x` (RFC 9112 section 3),
/// WebSocket once the whole head is there and asks for the upgrade;
/// [`TunnelContent::Unknown`] while a prefix of an HTTP head could still
/// turn out either way.
pub fn classify_tunnel(first: &[u8]) -> TunnelContent {
    let Some(&b0) = first.first() else { return TunnelContent::Unknown };
    if b0 == 0x16 {
        return TunnelContent::Tls;
    }
    // The method: a token (RFC 9110 section 5.6.2), then one space.
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    let method_len = first.iter().take_while(|&&b| token(b)).count();
    if method_len == first.len() {
        return if method_len <= 16 { TunnelContent::Unknown } else { TunnelContent::Other };
    }
    if method_len == 0 || first[method_len] != b' ' || method_len > 16 {
        return TunnelContent::Other;
    }
    let Some(line_end) = first.windows(2).position(|w| w == b"\r\n") else {
        return if first.len() < SNIFF_MAX { TunnelContent::Unknown } else { TunnelContent::Other };
    };
    let line = &first[..line_end];
    if !(line.ends_with(b" HTTP/1.1") || line.ends_with(b" HTTP/1.0")) {
        return TunnelContent::Other;
    }
    let Some(head_end) = first.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if first.len() < SNIFF_MAX { TunnelContent::Unknown } else { TunnelContent::Http };
    };
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut parsed = httparse::Request::new(&mut fields);
    if !matches!(parsed.parse(&first[..head_end + 4]), Ok(httparse::Status::Complete(_))) {
        // Let the HTTP server answer what is wrong with it (400, 431).
        return TunnelContent::Http;
    }
    let mut headers = http::HeaderMap::new();
    for f in parsed.headers.iter() {
        if let (Ok(n), Ok(v)) = (
            http::header::HeaderName::from_bytes(f.name.as_bytes()),
            http::HeaderValue::from_bytes(f.value),
        ) {
            headers.append(n, v);
        }
    }
    let method = http::Method::from_bytes(parsed.method.unwrap_or("").as_bytes())
        .unwrap_or(http::Method::GET);
    if crawlcache_policy::hop_by_hop::is_websocket_upgrade(&method, &headers) {
        TunnelContent::WebSocket
    } else {
        TunnelContent::Http
    }
}

/// Reads a tunnel's first bytes (after `buf`, those already read) until
/// [`classify_tunnel`] can tell what they are. Returns what was read and
/// the verdict; `Unknown` with what was read when the client went silent
/// (for `silent_after`; at most [`FIRST_BYTES_TIMEOUT`] overall), and
/// `Closed` when it closed first.
async fn sniff<IO: AsyncRead + Unpin>(
    io: &mut IO,
    mut buf: Vec<u8>,
    silent_after: Option<Duration>,
) -> std::io::Result<(Vec<u8>, TunnelContent)> {
    let mut chunk = vec![0u8; 16 * 1024];
    let started = tokio::time::Instant::now();
    loop {
        match classify_tunnel(&buf) {
            TunnelContent::Unknown if buf.len() < SNIFF_MAX => {}
            TunnelContent::Unknown => return Ok((buf, TunnelContent::Other)),
            verdict => return Ok((buf, verdict)),
        }
        let wait = match (buf.is_empty(), silent_after) {
            (true, Some(s)) => s,
            _ => FIRST_BYTES_TIMEOUT.saturating_sub(started.elapsed()),
        };
        let n = match tokio::time::timeout(wait, io.read(&mut chunk)).await {
            Ok(r) => r?,
            Err(_) => return Ok((buf, TunnelContent::Unknown)),
        };
        if n == 0 {
            return Ok((buf, TunnelContent::Closed));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Terminates the client's TLS and serves the requests inside through the
/// cache, once the tunnel's first bytes show a ClientHello; serves plain
/// HTTP inside the tunnel through the cache; relays anything else (see the
/// module documentation). The leaf certificate names what the client
/// asked for: the TLS server name (SNI) when it sends one, else the
/// CONNECT host.
fn intercept(
    state: Arc<ProxyState>,
    req: Request<Incoming>,
    authority: http::uri::Authority,
    host: String,
    peer: SocketAddr,
) -> Response<ProxyBody> {
    // The leaf for the CONNECT host: taken from the cache, else minted on
    // a blocking thread while the client's first bytes arrive (off this
    // serving thread and off the CONNECT's answer). A host that cannot be
    // in a certificate is still answered on the CONNECT itself.
    let cached = match state.ca.cached_config_for(&host) {
        Ok(c) => c,
        Err(e) => {
            return error_response(
                StatusCode::BAD_GATEWAY,
                &format!("crawlcache: cannot make a certificate for {host}: {e}"),
                &CacheStatus::forward(Fwd::Bypass).with_detail(Detail::Tls),
            )
        }
    };
    let leaf = match cached {
        Some(c) => Leaf::Ready(c),
        None => {
            let (ca, h) = (state.ca.clone(), host.clone());
            Leaf::Minting(tokio::task::spawn_blocking(move || ca.server_config_for(&h)))
        }
    };
    let port = authority.port_u16().unwrap_or(443);
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
        let (mut client, already_read) = TunnelIo::take(upgraded);
        let silent_after = (port != 443).then_some(SILENT_RELAY_AFTER);
        let (first, content) = match sniff(&mut client, already_read, silent_after).await {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(
                    "tunnel from {peer} to {authority} failed before its first bytes: {e}"
                );
                return;
            }
        };
        let io = Rewind::new(first, client);
        match content {
            TunnelContent::Tls => serve_tls(state, io, authority, host, leaf, peer).await,
            TunnelContent::Http => {
                tracing::info!("CONNECT {authority} from {peer} carries plain HTTP: served through the cache as http://{authority}/...");
                let sendfile = state.config.server.sendfile;
                match io.into_parts() {
                    // A plain-HTTP client connection like any other: stored
                    // bodies may go out with sendfile (`server.sendfile`).
                    (first, TunnelIo::Tcp(tcp)) => {
                        let io = Rewind::new(first, TokioIo::new(SendfileIo::new(tcp, sendfile)));
                        serve_http(state, io, authority, "http", peer).await
                    }
                    (first, client) => {
                        serve_http(state, Rewind::new(first, client), authority, "http", peer).await
                    }
                }
            }
            TunnelContent::Unknown if io.prefix_len() == 0 && silent_after.is_none() => {
                tracing::info!(
                    "CONNECT {authority} from {peer}: the client sent nothing within {} s (neither TLS nor HTTP); tunnel closed",
                    FIRST_BYTES_TIMEOUT.as_secs()
                );
            }
            TunnelContent::Closed => tracing::debug!(
                "CONNECT {authority} from {peer}: the client closed the tunnel after {} bytes",
                io.prefix_len()
            ),
            TunnelContent::WebSocket | TunnelContent::Other | TunnelContent::Unknown => {
                let what = match content {
                    TunnelContent::WebSocket => "a WebSocket upgrade",
                    _ if io.prefix_len() == 0 => "nothing yet (the server may speak first)",
                    _ => "neither TLS nor HTTP",
                };
                relay(state, io, &host, port, &authority, peer, what).await
            }
        }
    });
    Response::new(ProxyBody::empty())
}

/// The leaf configuration for a tunnel's CONNECT host: cached, or being
/// minted on a blocking thread.
enum Leaf {
    Ready(Arc<rustls::ServerConfig>),
    Minting(tokio::task::JoinHandle<Result<Arc<rustls::ServerConfig>, crate::tls::TlsError>>),
}

/// Why no leaf configuration could be had for a host (logged; the client's
/// handshake fails).
#[derive(Debug, thiserror::Error)]
enum LeafError {
    /// The certificate authority could not mint or load the leaf.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The blocking task minting it panicked or was cancelled.
    #[error("the minting task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl Leaf {
    /// The configuration, once minted. Errors: [`LeafError`].
    async fn get(self) -> Result<Arc<rustls::ServerConfig>, LeafError> {
        match self {
            Leaf::Ready(c) => Ok(c),
            Leaf::Minting(job) => Ok(job.await??),
        }
    }
}

/// The leaf for the TLS server name `sni`: cached, else minted on a
/// blocking thread. Errors: [`LeafError`].
async fn leaf_for_sni(
    state: &ProxyState,
    sni: &str,
) -> Result<Arc<rustls::ServerConfig>, LeafError> {
    match state.ca.cached_config_for(sni) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => {
            let (ca, name) = (state.ca.clone(), sni.to_string());
            Leaf::Minting(tokio::task::spawn_blocking(move || ca.server_config_for(&name)))
                .get()
                .await
        }
        Err(e) => Err(e.into()),
    }
}

/// The TLS handshake with the client (leaf for its SNI, else `host`), then
/// the requests inside served as `https://authority/...`.
async fn serve_tls<IO>(
    state: Arc<ProxyState>,
    io: IO,
    authority: http::uri::Authority,
    host: String,
    leaf: Leaf,
    peer: SocketAddr,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let handshake = async {
        let start =
            tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io).await?;
        let sni = start
            .client_hello()
            .server_name()
            .filter(|sni| !sni.eq_ignore_ascii_case(&host))
            .map(str::to_string);
        let config = match sni {
            // The client names another host than CONNECT did: its leaf (the
            // CONNECT host's, being minted, is cached for later).
            Some(sni) => match leaf_for_sni(&state, &sni).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::info!("cannot make a certificate for the server name {sni} (CONNECT {authority}): {e}; using {host}");
                    leaf.get().await.map_err(std::io::Error::other)?
                }
            },
            None => leaf.get().await.map_err(std::io::Error::other)?,
        };
        start.into_stream(config).await
    };
    let tls = match tokio::time::timeout(FIRST_BYTES_TIMEOUT, handshake).await {
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
    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
        serve_h2(state, tls, authority, peer).await
    } else {
        serve_http(state, tls, authority, "https", peer).await
    }
}

/// Serves the HTTP/2 streams of an intercepted TLS connection `io` whose
/// client chose `h2` by ALPN (RFC 9113 section 3.2), each as a request to
/// `https://authority/...` through the same route as an HTTP/1.1 one
/// ([`handle_in_tunnel`]); with the limits of [`super::conn::client_http2`]
/// and the SETTINGS and PING flood limit of [`crate::wire::h2_guard`].
/// Interim responses (1xx) are not relayed on HTTP/2: the HTTP library's
/// server cannot send them.
async fn serve_h2<IO>(
    state: Arc<ProxyState>,
    io: IO,
    authority: http::uri::Authority,
    peer: SocketAddr,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let st = state.clone();
    let auth = authority.clone();
    let svc =
        service_fn(move |r| handle_in_tunnel(st.clone(), r, auth.clone(), "https", peer, None));
    let io = crate::wire::h2_guard::FrameGuard::new(io, crate::wire::h2_guard::CLIENT_PREFACE_LEN);
    let conn = super::conn::client_http2().serve_connection(TokioIo::new(io), svc);
    let _guard = state.conns.enter();
    crate::metrics::Metrics::inc(&state.metrics.client_h2_connections);
    let result = super::shutdown::serve_until_closing(conn, state.closing.subscribe(), |c| {
        c.graceful_shutdown()
    })
    .await;
    if let Err(e) = result {
        tracing::debug!(
            "intercepted HTTP/2 connection from {peer} to {authority} ended with an error: {e}"
        );
    }
}

/// Serves the HTTP/1.1 requests on a tunnel's connection `io` through the
/// cache, origin-form targets taken as `scheme://authority/...`; WebSocket
/// upgrades among them are relayed (see `stages::upgrade`).
async fn serve_http<IO>(
    state: Arc<ProxyState>,
    io: IO,
    authority: http::uri::Authority,
    scheme: &'static str,
    peer: SocketAddr,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let st = state.clone();
    let auth = authority.clone();
    let (io, interim) = crate::wire::interim::InterimIo::new(TokioIo::new(io));
    let svc = service_fn(move |r| {
        handle_in_tunnel(st.clone(), r, auth.clone(), scheme, peer, Some(interim.clone()))
    });
    let conn = super::conn::client_http1().serve_connection(io, svc).with_upgrades();
    // Counted and closed gracefully at shutdown, like plain connections.
    let _guard = state.conns.enter();
    let result = super::shutdown::serve_until_closing(conn, state.closing.subscribe(), |c| {
        c.graceful_shutdown()
    })
    .await;
    if let Err(e) = result {
        tracing::debug!(
            "intercepted connection from {peer} to {authority} ended with an error: {e}"
        );
    }
}

/// Relays a tunnel that carries neither TLS nor plain HTTP (`what` says
/// what it carries, for the log) to `host:port` untouched, the bytes
/// already read first. Offline, the tunnel is closed instead.
async fn relay<IO>(
    state: Arc<ProxyState>,
    mut client: IO,
    host: &str,
    port: u16,
    authority: &http::uri::Authority,
    peer: SocketAddr,
    what: &str,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    if state.offline {
        tracing::info!("CONNECT {authority} from {peer} carries {what}: not relayed, crawlcache is offline; tunnel closed");
        return;
    }
    tracing::info!("CONNECT {authority} from {peer} carries {what}: relayed untouched, not cached");
    let mut upstream = match open_upstream(&state, host, port).await {
        Ok(s) => s,
        Err((_, message)) => {
            tracing::info!("{message} (relaying a tunnel from {peer}); tunnel closed");
            return;
        }
    };
    let _task = state.tasks.enter();
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// A client connection after `CONNECT`, as an intercepted tunnel reads and
/// writes it: the TCP connection itself when the plain connection's I/O can
/// be taken back from the HTTP library (no layers of the plain connection
/// on each read and write of the tunnel: a TLS record is one call to the
/// socket), else the library's upgraded connection.
enum TunnelIo {
    Tcp(tokio::net::TcpStream),
    Interim(TokioIo<InterimIo<SendfileIo>>),
    Upgraded(TokioIo<hyper::upgrade::Upgraded>),
}

impl TunnelIo {
    /// The tunnel's connection, and the bytes the client sent after its
    /// `CONNECT` head that the HTTP library had already read (to be read
    /// first; empty when the connection stays the library's, which
    /// replays them itself).
    fn take(upgraded: hyper::upgrade::Upgraded) -> (TunnelIo, Vec<u8>) {
        match upgraded.downcast::<InterimIo<SendfileIo>>() {
            Ok(parts) => match parts.io.into_inner() {
                Ok(io) => (TunnelIo::Tcp(io.into_tcp()), parts.read_buf.to_vec()),
                Err(io) => (TunnelIo::Interim(TokioIo::new(io)), parts.read_buf.to_vec()),
            },
            Err(upgraded) => (TunnelIo::Upgraded(TokioIo::new(upgraded)), Vec::new()),
        }
    }
}

/// Evaluates `$call` with `$io` bound to whichever connection a
/// [`TunnelIo`] holds.
macro_rules! each_io {
    ($self:expr, $io:ident => $call:expr) => {
        match $self.get_mut() {
            TunnelIo::Tcp($io) => $call,
            TunnelIo::Interim($io) => $call,
            TunnelIo::Upgraded($io) => $call,
        }
    };
}

impl AsyncRead for TunnelIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        each_io!(self, io => Pin::new(io).poll_read(cx, buf))
    }
}

impl AsyncWrite for TunnelIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        each_io!(self, io => Pin::new(io).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        each_io!(self, io => Pin::new(io).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            TunnelIo::Tcp(io) => io.is_write_vectored(),
            TunnelIo::Interim(io) => io.is_write_vectored(),
            TunnelIo::Upgraded(io) => io.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each_io!(self, io => Pin::new(io).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each_io!(self, io => Pin::new(io).poll_shutdown(cx))
    }
}

/// A connection whose first bytes were already read: they are read again
/// first, then the connection itself.
struct Rewind<IO> {
    prefix: Vec<u8>,
    at: usize,
    inner: IO,
}

impl<IO> Rewind<IO> {
    fn new(prefix: Vec<u8>, inner: IO) -> Rewind<IO> {
        Rewind { prefix, at: 0, inner }
    }

    fn prefix_len(&self) -> usize {
        self.prefix.len()
    }

    /// The bytes not yet read again, and the connection.
    fn into_parts(self) -> (Vec<u8>, IO) {
        let mut prefix = self.prefix;
        prefix.drain(..self.at);
        (prefix, self.inner)
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Rewind<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.at < self.prefix.len() {
            let n = (self.prefix.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.prefix[at..at + n]);
            self.at += n;
            if self.at == self.prefix.len() {
                self.prefix = Vec::new();
                self.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Rewind<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn first_bytes_tell_tls_http_websocket_and_the_rest_apart() {
        assert_eq!(classify_tunnel(b"\x16\x03\x01\x02\x00"), TunnelContent::Tls);
        assert_eq!(classify_tunnel(b""), TunnelContent::Unknown);
        assert_eq!(classify_tunnel(b"GE"), TunnelContent::Unknown);
        assert_eq!(classify_tunnel(b"GET /page HT"), TunnelContent::Unknown);
        assert_eq!(classify_tunnel(b"GET /page HTTP/1.1\r\nHost: e"), TunnelContent::Unknown);
        assert_eq!(
            classify_tunnel(b"GET /page HTTP/1.1\r\nHost: example.com\r\n\r\n"),
            TunnelContent::Http
        );
        assert_eq!(
            classify_tunnel(b"POST /f HTTP/1.0\r\nContent-Length: 1\r\n\r\nx"),
            TunnelContent::Http
        );
        let ws = b"GET /chat HTTP/1.1\r\nHost: e\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        assert_eq!(classify_tunnel(ws), TunnelContent::WebSocket);
        assert_eq!(classify_tunnel(b"SSH-2.0-OpenSSH_9.2\r\n"), TunnelContent::Other);
        assert_eq!(classify_tunnel(b"\x00\x01binary"), TunnelContent::Other);
        assert_eq!(classify_tunnel(b"GET /x SPDY/3\r\n"), TunnelContent::Other);
        assert_eq!(classify_tunnel(b"EHLO"), TunnelContent::Unknown);
        assert_eq!(classify_tunnel(b"EHLO example.com\r\n"), TunnelContent::Other);
    }

    #[tokio::test]
    async fn rewind_reads_the_prefix_then_the_connection() {
        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(b" world").await.unwrap();
        drop(a);
        let mut r = Rewind::new(b"hello".to_vec(), b);
        let mut out = String::new();
        r.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "hello world");
    }
}
