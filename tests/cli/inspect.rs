//! `cache ls`, `cache cat`, `cache purge`, `cache prune` (issue 12 item 6),
//! each run on a stopped store (opened directly) and against a running
//! proxy (through its admin endpoints, with `server.admin_token`), with
//! the same results; sizes and freshness in words for people, `--json`
//! for programs, and `purge --dry-run` (issue 46).

use super::common::*;
use std::io::Write;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// Everything recorded too, and an admin token the commands must send.
const CONFIG: &str = "[server]\nadmin_token = \"s3cret\"\n[record]\nmode = \"all\"\n";

/// The page served gzip-encoded.
const PLAIN: &[u8] = b"<html>the plain text of a compressed page</html>\n";

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn site(req: &RecordedRequest) -> Reply {
    let fresh = [("Content-Type", "text/html"), ("Cache-Control", "max-age=3600")];
    match req.path() {
        "/a" => Reply::ok(&fresh, b"page a"),
        "/gz" => Reply::ok(
            &[
                ("Content-Type", "text/html"),
                ("Cache-Control", "max-age=3600"),
                ("Content-Encoding", "gzip"),
            ],
            &gzip(PLAIN),
        ),
        "/docs/1" | "/docs/2" | "/l" | "/new" => {
            Reply::ok(&fresh, format!("page {}", req.path()).as_bytes())
        }
        // Recorded, not cached (a redirect without freshness).
        "/r302" => Reply::new(302, &[("Location", "/a")], b"found"),
        // Fresh for one second only.
        "/brief" => {
            Reply::ok(&[("Content-Type", "text/html"), ("Cache-Control", "max-age=1")], b"brief")
        }
        _ => Reply::new(404, &[], b"no"),
    }
}

/// How the commands reach the store.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// The proxy is stopped: the store is opened directly.
    Stopped,
    /// The proxy runs: the commands go through its admin endpoints.
    Running,
}

/// `crawlcache cache ARGS --config CFG --data-dir DATA`.
fn cache(cfg: &Path, data: &Path, args: &[&str]) -> Output {
    let mut all = vec!["cache"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--config",
        cfg.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    crawlcache_cmd(&all, LIMIT)
}

fn ok(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what}: exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `ls` lines as (url, fields).
fn ls(cfg: &Path, data: &Path, args: &[&str]) -> Vec<Vec<String>> {
    let mut a = vec!["ls"];
    a.extend_from_slice(args);
    let out = ok(cache(cfg, data, &a), "cache ls");
    text(&out).lines().map(|l| l.split('\t').map(str::to_string).collect()).collect()
}

fn urls(rows: &[Vec<String>]) -> Vec<String> {
    let mut u: Vec<String> = rows.iter().map(|r| r[0].clone()).collect();
    u.sort();
    u
}

/// The "removed N entries" count of a purge or prune.
fn removed(out: &Output) -> u64 {
    let t = text(out);
    t.split("removed ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {t:?}"))
}

