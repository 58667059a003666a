//! The `crawlcache` command: one function per subcommand.

use clap::{Args, Parser, Subcommand};
use crawlcache::config::Config;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Like `println!`, but a closed stdout (`crawlcache cache show URL | head`)
/// ends the output quietly instead of panicking.
macro_rules! outln {
    ($($t:tt)*) => {{ let _ = writeln!(std::io::stdout(), $($t)*); }};
}

/// Like `print!`, without the panic on a closed stdout.
macro_rules! out {
    ($($t:tt)*) => {{ let _ = write!(std::io::stdout(), $($t)*); }};
}

#[derive(Parser)]
#[command(name = "crawlcache", version, about = "A local caching forward proxy for web crawlers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy (defaults: 127.0.0.1:3128, data in ./crawlcache-data).
    Serve {
        #[command(flatten)]
        common: Common,
        /// Address to listen on, e.g. 127.0.0.1:3128.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Never contact an origin: serve what is stored, whatever its age.
        #[arg(long)]
        offline: bool,
    },
    /// Inspect and maintain the cache (works whether or not the proxy runs).
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// robots.txt tools (RFC 9309, verdicts as Google's library gives them).
    #[command(subcommand)]
    Robots(RobotsCommand),
    /// The audit trail of proxied requests.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Print the path of the local CA certificate clients must trust for
    /// HTTPS through the proxy (creating the CA if there is none yet).
    Ca {
        #[command(flatten)]
        common: Common,
        /// Print the certificate itself (PEM) instead of its path.
        #[arg(long)]
        pem: bool,
    },
}

#[derive(Subcommand)]
enum RobotsCommand {
    /// Test URLs against a robots.txt file for one product token.
    Check {
        /// The robots.txt file.
        #[arg(long, value_name = "FILE")]
        robots: PathBuf,
        /// The product token, e.g. ExampleBot.
        #[arg(long, value_name = "TOKEN")]
        agent: String,
        /// Also print how every line of the file was understood.
        #[arg(long)]
        lines: bool,
        /// URLs (absolute, or paths) to check.
        #[arg(required = true, value_name = "URL")]
        urls: Vec<String>,
    },
    /// Read JSON lines on stdin ({"robots"|"file", "agent"|"user_agent", "url"}),
    /// write one verdict per line: {"allowed", "rule", "line"}.
    Batch {
        /// Folder that "file" names are relative to.
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// Print an origin's robots.txt snapshot: state, age, status, SHA-256,
    /// ETag, redirects and body.
    Show {
        #[command(flatten)]
        common: Common,
        /// The origin, e.g. https://example.org or http://example.org:8080.
        origin: String,
    },
    /// Refresh robots.txt snapshots now (conditionally), whatever their age:
    /// the given origins, or every known one.
    Refresh {
        #[command(flatten)]
        common: Common,
        origins: Vec<String>,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// List the requests robots.txt disallowed (JSON lines).
    Skips {
        #[command(flatten)]
        common: Common,
        /// Only requests newer than this (e.g. 30m, 6h, 7d).
        #[arg(long, value_name = "DURATION", default_value = "1d")]
        since: String,
    },
}

#[derive(Args, Clone)]
struct Common {
    /// Configuration file laid over the built-in defaults.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (cache index, bodies, CA, audit logs).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum CacheCommand {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { common, listen, offline } => serve(common, listen, offline),
        Command::Cache { command } => cache(command),
        Command::Ca { common, pem } => ca(common, pem),
        Command::Robots(cmd) => robots(cmd),
        Command::Audit(AuditCommand::Skips { common, since }) => audit_skips(common, &since),
    };
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("crawlcache: {msg}");
            ExitCode::from(2)
        }
    }
}

