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

use crate::parse::{self, escape_pattern, for_each_line, KeyType, LineReport};
use crate::pattern::{head_of, PairMask, Pattern};
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
    /// The directive as written, e.g. `Disallow: /private` (the key
    /// normalised, bytes that are not UTF-8 as `%XX`: [`parse::octets_text`]).
    pub(crate) text: Box<str>,
    pub(crate) pattern: Pattern,
}

/// Lists shorter than this are scanned whole; longer ones get a [`Dispatch`].
const DISPATCH_MIN_RULES: usize = 16;

/// A rule in a candidate list, with its [`crate::pattern::Screen`] inline so
/// that rejecting it touches only this entry.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    head: u64,
    head_mask: u64,
    pairs: PairMask,
    id: u32,
}

impl Candidate {
    fn new(rules: &[Rule], id: u32) -> Candidate {
        let s = rules[id as usize].pattern.screen();
        Candidate { head: s.head, head_mask: s.head_mask, pairs: s.pairs, id }
    }
}

/// Rule lists keyed by the path's second byte.
#[derive(Debug, Clone)]
struct Dispatch {
    /// Index into `lists` for each possible second byte.
    by_byte: Box<[u16; 256]>,
    /// `lists[0]`: the rules whose literal prefix is empty or `/`, which is
    /// all a one-byte path can match; every other list adds to those the
    /// rules whose prefix's second byte is that list's byte. All sorted.
    lists: Vec<Box<[Candidate]>>,
}

/// The rules that apply to one set of groups, in decision order.
#[derive(Debug, Clone)]
pub(crate) struct RuleSet {
    /// All candidates in decision order (empty when `dispatch` is used).
    order: Box<[Candidate]>,
    dispatch: Option<Dispatch>,
}

impl RuleSet {
    fn new(rules: &[Rule], mut ids: Vec<u32>) -> RuleSet {
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
        // With a dispatch the whole order is never scanned, so it is not kept.
        let order = match dispatch {
            Some(_) => Box::default(),
            None => ids.iter().map(|&id| Candidate::new(rules, id)).collect(),
        };
        RuleSet { order, dispatch }
    }

    /// The first rule, in decision order, whose pattern matches `path`.
    #[inline]
    pub(crate) fn decide<'r>(&self, rules: &'r [Rule], path: &[u8]) -> Option<&'r Rule> {
        let candidates: &[Candidate] = match &self.dispatch {
            Some(d) => match path.get(1) {
                Some(&b) => &d.lists[usize::from(d.by_byte[usize::from(b)])],
                None => &d.lists[0],
            },
            None => &self.order,
        };
        let head = head_of(path);
        // Computed once, when the first candidate needs it.
        let mut path_pairs: Option<PairMask> = None;
        for c in candidates {
            if head & c.head_mask != c.head {
                continue;
            }
            if !c.pairs.is_empty()
                && !path_pairs.get_or_insert_with(|| PairMask::of(path)).contains(&c.pairs)
            {
                continue;
            }
            if let Some(rule) = rules.get(c.id as usize) {
                if rule.pattern.matches(path) {
                    return Some(rule);
                }
            }
        }
        None
    }
}

impl Dispatch {
    fn new(rules: &[Rule], sorted: &[u32]) -> Dispatch {
        let second = |id: u32| rules[id as usize].pattern.prefix().get(1).copied();
        let mut by_byte = Box::new([0u16; 256]);
        let mut lists: Vec<Vec<Candidate>> = vec![Vec::new()];
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
            let c = Candidate::new(rules, id);
            match second(id) {
                Some(b) => lists[usize::from(by_byte[usize::from(b)])].push(c),
                None => lists.iter_mut().for_each(|l| l.push(c)),
            }
        }
        Dispatch { by_byte, lists: lists.into_iter().map(Vec::into_boxed_slice).collect() }
    }
}

/// Everything [`crate::RobotsTxt`] holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Compiled {
    pub(crate) rules: Vec<Rule>,
    pub(crate) sets: Vec<RuleSet>,
    /// Every product token some group names, sorted by lower-cased name.
    pub(crate) agents: Vec<Agent>,
    /// What applies to tokens no group names: the `*` groups, if any.
    pub(crate) global: Option<Applicable>,
    pub(crate) sitemaps: Vec<String>,
    pub(crate) lines: Vec<LineReport>,
}

/// What applies to one product token: its rule set and `Crawl-delay`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Applicable {
    /// Index into [`Compiled::sets`].
    pub(crate) set: u32,
    /// Seconds.
    pub(crate) crawl_delay: Option<f64>,
}

/// A product token named by some group.
#[derive(Debug, Clone)]
pub(crate) struct Agent {
    /// Lower-cased.
    name: Box<[u8]>,
    applicable: Applicable,
}

