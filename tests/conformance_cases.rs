//! Behaviours added for the HTTP caching conformance suite
//! (http-cache-tests), each asserted as what a crawler relies on, against
//! the real proxy binary and a scripted origin on loopback.

mod common;

use common::*;

fn start(handler: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> (Origin, Proxy, TestDir) {
    let dir = TestDir::new("conformance-case");
    let origin = Origin::start(handler);
    // HTTP caching alone: robots.txt handling off, so the origin sees only
    // the requests each test makes.
    let proxy = Proxy::start_with_config(&dir.subdir("data"), "[robots]\nmode = \"off\"\n", &[]);
    (origin, proxy, dir)
}

const BODY: &[u8] = b"0123456789A";

/// An origin serving `BODY` fresh for an hour with a strong ETag and a
/// Last-Modified well before its Date.
fn stored_body_origin() -> (Origin, Proxy, TestDir) {
    start(|_| {
        Reply::ok(
            &[
                ("Cache-Control", "max-age=3600"),
                ("ETag", "\"v1\""),
                ("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
                ("Content-Type", "text/plain"),
            ],
            BODY,
        )
    })
}

/// RFC 9110 section 14 / RFC 9111 section 3.4: a single byte range of a
/// complete stored response is answered from the cache with 206 and the
/// right bytes; the origin is asked once.
#[test]
fn single_range_of_a_stored_200_is_a_206_from_the_cache() {
    let (origin, proxy, _d) = stored_body_origin();
    let url = origin.url("/r");
    let full = proxy.get(&url, &[]);
    assert_eq!(full.status, 200, "{}", full.describe());
    for (range, text, content_range) in [
        ("bytes=0-1", "01", "bytes 0-1/11"),
        ("bytes=1-", "123456789A", "bytes 1-10/11"),
        ("bytes=-1", "A", "bytes 10-10/11"),
        ("bytes=5-1000", "56789A", "bytes 5-10/11"),
    ] {
        let r = proxy.get(&url, &[("Range", range)]);
        assert_eq!(r.status, 206, "{range}: {}", r.describe());
        assert_eq!(r.text(), text, "{range}");
        assert_eq!(r.header("content-range"), Some(content_range), "{range}");
        assert_eq!(r.header("content-length"), Some(text.len().to_string().as_str()), "{range}");
        assert_eq!(r.header("etag"), Some("\"v1\""), "the stored fields come along: {range}");
        assert!(r.complete, "{range}");
    }
    assert_eq!(origin.request_count(), 1, "every range came from the stored body");
}

/// RFC 9110 section 15.5.17: a range that starts past the end gets 416
/// with `Content-Range: bytes */length`, without asking the origin.
#[test]
fn unsatisfiable_range_is_a_416_naming_the_length() {
    let (origin, proxy, _d) = stored_body_origin();
    let url = origin.url("/r");
    proxy.get(&url, &[]);
    let r = proxy.get(&url, &[("Range", "bytes=11-")]);
    assert_eq!(r.status, 416, "{}", r.describe());
    assert_eq!(r.header("content-range"), Some("bytes */11"));
    assert!(r.body.is_empty());
    assert_eq!(origin.request_count(), 1);
}

/// RFC 9110 section 14.2 lets a server ignore `Range`: several ranges, a
/// malformed one, or an `If-Range` that does not strongly match the stored
/// validator get the whole stored body with 200.
#[test]
fn multiple_malformed_or_mismatched_if_range_get_the_whole_body() {
    let (origin, proxy, _d) = stored_body_origin();
    let url = origin.url("/r");
    proxy.get(&url, &[]);
    for headers in [
        vec![("Range", "bytes=0-1, 4-5")],
        vec![("Range", "bytes=5-1")],
        vec![("Range", "items=0-1")],
        vec![("Range", "bytes=0-1"), ("If-Range", "\"v0\"")],
        vec![("Range", "bytes=0-1"), ("If-Range", "W/\"v1\"")],
    ] {
        let r = proxy.get(&url, &headers);
        assert_eq!(r.status, 200, "{headers:?}: {}", r.describe());
        assert_eq!(r.body, BODY, "{headers:?}");
        assert!(r.header("content-range").is_none(), "{headers:?}");
    }
    let matching = proxy.get(&url, &[("Range", "bytes=0-1"), ("If-Range", "\"v1\"")]);
    assert_eq!(matching.status, 206, "a strong If-Range match gets the range: {}", matching.describe());
    assert_eq!(matching.text(), "01");
    assert_eq!(origin.request_count(), 1);
}

/// RFC 9110 section 14.2: range handling is defined for GET only; a HEAD
/// with `Range` gets the stored 200's fields.
#[test]
fn head_with_range_is_answered_as_a_plain_head() {
    let (origin, proxy, _d) = stored_body_origin();
    let url = origin.url("/r");
    proxy.get(&url, &[]);
    let mut conn = Conn::open(proxy.addr());
    let r = conn.send("HEAD", &url, &[("Range", "bytes=0-1")], b"");
    assert_eq!(r.status, 200, "{}", r.describe());
    assert!(r.header("content-range").is_none());
    assert_eq!(origin.request_count(), 1);
}

/// RFC 9111 section 4.4: after a successful POST whose response names a
/// URL in `Content-Location` or `Location`, the next GET of that URL goes
/// to the origin, even when the GET that stored it had only just finished
/// (its body may still have been being written to the store).
#[test]
fn unsafe_request_invalidates_a_response_that_was_still_being_stored() {
    let (origin, proxy, _d) = start(|req| {
        if req.method == "POST" {
            let target = req.path().replace("/post", "/target");
            let named = req.path().replace("/post", "/named");
            Reply::new(201, &[("Content-Location", target.as_str()), ("Location", named.as_str())], b"created")
        } else {
            Reply::ok(&[("Cache-Control", "max-age=3600")], b"stored")
        }
    });
    for i in 0..20 {
        let target = origin.url(&format!("/{i}/target"));
        let named = origin.url(&format!("/{i}/named"));
        assert_eq!(proxy.get(&target, &[]).status, 200);
        assert_eq!(proxy.get(&named, &[]).status, 200);
        let mut conn = Conn::open(proxy.addr());
        let post = conn.send("POST", &origin.url(&format!("/{i}/post")), &[("Content-Type", "text/plain")], b"abc");
        assert_eq!(post.status, 201, "{}", post.describe());
        for url in [&target, &named] {
            let before = origin.request_count();
            let again = proxy.get(url, &[]);
            assert_eq!(again.status, 200);
            assert_eq!(origin.request_count(), before + 1, "round {i}: {url} was invalidated: {}", again.describe());
        }
    }
}

/// RFC 9111 section 5.1 would take the first member of a list-valued `Age`;
/// crawlcache treats any list or repeated `Age` as invalid and the response
/// as stale (revalidated before reuse), the conservative reading.
#[test]
fn a_list_valued_age_makes_the_response_stale() {
    let (origin, proxy, _d) = start(|_| Reply::ok(&[("Cache-Control", "max-age=3600"), ("Age", "0, 0")], b"aged"));
    let url = origin.url("/aged");
    proxy.get(&url, &[]);
    proxy.get(&url, &[]);
    assert_eq!(origin.request_count(), 2, "the stored response was not reused without asking the origin");
}

/// RFC 9111 section 4.1: a stored variant matches a request whose selecting
/// field differs only in whitespace around list members, or (for
/// `Accept-Language` / `Accept-Encoding`) in case; a different preference
/// order is still a different variant.
#[test]
fn vary_matches_requests_that_differ_only_in_list_whitespace_or_case() {
    let (origin, proxy, _d) = start(|_| {
        Reply::ok(&[("Cache-Control", "max-age=3600"), ("Vary", "Accept-Encoding, Accept-Language")], b"variant")
    });
    let url = origin.url("/v");
    proxy.get(&url, &[("Accept-Encoding", "gzip, br"), ("Accept-Language", "en, de")]);
    for headers in [
        [("Accept-Encoding", "gzip,br"), ("Accept-Language", "en,de")],
        [("Accept-Encoding", " GZIP ,  br "), ("Accept-Language", "eN, De")],
    ] {
        let r = proxy.get(&url, &headers);
        assert!(r.cache_status().unwrap_or_default().contains("; hit"), "{headers:?}: {}", r.describe());
    }
    assert_eq!(origin.request_count(), 1);
    let reordered = proxy.get(&url, &[("Accept-Encoding", "gzip, br"), ("Accept-Language", "de, en")]);
    assert!(!reordered.cache_status().unwrap_or_default().contains("; hit"), "{}", reordered.describe());
    assert_eq!(origin.request_count(), 2);
}

/// RFC 9111 section 4.3.5: a HEAD that has to go to the origin because the
/// stored GET response is stale freshens that stored response when the
/// origin's `200` agrees with it (same validators and length), so the next
/// GET is a hit; a HEAD showing a different `ETag` drops the stored body.
#[test]
fn head_freshens_a_stored_get_or_drops_it_when_the_validators_disagree() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let gets = Arc::new(AtomicUsize::new(0));
    let gets2 = gets.clone();
    let (origin, proxy, _d) = start(move |req| {
        let changed = req.path().ends_with("/changed");
        let etag = if changed && req.method == "HEAD" { "\"v2\"" } else { "\"v1\"" };
        if req.method == "GET" {
            gets2.fetch_add(1, Ordering::SeqCst);
            // Stored already stale: revalidation needed before reuse.
            return Reply::ok(&[("Cache-Control", "max-age=0"), ("ETag", etag)], b"body-v1");
        }
        Reply::raw(format!("HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nETag: {etag}\r\nX-Head: yes\r\nContent-Length: 7\r\n\r\n").as_bytes())
    });
    let same = origin.url("/same");
    proxy.get(&same, &[]);
    let head = Conn::open(proxy.addr()).send("HEAD", &same, &[], b"");
    assert_eq!(head.status, 200, "{}", head.describe());
    assert!(head.body.is_empty());
    let after = proxy.get(&same, &[]);
    assert_eq!(after.text(), "body-v1");
    assert!(after.cache_status().unwrap_or_default().contains("; hit"), "freshened by the HEAD: {}", after.describe());
    assert_eq!(after.header("x-head"), Some("yes"), "fields from the HEAD's 200 are stored");
    assert_eq!(gets.load(Ordering::SeqCst), 1);

    let changed = origin.url("/changed");
    proxy.get(&changed, &[]);
    Conn::open(proxy.addr()).send("HEAD", &changed, &[], b"");
    let refetched = proxy.get(&changed, &[]);
    assert!(!refetched.cache_status().unwrap_or_default().contains("; hit"), "{}", refetched.describe());
    assert_eq!(gets.load(Ordering::SeqCst), 3, "a changed ETag in the HEAD means the stored body is not reused");
}
