//! Per-URL policy rules (SPEC section 6): `[[cache.rules]]`, tried in
//! order, the first matching the host (glob) and path (prefix) applies.
//! A rule may bound the freshness lifetime RFC 9111 computes (`min_ttl`,
//! `max_ttl`), forbid storing (`never_store`), or list status codes to
//! store (even without freshness information; with `min_ttl` they are
//! fresh that long) or to skip. None by default: pure RFC 9111. A response
//! whose handling a rule changed says so in `Cache-Status`
//! (`detail="rule NAME"`).

use crate::units::de_duration;
use serde::Deserialize;
use std::time::Duration;

/// One `[[cache.rules]]` table.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    /// Named in `Cache-Status` (default: `host` + `path_prefix`).
    #[serde(default)]
    pub name: String,
    /// Host glob (`*` for every host).
    #[serde(default = "any")]
    pub host: String,
    /// Path prefix.
    #[serde(default = "root")]
    pub path_prefix: String,
    /// Lower bound of the freshness lifetime.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub min_ttl: Option<Duration>,
    /// Upper bound of the freshness lifetime.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub max_ttl: Option<Duration>,
    /// Never store responses for matching URLs in the cache.
    #[serde(default)]
    pub never_store: bool,
    /// Status codes stored even when RFC 9111 finds no freshness
    /// information for them.
    #[serde(default)]
    pub store_status: Vec<u16>,
    /// Status codes never stored.
    #[serde(default)]
    pub skip_status: Vec<u16>,
}

fn any() -> String {
    "*".into()
}
fn root() -> String {
    "/".into()
}

fn de_opt_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de_duration(d).map(Some)
}

impl PolicyRule {
    /// The name shown in `Cache-Status`.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            format!("{}{}", self.host, self.path_prefix)
        } else {
            self.name.clone()
        }
    }

    /// `lifetime` bounded by `min_ttl` / `max_ttl`; `None` when unchanged.
    pub fn bound(&self, lifetime: Duration) -> Option<Duration> {
        let mut l = lifetime;
        if let Some(max) = self.max_ttl {
            l = l.min(max);
        }
        if let Some(min) = self.min_ttl {
            l = l.max(min);
        }
        (l != lifetime).then_some(l)
    }

    /// Whether the rule bounds the lifetime at all.
    pub fn bounds_lifetime(&self) -> bool {
        self.min_ttl.is_some() || self.max_ttl.is_some()
    }
}

/// The first rule matching the cache key `key` (a normalised absolute URL).
pub fn find<'a>(rules: &'a [PolicyRule], key: &str) -> Option<&'a PolicyRule> {
    if rules.is_empty() {
        return None;
    }
    let uri = key.parse::<http::Uri>().ok()?;
    let (host, path) = (uri.host().unwrap_or(""), uri.path());
    rules.iter().find(|r| super::key_rules::glob_match(&r.host, host) && path.starts_with(r.path_prefix.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_match_and_bounds() {
        let rules: Vec<PolicyRule> = toml::from_str::<toml::Table>(
            "[[r]]\nhost = \"*.example\"\npath_prefix = \"/news/\"\nmax_ttl = \"1m\"\n[[r]]\nname = \"all\"\nnever_store = true\n",
        )
        .unwrap()["r"]
            .clone()
            .try_into()
            .unwrap();
        let r = find(&rules, "http://www.example/news/1").unwrap();
        assert_eq!(r.bound(Duration::from_secs(3600)), Some(Duration::from_secs(60)));
        assert_eq!(r.bound(Duration::from_secs(10)), None);
        assert_eq!(r.label(), "*.example/news/");
        assert_eq!(find(&rules, "http://www.example/other").unwrap().label(), "all");
        assert!(find(&[], "http://a/").is_none());
    }
}
