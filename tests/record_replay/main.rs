//! Record and replay (SPEC section 6, issue 12): with `record.mode = "all"`
//! every final response is kept; with the origin gone and `--offline`, a
//! crawl is answered byte for byte from the cache and the record: redirects
//! (301, 302, 307 without freshness, a trailing-slash redirect), `private`,
//! `no-cache`, a 404, a form's POST. `no-store` only with `record.no_store`.
//! With `mode = "cacheable"` the offline run misses exactly the responses
//! the cache may not store. `warc.rs`: WARC export and import of the same
//! site. `variants.rs`: every `Vary` variant recorded and replayed to its
//! own client (issue 33). `pywb.rs`: offline answers compared with pywb's
//! replay of the same WARC files.

#[path = "../common/mod.rs"]
mod common;
mod pywb;
mod variants;
mod warc;

mod scrapy;

use common::*;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

const UTM_RULE: &str =
    "[[cache.key_rules]]\nhost = \"*\"\ndrop_params = [\"utm_*\", \"fbclid\", \"gclid\"]\n";
const ALL: &str =
    "[record]\nmode = \"all\"\nmethods = [\"GET\", \"HEAD\", \"POST\"]\n[[cache.key_rules]]\nhost = \"*\"\ndrop_params = [\"utm_*\", \"fbclid\", \"gclid\"]\n";
const ALL_NO_STORE: &str = "[record]\nmode = \"all\"\nno_store = true\nmethods = [\"GET\", \"HEAD\", \"POST\"]\n[[cache.key_rules]]\nhost = \"*\"\ndrop_params = [\"utm_*\", \"fbclid\", \"gclid\"]\n";
const CACHEABLE: &str = "[record]\nmode = \"cacheable\"\n";

/// The scripted site: every kind of response a crawl meets.
fn site(req: &RecordedRequest) -> Reply {
    let path = req.path().to_string();
    let page = |extra: &[(&str, &str)], body: String| {
        let mut h: Vec<(&str, &str)> = vec![("Content-Type", "text/html")];
        h.extend_from_slice(extra);
        Reply::new(200, &h, body.as_bytes())
    };
    match (req.method.as_str(), path.as_str()) {
        ("GET", "/") => page(
            &[("Cache-Control", "max-age=3600")],
            "<html><body>\
             <a href=\"/r301\">a</a> <a href=\"/r302\">b</a> <a href=\"/r307\">c</a> \
             <a href=\"/dir\">d</a> <a href=\"/private\">p</a> <a href=\"/nocache\">n</a> \
             <a href=\"/nostore\">s</a> <a href=\"/missing\">m</a> \
             <a href=\"/news?id=1&amp;utm_source=feed\">u1</a> <a href=\"/news?utm_medium=mail&amp;id=1\">u2</a> \
             <a href=\"/chunked\">k</a> \
             </body></html>"
                .to_string(),
        ),
        ("GET", "/r301") => Reply::new(301, &[("Location", "/a")], b"moved"),
        ("GET", "/r302") => Reply::new(302, &[("Location", "/b")], b"found"),
        ("GET", "/r307") => Reply::new(307, &[("Location", "/c")], b"temporary"),
        ("GET", "/dir") => Reply::new(301, &[("Location", "/dir/")], b""),
        // http -> https, as sites that moved to TLS answer (not linked: the
        // crawls stay on this plain-HTTP origin).
        ("GET", "/login") => Reply::new(302, &[("Location", "https://127.0.0.1/login")], b""),
        ("GET", "/dir/") => page(&[], "<html>dir index</html>".into()),
        ("GET", "/a") | ("GET", "/b") | ("GET", "/c") => page(&[], format!("<html>page {path}</html>")),
        // The same page whatever the tracking parameters say.
        ("GET", "/news") => page(&[], "<html>news 1</html>".into()),
        // Framed by the chunked coding: stored and replayed de-chunked.
        ("GET", "/chunked") => Reply::chunked(200, &[("Content-Type", "text/html")], &[b"<html>chunked ", b"page</html>"], true),
        ("GET", "/private") => page(&[("Cache-Control", "private, max-age=600")], "<html>private</html>".into()),
        ("GET", "/nocache") => page(&[("Cache-Control", "no-cache")], "<html>no-cache</html>".into()),
        ("GET", "/nostore") => page(&[("Cache-Control", "no-store")], "<html>no-store</html>".into()),
        ("POST", "/form") => {
            let body = format!("<html>posted {}</html>", String::from_utf8_lossy(&req.body));
            Reply::new(200, &[("Content-Type", "text/html")], body.as_bytes())
        }
        _ => Reply::new(404, &[("Content-Type", "text/html")], b"<html>not found</html>"),
    }
}

