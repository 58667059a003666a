//! Compiled `Allow`/`Disallow` patterns and the URL path they are matched
//! against (RFC 9309 §2.2.2, §2.2.3).
//!
//! A pattern is compiled once: escaped (see [`crate::escape_pattern`]), its
//! trailing `$` turned into an end anchor, its literal prefix (before the
//! first `*`) measured, and a [`Screen`] derived: the first eight bytes of
//! the prefix as one integer, and the byte pairs of the rest of its literal
//! pieces folded into a 256-bit [`PairMask`]. A check compares the screen
//! with the path's first eight bytes and pair mask, both computed once, so
//! most patterns are rejected with a few integer operations and no call;
//! survivors are compared in full, wildcard pieces searched leftmost first.
//! Nothing allocates.

use std::borrow::Cow;

/// A set of hashed adjacent byte pairs, 256 bits wide.
///
/// Every literal piece of a wildcard pattern must occur in the path, so every
/// byte pair inside a piece must occur in the path too: when the pattern's
/// mask is not a subset of the path's mask the pattern cannot match. The test
/// has false positives (hash collisions), never false negatives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PairMask([u64; 4]);

impl PairMask {
    #[inline]
    fn insert(&mut self, a: u8, b: u8) {
        let h = (u32::from(a) << 8 | u32::from(b)).wrapping_mul(0x9E37_79B1) >> 24;
        self.0[(h >> 6) as usize] |= 1u64 << (h & 63);
    }

    /// The pairs of every window of two bytes in `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> PairMask {
        let mut m = PairMask::default();
        m.extend(bytes);
        m
    }

    fn extend(&mut self, bytes: &[u8]) {
        for w in bytes.windows(2) {
            self.insert(w[0], w[1]);
        }
    }

    #[inline]
    pub(crate) fn contains(&self, other: &PairMask) -> bool {
        (self.0[0] & other.0[0]) == other.0[0]
            && (self.0[1] & other.0[1]) == other.0[1]
            && (self.0[2] & other.0[2]) == other.0[2]
            && (self.0[3] & other.0[3]) == other.0[3]
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
}

/// Cheap necessary conditions for a pattern to match a path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Screen {
    /// The first (up to) eight prefix bytes, little-endian.
    pub(crate) head: u64,
    /// Which bytes of `head` are prefix bytes.
    pub(crate) head_mask: u64,
    /// Byte pairs of the literal pieces not covered by `head`.
    pub(crate) pairs: PairMask,
}

/// The first (up to) eight bytes of `bytes`, little-endian, zero-padded.
/// Paths and patterns hold no NUL byte, so padding never equals a real byte.
#[inline]
pub(crate) fn head_of(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(buf)
}

/// A compiled pattern. `*` matches any sequence of bytes, a final `$` anchors
/// the end, every other byte (a `$` elsewhere included) matches itself.
/// Matching starts at the first byte of the path.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    /// The escaped pattern without its end anchor.
    body: Box<[u8]>,
    /// Bytes before the first `*` (all of `body` when it has none).
    prefix_len: usize,
    /// Whether `body` contains a `*`.
    has_star: bool,
    /// Whether the pattern ended with `$`.
    anchored: bool,
    screen: Screen,
}

impl Pattern {
    /// Compiles an already escaped pattern.
    pub(crate) fn new(escaped: &[u8]) -> Pattern {
        let (body, anchored) = match escaped.split_last() {
            Some((b'$', body)) => (body, true),
            _ => (escaped, false),
        };
        let star = body.iter().position(|&b| b == b'*');
        let prefix_len = star.unwrap_or(body.len());
        let head_len = prefix_len.min(8);
        let mut pairs = PairMask::default();
        // Pairs wholly inside the head are already checked by it.
        if head_len > 0 {
            pairs.extend(&body[head_len - 1..prefix_len]);
        }
        for piece in body[prefix_len..].split(|&b| b == b'*') {
            pairs.extend(piece);
        }
        let screen = Screen {
            head: head_of(&body[..head_len]),
            head_mask: u64::MAX.checked_shr(64 - 8 * head_len as u32).unwrap_or(0),
            pairs,
        };
        Pattern { body: body.into(), prefix_len, has_star: star.is_some(), anchored, screen }
    }

