//! C54: the admin plane is closed to web pages. An admin request is served
//! only when its `Host` names the proxy (no DNS rebinding); a request a
//! foreign page starts (its `Origin` or `Sec-Fetch-Site`) is refused with
//! `403` whatever it asks, unless it carries the admin token as a Bearer
//! token; nothing changes state over `GET`; every admin answer carries
//! `X-Content-Type-Options: nosniff` and `Cross-Origin-Resource-Policy:
//! same-origin`. Driven with raw requests (what curl sends) and with a real
//! headless Chromium whose crawled page tries to purge the cache.

use crate::common::browser::Chromium;
use crate::common::*;
use crate::support::*;
use std::net::SocketAddr;
use std::time::Duration;

fn page(req: &RecordedRequest) -> Reply {
    match req.path() {
        "/page" => Reply::ok(
            &[("Cache-Control", "max-age=600"), ("Content-Type", "text/plain")],
            b"a stored page",
        ),
        // A crawled page that tries to purge the proxy's cache, as C54's
        // reproduction has it. The proxy's port is its query string.
        p if p.starts_with("/evil.html") => {
            let port = req.target.rsplit_once('?').map_or("0", |(_, q)| q);
            let html = format!(
                "<!doctype html><title>loading</title><script>\
                 fetch('http://127.0.0.1:{port}/cache/purge?url=' + encodeURIComponent(location.origin + '/page'), {{method: 'POST', mode: 'no-cors'}})\
                 .then(() => document.title = 'sent', e => document.title = 'failed: ' + e);</script>"
            );
            Reply::ok(
                &[("Content-Type", "text/html"), ("Cache-Control", "no-store")],
                html.as_bytes(),
            )
        }
        _ => Reply::new(404, &[], b"no"),
    }
}

fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn send(proxy: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)]) -> Response {
    send_request(proxy, method, target, headers, b"")
}

fn assert_still_a_hit(proxy: &Proxy, url: &str, after: &str) {
    let r = proxy.get(url, &[]);
    assert_eq!(r.status, 200, "{after}: {}", r.describe());
    assert!(
        cache_status(&r).contains("hit"),
        "{after}: the stored page must still be served as a hit: {}",
        r.describe()
    );
}

fn assert_guarded(what: &str, r: &Response) {
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{what}: {}", r.describe());
    assert_eq!(
        r.header("cross-origin-resource-policy"),
        Some("same-origin"),
        "{what}: {}",
        r.describe()
    );
}

/// Every admin endpoint, with the method it takes.
const ENDPOINTS: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/status.json"),
    ("GET", "/metrics"),
    ("GET", "/stats"),
    ("GET", "/cache/show?url=URL"),
    ("GET", "/cache/ls"),
    ("GET", "/cache/cat?url=URL"),
    ("GET", "/cache/export"),
    ("GET", "/cache/verify"),
    ("GET", "/robots/show?origin=ORIGIN"),
    ("POST", "/cache/purge?url=URL"),
    ("DELETE", "/cache/purge?url=URL"),
    ("POST", "/cache/prune?unused_for=0s"),
    ("POST", "/cache/compact"),
    ("POST", "/cache/verify?repair=1"),
    ("POST", "/cache/import/upload?name=x.warc"),
    ("POST", "/cache/import?uploads=1"),
    ("POST", "/robots/refresh"),
];

