//! HTTP/2 to origins (RFC 9113): one multiplexed connection per origin.
//!
//! An `https://` origin is asked for `h2` by ALPN, `http/1.1` offered as
//! the fallback (RFC 9113 section 3.2); a plain `http://` origin listed in
//! `upstream.h2c_hosts` is spoken to with prior knowledge (section 3.3).
//! What this module keeps, per origin (scheme and authority; no coalescing
//! of connections across hosts, section 9.1.1):
//!
//! - **one connection**, shared by every request to the origin from every
//!   serving thread. Connecting is one at a time per origin: requests that
//!   arrive while the first connection is being opened wait for it instead
//!   of racing connections of their own (hyper-util's pool races several
//!   and cancels the extras once ALPN says h2), so 64 cold misses open one
//!   connection. A connection that closed (`GOAWAY`, an error, the origin
//!   hung up) is replaced by the next request.
//! - **what the origin chose**: an origin that answered `http/1.1` by ALPN
//!   is remembered (at most [`MAX_HTTP1_ORIGINS`]) and its later requests
//!   go to the pooled HTTP/1.1 clients of [`super::origin::Upstream`]; the
//!   request that found out is sent on the HTTP/1.1 connection it opened.
//!
//! The HTTP/2 library (hyper 1 over the `h2` crate, 0.4) keeps the rest: the
//! origin's `SETTINGS_MAX_CONCURRENT_STREAMS` (requests beyond it wait for
//! a stream), server push refused (`SETTINGS_ENABLE_PUSH` 0), flow control,
//! connection-specific fields left out of what is sent (section 8.2.2).
//! Our settings: [`H2_STREAM_WINDOW`], [`H2_CONNECTION_WINDOW`], a PING
//! every [`H2_PING_INTERVAL`] (the connection closed when one is not
//! answered within [`H2_PING_TIMEOUT`]), response field sections bounded
//! by `upstream.max_head_bytes`, idle connections closed after
//! `upstream.pool_idle_timeout`, and SETTINGS and PING floods refused
//! ([`crate::wire::h2_guard`]).

use super::error::HeadLimits;
use super::parent::Connector;
use crate::wire::body::ProxyBody;
use crate::wire::h2_guard::FrameGuard;
use crawlcache_base::locks::lock;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::client::legacy::connect::Connection;
use hyper_util::rt::TokioIo;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections to origins opened over HTTP/2, since the process started.
pub static CONNECTIONS_OPENED: AtomicU64 = AtomicU64::new(0);
/// Requests sent to origins over HTTP/2, since the process started.
pub static REQUESTS_SENT: AtomicU64 = AtomicU64::new(0);
/// Connections the HTTP/2 client opened and found the origin choosing
/// `http/1.1` (one per origin, then remembered).
pub static H1_FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// Flow-control window of each stream we receive on (RFC 9113 section
/// 6.9.2), in bytes: 2 MiB, so a 256 KiB body arrives without waiting for
/// a `WINDOW_UPDATE`.
pub const H2_STREAM_WINDOW: u32 = 2 * 1024 * 1024;
/// Flow-control window of a whole connection we receive on, in bytes.
pub const H2_CONNECTION_WINDOW: u32 = 8 * 1024 * 1024;
/// How often a connection is pinged (also while idle).
pub const H2_PING_INTERVAL: Duration = Duration::from_secs(30);
/// How long a PING may go unanswered before the connection is closed.
pub const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Origins remembered as choosing `http/1.1`; the set is emptied when full.
pub const MAX_HTTP1_ORIGINS: usize = 65_536;
/// Origins with a connection slot kept; slots without a live connection
/// are dropped when there are more.
const MAX_SLOTS: usize = 4096;

/// How an origin is asked to speak HTTP/2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H2Mode {
    /// TLS with ALPN `h2` then `http/1.1`: the origin chooses.
    Alpn,
    /// HTTP/2 with prior knowledge on a plain connection (h2c).
    PriorKnowledge,
}

/// Why an exchange on the HTTP/2 client failed: the error, and whether the
/// connection could not be opened at all.
#[derive(Debug)]
pub struct H2Failure {
    /// The cause (a connector error, or the HTTP library's).
    pub error: Box<dyn std::error::Error + Send + Sync>,
    /// True when no connection could be opened (DNS, connect, TLS).
    pub connect: bool,
}

