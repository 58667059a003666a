//! Issue 43, item 1 (Chromium): headless Chromium loads a page with a
//! style sheet and images through crawlcache twice, each time in a fresh
//! profile (so its own cache plays no part). `performance.getEntries()`
//! reports `nextHopProtocol == "h2"` for the page and every resource (h2
//! inside the intercepted tunnel), the second load is all hits (the origin
//! sees each resource once), and a WebSocket the page opens (`wss://`, to
//! an echo server on another port) still works: no extended CONNECT (RFC
//! 8441) is offered inside HTTP/2, so Chromium opens an HTTP/1.1 tunnel
//! for it, relayed as before.
//!
//! Certificates: the proxy's leaves are accepted with
//! `--ignore-certificate-errors` (what is shown here is the protocol; how
//! Chromium trusts the CA through its NSS database is the screenshot test
//! of tests/https_clients.rs).

mod common;

use common::browser::Chromium;
use common::tls::{test_pki, TestPki};
use common::tls_origin::{Answer, TlsOrigin};
use common::*;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The page: a style sheet, two images, a WebSocket to `ws_port` whose
/// echo lands in `window.wsResult`.
fn page(ws_port: u16) -> String {
    format!(
        "<!doctype html><html><head><meta charset=utf-8><link rel=icon href=\"data:,\">\
<link rel=stylesheet href=/h2.css><title>h2</title></head><body><h1>h2 through crawlcache</h1>\
<img src=/a.svg width=60 height=40> <img src=/b.svg width=60 height=40>\
<script>window.wsResult = 'pending';\
const ws = new WebSocket('wss://localhost:{ws_port}/echo');\
ws.onopen = () => ws.send('ping');\
ws.onmessage = (e) => {{ window.wsResult = 'got ' + e.data; ws.close(); }};\
ws.onerror = () => {{ window.wsResult = 'error'; }};</script></body></html>"
    )
}

fn svg(color: &str) -> Vec<u8> {
    format!("<svg xmlns='http://www.w3.org/2000/svg' width='60' height='40'><rect width='60' height='40' fill='{color}'/></svg>").into_bytes()
}

/// An echo WebSocket server over TLS (HTTP/1.1 by ALPN) on 127.0.0.1:
/// answers the opening handshake (RFC 6455 section 4.2.2) and sends back
/// the first text frame it receives. Counts the handshakes.
struct EchoServer {
    port: u16,
    handshakes: Arc<Mutex<usize>>,
}

impl EchoServer {
    fn start(pki: &TestPki) -> EchoServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding the echo server");
        let port = listener.local_addr().unwrap().port();
        let config = pki.server_config();
        let handshakes: Arc<Mutex<usize>> = Arc::default();
        let count = handshakes.clone();
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (config, count) = (config.clone(), count.clone());
                std::thread::spawn(move || {
                    let _ = tcp.set_read_timeout(Some(Duration::from_secs(20)));
                    let Ok(conn) = rustls::ServerConnection::new(config) else { return };
                    let mut tls = rustls::StreamOwned::new(conn, tcp);
                    let _ = echo(&mut tls, &count);
                });
            }
        });
        EchoServer { port, handshakes }
    }
}

/// One WebSocket connection: the handshake, one text frame echoed.
fn echo(s: &mut impl ReadWrite, handshakes: &Mutex<usize>) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte)? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let key = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case("sec-websocket-key").then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{GUID}").as_bytes(),
    );
    let accept = data_encoding::BASE64.encode(digest.as_ref());
    write!(s, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n")?;
    s.flush()?;
    *handshakes.lock().unwrap() += 1;
    // A client frame: FIN+opcode, MASK+length (< 126 here), mask, payload.
    let mut h = [0u8; 2];
    s.read_exact(&mut h)?;
    let len = (h[1] & 0x7f) as usize;
    let mut mask = [0u8; 4];
    s.read_exact(&mut mask)?;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload)?;
    for (i, b) in payload.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
    let mut frame = vec![0x81, len as u8];
    frame.extend_from_slice(&payload);
    s.write_all(&frame)?;
    s.flush()?;
    // Wait for the client's close, then go.
    let _ = s.read(&mut [0u8; 64]);
    Ok(())
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// One load in a fresh Chromium through `proxy`: (the protocol of the page
/// and of each resource, what the WebSocket got).
fn load(proxy: &Proxy, url: &str) -> (Vec<(String, String)>, String) {
    let proxy_flag = format!("--proxy-server={}", proxy.url());
    let mut chromium = Chromium::start_with(&[
        &proxy_flag,
        "--proxy-bypass-list=<-loopback>",
        "--ignore-certificate-errors",
    ]);
    let tab = chromium.open(url, 800, 600, false);
    chromium.wait_for(
        &tab,
        "document.readyState === 'complete' && window.wsResult !== 'pending' && performance.getEntriesByType('resource').length >= 3",
        Duration::from_secs(30),
        "the page, its resources and the WebSocket answer",
    );
    let entries = chromium.eval(
        &tab,
        "JSON.stringify(performance.getEntries().filter(e => e.nextHopProtocol !== undefined && !e.name.startsWith('data:')).map(e => [e.name, e.nextHopProtocol]))",
    );
    let entries: Vec<(String, String)> =
        serde_json::from_str(entries.as_str().unwrap_or("[]")).expect("the entries as JSON");
    let ws = chromium.eval(&tab, "window.wsResult").as_str().unwrap_or("").to_string();
    (entries, ws)
}

