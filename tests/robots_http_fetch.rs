//! The robots.txt fetcher over the real upstream client, against a local
//! origin whose responses the test scripts; and the registry on top of it
//! in real time with short windows (issue 5, "It must show" 2 and 3).

use crawlcache::robots::http_fetch::UpstreamRobotsFetch;
use crawlcache_robots::enforce::{Action, RobotsCheck};
use crawlcache_robots::fetch::{FetchError, RedirectPolicy, RobotsFetch};
use crawlcache_robots::registry::RobotsRegistry;
use crawlcache_robots::settings::{RobotsConfig, RobotsMode};
use crawlcache_robots::snapshot::{
    Disposition, Origin, RobotsStatus, Validators, MAX_ROBOTS_BYTES,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One scripted answer: raw bytes after a delay, or no answer at all.
#[derive(Clone)]
enum Reply {
    Raw(Vec<u8>, Duration),
    Hang,
}

/// A local origin: answers each path from its script (404 otherwise) and
/// logs every request head.
#[derive(Clone, Default)]
struct LocalOrigin {
    script: Arc<Mutex<HashMap<String, Reply>>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl LocalOrigin {
    async fn start() -> (LocalOrigin, u16) {
        let o = LocalOrigin::default();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = o.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let me = me.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).to_string();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    me.log.lock().unwrap().push(head);
                    let reply = me.script.lock().unwrap().get(&path).cloned();
                    match reply {
                        Some(Reply::Hang) => tokio::time::sleep(Duration::from_secs(3600)).await,
                        Some(Reply::Raw(bytes, delay)) => {
                            tokio::time::sleep(delay).await;
                            let _ = sock.write_all(&bytes).await;
                        }
                        None => {
                            let _ = sock.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                        }
                    }
                    let _ = sock.shutdown().await;
                });
            }
        });
        (o, port)
    }

    fn set(&self, path: &str, status: &str, headers: &[(&str, &str)], body: &[u8]) {
        self.set_delayed(path, status, headers, body, Duration::ZERO);
    }

    fn set_delayed(
        &self,
        path: &str,
        status: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        delay: Duration,
    ) {
        let mut r =
            format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
        for (k, v) in headers {
            r.push_str(&format!("{k}: {v}\r\n"));
        }
        r.push_str("\r\n");
        let mut bytes = r.into_bytes();
        bytes.extend_from_slice(body);
        self.script.lock().unwrap().insert(path.to_string(), Reply::Raw(bytes, delay));
    }

    fn hang(&self, path: &str) {
        self.script.lock().unwrap().insert(path.to_string(), Reply::Hang);
    }

    fn requests_for(&self, path: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|h| h.split_whitespace().nth(1) == Some(path))
            .cloned()
            .collect()
    }
}

fn fetcher(response_timeout: Duration) -> UpstreamRobotsFetch {
    let tls = crawlcache::upstream::upstream_client_config(None).unwrap();
    let up = crawlcache::upstream::origin::Upstream::new(
        tls,
        Duration::from_secs(2),
        response_timeout,
        Duration::from_secs(30),
    );
    UpstreamRobotsFetch::new(up, "crawlcache-test/1.0", response_timeout, MAX_ROBOTS_BYTES)
}

const RULES: &str = "User-agent: *\nDisallow: /private\n";

