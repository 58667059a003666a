//! Per-URL policy rules (SPEC section 6): `[[cache.rules]]`, tried in
//! order, the first matching the host (glob) and path (prefix, and the
//! regular expression `path_regex` when given) applies.
//! A rule may bound the freshness lifetime RFC 9111 computes (`min_ttl`,
//! `max_ttl`), forbid storing (`never_store`), or list status codes to
//! store (even without freshness information; with `min_ttl` they are
//! fresh that long) or to skip. None by default: pure RFC 9111. A response
//! whose handling a rule changed says so in `Cache-Status`
//! (`detail="rule NAME"`).
//!
//! A rule applies wherever a freshness lifetime is computed for a stored
//! response ([`freshness_lifetime`]): the reuse decision, the `ttl` of a
//! response freshened by a `304` or served stale, and `cache ls` / `cache
//! prune`; and to what is stored after a miss or a full revalidation answer.

use crate::cache::cache_control::CacheControl;
use crate::cache::{Decision, Freshness, PolicyConfig};
use crawlcache_base::units::de_duration;
use serde::Deserialize;
use std::time::{Duration, SystemTime};

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
    /// A regular expression (`regex` crate syntax) the path must match as
    /// well (searched anywhere unless anchored with `^` / `$`); none by
    /// default.
    #[serde(default)]
    pub path_regex: Option<PathRegex>,
    /// Lower bound of the freshness lifetime.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub min_ttl: Option<Duration>,
    /// Upper bound of the freshness lifetime.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub max_ttl: Option<Duration>,
    /// Never store responses for matching URLs, in the cache or in the
    /// record (`[record]`).
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

/// A compiled `path_regex`; read from the configuration as a string and
/// compiled there, so a bad expression is a configuration error naming the
/// key. Two are equal when their source text is.
#[derive(Debug, Clone)]
pub struct PathRegex(pub regex::Regex);

impl PartialEq for PathRegex {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Eq for PathRegex {}

impl<'de> Deserialize<'de> for PathRegex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        regex::Regex::new(&text).map(PathRegex).map_err(|e| {
            serde::de::Error::custom(format!("{text:?} is not a regular expression: {e}"))
        })
    }
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
    /// The name shown in `Cache-Status`: `name`, else the host glob and
    /// path prefix, followed by `~REGEX` with a `path_regex`.
    pub fn label(&self) -> String {
        if !self.name.is_empty() {
            return self.name.clone();
        }
        match &self.path_regex {
            Some(re) => format!("{}{}~{}", self.host, self.path_prefix, re.0.as_str()),
            None => format!("{}{}", self.host, self.path_prefix),
        }
    }

    /// Whether the rule applies to `host` and `path`: the host glob, the
    /// path prefix and, when given, `path_regex` all match.
    pub fn matches(&self, host: &str, path: &str) -> bool {
        crate::key_rules::glob_match(&self.host, host)
            && path.starts_with(self.path_prefix.as_str())
            && self.path_regex.as_ref().is_none_or(|re| re.0.is_match(path))
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
    rules.iter().find(|r| r.matches(host, path))
}

/// Whether and how a stored response whose [`Freshness`] is `fresh`
/// (computed under `policy_config`) may answer a request for the cache key
/// `key` with request directives `request_cc` at `now` (RFC 9111 section
/// 4.2), bounded by the first of `rules` matching `key` when it bounds
/// lifetimes (`min_ttl`, `max_ttl`): the one decision for the local store
/// and the fleet tier alike.
pub fn reuse_decision(
    key: &str,
    request_cc: &CacheControl,
    fresh: &Freshness,
    now: SystemTime,
    policy_config: &PolicyConfig,
    rules: &[PolicyRule],
) -> Decision {
    let (min, max) = match find(rules, key) {
        Some(r) if r.bounds_lifetime() => (r.min_ttl, r.max_ttl),
        _ => (None, None),
    };
    crate::cache::decide_with(request_cc, fresh, now, policy_config, min, max)
}

/// RFC 9111 section 4.2.1 freshness lifetime of `stored`, the response
/// stored under the cache key `key` (for a record, the URL it was recorded
/// for), bounded by the first of `rules` matching `key` (`min_ttl`,
/// `max_ttl`).
pub fn freshness_lifetime(
    rules: &[PolicyRule],
    key: &str,
    stored: &crate::cache::StoredResponse,
    policy: &crate::cache::PolicyConfig,
) -> Duration {
    let lifetime = crate::cache::freshness_lifetime(stored, policy);
    match find(rules, key) {
        Some(r) => r.bound(lifetime).unwrap_or(lifetime),
        None => lifetime,
    }
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

    fn parse(toml_text: &str) -> Result<Vec<PolicyRule>, toml::de::Error> {
        #[derive(Deserialize)]
        struct T {
            r: Vec<PolicyRule>,
        }
        toml::from_str::<T>(toml_text).map(|t| t.r)
    }

    #[test]
    fn a_path_regex_narrows_the_path_prefix() {
        let rules = parse(
            "[[r]]\npath_regex = '^/news/[0-9]+$'\nmax_ttl = \"1m\"\n[[r]]\nname = \"rest\"\n",
        )
        .unwrap();
        assert_eq!(find(&rules, "http://a/news/12").unwrap().label(), "*/~^/news/[0-9]+$");
        assert_eq!(
            find(&rules, "http://a/news/12?page=2").unwrap().max_ttl,
            Some(Duration::from_secs(60)),
            "the path, not the query"
        );
        assert_eq!(find(&rules, "http://a/news/latest").unwrap().label(), "rest");
        let both = parse("[[r]]\npath_prefix = \"/a/\"\npath_regex = 'x'\n").unwrap();
        assert!(find(&both, "http://h/a/x").is_some());
        assert!(find(&both, "http://h/b/x").is_none(), "prefix and regex must both match");
        assert!(find(&both, "http://h/a/y").is_none());
        let err = parse("[[r]]\npath_regex = '(unclosed'\n").unwrap_err().to_string();
        assert!(err.contains("(unclosed") && err.contains("not a regular expression"), "{err}");
    }

    #[test]
    fn the_lifetime_is_bounded_by_the_matching_rule() {
        use crate::cache::StoredResponse;
        let stored = StoredResponse {
            status: 200,
            headers: vec![("cache-control".into(), b"max-age=3600".to_vec())],
            request_time_ms: 0,
            response_time_ms: 0,
            url: "http://a/news/1".into(),
            vary_request: vec![],
        };
        let policy = crate::cache::PolicyConfig::default();
        let rules = parse("[[r]]\npath_regex = '^/news/'\nmax_ttl = \"10s\"\n").unwrap();
        assert_eq!(
            freshness_lifetime(&rules, "http://a/news/1", &stored, &policy),
            Duration::from_secs(10)
        );
        assert_eq!(
            freshness_lifetime(&rules, "http://a/other", &stored, &policy),
            Duration::from_secs(3600)
        );
    }
}