#[test]
fn chromium_gets_h2_in_the_tunnel_second_load_all_hits_and_a_websocket_works() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let echo = EchoServer::start(&pki);
    let ws_port = echo.port;
    let origin = TlsOrigin::start(&pki, move |_, path| -> Answer {
        let cacheable = |ctype: &str, body: Vec<u8>| -> Answer {
            (
                200,
                vec![("Cache-Control", "max-age=600".into()), ("Content-Type", ctype.into())],
                body,
            )
        };
        match path {
            "/h2.html" => cacheable("text/html; charset=utf-8", page(ws_port).into_bytes()),
            "/h2.css" => cacheable(
                "text/css",
                b"body{background:#ffe9a8}img{border:4px solid #333}".to_vec(),
            ),
            "/a.svg" => cacheable("image/svg+xml", svg("#c22")),
            "/b.svg" => cacheable("image/svg+xml", svg("#23c")),
            _ => (404, vec![], b"not here".to_vec()),
        }
    });
    let dir = TestDir::new("h2-chromium");
    let ca = dir.join("origin-ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let config = format!(
        "[robots]\nmode = \"off\"\n\n[upstream]\nresponse_timeout = \"10s\"\nextra_ca_file = {:?}\n",
        ca.display().to_string()
    );
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &config, &[]);
    let url = format!("https://localhost:{}/h2.html", origin.port());
    let resources = ["/h2.html", "/h2.css", "/a.svg", "/b.svg"];
    for round in 1..=2 {
        let (entries, ws) = load(&proxy, &url);
        println!("load {round}: {entries:?}, WebSocket: {ws}");
        assert!(
            entries.len() >= resources.len(),
            "load {round}: every resource is listed: {entries:?}"
        );
        for (name, protocol) in &entries {
            assert_eq!(
                protocol, "h2",
                "load {round}: {name} came over HTTP/2 from the proxy: {entries:?}"
            );
        }
        assert_eq!(ws, "got ping", "load {round}: the page's WebSocket works");
        for r in resources {
            assert_eq!(
                origin.count("https", r),
                1,
                "load {round}: the origin saw {r} once (the second load is all hits): {:?}",
                origin.all_counts()
            );
        }
    }
    assert_eq!(*echo.handshakes.lock().unwrap(), 2, "each load opened its WebSocket");
}

/// The status page's list of origins with an HTTP/2 connection open is
/// redrawn by its script: opened before any such connection exists, it
/// shows the origin once a page reached over HTTP/2 has been loaded.
#[test]
fn the_status_page_lists_an_h2_origin_once_its_connection_opens() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = common::h2_origin::H2Origin::start(
        &pki,
        common::h2_origin::Speaks::Tls(&["h2"]),
        Duration::ZERO,
    );
    let dir = TestDir::new("h2-status-page");
    let ca = dir.join("origin-ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let config = format!(
        "[robots]\nmode = \"off\"\n\n[upstream]\nextra_ca_file = {:?}\n",
        ca.display().to_string()
    );
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &config, &[]);
    let mut viewer = Chromium::start();
    let status = viewer.open(&format!("http://{}/", proxy.addr()), 1280, 900, false);
    viewer.wait_for(
        &status,
        "document.documentElement.dataset.polls >= 1",
        Duration::from_secs(30),
        "the status page polls",
    );
    let listed = "document.getElementById('h2-origins-list').textContent";
    assert_eq!(viewer.eval(&status, listed), serde_json::Value::String(String::new()));

    let proxy_flag = format!("--proxy-server={}", proxy.url());
    let mut crawler = Chromium::start_with(&[
        &proxy_flag,
        "--proxy-bypass-list=<-loopback>",
        "--ignore-certificate-errors",
    ]);
    let tab = crawler.open(&format!("https://localhost:{}/page", origin.port()), 800, 600, false);
    crawler.wait_for(
        &tab,
        "document.readyState === 'complete'",
        Duration::from_secs(30),
        "the page",
    );
    // (Chromium may ask for /favicon.ico too.)
    let seen = origin.seen();
    assert!(
        seen.iter().any(|s| s.path == "/page" && s.version == "HTTP/2.0"),
        "the page came from the h2 origin over HTTP/2: {seen:?}"
    );
    let name = format!("localhost:{}", origin.port());
    viewer.wait_for(
        &status,
        &format!("{listed}.includes('{name}')"),
        Duration::from_secs(30),
        "the script redraws the list of origins with an HTTP/2 connection",
    );
    println!("listed: {}", viewer.eval(&status, listed));
}
