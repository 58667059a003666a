//! RFC 9111 section 3, storing responses in caches: what may be stored
//! (no-store, private, Set-Cookie) and that incomplete bodies never are.

use super::*;

/// C06: a request with `Cache-Control: no-store` stores nothing.
#[test]
fn request_no_store_stores_nothing_c06() {
    let (origin, proxy) = start(|_| Reply::ok(&[("Cache-Control", "max-age=300")], b"report"));
    let url = origin.url("/report");
    proxy.get(&url, &[("Cache-Control", "no-store")]);
    proxy.get(&url, &[("Cache-Control", "no-store")]);
    assert_eq!(origin.request_count(), 2, "both no-store requests reach the origin");
    let show = crawlcache_cmd(
        &["cache", "show", "--json", "--data-dir", &proxy.data_dir().display().to_string(), &url],
        Duration::from_secs(20),
    );
    let out = String::from_utf8_lossy(&show.stdout);
    assert!(out.contains("\"variants\": []"), "nothing is stored for the URL: {out}");
    let third = proxy.get(&url, &[]);
    assert!(status_of(&third).contains("uri-miss"), "step 3 is a miss: {}", status_of(&third));
    assert_eq!(origin.request_count(), 3);
    // The body is published just after the client's transfer ends.
    let v = wait_for_stats(&proxy, |v| v["store"]["bodies"] != 0);
    assert_eq!(v["store"]["bodies"], 1, "only step 3's body is on disk: {v}");
    assert_eq!(v["store"]["entries"], 1, "{v}");
}

/// C07: a shared cache never stores `private`; `private="Set-Cookie"` stores
/// the body but not the named field.
#[test]
fn private_is_never_shared_and_private_named_fields_are_not_stored_c07() {
    let (origin, proxy) = start(|req| match req.path() {
        "/account" => Reply::ok(&[("Cache-Control", "private, max-age=600")], b"A-data"),
        _ => Reply::ok(
            &[("Cache-Control", "private=\"Set-Cookie\", max-age=600"), ("Set-Cookie", "sid=1")],
            b"shared",
        ),
    });
    let url = origin.url("/account");
    assert_eq!(proxy.get(&url, &[]).text(), "A-data");
    proxy.get(&url, &[]);
    assert_eq!(origin.request_count(), 2, "worker B's request goes to the origin");

    let q = origin.url("/qualified");
    let first = proxy.get(&q, &[]);
    assert_eq!(first.header("set-cookie"), Some("sid=1"), "the requesting client gets its cookie");
    let second = proxy.get(&q, &[]);
    assert!(is_hit(&second), "{}", status_of(&second));
    assert_eq!(second.text(), "shared");
    assert_eq!(
        second.header("set-cookie"),
        None,
        "the private field is not stored: {}",
        second.describe()
    );
}

/// C08: Set-Cookie is never replayed from the cache, whether or not the
/// response names it in `no-cache="..."`.
#[test]
fn set_cookie_is_never_replayed_from_the_cache_c08() {
    let (origin, proxy) = start(|req| match req.path() {
        "/home" => Reply::ok(
            &[("Cache-Control", "public, max-age=60"), ("Set-Cookie", "sid=placeholder-1")],
            b"home",
        ),
        _ => Reply::ok(
            &[
                ("Cache-Control", "public, max-age=60, no-cache=\"Set-Cookie\""),
                ("Set-Cookie", "sid=placeholder-2"),
            ],
            b"home2",
        ),
    });
    for path in ["/home", "/variant"] {
        let url = origin.url(path);
        let first = proxy.get(&url, &[]);
        assert!(first.header("set-cookie").is_some(), "the first client gets its own cookie");
        let second = proxy.get(&url, &[]);
        assert!(is_hit(&second), "{path}: the body is served from cache: {}", status_of(&second));
        assert_eq!(
            second.header("set-cookie"),
            None,
            "{path}: another client never gets the cookie: {}",
            second.describe()
        );
    }
    assert_eq!(origin.request_count(), 2);
}