#[tokio::test]
async fn responses_headers_and_conditional_requests() {
    let (origin, port) = LocalOrigin::start().await;
    let f = fetcher(Duration::from_secs(5));
    let url = format!("http://127.0.0.1:{port}/robots.txt");
    origin.set(
        "/robots.txt",
        "200 OK",
        &[("ETag", "\"v1\""), ("Last-Modified", "Sun, 29 Nov 2026 00:00:00 GMT")],
        RULES.as_bytes(),
    );
    let r = f.fetch(&url, None, "").await.unwrap();
    assert_eq!((r.status, r.body.as_slice(), r.truncated), (200, RULES.as_bytes(), false));
    assert_eq!(r.etag.as_deref(), Some("\"v1\""));
    assert_eq!(r.last_modified.as_deref(), Some("Sun, 29 Nov 2026 00:00:00 GMT"));

    origin.set("/robots.txt", "304 Not Modified", &[("ETag", "\"v1\"")], b"");
    let v = Validators {
        etag: Some("\"v1\"".into()),
        last_modified: Some("Sun, 29 Nov 2026 00:00:00 GMT".into()),
    };
    let r = f.fetch(&url, Some(v), "").await.unwrap();
    assert_eq!(r.status, 304);
    let head = origin.requests_for("/robots.txt").pop().unwrap().to_ascii_lowercase();
    assert!(head.contains("if-none-match: \"v1\""), "{head}");
    assert!(head.contains("if-modified-since: sun, 29 nov 2026 00:00:00 gmt"), "{head}");
    assert!(head.contains("user-agent: crawlcache-test/1.0"), "{head}");

    origin.set("/robots.txt", "429 Too Many Requests", &[("Retry-After", "120")], b"slow down");
    let r = f.fetch(&url, None, "").await.unwrap();
    assert_eq!((r.status, r.retry_after.as_deref(), r.body.len()), (429, Some("120"), 0));

    origin.set("/robots.txt", "301 Moved Permanently", &[("Location", "/elsewhere.txt")], b"");
    let r = f.fetch(&url, None, "").await.unwrap();
    assert_eq!((r.status, r.location.as_deref()), (301, Some("/elsewhere.txt")));
}

#[tokio::test]
async fn body_cut_at_500_kib() {
    let (origin, port) = LocalOrigin::start().await;
    let f = fetcher(Duration::from_secs(5));
    let big = vec![b'#'; 600 * 1024];
    origin.set("/robots.txt", "200 OK", &[], &big);
    let r = f.fetch(&format!("http://127.0.0.1:{port}/robots.txt"), None, "").await.unwrap();
    assert_eq!(r.body.len(), MAX_ROBOTS_BYTES);
    assert!(r.truncated);
}

#[tokio::test]
async fn refused_connection_and_timeout() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let f = fetcher(Duration::from_millis(300));
    let e = f.fetch(&format!("http://127.0.0.1:{port}/robots.txt"), None, "").await.unwrap_err();
    assert!(matches!(e, FetchError::Connect(_)), "{e:?}");

    let (origin, port) = LocalOrigin::start().await;
    origin.hang("/robots.txt");
    let e = f.fetch(&format!("http://127.0.0.1:{port}/robots.txt"), None, "").await.unwrap_err();
    assert_eq!(e, FetchError::Timeout);
}

