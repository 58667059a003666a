//! C47: an origin response with `Content-Length` beside `Transfer-Encoding:
//! chunked`. The transfer coding frames the body (RFC 9112 section 6.3):
//! the client gets all 21 bytes on the miss and on the hit, with no
//! `Content-Length` or one of 21, never a length beside the coding.

use crate::common::*;
use crate::support::*;

/// The 21 content bytes, sent in two chunks.
const CONTENT: &[u8] = b"twenty-one bytes here";

fn clte_response(fields: &str) -> Vec<u8> {
    let mut bytes =
        format!("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\n{fields}\r\n").into_bytes();
    bytes.extend_from_slice(&chunked_body(&[&CONTENT[..10], &CONTENT[10..]], true));
    bytes
}

/// The response's framing must be the coding alone or a length of 21.
fn assert_framed_by_what_is_sent(what: &str, r: &Response) {
    assert_eq!(r.status, 200, "{what}: {}", r.describe());
    assert!(r.complete, "{what}: incomplete body: {}", r.describe());
    assert_eq!(r.body, CONTENT, "{what}: all 21 bytes: {}", r.describe());
    let cl = r.header_all("Content-Length");
    let te = r.header_all("Transfer-Encoding");
    assert!(
        cl.is_empty() || te.is_empty(),
        "{what}: Content-Length {cl:?} beside Transfer-Encoding {te:?}"
    );
    assert!(cl.is_empty() || cl == ["21"], "{what}: Content-Length {cl:?} (only 21 is right)");
}

#[test]
fn c47_content_length_beside_chunked_is_dropped_on_miss_and_hit() {
    let (origin, proxy) = raw_origin_and_proxy("c47", ROBOTS_OFF, |req| match req.path() {
        "/clte" => {
            Reply::raw(&clte_response("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"))
        }
        "/tecl" => {
            Reply::raw(&clte_response("Transfer-Encoding: chunked\r\nContent-Length: 50\r\n"))
        }
        _ => echo_host(req),
    });
    let o = origin.authority();
    for path in ["/clte", "/tecl"] {
        let mut conn = RawConn::open(proxy.addr());
        let mut bodies = Vec::new();
        for (i, what) in ["miss", "hit"].iter().enumerate() {
            let r = conn
                .send(
                    format!("GET http://{o}{path} HTTP/1.1\r\nHost: {o}\r\n\r\n").as_bytes(),
                    false,
                )
                .unwrap_or_else(|e| panic!("{path} {what}: {e}"));
            assert_framed_by_what_is_sent(&format!("{path} {what}"), &r);
            let cs = cache_status(&r);
            if i == 0 {
                // Framed by the chunked coding: it streams, so its head
                // cannot say `stored` yet (RFC 9211 section 2.5); the hit
                // that follows shows it was.
                assert!(
                    cs.contains("fwd=uri-miss") && !cs.contains("stored"),
                    "{path}: a streamed miss: {cs}"
                );
            } else {
                assert!(cs.contains("hit"), "{path}: the second request is a hit: {cs}");
            }
            bodies.push(r.body);
            // The connection is still in sync after each answer.
            let s = conn
                .send(
                    format!("GET http://{o}{path}/sentinel HTTP/1.1\r\nHost: {o}\r\n\r\n")
                        .as_bytes(),
                    false,
                )
                .unwrap_or_else(|e| panic!("{path} {what}: sentinel: {e}"));
            assert_eq!(
                s.text(),
                format!("site for host {o} target {path}/sentinel"),
                "{path} {what}: out of sync"
            );
        }
        assert_eq!(bodies[0], bodies[1], "{path}: miss and hit bytes differ");
    }
    let reqs = origin.requests();
    let count = |p: &str| reqs.iter().filter(|r| r.path() == p).count();
    assert_eq!((count("/clte"), count("/tecl")), (1, 1), "one origin request each (then hits)");
    assert!(reqs.iter().all(|r| r.violations.is_empty()));
}
