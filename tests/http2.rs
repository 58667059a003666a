//! HTTP/2 end to end (issue 43): h2 inside intercepted tunnels, h2 to
//! origins, one multiplexed origin connection, the per-origin cap, h2c,
//! and the translation rules of RFC 9113 section 8 that a real client can
//! show. Clients: curl (`--http2`, `--parallel` multiplexes its requests on
//! one tunnel); origins: [`H2Origin`] (hyper, ALPN as each test says) and
//! nginx with `http2` on a TLS listener.
//! Everything listens on 127.0.0.1.

mod common;

use common::h2_origin::{H2Origin, Speaks};
use common::tls::{test_pki, TestPki};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const CLIENT_LIMIT: Duration = Duration::from_secs(90);

/// A proxy trusting `pki`'s CA for origins, robots off, with `upstream`
/// lines added to `[upstream]` and `rest` after.
fn proxy_for(dir: &TestDir, pki: &TestPki, upstream: &str, rest: &str) -> Proxy {
    let ca = dir.join("origin-ca.pem");
    std::fs::write(&ca, &pki.ca_pem).expect("writing the origin CA");
    let config = format!(
        "[robots]\nmode = \"off\"\n\n[upstream]\nresponse_timeout = \"20s\"\nextra_ca_file = {:?}\n{upstream}\n{rest}\n",
        ca.display().to_string()
    );
    Proxy::start_with_config(&dir.subdir("data"), &config, &[])
}

fn crawlcache_ca(proxy: &Proxy) -> PathBuf {
    proxy.data_dir().join("ca/ca.pem")
}

fn curl_bin() -> PathBuf {
    find_tool(
        "curl",
        "CRAWLCACHE_TEST_CURL",
        &["/usr/bin/curl"],
        "Install curl (apt-get install curl).",
    )
}

/// One transfer as curl reported it: HTTP version, status, `Cache-Status`.
#[derive(Debug, Clone, PartialEq)]
struct Transfer {
    version: String,
    status: u16,
    cache_status: String,
}

/// `curl --http2 [--parallel]` through `proxy` (CONNECT, then TLS trusting
/// `ca`), `extra` arguments before the URLs (`-o FILE` keeps the body of
/// the one URL); one [`Transfer`] per URL.
fn curl(proxy: &Proxy, ca: &Path, extra: &[&str], urls: &[String]) -> (Vec<Transfer>, String) {
    let mut cmd = Command::new(curl_bin());
    cmd.args(["-q", "-sS", "--max-time", "60", "--noproxy", "", "--http2"])
        .arg("--proxy")
        .arg(proxy.url())
        .arg("--cacert")
        .arg(ca)
        .args(["-w", "%{http_version} %{http_code} [%header{cache-status}]\\n"])
        .args(extra);
    if urls.len() > 1 {
        cmd.args(["--parallel", "--parallel-max", "64"]);
    }
    // Bodies are thrown away unless `extra` names a file for the one URL.
    let kept = extra.contains(&"-o");
    for u in urls {
        if !kept {
            cmd.args(["-o", "/dev/null"]);
        }
        cmd.arg(u);
    }
    for var in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
    {
        cmd.env_remove(var);
    }
    let out = run_bounded(&mut cmd, CLIENT_LIMIT, "curl --http2 through the proxy");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let transfers = stdout
        .lines()
        .filter_map(|l| {
            let (version, rest) = l.split_once(' ')?;
            let (code, status) = rest.split_once(' ')?;
            Some(Transfer {
                version: version.to_string(),
                status: code.parse().ok()?,
                cache_status: status.trim_matches(|c| c == '[' || c == ']').to_string(),
            })
        })
        .collect();
    (transfers, format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
}

fn is_hit(cache_status: &str) -> bool {
    cache_status.contains("hit") && !cache_status.contains("fwd=")
}

/// Item 1 (curl) and item 2 (nginx-like h2 origin): `curl --http2` gets
/// HTTP/2 inside the tunnel, crawlcache reaches the origin over HTTP/2,
/// and the second request is a hit, answered over HTTP/2 too.
#[test]
fn curl_http2_in_the_tunnel_reaches_an_h2_origin_and_the_second_request_is_a_hit() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::Tls(&["h2", "http/1.1"]), Duration::ZERO);
    let dir = TestDir::new("h2-curl");
    let proxy = proxy_for(&dir, &pki, "", "");
    let url = format!("https://localhost:{}/page", origin.port());
    let ca = crawlcache_ca(&proxy);
    let (first, log1) = curl(&proxy, &ca, &[], std::slice::from_ref(&url));
    let (second, log2) = curl(&proxy, &ca, &[], std::slice::from_ref(&url));
    assert_eq!(first.len(), 1, "{log1}");
    assert_eq!(second.len(), 1, "{log2}");
    assert_eq!((first[0].version.as_str(), first[0].status), ("2", 200), "{log1}");
    assert!(!is_hit(&first[0].cache_status), "the first is a miss: {log1}");
    assert_eq!((second[0].version.as_str(), second[0].status), ("2", 200), "{log2}");
    assert!(is_hit(&second[0].cache_status), "the second is a hit: {log2}");
    let seen = origin.seen();
    assert_eq!(seen.len(), 1, "the origin saw one request: {seen:?}");
    assert_eq!(seen[0].version, "HTTP/2.0", "crawlcache spoke HTTP/2 to the origin: {seen:?}");
    assert!(proxy.metric("crawlcache_client_h2_requests_total") >= 2);
    assert!(proxy.metric("crawlcache_origin_h2_connections_total") >= 1);
    // The audit lines say which version each side spoke (written within
    // the audit's flush interval).
    let lines = audit_lines(&proxy, "/page", 2);
    assert!(
        lines[0].contains("\"client_version\":\"HTTP/2\"")
            && lines[0].contains("\"upstream_version\":\"HTTP/2\""),
        "the miss: {}",
        lines[0]
    );
    assert!(
        lines[1].contains("\"client_version\":\"HTTP/2\"")
            && !lines[1].contains("upstream_version"),
        "the hit (no origin contacted): {}",
        lines[1]
    );
}