fn registry(config: RobotsConfig, timeout: Duration) -> RobotsRegistry {
    let db = sled::Config::new().temporary(true).open().unwrap();
    RobotsRegistry::new(db.open_tree("robots").unwrap(), Arc::new(fetcher(timeout)), config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_and_redirects_against_a_local_origin() {
    let (origin, port) = LocalOrigin::start().await;
    // `same-host` is opt-in since C49 (the default is `any`).
    let reg = registry(
        RobotsConfig { redirects: RedirectPolicy::SameHost, ..RobotsConfig::default() },
        Duration::from_millis(500),
    );
    let now = SystemTime::now();
    let o = Origin::new("http", "127.0.0.1", port);

    // Five redirects within the host, then the rules.
    origin.set("/robots.txt", "301 Moved", &[("Location", "/r1")], b"");
    for i in 1..5 {
        origin.set(&format!("/r{i}"), "302 Found", &[("Location", &format!("/r{}", i + 1))], b"");
    }
    origin.set("/r5", "200 OK", &[], RULES.as_bytes());
    let (rules, d) = reg.rules_for(&o, now).await;
    assert_eq!(
        (d, rules.snapshot.status, rules.snapshot.redirects.hops.len()),
        (Disposition::Fetched, RobotsStatus::Fetched, 5)
    );
    let check = RobotsCheck::new(
        &rules,
        d,
        &reg.windows(&o),
        now,
        "Bot",
        &format!("http://127.0.0.1:{port}/private/x"),
    );
    assert!(matches!(check.action(RobotsMode::Enforce), Action::Refuse { status: 403, .. }));

    // A sixth redirect (C55): the chain is given up as `absent`, like a
    // 404, which replaces the rules; the destination is recorded, never
    // requested.
    origin.set("/r5", "302 Found", &[("Location", "/r6")], b"");
    origin.set("/r6", "200 OK", &[], RULES.as_bytes());
    let rules = reg.refresh(&o, now + Duration::from_secs(1)).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Absent);
    assert_eq!(origin.requests_for("/r6").len(), 0, "the sixth hop is never requested");
    let o2 = Origin::new("http", "localhost", port);
    let (rules, _) = reg.rules_for(&o2, now).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Absent);
    assert_eq!(
        rules.snapshot.redirects.refused.as_deref(),
        Some(format!("http://localhost:{port}/r6").as_str())
    );

    // Another host under same-host: 127.0.0.1 → localhost.
    let (cross, cport) = LocalOrigin::start().await;
    cross.set(
        "/robots.txt",
        "301 Moved",
        &[("Location", &format!("http://localhost:{cport}/robots.txt"))],
        b"",
    );
    let (rules, _) = reg.rules_for(&Origin::new("http", "127.0.0.1", cport), now).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Unavailable);
    assert_eq!(cross.requests_for("/robots.txt").len(), 1, "the other host was not contacted");

    // 404, 403 → absent; 503 → unavailable.
    for (status, want) in [
        ("404 Not Found", RobotsStatus::Absent),
        ("403 Forbidden", RobotsStatus::Absent),
        ("503 Busy", RobotsStatus::Unavailable),
    ] {
        let (o, p) = LocalOrigin::start().await;
        o.set("/robots.txt", status, &[], b"");
        let (rules, _) = reg.rules_for(&Origin::new("http", "127.0.0.1", p), now).await;
        assert_eq!(rules.snapshot.status, want, "{status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_time_twenty_requests_after_the_fresh_window_make_one_fetch_and_none_waits() {
    let (origin, port) = LocalOrigin::start().await;
    let config = RobotsConfig {
        fresh: Duration::from_secs(2),
        stale_usable: Duration::from_secs(10),
        hard_max: Duration::from_secs(20),
        ..RobotsConfig::default()
    };
    let reg = registry(config, Duration::from_secs(5));
    let o = Origin::new("http", "127.0.0.1", port);
    origin.set("/robots.txt", "200 OK", &[("ETag", "\"v1\"")], RULES.as_bytes());
    let (_, d) = reg.rules_for(&o, SystemTime::now()).await;
    assert_eq!(d, Disposition::Fetched);
    assert_eq!(origin.requests_for("/robots.txt").len(), 1);

    tokio::time::sleep(Duration::from_millis(2100)).await;
    // The origin takes a second to answer the refresh.
    origin.set_delayed(
        "/robots.txt",
        "304 Not Modified",
        &[("ETag", "\"v1\"")],
        b"",
        Duration::from_secs(1),
    );
    let started = Instant::now();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let reg = reg.clone();
            let o = o.clone();
            tokio::spawn(async move { reg.rules_for(&o, SystemTime::now()).await.1 })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), Disposition::StaleUsable);
    }
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "no request waited for the refresh: {:?}",
        started.elapsed()
    );
    for _ in 0..300 {
        if !reg.is_refreshing(&o) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let heads = origin.requests_for("/robots.txt");
    assert_eq!(heads.len(), 2, "exactly one refresh reached the origin");
    assert!(heads[1].to_ascii_lowercase().contains("if-none-match: \"v1\""));
    // The refresh is stamped with the time of the request that started it,
    // about a second ago: fresh again.
    assert_eq!(
        reg.rules_for(&o, SystemTime::now()).await.1,
        Disposition::Cached,
        "the 304 reset the age"
    );
}

// ---- C40: compressed robots.txt, C43: fetch identity ----

