//! robots.txt as a first-class resource, through the real proxy against
//! scripted origins on loopback (issue 5, "It must show" items 2-4, and
//! the proxy side of item 1). The window arithmetic itself is tested with
//! an injected clock in `crates/robots/src/snapshot.rs` and `crates/robots/tests/robots_registry.rs`.

mod common;

use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

fn config(mode: &str, extra: &str) -> String {
    format!("[robots]\nmode = \"{mode}\"\n{extra}\n[upstream]\nresponse_timeout = \"2s\"\n")
}

fn start(
    mode: &str,
    extra: &str,
    handler: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
) -> (Origin, Proxy) {
    start_with_origin("robots-proxy", &config(mode, extra), handler)
}

fn robots_requests(origin: &Origin) -> usize {
    origin.requests().iter().filter(|r| r.path() == "/robots.txt").count()
}

fn page_requests(origin: &Origin, path: &str) -> usize {
    origin.requests().iter().filter(|r| r.path() == path).count()
}

fn site(req: &RecordedRequest) -> Reply {
    match req.path() {
        "/robots.txt" => Reply::ok(&[("Content-Type", "text/plain")], ROBOTS.as_bytes()),
        _ => Reply::ok(&[("Cache-Control", "max-age=60")], b"page"),
    }
}

fn audit_lines(data_dir: &std::path::Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let dir = data_dir.join("audit");
    let Ok(rd) = std::fs::read_dir(&dir) else { return out };
    let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            out.push(
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {line}")),
            );
        }
    }
    out
}

/// Waits until the audit log holds at least `n` lines (it is written when
/// each response body is finished).
fn wait_audit(data_dir: &std::path::Path, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lines = audit_lines(data_dir);
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Item 4: in enforce mode a disallowed URL never reaches the origin and the
/// client gets a 403 naming the rule and the robots.txt URL; an allowed one
/// is fetched; both are in the audit trail with the rules' SHA-256.
#[test]
fn enforce_blocks_disallowed_urls_before_the_origin() {
    let (origin, proxy) = start("enforce", "", site);
    let blocked = proxy.get(&origin.url("/private/x"), &[("User-Agent", "ExampleBot/1.0")]);
    assert_eq!(blocked.status, 403, "{}", blocked.describe());
    let text = blocked.text();
    assert!(text.contains("Disallow: /private"), "the body names the rule: {text}");
    assert!(text.contains(&origin.url("/robots.txt")), "the body names the robots.txt URL: {text}");
    assert_eq!(page_requests(&origin, "/private/x"), 0, "the origin never saw the disallowed URL");
    assert!(
        blocked.header("robots-status").unwrap_or("").starts_with("disallowed"),
        "{}",
        blocked.describe()
    );

    let ok = proxy.get(&origin.url("/public"), &[("User-Agent", "ExampleBot/1.0")]);
    assert_eq!((ok.status, ok.text()), (200, "page".to_string()));
    assert_eq!(robots_requests(&origin), 1, "first sight fetched robots.txt once");

    let lines = wait_audit(proxy.data_dir(), 2);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let sha = sha256_hex(ROBOTS.as_bytes());
    for l in &lines {
        assert_eq!(
            l["robots_sha256"],
            sha.as_str(),
            "every audit line carries the SHA-256 of the rules: {l}"
        );
        assert_eq!(l["agent"], "ExampleBot");
    }
    assert_eq!(lines[0]["verdict"], "disallowed");
    assert_eq!(lines[0]["rule"], "Disallow: /private");
    assert_eq!(lines[0]["disposition"], "fetched", "the first request waited for the first fetch");
    assert_eq!(lines[1]["verdict"], "allowed");
    assert_eq!(lines[1]["upstream_status"], 200);

    let skips = crawlcache_cmd(
        &["audit", "skips", "--data-dir", &proxy.data_dir().display().to_string()],
        Duration::from_secs(20),
    );
    let out = String::from_utf8_lossy(&skips.stdout);
    assert_eq!(out.lines().count(), 1, "audit skips lists exactly the disallowed request: {out}");
    assert!(
        out.contains("/private/x") && out.contains("  rule \"") && !out.starts_with('{'),
        "a line for people: {out}"
    );
    let json = crawlcache_cmd(
        &["audit", "skips", "--json", "--data-dir", &proxy.data_dir().display().to_string()],
        Duration::from_secs(20),
    );
    let line: serde_json::Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&json.stdout)));
    assert!(line["url"].as_str().is_some_and(|u| u.ends_with("/private/x")), "{line}");
}