/// A group while it is being read.
#[derive(Default)]
struct Group {
    /// Lower-cased product tokens, each once, in the order named.
    agents: Vec<Vec<u8>>,
    /// Whether a `*` line is part of the group.
    global: bool,
    rules: Vec<u32>,
    crawl_delays: Vec<CrawlDelay>,
}

/// A valid `Crawl-delay` line and the `User-agent` lines of its group above
/// it, the ones it applies to.
struct CrawlDelay {
    seconds: f64,
    /// `Group::agents[..agents_above]` are named above the line.
    agents_above: usize,
    /// Whether `*` is named above the line.
    global_above: bool,
}

/// Cuts a `User-agent` value at the first byte outside `[A-Za-z_-]`
/// (Google's `ExtractUserAgent`): `Googlebot/2.1` gives `Googlebot`.
pub(crate) fn extract_product_token(value: &[u8]) -> &[u8] {
    let end = value
        .iter()
        .position(|&b| !(b.is_ascii_alphabetic() || b == b'-' || b == b'_'))
        .unwrap_or(value.len());
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
                                parse::octets_text(value)
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
                            c.sitemaps.push(parse::octets_text(value).into_owned());
                        }
                    }
                    KeyType::Unknown => {
                        if key.eq_ignore_ascii_case(b"crawl-delay") {
                            match (groups.last_mut(), parse_crawl_delay(value)) {
                                (None, _) => {
                                    report.note =
                                        Some("ignored: no User-agent line before this Crawl-delay")
                                }
                                (Some(_), None) => {
                                    report.note =
                                        Some("ignored: Crawl-delay is not a number of seconds")
                                }
                                (Some(g), Some(seconds)) => {
                                    g.crawl_delays.push(CrawlDelay {
                                        seconds,
                                        agents_above: g.agents.len(),
                                        global_above: g.global,
                                    });
                                    report.note = Some(
                                        "Crawl-delay recorded for the User-agent lines above it",
                                    );
                                }
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
        let mut set_for = |group_ids: &[u32], sets: &mut Vec<RuleSet>| -> u32 {
            if let Some(&i) = set_of.get(group_ids) {
                return i;
            }
            let rules =
                group_ids.iter().flat_map(|&g| groups[g as usize].rules.iter().copied()).collect();
            sets.push(RuleSet::new(&self.rules, rules));
            let i = (sets.len() - 1) as u32;
            set_of.insert(group_ids.to_vec(), i);
            i
        };
        // The first Crawl-delay, in file order, below a line naming the agent.
        let delay_for = |group_ids: &[u32], applies: &dyn Fn(&Group, &CrawlDelay) -> bool| {
            group_ids.iter().find_map(|&g| {
                let g = &groups[g as usize];
                g.crawl_delays.iter().find(|d| applies(g, d)).map(|d| d.seconds)
            })
        };
        let mut agents: Vec<Agent> = by_agent
            .into_iter()
            .map(|(name, ids)| {
                let crawl_delay = delay_for(&ids, &|g, d| {
                    g.agents[..d.agents_above].iter().any(|a| a.as_slice() == name)
                });
                let set = set_for(&ids, &mut self.sets);
                Agent { name: name.into(), applicable: Applicable { set, crawl_delay } }
            })
            .collect();
        agents.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        self.agents = agents;
        if !global.is_empty() {
            self.global = Some(Applicable {
                set: set_for(&global, &mut self.sets),
                crawl_delay: delay_for(&global, &|_, d| d.global_above),
            });
        }
    }

    /// What applies to `product_token`: the merged groups naming it
    /// (compared case-insensitively), else the `*` groups, else nothing.
    #[inline]
    pub(crate) fn applicable(&self, product_token: &str) -> Option<Applicable> {
        let token = product_token.as_bytes();
        self.agents
            .binary_search_by(|a| {
                a.name.iter().copied().cmp(token.iter().map(u8::to_ascii_lowercase))
            })
            .ok()
            .map(|i| self.agents[i].applicable)
            .or(self.global)
    }

    /// The rule set that applies to `product_token`, if any.
    #[inline]
    pub(crate) fn rule_set(&self, product_token: &str) -> Option<&RuleSet> {
        self.applicable(product_token).and_then(|a| self.sets.get(a.set as usize))
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
        let body: String = (0..40)
            .map(|i| format!("Disallow: /{}x{i}\n", (b'a' + (i % 5) as u8) as char))
            .collect();
        let c = Compiled::parse(format!("User-agent: *\nAllow: /*q\n{body}").as_bytes());
        let set = c.rule_set("anybot").unwrap();
        assert!(set.dispatch.is_some());
        assert_eq!(set.decide(&c.rules, b"/ax10").map(|r| r.line), Some(13));
        assert_eq!(set.decide(&c.rules, b"/ax10q").map(|r| r.line), Some(13));
        assert_eq!(set.decide(&c.rules, b"/zq").map(|r| r.line), Some(2));
        assert_eq!(set.decide(&c.rules, b"/").map(|r| r.line), None);
    }
}