    /// Necessary conditions for a match, see [`Screen`].
    pub(crate) fn screen(&self) -> Screen {
        self.screen
    }

    /// The literal bytes every matching path starts with.
    pub(crate) fn prefix(&self) -> &[u8] {
        &self.body[..self.prefix_len]
    }

    /// Whether the pattern matches `path`.
    #[inline]
    pub(crate) fn matches(&self, path: &[u8]) -> bool {
        if !path.starts_with(self.prefix()) {
            return false;
        }
        if !self.has_star {
            return !self.anchored || path.len() == self.body.len();
        }
        self.matches_after_prefix(path)
    }

    /// Matches the pieces after the first `*`, each at its leftmost possible
    /// place (which is always right for `*`-only globs), the last one at the
    /// end of the path when the pattern is anchored.
    fn matches_after_prefix(&self, path: &[u8]) -> bool {
        let mut pos = self.prefix_len;
        let mut pieces = self.body[self.prefix_len + 1..].split(|&b| b == b'*').peekable();
        while let Some(piece) = pieces.next() {
            let rest = &path[pos..];
            if pieces.peek().is_none() {
                return if self.anchored {
                    rest.len() >= piece.len() && rest.ends_with(piece)
                } else {
                    find(rest, piece).is_some()
                };
            }
            match find(rest, piece) {
                Some(at) => pos += at + piece.len(),
                None => return false,
            }
        }
        true
    }
}

/// Position of the first occurrence of `needle` in `hay`.
#[inline]
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let Some((&first, tail)) = needle.split_first() else {
        return Some(0);
    };
    if hay.len() < needle.len() {
        return None;
    }
    let last_start = hay.len() - needle.len();
    let mut i = 0;
    while i <= last_start {
        match hay[i..=last_start].iter().position(|&b| b == first) {
            None => return None,
            Some(off) => {
                let at = i + off;
                if &hay[at + 1..at + needle.len()] == tail {
                    return Some(at);
                }
                i = at + 1;
            }
        }
    }
    None
}