/// Item 4: annotate mode fetches a disallowed URL, and both the header and
/// the audit line carry the verdict.
#[test]
fn annotate_fetches_and_records_the_verdict() {
    let (origin, proxy) = start("annotate", "", site);
    let r = proxy.get(&origin.url("/private/y"), &[("User-Agent", "ExampleBot/1.0")]);
    assert_eq!((r.status, r.text()), (200, "page".to_string()));
    assert_eq!(page_requests(&origin, "/private/y"), 1);
    let h = r.header("robots-status").unwrap_or("").to_string();
    assert!(
        h.starts_with("disallowed") && h.contains("Disallow: /private") && h.contains("line=2"),
        "{h}"
    );
    assert!(h.contains(&sha256_hex(ROBOTS.as_bytes())), "{h}");
    let lines = wait_audit(proxy.data_dir(), 1);
    assert_eq!(lines[0]["verdict"], "disallowed");
    assert_eq!(lines[0]["line"], 2);
}

/// A client's own GET of robots.txt is answered from the snapshot: the body
/// when fetched, 404 when absent, 503 when unavailable.
#[test]
fn client_robots_txt_is_answered_from_the_snapshot() {
    let (origin, proxy) = start("annotate", "", site);
    let r = proxy.get(&origin.url("/robots.txt"), &[]);
    assert_eq!((r.status, r.text()), (200, ROBOTS.to_string()));
    let r = proxy.get(&origin.url("/robots.txt"), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(robots_requests(&origin), 1, "the second answer came from the snapshot");

    let (o404, p404) = start("annotate", "", |_| Reply::new(404, &[], b"nope"));
    assert_eq!(p404.get(&o404.url("/robots.txt"), &[]).status, 404);
    let (o503, p503) = start("annotate", "", |_| Reply::new(503, &[], b"down"));
    assert_eq!(p503.get(&o503.url("/robots.txt"), &[]).status, 503);
}

/// Item 3: fetch outcomes at first sight, in enforce mode: 200 applies the
/// rules; 404, 410 and 403 allow everything; 429, 500 and 503 disallow
/// everything.
#[test]
fn fetch_outcomes_at_first_sight() {
    for (status, allowed) in
        [(404, true), (410, true), (403, true), (429, false), (500, false), (503, false)]
    {
        let (origin, proxy) = start("enforce", "", move |req| match req.path() {
            "/robots.txt" => Reply::new(status, &[("Retry-After", "120")], b"robots says no"),
            _ => Reply::ok(&[], b"page"),
        });
        let r = proxy.get(&origin.url("/anything"), &[("User-Agent", "ExampleBot")]);
        if allowed {
            assert_eq!(r.status, 200, "robots.txt {status}: everything allowed: {}", r.describe());
            assert_eq!(page_requests(&origin, "/anything"), 1);
        } else {
            assert_eq!(
                r.status,
                403,
                "robots.txt {status}: everything disallowed: {}",
                r.describe()
            );
            assert_eq!(
                page_requests(&origin, "/anything"),
                0,
                "robots.txt {status}: the page is never fetched"
            );
        }
    }
}

/// Item 3: an origin that refuses connections, or whose robots.txt times
/// out, is disallowed at first sight.
#[test]
fn unreachable_or_slow_robots_means_disallow_all() {
    let dir = TestDir::new("robots-proxy");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &config("enforce", ""), &[]);
    let dead = format!("http://127.0.0.1:{}/page", free_port());
    let r = proxy.get(&dead, &[("User-Agent", "ExampleBot")]);
    assert_eq!(r.status, 403, "connection refused: {}", r.describe());
    assert!(r.text().contains("could not be fetched"), "{}", r.text());

    let origin = Origin::start(|req| match req.path() {
        "/robots.txt" => {
            Reply::ok(&[], b"User-agent: *\nAllow: /\n").delayed(Duration::from_secs(4))
        }
        _ => Reply::ok(&[], b"page"),
    });
    let r = proxy.get(&origin.url("/page"), &[("User-Agent", "ExampleBot")]);
    assert_eq!(r.status, 403, "robots.txt timed out (response_timeout 2s): {}", r.describe());
    assert_eq!(page_requests(&origin, "/page"), 0);
}

