//! The compiled rule set: groups folded into one sorted rule list per
//! distinct set of applicable groups, and the lookup that answers a check.
//!
//! Compilation follows Google's matcher event by event (RFC 9309 §2.2.1
//! groups, §2.2.2 longest match), so that a check only has to find the first
//! matching rule in a precomputed order:
//!
//! - A group is a run of `User-agent` lines plus the rules that follow until
//!   the next `User-agent` line that comes after a rule. Blank, `Sitemap` and
//!   unknown lines never end a group. Rules before the first `User-agent`
//!   line belong to no group and are ignored.
//! - A product token's rules are those of every group naming it
//!   (case-insensitively, after cutting the `User-agent` value at the first
//!   byte outside `[A-Za-z_-]`). Only when no group names it do the groups
//!   whose value is `*` (or `*` followed by whitespace) apply.
//! - A rule's priority is the byte length of its escaped pattern; the
//!   highest priority wins, `Allow` wins ties. Empty patterns have priority 0
//!   and never decide. An `Allow` whose last `/` is followed by `index.htm`
//!   also allows the directory (`/d/index.html` adds `/d/$`, Google-specific).
//!
//! Rules are therefore sorted by (priority descending, `Allow` first, line
//! ascending) and the first one that matches decides, with the line Google
//! reports. Large lists are split by the second byte of the path (the one
//! after the leading `/`) so a check only tries rules whose literal prefix
//! can agree with it.

use super::parse::{for_each_line, KeyType, LineReport};
use super::pattern::{PairMask, Pattern};
use super::{escape_pattern, parse};
use std::collections::HashMap;

/// One `Allow`/`Disallow` rule (or the directory rule derived from an
/// `Allow: .../index.htm*`).
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub(crate) allow: bool,
    /// Byte length of the escaped pattern, `*` and `$` included.
    pub(crate) priority: u32,
    /// 1-based line of the directive.
    pub(crate) line: u32,
    /// The directive as written, e.g. `Disallow: /private`.
    pub(crate) text: Box<str>,
    pub(crate) pattern: Pattern,
}

/// Lists shorter than this are scanned whole; longer ones get a [`Dispatch`].
const DISPATCH_MIN_RULES: usize = 16;

/// Rule lists keyed by the path's second byte.
#[derive(Debug, Clone)]
struct Dispatch {
    /// Index into `lists` for each possible second byte.
    by_byte: Box<[u16; 256]>,
    /// `lists[0]`: the rules whose literal prefix is empty or `/`, which is
    /// all a one-byte path can match; every other list adds to those the
    /// rules whose prefix's second byte is that list's byte. All sorted.
    lists: Vec<Box<[u32]>>,
}

/// The rules that apply to one set of groups, in decision order.
#[derive(Debug, Clone)]
pub(crate) struct RuleSet {
    order: Box<[u32]>,
    dispatch: Option<Dispatch>,
    pub(crate) crawl_delay: Option<f64>,
}

impl RuleSet {
    fn new(rules: &[Rule], mut ids: Vec<u32>, crawl_delay: Option<f64>) -> RuleSet {
        // Rules that can never match (empty patterns have priority 0 and
        // never decide; a literal prefix not starting with '/' never agrees
        // with a path) are left out.
        ids.retain(|&id| {
            let r = &rules[id as usize];
            r.priority > 0 && r.pattern.prefix().first().is_none_or(|&b| b == b'/')
        });
        ids.sort_by_key(|&id| {
            let r = &rules[id as usize];
            (std::cmp::Reverse(r.priority), !r.allow, r.line)
        });
        ids.dedup();
        let dispatch = (ids.len() >= DISPATCH_MIN_RULES).then(|| Dispatch::new(rules, &ids));
        RuleSet { order: ids.into(), dispatch, crawl_delay }
    }

    /// The first rule, in decision order, whose pattern matches `path`.
    #[inline]
    pub(crate) fn decide<'r>(&self, rules: &'r [Rule], path: &[u8]) -> Option<&'r Rule> {
        let candidates: &[u32] = match &self.dispatch {
            Some(d) => match path.get(1) {
                Some(&b) => &d.lists[usize::from(d.by_byte[usize::from(b)])],
                None => &d.lists[0],
            },
            None => &self.order,
        };
        let mut path_mask: Option<PairMask> = None;
        candidates
            .iter()
            .filter_map(|&id| rules.get(id as usize))
            .find(|rule| rule.pattern.matches(path, &mut path_mask))
    }
}

impl Dispatch {
    fn new(rules: &[Rule], sorted: &[u32]) -> Dispatch {
        let second = |id: u32| rules[id as usize].pattern.prefix().get(1).copied();
        let mut by_byte = Box::new([0u16; 256]);
        let mut lists: Vec<Vec<u32>> = vec![Vec::new()];
        for &id in sorted {
            if let Some(b) = second(id) {
                if by_byte[usize::from(b)] == 0 {
                    // At most 256 distinct bytes, so the index fits in u16.
                    by_byte[usize::from(b)] = lists.len() as u16;
                    lists.push(Vec::new());
                }
            }
        }
        for &id in sorted {
            match second(id) {
                Some(b) => lists[usize::from(by_byte[usize::from(b)])].push(id),
                None => lists.iter_mut().for_each(|l| l.push(id)),
            }
        }
        Dispatch { by_byte, lists: lists.into_iter().map(Vec::into_boxed_slice).collect() }
    }
}

