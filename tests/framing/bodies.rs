//! C46: a GET or HEAD that carries content is forwarded whole (its body
//! framed by what is sent) and never stored; the pooled origin connection
//! it travelled on stays in sync, so a second client's plain requests on
//! that connection are answered and nothing is smuggled.

use crate::common::*;
use crate::support::*;

/// One variant of C46: the raw request client A sends, and the content the
/// origin must receive.
struct Variant {
    name: &'static str,
    method: &'static str,
    /// Fields and body after the request line and Host (CRLF-terminated fields).
    rest: &'static str,
    content: &'static [u8],
}

const VARIANTS: &[Variant] = &[
    Variant {
        name: "get-cl5",
        method: "GET",
        rest: "Content-Length: 5\r\n\r\nhello",
        content: b"hello",
    },
    Variant {
        name: "head-cl5",
        method: "HEAD",
        rest: "Content-Length: 5\r\n\r\nhello",
        content: b"hello",
    },
    Variant {
        name: "get-chunked",
        method: "GET",
        rest: "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        content: b"hello",
    },
    Variant {
        name: "get-cl20",
        method: "GET",
        rest: "Content-Length: 20\r\n\r\nhelloGET /smuggled H",
        content: b"helloGET /smuggled H",
    },
];

/// `200`, `no-store`, naming the request and its content length (no body
/// for HEAD).
fn no_store(req: &RawRequest) -> Reply {
    let body = format!("{} {} got {} bytes", req.method, req.target, req.body.len());
    answer(req, 200, &[("Cache-Control", "no-store")], body.as_bytes())
}

/// Client A's GET/HEAD with content, then client B's three plain GETs on
/// a keep-alive connection: every answer 200, the origin reads exactly
/// four requests, A's with its whole content framed by its length (or
/// chunked), on a connection B's requests then reuse.
#[test]
fn c46_get_or_head_with_content_is_forwarded_whole_and_the_pool_stays_in_sync() {
    let (origin, proxy) = raw_origin_and_proxy("c46", ROBOTS_OFF, no_store);
    let o = origin.authority();
    for v in VARIANTS {
        let before = origin.request_count();
        let a_path = format!("/{}/a", v.name);
        let raw = format!("{} http://{o}{a_path} HTTP/1.1\r\nHost: {o}\r\n{}", v.method, v.rest);
        let mut a = RawConn::open(proxy.addr());
        let ra = a
            .send(raw.as_bytes(), v.method == "HEAD")
            .unwrap_or_else(|e| panic!("{}: client A: {e}", v.name));
        assert_eq!(ra.status, 200, "{}: client A: {}", v.name, ra.describe());
        let cs = cache_status(&ra);
        assert!(
            cs.contains("fwd=request")
                && cs.contains("fwd-status=200")
                && cs.contains("detail=request-body")
                && !cs.contains("stored"),
            "{}: a {} with content is forwarded whole and not stored: {cs}",
            v.name,
            v.method
        );
        if v.method == "GET" {
            assert_eq!(
                ra.text(),
                format!("GET {a_path} got {} bytes", v.content.len()),
                "{}",
                v.name
            );
        }
        // Client A's connection is still in sync. A moment first, so the
        // origin connection that carried A's request is back in the pool
        // (it is returned by its own task, which may not have run yet when
        // the client has the whole answer): the requests below then reuse
        // it rather than opening another.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let again = a.send(
            format!("GET http://{o}/{}/a2 HTTP/1.1\r\nHost: {o}\r\n\r\n", v.name).as_bytes(),
            false,
        );
        if let Ok(r) = again {
            assert_eq!(r.status, 200, "{}: A's next request: {}", v.name, r.describe());
            assert_eq!(
                r.text(),
                format!("GET /{}/a2 got 0 bytes", v.name),
                "{}: A's connection out of sync",
                v.name
            );
        }
        let a_followups = origin.request_count() - before - 1;

        let mut b = RawConn::open(proxy.addr());
        for i in 0..3 {
            let rb = b
                .send(
                    format!("GET http://{o}/{}/b HTTP/1.1\r\nHost: {o}\r\n\r\n", v.name).as_bytes(),
                    false,
                )
                .unwrap_or_else(|e| panic!("{}: client B request {i}: {e}", v.name));
            assert_eq!(rb.status, 200, "{}: client B request {i}: {}", v.name, rb.describe());
            assert_eq!(
                rb.text(),
                format!("GET /{}/b got 0 bytes", v.name),
                "{}: client B request {i}",
                v.name
            );
        }

        let seen: Vec<RawRequest> = origin.requests().into_iter().skip(before).collect();
        let listing: Vec<String> = seen
            .iter()
            .map(|r| format!("{} {} ({} bytes)", r.method, r.target, r.body.len()))
            .collect();
        assert_eq!(
            seen.len(),
            4 + a_followups,
            "{}: exactly the intended requests reach the origin: {listing:?}",
            v.name
        );
        assert!(
            seen.iter().all(|r| !r.target.contains("smuggled")),
            "{}: smuggled: {listing:?}",
            v.name
        );
        for r in &seen {
            assert!(
                r.violations.is_empty(),
                "{}: framing violations {:?} in\n{}",
                v.name,
                r.violations,
                r.head_text()
            );
            assert_host_exact(r, &o);
        }
        let first = &seen[0];
        assert_eq!(
            (first.method.as_str(), first.target.as_str()),
            (v.method, a_path.as_str()),
            "{}",
            v.name
        );
        assert_eq!(first.body, v.content, "{}: the content must arrive whole", v.name);
        match first.header("Content-Length") {
            Some(cl) => {
                assert_eq!(
                    cl,
                    v.content.len().to_string(),
                    "{}: the length must be that of the content sent",
                    v.name
                );
                assert_eq!(first.body_raw, v.content, "{}", v.name);
            }
            None => assert!(
                first.chunked(),
                "{}: content without framing:\n{}",
                v.name,
                first.head_text()
            ),
        }
        if v.name == "get-cl5" || v.name == "head-cl5" {
            assert!(
                first.has_exact_field("Content-Length", "5"),
                "{}: {}",
                v.name,
                first.head_text()
            );
            let bytes = &origin.connection_bytes()[first.connection];
            let framed = [&first.head[..], b"hello"].concat();
            assert!(
                bytes.windows(framed.len()).any(|w| w == framed),
                "{}: the origin's bytes do not show the head then `hello`",
                v.name
            );
        }
        for r in &seen[1..] {
            assert!(
                r.body.is_empty() && r.header("Content-Length").is_none_or(|c| c == "0"),
                "{}: {:?}",
                v.name,
                r.head_text()
            );
        }
        assert!(
            seen[1..].iter().any(|r| r.connection == first.connection),
            "{}: no later request reused A's origin connection, so the pool was not exercised: {:?}",
            v.name,
            seen.iter().map(|r| r.connection).collect::<Vec<_>>()
        );
    }
    assert!(origin.problems().is_empty(), "{:?}", origin.problems());
}

