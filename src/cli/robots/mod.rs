//! `crawlcache robots ...`: `check` and `batch` test robots.txt files
//! ([`check`](mod@check)); `show` and `refresh` work on the snapshots in the
//! data directory ([`snapshots`]).

#![allow(
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links,
    reason = "the doc comments of the arguments are --help text, read in a terminal: URLs and [::1] stay as typed"
)]

pub mod check;
pub mod snapshots;

pub use check::{batch, check, BatchSummary, CheckArgs, CliError};

use super::common::Common;
use crate::cli::error::CommandError;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

/// `robots` subcommands.
#[derive(Subcommand, Debug)]
pub enum RobotsCommand {
    /// Test URLs against a robots.txt file for one product token: one line
    /// per URL, `allowed` or `disallowed`, with the deciding rule and its
    /// line. Exit 0 whatever the verdicts, unless --exit-code.
    #[command(
        after_help = "Examples:\n  crawlcache robots check --robots robots.txt --agent ExampleBot https://example.com/private/ /about\n  crawlcache robots check --robots robots.txt --agent ExampleBot --lines /   # how every line was read\n  crawlcache robots check --exit-code --robots robots.txt --agent ExampleBot \"$URL\" && wget \"$URL\""
    )]
    Check {
        /// The robots.txt file.
        #[arg(long, value_name = "FILE")]
        robots: PathBuf,
        /// The product token, e.g. ExampleBot.
        #[arg(long, value_name = "TOKEN")]
        agent: String,
        /// Also print how every line of the file was understood.
        #[arg(long)]
        lines: bool,
        /// Exit 1 when any URL checked is disallowed (for scripts: `&&`).
        #[arg(long)]
        exit_code: bool,
        /// URLs (absolute, or paths) to check.
        #[arg(required = true, value_name = "URL")]
        urls: Vec<String>,
    },
    /// Read JSON lines on stdin ({"robots"|"file", "agent"|"user_agent", "url"}),
    /// write one verdict per line: {"allowed", "rule", "line"}.
    #[command(
        after_help = "Examples:\n  echo '{\"file\": \"robots.txt\", \"agent\": \"ExampleBot\", \"url\": \"/private/\"}' | crawlcache robots batch\n  crawlcache robots batch --dir robots/ < checks.jsonl > verdicts.jsonl"
    )]
    Batch {
        /// Folder that "file" names are relative to.
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// Print an origin's robots.txt snapshot: state, age, status, SHA-256,
    /// ETag, redirects and body.
    #[command(
        after_help = "Examples:\n  crawlcache robots show https://example.com\n  crawlcache robots show http://127.0.0.1:8080 --data-dir /srv/crawlcache"
    )]
    Show {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// The origin, e.g. https://example.org or http://example.org:8080.
        origin: String,
    },
    /// Refresh robots.txt snapshots now (conditionally), whatever their age:
    /// the given origins, or every known one.
    #[command(
        after_help = "Examples:\n  crawlcache robots refresh https://example.com\n  crawlcache robots refresh                 # every origin with a snapshot"
    )]
    Refresh {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// The origins to refresh, e.g. https://example.org; none: every origin with a snapshot.
        origins: Vec<String>,
    },
}

/// Runs a `robots` subcommand.
pub fn run(command: RobotsCommand) -> Result<ExitCode, CommandError> {
    match command {
        RobotsCommand::Check { robots, agent, lines, exit_code, urls } => {
            let args = CheckArgs { robots, agent, urls, lines };
            let disallowed =
                check(&args, &mut std::io::stdout().lock(), &mut std::io::stderr().lock())
                    .map_err(|e| e.to_string())?;
            if exit_code && disallowed > 0 {
                return Ok(ExitCode::from(1));
            }
        }
        RobotsCommand::Batch { dir } => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            batch(&dir, &mut std::io::stdin().lock(), &mut out)
                .map_err(|e| format!("robots batch: {e}"))?;
        }
        RobotsCommand::Show { common, origin } => return snapshots::show(&common, &origin),
        RobotsCommand::Refresh { common, origins } => return snapshots::refresh(&common, &origins),
    }
    Ok(ExitCode::SUCCESS)
}
