//! The status page (issue 32), in a real browser: a proxy serves a small
//! crawl (misses, hits, a revalidation, an origin's 500, an origin that
//! cannot be reached, two origins), then headless Chromium loads
//! `http://127.0.0.1:PORT/`, waits for the page's script to draw the
//! charts, and the figures on the page are checked against `/stats`;
//! screenshots at a phone's width and a desktop's are saved under
//! `target/status-page/`. Also: who may see the page.
//!
//! Chromium comes from Debian (`chromium`, installed by tests/run.sh) and
//! is driven over the DevTools protocol on pipes (tests/common/browser.rs).

mod common;

use common::browser::{target_dir, Chromium};
use common::*;
use serde_json::Value;
use std::time::{Duration, Instant};

const PAGE_BYTES: usize = 3000;

fn site(req: &RecordedRequest) -> Reply {
    match req.path() {
        "/robots.txt" => Reply::ok(&[("Content-Type", "text/plain")], b"User-agent: *\nCrawl-delay: 2\nDisallow: /private\n"),
        "/reval" => {
            if req.header("if-none-match") == Some("\"v1\"") {
                Reply::not_modified(&[("ETag", "\"v1\""), ("Cache-Control", "no-cache")])
            } else {
                Reply::ok(&[("ETag", "\"v1\""), ("Cache-Control", "no-cache"), ("Content-Type", "text/plain")], b"validated body")
            }
        }
        "/boom" => Reply::new(500, &[("Content-Type", "text/plain")], b"the origin broke"),
        p if p.starts_with("/page/") => {
            let body = format!("<html>{p} </html>").repeat(PAGE_BYTES / 16 + 1);
            Reply::ok(&[("Cache-Control", "max-age=600"), ("Content-Type", "text/html")], &body.as_bytes()[..PAGE_BYTES])
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
    sent
}

/// Every value element of the page: (data-k, data-value, text).
fn page_values(browser: &mut Chromium, page: &common::browser::Page) -> Vec<(String, String, String)> {
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
    let st = wait_stats(&proxy, "the history has sampled the crawl", |s| s["recent"]["1m"]["counts"]["requests"].as_u64() == Some(sent));
    let p = &st["proxy"];
    assert_eq!(p["requests"].as_u64(), Some(sent), "{st}");
    assert_eq!((p["hits"].as_u64(), p["revalidated"].as_u64(), p["misses"].as_u64(), p["refused"].as_u64()), (Some(8), Some(1), Some(11), Some(1)), "{st}");

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
    let raw = |k: &str| -> String { values.iter().find(|(key, _, _)| key == k).unwrap_or_else(|| panic!("no {k} on the page: {values:?}")).1.clone() };
    let text = |k: &str| -> String { values.iter().find(|(key, _, _)| key == k).map(|v| v.2.clone()).unwrap_or_default() };
    let pairs = [
        ("totals.requests", &st["proxy"]["requests"]),
        ("totals.hits", &st["proxy"]["hits"]),
        ("totals.revalidated", &st["proxy"]["revalidated"]),
        ("totals.stale", &st["proxy"]["stale_served"]),
        ("totals.misses", &st["proxy"]["misses"]),
        ("totals.passthrough", &st["proxy"]["passthrough"]),
        ("totals.refused", &st["proxy"]["refused"]),
        ("totals.bytes_from_cache", &st["proxy"]["from_cache_bytes"]),
        ("totals.bytes_from_origin", &st["proxy"]["from_origin_bytes"]),
        ("store.used_bytes", &st["store"]["bytes_stored"]),
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
        assert!((on_page - stats_share).abs() < 1e-9, "{share}: page {on_page}, /stats {stats_share}");
    }
    let hit_share: f64 = raw("windows.1m.hit_ratio").parse().unwrap();
    assert!((hit_share - 8.0 / sent as f64).abs() < 1e-9, "hit share {hit_share}");
    assert_eq!(text("windows.1m.hit_ratio"), format!("{:.1} %", 800.0 / sent as f64));
    // The bar is drawn to that share.
    let width = browser.eval(&desktop, "Number(document.querySelector('#bar-1m rect.hit').getAttribute('width'))").as_f64().unwrap();
    assert!((width - hit_share * 100.0).abs() < 0.01, "the hit bar is {width} of 100");

    // Top origins, with their robots.txt state and Crawl-delay.
    let rows = browser
        .eval(&desktop, "JSON.stringify(Array.from(document.querySelectorAll('#origins-rows tr')).map(tr => Array.from(tr.cells).map(td => td.textContent)))");
    let rows: Vec<Vec<String>> = serde_json::from_str(rows.as_str().unwrap()).unwrap();
    let main = format!("http://127.0.0.1:{}", origin.port());
    assert_eq!(rows[0][0], main, "the origin with the most requests comes first: {rows:?}");
    assert_eq!(rows[0][1], (sent - 2).to_string(), "{rows:?}");
    assert_eq!((rows[0][2].as_str(), rows[0][4].as_str()), ("fresh", "2 s"), "{rows:?}");
    let dead_origin = dead.trim_end_matches("/x");
    let dead_row = rows.iter().find(|r| r[0] == dead_origin).unwrap_or_else(|| panic!("{dead_origin} in {rows:?}"));
    assert!(dead_row[2].starts_with("back-off"), "an origin whose robots.txt cannot be fetched is in back-off: {dead_row:?}");
    assert!(rows.iter().any(|r| r[0] == format!("http://localhost:{}", origin.port()) && r[1] == "1"), "{rows:?}");

    // Recent errors: the origin's 500 and the 502 for the dead origin.
    let errors = browser.eval(&desktop, "document.getElementById('errors-list').textContent").as_str().unwrap_or_default().to_string();
    assert!(errors.contains("500") && errors.contains(&origin.url("/boom")), "{errors}");
    assert!(errors.contains("502") && errors.contains(&dead), "{errors}");

    // Screenshots: a desktop's width and a phone's.
    let shots = target_dir().join("status-page");
    browser.screenshot(&desktop, 1280, false, &shots.join("status-desktop-1280.png"));
    let phone = browser.open(&url, 390, 844, true);
    browser.wait_for(&phone, rendered, Duration::from_secs(30), "the charts render on a phone");
    let overflow = browser.eval(&phone, "document.documentElement.scrollWidth - window.innerWidth").as_i64().unwrap();
    assert!(overflow <= 0, "readable on a phone: the page is {overflow} px wider than the 390 px window");
    browser.screenshot(&phone, 390, true, &shots.join("status-phone-390.png"));
    drop(browser);
    proxy.stop_cleanly();
}

#[test]
fn with_an_admin_token_a_browser_is_asked_for_it() {
    let dir = TestDir::new("status-token");
    let proxy =
        Proxy::start_on([127, 0, 0, 1].into(), &dir.subdir("data"), "[server]\nadmin_token = \"s3cret\"\n", &[("Authorization", "Bearer s3cret")]).owning(dir);
    let r = send_request(proxy.addr(), "GET", "/", &[], b"");
    assert_eq!(r.status, 401, "{}", r.describe());
    assert!(r.header("www-authenticate").is_some_and(|v| v.starts_with("Basic ")), "{}", r.describe());
    let basic = format!("Basic {}", data_encoding::BASE64.encode(b"anyone:s3cret"));
    let r = send_request(proxy.addr(), "GET", "/", &[("Authorization", &basic)], b"");
    assert_eq!(r.status, 200, "{}", r.describe());
    assert!(r.header("content-type").is_some_and(|v| v.starts_with("text/html")), "{}", r.describe());
    assert!(r.header("content-security-policy").is_some_and(|v| v.contains("default-src 'none'")), "{}", r.describe());
    assert!(r.text().contains("<script src=\"/status.js\">"), "{}", r.text());
    let r = send_request(proxy.addr(), "GET", "/status.json", &[("Authorization", "Bearer s3cret")], b"");
    assert_eq!(r.status, 200, "{}", r.describe());
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(v["totals"]["requests"].is_u64() && v["windows"].is_object(), "{v}");
    let wrong = format!("Basic {}", data_encoding::BASE64.encode(b"anyone:guess"));
    assert_eq!(send_request(proxy.addr(), "GET", "/status", &[("Authorization", &wrong)], b"").status, 401);
    // Other admin endpoints keep answering 403 without the token.
    assert_eq!(send_request(proxy.addr(), "GET", "/metrics", &[], b"").status, 403);
    for asset in ["/status.js", "/status.css"] {
        let r = send_request(proxy.addr(), "GET", asset, &[("Authorization", &basic)], b"");
        assert_eq!(r.status, 200, "{asset}: {}", r.describe());
    }
}
