//! HEAD (RFC 9110 section 9.3.2) against a cache: answered from a stored
//! GET, never the reverse, and freshening a stored GET (RFC 9111 section 4.3.5).

use super::*;

/// C11: HEAD is answered from a stored GET with the GET's fields and no
/// body; a HEAD response never answers a later GET.
#[test]
fn head_is_answered_from_a_stored_get_and_never_the_reverse_c11() {
    let body = vec![b'x'; 5000];
    let b2 = body.clone();
    let (origin, proxy) = start(move |req| {
        let r = Reply::ok(&[("Cache-Control", "max-age=600"), ("ETag", "\"b1\"")], &b2);
        if req.method == "HEAD" {
            Reply::raw(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\nCache-Control: max-age=600\r\nETag: \"b1\"\r\n\r\n")
        } else {
            r
        }
    });
    let url = origin.url("/file.bin");
    let get = proxy.get(&url, &[]);
    assert_eq!(get.body.len(), 5000);
    let mut conn = Conn::open(proxy.addr());
    let head = conn.send("HEAD", &url, &[], b"");
    assert_eq!(head.status, 200);
    assert!(is_hit(&head), "HEAD served from the stored GET: {}", status_of(&head));
    assert_eq!(head.header("content-length"), Some("5000"), "{}", head.describe());
    assert!(head.body.is_empty());
    assert_eq!(head.header("etag"), Some("\"b1\""));
    assert_eq!(origin.request_count(), 1, "no origin contact for the HEAD");

    // Variant: HEAD first, then GET: the GET goes to the origin.
    let url2 = origin.url("/head-first.bin");
    let h = Conn::open(proxy.addr()).send("HEAD", &url2, &[], b"");
    assert_eq!(h.status, 200);
    let g = proxy.get(&url2, &[]);
    assert_eq!(g.body.len(), 5000, "the GET gets the full body: {}", g.describe());
    let reqs = origin.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!((reqs[1].method.as_str(), reqs[2].method.as_str()), ("HEAD", "GET"));
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
    let (origin, proxy) = start(move |req| {
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
    assert!(
        after.cache_status().unwrap_or_default().contains("; hit"),
        "freshened by the HEAD: {}",
        after.describe()
    );
    assert_eq!(after.header("x-head"), Some("yes"), "fields from the HEAD's 200 are stored");
    assert_eq!(gets.load(Ordering::SeqCst), 1);

    let changed = origin.url("/changed");
    proxy.get(&changed, &[]);
    Conn::open(proxy.addr()).send("HEAD", &changed, &[], b"");
    let refetched = proxy.get(&changed, &[]);
    assert!(
        !refetched.cache_status().unwrap_or_default().contains("; hit"),
        "{}",
        refetched.describe()
    );
    assert_eq!(
        gets.load(Ordering::SeqCst),
        3,
        "a changed ETag in the HEAD means the stored body is not reused"
    );
}
