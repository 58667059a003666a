//! End to end: a real crawler (wget) mirrors a real site (the Rust book,
//! served by nginx on loopback) through crawlcache, three times:
//! 1. cold: every file is fetched from nginx, and the mirror is byte-identical
//!    to one made without the proxy;
//! 2. warm, into a new folder: nginx sees ZERO requests, the files are the same;
//! 3. nginx stopped, crawlcache restarted with `--offline` on the same data
//!    directory: the same files again.
//!
//! Then `crawlcache cache verify` finds the store consistent.
//!
//! nginx serves the book's static files as any web server would: `ETag` and
//! `Last-Modified` (the toolchain's build date, months ago), no
//! `Cache-Control`, so run 2 relies on heuristic freshness (RFC 9111 §4.2.2).

mod common;

use common::*;
use std::time::Duration;

/// Bound of one wget crawl (175 files, ~8 MB, on loopback: seconds).
const CRAWL_LIMIT: Duration = Duration::from_secs(300);

#[test]
fn rust_book_crawl_is_served_from_cache_then_offline_byte_identical() {
    let html = rust_docs_html_dir();
    let work = TestDir::new("crawl-e2e");
    let data_dir = work.subdir("data");
    let mut nginx = Nginx::start(&html);
    let start_url = nginx.url("/book/");

    // 0. Ground truth: the same crawl without the proxy.
    let direct =
        wget_mirror(&start_url, None, &work.join("direct"), CRAWL_LIMIT, "direct, no proxy");
    let expected = read_tree(&direct.out_dir);
    assert!(
        (150..=400).contains(&expected.len()),
        "a recursive wget of the Rust book should fetch about 175 files, got {}",
        expected.len()
    );
    let after_direct = nginx.settled_access_log_lines().len();

    // 1. Cold, through the proxy.
    let proxy = Proxy::start(&data_dir, &[]);
    let run1 = wget_mirror(
        &start_url,
        Some(&proxy.url()),
        &work.join("run1"),
        CRAWL_LIMIT,
        "run 1, cold cache",
    );
    assert_trees_equal(
        &expected,
        &read_tree(&run1.out_dir),
        "run 1 (through crawlcache, cold) vs direct",
    );
    let statuses = run1.cache_statuses();
    assert_eq!(
        statuses.len(),
        run1.response_count(),
        "every response through crawlcache carries Cache-Status (RFC 9211); wget log tail:\n{}",
        tail(&run1.log, 30)
    );
    let after_run1 = nginx.settled_access_log_lines().len();
    assert!(
        after_run1 - after_direct >= expected.len(),
        "a cold crawl through crawlcache fetches every file from nginx: {} files but only {} nginx requests",
        expected.len(),
        after_run1 - after_direct
    );

    // 2. Warm, into a new folder: nothing reaches nginx.
    let run2 = wget_mirror(
        &start_url,
        Some(&proxy.url()),
        &work.join("run2"),
        CRAWL_LIMIT,
        "run 2, warm cache",
    );
    let lines = nginx.settled_access_log_lines();
    assert_eq!(
        lines.len(),
        after_run1,
        "a warm re-crawl must not reach the origin, but nginx logged {} more requests:\n{}",
        lines.len().saturating_sub(after_run1),
        lines[after_run1.min(lines.len())..]
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_trees_equal(&expected, &read_tree(&run2.out_dir), "run 2 (warm cache) vs direct");
    let not_hits: Vec<String> =
        run2.cache_statuses().into_iter().filter(|s| !s.contains("hit")).collect();
    assert!(
        not_hits.is_empty(),
        "every response of the warm crawl is a cache hit; these are not: {not_hits:?}"
    );
    assert_eq!(
        run2.cache_statuses().len(),
        run2.response_count(),
        "every warm response carries Cache-Status"
    );

    // 3. Origin gone, proxy restarted offline on the same store.
    nginx.stop();
    let offline = proxy.restart(&["--offline"]);
    let run3 = wget_mirror(
        &start_url,
        Some(&offline.url()),
        &work.join("run3"),
        CRAWL_LIMIT,
        "run 3, offline",
    );
    assert_trees_equal(
        &expected,
        &read_tree(&run3.out_dir),
        "run 3 (offline, restarted, nginx stopped) vs direct",
    );
    offline.stop_cleanly();

    assert_cache_verifies(&data_dir);

    eprintln!(
        "crawl of {} files: direct {:?}, cold {:?}, warm {:?}, offline {:?}",
        expected.len(),
        direct.elapsed,
        run1.elapsed,
        run2.elapsed,
        run3.elapsed
    );
}
