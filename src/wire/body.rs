//! The one response body type the proxy sends to clients.
//!
//! A body is either a small buffer (error pages, admin answers), an upstream
//! body passed straight through, a channel fed by a task that is also
//! writing the body to the store, a stored body file read in chunks, or
//! the received part of a short body the origin cut short.
//! Nothing here holds a whole large body in memory.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Error type of [`ProxyBody`]: any error aborts the client connection,
/// which is how a client learns a transfer was cut short.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// Size of the chunks read from a stored body file, in bytes.
pub const FILE_CHUNK: usize = 256 * 1024;

/// A response body sent by the proxy.
#[allow(
    clippy::large_enum_variant,
    reason = "one per response, moved a few times: boxing the audit guard would allocate on every hit"
)]
pub enum ProxyBody {
    /// A complete, small body (or none).
    Full(Option<Bytes>),
    /// A body received from a peer, forwarded as it arrives: an origin's
    /// response body (holding the origin's turn, see [`Inbound`]) or a
    /// client's request body on its way to the origin.
    Upstream(Inbound),
    /// Chunks produced by a task (the store tee). An `Err` chunk aborts.
    Channel {
        /// The chunks, in order.
        rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
        /// The body's length when known (`Content-Length`), in bytes.
        len: Option<u64>,
    },
    /// A stored body file, `remaining` bytes left to read.
    File {
        /// The open body file, positioned at the next byte to send.
        file: std::fs::File,
        /// Bytes left to send.
        remaining: u64,
    },
    /// The part of a body that arrived before the origin cut it short, then
    /// the error: the chunks, one `Pending` (so that what came before goes
    /// out first, as it would have streamed), then the error, which aborts.
    Cut {
        /// The chunks received, in order.
        chunks: std::collections::VecDeque<Bytes>,
        /// The error that cut the body, sent after the chunks.
        error: Option<std::io::Error>,
        /// Whether the one `Pending` before the error was returned.
        paused: bool,
        /// The length the origin announced, in bytes.
        len: Option<u64>,
    },
    /// Another body whose bytes are counted for the audit line, written when
    /// the body is done or dropped.
    Audited(Box<ProxyBody>, AuditGuard),
}

/// The access-log line of one request (method, URL, status, outcome,
/// bytes, duration, robots verdict), written when the response body is
/// done: to the access log ([`crate::access`]) with `fields`, and, in the
/// old form of `server.access_log`, at `level` with the tracing target
/// `crawlcache::access`. Method and URL are those of the request's audit
/// record.
#[derive(Debug, Clone)]
pub struct AccessLine {
    /// The level to log at in the old form; `None` for none.
    pub level: Option<tracing::Level>,
    /// Response status code.
    pub status: u16,
    /// The request's class: `hit`, `stale`, `revalidated`, `miss`, `pass`,
    /// `refused` or `error` in logs
    /// ([`crawlcache_policy::cache_status::CacheStatus::outcome_for`]).
    pub outcome: crawlcache_policy::cache_status::Outcome,
    /// `allowed`, `disallowed`, or `-` when robots handling is off.
    pub robots: &'static str,
    /// The rest of the access log's fields, gathered only when an access
    /// log is written.
    pub fields: Option<Box<AccessFields>>,
}

/// The fields of an access-log line that the audit record does not hold.
#[derive(Debug, Clone)]
pub struct AccessFields {
    /// The client's address and port.
    pub client: std::net::SocketAddr,
    /// The request's `User-Agent`.
    pub user_agent: Option<String>,
    /// The HTTP version the client spoke.
    pub client_version: http::Version,
    /// The HTTP version of the upstream response, if one was received.
    pub upstream_version: Option<http::Version>,
    /// Squid's result code ([`crate::access::format::squid_code`]).
    pub squid_code: &'static str,
    /// Squid's hierarchy code and the peer contacted, when one was.
    pub peer: Option<(&'static str, String)>,
    /// The response's media type.
    pub content_type: Option<String>,
}

impl AccessLine {
    /// `level` when a subscriber would record an access line at it, so a
    /// request whose line nobody reads costs nothing more.
    pub fn level_if_enabled(level: Option<tracing::Level>) -> Option<tracing::Level> {
        let on = match level? {
            tracing::Level::ERROR => {
                tracing::enabled!(target: "crawlcache::access", tracing::Level::ERROR)
            }
            tracing::Level::WARN => {
                tracing::enabled!(target: "crawlcache::access", tracing::Level::WARN)
            }
            tracing::Level::INFO => {
                tracing::enabled!(target: "crawlcache::access", tracing::Level::INFO)
            }
            tracing::Level::DEBUG => {
                tracing::enabled!(target: "crawlcache::access", tracing::Level::DEBUG)
            }
            tracing::Level::TRACE => {
                tracing::enabled!(target: "crawlcache::access", tracing::Level::TRACE)
            }
        };
        on.then_some(level?)
    }