impl H2Failure {
    fn connect(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> H2Failure {
        H2Failure { error: error.into(), connect: true }
    }

    fn exchange(error: hyper::Error) -> H2Failure {
        H2Failure { error: Box::new(error), connect: false }
    }

    /// True when the request may be sent again on another stream or
    /// connection, as nothing of it was processed: the origin refused the
    /// stream (`REFUSED_STREAM`, RFC 9113 section 8.7) or sent `GOAWAY`
    /// before it (section 6.8), or the connection closed before a response.
    pub fn retryable(&self) -> bool {
        if self.connect {
            return false;
        }
        let mut src: Option<&(dyn std::error::Error + 'static)> = Some(self.error.as_ref());
        while let Some(e) = src {
            if let Some(h2) = e.downcast_ref::<h2::Error>() {
                return h2.reason() == Some(h2::Reason::REFUSED_STREAM)
                    || (h2.is_go_away() && h2.is_remote())
                    || h2.is_io();
            }
            if let Some(h) = e.downcast_ref::<hyper::Error>() {
                if h.is_canceled() || h.is_closed() {
                    return true;
                }
            }
            src = e.source();
        }
        false
    }
}

impl H2Failure {
    /// True when only the request's stream failed (`RST_STREAM`), not the
    /// connection under it.
    fn stream_only(&self) -> bool {
        let mut src: Option<&(dyn std::error::Error + 'static)> = Some(self.error.as_ref());
        while let Some(e) = src {
            if let Some(h2) = e.downcast_ref::<h2::Error>() {
                return h2.is_reset();
            }
            src = e.source();
        }
        false
    }
}

impl std::fmt::Display for H2Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for H2Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.error.as_ref())
    }
}

/// The HTTP/2 connections to origins, one per origin (see the module
/// documentation). Shared by every serving thread.
pub struct H2Pool {
    /// TLS with ALPN `h2`, `http/1.1`; plain TCP for h2c; through the parent
    /// proxy where it routes.
    connector: Connector,
    limits: HeadLimits,
    idle_timeout: Duration,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    http1_origins: Mutex<HashSet<String>>,
    http1_count: AtomicUsize,
}

/// One origin's connection, and the turn to open it.
#[derive(Default)]
struct Slot {
    live: Mutex<Option<Live>>,
    connecting: tokio::sync::Mutex<()>,
    /// When opening a connection last failed, and why: requests that
    /// waited for that attempt fail with it instead of trying again one
    /// after the other.
    failed: Mutex<Option<(Instant, Arc<H2Failure>)>>,
}

/// An open connection: the handle streams are opened with, when it was
/// last used, and its streams.
struct Live {
    sender: SendRequest<ProxyBody>,
    used: Instant,
    /// Which connection this is ([`CONNECTIONS_OPENED`] when it opened).
    id: u64,
    /// Its streams open and when the last one ended.
    streams: Arc<Streams>,
}

/// The streams of a connection: requests sent on it whose response body
/// has not ended ([`OpenStream`]), and when the last one ended. A
/// connection is in use while any is open, and until `idle` after the
/// last one ended, as after the last request sent.
#[derive(Default)]
struct Streams {
    open: AtomicUsize,
    last_ended: Mutex<Option<Instant>>,
}

impl Live {
    /// Whether the connection has gone `idle` without a request sent or
    /// a stream ending, and has no stream open.
    fn is_idle(&self, idle: Duration) -> bool {
        self.used.elapsed() >= idle
            && self.streams.open.load(Ordering::Acquire) == 0
            && lock(&self.streams.last_ended).is_none_or(|t| t.elapsed() >= idle)
    }
}

/// What a request on an HTTP/2 connection holds: its place among the
/// connection's open streams, given up when dropped (which
/// counts as using the connection). It goes with the response's body (in
/// the response's extensions, taken out by
/// [`super::origin::Upstream::send`] into [`crate::wire::body::Inbound`]),
/// or is dropped with a request that failed.
pub struct OpenStream(Arc<Streams>);

