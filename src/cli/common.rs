//! What every command that reads the data directory shares: the
//! `--config` / `--data-dir` options and the configuration they give.

use crate::config::sources::{self, Layer, Layered};
use crate::config::Config;
use clap::Args;
use std::path::PathBuf;

/// Options every command that reads the data directory takes.
#[derive(Args, Clone, Debug, Default)]
pub struct Common {
    /// Configuration file laid over the built-in defaults (then come
    /// CRAWLCACHE_SECTION__KEY environment variables, then flags).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory (cache index, bodies, CA, audit logs).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// The line added to every configuration error that does not already say
/// it: the keys are listed by the binary itself (no source tree needed).
pub const CONFIG_HINT: &str =
    "hint: `crawlcache config defaults` prints every key with its default and meaning";

/// The configuration for a command and where each value came from: the
/// defaults, `--config` laid over them, then the `CRAWLCACHE_SECTION__KEY`
/// environment variables, then `--data-dir`. Errors: the configuration
/// error's message (names the file and line, or the variable, and the
/// key), and a [`CONFIG_HINT`] line.
pub fn load_layered(common: &Common) -> Result<Layered, String> {
    let with_hint = |e: crate::config::ConfigError| {
        let e = e.to_string();
        if e.contains(crate::config::sources::KEYS_HINT) {
            e
        } else {
            format!("{e}\n{CONFIG_HINT}")
        }
    };
    let mut layers = Vec::new();
    if let Some(path) = &common.config {
        layers.push(Layer::file(path).map_err(with_hint)?);
    }
    layers.extend(Layer::from_environment());
    if let Some(d) = &common.data_dir {
        layers.push(Layer::flag(
            "--data-dir",
            "server.data_dir",
            toml::Value::String(d.display().to_string()),
        ));
    }
    let mut layered = sources::from_layers(&layers).map_err(with_hint)?;
    if let Some(d) = &common.data_dir {
        // The path exactly as given, even where it is not Unicode.
        layered.config.server.data_dir = d.clone();
    }
    Ok(layered)
}

/// Checks that the data directory `dir` can be one: no path on the way to
/// it is a file. Errors: a message naming the file in the way (instead of
/// the system's "File exists" or "Not a directory" later).
pub fn check_data_dir(dir: &std::path::Path) -> Result<(), String> {
    match crawlcache_base::fsutil::blocking_non_directory(dir) {
        Some(f) if f == dir => Err(format!("the data directory {} is a file, not a directory (--data-dir or server.data_dir)", dir.display())),
        Some(f) => {
            Err(format!("the data directory {} cannot exist: {} is a file, not a directory (--data-dir or server.data_dir)", dir.display(), f.display()))
        }
        None => Ok(()),
    }
}

/// Says on stderr that `crawlcache OLD` is an old spelling and which form
/// replaces it; the command then runs as it always did. Scripts keep
/// working and their authors learn the new form.
pub fn deprecated(old: &str, new: &str) {
    eprintln!("crawlcache: warning: `crawlcache {old}` is deprecated; use `crawlcache {new}` (the old form still works for now)");
}

/// The configuration for a command ([`load_layered`] without the sources).
pub fn load_config(common: &Common) -> Result<Config, String> {
    load_layered(common).map(|l| l.config)
}
