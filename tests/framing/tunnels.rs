//! C50: what a CONNECT tunnel carries is decided by its first bytes (RFC
//! 9110 section 9.3.6: after a 2xx to CONNECT the proxy relays bytes;
//! interception is an addition). A TLS ClientHello is intercepted (the
//! other test files); plain HTTP is served through the cache under
//! `http://host:port/...`; a WebSocket upgrade and any other protocol are
//! relayed untouched, and logged as such rather than as a CA problem.
//! `Upgrade: websocket` through the plain proxy (absolute form) works too.

use crate::common::*;
use crate::support::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// RFC 6455 section 1.3's sample key and the accept value it yields.
const WS_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const WS_ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// A loopback server running `serve` on each connection in a thread of its
/// own; it stops accepting when dropped (the accept loop is bounded by a
/// flag checked on each connection and a final wake-up connect).
struct TcpServer {
    addr: SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl TcpServer {
    fn start(serve: impl Fn(TcpStream) + Send + Sync + 'static) -> TcpServer {
        let listener =
            TcpListener::bind("127.0.0.1:0").expect("binding a test server on 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, serve) = (stop.clone(), Arc::new(serve));
        thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                conn.set_read_timeout(Some(Duration::from_secs(15))).ok();
                let serve = serve.clone();
                thread::spawn(move || serve(conn));
            }
        });
        TcpServer { addr, stop }
    }
}

impl Drop for TcpServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// Reads an HTTP head (to the empty line) byte by byte.
fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A WebSocket origin: answers the handshake for [`WS_KEY`] with 101, then
/// echoes one text frame, unmasked. Records each handshake head.
fn websocket_origin() -> (TcpServer, Arc<Mutex<Vec<String>>>) {
    let heads: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = heads.clone();
    let server = TcpServer::start(move |mut s| {
        let head = read_head(&mut s);
        seen.lock().unwrap().push(head.clone());
        let lower = head.to_ascii_lowercase();
        if !(lower.contains("upgrade: websocket")
            && lower.contains(&format!("sec-websocket-key: {}", WS_KEY.to_ascii_lowercase())))
        {
            let _ = s.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            return;
        }
        let _ = write!(s, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {WS_ACCEPT}\r\n\r\n");
        let mut hdr = [0u8; 2];
        if s.read_exact(&mut hdr).is_err() {
            return;
        }
        let len = usize::from(hdr[1] & 0x7f);
        let mut mask = [0u8; 4];
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut mask).is_err() || s.read_exact(&mut payload).is_err() {
            return;
        }
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= mask[i % 4];
        }
        let mut frame = vec![0x81, len as u8];
        frame.extend_from_slice(&payload);
        let _ = s.write_all(&frame);
    });
    (server, heads)
}

/// One masked text frame carrying `text` (at most 125 bytes), as a client
/// sends it (RFC 6455 section 5.2).
fn client_frame(text: &str) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut f = vec![0x81, 0x80 | text.len() as u8];
    f.extend_from_slice(&mask);
    f.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

