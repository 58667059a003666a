//! crawlcache command line. Each subcommand is one call into the library.

use clap::{Parser, Subcommand};
use crawlcache::robots::cli as robots_cli;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "crawlcache",
    version,
    about = "A caching forward proxy for web crawlers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// robots.txt tools (RFC 9309, verdicts as Google's library gives them).
    #[command(subcommand)]
    Robots(RobotsCommand),
}

#[derive(Subcommand)]
enum RobotsCommand {
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Robots(RobotsCommand::Check {
            robots,
            agent,
            lines,
            urls,
        }) => {
            let args = robots_cli::CheckArgs {
                robots,
                agent,
                urls,
                lines,
            };
            robots_cli::check(&args, &mut io::stdout().lock(), &mut io::stderr().lock())
                .map_err(|e| e.to_string())
        }
        Command::Robots(RobotsCommand::Batch { dir }) => {
            let mut out = io::BufWriter::new(io::stdout().lock());
            robots_cli::batch(&dir, &mut io::stdin().lock(), &mut out)
                .map(|_| ())
                .map_err(|e| format!("robots batch: {e}"))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(io::stderr(), "error: {e}");
            ExitCode::from(2)
        }
    }
}
