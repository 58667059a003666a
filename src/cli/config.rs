//! `crawlcache config defaults|check|show`: the configuration as the
//! binary sees it, for users who installed the binary alone.
//!
//! - `defaults` prints the built-in configuration, the text of
//!   `config/crawlcache.toml` the binary embeds (every key, its default
//!   and what it means); `config --defaults` is its old spelling, kept
//!   with a warning.
//! - `check FILE` reads a configuration file as `--config FILE` would:
//!   `FILE: ok`, or exit 2 naming the key, its line and the nearest key.
//! - `show` prints the effective configuration (defaults, `--config`,
//!   `CRAWLCACHE_SECTION__KEY` variables, `--data-dir`) with where each
//!   value came from; `--json` for programs.

use super::common::{load_layered, Common};
use crate::cli::error::CommandError;
use crate::config::sources::{self, Entry, Layer, Source};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `config`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, arg_required_else_help = true)]
pub struct ConfigArgs {
    /// The action; none: `--defaults` as before.
    #[command(subcommand)]
    pub command: Option<ConfigCommand>,
    /// Deprecated spelling of `config defaults`.
    #[arg(long, hide = true)]
    pub defaults: bool,
}

/// `config` subcommands.
#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Print the built-in default configuration: every key, its default and
    /// what it means (a --config file needs only the keys it changes).
    #[command(
        after_help = "Examples:\n  crawlcache config defaults > crawlcache.toml    # a file to edit, every key documented\n  crawlcache config defaults | grep -A3 '^max_size'"
    )]
    Defaults,
    /// Check a configuration file as `--config FILE` would read it: prints
    /// `FILE: ok`, or exits 2 naming the key, its line and the nearest known
    /// key.
    #[command(
        after_help = "Examples:\n  crawlcache config check /etc/crawlcache/crawlcache.toml\n  crawlcache config check my.toml && systemctl restart crawlcache"
    )]
    Check {
        /// The configuration file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Print the effective configuration, each value followed by where it
    /// came from: default, file (with its line), environment
    /// (CRAWLCACHE_SECTION__KEY) or flag (--data-dir). Secrets are masked.
    #[command(
        after_help = "Examples:\n  crawlcache config show --config /etc/crawlcache/crawlcache.toml\n  CRAWLCACHE_SERVER__LISTEN=127.0.0.1:3130 crawlcache config show | grep listen\n  crawlcache config show --json | jq '.keys[] | select(.source != \"default\")'"
    )]
    Show {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// One JSON object: {"version": 1, "keys": [{"key", "value", "source", "from"}]}.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `config`. Errors: the configuration cannot be read (the message
/// names the file and line, or the variable, and the key).
pub fn run(args: ConfigArgs) -> Result<ExitCode, CommandError> {
    let command = match (args.command, args.defaults) {
        (Some(c), _) => c,
        (None, true) => {
            super::common::deprecated("config --defaults", "config defaults");
            ConfigCommand::Defaults
        }
        (None, false) => return Err("config needs a subcommand: defaults, check FILE or show (see crawlcache config --help)".into()),
    };
    match command {
        ConfigCommand::Defaults => out!("{}", crate::config::DEFAULT_CONFIG),
        ConfigCommand::Check { file } => {
            sources::from_layers(&[Layer::file(&file).map_err(|e| e.to_string())?])
                .map_err(|e| e.to_string())?;
            outln!("{}: ok", file.display());
        }
        ConfigCommand::Show { common, json } => {
            let layered = load_layered(&common)?;
            let entries: Vec<Entry> = layered
                .entries()
                .into_iter()
                .map(|e| Entry { value: mask(&e.key, e.value.clone()), ..e })
                .collect();
            if json {
                outln!("{}", show_json(&entries));
            } else {
                out!("{}", show_text(&entries));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `value` of key `path`, with secrets replaced: a non-empty
/// `server.admin_token`, and the password of a URL (`redis://:pw@host`,
/// `http://user:pw@proxy:3128`).
fn mask(path: &str, value: toml::Value) -> toml::Value {
    match value {
        toml::Value::String(s) if path.ends_with("token") && !s.is_empty() => {
            toml::Value::String("***".into())
        }
        toml::Value::String(s) => toml::Value::String(mask_url_password(&s)),
        toml::Value::Array(a) => toml::Value::Array(a.into_iter().map(|v| mask(path, v)).collect()),
        v => v,
    }
}

/// `scheme://user:***@rest` for `scheme://user:password@rest`; other text
/// unchanged.
fn mask_url_password(s: &str) -> String {
    let Some((scheme, rest)) = s.split_once("://") else { return s.to_string() };
    let Some((userinfo, host)) = rest.split_once('@') else { return s.to_string() };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => s.to_string(),
    }
}

/// A TOML key segment: bare when it can be, quoted otherwise.
fn key_segment(k: &str) -> String {
    if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        k.to_string()
    } else {
        toml::Value::String(k.to_string()).to_string()
    }
}

/// The effective configuration as TOML, one `[section]` at a time, every
/// value followed by `# SOURCE` (values aligned within a section).
fn show_text(entries: &[Entry]) -> String {
    let mut out = String::from(
        "# The effective configuration: after each value, where it came from\n# (default, file FILE:LINE, environment VARIABLE or flag --FLAG).\n",
    );
    let mut section = "";
    let mut rows: Vec<(String, String)> = Vec::new();
    let flush = |out: &mut String, rows: &mut Vec<(String, String)>| {
        let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0).min(60);
        for (line, source) in rows.drain(..) {
            out.push_str(&format!("{line:<width$}  # {source}\n"));
        }
    };
    for e in entries {
        let Some((top, rest)) = e.segments.split_first() else { continue };
        if top != section {
            flush(&mut out, &mut rows);
            out.push_str(&format!("\n[{}]\n", key_segment(top)));
            section = top.as_str();
        }
        let key = rest.iter().map(|k| key_segment(k)).collect::<Vec<_>>().join(".");
        rows.push((format!("{key} = {}", e.value), e.source.to_string()));
    }
    flush(&mut out, &mut rows);
    out
}

/// `{"version": 1, "keys": [{"key", "value", "source", "from"}]}`: `source`
/// is `default`, `file`, `environment` or `flag`; `from` the file and line
/// (`my.toml:3`), the variable or the flag, `null` for a default.
fn show_json(entries: &[Entry]) -> String {
    let keys: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            let from = match &e.source {
                Source::Default => serde_json::Value::Null,
                Source::File { path, line: Some(l) } => format!("{}:{l}", path.display()).into(),
                Source::File { path, line: None } => path.display().to_string().into(),
                Source::Env(name) | Source::Flag(name) => name.clone().into(),
            };
            serde_json::json!({ "key": e.key, "value": e.value, "source": e.source.kind(), "from": from })
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "version": 1, "keys": keys }))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_in_show() {
        assert_eq!(
            mask("server.admin_token", toml::Value::String("s3cret".into())).as_str(),
            Some("***")
        );
        assert_eq!(mask("server.admin_token", toml::Value::String("".into())).as_str(), Some(""));
        assert_eq!(
            mask("upstream.proxy", toml::Value::String("http://u:pw@p.example:3128".into()))
                .as_str(),
            Some("http://u:***@p.example:3128")
        );
        let redis = toml::Value::Array(vec![toml::Value::String("redis://:pw@h:6379/0".into())]);
        assert_eq!(mask("fleet.redis_url", redis).to_string(), "[\"redis://:***@h:6379/0\"]");
    }

    #[test]
    fn show_is_toml_with_sources_as_comments() {
        let flag =
            Layer::flag("--data-dir", "server.data_dir", toml::Value::String("/srv/d".into()));
        let layered = sources::from_layers(&[flag]).unwrap();
        let text = show_text(&layered.entries());
        let line = text.lines().find(|l| l.starts_with("data_dir = ")).unwrap();
        assert!(
            line.starts_with("data_dir = \"/srv/d\"") && line.ends_with("# flag --data-dir"),
            "{line}"
        );
        let parsed: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(parsed["server"]["data_dir"].as_str(), Some("/srv/d"));
        assert_eq!(parsed["cache"]["max_size"].as_str(), Some("10GiB"));
        assert!(
            text.lines().any(|l| l.starts_with("max_size = \"10GiB\"") && l.ends_with("# default")),
            "{text}"
        );
    }
}