fn handshake(target: &str, host: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {WS_KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n")
}

/// Reads the 101 head and the echoed frame from `s`; returns both.
fn read_upgrade_and_echo(s: &mut TcpStream, text: &str) -> (String, Vec<u8>) {
    let head = read_head(s);
    let mut echo = vec![0u8; 2 + text.len()];
    let got = s.read_exact(&mut echo).map(|_| echo).unwrap_or_default();
    (head, got)
}

fn unmasked(text: &str) -> Vec<u8> {
    let mut f = vec![0x81, text.len() as u8];
    f.extend_from_slice(text.as_bytes());
    f
}

#[test]
fn c50_plain_http_inside_a_tunnel_is_served_through_the_cache() {
    let (origin, proxy) = raw_origin_and_proxy("c50-http", ROBOTS_OFF, |req| {
        answer(req, 200, &[("Cache-Control", "max-age=600")], b"plain page")
    });
    let o = origin.authority();
    for (i, expect) in ["stored", "hit"].iter().enumerate() {
        let mut s = connect_tunnel(proxy.addr(), &o).unwrap_or_else(|e| panic!("CONNECT {o}: {e}"));
        let r = exchange_until_close(
            &mut s,
            format!("GET /page HTTP/1.1\r\nHost: {o}\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "plain page"),
            "tunnel {i}: {}",
            r.describe()
        );
        assert!(cache_status(&r).contains(expect), "tunnel {i}: {expect}: {}", r.describe());
    }
    assert_eq!(
        origin.requests().iter().filter(|r| r.path() == "/page").count(),
        1,
        "one origin request"
    );
    // Stored under the http:// key, as a proxied request would be.
    let r = proxy.get(&format!("http://{o}/page"), &[]);
    assert!(
        cache_status(&r).contains("hit"),
        "the absolute-form request hits the same entry: {}",
        r.describe()
    );
    assert!(
        proxy.log_shows("carries plain HTTP", Duration::from_secs(5)),
        "the log names the plain tunnel: {}",
        proxy.stderr()
    );
    let log = proxy.stderr();
    assert!(!log.contains("does it trust the crawlcache CA"), "not logged as a CA problem: {log}");
}

/// Plain HTTP in a tunnel is a plain-HTTP client connection: with
/// `server.sendfile` on, a large stored body goes out from its file, byte
/// for byte, as it does on a connection to the proxy itself.
#[test]
fn c50_plain_http_inside_a_tunnel_sends_large_stored_bodies_with_sendfile() {
    let big: Vec<u8> =
        (0..(300 * 1024 + 3) as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let body = big.clone();
    let config = format!("{ROBOTS_OFF}[server]\nsendfile = true\n");
    let (origin, proxy) = raw_origin_and_proxy("c50-sendfile", &config, move |req| {
        answer(req, 200, &[("Cache-Control", "max-age=600")], &body)
    });
    let o = origin.authority();
    for (i, expect) in ["fwd=uri-miss", "hit"].iter().enumerate() {
        let mut s = connect_tunnel(proxy.addr(), &o).unwrap_or_else(|e| panic!("CONNECT {o}: {e}"));
        let r = exchange_until_close(
            &mut s,
            format!("GET /big HTTP/1.1\r\nHost: {o}\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert_eq!(r.status, 200, "tunnel {i}: {}", r.describe());
        assert!(r.body == big, "tunnel {i}: {} bytes, not the origin's", r.body.len());
        assert!(cache_status(&r).contains(expect), "tunnel {i}: {expect}: {}", r.describe());
    }
    assert_eq!(
        origin.requests().iter().filter(|r| r.path() == "/big").count(),
        1,
        "one origin request"
    );
    let sent = proxy.metric("crawlcache_sendfile_bytes_total");
    // The hit's body, less perhaps a remainder under 4 KiB after a partial send.
    assert!(
        sent <= big.len() as u64 && sent + 4096 > big.len() as u64,
        "the hit went out with sendfile: {sent} of {} bytes",
        big.len()
    );
}

/// A client that does not wait for the 200 (the CONNECT and its first
/// request in one write): the bytes the proxy read with the CONNECT head
/// are the tunnel's first bytes, not lost.
#[test]
fn c50_a_request_written_with_its_connect_is_served_from_the_tunnel() {
    let (origin, proxy) = raw_origin_and_proxy("c50-one-write", ROBOTS_OFF, |req| {
        answer(req, 200, &[("Cache-Control", "max-age=600")], b"eager page")
    });
    let o = origin.authority();
    let mut s = TcpStream::connect(proxy.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).ok();
    s.write_all(format!("CONNECT {o} HTTP/1.1\r\nHost: {o}\r\n\r\nGET /eager HTTP/1.1\r\nHost: {o}\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let connect_head = read_head(&mut s);
    assert!(connect_head.starts_with("HTTP/1.1 200"), "the CONNECT answer: {connect_head:?}");
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.starts_with("HTTP/1.1 200"), "the tunnelled request's answer: {rest:?}");
    assert!(rest.ends_with("eager page"), "its body: {rest:?}");
    assert_eq!(
        origin.requests().iter().filter(|r| r.path() == "/eager").count(),
        1,
        "one origin request"
    );
}

#[test]
fn c50_a_websocket_inside_a_tunnel_is_relayed_untouched() {
    let (ws, heads) = websocket_origin();
    let dir = TestDir::new("c50-ws");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), ROBOTS_OFF, &[]);
    let o = ws.addr.to_string();
    let mut s = connect_tunnel(proxy.addr(), &o).unwrap_or_else(|e| panic!("CONNECT {o}: {e}"));
    // The handshake and the first frame at once, as Chromium sends them.
    let mut bytes = handshake("/chat", &o).into_bytes();
    bytes.extend_from_slice(&client_frame("hello through the tunnel"));
    s.write_all(&bytes).unwrap();
    let (head, echo) = read_upgrade_and_echo(&mut s, "hello through the tunnel");
    assert!(head.starts_with("HTTP/1.1 101"), "101 from the origin: {head:?}");
    assert!(head.contains(&format!("Sec-WebSocket-Accept: {WS_ACCEPT}")), "{head:?}");
    assert_eq!(echo, unmasked("hello through the tunnel"), "the origin's echoed frame");
    let seen = heads.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with("GET /chat HTTP/1.1\r\n"),
        "the handshake reached the origin as sent: {seen:?}"
    );
    assert!(
        proxy.log_shows("carries a WebSocket upgrade: relayed untouched", Duration::from_secs(5)),
        "{}",
        proxy.stderr()
    );
}

#[test]
fn c50_a_websocket_upgrade_through_the_plain_proxy_works() {
    let (ws, heads) = websocket_origin();
    let dir = TestDir::new("c50-ws-plain");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), ROBOTS_OFF, &[]);
    let o = ws.addr.to_string();
    let mut s = TcpStream::connect(proxy.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).ok();
    s.write_all(handshake(&format!("http://{o}/chat"), &o).as_bytes()).unwrap();
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 101"), "101 from the origin: {head:?}");
    assert!(
        head.contains(&format!("sec-websocket-accept: {WS_ACCEPT}"))
            || head.contains(&format!("Sec-WebSocket-Accept: {WS_ACCEPT}")),
        "{head:?}"
    );
    s.write_all(&client_frame("hello through the proxy")).unwrap();
    let mut echo = vec![0u8; 2 + "hello through the proxy".len()];
    s.read_exact(&mut echo).expect("the echoed frame");
    assert_eq!(echo, unmasked("hello through the proxy"));
    let seen = heads.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let lower = seen[0].to_ascii_lowercase();
    assert!(seen[0].starts_with("GET /chat HTTP/1.1\r\n"), "origin-form to the origin: {seen:?}");
    assert!(
        lower.contains(&format!("host: {o}\r\n"))
            && lower.contains("connection: upgrade")
            && lower.contains("upgrade: websocket"),
        "{seen:?}"
    );
}

#[test]
fn c50_another_protocol_in_a_tunnel_is_relayed_untouched_both_ways() {
    // Client speaks first with bytes that are neither TLS nor HTTP.
    let echo = TcpServer::start(|mut s| {
        let mut buf = [0u8; 64];
        if let Ok(n) = s.read(&mut buf) {
            let mut out: Vec<u8> = buf[..n].to_vec();
            out.reverse();
            let _ = s.write_all(&out);
        }
    });
    // Server speaks first (an SMTP-like banner): the tunnel is relayed
    // once the client has stayed silent for a while.
    let banner = TcpServer::start(|mut s| {
        let _ = s.write_all(b"220 banner.test ready\r\n");
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
    });
    let dir = TestDir::new("c50-other");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), ROBOTS_OFF, &[]);
    let mut s = connect_tunnel(proxy.addr(), &echo.addr.to_string()).unwrap();
    s.write_all(b"\x00\x01binary\xff").unwrap();
    let mut got = vec![0u8; 9];
    s.read_exact(&mut got).expect("the relayed answer");
    assert_eq!(got, b"\xffyranib\x01\x00", "bytes relayed untouched both ways");

    let mut s = connect_tunnel(proxy.addr(), &banner.addr.to_string()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    let mut got = vec![0u8; 23];
    s.read_exact(&mut got).expect("the server's banner through the tunnel");
    assert_eq!(got, b"220 banner.test ready\r\n");
    assert!(
        proxy.log_shows("carries neither TLS nor HTTP: relayed untouched", Duration::from_secs(5)),
        "{}",
        proxy.stderr()
    );
    let log = proxy.stderr();
    assert!(!log.contains("does it trust the crawlcache CA"), "not logged as a CA problem: {log}");
}
