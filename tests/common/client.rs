//! A small HTTP/1.1 test client ([`Conn`], [`send_request`], [`proxy_get`])
//! that reports multi-valued fields and whether the body arrived whole.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::wire::{
    field, field_all, field_has_token, find_subslice, parse_head, ChunkedDecoder, Fields,
};

/// Read/write timeout of the test HTTP client, per socket operation.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A response as the test client received it.
#[derive(Debug, Clone)]
pub struct Response {
    /// e.g. `HTTP/1.1`.
    pub version: String,
    pub status: u16,
    pub reason: String,
    /// Every field line, in order; names as sent.
    pub headers: Fields,
    /// The body after removing the chunked coding (as much as arrived).
    pub body: Vec<u8>,
    /// False when the connection ended before the framing said the body was
    /// over (Content-Length short, or chunked without its last chunk).
    pub complete: bool,
}

impl Response {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        field(&self.headers, name)
    }

    /// Every value of header `name`, one per field line, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        field_all(&self.headers, name)
    }

    /// The `Cache-Status` field (RFC 9211), all lines joined with ", ".
    pub fn cache_status(&self) -> Option<String> {
        let all = self.header_all("Cache-Status");
        (!all.is_empty()).then(|| all.join(", "))
    }

    /// The body as text (lossy UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A short description for assertion messages: status line, fields, and
    /// the start of the body.
    pub fn describe(&self) -> String {
        let mut s = format!("{} {} {}\n", self.version, self.status, self.reason);
        for (n, v) in &self.headers {
            let _ = writeln!(s, "{n}: {v}");
        }
        let text = self.text();
        let cut: String = text.chars().take(300).collect();
        let _ = write!(
            s,
            "\n{cut}{}{}",
            if cut.len() < text.len() { "…" } else { "" },
            if self.complete { "" } else { "\n(body incomplete: connection closed early)" }
        );
        s
    }
}

/// One client connection that can carry several requests (keep-alive).
pub struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects to `addr` (5 s connect timeout, [`IO_TIMEOUT`] per read/write).
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::try_open(addr, Duration::from_secs(5)).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_open(addr: SocketAddr, connect_timeout: Duration) -> Result<Conn, String> {
        let stream = TcpStream::connect_timeout(&addr, connect_timeout)
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        let conn = Conn { stream, peer: addr, buf: Vec::new() };
        conn.set_timeout(IO_TIMEOUT);
        let _ = conn.stream.set_nodelay(true);
        Ok(conn)
    }

    /// Sets the read and write timeout of the socket.
    pub fn set_timeout(&self, t: Duration) {
        let _ = self.stream.set_read_timeout(Some(t));
        let _ = self.stream.set_write_timeout(Some(t));
    }

    /// Sends a request and reads one response. `target` is absolute-form
    /// (`http://host/path`, for the proxy) or origin-form (`/path`). A `Host`
    /// field is added unless `headers` has one; `Content-Length` is added
    /// for a non-empty `body`. Panics with the cause on I/O or parse errors.
    pub fn send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        self.try_send(method, target, headers, body)
            .unwrap_or_else(|e| panic!("{method} {target} via {}: {e}", self.peer))
    }

    pub fn try_send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, String> {
        let mut req = format!("{method} {target} HTTP/1.1\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            let host = match target.split_once("://") {
                Some((_, rest)) => rest.split(['/', '?', '#']).next().unwrap_or("").to_owned(),
                None => self.peer.to_string(),
            };
            let _ = write!(req, "Host: {host}\r\n");
        }
        for (n, v) in headers {
            let _ = write!(req, "{n}: {v}\r\n");
        }
        let has_framing = headers.iter().any(|(n, _)| {
            n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding")
        });
        if !body.is_empty() && !has_framing {
            let _ = write!(req, "Content-Length: {}\r\n", body.len());
        }
        req.push_str("\r\n");
        let mut raw = req.into_bytes();
        raw.extend_from_slice(body);
        self.try_send_raw(&raw, method.eq_ignore_ascii_case("HEAD"))
    }

    /// Writes `raw` as is and reads one response; `head_request` says the
    /// response has no body whatever its fields say.
    pub fn try_send_raw(&mut self, raw: &[u8], head_request: bool) -> Result<Response, String> {
        self.stream.write_all(raw).map_err(|e| format!("writing the request: {e}"))?;
        self.read_response(head_request)
    }

    /// Reads more bytes into the buffer; Ok(0) at end of stream.
    fn fill(&mut self) -> Result<usize, String> {
        let mut chunk = [0u8; 64 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                Err(format!("timed out reading the response ({} bytes buffered)", self.buf.len()))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                Ok(0)
            }
            Err(e) => Err(format!("reading the response: {e}")),
        }
    }

    fn read_response(&mut self, head_request: bool) -> Result<Response, String> {
        loop {
            let head_end = loop {
                if let Some(i) = find_subslice(&self.buf, b"\r\n\r\n") {
                    break i;
                }
                if self.buf.len() > 1 << 20 {
                    return Err("response head larger than 1 MiB".into());
                }
                if self.fill()? == 0 {
                    return Err(format!(
                        "connection closed before a complete response head (got {:?})",
                        String::from_utf8_lossy(&self.buf)
                    ));
                }
            };
            let head: Vec<u8> = self.buf.drain(..head_end + 4).collect();
            let (start, headers) = parse_head(&head[..head_end])?;
            let mut parts = start.splitn(3, ' ');
            let version = parts.next().unwrap_or_default().to_owned();
            let status: u16 = parts
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("malformed status line {start:?}"))?;
            let reason = parts.next().unwrap_or_default().to_owned();
            if (100..200).contains(&status) && status != 101 {
                continue; // interim response: the final one follows
            }
            let mut resp =
                Response { version, status, reason, headers, body: Vec::new(), complete: true };
            if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
                return Ok(resp);
            }
            if field_has_token(&resp.headers, "Transfer-Encoding", "chunked") {
                let mut dec = ChunkedDecoder::default();
                loop {
                    dec.feed(&mut self.buf)?;
                    if dec.done() {
                        break;
                    }
                    if self.fill()? == 0 {
                        resp.complete = false;
                        break;
                    }
                }
                resp.body = dec.body;
            } else if let Some(cl) = field(&resp.headers, "Content-Length") {
                let n: usize = cl.parse().map_err(|e| format!("bad Content-Length {cl:?}: {e}"))?;
                while self.buf.len() < n {
                    if self.fill()? == 0 {
                        resp.complete = false;
                        break;
                    }
                }
                let take = n.min(self.buf.len());
                resp.body = self.buf.drain(..take).collect();
            } else {
                while self.fill()? != 0 {}
                resp.body = std::mem::take(&mut self.buf);
            }
            return Ok(resp);
        }
    }
}

/// One request on a fresh connection (`Connection: close` is added).
pub fn send_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    if !all.iter().any(|(n, _)| n.eq_ignore_ascii_case("connection")) {
        all.push(("Connection", "close"));
    }
    Conn::open(addr).send(method, target, &all, body)
}

/// `GET url` (absolute-form, e.g. `http://127.0.0.1:8080/a`) through the
/// proxy at `proxy`, on a fresh connection.
pub fn proxy_get(proxy: SocketAddr, url: &str, headers: &[(&str, &str)]) -> Response {
    assert!(url.starts_with("http://"), "proxy_get wants an absolute http:// URL, got {url:?}");
    send_request(proxy, "GET", url, headers, b"")
}
