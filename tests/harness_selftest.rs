//! Tests of the test harness itself (tests/common), without crawlcache: nginx,
//! the scripted origin, the HTTP client and wget work on this machine, so that
//! a failing end-to-end test points at the proxy, not at its surroundings.

mod common;

use common::*;
use std::fs;
use std::time::{Duration, Instant, UNIX_EPOCH};

#[test]
fn nginx_serves_a_folder_and_logs_each_request() {
    let root = TestDir::new("nginx-root");
    fs::write(root.join("hello.txt"), b"hello from nginx\n").expect("writing hello.txt");
    let nginx = Nginx::start(root.path());

    let resp = send_request(nginx.addr(), "GET", "/hello.txt", &[], b"");
    assert_eq!(resp.status, 200, "GET /hello.txt from nginx:\n{}", resp.describe());
    assert_eq!(resp.body, b"hello from nginx\n", "body of /hello.txt");
    assert!(resp.complete, "body of /hello.txt arrived whole");
    assert!(
        resp.header("ETag").is_some(),
        "nginx sends an ETag for static files:\n{}",
        resp.describe()
    );
    assert!(
        resp.header("Last-Modified").is_some(),
        "nginx sends Last-Modified:\n{}",
        resp.describe()
    );

    let missing = send_request(nginx.addr(), "GET", "/nope", &[], b"");
    assert_eq!(missing.status, 404, "GET /nope from nginx:\n{}", missing.describe());

    let lines = nginx.settled_access_log_lines();
    assert_eq!(lines.len(), 2, "one access log line per request, got {lines:#?}");
    assert!(
        lines[0].contains("\"GET /hello.txt HTTP/1.1\" 200"),
        "first access log line: {}",
        lines[0]
    );
    assert!(
        lines[1].contains("\"GET /nope HTTP/1.1\" 404"),
        "second access log line: {}",
        lines[1]
    );
}

#[test]
fn nginx_extra_directives_reach_the_server_block() {
    let root = TestDir::new("nginx-root");
    fs::write(root.join("a.txt"), b"a").expect("writing a.txt");
    let nginx = Nginx::start_with(root.path(), "expires 1h;");
    let resp = send_request(nginx.addr(), "GET", "/a.txt", &[], b"");
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(resp.header("Cache-Control"), Some("max-age=3600"), "{}", resp.describe());
}

#[test]
fn nginx_stops_on_request_and_frees_its_port() {
    let root = TestDir::new("nginx-root");
    let mut nginx = Nginx::start(root.path());
    let addr = nginx.addr();
    nginx.stop();
    assert!(
        Conn::try_open(addr, Duration::from_millis(500)).is_err(),
        "nothing should accept connections on {addr} after nginx stopped"
    );
}

/// The premise of tests/crawl_e2e.rs, checked without the proxy: nginx serves
/// the Rust book and `wget -r -np` fetches all of it (175 files with the
/// 1.95 toolchain), with no error responses.
#[test]
fn wget_mirrors_the_rust_book_from_nginx_directly() {
    let html = rust_docs_html_dir();
    let nginx = Nginx::start(&html);
    let work = TestDir::new("wget-direct");
    let mirror = wget_mirror(
        &nginx.url("/book/"),
        None,
        &work.join("out"),
        Duration::from_secs(120),
        "direct",
    );
    let tree = read_tree(&mirror.out_dir);
    assert!(
        (150..=400).contains(&tree.len()),
        "a recursive wget of the Rust book should fetch about 175 files, got {}",
        tree.len()
    );
    assert!(tree.keys().all(|p| p.starts_with("book")), "-np keeps the crawl inside /book/");
    let index =
        tree.get(std::path::Path::new("book/index.html")).expect("book/index.html was fetched");
    let original = fs::read(html.join("book/index.html")).expect("reading the book's index.html");
    assert_eq!(index, &original, "book/index.html is byte-identical to the file nginx served");
    let lines = nginx.settled_access_log_lines();
    assert_eq!(lines.len(), tree.len(), "one nginx request per file fetched");
    assert_eq!(mirror.response_count(), tree.len(), "wget -S printed one status line per response");
    eprintln!("direct wget of the Rust book: {} files in {:?}", tree.len(), mirror.elapsed);
}