/// The part of a URL that robots.txt rules are matched against: path,
/// params and query, without scheme, authority and fragment; always starts
/// with `/`. Follows Google's `GetPathParamsQuery`:
///
/// - two leading slashes start a scheme-relative authority (`//a/b/c` → `/b/c`);
/// - `://` marks the scheme only when no `/`, `?` or `;` comes before it;
/// - without a scheme the text up to the first `/`, `?` or `;` is taken as the
///   authority (`a/b` → `/b`, `example.com?a` → `/?a`);
/// - the URL is not decoded or normalised in any way; an empty or path-less
///   URL gives `/`.
///
/// Additionally the result is cut at the first NUL byte, as Google's matcher
/// reads the path as a C string.
///
/// ```
/// use crawlcache_robots::path_params_query;
/// assert_eq!(path_params_query("http://example.com/a/b?c=d#frag"), "/a/b?c=d");
/// assert_eq!(path_params_query(""), "/");
/// ```
pub fn path_params_query(url: &str) -> Cow<'_, str> {
    let b = url.as_bytes();
    let search_start = if b.starts_with(b"//") { 2 } else { 0 };
    let is_path_start = |c: &u8| matches!(c, b'/' | b'?' | b';');
    let first_path_char = |from: usize| {
        b.get(from..).and_then(|rest| rest.iter().position(is_path_start)).map(|p| p + from)
    };

    let Some(early_path) = first_path_char(search_start) else {
        return Cow::Borrowed("/");
    };
    // A "://" marks the scheme only when no path character comes before it;
    // then the first path character is its first '/'.
    let is_scheme = early_path > search_start && b[early_path - 1..].starts_with(b"://");
    let path_start = if is_scheme {
        match first_path_char(early_path + 2) {
            Some(p) => p,
            None => return Cow::Borrowed("/"),
        }
    } else {
        early_path
    };
    // A fragment before the path leaves no path.
    if b[search_start..path_start].contains(&b'#') {
        return Cow::Borrowed("/");
    }
    // The fragment is dropped; a NUL ends the path (Google reads a C string).
    let end = b[path_start..]
        .iter()
        .position(|&c| c == b'#' || c == 0)
        .map_or(b.len(), |p| p + path_start);
    let path = &url[path_start..end];
    if path.starts_with('/') {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(format!("/{path}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Google's `GetPathParamsQuery` step by step (plus the NUL cut), to
    /// check the single-pass version against.
    fn reference_path_params_query(url: &str) -> String {
        let b = url.as_bytes();
        let start = if b.starts_with(b"//") { 2 } else { 0 };
        let find = |from: usize, pred: &dyn Fn(u8) -> bool| {
            b.get(from..).and_then(|r| r.iter().position(|&c| pred(c))).map(|p| p + from)
        };
        let is_path = |c: u8| matches!(c, b'/' | b'?' | b';');
        let early_path = find(start, &is_path).unwrap_or(usize::MAX);
        let mut protocol_end = b
            .get(start..)
            .and_then(|r| r.windows(3).position(|w| w == b"://"))
            .map_or(usize::MAX, |p| p + start);
        if early_path < protocol_end {
            protocol_end = usize::MAX;
        }
        protocol_end = if protocol_end == usize::MAX { start } else { protocol_end + 3 };
        let Some(path_start) = find(protocol_end, &is_path) else {
            return "/".into();
        };
        let hash = find(start, &|c| c == b'#').unwrap_or(usize::MAX);
        if hash < path_start {
            return "/".into();
        }
        let mut path = url[path_start..hash.min(url.len())].to_string();
        if !path.starts_with('/') {
            path.insert(0, '/');
        }
        path.split('\0').next().unwrap_or_default().to_string()
    }

    proptest! {
        #[test]
        fn google_get_path_params_query_single_pass_agrees_with_reference(
            url in "[/:?;#a.\\x00]{0,12}"
        ) {
            prop_assert_eq!(path_params_query(&url).into_owned(), reference_path_params_query(&url));
        }
    }

    fn m(pattern: &str, path: &str) -> bool {
        let p = Pattern::new(pattern.as_bytes());
        let s = p.screen();
        let screened = head_of(path.as_bytes()) & s.head_mask == s.head
            && PairMask::of(path.as_bytes()).contains(&s.pairs);
        let full = p.matches(path.as_bytes());
        assert!(screened || !full, "screen rejects a match: {pattern:?} {path:?}");
        full
    }

    #[test]
    fn rfc9309_2_2_3_star_matches_any_sequence_and_dollar_anchors_the_end() {
        assert!(m("/fish*.php", "/fish/salmon.php"));
        assert!(m("/*.php$", "/a.php"));
        assert!(!m("/*.php$", "/a.php?x"));
        assert!(m("/*.html$", "/a.html/b.html"));
        assert!(m("/*/b/", "/a/x/b/"));
        assert!(m("/**/x", "/q/x"));
        assert!(m("*a", "/xa"));
        assert!(m("/a*$", "/a/anything"));
        assert!(m("/cat*$", "/cat"));
        assert!(!m("/cat*$", "/dog/cat"));
    }

    #[test]
    fn rfc9309_2_2_2_match_starts_at_first_octet_of_path() {
        assert!(!m("a", "/a"));
        assert!(m("/", "/anything"));
        assert!(m("", "/anything"));
    }

    #[test]
    fn google_dollar_is_literal_unless_last() {
        assert!(m("/a$b", "/a$b"));
        assert!(m("/a$$", "/a$"));
        assert!(!m("/a$$", "/a$b"));
        assert!(!m("$", "/"));
    }

    #[test]
    fn find_locates_leftmost_occurrence() {
        assert_eq!(find(b"abcabc", b"ca"), Some(2));
        assert_eq!(find(b"aaab", b"ab"), Some(2));
        assert_eq!(find(b"ab", b"abc"), None);
        assert_eq!(find(b"", b""), Some(0));
    }

    #[test]
    fn google_get_path_params_query_edge_cases() {
        assert_eq!(path_params_query("example.com/a;b#c"), "/a;b");
        assert_eq!(path_params_query("//a/b/c"), "/b/c");
        assert_eq!(path_params_query("a/b"), "/b");
        assert_eq!(path_params_query("http://x/#a/b"), "/");
        assert_eq!(path_params_query("http://x/a\0b"), "/a");
        assert_eq!(path_params_query("/a://b"), "/a://b");
        assert_eq!(path_params_query("//"), "/");
    }
}
