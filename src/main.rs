//! The `crawlcache` command: parses the command line and hands it to
//! [`crawlcache::cli::run`], where every subcommand lives.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = crawlcache::cli::Cli::parse();
    crawlcache::cli::run(cli.command)
}