fn inspect_and_maintain(mode: Mode) {
    let dir = TestDir::new(&format!("inspect-{mode:?}"));
    let data = dir.subdir("data");
    let cfg = dir.join("crawlcache.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let origin = Origin::start(site);
    let proxy = Proxy::start_on(
        [127, 0, 0, 1].into(),
        &data,
        CONFIG,
        &[("Authorization", "Bearer s3cret")],
    );
    for path in ["/a", "/gz", "/docs/1", "/docs/2", "/r302", "/brief"] {
        let r = proxy.get(&origin.url(path), &[]);
        assert!(r.status == 200 || r.status == 302, "{path}: {}", r.describe());
    }
    let other_host = format!("http://localhost:{}/l", origin.port());
    assert_eq!(proxy.get(&other_host, &[]).status, 200);
    // Let the tee tasks publish the bodies and the record copies.
    std::thread::sleep(Duration::from_millis(400));
    let proxy = match mode {
        Mode::Stopped => {
            proxy.stop_cleanly();
            None
        }
        Mode::Running => Some(proxy),
    };
    let at = |p: &str| origin.url(p);

    // Through the proxy, the listing is streamed (chunked), not built whole.
    if let Some(p) = &proxy {
        let r = send_request(
            p.addr(),
            "GET",
            "/cache/ls?json=1",
            &[("Authorization", "Bearer s3cret")],
            b"",
        );
        assert_eq!(r.status, 200, "{}", r.describe());
        assert_eq!(r.header("transfer-encoding"), Some("chunked"), "{}", r.describe());
        assert!(
            r.header("content-length").is_none() && r.text().lines().count() == 7,
            "{}",
            r.describe()
        );
    }

    // ls --host: every response of that host, where it is, its figures.
    let rows = ls(&cfg, &data, &["--host", "127.0.0.1"]);
    assert_eq!(
        urls(&rows),
        ["/a", "/brief", "/docs/1", "/docs/2", "/gz", "/r302"].map(at).to_vec(),
        "{rows:?}"
    );
    let row = |p: &str| {
        rows.iter().find(|r| r[0] == at(p)).unwrap_or_else(|| panic!("{p} in {rows:?}")).clone()
    };
    let a = row("/a");
    assert_eq!(
        (a[1].as_str(), a[2].as_str(), a[5].as_str()),
        ("200", "6 B", "cache+record"),
        "{a:?}"
    );
    assert!(a[4] == "fresh 1h" || a[4].starts_with("fresh 59m"), "freshness left in words: {a:?}");
    assert!(a[3].ends_with('Z') && a[3].len() >= 20, "stored time in RFC 3339: {a:?}");
    let r302 = row("/r302");
    assert_eq!((r302[1].as_str(), r302[5].as_str()), ("302", "record"), "{r302:?}");
    assert_eq!(
        row("/gz")[2],
        format!("{} B", gzip(PLAIN).len()),
        "the size as stored (compressed)"
    );
    assert_eq!(urls(&ls(&cfg, &data, &["--host", "LOCALHOST"])), vec![other_host.clone()]);
    assert!(ls(&cfg, &data, &["--host", "example.org"]).is_empty());
    // --prefix, and --json.
    assert_eq!(
        urls(&ls(&cfg, &data, &["--prefix", &at("/docs/")])),
        vec![at("/docs/1"), at("/docs/2")]
    );
    let out = ok(cache(&cfg, &data, &["ls", "--json", "--prefix", &at("/docs/1")]), "ls --json");
    let lines: Vec<serde_json::Value> =
        text(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 1, "{}", text(&out));
    let j = &lines[0];
    assert_eq!(
        (j["url"].as_str(), j["status"].as_u64(), j["cache"].as_bool(), j["record"].as_bool()),
        (Some(at("/docs/1").as_str()), Some(200), Some(true), Some(true)),
        "{j}"
    );
    assert!(
        j["ttl"].as_i64().is_some_and(|t| t > 3500)
            && j["stored"].is_string()
            && j["last_used"].is_string(),
        "{j}"
    );
    assert!(
        err(&out).contains("cache ls: 1 responses (1 in the cache, 1 in the record)"),
        "{}",
        err(&out)
    );

    // cat: the body as stored, or decoded; the record when the cache has none.
    let out = ok(cache(&cfg, &data, &["cat", &at("/gz")]), "cat");
    assert_eq!(out.stdout, gzip(PLAIN), "exactly as stored");
    assert!(err(&out).contains("from the cache"), "{}", err(&out));
    let out = ok(cache(&cfg, &data, &["cat", "--decode", &at("/gz")]), "cat --decode");
    assert_eq!(out.stdout, PLAIN);
    let out = ok(cache(&cfg, &data, &["cat", &at("/r302")]), "cat of a record");
    assert_eq!(out.stdout, b"found");
    assert!(
        err(&out).contains("from the record") && err(&out).contains("record:GET "),
        "{}",
        err(&out)
    );
    let out = cache(&cfg, &data, &["cat", &at("/never")]);
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    assert!(out.stdout.is_empty() && err(&out).contains("is not stored"), "{}", err(&out));

    // purge --dry-run: what would go, and nothing goes.
    let out = ok(
        cache(&cfg, &data, &["purge", "--dry-run", "--prefix", &at("/docs/")]),
        "purge --dry-run",
    );
    assert_eq!(
        text(&out),
        "cache purge --dry-run: would remove 4 entries (48 B of bodies); nothing was removed\n",
        "{}",
        err(&out)
    );
    let out = ok(
        cache(&cfg, &data, &["purge", "--dry-run", "--json", &at("/a")]),
        "purge --dry-run --json",
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"version": 1, "dry_run": true, "entries": 2, "bytes": 12, "freed": null})
    );
    assert_eq!(
        urls(&ls(&cfg, &data, &["--prefix", &at("/docs/")])),
        vec![at("/docs/1"), at("/docs/2")],
        "a dry run removes nothing"
    );

    // purge URL: the cache entry and the record copy.
    let out = ok(cache(&cfg, &data, &["purge", &at("/a")]), "purge URL");
    assert_eq!(removed(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("(12 B of bodies)"), "{}", text(&out));
    assert_eq!(
        cache(&cfg, &data, &["cat", &at("/a")]).status.code(),
        Some(1),
        "gone from the cache and the record"
    );
    assert_eq!(
        removed(&ok(cache(&cfg, &data, &["purge", "--prefix", &at("/docs/")]), "purge --prefix")),
        4
    );
    assert_eq!(
        removed(&ok(cache(&cfg, &data, &["purge", "--host", "localhost"]), "purge --host")),
        2
    );
    assert_eq!(urls(&ls(&cfg, &data, &[])), ["/brief", "/gz", "/r302"].map(at).to_vec());
    let out = cache(&cfg, &data, &["purge"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a purge of nothing in particular is refused: {}",
        err(&out)
    );

    // prune: /brief is stale and unused for 2 s; its record stays.
    std::thread::sleep(Duration::from_millis(2500));
    let proxy = match proxy {
        Some(p) => {
            assert_eq!(p.get(&at("/new"), &[]).status, 200);
            std::thread::sleep(Duration::from_millis(300));
            Some(p)
        }
        None => None,
    };
    let out = ok(cache(&cfg, &data, &["prune", "--unused-for", "2s"]), "prune");
    assert_eq!(removed(&out), 1, "{}", text(&out));
    assert!(text(&out).contains("unused for 2s"), "{}", text(&out));
    let rows = ls(&cfg, &data, &["--prefix", &at("/brief")]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][5], "record", "the record is kept: {rows:?}");
    assert!(rows[0][4].starts_with("expired ") && rows[0][4].ends_with(" ago"), "stale: {rows:?}");

    // purge --older-than: what was received before the pause (in units
    // of a duration written as people write them).
    let out = ok(cache(&cfg, &data, &["purge", "--older-than", "0h0m2s"]), "purge --older-than");
    assert_eq!(
        removed(&out),
        4,
        "/gz (cache and record), the /r302 and /brief records: {}",
        text(&out)
    );
    let left = urls(&ls(&cfg, &data, &[]));
    match mode {
        Mode::Running => assert_eq!(left, vec![at("/new")]),
        Mode::Stopped => assert!(left.is_empty(), "{left:?}"),
    }
    if let Some(p) = proxy {
        p.stop_cleanly();
    }
    assert_cache_verifies(&data);
}

