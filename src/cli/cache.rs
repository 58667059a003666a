//! `crawlcache cache stats|show|ls|cat|purge|prune|verify`: inspect and
//! maintain the store, directly or through the running proxy
//! ([`super::access`]). The work itself is in [`crate::admin::inspect`]
//! and [`crate::admin::maintain`], shared with the admin endpoints.

use super::access::{admin_request, admin_stream, encode, open_store, StoreAccess, STREAM_IDLE_TIMEOUT};
use super::common::{load_config, Common};
use super::progress::{Progress, Unit};
use crate::admin::inspect::{KeyFilter, ListSpec, Listing, LsRow, LsSummary};
use crate::admin::maintain::{self, PruneSpec, PurgeSelection, Removed};
use clap::Subcommand;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// Parses a `--older-than` / `--unused-for` value ([`crate::units::parse_duration`]).
fn duration_arg(s: &str) -> Result<Duration, String> {
    crate::units::parse_duration(s)
}

/// Checks a `--host` value ([`crate::admin::host_filter::HostFilter::parse`])
/// and keeps it as given (the running proxy parses it the same way).
pub fn host_arg(s: &str) -> Result<String, String> {
    crate::admin::host_filter::HostFilter::parse(s).map(|_| s.trim().to_string())
}

/// The `--help` text of `--host` (cache ls, cache purge, export).
pub const HOST_HELP: &str = "Only URLs of this host: a host (example.com: any scheme and port), host:port \
(127.0.0.1:8080; a URL without a port has its scheme's default, 80 or 443) or a URL, whose authority is used \
(http://127.0.0.1:8080/docs/ is read as 127.0.0.1:8080)";

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
    /// List the stored responses, one line each as they are read (not
    /// sorted): `URL STATUS BYTES STORED TTL IN`, tab-separated, where TTL
    /// is the freshness left in seconds (negative: stale) and IN says
    /// `cache`, `record` or `cache+record`; or JSON lines. A summary line
    /// goes to stderr.
    Ls {
        #[command(flatten)]
        common: Common,
        #[arg(long, value_name = "HOST[:PORT]|URL", value_parser = host_arg, help = HOST_HELP)]
        host: Option<String>,
        /// Only URLs starting with this prefix (e.g. https://example.com/docs/).
        #[arg(long)]
        prefix: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Print a stored body on stdout exactly as stored (the newest cache
    /// variant of the URL, else its recorded GET response); stderr says
    /// which. Exit 1 when the URL is not stored.
    Cat {
        #[command(flatten)]
        common: Common,
        url: String,
        /// Undo the Content-Encoding (gzip, deflate, br; also stacked).
        #[arg(long)]
        decode: bool,
    },
    /// Remove stored responses, from the cache and the record: every
    /// variant and record of URL, or all those passing the filters (every
    /// filter given must hold). Prints how many entries and bytes went.
    #[command(group(clap::ArgGroup::new("selection").required(true).multiple(true).args(["url", "host", "prefix", "older_than"])))]
    Purge {
        #[command(flatten)]
        common: Common,
        /// A URL: its cache variants and its records (any method).
        #[arg(conflicts_with_all = ["host", "prefix"])]
        url: Option<String>,
        #[arg(long, value_name = "HOST[:PORT]|URL", value_parser = host_arg, help = HOST_HELP)]
        host: Option<String>,
        /// Every URL starting with this prefix.
        #[arg(long)]
        prefix: Option<String>,
        /// Only responses received longer ago than this (e.g. 10m, 7d).
        #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
        older_than: Option<Duration>,
    },
    /// Remove the cache entries that are no longer fresh and have not been
    /// used (stored, served, freshened) for a while; records are kept
    /// unless --records. Prints a one-line summary.
    Prune {
        #[command(flatten)]
        common: Common,
        /// How long an entry must have gone unused.
        #[arg(long, value_name = "DURATION", default_value = maintain::DEFAULT_UNUSED_FOR, value_parser = duration_arg)]
        unused_for: Duration,
        /// Prune records (offline replay copies) by the same test too.
        #[arg(long)]
        records: bool,
    },
    /// Give back the pack space of removed, replaced and evicted entries
    /// now: copies every live record forward and deletes what nothing
    /// references (the proxy also does this by itself once the pack holds
    /// more than twice its live bytes). Prints the pack's size before and
    /// after.
    Compact {
        #[command(flatten)]
        common: Common,
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
        CacheCommand::Purge { common, url, host, prefix, older_than } => purge(&common, url.as_deref(), KeyFilter { host, prefix }, older_than),
        CacheCommand::Prune { common, unused_for, records } => prune(&common, unused_for, records),
        CacheCommand::Ls { common, host, prefix, json } => ls(&common, KeyFilter { host, prefix }, json),
        CacheCommand::Cat { common, url, decode } => cat(&common, &url, decode),
        CacheCommand::Verify { common, repair } => verify(&common, repair),
        CacheCommand::Compact { common } => compact(&common),
    }
}

/// Compacts the pack (directly or through the running proxy) and says how
/// much it gave back.
fn compact(common: &Common) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    let c: crate::store::Compaction = match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let c = s.compact().map_err(|e| e.to_string())?;
            s.flush().map_err(|e| e.to_string())?;
            c
        }
        StoreAccess::Daemon(a) => {
            let mut body = Vec::new();
            admin_stream(&a, "POST", "/cache/compact", REMOVAL_TIMEOUT, &mut |chunk: &[u8]| {
                body.extend_from_slice(chunk);
                Ok(())
            })?;
            serde_json::from_slice(&body).map_err(|e| format!("unexpected answer from the proxy: {e}"))?
        }
    };
    outln!(
        "cache compact: pack {} -> {} bytes ({} given back, {} live records moved)",
        c.pack_bytes_before,
        c.pack_bytes_after,
        c.pack_bytes_before.saturating_sub(c.pack_bytes_after),
        c.records_moved
    );
    Ok(ExitCode::SUCCESS)
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
        StoreAccess::Direct(s) => crate::admin::lookup::show_json(&s, url, &cfg.cache.key_rules).map_err(|e| e.to_string())?,
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