/// Runs `wget -r` from `start` through `proxy` into `out`; returns the
/// files and wget's log. Exit 8 (an error response: the 404) and 4 (wget counts a 504 as a network failure) are expected.
fn wget(
    start: &str,
    proxy: &str,
    out: &std::path::Path,
) -> (BTreeMap<std::path::PathBuf, Vec<u8>>, String) {
    std::fs::create_dir_all(out).unwrap();
    let mut cmd = Command::new(wget_bin());
    cmd.args([
        "--no-config",
        "-r",
        "-nH",
        "-e",
        "robots=off",
        "--no-verbose",
        "-S",
        "--tries=1",
        "--timeout=10",
    ])
    .args(["-e", "use_proxy=on", "-e", &format!("http_proxy={proxy}")])
    .arg("-P")
    .arg(out)
    .arg(start);
    for var in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"] {
        cmd.env_remove(var);
    }
    let o = run_bounded(&mut cmd, Duration::from_secs(120), "wget -r");
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        matches!(o.status.code(), Some(0) | Some(4) | Some(8)),
        "wget exited {:?}:\n{log}",
        o.status
    );
    (read_tree(out), log)
}

/// How many responses wget was answered 504 (from its `-S` log).
fn gateway_timeouts(log: &str) -> usize {
    log.lines().filter(|l| l.trim_start().starts_with("HTTP/1.1 504")).count()
}

struct Run {
    online: BTreeMap<std::path::PathBuf, Vec<u8>>,
    offline: BTreeMap<std::path::PathBuf, Vec<u8>>,
    offline_log: String,
    post_online: Response,
    post_offline: Response,
    post_other_offline: Response,
    nostore_offline: Response,
    missing_offline: Response,
    r302_offline: Response,
    to_https_offline: Response,
    ls_text: String,
    ls_summary: String,
    ls_json_other_host: String,
}

fn crawl_online_then_offline(label: &str, config: &str) -> Run {
    let dir = TestDir::new(label);
    let data = dir.subdir("data");
    let origin = Origin::start(site);
    let proxy = Proxy::start_with_config(&data, config, &[]);
    let start = origin.url("/");
    let (online, log) = wget(&start, &proxy.url(), &dir.join("online"));
    assert!(online.len() >= 8, "the online crawl fetched {} files:\n{log}", online.len());
    let form = origin.url("/form");
    let post_online = send_request(
        proxy.addr(),
        "POST",
        &form,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"q=crawl",
    );
    assert_eq!(post_online.status, 200);
    assert_eq!(proxy_get(proxy.addr(), &origin.url("/login"), &[]).status, 302);
    // Let the tee tasks publish, then stop; the origin goes away.
    std::thread::sleep(Duration::from_millis(300));
    proxy.stop_cleanly();
    drop(origin);

    let offline_proxy = Proxy::start_with_config(&data, config, &["--offline"]);
    let (offline, offline_log) = wget(&start, &offline_proxy.url(), &dir.join("offline"));
    let post_offline = send_request(
        offline_proxy.addr(),
        "POST",
        &form,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"q=crawl",
    );
    let post_other_offline = send_request(offline_proxy.addr(), "POST", &form, &[], b"q=other");
    let nostore_offline = proxy_get(offline_proxy.addr(), &format!("{start}nostore"), &[]);
    let missing_offline = proxy_get(offline_proxy.addr(), &format!("{}never-seen", start), &[]);
    let r302_offline = proxy_get(offline_proxy.addr(), &format!("{}r302", start), &[]);
    let to_https_offline = proxy_get(offline_proxy.addr(), &format!("{}login", start), &[]);
    offline_proxy.stop_cleanly();
    assert_cache_verifies(&data);
    let data_s = data.to_str().unwrap();
    let ls = crawlcache_cmd(
        &["cache", "ls", "--data-dir", data_s, "--host", "127.0.0.1"],
        Duration::from_secs(30),
    );
    assert!(ls.status.success(), "{}", String::from_utf8_lossy(&ls.stderr));
    let other = crawlcache_cmd(
        &["cache", "ls", "--data-dir", data_s, "--host", "example.org", "--json"],
        Duration::from_secs(30),
    );
    let (ls_text, ls_summary) = (
        String::from_utf8_lossy(&ls.stdout).into_owned(),
        String::from_utf8_lossy(&ls.stderr).into_owned(),
    );
    let ls_json_other_host = String::from_utf8_lossy(&other.stdout).into_owned();
    Run {
        ls_text,
        ls_summary,
        ls_json_other_host,
        online,
        offline,
        offline_log,
        post_online,
        post_offline,
        post_other_offline,
        nostore_offline,
        missing_offline,
        r302_offline,
        to_https_offline,
    }
}