/// Item 3: five redirects within the host are followed (a sixth is C55,
/// below); one to another host under the opt-in `same-host` makes the
/// rules unavailable and says `redirect refused`.
#[test]
fn redirects_within_the_host_are_followed_up_to_five() {
    let hops = |n: usize| {
        move |req: &RecordedRequest| {
            let p = req.path().to_string();
            if p == "/robots.txt" {
                return Reply::new(301, &[("Location", "/r1")], b"");
            }
            if let Some(i) = p.strip_prefix("/r").and_then(|i| i.parse::<usize>().ok()) {
                if i < n {
                    return Reply::new(302, &[("Location", &format!("/r{}", i + 1))], b"");
                }
                return Reply::ok(&[], b"User-agent: *\nDisallow: /x\n");
            }
            Reply::ok(&[], b"page")
        }
    };
    // 5 hops: /robots.txt -> r1 -> r2 -> r3 -> r4 -> r5 (rules)
    let (origin, proxy) = start("enforce", "", hops(5));
    assert_eq!(
        proxy.get(&origin.url("/x"), &[("User-Agent", "ExampleBot")]).status,
        403,
        "rules from the 5th hop apply"
    );
    assert_eq!(proxy.get(&origin.url("/y"), &[("User-Agent", "ExampleBot")]).status, 200);
    // Cross-host redirect under same-host (opt-in since C49).
    let (ox, px) = start("enforce", "redirects = \"same-host\"", |req| match req.path() {
        "/robots.txt" => Reply::new(301, &[("Location", "http://localhost:9/robots.txt")], b""),
        _ => Reply::ok(&[], b"page"),
    });
    let r = px.get(&ox.url("/y"), &[("User-Agent", "ExampleBot")]);
    assert_eq!(r.status, 403, "a redirect to another host is not followed: {}", r.describe());
    assert!(
        r.header("robots-status").unwrap_or("").contains("rule=\"redirect refused\""),
        "{}",
        r.describe()
    );
}

/// C55: a robots.txt behind a redirect loop, or behind six redirects
/// (ending in a file with `Disallow: /private/`), is given up as `absent`
/// (RFC 9309 section 2.3.1.2; Google: like a 404): under `enforce`, `/page`
/// and `/private/x` are both served, `Robots-Status` and the audit line say
/// why (the loop or the limit, and the chain), the repeated URL and the
/// sixth target are never requested, and `robots show` says so too.
#[test]
fn robots_txt_past_five_redirects_or_in_a_loop_is_absent_and_says_why_c55() {
    let ua = [("User-Agent", "ExampleBot/1.0")];
    let (looped, proxy) = start("enforce", "", |req| match req.path() {
        "/robots.txt" => Reply::new(301, &[("Location", "/robots-a.txt")], b""),
        "/robots-a.txt" => Reply::new(301, &[("Location", "/robots-b.txt")], b""),
        "/robots-b.txt" => Reply::new(301, &[("Location", "/robots-a.txt")], b""),
        _ => Reply::ok(&[], b"page"),
    });
    let chain = [
        looped.url("/robots.txt"),
        looped.url("/robots-a.txt"),
        looped.url("/robots-b.txt"),
        looped.url("/robots-a.txt"),
    ]
    .join(" -> ");
    let r = proxy.get(&looped.url("/page"), &ua);
    assert_eq!((r.status, r.text()), (200, "page".to_string()), "{}", r.describe());
    let rs = r.header("robots-status").unwrap_or("").to_string();
    assert!(rs.starts_with("allowed; rule=\"redirect loop\""), "{rs}");
    assert!(
        rs.contains(&format!("reason=\"a redirect loop: {chain};")),
        "the chain is named: {rs}"
    );
    let r = proxy.get(&looped.url("/private/x"), &ua);
    assert_eq!(r.status, 200, "absent: everything allowed: {}", r.describe());
    let asked: Vec<String> = looped.requests().iter().map(|q| q.path().to_string()).collect();
    assert_eq!(
        asked,
        ["/robots.txt", "/robots-a.txt", "/robots-b.txt", "/page", "/private/x"],
        "the loop was seen without asking /robots-a.txt again"
    );
    let lines = wait_audit(proxy.data_dir(), 2);
    assert_eq!(
        (lines[0]["verdict"].as_str(), lines[0]["rule"].as_str()),
        (Some("allowed"), Some("redirect loop")),
        "{}",
        lines[0]
    );
    assert!(lines[0]["robots_warning"].as_str().unwrap_or("").contains(&chain), "{}", lines[0]);

    let (six, proxy6) = start("enforce", "", |req| {
        let p = req.path();
        match p.strip_prefix("/r").and_then(|i| i.parse::<usize>().ok()) {
            _ if p == "/robots.txt" => Reply::new(301, &[("Location", "/r1")], b""),
            Some(i) if i < 6 => Reply::new(302, &[("Location", &format!("/r{}", i + 1))], b""),
            Some(_) => Reply::ok(&[], C40_RULES.as_bytes()),
            None => Reply::ok(&[], b"page"),
        }
    });
    let r = proxy6.get(&six.url("/page"), &ua);
    assert_eq!((r.status, r.text()), (200, "page".to_string()), "{}", r.describe());
    let rs = r.header("robots-status").unwrap_or("").to_string();
    assert!(rs.starts_with("allowed; rule=\"redirect limit\""), "{rs}");
    let chain6 = format!(
        "{} -> {}",
        six.url("/robots.txt"),
        (1..=6).map(|i| six.url(&format!("/r{i}"))).collect::<Vec<_>>().join(" -> ")
    );
    assert!(rs.contains(&format!("reason=\"more than 5 redirects: {chain6};")), "{rs}");
    assert_eq!(
        proxy6.get(&six.url("/private/x"), &ua).status,
        200,
        "the sixth target's Disallow: /private/ never applies"
    );
    assert_eq!(page_requests(&six, "/r6"), 0, "the sixth target is never requested");
    let lines = wait_audit(proxy6.data_dir(), 2);
    assert_eq!(lines[1]["rule"], "redirect limit", "{}", lines[1]);
    assert!(lines[1]["robots_warning"].as_str().unwrap_or("").contains(&chain6), "{}", lines[1]);
    let shown = robots_show(&proxy6, &format!("http://127.0.0.1:{}", six.port()));
    assert!(
        shown.contains("status:        absent")
            && shown.contains("why:           more than 5 redirects"),
        "{shown}"
    );
}

