//! RFC 9111 section 4.3, validation: conditional requests with the stored
//! validators, and how a 304 updates the stored response.

use super::*;

/// C02: a 304 keeps stored fields it does not repeat, every line of a
/// repeated field in order, and takes the new Cache-Control.
#[test]
fn not_modified_keeps_repeated_fields_and_takes_the_new_cache_control_c02() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let (origin, proxy) = start(move |req| {
        if n2.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::ok(
                &[
                    ("Cache-Control", "max-age=1"),
                    ("ETag", "\"v1\""),
                    ("X-Tag", "red"),
                    ("X-Tag", "blue"),
                ],
                b"body-v1",
            )
        } else if req.header("if-none-match") == Some("\"v1\"") {
            Reply::not_modified(&[("ETag", "\"v1\""), ("Cache-Control", "max-age=60")])
        } else {
            Reply::ok(&[("Cache-Control", "max-age=60")], b"unexpected full fetch")
        }
    });
    let url = origin.url("/a");
    let first = proxy.get(&url, &[]);
    assert_eq!(first.header_all("x-tag"), vec!["red", "blue"]);
    std::thread::sleep(Duration::from_millis(2100));
    let second = proxy.get(&url, &[]);
    assert_eq!(second.text(), "body-v1", "{}", second.describe());
    assert_eq!(
        second.header_all("x-tag"),
        vec!["red", "blue"],
        "both X-Tag lines, in order: {}",
        second.describe()
    );
    assert_eq!(second.header("cache-control"), Some("max-age=60"));
    assert!(status_of(&second).contains("fwd-status=304"), "{}", status_of(&second));
    let reqs = origin.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[1].header("if-none-match"),
        Some("\"v1\""),
        "revalidation sends the stored ETag"
    );
    let third = proxy.get(&url, &[]);
    assert_eq!(third.header_all("x-tag"), vec!["red", "blue"]);
    assert_eq!(third.header("cache-control"), Some("max-age=60"));
    assert!(is_hit(&third), "{}", status_of(&third));
    assert_eq!(origin.request_count(), 2, "step 3 does not contact the origin");
}

/// C20: a `no-cache` response is stored and revalidated on every use; a 304
/// lets the stored 100 kB body be served.
#[test]
fn no_cache_response_is_revalidated_on_every_use_and_served_from_the_store_c20() {
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let b2 = body.clone();
    let (origin, proxy) = start(move |req| {
        if req.header("if-none-match") == Some("\"v1\"") {
            Reply::not_modified(&[("ETag", "\"v1\""), ("Cache-Control", "no-cache")])
        } else {
            Reply::ok(&[("Cache-Control", "no-cache"), ("ETag", "\"v1\"")], &b2)
        }
    });
    let url = origin.url("/n");
    assert_eq!(proxy.get(&url, &[]).body, body);
    let second = proxy.get(&url, &[]);
    assert_eq!(second.body, body, "the stored body is served after the 304");
    assert!(status_of(&second).contains("fwd-status=304"), "{}", status_of(&second));
    let reqs = origin.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].header("if-none-match"), Some("\"v1\""));
}

/// RFC 9211 section 2.2: a request `no-cache` (or `max-age=0`) on a fresh
/// stored response is validated with `fwd=request` (the request's semantics
/// did not allow the fresh response); on a stale one `fwd=stale` stays
/// right. The 304 counts as a revalidation either way; a response-side
/// `no-cache` is `fwd=stale` too.
#[test]
fn a_request_no_cache_on_a_fresh_response_is_fwd_request_and_on_a_stale_one_fwd_stale_rfc9211_2_2()
{
    let (origin, proxy) = start(move |req| {
        let cc = if req.path() == "/short" {
            "max-age=1"
        } else if req.path() == "/must" {
            "no-cache"
        } else {
            "max-age=600"
        };
        if req.header("if-none-match") == Some("\"v1\"") {
            Reply::not_modified(&[("ETag", "\"v1\""), ("Cache-Control", cc)])
        } else {
            Reply::ok(&[("Cache-Control", cc), ("ETag", "\"v1\"")], b"body")
        }
    });
    let (fresh, short, must) = (origin.url("/fresh"), origin.url("/short"), origin.url("/must"));
    for url in [&fresh, &short, &must] {
        assert_eq!(proxy.get(url, &[]).status, 200);
    }
    let revalidated_before = proxy.metric("crawlcache_revalidated_total");
    for directive in ["no-cache", "max-age=0"] {
        let r = proxy.get(&fresh, &[("Cache-Control", directive)]);
        assert!(
            status_of(&r).contains("fwd=request") && status_of(&r).contains("fwd-status=304"),
            "{directive} on a fresh response: {}",
            status_of(&r)
        );
        let h = Conn::open(proxy.addr()).send("HEAD", &fresh, &[("Cache-Control", directive)], b"");
        assert!(
            status_of(&h).contains("fwd=request"),
            "HEAD {directive} on a fresh response: {}",
            status_of(&h)
        );
    }
    std::thread::sleep(Duration::from_millis(2100));
    let r = proxy.get(&short, &[("Cache-Control", "no-cache")]);
    assert!(
        status_of(&r).contains("fwd=stale") && status_of(&r).contains("fwd-status=304"),
        "no-cache on a stale response: {}",
        status_of(&r)
    );
    let r = proxy.get(&must, &[]);
    assert!(status_of(&r).contains("fwd=stale"), "a response's own no-cache: {}", status_of(&r));
    assert!(
        proxy.metric("crawlcache_revalidated_total") >= revalidated_before + 4,
        "the GET validations count as revalidations"
    );
}