/// C09: a truncated body (chunked without its last chunk, or Content-Length
/// short) reaches the client as truncated and is never stored.
#[test]
fn truncated_bodies_reach_the_client_truncated_and_are_never_stored_c09() {
    let (origin, proxy) = start(|req| match req.path() {
        "/big.json" => Reply::chunked(
            200,
            &[("Cache-Control", "max-age=3600")],
            &[b"{\"a\":", b"[1,2,3"],
            false,
        ),
        _ => Reply::short_content_length(
            200,
            &[("Cache-Control", "max-age=3600")],
            b"only part",
            5000,
        ),
    });
    for path in ["/big.json", "/short"] {
        let url = origin.url(path);
        let first = proxy.get(&url, &[]);
        assert!(
            !first.complete,
            "{path}: the client sees a truncated transfer, not a clean end: {}",
            first.describe()
        );
        let before = origin.request_count();
        let second = proxy.get(&url, &[]);
        assert_eq!(
            origin.request_count(),
            before + 1,
            "{path}: the second request goes to the origin"
        );
        assert!(!is_hit(&second), "{path}: never a hit: {}", status_of(&second));
    }
    let stats = proxy.admin("/stats");
    let v: serde_json::Value = serde_json::from_slice(&stats.body).expect("stats JSON");
    assert_eq!(v["store"]["entries"], 0, "no entry for a truncated body: {v}");
    assert_eq!(v["store"]["bodies"], 0, "no body file for a truncated body: {v}");
    assert_cache_verifies(proxy.data_dir());
}

/// RFC 9211 section 2.5: `stored` only for an entry the cache committed.
/// A body read whole before the head goes out (announced at most 64 KiB)
/// says it when it was stored, and not when it was cut short; a body that
/// streams (no length announced) is still arriving when the head goes
/// out, so it never claims it, whether it ends complete, cut short or
/// larger than `cache.max_object_size`.
#[test]
fn cache_status_says_stored_only_for_an_entry_committed_rfc9211_2_5() {
    let config = format!("{NO_ROBOTS}[cache]\nmax_object_size = \"1KiB\"\n");
    let cc = [("Cache-Control", "max-age=3600")];
    let (origin, proxy) =
        start_with_origin("http-stored-truth", &config, move |req| match req.path() {
            "/whole" => Reply::ok(&cc, b"a whole body"),
            "/short" => Reply::short_content_length(200, &cc, b"only part", 500),
            "/cut" => Reply::chunked(200, &cc, &[b"one chunk"], false),
            "/streamed" => Reply::chunked(200, &cc, &[b"one chunk", b" then another"], true),
            "/huge" => Reply::chunked(200, &cc, &[&[b'x'; 800][..], &[b'y'; 800][..]], true),
            _ => Reply::new(404, &[], b""),
        });
    let stored = |r: &Response| {
        r.cache_status().unwrap_or_default().split(';').any(|p| p.trim() == "stored")
    };
    let whole = proxy.get(&origin.url("/whole"), &[]);
    assert!(stored(&whole), "{}", whole.describe());
    assert!(is_hit(&proxy.get(&origin.url("/whole"), &[])), "and it was");
    for path in ["/short", "/cut", "/huge"] {
        let first = proxy.get(&origin.url(path), &[]);
        assert!(!stored(&first), "{path}: not stored, so not said: {}", first.describe());
        assert!(!is_hit(&proxy.get(&origin.url(path), &[])), "{path}: indeed not stored");
    }
    let streamed = proxy.get(&origin.url("/streamed"), &[]);
    assert!(
        streamed.complete && !stored(&streamed),
        "not known when the head went out: {}",
        streamed.describe()
    );
    assert!(is_hit(&proxy.get(&origin.url("/streamed"), &[])), "stored once complete");
}
