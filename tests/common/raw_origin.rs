//! [`RawOrigin`]: a recording origin for framing tests. It keeps the exact
//! bytes received on every connection, splits them into requests the way a
//! strict HTTP/1.1 server would (RFC 9112: CRLF line ends, no obs-fold, no
//! `Content-Length` beside `Transfer-Encoding`, one length), notes every
//! framing it would have had to guess at, and answers each request with the
//! scripted [`Reply`] (bytes, pauses, closes) the handler returns.
//!
//! A request that a proxy smuggled (bytes the client meant as a body, read
//! as a request) shows as an extra [`RawRequest`]; a message framed two ways
//! shows in [`RawRequest::violations`]. Plain TCP, or TLS with
//! [`RawOrigin::start_tls`] (the bytes recorded are the decrypted ones).

use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::origin::{play_reply, Reply};
use super::wire::{field, field_all, find_subslice, Fields};

/// One request as a strict origin read it off the wire.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// Index of the connection (0, 1, ... in accept order).
    pub connection: usize,
    /// Position of the request on its connection (0 = first).
    pub on_connection: usize,
    pub method: String,
    pub target: String,
    pub version: String,
    /// The fields, names and values as sent (values trimmed of OWS).
    pub fields: Fields,
    /// The head exactly as received, request line to the empty line.
    pub head: Vec<u8>,
    /// The body bytes exactly as received (chunk framing included).
    pub body_raw: Vec<u8>,
    /// The content: the body with any chunked coding removed.
    pub body: Vec<u8>,
    /// What a strict recipient objects to in this message's framing (bare
    /// CR or LF, obs-fold, a bad field line, CL beside TE, several or bad
    /// lengths, a transfer coding other than `chunked`). Empty when clean.
    pub violations: Vec<String>,
}

impl RawRequest {
    /// First value of field `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        field(&self.fields, name)
    }

    /// Every value of field `name`, one per line.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        field_all(&self.fields, name)
    }

    /// The raw value bytes of every field line named `name` (compared
    /// case-insensitively), exactly as sent after the colon, whitespace
    /// included.
    pub fn raw_values(&self, name: &str) -> Vec<Vec<u8>> {
        let head = &self.head[..self.head.len().saturating_sub(4)];
        head.split(|&b| b == b'\n')
            .skip(1)
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .filter_map(|l| {
                let colon = l.iter().position(|&b| b == b':')?;
                l[..colon].eq_ignore_ascii_case(name.as_bytes()).then(|| l[colon + 1..].to_vec())
            })
            .collect()
    }

    /// True when the message has exactly one `name` field line and its
    /// value is exactly `value` (after the one space a sender writes).
    pub fn has_exact_field(&self, name: &str, value: &str) -> bool {
        self.raw_values(name) == [format!(" {value}").into_bytes()]
    }

    /// The target's path, without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// True when the message was framed with the chunked coding.
    pub fn chunked(&self) -> bool {
        self.header("Transfer-Encoding").is_some()
    }

    /// The head as text (lossy), for messages.
    pub fn head_text(&self) -> String {
        String::from_utf8_lossy(&self.head).into_owned()
    }
}

type Handler = dyn Fn(&RawRequest) -> Reply + Send + Sync + 'static;

#[derive(Default)]
struct Log {
    requests: Vec<RawRequest>,
    /// Exact bytes received, per connection.
    bytes: Vec<Vec<u8>>,
    /// Connection-level problems reading requests (an unreadable chunk, a
    /// head or body cut short by the sender).
    problems: Vec<String>,
}

struct Shared {
    log: Mutex<Log>,
    arrived: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A recording origin on 127.0.0.1:PORT, on its own tokio runtime thread;
/// stopped (listener closed, connections dropped) on drop.
pub struct RawOrigin {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl RawOrigin {
    /// A plain-TCP origin answering with `handler` (keep it quick and free
    /// of assertions; assert on [`RawOrigin::requests`]).
    pub fn start(handler: impl Fn(&RawRequest) -> Reply + Send + Sync + 'static) -> RawOrigin {
        RawOrigin::spawn(None, Arc::new(handler))
    }

    /// The same over TLS with `config` (e.g. [`super::tls::TestPki::server_config`]).
    pub fn start_tls(
        config: Arc<rustls::ServerConfig>,
        handler: impl Fn(&RawRequest) -> Reply + Send + Sync + 'static,
    ) -> RawOrigin {
        RawOrigin::spawn(Some(tokio_rustls::TlsAcceptor::from(config)), Arc::new(handler))
    }