/// Everything [`super::RobotsTxt`] holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Compiled {
    pub(crate) rules: Vec<Rule>,
    pub(crate) sets: Vec<RuleSet>,
    /// Lower-cased product tokens named by some group, sorted, with the index
    /// of their rule set.
    pub(crate) agents: Vec<(Box<[u8]>, u32)>,
    /// The rule set of the `*` groups, when there are any.
    pub(crate) global: Option<u32>,
    pub(crate) sitemaps: Vec<String>,
    pub(crate) lines: Vec<LineReport>,
}

/// A group while it is being read.
#[derive(Default)]
struct Group {
    agents: Vec<Vec<u8>>,
    global: bool,
    rules: Vec<u32>,
    crawl_delay: Option<f64>,
}

/// Cuts a `User-agent` value at the first byte outside `[A-Za-z_-]`
/// (Google's `ExtractUserAgent`): `Googlebot/2.1` gives `Googlebot`.
pub(crate) fn extract_product_token(value: &[u8]) -> &[u8] {
    let end = value.iter().position(|&b| !(b.is_ascii_alphabetic() || b == b'-' || b == b'_')).unwrap_or(value.len());
    &value[..end]
}

/// Whether a `User-agent` value names the global group: `*` alone or
/// followed by whitespace and anything (Google-specific).
fn is_global_agent(value: &[u8]) -> bool {
    value.first() == Some(&b'*') && value.get(1).is_none_or(|&b| parse::is_space(b))
}

/// Parses a `Crawl-delay` value: a non-negative, finite decimal number of
/// seconds (`10`, `0.5`, `.5`, `1e3`); anything else is ignored.
pub(crate) fn parse_crawl_delay(value: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(value).ok()?;
    if !text.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    text.parse::<f64>().ok().filter(|d| d.is_finite() && *d >= 0.0)
}

impl Compiled {
    pub(crate) fn parse(body: &[u8]) -> Compiled {
        let mut c = Compiled::default();
        let mut groups: Vec<Group> = Vec::new();
        // Whether the current group already has a rule, so that the next
        // User-agent line starts a new group.
        let mut group_has_rules = false;

        for_each_line(body, |line| {
            let mut report = line.report();
            if let Some((key_type, key, value)) = line.directive {
                match key_type {
                    KeyType::UserAgent => {
                        if groups.is_empty() || group_has_rules {
                            groups.push(Group::default());
                            group_has_rules = false;
                        }
                        if let Some(g) = groups.last_mut() {
                            if is_global_agent(value) {
                                g.global = true;
                            } else {
                                let token = extract_product_token(value).to_ascii_lowercase();
                                if !g.agents.contains(&token) {
                                    g.agents.push(token);
                                }
                            }
                        }
                    }
                    KeyType::Allow | KeyType::Disallow => match groups.last_mut() {
                        None => report.note = Some("ignored: no User-agent line before this rule"),
                        Some(g) => {
                            group_has_rules = true;
                            let allow = key_type == KeyType::Allow;
                            let escaped = escape_pattern(value);
                            let text: Box<str> = format!(
                                "{}: {}",
                                if allow { "Allow" } else { "Disallow" },
                                String::from_utf8_lossy(value)
                            )
                            .into();
                            if escaped.is_empty() {
                                report.note = Some("empty pattern: matches nothing");
                            }
                            let mut add = |pattern: &[u8]| {
                                g.rules.push(c.rules.len() as u32);
                                c.rules.push(Rule {
                                    allow,
                                    priority: u32::try_from(pattern.len()).unwrap_or(u32::MAX),
                                    line: line.number,
                                    text: text.clone(),
                                    pattern: Pattern::new(pattern),
                                });
                            };
                            add(&escaped);
                            if allow {
                                if let Some(dir) = index_htm_directory(&escaped) {
                                    add(&dir);
                                }
                            }
                        }
                    },
                    KeyType::Sitemap => {
                        if !value.is_empty() {
                            c.sitemaps.push(String::from_utf8_lossy(value).into_owned());
                        }
                    }
                    KeyType::Unknown => {
                        if key.eq_ignore_ascii_case(b"crawl-delay") {
                            match (groups.last_mut(), parse_crawl_delay(value)) {
                                (None, _) => report.note = Some("ignored: no User-agent line before this Crawl-delay"),
                                (Some(_), None) => report.note = Some("ignored: Crawl-delay is not a number of seconds"),
                                (Some(g), Some(d)) => match g.crawl_delay {
                                    None => {
                                        g.crawl_delay = Some(d);
                                        report.note = Some("Crawl-delay recorded for this group");
                                    }
                                    Some(_) => report.note = Some("ignored: the group already has a Crawl-delay"),
                                },
                            }
                        }
                    }
                }
            }
            c.lines.push(report);
        });

        c.build_sets(&groups);
        c
    }

