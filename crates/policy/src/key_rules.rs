//! Cache-key rules (SPEC section 6): `[[cache.key_rules]]` rewrite the
//! primary key of the URLs they match, for the cache and the record alike:
//! query parameters dropped by name or glob (`utm_*`, `fbclid`), the rest
//! optionally sorted. The default (no rules) is the exact URL. The target
//! sent to the origin is never rewritten: only the key under which the
//! response is stored and looked up.
//!
//! A rule matches on the host (a glob, `*` for any run of characters, `?`
//! for one; case-insensitive) and a path prefix. Rules are tried in order;
//! the first that matches applies. The key is already normalised by
//! [`crate::cache::key::primary_key`] (scheme and host lower-cased, default port
//! elided, fragment dropped).

use serde::Deserialize;

/// One `[[cache.key_rules]]` table.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct KeyRule {
    /// Host glob (`*.example.com`, `*` for every host).
    #[serde(default = "any")]
    pub host: String,
    /// Path prefix (`/` for every path).
    #[serde(default = "root")]
    pub path_prefix: String,
    /// Query parameters to drop, by name or glob (`utm_*`).
    #[serde(default)]
    pub drop_params: Vec<String>,
    /// Sort the remaining query parameters by name (stable for equal names).
    #[serde(default)]
    pub sort_params: bool,
}

fn any() -> String {
    "*".into()
}
fn root() -> String {
    "/".into()
}

/// True when `text` matches `pattern` (`*` any run, `?` one character),
/// ASCII case-insensitively.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi].eq_ignore_ascii_case(&t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

impl KeyRule {
    /// Whether the rule applies to `host` and `path`.
    pub fn matches(&self, host: &str, path: &str) -> bool {
        glob_match(&self.host, host) && path.starts_with(self.path_prefix.as_str())
    }

    /// `key` with this rule's query rewriting applied.
    pub fn rewrite(&self, key: &str) -> String {
        let Some((base, query)) = key.split_once('?') else { return key.to_string() };
        let mut params: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .filter(|p| {
                let name = p.split('=').next().unwrap_or("");
                !self.drop_params.iter().any(|g| glob_match(g, name))
            })
            .collect();
        if self.sort_params {
            params.sort_by(|a, b| {
                a.split('=').next().unwrap_or("").cmp(b.split('=').next().unwrap_or(""))
            });
        }
        if params.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", params.join("&"))
        }
    }
}

/// The cache key for the normalised URL `key` under `rules` (the first
/// rule matching its host and path applies); `key` itself when none does.
pub fn apply(rules: &[KeyRule], key: &str) -> String {
    if rules.is_empty() {
        return key.to_string();
    }
    let Ok(uri) = key.parse::<http::Uri>() else { return key.to_string() };
    let (host, path) = (uri.host().unwrap_or(""), uri.path());
    match rules.iter().find(|r| r.matches(host, path)) {
        Some(r) => r.rewrite(key),
        None => key.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utm() -> KeyRule {
        KeyRule {
            host: "*".into(),
            path_prefix: "/".into(),
            drop_params: vec!["utm_*".into(), "fbclid".into(), "gclid".into()],
            sort_params: false,
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match("utm_*", "utm_source"));
        assert!(glob_match("*.example.com", "www.Example.com"));
        assert!(!glob_match("*.example.com", "example.org"));
        assert!(glob_match("a?c", "abc"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("fbclid", "fbclidx"));
    }

    #[test]
    fn tracking_parameters_are_dropped_and_the_rest_kept_in_order() {
        let r = vec![utm()];
        assert_eq!(apply(&r, "http://a/p?utm_source=x&id=2&fbclid=9&b=1"), "http://a/p?id=2&b=1");
        assert_eq!(apply(&r, "http://a/p?utm_source=x"), "http://a/p");
        assert_eq!(apply(&r, "http://a/p"), "http://a/p");
        assert_eq!(apply(&[], "http://a/p?utm_source=x"), "http://a/p?utm_source=x");
    }

    #[test]
    fn sorting_host_and_prefix_and_first_match() {
        let sort = KeyRule {
            host: "*.shop.example".into(),
            path_prefix: "/items/".into(),
            drop_params: vec![],
            sort_params: true,
        };
        let rules = vec![sort, utm()];
        assert_eq!(
            apply(&rules, "http://www.shop.example/items/1?b=2&a=1&utm_x=3"),
            "http://www.shop.example/items/1?a=1&b=2&utm_x=3"
        );
        assert_eq!(
            apply(&rules, "http://www.shop.example/other?b=2&a=1&utm_x=3"),
            "http://www.shop.example/other?b=2&a=1"
        );
    }
}