    fn spawn(tls: Option<tokio_rustls::TlsAcceptor>, handler: Arc<Handler>) -> RawOrigin {
        let std_listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("raw origin: binding 127.0.0.1:0: {e}"));
        let addr =
            std_listener.local_addr().unwrap_or_else(|e| panic!("raw origin: its address: {e}"));
        std_listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("raw origin: set_nonblocking: {e}"));
        let shared = Arc::new(Shared { log: Mutex::new(Log::default()), arrived: Condvar::new() });
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let thread_shared = shared.clone();
        let thread = thread::Builder::new()
            .name(format!("raw-origin-{}", addr.port()))
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => return eprintln!("[harness] raw origin: building a runtime: {e}"),
                };
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => return eprintln!("[harness] raw origin: registering the listener: {e}"),
                    };
                    loop {
                        let stream = tokio::select! {
                            _ = &mut rx => return,
                            a = listener.accept() => match a {
                                Ok((s, _)) => s,
                                Err(_) => { tokio::time::sleep(Duration::from_millis(10)).await; continue; }
                            },
                        };
                        let _ = stream.set_nodelay(true);
                        let n = {
                            let mut log = thread_shared.lock();
                            log.bytes.push(Vec::new());
                            log.bytes.len() - 1
                        };
                        let (h, s, tls) = (handler.clone(), thread_shared.clone(), tls.clone());
                        tokio::spawn(async move {
                            let result = match tls {
                                None => serve(stream, n, h, s.clone()).await,
                                Some(acceptor) => {
                                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await {
                                        Ok(Ok(tls)) => serve(tls, n, h, s.clone()).await,
                                        _ => Ok(()), // a client that gave up on the handshake
                                    }
                                }
                            };
                            if let Err(e) = result {
                                s.lock().problems.push(format!("connection {n}: {e}"));
                                s.arrived.notify_all();
                            }
                        });
                    }
                });
            })
            .unwrap_or_else(|e| panic!("raw origin: spawning its thread: {e}"));
        RawOrigin { addr, shared, shutdown: Some(tx), thread: Some(thread) }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `127.0.0.1:PORT`, the `Host` a proxy must send for `http://127.0.0.1:PORT/...`.
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request read so far, in arrival order.
    pub fn requests(&self) -> Vec<RawRequest> {
        self.shared.lock().requests.clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// The exact bytes received on each connection so far.
    pub fn connection_bytes(&self) -> Vec<Vec<u8>> {
        self.shared.lock().bytes.clone()
    }

    /// Connection-level problems so far (unparseable framing and the like).
    pub fn problems(&self) -> Vec<String> {
        self.shared.lock().problems.clone()
    }

    /// Waits until at least `n` requests have been read, panicking after
    /// `timeout` with those that did arrive.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<RawRequest> {
        let deadline = Instant::now() + timeout;
        let mut log = self.shared.lock();
        while log.requests.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let seen: Vec<String> =
                    log.requests.iter().map(|r| format!("{} {}", r.method, r.target)).collect();
                panic!(
                    "raw origin {}: expected {n} requests within {timeout:?}, got {seen:?}",
                    self.addr
                );
            }
            log = self.shared.arrived.wait_timeout(log, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        log.requests.clone()
    }
}

impl Drop for RawOrigin {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The head of one request, parsed strictly; `violations` lists what a
/// lenient parser would have had to guess.
struct Head {
    method: String,
    target: String,
    version: String,
    fields: Fields,
    violations: Vec<String>,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Parses `head` (request line to the final CRLF CRLF included).
fn parse_strict_head(head: &[u8]) -> Head {
    let mut violations = Vec::new();
    let body = &head[..head.len().saturating_sub(4)];
    for (i, &b) in body.iter().enumerate() {
        if b == b'\r' && body.get(i + 1) != Some(&b'\n') {
            violations.push(format!("bare CR at byte {i}"));
        }
        if b == b'\n' && (i == 0 || body[i - 1] != b'\r') {
            violations.push(format!("bare LF at byte {i}"));
        }
    }
    let text = String::from_utf8_lossy(body);
    let mut lines = text.split("\r\n");
    let start = lines.next().unwrap_or_default().to_owned();
    let parts: Vec<&str> = start.split(' ').collect();
    if parts.len() != 3 {
        violations.push(format!("request line {start:?} is not METHOD SP TARGET SP VERSION"));
    }
    let mut fields = Vec::new();
    for line in lines {
        if line.starts_with([' ', '\t']) {
            violations.push(format!("obs-fold line {line:?}"));
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            violations.push(format!("field line without a colon {line:?}"));
            continue;
        };
        if name.is_empty() || !name.bytes().all(is_tchar) {
            violations.push(format!("bad field name {name:?}"));
        }
        if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            violations.push(format!("control byte in the value of {name}"));
        }
        fields.push((name.to_owned(), value.trim_matches([' ', '\t']).to_owned()));
    }
    let te = field_all(&fields, "Transfer-Encoding");
    let cl = field_all(&fields, "Content-Length");
    if !te.is_empty() && !cl.is_empty() {
        violations.push("Content-Length beside Transfer-Encoding".into());
    }
    if te.len() > 1 || te.first().is_some_and(|v| !v.eq_ignore_ascii_case("chunked")) {
        violations.push(format!("Transfer-Encoding {te:?} is not exactly `chunked`"));
    }
    if cl.len() > 1 {
        violations.push(format!("{} Content-Length lines {cl:?}", cl.len()));
    }
    if cl.iter().any(|v| v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit())) {
        violations.push(format!("Content-Length {cl:?} is not digits"));
    }
    Head {
        method: parts.first().copied().unwrap_or_default().to_owned(),
        target: parts.get(1).copied().unwrap_or_default().to_owned(),
        version: parts.get(2).copied().unwrap_or_default().to_owned(),
        fields,
        violations,
    }
}

