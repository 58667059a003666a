//! `[fleet]`: where a fleet of crawlcache nodes shares its state.
//!
//! Empty `redis_url` (the default): single node, nothing shared. A
//! `redis_url` alone: robots.txt snapshots, refresh locks and Crawl-delay
//! pacing are shared. With `s3_bucket` as well: stored responses too (the
//! fleet tier: bodies in the bucket, entry metadata in Redis).

use crawlcache_base::units::de_duration;
use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// `[fleet]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    /// `fleet.redis_url`: one `redis://` or `rediss://` URL (a single
    /// Redis), or a list of them (the seed nodes of a Redis Cluster); empty
    /// for single-node mode.
    #[serde(deserialize_with = "de_redis_url")]
    pub redis_url: RedisUrl,
    /// `fleet.s3_endpoint`: the S3-compatible endpoint (`http://` or
    /// `https://`); empty for AWS S3 itself in `s3_region`.
    pub s3_endpoint: String,
    /// `fleet.s3_bucket`: the bucket holding bodies; empty for no fleet tier.
    pub s3_bucket: String,
    /// `fleet.s3_region`: the bucket's region (`us-east-1` when empty).
    pub s3_region: String,
    /// `fleet.node`: this node's name in locks and logs; empty for the host
    /// name.
    pub node: String,
    /// `fleet.timeout`: the longest one Redis command or one bucket request
    /// (plus one second per MB of body) may take before the engine is taken
    /// as unreachable.
    #[serde(deserialize_with = "de_duration")]
    pub timeout: Duration,
    /// `fleet.entry_ttl`: how long an entry's metadata stays in Redis after
    /// it was last published.
    #[serde(deserialize_with = "de_duration")]
    pub entry_ttl: Duration,
}

/// `fleet.redis_url`: none, one Redis, or the seed nodes of a Redis Cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RedisUrl {
    /// Empty: single-node mode.
    #[default]
    None,
    /// One Redis server (`redis://host:port/db` or `rediss://...`).
    Single(String),
    /// A Redis Cluster, reached through these seed nodes.
    Cluster(Vec<String>),
}

impl RedisUrl {
    /// Whether fleet mode is on.
    pub fn is_set(&self) -> bool {
        !matches!(self, RedisUrl::None)
    }

    /// The URLs with any password replaced by `***`, for logs.
    pub fn redacted(&self) -> String {
        let hide = |u: &String| match (u.find("://"), u.rfind('@')) {
            (Some(s), Some(at)) if at > s => format!("{}***@{}", &u[..s + 3], &u[at + 1..]),
            _ => u.clone(),
        };
        match self {
            RedisUrl::None => String::new(),
            RedisUrl::Single(u) => hide(u),
            RedisUrl::Cluster(v) => v.iter().map(hide).collect::<Vec<_>>().join(", "),
        }
    }
}

/// A `[fleet]` value or combination of keys that cannot be used; `Display`
/// names the key (or quotes the Redis URL) and says what to set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetConfigError {
    /// A Redis URL that is not `redis://` or `rediss://`.
    #[error("'{0}' is not a redis:// or rediss:// URL")]
    RedisScheme(String),
    /// A Redis URL without a host.
    #[error("'{0}' names no host")]
    RedisHost(String),
    /// `fleet.s3_bucket` without `fleet.redis_url`.
    #[error("bad value for key `fleet.s3_bucket`: the fleet tier keeps its entries' metadata in Redis; set `fleet.redis_url` too")]
    BucketWithoutRedis,
    /// `fleet.s3_endpoint` without `fleet.s3_bucket`.
    #[error("bad value for key `fleet.s3_endpoint`: set `fleet.s3_bucket` too (an endpoint without a bucket stores nothing)")]
    EndpointWithoutBucket,
    /// `fleet.s3_endpoint` is not an `http://` or `https://` URL.
    #[error("bad value for key `fleet.s3_endpoint`: '{0}' is not an http:// or https:// URL")]
    EndpointScheme(String),
    /// `fleet.timeout` is zero.
    #[error("bad value for key `fleet.timeout`: must be more than 0")]
    ZeroTimeout,
}

/// Checks one Redis URL: `redis://` or `rediss://` and a host. Errors:
/// [`FleetConfigError::RedisScheme`] or [`FleetConfigError::RedisHost`].
fn check_redis_url(u: &str) -> Result<String, FleetConfigError> {
    let u = u.trim();
    let rest = u
        .strip_prefix("redis://")
        .or_else(|| u.strip_prefix("rediss://"))
        .ok_or_else(|| FleetConfigError::RedisScheme(u.to_string()))?;
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    if host.is_empty() || host.starts_with('/') || host.starts_with(':') {
        return Err(FleetConfigError::RedisHost(u.to_string()));
    }
    Ok(u.to_string())
}

