//! robots.txt engine: an RFC 9309 parser and matcher that gives the verdicts
//! of Google's open-source library (github.com/google/robotstxt).
//!
//! [`RobotsTxt::parse`] reads a body once into a compiled rule set;
//! [`RobotsTxt::check`] then answers (product token, URL) questions without
//! looking at the body again. The parse keeps a [`LineReport`] per line, the
//! `Sitemap` values and the `Crawl-delay` values.
//!
//! # Behaviour (Google's library, which implements RFC 9309)
//! - Lines end at LF, CR or CRLF; a leading, possibly partial, UTF-8 BOM is
//!   skipped; `#` starts a comment anywhere; lines are cut after
//!   [`MAX_LINE_BYTES`] bytes; the rest of a line after a NUL byte is
//!   ignored (Google reads lines as C strings). There is no size limit
//!   on the body: keeping only the first 500 KiB is the fetcher's job.
//! - Keys match by case-insensitive prefix, with Google's accepted
//!   misspellings (`useragent`, `user agent`, `dissallow`, `dissalow`,
//!   `disalow`, `diasllow`, `disallaw`, `site-map`); `allow` has none. A
//!   missing colon is accepted only when the line is exactly two
//!   whitespace-separated tokens.
//! - Groups (§2.2.1): consecutive `User-agent` lines share the rules that
//!   follow, even across blank, `Sitemap` or unknown lines; rules before any
//!   `User-agent` line are ignored; all groups naming a product token merge;
//!   the `*` groups apply only when no group names the token. A `User-agent`
//!   value is cut at the first byte outside `[A-Za-z_-]` and compared with
//!   the caller's token whole and case-insensitively (no prefix matching:
//!   `Googlebot-Image` does not fall back to `Googlebot`).
//! - Matching (§2.2.2, §2.2.3): patterns are escaped like Google's
//!   `MaybeEscapePattern` ([`escape_pattern`]); nothing is ever decoded,
//!   on either side, so `%7E` and `~` never match each other. The URL is
//!   reduced to path, params and query ([`path_params_query`]). `*` matches
//!   any bytes, a final `$` anchors. The longest pattern (in bytes after
//!   escaping, `*` and `$` included) wins; `Allow` wins ties; an empty
//!   pattern matches nothing. `Allow: /d/index.htm*` also allows `/d/`.
//! - `Crawl-delay` (not in RFC 9309; §2.2.4 lets crawlers read other
//!   records; Google ignores it) is recorded in seconds, fractions allowed,
//!   invalid values ignored. It never ends a group (as in Google's parser, so
//!   the rules are unaffected), and it applies to the `User-agent` lines above
//!   it in its group: in `User-agent: *` / `Crawl-delay: 10` / `User-agent:
//!   fastbot` / `Disallow: /x` both agents share the rule, only `*` gets the
//!   delay. A token gets the first such value in file order, from the groups
//!   that apply to it (those naming it, else the `*` groups).
//!
//! # Deliberate deviations from Google's library
//! 1. **`/robots.txt` is always allowed** (RFC 9309 §2.2.2: "The
//!    /robots.txt URI is implicitly allowed"): a URL whose path and query are
//!    exactly `/robots.txt` is allowed whatever the rules say; Google's
//!    library applies the rules to it. The verdict then has no rule and no
//!    line. `/robots.txt?x` and `/robots.txt/x` follow the rules. Tested by
//!    `robots::tests::rfc9309_2_2_2_robots_txt_is_implicitly_allowed` and by
//!    `tests/robots_vectors.rs`
//!    `google_probe_vectors_agree_except_documented_robots_txt_deviation`,
//!    which expects the opposite of Google's answer for exactly that record
//!    (`robots_txt_disallow_all`).
//!
//! Nothing else deviates: the vector, probe and corpus tests in `tests/`
//! compare every verdict with Google's.

