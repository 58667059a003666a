//! OPTIONS and TRACE (issue 41): `Max-Forwards` (RFC 9110 section 7.6.2),
//! crawlcache's own answers, and OPTIONS for a whole server (RFC 9112
//! section 3.2.4), asserted on the bytes a recording origin (or a
//! recording parent proxy) received.

use crate::common::tls::test_pki;
use crate::common::*;
use crate::support::*;
use std::time::Duration;

/// The `Allow` of crawlcache's own answers: the methods it forwards.
const ALLOW: &str = "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH";

/// The origin's answer to every request: `200` with its own `Allow`.
fn origin_options(req: &RawRequest) -> Reply {
    answer(req, 200, &[("Allow", "GET, OPTIONS"), ("X-Origin", "yes")], b"")
}

fn send(proxy: &Proxy, method: &str, target: &str, headers: &[(&str, &str)]) -> Response {
    let mut all = headers.to_vec();
    all.push(("Connection", "close"));
    Conn::open(proxy.addr()).send(method, target, &all, b"")
}

/// crawlcache's own `200` to an OPTIONS it may not forward.
fn assert_answered_by_the_proxy(what: &str, r: &Response) {
    assert_eq!(r.status, 200, "{what}: {}", r.describe());
    assert_eq!(r.header("Allow"), Some(ALLOW), "{what}: {}", r.describe());
    assert_eq!(r.header("Content-Length"), Some("0"), "{what}: {}", r.describe());
    assert!(r.header("X-Origin").is_none(), "{what}: the origin's answer: {}", r.describe());
    assert!(cache_status(r).contains("detail=max-forwards"), "{what}: {}", r.describe());
}

/// RFC 9110 section 7.6.2: an OPTIONS with `Max-Forwards: 0` is answered
/// by crawlcache as the final recipient (200, `Allow`, no content), online
/// and offline, and never reaches the origin; with N > 0 it is forwarded
/// with N − 1; with a value that is not a number it is refused with 400.
/// `Max-Forwards` on other methods goes on unchanged.
#[test]
fn options_max_forwards_is_answered_at_zero_and_decremented_otherwise_rfc9110_7_6_2() {
    let dir = TestDir::new("max-forwards");
    let origin = RawOrigin::start(origin_options);
    let data = dir.subdir("data");
    let proxy = Proxy::start_with_config(&data, ROBOTS_OFF, &[]);
    let url = origin.url("/x");

    for target in [url.clone(), format!("http://{}", origin.authority())] {
        let r = send(&proxy, "OPTIONS", &target, &[("Max-Forwards", "0")]);
        assert_answered_by_the_proxy(&format!("OPTIONS {target} with Max-Forwards: 0"), &r);
    }
    for bad in ["-1", "one", "1, 2", ""] {
        let r = send(&proxy, "OPTIONS", &url, &[("Max-Forwards", bad)]);
        assert_eq!(r.status, 400, "Max-Forwards: {bad:?}: {}", r.describe());
        assert!(r.text().contains("Max-Forwards"), "the 400 names the field: {}", r.text());
    }
    assert_eq!(origin.request_count(), 0, "nothing may reach the origin: {:?}", origin.requests());

    let r = send(&proxy, "OPTIONS", &url, &[("Max-Forwards", "5")]);
    assert_eq!((r.status, r.header("X-Origin")), (200, Some("yes")), "forwarded: {}", r.describe());
    let r = send(&proxy, "OPTIONS", &url, &[]);
    assert_eq!((r.status, r.header("X-Origin")), (200, Some("yes")), "forwarded: {}", r.describe());
    let r = send(&proxy, "GET", &origin.url("/get"), &[("Max-Forwards", "0")]);
    assert_eq!(
        (r.status, r.header("X-Origin")),
        (200, Some("yes")),
        "GET is forwarded whatever its Max-Forwards: {}",
        r.describe()
    );
    let seen = origin.wait_for_requests(3, Duration::from_secs(10));
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!((seen[0].method.as_str(), seen[0].target.as_str()), ("OPTIONS", "/x"));
    assert!(
        seen[0].has_exact_field("Max-Forwards", "4"),
        "N - 1 forwarded:\n{}",
        seen[0].head_text()
    );
    assert!(seen[1].raw_values("Max-Forwards").is_empty(), "none added:\n{}", seen[1].head_text());
    assert_eq!(seen[2].method, "GET");
    assert!(
        seen[2].has_exact_field("Max-Forwards", "0"),
        "other methods: unchanged:\n{}",
        seen[2].head_text()
    );
    for r in &seen {
        assert!(r.violations.is_empty(), "{:?}", r.violations);
    }

    // Offline, the same answer (and nothing else is possible).
    let offline = proxy.restart(&["--offline"]);
    let r = send(&offline, "OPTIONS", &url, &[("Max-Forwards", "0")]);
    assert_answered_by_the_proxy("offline OPTIONS with Max-Forwards: 0", &r);
    assert_eq!(origin.request_count(), 3);
    drop(offline);
    drop(dir);
}