/// The audit lines of `proxy` whose URL contains `part`, waiting (bounded)
/// until there are `n` of them.
fn audit_lines(proxy: &Proxy, part: &str, n: usize) -> Vec<String> {
    let dir = proxy.data_dir().join("audit");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut lines: Vec<String> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
            .filter(|l| l.contains(part))
            .collect();
        lines.sort();
        if lines.len() >= n || std::time::Instant::now() > deadline {
            assert!(lines.len() >= n, "{n} audit lines for {part} in {}: {lines:?}", dir.display());
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Item 2: an origin that offers only `h2` by ALPN refuses an HTTP/1.1
/// client, and is reached through crawlcache, by an HTTP/1.1 client too.
#[test]
fn an_h2_only_origin_is_reached_through_crawlcache_while_an_http1_client_fails() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::Tls(&["h2"]), Duration::ZERO);
    let dir = TestDir::new("h2-only");
    let ca_file = dir.join("direct-ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let url = format!("https://localhost:{}/only", origin.port());
    let mut direct = Command::new(curl_bin());
    direct.args(["-q", "-sS", "--max-time", "20", "--noproxy", "*", "--http1.1", "--cacert"]);
    direct.arg(&ca_file).arg(&url);
    let out =
        run_bounded(&mut direct, CLIENT_LIMIT, "curl --http1.1 straight to the h2-only origin");
    assert!(
        !out.status.success(),
        "an HTTP/1.1 client is refused by the h2-only origin: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let proxy = proxy_for(&dir, &pki, "", "");
    let ca = crawlcache_ca(&proxy);
    let (t, log) = curl(&proxy, &ca, &["--http1.1"], std::slice::from_ref(&url));
    assert_eq!(t.len(), 1, "{log}");
    assert_eq!((t[0].version.as_str(), t[0].status), ("1.1", 200), "{log}");
    assert_eq!(origin.seen().len(), 1);
    assert_eq!(origin.seen()[0].version, "HTTP/2.0");
}

/// Item 2: 64 concurrent misses to one h2 origin, cold (no connection yet)
/// and then warm, are carried by one origin connection.
#[test]
fn sixty_four_concurrent_misses_share_one_origin_connection_cold_and_warm() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin =
        H2Origin::start(&pki, Speaks::Tls(&["h2", "http/1.1"]), Duration::from_millis(300));
    let dir = TestDir::new("h2-64");
    let proxy = proxy_for(&dir, &pki, "", "");
    let ca = crawlcache_ca(&proxy);
    for round in ["cold", "warm"] {
        let urls: Vec<String> =
            (0..64).map(|i| format!("https://localhost:{}/{round}/{i}", origin.port())).collect();
        let (t, log) = curl(&proxy, &ca, &[], &urls);
        assert_eq!(t.len(), 64, "{log}");
        assert!(t.iter().all(|t| t.status == 200 && t.version == "2"), "{round}: {log}");
        println!(
            "{round}: 64 misses, origin connections accepted so far {}, most in flight at once {}",
            origin.accepted(),
            origin.max_in_flight()
        );
        assert_eq!(origin.accepted(), 1, "{round}: one origin connection carries all");
    }
    assert_eq!(origin.seen().len(), 128);
    assert!(origin.seen().iter().all(|s| s.version == "HTTP/2.0"));
    assert!(
        origin.max_in_flight() > 8,
        "the requests were multiplexed (in flight at once: {})",
        origin.max_in_flight()
    );
}

/// Item 2: to an HTTP/1.1 origin, no more requests at once than
/// `upstream.max_in_flight_per_origin`, and all are answered.
#[test]
fn the_per_origin_cap_bounds_requests_in_flight_to_an_http1_origin() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::Tls(&["http/1.1"]), Duration::from_millis(200));
    let dir = TestDir::new("h2-cap");
    let proxy = proxy_for(&dir, &pki, "max_in_flight_per_origin = 8", "");
    let ca = crawlcache_ca(&proxy);
    let urls: Vec<String> =
        (0..64).map(|i| format!("https://localhost:{}/capped/{i}", origin.port())).collect();
    let (t, log) = curl(&proxy, &ca, &[], &urls);
    assert_eq!(t.len(), 64, "{log}");
    assert!(t.iter().all(|t| t.status == 200), "{log}");
    println!(
        "HTTP/1.1 origin: most in flight at once {}, connections accepted {}",
        origin.max_in_flight(),
        origin.accepted()
    );
    assert!(origin.max_in_flight() <= 8, "at most 8 at once, saw {}", origin.max_in_flight());
    assert!(origin.seen().iter().all(|s| s.version == "HTTP/1.1"));
    // The first connection learned that the origin chose http/1.1; the
    // pooled HTTP/1.1 connections are per serving thread, at most the cap each.
    assert!(origin.accepted() <= 1 + 8 * 2, "connections accepted: {}", origin.accepted());
}