impl OpenStream {
    fn new(streams: &Arc<Streams>) -> OpenStream {
        streams.open.fetch_add(1, Ordering::AcqRel);
        OpenStream(streams.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        // When it ended first, so that whoever sees no stream open sees it.
        *lock(&self.0.last_ended) = Some(Instant::now());
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's handle, its number and its streams.
type Handle = (SendRequest<ProxyBody>, u64, Arc<Streams>);

impl Slot {
    /// The connection, when one is open and is not idle (used within
    /// `idle`, or with a stream open).
    fn sender(&self, idle: Duration) -> Option<Handle> {
        let mut live = lock(&self.live);
        match live.as_mut() {
            Some(l) if !l.sender.is_closed() && !l.is_idle(idle) => {
                l.used = Instant::now();
                Some((l.sender.clone(), l.id, l.streams.clone()))
            }
            _ => {
                *live = None;
                None
            }
        }
    }

    /// Forgets connection `id` (a request on it failed with a connection
    /// error: the next request opens another rather than meeting it before
    /// the library has marked it closed).
    fn forget(&self, id: u64) {
        let mut live = lock(&self.live);
        if live.as_ref().is_some_and(|l| l.id == id) {
            *live = None;
        }
    }
}

/// What [`H2Pool::send`] did with a request.
pub enum Sent {
    /// It was sent; the response head.
    Response(Response<Incoming>),
    /// It was not sent: the origin chose `http/1.1` while the request
    /// waited for the connection; it goes to the HTTP/1.1 clients.
    UseHttp1(Box<Request<ProxyBody>>),
}

/// What opening a connection gave.
enum Opened {
    /// An HTTP/2 connection, and its number.
    H2(SendRequest<ProxyBody>, u64),
    /// The origin chose `http/1.1` by ALPN: the connection, to send one
    /// request on.
    Http1(Box<<Connector as tower_service::Service<Uri>>::Response>),
}

impl H2Pool {
    /// A pool opening connections with `connector` (whose TLS configuration
    /// offers `h2`), response heads bounded by `limits`, connections closed
    /// after `idle_timeout` without a request.
    pub fn new(connector: Connector, limits: HeadLimits, idle_timeout: Duration) -> H2Pool {
        H2Pool {
            connector,
            limits,
            idle_timeout,
            slots: Mutex::new(HashMap::new()),
            http1_origins: Mutex::new(HashSet::new()),
            http1_count: AtomicUsize::new(0),
        }
    }

    /// True when the origin `key` (`scheme://authority`) chose `http/1.1`
    /// before.
    pub fn chose_http1(&self, key: &str) -> bool {
        self.http1_count.load(Ordering::Acquire) > 0 && lock(&self.http1_origins).contains(key)
    }

    fn remember_http1(&self, key: &str) {
        let mut set = lock(&self.http1_origins);
        if set.len() >= MAX_HTTP1_ORIGINS {
            set.clear();
        }
        set.insert(key.to_string());
        self.http1_count.store(set.len(), Ordering::Release);
    }

    fn slot(&self, key: &str) -> Arc<Slot> {
        let mut slots = lock(&self.slots);
        if let Some(s) = slots.get(key) {
            return s.clone();
        }
        if slots.len() >= MAX_SLOTS {
            slots.retain(|_, s| Arc::strong_count(s) > 1 || lock(&s.live).is_some());
        }
        slots.entry(key.to_string()).or_default().clone()
    }

    /// Open HTTP/2 connections to origins, by origin (`scheme://authority`),
    /// for the status page.
    pub fn open_connections(&self) -> Vec<(String, usize)> {
        let slots = lock(&self.slots);
        let mut open: Vec<(String, usize)> = slots
            .iter()
            .filter(|(_, s)| lock(&s.live).as_ref().is_some_and(|l| !l.sender.is_closed()))
            .map(|(k, _)| (k.clone(), 1))
            .collect();
        open.sort();
        open
    }

    /// Sends `req` (an absolute URI) to its origin `key` over the origin's
    /// HTTP/2 connection, opening it first when there is none (one opening
    /// at a time per origin), and waits for the response head. An origin
    /// that chooses `http/1.1` gets this request over HTTP/1.1 on the
    /// connection just opened, and is remembered ([`H2Pool::chose_http1`]);
    /// requests that waited for that connection come back as
    /// [`Sent::UseHttp1`]. Errors: [`H2Failure`].
    pub async fn send(
        &self,
        key: &str,
        mut req: Request<ProxyBody>,
        mode: H2Mode,
    ) -> Result<Sent, H2Failure> {
        let slot = self.slot(key);
        let sender = match slot.sender(self.idle_timeout) {
            Some(s) => s,
            None => {
                let asked = Instant::now();
                let turn = slot.connecting.lock().await;
                match slot.sender(self.idle_timeout) {
                    // Opened by the request whose turn came first.
                    Some(s) => s,
                    None => {
                        if mode == H2Mode::Alpn && self.chose_http1(key) {
                            return Ok(Sent::UseHttp1(Box::new(req)));
                        }
                        let failed = lock(&slot.failed).clone();
                        if let Some((at, first)) = failed.filter(|(at, _)| *at >= asked) {
                            let waited_ms = at.saturating_duration_since(asked).as_millis();
                            return Err(H2Failure::connect(WaitedFor { first, waited_ms }));
                        }
                        match self.open(req.uri().clone(), mode).await {
                            Ok(Opened::H2(s, id)) => {
                                let streams = Arc::new(Streams::default());
                                *lock(&slot.live) = Some(Live {
                                    sender: s.clone(),
                                    used: Instant::now(),
                                    id,
                                    streams: streams.clone(),
                                });
                                close_when_idle(Arc::downgrade(&slot), self.idle_timeout);
                                (s, id, streams)
                            }
                            Ok(Opened::Http1(io)) => {
                                self.remember_http1(key);
                                drop(turn);
                                H1_FALLBACKS.fetch_add(1, Ordering::Relaxed);
                                tracing::debug!("origin {key} chose http/1.1 by ALPN; its requests go over HTTP/1.1 from now on");
                                return self.send_http1_once(*io, req).await.map(Sent::Response);
                            }
                            Err(e) if e.connect => {
                                let first = Arc::new(e);
                                *lock(&slot.failed) = Some((Instant::now(), first.clone()));
                                return Err(H2Failure::connect(WaitedFor { first, waited_ms: 0 }));
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
        };
        prepare_h2(&mut req);
        REQUESTS_SENT.fetch_add(1, Ordering::Relaxed);
        let (mut sender, id, streams) = sender;
        let open = OpenStream::new(&streams);
        let sent = match sender.ready().await {
            Ok(()) => sender.send_request(req).await,
            Err(e) => Err(e),
        };
        sent.map(|mut resp| {
            resp.extensions_mut().insert(Arc::new(open));
            Sent::Response(resp)
        })
        .map_err(|e| {
            let failure = H2Failure::exchange(e);
            if !failure.stream_only() {
                slot.forget(id);
            }
            failure
        })
    }

    /// Opens a connection to the origin of `uri`: TLS asking for `h2` by
    /// ALPN, or plain for h2c; the HTTP/2 handshake when the origin speaks
    /// it, its connection driven by a task of its own.
    async fn open(&self, uri: Uri, mode: H2Mode) -> Result<Opened, H2Failure> {
        let mut connector = self.connector.clone();
        std::future::poll_fn(|cx| tower_service::Service::poll_ready(&mut connector, cx))
            .await
            .map_err(H2Failure::connect)?;
        let io =
            tower_service::Service::call(&mut connector, uri).await.map_err(H2Failure::connect)?;
        if mode == H2Mode::Alpn && !io.connected().is_negotiated_h2() {
            return Ok(Opened::Http1(Box::new(io)));
        }
        let mut builder =
            hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
        builder
            .timer(hyper_util::rt::TokioTimer::new())
            .initial_stream_window_size(H2_STREAM_WINDOW)
            .initial_connection_window_size(H2_CONNECTION_WINDOW)
            .max_header_list_size(u32::try_from(self.limits.max_bytes).unwrap_or(u32::MAX))
            .keep_alive_interval(H2_PING_INTERVAL)
            .keep_alive_timeout(H2_PING_TIMEOUT)
            .keep_alive_while_idle(true);
        // SETTINGS and PING floods from the origin (crate::wire::h2_guard).
        let io = TokioIo::new(FrameGuard::new(TokioIo::new(io), 0));
        let (sender, conn) = builder.handshake(io).await.map_err(H2Failure::exchange)?;
        let id = CONNECTIONS_OPENED.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("HTTP/2 connection to an origin ended with an error: {e}");
            }
        });
        Ok(Opened::H2(sender, id))
    }

    /// Sends `req` over HTTP/1.1 on `io`, a connection whose origin chose
    /// `http/1.1` by ALPN, with the same tolerance and head limits as the
    /// pooled HTTP/1.1 clients; the connection closes after the response.
    async fn send_http1_once(
        &self,
        io: <Connector as tower_service::Service<Uri>>::Response,
        mut req: Request<ProxyBody>,
    ) -> Result<Response<Incoming>, H2Failure> {
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            .allow_spaces_after_header_name_in_responses(true)
            .allow_obsolete_multiline_headers_in_responses(true)
            .max_headers(self.limits.max_fields)
            .max_buf_size(self.limits.max_bytes.max(8192))
            .handshake(io)
            .await
            .map_err(H2Failure::exchange)?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("HTTP/1.1 connection to an origin ended with an error: {e}");
            }
        });
        // Origin form on the request line (RFC 9112 section 3.2.1), so
        // `Host` carries the authority (section 3.2): a request made by
        // crawlcache itself (a robots.txt fetch) may not have it yet, and
        // this connection, unlike the pooled clients, adds nothing.
        if !req.headers().contains_key(http::header::HOST) {
            if let Some(host) = crawlcache_policy::upstream_fields::host_field(req.uri()) {
                req.headers_mut().insert(http::header::HOST, host);
            }
        }
        let path = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_string();
        if let Ok(p) = path.parse() {
            *req.uri_mut() = p;
        }
        sender.send_request(req).await.map_err(H2Failure::exchange)
    }
}

/// Makes an HTTP/1.1-shaped request to an origin an HTTP/2 one: the
/// version, and no `Host` field where `:authority` says the same (RFC 9113
/// section 8.3.1). Connection-specific fields are left out by the HTTP
/// library itself (section 8.2.2), `TE` but for `trailers` too.
fn prepare_h2(req: &mut Request<ProxyBody>) {
    *req.version_mut() = http::Version::HTTP_2;
    let same = match (req.headers().get(http::header::HOST), req.uri().authority()) {
        (Some(h), Some(a)) => h.as_bytes().eq_ignore_ascii_case(a.as_str().as_bytes()),
        _ => false,
    };
    if same {
        req.headers_mut().remove(http::header::HOST);
    }
}

/// A failure to open a connection, shared with the requests that waited
/// for that attempt: its sources are the original error's, so the 502 or
/// 504 each of them gets names the same cause (a TLS failure, the parent
/// proxy, DNS) as the first request's.
#[derive(Debug)]
struct WaitedFor {
    first: Arc<H2Failure>,
    /// How long the request waited for the attempt, in milliseconds (0 for
    /// the request that made it).
    waited_ms: u128,
}

impl std::fmt::Display for WaitedFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.waited_ms {
            0 => self.first.fmt(f),
            ms => write!(f, "{} (the connection this request waited {ms} ms for)", self.first),
        }
    }
}

impl std::error::Error for WaitedFor {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.first.error.as_ref())
    }
}

/// Closes the connection of `slot` once it has gone `idle` without a
/// request sent or a stream ending, and with no stream open (the HTTP/2 library closes a
/// connection whose last handle is dropped, once its streams are done);
/// the task ends with the connection.
fn close_when_idle(slot: std::sync::Weak<Slot>, idle: Duration) {
    tokio::spawn(async move {
        let mut wait = idle;
        loop {
            tokio::time::sleep(wait).await;
            let Some(slot) = slot.upgrade() else { return };
            let mut live = lock(&slot.live);
            match live.as_ref() {
                Some(l) if !l.sender.is_closed() => {
                    if l.is_idle(idle) {
                        *live = None;
                        return;
                    }
                    // Used lately or streams open: looked at again when it
                    // could be idle, a quarter of `idle` apart at the least
                    // (a stream's end counts from when it ended).
                    wait = idle.saturating_sub(l.used.elapsed()).max(idle / 4);
                }
                _ => return,
            }
        }
    });
}
