//! `crawlcache cache stats|show|ls|cat|purge|prune|compact|verify`:
//! inspect and maintain the store, directly or through the running proxy
//! ([`super::access`]), with the same result either way. The work itself
//! is in [`crate::ops::inspect`] and [`crate::ops::maintain`], shared
//! with the admin endpoints.
//!
//! Output is for people by default (sizes in KiB/MiB/GiB, durations as
//! `1h11m`, one summary line) and for programs with `--json`: one object
//! `{"version": 1, ...}` whose fields stay (new ones may be added), or JSON
//! lines for `cache ls`.

#![allow(
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links,
    reason = "the doc comments of the arguments are --help text, read in a terminal: URLs and [::1] stay as typed"
)]

use super::access::{
    admin_request, admin_stream, encode, open_store, StoreAccess, STREAM_IDLE_TIMEOUT,
};
use super::cache_text::{ls_line, ls_summary, show_text, stats_text, verify_text};
use super::common::{load_config, Common};
use super::progress::{Progress, Unit};
use crate::cli::error::CommandError;
use crate::ops::inspect::{KeyFilter, ListSpec, Listing, LsRow, LsSummary};
use crate::ops::maintain::{self, PruneSpec, PurgeSelection, Removed};
use clap::Subcommand;
use crawlcache_base::units::{format_age, format_bytes};
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// Parses a `--older-than` / `--unused-for` value ([`crawlcache_base::units::parse_duration`]).
fn duration_arg(s: &str) -> Result<Duration, crawlcache_base::units::UnitError> {
    crawlcache_base::units::parse_duration(s)
}

/// Checks a `--host` value ([`crate::ops::host_filter::HostFilter::parse`])
/// and keeps it as given (the running proxy parses it the same way).
pub fn host_arg(s: &str) -> Result<String, crate::ops::host_filter::HostFilterError> {
    crate::ops::host_filter::HostFilter::parse(s).map(|_| s.trim().to_string())
}

/// The `--help` text of `--host` (cache ls, cache purge, export).
pub const HOST_HELP: &str = "Only URLs of this host: a host (example.com: any scheme and port), host:port \
(127.0.0.1:8080; a URL without a port has its scheme's default, 80 or 443) or a URL, whose authority is used \
(http://127.0.0.1:8080/docs/ is read as 127.0.0.1:8080)";

