//! Fleet mode: many crawlcache nodes sharing robots.txt state, Crawl-delay
//! pacing and stored responses through Redis (or a Redis Cluster) and an
//! S3-compatible bucket (docs/fleet.md has the design at scale).
//!
//! - robots.txt ([`robots`]): snapshots live in Redis per origin and fetch
//!   identity; one node wins the origin's refresh lock (`SET
//!   robots:refresh:{ORIGIN}:ID NX EX ttl`) and fetches, the others wait for
//!   its snapshot (first sight) or keep using theirs (refresh). Every node
//!   keeps a local copy in its registry.
//! - Politeness ([`pace`]): one atomic next-slot reservation in Redis per
//!   request to an origin, so the spacing holds for the fleet as a whole.
//! - Stored responses ([`tier`]): the fleet tier behind each node's local
//!   store: bodies in the bucket under their SHA-256, entry records in
//!   Redis. A local miss consults it before the origin; what a node stores
//!   is published to it in the background; one node fetches a URL from the
//!   origin while the others wait for its entry.
//! - Faults ([`health`]): an engine that fails is skipped for a moment and
//!   tried again; meanwhile the node works as a single node does.
//!
//! The request path and the robots registry reach this module through a
//! few named hooks: `ProxyState::fleet`, `stages::robots::pace`,
//! `stages::forward::run`, `stages::tee` (publish), `stages::revalidate`
//! (publish a freshened head) and `RobotsRegistry::set_shared`.

pub mod bucket;
pub mod config;
pub mod entry;
pub mod health;
pub mod keys;
pub mod metrics;
pub mod pace;
pub mod redis;
pub mod robots;
pub mod tier;
mod tier_state;

use crawlcache_store::Store;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// While an engine is down, asks it every [`health::RETRY_AFTER`] (PING;
/// HEAD of an object that does not exist) so that the node reconnects and
/// shares again as soon as it answers, not at the first request after.
/// Ends when the fleet is dropped.
async fn probe(fleet: std::sync::Weak<Fleet>) {
    loop {
        tokio::time::sleep(health::RETRY_AFTER).await;
        let Some(f) = fleet.upgrade() else { return };
        if !f.redis.health.is_up() {
            let _ = f.redis.query::<String>(::redis::cmd("PING")).await;
        }
        if let Some(b) = f.bucket.as_ref().filter(|b| !b.health.is_up()) {
            let _ = b.probe().await;
        }
    }
}

/// What [`Fleet::start`] needs from the node's configuration.
pub struct NodeSettings<'a> {
    /// `[fleet]`.
    pub config: &'a config::FleetConfig,
    /// The local store the fleet tier fills and publishes from.
    pub store: &'a Store,
    /// Largest body taken from the fleet tier, bytes
    /// (`cache.max_object_size`).
    pub max_object_size: u64,
    /// The longest an origin fetch may take (`upstream.connect_timeout` +
    /// `upstream.response_timeout`): locks live twice that.
    pub fetch_time: Duration,
    /// The robots.txt fetch identity ([`keys::identity_id`] of
    /// `robots.user_agent` and `robots.agent`).
    pub robots_identity: String,
    /// Makes the connector the bucket's client dials with (errors:
    /// [`redis::FleetError::Setup`], saying why not); called only when a
    /// bucket is configured.
    pub bucket_connector: &'a dyn Fn() -> Result<bucket::Connector, redis::FleetError>,
}

/// One node's view of the fleet.
pub struct Fleet {
    /// `[fleet]`.
    pub config: config::FleetConfig,
    /// This node's name.
    pub node: String,
    /// Shared state: robots snapshots and locks, pacing, entry records.
    pub redis: redis::Redis,
    /// Bodies of the fleet tier (`None`: Redis only, no fleet tier).
    pub bucket: Option<bucket::Bucket>,
    /// Counters.
    pub metrics: metrics::FleetMetrics,
    /// The local store the fleet tier fills and publishes from.
    pub store: Store,
    /// Largest body taken from the fleet tier (`cache.max_object_size`).
    pub max_object_size: u64,
    /// How long a lock (robots refresh, cross-node fetch) lives: twice the
    /// longest an origin fetch may take, so a crashed holder frees it.
    pub lock_ttl: Duration,
    /// How long a node waits for another node's fetch before going to the
    /// origin itself: the longest an origin fetch may take.
    pub wait_bound: Duration,
    /// The fetch identity id of robots keys ([`keys::identity_id`]).
    pub robots_identity: String,
    tier: tier_state::TierState,
    tokens: AtomicU64,
}