#[test]
fn ls_cat_purge_prune_on_a_stopped_store() {
    inspect_and_maintain(Mode::Stopped);
}

#[test]
fn ls_cat_purge_prune_through_a_running_proxy() {
    inspect_and_maintain(Mode::Running);
}

/// `cache stats` for people counts every class of a running proxy's
/// requests, errors included, so its parts add up to its total; and a
/// command without the proxy's admin token is told what to set, not
/// handed a JSON parse error.
#[test]
fn stats_count_errors_and_a_missing_token_is_named() {
    let dir = TestDir::new("inspect-stats-errors");
    let data = dir.subdir("data");
    let cfg = dir.join("crawlcache.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let origin = Origin::start(site);
    let proxy = Proxy::start_on(
        [127, 0, 0, 1].into(),
        &data,
        CONFIG,
        &[("Authorization", "Bearer s3cret")],
    );
    assert_eq!(proxy.get(&origin.url("/a"), &[]).status, 200);
    assert_eq!(proxy.get(&origin.url("/a"), &[]).status, 200);
    // An origin that is not listening: the proxy's own 502, an error.
    let gone = format!("http://127.0.0.1:{}/x", free_port());
    assert_eq!(proxy.get(&gone, &[]).status, 502);
    // Nothing stored and only-if-cached: a refusal.
    assert_eq!(
        proxy.get(&origin.url("/never"), &[("Cache-Control", "only-if-cached")]).status,
        504
    );
    std::thread::sleep(Duration::from_millis(200));
    let out = ok(cache(&cfg, &data, &["stats"]), "cache stats");
    let line =
        text(&out).lines().find(|l| l.starts_with("requests")).unwrap_or_default().to_string();
    assert!(line.contains("1 refused, 1 errors"), "errors apart from refusals: {line}");
    let total: u64 = line
        .split_once(':')
        .and_then(|(h, _)| h.trim_start_matches("requests").trim().parse().ok())
        .unwrap_or(0);
    let parts: u64 = line
        .split_once(':')
        .map(|(_, rest)| {
            rest.split(',').filter_map(|p| p.split_whitespace().next()?.parse::<u64>().ok()).sum()
        })
        .unwrap_or(0);
    assert_eq!((total, parts), (4, 4), "the parts add up to the total: {line}");
    // `cache show` for people by default, JSON (versioned) with --json.
    let shown = text(&ok(cache(&cfg, &data, &["show", &origin.url("/a")]), "cache show"));
    assert!(
        shown.contains("variant 1\n  status    200\n")
            && shown.ends_with("cache show: 1 variant(s), 1 record(s)\n"),
        "{shown}"
    );
    let shown: serde_json::Value = serde_json::from_str(&text(&ok(
        cache(&cfg, &data, &["show", "--json", &origin.url("/a")]),
        "cache show --json",
    )))
    .unwrap();
    assert_eq!(
        (shown["version"].as_u64(), shown["variants"].as_array().map(Vec::len)),
        (Some(1), Some(1)),
        "{shown}"
    );

    // The same command with a configuration that lacks the token.
    let bare = dir.join("bare.toml");
    std::fs::write(&bare, "[record]\nmode = \"all\"\n").unwrap();
    let out = cache(&bare, &data, &["stats"]);
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    let e = err(&out);
    assert!(
        e.contains("refused the admin request (401")
            || e.contains("refused the admin request (403"),
        "{e}"
    );
    assert!(e.contains("server.admin_token"), "{e}");
    drop(proxy);
}
