//! [`Origin`]: a scriptable raw-TCP HTTP/1.1 origin. A closure gets each
//! parsed request and returns a [`Reply`] made of byte writes, pauses and
//! closes, so a test can send any header, a 304, a truncated chunked body or
//! a slow response.

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::wire::{
    chunked_body, field, field_all, field_has_token, find_subslice, parse_head, ChunkedDecoder,
    Fields,
};

/// A request as the scripted origin received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// The request target as sent (origin-form from a proxy: `/path?q`).
    pub target: String,
    pub version: String,
    pub headers: Fields,
    /// The body with any chunked coding removed.
    pub body: Vec<u8>,
    /// The raw head, request line to the empty line included.
    pub head_raw: Vec<u8>,
    /// Index of the TCP connection it came on (0, 1, ...): equal numbers
    /// mean the client reused a connection.
    pub connection: usize,
    /// When it had been read whole (for spacing measurements).
    pub arrived: Instant,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        field(&self.headers, name)
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        field_all(&self.headers, name)
    }

    /// The target's path, without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// One action of a scripted reply.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes.
    Send(Vec<u8>),
    /// Pause.
    Sleep(Duration),
    /// Close the connection now (FIN), whatever was promised.
    Close,
}

/// What the origin does for one request: steps run in order; then the
/// connection stays open for the next request unless `close` is set, a step
/// closed it, or the request asked for `Connection: close`.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub steps: Vec<Step>,
    pub close: bool,
}

/// The reason phrase for the status codes tests use.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

fn status_and_fields(status: u16, headers: &[(&str, &str)]) -> String {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    for (n, v) in headers {
        let _ = write!(head, "{n}: {v}\r\n");
    }
    head
}

impl Reply {
    /// A complete response: `Content-Length` is added unless `headers` has a
    /// `Content-Length` or `Transfer-Encoding` (then `body` is sent as is).
    /// For 304 and 204 no body or length is sent.
    pub fn new(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut head = status_and_fields(status, headers);
        let framed = headers.iter().any(|(n, _)| {
            n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding")
        });
        let bodiless = status == 304 || status == 204 || (100..200).contains(&status);
        if !framed && !bodiless {
            let _ = write!(head, "Content-Length: {}\r\n", body.len());
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        if !bodiless {
            bytes.extend_from_slice(body);
        }
        Reply { steps: vec![Step::Send(bytes)], close: false }
    }

    /// `200 OK` with `headers` and `body`.
    pub fn ok(headers: &[(&str, &str)], body: &[u8]) -> Reply {
        Reply::new(200, headers, body)
    }

    /// `304 Not Modified` with `headers` (no body).
    pub fn not_modified(headers: &[(&str, &str)]) -> Reply {
        Reply::new(304, headers, b"")
    }

    /// A chunked response, one chunk per element of `chunks`. Without
    /// `last_chunk` the connection is closed after the data: a truncated body.
    pub fn chunked(
        status: u16,
        headers: &[(&str, &str)],
        chunks: &[&[u8]],
        last_chunk: bool,
    ) -> Reply {
        let mut head = status_and_fields(status, headers);
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&chunked_body(chunks, last_chunk));
        let mut reply = Reply { steps: vec![Step::Send(bytes)], close: false };
        if !last_chunk {
            reply.steps.push(Step::Close);
        }
        reply
    }

