//! RFC 9111 section 4.1, Vary: secondary keys select stored variants.

use super::*;

/// C01: two Vary variants of one URL are both kept and each served to the
/// request that matches it, never the other.
#[test]
fn vary_variants_of_one_url_coexist_and_never_cross_c01() {
    let (origin, proxy) = start(|req| {
        let json = req.header("accept") == Some("application/json");
        let body: &[u8] = if json { b"J1" } else { b"P1" };
        Reply::ok(&[("Cache-Control", "max-age=3600"), ("Vary", "Accept")], body)
    });
    let url = origin.url("/item/42");
    let j = proxy.get(&url, &[("Accept", "application/json")]);
    let p = proxy.get(&url, &[("Accept", "text/plain")]);
    assert_eq!((j.text(), p.text()), ("J1".to_string(), "P1".to_string()));
    let j2 = proxy.get(&url, &[("Accept", "application/json")]);
    let p2 = proxy.get(&url, &[("Accept", "text/plain")]);
    assert_eq!(j2.text(), "J1", "JSON request must get the JSON variant: {}", j2.describe());
    assert_eq!(p2.text(), "P1", "text request must get the text variant: {}", p2.describe());
    assert!(
        is_hit(&j2) && is_hit(&p2),
        "both repeats are hits: {} / {}",
        status_of(&j2),
        status_of(&p2)
    );
    assert_eq!(origin.request_count(), 2, "origin sees exactly the two first requests");
    // A third Accept value is a variant miss, not the other variants.
    let x = proxy.get(&url, &[("Accept", "text/html")]);
    assert_eq!(x.text(), "P1");
    assert!(status_of(&x).contains("fwd=vary-miss"), "{}", status_of(&x));
    assert_eq!(origin.request_count(), 3);
}

/// RFC 9111 section 4.1: a stored variant matches a request whose selecting
/// field differs only in whitespace around list members, or (for
/// `Accept-Language` / `Accept-Encoding`) in case; a different preference
/// order is still a different variant.
#[test]
fn vary_matches_requests_that_differ_only_in_list_whitespace_or_case() {
    let (origin, proxy) = start(|_| {
        Reply::ok(
            &[("Cache-Control", "max-age=3600"), ("Vary", "Accept-Encoding, Accept-Language")],
            b"variant",
        )
    });
    let url = origin.url("/v");
    proxy.get(&url, &[("Accept-Encoding", "gzip, br"), ("Accept-Language", "en, de")]);
    for headers in [
        [("Accept-Encoding", "gzip,br"), ("Accept-Language", "en,de")],
        [("Accept-Encoding", " GZIP ,  br "), ("Accept-Language", "eN, De")],
    ] {
        let r = proxy.get(&url, &headers);
        assert!(
            r.cache_status().unwrap_or_default().contains("; hit"),
            "{headers:?}: {}",
            r.describe()
        );
    }
    assert_eq!(origin.request_count(), 1);
    let reordered =
        proxy.get(&url, &[("Accept-Encoding", "gzip, br"), ("Accept-Language", "de, en")]);
    assert!(
        !reordered.cache_status().unwrap_or_default().contains("; hit"),
        "{}",
        reordered.describe()
    );
    assert_eq!(origin.request_count(), 2);
}
