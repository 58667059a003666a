//! `crawlcache cache stats|show|purge|verify`: inspect and maintain the
//! store, directly or through the running proxy ([`super::access`]).

use super::access::{admin_request, encode, open_store, StoreAccess};
use super::{load_config, Common};
use clap::Subcommand;
use std::process::ExitCode;

/// `cache` subcommands.
#[derive(Subcommand, Debug)]
pub enum CacheCommand {
    /// Entries, bodies, bytes stored and the budget.
    Stats {
        #[command(flatten)]
        common: Common,
    },
    /// The stored variants of a URL.
    Show {
        #[command(flatten)]
        common: Common,
        url: String,
    },
    /// Remove every stored variant of a URL.
    Purge {
        #[command(flatten)]
        common: Common,
        url: String,
    },
    /// Check every store invariant; exits 1 when one is broken.
    Verify {
        #[command(flatten)]
        common: Common,
        /// Fix what is found (drop broken entries, delete orphans, fix counts).
        #[arg(long)]
        repair: bool,
    },
}

/// Runs a `cache` subcommand.
pub fn run(command: CacheCommand) -> Result<ExitCode, String> {
    match command {
        CacheCommand::Stats { common } => stats(&common),
        CacheCommand::Show { common, url } => show(&common, &url),
        CacheCommand::Purge { common, url } => purge(&common, &url),
        CacheCommand::Verify { common, repair } => verify(&common, repair),
    }
}

/// Prints the store's counters as pretty JSON.
fn stats(common: &Common) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    match open_store(&cfg)? {
        StoreAccess::Direct(s) => outln!("{}", serde_json::to_string_pretty(&s.stats()).unwrap_or_default()),
        StoreAccess::Daemon(a) => out!("{}", admin_request(a, "GET", "/stats")?.1),
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the stored variants of `url` as pretty JSON; exit 1 when none.
fn show(common: &Common, url: &str) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    let v = match open_store(&cfg)? {
        StoreAccess::Direct(s) => crate::admin::show_json(&s, url, &cfg.cache.key_rules)?,
        StoreAccess::Daemon(a) => {
            let (status, body) = admin_request(a, "GET", &format!("/cache/show?url={}", encode(url)))?;
            if status != 200 {
                return Err(body.trim().to_string());
            }
            serde_json::from_str(&body).map_err(|e| format!("unexpected answer from the proxy: {e}"))?
        }
    };
    let empty = v["variants"].as_array().map(|a| a.is_empty()).unwrap_or(true);
    outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    Ok(if empty { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Removes every stored variant of `url` and says how many went.
fn purge(common: &Common, url: &str) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    let n = match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let n = crate::admin::purge(&s, url)?;
            s.flush().map_err(|e| e.to_string())?;
            n
        }
        StoreAccess::Daemon(a) => {
            let (status, body) = admin_request(a, "POST", &format!("/cache/purge?url={}", encode(url)))?;
            if status != 200 {
                return Err(body.trim().to_string());
            }
            let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("unexpected answer from the proxy: {e}"))?;
            v["removed"].as_u64().unwrap_or(0)
        }
    };
    outln!("removed {n} stored variant(s) of {url}");
    Ok(ExitCode::SUCCESS)
}

/// Prints the verify report; exit 1 when an invariant was broken (repaired
/// or not).
fn verify(common: &Common, repair: bool) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    let (clean, text) = match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let r = s.verify(repair).map_err(|e| e.to_string())?;
            s.flush().map_err(|e| e.to_string())?;
            (r.is_clean(), serde_json::to_string_pretty(&r).unwrap_or_default())
        }
        StoreAccess::Daemon(a) => {
            let path = if repair { "/cache/verify?repair=1" } else { "/cache/verify" };
            let (_, body) = admin_request(a, "GET", path)?;
            let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("unexpected answer from the proxy: {e}"))?;
            (v["clean"].as_bool().unwrap_or(false), serde_json::to_string_pretty(&v["report"]).unwrap_or_default())
        }
    };
    outln!("{text}");
    if clean {
        eprintln!("cache verify: every invariant holds");
        Ok(ExitCode::SUCCESS)
    } else if repair {
        eprintln!("cache verify: problems were found and repaired (see the report)");
        Ok(ExitCode::from(1))
    } else {
        eprintln!("cache verify: invariants are broken (see the report); run with --repair to fix");
        Ok(ExitCode::from(1))
    }
}
