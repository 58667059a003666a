//! `crawlcache robots check` and `crawlcache robots batch`: the command-line
//! faces of the robots engine, over files and stdin (no data directory).

use crawlcache_robots::{
    is_valid_product_token, path_params_query, product_token_from_user_agent, LineReport, LineTag,
    RobotsTxt, Verdict,
};
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// An error that ends a command, worded for the user: what failed, on which
/// file, and why.
#[derive(Debug)]
pub struct CliError(String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CliError {}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> CliError {
        CliError(format!("cannot write output: {e}"))
    }
}

/// Arguments of `robots check`.
#[derive(Debug, Clone)]
pub struct CheckArgs {
    /// The robots.txt file to test.
    pub robots: PathBuf,
    /// The product token to check for (e.g. `ExampleBot`).
    pub agent: String,
    /// URLs (absolute, or paths) to check.
    pub urls: Vec<String>,
    /// Also print the parse report of every line.
    pub lines: bool,
}

/// `robots check`: reads `args.robots`, then writes one line per URL to
/// `out`: `allowed` or `disallowed`, the URL, and the deciding rule with its
/// line (or that no rule matched). Warnings (an agent that is not a valid
/// product token) go to `err`. Returns how many of the URLs are
/// disallowed (`--exit-code` turns any into exit 1).
///
/// Errors: the robots file cannot be read, or `out` cannot be written.
pub fn check(
    args: &CheckArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<usize, CliError> {
    let body = std::fs::read(&args.robots).map_err(|e| {
        CliError(format!("cannot read robots.txt file '{}': {e}", args.robots.display()))
    })?;
    let robots = RobotsTxt::parse(&body);

    if !is_valid_product_token(&args.agent) {
        let hint = match product_token_from_user_agent(&args.agent) {
            Some(t) => format!("; did you mean --agent {t}?"),
            None => String::new(),
        };
        writeln!(
            err,
            "warning: '{}' is not a valid product token (letters, '-' and '_' only, RFC 9309 §2.2.1); \
             it is compared whole, so only a group with exactly that name can apply{hint}",
            args.agent
        )?;
    }
    if args.lines {
        for report in robots.line_reports() {
            writeln!(out, "{}", describe_line(report))?;
        }
        for sitemap in robots.sitemaps() {
            writeln!(out, "sitemap: {sitemap}")?;
        }
        if let Some(delay) = robots.crawl_delay(&args.agent) {
            writeln!(out, "crawl-delay for {}: {delay} s", args.agent)?;
        }
        writeln!(out)?;
    }
    let width = args.urls.iter().map(|u| u.len()).max().unwrap_or(0);
    let mut disallowed = 0;
    for url in &args.urls {
        let v = robots.check(&args.agent, url);
        let why = match (&v.rule, v.line) {
            (Some(rule), Some(line)) => format!("{rule} (line {line})"),
            _ if v.allowed && path_params_query(url) == "/robots.txt" => {
                "/robots.txt is always allowed (RFC 9309 §2.2.2)".to_owned()
            }
            _ => "no rule matched".to_owned(),
        };
        let verdict = if v.allowed { "allowed" } else { "disallowed" };
        disallowed += usize::from(!v.allowed);
        writeln!(out, "{verdict:<10}  {url:<width$}  {why}")?;
    }
    Ok(disallowed)
}

/// One line of the `--lines` report: number, what it was understood as,
/// the text, and any flags or note.
fn describe_line(r: &LineReport) -> String {
    let m = &r.metadata;
    let kind = match (r.tag, m.has_directive) {
        (LineTag::UserAgent, _) => "user-agent",
        (LineTag::Allow, _) => "allow",
        (LineTag::Disallow, _) => "disallow",
        (LineTag::Sitemap, _) => "sitemap",
        (LineTag::Unused, _) => "other (known)",
        (LineTag::Unknown, true) => "unknown key",
        (LineTag::Unknown, false) if m.is_empty => "blank",
        (LineTag::Unknown, false) if m.is_comment => "comment",
        (LineTag::Unknown, false) => "not a directive",
    };
    let mut s = format!("line {:>5}  {kind}", r.line);
    s.extend(std::iter::repeat_n(' ', 15usize.saturating_sub(kind.len())));
    if let (Some(k), Some(v)) = (&r.key, &r.value) {
        s.push_str(&format!("  {k}: {v}"));
    }
    let mut flags = Vec::new();
    if m.is_acceptable_typo {
        flags.push("accepted misspelling");
    }
    if m.is_missing_colon_separator {
        flags.push("missing colon");
    }
    if m.is_line_too_long {
        flags.push("line too long, cut");
    }
    if let Some(note) = r.note {
        flags.push(note);
    }
    if !flags.is_empty() {
        s.push_str(&format!("  [{}]", flags.join("; ")));
    }
    s.truncate(s.trim_end().len());
    s
}

/// Counts from one `robots batch` run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchSummary {
    /// Input lines answered (blank lines are skipped).
    pub inputs: u64,
    /// Of those, answered with `{"error": ...}`.
    pub errors: u64,
}

