//! Output for people and for programs (issue 46): `cache stats` gives the
//! same short summary, and the same versioned `--json` object, whether the
//! proxy runs or not; sizes carry units; `cache verify` is one line when
//! every invariant holds and lists the problems when one does not.

use super::common::*;
use super::{describe, path_str, stdout, CMD_LIMIT};
use std::path::Path;
use std::process::Output;

/// A body longer than `store.inline_max_bytes` (32 KiB): a file of its own.
const LARGE: usize = 40_000;

fn site(req: &RecordedRequest) -> Reply {
    let fresh = [("Cache-Control", "max-age=3600")];
    match req.path() {
        "/large" => Reply::ok(&fresh, &vec![b'x'; LARGE]),
        p => Reply::ok(&fresh, format!("page {p}").as_bytes()),
    }
}

fn cache(data: &Path, args: &[&str]) -> Output {
    let mut all = vec!["cache"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--data-dir", path_str(data)]);
    crawlcache_cmd(&all, CMD_LIMIT)
}

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", describe(&out));
    out
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(out)))
}

/// A store with three pages and a large body, and the proxy that filled it.
fn filled(label: &str) -> (Origin, TestDir, Proxy) {
    let origin = Origin::start(site);
    let dir = TestDir::new(label);
    let data = dir.subdir("data");
    let proxy = Proxy::start(&data, &[]);
    for p in ["/a", "/b", "/c", "/large"] {
        assert_eq!(proxy.get(&origin.url(p), &[]).status, 200);
    }
    assert!(proxy.get(&origin.url("/a"), &[]).cache_status().unwrap_or_default().contains("hit"));
    // Let the tee tasks publish the bodies.
    std::thread::sleep(std::time::Duration::from_millis(400));
    (origin, dir, proxy)
}

#[test]
fn cache_stats_says_the_same_whether_the_proxy_runs_or_not() {
    let (_origin, dir, proxy) = filled("cli-stats");
    let data = dir.join("data");
    let running_json = json(&ok(cache(&data, &["stats", "--json"])));
    let running_text = stdout(&ok(cache(&data, &["stats"])));
    proxy.stop_cleanly();
    let stopped_json = json(&ok(cache(&data, &["stats", "--json"])));
    let stopped_text = stdout(&ok(cache(&data, &["stats"])));

    // One object, one version, the same fields either way.
    for v in [&running_json, &stopped_json] {
        assert_eq!(v["version"], 1, "{v}");
        assert_eq!(v["data_dir"], path_str(&data), "{v}");
    }
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&running_json), keys(&stopped_json));
    assert_eq!(keys(&running_json["store"]), keys(&stopped_json["store"]));
    for k in ["entries", "bodies", "bytes_stored", "bytes_referenced", "max_size"] {
        assert_eq!(
            running_json["store"][k], stopped_json["store"][k],
            "store.{k}: {running_json} / {stopped_json}"
        );
    }
    assert_eq!(running_json["store"]["entries"], 4, "{running_json}");
    assert!(
        running_json["store"]["bytes_stored"].as_u64().is_some_and(|b| b >= LARGE as u64),
        "{running_json}"
    );
    assert_eq!(
        (running_json["proxy_running"].as_bool(), stopped_json["proxy_running"].as_bool()),
        (Some(true), Some(false))
    );
    let (requests, hits) = (
        running_json["requests"]["requests"].as_u64().unwrap_or(0),
        running_json["requests"]["hits"].as_u64().unwrap_or(0),
    );
    assert!(requests >= 5 && hits >= 1, "{running_json}");
    assert!(
        stopped_json["requests"].is_null() && stopped_json["listen"].is_null(),
        "{stopped_json}"
    );

    // For people: a few lines, sizes with units, one summary line; the
    // store's lines are the same either way.
    for text in [&running_text, &stopped_text] {
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() <= 8, "a summary, not a dump:\n{text}");
        assert!(lines[0].starts_with("entries   4"), "{text}");
        assert!(text.contains(" KiB") && text.contains("of 10.0 GiB"), "sizes with units:\n{text}");
        assert!(!text.contains('{'), "not JSON:\n{text}");
        assert!(lines.last().unwrap().starts_with("cache stats: 4 entries, "), "{text}");
    }
    let store_lines = |t: &str| {
        t.lines().take(3).map(|l| l.split(';').next().unwrap_or("").to_string()).collect::<Vec<_>>()
    };
    assert_eq!(
        store_lines(&running_text),
        store_lines(&stopped_text),
        "{running_text}\n---\n{stopped_text}"
    );
    assert!(
        running_text.contains(&format!("requests  {requests}: {hits} hits (")),
        "{running_text}"
    );
    assert!(stopped_text.contains("the proxy is not running"), "{stopped_text}");
}

#[test]
fn cache_verify_prints_one_line_when_every_invariant_holds() {
    let (_origin, dir, proxy) = filled("cli-verify");
    let data = dir.join("data");
    let holds = |when: &str| {
        let out = ok(cache(&data, &["verify"]));
        assert_eq!(stdout(&out).lines().count(), 1, "{when}: {}", describe(&out));
        assert!(
            stdout(&out).starts_with("cache verify: every invariant holds (4 entries, "),
            "{when}: {}",
            describe(&out)
        );
        let v = json(&ok(cache(&data, &["verify", "--json"])));
        assert_eq!(
            (v["version"].as_u64(), v["clean"].as_bool(), v["report"]["entries_checked"].as_u64()),
            (Some(1), Some(true), Some(4)),
            "{when}: {v}"
        );
    };
    holds("through the running proxy");
    proxy.stop_cleanly();
    holds("on the stopped store");

    // A body file gone: the problem is named, exit 1.
    let file = walk(&data.join("bodies"))
        .into_iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.len() == LARGE as u64))
        .expect("the large body's file");
    std::fs::remove_file(&file).unwrap();
    let out = cache(&data, &["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(text.starts_with("1 missing bodies (named by an entry, not on disk):\n  "), "{text}");
    assert!(
        text.lines().last().unwrap().starts_with("cache verify: invariants are broken"),
        "{text}"
    );
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn sizes_carry_units_and_json_carries_bytes() {
    let (origin, dir, proxy) = filled("cli-units");
    let data = dir.join("data");
    proxy.stop_cleanly();
    let out = ok(cache(&data, &["purge", &origin.url("/large"), "--json"]));
    let v = json(&out);
    assert_eq!(
        (v["version"].as_u64(), v["dry_run"].as_bool(), v["entries"].as_u64(), v["bytes"].as_u64()),
        (Some(1), Some(false), Some(1), Some(LARGE as u64)),
        "{v}"
    );
    let out = ok(cache(&data, &["compact"]));
    let line = stdout(&out);
    assert!(line.starts_with("cache compact: pack ") && !line.contains("bytes"), "{line}");
    assert!(
        line.contains(" B -> ") || line.contains(" KiB -> ") || line.contains(" MiB -> "),
        "{line}"
    );
    let v = json(&ok(cache(&data, &["compact", "--json"])));
    assert!(
        v["version"] == 1 && v["pack_bytes_before"].is_u64() && v["pack_bytes_after"].is_u64(),
        "{v}"
    );
    let out = ok(cache(&data, &["purge", &origin.url("/a")]));
    assert!(
        stdout(&out).starts_with("cache purge: removed 1 entry (7 B of bodies); 7 B freed"),
        "{}",
        describe(&out)
    );
}