/// A rule whose bytes are not UTF-8 (`Disallow: /caf\xE9`, Latin-1) is
/// named by its octets as the file has them, percent-encoded (`/caf%E9`),
/// in the refusal, `Robots-Status` and the audit line: never by a
/// replacement character.
#[test]
fn a_rule_that_is_not_utf8_is_named_percent_encoded_as_the_file_has_it() {
    let (origin, proxy) = start("enforce", "", |req| match req.path() {
        "/robots.txt" => Reply::ok(
            &[("Content-Type", "text/plain; charset=iso-8859-1")],
            b"User-agent: *\nDisallow: /caf\xe9\n",
        ),
        _ => Reply::ok(&[], b"page"),
    });
    let r = proxy.get(&origin.url("/caf%E9/menu"), &[("User-Agent", "ExampleBot/1.0")]);
    assert_eq!(r.status, 403, "{}", r.describe());
    assert!(r.text().contains("rule `Disallow: /caf%E9` (line 2)"), "{}", r.text());
    assert!(
        r.header("robots-status")
            .unwrap_or("")
            .starts_with("disallowed; rule=\"Disallow: /caf%E9\"; line=2"),
        "{}",
        r.describe()
    );
    let lines = wait_audit(proxy.data_dir(), 1);
    assert_eq!(lines[0]["rule"], "Disallow: /caf%E9", "{}", lines[0]);
}

/// Item 2: only the first sight waits; after the fresh window, 20
/// concurrent requests cause exactly one background robots fetch, and all
/// of them are answered before that fetch completes.
#[test]
fn stale_rules_are_refreshed_once_in_the_background() {
    let fetches = Arc::new(AtomicUsize::new(0));
    let slow_done: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (f2, s2) = (fetches.clone(), slow_done.clone());
    let (origin, proxy) = start(
        "enforce",
        "fresh = \"1s\"\nstale_usable = \"30s\"\nhard_max = \"60s\"",
        move |req| match req.path() {
            "/robots.txt" => {
                let n = f2.fetch_add(1, Ordering::SeqCst);
                if n == 0 {
                    Reply::ok(&[("ETag", "\"r1\"")], ROBOTS.as_bytes())
                } else {
                    // The refresh is slow; record roughly when it will end.
                    *s2.lock().unwrap() = Some(Instant::now() + Duration::from_millis(1500));
                    Reply::ok(&[("ETag", "\"r1\"")], ROBOTS.as_bytes())
                        .delayed(Duration::from_millis(1500))
                }
            }
            _ => Reply::ok(&[("Cache-Control", "max-age=60")], b"page"),
        },
    );
    assert_eq!(proxy.get(&origin.url("/a"), &[("User-Agent", "ExampleBot")]).status, 200);
    assert_eq!(robots_requests(&origin), 1, "first sight: one fetch");
    std::thread::sleep(Duration::from_millis(1300));
    let addr = proxy.addr();
    let url = origin.url("/a");
    let handles: Vec<_> = (0..20)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let r = proxy_get(addr, &url, &[("User-Agent", "ExampleBot")]);
                (r.status, Instant::now())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().expect("client thread")).collect();
    // The refresh runs in the background: it may reach the origin only
    // after every answer went out (it is a task of the serving thread that
    // saw the stale rules first, queued behind that thread's requests).
    let waited = Instant::now();
    while slow_done.lock().unwrap().is_none() && waited.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let refresh_end = slow_done.lock().unwrap().expect("a background refresh was made");
    for (status, at) in &results {
        assert_eq!(*status, 200);
        assert!(
            *at < refresh_end,
            "every request was answered before the background refresh finished"
        );
    }
    origin.wait_for_requests(2, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(1700));
    assert_eq!(robots_requests(&origin), 2, "exactly one background refresh for 20 requests");
    let reqs = origin.requests();
    let refresh = reqs.iter().filter(|r| r.path() == "/robots.txt").nth(1).expect("the refresh");
    assert_eq!(refresh.header("if-none-match"), Some("\"r1\""), "refreshes are conditional");
}

