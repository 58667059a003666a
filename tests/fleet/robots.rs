//! robots.txt across the fleet (Redis only, no bucket): one fetch for the
//! fleet at first sight, one conditional refresh for the fleet after the
//! fresh window.

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
            return Reply::ok(&[("ETag", "\"r1\""), ("Content-Type", "text/plain")], RULES.as_bytes()).delayed(Duration::from_millis(300));
        }
        Reply::ok(&[("Cache-Control", "max-age=600")], format!("page {}", req.target).as_bytes())
    })
}

#[test]
fn thirty_first_sight_requests_over_three_nodes_make_one_robots_fetch_and_one_refresh() {
    let _serial = serial();
    let origin = origin();
    let fleet = Fleet::start("fleet-robots", false, "[robots]\nfresh = \"3s\"\nstale_usable = \"1h\"\nhard_max = \"2h\"\n");

    let rs = fleet.burst(30, |i| origin.url(&format!("/a{i}")), Duration::from_secs(30));
    for (i, r) in rs.iter().enumerate() {
        assert_eq!(r.status, 200, "request {i}: {}", r.describe());
        let rstatus = r.header("Robots-Status").unwrap_or("");
        assert!(rstatus.starts_with("allowed"), "request {i} was judged by the shared rules: {}", r.describe());
    }
    let fetches = requests_for(&origin, "/robots.txt");
    assert_eq!(fetches.len(), 1, "one robots.txt fetch for the whole fleet, got {}", fetches.len());
    // Every node has the rules: a disallowed URL says so on each.
    for i in 0..3 {
        let r = fleet.get(i, &origin.url("/private/x"));
        assert!(r.header("Robots-Status").unwrap_or("").starts_with("disallowed; rule=\"Disallow: /private\""), "node {i}: {}", r.describe());
    }
    let shared: u64 = (0..3).map(|i| fleet.counter(i, "robots_shared")).sum();
    let fetched: u64 = (0..3).map(|i| fleet.counter(i, "robots_fetched")).sum();
    assert_eq!((fetched, shared), (1, 2), "one node fetched for the fleet, two took its snapshot");

    // Past the fresh window, a burst: one conditional refresh for the fleet.
    std::thread::sleep(Duration::from_millis(3500));
    let rs = fleet.burst(30, |i| origin.url(&format!("/b{i}")), Duration::from_secs(30));
    assert!(rs.iter().all(|r| r.status == 200), "the burst is served while the rules are refreshed");
    let all = origin.wait_for_requests(1 + 30 + 3 + 30 + 1, Duration::from_secs(15));
    let robots: Vec<_> = all.iter().filter(|r| r.path() == "/robots.txt").collect();
    assert_eq!(robots.len(), 2, "first fetch and one refresh");
    assert_eq!(robots[1].header("If-None-Match"), Some("\"r1\""), "the refresh is conditional");
    // Give the other nodes' refreshes time to settle on the shared snapshot;
    // none of them may reach the origin.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(requests_for(&origin, "/robots.txt").len(), 2, "still one refresh for the whole fleet");
    for i in 0..3 {
        let r = fleet.get(i, &origin.url("/c"));
        let h = r.header("Robots-Status").unwrap_or("").to_string();
        assert!(h.contains("disposition=cached"), "node {i} uses the refreshed (fresh) snapshot: {h}");
    }
}
