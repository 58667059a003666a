//! `crawlcache robots ...`: `check` and `batch` test robots.txt files
//! ([`check`](mod@check)); `show` and `refresh` work on the snapshots in the
//! data directory ([`snapshots`]).

pub mod check;
pub mod snapshots;

pub use check::{batch, check, BatchSummary, CheckArgs, CliError};

use super::common::Common;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

/// `robots` subcommands.
#[derive(Subcommand, Debug)]
pub enum RobotsCommand {
    /// Test URLs against a robots.txt file for one product token.
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
        /// URLs (absolute, or paths) to check.
        #[arg(required = true, value_name = "URL")]
        urls: Vec<String>,
    },
    /// Read JSON lines on stdin ({"robots"|"file", "agent"|"user_agent", "url"}),
    /// write one verdict per line: {"allowed", "rule", "line"}.
    Batch {
        /// Folder that "file" names are relative to.
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// Print an origin's robots.txt snapshot: state, age, status, SHA-256,
    /// ETag, redirects and body.
    Show {
        #[command(flatten)]
        common: Common,
        /// The origin, e.g. https://example.org or http://example.org:8080.
        origin: String,
    },
    /// Refresh robots.txt snapshots now (conditionally), whatever their age:
    /// the given origins, or every known one.
    Refresh {
        #[command(flatten)]
        common: Common,
        origins: Vec<String>,
    },
}

/// Runs a `robots` subcommand.
pub fn run(command: RobotsCommand) -> Result<ExitCode, String> {
    match command {
        RobotsCommand::Check { robots, agent, lines, urls } => {
            let args = CheckArgs { robots, agent, urls, lines };
            check(&args, &mut std::io::stdout().lock(), &mut std::io::stderr().lock()).map_err(|e| e.to_string())?;
        }
        RobotsCommand::Batch { dir } => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            batch(&dir, &mut std::io::stdin().lock(), &mut out).map_err(|e| format!("robots batch: {e}"))?;
        }
        RobotsCommand::Show { common, origin } => return snapshots::show(&common, &origin),
        RobotsCommand::Refresh { common, origins } => return snapshots::refresh(&common, &origins),
    }
    Ok(ExitCode::SUCCESS)
}
