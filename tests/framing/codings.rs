//! C51: transfer codings other than `chunked`. `Transfer-Encoding` is
//! hop-by-hop: removing it without applying its meaning (RFC 9110 section
//! 7.6.1) would hand on coded bytes as the content. crawlcache decodes
//! `chunked` only, so a response with another transfer coding is refused
//! with 502 (never stored, never forwarded as identity bytes), and a
//! request with one gets 501 with nothing forwarded (RFC 9112 section 6.1).

use crate::common::*;
use crate::support::*;
use std::io::Write as _;

/// The 53-byte page of the case.
const PAGE: &[u8] = b"<html><body>fifty-three bytes of page</body></html>\n\n";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn c51_a_response_with_transfer_encoding_gzip_is_refused_never_handed_on_coded() {
    assert_eq!(PAGE.len(), 53);
    let coded = gzip(PAGE);
    let (gz, gz_chunked) = (coded.clone(), coded.clone());
    let (origin, proxy) = raw_origin_and_proxy("c51", ROBOTS_OFF, move |req| match req.path() {
        "/gzip" => {
            let mut bytes =
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nCache-Control: max-age=600\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n".to_vec();
            bytes.extend_from_slice(&gz);
            Reply::raw(&bytes).closing()
        }
        "/gzip-chunked" => {
            let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nCache-Control: max-age=600\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".to_vec();
            bytes.extend_from_slice(&chunked_body(&[&gz_chunked[..10], &gz_chunked[10..]], true));
            Reply::raw(&bytes)
        }
        _ => echo_host(req),
    });
    let o = origin.authority();
    for path in ["/gzip", "/gzip-chunked"] {
        for attempt in ["first", "second"] {
            let r = RawConn::open(proxy.addr())
                .send(
                    format!("GET http://{o}{path} HTTP/1.1\r\nHost: {o}\r\n\r\n").as_bytes(),
                    false,
                )
                .unwrap_or_else(|e| panic!("{path} {attempt}: {e}"));
            assert_eq!(r.status, 502, "{path} {attempt}: refused: {}", r.describe());
            assert!(
                !r.body.starts_with(&[0x1f, 0x8b]) && r.body != PAGE,
                "{path} {attempt}: never the page's bytes: {}",
                r.describe()
            );
            assert!(
                r.text().contains("Transfer-Encoding: gzip"),
                "{path} {attempt}: the 502 names the coding: {}",
                r.describe()
            );
            assert!(
                !cache_status(&r).contains("hit"),
                "{path} {attempt}: nothing stored to hit: {}",
                r.describe()
            );
        }
    }
    // Both attempts reached the origin: nothing was stored.
    let reqs = origin.requests();
    assert_eq!(reqs.iter().filter(|r| r.path() == "/gzip").count(), 2, "{reqs:?}");
    assert_eq!(reqs.iter().filter(|r| r.path() == "/gzip-chunked").count(), 2, "{reqs:?}");
}

#[test]
fn c51_a_request_with_a_transfer_coding_other_than_chunked_gets_501_and_nothing_is_forwarded() {
    let (origin, proxy) = raw_origin_and_proxy("c51-request", ROBOTS_OFF, echo_host);
    let o = origin.authority();
    let coded = gzip(b"name=value");
    let mut raw =
        format!("POST http://{o}/form HTTP/1.1\r\nHost: {o}\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
            .into_bytes();
    raw.extend_from_slice(&chunked_body(&[&coded], true));
    let mut conn = RawConn::open(proxy.addr());
    let r = conn.send(&raw, false).unwrap_or_else(|e| panic!("POST with gzip, chunked: {e}"));
    assert_eq!(r.status, 501, "{}", r.describe());
    assert!(r.text().contains("gzip"), "the 501 names the coding: {}", r.describe());
    // A chunked-only request is still forwarded.
    let r = RawConn::open(proxy.addr())
        .send(format!("POST http://{o}/plain HTTP/1.1\r\nHost: {o}\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n").as_bytes(), false)
        .unwrap_or_else(|e| panic!("POST chunked: {e}"));
    assert_eq!(r.status, 200, "{}", r.describe());
    let reqs = origin.requests();
    assert!(
        reqs.iter().all(|r| r.path() != "/form"),
        "the gzip-coded request never reached the origin: {reqs:?}"
    );
    assert_eq!(reqs.iter().filter(|r| r.path() == "/plain").count(), 1, "{reqs:?}");
}