// The I/O side (fetching, decoding, snapshots, the registry, enforcement).
// The fuzz targets (`fuzz/`, built with `--cfg fuzzing`) compile this folder
// from its sources for the parser and matcher alone, without the crate's
// other modules and dependencies.
#[cfg(not(fuzzing))]
pub mod decode;
#[cfg(not(fuzzing))]
pub mod enforce;
#[cfg(not(fuzzing))]
pub mod fetch;
#[cfg(not(fuzzing))]
pub mod http_fetch;
#[cfg(not(fuzzing))]
pub mod identity;
#[cfg(not(fuzzing))]
pub mod politeness;
#[cfg(not(fuzzing))]
pub mod registry;
#[cfg(not(fuzzing))]
pub mod settings;
#[cfg(not(fuzzing))]
pub mod snapshot;
mod parse;
mod pattern;
mod rules;

pub use parse::{escape_pattern, LineMetadata, LineReport, LineTag, MAX_LINE_BYTES};
pub use pattern::path_params_query;

use rules::Compiled;
use std::sync::Arc;

/// A compiled robots.txt: every group's rules in decision order, the
/// `Sitemap` values, `Crawl-delay` values, and a report per line.
///
/// Cheap to clone (the compiled data is shared), `Send` and `Sync`.
#[derive(Debug, Clone)]
pub struct RobotsTxt {
    inner: Arc<Compiled>,
}

/// The answer to one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the product token may crawl the URL.
    pub allowed: bool,
    /// The deciding rule as written, e.g. `Disallow: /private` (the key is
    /// normalised to `Allow` or `Disallow`, the pattern is the file's text).
    /// `None` when no rule matched, which means allowed.
    pub rule: Option<String>,
    /// The 1-based line of the deciding rule.
    pub line: Option<u32>,
}

impl Verdict {
    const ALLOWED_NO_RULE: Verdict = Verdict {
        allowed: true,
        rule: None,
        line: None,
    };
}

impl RobotsTxt {
    /// Parses and compiles a robots.txt body (RFC 9309 §2.2, read as
    /// Google's parser reads it). Accepts any bytes, valid UTF-8 or not, of
    /// any length; never fails and never panics. An empty or rule-less body
    /// allows everything.
    pub fn parse(body: &[u8]) -> RobotsTxt {
        RobotsTxt {
            inner: Arc::new(Compiled::parse(body)),
        }
    }

    /// Decides whether `product_token` may crawl `url` (RFC 9309 §2.2.2).
    ///
    /// `product_token` is compared whole and case-insensitively with the
    /// tokens of the `User-agent` lines; pass a bare token such as
    /// `ExampleBot` (see [`product_token_from_user_agent`]), not a full
    /// `User-Agent` header. `url` is an absolute URL or a path, already
    /// percent-encoded as it will be requested; only its path, params and
    /// query are matched ([`path_params_query`]).
    ///
    /// Allocates only the verdict's rule text; see [`RobotsTxt::is_allowed`]
    /// for the allocation-free form.
    pub fn check(&self, product_token: &str, url: &str) -> Verdict {
        match self.decide(product_token, url) {
            Some((allowed, rule, line)) => Verdict {
                allowed,
                rule: Some(rule.to_owned()),
                line: Some(line),
            },
            None => Verdict::ALLOWED_NO_RULE,
        }
    }

    /// [`RobotsTxt::check`] without the deciding rule: `true` when
    /// `product_token` may crawl `url`.
    pub fn is_allowed(&self, product_token: &str, url: &str) -> bool {
        self.decide(product_token, url)
            .is_none_or(|(allowed, _, _)| allowed)
    }

    /// The deciding rule as (allowed, text, line), `None` when no rule
    /// decides (allowed).
    fn decide(&self, product_token: &str, url: &str) -> Option<(bool, &str, u32)> {
        let path = path_params_query(url);
        if path == "/robots.txt" {
            // Deviation 1 (module docs): RFC 9309 §2.2.2.
            return None;
        }
        let set = self.inner.rule_set(product_token)?;
        let rule = set.decide(&self.inner.rules, path.as_bytes())?;
        Some((rule.allow, &rule.text, rule.line))
    }