fn gzip(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}
fn zlib(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}
fn raw_deflate(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
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

const C40_RULES: &str = "User-agent: *\nDisallow: /private/\n";

/// C40: gzip, x-gzip, deflate (zlib and raw), br and stacked codings are
/// undone before parsing; the snapshot keeps the decoded text and its
/// SHA-256; `Accept-Encoding` names only what can be decoded; one request
/// per origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_robots_txt_is_decoded_before_parsing_c40() {
    let text = C40_RULES.as_bytes();
    type Variant<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<u8>);
    let variants: Vec<Variant<'_>> = vec![
        ("gzip", vec![("Content-Encoding", "gzip")], gzip(text)),
        ("x-gzip", vec![("Content-Encoding", "x-gzip")], gzip(text)),
        ("deflate", vec![("Content-Encoding", "deflate")], zlib(text)),
        ("deflate", vec![("Content-Encoding", "deflate")], raw_deflate(text)),
        ("br", vec![("Content-Encoding", "br")], brotli(text)),
        ("gzip, br", vec![("Content-Encoding", "gzip, br")], brotli(&gzip(text))),
        (
            "gzip, br",
            vec![("Content-Encoding", "gzip"), ("Content-Encoding", "br")],
            brotli(&gzip(text)),
        ),
        ("gzip", vec![("Content-Encoding", "identity, gzip")], gzip(text)),
    ];
    let reg = registry(RobotsConfig::default(), Duration::from_secs(5));
    let now = SystemTime::now();
    for (i, (listed, headers, body)) in variants.into_iter().enumerate() {
        let (origin, port) = LocalOrigin::start().await;
        let mut h = vec![("Content-Type", "text/plain")];
        h.extend(headers);
        origin.set("/robots.txt", "200 OK", &h, &body);
        let o = Origin::new("http", "127.0.0.1", port);
        let (rules, d) = reg.rules_for(&o, now).await;
        let s = &rules.snapshot;
        assert_eq!(
            (s.status, s.body.as_slice()),
            (RobotsStatus::Fetched, text),
            "case {i} ({listed}): {}",
            s.last_outcome
        );
        assert_eq!(
            s.sha256,
            crawlcache_robots::snapshot::sha256_hex(text),
            "case {i}: SHA-256 of the decoded text"
        );
        assert_eq!(s.content_encoding.as_deref(), Some(listed), "case {i}");
        let check = RobotsCheck::new(
            &rules,
            d,
            &reg.windows(&o),
            now,
            "examplebot",
            &format!("http://127.0.0.1:{port}/private/x"),
        );
        assert_eq!(
            (check.verdict.rule.as_deref(), check.verdict.line),
            (Some("Disallow: /private/"), Some(2)),
            "case {i}"
        );
        assert!(
            matches!(check.action(RobotsMode::Enforce), Action::Refuse { status: 403, .. }),
            "case {i}"
        );
        let heads = origin.requests_for("/robots.txt");
        assert_eq!(heads.len(), 1, "case {i}: one robots.txt request");
        assert!(
            heads[0].to_ascii_lowercase().contains("\r\naccept-encoding: gzip, deflate, br\r\n"),
            "case {i}: {}",
            heads[0]
        );
    }
}

/// C40: an unknown coding, plain text labelled gzip, and a cut gzip stream
/// are failed fetches (unavailable, retried with back-off), never rules;
/// the outcome names the coding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_robots_txt_is_unavailable_and_names_the_coding_c40() {
    let text = C40_RULES.as_bytes();
    let g = gzip(text);
    let variants: Vec<(&str, Vec<u8>, &str)> = vec![
        ("zstd-x", text.to_vec(), "zstd-x"),
        ("gzip", text.to_vec(), "gzip"),
        ("gzip", g[..g.len() - 4].to_vec(), "gzip"),
        ("br", text.to_vec(), "br"),
    ];
    let reg = registry(RobotsConfig::default(), Duration::from_secs(5));
    let now = SystemTime::now();
    for (coding, body, named) in variants {
        let (origin, port) = LocalOrigin::start().await;
        origin.set(
            "/robots.txt",
            "200 OK",
            &[("Content-Type", "text/plain"), ("Content-Encoding", coding)],
            &body,
        );
        let o = Origin::new("http", "127.0.0.1", port);
        let (rules, d) = reg.rules_for(&o, now).await;
        let s = &rules.snapshot;
        assert_eq!(s.status, RobotsStatus::Unavailable, "{coding}");
        assert_eq!(s.last_outcome.label(), "undecodable", "{coding}");
        let said = s.last_outcome.to_string();
        assert!(said.contains(&format!("`{named}`")), "{coding}: {said}");
        assert!(s.body.is_empty() && s.next_retry.is_some(), "{coding}");
        let check = RobotsCheck::new(
            &rules,
            d,
            &reg.windows(&o),
            now,
            "examplebot",
            &format!("http://127.0.0.1:{port}/public"),
        );
        assert!(!check.verdict.allowed, "{coding}: everything disallowed");
        match check.action(RobotsMode::Enforce) {
            Action::Refuse { status: 403, body } => {
                assert!(body.contains(named), "{coding}: {body}")
            }
            a => panic!("{coding}: {a:?}"),
        }
        assert_eq!(origin.requests_for("/robots.txt").len(), 1);
    }
}