/// RFC 9110 section 7.6.2 and 9.3.8: TRACE is refused with 405 and
/// `Allow`, whatever its `Max-Forwards`, and never forwarded: the origin's
/// echo would hand the request's cookies and credentials to the page that
/// sent it.
#[test]
fn trace_is_refused_with_405_and_never_forwarded_rfc9110_7_6_2() {
    let (origin, proxy) = raw_origin_and_proxy("trace", ROBOTS_OFF, origin_options);
    for max_forwards in [None, Some("0"), Some("3"), Some("junk")] {
        let mut headers =
            vec![("Cookie", "session=secret"), ("Authorization", "Basic dXNlcjpwYXNz")];
        if let Some(m) = max_forwards {
            headers.push(("Max-Forwards", m));
        }
        let r = send(&proxy, "TRACE", &origin.url("/t"), &headers);
        let what = format!("TRACE with Max-Forwards {max_forwards:?}");
        assert_eq!(r.status, 405, "{what}: {}", r.describe());
        assert_eq!(r.header("Allow"), Some(ALLOW), "{what}: {}", r.describe());
        assert!(cache_status(&r).contains("detail=trace"), "{what}: {}", r.describe());
        assert!(
            !r.text().contains("secret") && !r.text().contains("dXNlcjpwYXNz"),
            "{what}: the refusal echoes nothing: {}",
            r.text()
        );
    }
    assert_eq!(
        origin.request_count(),
        0,
        "TRACE must never reach the origin: {:?}",
        origin.requests()
    );
}

/// RFC 9112 section 3.2.4: `OPTIONS http://host:port` (an empty path) asks
/// about the whole server and reaches the origin as `OPTIONS *` with
/// `Host: host:port` (and its `Max-Forwards` updated); `OPTIONS
/// http://host:port/` stays a request for `/`.
#[test]
fn options_for_the_whole_server_goes_out_in_asterisk_form_rfc9112_3_2_4() {
    let (origin, proxy) = raw_origin_and_proxy("options-asterisk", ROBOTS_OFF, origin_options);
    let whole = format!("http://{}", origin.authority());
    let r = send(&proxy, "OPTIONS", &whole, &[("Max-Forwards", "2")]);
    assert_eq!(
        (r.status, r.header("X-Origin"), r.header("Allow")),
        (200, Some("yes"), Some("GET, OPTIONS")),
        "{}",
        r.describe()
    );
    let r = send(&proxy, "OPTIONS", &format!("{whole}/"), &[]);
    assert_eq!((r.status, r.header("X-Origin")), (200, Some("yes")), "{}", r.describe());

    let seen = origin.wait_for_requests(2, Duration::from_secs(10));
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        (seen[0].method.as_str(), seen[0].target.as_str(), seen[0].version.as_str()),
        ("OPTIONS", "*", "HTTP/1.1"),
        "{}",
        seen[0].head_text()
    );
    assert_host_exact(&seen[0], &origin.authority());
    assert!(seen[0].has_exact_field("Max-Forwards", "1"), "{}", seen[0].head_text());
    assert_eq!(
        (seen[1].method.as_str(), seen[1].target.as_str()),
        ("OPTIONS", "/"),
        "with a slash: the resource /:\n{}",
        seen[1].head_text()
    );
    for r in &seen {
        assert!(r.violations.is_empty(), "{:?}", r.violations);
    }
}

