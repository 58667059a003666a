//! The HTTP cases of `../shared/cases/CASES.md`, each run against the real
//! proxy binary and a scripted origin on loopback. Every test asserts what a
//! crawler relies on: which requests reach the origin, and what the client
//! receives.
//!
//! Times such as "T+3600 s" are produced with `Date` headers in the past
//! rather than by sleeping, so the suite stays quick.

mod common;

use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

fn start(handler: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> (Origin, Proxy, TestDir) {
    let dir = TestDir::new("http-case");
    let origin = Origin::start(handler);
    // These cases are about HTTP caching alone: robots.txt handling is off
    // so the origin sees only the requests each case makes.
    let proxy = Proxy::start_with_config(&dir.subdir("data"), "[robots]\nmode = \"off\"\n", &[]);
    (origin, proxy, dir)
}

fn ago(secs: u64) -> String {
    http_date(SystemTime::now() - Duration::from_secs(secs))
}

fn from_now(secs: i64) -> String {
    if secs >= 0 {
        http_date(SystemTime::now() + Duration::from_secs(secs as u64))
    } else {
        ago((-secs) as u64)
    }
}

/// Polls `/stats` until `done` holds (at most 5 s), returning the last value.
fn wait_for_stats(proxy: &Proxy, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let stats = proxy.admin("/stats");
        let v: serde_json::Value = serde_json::from_slice(&stats.body).expect("stats JSON");
        if done(&v) || std::time::Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn status_of(r: &Response) -> String {
    r.cache_status().unwrap_or_default()
}

fn is_hit(r: &Response) -> bool {
    status_of(r).contains("; hit")
}

/// C01: two Vary variants of one URL are both kept and each served to the
/// request that matches it, never the other.
#[test]
fn c01_vary_variants_coexist_and_never_cross() {
    let (origin, proxy, _d) = start(|req| {
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
    assert!(is_hit(&j2) && is_hit(&p2), "both repeats are hits: {} / {}", status_of(&j2), status_of(&p2));
    assert_eq!(origin.request_count(), 2, "origin sees exactly the two first requests");
    // A third Accept value is a variant miss, not the other variants.
    let x = proxy.get(&url, &[("Accept", "text/html")]);
    assert_eq!(x.text(), "P1");
    assert!(status_of(&x).contains("fwd=vary-miss"), "{}", status_of(&x));
    assert_eq!(origin.request_count(), 3);
}

/// C02: a 304 keeps stored fields it does not repeat, every line of a
/// repeated field in order, and takes the new Cache-Control.
#[test]
fn c02_not_modified_keeps_repeated_fields_and_updates_freshness() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let (origin, proxy, _d) = start(move |req| {
        if n2.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::ok(
                &[("Cache-Control", "max-age=1"), ("ETag", "\"v1\""), ("X-Tag", "red"), ("X-Tag", "blue")],
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
    assert_eq!(second.header_all("x-tag"), vec!["red", "blue"], "both X-Tag lines, in order: {}", second.describe());
    assert_eq!(second.header("cache-control"), Some("max-age=60"));
    assert!(status_of(&second).contains("fwd-status=304"), "{}", status_of(&second));
    let reqs = origin.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].header("if-none-match"), Some("\"v1\""), "revalidation sends the stored ETag");
    let third = proxy.get(&url, &[]);
    assert_eq!(third.header_all("x-tag"), vec!["red", "blue"]);
    assert_eq!(third.header("cache-control"), Some("max-age=60"));
    assert!(is_hit(&third), "{}", status_of(&third));
    assert_eq!(origin.request_count(), 2, "step 3 does not contact the origin");
}

/// C04: an explicit Expires wins over the Last-Modified heuristic, both ways.
#[test]
fn c04_explicit_expires_is_used_instead_of_the_heuristic() {
    let (origin, proxy, _d) = start(|req| {
        let now = SystemTime::now();
        match req.path() {
            // Stored "an hour ago" with a day of explicit lifetime: still fresh.
            "/index.json" => Reply::ok(
                &[
                    ("Date", &ago(3600)),
                    ("Expires", &from_now(86_400 - 3600)),
                    ("Last-Modified", &ago(30 * 86_400)),
                ],
                b"{}",
            ),
            // Expires == Date: expired at once, although Last-Modified would
            // give a long heuristic lifetime.
            _ => {
                let d = http_date(now);
                Reply::ok(&[("Date", &d), ("Expires", &d), ("Last-Modified", &ago(30 * 86_400))], b"v")
            }
        }
    });
    let fresh_url = origin.url("/index.json");
    proxy.get(&fresh_url, &[]);
    let again = proxy.get(&fresh_url, &[]);
    assert!(is_hit(&again), "Expires a day after Date: served from cache: {}", status_of(&again));
    assert_eq!(origin.request_count(), 1);

    let expired_url = origin.url("/variant");
    proxy.get(&expired_url, &[]);
    let again = proxy.get(&expired_url, &[]);
    assert!(!is_hit(&again), "Expires == Date: must not be served from a heuristic window: {}", status_of(&again));
    let reqs = origin.requests();
    assert_eq!(reqs.len(), 3);
    assert!(reqs[2].header("if-modified-since").is_some(), "the repeat is a revalidation with If-Modified-Since");
}

/// C06: a request with `Cache-Control: no-store` stores nothing.
#[test]
fn c06_request_no_store_stores_nothing() {
    let (origin, proxy, _d) = start(|_| Reply::ok(&[("Cache-Control", "max-age=300")], b"report"));
    let url = origin.url("/report");
    proxy.get(&url, &[("Cache-Control", "no-store")]);
    proxy.get(&url, &[("Cache-Control", "no-store")]);
    assert_eq!(origin.request_count(), 2, "both no-store requests reach the origin");
    let show = crawlcache_cmd(&["cache", "show", "--data-dir", &proxy.data_dir().display().to_string(), &url], Duration::from_secs(20));
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
fn c07_private_is_not_shared() {
    let (origin, proxy, _d) = start(|req| match req.path() {
        "/account" => Reply::ok(&[("Cache-Control", "private, max-age=600")], b"A-data"),
        _ => Reply::ok(&[("Cache-Control", "private=\"Set-Cookie\", max-age=600"), ("Set-Cookie", "sid=1")], b"shared"),
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
    assert_eq!(second.header("set-cookie"), None, "the private field is not stored: {}", second.describe());
}

/// C08: Set-Cookie is never replayed from the cache, whether or not the
/// response names it in `no-cache="..."`.
#[test]
fn c08_set_cookie_never_replayed() {
    let (origin, proxy, _d) = start(|req| match req.path() {
        "/home" => Reply::ok(&[("Cache-Control", "public, max-age=60"), ("Set-Cookie", "sid=placeholder-1")], b"home"),
        _ => Reply::ok(
            &[("Cache-Control", "public, max-age=60, no-cache=\"Set-Cookie\""), ("Set-Cookie", "sid=placeholder-2")],
            b"home2",
        ),
    });
    for path in ["/home", "/variant"] {
        let url = origin.url(path);
        let first = proxy.get(&url, &[]);
        assert!(first.header("set-cookie").is_some(), "the first client gets its own cookie");
        let second = proxy.get(&url, &[]);
        assert!(is_hit(&second), "{path}: the body is served from cache: {}", status_of(&second));
        assert_eq!(second.header("set-cookie"), None, "{path}: another client never gets the cookie: {}", second.describe());
    }
    assert_eq!(origin.request_count(), 2);
}

/// C09: a truncated body (chunked without its last chunk, or Content-Length
/// short) reaches the client as truncated and is never stored.
#[test]
fn c09_truncated_bodies_are_never_stored() {
    let (origin, proxy, _d) = start(|req| match req.path() {
        "/big.json" => Reply::chunked(200, &[("Cache-Control", "max-age=3600")], &[b"{\"a\":", b"[1,2,3"], false),
        _ => Reply::short_content_length(200, &[("Cache-Control", "max-age=3600")], b"only part", 5000),
    });
    for path in ["/big.json", "/short"] {
        let url = origin.url(path);
        let first = proxy.get(&url, &[]);
        assert!(!first.complete, "{path}: the client sees a truncated transfer, not a clean end: {}", first.describe());
        let before = origin.request_count();
        let second = proxy.get(&url, &[]);
        assert_eq!(origin.request_count(), before + 1, "{path}: the second request goes to the origin");
        assert!(!is_hit(&second), "{path}: never a hit: {}", status_of(&second));
    }
    let stats = proxy.admin("/stats");
    let v: serde_json::Value = serde_json::from_slice(&stats.body).expect("stats JSON");
    assert_eq!(v["store"]["entries"], 0, "no entry for a truncated body: {v}");
    assert_eq!(v["store"]["bodies"], 0, "no body file for a truncated body: {v}");
    assert_cache_verifies(proxy.data_dir());
}

/// C11: HEAD is answered from a stored GET with the GET's fields and no
/// body; a HEAD response never answers a later GET.
#[test]
fn c11_head_from_stored_get_and_never_the_reverse() {
    let body = vec![b'x'; 5000];
    let b2 = body.clone();
    let (origin, proxy, _d) = start(move |req| {
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

/// C12: 301 (and 308) are heuristically cacheable and stored as redirects
/// without being followed; 302 is not stored without explicit freshness.
#[test]
fn c12_permanent_redirects_are_cached_302_is_not() {
    let (origin, proxy, _d) = start(|req| {
        let status = match req.path() {
            "/old" => 301,
            "/perm" => 308,
            _ => 302,
        };
        // Heuristic freshness needs a Last-Modified in the past.
        Reply::new(status, &[("Location", "http://example.com/new"), ("Last-Modified", &ago(10 * 86_400))], b"")
    });
    for (path, cached) in [("/old", true), ("/perm", true), ("/temp", false)] {
        let url = origin.url(path);
        let first = proxy.get(&url, &[]);
        assert_eq!(first.header("location"), Some("http://example.com/new"), "the redirect is passed, not followed");
        let before = origin.request_count();
        let second = proxy.get(&url, &[]);
        assert_eq!(second.header("location"), Some("http://example.com/new"));
        assert_eq!(is_hit(&second), cached, "{path}: {}", status_of(&second));
        assert_eq!(origin.request_count(), before + usize::from(!cached), "{path}");
    }
}

/// C13: `Expires: -1`, `0`, empty or garbage never fail a request and mean
/// "already expired": the repeat is revalidated with the stored ETag.
#[test]
fn c13_invalid_expires_means_stale() {
    let (origin, proxy, _d) = start(|req| {
        let expires = match req.path() {
            "/minus-one" => "-1",
            "/zero" => "0",
            "/empty" => "",
            _ => "not-a-date",
        };
        if req.header("if-none-match") == Some("\"e1\"") {
            Reply::not_modified(&[("ETag", "\"e1\""), ("Expires", expires)])
        } else {
            Reply::ok(&[("Expires", expires), ("ETag", "\"e1\"")], b"payload")
        }
    });
    for path in ["/minus-one", "/zero", "/empty", "/garbage"] {
        let url = origin.url(path);
        let first = proxy.get(&url, &[]);
        assert_eq!((first.status, first.text()), (200, "payload".to_string()), "{path}: step 1 is a normal response");
        let before = origin.request_count();
        let second = proxy.get(&url, &[]);
        assert_eq!(second.text(), "payload", "{path}");
        let reqs = origin.requests();
        assert_eq!(reqs.len(), before + 1, "{path}: the repeat reaches the origin");
        assert_eq!(reqs.last().and_then(|r| r.header("if-none-match")), Some("\"e1\""), "{path}: as a revalidation");
    }
}

/// C14: `max-age=600s` is invalid (stale, revalidated); `max-age="3600"`
/// is accepted.
#[test]
fn c14_nonnumeric_and_quoted_max_age() {
    let (origin, proxy, _d) = start(|req| match req.path() {
        "/rss" => Reply::ok(&[("Cache-Control", "max-age=600s"), ("ETag", "\"r1\"")], b"rss"),
        _ => Reply::ok(&[("Cache-Control", "max-age=\"3600\"")], b"q"),
    });
    let rss = origin.url("/rss");
    assert_eq!(proxy.get(&rss, &[]).status, 200);
    proxy.get(&rss, &[]);
    let reqs = origin.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].header("if-none-match"), Some("\"r1\""), "max-age=600s: the repeat is revalidated");

    let q = origin.url("/q");
    proxy.get(&q, &[]);
    let again = proxy.get(&q, &[]);
    assert!(is_hit(&again), "quoted max-age parsed as 3600: {}", status_of(&again));
    assert_eq!(origin.request_count(), 3);
}

/// C20: a `no-cache` response is stored and revalidated on every use; a 304
/// lets the stored 100 kB body be served.
#[test]
fn c20_no_cache_response_is_revalidated_and_served_from_store() {
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let b2 = body.clone();
    let (origin, proxy, _d) = start(move |req| {
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

/// Malformed requests get 400, oversized headers 431, an unreachable origin
/// 502 naming the cause; the proxy keeps serving afterwards.
#[test]
fn bad_input_gets_clear_errors() {
    let (origin, proxy, _d) = start(|_| Reply::ok(&[("Cache-Control", "max-age=60")], b"ok"));
    let mut c = Conn::open(proxy.addr());
    let r = c.try_send_raw(b"GARBAGE\r\n\r\n", false).expect("an answer to a malformed request line");
    assert_eq!(r.status, 400, "{}", r.describe());

    let big = "x".repeat(100 * 1024);
    let raw = format!("GET {} HTTP/1.1\r\nHost: a\r\nX-Big: {big}\r\n\r\n", origin.url("/"));
    let r = Conn::open(proxy.addr()).try_send_raw(raw.as_bytes(), false).expect("an answer to oversized headers");
    assert_eq!(r.status, 431, "{}", r.describe());

    let dead = format!("http://127.0.0.1:{}/x", free_port());
    let r = proxy.get(&dead, &[]);
    assert_eq!(r.status, 502, "{}", r.describe());
    assert!(r.text().contains("could not connect"), "the body names the cause: {}", r.text());

    assert_eq!(proxy.get(&origin.url("/fine"), &[]).text(), "ok", "still serving");
}
