//! The access log as fields (issue 46): JSON lines with the client,
//! User-Agent and both sides' HTTP versions, a file that `SIGHUP` reopens
//! after logrotate renamed it, Squid's native format read by a Squid log
//! analyser (calamaris), and the latency histograms per outcome.

use super::*;
use std::time::{Duration, Instant};

/// Waits (bounded) until `read` returns at least `n` lines; returns them.
/// The access log is written by its own thread every 100 ms.
fn wait_lines(what: &str, n: usize, read: impl Fn() -> String) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lines: Vec<String> = read().lines().map(str::to_string).collect();
        if lines.len() >= n || Instant::now() > deadline {
            assert_eq!(lines.len(), n, "{what}: {lines:#?}");
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_file(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// A file destination gets one JSON object per request with every field a
/// log analyser keys on; after the file is renamed and the proxy gets
/// `SIGHUP`, the next lines go to a new file at the configured path and
/// none is lost or written twice.
#[test]
fn json_lines_go_to_a_file_that_sighup_reopens() {
    let dir = TestDir::new("access-log");
    let path = dir.join("access.log");
    let config = format!("[server]\naccess_log = {:?}\n", path.to_str().unwrap());
    let (origin, proxy) = start(&config, |_r: &RecordedRequest| {
        Reply::ok(
            &[("Cache-Control", "max-age=600"), ("Content-Type", "text/html")],
            b"<p>page</p>",
        )
    });
    let url = origin.url("/page");
    let ua = [("User-Agent", "testbot/2.0 (+http://example.org/bot)")];
    assert_eq!(proxy.get(&url, &ua).status, 200);
    assert_eq!(proxy.get(&url, &ua).status, 200);
    let lines = wait_lines("two requests, two lines", 2, || read_file(&path));
    let (miss, hit) = (json(&lines[0]), json(&lines[1]));
    for (v, outcome) in [(&miss, "miss"), (&hit, "hit")] {
        assert_eq!(v["outcome"], outcome, "{v}");
        assert_eq!(v["method"], "GET");
        assert_eq!(v["url"], url.as_str());
        assert_eq!(v["status"], 200);
        assert_eq!(v["bytes"], 11);
        assert_eq!(v["user_agent"], "testbot/2.0 (+http://example.org/bot)");
        assert_eq!(v["robots"], "-", "robots handling is off");
        assert_eq!(v["client_version"], "HTTP/1.1");
        assert!(
            v["client"]
                .as_str()
                .is_some_and(|c| c.starts_with("127.0.0.1:") && c.len() > "127.0.0.1:".len()),
            "{v}"
        );
        assert!(v["duration_ms"].as_f64().is_some_and(|d| d >= 0.0), "{v}");
        let time = v["time"].as_str().unwrap_or_default();
        assert!(
            time.len() == 24 && time.ends_with('Z') && time.as_bytes()[19] == b'.',
            "RFC 3339 UTC with milliseconds: {time}"
        );
    }
    assert_eq!(miss["upstream_version"], "HTTP/1.1");
    assert!(hit["upstream_version"].is_null(), "a hit contacts no upstream: {hit}");

    let rotated = dir.join("access.log.1");
    std::fs::rename(&path, &rotated).unwrap();
    proxy.signal("HUP");
    assert!(
        proxy.log_shows("reopened (SIGHUP)", Duration::from_secs(10)),
        "{}",
        proxy.stderr_tail(20)
    );
    assert_eq!(
        proxy.get(&origin.url("/after"), &ua).status,
        200,
        "the proxy still serves after SIGHUP"
    );
    let after = wait_lines("the request after SIGHUP, in a new file", 1, || read_file(&path));
    assert_eq!(json(&after[0])["url"], origin.url("/after").as_str());
    assert_eq!(
        read_file(&rotated).lines().count(),
        2,
        "the renamed file keeps the lines written before"
    );
    proxy.stop_cleanly();
}

/// `access_log_format = "squid"` writes Squid's native format, with our
/// outcomes as its result codes, and a Squid log analyser from Debian
/// (calamaris) reads every line and counts the hits and misses.
#[test]
fn squid_format_is_read_by_a_squid_log_analyser() {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let (origin, proxy) = start(
        "[server]\naccess_log = \"stdout\"\naccess_log_format = \"squid\"\n",
        move |r: &RecordedRequest| {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            match r.path() {
                "/fresh" => Reply::ok(
                    &[
                        ("Cache-Control", "max-age=600"),
                        ("Content-Type", "text/html; charset=utf-8"),
                    ],
                    b"fresh",
                ),
                _ if n > 0 && r.header("if-none-match") == Some("\"v1\"") => {
                    Reply::not_modified(&[("Cache-Control", "max-age=0"), ("ETag", "\"v1\"")])
                }
                _ => Reply::ok(&[("Cache-Control", "max-age=0"), ("ETag", "\"v1\"")], b"stale"),
            }
        },
    );
    for path in ["/fresh", "/fresh", "/stale", "/stale"] {
        assert_eq!(proxy.get(&origin.url(path), &[]).status, 200);
    }
    let lines = wait_lines("four requests", 4, || proxy.stdout());
    let codes: Vec<&str> =
        lines.iter().map(|l| l.split_whitespace().nth(3).unwrap_or_default()).collect();
    assert_eq!(
        codes,
        ["TCP_MISS/200", "TCP_HIT/200", "TCP_MISS/200", "TCP_REFRESH_UNMODIFIED/200"]
    );
    for line in &lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 10, "ten fields: {line}");
        assert!(
            f[0].split_once('.').is_some_and(|(s, ms)| s.len() >= 10 && ms.len() == 3),
            "seconds.milliseconds: {line}"
        );
        assert_eq!(f[2], "127.0.0.1", "{line}");
    }
    assert_eq!(
        lines[0].split_whitespace().nth(8),
        Some(format!("HIER_DIRECT/{}", origin.addr().ip()).as_str())
    );
    assert_eq!(lines[0].split_whitespace().nth(9), Some("text/html"));
    assert_eq!(lines[1].split_whitespace().nth(8), Some("HIER_NONE/-"));

    let Some(report) = calamaris(&lines.join("\n")) else { return };
    let figure = |label: &str| -> Option<u64> {
        report
            .lines()
            .find(|l| l.trim_start().starts_with(label))?
            .split_whitespace()
            .last()?
            .parse()
            .ok()
    };
    assert_eq!(figure("lines parsed:"), Some(4), "{report}");
    assert_eq!(figure("invalid lines:"), Some(0), "{report}");
    let by_status = |code: &str| -> Option<u64> {
        report
            .lines()
            .find(|l| l.split_whitespace().next() == Some(code))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    assert_eq!(by_status("TCP_HIT"), Some(1), "{report}");
    assert_eq!(by_status("TCP_REFRESH_UNMODIFIED"), Some(1), "{report}");
    assert_eq!(by_status("TCP_MISS"), Some(2), "{report}");
    assert_eq!(by_status("HIT"), Some(2), "calamaris counts a revalidation as a hit: {report}");
}

/// calamaris's report of `log`, or `None` (with a message) when calamaris
/// is not installed (tests/run.sh installs it).
fn calamaris(log: &str) -> Option<String> {
    let found = std::process::Command::new("sh").args(["-c", "command -v calamaris"]).output();
    if !matches!(&found, Ok(o) if o.status.success()) {
        eprintln!("SKIPPED the calamaris check: calamaris is not installed; `bash tests/run.sh` installs it (apt-get install calamaris)");
        return None;
    }
    let dir = TestDir::new("calamaris");
    let file = dir.join("access.log");
    std::fs::write(&file, format!("{log}\n")).unwrap();
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "exec calamaris -a -n < \"$1\"", "sh"]).arg(&file);
    let out = run_bounded(&mut cmd, Duration::from_secs(60), "calamaris");
    assert!(out.status.success(), "calamaris failed: {}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// After N hits and M misses, `crawlcache_request_duration_seconds` counts
/// N under `outcome="hit"` and M under `outcome="miss"`, its buckets are
/// cumulative (never decreasing, the last `+Inf` equal to `_count`), and
/// every sample line of the exposition parses. The old form of
/// `access_log` ("info") still logs its line and warns once at start.
#[test]
fn latency_histograms_count_each_outcome() {
    let (origin, proxy) = start("[server]\naccess_log = \"info\"\n", |_r: &RecordedRequest| {
        Reply::ok(&[("Cache-Control", "max-age=600")], b"x")
    });
    let (misses, hits) = (3, 5);
    for i in 0..misses {
        let url = origin.url(&format!("/{i}"));
        assert_eq!(proxy.get(&url, &[]).status, 200);
    }
    for i in 0..hits {
        let url = origin.url(&format!("/{}", i % misses));
        assert!(proxy.get(&url, &[]).cache_status().unwrap_or_default().contains("hit"));
    }
    let m = proxy.admin("/metrics").text();
    let name = "crawlcache_request_duration_seconds";
    assert!(m.contains(&format!("# TYPE {name} histogram\n")), "{m}");
    for (outcome, n) in [("hit", hits), ("miss", misses), ("revalidated", 0)] {
        assert_eq!(
            metric_in(&m, &format!("{name}_count{{outcome=\"{outcome}\"}}")),
            n as u64,
            "{m}"
        );
        let prefix = format!("{name}_bucket{{outcome=\"{outcome}\",le=\"");
        let buckets: Vec<(String, u64)> = m
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .map(|rest| {
                let (le, value) =
                    rest.split_once("\"} ").unwrap_or_else(|| panic!("bucket line: {rest}"));
                (
                    le.to_string(),
                    value.parse().unwrap_or_else(|e| panic!("bucket value {value}: {e}")),
                )
            })
            .collect();
        assert!(buckets.len() > 2, "{m}");
        let bounds: Vec<f64> = buckets
            .iter()
            .filter(|(le, _)| le != "+Inf")
            .map(|(le, _)| le.parse().unwrap())
            .collect();
        assert!(bounds.windows(2).all(|w| w[0] < w[1]), "bounds ascending: {bounds:?}");
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative: {buckets:?}");
        assert_eq!(buckets.last(), Some(&("+Inf".to_string(), n as u64)));
        let sum: f64 = m
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}_sum{{outcome=\"{outcome}\"}} ")))
            .unwrap()
            .parse()
            .unwrap();
        assert!(sum >= 0.0 && (n > 0 || sum == 0.0), "{sum}");
    }
    check_exposition(&m);
    let stats: serde_json::Value = serde_json::from_str(&proxy.admin("/stats").text()).unwrap();
    assert_eq!(stats["request_duration_seconds"]["hit"]["count"], hits);

    assert_eq!(proxy.stderr().matches("is the old form").count(), 1, "{}", proxy.stderr_tail(20));
    assert!(
        proxy.log_shows(&format!("GET {} 200 hit ", origin.url("/0")), Duration::from_secs(5)),
        "{}",
        proxy.stderr_tail(20)
    );
}

