//! 1xx interim responses are forwarded (RFC 9110 section 15.2) and never
//! stored; their fields never leak into the stored final response.

use super::*;
use std::io::{Read, Write};

/// Sends `GET url` through the proxy on a raw connection and returns every
/// byte received until the final body `ok` arrived.
fn raw_get(proxy: &Proxy, url: &str) -> String {
    let mut s = std::net::TcpStream::connect(proxy.addr()).expect("connect to the proxy");
    s.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok();
    write!(s, "GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("send");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn early_hints_and_processing_reach_the_client_before_the_final_response_and_are_not_stored() {
    let (origin, proxy) = start("", |_| {
        Reply::raw(
            b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n\
              HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: 2\r\n\r\nok",
        )
    });
    let url = origin.url("/hints");
    let miss = raw_get(&proxy, &url);
    let (p102, p103, p200) =
        (miss.find("HTTP/1.1 102"), miss.find("HTTP/1.1 103"), miss.find("HTTP/1.1 200"));
    assert!(
        p102.is_some() && p103.is_some() && p200.is_some(),
        "102, 103 and 200 forwarded:\n{miss}"
    );
    assert!(p102 < p103 && p103 < p200, "in the origin's order:\n{miss}");
    let interim = &miss[..p200.unwrap_or(0)];
    assert!(
        interim.to_ascii_lowercase().contains("link: </s.css>; rel=preload"),
        "the 103 keeps its fields:\n{miss}"
    );
    let final_head = &miss[p200.unwrap_or(0)..];
    assert!(
        !final_head.to_ascii_lowercase().contains("link:"),
        "the 103's fields are not in the final response:\n{miss}"
    );
    assert!(miss.ends_with("ok"), "{miss}");

    let hit = raw_get(&proxy, &url);
    assert!(hit.starts_with("HTTP/1.1 200"), "a hit has no interim response: {hit}");
    assert!(hit.contains("; hit"), "{hit}");
    assert!(!hit.to_ascii_lowercase().contains("link:"), "nothing of the 103 was stored: {hit}");
    assert_eq!(origin.request_count(), 1);
}
