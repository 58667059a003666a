//! `Cache-Control` parsing (RFC 9111 section 5.2) and `Pragma` (section 5.4).
//!
//! Tolerant: malformed, duplicate and conflicting directives never fail; they
//! resolve toward the most restrictive reading. Arguments may be tokens or
//! quoted strings. delta-seconds that overflow saturate at 2147483648
//! (section 1.2.2); a non-integer argument (`max-age=600s`) is invalid and
//! makes the directive count as `max-age=0` for a response (treated as stale).

/// Directives of one message (request or response), combined over all of its
/// `Cache-Control` field lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheControl {
    /// `max-age` in seconds (the smallest if repeated; `Some(0)` if invalid).
    pub max_age: Option<u64>,
    /// `s-maxage` in seconds (likewise).
    pub s_maxage: Option<u64>,
    /// `max-stale`: `Some(None)` without argument (any staleness), `Some(Some(n))` with one.
    pub max_stale: Option<Option<u64>>,
    /// `min-fresh` in seconds.
    pub min_fresh: Option<u64>,
    /// `no-cache` present unqualified.
    pub no_cache: bool,
    /// Field names of a qualified `no-cache="a, b"` (lower-case).
    pub no_cache_fields: Vec<String>,
    /// `no-store` present.
    pub no_store: bool,
    /// `no-transform` present.
    pub no_transform: bool,
    /// `only-if-cached` present.
    pub only_if_cached: bool,
    /// `must-revalidate` present.
    pub must_revalidate: bool,
    /// `proxy-revalidate` present.
    pub proxy_revalidate: bool,
    /// `must-understand` present.
    pub must_understand: bool,
    /// `public` present.
    pub public: bool,
    /// `private` present unqualified.
    pub private: bool,
    /// Field names of a qualified `private="a, b"` (lower-case).
    pub private_fields: Vec<String>,
    /// `immutable` present.
    pub immutable: bool,
    /// `stale-while-revalidate` in seconds (RFC 5861 section 3).
    pub stale_while_revalidate: Option<u64>,
    /// `stale-if-error` in seconds (RFC 5861 section 4).
    pub stale_if_error: Option<u64>,
}

use std::borrow::Cow;

/// delta-seconds saturate here (RFC 9111 section 1.2.2).
pub const DELTA_SECONDS_MAX: u64 = 2_147_483_648;

impl CacheControl {
    /// Parses every `Cache-Control` field line in `headers`. When there is no
    /// `Cache-Control` at all and `Pragma: no-cache` is present, the result
    /// has `no_cache` set (RFC 9111 section 5.4).
    ///
    /// This is the reading for a *request*: `Pragma` has no defined meaning
    /// in a response. For responses use [`CacheControl::from_response_headers`].
    pub fn from_headers(headers: &http::HeaderMap) -> CacheControl {
        let mut cc = CacheControl::from_response_headers(headers);
        if !headers.contains_key(http::header::CACHE_CONTROL)
            && headers.get_all(http::header::PRAGMA).iter().any(|v| pragma_no_cache(v.as_bytes()))
        {
            cc.no_cache = true;
        }
        cc
    }

    /// Parses every `Cache-Control` field line in `headers`, ignoring `Pragma`
    /// (RFC 9111 section 5.4 defines it for requests only).
    pub fn from_response_headers(headers: &http::HeaderMap) -> CacheControl {
        CacheControl::from_lines(
            headers.get_all(http::header::CACHE_CONTROL).iter().map(|v| v.as_bytes()),
        )
    }

    /// Parses the `Cache-Control` lines of stored field lines (names
    /// lower-case, as in [`super::StoredResponse::headers`]); `Pragma` ignored.
    pub fn from_stored(headers: &[(String, Vec<u8>)]) -> CacheControl {
        CacheControl::from_lines(
            headers.iter().filter(|(n, _)| n == "cache-control").map(|(_, v)| v.as_slice()),
        )
    }

    /// Parses `Cache-Control` field values (one per field line). Never fails.
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> CacheControl {
        let mut cc = CacheControl::default();
        for line in lines {
            for (name, arg) in Directives::new(line) {
                cc.apply(name, arg);
            }
        }
        cc
    }