#[test]
fn mode_all_replays_a_crawl_offline_byte_identical() {
    let run = crawl_online_then_offline("record-all", ALL);
    // no-store is not recorded: the only difference.
    let mut expected = run.online.clone();
    expected.retain(|p, _| !p.ends_with("nostore"));
    let mut offline = run.offline.clone();
    offline.retain(|p, _| !p.ends_with("nostore"));
    assert_trees_equal(&expected, &offline, "offline replay (mode=all) vs the online crawl");
    assert_eq!(
        gateway_timeouts(&run.offline_log),
        1,
        "only /nostore is 504 offline:\n{}",
        run.offline_log
    );
    assert!(
        run.online.keys().any(|p| p.ends_with("nostore"))
            && !run.offline.keys().any(|p| p.ends_with("nostore"))
    );
    assert_eq!(run.nostore_offline.status, 504);

    // A redirect without freshness is replayed from the record, marked so.
    assert_eq!(run.r302_offline.status, 302, "{}", run.r302_offline.describe());
    assert_eq!(run.r302_offline.header("location"), Some("/b"));
    // So is a redirect from http to https.
    assert_eq!(run.to_https_offline.status, 302, "{}", run.to_https_offline.describe());
    assert_eq!(run.to_https_offline.header("location"), Some("https://127.0.0.1/login"));
    let cs = run.r302_offline.cache_status().unwrap_or_default();
    assert!(
        cs.contains("hit")
            && cs.contains("detail=offline")
            && cs.contains("key=\"record:GET http://"),
        "{cs}"
    );

    // The form's POST, keyed by its body.
    assert_eq!(run.post_offline.status, 200, "{}", run.post_offline.describe());
    assert_eq!(run.post_offline.body, run.post_online.body);
    assert!(run.post_offline.cache_status().unwrap_or_default().contains("sha256="));
    assert_eq!(run.post_other_offline.status, 504, "another body was never posted");
    assert!(
        run.post_other_offline.text().contains("record:POST"),
        "{}",
        run.post_other_offline.text()
    );

    // `cache ls --host` lists cache entries and records, with a summary:
    // URL STATUS BYTES STORED TTL IN.
    let rows: Vec<Vec<&str>> = run.ls_text.lines().map(|l| l.split('\t').collect()).collect();
    assert!(
        rows.iter().all(|f| f.len() == 6 && f[0].starts_with("http://127.0.0.1:")),
        "{}",
        run.ls_text
    );
    assert!(
        rows.iter().any(|f| f[0].ends_with("/r302") && f[1] == "302" && f[5] == "record"),
        "{}",
        run.ls_text
    );
    assert!(
        rows.iter().any(|f| f[0].ends_with("/form") && f[5].starts_with("record(POST sha256=")),
        "{}",
        run.ls_text
    );
    assert!(rows.iter().any(|f| f[1] == "200" && f[5] == "cache+record"), "{}", run.ls_text);
    assert!(run.ls_summary.contains("in the record)"), "{}", run.ls_summary);
    assert!(run.ls_json_other_host.trim().is_empty(), "{}", run.ls_json_other_host);

    // A URL never seen: 504 naming the URL and the key.
    assert_eq!(run.missing_offline.status, 504);
    let t = run.missing_offline.text();
    assert!(t.contains("/never-seen") && t.contains("record:GET http://"), "{t}");
}