/// Item 1 (proxy side): once the snapshot is past its hard maximum and the
/// origin's robots.txt keeps failing, enforce mode answers 503 "rules too old".
#[test]
fn expired_rules_block_the_host_in_enforce_mode() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let (origin, proxy) =
        start("enforce", "fresh = \"1s\"\nstale_usable = \"2s\"\nhard_max = \"3s\"\nretry_initial = \"100ms\"\nretry_max = \"200ms\"", move |req| {
            match req.path() {
                "/robots.txt" if n2.fetch_add(1, Ordering::SeqCst) == 0 => Reply::ok(&[], ROBOTS.as_bytes()),
                "/robots.txt" => Reply::new(500, &[], b"broken"),
                _ => Reply::ok(&[("Cache-Control", "no-store")], b"page"),
            }
        });
    assert_eq!(proxy.get(&origin.url("/a"), &[("User-Agent", "ExampleBot")]).status, 200);
    std::thread::sleep(Duration::from_millis(1500));
    // Stale but inside its windows: the old rules are kept despite the 500.
    assert_eq!(
        proxy.get(&origin.url("/a"), &[("User-Agent", "ExampleBot")]).status,
        200,
        "the previous snapshot is kept"
    );
    std::thread::sleep(Duration::from_millis(2000));
    let r = proxy.get(&origin.url("/a"), &[("User-Agent", "ExampleBot")]);
    assert_eq!(r.status, 503, "{}", r.describe());
    assert!(r.text().contains("rules too old"), "{}", r.text());
}

/// Snapshots survive a restart: no new robots.txt fetch after it.
#[test]
fn snapshots_survive_a_restart() {
    let (origin, proxy) = start("enforce", "", site);
    assert_eq!(proxy.get(&origin.url("/private/1"), &[("User-Agent", "ExampleBot")]).status, 403);
    // Beside the data directory, in the folder the proxy owns.
    let again = proxy.data_dir().parent().expect("the data directory's folder").join("again.toml");
    std::fs::write(&again, config("enforce", "")).expect("config");
    let proxy = proxy.restart(&["--config", &again.display().to_string()]);
    assert_eq!(proxy.get(&origin.url("/private/2"), &[("User-Agent", "ExampleBot")]).status, 403);
    assert_eq!(robots_requests(&origin), 1, "the persisted snapshot was used after the restart");
    let show = crawlcache_cmd(
        &[
            "robots",
            "show",
            "--data-dir",
            &proxy.data_dir().display().to_string(),
            &format!("http://127.0.0.1:{}", origin.port()),
        ],
        Duration::from_secs(20),
    );
    let out = String::from_utf8_lossy(&show.stdout);
    assert!(
        out.contains("status:        fetched") && out.contains("Disallow: /private"),
        "robots show: {out}"
    );
}

fn sha256_hex(b: &[u8]) -> String {
    crawlcache_robots::snapshot::sha256_hex(b)
}

// ---- issue 10: C40 compressed robots.txt, C43 fetch identity, C44
// offline, C49 redirects across hosts ----

const C40_RULES: &str = "User-agent: *\nDisallow: /private/\n";

fn gzip(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn brotli(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        w.write_all(b).unwrap();
    }
    out
}

fn robots_show(proxy: &Proxy, origin: &str) -> String {
    let show = crawlcache_cmd(
        &["robots", "show", "--data-dir", &proxy.data_dir().display().to_string(), origin],
        Duration::from_secs(20),
    );
    String::from_utf8_lossy(&show.stdout).into_owned()
}

