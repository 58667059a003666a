//! Serving stale responses: RFC 5861 stale-if-error and
//! stale-while-revalidate, within RFC 9111 section 4.2.4.

use super::*;

/// C22: stale-if-error serves the stale body for a 503 and for a refused
/// connection inside the window, and not outside it; must-revalidate never.
#[test]
fn stale_if_error_serves_the_stale_body_only_inside_its_window_c22() {
    let fail = Arc::new(AtomicUsize::new(0));
    let f2 = fail.clone();
    let (origin, proxy) = start(move |req| {
        if f2.load(Ordering::SeqCst) == 1 {
            return Reply::new(503, &[], b"down");
        }
        match req.path() {
            "/s" => Reply::ok(&[("Cache-Control", "max-age=1, stale-if-error=3")], b"S1"),
            _ => Reply::ok(&[("Cache-Control", "max-age=1, must-revalidate")], b"M1"),
        }
    });
    let s = origin.url("/s");
    let m = origin.url("/m");
    assert_eq!(proxy.get(&s, &[]).text(), "S1");
    assert_eq!(proxy.get(&m, &[]).text(), "M1");
    std::thread::sleep(Duration::from_millis(1500));
    fail.store(1, Ordering::SeqCst);
    let r = proxy.get(&s, &[]);
    assert_eq!(
        (r.status, r.text()),
        (200, "S1".to_string()),
        "503 inside stale-if-error: stale served: {}",
        r.describe()
    );
    assert!(r.cache_status().unwrap_or_default().contains("stale"), "{}", r.describe());
    let r = proxy.get(&m, &[]);
    assert_eq!(r.status, 503, "must-revalidate: the error, not M1: {}", r.describe());

    // The origin goes away entirely (connection refused).
    let port = origin.port();
    drop(origin);
    let r = proxy.get(&s, &[]);
    assert_eq!(
        (r.status, r.text()),
        (200, "S1".to_string()),
        "refused inside the window: stale served: {}",
        r.describe()
    );
    let r = proxy.get(&m, &[]);
    assert_eq!(r.status, 504, "must-revalidate and unreachable: 504: {}", r.describe());
    std::thread::sleep(Duration::from_millis(3000));
    let r = proxy.get(&format!("http://127.0.0.1:{port}/s"), &[]);
    assert!(r.status >= 500, "outside the window: an error, not S1: {}", r.describe());
}

/// C23: inside stale-while-revalidate the stale body is served at once and
/// one background revalidation fetches the new one; outside the window the
/// proxy goes to the origin before answering.
#[test]
fn stale_while_revalidate_serves_stale_at_once_and_revalidates_in_the_background_c23() {
    let version = Arc::new(AtomicUsize::new(1));
    let v2 = version.clone();
    let (origin, proxy) = start(move |req| {
        let v = v2.load(Ordering::SeqCst);
        let etag = format!("\"w{v}\"");
        if req.header("if-none-match") == Some(etag.as_str()) {
            return Reply::not_modified(&[
                ("ETag", &etag),
                ("Cache-Control", "public, s-maxage=1, stale-while-revalidate=3"),
            ]);
        }
        Reply::ok(
            &[("Cache-Control", "public, s-maxage=1, stale-while-revalidate=3"), ("ETag", &etag)],
            format!("W{v}").as_bytes(),
        )
    });
    let w = origin.url("/w");
    let w2 = origin.url("/w2");
    assert_eq!(proxy.get(&w, &[]).text(), "W1");
    assert_eq!(proxy.get(&w2, &[]).text(), "W1");
    version.store(2, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1500));
    let r = proxy.get(&w, &[]);
    assert_eq!(
        r.text(),
        "W1",
        "inside the window the stale body is served at once: {}",
        r.describe()
    );
    let reqs = origin.wait_for_requests(3, Duration::from_secs(5));
    assert_eq!(
        reqs[2].header("if-none-match"),
        Some("\"w1\""),
        "one background conditional request"
    );
    std::thread::sleep(Duration::from_millis(300));
    let r = proxy.get(&w, &[]);
    assert_eq!(r.text(), "W2", "the refreshed body is served next: {}", r.describe());
    assert_eq!(
        origin.requests().iter().filter(|r| r.path() == "/w").count(),
        2,
        "exactly one background request"
    );

    std::thread::sleep(Duration::from_millis(3500));
    let before = origin.request_count();
    let r = proxy.get(&w2, &[]);
    assert_eq!(
        r.text(),
        "W2",
        "outside the window the proxy asks the origin first: {}",
        r.describe()
    );
    assert_eq!(origin.request_count(), before + 1);
}

