//! The `crawlcache` command line: the clap argument types and one function
//! per subcommand, one file per command group.
//!
//! - [`serve`]: run the proxy.
//! - [`cache`]: `cache stats|show|ls|cat|purge|prune|verify`.
//! - [`robots`]: `robots check|batch` (files, no data directory) and
//!   `robots show|refresh` (snapshots in the data directory).
//! - [`audit`]: `audit skips`.
//! - [`ca`]: `ca path|init|bundle|install|uninstall`, the local CA
//!   certificate (path, PEM, a bundle with the system roots, the system
//!   trust store); `ca init` creates it, no other command does.
//! - [`config`]: `config defaults|check|show`, the configuration as the
//!   binary reads it and where each value came from.
//! - [`completions`]: shell completion scripts.
//! - [`man`]: the manual page (roff), from the same definition.
//! - [`health`]: whether a proxy answers at its address (health checks).
//! - [`warc`]: `export --warc FILE` and `import FILE...` (WARC files).
//! - [`progress`]: progress bars on a terminal, for any long command.
//! - [`access`]: opening the data directory directly, or through the running
//!   proxy's admin endpoints when it holds the index.
//!
//! `main.rs` parses [`Cli`] and hands the command to [`run`]. A command
//! returns its exit code, or a message that [`run`] prints after
//! `crawlcache: ` with exit code 2.
//!
//! One grammar: verbs are subcommands (`ca init`, `config show`), options
//! are flags. A renamed form keeps working, hidden from `--help`, and says
//! which form replaces it on stderr ([`common::deprecated`]). Results are for
//! people by default (sizes and durations with units, one summary line)
//! and for programs with `--json` (one versioned object), the same whether
//! the proxy runs or not. Every command's `--help` ends with examples.
//!
//! Lives in the library (not only in the binary) so the robots tests can
//! call [`fn@robots::check`] and [`robots::batch`] directly and the unit tests
//! here run with `cargo test --lib`.

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Like `println!`, but a closed stdout (`crawlcache cache show URL | head`)
/// ends the output quietly instead of panicking.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// Like `print!`, without the panic on a closed stdout.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

pub mod access;
pub mod audit;
pub mod ca;
pub mod cache;
pub mod cache_text;
pub mod common;
pub mod completions;
pub mod config;
pub mod error;
pub mod health;
pub mod man;
pub mod progress;
pub mod robots;
pub mod serve;
pub mod warc;

pub use common::{deprecated, load_config, Common, CONFIG_HINT};
pub use error::CommandError;

/// The examples of `crawlcache --help` and of crawlcache(1).
const EXAMPLES: &str = "Examples:
  crawlcache serve                                   # 127.0.0.1:3128, data in ./crawlcache-data
  curl --proxy http://127.0.0.1:3128 --cacert \"$(crawlcache ca path)\" https://example.com/
  crawlcache cache stats
  crawlcache config show --config /etc/crawlcache/crawlcache.toml";

