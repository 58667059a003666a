//! How a command reaches the data directory: directly when the proxy is not
//! running, through the running proxy's admin endpoints when it is (sled
//! locks the index to one process).

use crate::config::Config;
use crate::store::Store;
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
/// and no proxy answers at the recorded address.
pub fn open_store(cfg: &Config) -> Result<StoreAccess, String> {
    let dir = &cfg.server.data_dir;
    if !dir.join("index").exists() && !dir.exists() {
        return Err(format!("no cache at {} (nothing stored yet, or wrong --data-dir)", dir.display()));
    }
    match Store::open_with(dir, &cfg.store_options()) {
        Ok(s) => Ok(StoreAccess::Direct(s)),
        Err(e) => {
            // Most likely a running proxy holds the index: ask it, at the
            // address it recorded in the data directory.
            let recorded = std::fs::read_to_string(dir.join(crate::proxy::ADDR_FILE))
                .ok()
                .and_then(|s| s.trim().parse::<SocketAddr>().ok());
            let admin = recorded.map(|addr| Admin { addr, token: cfg.server.admin_token.trim().to_string() });
            match admin {
                Some(a) if admin_request(&a, "GET", "/stats").is_ok() => Ok(StoreAccess::Daemon(a)),
                _ => Err(format!("cannot open the cache in {}: {e}", dir.display())),
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
/// Errors: the proxy cannot be reached or read, or its answer has no status.
pub fn admin_request(admin: &Admin, method: &str, path: &str) -> Result<(u16, String), String> {
    let addr = admin.addr;
    let auth = if admin.token.is_empty() { String::new() } else { format!("Authorization: Bearer {}\r\n", admin.token) };
    let timeout = std::time::Duration::from_secs(30);
    let mut s = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))
        .map_err(|e| format!("cannot reach the proxy at {addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(timeout));
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\nContent-Length: 0\r\n\r\n")
        .map_err(|e| format!("cannot talk to the proxy at {addr}: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("cannot read the proxy's answer: {e}"))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or("malformed answer from the proxy")?;
    Ok((status, body.to_string()))
}
