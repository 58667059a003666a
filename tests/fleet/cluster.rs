//! The same sharing over a Redis Cluster (three primaries): the cluster
//! client routes every command by its key's hash tag, Lua scripts included.

use crate::common::*;
use crate::support::*;
use std::time::Duration;

#[test]
fn three_nodes_share_robots_and_the_fleet_tier_through_a_redis_cluster() {
    let _serial = serial();
    let origin = Origin::start(|req| {
        if req.path() == "/robots.txt" {
            return Reply::ok(
                &[("Content-Type", "text/plain")],
                b"User-agent: *\nDisallow: /private\n",
            )
            .delayed(Duration::from_millis(300));
        }
        Reply::ok(
            &[("Cache-Control", "max-age=600")],
            format!("page {}", req.target).repeat(100).as_bytes(),
        )
    });
    let cluster = RedisCluster::start();
    let s3 = S3Server::start("crawlcache-cluster");
    let dir = TestDir::new("fleet-cluster");
    let nodes: Vec<Proxy> = ["a", "b", "c"]
        .iter()
        .map(|n| {
            Proxy::start_with_config_env(
                &dir.subdir(n),
                &node_config(
                    &cluster.urls_toml(),
                    Some(&s3),
                    n,
                    "[robots]\nhonor_crawl_delay = true\n",
                ),
                &TEST_CREDENTIALS,
            )
        })
        .collect();
    let get =
        |i: usize, path: &str| nodes[i].get(&origin.url(path), &[("User-Agent", "FleetBot/1.0")]);

    let threads: Vec<_> = (0..12)
        .map(|i| {
            let (addr, url) = (nodes[i % 3].addr(), origin.url(&format!("/a{i}")));
            std::thread::spawn(move || proxy_get(addr, &url, &[("User-Agent", "FleetBot/1.0")]))
        })
        .collect();
    for t in threads {
        let r = t.join().unwrap_or_else(|_| panic!("request thread panicked"));
        assert_eq!(r.status, 200, "{}", r.describe());
        assert!(r.header("Robots-Status").unwrap_or("").starts_with("allowed"), "{}", r.describe());
    }
    assert_eq!(
        origin.requests().iter().filter(|r| r.path() == "/robots.txt").count(),
        1,
        "one robots.txt fetch for the fleet"
    );

    assert_eq!(get(0, "/shared").status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cluster.keys("entry:*").len() < 13 {
        assert!(
            std::time::Instant::now() < deadline,
            "entries published: {:?}",
            cluster.keys("entry:*")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = get(1, "/shared");
    assert!(r.cache_status().unwrap_or_default().contains("detail=fleet"), "{}", r.describe());
    assert_eq!(r.text(), "page /shared".repeat(100));
    assert_eq!(origin.requests().iter().filter(|r| r.path() == "/shared").count(), 1);
    // Keys live on several primaries, and an origin's robots keys together.
    let per_server: Vec<usize> = cluster.servers.iter().map(|s| s.keys("entry:*").len()).collect();
    assert!(
        per_server.iter().filter(|n| **n > 0).count() >= 2,
        "entries spread over the primaries: {per_server:?}"
    );
    let with_robots: Vec<usize> = cluster
        .servers
        .iter()
        .map(|s| s.keys("robots:snap:*").len() + s.keys("pace:*").len())
        .collect();
    assert_eq!(
        with_robots.iter().filter(|n| **n > 0).count(),
        1,
        "one origin's robots snapshot and pacing slot share a shard: {with_robots:?}"
    );
}