/// The parsed command line.
#[derive(Parser)]
#[command(name = "crawlcache", version, about = "A local caching forward proxy for web crawlers", after_help = EXAMPLES)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Run the proxy (defaults: 127.0.0.1:3128, data in ./crawlcache-data).
    #[command(after_help = "Examples:
  crawlcache serve --listen 3130                     # 127.0.0.1:3130 (a port alone is loopback)
  crawlcache serve --config /etc/crawlcache/crawlcache.toml --data-dir /var/lib/crawlcache
  CRAWLCACHE_SERVER__LISTEN=0.0.0.0:3128 crawlcache serve   # every interface, on purpose
  crawlcache serve --offline                         # replay what is stored, contact no origin")]
    Serve(serve::ServeArgs),
    /// Inspect and maintain the cache (works whether or not the proxy runs).
    #[command(after_help = "Examples:
  crawlcache cache stats
  crawlcache cache ls --host example.com
  crawlcache cache purge --host ads.example --dry-run")]
    Cache {
        /// The `cache` subcommand.
        #[command(subcommand)]
        command: cache::CacheCommand,
    },
    /// robots.txt tools (RFC 9309, verdicts as Google's library gives them).
    #[command(subcommand)]
    #[command(after_help = "Examples:
  crawlcache robots check --robots robots.txt --agent ExampleBot /private/
  crawlcache robots show https://example.com")]
    Robots(robots::RobotsCommand),
    /// The audit trail of proxied requests.
    #[command(subcommand)]
    #[command(after_help = "Examples:
  crawlcache audit skips --since 1h30m")]
    Audit(audit::AuditCommand),
    /// The local CA certificate clients must trust for HTTPS: `ca path`
    /// (plain `ca`), `ca init`, `ca bundle FILE`, `ca install`, `ca uninstall`.
    ///
    /// Only `ca init` creates one (the others exit 1, saying where they
    /// looked, when there is none); `ca bundle FILE` writes it together
    /// with the system roots; `ca install` / `ca uninstall` add it to or
    /// remove it from the operating system's trust store (as root).
    #[command(after_help = "Examples:
  crawlcache ca path                                 # plain `crawlcache ca` too
  crawlcache ca init --data-dir /srv/crawlcache
  crawlcache ca bundle crawlcache-bundle.pem
  sudo crawlcache ca install")]
    Ca(ca::CaArgs),
    /// The configuration: `config defaults` (the built-in one, every key
    /// documented), `config check FILE`, `config show` (the effective
    /// values and where each came from).
    #[command(after_help = "Examples:
  crawlcache config defaults > crawlcache.toml
  crawlcache config check crawlcache.toml
  crawlcache config show --config crawlcache.toml")]
    Config(config::ConfigArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = "Examples:
  crawlcache completions bash > ~/.local/share/bash-completion/completions/crawlcache
  crawlcache completions zsh > ~/.zfunc/_crawlcache
  crawlcache completions fish > ~/.config/fish/completions/crawlcache.fish")]
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff: `crawlcache man | man -l -`), or write
    /// a page per command into a directory (`--dir`).
    #[command(after_help = "Examples:
  crawlcache man | man -l -
  sudo crawlcache man --dir /usr/local/share/man/man1 && man crawlcache-cache-ls")]
    Man(man::ManArgs),
    /// Write the stored exchanges (cache entries and records) to a WARC/1.1 file.
    ///
    /// One request and one response record per exchange, each record its own
    /// gzip member; works whether or not the proxy runs. Exit 1 when an
    /// exchange had to be left out (a body missing or corrupt).
    #[command(after_help = "Examples:
  crawlcache export --warc crawl.warc.gz
  crawlcache export --warc docs.warc.gz --prefix https://example.com/docs/ --revisits")]
    Export(warc::ExportArgs),
    /// Load the responses of WARC files into the record store for `serve --offline`.
    ///
    /// Reads plain and gzip WARC files (wget --warc-file, warcio, crawlcache
    /// export). A malformed or truncated record is reported with its offset
    /// and skipped (exit 1). Works whether or not the proxy runs: a running
    /// proxy imports through its admin endpoint and serves the records at once.
    #[command(after_help = "Examples:
  crawlcache import crawl.warc.gz
  wget --warc-file=site -r https://example.com/ && crawlcache import site.warc.gz && crawlcache serve --offline")]
    Import(warc::ImportArgs),
    /// Exit 0 when a proxy answers HTTP at its address, else 1 (a
    /// container's HEALTHCHECK, a service monitor).
    #[command(after_help = "Examples:
  crawlcache health --addr 127.0.0.1:3128
  HEALTHCHECK CMD [\"crawlcache\", \"health\", \"--config\", \"/etc/crawlcache/crawlcache.toml\"]   # in a Dockerfile")]
    Health(health::HealthArgs),
}

/// Runs `command` and returns the process exit code: the command's own
/// (0, or 1 for "not found" / "problems found"), or 2 after printing
/// `crawlcache: <message>` to stderr when it fails.
pub fn run(command: Command) -> ExitCode {
    let result = match command {
        Command::Serve(args) => serve::run(args),
        Command::Cache { command } => cache::run(command),
        Command::Ca(args) => ca::run(args),
        Command::Robots(command) => robots::run(command),
        Command::Audit(command) => audit::run(command),
        Command::Config(args) => config::run(args),
        Command::Completions(args) => completions::run(args, Cli::command()),
        Command::Man(args) => man::run(args, Cli::command()),
        Command::Export(args) => warc::export(args),
        Command::Import(args) => warc::import(args),
        Command::Health(args) => health::run(args),
    };
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("crawlcache: {msg}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_errors_point_at_config_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = Common { config: Some(tmp.path().join("missing.toml")), data_dir: None };
        let err = load_config(&missing).unwrap_err();
        assert!(
            err.contains("missing.toml") && err.ends_with(&format!("\n{CONFIG_HINT}")),
            "{err}"
        );

        let bad = tmp.path().join("bad.toml");
        std::fs::write(&bad, "[server]\nlisten_adress = \"127.0.0.1:1\"\n").unwrap();
        let err = load_config(&Common { config: Some(bad), data_dir: None }).unwrap_err();
        assert!(
            err.contains(
                "bad.toml:2: unknown key `server.listen_adress`; did you mean `server.listen`?"
            ),
            "{err}"
        );
        assert!(
            err.contains("`crawlcache config defaults`") && !err.contains("config/crawlcache.toml"),
            "{err}"
        );
    }
}
