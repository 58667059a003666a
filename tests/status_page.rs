//! The status page (issues 32 and 46), in a real browser: a proxy serves a
//! small crawl (misses, hits, a revalidation, an origin's 500, an origin
//! that cannot be reached, `only-if-cached` misses,
//! two origins), then headless Chromium loads `http://127.0.0.1:PORT/`,
//! waits for the page's script to draw the charts, and the figures on the
//! page are checked against `/stats` and `/metrics`, errors apart from
//! refusals; no element is wider than its box at 1280 and 390 px. The
//! cache browser is searched and an entry opened the same way, with
//! hostile URLs and fields in the store. Screenshots go under
//! `target/status-page/`, and into `docs/` with `CRAWLCACHE_SCREENSHOTS=docs`
//! (how the PNGs in docs/ are made). Also: who may see the pages.
//!
//! Chromium comes from Debian (`chromium`, installed by tests/run.sh) and
//! is driven over the DevTools protocol on pipes (tests/common/browser.rs).

mod common;

use common::browser::{target_dir, Chromium};
use common::*;
use serde_json::Value;
use sha2::Digest;
use std::time::{Duration, Instant};

const PAGE_BYTES: usize = 3000;

fn site(req: &RecordedRequest) -> Reply {
    match req.path() {
        "/robots.txt" => Reply::ok(
            &[("Content-Type", "text/plain")],
            b"User-agent: *\nCrawl-delay: 2\nDisallow: /private\n",
        ),
        "/reval" => {
            if req.header("if-none-match") == Some("\"v1\"") {
                Reply::not_modified(&[("ETag", "\"v1\""), ("Cache-Control", "no-cache")])
            } else {
                Reply::ok(
                    &[
                        ("ETag", "\"v1\""),
                        ("Cache-Control", "no-cache"),
                        ("Content-Type", "text/plain"),
                    ],
                    b"validated body",
                )
            }
        }
        "/boom" => Reply::new(500, &[("Content-Type", "text/plain")], b"the origin broke"),
        "/hostile" => Reply::ok(
            &[
                ("Cache-Control", "max-age=600"),
                ("ETag", "\"<script>alert('etag')</script>\""),
                ("X-Note", "<img src=x onerror=alert(1)> \"quoted\" 'single'"),
            ],
            b"<script>alert(1)</script>",
        ),
        p if p.starts_with("/page/") => {
            let body = format!("<html>{p} </html>").repeat(PAGE_BYTES / 16 + 1);
            Reply::ok(
                &[("Cache-Control", "max-age=600"), ("Content-Type", "text/html")],
                &body.as_bytes()[..PAGE_BYTES],
            )
        }
        _ => Reply::new(404, &[], b"no"),
    }
}

fn stats(proxy: &Proxy) -> Value {
    let r = proxy.admin("/stats");
    assert_eq!(r.status, 200, "{}", r.describe());
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("/stats is not JSON: {e}"))
}