/// C40: a gzip bomb inflating far past 500 KiB is cut there (decoded size
/// limit, decompression stops), quickly; the rules at its start apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_bomb_is_cut_at_500_kib_of_decoded_text_c40() {
    let mut text = C40_RULES.as_bytes().to_vec();
    text.resize(64 * 1024 * 1024, b'#');
    let bomb = gzip(&text);
    assert!(bomb.len() < 200 * 1024, "{}", bomb.len());
    let (origin, port) = LocalOrigin::start().await;
    origin.set("/robots.txt", "200 OK", &[("Content-Encoding", "gzip")], &bomb);
    let f = fetcher(Duration::from_secs(5));
    let started = Instant::now();
    let r = f.fetch(&format!("http://127.0.0.1:{port}/robots.txt"), None, "").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!((r.body.len(), r.truncated), (MAX_ROBOTS_BYTES, true));
    assert!(r.body.starts_with(C40_RULES.as_bytes()));
    // Through the registry: a snapshot of the first 500 KiB, rules in force.
    let reg = registry(RobotsConfig::default(), Duration::from_secs(5));
    let (rules, _) =
        reg.rules_for(&Origin::new("http", "127.0.0.1", port), SystemTime::now()).await;
    assert_eq!(
        (rules.snapshot.status, rules.snapshot.body.len(), rules.snapshot.truncated),
        (RobotsStatus::Fetched, MAX_ROBOTS_BYTES, true)
    );
    assert!(!rules.verdict(crawlcache_robots::snapshot::State::Fresh, "x", "/private/a").allowed);
}

/// C43: each fetch is sent under the identity it is given, else under the
/// fetcher's default; the registry derives it from `robots.agent` and the
/// client and records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_fetches_are_sent_under_the_crawlers_identity_c43() {
    let (origin, port) = LocalOrigin::start().await;
    origin.set("/robots.txt", "200 OK", &[], C40_RULES.as_bytes());
    let f = fetcher(Duration::from_secs(5));
    let url = format!("http://127.0.0.1:{port}/robots.txt");
    f.fetch(&url, None, "examplebot/1.0 (+http://example.org/bot)").await.unwrap();
    f.fetch(&url, None, "").await.unwrap();
    let heads: Vec<String> =
        origin.requests_for("/robots.txt").iter().map(|h| h.to_ascii_lowercase()).collect();
    assert!(
        heads[0].contains("\r\nuser-agent: examplebot/1.0 (+http://example.org/bot)\r\n"),
        "{}",
        heads[0]
    );
    assert!(heads[1].contains("\r\nuser-agent: crawlcache-test/1.0\r\n"), "{}", heads[1]);

    let reg = registry(
        RobotsConfig { agent: "examplebot".into(), ..RobotsConfig::default() },
        Duration::from_secs(5),
    );
    let (o2, p2) = LocalOrigin::start().await;
    o2.set(
        "/robots.txt",
        "403 Forbidden",
        &[("Content-Type", "text/html")],
        b"<h1>unknown client</h1>",
    );
    let (rules, _) = reg
        .rules_for_client(
            &Origin::new("http", "127.0.0.1", p2),
            SystemTime::now(),
            Some("curl/8.0"),
        )
        .await;
    assert!(o2.requests_for("/robots.txt")[0]
        .to_ascii_lowercase()
        .contains("\r\nuser-agent: examplebot\r\n"));
    assert_eq!(rules.snapshot.fetched_as.as_deref(), Some("examplebot"));
    assert_eq!(rules.snapshot.status, RobotsStatus::Absent);
    let shown = crawlcache_robots::registry::describe(
        &rules.snapshot,
        &reg.windows(&rules.snapshot.origin),
        SystemTime::now(),
    );
    assert!(shown.contains("fetched as:    examplebot"), "{shown}");
    assert!(shown.contains("robots.txt answered 403 to examplebot: rules treated as allow-all (RFC 9309 2.3.1.3); check the crawler's identity"), "{shown}");
}
