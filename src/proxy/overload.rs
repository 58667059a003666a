//! Limits under load: the open-file limit, `server.max_connections`, and
//! what a client connection beyond it gets.
//!
//! **The open-file limit.** Every client connection is a file descriptor,
//! and so is every origin connection, body file, pack segment and index
//! file. At start the soft limit is raised to the hard limit
//! ([`raise_open_file_limit`]; both are logged): the default soft limit of
//! most systems (1,024) is far below what a crawler's connection pool and
//! its origin connections need.
//!
//! **`server.max_connections`.** Client connections are served up to this
//! many at once (plain and intercepted HTTPS; 0 in the configuration
//! derives it from the open-file limit, [`derived_max_connections`]): each
//! may hold two descriptors (its own and one to an origin), and a reserve
//! ([`reserve`]) is left for the store, the index, the audit log, the fleet
//! engines and the connections beyond the limit, so that those can always
//! open what they need. The count is the one the proxy keeps anyway for
//! shutdown (`ProxyState::conns`), read once per accepted connection: the
//! request path pays nothing.
//!
//! **Beyond the limit** ([`super::overflow::over_limit`]) a new connection is never left
//! hanging and never served as a proxy connection: it gets a few seconds
//! ([`OVERFLOW_HEAD_TIMEOUT`]) to send one request. A request addressed to
//! crawlcache itself (origin-form: `/stats`, `/metrics`, the status page)
//! is answered as usual, so an operator can see what is going on exactly
//! when it matters; any other request gets `503 Service Unavailable` with
//! `Retry-After`, and the connection is closed. At most
//! [`Overload::overflow_slots`] connections wait for their request at once;
//! when they are all waiting, the one that has waited longest without
//! sending a byte is answered 503 to make room (so a flood of idle
//! connections cannot lock out an operator's `/stats`), and when every
//! slot is busy serving a request, the new connection gets the 503 at once.

use crate::wire::body::ProxyBody;
use crawlcache_policy::cache_status::CacheStatus;
use http::header::HeaderValue;
use http::{Response, StatusCode};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Descriptors one client connection may hold: its own, and one to the
/// origin it is forwarded to.
pub const FDS_PER_CONNECTION: u64 = 2;

/// The smallest reserve of descriptors kept beside the client connections.
pub const RESERVE_MIN: u64 = 64;

/// How long a connection beyond the limit has to send its request head.
pub const OVERFLOW_HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest a connection beyond the limit may take to be served (its
/// one request and the answer), so that a client that stops reading
/// cannot keep a slot.
pub const OVERFLOW_SERVE_TIMEOUT: Duration = Duration::from_secs(120);

/// The `Retry-After` of a 503 for too many connections, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

/// How often, at most, the log says that the limit was reached.
const WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// The process's open-file limit (`RLIMIT_NOFILE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FileLimit {
    /// The soft limit found at start, before it was raised.
    pub soft_at_start: u64,
    /// The soft limit in force.
    pub soft: u64,
    /// The hard limit (the most the soft limit may be raised to).
    pub hard: u64,
}

/// Why the open-file limit could not be read or raised.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// `getrlimit(RLIMIT_NOFILE)` failed.
    #[error("cannot read the open-file limit: {0}")]
    Read(std::io::Error),
    /// `setrlimit(RLIMIT_NOFILE)` refused the hard limit and the kernel's
    /// `fs.nr_open` alike; the soft limit stays where it was.
    #[error("cannot raise the soft open-file limit from {from} to {to}: {source}")]
    Raise {
        /// The soft limit kept.
        from: u64,
        /// The value asked for.
        to: u64,
        /// The error of the last attempt.
        source: std::io::Error,
    },
}

/// Reads `RLIMIT_NOFILE` without changing it (`soft_at_start` = `soft`).
/// Errors: [`LimitError::Read`].
pub fn open_file_limit() -> Result<FileLimit, LimitError> {
    let (soft, hard) = get_nofile().map_err(LimitError::Read)?;
    Ok(FileLimit { soft_at_start: soft, soft, hard })
}

/// Raises the soft open-file limit to the hard limit (or, when the hard
/// limit is unlimited or the kernel refuses it, to `/proc/sys/fs/nr_open`,
/// the most a process may open) and returns both limits. A soft limit
/// already at the hard limit is left alone. Errors: the limit cannot be
/// read, or neither value could be set ([`LimitError`]); the limit in
/// force is unchanged then.
pub fn raise_open_file_limit() -> Result<FileLimit, LimitError> {
    let (soft, hard) = get_nofile().map_err(LimitError::Read)?;
    if soft >= hard {
        return Ok(FileLimit { soft_at_start: soft, soft, hard });
    }
    let mut last = match set_nofile_soft(hard, hard) {
        Ok(()) => return Ok(FileLimit { soft_at_start: soft, soft: hard, hard }),
        Err(e) => e,
    };
    if let Some(nr_open) = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        let to = nr_open.min(hard);
        if to > soft {
            match set_nofile_soft(to, hard) {
                Ok(()) => return Ok(FileLimit { soft_at_start: soft, soft: to, hard }),
                Err(e) => last = e,
            }
        }
    }
    Err(LimitError::Raise { from: soft, to: hard, source: last })
}

