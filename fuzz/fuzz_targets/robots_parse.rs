//! Fuzzes `RobotsTxt::parse` (and a few checks on the result) with arbitrary
//! bytes: it must never panic, whatever the input.
//!
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run robots_parse` from the crate root;
//! seed `fuzz/corpus/robots_parse/` with the robots corpus kept in the
//! repository: `mkdir -p fuzz/corpus/robots_parse && tar -xzf
//! testdata/robots/corpus.tar.gz --strip-components=2 -C
//! fuzz/corpus/robots_parse corpus/files`.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The engine crate without its `runtime` feature: the parser and matcher
// without tokio, sled or the proxy.
use crawlcache_robots::RobotsTxt;

const URLS: [&str; 8] = [
    "",
    "/",
    "http://example.com/a/b?c=d#e",
    "https://example.com/d/index.html",
    "//x/caf%C3%A9",
    "example.com?q",
    "/robots.txt",
    "/wp-admin/admin-ajax.php",
];

fuzz_target!(|data: &[u8]| {
    let robots = RobotsTxt::parse(data);

    // Invariants of the per-line report.
    for (i, report) in robots.line_reports().iter().enumerate() {
        assert_eq!(report.line as usize, i + 1);
    }

    // Matching on the parsed rules, for the agents the file names and a
    // fallback one, with fixed URLs and with the body's last line as a URL.
    let last_line = data.rsplit(|&b| b == b'\n').next().unwrap_or_default();
    let fuzzed_url = String::from_utf8_lossy(last_line);
    for agent in ["googlebot", "FooBot", "", "*"] {
        for url in URLS.iter().copied().chain([fuzzed_url.as_ref()]) {
            let v = robots.check(agent, url);
            assert_eq!(v.allowed, robots.is_allowed(agent, url));
            assert_eq!(v.rule.is_some(), v.line.is_some());
        }
        let _ = robots.crawl_delay(agent);
    }
    let _ = robots.sitemaps().len();
});