#[test]
fn origin_records_requests_and_sends_repeated_fields() {
    let origin = Origin::start(|req| {
        Reply::ok(
            &[
                ("Cache-Control", "max-age=60"),
                ("X-Tag", "red"),
                ("X-Tag", "blue"),
                ("X-Path", req.path()),
            ],
            b"body",
        )
    });
    let resp =
        send_request(origin.addr(), "GET", "/a?q=1", &[("X-Test", "one"), ("X-Test", "two")], b"");
    assert_eq!(resp.status, 200, "{}", resp.describe());
    assert_eq!(resp.header_all("x-tag"), vec!["red", "blue"], "repeated fields keep their order");
    assert_eq!(resp.header("X-Path"), Some("/a"), "the handler saw the path");
    assert_eq!(resp.body, b"body");

    let reqs = origin.requests();
    assert_eq!(reqs.len(), 1, "one request recorded");
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(reqs[0].target, "/a?q=1");
    assert_eq!(reqs[0].version, "HTTP/1.1");
    assert_eq!(reqs[0].header_all("X-Test"), vec!["one", "two"]);
    assert_eq!(reqs[0].header("host"), Some(origin.addr().to_string().as_str()));
    assert!(reqs[0].head_raw.ends_with(b"\r\n\r\n"), "raw head kept whole");
}

#[test]
fn origin_keeps_connections_alive_and_answers_304() {
    let origin = Origin::start(|req| {
        if req.header("If-None-Match") == Some("\"v1\"") {
            Reply::not_modified(&[("ETag", "\"v1\"")])
        } else {
            Reply::ok(&[("ETag", "\"v1\"")], b"v1 body")
        }
    });
    let mut conn = Conn::open(origin.addr());
    let first = conn.send("GET", "/x", &[], b"");
    assert_eq!(
        (first.status, first.body.as_slice()),
        (200, &b"v1 body"[..]),
        "{}",
        first.describe()
    );
    let second = conn.send("GET", "/x", &[("If-None-Match", "\"v1\"")], b"");
    assert_eq!(second.status, 304, "{}", second.describe());
    assert!(second.body.is_empty(), "a 304 has no body");
    let third = conn.send("HEAD", "/x", &[], b"");
    assert_eq!(third.status, 200, "{}", third.describe());
    assert!(third.body.is_empty(), "a HEAD response has no body");
    let reqs = origin.requests();
    assert_eq!(reqs.len(), 3);
    assert!(
        reqs.iter().all(|r| r.connection == reqs[0].connection),
        "all three came on one connection"
    );
}

#[test]
fn origin_reads_request_bodies_plain_and_chunked() {
    let origin = Origin::start(|req| Reply::new(201, &[], &req.body));
    let plain = send_request(origin.addr(), "POST", "/p", &[], b"plain body");
    assert_eq!(
        (plain.status, plain.body.as_slice()),
        (201, &b"plain body"[..]),
        "{}",
        plain.describe()
    );
    let chunked = send_request(
        origin.addr(),
        "POST",
        "/c",
        &[("Transfer-Encoding", "chunked")],
        &chunked_body(&[b"chun", b"ked"], true),
    );
    assert_eq!(chunked.body, b"chunked", "{}", chunked.describe());
}

#[test]
fn client_decodes_complete_and_truncated_chunked_bodies() {
    let origin = Origin::start(|req| match req.path() {
        "/whole" => Reply::chunked(200, &[], &[b"first,", b"second"], true),
        "/truncated" => Reply::chunked(
            200,
            &[("Cache-Control", "max-age=3600")],
            &[b"first,", b"second"],
            false,
        ),
        _ => Reply::short_content_length(200, &[], b"12345", 10),
    });
    let whole = send_request(origin.addr(), "GET", "/whole", &[], b"");
    assert!(whole.complete, "a chunked body with its last chunk is complete");
    assert_eq!(whole.body, b"first,second");

    let truncated = send_request(origin.addr(), "GET", "/truncated", &[], b"");
    assert!(!truncated.complete, "no last chunk: incomplete\n{}", truncated.describe());
    assert_eq!(truncated.body, b"first,second", "the data that did arrive is kept");

    let short = send_request(origin.addr(), "GET", "/short", &[], b"");
    assert!(!short.complete, "Content-Length 10 with 5 bytes: incomplete");
    assert_eq!(short.body, b"12345");
}

