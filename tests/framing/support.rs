//! What the framing tests share: the proxy configuration, raw exchanges,
//! CONNECT tunnels with a rustls client, the audit files.

use crate::common::*;
use rustls::pki_types::pem::PemObject;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// robots handling off, so that origins see only the tests' requests.
pub const ROBOTS_OFF: &str = "[robots]\nmode = \"off\"\n";

/// A scripted origin and a crawlcache with `config` in front of it.
pub fn raw_origin_and_proxy(
    label: &str,
    config: &str,
    handler: impl Fn(&RawRequest) -> Reply + Send + Sync + 'static,
) -> (RawOrigin, Proxy) {
    let dir = TestDir::new(label);
    let origin = RawOrigin::start(handler);
    let proxy = Proxy::start_with_config(&dir.subdir("data"), config, &[]).owning(dir);
    (origin, proxy)
}

/// `200 OK`, cacheable for ten minutes, body `site for host <Host> target <target>`.
pub fn echo_host(req: &RawRequest) -> Reply {
    let body =
        format!("site for host {} target {}", req.header("Host").unwrap_or("(none)"), req.target);
    answer(req, 200, &[("Cache-Control", "max-age=600")], body.as_bytes())
}

/// A response with `Content-Length` to `req`, without its body for HEAD.
pub fn answer(req: &RawRequest, status: u16, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = head.into_bytes();
    if req.method != "HEAD" {
        bytes.extend_from_slice(body);
    }
    Reply::raw(&bytes)
}

/// Exactly one `Host` line in `req`, with exactly `expected` as its bytes.
/// (The name's case is free: field names are case-insensitive.)
pub fn assert_host_exact(req: &RawRequest, expected: &str) {
    assert!(
        req.has_exact_field("Host", expected),
        "the origin must see exactly one `Host: {expected}`; it got:\n{}",
        req.head_text()
    );
}

/// A connection that writes raw bytes and reads responses one by one.
pub struct RawConn {
    pub conn: Conn,
}

impl RawConn {
    pub fn open(addr: SocketAddr) -> RawConn {
        let conn = Conn::open(addr);
        conn.set_timeout(Duration::from_secs(15));
        RawConn { conn }
    }

    /// Writes `raw` and reads one response (`head_request`: no body).
    pub fn send(&mut self, raw: &[u8], head_request: bool) -> Result<Response, String> {
        self.conn.try_send_raw(raw, head_request)
    }

    /// Reads one more response without writing anything.
    pub fn next(&mut self, head_request: bool) -> Result<Response, String> {
        self.conn.try_send_raw(b"", head_request)
    }
}

/// The value of `Cache-Status`, or "" when absent.
pub fn cache_status(r: &Response) -> String {
    r.cache_status().unwrap_or_default()
}

// ---------------------------------------------------------------------------
// CONNECT tunnels
// ---------------------------------------------------------------------------

/// Opens `CONNECT authority` through the proxy and returns the socket once
/// the proxy answered; `Err` with the status line otherwise.
pub fn connect_tunnel(proxy: SocketAddr, authority: &str) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(proxy).map_err(|e| format!("connecting to {proxy}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(15))).ok();
    s.set_write_timeout(Some(Duration::from_secs(15))).ok();
    write!(s, "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n")
        .map_err(|e| e.to_string())?;
    // Read the answer's head byte by byte, so no tunnel byte is consumed.
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => {
                return Err(format!(
                    "no complete CONNECT answer (got {:?})",
                    String::from_utf8_lossy(&head)
                ))
            }
        }
        if head.len() > 64 * 1024 {
            return Err("CONNECT answer head too large".into());
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    if text.starts_with("HTTP/1.1 200") {
        Ok(s)
    } else {
        Err(text)
    }
}

/// crawlcache's CA certificate file in a data directory.
pub fn crawlcache_ca(data_dir: &Path) -> PathBuf {
    data_dir.join("ca").join("ca.pem")
}

/// A rustls client trusting only the CA certificates in `ca_pem`.
pub fn tls_client_config(ca_pem: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("a PEM certificate")).expect("adding a root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// TLS over `tcp` for `server_name` (a DNS name is sent as SNI; an IP
/// address is not), verified against `config`'s roots; the handshake is
/// completed before returning. Also returns the leaf certificate (DER).
pub fn tls_over(
    tcp: TcpStream,
    config: Arc<rustls::ClientConfig>,
    server_name: &str,
) -> Result<(rustls::StreamOwned<rustls::ClientConnection, TcpStream>, Vec<u8>), String> {
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
        .map_err(|e| e.to_string())?;
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let deadline = Instant::now() + Duration::from_secs(15);
    while tls.conn.is_handshaking() {
        if Instant::now() > deadline {
            return Err("TLS handshake did not finish".into());
        }
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| format!("TLS handshake for {server_name}: {e}"))?;
    }
    let leaf = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.as_ref().to_vec())
        .ok_or("no peer certificate")?;
    Ok((tls, leaf))
}

/// Writes `raw` (a request that says `Connection: close`) into `stream`
/// and reads until the peer closes; returns the parsed response.
pub fn exchange_until_close(stream: &mut impl ReadWrite, raw: &[u8]) -> Response {
    stream.write_all(raw).expect("writing a request into the tunnel");
    stream.flush().ok();
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(_) => break, // a close without close_notify, or the timeout
        }
    }
    parse_response(&bytes).unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&bytes)))
}

pub trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// One complete response in `bytes` (Content-Length, chunked or to the end).
pub fn parse_response(bytes: &[u8]) -> Result<Response, String> {
    let end = find_subslice(bytes, b"\r\n\r\n").ok_or("no complete response head")?;
    let (start, headers) = parse_head(&bytes[..end])?;
    let mut parts = start.splitn(3, ' ');
    let version = parts.next().unwrap_or_default().to_owned();
    let status =
        parts.next().and_then(|s| s.parse().ok()).ok_or(format!("bad status line {start:?}"))?;
    let reason = parts.next().unwrap_or_default().to_owned();
    let mut rest = bytes[end + 4..].to_vec();
    let mut resp = Response { version, status, reason, headers, body: Vec::new(), complete: true };
    if resp.header("Transfer-Encoding").is_some() {
        let mut dec = ChunkedDecoder::default();
        dec.feed(&mut rest)?;
        resp.complete = dec.done();
        resp.body = dec.body;
    } else if let Some(cl) = resp.header("Content-Length") {
        let n: usize = cl.parse().map_err(|_| format!("bad Content-Length {cl:?}"))?;
        resp.complete = rest.len() >= n;
        rest.truncate(n);
        resp.body = rest;
    } else {
        resp.body = rest;
    }
    Ok(resp)
}

// ---------------------------------------------------------------------------
// Audit files
// ---------------------------------------------------------------------------

/// Every audit line written so far under `<data_dir>/audit/`.
pub fn audit_lines(data_dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    if let Ok(dir) = std::fs::read_dir(data_dir.join("audit")) {
        for entry in dir.flatten() {
            if let Ok(text) = std::fs::read_to_string(entry.path()) {
                lines.extend(text.lines().map(str::to_owned));
            }
        }
    }
    lines
}

/// Waits (at most 10 s) for an audit line for which `pred` holds; the
/// line is written once the response body is done.
pub fn wait_audit_line(data_dir: &Path, pred: impl Fn(&str) -> bool) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(l) = audit_lines(data_dir).into_iter().find(|l| pred(l)) {
            return Some(l);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
