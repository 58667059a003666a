//! The `Cache-Status` response field (RFC 9211): one list member per cache
//! that handled the response, built from what the policy decided.
//!
//! ```text
//! crawlcache; hit; ttl=120
//! crawlcache; fwd=stale; fwd-status=304; ttl=60
//! crawlcache; fwd=uri-miss; stored
//! ```

/// Why the request went forward (RFC 9211 section 2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fwd {
    /// Configured to bypass the cache (e.g. a tunnelled host).
    Bypass,
    /// The method is not cacheable.
    Method,
    /// No stored response for the URI.
    UriMiss,
    /// Stored responses for the URI, none matching the Vary secondary key.
    VaryMiss,
    /// No stored response (when URI and Vary misses are not told apart).
    Miss,
    /// The request's directives (e.g. `no-cache`, `max-age`) required going forward.
    Request,
    /// The stored response was stale (or had to be validated).
    Stale,
    /// Only part of the response was stored.
    Partial,
}

impl Fwd {
    /// The parameter value, as registered by RFC 9211.
    pub fn as_str(self) -> &'static str {
        match self {
            Fwd::Bypass => "bypass",
            Fwd::Method => "method",
            Fwd::UriMiss => "uri-miss",
            Fwd::VaryMiss => "vary-miss",
            Fwd::Miss => "miss",
            Fwd::Request => "request",
            Fwd::Stale => "stale",
            Fwd::Partial => "partial",
        }
    }
}

/// One `Cache-Status` list member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStatus {
    /// Served from the cache without going forward (`hit`).
    pub hit: bool,
    /// Why the request went forward, if it did (`fwd`).
    pub fwd: Option<Fwd>,
    /// The status of the forward response, e.g. 304 (`fwd-status`).
    pub fwd_status: Option<u16>,
    /// Freshness lifetime minus current age in seconds; negative when stale (`ttl`).
    pub ttl: Option<i64>,
    /// The forward response was stored (`stored`).
    pub stored: bool,
    /// The request was collapsed into another one's forward request (`collapsed`).
    pub collapsed: bool,
    /// The cache key (`key`), when useful for debugging.
    pub key: Option<String>,
    /// Implementation detail, e.g. `stale-if-error` or `offline` (`detail`).
    pub detail: Option<String>,
}

impl CacheStatus {
    /// A hit with its remaining freshness (`Decision::ttl`).
    pub fn hit(ttl: i64) -> CacheStatus {
        CacheStatus { hit: true, ttl: Some(ttl), ..CacheStatus::default() }
    }

    /// A forward for `why`.
    pub fn forward(why: Fwd) -> CacheStatus {
        CacheStatus { fwd: Some(why), ..CacheStatus::default() }
    }

    /// Serializes as an RFC 8941 list member: `cache_name` (a token, or a
    /// quoted string when it is not one), then the parameters in RFC 9211 order.
    pub fn to_field_value(&self, cache_name: &str) -> String {
        let mut out = String::with_capacity(64);
        if is_token(cache_name) {
            out.push_str(cache_name);
        } else {
            push_sf_string(&mut out, cache_name);
        }
        if self.hit {
            out.push_str("; hit");
        }
        if let Some(fwd) = self.fwd {
            out.push_str("; fwd=");
            out.push_str(fwd.as_str());
        }
        if let Some(status) = self.fwd_status {
            out.push_str(&format!("; fwd-status={status}"));
        }
        if let Some(ttl) = self.ttl {
            out.push_str(&format!("; ttl={ttl}"));
        }
        if self.stored {
            out.push_str("; stored");
        }
        if self.collapsed {
            out.push_str("; collapsed");
        }
        if let Some(key) = &self.key {
            out.push_str("; key=");
            push_sf_string(&mut out, key);
        }
        if let Some(detail) = &self.detail {
            out.push_str("; detail=");
            push_sf_string(&mut out, detail);
        }
        out
    }
}

/// RFC 8941 section 3.3.4 token: ALPHA / "*" first, then tchar / ":" / "/".
fn is_token(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'*' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b))
}

/// RFC 8941 section 3.3.3 sf-string; characters outside printable ASCII become `?`.
fn push_sf_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_the_spec_examples() {
        assert_eq!(CacheStatus::hit(120).to_field_value("crawlcache"), "crawlcache; hit; ttl=120");
        let revalidated = CacheStatus { fwd_status: Some(304), ..CacheStatus::forward(Fwd::Stale) };
        assert_eq!(revalidated.to_field_value("crawlcache"), "crawlcache; fwd=stale; fwd-status=304");
        let stored = CacheStatus { stored: true, ..CacheStatus::forward(Fwd::UriMiss) };
        assert_eq!(stored.to_field_value("crawlcache"), "crawlcache; fwd=uri-miss; stored");
    }

    #[test]
    fn strings_are_quoted_and_escaped() {
        let s = CacheStatus { detail: Some("say \"hi\"\\".into()), key: Some("http://e/\u{e9}".into()), ..CacheStatus::hit(-5) };
        assert_eq!(s.to_field_value("my cache"), "\"my cache\"; hit; ttl=-5; key=\"http://e/?\"; detail=\"say \\\"hi\\\"\\\\\"");
    }
}
