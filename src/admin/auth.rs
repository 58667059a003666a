//! Who may use the admin endpoints, and from which page (docs/CASES.md C54).
//!
//! Three checks, in order, each refusing with `403` and a reason:
//! 1. [`names_proxy`]: the request is addressed to the proxy itself. Its
//!    `Host` (or the authority of an absolute-form target) is an IP literal
//!    of this proxy, `localhost`, or a name in `server.admin_hosts`; a page
//!    that reaches the proxy through DNS rebinding sends its own name there.
//! 2. [`admitted`]: with `server.admin_token` set, the token; without, a
//!    loopback client while the proxy listens on loopback.
//! 3. [`foreign_page`]: a browser request started by another page is
//!    refused (its `Origin` is not the proxy's own origin, or its
//!    `Sec-Fetch-Site` is `same-site` or `cross-site`), unless it carries the
//!    token as `Authorization: Bearer` (which a browser never adds by
//!    itself) or it is a top-level navigation to the status page. A page on
//!    another port of `localhost` is a foreign page. The cache browser
//!    (`/cache/browse`, `/cache/entry`) opens from the status page's links
//!    (same-origin) or a typed URL (`Sec-Fetch-Site: none`), not from
//!    another site's link, and its purge button is a same-origin `POST`. Requests without those
//!    fields (curl, the CLI, scripts) are not browser requests and pass.
//!
//! State changes (purge, prune, import, compact, robots refresh, repair) are
//! only ever made by `POST` (or `DELETE`), never `GET` ([`super::handle`]).

use std::net::{IpAddr, SocketAddr};

/// Why an admin request was refused (each answered `403`, or `401` for a
/// browser that may still send the token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The `Host` does not name the proxy (DNS rebinding, or a request
    /// meant for another server).
    #[error("admin endpoints answer requests addressed to the proxy itself; Host {0} is not one of its names (add it to server.admin_hosts)")]
    ForeignHost(String),
    /// A request started by another page (cross-site request forgery, or a
    /// cross-site read).
    #[error("admin endpoints refuse requests from other pages ({0}); send them from the status page, the CLI or curl, or with `Authorization: Bearer <server.admin_token>`")]
    ForeignPage(String),
    /// `server.admin_token` is set and the request does not carry it.
    #[error("admin endpoints need `Authorization: Bearer <server.admin_token>`")]
    NoToken,
    /// No token is set and the proxy listens beyond loopback.
    #[error("admin endpoints are off: the proxy listens beyond loopback and server.admin_token is not set")]
    Off,
    /// No token is set and the client is not on loopback.
    #[error("admin endpoints answer loopback clients only (or set server.admin_token)")]
    NotLoopback,
}

/// What an admin request is judged on: its method, path, target authority
/// (absolute-form only) and fields, and the proxy's own address.
pub struct AdminRequest<'a> {
    /// The request's method.
    pub method: &'a http::Method,
    /// The request's path.
    pub path: &'a str,
    /// The request-target's authority (absolute-form), else `None`.
    pub authority: Option<&'a str>,
    /// The request's header fields.
    pub headers: &'a http::HeaderMap,
    /// The client's address.
    pub peer: SocketAddr,
    /// The address the proxy listens on (its port is the admin origin's).
    pub local_addr: SocketAddr,
}

/// Runs the three checks of this module on `req` (see the module's
/// documentation); `Ok` when the request may be served.
pub fn check(server: &crate::config::ServerConfig, req: &AdminRequest<'_>) -> Result<(), Refusal> {
    names_proxy(server, req)?;
    admitted(server, req.headers, req.peer)?;
    foreign_page(server, req)
}