fn de_redis_url<'de, D: Deserializer<'de>>(d: D) -> Result<RedisUrl, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) if s.trim().is_empty() => Ok(RedisUrl::None),
        OneOrMany::One(s) => {
            check_redis_url(&s).map(RedisUrl::Single).map_err(serde::de::Error::custom)
        }
        OneOrMany::Many(v) if v.is_empty() => Ok(RedisUrl::None),
        OneOrMany::Many(v) => v
            .iter()
            .map(|u| check_redis_url(u))
            .collect::<Result<Vec<_>, _>>()
            .map(RedisUrl::Cluster)
            .map_err(serde::de::Error::custom),
    }
}

impl FleetConfig {
    /// Checks the combination of keys: the bucket needs Redis (its entries'
    /// metadata lives there), an endpoint needs a bucket and must be an
    /// `http://` or `https://` URL, the timeout must be above zero.
    /// Errors: [`FleetConfigError`], naming the key.
    pub fn validate(&self) -> Result<(), FleetConfigError> {
        let bucket = !self.s3_bucket.trim().is_empty();
        if bucket && !self.redis_url.is_set() {
            return Err(FleetConfigError::BucketWithoutRedis);
        }
        if !bucket && !self.s3_endpoint.trim().is_empty() {
            return Err(FleetConfigError::EndpointWithoutBucket);
        }
        let e = self.s3_endpoint.trim();
        if !(e.is_empty() || e.starts_with("http://") || e.starts_with("https://")) {
            return Err(FleetConfigError::EndpointScheme(e.to_string()));
        }
        if self.timeout.is_zero() {
            return Err(FleetConfigError::ZeroTimeout);
        }
        Ok(())
    }

    /// Whether the fleet tier for stored responses is configured.
    pub fn has_bucket(&self) -> bool {
        self.redis_url.is_set() && !self.s3_bucket.trim().is_empty()
    }

    /// `fleet.node`, or the host name when empty (`crawlcache` when the host
    /// name cannot be read).
    pub fn node_name(&self) -> String {
        let n = self.node.trim();
        if !n.is_empty() {
            return n.to_string();
        }
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "crawlcache".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<FleetConfig, Box<dyn std::error::Error>> {
        let base = "redis_url = \"\"\ns3_endpoint = \"\"\ns3_bucket = \"\"\ns3_region = \"\"\nnode = \"\"\ntimeout = \"1s\"\nentry_ttl = \"7d\"\n";
        let mut t: toml::Table = toml::from_str(base)?;
        let over: toml::Table = toml::from_str(toml_text)?;
        t.extend(over);
        let c: FleetConfig = toml::Value::Table(t).try_into()?;
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn redis_url_is_empty_one_url_or_a_cluster_seed_list() {
        assert_eq!(parse("").unwrap().redis_url, RedisUrl::None);
        assert_eq!(parse("redis_url = []").unwrap().redis_url, RedisUrl::None);
        assert_eq!(
            parse("redis_url = \"redis://127.0.0.1:6379/0\"").unwrap().redis_url,
            RedisUrl::Single("redis://127.0.0.1:6379/0".into())
        );
        assert_eq!(
            parse("redis_url = [\"redis://a:7000\", \"rediss://b:7001\"]").unwrap().redis_url,
            RedisUrl::Cluster(vec!["redis://a:7000".into(), "rediss://b:7001".into()])
        );
        for bad in ["\"http://a:6379\"", "\"redis://\"", "[\"redis://a\", \"tcp://b\"]", "5"] {
            assert!(parse(&format!("redis_url = {bad}")).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bucket_needs_redis_and_an_endpoint_needs_a_bucket() {
        let e = parse("s3_bucket = \"b\"").unwrap_err();
        assert!(e.to_string().contains("fleet.redis_url"), "{e}");
        let e = parse("redis_url = \"redis://a\"\ns3_endpoint = \"http://s3\"").unwrap_err();
        assert!(e.to_string().contains("fleet.s3_bucket"), "{e}");
        let e = parse("redis_url = \"redis://a\"\ns3_bucket = \"b\"\ns3_endpoint = \"s3.example\"")
            .unwrap_err();
        assert!(e.to_string().contains("fleet.s3_endpoint"), "{e}");
        let c = parse(
            "redis_url = \"redis://a\"\ns3_bucket = \"b\"\ns3_endpoint = \"http://127.0.0.1:9000\"",
        )
        .unwrap();
        assert!(c.has_bucket());
        assert!(!parse("redis_url = \"redis://a\"").unwrap().has_bucket());
    }

    #[test]
    fn passwords_are_hidden_in_logs_and_the_node_defaults_to_the_host_name() {
        let c = parse("redis_url = [\"redis://:secret@a:7000\", \"redis://b:7001\"]").unwrap();
        assert_eq!(c.redis_url.redacted(), "redis://***@a:7000, redis://b:7001");
        assert!(!c.node_name().is_empty());
        assert_eq!(parse("node = \" n1 \"").unwrap().node_name(), "n1");
    }
}