/// Item 2, the cap held through the body: origins that send the head at
/// once and the body 300 ms later (`/slow/`), `max_in_flight_per_origin =
/// 8`, 64 misses at once. The origin never has more than 8 requests whose
/// body it has not finished, over HTTP/1.1 connections or HTTP/2 streams;
/// a cap that ended with the head would let all 64 in.
#[test]
fn the_per_origin_cap_holds_until_the_body_has_arrived() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    for alpn in [&["http/1.1"][..], &["h2"][..]] {
        let origin = H2Origin::start(&pki, Speaks::Tls(alpn), Duration::from_millis(300));
        let dir = TestDir::new("h2-cap-body");
        let proxy = proxy_for(&dir, &pki, "max_in_flight_per_origin = 8", "");
        let ca = crawlcache_ca(&proxy);
        let urls: Vec<String> =
            (0..64).map(|i| format!("https://localhost:{}/slow/{i}", origin.port())).collect();
        let (t, log) = curl(&proxy, &ca, &[], &urls);
        assert_eq!(t.len(), 64, "{log}");
        assert!(t.iter().all(|t| t.status == 200), "{alpn:?}: {log}");
        println!(
            "{alpn:?} origin, bodies 300 ms after their heads: most in flight at once {}",
            origin.max_in_flight()
        );
        assert!(
            origin.max_in_flight() <= 8,
            "{alpn:?}: at most 8 unfinished at once, saw {}",
            origin.max_in_flight()
        );
        assert!(origin.max_in_flight() >= 2, "{alpn:?}: the requests overlapped");
        assert_eq!(origin.seen().len(), 64);
    }
}

