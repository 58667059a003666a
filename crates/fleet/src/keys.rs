//! The names of everything the fleet keeps in Redis and in the bucket.
//!
//! Redis Cluster places a key by the CRC16 of its hash tag (the part
//! between the first `{` and the next `}`), so keys that one operation or
//! one Lua script touches together share a tag:
//! - per origin: `robots:snap:{ORIGIN}:ID`, `robots:refresh:{ORIGIN}:ID` and
//!   `pace:{ORIGIN}` (tag: the origin, `scheme://host:port`; ID: the fetch
//!   identity, [`identity_id`]), so an origin's robots state and pacing
//!   live on one shard and the load of a busy origin stays on it;
//! - per URL: `entry:{H}` and `fetch:{H}` (tag: H, the first 128 bits of the
//!   SHA-256 of the primary cache key, hex), spreading URLs evenly;
//! - per body: `body:{SHA256}`, the "uploaded" mark of a body.
//!
//! Bodies live in the bucket as `bodies/SHA256` (lower-case hex).

use sha2::{Digest, Sha256};

/// The hash-tag text for `origin_key` (`scheme://host:port`): the key
/// itself, or its SHA-256 in the (impossible for a parsed URL) case that it
/// holds a brace, which would cut the tag short.
fn origin_tag(origin_key: &str) -> String {
    if origin_key.contains(['{', '}']) {
        hex::encode(Sha256::digest(origin_key.as_bytes()))
    } else {
        origin_key.to_string()
    }
}

/// The short id of a robots.txt fetch identity (the first 64 bits of the
/// SHA-256 of the configured `robots.user_agent`, else `robots.agent`, else
/// `*`), so fleets or nodes configured as different crawlers never share
/// rules fetched for another identity.
pub fn identity_id(user_agent: &str, agent: &str) -> String {
    let id = [user_agent.trim(), agent.trim()].into_iter().find(|s| !s.is_empty()).unwrap_or("*");
    hex::encode(&Sha256::digest(id.as_bytes())[..8])
}

/// `robots:snap:{ORIGIN}:ID`: the origin's shared robots.txt snapshot.
pub fn robots_snapshot(origin_key: &str, identity: &str) -> String {
    format!("robots:snap:{{{}}}:{identity}", origin_tag(origin_key))
}

/// `robots:refresh:{ORIGIN}:ID`: held (`SET NX EX`) by the node fetching
/// the origin's robots.txt for the fleet.
pub fn robots_refresh(origin_key: &str, identity: &str) -> String {
    format!("robots:refresh:{{{}}}:{identity}", origin_tag(origin_key))
}

/// `pace:{ORIGIN}`: the origin's next free request slot (milliseconds,
/// Redis clock).
pub fn pace(origin_key: &str) -> String {
    format!("pace:{{{}}}", origin_tag(origin_key))
}

/// The hash tag of a primary cache key: 32 hex digits of its SHA-256.
pub fn url_tag(primary: &str) -> String {
    hex::encode(&Sha256::digest(primary.as_bytes())[..16])
}

/// `entry:{H}`: a hash from secondary key to the variant's record
/// ([`super::entry`]).
pub fn entry(primary: &str) -> String {
    format!("entry:{{{}}}", url_tag(primary))
}

/// `fetch:{H}`: held (`SET NX PX`) by the node fetching the URL from the
/// origin for the fleet (collapsed forwarding across nodes).
pub fn fetch_lock(primary: &str) -> String {
    format!("fetch:{{{}}}", url_tag(primary))
}

/// `body:{SHA256}`: set once the body is in the bucket.
pub fn body_mark(sha256: &str) -> String {
    format!("body:{{{sha256}}}")
}

/// The bucket object of a body: `bodies/SHA256`.
pub fn body_object(sha256: &str) -> String {
    format!("bodies/{sha256}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::Slot;

    #[test]
    fn an_origins_robots_and_pacing_keys_share_one_cluster_slot() {
        let o = "https://example.org:443";
        let id = identity_id("", "ExampleBot");
        let slot = Slot::for_key(pace(o));
        assert_eq!(Slot::for_key(robots_snapshot(o, &id)), slot);
        assert_eq!(Slot::for_key(robots_refresh(o, &id)), slot);
        assert_eq!(
            robots_refresh(o, &id),
            format!("robots:refresh:{{https://example.org:443}}:{id}")
        );
    }

    #[test]
    fn a_urls_entry_and_fetch_lock_share_a_slot_and_urls_spread() {
        let u = "http://example.org/a?b=1";
        assert_eq!(Slot::for_key(entry(u)), Slot::for_key(fetch_lock(u)));
        let slots: std::collections::HashSet<_> = (0..200)
            .map(|i| format!("{:?}", Slot::for_key(entry(&format!("http://example.org/p{i}")))))
            .collect();
        assert!(slots.len() > 150, "URLs of one host spread over slots: {}", slots.len());
    }

    #[test]
    fn identities_differ_by_configuration_only() {
        assert_eq!(identity_id("", ""), identity_id(" ", ""));
        assert_ne!(identity_id("", "ABot"), identity_id("", "BBot"));
        assert_eq!(
            identity_id("MyBot/1", "ABot"),
            identity_id("MyBot/1", "BBot"),
            "user_agent wins"
        );
        assert_eq!(identity_id("", "").len(), 16);
    }

    #[test]
    fn a_brace_in_an_origin_cannot_cut_the_tag() {
        let k = pace("http://a}b:80");
        assert_eq!(k.matches('{').count(), 1);
        assert_eq!(k.matches('}').count(), 1);
    }
}