    /// A response whose `Content-Length` promises `promised` bytes but only
    /// `body` is sent before the connection is closed.
    pub fn short_content_length(
        status: u16,
        headers: &[(&str, &str)],
        body: &[u8],
        promised: usize,
    ) -> Reply {
        let mut head = status_and_fields(status, headers);
        let _ = write!(head, "Content-Length: {promised}\r\n\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        Reply { steps: vec![Step::Send(bytes), Step::Close], close: true }
    }

    /// Bytes written exactly as given (a hand-written response).
    pub fn raw(bytes: &[u8]) -> Reply {
        Reply { steps: vec![Step::Send(bytes.to_vec())], close: false }
    }

    /// Close the connection without answering.
    pub fn hang_up() -> Reply {
        Reply { steps: vec![Step::Close], close: true }
    }

    /// Wait `d` before anything else of this reply.
    pub fn delayed(mut self, d: Duration) -> Reply {
        self.steps.insert(0, Step::Sleep(d));
        self
    }

    /// Append a pause.
    pub fn then_sleep(mut self, d: Duration) -> Reply {
        self.steps.push(Step::Sleep(d));
        self
    }

    /// Append bytes to write.
    pub fn then_send(mut self, bytes: &[u8]) -> Reply {
        self.steps.push(Step::Send(bytes.to_vec()));
        self
    }

    /// Close the connection once the steps are done.
    pub fn closing(mut self) -> Reply {
        self.close = true;
        self
    }
}

type Handler = dyn Fn(&RecordedRequest) -> Reply + Send + Sync + 'static;

struct OriginLog {
    requests: Mutex<Vec<RecordedRequest>>,
    arrived: Condvar,
}

/// A scriptable HTTP/1.1 origin on 127.0.0.1:PORT, over raw TCP on its own
/// tokio runtime thread. Every request is parsed, recorded, then answered
/// with the [`Reply`] the handler returns. Usable from sync and async tests.
/// Stopped (listener closed, connections dropped) on drop.
pub struct Origin {
    addr: SocketAddr,
    log: Arc<OriginLog>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Origin {
    /// Starts an origin whose replies come from `handler`. The handler runs
    /// on the origin's thread: keep it quick (use [`Step::Sleep`] for delays)
    /// and free of assertions (a panic there only drops that connection;
    /// assert on [`Origin::requests`] instead).
    pub fn start<F>(handler: F) -> Origin
    where
        F: Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    {
        let std_listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("scripted origin: binding 127.0.0.1:0: {e}"));
        let addr = std_listener
            .local_addr()
            .unwrap_or_else(|e| panic!("scripted origin: reading its address: {e}"));
        std_listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("scripted origin: set_nonblocking: {e}"));
        let log = Arc::new(OriginLog { requests: Mutex::new(Vec::new()), arrived: Condvar::new() });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handler: Arc<Handler> = Arc::new(handler);
        let thread_log = log.clone();
        let thread = thread::Builder::new()
            .name(format!("origin-{}", addr.port()))
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        eprintln!("[harness] scripted origin: building a tokio runtime: {e}");
                        return;
                    }
                };
                rt.block_on(origin_accept_loop(std_listener, handler, thread_log, rx));
                // Dropping the runtime cancels the connection tasks.
            })
            .unwrap_or_else(|e| panic!("scripted origin: spawning its thread: {e}"));
        Origin { addr, log, shutdown: Some(tx), thread: Some(thread) }
    }

    /// An origin that answers every request with a clone of `reply`.
    pub fn fixed(reply: Reply) -> Origin {
        Origin::start(move |_| reply.clone())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT{path}`; `path` starts with `/`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.log.requests.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn request_count(&self) -> usize {
        self.log.requests.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Waits until at least `n` requests have arrived (for background
    /// revalidation), panicking after `timeout` with what did arrive.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let deadline = Instant::now() + timeout;
        let mut guard = self.log.requests.lock().unwrap_or_else(|p| p.into_inner());
        while guard.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let seen: Vec<String> =
                    guard.iter().map(|r| format!("{} {}", r.method, r.target)).collect();
                panic!("scripted origin {}: expected {n} requests within {timeout:?}, got {}: {seen:?}", self.addr, guard.len());
            }
            guard = self.log.arrived.wait_timeout(guard, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        guard.clone()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn origin_accept_loop(
    std_listener: TcpListener,
    handler: Arc<Handler>,
    log: Arc<OriginLog>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(std_listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("[harness] scripted origin: registering the listener: {e}");
            return;
        }
    };
    let mut next_conn = 0usize;
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let (h, l, n) = (handler.clone(), log.clone(), next_conn);
                    next_conn += 1;
                    tokio::spawn(async move {
                        if let Err(e) = origin_serve_conn(stream, n, h, l).await {
                            eprintln!("[harness] scripted origin connection {n}: {e}");
                        }
                    });
                }
                Err(e) => {
                    eprintln!("[harness] scripted origin: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
}

async fn origin_serve_conn(
    mut stream: tokio::net::TcpStream,
    connection: usize,
    handler: Arc<Handler>,
    log: Arc<OriginLog>,
) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        // Head.
        let head_end = loop {
            if let Some(i) = find_subslice(&buf, b"\r\n\r\n") {
                break i;
            }
            if buf.len() > 1 << 20 {
                return Err("request head larger than 1 MiB".into());
            }
            let n = stream.read(&mut chunk).await.map_err(|e| format!("reading a request: {e}"))?;
            if n == 0 {
                return Ok(()); // client closed between requests
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head_raw: Vec<u8> = buf.drain(..head_end + 4).collect();
        let (start, headers) = parse_head(&head_raw[..head_end])?;
        let mut parts = start.split(' ');
        let method = parts.next().unwrap_or_default().to_owned();
        let target = parts.next().unwrap_or_default().to_owned();
        let version = parts.next().unwrap_or_default().to_owned();
        // Body.
        let body = if field_has_token(&headers, "Transfer-Encoding", "chunked") {
            let mut dec = ChunkedDecoder::default();
            loop {
                dec.feed(&mut buf)?;
                if dec.done() {
                    break dec.body;
                }
                let n = stream
                    .read(&mut chunk)
                    .await
                    .map_err(|e| format!("reading a chunked request body: {e}"))?;
                if n == 0 {
                    return Err("client closed inside a chunked request body".into());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(cl) = field(&headers, "Content-Length") {
            let n: usize =
                cl.parse().map_err(|e| format!("bad request Content-Length {cl:?}: {e}"))?;
            while buf.len() < n {
                let got = stream
                    .read(&mut chunk)
                    .await
                    .map_err(|e| format!("reading a request body: {e}"))?;
                if got == 0 {
                    return Err("client closed inside a request body".into());
                }
                buf.extend_from_slice(&chunk[..got]);
            }
            buf.drain(..n).collect()
        } else {
            Vec::new()
        };
        let wants_close = field_has_token(&headers, "Connection", "close") || version == "HTTP/1.0";
        let req = RecordedRequest {
            method,
            target,
            version,
            headers,
            body,
            head_raw,
            connection,
            arrived: Instant::now(),
        };
        {
            let mut guard = log.requests.lock().unwrap_or_else(|p| p.into_inner());
            guard.push(req.clone());
            log.arrived.notify_all();
        }
        let reply = handler(&req);
        if !play_reply(&mut stream, &reply, wants_close)
            .await
            .map_err(|e| format!("writing a reply: {e}"))?
        {
            return Ok(());
        }
    }
}

/// Carries out `reply`'s steps on `stream`. `Ok(true)` when the connection
/// stays open for the next request; `Ok(false)` once it was closed (a
/// `Step::Close`, `reply.close`, or `client_wants_close`). Used by both
/// scripted origins.
pub(crate) async fn play_reply<S>(
    stream: &mut S,
    reply: &Reply,
    client_wants_close: bool,
) -> std::io::Result<bool>
where
    S: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    for step in &reply.steps {
        match step {
            Step::Send(bytes) => {
                stream.write_all(bytes).await?;
                stream.flush().await?;
            }
            Step::Sleep(d) => tokio::time::sleep(*d).await,
            Step::Close => {
                let _ = stream.shutdown().await;
                return Ok(false);
            }
        }
    }
    if reply.close || client_wants_close {
        let _ = stream.shutdown().await;
        return Ok(false);
    }
    Ok(true)
}