    fn apply(&mut self, name: &[u8], arg: Option<Cow<'_, [u8]>>) {
        let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
        if is("max-age") {
            self.max_age = Some(min_opt(self.max_age, delta_or_zero(arg.as_deref())));
        } else if is("s-maxage") {
            self.s_maxage = Some(min_opt(self.s_maxage, delta_or_zero(arg.as_deref())));
        } else if is("max-stale") {
            // Without argument (or with one that is not delta-seconds): any
            // staleness. Repeated: the smallest bound wins.
            let new = arg.as_deref().and_then(delta_seconds);
            self.max_stale = Some(match (self.max_stale, new) {
                (None, n) => n,
                (Some(None), n) => n,
                (Some(Some(a)), Some(b)) => Some(a.min(b)),
                (Some(Some(a)), None) => Some(a),
            });
        } else if is("min-fresh") {
            if let Some(n) = arg.as_deref().and_then(delta_seconds) {
                self.min_fresh = Some(self.min_fresh.map_or(n, |m| m.max(n)));
            }
        } else if is("no-cache") {
            match arg {
                None => self.no_cache = true,
                Some(list) => push_fields(&mut self.no_cache_fields, &list),
            }
        } else if is("no-store") {
            self.no_store = true;
        } else if is("no-transform") {
            self.no_transform = true;
        } else if is("only-if-cached") {
            self.only_if_cached = true;
        } else if is("must-revalidate") {
            self.must_revalidate = true;
        } else if is("proxy-revalidate") {
            self.proxy_revalidate = true;
        } else if is("must-understand") {
            self.must_understand = true;
        } else if is("public") {
            self.public = true;
        } else if is("private") {
            match arg {
                None => self.private = true,
                Some(list) => push_fields(&mut self.private_fields, &list),
            }
        } else if is("immutable") {
            self.immutable = true;
        } else if is("stale-while-revalidate") {
            // Invalid: ignored (no permission to serve stale is granted).
            if let Some(n) = arg.as_deref().and_then(delta_seconds) {
                self.stale_while_revalidate =
                    Some(self.stale_while_revalidate.map_or(n, |m| m.min(n)));
            }
        } else if is("stale-if-error") {
            if let Some(n) = arg.as_deref().and_then(delta_seconds) {
                self.stale_if_error = Some(self.stale_if_error.map_or(n, |m| m.min(n)));
            }
        }
        // Unknown extensions are ignored (RFC 9111 section 5.2.3).
    }
}

fn min_opt(old: Option<u64>, new: u64) -> u64 {
    old.map_or(new, |o| o.min(new))
}

/// A delta-seconds argument, or 0 when missing or invalid (section 4.2.1:
/// invalid freshness information is treated as stale).
fn delta_or_zero(arg: Option<&[u8]>) -> u64 {
    arg.and_then(delta_seconds).unwrap_or(0)
}

/// RFC 9111 section 1.2.2: `1*DIGIT`, saturating at 2147483648. `None` for
/// anything else (empty, sign, fraction, unit suffix, single quotes).
pub fn delta_seconds(arg: &[u8]) -> Option<u64> {
    if arg.is_empty() || !arg.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for d in arg {
        n = n * 10 + u64::from(d - b'0');
        if n >= DELTA_SECONDS_MAX {
            return Some(DELTA_SECONDS_MAX);
        }
    }
    Some(n)
}

/// Adds the field names of a qualified `no-cache="a, b"` / `private="a"`.
fn push_fields(out: &mut Vec<String>, list: &[u8]) {
    for name in list.split(|&b| b == b',') {
        let name = name.trim_ascii();
        if name.is_empty() {
            continue;
        }
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        if !out.contains(&name) {
            out.push(name);
        }
    }
}

/// Does a `Pragma` field value contain the `no-cache` directive?
fn pragma_no_cache(value: &[u8]) -> bool {
    value.split(|&b| b == b',').any(|d| {
        let d = d.trim_ascii();
        let name = d.split(|&b| b == b'=').next().unwrap_or(d).trim_ascii();
        name.eq_ignore_ascii_case(b"no-cache")
    })
}

/// Iterator over the directives of one field value: `(name, argument)`.
/// The argument is the token or the unescaped quoted string; `None` when
/// there is no `=`. Commas inside quoted strings do not split; junk after a
/// directive is skipped up to the next comma outside a quoted string.
struct Directives<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Directives<'a> {
    fn new(s: &'a [u8]) -> Self {
        Directives { s, i: 0 }
    }

    /// Skips to just after the next comma that is not inside a quoted string.
    fn skip_to_comma(&mut self) {
        let mut in_quote = false;
        while self.i < self.s.len() {
            let b = self.s[self.i];
            self.i += 1;
            match b {
                b'\\' if in_quote => self.i += 1,
                b'"' => in_quote = !in_quote,
                b',' if !in_quote => return,
                _ => {}
            }
        }
    }
}

fn is_delim(b: u8) -> bool {
    matches!(b, b',' | b'=' | b' ' | b'\t' | b'"' | b';')
}

