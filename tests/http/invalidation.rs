//! RFC 9111 section 4.4, invalidation by unsafe methods.

use super::*;

/// RFC 9111 section 4.4: after a successful POST whose response names a
/// URL in `Content-Location` or `Location`, the next GET of that URL goes
/// to the origin, even when the GET that stored it had only just finished
/// (its body may still have been being written to the store).
#[test]
fn unsafe_request_invalidates_a_response_that_was_still_being_stored() {
    let (origin, proxy) = start(|req| {
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
