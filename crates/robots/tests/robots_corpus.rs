//! Differential test against Google's library on real files: 2,978
//! robots.txt bodies captured from websites and 108,584 verdicts Google's
//! `OneAgentAllowedByRobots` gave on them (see
//! `testdata/robots/CORPUS_README.md`).
//!
//! The corpus is kept compressed in `testdata/robots/corpus.tar.gz` and
//! unpacked once under `target/tmp/`. If it is missing the test fails, it
//! never skips.

#[path = "common/corpus.rs"]
mod corpus;

use crawlcache_robots::RobotsTxt;
use std::collections::HashMap;

const EXPECTED_CHECKS: usize = 108_584;

#[derive(serde::Deserialize)]
struct Check {
    file: String,
    agent: String,
    url: String,
    allowed: bool,
}

#[test]
fn google_corpus_every_verdict_agrees() {
    let corpus = corpus::robots_corpus_dir();
    assert!(
        corpus.join("checks.jsonl").is_file() && corpus.join("files").is_dir(),
        "robots corpus not found at {} (expected checks.jsonl and files/, unpacked from {})",
        corpus.display(),
        corpus::corpus_archive().display()
    );
    let checks = std::fs::read_to_string(corpus.join("checks.jsonl"))
        .unwrap_or_else(|e| panic!("cannot read {}/checks.jsonl: {e}", corpus.display()));

    let mut parsed: HashMap<String, RobotsTxt> = HashMap::new();
    let mut total = 0usize;
    let mut mismatches = Vec::new();
    for (i, line) in checks.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let c: Check =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("checks.jsonl:{}: {e}", i + 1));
        let robots = parsed.entry(c.file.clone()).or_insert_with(|| {
            let path = corpus.join("files").join(&c.file);
            let body = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            RobotsTxt::parse(&body)
        });
        total += 1;
        let v = robots.check(&c.agent, &c.url);
        if v.allowed != c.allowed {
            mismatches.push(format!(
                "  checks.jsonl:{}: file {} agent {} url {}: Google says allowed={}, we say {v:?}",
                i + 1,
                c.file,
                c.agent,
                c.url,
                c.allowed
            ));
        }
    }
    let agree = total - mismatches.len();
    println!("corpus: {agree}/{total} verdicts agree ({} files parsed once each)", parsed.len());
    assert_eq!(total, EXPECTED_CHECKS, "checks.jsonl should hold {EXPECTED_CHECKS} checks");
    assert!(
        mismatches.is_empty(),
        "corpus: {agree}/{total} verdicts agree; {} disagree:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
