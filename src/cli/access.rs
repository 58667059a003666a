//! How a command reaches the data directory: directly when the proxy is not
//! running, through the running proxy's admin endpoints when it is (sled
//! locks the index to one process).

use super::error::CommandError;
pub use super::error::{AdminError, StreamError, UploadError};
use crate::config::Config;
use crawlcache_store::Store;
use std::io::{Read, Write};
use std::net::SocketAddr;

/// Where a command's store operations go.
pub enum StoreAccess {
    /// The store, opened by this process.
    Direct(Store),
    /// The running proxy holds the index.
    Daemon(Admin),
}

/// The running proxy's admin endpoints: its address, and the bearer token
/// they need when `server.admin_token` is set (empty otherwise).
#[derive(Debug, Clone)]
pub struct Admin {
    /// Where the proxy listens.
    pub addr: SocketAddr,
    /// `server.admin_token`, sent as `Authorization: Bearer` when not empty.
    pub token: String,
}

/// Opens the store in `cfg.server.data_dir`, or finds the running proxy that
/// holds it (at the address recorded in the data directory,
/// [`crate::proxy::ADDR_FILE`]).
///
/// Errors: the data directory does not exist, or the store cannot be opened
/// and no proxy answers at the recorded address, or the proxy there refuses
/// ([`AdminError::Refused`]: the message says which token to set).
pub fn open_store(cfg: &Config) -> Result<StoreAccess, CommandError> {
    let dir = &cfg.server.data_dir;
    super::common::check_data_dir(dir)?;
    if !dir.join("index").exists() && !dir.exists() {
        return Err(format!(
            "no cache at {} (nothing stored yet, or wrong --data-dir)",
            dir.display()
        )
        .into());
    }
    match Store::open_with(dir, &cfg.store_options()) {
        Ok(s) => Ok(StoreAccess::Direct(s)),
        Err(e) => {
            // Most likely a running proxy holds the index: ask it, at the
            // address it recorded in the data directory.
            let recorded = std::fs::read_to_string(dir.join(crate::proxy::ADDR_FILE))
                .ok()
                .and_then(|s| s.trim().parse::<SocketAddr>().ok());
            let admin = recorded
                .map(|addr| Admin { addr, token: cfg.server.admin_token.trim().to_string() });
            let cannot = || format!("cannot open the cache in {}: {e}", dir.display());
            match admin {
                Some(a) => match admin_request(&a, "GET", "/stats") {
                    Ok(_) => Ok(StoreAccess::Daemon(a)),
                    // The proxy runs but wants a token this command lacks:
                    // say that, not that the index is locked.
                    Err(refused @ AdminError::Refused { .. }) => Err(refused.into()),
                    Err(_) => Err(cannot().into()),
                },
                None => Err(cannot().into()),
            }
        }
    }
}

/// Percent-encodes `url` for a query parameter of an admin endpoint.
pub fn encode(url: &str) -> String {
    percent_encoding::utf8_percent_encode(url, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A minimal HTTP/1.1 exchange with the running proxy's admin endpoints:
/// sends `method path` with an empty body (and the admin token, when
/// configured) and returns the status code and
/// the body (connect timeout 2 s, read timeout 30 s).
///
/// Errors: [`AdminError`]: the proxy cannot be reached or read, its answer
/// has no status, or it refuses the request (`401`, `403`).
pub fn admin_request(admin: &Admin, method: &str, path: &str) -> Result<(u16, String), AdminError> {
    let addr = admin.addr;
    let auth = if admin.token.is_empty() {
        String::new()
    } else {
        format!("Authorization: Bearer {}\r\n", admin.token)
    };
    let timeout = std::time::Duration::from_secs(30);
    let mut s = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))
        .map_err(|source| AdminError::Unreachable { addr, source })?;
    let _ = s.set_read_timeout(Some(timeout));
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\nContent-Length: 0\r\n\r\n")
        .map_err(|source| AdminError::Talk { addr, source })?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(AdminError::Read)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status =
        head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(AdminError::Malformed)?;
    if let Some(refused) = refusal(admin, status, body) {
        return Err(refused);
    }
    Ok((status, body.to_string()))
}

/// The error for an admin request the proxy refused (`401` or `403`), as
/// [`AdminError::Refused`]; `None` for any other status.
fn refusal(admin: &Admin, status: u16, body: &str) -> Option<AdminError> {
    if status != 401 && status != 403 {
        return None;
    }
    let said = body
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect::<String>();
    let hint = if admin.token.is_empty() {
        "if the proxy has an admin token, give this command the same one: server.admin_token in its configuration, or CRAWLCACHE_SERVER__ADMIN_TOKEN"
    } else {
        "check that server.admin_token (or CRAWLCACHE_SERVER__ADMIN_TOKEN) is the proxy's"
    };
    Some(AdminError::Refused { addr: admin.addr, status, said, hint })
}