/// Whether an admin request from `peer` with `headers` is admitted: with
/// `server.admin_token` set, only with `Authorization: Bearer <token>` (or,
/// from a browser, HTTP Basic with the token as the password); without,
/// only from loopback while the proxy listens on loopback.
pub fn admitted(
    server: &crate::config::ServerConfig,
    headers: &http::HeaderMap,
    peer: SocketAddr,
) -> Result<(), Refusal> {
    let token = server.admin_token.trim();
    if !token.is_empty() {
        let auth = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let basic = auth
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| data_encoding::BASE64.decode(b.trim().as_bytes()).ok())
            .and_then(|d| String::from_utf8(d).ok())
            .and_then(|up| up.split_once(':').map(|(_, password)| password.to_string()));
        let sent = bearer(headers).map(str::to_string).or(basic);
        return match sent.as_deref() {
            Some(t) if constant_time_eq(t.trim().as_bytes(), token.as_bytes()) => Ok(()),
            _ => Err(Refusal::NoToken),
        };
    }
    if !crate::wire::net::is_loopback(server.listen.ip()) {
        return Err(Refusal::Off);
    }
    if !crate::wire::net::is_loopback(peer.ip()) {
        return Err(Refusal::NotLoopback);
    }
    Ok(())
}

/// The `Authorization: Bearer` credentials of `headers`, if any.
fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Check 1: the target's authority (absolute-form) or else `Host` names the
/// proxy ([`is_own_host`]). A request without either (HTTP/1.0) is not
/// from a browser, which always sends `Host`, and passes.
pub fn names_proxy(
    server: &crate::config::ServerConfig,
    req: &AdminRequest<'_>,
) -> Result<(), Refusal> {
    let host = match req.authority {
        Some(a) => a.to_string(),
        None => match req.headers.get(http::header::HOST) {
            Some(v) => String::from_utf8_lossy(v.as_bytes()).into_owned(),
            None => return Ok(()),
        },
    };
    match split_host_port(&host) {
        Some((name, _)) if is_own_host(server, name, req.local_addr) => Ok(()),
        _ => Err(Refusal::ForeignHost(printable(&host))),
    }
}

/// Whether `name` (a host without its port, IPv6 literals without
/// brackets) is one of the proxy's names: `localhost`, a loopback address,
/// the listen address (any address when it listens on all of them), or a
/// name in `server.admin_hosts` (compared without regard to case).
pub fn is_own_host(
    server: &crate::config::ServerConfig,
    name: &str,
    local_addr: SocketAddr,
) -> bool {
    if name.eq_ignore_ascii_case("localhost")
        || server.admin_hosts.iter().any(|h| h.trim().eq_ignore_ascii_case(name))
    {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => {
            crate::wire::net::is_loopback(ip)
                || ip == local_addr.ip()
                || local_addr.ip().is_unspecified()
        }
        Err(_) => false,
    }
}

/// Check 3: refuses a browser request started by another page. A request
/// with a valid Bearer token, or a top-level `GET`/`HEAD` navigation to the
/// status page (a link followed from another site shows the page; its
/// reads and changes are the page's own), passes.
pub fn foreign_page(
    server: &crate::config::ServerConfig,
    req: &AdminRequest<'_>,
) -> Result<(), Refusal> {
    let token = server.admin_token.trim();
    if !token.is_empty()
        && bearer(req.headers).is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()))
    {
        return Ok(());
    }
    let field = |name: &str| {
        req.headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_ascii_lowercase())
    };
    let why = match (field("origin"), field("sec-fetch-site")) {
        (Some(origin), _) if !is_own_origin(server, &origin, req.local_addr) => {
            format!("Origin {}", printable(&origin))
        }
        (_, Some(site)) if site != "same-origin" && site != "none" => {
            format!("Sec-Fetch-Site {}", printable(&site))
        }
        _ => return Ok(()),
    };
    let navigation = field("sec-fetch-mode").as_deref() == Some("navigate")
        && matches!(*req.method, http::Method::GET | http::Method::HEAD);
    if navigation && matches!(req.path, "/" | "/status") {
        return Ok(());
    }
    Err(Refusal::ForeignPage(why))
}