#[test]
fn c54_requests_naming_another_host_or_sent_by_another_page_are_refused_at_every_endpoint() {
    let (origin, proxy) = start_with_origin("c54-raw", ROBOTS_OFF, page);
    let url = origin.url("/page");
    assert_eq!(proxy.get(&url, &[]).status, 200);
    assert_still_a_hit(&proxy, &url, "stored");
    let p = proxy.port();
    let own = format!("http://127.0.0.1:{p}");
    let foreign_origin = format!("http://127.0.0.1:{}", origin.port());
    let base = origin.url("/");
    let fill = |path: &str| {
        path.replace("URL", &encode(&url)).replace("ORIGIN", &encode(base.trim_end_matches('/')))
    };
    let refused_before = proxy.metric("crawlcache_admin_refused_total");
    let mut refused = 0;

    for (method, path) in ENDPOINTS {
        let target = fill(path);
        let what = format!("{method} {target}");
        // DNS rebinding: the page's own name in Host.
        let r = send(
            proxy.addr(),
            method,
            &target,
            &[("Host", &format!("rebind.attacker.example:{p}"))],
        );
        assert_eq!(r.status, 403, "{what} with a rebound Host: {}", r.describe());
        assert!(
            r.text().contains("Host rebind.attacker.example"),
            "{what}: the refusal names the Host: {}",
            r.text()
        );
        assert_guarded(&what, &r);
        // A cross-site page (CSRF, or a cross-site read of stored bodies).
        let r = send(
            proxy.addr(),
            method,
            &target,
            &[
                ("Origin", "http://attacker.example"),
                ("Sec-Fetch-Site", "cross-site"),
                ("Sec-Fetch-Mode", "no-cors"),
            ],
        );
        assert_eq!(r.status, 403, "{what} from a cross-site page: {}", r.describe());
        assert!(r.text().contains("other pages"), "{what}: {}", r.text());
        // A page on another port of the same machine is a foreign page too.
        let r = send(
            proxy.addr(),
            method,
            &target,
            &[("Origin", &foreign_origin), ("Sec-Fetch-Site", "same-site")],
        );
        assert_eq!(r.status, 403, "{what} from {foreign_origin}: {}", r.describe());
        refused += 3;
    }
    assert_still_a_hit(&proxy, &url, "after every refused request");
    assert!(
        proxy.log_shows("admin: refused POST /cache/purge", Duration::from_secs(5)),
        "the refusal is logged:\n{}",
        proxy.stderr_tail(20)
    );
    assert_eq!(
        proxy.metric("crawlcache_admin_refused_total") - refused_before,
        refused,
        "each refusal is counted"
    );

    // A link from another site opens the status page (its reads are its own).
    let r = send(
        proxy.addr(),
        "GET",
        "/",
        &[
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "navigate"),
            ("Sec-Fetch-Dest", "document"),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_guarded("GET /", &r);

    // Nothing changes state over GET.
    for path in [
        "/cache/verify?repair=1",
        "/cache/prune",
        "/cache/compact",
        "/cache/import",
        "/cache/import/upload",
        "/robots/refresh",
    ] {
        let r = send(proxy.addr(), "GET", path, &[]);
        assert_eq!(r.status, 405, "GET {path}: {}", r.describe());
        assert_eq!(r.header("allow"), Some("POST"), "GET {path}: {}", r.describe());
    }

    // The proxy's own page, curl and the CLI are served.
    let r = send(proxy.addr(), "GET", "/stats", &[("Host", &format!("localhost:{p}"))]);
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_guarded("GET /stats", &r);
    let r = send(proxy.addr(), "POST", "/cache/verify?repair=1", &[]);
    assert_eq!(r.status, 200, "{}", r.describe());
    let purge = fill("/cache/purge?url=URL");
    let r =
        send(proxy.addr(), "POST", &purge, &[("Origin", &own), ("Sec-Fetch-Site", "same-origin")]);
    assert_eq!(r.status, 200, "POST {purge} from the proxy's own page: {}", r.describe());
    let again = proxy.get(&url, &[]);
    assert!(!cache_status(&again).contains("hit"), "purged by its own page: {}", again.describe());
}

#[test]
fn c54_with_a_token_only_a_bearer_token_lets_another_page_change_state() {
    let (origin, _unused) = start_with_origin("c54-origin", ROBOTS_OFF, page);
    drop(_unused);
    let dir = TestDir::new("c54-token");
    let cfg = format!(
        "{ROBOTS_OFF}[server]\nadmin_token = \"s3cret\"\nadmin_hosts = [\"crawlcache.internal\"]\n"
    );
    let proxy = Proxy::start_on(
        [127, 0, 0, 1].into(),
        &dir.subdir("data"),
        &cfg,
        &[("Authorization", "Bearer s3cret")],
    )
    .owning(dir);
    let url = origin.url("/page");
    assert_eq!(proxy.get(&url, &[]).status, 200);
    let purge = format!("/cache/purge?url={}", encode(&url));
    let cross = [("Origin", "http://attacker.example"), ("Sec-Fetch-Site", "cross-site")];
    // A browser replays remembered Basic credentials by itself.
    let basic = format!("Basic {}", data_encoding::BASE64.encode(b"anyone:s3cret"));
    let r = send(proxy.addr(), "POST", &purge, &[cross[0], cross[1], ("Authorization", &basic)]);
    assert_eq!(r.status, 403, "{}", r.describe());
    assert_still_a_hit(&proxy, &url, "after a cross-site purge with Basic credentials");
    // A name listed in server.admin_hosts addresses the proxy; others do not.
    let r = send(
        proxy.addr(),
        "GET",
        "/stats",
        &[("Host", "crawlcache.internal"), ("Authorization", "Bearer s3cret")],
    );
    assert_eq!(r.status, 200, "{}", r.describe());
    let r = send(
        proxy.addr(),
        "GET",
        "/stats",
        &[("Host", "elsewhere.example"), ("Authorization", "Bearer s3cret")],
    );
    assert_eq!(r.status, 403, "{}", r.describe());
    // The Bearer token is what a script sends on purpose.
    let r = send(
        proxy.addr(),
        "POST",
        &purge,
        &[cross[0], cross[1], ("Authorization", "Bearer s3cret")],
    );
    assert_eq!(r.status, 200, "{}", r.describe());
}

/// C54 in a real browser: Chromium crawls through the proxy with its own
/// local-network protection turned off (so that its blocking cannot pass
/// the test for us). The crawled page's `fetch` reaches the admin endpoint
/// and is refused; the same `fetch` from the proxy's own status page
/// purges.
#[test]
fn c54_a_crawled_page_cannot_purge_the_cache_in_a_real_browser() {
    let (origin, proxy) = start_with_origin("c54-browser", ROBOTS_OFF, page);
    let url = origin.url("/page");
    assert_eq!(proxy.get(&url, &[]).status, 200);
    let p = proxy.port();
    let proxy_flag = format!("--proxy-server=http://127.0.0.1:{p}");
    // Loopback pages through the proxy; the proxy's own port directly, as a
    // browser reaches a local service.
    let bypass = format!("--proxy-bypass-list=<-loopback>;127.0.0.1:{p}");
    let mut browser = Chromium::start_with(&[
        &proxy_flag,
        &bypass,
        "--disable-features=LocalNetworkAccessChecks,LocalNetworkAccessChecksWebRTC,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,BlockInsecurePrivateNetworkRequests",
    ]);
    let refused_before = proxy.metric("crawlcache_admin_refused_total");

    let evil = browser.open(&origin.url(&format!("/evil.html?{p}")), 800, 600, false);
    browser.wait_for(
        &evil,
        "document.title === 'sent' || document.title.startsWith('failed')",
        Duration::from_secs(30),
        "the crawled page's fetch ends",
    );
    assert_eq!(
        origin.requests().iter().filter(|r| r.path() == "/evil.html").count(),
        1,
        "the page came through the proxy to the origin"
    );
    assert_still_a_hit(&proxy, &url, "after the crawled page's purge");
    assert!(
        proxy.log_shows("admin: refused POST /cache/purge", Duration::from_secs(5)),
        "the page's request arrived and was refused (title {}):\n{}",
        browser.eval(&evil, "document.title"),
        proxy.stderr_tail(20)
    );
    assert!(
        proxy.metric("crawlcache_admin_refused_total") > refused_before,
        "the refusal is counted"
    );

    // The control: the same request from the proxy's own page succeeds.
    let status = browser.open(&format!("http://127.0.0.1:{p}/"), 1280, 900, false);
    browser.wait_for(
        &status,
        "document.querySelectorAll('[data-k]').length > 0",
        Duration::from_secs(30),
        "the status page loads",
    );
    let answer = browser.eval(
        &status,
        &format!("fetch('/cache/purge?url=' + encodeURIComponent('{url}'), {{method: 'POST'}}).then(r => r.status + ' ' + r.headers.get('content-type'))"),
    );
    assert_eq!(
        answer.as_str().map(|s| s.split(' ').next().unwrap_or("")),
        Some("200"),
        "the status page's own purge: {answer}"
    );
    let r = proxy.get(&url, &[]);
    assert!(!cache_status(&r).contains("hit"), "purged from the status page: {}", r.describe());
    drop(browser);
    proxy.stop_cleanly();
}