/// Checks `text` against the Prometheus text format: each sample line is
/// a metric name, optional `{name="value",...}` labels and a float; each
/// family is declared by one `# TYPE` line before its samples; samples of
/// a histogram are its `_bucket` (with `le`), `_sum` and `_count`.
fn check_exposition(text: &str) {
    let is_name = |s: &str| {
        !s.is_empty()
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut types: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("{line}"));
            assert!(
                is_name(name)
                    && ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "family declared twice: {line}"
            );
            continue;
        }
        if line.starts_with('#') {
            assert!(line.starts_with("# HELP "), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert!(
            value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
            "value of {line}"
        );
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').unwrap_or_else(|| panic!("labels of {line}"))),
            None => (series, ""),
        };
        assert!(is_name(name), "{line}");
        let mut label_names = Vec::new();
        let mut rest = labels;
        while !rest.is_empty() {
            let (label, after) =
                rest.split_once("=\"").unwrap_or_else(|| panic!("label in {line}"));
            assert!(is_name(label), "{line}");
            let end = after.find('"').unwrap_or_else(|| panic!("label value in {line}"));
            label_names.push(label);
            rest = after[end + 1..].strip_prefix(',').unwrap_or(&after[end + 1..]);
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .filter(|f| types.get(*f).is_some_and(|k| k == "histogram"));
        match family {
            Some(_) if name.ends_with("_bucket") => assert!(label_names.contains(&"le"), "{line}"),
            Some(_) => {}
            None => {
                assert!(types.contains_key(name), "sample before (or without) its # TYPE: {line}")
            }
        }
    }
}
