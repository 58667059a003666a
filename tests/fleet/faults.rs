//! Redis, then the bucket, stopped mid-crawl and brought back: no request
//! a single node would serve fails, robots verdicts go on from the local
//! snapshots, and the nodes share again once the engine is back, without
//! a restart.

use crate::common::*;
use crate::support::*;
use std::time::Duration;

fn origin() -> Origin {
    Origin::start(|req| {
        if req.path() == "/robots.txt" {
            return Reply::ok(
                &[("Content-Type", "text/plain")],
                b"User-agent: *\nDisallow: /private\n",
            );
        }
        Reply::ok(
            &[("Cache-Control", "max-age=600"), ("ETag", "\"x\"")],
            format!("body of {}", req.target).repeat(50).as_bytes(),
        )
    })
}

/// Waits (bounded) until every node reports `key` (`redis_up`,
/// `bucket_up`) true in `/stats`.
fn wait_up(fleet: &Fleet, key: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    for i in 0..3 {
        while fleet.fleet_stats(i)[key] != serde_json::Value::Bool(true) {
            assert!(
                std::time::Instant::now() < deadline,
                "node {i} did not report {key} within 15 s:\n{}",
                fleet.nodes[i].stderr_tail(20)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Requests `path` through every node; each must be 200 with the origin's body.
fn all_nodes_serve(fleet: &Fleet, origin: &Origin, path: &str) -> Vec<Response> {
    (0..3)
        .map(|i| {
            let r = fleet.get(i, &origin.url(path));
            assert_eq!(r.status, 200, "node {i} {path}: {}", r.describe());
            assert_eq!(r.text(), format!("body of {path}").repeat(50), "node {i} {path}");
            r
        })
        .collect()
}

#[test]
fn redis_then_the_bucket_stopped_mid_crawl_and_restarted() {
    let _serial = serial();
    let origin = origin();
    let mut fleet = Fleet::start("fleet-faults", true, "");
    all_nodes_serve(&fleet, &origin, "/warm");
    fleet.wait_counter(0, "published", 1, Duration::from_secs(10));
    assert_eq!(requests_for(&origin, "/robots.txt").len(), 1);

    // Redis goes away.
    fleet.redis.stop();
    for path in ["/r1", "/r2", "/warm"] {
        for r in all_nodes_serve(&fleet, &origin, path) {
            let h = r.header("Robots-Status").unwrap_or("").to_string();
            assert!(
                h.starts_with("allowed") && h.contains("disposition=cached"),
                "verdicts from the local snapshots: {h}"
            );
        }
    }
    for i in 0..3 {
        let r = fleet.get(i, &origin.url("/private/a"));
        assert!(
            r.header("Robots-Status").unwrap_or("").starts_with("disallowed"),
            "never \"disallow everything\", never \"allow everything\": {}",
            r.describe()
        );
    }
    assert_eq!(
        requests_for(&origin, "/robots.txt").len(),
        1,
        "no robots.txt refetch while Redis is down"
    );
    assert_eq!(fleet.nodes[0].metric("crawlcache_fleet_up{engine=\"redis\"}"), 0);
    assert!(fleet.fleet_stats(0)["redis_errors"].as_u64().unwrap_or(0) >= 1);
    assert!(
        fleet.nodes[0].log_shows("fleet: redis unusable", Duration::from_secs(5)),
        "a warning says so"
    );

    // Redis comes back (empty): the nodes reconnect by themselves and share
    // again, without a restart.
    fleet.redis.start_again();
    wait_up(&fleet, "redis_up");
    let before = fleet.counter(0, "published");
    assert_eq!(fleet.get(0, &origin.url("/after-redis")).status, 200);
    fleet.wait_counter(0, "published", before + 1, Duration::from_secs(10));
    for i in [1, 2] {
        let r = fleet.get(i, &origin.url("/after-redis"));
        assert!(
            r.cache_status().unwrap_or_default().contains("detail=fleet"),
            "node {i} shares again: {}",
            r.describe()
        );
    }
    assert_eq!(requests_for(&origin, "/after-redis").len(), 1);
    assert_eq!(fleet.nodes[1].metric("crawlcache_fleet_up{engine=\"redis\"}"), 1);

    // A page only node a has, in the fleet tier.
    let before = fleet.counter(0, "published");
    assert_eq!(fleet.get(0, &origin.url("/only-a")).status, 200);
    fleet.wait_counter(0, "published", before + 1, Duration::from_secs(10));

    // The bucket goes away.
    fleet.s3.as_mut().expect("bucket").stop();
    all_nodes_serve(&fleet, &origin, "/s1");
    all_nodes_serve(&fleet, &origin, "/after-redis");
    let down = (0..3).any(|i| fleet.nodes[i].metric("crawlcache_fleet_up{engine=\"bucket\"}") == 0);
    assert!(down, "a node saw the bucket fail");

    // The bucket comes back, empty: records pointing at lost bodies are
    // dropped, and new pages are shared again.
    fleet.s3.as_mut().expect("bucket").start_again();
    wait_up(&fleet, "bucket_up");
    let before = fleet.counter(0, "published");
    assert_eq!(fleet.get(0, &origin.url("/after-s3")).status, 200);
    fleet.wait_counter(0, "published", before + 1, Duration::from_secs(10));
    for i in [1, 2] {
        let r = fleet.get(i, &origin.url("/after-s3"));
        assert!(
            r.cache_status().unwrap_or_default().contains("detail=fleet"),
            "node {i} shares again: {}",
            r.describe()
        );
    }
    assert_eq!(requests_for(&origin, "/after-s3").len(), 1);
    // The restarted bucket lost /only-a's body: its record is dropped, the
    // page comes from the origin.
    let r = fleet.get(1, &origin.url("/only-a"));
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(r.text(), "body of /only-a".repeat(50));
    assert_eq!(fleet.counter(1, "body_missing"), 1);
    assert_eq!(requests_for(&origin, "/only-a").len(), 2);
}
