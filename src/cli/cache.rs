//! `crawlcache cache stats|show|purge|verify`: inspect and maintain the
//! store, directly or through the running proxy ([`super::access`]).

use super::access::{admin_request, encode, open_store, StoreAccess};
use super::progress::{Progress, Unit};
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
    /// List stored entries (cache and record): `STATUS BYTES KEY` per line,
    /// or JSON lines; a one-line summary on stderr.
    Ls {
        #[command(flatten)]
        common: Common,
        /// Only entries for this host.
        #[arg(long)]
        host: Option<String>,
        /// Only entries whose URL starts with this prefix.
        #[arg(long)]
        prefix: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
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
        CacheCommand::Ls { common, host, prefix, json } => ls(&common, host.as_deref(), prefix.as_deref(), json),
        CacheCommand::Verify { common, repair } => verify(&common, repair),
    }
}

/// Prints the store's counters as pretty JSON.
fn stats(common: &Common) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    match open_store(&cfg)? {
        StoreAccess::Direct(s) => outln!("{}", serde_json::to_string_pretty(&s.stats()).unwrap_or_default()),
        StoreAccess::Daemon(a) => out!("{}", admin_request(&a, "GET", "/stats")?.1),
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the stored variants of `url` as pretty JSON; exit 1 when none.
fn show(common: &Common, url: &str) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    let v = match open_store(&cfg)? {
        StoreAccess::Direct(s) => crate::admin::show_json(&s, url, &cfg.cache.key_rules)?,
        StoreAccess::Daemon(a) => {
            let (status, body) = admin_request(&a, "GET", &format!("/cache/show?url={}", encode(url)))?;
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
            let (status, body) = admin_request(&a, "POST", &format!("/cache/purge?url={}", encode(url)))?;
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
    // Hashing every body file is the long part: a bar counts them.
    let progress = Progress::new("cache verify", None, Unit::Items("bodies hashed"));
    let (clean, text, counts) = match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let r = s
                .verify_with_progress(repair, &mut |done, total| {
                    if done == 1 {
                        progress.set_total(total);
                    }
                    progress.set(done);
                })
                .map_err(|e| e.to_string())?;
            s.flush().map_err(|e| e.to_string())?;
            let counts = (r.entries_checked, r.bodies_checked);
            (r.is_clean(), serde_json::to_string_pretty(&r).unwrap_or_default(), counts)
        }
        StoreAccess::Daemon(a) => {
            progress.message(format!("(the running proxy at {} is checking)", a.addr));
            let path = if repair { "/cache/verify?repair=1" } else { "/cache/verify" };
            let (_, body) = admin_request(&a, "GET", path)?;
            let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("unexpected answer from the proxy: {e}"))?;
            let counts = (v["report"]["entries_checked"].as_u64().unwrap_or(0), v["report"]["bodies_checked"].as_u64().unwrap_or(0));
            (v["clean"].as_bool().unwrap_or(false), serde_json::to_string_pretty(&v["report"]).unwrap_or_default(), counts)
        }
    };
    outln!("{text}");
    let checked = format!("{} entries, {} bodies checked", counts.0, counts.1);
    if clean {
        progress.finish(&format!("cache verify: every invariant holds ({checked})"));
        Ok(ExitCode::SUCCESS)
    } else if repair {
        progress.finish(&format!("cache verify: problems were found and repaired (see the report; {checked})"));
        Ok(ExitCode::from(1))
    } else {
        progress.finish(&format!("cache verify: invariants are broken (see the report; {checked}); run with --repair to fix"));
        Ok(ExitCode::from(1))
    }
}

/// Lists the entries passing the filters, one line each, with progress on
/// stderr when it is a terminal and a one-line summary at the end.
fn ls(common: &Common, host: Option<&str>, prefix: Option<&str>, json: bool) -> Result<ExitCode, String> {
    use std::io::Write;
    let cfg = load_config(common)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let (mut listed, mut records, mut bytes) = (0u64, 0u64, 0u64);
    match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let entries = s.entries().map_err(|e| e.to_string())?;
            let progress = Progress::new("cache ls", Some(entries.len() as u64), Unit::Items("entries scanned"));
            for (i, e) in entries.iter().enumerate() {
                if i % 1_000 == 0 {
                    progress.set(i as u64);
                }
                if !crate::admin::ls_matches(&e.primary_key, host, prefix) {
                    continue;
                }
                listed += 1;
                records += u64::from(crate::record::is_record_key(&e.primary_key));
                bytes += e.body.as_ref().map_or(0, |b| b.len);
                writeln!(out, "{}", crate::admin::ls_line(e, json)).map_err(|e| e.to_string())?;
            }
            progress.clear();
        }
        StoreAccess::Daemon(a) => {
            let mut path = String::from("/cache/ls?");
            if let Some(h) = host {
                path.push_str(&format!("host={}&", encode(h)));
            }
            if let Some(p) = prefix {
                path.push_str(&format!("prefix={}&", encode(p)));
            }
            if json {
                path.push_str("json=1");
            }
            let (status, body) = admin_request(&a, "GET", &path)?;
            if status != 200 {
                return Err(body.trim().to_string());
            }
            for line in body.lines() {
                listed += 1;
                if json {
                    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
                    records += u64::from(v["record"].as_bool().unwrap_or(false));
                    bytes += v["bytes"].as_u64().unwrap_or(0);
                } else {
                    let mut f = line.split('\t');
                    bytes += f.nth(1).and_then(|b| b.parse::<u64>().ok()).unwrap_or(0);
                    records += u64::from(f.next().is_some_and(crate::record::is_record_key));
                }
                writeln!(out, "{line}").map_err(|e| e.to_string())?;
            }
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    eprintln!("cache ls: {listed} entries ({records} recorded), {bytes} body bytes");
    Ok(ExitCode::SUCCESS)
}
