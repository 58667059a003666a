//! A parent (upstream) proxy (issue 10 item 12): crawlcache configured with
//! `upstream.proxy` reaches origins through it, plain `http://` requests in
//! absolute form with `Proxy-Authorization`, `https://` origins through
//! `CONNECT`, robots.txt fetches included; hosts in `upstream.no_proxy` go
//! direct; a parent that cannot be reached, or that wants credentials it
//! did not get, gives a 502 naming the parent. An origin that speaks only
//! HTTP/2 is spoken to over HTTP/2 inside the parent's tunnel (issue 43).
//!
//! The parent here is a small CONNECT-capable proxy written for the test
//! (std threads on 127.0.0.1): it records every request head it receives,
//! answers 407 unless `Proxy-Authorization: Basic dXNlcjpwYXNz` (user:pass)
//! is sent when it requires credentials, relays an absolute-form request to
//! its origin (one request per connection), and splices bytes after
//! answering 200 to CONNECT.

#[path = "../common/mod.rs"]
mod common;

use common::tls::{test_pki, TestPki};
use common::*;
use rustls::pki_types::pem::PemObject;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// `user:pass` in Basic form.
const CREDENTIALS: &str = "Basic dXNlcjpwYXNz";
/// Every socket operation of the test's own servers and clients.
const IO_LIMIT: Duration = Duration::from_secs(15);
/// How long to wait for something crawlcache does in the background (a robots.txt fetch).
const WAIT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------
// The test parent proxy
// ---------------------------------------------------------------------------

/// One request head the parent received.
#[derive(Debug, Clone)]
struct Seen {
    /// The request line, e.g. `GET http://127.0.0.1:8080/a HTTP/1.1`.
    line: String,
    /// Its `Proxy-Authorization` field.
    auth: Option<String>,
    /// Its `Host` field.
    host: Option<String>,
}

