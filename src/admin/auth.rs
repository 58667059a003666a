//! Who may use the admin endpoints: loopback clients while the proxy
//! listens on loopback, or anyone with `server.admin_token`.

use std::net::SocketAddr;

/// Whether an admin request from `peer` with `headers` is admitted: with
/// `server.admin_token` set, only with `Authorization: Bearer <token>` (or,
/// from a browser, HTTP Basic with the token as the password); without,
/// only from loopback while the proxy listens on loopback.
pub fn admitted(server: &crate::config::ServerConfig, headers: &http::HeaderMap, peer: SocketAddr) -> Result<(), &'static str> {
    let token = server.admin_token.trim();
    if !token.is_empty() {
        let auth = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let basic = auth
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| data_encoding::BASE64.decode(b.trim().as_bytes()).ok())
            .and_then(|d| String::from_utf8(d).ok())
            .and_then(|up| up.split_once(':').map(|(_, password)| password.to_string()));
        let sent = auth.and_then(|v| v.strip_prefix("Bearer ")).map(str::to_string).or(basic);
        return match sent.as_deref() {
            Some(t) if constant_time_eq(t.trim().as_bytes(), token.as_bytes()) => Ok(()),
            _ => Err("admin endpoints need `Authorization: Bearer <server.admin_token>`"),
        };
    }
    if !crate::wire::net::is_loopback(server.listen.ip()) {
        return Err("admin endpoints are off: the proxy listens beyond loopback and server.admin_token is not set");
    }
    if !crate::wire::net::is_loopback(peer.ip()) {
        return Err("admin endpoints answer loopback clients only (or set server.admin_token)");
    }
    Ok(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