    fn log(&self, method: &str, url: &str, bytes: u64, ms: u64) {
        let Some(level) = self.level else { return };
        macro_rules! emit {
            ($lvl:expr) => {
                tracing::event!(
                    target: "crawlcache::access",
                    $lvl,
                    "{} {} {} {} {}B {}ms robots={}",
                    method, url, self.status, self.outcome.as_str(), bytes, ms, self.robots
                )
            };
        }
        match level {
            tracing::Level::ERROR => emit!(tracing::Level::ERROR),
            tracing::Level::WARN => emit!(tracing::Level::WARN),
            tracing::Level::INFO => emit!(tracing::Level::INFO),
            tracing::Level::DEBUG => emit!(tracing::Level::DEBUG),
            tracing::Level::TRACE => emit!(tracing::Level::TRACE),
        }
    }
}

/// What holds an [`crate::audit::AuditLog`] (the proxy's state; the log itself), so that
/// a response can keep its owner alive until its audit line is written.
pub trait HasAuditLog: Send + Sync {
    /// The audit log.
    fn audit_log(&self) -> &crate::audit::AuditLog;

    /// Called once a response has ended, with its audit line (before it
    /// is written), the status sent and the request's class (`hit`,
    /// `miss`, ... as the access log names it). Nothing by default; the
    /// proxy counts what the status page shows.
    fn request_done(
        &self,
        _record: &crate::audit::AuditRecord,
        _status: u16,
        _outcome: &'static str,
    ) {
    }

    /// Called once a response has ended, after [`HasAuditLog::request_done`],
    /// with its audit line, its access-log line and the time since the
    /// request arrived. Nothing by default; the proxy times the request
    /// and writes the access log.
    fn request_ended(
        &self,
        _record: &crate::audit::AuditRecord,
        _access: &AccessLine,
        _elapsed: std::time::Duration,
    ) {
    }
}

impl HasAuditLog for crate::audit::AuditLog {
    fn audit_log(&self) -> &crate::audit::AuditLog {
        self
    }
}

/// Writes a request's audit line and access-log line once its response
/// body is finished (or abandoned), with the bytes actually sent and the
/// elapsed milliseconds.
pub struct AuditGuard {
    log: std::sync::Arc<dyn HasAuditLog>,
    record: Option<crate::audit::AuditRecord>,
    access: AccessLine,
    started: std::time::Instant,
    bytes: u64,
}

impl AuditGuard {
    /// A guard that will append `record` to the audit log of `log` and log
    /// `access`. `log` is whatever owns the log (the proxy's state, whose
    /// reference the request holds already: no count is taken for it).
    pub fn new(
        log: std::sync::Arc<dyn HasAuditLog>,
        record: crate::audit::AuditRecord,
        access: AccessLine,
        started: std::time::Instant,
    ) -> AuditGuard {
        AuditGuard { log, record: Some(record), access, started, bytes: 0 }
    }
}

impl Drop for AuditGuard {
    fn drop(&mut self) {
        if let Some(mut r) = self.record.take() {
            r.bytes = self.bytes;
            let elapsed = self.started.elapsed();
            r.ms = elapsed.as_millis() as u64;
            self.access.log(&r.method, &r.url, r.bytes, r.ms);
            self.log.request_done(&r, self.access.status, self.access.outcome.as_str());
            self.log.request_ended(&r, &self.access, elapsed);
            let log = self.log.audit_log();
            if let Err(e) = log.append(&r) {
                tracing::warn!("cannot write the audit log in {}: {e}", log.dir().display());
            }
        }
    }
}

impl ProxyBody {
    /// An empty body.
    pub fn empty() -> ProxyBody {
        ProxyBody::Full(None)
    }

    /// A body holding `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
        let b: Bytes = bytes.into();
        if b.is_empty() {
            ProxyBody::Full(None)
        } else {
            ProxyBody::Full(Some(b))
        }
    }
}

