//! Fleet counters, exported on `/metrics` (`crawlcache_fleet_*`) and in
//! `/stats` (`"fleet"`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the fleet side of one node, monotonic since start.
#[derive(Debug, Default)]
pub struct FleetMetrics {
    /// Local misses answered from the fleet tier (copied into the local store).
    pub tier_hits: AtomicU64,
    /// Local misses the fleet tier had nothing usable for.
    pub tier_misses: AtomicU64,
    /// Misses that waited for another node's origin fetch of the same URL.
    pub tier_waits: AtomicU64,
    /// Variants published to the fleet tier.
    pub published: AtomicU64,
    /// Bodies uploaded to the bucket.
    pub uploads: AtomicU64,
    /// Bodies not uploaded because the bucket already had them.
    pub uploads_skipped: AtomicU64,
    /// Publications dropped because too many were queued.
    pub publish_dropped: AtomicU64,
    /// Downloaded bodies whose bytes did not match their name: discarded.
    pub body_mismatches: AtomicU64,
    /// Entries whose body was missing from the bucket.
    pub body_missing: AtomicU64,
    /// Records from Redis that failed validation (never used).
    pub invalid_records: AtomicU64,
    /// robots.txt snapshots taken from the fleet instead of fetched.
    pub robots_shared: AtomicU64,
    /// robots.txt fetches made by this node for the fleet (refresh lock won).
    pub robots_fetched_for_fleet: AtomicU64,
    /// robots.txt fetches made alone because Redis could not be used.
    pub robots_fetched_alone: AtomicU64,
    /// Crawl-delay slots reserved in Redis.
    pub pace_shared: AtomicU64,
    /// Crawl-delay slots reserved locally because Redis could not be used.
    pub pace_local: AtomicU64,
}

impl FleetMetrics {
    /// Adds one to a counter.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// `(name, help, value)` of each counter.
    pub fn counters(&self) -> Vec<(&'static str, &'static str, u64)> {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            (
                "crawlcache_fleet_tier_hits_total",
                "Local misses answered from the fleet tier.",
                g(&self.tier_hits),
            ),
            (
                "crawlcache_fleet_tier_misses_total",
                "Local misses the fleet tier had nothing usable for.",
                g(&self.tier_misses),
            ),
            (
                "crawlcache_fleet_tier_waits_total",
                "Misses that waited for another node's origin fetch.",
                g(&self.tier_waits),
            ),
            (
                "crawlcache_fleet_published_total",
                "Variants published to the fleet tier.",
                g(&self.published),
            ),
            ("crawlcache_fleet_uploads_total", "Bodies uploaded to the bucket.", g(&self.uploads)),
            (
                "crawlcache_fleet_uploads_skipped_total",
                "Bodies the bucket already had.",
                g(&self.uploads_skipped),
            ),
            (
                "crawlcache_fleet_publish_dropped_total",
                "Publications dropped because too many were queued.",
                g(&self.publish_dropped),
            ),
            (
                "crawlcache_fleet_body_mismatches_total",
                "Downloaded bodies not matching their SHA-256 name or length, discarded.",
                g(&self.body_mismatches),
            ),
            (
                "crawlcache_fleet_body_missing_total",
                "Fleet entries whose body was missing from the bucket.",
                g(&self.body_missing),
            ),
            (
                "crawlcache_fleet_invalid_records_total",
                "Records from Redis that failed validation.",
                g(&self.invalid_records),
            ),
            (
                "crawlcache_fleet_robots_shared_total",
                "robots.txt snapshots taken from the fleet instead of fetched.",
                g(&self.robots_shared),
            ),
            (
                "crawlcache_fleet_robots_fetched_total",
                "robots.txt fetches made by this node for the fleet.",
                g(&self.robots_fetched_for_fleet),
            ),
            (
                "crawlcache_fleet_robots_fetched_alone_total",
                "robots.txt fetches made alone because Redis could not be used.",
                g(&self.robots_fetched_alone),
            ),
            (
                "crawlcache_fleet_pace_shared_total",
                "Crawl-delay slots reserved in Redis.",
                g(&self.pace_shared),
            ),
            (
                "crawlcache_fleet_pace_local_total",
                "Crawl-delay slots reserved locally because Redis could not be used.",
                g(&self.pace_local),
            ),
        ]
    }
}
