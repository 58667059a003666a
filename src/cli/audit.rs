//! `crawlcache audit skips`: the requests robots.txt disallowed.

use super::common::{load_config, Common};
use crate::cli::error::CommandError;
use clap::Subcommand;
use std::io::Write;
use std::process::ExitCode;

/// `audit` subcommands.
#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// List the requests robots.txt disallowed: one line each (time, URL,
    /// the rule and its line, the agent), or JSON lines with --json.
    #[command(after_help = "Examples:
  crawlcache audit skips --since 1h30m
  crawlcache audit skips --since 1w --json | jq -r .url | sort | uniq -c")]
    Skips {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// Only requests newer than this (e.g. 30m, 6h, 7d, 1w, 1h30m).
        #[arg(long, value_name = "DURATION", default_value = "1d")]
        since: String,
        /// One audit line per request, as the audit log writes it (JSON
        /// lines, the fields of docs/robots.md), for tools.
        #[arg(long)]
        json: bool,
    },
}

/// Runs an `audit` subcommand.
pub fn run(command: AuditCommand) -> Result<ExitCode, CommandError> {
    match command {
        AuditCommand::Skips { common, since, json } => skips(common, &since, json),
    }
}

/// Prints the disallowed requests of the last `since` (a duration such as
/// `6h`) on stdout, a line each for people or JSON lines with `json`, and
/// their count on stderr. Errors: a bad `--since`, or an unreadable audit
/// directory.
fn skips(common: Common, since: &str, json: bool) -> Result<ExitCode, CommandError> {
    let cfg = load_config(&common)?;
    super::common::check_data_dir(&cfg.server.data_dir)?;
    let d = crawlcache_base::units::parse_duration(since).map_err(|e| format!("--since: {e}"))?;
    let dir = crate::audit::audit_dir(&cfg.server.data_dir);
    let from = std::time::SystemTime::now().checked_sub(d).unwrap_or(std::time::UNIX_EPOCH);
    if !dir.is_dir() && !cfg.server.data_dir.join("index").exists() {
        return Err(format!(
            "no audit log at {} (nothing proxied yet, or wrong --data-dir)",
            dir.display()
        )
        .into());
    }
    let read = crate::audit::skips(&dir, from)
        .map_err(|e| format!("cannot read the audit log in {}: {e}", dir.display()))?;
    let mut out = std::io::stdout().lock();
    for r in &read.records {
        let line = if json { serde_json::to_string(r).unwrap_or_default() } else { skip_line(r) };
        let _ = writeln!(out, "{line}");
    }
    for (path, e) in &read.damaged {
        eprintln!("crawlcache: warning: {} could not be read through ({e}); its lines before the damage are listed", path.display());
    }
    eprintln!(
        "{} disallowed request(s) since {}",
        read.records.len(),
        crawlcache_base::time::format_rfc3339(from)
    );
    // Exit 1 when a day file was damaged: the list may be short.
    Ok(if read.damaged.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// A disallowed request for people: `TIME  URL  rule "RULE" (line N)  agent
/// AGENT`, the time to the second, what is unknown left out.
fn skip_line(r: &crate::audit::AuditRecord) -> String {
    let time = r.time.get(..19).unwrap_or(&r.time).replace('T', " ");
    let mut line = format!("{time}  {}", r.url);
    if let Some(rule) = &r.rule {
        line.push_str(&format!("  rule \"{rule}\""));
        if let Some(n) = r.line {
            line.push_str(&format!(" (line {n})"));
        }
    }
    if let Some(agent) = &r.agent {
        line.push_str(&format!("  agent {agent}"));
    }
    line
}