/// A body arriving from a peer, as the HTTP library delivers it. An
/// origin's response body holds the origin's turn under
/// `upstream.max_in_flight_per_origin` (a permit from
/// [`crate::upstream::in_flight::InFlight`]) and, over HTTP/2, its place
/// among its connection's open streams
/// ([`crate::upstream::h2::OpenStream`]: a connection with a stream open
/// is not idle) until its last frame or an error has been read, or until
/// it is dropped: politeness counts a request as in flight until its body
/// has arrived, not only its head. A client's request body holds none.
pub struct Inbound {
    body: hyper::body::Incoming,
    turn: Option<tokio::sync::OwnedSemaphorePermit>,
    stream: Option<std::sync::Arc<dyn Send + Sync>>,
}

impl std::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbound")
            .field("body", &self.body)
            .field("turn", &self.turn.is_some())
            .field("stream", &self.stream.is_some())
            .finish()
    }
}

impl Inbound {
    /// `body`, holding `turn` and `stream` (if any) until it ends or is
    /// dropped (at once when there is no body to come: a HEAD's, a 304's).
    pub fn new(
        body: hyper::body::Incoming,
        turn: Option<tokio::sync::OwnedSemaphorePermit>,
        stream: Option<std::sync::Arc<dyn Send + Sync>>,
    ) -> Inbound {
        let done = body.is_end_stream();
        Inbound { turn: turn.filter(|_| !done), stream: stream.filter(|_| !done), body }
    }
}

impl From<hyper::body::Incoming> for Inbound {
    fn from(body: hyper::body::Incoming) -> Inbound {
        Inbound { body, turn: None, stream: None }
    }
}

impl Body for Inbound {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) || this.body.is_end_stream() {
            // The exchange with the origin is over: its turn goes to the
            // next, its stream is no longer open.
            this.turn = None;
            this.stream = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        match this {
            ProxyBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Upstream(inc) => loop {
                match Pin::new(&mut *inc).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => {
                        // Trailers are not forwarded (they were never announced to the client).
                        if frame.is_data() {
                            return Poll::Ready(Some(Ok(frame)));
                        }
                    }
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(Box::new(e)))),
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                }
            },
            ProxyBody::Channel { rx, .. } => match rx.poll_recv(cx) {
                Poll::Ready(Some(Ok(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(e)))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
            ProxyBody::Cut { chunks, error, paused, .. } => {
                if let Some(c) = chunks.pop_front() {
                    return Poll::Ready(Some(Ok(Frame::data(c))));
                }
                if !*paused {
                    *paused = true;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                match error.take() {
                    Some(e) => Poll::Ready(Some(Err(Box::new(e)))),
                    None => Poll::Ready(None),
                }
            }
            ProxyBody::Audited(inner, guard) => {
                let r = Pin::new(inner.as_mut()).poll_frame(cx);
                if let Poll::Ready(Some(Ok(f))) = &r {
                    if let Some(d) = f.data_ref() {
                        guard.bytes += d.len() as u64;
                    }
                }
                r
            }
            ProxyBody::File { file, remaining } => {
                if *remaining == 0 {
                    return Poll::Ready(None);
                }
                // Stored bodies are read synchronously in bounded chunks: they
                // are almost always in the page cache, and a thread hop per
                // chunk costs more than the copy.
                let want = (*remaining).min(FILE_CHUNK as u64) as usize;
                // Read into uninitialised capacity: no zeroing pass.
                let mut buf = Vec::with_capacity(want);
                if let Err(e) = (&mut *file).take(want as u64).read_to_end(&mut buf) {
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                let filled = buf.len();
                if filled == 0 {
                    // The file is shorter than the index says: abort rather than
                    // send a body that does not match its Content-Length.
                    *remaining = 0;
                    return Poll::Ready(Some(Err(
                        "stored body file is shorter than recorded".into()
                    )));
                }
                *remaining -= filled as u64;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(b) => b.is_none(),
            ProxyBody::Upstream(inc) => inc.is_end_stream(),
            ProxyBody::Channel { .. } => false,
            ProxyBody::Cut { .. } => false,
            ProxyBody::File { remaining, .. } => *remaining == 0,
            ProxyBody::Audited(inner, _) => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(b) => {
                SizeHint::with_exact(b.as_ref().map(|b| b.len() as u64).unwrap_or(0))
            }
            ProxyBody::Upstream(inc) => inc.size_hint(),
            ProxyBody::Channel { len: Some(n), .. } => SizeHint::with_exact(*n),
            ProxyBody::Channel { len: None, .. } => SizeHint::default(),
            ProxyBody::Cut { len: Some(n), .. } => SizeHint::with_exact(*n),
            ProxyBody::Cut { len: None, .. } => SizeHint::default(),
            ProxyBody::File { remaining, .. } => SizeHint::with_exact(*remaining),
            ProxyBody::Audited(inner, _) => inner.size_hint(),
        }
    }
}