impl Fleet {
    /// The fleet of `node.config` over the local store, or `None` when
    /// `fleet.redis_url` is empty (single node). Connects to nothing yet.
    /// Must run inside a tokio runtime. Errors
    /// ([`redis::FleetError::Setup`]): a Redis URL the client refuses, a
    /// bucket without credentials.
    pub fn start(node: NodeSettings<'_>) -> Result<Option<Arc<Fleet>>, redis::FleetError> {
        let fc = node.config;
        if !fc.redis_url.is_set() {
            return Ok(None);
        }
        let redis = redis::Redis::new(&fc.redis_url, fc.timeout)?;
        let bucket = match fc.has_bucket() {
            true => Some(bucket::Bucket::new(fc, (node.bucket_connector)()?)?),
            false => None,
        };
        let (fetch_time, store, config) = (node.fetch_time, node.store, node);
        let node = fc.node_name();
        tracing::info!(
            node = %node,
            redis = %fc.redis_url.redacted(),
            bucket = bucket.as_ref().map_or("", |b| b.name()),
            "fleet mode: sharing robots.txt state and Crawl-delay pacing through Redis{}",
            if bucket.is_some() { ", stored responses through the bucket" } else { "" }
        );
        let fleet = Arc::new(Fleet {
            config: fc.clone(),
            node,
            redis,
            bucket,
            metrics: metrics::FleetMetrics::default(),
            store: store.clone(),
            max_object_size: config.max_object_size,
            lock_ttl: (fetch_time * 2).max(Duration::from_secs(10)),
            wait_bound: fetch_time.max(Duration::from_secs(5)),
            robots_identity: config.robots_identity,
            tier: tier_state::TierState::default(),
            tokens: AtomicU64::new(0),
        });
        tokio::spawn(probe(Arc::downgrade(&fleet)));
        Ok(Some(fleet))
    }

    /// A lock value no other holder uses: node, process, counter, time.
    pub fn lock_token(&self) -> String {
        let n = self.tokens.fetch_add(1, Ordering::Relaxed);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!("{}:{}:{n}:{t}", self.node, std::process::id())
    }

    /// Reserves this request's Crawl-delay slot for `origin_key` with
    /// spacing `delay` in Redis: how long to wait before contacting the
    /// origin, or `None` when Redis cannot be used (pace locally then).
    pub async fn reserve_slot(&self, origin_key: &str, delay: Duration) -> Option<Duration> {
        match pace::reserve(&self.redis, origin_key, delay).await {
            Ok(wait) => {
                metrics::FleetMetrics::inc(&self.metrics.pace_shared);
                Some(wait)
            }
            Err(e) => {
                if matches!(e, redis::FleetError::Invalid(_)) {
                    metrics::FleetMetrics::inc(&self.metrics.invalid_records);
                    tracing::warn!("fleet: pacing slot for {origin_key}: {e}; pacing locally");
                }
                metrics::FleetMetrics::inc(&self.metrics.pace_local);
                None
            }
        }
    }

    /// When a reserved wait has ended: `Some(ZERO)` to send now (recorded
    /// as the origin's last send), `Some(wait)` to wait and ask again
    /// ([`pace::confirm`]), `None` when Redis cannot be used (send).
    pub async fn confirm_send(&self, origin_key: &str, delay: Duration) -> Option<Duration> {
        match pace::confirm(&self.redis, origin_key, delay).await {
            Ok(wait) => Some(wait),
            Err(e) => {
                if matches!(e, redis::FleetError::Invalid(_)) {
                    metrics::FleetMetrics::inc(&self.metrics.invalid_records);
                    tracing::warn!("fleet: send check for {origin_key}: {e}");
                }
                None
            }
        }
    }

    /// `/metrics` lines: the counters, `crawlcache_fleet_up{engine}` and
    /// `crawlcache_fleet_errors_total{engine}`.
    pub fn prometheus(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (name, help, value) in self.metrics.counters() {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
        }
        let engines: Vec<&health::Health> = std::iter::once(&self.redis.health)
            .chain(self.bucket.as_ref().map(|b| &b.health))
            .collect();
        let _ = writeln!(
            out,
            "# HELP crawlcache_fleet_up Whether the engine answered its last operation (1) or is being skipped (0).\n# TYPE crawlcache_fleet_up gauge"
        );
        for h in &engines {
            let _ = writeln!(
                out,
                "crawlcache_fleet_up{{engine=\"{}\"}} {}",
                h.engine,
                u8::from(h.is_up())
            );
        }
        let _ = writeln!(
            out,
            "# HELP crawlcache_fleet_errors_total Failed operations (errors and timeouts) by engine.\n# TYPE crawlcache_fleet_errors_total counter"
        );
        for h in &engines {
            let _ = writeln!(
                out,
                "crawlcache_fleet_errors_total{{engine=\"{}\"}} {}",
                h.engine,
                h.errors.load(Ordering::Relaxed)
            );
        }
        out
    }

    /// `/stats` `"fleet"`: node, engines up, errors and the counters.
    pub fn stats_json(&self) -> serde_json::Value {
        let mut counters = serde_json::Map::new();
        for (name, _, value) in self.metrics.counters() {
            counters.insert(
                name.trim_start_matches("crawlcache_fleet_").trim_end_matches("_total").to_string(),
                value.into(),
            );
        }
        serde_json::json!({
            "node": self.node,
            "redis_up": self.redis.health.is_up(),
            "redis_errors": self.redis.health.errors.load(Ordering::Relaxed),
            "bucket": self.bucket.as_ref().map(|b| b.name()),
            "bucket_up": self.bucket.as_ref().map(|b| b.health.is_up()),
            "bucket_errors": self.bucket.as_ref().map(|b| b.health.errors.load(Ordering::Relaxed)),
            "counters": counters,
        })
    }
}