/// C40: a robots.txt sent gzip- or br-coded (also stacked) is decoded
/// before parsing: 403 naming `Disallow: /private/` (line 2); the client's
/// own `/robots.txt` gets the decoded text without `Content-Encoding`; the
/// audit SHA-256 is of the decoded text; one robots.txt request.
#[test]
fn compressed_robots_txt_is_enforced_and_served_decoded_c40() {
    for (coding, body) in
        [("gzip", gzip(C40_RULES.as_bytes())), ("gzip, br", brotli(&gzip(C40_RULES.as_bytes())))]
    {
        let (origin, proxy) = start("enforce", "", move |req| match req.path() {
            "/robots.txt" => {
                Reply::ok(&[("Content-Type", "text/plain"), ("Content-Encoding", coding)], &body)
            }
            _ => Reply::ok(&[("Cache-Control", "max-age=60")], b"page"),
        });
        let r = proxy.get(&origin.url("/private/x"), &[("User-Agent", "examplebot/1.0")]);
        assert_eq!(r.status, 403, "{coding}: {}", r.describe());
        assert!(
            r.text().contains("Disallow: /private/") && r.text().contains("line 2"),
            "{coding}: {}",
            r.text()
        );
        assert_eq!(page_requests(&origin, "/private/x"), 0);
        let ok = proxy.get(&origin.url("/public"), &[("User-Agent", "examplebot/1.0")]);
        assert_eq!((ok.status, ok.text()), (200, "page".to_string()), "{coding}");
        let own = proxy.get(
            &origin.url("/robots.txt"),
            &[("User-Agent", "examplebot/1.0"), ("Accept-Encoding", "gzip, br")],
        );
        assert_eq!(
            (own.status, own.text()),
            (200, C40_RULES.to_string()),
            "{coding}: {}",
            own.describe()
        );
        assert_eq!(
            own.header("content-encoding"),
            None,
            "{coding}: decoded text is never labelled as coded"
        );
        assert_eq!(robots_requests(&origin), 1, "{coding}");
        let ae = origin
            .requests()
            .iter()
            .find(|q| q.path() == "/robots.txt")
            .and_then(|q| q.header("accept-encoding").map(str::to_string));
        assert_eq!(ae.as_deref(), Some("gzip, deflate, br"), "{coding}");
        let lines = wait_audit(proxy.data_dir(), 3);
        assert_eq!(
            lines[0]["robots_sha256"],
            sha256_hex(C40_RULES.as_bytes()).as_str(),
            "{coding}: {}",
            lines[0]
        );
        assert_eq!(lines[0]["rule"], "Disallow: /private/");
        let shown = robots_show(&proxy, &format!("http://127.0.0.1:{}", origin.port()));
        assert!(
            shown.contains(&format!("coding:        {coding} (decoded"))
                && shown.contains("Disallow: /private/"),
            "{shown}"
        );
    }
}

/// C40: an unknown coding, or plain text labelled gzip, is a failed fetch:
/// everything disallowed (403 naming the coding), `/robots.txt` itself 503,
/// never the coded bytes as rules.
#[test]
fn undecodable_robots_txt_disallows_everything_c40() {
    for (coding, body) in
        [("zstd-x", C40_RULES.as_bytes().to_vec()), ("gzip", C40_RULES.as_bytes().to_vec())]
    {
        let (origin, proxy) = start("enforce", "", move |req| match req.path() {
            "/robots.txt" => {
                Reply::ok(&[("Content-Type", "text/plain"), ("Content-Encoding", coding)], &body)
            }
            _ => Reply::ok(&[], b"page"),
        });
        let r = proxy.get(&origin.url("/public"), &[("User-Agent", "examplebot/1.0")]);
        assert_eq!(r.status, 403, "{coding}: {}", r.describe());
        assert!(
            r.text().contains("could not be fetched") && r.text().contains(&format!("`{coding}`")),
            "{coding}: {}",
            r.text()
        );
        assert!(
            r.header("robots-status").unwrap_or("").contains("rule=\"rules unavailable\""),
            "{}",
            r.describe()
        );
        assert_eq!(page_requests(&origin, "/public"), 0);
        let own = proxy.get(&origin.url("/robots.txt"), &[]);
        assert_eq!(own.status, 503, "{coding}: {}", own.describe());
        assert_eq!(robots_requests(&origin), 1, "{coding}: the retry waits for the back-off");
    }
}

/// C43: with `robots.agent = "examplebot"` the robots.txt is fetched under
/// the crawler's own User-Agent, so an origin that refuses other clients
/// serves the crawler's rules; the identity is in the audit line and
/// `robots show`.
#[test]
fn robots_txt_is_fetched_under_the_crawlers_identity_c43() {
    let ua = "examplebot/1.0 (+http://example.org/bot)";
    let (origin, proxy) = start("enforce", "agent = \"examplebot\"", |req| match req.path() {
        "/robots.txt" if req.header("user-agent").unwrap_or("").contains("examplebot") => {
            Reply::ok(&[], C40_RULES.as_bytes())
        }
        "/robots.txt" => {
            Reply::new(403, &[("Content-Type", "text/html")], b"<h1>unknown client</h1>")
        }
        _ => Reply::ok(&[], b"page"),
    });
    let r = proxy.get(&origin.url("/private/x"), &[("User-Agent", ua)]);
    assert_eq!(r.status, 403, "{}", r.describe());
    assert!(r.text().contains("Disallow: /private/"), "{}", r.text());
    let sent: Vec<String> = origin
        .requests()
        .iter()
        .filter(|q| q.path() == "/robots.txt")
        .map(|q| q.header("user-agent").unwrap_or("").to_string())
        .collect();
    assert_eq!(sent, [ua]);
    assert_eq!(page_requests(&origin, "/private/x"), 0);
    let lines = wait_audit(proxy.data_dir(), 1);
    assert_eq!(lines[0]["robots_fetched_as"], ua, "{}", lines[0]);
    assert!(lines[0]["robots_warning"].is_null(), "{}", lines[0]);
    let shown = robots_show(&proxy, &format!("http://127.0.0.1:{}", origin.port()));
    assert!(shown.contains(&format!("fetched as:    {ua}")), "{shown}");
}