    fn build_sets(&mut self, groups: &[Group]) {
        let mut by_agent: HashMap<&[u8], Vec<u32>> = HashMap::new();
        let mut global: Vec<u32> = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            for a in &g.agents {
                by_agent.entry(a.as_slice()).or_default().push(gi as u32);
            }
            if g.global {
                global.push(gi as u32);
            }
        }
        // Agents named by the same groups share one rule set.
        let mut set_of: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut make = |group_ids: Vec<u32>, sets: &mut Vec<RuleSet>| -> u32 {
            *set_of.entry(group_ids).or_insert_with_key(|ids| {
                let rules = ids.iter().flat_map(|&g| groups[g as usize].rules.iter().copied()).collect();
                let delay = ids.iter().find_map(|&g| groups[g as usize].crawl_delay);
                sets.push(RuleSet::new(&self.rules, rules, delay));
                (sets.len() - 1) as u32
            })
        };
        let mut agents: Vec<(Box<[u8]>, u32)> =
            by_agent.into_iter().map(|(name, ids)| (Box::from(name), make(ids, &mut self.sets))).collect();
        agents.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        self.agents = agents;
        if !global.is_empty() {
            self.global = Some(make(global, &mut self.sets));
        }
    }

    /// The rule set that applies to `product_token`: the merged groups naming
    /// it, else the `*` groups, else none.
    #[inline]
    pub(crate) fn rule_set(&self, product_token: &str) -> Option<&RuleSet> {
        let token = product_token.as_bytes();
        let named = self
            .agents
            .binary_search_by(|(name, _)| name.iter().copied().cmp(token.iter().map(u8::to_ascii_lowercase)))
            .ok()
            .map(|i| self.agents[i].1);
        named.or(self.global).and_then(|i| self.sets.get(i as usize))
    }
}

/// Google-specific: for an `Allow` pattern whose last `/` is followed by
/// `index.htm`, the pattern that allows the directory itself (`/d/index.html`
/// gives `/d/$`).
fn index_htm_directory(escaped: &[u8]) -> Option<Vec<u8>> {
    let slash = escaped.iter().rposition(|&b| b == b'/')?;
    if !escaped[slash..].starts_with(b"/index.htm") {
        return None;
    }
    let mut dir = escaped[..=slash].to_vec();
    dir.push(b'$');
    Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_user_agent_value_cut_at_first_byte_outside_token_chars() {
        assert_eq!(extract_product_token(b"Googlebot/2.1"), b"Googlebot");
        assert_eq!(extract_product_token(b"Foo Bar"), b"Foo");
        assert_eq!(extract_product_token(b"Bot2"), b"Bot");
        assert_eq!(extract_product_token(b"/x"), b"");
    }

    #[test]
    fn google_star_followed_by_whitespace_is_global() {
        assert!(is_global_agent(b"*"));
        assert!(is_global_agent(b"* everyone"));
        assert!(!is_global_agent(b"*bot"));
    }

    #[test]
    fn crawl_delay_accepts_fractions_and_ignores_junk() {
        assert_eq!(parse_crawl_delay(b"0.2"), Some(0.2));
        assert_eq!(parse_crawl_delay(b"10"), Some(10.0));
        assert_eq!(parse_crawl_delay(b".5"), Some(0.5));
        assert_eq!(parse_crawl_delay(b"1e9"), Some(1e9));
        for junk in [&b"abc"[..], b"-1", b"inf", b"NaN", b"", b"5s", b"1e999", b"+3"] {
            assert_eq!(parse_crawl_delay(junk), None, "{:?}", String::from_utf8_lossy(junk));
        }
    }

    #[test]
    fn google_index_htm_allow_derives_directory_pattern() {
        assert_eq!(index_htm_directory(b"/d/index.html").as_deref(), Some(&b"/d/$"[..]));
        assert_eq!(index_htm_directory(b"/d/index.htm").as_deref(), Some(&b"/d/$"[..]));
        assert_eq!(index_htm_directory(b"/d/index.php"), None);
        assert_eq!(index_htm_directory(b"index.html"), None);
    }

    #[test]
    fn dispatch_lists_keep_decision_order() {
        let body: String = (0..40).map(|i| format!("Disallow: /{}x{i}\n", (b'a' + (i % 5) as u8) as char)).collect();
        let c = Compiled::parse(format!("User-agent: *\nAllow: /*q\n{body}").as_bytes());
        let set = &c.sets[c.global.unwrap() as usize];
        assert!(set.dispatch.is_some());
        assert_eq!(set.decide(&c.rules, b"/ax10").map(|r| r.line), Some(13));
        assert_eq!(set.decide(&c.rules, b"/ax10q").map(|r| r.line), Some(13));
        assert_eq!(set.decide(&c.rules, b"/zq").map(|r| r.line), Some(2));
        assert_eq!(set.decide(&c.rules, b"/").map(|r| r.line), None);
    }
}
