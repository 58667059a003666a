//! Line tokenizer: robots.txt bytes to one [`LineReport`] per line and the
//! directives the compiler consumes.
//!
//! This is the single pass over the body. It follows the line syntax of
//! RFC 9309 §2.2 as Google's library reads it (see the module docs of
//! [`crate`]): any of LF, CR and CRLF ends a line, a leading (possibly
//! partial) UTF-8 BOM is skipped, lines are cut at [`MAX_LINE_BYTES`], `#`
//! starts a comment anywhere, keys are matched by case-insensitive prefix with
//! a few accepted misspellings, and a missing colon is tolerated when the line
//! holds exactly two whitespace-separated tokens.

use serde::Serialize;
use std::borrow::Cow;

/// Bytes of a line kept by the parser; the rest of a longer line is dropped
/// and the line is flagged [`LineMetadata::is_line_too_long`].
///
/// Google's library keeps 2083 × 8 − 1 = 16,663 bytes per line (it sizes its
/// line buffer at eight times the longest URL old browsers accepted, one byte
/// of which holds the terminator).
pub const MAX_LINE_BYTES: usize = 2083 * 8 - 1;

/// The UTF-8 byte order mark. Any prefix of it at the very start of the body
/// is skipped; anywhere else it is ordinary line content.
const UTF8_BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Keys Google's reporter calls "unused": recognised as popular, not obeyed
/// by Google (other crawlers may use them). Compared in lower case, exactly.
const UNUSED_KEYS: [&str; 12] = [
    "clean-param",
    "content-signal",
    "content-usage",
    "crawl-delay",
    "domain",
    "host",
    "noarchive",
    "nofollow",
    "noindex",
    "request-rate",
    "revisit-after",
    "visit-time",
];

/// What a line was understood as, named like Google's
/// `RobotsParsedLine::RobotsTagName`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LineTag {
    /// `User-agent` (or an accepted misspelling): starts or extends a group.
    UserAgent,
    /// `Allow`: a rule of the current group.
    Allow,
    /// `Disallow` (or an accepted misspelling): a rule of the current group.
    Disallow,
    /// `Sitemap` (or `Site-map`): recorded file-wide, never closes a group.
    Sitemap,
    /// A known extension Google does not obey (`crawl-delay`, `noindex`,
    /// `host`, ...). `Crawl-delay` is nevertheless recorded by this crate.
    Unused,
    /// Anything else: unknown keys, comments, blank or unparseable lines.
    Unknown,
}

/// Syntax facts about one line, the same flags Google's
/// `RobotsParseHandler::LineMetadata` reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LineMetadata {
    /// Nothing but whitespace.
    pub is_empty: bool,
    /// A `#` occurs in the line.
    pub has_comment: bool,
    /// Only a comment (and whitespace).
    pub is_comment: bool,
    /// A `key: value` pair was found (its key may still be unknown).
    pub has_directive: bool,
    /// The key is an accepted misspelling (`useragent`, `disalow`, `site-map`, ...).
    pub is_acceptable_typo: bool,
    /// The line was longer than [`MAX_LINE_BYTES`] and was cut.
    pub is_line_too_long: bool,
    /// Key and value were separated by whitespace instead of a colon.
    pub is_missing_colon_separator: bool,
}

/// The parse report of one line, kept for `robots check` output and the
/// audit trail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineReport {
    /// 1-based line number (LF, CR and CRLF each end one line).
    pub line: u32,
    /// What the line was understood as.
    pub tag: LineTag,
    /// Syntax flags.
    pub metadata: LineMetadata,
    /// The key as written (whitespace trimmed; bytes that are not UTF-8
    /// as `%XX`, [`octets_text`]), when the line has a directive.
    pub key: Option<String>,
    /// The value as written (comment and surrounding whitespace removed,
    /// before any escaping; bytes that are not UTF-8 as `%XX`,
    /// [`octets_text`]), when the line has a directive.
    pub value: Option<String>,
    /// What the compiler did with the line when that is not obvious from the
    /// tag, e.g. a rule ignored because no `User-agent` line precedes it.
    pub note: Option<&'static str>,
}

