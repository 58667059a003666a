//! The `--host` filter of `cache ls`, `cache purge` and `export` (and the
//! `host=` parameter of their admin endpoints): which spellings it takes
//! and how it is compared with a stored URL.
//!
//! Three spellings select the same entries a user would expect:
//! - a bare host, `example.com`, `127.0.0.1`, `[::1]` or `::1`: that host
//!   on any scheme and port;
//! - `host:port`, `127.0.0.1:8080`, `[::1]:8080`: that host on that port
//!   (the URL's port, or its scheme's default when it has none: a cache
//!   key leaves out `:80` of `http://` and `:443` of `https://`);
//! - a URL, `http://127.0.0.1:8080/docs/x`: its authority, read as one of
//!   the two above (user information, scheme, path and query are ignored;
//!   `--prefix` selects by those).
//!
//! Hosts are compared without regard to ASCII case.

/// A parsed `--host` value: a host (lower case, an IPv6 literal without
/// brackets) and, when one was given, a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFilter {
    /// The host, in lower case.
    pub host: String,
    /// The port, when the value named one.
    pub port: Option<u16>,
}

/// What `--host` takes, for error messages and `--help`.
pub const HOST_SPELLINGS: &str =
    "a host (example.com), host:port (127.0.0.1:8080) or a URL (http://127.0.0.1:8080/)";

/// A `--host` value [`HostFilter::parse`] refuses; `Display` quotes it,
/// says why and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--host '{value}': {why}; expected {HOST_SPELLINGS}")]
pub struct HostFilterError {
    /// The value as given.
    pub value: String,
    /// What is wrong with it (`no host`, `'x' is not a port (1 to 65535)`).
    pub why: String,
}

impl HostFilter {
    /// Parses `value` in one of the three spellings (surrounding white
    /// space ignored). Errors: no host, a port that is not a number from
    /// 1 to 65535, an unclosed `[`, or characters no host has (white
    /// space, `/` before the host): a [`HostFilterError`].
    pub fn parse(value: &str) -> Result<HostFilter, HostFilterError> {
        let bad = |why: &str| HostFilterError { value: value.to_string(), why: why.to_string() };
        let v = value.trim();
        let authority = match v.split_once("://") {
            Some((scheme, rest))
                if !scheme.is_empty()
                    && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) =>
            {
                let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
                let authority = &rest[..end];
                authority.rsplit_once('@').map_or(authority, |(_, h)| h)
            }
            Some(_) => return Err(bad("not a URL")),
            // `host/path` without a scheme: the part before the path.
            None => v.split(['/', '?', '#']).next().unwrap_or(""),
        };
        let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or_else(|| bad("'[' without ']'"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("only ':PORT' may follow ']'"))?),
            };
            (inside, port)
        } else if authority.matches(':').count() > 1 {
            // An IPv6 literal without brackets (`::1`): no port can follow.
            (authority, None)
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if host
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b"/\\@[]".contains(&b))
        {
            return Err(bad("not a host name or address"));
        }
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|&n| n != 0)
                    .ok_or_else(|| bad(&format!("'{p}' is not a port (1 to 65535)")))?,
            ),
        };
        Ok(HostFilter { host: host.trim_end_matches('.').to_ascii_lowercase(), port })
    }

    /// Whether the absolute URL `url` (a cache key, or the URL of a record
    /// key) is on this host, and on this port when one was given.
    pub fn matches_url(&self, url: &str) -> bool {
        if !url_host(url).trim_end_matches('.').eq_ignore_ascii_case(&self.host) {
            return false;
        }
        match self.port {
            None => true,
            Some(p) => url_port(url) == Some(p),
        }
    }
}

/// The port an absolute URL addresses: the one it names, else its
/// scheme's default (80 for `http`, 443 for `https`); `None` for another
/// scheme without a port, or a port that is not a number.
pub fn url_port(url: &str) -> Option<u16> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let named = match authority.strip_prefix('[') {
        Some(v6) => {
            v6.split_once(']').map_or("", |(_, after)| after.strip_prefix(':').unwrap_or(""))
        }
        None => authority.rsplit_once(':').map_or("", |(_, p)| p),
    };
    if !named.is_empty() {
        return named.parse().ok();
    }
    match scheme.to_ascii_lowercase().as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// The host of an absolute URL (`http://Host:8080/x` → `Host`), without
/// brackets for an IPv6 literal; `""` when there is none.
pub fn url_host(url: &str) -> &str {
    let authority = url
        .split_once("://")
        .map_or("", |(_, rest)| rest)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or("");
    }
    authority
        .rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(authority, |(h, _)| h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> HostFilter {
        HostFilter::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn the_three_spellings_parse_to_host_and_port() {
        assert_eq!(f("Example.COM"), HostFilter { host: "example.com".into(), port: None });
        assert_eq!(f("127.0.0.1:8080"), HostFilter { host: "127.0.0.1".into(), port: Some(8080) });
        assert_eq!(
            f("http://user:pw@127.0.0.1:8080/docs/x?y#z"),
            HostFilter { host: "127.0.0.1".into(), port: Some(8080) }
        );
        assert_eq!(f("https://a.test/"), HostFilter { host: "a.test".into(), port: None });
        assert_eq!(f("[::1]:3128"), HostFilter { host: "::1".into(), port: Some(3128) });
        assert_eq!(f("::1"), HostFilter { host: "::1".into(), port: None });
        assert_eq!(f("http://[::1]/"), HostFilter { host: "::1".into(), port: None });
        assert_eq!(f(" a.test/path "), HostFilter { host: "a.test".into(), port: None });
    }

    #[test]
    fn a_value_that_names_no_host_or_a_bad_port_is_an_error_saying_what_is_accepted() {
        for bad in [
            "",
            ":8080",
            "http://",
            "a.test:http",
            "a.test:0",
            "a.test:70000",
            "[::1",
            "[::1]x",
            "a b",
            "://a.test",
        ] {
            let e = HostFilter::parse(bad).expect_err(bad);
            assert!(e.to_string().contains(HOST_SPELLINGS), "{bad}: {e}");
        }
    }

    #[test]
    fn a_port_matches_the_named_port_or_the_scheme_default() {
        let any = f("a.test");
        assert!(
            any.matches_url("http://a.test/x")
                && any.matches_url("https://A.test:8443/")
                && !any.matches_url("http://b.test/")
        );
        let p = f("a.test:8080");
        assert!(
            p.matches_url("http://a.test:8080/x")
                && !p.matches_url("http://a.test/x")
                && !p.matches_url("http://a.test:80/")
        );
        let d = f("a.test:80");
        assert!(d.matches_url("http://a.test/x") && !d.matches_url("https://a.test/x"));
        assert!(f("a.test:443").matches_url("https://a.test/x"));
        let v6 = f("[::1]:3128");
        assert!(v6.matches_url("http://[::1]:3128/") && !v6.matches_url("http://[::1]/"));
        assert!(f("::1").matches_url("http://[::1]/"));
        assert!(!f("a.test").matches_url("http://a.test.evil/"));
        assert_eq!(url_port("http://[::1]/"), Some(80));
        assert_eq!(url_port("ftp://a/"), None);
    }
}
