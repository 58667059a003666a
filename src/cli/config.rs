//! `crawlcache config --defaults`: print the built-in configuration, the
//! text of `config/crawlcache.toml` the binary embeds (every key, its
//! default and what it means), for users who installed the binary alone.

use clap::Args;
use std::process::ExitCode;

/// Arguments of `config`.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct ConfigArgs {
    /// Print the built-in default configuration (every key, documented); a
    /// `--config FILE` needs only the keys it changes.
    #[arg(long)]
    pub defaults: bool,
}

/// Prints the embedded defaults byte for byte.
pub fn run(args: ConfigArgs) -> Result<ExitCode, String> {
    if args.defaults {
        out!("{}", crate::config::DEFAULT_CONFIG);
    }
    Ok(ExitCode::SUCCESS)
}