/// Strict chunked decoding of the front of `buf`: `Ok(Some((raw_len,
/// content)))` once the last chunk and trailer are in, `Ok(None)` when more
/// bytes are needed.
fn decode_chunked(buf: &[u8]) -> Result<Option<(usize, Vec<u8>)>, String> {
    let mut pos = 0;
    let mut content = Vec::new();
    loop {
        let Some(eol) = find_subslice(&buf[pos..], b"\r\n") else { return Ok(None) };
        let line = &buf[pos..pos + eol];
        let hex = line.split(|&b| b == b';').next().unwrap_or_default();
        if hex.is_empty() || hex.len() > 15 || !hex.iter().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("bad chunk size line {:?}", String::from_utf8_lossy(line)));
        }
        let size = usize::from_str_radix(std::str::from_utf8(hex).unwrap_or("0"), 16)
            .map_err(|e| e.to_string())?;
        pos += eol + 2;
        if size == 0 {
            // Trailer section up to an empty line.
            loop {
                let Some(eol) = find_subslice(&buf[pos..], b"\r\n") else { return Ok(None) };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some((pos, content)));
                }
            }
        }
        if buf.len() < pos + size + 2 {
            return Ok(None);
        }
        content.extend_from_slice(&buf[pos..pos + size]);
        pos += size;
        if &buf[pos..pos + 2] != b"\r\n" {
            return Err("chunk data not followed by CRLF".into());
        }
        pos += 2;
    }
}

async fn serve<S>(
    mut stream: S,
    connection: usize,
    handler: Arc<Handler>,
    shared: Arc<Shared>,
) -> Result<(), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut on_connection = 0;
    // Reads more bytes, recording them; Ok(false) at end of stream.
    macro_rules! fill {
        () => {{
            let n = stream.read(&mut chunk).await.map_err(|e| format!("reading: {e}"))?;
            shared.lock().bytes[connection].extend_from_slice(&chunk[..n]);
            buf.extend_from_slice(&chunk[..n]);
            n > 0
        }};
    }
    loop {
        let head_end = loop {
            if let Some(i) = find_subslice(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > 1 << 20 {
                return Err("request head larger than 1 MiB".into());
            }
            if !fill!() {
                if buf.is_empty() {
                    return Ok(());
                }
                return Err(format!(
                    "connection closed inside a request head: {:?}",
                    String::from_utf8_lossy(&buf)
                ));
            }
        };
        let head_bytes: Vec<u8> = buf.drain(..head_end).collect();
        let head = parse_strict_head(&head_bytes);
        let chunked = field_all(&head.fields, "Transfer-Encoding").iter().any(|v| {
            v.rsplit(',').next().is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
        });
        let (body_raw, body) = if chunked {
            loop {
                match decode_chunked(&buf)? {
                    Some((raw_len, content)) => {
                        break (buf.drain(..raw_len).collect::<Vec<u8>>(), content)
                    }
                    None => {
                        if !fill!() {
                            return Err("connection closed inside a chunked body".into());
                        }
                    }
                }
            }
        } else if let Some(cl) = field(&head.fields, "Content-Length") {
            let n: usize =
                cl.trim().parse().map_err(|e| format!("unusable Content-Length {cl:?}: {e}"))?;
            while buf.len() < n {
                if !fill!() {
                    return Err(format!(
                        "connection closed inside a body of {n} bytes ({} read)",
                        buf.len()
                    ));
                }
            }
            let raw: Vec<u8> = buf.drain(..n).collect();
            (raw.clone(), raw)
        } else {
            (Vec::new(), Vec::new())
        };
        let wants_close = head.version == "HTTP/1.0"
            || field_all(&head.fields, "Connection")
                .iter()
                .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
        let req = RawRequest {
            connection,
            on_connection,
            method: head.method,
            target: head.target,
            version: head.version,
            fields: head.fields,
            head: head_bytes,
            body_raw,
            body,
            violations: head.violations,
        };
        on_connection += 1;
        {
            let mut log = shared.lock();
            log.requests.push(req.clone());
        }
        shared.arrived.notify_all();
        let reply = handler(&req);
        // A proxy may hang up on a reply it refuses (an oversized head):
        // a failed write is not a framing problem, the connection just ends.
        if !play_reply(&mut stream, &reply, wants_close).await.unwrap_or(false) {
            return Ok(());
        }
    }
}