/// Removes the selected responses (cache and record) and says how many
/// entries and bytes went.
fn purge(common: &Common, url: Option<&str>, filter: KeyFilter, older_than: Option<Duration>) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    let removed = match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let mut selection = PurgeSelection { filter: filter.clone(), older_than, ..Default::default() };
            if let Some(u) = url {
                selection.urls = crate::admin::lookup::url_keys(u, &cfg.cache.key_rules).map_err(|e| e.to_string())?;
            }
            let removed = maintain::purge(&s, &selection, SystemTime::now())?;
            s.flush().map_err(|e| e.to_string())?;
            removed
        }
        StoreAccess::Daemon(a) => {
            let mut q = Vec::new();
            if let Some(u) = url {
                q.push(format!("url={}", encode(u)));
            }
            if let Some(h) = &filter.host {
                q.push(format!("host={}", encode(h)));
            }
            if let Some(p) = &filter.prefix {
                q.push(format!("prefix={}", encode(p)));
            }
            if let Some(d) = older_than {
                q.push(format!("older_than={}ms", d.as_millis()));
            }
            removal(&a, &format!("/cache/purge?{}", q.join("&")))?
        }
    };
    outln!("cache purge: {removed}");
    if removed.entries == 0 {
        eprintln!("cache purge: nothing stored matches {}", selection_words(url, &filter, older_than));
    }
    Ok(ExitCode::SUCCESS)
}

/// The selection of a purge in the words of its command line.
fn selection_words(url: Option<&str>, filter: &KeyFilter, older_than: Option<Duration>) -> String {
    let mut words: Vec<String> = url.map(str::to_string).into_iter().collect();
    if filter.is_set() {
        words.push(filter.describe());
    }
    if let Some(d) = older_than {
        words.push(format!("--older-than {}", crate::units::format_duration(d)));
    }
    words.join(" ")
}

/// Removes stale entries unused for `unused_for` and prints the summary.
fn prune(common: &Common, unused_for: Duration, records: bool) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    let removed = match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let spec = PruneSpec { unused_for, records, policy: cfg.policy(), rules: cfg.cache.rules.clone() };
            let removed = maintain::prune(&s, &spec, SystemTime::now())?;
            s.flush().map_err(|e| e.to_string())?;
            removed
        }
        StoreAccess::Daemon(a) => {
            let records = if records { "&records=1" } else { "" };
            removal(&a, &format!("/cache/prune?unused_for={}ms{records}", unused_for.as_millis()))?
        }
    };
    outln!("cache prune: {removed} (stale and unused for {})", crate::units::format_duration(unused_for));
    Ok(ExitCode::SUCCESS)
}

/// How long a purge or prune through the proxy may work before it answers.
const REMOVAL_TIMEOUT: Duration = Duration::from_secs(3600);