    /// The `Crawl-delay` in seconds for `product_token`: the first valid
    /// value, in file order, that follows a `User-agent` line of its group
    /// naming the token (or `*`, when no group names the token). `None` when
    /// there is none. Not part of RFC 9309 (§2.2.4 allows reading it); Google
    /// ignores it.
    pub fn crawl_delay(&self, product_token: &str) -> Option<f64> {
        self.inner
            .applicable(product_token)
            .and_then(|a| a.crawl_delay)
    }

    /// The non-empty `Sitemap` values in file order, as written (invalid
    /// UTF-8 replaced). Sitemaps belong to the file, not to a group.
    pub fn sitemaps(&self) -> &[String] {
        &self.inner.sitemaps
    }

    /// One report per line, in order (`line_reports()[i].line == i + 1`).
    /// A body ending in a line break has an empty last line.
    pub fn line_reports(&self) -> &[LineReport] {
        &self.inner.lines
    }
}

/// Whether `token` is a product token a crawler can obey rules for
/// (RFC 9309 §2.2.1: `[a-zA-Z_-]+`; Google's `IsValidUserAgentToObey`).
pub fn is_valid_product_token(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
}

/// Derives the product token from a full `User-Agent` header value: the
/// name of its first product (RFC 9110 §10.1.5), when that is a valid
/// product token ([`is_valid_product_token`]) and not the generic `Mozilla`
/// of browser-style strings.
///
/// `ExampleBot/2.1 (+http://example.org)` gives `ExampleBot`;
/// `Mozilla/5.0 (compatible; ExampleBot/2.1; ...)` gives `None` (the token is
/// somewhere in the comment and has to come from configuration), as do
/// `Bot2/1.0` (digits are not allowed in a token) and an empty value.
pub fn product_token_from_user_agent(user_agent: &str) -> Option<String> {
    let ua = user_agent.trim_start_matches([' ', '\t']);
    let end = ua.find(['/', ' ', '\t', ';', '(']).unwrap_or(ua.len());
    let name = &ua[..end];
    (is_valid_product_token(name) && !name.eq_ignore_ascii_case("mozilla")).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9309_2_2_2_robots_txt_is_implicitly_allowed() {
        let r = RobotsTxt::parse(b"User-agent: *\nDisallow: /\n");
        assert_eq!(
            r.check("FooBot", "http://x/robots.txt"),
            Verdict {
                allowed: true,
                rule: None,
                line: None
            }
        );
        assert!(r.is_allowed("FooBot", "/robots.txt"));
        // Only that exact URI: other paths and queries follow the rules.
        assert!(!r.is_allowed("FooBot", "http://x/robots.txt?x=1"));
        assert!(!r.is_allowed("FooBot", "http://x/robots.txt/x"));
        assert!(!r.is_allowed("FooBot", "http://x/a/robots.txt"));
    }

    #[test]
    fn verdict_names_the_deciding_rule_and_line() {
        let r = RobotsTxt::parse(b"User-agent: *\nDisallow: /\nAllow: /pub\n");
        assert_eq!(
            r.check("x", "http://e/private"),
            Verdict {
                allowed: false,
                rule: Some("Disallow: /".into()),
                line: Some(2)
            }
        );
        assert_eq!(
            r.check("x", "/pub/a"),
            Verdict {
                allowed: true,
                rule: Some("Allow: /pub".into()),
                line: Some(3)
            }
        );
    }

    #[test]
    fn product_token_from_user_agent_takes_first_product_name() {
        assert_eq!(
            product_token_from_user_agent("ExampleBot/2.1 (+http://example.org)").as_deref(),
            Some("ExampleBot")
        );
        assert_eq!(
            product_token_from_user_agent("examplebot").as_deref(),
            Some("examplebot")
        );
        assert_eq!(
            product_token_from_user_agent("Example-Bot_x (x)").as_deref(),
            Some("Example-Bot_x")
        );
        assert_eq!(
            product_token_from_user_agent(
                "Mozilla/5.0 (compatible; ExampleBot/2.1; +http://e.org)"
            ),
            None
        );
        assert_eq!(product_token_from_user_agent("Bot2/1.0"), None);
        assert_eq!(product_token_from_user_agent(""), None);
    }

    #[test]
    fn robots_txt_is_send_sync_and_cheap_to_clone() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<RobotsTxt>();
    }
}