/// `cache` subcommands.
#[derive(Subcommand, Debug)]
pub enum CacheCommand {
    /// Entries, bodies, bytes stored and the budget, and the request
    /// counters of the running proxy; the same figures whether or not it runs.
    #[command(
        after_help = "Examples:\n  crawlcache cache stats --data-dir /srv/crawlcache\n  crawlcache cache stats --json | jq .store.bytes_stored"
    )]
    Stats {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// One JSON object: {"version": 1, "data_dir", "proxy_running",
        /// "listen", "store": {...}, "requests": {...} or null when stopped}.
        #[arg(long)]
        json: bool,
    },
    /// The stored variants of a URL and its records: status, fields, body
    /// size and SHA-256 (--json: one object, for tools).
    #[command(
        after_help = "Examples:\n  crawlcache cache show https://example.com/\n  crawlcache cache show https://example.com/feed.xml --json | jq '.variants[0].headers'"
    )]
    Show {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// The URL whose stored responses to show.
        url: String,
        /// One JSON object: {"version": 1, "url", "key", "variants": [...],
        /// "records": [...]}, each with status, headers, vary_request,
        /// request_time_ms, response_time_ms, body_sha256, body_bytes.
        #[arg(long)]
        json: bool,
    },
    /// List the stored responses, one line each as they are read (not
    /// sorted): `URL STATUS SIZE STORED FRESHNESS IN`, tab-separated, where
    /// FRESHNESS is `fresh 59m` or `expired 1h11m ago` and IN says `cache`,
    /// `record` or `cache+record`; or JSON lines (--json: bytes and `ttl`
    /// in seconds, negative when stale). A summary line goes to stderr.
    #[command(
        after_help = "Examples:\n  crawlcache cache ls --host example.com\n  crawlcache cache ls --prefix https://example.com/docs/ | grep expired\n  crawlcache cache ls --json | jq -r 'select(.ttl < 0) | .url'"
    )]
    Ls {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// Only this host (and port), or the host of this URL.
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
    #[command(
        after_help = "Examples:\n  crawlcache cache cat --decode https://example.com/feed.xml > feed.xml\n  crawlcache cache cat https://example.com/ | head"
    )]
    Cat {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// The URL whose stored body to write to standard output.
        url: String,
        /// Undo the Content-Encoding (gzip, deflate, br; also stacked).
        #[arg(long)]
        decode: bool,
    },
    /// Remove stored responses, from the cache and the record: every
    /// variant and record of URL, or all those passing the filters (every
    /// filter given must hold). Prints how many entries and bytes went;
    /// --dry-run only says what would go.
    #[command(group(clap::ArgGroup::new("selection").required(true).multiple(true).args(["url", "host", "prefix", "older_than"])))]
    #[command(
        after_help = "Examples:\n  crawlcache cache purge https://example.com/page\n  crawlcache cache purge --host ads.example --older-than 7d --dry-run\n  crawlcache cache purge --prefix https://example.com/tmp/ --json"
    )]
    Purge {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// A URL: its cache variants and its records (any method).
        #[arg(conflicts_with_all = ["host", "prefix"])]
        url: Option<String>,
        /// Every URL of this host (and port), or of the host of this URL.
        #[arg(long, value_name = "HOST[:PORT]|URL", value_parser = host_arg, help = HOST_HELP)]
        host: Option<String>,
        /// Every URL starting with this prefix.
        #[arg(long)]
        prefix: Option<String>,
        /// Only responses received longer ago than this (e.g. 10m, 7d, 1w, 1h30m).
        #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
        older_than: Option<Duration>,
        /// Say how many entries and body bytes would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// One JSON object: {"version": 1, "dry_run", "entries", "bytes", "freed"}.
        #[arg(long)]
        json: bool,
    },
    /// Remove the cache entries that are no longer fresh and have not been
    /// used (stored, served, freshened) for a while; records are kept
    /// unless --records. Prints a one-line summary.
    #[command(
        after_help = "Examples:\n  crawlcache cache prune                      # stale and unused for 7d\n  crawlcache cache prune --unused-for 30d --records"
    )]
    Prune {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// How long an entry must have gone unused.
        #[arg(long, value_name = "DURATION", default_value = maintain::DEFAULT_UNUSED_FOR, value_parser = duration_arg)]
        unused_for: Duration,
        /// Prune records (offline replay copies) by the same test too.
        #[arg(long)]
        records: bool,
        /// One JSON object: {"version": 1, "dry_run": false, "entries", "bytes", "freed"}.
        #[arg(long)]
        json: bool,
    },
    /// Give back the pack space of removed, replaced and evicted entries
    /// now: copies every live record forward and deletes what nothing
    /// references (the proxy also does this by itself once the pack holds
    /// more than twice its live bytes). Prints the pack's size before and
    /// after.
    #[command(
        after_help = "Examples:\n  crawlcache cache compact\n  crawlcache cache compact --json | jq .pack_bytes_after"
    )]
    Compact {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// One JSON object: {"version": 1, "pack_bytes_before", "pack_bytes_after", "records_moved"}.
        #[arg(long)]
        json: bool,
    },
    /// Check every store invariant: one summary line when all hold; the
    /// problems, and exit 1, when one is broken.
    #[command(
        after_help = "Examples:\n  crawlcache cache verify\n  crawlcache cache verify --repair\n  crawlcache cache verify --json | jq .report.missing_bodies"
    )]
    Verify {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// Fix what is found (drop broken entries, delete orphans, fix counts).
        #[arg(long)]
        repair: bool,
        /// One JSON object: {"version": 1, "clean", "report": {...}}.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `cache` subcommand.
pub fn run(command: CacheCommand) -> Result<ExitCode, CommandError> {
    match command {
        CacheCommand::Stats { common, json } => stats(&common, json),
        CacheCommand::Show { common, url, json } => show(&common, &url, json),
        CacheCommand::Purge { common, url, host, prefix, older_than, dry_run, json } => purge(
            &common,
            url.as_deref(),
            KeyFilter { host, prefix },
            older_than,
            Output { dry_run, json },
        ),
        CacheCommand::Prune { common, unused_for, records, json } => {
            prune(&common, unused_for, records, json)
        }
        CacheCommand::Ls { common, host, prefix, json } => {
            ls(&common, KeyFilter { host, prefix }, json)
        }
        CacheCommand::Cat { common, url, decode } => cat(&common, &url, decode),
        CacheCommand::Verify { common, repair, json } => verify(&common, repair, json),
        CacheCommand::Compact { common, json } => compact(&common, json),
    }
}

/// Compacts the pack (directly or through the running proxy) and says how
/// much it gave back.
fn compact(common: &Common, json: bool) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    let c: crawlcache_store::Compaction = match open_store(&cfg)? {
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
            serde_json::from_slice(&body)
                .map_err(|e| format!("unexpected answer from the proxy: {e}"))?
        }
    };
    if json {
        let v = serde_json::json!({
            "version": 1,
            "pack_bytes_before": c.pack_bytes_before,
            "pack_bytes_after": c.pack_bytes_after,
            "records_moved": c.records_moved,
        });
        outln!("{v}");
    } else {
        outln!(
            "cache compact: pack {} -> {} ({} given back, {} live records moved)",
            format_bytes(c.pack_bytes_before),
            format_bytes(c.pack_bytes_after),
            format_bytes(c.pack_bytes_before.saturating_sub(c.pack_bytes_after)),
            c.records_moved
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the store's figures, and the running proxy's request counters,
/// for people ([`stats_text`]) or as one JSON object ([`stats_object`]),
/// the same whether the store is opened here or the proxy answers.
fn stats(common: &Common, json: bool) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    let v = match open_store(&cfg)? {
        StoreAccess::Direct(s) => stats_object(
            &cfg.server.data_dir,
            serde_json::to_value(s.stats()).unwrap_or_default(),
            None,
        ),
        StoreAccess::Daemon(a) => {
            let (status, body) = admin_request(&a, "GET", "/stats")?;
            let answer: serde_json::Value = serde_json::from_str(&body)
                .map_err(|e| format!("unexpected answer from the proxy ({status}): {e}"))?;
            let listen =
                answer["listen"].as_str().map_or_else(|| a.addr.to_string(), str::to_string);
            stats_object(
                &cfg.server.data_dir,
                answer["store"].clone(),
                Some((listen.as_str(), answer["proxy"].clone())),
            )
        }
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        out!("{}", stats_text(&v));
    }
    Ok(ExitCode::SUCCESS)
}

/// The `cache stats --json` object, version 1: `data_dir`,
/// `proxy_running`, `listen` (null when stopped), `store` (entries,
/// bodies, bytes_stored, budget_bytes, bytes_referenced, max_size,
/// evictions, pack_bytes, filters_ready: [`crawlcache_store::StoreStats`]) and `requests` (the running
/// proxy's counters by name, as in `/stats`; null when stopped).
pub fn stats_object(
    data_dir: &std::path::Path,
    store: serde_json::Value,
    running: Option<(&str, serde_json::Value)>,
) -> serde_json::Value {
    let (listen, requests) = match running {
        Some((addr, counters)) => (serde_json::Value::from(addr), counters),
        None => (serde_json::Value::Null, serde_json::Value::Null),
    };
    serde_json::json!({
        "version": 1,
        "data_dir": data_dir.display().to_string(),
        "proxy_running": !listen.is_null(),
        "listen": listen,
        "store": store,
        "requests": requests,
    })
}

/// Prints the stored variants of `url` for people, or as pretty JSON with
/// `json`; exit 1 when none.
fn show(common: &Common, url: &str, json: bool) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    let v = match open_store(&cfg)? {
        StoreAccess::Direct(s) => crate::ops::lookup::show_json(&s, url, &cfg.cache.key_rules)
            .map_err(|e| e.to_string())?,
        StoreAccess::Daemon(a) => {
            let (status, body) =
                admin_request(&a, "GET", &format!("/cache/show?url={}", encode(url)))?;
            if status != 200 {
                return Err(body.trim().into());
            }
            serde_json::from_str(&body)
                .map_err(|e| format!("unexpected answer from the proxy: {e}"))?
        }
    };
    let mut v = v;
    let empty = v["variants"].as_array().map(|a| a.is_empty()).unwrap_or(true);
    if json {
        v["version"] = serde_json::Value::from(1);
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        out!("{}", show_text(&v));
    }
    Ok(if empty { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// How a purge reports: `dry_run` removes nothing and says what would
/// go; `json` prints one object instead of a line for people.
#[derive(Debug, Clone, Copy, Default)]
struct Output {
    dry_run: bool,
    json: bool,
}

/// Removes the selected responses (cache and record) and says how many
/// entries and bytes went; with `dry_run`, only counts them (through the
/// running proxy: `GET /cache/purge`, which removes nothing).
fn purge(
    common: &Common,
    url: Option<&str>,
    filter: KeyFilter,
    older_than: Option<Duration>,
    output: Output,
) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    let removed = match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let mut selection =
                PurgeSelection { filter: filter.clone(), older_than, ..Default::default() };
            if let Some(u) = url {
                selection.urls = crate::ops::lookup::url_keys(u, &cfg.cache.key_rules)
                    .map_err(|e| e.to_string())?;
            }
            if output.dry_run {
                maintain::would_purge(&s, &selection, SystemTime::now())?
            } else {
                let removed = maintain::purge(&s, &selection, SystemTime::now())?;
                s.flush().map_err(|e| e.to_string())?;
                removed
            }
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
            // A dry run is a GET: a proxy that does not know it answers
            // 405 instead of removing anything.
            let method = if output.dry_run { "GET" } else { "POST" };
            removal(&a, method, &format!("/cache/purge?{}", q.join("&")))?
        }
    };
    outln!("{}", removal_report("cache purge", &removed, output));
    if removed.entries == 0 && !output.json {
        eprintln!(
            "cache purge: nothing stored matches {}",
            selection_words(url, &filter, older_than)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Removes stale entries unused for `unused_for` and prints the summary.
fn prune(
    common: &Common,
    unused_for: Duration,
    records: bool,
    json: bool,
) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    let removed = match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let spec = PruneSpec {
                unused_for,
                records,
                policy: cfg.policy(),
                rules: cfg.cache.rules.clone(),
            };
            let removed = maintain::prune(&s, &spec, SystemTime::now())?;
            s.flush().map_err(|e| e.to_string())?;
            removed
        }
        StoreAccess::Daemon(a) => {
            let records = if records { "&records=1" } else { "" };
            removal(
                &a,
                "POST",
                &format!("/cache/prune?unused_for={}ms{records}", unused_for.as_millis()),
            )?
        }
    };
    let report = removal_report("cache prune", &removed, Output { dry_run: false, json });
    if json {
        outln!("{report}");
    } else {
        outln!("{report} (stale and unused for {})", format_age(unused_for));
    }
    Ok(ExitCode::SUCCESS)
}