/// Waits (bounded) until `f` holds for `/stats`.
fn wait_stats(proxy: &Proxy, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let s = stats(proxy);
        if f(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what} within 15 s; /stats: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The crawl: eight pages twice (the second round once they are stored),
/// a revalidated page, an origin's 500, a page of another origin
/// (`localhost`) and an origin nothing listens on. Returns the number of
/// requests sent.
fn crawl(proxy: &Proxy, origin: &Origin, dead: &str) -> u64 {
    let mut sent = 0;
    let mut get = |url: &str, want: u16| {
        let r = proxy.get(url, &[("User-Agent", "StatusBot/1.0")]);
        assert_eq!(r.status, want, "{url}: {}", r.describe());
        sent += 1;
    };
    for i in 0..8 {
        get(&origin.url(&format!("/page/{i}")), 200);
    }
    get(&origin.url("/reval"), 200);
    wait_stats(proxy, "the pages are stored", |s| s["store"]["entries"].as_u64() >= Some(9));
    for i in 0..8 {
        get(&origin.url(&format!("/page/{i}")), 200);
    }
    get(&origin.url("/reval"), 200);
    get(&origin.url("/boom"), 500);
    get(&format!("http://localhost:{}/page/0", origin.port()), 200);
    get(dead, 502);
    // Two refusals: only-if-cached with nothing stored (RFC 9111 section
    // 5.2.1.7), a 504 that is not an error.
    for path in ["/never-stored", "/private/x"] {
        let r = proxy.get(
            &origin.url(path),
            &[("User-Agent", "StatusBot/1.0"), ("Cache-Control", "only-if-cached")],
        );
        assert_eq!(r.status, 504, "{}", r.describe());
    }
    sent + 2
}

/// The value of the `/metrics` sample `series` (name and labels as
/// written), if there is one.
fn metric(proxy: &Proxy, series: &str) -> Option<u64> {
    let text = proxy.admin("/metrics").text();
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// The elements of `page` wider than their box (`scrollWidth >
/// clientWidth`): each as `tag#id.class scrollWidth>clientWidth`.
fn overflowing(browser: &mut Chromium, page: &common::browser::Page) -> Vec<String> {
    let v = browser.eval(
        page,
        "JSON.stringify(Array.from(document.querySelectorAll('*')).filter(e => !(e instanceof SVGElement) && !['INPUT', 'SELECT', 'TEXTAREA'].includes(e.tagName) && e.clientWidth > 0 \
            && e.scrollWidth > e.clientWidth).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + e.scrollWidth + '>' + e.clientWidth) \
            .concat(document.documentElement.scrollWidth > window.innerWidth ? ['document ' + document.documentElement.scrollWidth] : []))",
    );
    serde_json::from_str(v.as_str().expect("a JSON string")).expect("a list")
}

/// Where the screenshots go: `docs/` when `CRAWLCACHE_SCREENSHOTS=docs`
/// (the PNGs kept as illustrations), else `target/status-page/`.
fn shots_dir() -> std::path::PathBuf {
    match std::env::var("CRAWLCACHE_SCREENSHOTS").as_deref() {
        Ok("docs") => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs"),
        _ => target_dir().join("status-page"),
    }
}

/// Every value element of the page: (data-k, data-value, text).
fn page_values(
    browser: &mut Chromium,
    page: &common::browser::Page,
) -> Vec<(String, String, String)> {
    let v = browser.eval(page, "JSON.stringify(Array.from(document.querySelectorAll('[data-k]')).map(e => [e.dataset.k, e.dataset.value, e.textContent]))");
    serde_json::from_str(v.as_str().expect("a JSON string")).expect("the values as JSON")
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn the_status_page_shows_what_stats_says_after_a_crawl_in_a_real_browser() {
    let dead = format!("http://127.0.0.1:{}/x", free_port());
    let (origin, proxy) = start_with_origin("status-page", "[server]\nthreads = 2\n", site);
    let sent = crawl(&proxy, &origin, &dead);
    // The once-a-second history has seen every request.
    let st = wait_stats(&proxy, "the history has sampled the crawl", |s| {
        s["recent"]["1m"]["counts"]["requests"].as_u64() == Some(sent)
    });
    let p = &st["proxy"];
    assert_eq!(p["requests"].as_u64(), Some(sent), "{st}");
    assert_eq!(
        (p["hits"].as_u64(), p["revalidated"].as_u64(), p["misses"].as_u64()),
        (Some(8), Some(1), Some(11)),
        "{st}"
    );
    // Issue 46: the 502 of the origin nothing listens on is an error; the
    // only-if-cached 504s are refusals.
    assert_eq!((p["errors"].as_u64(), p["refused"].as_u64()), (Some(1), Some(2)), "{st}");
    assert_eq!(
        (metric(&proxy, "crawlcache_errors_total"), metric(&proxy, "crawlcache_refused_total")),
        (Some(1), Some(2))
    );

    let mut browser = Chromium::start();
    let url = format!("http://{}/", proxy.addr());
    let desktop = browser.open(&url, 1280, 900, false);
    let rendered = "document.documentElement.dataset.polls >= 1 \
        && document.querySelectorAll('#bar-1m rect.hit').length === 1 \
        && document.querySelectorAll('#chart-outcomes rect').length > 0 \
        && document.querySelectorAll('#chart-rps path.area').length === 1 \
        && document.querySelectorAll('#chart-bytes rect.cache').length > 0";
    browser.wait_for(&desktop, rendered, Duration::from_secs(30), "the charts render");
    assert_eq!(
        browser.eval(&desktop, "document.documentElement.dataset.error || ''"),
        Value::String(String::new()),
        "the page polls /status.json without error"
    );

    // The figures on the page against /stats, read after the page (nothing
    // else runs: admin requests are not counted).
    let values = page_values(&mut browser, &desktop);
    let st = stats(&proxy);
    let raw = |k: &str| -> String {
        values
            .iter()
            .find(|(key, _, _)| key == k)
            .unwrap_or_else(|| panic!("no {k} on the page: {values:?}"))
            .1
            .clone()
    };
    let text = |k: &str| -> String {
        values.iter().find(|(key, _, _)| key == k).map(|v| v.2.clone()).unwrap_or_default()
    };
    let pairs = [
        ("totals.requests", &st["proxy"]["requests"]),
        ("totals.hits", &st["proxy"]["hits"]),
        ("totals.revalidated", &st["proxy"]["revalidated"]),
        ("totals.stale", &st["proxy"]["stale_served"]),
        ("totals.misses", &st["proxy"]["misses"]),
        ("totals.passthrough", &st["proxy"]["passthrough"]),
        ("totals.refused", &st["proxy"]["refused"]),
        ("totals.errors", &st["proxy"]["errors"]),
        ("totals.bytes_from_cache", &st["proxy"]["from_cache_bytes"]),
        ("totals.bytes_from_origin", &st["proxy"]["from_origin_bytes"]),
        ("store.used_bytes", &st["store"]["budget_bytes"]),
        ("store.max_bytes", &st["store"]["max_size"]),
        ("store.distinct_body_bytes", &st["store"]["bytes_stored"]),
        ("store.entries", &st["store"]["entries"]),
        ("store.bodies", &st["store"]["bodies"]),
        ("connections.max", &st["connections"]["max"]),
        ("connections.refused", &st["proxy"]["overload_refused"]),
    ];
    for (k, want) in pairs {
        let want = want.as_u64().unwrap_or_else(|| panic!("/stats has no number for {k}: {st}"));
        assert_eq!(raw(k), want.to_string(), "{k} on the page");
    }
    for k in ["totals.requests", "totals.hits", "totals.misses", "store.entries"] {
        let n: u64 = raw(k).parse().unwrap();
        assert_eq!(text(k), thousands(n), "{k} is written as a count");
    }
    assert!(text("store.max_bytes").ends_with("GiB"), "{}", text("store.max_bytes"));
    assert!(st["proxy"]["from_cache_bytes"].as_u64() >= Some(8 * PAGE_BYTES as u64), "{st}");
    assert!(st["proxy"]["from_origin_bytes"].as_u64() >= Some(9 * PAGE_BYTES as u64), "{st}");
    // The one-minute shares: what /stats says, and hits over requests.
    for share in ["hit_ratio", "revalidated_ratio", "stale_ratio", "miss_ratio"] {
        let on_page: f64 = raw(&format!("windows.1m.{share}")).parse().unwrap();
        let stats_share = st["recent"]["1m"][share].as_f64().unwrap();
        assert!(
            (on_page - stats_share).abs() < 1e-9,
            "{share}: page {on_page}, /stats {stats_share}"
        );
    }
    let hit_share: f64 = raw("windows.1m.hit_ratio").parse().unwrap();
    assert!((hit_share - 8.0 / sent as f64).abs() < 1e-9, "hit share {hit_share}");
    assert_eq!(text("windows.1m.hit_ratio"), format!("{:.1} %", 800.0 / sent as f64));
    // The bar is drawn to that share.
    let width = browser
        .eval(&desktop, "Number(document.querySelector('#bar-1m rect.hit').getAttribute('width'))")
        .as_f64()
        .unwrap();
    assert!((width - hit_share * 100.0).abs() < 0.01, "the hit bar is {width} of 100");

    // Origins: requests, hit ratio, bytes saved, robots.txt state,
    // Crawl-delay and last error, equal to /stats and /metrics.
    let rows = browser.eval(
        &desktop,
        "JSON.stringify(Array.from(document.querySelectorAll('#origins-rows tr')).map(tr => Array.from(tr.cells).map(td => { const v = td.querySelector('[data-value]'); return v ? v.dataset.value : td.textContent; })))",
    );
    let rows: Vec<Vec<String>> = serde_json::from_str(rows.as_str().unwrap()).unwrap();
    let main = format!("http://127.0.0.1:{}", origin.port());
    assert_eq!(rows[0][0], main, "the origin with the most requests comes first: {rows:?}");
    let top = &st["origins"]["top"][0];
    assert_eq!(top["origin"], main.as_str(), "{st}");
    assert_eq!(rows[0][1], (sent - 2).to_string(), "{rows:?}");
    assert_eq!(rows[0][1], top["requests"].to_string(), "requests as /stats says");
    assert_eq!(rows[0][2], top["hit_ratio"].to_string(), "hit ratio as /stats says");
    assert!(
        (top["hit_ratio"].as_f64().unwrap() - 9.0 / (sent - 2) as f64).abs() < 1e-9,
        "8 hits and a revalidation: {top}"
    );
    assert_eq!(rows[0][3], top["bytes_from_cache"].to_string(), "bytes saved as /stats says");
    assert_eq!(
        top["bytes_from_cache"], st["proxy"]["from_cache_bytes"],
        "every byte from the cache was this origin's"
    );
    for (family, field) in [
        ("crawlcache_origin_requests_total", "requests"),
        ("crawlcache_origin_from_store_total", "from_store"),
        ("crawlcache_origin_from_cache_bytes_total", "bytes_from_cache"),
        ("crawlcache_origin_errors_total", "errors"),
    ] {
        assert_eq!(
            metric(&proxy, &format!("{family}{{origin=\"{main}\"}}")),
            top[field].as_u64(),
            "{family} as /stats says"
        );
    }
    assert!(rows[0][4].starts_with("fresh") && rows[0][5] == "2 s", "{rows:?}");
    assert!(rows[0][6].starts_with("500 at "), "the origin's 500 is its last error: {rows:?}");
    let dead_origin = dead.trim_end_matches("/x");
    let dead_row = rows
        .iter()
        .find(|r| r[0] == dead_origin)
        .unwrap_or_else(|| panic!("{dead_origin} in {rows:?}"));
    assert!(
        dead_row[4].starts_with("back-off"),
        "an origin whose robots.txt cannot be fetched is in back-off: {dead_row:?}"
    );
    assert!(dead_row[6].starts_with("502 at "), "{dead_row:?}");
    assert!(
        rows.iter().any(|r| r[0] == format!("http://localhost:{}", origin.port()) && r[1] == "1"),
        "{rows:?}"
    );

    // Recent errors: the origin's 500 and the 502 for the dead origin; not
    // the refusals.
    let errors = browser
        .eval(&desktop, "document.getElementById('errors-list').textContent")
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(errors.contains("500") && errors.contains(&origin.url("/boom")), "{errors}");
    assert!(errors.contains("502") && errors.contains(&dead), "{errors}");
    assert!(
        !errors.contains("/never-stored") && !errors.contains("/private/x"),
        "refusals are not errors: {errors}"
    );
    assert_eq!(
        overflowing(&mut browser, &desktop),
        Vec::<String>::new(),
        "nothing wider than its box at 1280 px"
    );

    // Screenshots: a desktop's width and a phone's.
    let shots = shots_dir();
    browser.screenshot_at_most(&desktop, 1280, false, 1400, &shots.join("status-page-1280.png"));
    let phone = browser.open(&url, 390, 844, true);
    browser.wait_for(&phone, rendered, Duration::from_secs(30), "the charts render on a phone");
    let overflow = browser
        .eval(&phone, "document.documentElement.scrollWidth - window.innerWidth")
        .as_i64()
        .unwrap();
    assert!(
        overflow <= 0,
        "readable on a phone: the page is {overflow} px wider than the 390 px window"
    );
    assert_eq!(
        overflowing(&mut browser, &phone),
        Vec::<String>::new(),
        "nothing wider than its box at 390 px"
    );
    browser.screenshot_at_most(&phone, 390, true, 2400, &shots.join("status-page-390.png"));
    drop(browser);
    proxy.stop_cleanly();
}

/// A host name of 160 characters (three labels), as a crawl meets them.
fn long_host(i: usize) -> String {
    format!(
        "{}.{}.h{i}.test",
        "a-very-long-label-of-a-hostile-origin-name-".to_string() + &"x".repeat(18),
        "another-quite-long-label-in-the-same-host-name-0123456789"
    )
}

/// The URLs of the entries table of a browser page.
fn listed(browser: &mut Chromium, page: &common::browser::Page) -> Vec<String> {
    let v = browser.eval(page, "JSON.stringify(Array.from(document.querySelectorAll('#entries td.url')).map(td => td.textContent))");
    serde_json::from_str(v.as_str().unwrap()).unwrap()
}

/// Opens `path` of the proxy in `browser` and waits until it has loaded.
fn open_loaded(
    browser: &mut Chromium,
    proxy: &Proxy,
    path: &str,
    width: u32,
    mobile: bool,
) -> common::browser::Page {
    let page = browser.open(&format!("http://{}{path}", proxy.addr()), width, 900, mobile);
    browser.wait_for(
        &page,
        "document.readyState === 'complete' && !!document.querySelector('main')",
        Duration::from_secs(30),
        path,
    );
    page
}

/// Issue 46: the cache browser pages through a search by host or prefix
/// (50 entries a page, each page a key-range scan after the previous one),
/// opens an entry (fields, freshness, validators, body digest, robots.txt
/// verdict, audit line) and purges it from the page; URLs, hosts and fields
/// that hold markup are shown as text, and nothing is wider than its box
/// at 1280 and 390 px, on the browser's pages and on the status page with
/// long host names in its origins table.
#[test]
fn the_cache_browser_searches_pages_and_purges_with_hostile_text_shown_as_text() {
    let dir = TestDir::new("cache-browser");
    let data = dir.subdir("data");
    common::bulk_store::fill_store(&data, &["many.test", "other.test"], 120);
    let evil = "http://evil.test/<script>alert(1)</script>\"'/?q=<b>bold</b>";
    let long_url = format!("http://{}/{}", long_host(0), "segment-".repeat(30));
    {
        let store = crawlcache_store::Store::open(&data, 1 << 30).unwrap();
        let head = |url: &str| {
            crawlcache_policy::cache::StoredResponse {
                status: 200,
                headers: vec![("x-evil".into(), b"<script>alert(2)</script>".to_vec())],
                request_time_ms: 0,
                response_time_ms: 0,
                url: url.into(),
                vary_request: vec![],
            }
            .to_bytes()
        };
        for url in [evil, long_url.as_str()] {
            store.insert(url, b"", &head(url), None).unwrap();
        }
        store.flush().unwrap();
    }
    let origin = Origin::start(site);
    let proxy = Proxy::start_with_config(&data, "", &[]).owning(dir);
    let hostile = origin.url("/hostile");
    assert_eq!(proxy.get(&hostile, &[("User-Agent", "StatusBot/1.0")]).status, 200);
    // Long host names nothing answers for: rows of the origins table.
    for i in 0..3 {
        let _ = proxy.get(&format!("http://{}/{}", long_host(i), "p".repeat(120)), &[]);
    }
    wait_stats(&proxy, "the hostile page is stored", |s| {
        s["store"]["entries"].as_u64() >= Some(243)
    });
    let mut browser = Chromium::start();

    // By host, a page at a time: 120 entries in three pages.
    let mut page =
        open_loaded(&mut browser, &proxy, "/cache/browse?q=many.test&by=host", 1280, false);
    let mut seen = Vec::new();
    for want in [50, 50, 20] {
        let urls = listed(&mut browser, &page);
        assert_eq!(urls.len(), want, "{urls:?}");
        assert!(urls.iter().all(|u| u.starts_with("http://many.test/page/")), "{urls:?}");
        seen.extend(urls);
        let next = browser.eval(&page, "document.getElementById('next') ? document.getElementById('next').getAttribute('href') : ''");
        match next.as_str().unwrap_or("") {
            "" => break,
            n => page = open_loaded(&mut browser, &proxy, n, 1280, false),
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 120, "every entry of the host once");
    // By prefix.
    let page = open_loaded(
        &mut browser,
        &proxy,
        "/cache/browse?q=http%3A%2F%2Fother.test%2Fpage%2F1&by=prefix",
        1280,
        false,
    );
    assert_eq!(listed(&mut browser, &page).len(), 31, "page/1, page/10-19, page/100-119");
    // Markup in a stored URL is text.
    let page = open_loaded(&mut browser, &proxy, "/cache/browse?host=evil.test", 1280, false);
    assert_eq!(listed(&mut browser, &page), vec![evil.to_string()]);
    assert_eq!(
        browser.eval(&page, "document.querySelectorAll('main script, main b').length"),
        Value::from(0)
    );
    assert_eq!(
        overflowing(&mut browser, &page),
        Vec::<String>::new(),
        "nothing wider than its box at 1280 px"
    );
    for path in [
        "/cache/browse?host=many.test".to_string(),
        format!("/cache/browse?host={}", long_host(0)),
        "/cache/browse?host=evil.test".into(),
        "/".into(),
    ] {
        let phone = open_loaded(&mut browser, &proxy, &path, 390, true);
        assert_eq!(
            overflowing(&mut browser, &phone),
            Vec::<String>::new(),
            "{path}: nothing wider than its box at 390 px"
        );
        let wide = open_loaded(&mut browser, &proxy, &path, 1280, false);
        assert_eq!(
            overflowing(&mut browser, &wide),
            Vec::<String>::new(),
            "{path}: nothing wider than its box at 1280 px"
        );
    }
    let shots = shots_dir();
    let list = open_loaded(&mut browser, &proxy, "/cache/browse?host=many.test", 1280, false);
    browser.screenshot_at_most(&list, 1280, false, 900, &shots.join("cache-browser-1280.png"));

    // An entry's page: from the search by URL.
    let entry = open_loaded(
        &mut browser,
        &proxy,
        &format!("/cache/browse?by=url&q={}", urlencode(&hostile)),
        390,
        true,
    );
    let text = browser
        .eval(&entry, "document.querySelector('main').innerText")
        .as_str()
        .unwrap_or_default()
        .to_string();
    for want in [
        "<img src=x onerror=alert(1)> \"quoted\" 'single'",
        "\"<script>alert('etag')</script>\"",
        "fresh",
        "allowed",
        "SHA-256",
        "purge this URL",
    ] {
        assert!(text.contains(want), "the entry page shows {want}:\n{text}");
    }
    let sha = format!("{:x}", sha2::Sha256::digest(b"<script>alert(1)</script>"));
    assert!(text.contains(&sha), "the body's digest:\n{text}");
    assert!(text.contains(&format!("\"url\":\"{hostile}\"")), "its audit line:\n{text}");
    assert_eq!(
        browser.eval(&entry, "document.querySelectorAll('main script, main img').length"),
        Value::from(0)
    );
    assert_eq!(overflowing(&mut browser, &entry), Vec::<String>::new(), "the entry page at 390 px");
    browser.screenshot_at_most(&entry, 390, true, 2000, &shots.join("cache-entry-390.png"));
    // Purge from the page: a POST the admin rules let through from it.
    browser.eval(&entry, "document.querySelector('form.purge button').click(), true");
    // The browser is sent back to the entry page, which says what went.
    browser.wait_for(
        &entry,
        "document.body.innerText.includes('Purged: ') && location.pathname == '/cache/entry'",
        Duration::from_secs(15),
        "the purge answers",
    );
    assert!(
        browser
            .eval(&entry, "document.body.innerText")
            .as_str()
            .unwrap_or("")
            .contains("Nothing is stored for this URL"),
        "after the purge"
    );
    let shown: Value = serde_json::from_slice(
        &proxy.admin(&format!("/cache/show?url={}", urlencode(&hostile))).body,
    )
    .unwrap();
    assert_eq!(shown["variants"], Value::Array(vec![]), "purged: {shown}");
    drop(browser);
    proxy.stop_cleanly();
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[test]
fn with_an_admin_token_a_browser_is_asked_for_it() {
    let dir = TestDir::new("status-token");
    let proxy = Proxy::start_on(
        [127, 0, 0, 1].into(),
        &dir.subdir("data"),
        "[server]\nadmin_token = \"s3cret\"\n",
        &[("Authorization", "Bearer s3cret")],
    )
    .owning(dir);
    let r = send_request(proxy.addr(), "GET", "/", &[], b"");
    assert_eq!(r.status, 401, "{}", r.describe());
    assert!(
        r.header("www-authenticate").is_some_and(|v| v.starts_with("Basic ")),
        "{}",
        r.describe()
    );
    let basic = format!("Basic {}", data_encoding::BASE64.encode(b"anyone:s3cret"));
    let r = send_request(proxy.addr(), "GET", "/", &[("Authorization", &basic)], b"");
    assert_eq!(r.status, 200, "{}", r.describe());
    assert!(
        r.header("content-type").is_some_and(|v| v.starts_with("text/html")),
        "{}",
        r.describe()
    );
    assert!(
        r.header("content-security-policy").is_some_and(|v| v.contains("default-src 'none'")),
        "{}",
        r.describe()
    );
    assert!(r.text().contains("<script src=\"/status.js\">"), "{}", r.text());
    let r = send_request(
        proxy.addr(),
        "GET",
        "/status.json",
        &[("Authorization", "Bearer s3cret")],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.describe());
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(v["totals"]["requests"].is_u64() && v["windows"].is_object(), "{v}");
    let wrong = format!("Basic {}", data_encoding::BASE64.encode(b"anyone:guess"));
    assert_eq!(
        send_request(proxy.addr(), "GET", "/status", &[("Authorization", &wrong)], b"").status,
        401
    );
    // The cache browser asks for it the same way.
    assert_eq!(send_request(proxy.addr(), "GET", "/cache/browse", &[], b"").status, 401);
    let r = send_request(
        proxy.addr(),
        "GET",
        "/cache/browse?host=a.test",
        &[("Authorization", &basic)],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.describe());
    assert!(r.text().contains("nothing on this page"), "{}", r.text());
    // Other admin endpoints keep answering 403 without the token.
    assert_eq!(send_request(proxy.addr(), "GET", "/metrics", &[], b"").status, 403);
    for asset in ["/status.js", "/status.css"] {
        let r = send_request(proxy.addr(), "GET", asset, &[("Authorization", &basic)], b"");
        assert_eq!(r.status, 200, "{asset}: {}", r.describe());
    }
}
