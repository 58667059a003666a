//! Crawl-delay across the fleet: the spacing holds for the fleet as a whole.

use crate::common::*;
use crate::support::*;
use std::time::Duration;

/// The tolerance on the spacing between two requests from different nodes
/// (docs/fleet.md, "Running a fleet"; crates/fleet/src/pace.rs): the difference of their
/// Redis round trips and connection set-up.
const TOLERANCE: Duration = Duration::from_millis(100);

#[test]
fn crawl_delay_1_spaces_thirty_requests_from_three_nodes_one_second_apart() {
    let _serial = serial();
    let origin = Origin::start(|req| {
        if req.path() == "/robots.txt" {
            return Reply::ok(
                &[("Content-Type", "text/plain")],
                b"User-agent: *\nCrawl-delay: 1\n",
            );
        }
        Reply::ok(&[("Cache-Control", "max-age=600")], format!("page {}", req.target).as_bytes())
    });
    let fleet = Fleet::start("fleet-pace", false, "[robots]\nhonor_crawl_delay = true\n");
    // 10 distinct pages per node, all at once; the last waits about 30 s.
    let rs = fleet.burst(30, |i| origin.url(&format!("/p{i}")), Duration::from_secs(90));
    for (i, r) in rs.iter().enumerate() {
        assert_eq!(r.status, 200, "request {i}: {}", r.describe());
    }
    let mut pages: Vec<_> =
        origin.requests().into_iter().filter(|r| r.path() != "/robots.txt").collect();
    assert_eq!(pages.len(), 30);
    pages.sort_by_key(|r| r.arrived);
    let gaps: Vec<Duration> = pages.windows(2).map(|w| w[1].arrived - w[0].arrived).collect();
    let min = gaps.iter().min().copied().unwrap_or_default();
    let span = pages[pages.len() - 1].arrived - pages[0].arrived;
    eprintln!("fleet pacing: 30 requests over {span:?}, smallest gap {min:?}");
    assert!(
        min + TOLERANCE >= Duration::from_secs(1),
        "every two requests to the origin are at least 1 s apart (less {TOLERANCE:?}); smallest gap {min:?}; gaps {gaps:?}"
    );
    let shared: u64 = (0..3).map(|i| fleet.counter(i, "pace_shared")).sum();
    assert!(shared >= 30, "the slots came from Redis: {shared}");
    // Cache hits are never delayed: they take no slot.
    let before = fleet.counter(0, "pace_shared");
    let r = fleet.get(0, &origin.url("/p0"));
    assert!(r.cache_status().unwrap_or_default().contains("hit"), "{}", r.describe());
    assert_eq!(fleet.counter(0, "pace_shared"), before, "a hit reserves no slot");
}