/// How long a purge or prune through the proxy may work before it answers.
const REMOVAL_TIMEOUT: Duration = Duration::from_secs(3600);

/// A purge or prune through the running proxy: its JSON answer.
fn removal(
    admin: &super::access::Admin,
    method: &str,
    path: &str,
) -> Result<Removed, CommandError> {
    let mut body = Vec::new();
    admin_stream(admin, method, path, REMOVAL_TIMEOUT, &mut |chunk: &[u8]| {
        body.extend_from_slice(chunk);
        Ok(())
    })?;
    Ok(serde_json::from_slice(&body)
        .map_err(|e| format!("unexpected answer from the proxy: {e}"))?)
}

/// Checks the store; prints one summary line when every invariant holds,
/// the problems found and the summary when not (exit 1, repaired or not),
/// or with `json` one object `{"version": 1, "clean", "report"}`.
fn verify(common: &Common, repair: bool, json: bool) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    // Hashing every body file is the long part: a bar counts them.
    let progress = Progress::new("cache verify", None, Unit::Items("bodies hashed"));
    let (clean, report) = match open_store(&cfg)? {
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
            (r.is_clean(), serde_json::to_value(&r).unwrap_or_default())
        }
        StoreAccess::Daemon(a) => {
            progress.message(format!("(the running proxy at {} is checking)", a.addr));
            // A repair changes the store: POST (the proxy refuses it over GET).
            let (method, path) =
                if repair { ("POST", "/cache/verify?repair=1") } else { ("GET", "/cache/verify") };
            let (_, body) = admin_request(&a, method, path)?;
            let v: serde_json::Value = serde_json::from_str(&body)
                .map_err(|e| format!("unexpected answer from the proxy: {e}"))?;
            (v["clean"].as_bool().unwrap_or(false), v["report"].clone())
        }
    };
    progress.clear();
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "version": 1, "clean": clean, "report": report })
            )
            .unwrap_or_default()
        );
    } else {
        out!("{}", verify_text(clean, repair, &report));
    }
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Lists the stored responses passing `filter`, one line each as they are
/// read (through the proxy: as they arrive), then a summary on stderr. A
/// closed stdout (`| head`) ends the listing quietly.
fn ls(common: &Common, filter: KeyFilter, json: bool) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    let (filter_set, filter_words) = (filter.is_set(), filter.describe());
    let stdout = std::io::stdout();
    let mut out = std::io::LineWriter::new(stdout.lock());
    let mut summary = LsSummary::default();
    let mut print = |row: &LsRow, out: &mut dyn Write| -> std::io::Result<()> {
        summary.add(row);
        writeln!(out, "{}", if json { row.json() } else { ls_line(row) })
    };
    let closed = |e: &std::io::Error| e.kind() == std::io::ErrorKind::BrokenPipe;
    match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let spec = ListSpec {
                filter,
                policy: cfg.policy(),
                rules: cfg.cache.rules.clone(),
                now: SystemTime::now(),
            };
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
                return Err(e.into());
            }
        }
    }
    if let Err(e) = out.flush() {
        if !closed(&e) {
            return Err(e.to_string().into());
        }
    }
    eprintln!("cache ls: {}", ls_summary(&summary));
    if summary.rows == 0 && filter_set {
        eprintln!("cache ls: nothing stored matches {filter_words} (`cache ls` without filters lists every URL)");
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the stored body of `url` on stdout (decoded with `decode`) and
/// says on stderr where it came from; exit 1 when it is not stored.
fn cat(common: &Common, url: &str, decode: bool) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let quiet_pipe = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    };
    match open_store(&cfg)? {
        StoreAccess::Direct(s) => {
            let Some(picked) = crate::ops::inspect::pick(&s, url, &cfg.cache.key_rules)
                .map_err(|e| e.to_string())?
            else {
                eprintln!(
                    "crawlcache: {url} is not stored (neither in the cache nor in the record)"
                );
                return Ok(ExitCode::from(1));
            };
            let mut body = picked.body(&s, decode)?;
            quiet_pipe(std::io::copy(&mut body, &mut out).map(|_| ()))
                .map_err(|e| format!("{}: {e}", picked.key))?;
            quiet_pipe(out.flush()).map_err(|e| e.to_string())?;
            eprintln!("cache cat: {} from the {} ({})", url, picked.source(), picked.key);
        }
        StoreAccess::Daemon(a) => {
            let path =
                format!("/cache/cat?url={}{}", encode(url), if decode { "&decode=1" } else { "" });
            let head =
                match admin_stream(&a, "GET", &path, STREAM_IDLE_TIMEOUT, &mut |chunk: &[u8]| {
                    out.write_all(chunk)
                }) {
                    Ok(h) => h,
                    Err(e) if e.status == Some(404) => {
                        eprintln!("crawlcache: {e}");
                        return Ok(ExitCode::from(1));
                    }
                    Err(e) => return Err(e.into()),
                };
            quiet_pipe(out.flush()).map_err(|e| e.to_string())?;
            let header = |n: &str| {
                head.headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("?").to_string()
            };
            eprintln!(
                "cache cat: {} from the {} ({})",
                url,
                header("x-crawlcache-source"),
                header("x-crawlcache-key")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What a purge or prune removed (or, `dry_run`, would remove): for people
/// `COMMAND: removed 3 entries (1.2 MiB of bodies); 1.0 MiB freed ...`, or
/// with `json` `{"version": 1, "dry_run", "entries", "bytes", "freed"}`
/// (`freed` null in a dry run: it depends on the entries left).
fn removal_report(command: &str, removed: &Removed, output: Output) -> String {
    let entries = |n: u64| if n == 1 { "1 entry".to_string() } else { format!("{n} entries") };
    match (output.json, output.dry_run) {
        (true, dry_run) => serde_json::json!({
            "version": 1,
            "dry_run": dry_run,
            "entries": removed.entries,
            "bytes": removed.bytes,
            "freed": if dry_run { serde_json::Value::Null } else { removed.freed.into() },
        })
        .to_string(),
        (false, true) => {
            format!(
                "{command} --dry-run: would remove {} ({} of bodies); nothing was removed",
                entries(removed.entries),
                format_bytes(removed.bytes)
            )
        }
        (false, false) => format!(
            "{command}: removed {} ({} of bodies); {} freed (bodies no other entry references)",
            entries(removed.entries),
            format_bytes(removed.bytes),
            format_bytes(removed.freed)
        ),
    }
}

/// The selection of a purge in the words of its command line.
fn selection_words(url: Option<&str>, filter: &KeyFilter, older_than: Option<Duration>) -> String {
    let mut words: Vec<String> = url.map(str::to_string).into_iter().collect();
    if filter.is_set() {
        words.push(filter.describe());
    }
    if let Some(d) = older_than {
        words.push(format!("--older-than {}", crawlcache_base::units::format_duration(d)));
    }
    words.join(" ")
}