impl<'a> Iterator for Directives<'a> {
    type Item = (&'a [u8], Option<Cow<'a, [u8]>>);

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.s;
        loop {
            while self.i < s.len() && matches!(s[self.i], b' ' | b'\t' | b',') {
                self.i += 1;
            }
            if self.i >= s.len() {
                return None;
            }
            let start = self.i;
            while self.i < s.len() && !is_delim(s[self.i]) {
                self.i += 1;
            }
            let name = &s[start..self.i];
            if name.is_empty() {
                // Junk such as a stray quote or `=`: skip this list member.
                self.skip_to_comma();
                continue;
            }
            let mut arg = None;
            if self.i < s.len() && s[self.i] == b'=' {
                self.i += 1;
                if self.i < s.len() && s[self.i] == b'"' {
                    self.i += 1;
                    let start = self.i;
                    let mut escaped: Option<Vec<u8>> = None;
                    while self.i < s.len() {
                        let b = s[self.i];
                        self.i += 1;
                        match b {
                            b'"' => break,
                            b'\\' if self.i < s.len() => {
                                let v =
                                    escaped.get_or_insert_with(|| s[start..self.i - 1].to_vec());
                                v.push(s[self.i]);
                                self.i += 1;
                            }
                            _ => {
                                if let Some(v) = escaped.as_mut() {
                                    v.push(b);
                                }
                            }
                        }
                    }
                    arg = Some(match escaped {
                        Some(v) => Cow::Owned(v),
                        // Closing quote excluded (absent when unterminated).
                        None => {
                            let end = if s[self.i - 1] == b'"' && self.i > start {
                                self.i - 1
                            } else {
                                self.i
                            };
                            Cow::Borrowed(&s[start..end])
                        }
                    });
                } else {
                    let a = self.i;
                    while self.i < s.len() && !matches!(s[self.i], b',' | b' ' | b'\t' | b';') {
                        self.i += 1;
                    }
                    arg = Some(Cow::Borrowed(&s[a..self.i]));
                }
            } else {
                // `max-age =3600`: whitespace before `=` is not allowed; the
                // directive counts as present without a (valid) argument.
                let mut j = self.i;
                while j < s.len() && matches!(s[j], b' ' | b'\t') {
                    j += 1;
                }
                if j < s.len() && s[j] == b'=' {
                    arg = Some(Cow::Borrowed(&[][..]));
                }
            }
            self.skip_to_comma();
            return Some((name, arg));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(value: &str) -> CacheControl {
        CacheControl::from_lines([value.as_bytes()])
    }

    #[test]
    fn directives_are_case_insensitive_and_whitespace_tolerant() {
        let c = cc("  Public ,MAX-AGE=60,\tno-transform , , immutable");
        assert!(c.public && c.no_transform && c.immutable);
        assert_eq!(c.max_age, Some(60));
    }

    #[test]
    fn commas_inside_quoted_strings_do_not_split() {
        let c = cc("no-cache=\"Set-Cookie, X-Foo\", private=\"a\", max-age=5");
        assert!(!c.no_cache && !c.private);
        assert_eq!(c.no_cache_fields, vec!["set-cookie", "x-foo"]);
        assert_eq!(c.private_fields, vec!["a"]);
        assert_eq!(c.max_age, Some(5));
        let c = cc("ext=\"a\\\"b, max-age=9\", s-maxage=7");
        assert_eq!((c.max_age, c.s_maxage), (None, Some(7)));
    }

    #[test]
    fn token_form_qualified_directive() {
        assert_eq!(cc("no-cache=Set-Cookie").no_cache_fields, vec!["set-cookie"]);
    }

    #[test]
    fn invalid_delta_seconds_count_as_zero_for_freshness() {
        for v in [
            "max-age=600s",
            "max-age=-1",
            "max-age=1.5",
            "max-age='5'",
            "max-age=",
            "max-age",
            "max-age =5",
            "max-age= 5",
        ] {
            assert_eq!(cc(v).max_age, Some(0), "{v}");
        }
        assert_eq!(cc("max-age=\"3600\"").max_age, Some(3600));
        assert_eq!(cc("max-age=2147483649").max_age, Some(DELTA_SECONDS_MAX));
    }

    #[test]
    fn request_directives_parse() {
        let c = cc("max-stale, min-fresh=10, only-if-cached, no-store");
        assert_eq!(c.max_stale, Some(None));
        assert_eq!(c.min_fresh, Some(10));
        assert!(c.only_if_cached && c.no_store);
        assert_eq!(cc("max-stale=5, max-stale").max_stale, Some(Some(5)));
        assert_eq!(cc("max-stale=5, max-stale=3").max_stale, Some(Some(3)));
        assert_eq!(cc("min-fresh=5, min-fresh=30").min_fresh, Some(30));
    }

    #[test]
    fn rfc5861_directives() {
        let c = cc("stale-while-revalidate=60, stale-if-error=\"120\", stale-if-error=90");
        assert_eq!((c.stale_while_revalidate, c.stale_if_error), (Some(60), Some(90)));
        assert_eq!(cc("stale-while-revalidate=soon").stale_while_revalidate, None);
    }

    #[test]
    fn junk_never_fails() {
        for v in [
            "",
            ",,,",
            "=",
            "\"",
            "=\"",
            "max-age=\"",
            "\\",
            "a=\"\\",
            ";;;",
            "max-age=1;x=2",
            "no-cache=\"",
            "\u{7f}",
        ] {
            let _ = cc(v);
        }
        assert!(cc("junk\"x\", no-store").no_store);
    }
}
