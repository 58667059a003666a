//! Bad input: malformed requests, oversized headers, unreachable origins.

use super::*;

/// Malformed requests get 400, oversized headers 431, an unreachable origin
/// 502 naming the cause; the proxy keeps serving afterwards.
#[test]
fn malformed_requests_get_400_oversized_headers_431_and_unreachable_origins_502() {
    let (origin, proxy) = start(|_| Reply::ok(&[("Cache-Control", "max-age=60")], b"ok"));
    let mut c = Conn::open(proxy.addr());
    let r =
        c.try_send_raw(b"GARBAGE\r\n\r\n", false).expect("an answer to a malformed request line");
    assert_eq!(r.status, 400, "{}", r.describe());

    let big = "x".repeat(300 * 1024);
    let raw = format!("GET {} HTTP/1.1\r\nHost: a\r\nX-Big: {big}\r\n\r\n", origin.url("/"));
    let r = Conn::open(proxy.addr())
        .try_send_raw(raw.as_bytes(), false)
        .expect("an answer to oversized headers");
    assert_eq!(r.status, 431, "{}", r.describe());
    assert!(r.text().contains("the limit is 262144"), "the body names the limit: {}", r.text());

    let dead = format!("http://127.0.0.1:{}/x", free_port());
    let r = proxy.get(&dead, &[]);
    assert_eq!(r.status, 502, "{}", r.describe());
    assert!(r.text().contains("could not connect"), "the body names the cause: {}", r.text());

    assert_eq!(proxy.get(&origin.url("/fine"), &[]).text(), "ok", "still serving");
}