/// RFC 9113 section 8.1: a trailer section from an HTTP/2 origin is
/// handled as on HTTP/1.1: not forwarded (the stored response has no place
/// for it), the body whole, stored, and the second request a hit, for a
/// client on either version.
#[test]
fn trailers_from_an_h2_origin_end_the_body_as_on_http1() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::Tls(&["h2"]), Duration::ZERO);
    let dir = TestDir::new("h2-trailers");
    let proxy = proxy_for(&dir, &pki, "", "");
    let ca = crawlcache_ca(&proxy);
    let url = format!("https://localhost:{}/trailers/a", origin.port());
    for (round, version) in [(1, "--http2"), (2, "--http1.1"), (3, "--http2")] {
        let out_file = dir.path().join(format!("trailers-{round}.txt"));
        let out = out_file.to_string_lossy().into_owned();
        let (t, log) = curl(&proxy, &ca, &[version, "-o", &out], std::slice::from_ref(&url));
        assert_eq!(t.len(), 1, "{log}");
        assert_eq!(t[0].status, 200, "round {round}: {log}");
        assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "origin /trailers/a", "{log}");
        if round > 1 {
            assert!(is_hit(&t[0].cache_status), "round {round}: {:?}", t[0]);
        }
    }
    assert_eq!(origin.seen().len(), 1, "stored after the first: {:?}", origin.seen());
}

/// robots.txt from an https origin that chooses HTTP/1.1 in ALPN: the first
/// fetch goes on the connection opened to ask for h2, and carries `Host`
/// there too (RFC 9112 section 3.2; a fresh-eyes check found nginx
/// answering it 400, which made every path allowed), so its rules are
/// enforced from the first request.
#[test]
fn robots_txt_from_an_origin_choosing_http1_is_fetched_with_host_and_enforced() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::Tls(&["http/1.1"]), Duration::ZERO);
    let dir = TestDir::new("h2-robots-h1");
    let ca = dir.join("origin-ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let config = format!(
        "[robots]\nmode = \"enforce\"\n\n[upstream]\nextra_ca_file = {:?}\n",
        ca.display().to_string()
    );
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &config, &[]);
    let ca = crawlcache_ca(&proxy);
    let port = origin.port();
    let (t, log) = curl(&proxy, &ca, &[], &[format!("https://localhost:{port}/private/x")]);
    assert_eq!(t[0].status, 403, "disallowed by the origin's robots.txt: {log}");
    let (t, log) = curl(&proxy, &ca, &[], &[format!("https://localhost:{port}/open")]);
    assert_eq!(t[0].status, 200, "{log}");
    let seen = origin.seen();
    assert_eq!(seen[0].path, "/robots.txt", "{seen:?}");
    assert_eq!(seen[0].version, "HTTP/1.1");
    assert_eq!(seen[0].all("host"), [format!("localhost:{port}")], "{seen:?}");
    assert!(seen.iter().all(|s| s.path != "/private/x"), "{seen:?}");
}

/// One HTTP/2 connection per origin also while a body takes longer than
/// `upstream.pool_idle_timeout`: a connection with a stream open is not
/// idle (a fresh-eyes check saw a second connection opened for a request
/// sent 4.5 s after one whose 5 s body was still arriving), and its
/// idleness counts from the end of its last stream (a re-check saw a new
/// connection for a request 0.5 s after a 5 s body ended).
#[test]
fn a_connection_with_a_body_still_arriving_is_not_idle() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::Tls(&["h2"]), Duration::from_millis(2500));
    let dir = TestDir::new("h2-busy-not-idle");
    let proxy = proxy_for(&dir, &pki, "pool_idle_timeout = \"1s\"", "");
    let ca = crawlcache_ca(&proxy);
    let port = origin.port();
    let (slow, quick) = std::thread::scope(|s| {
        let slow =
            s.spawn(|| curl(&proxy, &ca, &[], &[format!("https://localhost:{port}/slow/a")]));
        std::thread::sleep(Duration::from_millis(1500));
        // Sent 1.5 s after the first, whose body is 1 s from its end.
        let quick = curl(&proxy, &ca, &[], &[format!("https://localhost:{port}/slow/b")]);
        (slow.join().unwrap(), quick)
    });
    assert_eq!(slow.0[0].status, 200, "{}", slow.1);
    assert_eq!(quick.0[0].status, 200, "{}", quick.1);
    assert_eq!(origin.accepted(), 1, "both requests on the one connection");
    assert_eq!(origin.max_in_flight(), 2, "the two overlapped");
    // Idleness counts from the end of the last stream, not from the last
    // request sent (2.5 s before): a request just after still finds it.
    std::thread::sleep(Duration::from_millis(200));
    let (t, log) = curl(&proxy, &ca, &[], &[format!("https://localhost:{port}/after")]);
    assert_eq!(t[0].status, 200, "{log}");
    assert_eq!(origin.accepted(), 1, "the request after the bodies ended reused it");
}