#[test]
fn origin_delays_and_hangs_up_on_request() {
    let origin = Origin::start(|req| match req.path() {
        "/slow" => Reply::ok(&[], b"late").delayed(Duration::from_millis(300)),
        _ => Reply::hang_up(),
    });
    let started = Instant::now();
    let slow = send_request(origin.addr(), "GET", "/slow", &[], b"");
    assert!(started.elapsed() >= Duration::from_millis(300), "the reply waited 300 ms");
    assert_eq!(slow.body, b"late");

    let err = Conn::open(origin.addr())
        .try_send("GET", "/hangup", &[], b"")
        .expect_err("a hang-up gives no response");
    assert!(err.contains("closed before a complete response head"), "unexpected error: {err}");
    origin.wait_for_requests(2, Duration::from_secs(5));
}

#[test]
fn origin_serves_concurrent_slow_requests_in_parallel() {
    let origin = Origin::fixed(Reply::ok(&[], b"x").delayed(Duration::from_millis(400)));
    let addr = origin.addr();
    let started = Instant::now();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            std::thread::spawn(move || send_request(addr, "GET", &format!("/{i}"), &[], b"").status)
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().expect("client thread"), 200);
    }
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "8 requests delayed 400 ms each took {:?}: they were not served concurrently",
        started.elapsed()
    );
    assert_eq!(origin.request_count(), 8);
}

#[test]
fn http_date_formats_imf_fixdate() {
    assert_eq!(
        http_date(UNIX_EPOCH + Duration::from_secs(784_111_777)),
        "Sun, 06 Nov 1994 08:49:37 GMT"
    );
    assert_eq!(http_date(UNIX_EPOCH), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(
        http_date(UNIX_EPOCH + Duration::from_secs(951_782_400)),
        "Tue, 29 Feb 2000 00:00:00 GMT"
    );
}

#[test]
fn free_ports_are_bindable() {
    let port = free_port();
    std::net::TcpListener::bind(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("binding free port {port}: {e}"));
}

#[test]
#[should_panic(expected = "did not finish within")]
fn run_bounded_kills_a_command_that_overruns() {
    run_bounded(
        std::process::Command::new("sleep").arg("10"),
        Duration::from_millis(200),
        "sleep 10",
    );
}

fn stub_proxy() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stub_proxy.py")
}

#[test]
fn proxy_helper_waits_for_stats_and_stops_with_sigterm() {
    let data = TestDir::new("stub-data");
    let proxy = Proxy::start_program(&stub_proxy(), data.path(), &[]);
    let stats = proxy.admin("/stats");
    assert_eq!(stats.status, 200, "{}", stats.describe());
    let resp = proxy.get("http://127.0.0.1:9/absolute", &[]);
    assert_eq!(resp.text(), "http://127.0.0.1:9/absolute", "the request went out in absolute-form");
    assert_eq!(resp.cache_status().as_deref(), Some("crawlcache; fwd=uri-miss"));
    assert!(
        proxy.stderr().contains("stub: listening on"),
        "stderr is captured: {:?}",
        proxy.stderr()
    );
    let addr = proxy.addr();
    let status = proxy.stop();
    assert!(status.success(), "the stub exits 0 on SIGTERM, got {status}");
    assert!(
        Conn::try_open(addr, Duration::from_millis(500)).is_err(),
        "nothing listens on {addr} after stop"
    );
}

#[test]
fn proxy_helper_reports_an_early_exit_with_its_stderr() {
    let data = TestDir::new("stub-data");
    let result = catch_expected_panic(|| {
        Proxy::start_program(&stub_proxy(), data.path(), &["--fail-at-start", "3"]);
    });
    let payload = result.expect_err("a program that exits at start must make Proxy::start panic");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains("exited with exit status: 3"), "the message gives the exit status: {msg}");
    assert!(msg.contains("stub: failing at start as asked"), "the message shows stderr: {msg}");
}
