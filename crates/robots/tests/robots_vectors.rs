//! Google's own assertions (robots_test.cc and reporting_robots_test.cc at
//! commit 22b355ff) and probe cases answered by Google's library, replayed
//! against `crawlcache_robots`. Every record is checked; a failure lists
//! each mismatching record.

use crawlcache_robots::{
    escape_pattern, is_valid_product_token, path_params_query, LineReport, LineTag, RobotsTxt,
};
use serde_json::{json, Value};

/// Google's assertions and the probe cases, in `testdata/robots/` at the
/// workspace's root.
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/robots");

fn records(name: &str) -> Vec<Value> {
    let path = format!("{DATA}/{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}:{}: {e}", i + 1)))
        .collect()
}

fn str_field<'a>(r: &'a Value, key: &str) -> &'a str {
    r[key].as_str().unwrap_or_else(|| panic!("record {} has no string \"{key}\"", r["id"]))
}

fn fail_on(mismatches: Vec<String>, total: usize, what: &str) {
    assert!(
        mismatches.is_empty(),
        "{} of {total} {what} records disagree:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    println!("{what}: {total}/{total} records agree");
}

/// Replays allow/disallow records; `deviations` lists the ids where this
/// crate deliberately answers the opposite of Google (see the module docs).
fn replay_verdicts(file: &str, deviations: &[&str]) -> (Vec<String>, usize) {
    let recs = records(file);
    let mut mismatches = Vec::new();
    for r in &recs {
        let id = str_field(r, "id");
        let google = r["allowed"].as_bool().unwrap_or_else(|| panic!("{id}: no \"allowed\""));
        let expected = if deviations.contains(&id) { !google } else { google };
        let robots = RobotsTxt::parse(str_field(r, "robots").as_bytes());
        let (agent, url) = (str_field(r, "user_agent"), str_field(r, "url"));
        let v = robots.check(agent, url);
        if v.allowed != expected || robots.is_allowed(agent, url) != expected {
            mismatches.push(format!(
                "  {id}: agent {agent:?} url {url:?}: expected allowed={expected}, got {v:?} ({})",
                r["note"].as_str().unwrap_or("")
            ));
        }
    }
    (mismatches, recs.len())
}

#[test]
fn google_robots_test_all_145_allow_disallow_assertions() {
    let (mismatches, total) = replay_verdicts("google_vectors.jsonl", &[]);
    assert_eq!(total, 145, "google_vectors.jsonl should hold 145 records");
    fail_on(mismatches, total, "google_vectors");
}

#[test]
fn google_probe_vectors_agree_except_documented_robots_txt_deviation() {
    // RFC 9309 §2.2.2: "/robots.txt" is implicitly allowed; Google's library
    // disallows it under "Disallow: /". Deviation 1 in the module docs.
    let (mismatches, total) = replay_verdicts("probe_vectors.jsonl", &["robots_txt_disallow_all"]);
    assert_eq!(total, 55, "probe_vectors.jsonl should hold 55 records");
    fail_on(mismatches, total, "probe_vectors");
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or_else(|e| panic!("bad hex {hex}: {e}"))
        })
        .collect()
}