/// C52: a stored GET answers HEAD (RFC 9110 section 9.3.2), so the stale
/// fallbacks a GET gets apply to HEAD too: inside stale-if-error a 503
/// from the origin gives GET and HEAD the stale copy (HEAD with the stored
/// `ETag` and no body); with the origin down (connection refused, the
/// cache disconnected, RFC 9111 section 4.2.4) likewise; the unsafe
/// methods get a gateway error, never the stored body.
#[test]
fn head_on_a_stale_entry_gets_the_stale_fallbacks_get_gets_c52() {
    let fail = Arc::new(AtomicUsize::new(0));
    let f2 = fail.clone();
    let (origin, proxy) = start(move |req| {
        if f2.load(Ordering::SeqCst) == 1 {
            // No body after a HEAD's head (it would be read as the next response).
            return Reply::new(
                503,
                &[],
                if req.method == "HEAD" { &b""[..] } else { &b"origin down"[..] },
            );
        }
        match req.path() {
            "/sie" => Reply::ok(
                &[("Cache-Control", "max-age=1, stale-if-error=600"), ("ETag", "\"s1\"")],
                b"stored sie body",
            ),
            _ => Reply::ok(
                &[("Cache-Control", "max-age=1"), ("ETag", "\"d1\"")],
                b"stored down body",
            ),
        }
    });
    let (sie, down) = (origin.url("/sie"), origin.url("/down"));
    assert_eq!(proxy.get(&sie, &[]).text(), "stored sie body");
    assert_eq!(proxy.get(&down, &[]).text(), "stored down body");
    std::thread::sleep(Duration::from_millis(2100));
    fail.store(1, Ordering::SeqCst);

    let r = proxy.get(&sie, &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "stored sie body"),
        "GET, 503 inside stale-if-error: {}",
        r.describe()
    );
    let mut conn = Conn::open(proxy.addr());
    let h = conn.send("HEAD", &sie, &[], b"");
    assert_eq!(h.status, 200, "HEAD, 503 inside stale-if-error: the stale copy: {}", h.describe());
    assert_eq!(
        h.header("etag"),
        Some("\"s1\""),
        "HEAD carries the stored GET's ETag: {}",
        h.describe()
    );
    assert!(h.body.is_empty(), "HEAD has no body: {}", h.describe());
    assert!(status_of(&h).contains("stale-if-error"), "{}", h.describe());
    let before = origin.request_count();

    // The origin goes away entirely: connection refused.
    let port = origin.port();
    drop(origin);
    let down = format!("http://127.0.0.1:{port}/down");
    let r = proxy.get(&down, &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "stored down body"),
        "GET, origin unreachable: {}",
        r.describe()
    );
    let h = Conn::open(proxy.addr()).send("HEAD", &down, &[], b"");
    assert_eq!(h.status, 200, "HEAD, origin unreachable: the stale copy: {}", h.describe());
    assert_eq!(h.header("etag"), Some("\"d1\""), "{}", h.describe());
    assert!(h.body.is_empty(), "{}", h.describe());
    assert!(status_of(&h).contains("disconnected"), "{}", h.describe());
    for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
        let r = Conn::open(proxy.addr()).send(method, &down, &[], b"");
        assert!(r.status == 502 || r.status == 504, "{method}: a gateway error: {}", r.describe());
        assert!(
            !r.text().contains("stored down body"),
            "{method} never gets the stored body: {}",
            r.describe()
        );
    }
    assert!(before >= 2, "the origin saw the first GETs");
}
