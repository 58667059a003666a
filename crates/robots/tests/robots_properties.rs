//! Property tests: the compiled matcher against a plain dynamic-programming
//! reading of RFC 9309 §2.2.3 (`*` any sequence, final `$` end of path), the
//! longest-match decision against a brute-force one (§2.2.2), and parse/check
//! on arbitrary bytes.

use crawlcache_robots::RobotsTxt;
use proptest::prelude::*;

/// Reference: does `pattern` match a prefix of `path` (the whole of it when
/// the pattern ends in `$`)? Table-driven, no shortcuts.
fn reference_match(pattern: &[u8], path: &[u8]) -> bool {
    let (pat, anchored) = match pattern.split_last() {
        Some((b'$', rest)) => (rest, true),
        _ => (pattern, false),
    };
    // reach[j]: pat[..i] can match path[..j].
    let mut reach = vec![false; path.len() + 1];
    reach[0] = true;
    for &p in pat {
        let mut next = vec![false; path.len() + 1];
        for j in 0..=path.len() {
            if p == b'*' {
                next[j] = reach[..=j].iter().any(|&r| r);
            } else if j > 0 && reach[j - 1] && path[j - 1] == p {
                next[j] = true;
            }
        }
        reach = next;
    }
    if anchored {
        reach[path.len()]
    } else {
        reach.iter().any(|&r| r)
    }
}

/// Reference decision: longest matching pattern wins, allow wins ties, empty
/// patterns never decide.
fn reference_allowed(rules: &[(bool, Vec<u8>)], path: &[u8]) -> bool {
    let best = |allow: bool| {
        rules
            .iter()
            .filter(|(a, p)| *a == allow && !p.is_empty() && reference_match(p, path))
            .map(|(_, p)| p.len())
            .max()
    };
    match (best(true), best(false)) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(d)) => a >= d,
    }
}

fn pattern() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"/ab*$".to_vec()), 0..8)
}

fn path() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"/ab$*".to_vec()), 0..10).prop_map(|mut p| {
        p.insert(0, b'/');
        p
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn rfc9309_2_2_3_wildcard_matching_agrees_with_reference(pat in pattern(), p in path()) {
        let body = [b"User-agent: *\nDisallow: ".as_slice(), &pat].concat();
        let robots = RobotsTxt::parse(&body);
        // Absolute URL, so that a path starting with "//" is not read as an authority.
        let path = format!("http://h{}", String::from_utf8_lossy(&p));
        let expected = pat.is_empty() || !reference_match(&pat, &p);
        prop_assert_eq!(robots.is_allowed("x", &path), expected, "pattern {:?} path {:?}",
            String::from_utf8_lossy(&pat), path);
    }

    #[test]
    fn rfc9309_2_2_2_longest_match_agrees_with_brute_force(
        rules in prop::collection::vec((any::<bool>(), pattern()), 0..24),
        p in path(),
    ) {
        let mut body = b"User-agent: *\n".to_vec();
        for (allow, pat) in &rules {
            body.extend_from_slice(if *allow { b"Allow: " } else { b"Disallow: " });
            body.extend_from_slice(pat);
            body.push(b'\n');
        }
        let robots = RobotsTxt::parse(&body);
        // Absolute URL, so that a path starting with "//" is not read as an authority.
        let path = format!("http://h{}", String::from_utf8_lossy(&p));
        if path == "http://h/robots.txt" {
            return Ok(());
        }
        let v = robots.check("x", &path);
        prop_assert_eq!(v.allowed, reference_allowed(&rules, &p), "{:?} on {:?}: {:?}",
            String::from_utf8_lossy(&body), path, v);
        // The reported line holds a rule of the winning kind that matches.
        if let Some(line) = v.line {
            let (allow, pat) = &rules[line as usize - 2];
            prop_assert_eq!(*allow, v.allowed);
            prop_assert!(reference_match(pat, &p));
        }
    }

    #[test]
    fn rfc9309_2_3_parse_and_check_never_panic(body in prop::collection::vec(any::<u8>(), 0..512),
                                               url in ".{0,40}", agent in "[A-Za-z_*-]{0,8}") {
        let robots = RobotsTxt::parse(&body);
        let v = robots.check(&agent, &url);
        prop_assert_eq!(v.allowed, robots.is_allowed(&agent, &url));
        prop_assert_eq!(robots.line_reports().last().map(|r| r.line as usize), Some(robots.line_reports().len()));
    }
}