/// A purge or prune through the running proxy: its JSON answer.
fn removal(admin: &super::access::Admin, path: &str) -> Result<Removed, String> {
    let mut body = Vec::new();
    admin_stream(admin, "POST", path, REMOVAL_TIMEOUT, &mut |chunk: &[u8]| {
        body.extend_from_slice(chunk);
        Ok(())
    })?;
    serde_json::from_slice(&body).map_err(|e| format!("unexpected answer from the proxy: {e}"))
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
            // A repair changes the store: POST (the proxy refuses it over GET).
            let (method, path) = if repair { ("POST", "/cache/verify?repair=1") } else { ("GET", "/cache/verify") };
            let (_, body) = admin_request(&a, method, path)?;
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

/// Lists the stored responses passing `filter`, one line each as they are
/// read (through the proxy: as they arrive), then a summary on stderr. A
/// closed stdout (`| head`) ends the listing quietly.
fn ls(common: &Common, filter: KeyFilter, json: bool) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    let (filter_set, filter_words) = (filter.is_set(), filter.describe());
    let stdout = std::io::stdout();
    let mut out = std::io::LineWriter::new(stdout.lock());
    let mut summary = LsSummary::default();
    let mut print = |row: &LsRow, out: &mut dyn Write| -> std::io::Result<()> {
        summary.add(row);
        writeln!(out, "{}", if json { row.json() } else { row.text() })
    };
    let closed = |e: &std::io::Error| e.kind() == std::io::ErrorKind::BrokenPipe;
    match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let spec = ListSpec { filter, policy: cfg.policy(), rules: cfg.cache.rules.clone(), now: SystemTime::now() };
            for row in Listing::new(&s, spec) {
                match print(&row?, &mut out) {
                    Err(e) if closed(&e) => return Ok(ExitCode::SUCCESS),
                    r => r.map_err(|e| e.to_string())?,
                }
            }
        }
        StoreAccess::Daemon(a) => {
            let mut path = String::from("/cache/ls?json=1");
            if let Some(h) = &filter.host {
                path.push_str(&format!("&host={}", encode(h)));
            }
            if let Some(p) = &filter.prefix {
                path.push_str(&format!("&prefix={}", encode(p)));
            }
            // JSON lines from the proxy, printed as they arrive.
            let mut partial: Vec<u8> = Vec::new();
            let mut bad_line = None;
            admin_stream(&a, "GET", &path, STREAM_IDLE_TIMEOUT, &mut |chunk: &[u8]| {
                partial.extend_from_slice(chunk);
                let mut start = 0;
                while let Some(n) = partial[start..].iter().position(|&b| b == b'\n') {
                    let line = &partial[start..start + n];
                    start += n + 1;
                    match serde_json::from_slice::<LsRow>(line) {
                        Ok(row) => print(&row, &mut out)?,
                        Err(e) => bad_line = Some(format!("unexpected line from the proxy: {e}")),
                    }
                }
                partial.drain(..start);
                Ok(())
            })?;
            if let Some(e) = bad_line {
                return Err(e);
            }
        }
    }
    if let Err(e) = out.flush() {
        if !closed(&e) {
            return Err(e.to_string());
        }
    }
    eprintln!("cache ls: {summary}");
    if summary.rows == 0 && filter_set {
        eprintln!("cache ls: nothing stored matches {filter_words} (`cache ls` without filters lists every URL)");
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the stored body of `url` on stdout (decoded with `decode`) and
/// says on stderr where it came from; exit 1 when it is not stored.
fn cat(common: &Common, url: &str, decode: bool) -> Result<ExitCode, String> {
    let cfg = load_config(common)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let quiet_pipe = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    };
    match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let Some(picked) = crate::admin::inspect::pick(&s, url, &cfg.cache.key_rules).map_err(|e| e.to_string())? else {
                eprintln!("crawlcache: {url} is not stored (neither in the cache nor in the record)");
                return Ok(ExitCode::from(1));
            };
            let mut body = picked.body(&s, decode)?;
            quiet_pipe(std::io::copy(&mut body, &mut out).map(|_| ())).map_err(|e| format!("{}: {e}", picked.key))?;
            quiet_pipe(out.flush()).map_err(|e| e.to_string())?;
            eprintln!("cache cat: {} from the {} ({})", url, picked.source(), picked.key);
        }
        StoreAccess::Daemon(a) => {
            let path = format!("/cache/cat?url={}{}", encode(url), if decode { "&decode=1" } else { "" });
            let head = match admin_stream(&a, "GET", &path, STREAM_IDLE_TIMEOUT, &mut |chunk: &[u8]| out.write_all(chunk)) {
                Ok(h) => h,
                Err(e) if e.status == Some(404) => {
                    eprintln!("crawlcache: {e}");
                    return Ok(ExitCode::from(1));
                }
                Err(e) => return Err(e.into()),
            };
            quiet_pipe(out.flush()).map_err(|e| e.to_string())?;
            let header = |n: &str| head.headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("?").to_string();
            eprintln!("cache cat: {} from the {} ({})", url, header("x-crawlcache-source"), header("x-crawlcache-key"));
        }
    }
    Ok(ExitCode::SUCCESS)
}