#[test]
fn no_store_is_replayed_only_with_record_no_store() {
    let run = crawl_online_then_offline("record-no-store", ALL_NO_STORE);
    assert_trees_equal(
        &run.online,
        &run.offline,
        "offline replay (mode=all, no_store) vs the online crawl",
    );
    assert_eq!(gateway_timeouts(&run.offline_log), 0, "{}", run.offline_log);
    assert_eq!(run.nostore_offline.status, 200);
}

#[test]
fn mode_cacheable_misses_exactly_what_the_cache_may_not_store() {
    let run = crawl_online_then_offline("record-cacheable", CACHEABLE);
    let mut missing: Vec<String> = run
        .online
        .keys()
        .filter(|p| !run.offline.contains_key(*p))
        .map(|p| p.display().to_string())
        .collect();
    missing.sort();
    // 302 and 307 without freshness are not storable (wget saves a
    // redirect's target under the redirecting name), nor are `private` (in
    // the default shared mode) and `no-store`. The 301s, the no-cache page
    // and the 404 are stored by the cache and served stale offline.
    assert_eq!(
        missing,
        vec!["nostore", "private", "r302", "r307"],
        "offline log:\n{}",
        run.offline_log
    );
    assert_eq!(gateway_timeouts(&run.offline_log), 4, "{}", run.offline_log);
    assert_eq!(run.post_offline.status, 504, "POST is not recorded in mode=cacheable");
    assert_eq!(run.r302_offline.status, 504);
}