/// C43: a 401/403 on robots.txt (allow-all by RFC 9309 §2.3.1.3) is flagged
/// with the identity it was fetched as, in the audit line and `robots
/// show`; `robots.user_agent` is what is sent when set.
#[test]
fn a_403_robots_txt_is_flagged_with_the_identity_c43() {
    let (origin, proxy) =
        start("enforce", "user_agent = \"MyCrawler/2.0 (+http://example.org)\"", |req| {
            match req.path() {
                "/robots.txt" => {
                    Reply::new(403, &[("Content-Type", "text/html")], b"<h1>unknown client</h1>")
                }
                _ => Reply::ok(&[], b"page"),
            }
        });
    let r = proxy.get(&origin.url("/private/x"), &[("User-Agent", "examplebot/1.0")]);
    assert_eq!(r.status, 200, "403 on robots.txt: everything allowed: {}", r.describe());
    let sent = origin
        .requests()
        .iter()
        .find(|q| q.path() == "/robots.txt")
        .and_then(|q| q.header("user-agent").map(str::to_string));
    assert_eq!(sent.as_deref(), Some("MyCrawler/2.0 (+http://example.org)"));
    let want = "robots.txt answered 403 to MyCrawler/2.0 (+http://example.org): rules treated as allow-all (RFC 9309 2.3.1.3); check the crawler's identity";
    let lines = wait_audit(proxy.data_dir(), 1);
    assert_eq!(lines[0]["robots_warning"], want, "{}", lines[0]);
    assert_eq!(lines[0]["robots_fetched_as"], "MyCrawler/2.0 (+http://example.org)");
    let shown = robots_show(&proxy, &format!("http://127.0.0.1:{}", origin.port()));
    assert!(shown.contains(want) && shown.contains("http status:   403"), "{shown}");
}

/// C44: offline, stored URLs are judged against the last snapshot whatever
/// its age (past `hard_max` here): 200 from the cache with
/// `disposition=offline` and the snapshot's SHA-256; a URL it disallows
/// still gets 403; nothing reaches the origin.
#[test]
fn offline_replay_uses_the_last_snapshot_whatever_its_age_c44() {
    let windows = "fresh = \"1s\"\nstale_usable = \"2s\"\nhard_max = \"3s\"";
    let (origin, proxy) = start("enforce", windows, |req| match req.path() {
        "/robots.txt" => Reply::ok(&[], C40_RULES.as_bytes()),
        _ => Reply::ok(&[("Cache-Control", "max-age=600")], b"page"),
    });
    assert_eq!(proxy.get(&origin.url("/a"), &[("User-Agent", "examplebot/1.0")]).status, 200);
    assert_eq!(
        proxy.get(&origin.url("/private/x"), &[("User-Agent", "examplebot/1.0")]).status,
        403
    );
    let before = origin.request_count();
    let again =
        proxy.data_dir().parent().expect("the data directory's folder").join("offline.toml");
    std::fs::write(&again, config("enforce", windows)).expect("config");
    let again = again.display().to_string();
    std::thread::sleep(Duration::from_secs(5));
    let proxy = proxy.restart(&["--config", &again, "--offline"]);
    let r = proxy.get(&origin.url("/a"), &[("User-Agent", "examplebot/1.0")]);
    assert_eq!((r.status, r.text()), (200, "page".to_string()), "{}", r.describe());
    let rs = r.header("robots-status").unwrap_or("").to_string();
    assert!(rs.starts_with("allowed") && rs.contains("disposition=offline"), "{rs}");
    assert!(rs.contains(&sha256_hex(C40_RULES.as_bytes())), "{rs}");
    let blocked = proxy.get(&origin.url("/private/x"), &[("User-Agent", "examplebot/1.0")]);
    assert_eq!(blocked.status, 403, "{}", blocked.describe());
    assert!(blocked.text().contains("Disallow: /private/"), "{}", blocked.text());
    assert_eq!(origin.request_count(), before, "offline: nothing reaches the origin");
    let lines = wait_audit(proxy.data_dir(), 4);
    let offline: Vec<_> = lines.iter().filter(|l| l["disposition"] == "offline").collect();
    assert_eq!(offline.len(), 2, "{lines:#?}");
    assert_eq!(offline[0]["verdict"], "allowed");
    assert_eq!(offline[1]["verdict"], "disallowed");
}