#[derive(Serialize)]
struct BatchVerdict<'a> {
    allowed: bool,
    rule: Option<&'a str>,
    line: Option<u32>,
}

/// `robots batch`: reads JSON objects, one per line, from `input` and writes
/// one JSON line per object to `out`, in order.
///
/// Each object holds the robots.txt body (`robots`, a string) or a file name
/// (`file`, relative to `dir`), the product token (`agent` or `user_agent`)
/// and `url`. The answer is `{"allowed": bool, "rule": string|null, "line":
/// int|null}`; an input that cannot be answered (bad JSON, a missing field, an
/// unreadable file) gets `{"error": "..."}` and processing goes on. Blank
/// input lines are skipped. A body or file used by consecutive lines is
/// parsed once.
///
/// Errors: only reading `input` or writing `out` fails the run.
pub fn batch(dir: &Path, input: &mut dyn BufRead, out: &mut dyn Write) -> io::Result<BatchSummary> {
    let mut summary = BatchSummary::default();
    let mut cache: Option<(Source, RobotsTxt)> = None;
    let mut buf = Vec::new();
    let mut number = 0u64;
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        number += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        summary.inputs += 1;
        match answer(dir, &buf, &mut cache) {
            Ok(v) => {
                let line =
                    BatchVerdict { allowed: v.allowed, rule: v.rule.as_deref(), line: v.line };
                serde_json::to_writer(&mut *out, &line)?;
            }
            Err(e) => {
                summary.errors += 1;
                serde_json::to_writer(
                    &mut *out,
                    &serde_json::json!({ "error": format!("input line {number}: {e}") }),
                )?;
            }
        }
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(summary)
}

/// Where a batch input's robots.txt comes from, to reuse the last parse.
#[derive(PartialEq, Eq)]
enum Source {
    Body(String),
    File(String),
}

fn answer(
    dir: &Path,
    line: &[u8],
    cache: &mut Option<(Source, RobotsTxt)>,
) -> Result<Verdict, String> {
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = value.as_object().ok_or("expected a JSON object")?;
    let text = |key: &str| -> Result<Option<&str>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("\"{key}\" must be a string")),
        }
    };
    let agent = match text("agent")? {
        Some(a) => a,
        None => text("user_agent")?.ok_or("missing \"agent\" (or \"user_agent\")")?,
    };
    let url = text("url")?.ok_or("missing \"url\"")?;
    let source = if let Some(body) = text("robots")? {
        Source::Body(body.to_owned())
    } else if let Some(file) = text("file")? {
        Source::File(file.to_owned())
    } else {
        return Err(
            "missing \"robots\" (the body, a string) or \"file\" (a name under --dir)".to_owned()
        );
    };
    let robots = match cache {
        Some((cached, robots)) if *cached == source => robots,
        _ => {
            let body = match &source {
                Source::Body(b) => b.as_bytes().to_vec(),
                Source::File(f) => {
                    let path = dir.join(f);
                    std::fs::read(&path).map_err(|e| {
                        format!("cannot read robots.txt file '{}': {e}", path.display())
                    })?
                }
            };
            &mut cache.insert((source, RobotsTxt::parse(&body))).1
        }
    };
    Ok(robots.check(agent, url))
}