/// A request that gets no turn under the per-origin cap within
/// `upstream.queue_timeout` is answered 504 saying so (the cap, the key,
/// that the origin was not asked), and the origin never sees it.
#[test]
fn a_request_without_a_turn_in_time_gets_a_504_naming_the_cap() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::Tls(&["h2"]), Duration::from_millis(2500));
    let dir = TestDir::new("h2-queue-timeout");
    let proxy = proxy_for(&dir, &pki, "max_in_flight_per_origin = 1\nqueue_timeout = \"1s\"", "");
    let ca = crawlcache_ca(&proxy);
    let port = origin.port();
    let page = dir.path().join("queued.txt");
    let page_arg = page.to_string_lossy().into_owned();
    let (first, queued) = std::thread::scope(|s| {
        let first =
            s.spawn(|| curl(&proxy, &ca, &[], &[format!("https://localhost:{port}/slow/a")]));
        std::thread::sleep(Duration::from_millis(300));
        let url = format!("https://localhost:{port}/slow/b");
        let queued = curl(&proxy, &ca, &["-o", &page_arg], &[url]);
        (first.join().unwrap(), queued)
    });
    assert_eq!(first.0[0].status, 200, "{}", first.1);
    assert_eq!(queued.0[0].status, 504, "{}", queued.1);
    let text = std::fs::read_to_string(&page).unwrap();
    println!("{text}");
    for part in ["upstream.max_in_flight_per_origin", "upstream.queue_timeout", "not asked"] {
        assert!(text.contains(part), "{part:?} in {text}");
    }
    let paths: Vec<String> = origin.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["/slow/a"], "the origin never saw the request that got no turn");
}

/// `upstream.h2c_hosts`: a plain-http origin listed there is spoken to
/// over HTTP/2 with prior knowledge.
#[test]
fn h2c_prior_knowledge_for_a_listed_plain_origin() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::H2c, Duration::ZERO);
    let dir = TestDir::new("h2c");
    let proxy = proxy_for(&dir, &pki, "h2c_hosts = [\"127.0.0.1\"]", "");
    let url = format!("http://127.0.0.1:{}/clear", origin.port());
    let r = proxy.get(&url, &[]);
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(r.text(), "origin /clear");
    assert_eq!(origin.seen()[0].version, "HTTP/2.0");
}

/// RFC 9113 section 8.2.3: cookie fields an HTTP/2 client split are sent
/// to an HTTP/1.1 origin as one field; section 8.2.2: connection-specific
/// fields from an HTTP/1.1 client never reach an HTTP/2 origin (its
/// library would refuse the request as malformed).
#[test]
fn split_cookies_are_joined_and_connection_fields_stay_off_h2() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let h1 = H2Origin::start(&pki, Speaks::Tls(&["http/1.1"]), Duration::ZERO);
    let h2 = H2Origin::start(&pki, Speaks::Tls(&["h2"]), Duration::ZERO);
    let dir = TestDir::new("h2-translate");
    let proxy = proxy_for(&dir, &pki, "", "");
    let ca = crawlcache_ca(&proxy);
    let url = format!("https://localhost:{}/cookies", h1.port());
    let (t, log) = curl(&proxy, &ca, &["-H", "cookie: a=1", "-H", "cookie: b=2"], &[url]);
    assert_eq!((t[0].version.as_str(), t[0].status), ("2", 200), "{log}");
    let seen = h1.seen();
    assert_eq!(seen[0].all("cookie"), ["a=1; b=2"], "one joined cookie field: {seen:?}");
    // RFC 9110 section 7.6.3: Via names the protocol the proxy received.
    let via = seen[0].all("via");
    assert!(via.len() == 1 && via[0].starts_with("2 crawlcache-"), "{via:?}");

    let url = format!("https://localhost:{}/fields", h2.port());
    let head_file = dir.path().join("fields-head.txt");
    let head_arg = head_file.to_string_lossy().into_owned();
    let extra = [
        "--http1.1",
        "-H",
        "Keep-Alive: timeout=5",
        "-H",
        "TE: trailers, deflate",
        "-D",
        &head_arg,
    ];
    let (t, log) = curl(&proxy, &ca, &extra, &[url]);
    assert_eq!((t[0].version.as_str(), t[0].status), ("1.1", 200), "{log}");
    let head = std::fs::read_to_string(&head_file).unwrap().to_ascii_lowercase();
    assert!(head.contains("\r\nvia: 2 crawlcache-"), "the origin spoke HTTP/2: {head}");
    let seen = h2.seen();
    assert_eq!(seen[0].version, "HTTP/2.0");
    let via = seen[0].all("via");
    assert!(via.len() == 1 && via[0].starts_with("1.1 crawlcache-"), "{via:?}");
    for name in ["keep-alive", "connection", "proxy-connection", "transfer-encoding", "upgrade"] {
        assert!(seen[0].all(name).is_empty(), "{name} reached the h2 origin: {seen:?}");
    }
    assert!(seen[0].all("te").iter().all(|v| *v == "trailers"), "{seen:?}");
}