/// The directive kinds the compiler acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyType {
    UserAgent,
    Allow,
    Disallow,
    Sitemap,
    Unknown,
}

/// One tokenized line, borrowed from the body.
#[derive(Debug)]
pub(crate) struct Line<'a> {
    pub(crate) number: u32,
    pub(crate) metadata: LineMetadata,
    /// `(key type, key, value)` when `metadata.has_directive`.
    pub(crate) directive: Option<(KeyType, &'a [u8], &'a [u8])>,
}

impl Line<'_> {
    /// Google's tag for this line.
    pub(crate) fn tag(&self) -> LineTag {
        match self.directive {
            None => LineTag::Unknown,
            Some((KeyType::UserAgent, _, _)) => LineTag::UserAgent,
            Some((KeyType::Allow, _, _)) => LineTag::Allow,
            Some((KeyType::Disallow, _, _)) => LineTag::Disallow,
            Some((KeyType::Sitemap, _, _)) => LineTag::Sitemap,
            Some((KeyType::Unknown, key, _)) => {
                if UNUSED_KEYS.iter().any(|k| key.eq_ignore_ascii_case(k.as_bytes())) {
                    LineTag::Unused
                } else {
                    LineTag::Unknown
                }
            }
        }
    }

    /// The report for this line, without a compiler note.
    pub(crate) fn report(&self) -> LineReport {
        let (key, value) = match self.directive {
            Some((_, k, v)) => {
                (Some(octets_text(k).into_owned()), Some(octets_text(v).into_owned()))
            }
            None => (None, None),
        };
        LineReport {
            line: self.number,
            tag: self.tag(),
            metadata: self.metadata,
            key,
            value,
            note: None,
        }
    }
}

/// Calls `f` for every line of `body`, in order, with its tokenized form.
///
/// A final line is always reported, so a body ending in a line break has an
/// empty last line (as in Google's parser).
pub(crate) fn for_each_line<'a>(body: &'a [u8], mut f: impl FnMut(Line<'a>)) {
    let bom = UTF8_BOM.iter().zip(body).take_while(|(a, b)| a == b).count();
    let mut rest = &body[bom..];
    let mut number: u32 = 0;
    loop {
        number = number.saturating_add(1);
        match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            Some(end) => {
                f(tokenize(number, &rest[..end]));
                let crlf = rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n');
                rest = &rest[end + if crlf { 2 } else { 1 }..];
            }
            None => {
                f(tokenize(number, rest));
                return;
            }
        }
    }
}

/// Whitespace as C's `isspace` in the "C" locale (and absl's
/// `ascii_isspace`): space, `\t`, `\n`, `\v`, `\f`, `\r`.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !is_space(*first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !is_space(*last) {
            break;
        }
        s = rest;
    }
    s
}

/// Splits one raw line into metadata and, when present, key and value.
fn tokenize(number: u32, raw: &[u8]) -> Line<'_> {
    let mut metadata =
        LineMetadata { is_line_too_long: raw.len() > MAX_LINE_BYTES, ..Default::default() };
    let mut line = &raw[..raw.len().min(MAX_LINE_BYTES)];
    // Google's parser handles the line as a C string: a NUL byte ends it.
    if let Some(nul) = line.iter().position(|&b| b == 0) {
        line = &line[..nul];
    }
    if let Some(hash) = line.iter().position(|&b| b == b'#') {
        metadata.has_comment = true;
        line = &line[..hash];
    }
    let line = trim(line);
    let empty = Line { number, metadata, directive: None };
    if line.is_empty() {
        let mut l = empty;
        l.metadata.is_comment = metadata.has_comment;
        l.metadata.is_empty = !metadata.has_comment;
        return l;
    }

    let is_blank = |b: &u8| *b == b' ' || *b == b'\t';
    let sep = match line.iter().position(|&b| b == b':') {
        Some(colon) => colon,
        None => {
            // Google-specific: accept whitespace instead of the colon when the
            // line holds exactly two whitespace-separated tokens.
            let Some(gap) = line.iter().position(is_blank) else {
                return empty;
            };
            let value_start = gap + line[gap..].iter().take_while(|b| is_blank(b)).count();
            if line[value_start..].iter().any(is_blank) {
                return empty;
            }
            metadata.is_missing_colon_separator = true;
            gap
        }
    };
    let key = trim(&line[..sep]);
    if key.is_empty() {
        return Line { number, metadata, directive: None };
    }
    let value = trim(&line[sep + 1..]);
    metadata.has_directive = true;
    let (key_type, typo) = key_type(key);
    metadata.is_acceptable_typo = typo;
    Line { number, metadata, directive: Some((key_type, key, value)) }
}