fn robots(cmd: RobotsCommand) -> Result<ExitCode, String> {
    use crawlcache::robots::cli as robots_cli;
    match cmd {
        RobotsCommand::Check { robots, agent, lines, urls } => {
            let args = robots_cli::CheckArgs { robots, agent, urls, lines };
            robots_cli::check(&args, &mut std::io::stdout().lock(), &mut std::io::stderr().lock()).map_err(|e| e.to_string())?;
        }
        RobotsCommand::Batch { dir } => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            robots_cli::batch(&dir, &mut std::io::stdin().lock(), &mut out).map_err(|e| format!("robots batch: {e}"))?;
        }
        RobotsCommand::Show { common, origin } => return robots_show(common, &origin),
        RobotsCommand::Refresh { common, origins } => return robots_refresh(common, &origins),
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_origin(s: &str) -> Result<crawlcache::robots::snapshot::Origin, String> {
    crawlcache::robots::snapshot::Origin::from_url(s).ok_or_else(|| format!("'{s}' is not an origin (expected e.g. https://example.org or http://host:8080)"))
}

fn robots_show(common: Common, origin: &str) -> Result<ExitCode, String> {
    let cfg = load_config(&common)?;
    let origin = parse_origin(origin)?;
    match open_store(&cfg)? {
        StoreAccess::Direct(store) => {
            let tree = store.extra_tree("robots").map_err(|e| e.to_string())?;
            match crawlcache::robots::registry::load_snapshot(&tree, &origin)? {
                Some(snap) => {
                    let windows = cfg.robots.windows_for(&origin.host);
                    out!("{}", crawlcache::robots::registry::describe(&snap, &windows, std::time::SystemTime::now()));
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    eprintln!("no robots.txt snapshot for {origin} yet");
                    Ok(ExitCode::from(1))
                }
            }
        }
        StoreAccess::Daemon(a) => {
            let (status, body) = admin_request(a, "GET", &format!("/robots/show?origin={}", encode(&origin.to_string())))?;
            out!("{body}");
            Ok(if status == 200 { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}

fn robots_refresh(common: Common, origins: &[String]) -> Result<ExitCode, String> {
    let cfg = load_config(&common)?;
    let parsed = origins.iter().map(|o| parse_origin(o)).collect::<Result<Vec<_>, _>>()?;
    match open_store(&cfg)? {
        StoreAccess::Daemon(a) => {
            if parsed.is_empty() {
                out!("{}", admin_request(a, "POST", "/robots/refresh")?.1);
            }
            for o in &parsed {
                let (status, body) = admin_request(a, "POST", &format!("/robots/refresh?origin={}", encode(&o.to_string())))?;
                if status != 200 {
                    return Err(body.trim().to_string());
                }
                out!("{body}");
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreAccess::Direct(store) => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| format!("cannot start the runtime: {e}"))?;
            let out = rt.block_on(async {
                let state = crawlcache::proxy::ProxyState::from_store(cfg.clone(), store.clone())?;
                let targets = if parsed.is_empty() {
                    let tree = store.extra_tree("robots").map_err(|e| e.to_string())?;
                    crawlcache::robots::registry::list_snapshots(&tree).into_iter().map(|s| s.origin).collect()
                } else {
                    parsed
                };
                let mut out = String::new();
                for o in targets {
                    let rules = state.robots.refresh(&o, std::time::SystemTime::now()).await;
                    out.push_str(&crawlcache::robots::registry::describe(&rules.snapshot, &state.robots.windows(&o), std::time::SystemTime::now()));
                    out.push('\n');
                }
                state.robots.flush()?;
                Ok::<String, String>(out)
            })?;
            store.flush().map_err(|e| e.to_string())?;
            out!("{out}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn audit_skips(common: Common, since: &str) -> Result<ExitCode, String> {
    let cfg = load_config(&common)?;
    let d = crawlcache::units::parse_duration(since).map_err(|e| format!("--since: {e}"))?;
    let dir = crawlcache::audit::audit_dir(&cfg.server.data_dir);
    let from = std::time::SystemTime::now().checked_sub(d).unwrap_or(std::time::UNIX_EPOCH);
    let records = crawlcache::audit::skips(&dir, from).map_err(|e| format!("cannot read the audit log in {}: {e}", dir.display()))?;
    let mut out = std::io::stdout().lock();
    for r in &records {
        let _ = writeln!(out, "{}", serde_json::to_string(r).unwrap_or_default());
    }
    eprintln!("{} disallowed request(s) since {}", records.len(), crawlcache::audit::format_rfc3339(from));
    Ok(ExitCode::SUCCESS)
}

fn ca(common: Common, pem: bool) -> Result<ExitCode, String> {
    let cfg = load_config(&common)?;
    crawlcache::proxy::create_private_dir(&cfg.server.data_dir)?;
    let ca = crawlcache::tls::CertificateAuthority::load_or_create(&cfg.server.data_dir).map_err(|e| e.to_string())?;
    if pem {
        out!("{}", ca.cert_pem());
    } else {
        let path = ca.cert_path();
        let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        outln!("{}", abs.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn load_config(common: &Common) -> Result<Config, String> {
    let mut cfg = Config::load(common.config.as_deref()).map_err(|e| e.to_string())?;
    if let Some(d) = &common.data_dir {
        cfg.server.data_dir = d.clone();
    }
    Ok(cfg)
}

fn init_logging(cfg: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&cfg.server.log))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

fn serve(common: Common, listen: Option<SocketAddr>, offline: bool) -> Result<ExitCode, String> {
    let mut cfg = load_config(&common)?;
    if let Some(l) = listen {
        cfg.server.listen = l;
    }
    if offline {
        cfg.server.offline = true;
    }
    init_logging(&cfg);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(crawlcache::proxy::run(cfg, crawlcache::proxy::shutdown_signal()))?;
    Ok(ExitCode::SUCCESS)
}

/// Opens the store directly when the proxy is not running; when it is (the
/// index is locked), the same operation goes through its admin endpoint.
enum StoreAccess {
    Direct(crawlcache::store::Store),
    Daemon(SocketAddr),
}

fn open_store(cfg: &Config) -> Result<StoreAccess, String> {
    let dir = &cfg.server.data_dir;
    if !dir.join("index").exists() && !dir.exists() {
        return Err(format!("no cache at {} (nothing stored yet, or wrong --data-dir)", dir.display()));
    }
    match crawlcache::store::Store::open(dir, cfg.cache.max_size) {
        Ok(s) => Ok(StoreAccess::Direct(s)),
        Err(e) => {
            // Most likely a running proxy holds the index: ask it, at the
            // address it recorded in the data directory.
            let recorded = std::fs::read_to_string(dir.join(crawlcache::proxy::ADDR_FILE))
                .ok()
                .and_then(|s| s.trim().parse::<SocketAddr>().ok());
            match recorded {
                Some(addr) if admin_request(addr, "GET", "/stats").is_ok() => Ok(StoreAccess::Daemon(addr)),
                _ => Err(format!("cannot open the cache in {}: {e}", dir.display())),
            }
        }
    }
}

fn encode(url: &str) -> String {
    percent_encoding::utf8_percent_encode(url, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn cache(cmd: CacheCommand) -> Result<ExitCode, String> {
    match cmd {
        CacheCommand::Stats { common } => {
            let cfg = load_config(&common)?;
            match open_store(&cfg)? {
                StoreAccess::Direct(s) => outln!("{}", serde_json::to_string_pretty(&s.stats()).unwrap_or_default()),
                StoreAccess::Daemon(a) => out!("{}", admin_request(a, "GET", "/stats")?.1),
            }
            Ok(ExitCode::SUCCESS)
        }
        CacheCommand::Show { common, url } => {
            let cfg = load_config(&common)?;
            let v = match open_store(&cfg)? {
                StoreAccess::Direct(s) => crawlcache::admin::show_json(&s, &url)?,
                StoreAccess::Daemon(a) => {
                    let (status, body) = admin_request(a, "GET", &format!("/cache/show?url={}", encode(&url)))?;
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
        CacheCommand::Purge { common, url } => {
            let cfg = load_config(&common)?;
            let n = match open_store(&cfg)? {
                StoreAccess::Direct(s) => {
                    let n = crawlcache::admin::purge(&s, &url)?;
                    s.flush().map_err(|e| e.to_string())?;
                    n
                }
                StoreAccess::Daemon(a) => {
                    let (status, body) = admin_request(a, "POST", &format!("/cache/purge?url={}", encode(&url)))?;
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
        CacheCommand::Verify { common, repair } => {
            let cfg = load_config(&common)?;
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
    }
}

/// A minimal HTTP/1.1 exchange with the running proxy's admin endpoints.
fn admin_request(addr: SocketAddr, method: &str, path: &str) -> Result<(u16, String), String> {
    let timeout = std::time::Duration::from_secs(30);
    let mut s = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))
        .map_err(|e| format!("cannot reach the proxy at {addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(timeout));
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        .map_err(|e| format!("cannot talk to the proxy at {addr}: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("cannot read the proxy's answer: {e}"))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or("malformed answer from the proxy")?;
    Ok((status, body.to_string()))
}