/// PEM of one DER item (`CERTIFICATE`, `PRIVATE KEY`), 64 columns.
fn pem(label: &str, der: &[u8]) -> String {
    let b64 = data_encoding::BASE64.encode(der);
    let lines: Vec<&str> =
        b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

/// Item 2: nginx with `http2` on a TLS listener is reached over HTTP/2
/// (its access log's `$request` ends in `HTTP/2.0`, the protocol it
/// served), by a client speaking HTTP/1.1 to crawlcache; the second
/// request is a hit.
#[test]
fn nginx_with_http2_on_tls_is_reached_over_h2() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let dir = TestDir::new("h2-nginx");
    let root = dir.subdir("www");
    std::fs::write(root.join("file.txt"), "served by nginx\n").unwrap();
    let (cert, key) = (dir.join("leaf.pem"), dir.join("leaf.key"));
    std::fs::write(&cert, pem("CERTIFICATE", &pki.leaf)).unwrap();
    std::fs::write(&key, pem("PRIVATE KEY", pki.leaf_key.secret_pkcs8_der())).unwrap();
    let tls_port = free_port();
    let nginx = Nginx::start_with(
        &root,
        &format!(
            "listen 127.0.0.1:{tls_port} ssl http2;\nssl_certificate {:?};\nssl_certificate_key {:?};\nexpires 1h;",
            cert.display().to_string(),
            key.display().to_string()
        ),
    );
    let proxy = proxy_for(&dir, &pki, "", "");
    let ca = crawlcache_ca(&proxy);
    let url = format!("https://localhost:{tls_port}/file.txt");
    let (first, log1) = curl(&proxy, &ca, &["--http1.1"], std::slice::from_ref(&url));
    let (second, log2) = curl(&proxy, &ca, &["--http1.1"], std::slice::from_ref(&url));
    assert_eq!(first.first().map(|t| t.status), Some(200), "{log1}");
    assert!(second.first().is_some_and(|t| is_hit(&t.cache_status)), "{log2}");
    let lines = nginx.settled_access_log_lines();
    let served: Vec<&String> = lines.iter().filter(|l| l.contains("/file.txt")).collect();
    assert_eq!(served.len(), 1, "nginx served the file once: {lines:?}");
    assert!(served[0].contains("HTTP/2.0\""), "nginx served it over HTTP/2: {}", served[0]);
}

