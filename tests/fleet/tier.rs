//! The fleet tier for stored responses: bodies in the bucket, entries in
//! Redis, filled into the local store of the node that asks.

use crate::common::*;
use crate::support::*;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// 200 KB of bytes that are not text, different per path.
fn body_for(path: &str) -> Vec<u8> {
    let seed = Sha256::digest(path.as_bytes());
    (0..200_000u32)
        .map(|i| seed[(i % 32) as usize] ^ (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn origin() -> Origin {
    Origin::start(|req| {
        if req.path() == "/robots.txt" {
            return Reply::new(404, &[], b"");
        }
        let body = body_for(req.path());
        // Slow enough that concurrent misses overlap.
        Reply::ok(
            &[
                ("Cache-Control", "max-age=600"),
                ("ETag", "\"e1\""),
                ("Content-Type", "application/octet-stream"),
            ],
            &body,
        )
        .delayed(Duration::from_millis(300))
    })
}

#[test]
fn a_page_fetched_through_one_node_is_served_by_the_others_byte_identical_without_the_origin() {
    let _serial = serial();
    let origin = origin();
    let fleet = Fleet::start("fleet-tier", true, "");
    let url = origin.url("/page");
    let want = body_for("/page");

    let a = fleet.get(0, &url);
    assert_eq!(a.status, 200, "{}", a.describe());
    // 200 KB stream to the client while they are stored: the head cannot
    // say `stored` yet (RFC 9211 section 2.5); the publication below shows it.
    assert!(a.cache_status().unwrap_or_default().contains("fwd=uri-miss"), "{}", a.describe());
    fleet.wait_counter(0, "published", 1, Duration::from_secs(10));
    assert_eq!(fleet.counter(0, "uploads"), 1);
    assert_eq!(fleet.redis.keys("entry:*").len(), 1, "one entry record in Redis");

    for i in [1, 2] {
        let r = fleet.get(i, &url);
        assert_eq!(r.status, 200, "node {i}: {}", r.describe());
        assert!(r.body == want, "node {i}: the body is byte-identical ({} bytes)", r.body.len());
        let cs = r.cache_status().unwrap_or_default();
        assert!(
            cs.contains("hit") && cs.contains("detail=fleet"),
            "node {i} says it came from the fleet tier: {cs}"
        );
        // Now in the node's own store: a local hit.
        let again = fleet.get(i, &url);
        let cs = again.cache_status().unwrap_or_default();
        assert!(
            cs.contains("hit") && !cs.contains("fleet"),
            "node {i} serves it locally now: {cs}"
        );
        assert!(again.body == want);
    }
    assert_eq!(requests_for(&origin, "/page").len(), 1, "the origin saw the page once");
    assert_eq!(fleet.counter(1, "tier_hits") + fleet.counter(2, "tier_hits"), 2);
}

#[test]
fn thirty_concurrent_misses_across_three_nodes_make_one_origin_fetch() {
    let _serial = serial();
    let origin = origin();
    let fleet = Fleet::start("fleet-collapse", true, "");
    let url = origin.url("/burst");
    let want = body_for("/burst");

    let rs = fleet.burst(30, |_| url.clone(), Duration::from_secs(30));
    for (i, r) in rs.iter().enumerate() {
        assert_eq!(r.status, 200, "request {i}: {}", r.describe());
        assert!(r.body == want, "request {i}: byte-identical body ({} bytes)", r.body.len());
    }
    assert_eq!(
        requests_for(&origin, "/burst").len(),
        1,
        "one origin fetch for 30 misses on 3 nodes"
    );
    let waits: u64 = (0..3).map(|i| fleet.counter(i, "tier_waits")).sum();
    assert!(waits >= 1, "the other nodes waited for the fetching node");
}

#[test]
fn a_body_that_does_not_match_its_name_is_discarded_and_counted() {
    let _serial = serial();
    let origin = origin();
    let fleet = Fleet::start("fleet-mismatch", true, "");
    let url = origin.url("/damaged");
    let want = body_for("/damaged");
    assert_eq!(fleet.get(0, &url).status, 200);
    fleet.wait_counter(0, "published", 1, Duration::from_secs(10));
    let sha = hex::encode(Sha256::digest(&want));
    let s3 = fleet.s3.as_ref().expect("bucket");
    // Same length, other bytes: only the hash can tell.
    let mut bad = want.clone();
    bad[1000] ^= 0xff;
    s3.put_object(&format!("bodies/{sha}"), &bad);

    let r = fleet.get(1, &url);
    assert_eq!(r.status, 200, "{}", r.describe());
    assert!(r.body == want, "the damaged body was never served");
    assert!(!r.cache_status().unwrap_or_default().contains("fleet"), "{}", r.describe());
    assert_eq!(fleet.counter(1, "body_mismatches"), 1, "counted");
    assert_eq!(requests_for(&origin, "/damaged").len(), 2, "node b went to the origin instead");
}