/// A CONNECT-capable HTTP proxy on 127.0.0.1:PORT. Stopped on drop (the
/// connection threads end with their connections, bounded by [`IO_LIMIT`]).
struct Parent {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Parent {
    /// A parent that answers 407 to requests without [`CREDENTIALS`] when
    /// `require_auth`.
    fn start(require_auth: bool) -> Parent {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the test parent proxy");
        let addr = listener.local_addr().expect("test parent proxy address");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let thread = thread::Builder::new()
            .name(format!("parent-{}", addr.port()))
            .spawn(move || {
                while !stop2.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            let seen = seen2.clone();
                            thread::spawn(move || {
                                let _ = conn.set_nonblocking(false);
                                if let Err(e) = serve_parent(conn, require_auth, &seen) {
                                    eprintln!("[test parent] connection ended: {e}");
                                }
                            });
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            thread::sleep(Duration::from_millis(5))
                        }
                        Err(e) => {
                            eprintln!("[test parent] accept: {e}");
                            thread::sleep(Duration::from_millis(5));
                        }
                    }
                }
            })
            .expect("spawning the test parent proxy");
        Parent { addr, seen, stop, thread: Some(thread) }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until a request line containing `needle` arrived; panics with
    /// what did arrive after [`WAIT`].
    fn wait_for(&self, needle: &str) -> Seen {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(s) = self.seen().into_iter().find(|s| s.line.contains(needle)) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the parent proxy never saw a request line containing {needle:?}; it saw {:#?}",
                self.seen()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Parent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads a message head (up to the empty line); returns it and any bytes
/// read past it.
fn read_head(conn: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > 64 * 1024 {
            return Err(std::io::Error::other("head over 64 KiB"));
        }
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                ErrorKind::UnexpectedEof,
                "closed before the end of the head",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn head_field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|l| {
        l.split_once(':')
            .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    })
}

/// Serves one client connection of the parent: one absolute-form request,
/// or one CONNECT tunnel.
fn serve_parent(
    mut client: TcpStream,
    require_auth: bool,
    seen: &Mutex<Vec<Seen>>,
) -> std::io::Result<()> {
    client.set_read_timeout(Some(IO_LIMIT))?;
    client.set_write_timeout(Some(IO_LIMIT))?;
    let (head, rest) = read_head(&mut client)?;
    let line = head.split("\r\n").next().unwrap_or("").to_string();
    let auth = head_field(&head, "proxy-authorization").map(str::to_string);
    seen.lock().unwrap().push(Seen {
        line: line.clone(),
        auth: auth.clone(),
        host: head_field(&head, "host").map(str::to_string),
    });
    if require_auth && auth.as_deref() != Some(CREDENTIALS) {
        client.write_all(
            b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    }
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method == "CONNECT" {
        let mut origin =
            match TcpStream::connect(target) {
                Ok(o) => o,
                Err(_) => return client.write_all(
                    b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                ),
            };
        origin.set_read_timeout(Some(IO_LIMIT))?;
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
        origin.write_all(&rest)?;
        let (mut c2, mut o2) = (client.try_clone()?, origin.try_clone()?);
        let up = thread::spawn(move || {
            let _ = std::io::copy(&mut c2, &mut o2);
            let _ = o2.shutdown(Shutdown::Write);
        });
        let _ = std::io::copy(&mut origin, &mut client);
        let _ = client.shutdown(Shutdown::Write);
        let _ = up.join();
        return Ok(());
    }
    // Absolute form: http://host:port/path.
    let Some(after) = target.strip_prefix("http://") else {
        return client.write_all(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    };
    let (authority, path) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, "/"),
    };
    let mut origin = TcpStream::connect(authority)?;
    origin.set_read_timeout(Some(IO_LIMIT))?;
    let mut out = format!("{method} {path} HTTP/1.1\r\n");
    for l in head.split("\r\n").skip(1).filter(|l| !l.is_empty()) {
        let name = l.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
        if !matches!(
            name.as_str(),
            "proxy-authorization" | "proxy-connection" | "connection" | "keep-alive"
        ) {
            out.push_str(l);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    origin.write_all(out.as_bytes())?;
    let mut response = Vec::new();
    origin.read_to_end(&mut response)?;
    // One request per connection: tell the client so.
    let at = response.windows(2).position(|w| w == b"\r\n").map(|i| i + 2).unwrap_or(0);
    response.splice(at..at, b"Connection: close\r\n".iter().copied());
    client.write_all(&response)?;
    let _ = client.shutdown(Shutdown::Write);
    Ok(())
}

// ---------------------------------------------------------------------------
// A TLS origin and an HTTPS client through crawlcache
// ---------------------------------------------------------------------------

/// A TLS origin on 127.0.0.1:PORT (leaf from [`TestPki`]) answering every
/// request with `secure page PATH` (404 for /robots.txt), one request per
/// connection. Records the paths. Stopped on drop.
struct TlsOrigin {
    addr: SocketAddr,
    paths: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl TlsOrigin {
    fn start(pki: &TestPki) -> TlsOrigin {
        let config = pki.server_config();
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the TLS origin");
        let addr = listener.local_addr().expect("TLS origin address");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let paths: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (paths2, stop2) = (paths.clone(), stop.clone());
        let thread = thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((tcp, _)) => {
                        let (config, paths) = (config.clone(), paths2.clone());
                        thread::spawn(move || {
                            let _ = tcp.set_nonblocking(false);
                            let _ = tcp.set_read_timeout(Some(IO_LIMIT));
                            let _ = tcp.set_write_timeout(Some(IO_LIMIT));
                            let Ok(conn) = rustls::ServerConnection::new(config) else { return };
                            let mut tls = rustls::StreamOwned::new(conn, tcp);
                            let mut buf = Vec::new();
                            let mut chunk = [0u8; 4096];
                            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                                match tls.read(&mut chunk) {
                                    Ok(0) | Err(_) => return,
                                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                                }
                            }
                            let head = String::from_utf8_lossy(&buf).into_owned();
                            let path = head.split(' ').nth(1).unwrap_or("").to_string();
                            paths.lock().unwrap().push(path.clone());
                            let (status, body) = if path == "/robots.txt" {
                                ("404 Not Found", String::new())
                            } else {
                                ("200 OK", format!("secure page {path}"))
                            };
                            let resp = format!(
                                "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nCache-Control: max-age=60\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                                body.len()
                            );
                            let _ = tls.write_all(resp.as_bytes());
                            tls.conn.send_close_notify();
                            let _ = tls.flush();
                        });
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        TlsOrigin { addr, paths, stop, thread: Some(thread) }
    }

    fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `GET https://HOST:PORT/PATH` through crawlcache at `proxy`: CONNECT, then
/// TLS trusting crawlcache's CA (`ca_pem`), then one request. Returns the
/// status and the raw body (small bodies: one chunk at most).
fn https_get(proxy: SocketAddr, ca_pem: &Path, host: &str, port: u16, path: &str) -> (u16, String) {
    let mut tcp = TcpStream::connect(proxy).expect("connecting to crawlcache");
    tcp.set_read_timeout(Some(IO_LIMIT)).unwrap();
    tcp.set_write_timeout(Some(IO_LIMIT)).unwrap();
    write!(tcp, "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n").unwrap();
    let (head, rest) = read_head(&mut tcp).expect("crawlcache's answer to CONNECT");
    assert!(head.starts_with("HTTP/1.1 200"), "crawlcache answered CONNECT with {head}");
    assert!(rest.is_empty(), "bytes after crawlcache's CONNECT answer");
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca_pem)
        .unwrap_or_else(|e| panic!("reading crawlcache's CA {}: {e}", ca_pem.display()));
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.expect("crawlcache's CA PEM")).expect("crawlcache's CA as a trust anchor");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).expect("server name");
    let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("TLS client");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(tls, "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n")
        .expect("sending the request through the tunnel");
    let mut raw = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match tls.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::UnexpectedEof && !raw.is_empty() => break,
            Err(e) => panic!(
                "reading the response through the tunnel: {e} (so far: {})",
                String::from_utf8_lossy(&raw)
            ),
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

// ---------------------------------------------------------------------------
// Set-up
// ---------------------------------------------------------------------------

/// A crawlcache configuration with `upstream.proxy = PROXY`, `no_proxy`
/// entries, robots `mode`, and the test CA as the extra upstream CA.
fn config(proxy: &str, no_proxy: &[&str], robots_mode: &str, extra_ca: Option<&Path>) -> String {
    let no: Vec<String> = no_proxy.iter().map(|n| format!("{n:?}")).collect();
    let ca = extra_ca
        .map(|p| format!("extra_ca_file = {:?}\n", p.display().to_string()))
        .unwrap_or_default();
    format!(
        "[robots]\nmode = \"{robots_mode}\"\n\n[upstream]\nconnect_timeout = \"3s\"\nresponse_timeout = \"10s\"\nproxy = {proxy:?}\nno_proxy = [{}]\n{ca}",
        no.join(", ")
    )
}

fn start(label: &str, config_toml: &str) -> Proxy {
    let dir = TestDir::new(label);
    Proxy::start_with_config(&dir.subdir("data"), config_toml, &[]).owning(dir)
}

fn page(r: &RecordedRequest) -> Reply {
    if r.path() == "/robots.txt" {
        Reply::ok(&[("Content-Type", "text/plain")], b"User-agent: *\nDisallow: /private\n")
    } else {
        Reply::ok(
            &[("Content-Type", "text/plain"), ("Cache-Control", "max-age=60")],
            format!("page {}", r.path()).as_bytes(),
        )
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// A plain http:// request and its robots.txt fetch reach the parent in
/// absolute form, with the configured credentials and the origin's Host.
#[test]
fn plain_requests_and_robots_txt_go_through_the_parent_in_absolute_form_with_credentials() {
    let parent = Parent::start(true);
    let origin = Origin::start(page);
    let proxy = start(
        "parent-plain",
        &config(&format!("http://user:pass@{}", parent.addr), &[], "annotate", None),
    );

    let url = origin.url("/page");
    let r = proxy.get(&url, &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "page /page"),
        "{}\n{}",
        r.describe(),
        proxy.stderr_tail(30)
    );

    let o = origin.addr();
    let page_line = parent.wait_for(&format!("GET http://{o}/page HTTP/1.1"));
    let robots_line = parent.wait_for(&format!("GET http://{o}/robots.txt HTTP/1.1"));
    for s in [&page_line, &robots_line] {
        assert_eq!(s.auth.as_deref(), Some(CREDENTIALS), "{s:?}");
        assert_eq!(s.host.as_deref(), Some(o.to_string().as_str()), "{s:?}");
    }
    assert!(parent.seen().iter().all(|s| !s.line.starts_with("CONNECT")), "{:#?}", parent.seen());
    // The origin got both from the parent (which relays in origin-form).
    let paths: Vec<String> = origin.requests().iter().map(|r| r.target.clone()).collect();
    assert!(
        paths.contains(&"/page".to_string()) && paths.contains(&"/robots.txt".to_string()),
        "{paths:?}"
    );

    // A second fetch is a cache hit: the parent sees no second /page.
    let again = proxy.get(&url, &[]);
    assert_eq!(again.status, 200, "{}", again.describe());
    let pages = parent.seen().iter().filter(|s| s.line.contains("/page ")).count();
    assert_eq!(pages, 1, "{:#?}", parent.seen());
}

/// An https:// origin is reached through CONNECT at the parent (with
/// credentials), with TLS to the origin over the tunnel verified against the
/// extra CA; its robots.txt too.
#[test]
fn https_origins_are_reached_through_connect_with_credentials() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki);
    let parent = Parent::start(true);
    let dir = TestDir::new("parent-https-ca");
    let ca_file = dir.join("origin-ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let proxy = start(
        "parent-https",
        &config(&format!("http://user:pass@{}", parent.addr), &[], "annotate", Some(&ca_file)),
    );
    let crawlcache_ca = proxy.data_dir().join("ca/ca.pem");

    let port = origin.addr.port();
    let (status, body) = https_get(proxy.addr(), &crawlcache_ca, "localhost", port, "/secure");
    assert_eq!(status, 200, "body: {body}\n{}", proxy.stderr_tail(30));
    assert!(body.contains("secure page /secure"), "{body}");

    let connect = parent.wait_for(&format!("CONNECT localhost:{port} HTTP/1.1"));
    assert_eq!(connect.auth.as_deref(), Some(CREDENTIALS), "{connect:?}");
    let deadline = Instant::now() + WAIT;
    while !origin.paths().contains(&"/robots.txt".to_string()) {
        assert!(
            Instant::now() < deadline,
            "the https robots.txt fetch never reached the origin: {:?}",
            origin.paths()
        );
        thread::sleep(Duration::from_millis(20));
    }
    for s in parent.seen() {
        assert!(
            s.line.starts_with(&format!("CONNECT localhost:{port} ")),
            "only CONNECT for an https origin: {s:?}"
        );
        assert_eq!(s.auth.as_deref(), Some(CREDENTIALS), "{s:?}");
    }
    assert_eq!(
        origin.paths().iter().filter(|p| *p == "/secure").count(),
        1,
        "{:?}",
        origin.paths()
    );
}

/// Issue 43: an origin that speaks only HTTP/2 is reached through the
/// parent's CONNECT tunnel over HTTP/2 (ALPN inside the tunnel, as
/// direct), and its answer is stored: the second request is a hit.
#[test]
fn an_h2_only_origin_is_reached_over_h2_inside_the_parents_tunnel() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = common::h2_origin::H2Origin::start(
        &pki,
        common::h2_origin::Speaks::Tls(&["h2"]),
        Duration::ZERO,
    );
    let parent = Parent::start(true);
    let dir = TestDir::new("parent-h2-ca");
    let ca_file = dir.join("origin-ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let proxy = start(
        "parent-h2",
        &config(&format!("http://user:pass@{}", parent.addr), &[], "off", Some(&ca_file)),
    );
    let crawlcache_ca = proxy.data_dir().join("ca/ca.pem");
    let port = origin.port();
    for round in 1..=2 {
        let (status, body) = https_get(proxy.addr(), &crawlcache_ca, "localhost", port, "/h2");
        assert_eq!(status, 200, "round {round}: {body}\n{}", proxy.stderr_tail(30));
        assert!(body.contains("origin /h2"), "{body}");
    }
    let seen = origin.seen();
    assert_eq!(seen.len(), 1, "the second request was a hit: {seen:?}");
    assert_eq!(seen[0].version, "HTTP/2.0", "{seen:?}");
    let connect = parent.wait_for(&format!("CONNECT localhost:{port} HTTP/1.1"));
    assert_eq!(connect.auth.as_deref(), Some(CREDENTIALS), "{connect:?}");
}

/// Hosts in `no_proxy` go direct: a name (`localhost`, while `127.0.0.1`
/// still goes through the parent), and a network covering every origin.
#[test]
fn no_proxy_hosts_go_direct() {
    let parent = Parent::start(false);
    let origin = Origin::start(page);
    let port = origin.port();
    let proxy = start(
        "parent-no-proxy",
        &config(&format!("http://{}", parent.addr), &["localhost"], "off", None),
    );

    let direct = proxy.get(&format!("http://localhost:{port}/direct"), &[]);
    assert_eq!(
        (direct.status, direct.text().as_str()),
        (200, "page /direct"),
        "{}",
        direct.describe()
    );
    let via = proxy.get(&format!("http://127.0.0.1:{port}/via"), &[]);
    assert_eq!((via.status, via.text().as_str()), (200, "page /via"), "{}", via.describe());
    parent.wait_for(&format!("GET http://127.0.0.1:{port}/via HTTP/1.1"));
    assert!(
        parent.seen().iter().all(|s| !s.line.contains("/direct") && !s.line.contains("localhost")),
        "{:#?}",
        parent.seen()
    );
    assert_eq!(origin.requests().iter().filter(|r| r.path() == "/direct").count(), 1);
    drop(proxy);

    let before = parent.seen().len();
    let proxy = start(
        "parent-no-proxy-cidr",
        &config(
            &format!("http://{}", parent.addr),
            &["example.org", "127.0.0.0/8"],
            "annotate",
            None,
        ),
    );
    let r = proxy.get(&format!("http://127.0.0.1:{port}/cidr"), &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "page /cidr"), "{}", r.describe());
    // Its robots.txt fetch went direct too.
    let deadline = Instant::now() + WAIT;
    while origin.requests().iter().filter(|r| r.path() == "/robots.txt").count() == 0 {
        assert!(
            Instant::now() < deadline,
            "no robots.txt fetch reached the origin: {:?}",
            origin.requests()
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        parent.seen().len(),
        before,
        "nothing goes through the parent: {:#?}",
        parent.seen()
    );
}

/// A parent that cannot be reached gives a 502 naming the parent, for a
/// plain origin and through a CONNECT tunnel; the origin sees nothing.
#[test]
fn an_unreachable_parent_gives_502_naming_the_parent() {
    let origin = Origin::start(page);
    let dead = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let proxy = start("parent-unreachable", &config(&format!("http://{dead}"), &[], "off", None));

    let r = proxy.get(&origin.url("/x"), &[]);
    assert_eq!(r.status, 502, "{}", r.describe());
    let text = r.text();
    assert!(text.contains(&format!("parent proxy {dead}")), "the 502 names the parent: {text}");
    assert_eq!(origin.request_count(), 0);

    let crawlcache_ca = proxy.data_dir().join("ca/ca.pem");
    let (status, body) = https_get(proxy.addr(), &crawlcache_ca, "localhost", origin.port(), "/y");
    assert_eq!(status, 502, "{body}");
    assert!(body.contains(&format!("parent proxy {dead}")), "the 502 names the parent: {body}");
}

/// A parent asking for credentials that were not configured: a 502 saying
/// so (never the parent's 407 passed on to the crawler), plain and CONNECT.
#[test]
fn a_parent_demanding_credentials_gives_502_naming_it() {
    let parent = Parent::start(true);
    let origin = Origin::start(page);
    let proxy = start("parent-407", &config(&format!("http://{}", parent.addr), &[], "off", None));

    let r = proxy.get(&origin.url("/x"), &[]);
    assert_eq!(r.status, 502, "{}", r.describe());
    let text = r.text();
    assert!(
        text.contains(&format!("parent proxy {}", parent.addr)) && text.contains("407"),
        "{text}"
    );
    let seen = parent.wait_for("GET http://");
    assert_eq!(seen.auth, None);

    let crawlcache_ca = proxy.data_dir().join("ca/ca.pem");
    let (status, body) = https_get(proxy.addr(), &crawlcache_ca, "localhost", origin.port(), "/y");
    assert_eq!(status, 502, "{body}");
    assert!(
        body.contains(&format!("parent proxy {}", parent.addr)) && body.contains("407"),
        "{body}"
    );
    assert_eq!(origin.request_count(), 0);
}
