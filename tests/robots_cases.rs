//! The robots cases of `docs/CASES.md` (C24, C27, C28, C29, C30,
//! C32, C34, C36 and C37 parsing parts, C39), the `robots` command-line
//! functions, and the robustness promises of `RobotsTxt::parse`.

#[path = "../crates/robots/tests/common/corpus.rs"]
mod corpus;

use crawlcache::cli::robots::{self as cli, BatchSummary, CheckArgs};
use crawlcache_robots::{LineTag, RobotsTxt, Verdict};

/// Asserts every (agent, url, allowed) triple and reports all failures at once.
fn expect(robots: &[u8], cases: &[(&str, &str, bool)]) {
    let r = RobotsTxt::parse(robots);
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|&(agent, url, allowed)| {
            let v = r.check(agent, url);
            (v.allowed != allowed)
                .then(|| format!("  {agent} {url}: expected allowed={allowed}, got {v:?}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "for robots.txt {:?}:\n{}",
        String::from_utf8_lossy(robots),
        failures.join("\n")
    );
}

#[test]
fn rfc9309_2_2_3_star_then_dollar_is_anchored_at_path_start_c24() {
    expect(
        b"User-agent: *\nDisallow: /cat*$\n",
        &[
            ("examplebot", "http://example.com/dog/cat", true),
            ("examplebot", "http://example.com/catalog", false),
            ("examplebot", "http://example.com/cat", false),
        ],
    );
}

#[test]
fn rfc9309_2_2_2_longest_match_not_first_match_and_allow_wins_ties_c27() {
    let body =
        b"User-agent: *\nDisallow: /\nAllow: /public\nDisallow: /admin/\nAllow: /admin/ping.php\n";
    expect(
        body,
        &[
            ("examplebot", "/public/page", true),
            ("examplebot", "/other", false),
            ("examplebot", "/admin/ping.php", true),
            ("examplebot", "/admin/users", false),
        ],
    );
    let r = RobotsTxt::parse(body);
    assert_eq!(
        r.check("examplebot", "/admin/users"),
        Verdict { allowed: false, rule: Some("Disallow: /admin/".into()), line: Some(4) }
    );
    // Tie: equal length, allow wins whatever the order in the file.
    expect(b"User-agent: *\nDisallow: /page\nAllow: /page\n", &[("examplebot", "/page", true)]);
    expect(b"User-agent: *\nAllow: /page\nDisallow: /page\n", &[("examplebot", "/page", true)]);
}

#[test]
fn rfc9309_2_2_empty_disallow_matches_nothing_and_cancels_nothing_c28() {
    expect(
        b"User-agent: *\nDisallow:\nDisallow: /admin\nDisallow: /tmp/\n",
        &[
            ("examplebot", "/admin/login", false),
            ("examplebot", "/tmp/x", false),
            ("examplebot", "/index.html", true),
        ],
    );
    expect(
        b"User-agent: *\nDisallow:\n",
        &[("examplebot", "/", true), ("examplebot", "/admin", true)],
    );
}

#[test]
fn google_utf8_bom_skipped_at_offset_zero_only_c29() {
    expect(
        b"\xEF\xBB\xBFUser-agent: *\nDisallow: /\n",
        &[("examplebot", "http://example.com/any", false)],
    );
    // Mid-file the BOM is part of the key, which becomes unknown.
    let r = RobotsTxt::parse(b"User-agent: *\n\xEF\xBB\xBFDisallow: /\n");
    assert!(r.is_allowed("examplebot", "/any"));
    assert_eq!(r.line_reports()[1].tag, LineTag::Unknown);
}

#[test]
fn rfc9309_2_2_1_product_token_matched_whole_not_by_prefix_c30() {
    let body = b"User-agent: bot\nDisallow: /\n\nUser-agent: examplebot\nDisallow: /a/\n\n\
                 User-agent: examplebot-news\nDisallow: /b/\n\nUser-agent: *\nDisallow: /c/\n";
    expect(
        body,
        &[
            ("examplebot", "/a/1", false),
            ("examplebot", "/b/1", true),
            ("examplebot", "/c/1", true),
            ("examplebot-news", "/b/1", false),
            ("examplebot-news", "/a/1", true),
            ("examplebot-image", "/c/1", false),
            ("examplebot-image", "/a/1", true),
            ("mybot", "/x", true),
            ("ExampleBot", "/a/1", false),
        ],
    );
}

#[test]
fn rfc9309_2_2_1_groups_merge_and_star_applies_only_without_a_named_group_c32() {
    // Case A: the '*' group does not leak into examplebot's group.
    expect(
        b"User-agent: examplebot\nDisallow: /a\n\nUser-agent: *\nDisallow: /b\n",
        &[("examplebot", "/a", false), ("examplebot", "/b", true)],
    );
    // Case B: both groups naming examplebot are merged.
    expect(
        b"User-agent: examplebot\nDisallow: /a\n\nUser-agent: otherbot\nUser-agent: examplebot\nDisallow: /c\n",
        &[("examplebot", "/a", false), ("examplebot", "/c", false), ("otherbot", "/a", true), ("otherbot", "/c", false)],
    );
    // A blank line between User-agent lines does not split the group.
    expect(
        b"User-agent: otherbot\n\nUser-agent: examplebot\nDisallow: /c\n",
        &[("examplebot", "/c", false), ("otherbot", "/c", false)],
    );
}

#[test]
fn crawl_delay_fractional_recorded_invalid_ignored_rules_unaffected_c34() {
    for (value, expected) in [
        ("0.2", Some(0.2)),
        ("10", Some(10.0)),
        ("0", Some(0.0)),
        ("abc", None),
        ("1e9", Some(1e9)),
    ] {
        let body = format!("User-agent: *\nCrawl-delay: {value}\nDisallow: /x/\n");
        let r = RobotsTxt::parse(body.as_bytes());
        assert_eq!(r.crawl_delay("examplebot"), expected, "Crawl-delay: {value}");
        assert!(
            !r.is_allowed("examplebot", "/x/y"),
            "Crawl-delay: {value} must not disturb Disallow: /x/"
        );
        assert!(r.is_allowed("examplebot", "/y"));
    }
    // The delay comes from the group that applies, like the rules.
    let r = RobotsTxt::parse(
        b"User-agent: *\nCrawl-delay: 5\n\nUser-agent: fastbot\nCrawl-delay: 0.5\nDisallow: /x\n",
    );
    assert_eq!(r.crawl_delay("FastBot"), Some(0.5));
    assert_eq!(r.crawl_delay("otherbot"), Some(5.0));
    let r =
        RobotsTxt::parse(b"User-agent: *\nCrawl-delay: 5\n\nUser-agent: fastbot\nDisallow: /x\n");
    assert_eq!(r.crawl_delay("otherbot"), Some(5.0));
    assert_eq!(
        r.crawl_delay("fastbot"),
        None,
        "the delay applies to the User-agent lines above it"
    );
    assert!(
        !r.is_allowed("fastbot", "/x") && !r.is_allowed("otherbot", "/x"),
        "Google's grouping for rules"
    );
    let r =
        RobotsTxt::parse(b"User-agent: fastbot\nDisallow: /x\n\nUser-agent: *\nCrawl-delay: 5\n");
    assert_eq!(r.crawl_delay("fastbot"), None, "a named group does not inherit the delay of '*'");
    let r = RobotsTxt::parse(
        b"User-agent: a\nUser-agent: b\nCrawl-delay: 3\nCrawl-delay: 4\nDisallow: /\n",
    );
    assert_eq!(
        (r.crawl_delay("a"), r.crawl_delay("B")),
        (Some(3.0), Some(3.0)),
        "first value wins"
    );
}

#[test]
fn parsing_part_an_html_error_body_parses_to_no_rules_without_failing_c36() {
    // The fetcher maps 5xx, timeouts and DNS failures to "disallow all"
    // (RFC 9309 §2.3.1.4); the parser's part is only to never fail on such a
    // body and to find no rules in it.
    let html = b"<!DOCTYPE html>\n<html><head><title>503 Service Unavailable</title></head>\n\
                 <body><h1>Service Unavailable</h1><p>Try again: later</p></body></html>\n";
    let r = RobotsTxt::parse(html);
    assert!(r.is_allowed("examplebot", "http://example.com/any"));
    assert!(r
        .line_reports()
        .iter()
        .all(|l| !matches!(l.tag, LineTag::Allow | LineTag::Disallow | LineTag::UserAgent)));
    let empty = RobotsTxt::parse(b"");
    assert!(empty.is_allowed("examplebot", "/any"));
    assert_eq!(empty.line_reports().len(), 1);
}

#[test]
fn parsing_part_followed_redirect_body_disallow_all_applies_c37() {
    // After a 302 is followed, the target's "Disallow: /" applies to every
    // URL but /robots.txt itself (RFC 9309 §2.2.2).
    expect(
        b"User-agent: *\nDisallow: /\n",
        &[
            ("examplebot", "http://example.com/", false),
            ("examplebot", "http://example.com/a?b", false),
        ],
    );
    expect(b"Disallow: /\n", &[("examplebot", "/", true)]);
}

#[test]
fn rfc9309_2_2_rules_before_any_user_agent_are_ignored_never_fail_c39() {
    let with_group = b"Disallow: /tmp/\nSitemap: http://example.com/sitemap.xml\n\nUser-agent: otherbot\nDisallow: /\n";
    let without_group = b"Disallow: /tmp/\nSitemap: http://example.com/sitemap.xml\n";
    for body in [&with_group[..], &without_group[..]] {
        expect(body, &[("examplebot", "/tmp/a", true), ("examplebot", "/index.html", true)]);
        let r = RobotsTxt::parse(body);
        assert_eq!(r.sitemaps(), ["http://example.com/sitemap.xml"]);
        assert!(r.line_reports()[0].note.is_some_and(|n| n.contains("no User-agent")));
    }
}

#[test]
fn rfc9309_2_3_parse_never_panics_on_hostile_bytes() {
    let mut bodies: Vec<Vec<u8>> = vec![
        vec![0xFF; 100],
        vec![0; 64],
        b"\xEF".to_vec(),
        b"\xEF\xBB".to_vec(),
        b"User-agent: *\nDisallow: /\xC3\n".to_vec(),
        b"User-agent: *\nDisallow: %\nDisallow: %4\nAllow: /a/index.htm\xFF".to_vec(),
        b"User-agent: *\nDisallow: *$*$**\nAllow: $\n".to_vec(),
        "User-agent: *\nDisallow: /".bytes().chain(std::iter::repeat_n(b'*', 40_000)).collect(),
        b"\r\r\n\n\r".repeat(1000),
    ];
    bodies.push((0..=255u8).cycle().take(70_000).collect());
    for body in &bodies {
        let r = RobotsTxt::parse(body);
        for url in ["", "/", "http://x/a*b$", "\u{0}", "//", "?", "#", "http://x/\u{e9}"] {
            let _ = r.check("FooBot", url);
            let _ = r.check("", url);
        }
    }
}

fn check_output(robots: &str, agent: &str, urls: &[&str]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("robots.txt");
    std::fs::write(&path, robots).unwrap_or_else(|e| panic!("write: {e}"));
    let args = CheckArgs {
        robots: path,
        agent: agent.into(),
        urls: urls.iter().map(|u| u.to_string()).collect(),
        lines: false,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    cli::check(&args, &mut out, &mut err).unwrap_or_else(|e| panic!("check: {e}"));
    (String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned())
}

#[test]
fn cli_check_prints_verdict_rule_and_line_per_url() {
    let (out, err) = check_output(
        "User-agent: *\nDisallow: /\nAllow: /pub\n",
        "ExampleBot",
        &["http://e/pub/a", "/x"],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("allowed") && lines[0].ends_with("Allow: /pub (line 3)"), "{out}");
    assert!(
        lines[1].starts_with("disallowed") && lines[1].ends_with("Disallow: / (line 2)"),
        "{out}"
    );
    assert!(err.is_empty());
    let (_, err) = check_output("", "ExampleBot/2.1", &["/"]);
    assert!(
        err.contains("not a valid product token") && err.contains("--agent ExampleBot"),
        "{err}"
    );
}

/// A rule whose bytes are not UTF-8 is named by its octets as the file
/// has them, percent-encoded (`/caf%E9`), in the verdict and in the line
/// report, never by a replacement character.
#[test]
fn cli_check_names_a_rule_that_is_not_utf8_by_its_octets() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("robots.txt");
    std::fs::write(&path, b"User-agent: *\nDisallow: /caf\xe9\n")
        .unwrap_or_else(|e| panic!("write: {e}"));
    let args = CheckArgs {
        robots: path,
        agent: "ExampleBot".into(),
        urls: vec!["http://e/caf%E9".into()],
        lines: true,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    cli::check(&args, &mut out, &mut err).unwrap_or_else(|e| panic!("check: {e}"));
    let out = String::from_utf8(out).expect("the output is UTF-8");
    assert!(out.contains("disallowed") && out.contains("Disallow: /caf%E9 (line 2)"), "{out}");
    assert!(!out.contains('\u{FFFD}'), "{out}");
    assert!(
        out.lines().any(|l| l.contains("/caf%E9") && !l.contains("disallowed")),
        "the line report names it too: {out}"
    );
}

#[test]
fn cli_check_names_the_missing_file() {
    let args = CheckArgs {
        robots: "/nonexistent/robots.txt".into(),
        agent: "x".into(),
        urls: vec!["/".into()],
        lines: false,
    };
    let e = cli::check(&args, &mut Vec::new(), &mut Vec::new())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("/nonexistent/robots.txt"), "{e}");
}

#[test]
fn cli_batch_answers_each_line_in_order_and_survives_bad_lines() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    std::fs::write(dir.path().join("r.txt"), "User-agent: foo\nDisallow: /f\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let input = concat!(
        r#"{"robots": "User-agent: *\nDisallow: /a", "agent": "x", "url": "http://e/a"}"#,
        "\n",
        "{not json\n",
        "\n",
        r#"{"file": "r.txt", "user_agent": "FOO", "url": "/f/1"}"#,
        "\n",
        r#"{"file": "missing.txt", "agent": "x", "url": "/"}"#,
        "\n",
        r#"{"robots": "", "url": "/"}"#,
        "\n",
        r#"{"robots": "User-agent: *\nDisallow: /a", "agent": "x", "url": "/b"}"#,
    );
    let mut out = Vec::new();
    let summary = cli::batch(dir.path(), &mut input.as_bytes(), &mut out)
        .unwrap_or_else(|e| panic!("batch: {e}"));
    assert_eq!(summary, BatchSummary { inputs: 6, errors: 3 });
    let got: Vec<serde_json::Value> = String::from_utf8_lossy(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("output {l}: {e}")))
        .collect();
    assert_eq!(got.len(), 6);
    assert_eq!(got[0], serde_json::json!({"allowed": false, "rule": "Disallow: /a", "line": 2}));
    assert!(got[1]["error"].as_str().is_some_and(|e| e.contains("invalid JSON")), "{}", got[1]);
    assert_eq!(got[2], serde_json::json!({"allowed": false, "rule": "Disallow: /f", "line": 2}));
    assert!(got[3]["error"].as_str().is_some_and(|e| e.contains("missing.txt")), "{}", got[3]);
    assert!(got[4]["error"].as_str().is_some_and(|e| e.contains("agent")), "{}", got[4]);
    assert_eq!(got[5], serde_json::json!({"allowed": true, "rule": null, "line": null}));
}

#[test]
fn cli_batch_over_the_corpus_dir_resolves_files_relative_to_dir() {
    let dir = corpus::robots_corpus_dir().join("files");
    assert!(dir.is_dir(), "robots corpus not found at {}", dir.display());
    let input =
        r#"{"file": "10minutemail.com", "agent": "examplebot", "url": "https://example.com/"}"#;
    let mut out = Vec::new();
    let summary =
        cli::batch(&dir, &mut input.as_bytes(), &mut out).unwrap_or_else(|e| panic!("batch: {e}"));
    assert_eq!(summary.errors, 0, "{}", String::from_utf8_lossy(&out));
}
