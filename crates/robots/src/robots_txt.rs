//! [`RobotsTxt`], a compiled robots.txt, and the [`Verdict`] of one check
//! (the behaviour, and the one deliberate deviation from Google's library,
//! are in the crate docs).

use crate::parse::LineReport;
use crate::pattern::path_params_query;
use crate::rules::Compiled;
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
    /// normalised to `Allow` or `Disallow`, the pattern is the file's text;
    /// bytes that are not UTF-8 are named `%XX`, as the file has them:
    /// [`crate::octets_text`]). `None` when no rule matched, which means
    /// allowed.
    pub rule: Option<String>,
    /// The 1-based line of the deciding rule.
    pub line: Option<u32>,
}

impl Verdict {
    const ALLOWED_NO_RULE: Verdict = Verdict { allowed: true, rule: None, line: None };
}

impl RobotsTxt {
    /// Parses and compiles a robots.txt body (RFC 9309 §2.2, read as
    /// Google's parser reads it). Accepts any bytes, valid UTF-8 or not, of
    /// any length; never fails and never panics. An empty or rule-less body
    /// allows everything.
    pub fn parse(body: &[u8]) -> RobotsTxt {
        RobotsTxt { inner: Arc::new(Compiled::parse(body)) }
    }

    /// Decides whether `product_token` may crawl `url` (RFC 9309 §2.2.2).
    ///
    /// `product_token` is compared whole and case-insensitively with the
    /// tokens of the `User-agent` lines; pass a bare token such as
    /// `ExampleBot` (see [`product_token_from_user_agent`](crate::product_token_from_user_agent)), not a full
    /// `User-Agent` header. `url` is an absolute URL or a path, already
    /// percent-encoded as it will be requested; only its path, params and
    /// query are matched ([`path_params_query`]).
    ///
    /// Allocates only the verdict's rule text; see [`RobotsTxt::is_allowed`]
    /// for the allocation-free form.
    pub fn check(&self, product_token: &str, url: &str) -> Verdict {
        match self.decide(product_token, url) {
            Some((allowed, rule, line)) => {
                Verdict { allowed, rule: Some(rule.to_owned()), line: Some(line) }
            }
            None => Verdict::ALLOWED_NO_RULE,
        }
    }

    /// [`RobotsTxt::check`] without the deciding rule: `true` when
    /// `product_token` may crawl `url`.
    pub fn is_allowed(&self, product_token: &str, url: &str) -> bool {
        self.decide(product_token, url).is_none_or(|(allowed, _, _)| allowed)
    }

    /// The deciding rule as (allowed, text, line), `None` when no rule
    /// decides (allowed).
    fn decide(&self, product_token: &str, url: &str) -> Option<(bool, &str, u32)> {
        let path = path_params_query(url);
        if path == "/robots.txt" {
            // Deviation 1 (crate docs): RFC 9309 §2.2.2.
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
        self.inner.applicable(product_token).and_then(|a| a.crawl_delay)
    }

    /// The non-empty `Sitemap` values in file order, as written (bytes that
    /// are not UTF-8 as `%XX`: [`crate::octets_text`]). Sitemaps belong to
    /// the file, not to a group.
    pub fn sitemaps(&self) -> &[String] {
        &self.inner.sitemaps
    }

    /// One report per line, in order (`line_reports()[i].line == i + 1`).
    /// A body ending in a line break has an empty last line.
    pub fn line_reports(&self) -> &[LineReport] {
        &self.inner.lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9309_2_2_2_robots_txt_is_implicitly_allowed() {
        let r = RobotsTxt::parse(b"User-agent: *\nDisallow: /\n");
        assert_eq!(
            r.check("FooBot", "http://x/robots.txt"),
            Verdict { allowed: true, rule: None, line: None }
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
            Verdict { allowed: false, rule: Some("Disallow: /".into()), line: Some(2) }
        );
        assert_eq!(
            r.check("x", "/pub/a"),
            Verdict { allowed: true, rule: Some("Allow: /pub".into()), line: Some(3) }
        );
    }

    #[test]
    fn a_rule_whose_bytes_are_not_utf8_is_named_by_its_octets_percent_encoded() {
        let r = RobotsTxt::parse(b"User-agent: *\nDisallow: /caf\xe9\nDisallow: /d%E9j\xe0/\xff\xfe\nAllow: /ok/\xc3\xa9t\xc3\xa9\n");
        // The rule matches the URL's percent-encoded form (Google's escaping).
        assert_eq!(
            r.check("x", "http://e/caf%E9"),
            Verdict { allowed: false, rule: Some("Disallow: /caf%E9".into()), line: Some(2) }
        );
        assert_eq!(
            r.check("x", "http://e/d%E9j%E0/%FF%FE"),
            Verdict {
                allowed: false,
                rule: Some("Disallow: /d%E9j%E0/%FF%FE".into()),
                line: Some(3)
            }
        );
        // Valid UTF-8 stays as written.
        assert_eq!(
            r.check("x", "http://e/ok/%C3%A9t%C3%A9").rule.as_deref(),
            Some("Allow: /ok/été")
        );
        let report = &r.line_reports()[1];
        assert_eq!(report.value.as_deref(), Some("/caf%E9"));
        let r = RobotsTxt::parse(b"Sitemap: http://e/s\xe9.xml\n");
        assert_eq!(r.sitemaps(), ["http://e/s%E9.xml"]);
    }

    #[test]
    fn robots_txt_is_send_sync_and_cheap_to_clone() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<RobotsTxt>();
    }
}