/// Whether an `Origin` value (lower-cased) is the proxy's own origin:
/// `http`, one of its names ([`is_own_host`]) and the port it listens on.
fn is_own_origin(
    server: &crate::config::ServerConfig,
    origin: &str,
    local_addr: SocketAddr,
) -> bool {
    let Some(authority) = origin.strip_prefix("http://") else { return false };
    match split_host_port(authority) {
        Some((name, port)) => {
            port.unwrap_or(80) == local_addr.port() && is_own_host(server, name, local_addr)
        }
        None => false,
    }
}

/// `host[:port]` split into the host (brackets of an IPv6 literal removed)
/// and its port; `None` when the port is not a number or the rest is not an
/// authority.
fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            Some(_) => return None,
            None => (authority, None),
        }
    };
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((host, port))
}

/// `s` cut to 100 characters, control characters replaced, for a message.
fn printable(s: &str) -> String {
    s.chars().take(100).map(|c| if c.is_control() { '?' } else { c }).collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(token: &str, hosts: &[&str]) -> crate::config::ServerConfig {
        let mut s = crate::config::Config::defaults().unwrap().server;
        s.admin_token = token.into();
        s.admin_hosts = hosts.iter().map(|h| h.to_string()).collect();
        s
    }

    fn judge(
        server: &crate::config::ServerConfig,
        method: http::Method,
        path: &str,
        fields: &[(&str, &str)],
    ) -> Result<(), Refusal> {
        let mut headers = http::HeaderMap::new();
        for (k, v) in fields {
            headers.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        let local: SocketAddr = "127.0.0.1:3128".parse().unwrap();
        let req = AdminRequest {
            method: &method,
            path,
            authority: None,
            headers: &headers,
            peer: "127.0.0.1:5000".parse().unwrap(),
            local_addr: local,
        };
        check(server, &req)
    }

    #[test]
    fn host_must_name_the_proxy_c54() {
        let s = server("", &["proxy.internal"]);
        for ok in [
            "127.0.0.1:3128",
            "localhost:3128",
            "LOCALHOST",
            "[::1]:3128",
            "127.0.0.2",
            "proxy.internal:3128",
        ] {
            assert_eq!(judge(&s, http::Method::GET, "/stats", &[("host", ok)]), Ok(()), "{ok}");
        }
        for bad in [
            "rebind.attacker.example:3128",
            "attacker.example",
            "10.1.2.3:3128",
            "localhost.attacker.example",
            "a:b:c",
            "",
        ] {
            assert!(
                matches!(
                    judge(&s, http::Method::GET, "/stats", &[("host", bad)]),
                    Err(Refusal::ForeignHost(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_foreign_page_changes_nothing_c54() {
        let s = server("", &[]);
        let host = ("host", "127.0.0.1:3128");
        let refused = |fields: &[(&str, &str)]| {
            matches!(
                judge(&s, http::Method::POST, "/cache/purge", fields),
                Err(Refusal::ForeignPage(_))
            )
        };
        assert!(refused(&[host, ("origin", "http://attacker.example")]));
        assert!(refused(&[host, ("origin", "null")]));
        // Another port of the same machine is another origin.
        assert!(refused(&[
            host,
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-site")
        ]));
        assert!(refused(&[host, ("origin", "https://127.0.0.1:3128")]));
        assert!(refused(&[host, ("sec-fetch-site", "cross-site")]));
        assert!(refused(&[host, ("sec-fetch-site", "same-site")]));
        // The status page's own fetch, a typed URL, curl.
        for ok in [
            vec![host, ("origin", "http://127.0.0.1:3128"), ("sec-fetch-site", "same-origin")],
            vec![host, ("origin", "http://localhost:3128")],
            vec![host, ("sec-fetch-site", "none")],
            vec![host],
        ] {
            assert_eq!(judge(&s, http::Method::POST, "/cache/purge", &ok), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn reads_from_a_foreign_page_are_refused_but_a_link_to_the_status_page_opens_it_c54() {
        let s = server("", &[]);
        let cross = [
            ("host", "127.0.0.1:3128"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ];
        assert!(matches!(
            judge(&s, http::Method::GET, "/cache/cat", &cross),
            Err(Refusal::ForeignPage(_))
        ));
        assert!(matches!(
            judge(&s, http::Method::GET, "/status.json", &cross),
            Err(Refusal::ForeignPage(_))
        ));
        let link = [
            ("host", "127.0.0.1:3128"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
        ];
        assert_eq!(judge(&s, http::Method::GET, "/", &link), Ok(()));
        assert!(matches!(
            judge(&s, http::Method::GET, "/cache/cat", &link),
            Err(Refusal::ForeignPage(_))
        ));
        assert!(matches!(judge(&s, http::Method::POST, "/", &link), Err(Refusal::ForeignPage(_))));
    }

    /// Issue 46: the cache browser opens from the status page's links
    /// (same-origin navigation) and from a typed URL, never from another
    /// site's link or request; its purge is a POST from its own page.
    #[test]
    fn the_cache_browser_opens_from_the_status_page_or_a_typed_url_only_c54() {
        let s = server("", &[]);
        let host = ("host", "127.0.0.1:3128");
        let nav =
            |site: &'static str| [host, ("sec-fetch-site", site), ("sec-fetch-mode", "navigate")];
        for path in ["/cache/browse", "/cache/entry"] {
            assert_eq!(
                judge(&s, http::Method::GET, path, &nav("same-origin")),
                Ok(()),
                "{path} from the status page"
            );
            assert_eq!(judge(&s, http::Method::GET, path, &nav("none")), Ok(()), "{path} typed");
            assert!(
                matches!(
                    judge(&s, http::Method::GET, path, &nav("cross-site")),
                    Err(Refusal::ForeignPage(_))
                ),
                "{path} from another site"
            );
        }
        let from_page = [
            host,
            ("origin", "http://127.0.0.1:3128"),
            ("sec-fetch-site", "same-origin"),
            ("sec-fetch-mode", "navigate"),
        ];
        assert_eq!(judge(&s, http::Method::POST, "/cache/purge", &from_page), Ok(()));
        let forged = [
            host,
            ("origin", "http://attacker.example"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
        ];
        assert!(matches!(
            judge(&s, http::Method::POST, "/cache/purge", &forged),
            Err(Refusal::ForeignPage(_))
        ));
    }

    #[test]
    fn only_a_bearer_token_lets_a_foreign_page_through_c54() {
        let s = server("s3cret", &[]);
        let base = [("host", "127.0.0.1:3128"), ("origin", "http://attacker.example")];
        let with = |auth: &str| {
            let mut f = base.to_vec();
            f.push(("authorization", auth));
            judge(&s, http::Method::POST, "/cache/purge", &f)
        };
        assert_eq!(with("Bearer s3cret"), Ok(()));
        // A browser replays Basic credentials by itself: no exemption.
        let basic = format!("Basic {}", data_encoding::BASE64.encode(b"any:s3cret"));
        assert!(matches!(with(&basic), Err(Refusal::ForeignPage(_))));
        assert_eq!(with("Bearer wrong"), Err(Refusal::NoToken));
        // The Host rule holds with a token too.
        let rebound = [("host", "rebind.attacker.example"), ("authorization", "Bearer s3cret")];
        assert!(matches!(
            judge(&s, http::Method::GET, "/stats", &rebound),
            Err(Refusal::ForeignHost(_))
        ));
    }

    #[test]
    fn host_port_splitting() {
        assert_eq!(split_host_port("a:80"), Some(("a", Some(80))));
        assert_eq!(split_host_port("[::1]:3128"), Some(("::1", Some(3128))));
        assert_eq!(split_host_port("[::1]"), Some(("::1", None)));
        assert_eq!(split_host_port("a:x"), None);
        assert_eq!(split_host_port("::1"), None);
        assert_eq!(split_host_port("a@b:1"), None);
        assert_eq!(split_host_port(":80"), None);
    }
}