/// A response stored from one version is a hit for the other, with the
/// same body; a `Vary: Cookie` response stored for an HTTP/1.1 client's one
/// `Cookie` field is a hit for an HTTP/2 client that split the same
/// cookies in two fields (RFC 9113 section 8.2.3: the secondary key is
/// made from the joined field).
#[test]
fn a_response_stored_from_either_version_is_a_hit_for_the_other() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::Tls(&["h2", "http/1.1"]), Duration::ZERO);
    let dir = TestDir::new("h2-cross");
    let proxy = proxy_for(&dir, &pki, "", "");
    let ca = crawlcache_ca(&proxy);
    let port = origin.port();
    let body = |extra: &[&str], url: &str| -> (Transfer, String) {
        let out = dir.join("body");
        let mut args: Vec<&str> = extra.to_vec();
        let out_s = out.display().to_string();
        args.extend(["-o", &out_s]);
        let mut cmd = Command::new(curl_bin());
        cmd.args(["-q", "-sS", "--max-time", "60", "--noproxy", ""])
            .arg("--proxy")
            .arg(proxy.url())
            .arg("--cacert")
            .arg(&ca)
            .args(["-w", "%{http_version} %{http_code} [%header{cache-status}]"])
            .args(&args)
            .arg(url);
        let o = run_bounded(&mut cmd, CLIENT_LIMIT, "curl");
        let line = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut parts = line.splitn(3, ' ');
        let t = Transfer {
            version: parts.next().unwrap_or("").to_string(),
            status: parts.next().and_then(|c| c.parse().ok()).unwrap_or(0),
            cache_status: parts
                .next()
                .unwrap_or("")
                .trim_matches(|c| c == '[' || c == ']')
                .to_string(),
        };
        (t, std::fs::read_to_string(&out).unwrap_or_default())
    };
    for (first, second, path) in
        [("--http1.1", "--http2", "/h1-then-h2"), ("--http2", "--http1.1", "/h2-then-h1")]
    {
        let url = format!("https://localhost:{port}{path}");
        let (a, body_a) = body(&[first], &url);
        let (b, body_b) = body(&[second], &url);
        assert!(!is_hit(&a.cache_status) && is_hit(&b.cache_status), "{path}: {a:?} then {b:?}");
        assert_ne!(a.version, b.version, "{path}: two versions");
        assert_eq!(body_a, body_b, "{path}: the same body");
    }
    let url = format!("https://localhost:{port}/vary/cookies");
    let (a, body_a) = body(&["--http1.1", "-H", "Cookie: a=1; b=2"], &url);
    let (b, body_b) = body(&["--http2", "-H", "cookie: a=1", "-H", "cookie: b=2"], &url);
    let (c, _) = body(&["--http2", "-H", "cookie: a=1", "-H", "cookie: b=3"], &url);
    assert_eq!(body_a, format!("origin /vary/cookies cookie [a=1; b=2]"));
    assert!(is_hit(&b.cache_status), "split cookies select the stored variant: {a:?} {b:?}");
    assert_eq!(body_a, body_b);
    assert!(!is_hit(&c.cache_status), "other cookies are another variant: {c:?}");
}

/// HEAD and revalidation over HTTP/2 behave as on HTTP/1.1: a HEAD after a
/// stored GET is a hit with no body; a response that must be revalidated
/// (ETag, `max-age=0`) is revalidated with `If-None-Match` over the h2
/// origin connection and the 304 serves the stored body.
#[test]
fn head_and_a_304_revalidation_over_h2_on_both_sides() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = H2Origin::start(&pki, Speaks::Tls(&["h2"]), Duration::ZERO);
    let dir = TestDir::new("h2-head-304");
    let proxy = proxy_for(&dir, &pki, "", "");
    let ca = crawlcache_ca(&proxy);
    let url = format!("https://localhost:{}/page-for-head", origin.port());
    let (get, log) = curl(&proxy, &ca, &[], std::slice::from_ref(&url));
    assert_eq!(get[0].status, 200, "{log}");
    let (head, log) = curl(&proxy, &ca, &["-I"], std::slice::from_ref(&url));
    assert_eq!((head[0].version.as_str(), head[0].status), ("2", 200), "{log}");
    assert!(is_hit(&head[0].cache_status), "HEAD after a stored GET is a hit: {log}");

    let url = format!("https://localhost:{}/etag/page", origin.port());
    let (first, log1) = curl(&proxy, &ca, &[], std::slice::from_ref(&url));
    let (second, log2) = curl(&proxy, &ca, &[], std::slice::from_ref(&url));
    assert_eq!(first[0].status, 200, "{log1}");
    assert_eq!(second[0].status, 200, "{log2}");
    assert!(second[0].cache_status.contains("fwd=stale"), "revalidated: {log2}");
    let seen: Vec<_> = origin.seen().into_iter().filter(|s| s.path == "/etag/page").collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1].all("if-none-match"), ["\"v1\""], "{seen:?}");
    assert!(seen.iter().all(|s| s.version == "HTTP/2.0"));
}
