//! Honest metrics and the access log: a response that contacted the origin
//! is never counted as a hit.

use super::*;

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("metric {name} missing from:\n{text}"))
}

#[test]
fn a_miss_a_304_revalidation_and_a_stale_if_error_count_in_their_own_classes() {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let (origin, proxy) = start("[server]\naccess_log = \"info\"\n", move |r: &RecordedRequest| {
        match calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => Reply::ok(&[("Cache-Control", "max-age=0, stale-if-error=600"), ("ETag", "\"v1\"")], b"one"),
            1 if r.header("if-none-match") == Some("\"v1\"") => Reply::not_modified(&[("Cache-Control", "max-age=0, stale-if-error=600"), ("ETag", "\"v1\"")]),
            _ => Reply::new(503, &[], b"down"),
        }
    });
    let url = origin.url("/m");
    let miss = proxy.get(&url, &[]);
    assert_eq!((miss.status, miss.text()), (200, "one".to_string()));
    let revalidated = proxy.get(&url, &[]);
    assert!(revalidated.cache_status().unwrap_or_default().contains("fwd-status=304"), "{}", revalidated.describe());
    let stale = proxy.get(&url, &[]);
    assert_eq!((stale.status, stale.text()), (200, "one".to_string()), "{}", stale.describe());
    assert!(stale.cache_status().unwrap_or_default().contains("detail=stale-if-error"), "{}", stale.describe());

    let m = proxy.admin("/metrics").text();
    assert_eq!(metric(&m, "crawlcache_hits_total"), 0, "nothing was served without contacting the origin");
    assert_eq!(metric(&m, "crawlcache_misses_total"), 1);
    assert_eq!(metric(&m, "crawlcache_revalidated_total"), 1);
    assert_eq!(metric(&m, "crawlcache_stale_served_total"), 1);
    for line in m.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        assert!(line.starts_with("crawlcache_"), "every metric carries the crawlcache_ prefix: {line}");
    }

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let access = loop {
        let lines: Vec<String> = proxy.stderr().lines().filter(|l| l.contains("crawlcache::access")).map(str::to_string).collect();
        if lines.len() >= 3 || std::time::Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(access.len(), 3, "one access-log line per request: {access:#?}");
    for (line, outcome) in access.iter().zip(["miss", "revalidated", "stale"]) {
        assert!(line.contains(&format!("GET {url} 200 {outcome} ")), "{line}");
    }
}

/// A burst of client connections (a crawler opening its pool) is spread
/// over the serving threads, whichever thread accepted them: with two
/// threads, eight connections opened at once are served four and four
/// (`crawlcache_client_connections{thread}`), not all by one thread while
/// the other idles.
#[test]
fn a_burst_of_connections_is_spread_over_the_serving_threads() {
    let (origin, proxy) = start("[server]\nthreads = 2\n", |_r: &RecordedRequest| Reply::ok(&[("Cache-Control", "max-age=60")], b"page"));
    let url = origin.url("/p");
    let mut conns: Vec<Conn> = (0..8).map(|_| Conn::open(proxy.addr())).collect();
    for c in conns.iter_mut() {
        assert_eq!(c.send("GET", &url, &[], b"").status, 200);
    }
    let m = proxy.admin("/metrics").text();
    let per_thread: Vec<u64> = (0..2).map(|t| metric(&m, &format!("crawlcache_client_connections{{thread=\"{t}\"}}"))).collect();
    // The eight kept-alive connections, and perhaps the one asking.
    assert!(per_thread.iter().sum::<u64>() >= 8, "{per_thread:?}");
    assert!(per_thread.iter().all(|&n| n >= 4), "each thread serves its share: {per_thread:?}");
    drop(conns);
}