#[test]
fn a_key_rule_drops_tracking_parameters_from_the_key_not_from_the_request() {
    let dir = TestDir::new("record-key-rule");
    let data = dir.subdir("data");
    let origin = Origin::start(|_| Reply::ok(&[("Cache-Control", "max-age=600")], b"news"));
    let proxy = Proxy::start_with_config(&data, UTM_RULE, &[]);
    let first = proxy_get(proxy.addr(), &origin.url("/news?utm_source=feed&id=1"), &[]);
    assert_eq!(first.status, 200);
    let second = proxy_get(proxy.addr(), &origin.url("/news?id=1&fbclid=xyz"), &[]);
    assert_eq!(second.status, 200);
    assert!(second.cache_status().unwrap_or_default().contains("hit"), "{}", second.describe());
    let seen: Vec<RecordedRequest> =
        origin.requests().into_iter().filter(|r| r.path() != "/robots.txt").collect();
    assert_eq!(seen.len(), 1, "one origin fetch for both spellings");
    assert_eq!(
        seen[0].target, "/news?utm_source=feed&id=1",
        "the origin is asked for the URL as requested"
    );
    let other = proxy_get(proxy.addr(), &origin.url("/news?id=2&utm_source=feed"), &[]);
    assert!(!other.cache_status().unwrap_or_default().contains("hit"), "another id is another key");
    proxy.stop_cleanly();

    // `cache show` names the key; the audit line has url and key.
    let cfg = dir.join("rule.toml");
    std::fs::write(&cfg, UTM_RULE).unwrap();
    let out = crawlcache_cmd(
        &[
            "cache",
            "show",
            "--json",
            "--config",
            cfg.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            &origin.url("/news?gclid=1&id=1"),
        ],
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["key"].as_str(), Some(origin.url("/news?id=1").as_str()), "{text}");
    assert_eq!(v["variants"].as_array().map(|a| a.len()), Some(1), "{text}");
    let audit: String = std::fs::read_dir(data.join("audit"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let line =
        audit.lines().find(|l| l.contains("fbclid=xyz")).unwrap_or_else(|| panic!("{audit}"));
    let rec: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(rec["url"].as_str(), Some(origin.url("/news?id=1&fbclid=xyz").as_str()));
    assert_eq!(rec["key"].as_str(), Some(origin.url("/news?id=1").as_str()));
}

#[test]
fn a_max_ttl_rule_shortens_freshness_and_says_so() {
    let cfg = "[[cache.rules]]\nname = \"short\"\nhost = \"127.0.0.1\"\npath_prefix = \"/news/\"\nmax_ttl = \"1s\"\n";
    let (origin, proxy) = start_with_origin("rule-max-ttl", cfg, |_| {
        Reply::ok(&[("Cache-Control", "max-age=3600"), ("ETag", "\"v1\"")], b"news")
    });
    let first = proxy_get(proxy.addr(), &origin.url("/news/1"), &[]);
    assert_eq!(first.status, 200);
    assert!(
        first.cache_status().unwrap_or_default().contains("rule=short"),
        "{}",
        first.describe()
    );
    std::thread::sleep(Duration::from_millis(200));
    let hit = proxy_get(proxy.addr(), &origin.url("/news/1"), &[]);
    let cs = hit.cache_status().unwrap_or_default();
    assert!(cs.contains("hit") && cs.contains("ttl=0") && cs.contains("rule=short"), "{cs}");
    std::thread::sleep(Duration::from_millis(1200));
    let stale = proxy_get(proxy.addr(), &origin.url("/news/1"), &[]);
    let cs = stale.cache_status().unwrap_or_default();
    assert!(cs.contains("fwd=stale"), "past max_ttl the stored response is revalidated: {cs}");
    // Elsewhere the origin's max-age=3600 holds, with no rule named.
    proxy_get(proxy.addr(), &origin.url("/other"), &[]);
    std::thread::sleep(Duration::from_millis(1300));
    let other = proxy_get(proxy.addr(), &origin.url("/other"), &[]);
    let cs = other.cache_status().unwrap_or_default();
    assert!(cs.contains("hit") && !cs.contains("rule"), "{cs}");
}

#[test]
fn a_never_store_rule_keeps_responses_out_of_the_cache_and_the_record() {
    let cfg = "[record]\nmode = \"all\"\n[[cache.rules]]\nname = \"live\"\npath_prefix = \"/live\"\nnever_store = true\n";
    let dir = TestDir::new("rule-never-store");
    let data = dir.subdir("data");
    let origin = Origin::start(|_| Reply::ok(&[("Cache-Control", "max-age=3600")], b"live"));
    let proxy = Proxy::start_with_config(&data, cfg, &[]);
    for _ in 0..2 {
        let r = proxy_get(proxy.addr(), &origin.url("/live/score"), &[]);
        let cs = r.cache_status().unwrap_or_default();
        assert!(
            cs.contains("fwd=uri-miss")
                && cs.contains("detail=\"rule=live\"")
                && !cs.contains("stored"),
            "{cs}"
        );
    }
    let n = origin.requests().iter().filter(|r| r.path() == "/live/score").count();
    assert_eq!(n, 2, "never stored: both requests reach the origin");
    proxy_get(proxy.addr(), &origin.url("/cached"), &[]);
    assert!(proxy_get(proxy.addr(), &origin.url("/cached"), &[])
        .cache_status()
        .unwrap_or_default()
        .contains("hit"));
    let (live_url, cached_url) = (origin.url("/live/score"), origin.url("/cached"));
    std::thread::sleep(Duration::from_millis(300));
    proxy.stop_cleanly();
    drop(origin);

    // Offline, with record.mode = "all": the rule's path was not recorded either.
    let offline = Proxy::start_with_config(&data, cfg, &["--offline"]);
    let live = proxy_get(offline.addr(), &live_url, &[]);
    assert_eq!(live.status, 504, "never_store keeps the record empty too: {}", live.describe());
    assert_eq!(proxy_get(offline.addr(), &cached_url, &[]).status, 200);
    offline.stop_cleanly();
}

/// The `ttl` parameter of a `Cache-Status` value.
fn ttl_of(cache_status: &str) -> Option<i64> {
    cache_status.split(';').find_map(|p| p.trim().strip_prefix("ttl=")).and_then(|t| t.parse().ok())
}

/// An origin whose responses carry `ETag: "v1"` and `cache_control`, and
/// answer a matching `If-None-Match` with 304 carrying `X-Version: 2`
/// (the first full response says `X-Version: 1`).
fn validating_origin(cache_control: &'static str) -> Origin {
    Origin::start(move |req| {
        if req.header("if-none-match") == Some("\"v1\"") {
            return Reply::not_modified(&[
                ("ETag", "\"v1\""),
                ("Cache-Control", cache_control),
                ("X-Version", "2"),
            ]);
        }
        Reply::ok(
            &[("ETag", "\"v1\""), ("Cache-Control", cache_control), ("X-Version", "1")],
            b"the page",
        )
    })
}

#[test]
fn a_304_refreshes_the_record_copy_too() {
    let dir = TestDir::new("record-304");
    let data = dir.subdir("data");
    let origin = validating_origin("max-age=1");
    let url = origin.url("/page");
    let proxy = Proxy::start_with_config(&data, ALL, &[]);
    assert_eq!(proxy.get(&url, &[]).header("x-version"), Some("1"));
    std::thread::sleep(Duration::from_millis(1300));
    let revalidated = proxy.get(&url, &[]);
    let cs = revalidated.cache_status().unwrap_or_default();
    assert!(
        cs.contains("fwd=stale") && cs.contains("fwd-status=304"),
        "{}",
        revalidated.describe()
    );
    assert_eq!(revalidated.header("x-version"), Some("2"));
    proxy.stop_cleanly();

    // Both copies carry the field of the 304 (RFC 9111 section 3.2).
    let cfg = dir.join("all.toml");
    std::fs::write(&cfg, ALL).unwrap();
    let (cfg_s, data_s) = (cfg.to_str().unwrap(), data.to_str().unwrap());
    let out = crawlcache_cmd(
        &["cache", "show", "--json", "--config", cfg_s, "--data-dir", data_s, &url],
        Duration::from_secs(30),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let version = |e: &serde_json::Value| {
        e["headers"]
            .as_array()
            .and_then(|h| h.iter().find(|f| f[0] == "x-version"))
            .map(|f| f[1].as_str().unwrap_or("").to_string())
    };
    assert_eq!(version(&v["variants"][0]).as_deref(), Some("2"), "{v:#}");
    assert_eq!(
        version(&v["records"][0]).as_deref(),
        Some("2"),
        "the record copy is freshened too: {v:#}"
    );

    // Offline, from the record alone (the stale cache entry pruned).
    std::thread::sleep(Duration::from_millis(1100));
    let out = crawlcache_cmd(
        &["cache", "prune", "--unused-for", "0s", "--config", cfg_s, "--data-dir", data_s],
        Duration::from_secs(30),
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("removed 1 entry "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    drop(origin);
    let offline = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let replayed = offline.get(&url, &[]);
    assert_eq!(replayed.status, 200, "{}", replayed.describe());
    assert!(
        replayed.cache_status().unwrap_or_default().contains("key=\"record:GET "),
        "{}",
        replayed.describe()
    );
    assert_eq!(
        replayed.header("x-version"),
        Some("2"),
        "offline replay gets the newest fields: {}",
        replayed.describe()
    );
    assert_eq!(replayed.body, b"the page");
}

#[test]
fn a_path_regex_max_ttl_rule_caps_freshness_also_after_a_304() {
    let cfg =
        "[[cache.rules]]\nname = \"articles\"\npath_regex = '^/news/[0-9]+$'\nmax_ttl = \"1s\"\n";
    let dir = TestDir::new("rule-regex-304");
    let origin = validating_origin("max-age=3600");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), cfg, &[]);
    let (article, index) = (origin.url("/news/7"), origin.url("/news/latest"));
    let first = proxy.get(&article, &[]);
    assert!(
        first.cache_status().unwrap_or_default().contains("rule=articles"),
        "{}",
        first.describe()
    );
    assert!(
        !proxy.get(&index, &[]).cache_status().unwrap_or_default().contains("rule"),
        "the regex does not match /news/latest"
    );
    for round in 1..=2 {
        std::thread::sleep(Duration::from_millis(1300));
        let r = proxy.get(&article, &[]);
        let cs = r.cache_status().unwrap_or_default();
        assert!(
            cs.contains("fwd=stale")
                && cs.contains("fwd-status=304")
                && cs.contains("rule=articles"),
            "round {round}: {cs}"
        );
        assert!(
            ttl_of(&cs).is_some_and(|t| t <= 1),
            "round {round}: a 304 saying max-age=3600 is still capped at 1 s: {cs}"
        );
        let hit = proxy.get(&article, &[]);
        let cs = hit.cache_status().unwrap_or_default();
        assert!(cs.contains("hit") && ttl_of(&cs).is_some_and(|t| t <= 1), "round {round}: {cs}");
    }
    let cs = proxy.get(&index, &[]).cache_status().unwrap_or_default();
    assert!(
        cs.contains("hit") && ttl_of(&cs).is_some_and(|t| t > 3000) && !cs.contains("rule"),
        "{cs}"
    );
    let conditional = origin
        .requests()
        .iter()
        .filter(|r| r.path() == "/news/7" && r.header("if-none-match").is_some())
        .count();
    assert_eq!(conditional, 2, "one revalidation per second past max_ttl");
}