/// Sends `POST path` to the running proxy's admin endpoints with the file
/// at `file` as the body (`Content-Length` its size), calling `progress`
/// with the bytes sent so far, and returns the status code and the body of
/// the answer (connect timeout 2 s; the answer is waited for up to 60 s
/// after the last byte is sent).
///
/// Errors: the file cannot be read, or the proxy cannot be reached, stops
/// reading, or answers with no status.
pub fn admin_upload(
    admin: &Admin,
    path: &str,
    file: &std::path::Path,
    progress: &mut dyn FnMut(u64),
) -> Result<(u16, String), UploadError> {
    let addr = admin.addr;
    let mut f = std::fs::File::open(file)
        .map_err(|e| UploadError::Unreadable(format!("cannot read {}: {e}", file.display())))?;
    let len = f
        .metadata()
        .map_err(|e| UploadError::Unreadable(format!("cannot read {}: {e}", file.display())))?
        .len();
    let auth = if admin.token.is_empty() {
        String::new()
    } else {
        format!("Authorization: Bearer {}\r\n", admin.token)
    };
    let mut s = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))
        .map_err(|e| UploadError::Failed(format!("cannot reach the proxy at {addr}: {e}")))?;
    let _ = s.set_write_timeout(Some(STREAM_IDLE_TIMEOUT));
    let _ = s.set_read_timeout(Some(STREAM_IDLE_TIMEOUT));
    write!(s, "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\nContent-Type: application/warc\r\nContent-Length: {len}\r\n\r\n")
        .map_err(|e| UploadError::Failed(format!("cannot talk to the proxy at {addr}: {e}")))?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut sent = 0u64;
    while sent < len {
        let n = f
            .read(&mut buf)
            .map_err(|e| UploadError::Unreadable(format!("cannot read {}: {e}", file.display())))?;
        if n == 0 {
            return Err(UploadError::Failed(format!(
                "{} got shorter while it was sent ({sent} of {len} bytes)",
                file.display()
            )));
        }
        let n = n.min((len - sent) as usize);
        s.write_all(&buf[..n]).map_err(|e| {
            UploadError::Failed(format!("the proxy at {addr} stopped reading the upload: {e}"))
        })?;
        sent += n as u64;
        progress(sent);
    }
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| UploadError::Failed(format!("cannot read the proxy's answer: {e}")))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| UploadError::Failed("malformed answer from the proxy".to_string()))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:")
            && l.to_ascii_lowercase().contains("chunked")
    });
    Ok((status, if chunked { dechunk(body) } else { body.to_string() }))
}

/// The data of a chunked body held whole (a short admin answer).
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    out
}

/// The head of a streamed admin answer ([`admin_stream`]).
#[derive(Debug)]
pub struct StreamedHead {
    /// The status code (200).
    pub status: u16,
    /// The response header fields.
    pub headers: http::HeaderMap,
}

/// How long a streamed admin answer may stay silent before it is given up.
pub const STREAM_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Sends `method path` (empty body, the admin token when configured) to
/// the running proxy with hyper and hands the answer's body to `sink`
/// piece by piece as it arrives, so an answer of any size is never held
/// whole (`cache ls`, `cache cat` through the proxy). A `sink` error of
/// kind `BrokenPipe` (stdout closed: `| head`) ends the transfer quietly.
///
/// Errors: the proxy cannot be reached (2 s connect timeout), sends no
/// answer head within `head_timeout` (work done before answering: a purge)
/// or then says nothing for [`STREAM_IDLE_TIMEOUT`], answers with another
/// status than 200 (the error is its body, trimmed), or cuts the body
/// short; or `sink` fails otherwise.
pub fn admin_stream(
    admin: &Admin,
    method: &str,
    path: &str,
    head_timeout: std::time::Duration,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<StreamedHead, StreamError> {
    use http_body_util::BodyExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let addr = admin.addr;
    rt.block_on(async {
        let connect = tokio::net::TcpStream::connect(addr);
        let tcp = tokio::time::timeout(std::time::Duration::from_secs(2), connect)
            .await
            .map_err(|_| format!("cannot reach the proxy at {addr}: timed out"))?
            .map_err(|e| format!("cannot reach the proxy at {addr}: {e}"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake::<
            _,
            http_body_util::Empty<bytes::Bytes>,
        >(hyper_util::rt::TokioIo::new(tcp))
        .await
        .map_err(|e| format!("cannot talk to the proxy at {addr}: {e}"))?;
        tokio::spawn(conn);
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, addr.to_string());
        if !admin.token.is_empty() {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {}", admin.token));
        }
        let req = req
            .body(http_body_util::Empty::new())
            .map_err(|e| format!("bad admin request {path}: {e}"))?;
        let resp = tokio::time::timeout(head_timeout, sender.send_request(req))
            .await
            .map_err(|_| format!("the proxy at {addr} did not answer within {head_timeout:?}"))?
            .map_err(|e| format!("cannot read the proxy's answer: {e}"))?;
        let (parts, mut body) = resp.into_parts();
        let status = parts.status.as_u16();
        let mut error = Vec::new();
        loop {
            let frame =
                tokio::time::timeout(STREAM_IDLE_TIMEOUT, body.frame()).await.map_err(|_| {
                    format!("the proxy at {addr} stopped sending for {STREAM_IDLE_TIMEOUT:?}")
                })?;
            let Some(frame) = frame else { break };
            let frame = frame.map_err(|e| {
                format!("the proxy's answer was cut short: {e} (see the proxy's log)")
            })?;
            let Ok(data) = frame.into_data() else { continue };
            if status != 200 {
                if error.len() < 64 * 1024 {
                    error.extend_from_slice(&data);
                }
                continue;
            }
            match sink(&data) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
                Err(e) => return Err(e.to_string().into()),
            }
        }
        if status != 200 {
            let text = String::from_utf8_lossy(&error).trim().to_string();
            let text = text.strip_prefix("crawlcache: ").map(str::to_string).unwrap_or(text);
            let message =
                if text.is_empty() { format!("the proxy answered {status}") } else { text };
            return Err(StreamError { status: Some(status), message });
        }
        Ok(StreamedHead { status, headers: parts.headers })
    })
}