// rlim_t is u64 on Linux x86_64, not on every target.
#[allow(clippy::unnecessary_cast)]
fn get_nofile() -> std::io::Result<(u64, u64)> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given, which lives here.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((r.rlim_cur as u64, r.rlim_max as u64))
}

fn set_nofile_soft(soft: u64, hard: u64) -> std::io::Result<()> {
    let r = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: setrlimit only reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The descriptors kept beside the client connections for an open-file
/// limit of `nofile`: [`RESERVE_MIN`] plus a sixteenth of the limit (store
/// and index files, body files being read and written, the audit log, the
/// fleet engines' connections, the connections beyond the limit).
pub fn reserve(nofile: u64) -> u64 {
    RESERVE_MIN + nofile / 16
}

/// The `server.max_connections` that `0` stands for under an open-file
/// limit of `nofile`: what is left after the [`reserve`], at
/// [`FDS_PER_CONNECTION`] each; at least 1.
pub fn derived_max_connections(nofile: u64) -> usize {
    let n = nofile.saturating_sub(reserve(nofile)) / FDS_PER_CONNECTION;
    usize::try_from(n).unwrap_or(usize::MAX).max(1)
}

/// How many connections beyond the limit may wait for their request at
/// once under an open-file limit of `nofile`: a quarter of the reserve,
/// from 4 to 256.
pub fn overflow_slots(nofile: u64) -> usize {
    (reserve(nofile) / 4).clamp(4, 256) as usize
}

/// The limits in force and the connections beyond them (see the module
/// docs). One per proxy ([`crate::proxy::ProxyState::overload`]).
pub struct Overload {
    /// The open-file limit when the proxy started (`None`: it could not be read).
    pub file_limit: Option<FileLimit>,
    /// The most client connections served at once (resolved: never 0).
    pub max_connections: usize,
    /// The most connections beyond the limit waiting for their request.
    pub overflow_slots: usize,
    /// Connections beyond the limit being handled now.
    overflow: AtomicUsize,
    /// Those of them still waiting for their first byte, oldest first,
    /// each with the sender that tells it to give up its slot (handing it
    /// the sender by which it says its socket is closed).
    waiting: Mutex<VecDeque<(u64, tokio::sync::oneshot::Sender<Closed>)>>,
    next_id: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
}

impl Overload {
    /// The limits for `configured` (`server.max_connections`; 0: derived
    /// from the soft limit of `file_limit`, 1,024 when it is unknown).
    pub fn new(configured: usize, file_limit: Option<FileLimit>) -> Overload {
        let nofile = file_limit.map_or(1024, |l| l.soft);
        let max_connections =
            if configured == 0 { derived_max_connections(nofile) } else { configured };
        Overload {
            file_limit,
            max_connections,
            overflow_slots: overflow_slots(nofile),
            overflow: AtomicUsize::new(0),
            waiting: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            last_warning: Mutex::new(None),
        }
    }

    /// Connections beyond the limit being handled now.
    pub fn overflow_now(&self) -> usize {
        self.overflow.load(Ordering::Relaxed)
    }

    /// A slot for a connection beyond the limit: a free one, or the slot of
    /// the connection that has waited longest for its request (told to give
    /// it up; the receiver resolves once its socket is closed); `None` when
    /// every slot is serving a request.
    pub(super) fn enter(
        self: &Arc<Self>,
    ) -> Option<(OverflowSlot, Option<tokio::sync::oneshot::Receiver<()>>)> {
        let mut waiting = crawlcache_base::locks::lock(&self.waiting);
        let mut closing = None;
        if self.overflow.load(Ordering::Relaxed) >= self.overflow_slots {
            let (_, evict) = waiting.pop_front()?;
            let (closed, rx) = tokio::sync::oneshot::channel();
            if evict.send(closed).is_ok() {
                closing = Some(rx);
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = tokio::sync::oneshot::channel();
        waiting.push_back((id, tx));
        self.overflow.fetch_add(1, Ordering::Relaxed);
        Some((OverflowSlot { overload: self.clone(), id, evicted: Some(rx) }, closing))
    }

    /// Logs, at most every [`WARNING_INTERVAL`], that the limit is reached.
    pub(super) fn warn(&self, open: usize) {
        let mut last = crawlcache_base::locks::lock(&self.last_warning);
        if last.is_some_and(|t| t.elapsed() < WARNING_INTERVAL) {
            return;
        }
        *last = Some(Instant::now());
        let limit = self.file_limit.map_or_else(|| "unknown".to_string(), |l| l.soft.to_string());
        tracing::warn!(
            "{open} client connections are open, server.max_connections is {}: new connections get 503 with Retry-After \
             (requests to crawlcache's own endpoints are still answered) until some close; open-file limit {limit}",
            self.max_connections
        );
    }
}

/// Told by a connection that gave up its slot once its socket is closed.
pub type Closed = tokio::sync::oneshot::Sender<()>;

/// How long the accept loop waits for a connection that gave up its slot
/// to close its socket (it runs on a serving thread's runtime).
pub const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// A connection's place among those beyond the limit; given back on drop.
pub(super) struct OverflowSlot {
    overload: Arc<Overload>,
    id: u64,
    /// Resolves when a newer connection takes this slot.
    pub(super) evicted: Option<tokio::sync::oneshot::Receiver<Closed>>,
}

impl OverflowSlot {
    /// No longer waiting for a first byte: the slot cannot be taken over.
    pub(super) fn started(&self) {
        crawlcache_base::locks::lock(&self.overload.waiting).retain(|(id, _)| *id != self.id);
    }
}

impl Drop for OverflowSlot {
    fn drop(&mut self) {
        self.started();
        self.overload.overflow.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a connection accepted now is beyond `server.max_connections`
/// (`open`: client connections open now).
pub fn is_over(overload: &Overload, open: usize) -> bool {
    open >= overload.max_connections
}

/// The 503 for a request that came beyond `server.max_connections`
/// (`max` of them), with `Retry-After` and `Connection: close`.
pub fn unavailable(max: usize, status: &CacheStatus) -> Response<ProxyBody> {
    let mut resp = crate::wire::error::error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("crawlcache: too many client connections ({max} open, server.max_connections); retry in {RETRY_AFTER_SECS} s"),
        status,
    );
    resp.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    resp.headers_mut().insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// The raw 503 of [`refuse_now`] for `max` connections.
fn raw_unavailable(max: usize) -> Vec<u8> {
    let body = format!("crawlcache: too many client connections ({max} open, server.max_connections); retry in {RETRY_AFTER_SECS} s\n");
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\nRetry-After: {RETRY_AFTER_SECS}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers 503 without waiting for the request: reads what has arrived
/// already (so closing does not reset the connection under the answer),
/// writes the answer as far as the socket takes it now, and closes.
pub fn refuse_now(stream: &tokio::net::TcpStream, max: usize) {
    let mut buf = [0u8; 4096];
    for _ in 0..16 {
        match stream.try_read(&mut buf) {
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
    let _ = stream.try_write(&raw_unavailable(max));
    let _ = socket_shutdown_write(stream);
}

fn socket_shutdown_write(stream: &tokio::net::TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: shutdown on a descriptor this stream owns.
    if unsafe { libc::shutdown(stream.as_raw_fd(), libc::SHUT_WR) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limit_leaves_a_reserve_and_two_descriptors_per_connection() {
        assert_eq!(reserve(256), 80);
        assert_eq!(derived_max_connections(256), 88);
        assert_eq!(derived_max_connections(1024), (1024 - 128) / 2);
        assert_eq!(derived_max_connections(1 << 20), ((1 << 20) - 64 - (1 << 16)) / 2);
        // A limit below the reserve still serves one connection.
        assert_eq!(derived_max_connections(10), 1);
        assert_eq!(overflow_slots(256), 20);
        assert_eq!(overflow_slots(10), 16);
        assert_eq!(overflow_slots(1 << 20), 256);
    }

    #[test]
    fn the_limit_can_be_read_and_raising_it_never_lowers_it() {
        let before = open_file_limit().expect("getrlimit works");
        assert!(before.soft <= before.hard);
        let after = raise_open_file_limit().expect("raising to the hard limit is allowed");
        assert!(after.soft >= before.soft && after.soft <= after.hard, "{before:?} {after:?}");
        assert_eq!(open_file_limit().unwrap().soft, after.soft);
    }

    #[tokio::test]
    async fn a_full_overflow_hands_the_longest_waiting_slot_to_a_newcomer() {
        let o = Arc::new(Overload { overflow_slots: 2, ..Overload::new(10, None) });
        let (mut a, none) = o.enter().expect("a free slot");
        assert!(none.is_none(), "nothing to wait for");
        let (b, _) = o.enter().expect("a free slot");
        assert_eq!(o.overflow_now(), 2);
        let (c, closing) = o.enter().expect("the oldest waiting slot is taken over");
        let closed = a.evicted.take().unwrap().await.expect("a is told to give up its slot");
        drop(a);
        closed.send(()).unwrap();
        closing.expect("the newcomer waits for a to close").await.expect("a says it is closed");
        // b and c are serving requests: nothing left to take over.
        b.started();
        c.started();
        assert!(o.enter().is_none());
        drop(b);
        assert!(o.enter().is_some(), "a slot given back is free again");
    }

    #[test]
    fn the_raw_answer_is_a_complete_503_with_retry_after() {
        let raw = String::from_utf8(raw_unavailable(88)).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 ")
                && head.contains("\r\nRetry-After: 1\r\n")
                && head.contains("Connection: close"),
            "{head}"
        );
        assert!(head.contains(&format!("Content-Length: {}", body.len())), "{raw}");
    }
}