/// C49: by default a robots.txt redirected from one host to another (apex
/// → www) is followed; the rules apply to the original origin and the chain
/// is recorded. Under the opt-in `same-host` the hop is refused, the other
/// host never contacted, and the verdict says `redirect refused`.
#[test]
fn apex_to_www_redirect_is_followed_by_default_c49() {
    let www = Origin::start(|req| match req.path() {
        "/robots.txt" => Reply::ok(&[], C40_RULES.as_bytes()),
        _ => Reply::ok(&[], b"www page"),
    });
    let www_robots = format!("http://localhost:{}/robots.txt", www.port());
    let target = www_robots.clone();
    let (apex, proxy) = start("enforce", "", move |req| match req.path() {
        "/robots.txt" => Reply::new(301, &[("Location", &target)], b""),
        _ => Reply::ok(&[], b"page"),
    });
    let r = proxy.get(&apex.url("/public"), &[("User-Agent", "examplebot/1.0")]);
    assert_eq!((r.status, r.text()), (200, "page".to_string()), "{}", r.describe());
    let r = proxy.get(&apex.url("/private/x"), &[("User-Agent", "examplebot/1.0")]);
    assert_eq!(r.status, 403, "{}", r.describe());
    assert!(r.text().contains("Disallow: /private/"), "{}", r.text());
    assert_eq!(
        (robots_requests(&apex), robots_requests(&www), page_requests(&apex, "/private/x")),
        (1, 1, 0)
    );
    let shown = robots_show(&proxy, &format!("http://127.0.0.1:{}", apex.port()));
    assert!(
        shown.contains(&format!("  -> {www_robots}")) && shown.contains("status:        fetched"),
        "{shown}"
    );

    let target = www_robots.clone();
    let (apex2, proxy2) =
        start("enforce", "redirects = \"same-host\"", move |req| match req.path() {
            "/robots.txt" => Reply::new(301, &[("Location", &target)], b""),
            _ => Reply::ok(&[], b"page"),
        });
    let r = proxy2.get(&apex2.url("/public"), &[("User-Agent", "examplebot/1.0")]);
    assert_eq!(r.status, 403, "{}", r.describe());
    assert!(
        r.header("robots-status").unwrap_or("").contains("rule=\"redirect refused\""),
        "{}",
        r.describe()
    );
    assert!(
        r.text().contains("redirect of the robots.txt was refused")
            && r.text().contains(&www_robots),
        "{}",
        r.text()
    );
    assert_eq!(robots_requests(&www), 1, "the refused destination is never contacted");
    let lines = wait_audit(proxy2.data_dir(), 1);
    assert_eq!(lines[0]["rule"], "redirect refused");
    let shown = robots_show(&proxy2, &format!("http://127.0.0.1:{}", apex2.port()));
    assert!(shown.contains(&format!("refused:       {www_robots}")), "{shown}");
}

/// Fresh rules are remembered by each serving thread between requests;
/// a refresh (`POST /robots/refresh`) that brings new rules applies to the
/// very next request, on every connection, never the remembered old ones.
#[test]
fn new_rules_from_a_refresh_apply_at_once_on_every_connection() {
    let robots = Arc::new(Mutex::new(String::from("User-agent: *\nDisallow: /a\n")));
    let r = robots.clone();
    let (origin, proxy) = start("annotate", "", move |req| match req.path() {
        "/robots.txt" => Reply::ok(&[("Content-Type", "text/plain")], r.lock().unwrap().as_bytes()),
        _ => Reply::ok(&[("Cache-Control", "max-age=60")], b"page"),
    });
    let verdict = |c: &mut Conn, path: &str| {
        let resp = c.send("GET", &origin.url(path), &[("User-Agent", "ExampleBot/1.0")], b"");
        resp.header("robots-status").unwrap_or("").split(';').next().unwrap_or("").to_string()
    };
    let mut conns: Vec<Conn> = (0..4).map(|_| Conn::open(proxy.addr())).collect();
    for c in conns.iter_mut() {
        for _ in 0..3 {
            assert_eq!(verdict(c, "/a"), "disallowed");
            assert_eq!(verdict(c, "/b"), "allowed");
        }
    }
    *robots.lock().unwrap() = String::from("User-agent: *\nDisallow: /b\n");
    let mut admin = Conn::open(proxy.addr());
    let refreshed = admin.send("POST", "/robots/refresh", &[], b"");
    assert_eq!(refreshed.status, 200, "{}", refreshed.describe());
    for c in conns.iter_mut() {
        assert_eq!(verdict(c, "/a"), "allowed", "the refreshed rules apply at once");
        assert_eq!(verdict(c, "/b"), "disallowed");
    }
    assert_eq!(robots_requests(&origin), 2);
}