fn starts_with_ignore_case(s: &[u8], prefix: &str) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Classifies a key by case-insensitive prefix, as Google does; returns the
/// kind and whether an accepted misspelling matched.
///
/// `Allow` has no accepted misspelling; `Disallowed` or `User-agents` match by
/// prefix.
fn key_type(key: &[u8]) -> (KeyType, bool) {
    let any = |prefixes: &[&str]| prefixes.iter().any(|p| starts_with_ignore_case(key, p));
    if starts_with_ignore_case(key, "user-agent") {
        return (KeyType::UserAgent, false);
    }
    if any(&["useragent", "user agent"]) {
        return (KeyType::UserAgent, true);
    }
    if starts_with_ignore_case(key, "allow") {
        return (KeyType::Allow, false);
    }
    if starts_with_ignore_case(key, "disallow") {
        return (KeyType::Disallow, false);
    }
    if any(&["dissallow", "dissalow", "disalow", "diasllow", "disallaw"]) {
        return (KeyType::Disallow, true);
    }
    if starts_with_ignore_case(key, "sitemap") {
        return (KeyType::Sitemap, false);
    }
    if starts_with_ignore_case(key, "site-map") {
        return (KeyType::Sitemap, true);
    }
    (KeyType::Unknown, false)
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Normalises an `Allow`/`Disallow` pattern the way Google's
/// `MaybeEscapePattern` does: every byte ≥ 0x80 becomes `%XX` (upper-case
/// hex) and the hex digits of existing `%xx` escapes are upper-cased. Nothing
/// is decoded. Returns the input unchanged (borrowed) when nothing needs
/// doing, which is the common case.
///
/// ```
/// use crawlcache_robots::escape_pattern;
/// assert_eq!(&*escape_pattern("/café".as_bytes()), b"/caf%C3%A9");
/// assert_eq!(&*escape_pattern(b"/%7ejoe"), b"/%7Ejoe");
/// ```
pub fn escape_pattern(src: &[u8]) -> Cow<'_, [u8]> {
    let is_escape = |i: usize| {
        src[i] == b'%'
            && src.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
            && src.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    };
    let mut needs_work = false;
    let mut i = 0;
    while i < src.len() {
        if is_escape(i) {
            if src[i + 1].is_ascii_lowercase() || src[i + 2].is_ascii_lowercase() {
                needs_work = true;
                break;
            }
            i += 3;
        } else {
            if src[i] >= 0x80 {
                needs_work = true;
                break;
            }
            i += 1;
        }
    }
    if !needs_work {
        return Cow::Borrowed(src);
    }
    let mut out = Vec::with_capacity(src.len() + 16);
    let mut i = 0;
    while i < src.len() {
        if is_escape(i) {
            out.extend_from_slice(&[
                b'%',
                src[i + 1].to_ascii_uppercase(),
                src[i + 2].to_ascii_uppercase(),
            ]);
            i += 3;
        } else {
            let b = src[i];
            if b >= 0x80 {
                out.extend_from_slice(&[
                    b'%',
                    HEX_UPPER[usize::from(b >> 4)],
                    HEX_UPPER[usize::from(b & 0xF)],
                ]);
            } else {
                out.push(b);
            }
            i += 1;
        }
    }
    Cow::Owned(out)
}

