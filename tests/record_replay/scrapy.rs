//! The same site crawled by a Scrapy spider through `http_proxy` (issue 12,
//! must-show 1): online with `record.mode = "all"` and the `utm_*` key rule,
//! then with the origin gone and `--offline`: the same items (URL, status,
//! body SHA-256) for every response but the `no-store` page, which is the
//! only 504.

use super::common::*;
use super::{site, ALL};
use std::process::Command;
use std::time::Duration;

/// Runs `tests/data/record_spider.py` with `http_proxy` set to `proxy`;
/// returns its items as JSON lines, and its log.
fn scrapy_crawl(
    start: &str,
    form: &str,
    proxy: &str,
    out: &std::path::Path,
) -> (Vec<serde_json::Value>, String) {
    let spider =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/record_spider.py");
    let mut cmd = Command::new("python3");
    cmd.args(["-m", "scrapy", "runspider", "--nolog"])
        .arg(&spider)
        .args(["-a", &format!("start={start}"), "-a", &format!("form={form}"), "-a"])
        .arg(format!("out={}", out.display()));
    for var in ["https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "HTTP_PROXY"] {
        cmd.env_remove(var);
    }
    cmd.env("http_proxy", proxy);
    let o = run_bounded(&mut cmd, Duration::from_secs(120), "scrapy runspider");
    let log =
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(
        o.status.success(),
        "scrapy exited {:?} (is Scrapy installed? tests/run.sh installs it with pip):\n{log}",
        o.status
    );
    let text = std::fs::read_to_string(out)
        .unwrap_or_else(|e| panic!("the spider wrote no {}: {e}\n{log}", out.display()));
    let items = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    (items, log)
}

fn describe(items: &[serde_json::Value]) -> String {
    items.iter().map(|i| i.to_string()).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_scrapy_spider_replays_its_crawl_offline() {
    let dir = TestDir::new("record-scrapy");
    let data = dir.subdir("data");
    let origin = Origin::start(site);
    let (start, form) = (origin.url("/"), origin.url("/form"));
    let proxy = Proxy::start_with_config(&data, ALL, &[]);
    let (online, log) = scrapy_crawl(&start, &form, &proxy.url(), &dir.join("online.jsonl"));
    // Every page of the site, the redirect targets, the 404 and the POST.
    assert!(
        online.len() >= 10,
        "the online crawl gave {} items:\n{}\n{log}",
        online.len(),
        describe(&online)
    );
    assert!(
        online.iter().all(|i| i["status"] == 200 || i["status"] == 404),
        "{}",
        describe(&online)
    );
    assert!(
        online.iter().any(|i| i["asked"].as_str().is_some_and(|a| a.starts_with("POST "))),
        "{}",
        describe(&online)
    );
    let through_proxy = origin.requests().iter().filter(|r| r.path() != "/robots.txt").count();
    assert!(through_proxy > 0);
    std::thread::sleep(Duration::from_millis(300));
    proxy.stop_cleanly();
    drop(origin);

    let offline_proxy = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let (offline, log) =
        scrapy_crawl(&start, &form, &offline_proxy.url(), &dir.join("offline.jsonl"));
    offline_proxy.stop_cleanly();
    assert_cache_verifies(&data);

    // The no-store page is the one difference: a 504 offline.
    let is_nostore =
        |i: &serde_json::Value| i["asked"].as_str().is_some_and(|a| a.ends_with("/nostore"));
    let gateway_timeouts: Vec<&serde_json::Value> =
        offline.iter().filter(|i| i["status"] == 504).collect();
    assert_eq!(
        gateway_timeouts.len(),
        1,
        "only /nostore is 504 offline:\n{}\n{log}",
        describe(&offline)
    );
    assert!(is_nostore(gateway_timeouts[0]), "{}", describe(&offline));
    let keep = |items: &[serde_json::Value]| {
        items.iter().filter(|i| !is_nostore(i)).cloned().collect::<Vec<_>>()
    };
    assert_eq!(
        describe(&keep(&online)),
        describe(&keep(&offline)),
        "offline items (URL, status, body SHA-256) equal the online ones"
    );
}