/// RFC 9112 section 3.2.4 over TLS: `OPTIONS https://host:port` sent to the
/// proxy, and `OPTIONS *` inside an intercepted CONNECT tunnel, both reach
/// the TLS origin as `OPTIONS *`.
#[test]
fn options_for_the_whole_server_over_tls_goes_out_in_asterisk_form_rfc9112_3_2_4() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = RawOrigin::start_tls(pki.server_config(), |req| {
        let mut reply = origin_options(req);
        reply.close = true;
        reply
    });
    let dir = TestDir::new("options-asterisk-tls");
    let ca_path = dir.join("origin-ca.pem");
    std::fs::write(&ca_path, &pki.ca_pem).expect("writing the origin CA");
    let config =
        format!("{ROBOTS_OFF}[upstream]\nextra_ca_file = {:?}\n", ca_path.display().to_string());
    let data = dir.subdir("data");
    let proxy = Proxy::start_with_config(&data, &config, &[]).owning(dir);
    let authority = origin.authority();

    let r = send(&proxy, "OPTIONS", &format!("https://{authority}"), &[]);
    assert_eq!(
        (r.status, r.header("X-Origin")),
        (200, Some("yes")),
        "absolute https: {}",
        r.describe()
    );

    let client_tls =
        tls_client_config(&std::fs::read(crawlcache_ca(&data)).expect("reading crawlcache's CA"));
    let tcp = connect_tunnel(proxy.addr(), &authority)
        .unwrap_or_else(|e| panic!("CONNECT {authority}: {e}"));
    let (mut tls, _) = tls_over(tcp, client_tls, "127.0.0.1").unwrap_or_else(|e| panic!("{e}"));
    let r = exchange_until_close(
        &mut tls,
        format!("OPTIONS * HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    assert_eq!(
        (r.status, r.header("X-Origin")),
        (200, Some("yes")),
        "in a tunnel: {}",
        r.describe()
    );

    let seen = origin.wait_for_requests(2, Duration::from_secs(10));
    assert_eq!(seen.len(), 2, "{seen:?}");
    for r in &seen {
        assert_eq!((r.method.as_str(), r.target.as_str()), ("OPTIONS", "*"), "{}", r.head_text());
        assert_host_exact(r, &authority);
    }
}

/// RFC 9112 section 3.2.4 through a parent proxy (here a recording one):
/// the request goes to the parent in absolute form with the empty path
/// kept, `OPTIONS http://host:port`, for the last proxy to send the
/// asterisk; with a slash it stays `http://host:port/`.
#[test]
fn options_for_the_whole_server_keeps_the_absolute_form_to_a_parent_rfc9112_3_2_4() {
    let parent = RawOrigin::start(origin_options);
    let config = format!("{ROBOTS_OFF}[upstream]\nproxy = \"http://{}\"\n", parent.authority());
    let dir = TestDir::new("options-parent");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &config, &[]).owning(dir);
    for target in ["http://origin.example:8080", "http://origin.example:8080/"] {
        let r = send(&proxy, "OPTIONS", target, &[("Max-Forwards", "9")]);
        assert_eq!(
            (r.status, r.header("X-Origin")),
            (200, Some("yes")),
            "{target}: {}",
            r.describe()
        );
    }
    let seen = parent.wait_for_requests(2, Duration::from_secs(10));
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        (seen[0].method.as_str(), seen[0].target.as_str()),
        ("OPTIONS", "http://origin.example:8080"),
        "{}",
        seen[0].head_text()
    );
    assert_eq!(seen[1].target, "http://origin.example:8080/", "{}", seen[1].head_text());
    for r in &seen {
        assert_host_exact(r, "origin.example:8080");
        assert!(r.has_exact_field("Max-Forwards", "8"), "{}", r.head_text());
        assert!(r.violations.is_empty(), "{:?}", r.violations);
    }
}