/// The text that names bytes of a robots.txt (a rule, a key, a value, the
/// body) wherever they are shown: `robots check`, `Robots-Status`, the audit
/// line, refusals. Valid UTF-8 is kept as written; every byte that is not
/// part of valid UTF-8 becomes `%XX` (upper-case hex), the octet as the file
/// has it, so `Disallow: /caf\xE9` is named `Disallow: /caf%E9` and never by
/// a replacement character. Existing `%XX` escapes are kept as written.
/// Borrowed when the bytes are valid UTF-8.
///
/// ```
/// use crawlcache_robots::octets_text;
/// assert_eq!(octets_text(b"Disallow: /caf\xe9"), "Disallow: /caf%E9");
/// assert_eq!(octets_text("/café/%e9".as_bytes()), "/café/%e9");
/// ```
pub fn octets_text(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for &b in chunk.invalid() {
            out.push('%');
            out.push(char::from(HEX_UPPER[usize::from(b >> 4)]));
            out.push(char::from(HEX_UPPER[usize::from(b & 0xF)]));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Owned = (u32, LineMetadata, Option<(KeyType, Vec<u8>, Vec<u8>)>);

    fn lines(body: &[u8]) -> Vec<Owned> {
        let mut out = Vec::new();
        for_each_line(body, |l| {
            out.push((
                l.number,
                l.metadata,
                l.directive.map(|(t, k, v)| (t, k.to_vec(), v.to_vec())),
            ))
        });
        out
    }

    #[test]
    fn google_lf_cr_crlf_each_end_one_line() {
        let got = lines(b"a: 1\nb: 2\r\nc: 3\rd: 4");
        assert_eq!(got.len(), 4);
        assert_eq!(got[3].2.as_ref().map(|d| d.2.clone()), Some(b"4".to_vec()));
        // "\r\r\n" is a CR line end followed by a CRLF line end: two lines.
        assert_eq!(lines(b"a\r\r\nb").len(), 3);
    }

    #[test]
    fn google_partial_bom_skipped_only_at_start() {
        let got = lines(b"\xEF\xBBuser-agent: x");
        assert_eq!(got[0].2.as_ref().map(|d| d.0), Some(KeyType::UserAgent));
        let got = lines(b"x: y\n\xEF\xBB\xBFuser-agent: x");
        assert_eq!(got[1].2.as_ref().map(|d| d.0), Some(KeyType::Unknown));
    }

    #[test]
    fn google_nul_ends_the_line() {
        let got = lines(b"Disallow: /a\0/b");
        assert_eq!(got[0].2.as_ref().map(|d| d.2.clone()), Some(b"/a".to_vec()));
    }

    #[test]
    fn google_missing_colon_needs_exactly_two_tokens() {
        let got = lines(b"Disallow /a\nDisallow / a\nDisallow");
        assert!(got[0].1.is_missing_colon_separator && got[0].1.has_directive);
        assert!(!got[1].1.has_directive);
        assert!(!got[2].1.has_directive);
    }

    #[test]
    fn google_empty_key_is_not_a_directive() {
        let got = lines(b": /a");
        assert!(!got[0].1.has_directive && !got[0].1.is_empty);
    }

    #[test]
    fn google_vertical_tab_is_whitespace_for_trimming_not_for_separating() {
        let got = lines(b"\x0BDisallow:\x0B/a\x0B");
        assert_eq!(got[0].2.as_ref().map(|d| d.2.clone()), Some(b"/a".to_vec()));
        let got = lines(b"Disallow\x0B/a");
        assert!(!got[0].1.has_directive);
    }

    #[test]
    fn google_escape_pattern_encodes_high_bytes_and_uppercases_escapes() {
        assert_eq!(&*escape_pattern(b"/a%2fb%zz%"), b"/a%2Fb%zz%");
        assert_eq!(&*escape_pattern(b"%\xC3"), b"%%C3");
        assert_eq!(&*escape_pattern(b"%a"), b"%a");
        assert!(matches!(escape_pattern(b"/plain/%2F"), Cow::Borrowed(_)));
    }
}