fn input_bytes(r: &Value) -> Option<Vec<u8>> {
    match (&r["input"], r["input_hex"].as_str()) {
        (_, Some(hex)) => Some(hex_bytes(hex)),
        (Value::String(s), None) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

fn tag_name(tag: LineTag) -> &'static str {
    match tag {
        LineTag::UserAgent => "UserAgent",
        LineTag::Allow => "Allow",
        LineTag::Disallow => "Disallow",
        LineTag::Sitemap => "Sitemap",
        LineTag::Unused => "Unused",
        LineTag::Unknown => "Unknown",
    }
}

fn is_valid_directive(r: &LineReport) -> bool {
    matches!(r.tag, LineTag::UserAgent | LineTag::Allow | LineTag::Disallow | LineTag::Sitemap)
}

/// The figures of robots_test.cc's `RobotsStatsReporter`, which only counts
/// lines with a directive.
fn stats_reporter(robots: &RobotsTxt, key: &str) -> Option<Value> {
    let lines = robots.line_reports();
    Some(match key {
        "valid_directives" => json!(lines.iter().filter(|r| is_valid_directive(r)).count()),
        "unknown_directives" => {
            json!(lines
                .iter()
                .filter(|r| r.metadata.has_directive && !is_valid_directive(r))
                .count())
        }
        "last_line_seen" => json!(lines
            .iter()
            .filter(|r| r.metadata.has_directive)
            .map(|r| r.line)
            .max()
            .unwrap_or(0)),
        "sitemap" => json!(robots.sitemaps().concat()),
        _ => return None,
    })
}

/// The figures of reporting_robots.cc's `RobotsParsingReporter`, which sees
/// every line.
fn parsing_reporter(robots: &RobotsTxt, key: &str) -> Option<Value> {
    let lines = robots.line_reports();
    let last = lines.iter().map(|r| r.line).max().unwrap_or(0);
    Some(match key {
        "valid_directives" => json!(lines.iter().filter(|r| is_valid_directive(r)).count()),
        "last_line_seen" => json!(last),
        "parse_results.size==last_line_seen" => json!(lines.len() == last as usize),
        _ => return None,
    })
}

fn line_result(r: &LineReport) -> Value {
    let m = &r.metadata;
    json!({
        "line_num": r.line,
        "tag_name": tag_name(r.tag),
        "is_typo": m.is_acceptable_typo,
        "metadata": {
            "is_empty": m.is_empty,
            "has_comment": m.has_comment,
            "is_comment": m.is_comment,
            "has_directive": m.has_directive,
            "is_acceptable_typo": m.is_acceptable_typo,
            "is_line_too_long": m.is_line_too_long,
            "is_missing_colon_separator": m.is_missing_colon_separator,
        }
    })
}

fn helper_actual(r: &Value) -> Result<Value, String> {
    let f = str_field(r, "fn");
    let input = input_bytes(r);
    let text = || String::from_utf8(input.clone().unwrap_or_default()).map_err(|e| e.to_string());
    match f {
        "IsValidUserAgentToObey" => Ok(json!(input.is_some() && is_valid_product_token(&text()?))),
        "GetPathParamsQuery" => Ok(json!(path_params_query(&text()?))),
        "MaybeEscapePattern" => {
            let bytes = input.unwrap_or_default();
            Ok(json!(String::from_utf8_lossy(&escape_pattern(&bytes))))
        }
        "ParseRobotsTxt+RobotsStatsReporter" | "ParseRobotsTxt+RobotsParsingReporter" => {
            let robots = RobotsTxt::parse(&input.unwrap_or_default());
            let expected = r["expected"].as_object().ok_or("expected is not an object")?;
            let mut got = serde_json::Map::new();
            for key in expected.keys() {
                let v = if f.ends_with("StatsReporter") {
                    stats_reporter(&robots, key)
                } else {
                    parsing_reporter(&robots, key)
                };
                got.insert(
                    key.clone(),
                    v.ok_or_else(|| format!("unsupported expectation {key:?}"))?,
                );
            }
            Ok(Value::Object(got))
        }
        "ParseRobotsTxt+RobotsParsingReporter.parse_results[line]" => {
            let robots = RobotsTxt::parse(&input.unwrap_or_default());
            let n = r["expected"]["line_num"].as_u64().ok_or("expected.line_num missing")?;
            let report = robots
                .line_reports()
                .get((n as usize).wrapping_sub(1))
                .ok_or_else(|| format!("no report for line {n}"))?;
            Ok(line_result(report))
        }
        other => Err(format!("unknown helper {other:?}")),
    }
}

#[test]
fn google_helper_assertions_tokens_paths_escaping_and_line_reports() {
    let recs = records("google_helper_vectors.jsonl");
    assert_eq!(recs.len(), 85, "google_helper_vectors.jsonl should hold 85 records");
    let mut mismatches = Vec::new();
    for r in &recs {
        let id = str_field(r, "id");
        match helper_actual(r) {
            Ok(got) if got == r["expected"] => {}
            Ok(got) => mismatches.push(format!("  {id}: expected {}, got {got}", r["expected"])),
            Err(e) => mismatches.push(format!("  {id}: {e}")),
        }
    }
    fail_on(mismatches, recs.len(), "google_helper_vectors");
}
