//! robots.txt across the fleet (Redis only, no bucket): one fetch for the
//! fleet at first sight, one conditional refresh for the fleet after the
//! fresh window; a failure shared from before a node started does not
//! block its first use.

use crate::common::tls::test_pki;
use crate::common::tls_origin::{page, TlsOrigin};
use crate::common::*;
use crate::support::*;
use std::time::Duration;

const RULES: &str = "User-agent: *\nDisallow: /private\n";

fn origin() -> Origin {
    Origin::start(|req| {
        if req.path() == "/robots.txt" {
            if req.header("If-None-Match") == Some("\"r1\"") {
                return Reply::not_modified(&[("ETag", "\"r1\"")]);
            }
            // Slow enough that every first-sight request arrives while the
            // fetch is under way.
            return Reply::ok(
                &[("ETag", "\"r1\""), ("Content-Type", "text/plain")],
                RULES.as_bytes(),
            )
            .delayed(Duration::from_millis(300));
        }
        Reply::ok(&[("Cache-Control", "max-age=600")], format!("page {}", req.target).as_bytes())
    })
}

#[test]
fn thirty_first_sight_requests_over_three_nodes_make_one_robots_fetch_and_one_refresh() {
    let _serial = serial();
    let origin = origin();
    let fleet = Fleet::start(
        "fleet-robots",
        false,
        "[robots]\nfresh = \"3s\"\nstale_usable = \"1h\"\nhard_max = \"2h\"\n",
    );

    let rs = fleet.burst(30, |i| origin.url(&format!("/a{i}")), Duration::from_secs(30));
    for (i, r) in rs.iter().enumerate() {
        assert_eq!(r.status, 200, "request {i}: {}", r.describe());
        let rstatus = r.header("Robots-Status").unwrap_or("");
        assert!(
            rstatus.starts_with("allowed"),
            "request {i} was judged by the shared rules: {}",
            r.describe()
        );
    }
    let fetches = requests_for(&origin, "/robots.txt");
    assert_eq!(fetches.len(), 1, "one robots.txt fetch for the whole fleet, got {}", fetches.len());
    // Every node has the rules: a disallowed URL says so on each.
    for i in 0..3 {
        let r = fleet.get(i, &origin.url("/private/x"));
        assert!(
            r.header("Robots-Status")
                .unwrap_or("")
                .starts_with("disallowed; rule=\"Disallow: /private\""),
            "node {i}: {}",
            r.describe()
        );
    }
    let shared: u64 = (0..3).map(|i| fleet.counter(i, "robots_shared")).sum();
    let fetched: u64 = (0..3).map(|i| fleet.counter(i, "robots_fetched")).sum();
    assert_eq!((fetched, shared), (1, 2), "one node fetched for the fleet, two took its snapshot");

    // Past the fresh window, a burst: one conditional refresh for the fleet.
    std::thread::sleep(Duration::from_millis(3500));
    let rs = fleet.burst(30, |i| origin.url(&format!("/b{i}")), Duration::from_secs(30));
    assert!(
        rs.iter().all(|r| r.status == 200),
        "the burst is served while the rules are refreshed"
    );
    let all = origin.wait_for_requests(1 + 30 + 3 + 30 + 1, Duration::from_secs(15));
    let robots: Vec<_> = all.iter().filter(|r| r.path() == "/robots.txt").collect();
    assert_eq!(robots.len(), 2, "first fetch and one refresh");
    assert_eq!(robots[1].header("If-None-Match"), Some("\"r1\""), "the refresh is conditional");
    // Give the other nodes' refreshes time to settle on the shared snapshot;
    // none of them may reach the origin.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        requests_for(&origin, "/robots.txt").len(),
        2,
        "still one refresh for the whole fleet"
    );
    for i in 0..3 {
        let r = fleet.get(i, &origin.url("/c"));
        let h = r.header("Robots-Status").unwrap_or("").to_string();
        assert!(
            h.contains("disposition=cached"),
            "node {i} uses the refreshed (fresh) snapshot: {h}"
        );
    }
}

/// Issue 41: a robots.txt failure shared through Redis from before a node
/// started does not block that node's first use. Node `a`, which does not
/// trust the origins' test CA, fails on two HTTPS origins (403 naming the
/// certificate); the failures, with a one-minute back-off, are shared.
/// Node `b`, started afterwards with the CA in `upstream.extra_ca_file`
/// and an empty store, fetches the second origin's robots.txt at its first
/// request instead of taking the shared failure; node `a`, restarted with
/// the CA, does the same for the first origin (its own stored failure and
/// the shared one both predate it). Each robots.txt is fetched once.
#[test]
fn a_robots_failure_shared_from_before_a_node_started_does_not_block_its_first_use() {
    let _serial = serial();
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let answer = |_: &str, path: &str| match path {
        "/robots.txt" => {
            (200, vec![("Content-Type", "text/plain".to_string())], RULES.as_bytes().to_vec())
        }
        _ => page("page"),
    };
    let (x, y) = (TlsOrigin::start(&pki, answer), TlsOrigin::start(&pki, answer));
    let (ux, uy) = (
        format!("https://localhost:{}/page", x.port()),
        format!("https://localhost:{}/page", y.port()),
    );
    let redis = RedisServer::start();
    let redis_url = format!("\"{}\"", redis.url());
    let dir = TestDir::new("fleet-robots-restart");
    let ca = dir.join("origin-ca.pem");
    std::fs::write(&ca, &pki.ca_pem).expect("writing the test CA");
    let untrusted = "[robots]\nmode = \"enforce\"\n";
    let trusted =
        format!("{untrusted}[upstream]\nextra_ca_file = {:?}\n", ca.display().to_string());
    let get = |node: &Proxy, url: &str| {
        send_request(node.addr(), "GET", url, &[("User-Agent", "FleetBot/1.0")], b"")
    };

    let a = Proxy::start_with_config_env(
        &dir.subdir("a"),
        &node_config(&redis_url, None, "a", untrusted),
        &TEST_CREDENTIALS,
    );
    for url in [&ux, &uy] {
        let r = get(&a, url);
        assert_eq!(r.status, 403, "{}", r.describe());
        assert!(
            r.text().contains("certificate: ") && r.text().contains("`upstream.extra_ca_file`"),
            "{}",
            r.text()
        );
    }

    let b = Proxy::start_with_config_env(
        &dir.subdir("b"),
        &node_config(&redis_url, None, "b", &trusted),
        &TEST_CREDENTIALS,
    );
    let r = get(&b, &uy);
    assert_eq!(
        (r.status, r.text()),
        (200, "page".to_string()),
        "node b's first use fetched instead of taking the shared failure: {}",
        r.describe()
    );
    assert_eq!(y.count("https", "/robots.txt"), 1);

    a.stop_cleanly();
    let a = Proxy::start_with_config_env(
        &dir.subdir("a"),
        &node_config(&redis_url, None, "a", &trusted),
        &TEST_CREDENTIALS,
    );
    let r = get(&a, &ux);
    assert_eq!(
        (r.status, r.text()),
        (200, "page".to_string()),
        "node a's first use after its restart: {}",
        r.describe()
    );
    assert_eq!(x.count("https", "/robots.txt"), 1);
    // The fleet now shares the good snapshot: node b takes it.
    let r = get(&b, &format!("https://localhost:{}/private/x", x.port()));
    assert_eq!(r.status, 403, "{}", r.describe());
    assert!(r.text().contains("Disallow: /private"), "{}", r.text());
    assert_eq!(x.count("https", "/robots.txt"), 1, "one robots.txt fetch for the fleet");
}
