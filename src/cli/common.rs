//! What every command that reads the data directory shares: the
//! `--config` / `--data-dir` options and the configuration they give.

use crate::config::Config;
use clap::Args;
use std::path::PathBuf;

/// Options every command that reads the data directory takes.
#[derive(Args, Clone, Debug, Default)]
pub struct Common {
    /// Configuration file laid over the built-in defaults.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory (cache index, bodies, CA, audit logs).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// The line added to every configuration error: the defaults file the error
/// may mention is not installed with the binary, but its text is in it.
pub const CONFIG_HINT: &str = "hint: `crawlcache config --defaults` prints every key with its default and meaning";

/// The configuration for a command: the defaults, `--config` laid over them,
/// then `--data-dir`. Errors: the configuration error's message (names the
/// file and the key), and a [`CONFIG_HINT`] line.
pub fn load_config(common: &Common) -> Result<Config, String> {
    let mut cfg = Config::load(common.config.as_deref()).map_err(|e| format!("{e}\n{CONFIG_HINT}"))?;
    if let Some(d) = &common.data_dir {
        cfg.server.data_dir = d.clone();
    }
    Ok(cfg)
}