/// C46 with nginx as the origin (keep-alive, `Cache-Control: no-store`):
/// a GET with `Content-Length: 5` and `hello`, then three plain GETs from
/// another client: all 200, and nginx logs exactly those four requests.
#[test]
fn c46_with_nginx_keep_alive_logs_exactly_the_intended_requests() {
    let dir = TestDir::new("c46-nginx");
    let root = dir.subdir("www");
    std::fs::write(root.join("a"), "file a\n").unwrap();
    std::fs::write(root.join("b"), "file b\n").unwrap();
    let nginx = Nginx::start_with(&root, "add_header Cache-Control no-store;");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), ROBOTS_OFF, &[]).owning(dir);
    let o = nginx.addr().to_string();
    let mut a = RawConn::open(proxy.addr());
    let ra = a
        .send(
            format!("GET http://{o}/a HTTP/1.1\r\nHost: {o}\r\nContent-Length: 5\r\n\r\nhello")
                .as_bytes(),
            false,
        )
        .expect("client A");
    assert_eq!(ra.status, 200, "{}", ra.describe());
    assert_eq!(ra.text(), "file a\n");
    let mut b = RawConn::open(proxy.addr());
    for i in 0..3 {
        let rb = b
            .send(format!("GET http://{o}/b HTTP/1.1\r\nHost: {o}\r\n\r\n").as_bytes(), false)
            .expect("client B");
        assert_eq!(rb.status, 200, "B {i}: {}", rb.describe());
        assert_eq!(rb.text(), "file b\n");
    }
    let lines = nginx.settled_access_log_lines();
    let requests: Vec<&str> = lines.iter().filter_map(|l| l.split('"').nth(1)).collect();
    assert_eq!(
        requests,
        ["GET /a HTTP/1.1", "GET /b HTTP/1.1", "GET /b HTTP/1.1", "GET /b HTTP/1.1"],
        "nginx access log:\n{}",
        lines.join("\n")
    );
    assert!(
        lines.iter().all(|l| l.contains("\" 200 ")),
        "every request answered 200:\n{}",
        lines.join("\n")
    );
}
