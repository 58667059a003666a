//! Configuration: TOML → typed [`Config`].
//!
//! The defaults are `config/crawlcache.toml`, embedded in the binary with
//! `include_str!`, so the documented file and the running defaults cannot
//! drift. A user file given with `--config`, then `CRAWLCACHE_SECTION__KEY`
//! environment variables and command-line flags are laid over the defaults
//! key by key (the `sources` module, which also records where each value
//! came from, and holds [`Config::load`] and [`Config::from_sources`]).
//! Every key must exist in the defaults (except inside tables that are open
//! by design); an unknown key or a value of the wrong shape is an error that
//! names the key, the file and its line, or the variable.

use crawlcache_base::units::{de_duration, de_size};
use serde::{Deserialize, Deserializer};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

pub mod record;
pub mod sources;

/// The embedded default configuration (the text of `config/crawlcache.toml`).
pub const DEFAULT_CONFIG: &str = include_str!("../config/crawlcache.toml");

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[server]`: listening, logs, the admin endpoints.
    pub server: ServerConfig,
    /// `[cache]`: the HTTP cache.
    pub cache: CacheConfig,
    /// `[store]`: how the cache is kept on disk and in memory.
    pub store: StoreConfig,
    /// `[upstream]`: connections to origins.
    pub upstream: UpstreamConfig,
    /// `[tls]`: HTTPS interception.
    pub tls: TlsConfig,
    /// `[record]`: what is kept for offline replay.
    pub record: record::RecordConfig,
    /// `[robots]`: robots.txt snapshots, enforcement, politeness.
    pub robots: crawlcache_robots::settings::RobotsConfig,
    /// `[fleet]`: what a fleet of nodes shares through Redis and a bucket
    /// (empty `redis_url`: single node).
    pub fleet: crawlcache_fleet::config::FleetConfig,
    /// `[audit]`: which requests get an audit line, and how long the
    /// files are kept.
    pub audit: AuditConfig,
}

/// `[audit]`: the audit log's scope and retention ([`crate::audit`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Which proxied requests get a line.
    pub mode: crate::audit::AuditMode,
    /// The files of the last this many UTC days are kept, today included
    /// (whole days; `0d` keeps every file); older ones are deleted at start
    /// and at each day's rollover, and past days are gzip-compressed.
    /// Written as days: `"30d"`, `"1w"`, or a bare number of days (`30`);
    /// anything not a whole number of days (`"12h"`, `"30s"`) is refused,
    /// since it would delete the past days ([`de_keep_days`]).
    #[serde(deserialize_with = "de_keep_days")]
    pub keep: Duration,
}

/// Deserializes `audit.keep`: a bare integer is a number of days (the unit
/// the README gives: "30 by default"), a string a duration that must be a
/// whole number of days. Errors: a negative number, or a duration that is
/// not whole days, with the forms that are accepted: read as seconds, `30`
/// would have kept one day and deleted every past file.
pub fn de_keep_days<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum DaysOrText {
        Days(i64),
        Text(String),
    }
    const DAY: u64 = 86_400;
    let keep = match DaysOrText::deserialize(d)? {
        DaysOrText::Days(n) if n >= 0 => Duration::from_secs(n as u64 * DAY),
        DaysOrText::Days(n) => {
            return Err(serde::de::Error::custom(format!("{n} is negative (days of audit files to keep: 30, \"30d\", \"1w\"; 0 keeps every file)")))
        }
        DaysOrText::Text(t) => {
            let parsed = crawlcache_base::units::parse_duration(&t).map_err(serde::de::Error::custom)?;
            if parsed.as_secs() % DAY != 0 || parsed.subsec_nanos() != 0 {
                return Err(serde::de::Error::custom(format!(
                    "'{t}' is not a whole number of days (audit files are kept by UTC day: write 30, \"30d\" or \"1w\"; 0 keeps every file)"
                )));
            }
            parsed
        }
    };
    Ok(keep)
}

/// `[server]`: where the proxy listens and keeps its data.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Listening address ([`parse_listen`]: a port alone is on loopback).
    #[serde(deserialize_with = "de_listen")]
    pub listen: SocketAddr,
    /// Client networks allowed to connect (loopback is always allowed).
    pub allow_clients: Vec<IpNet>,
    /// Data directory (index, bodies, CA, audit).
    pub data_dir: PathBuf,
    /// Log filter used when `RUST_LOG` is unset.
    pub log: String,
    /// Threads that serve client connections, each running its own event
    /// loop (0: one per CPU core).
    pub threads: usize,
    /// Send stored bodies of 64 KiB and more that are not held in memory
    /// with `sendfile(2)` on plain-HTTP client connections (Linux; no copy
    /// through user space) instead of writing them from a map of the file.
    pub sendfile: bool,
    /// The most client connections served at once (plain and intercepted
    /// HTTPS); beyond it new connections get 503 with `Retry-After`, except
    /// requests to the admin endpoints. 0: derived from the open-file
    /// limit ([`crate::proxy::overload::derived_max_connections`]).
    pub max_connections: usize,
    /// Grace period for in-flight responses at shutdown.
    #[serde(deserialize_with = "de_duration")]
    pub shutdown_timeout: Duration,
    /// Never contact origins.
    pub offline: bool,
    /// Where the access log (one line per proxied request) goes.
    pub access_log: AccessLogTarget,
    /// How access-log lines are written.
    pub access_log_format: AccessLogFormat,
    /// Log line format: `text` or `json`.
    pub log_format: LogFormat,
    /// Bearer token for the admin endpoints; empty for none. When set,
    /// every admin request must carry `Authorization: Bearer <token>`;
    /// when empty, admin answers loopback clients only, and only while
    /// `listen` is a loopback address. A browser request from another
    /// page needs it as `Authorization: Bearer` (docs/CASES.md C54).
    pub admin_token: String,
    /// Host names that address this proxy's admin endpoints besides
    /// `localhost` and its IP addresses (the `Host` of any other admin
    /// request is refused: DNS rebinding, docs/CASES.md C54).
    pub admin_hosts: Vec<String>,
}

/// Parses a listening address: `IP:PORT` (`127.0.0.1:3128`,
/// `[::1]:3128`, `0.0.0.0:3128`), or a port alone, `3130` or `:3130`,
/// which means `127.0.0.1:3130`: loopback, never every interface unless
/// an unspecified address is written. Errors: a message with the forms.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let t = s.trim();
    let port = t.strip_prefix(':').unwrap_or(t);
    if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
        let port: u16 = port.parse().map_err(|_| format!("'{s}': a port is at most 65535"))?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    t.parse().map_err(|_| {
        format!("'{s}' is not a listening address (expected IP:PORT such as 127.0.0.1:3128 or [::1]:3128, or a port alone: 3128 or :3128 for 127.0.0.1)")
    })
}

fn de_listen<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum PortOrText {
        Port(i64),
        Text(String),
    }
    match PortOrText::deserialize(d)? {
        PortOrText::Port(p) => parse_listen(&p.to_string()),
        PortOrText::Text(t) => parse_listen(&t),
    }
    .map_err(serde::de::Error::custom)
}

/// `server.access_log`: where the access log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// No access log (`"off"`).
    Off,
    /// Standard output (`"stdout"`; the journal under systemd).
    Stdout,
    /// A file, appended to and reopened on `SIGHUP` (any other value).
    File(PathBuf),
    /// The old form (`"info"`, `"debug"`, `"trace"`): a line at that level
    /// in the process log, with the tracing target `crawlcache::access`,
    /// shown when `server.log` lets it through. Kept as a warned alias.
    Level(tracing::Level),
}

impl AccessLogTarget {
    /// Reads a value: `off`, `stdout`, an old level name, or a file path.
    /// Errors: an empty value.
    pub fn parse(s: &str) -> Result<AccessLogTarget, String> {
        Ok(match s {
            "" => {
                return Err("server.access_log is empty: write \"off\", \"stdout\" or a file path"
                    .to_string())
            }
            "off" => AccessLogTarget::Off,
            "stdout" => AccessLogTarget::Stdout,
            "info" => AccessLogTarget::Level(tracing::Level::INFO),
            "debug" => AccessLogTarget::Level(tracing::Level::DEBUG),
            "trace" => AccessLogTarget::Level(tracing::Level::TRACE),
            path => AccessLogTarget::File(PathBuf::from(path)),
        })
    }

    /// The tracing level of the old form, `None` for the others.
    pub fn level(&self) -> Option<tracing::Level> {
        match self {
            AccessLogTarget::Level(l) => Some(*l),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for AccessLogTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        AccessLogTarget::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// `server.access_log_format`: how access-log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogFormat {
    /// One JSON object per line, a key per field.
    Json,
    /// Squid's native `access.log` format, for tools that read it.
    Squid,
}

/// `server.log_format`: how log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (fields as keys).
    Json,
}

/// `[cache]`: the HTTP cache.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Budget for body files, in bytes.
    #[serde(deserialize_with = "de_size")]
    pub max_size: u64,
    /// Largest body stored, in bytes.
    #[serde(deserialize_with = "de_size")]
    pub max_object_size: u64,
    /// Memory for the bodies of recently served small entries, in bytes
    /// (0: none). See [`crate::proxy::body_cache`].
    #[serde(deserialize_with = "de_size")]
    pub body_memory: u64,
    /// Largest body kept in `body_memory`, in bytes.
    #[serde(deserialize_with = "de_size")]
    pub body_memory_max_object: u64,
    /// Shared-cache semantics (RFC 9111).
    pub shared: bool,
    /// Store and replay `Set-Cookie`.
    pub store_set_cookie: bool,
    /// Heuristic freshness fraction of (Date − Last-Modified).
    pub heuristic_fraction: f64,
    /// Cap on heuristic freshness.
    #[serde(deserialize_with = "de_duration")]
    pub heuristic_max: Duration,
    /// Lifetime for heuristically cacheable responses without Last-Modified.
    #[serde(deserialize_with = "de_duration")]
    pub default_ttl: Duration,
    /// Bound on serving stale when the origin is unreachable.
    #[serde(deserialize_with = "de_duration")]
    pub max_stale_on_error: Duration,
    /// `[[cache.key_rules]]`: cache-key rewriting (SPEC section 6).
    pub key_rules: Vec<crawlcache_policy::key_rules::KeyRule>,
    /// `[[cache.rules]]`: per-URL policy rules (SPEC section 6).
    pub rules: Vec<crawlcache_policy::cache_rules::PolicyRule>,
}

/// `[store]`: how the cache is kept on disk and in memory (issue 13).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// Bodies shorter than this many bytes live in their entry's pack
    /// record instead of a file of their own.
    #[serde(deserialize_with = "de_size")]
    pub inline_max_bytes: u64,
    /// Resident memory (bytes) the proxy aims to stay under, split among
    /// the caches by [`StoreConfig::memory_budget`].
    #[serde(deserialize_with = "de_size")]
    pub memory_ceiling: u64,
    /// Leave what the proxy writes (pack records, body files) in the
    /// kernel's page cache after the group commit synced it; `false` (the
    /// default) drops it then.
    pub keep_written_pages: bool,
}

impl StoreConfig {
    /// How `memory_ceiling` is split among the caches.
    pub fn memory_budget(&self) -> crawlcache_base::memory::MemoryBudget {
        crawlcache_base::memory::MemoryBudget::new(self.memory_ceiling)
    }
}

/// `[upstream]`: how origins are contacted.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The longest wait for a connection to an origin (TCP and TLS).
    #[serde(deserialize_with = "de_duration")]
    pub connect_timeout: Duration,
    /// The longest wait for an origin's response head once the request is sent.
    #[serde(deserialize_with = "de_duration")]
    pub response_timeout: Duration,
    /// How long an idle connection to an origin is kept for reuse.
    #[serde(deserialize_with = "de_duration")]
    pub pool_idle_timeout: Duration,
    /// Extra CA certificates (PEM) trusted for origins; empty for none.
    pub extra_ca_file: PathBuf,
    /// Largest origin response head, in bytes.
    #[serde(deserialize_with = "de_size")]
    pub max_head_bytes: u64,
    /// Most fields in an origin response head (heads are parsed with room
    /// for 256 first; an origin that sends more is remembered and given
    /// this much room: `crate::upstream::origin::Upstream`).
    pub max_head_fields: usize,
    /// Parent proxy that origins are reached through,
    /// `http://[user:password@]host:port`; empty for none. Never taken from
    /// the environment (`HTTP_PROXY` and the like).
    #[serde(deserialize_with = "de_parent_proxy")]
    pub proxy: ParentProxyUrl,
    /// Origins reached directly even when `proxy` is set.
    pub no_proxy: Vec<NoProxyEntry>,
    /// Ask `https://` origins for HTTP/2 by ALPN (`h2` first, `http/1.1`
    /// as the fallback; RFC 9113 section 3.2).
    pub http2: bool,
    /// Host patterns always spoken to over HTTP/1.1 (as
    /// [`host_matches`]).
    pub http1_hosts: Vec<String>,
    /// Host patterns of `http://` origins spoken to over HTTP/2 with prior
    /// knowledge (h2c, RFC 9113 section 3.3).
    pub h2c_hosts: Vec<String>,
    /// Most requests in flight to one origin (scheme, host and port) at
    /// once, from sending the request until its response body has arrived
    /// ([`crate::wire::body::Inbound`]), whatever the HTTP version; more
    /// wait their turn. 0: no cap.
    pub max_in_flight_per_origin: usize,
    /// The longest a request waits for its turn under
    /// `max_in_flight_per_origin` (`response_timeout` starts once it is
    /// sent).
    #[serde(deserialize_with = "de_duration")]
    pub queue_timeout: Duration,
}

/// `upstream.proxy`: the URL of a parent HTTP proxy, checked when the
/// configuration is read (`http` scheme, a host, an explicit port, nothing
/// after the authority). Empty means none. Its `Debug` hides credentials.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ParentProxyUrl(String);

impl ParentProxyUrl {
    /// Checks `s` (surrounding whitespace ignored); `""` is none.
    pub fn parse(s: &str) -> Result<ParentProxyUrl, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(ParentProxyUrl::default());
        }
        let expected = "expected http://host:port or http://user:password@host:port";
        let uri: http::Uri = s.parse().map_err(|e| format!("not a URL ({e}); {expected}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(format!(
                    "scheme `{other}` is not supported for a parent proxy; {expected}"
                ))
            }
            None => return Err(format!("no scheme; {expected}")),
        }
        let authority = uri.authority().ok_or_else(|| format!("no host; {expected}"))?;
        if authority.host().is_empty() {
            return Err(format!("no host; {expected}"));
        }
        if authority.port_u16().is_none() {
            return Err(format!("no port; {expected}"));
        }
        if uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
            return Err(format!("a parent proxy URL has no path or query; {expected}"));
        }
        Ok(ParentProxyUrl(s.to_string()))
    }

    /// The URL as configured (with credentials, if any); `""` for none.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when no parent proxy is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for ParentProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.split_once('@') {
            Some((_, rest)) => write!(f, "\"http://***@{rest}\""),
            None => write!(f, "{:?}", self.0),
        }
    }
}

fn de_parent_proxy<'de, D: Deserializer<'de>>(d: D) -> Result<ParentProxyUrl, D::Error> {
    let s = String::deserialize(d)?;
    ParentProxyUrl::parse(&s).map_err(serde::de::Error::custom)
}

/// One `upstream.no_proxy` entry: origins it matches are reached directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoProxyEntry {
    /// A host name with its subdomains (`example.org` or `.example.org`;
    /// kept in lower case without the dots around it).
    Domain(String),
    /// An IP address or network ([`IpNet`]), matched against hosts written
    /// as IP addresses (a name is not resolved to match one).
    Net(IpNet),
    /// `*`: every origin.
    All,
}

impl NoProxyEntry {
    /// Parses a host name (optionally with a leading dot), an IP address,
    /// a CIDR network or `*`.
    pub fn parse(s: &str) -> Result<NoProxyEntry, String> {
        let t = s.trim();
        if t == "*" {
            return Ok(NoProxyEntry::All);
        }
        if t.contains('/') || t.parse::<IpAddr>().is_ok() {
            return IpNet::parse(t).map(NoProxyEntry::Net);
        }
        let name = t.strip_prefix('.').unwrap_or(t).trim_end_matches('.').to_ascii_lowercase();
        let label_ok = |l: &str| {
            !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if name.is_empty() || !name.split('.').all(label_ok) {
            return Err(format!(
                "'{s}' is not a host name, IP address or network (expected e.g. \"example.org\", \".example.org\", \"10.0.0.0/8\" or \"192.0.2.7\")"
            ));
        }
        Ok(NoProxyEntry::Domain(name))
    }
}

impl std::fmt::Display for NoProxyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoProxyEntry::Domain(d) => f.write_str(d),
            NoProxyEntry::Net(n) => write!(f, "{}/{}", n.addr, n.prefix),
            NoProxyEntry::All => f.write_str("*"),
        }
    }
}

impl<'de> Deserialize<'de> for NoProxyEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        NoProxyEntry::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// `[tls]`: CONNECT interception.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Intercept CONNECT tunnels with the local CA.
    pub intercept: bool,
    /// Host patterns tunnelled untouched.
    pub bypass_hosts: Vec<String>,
    /// Offer HTTP/2 (ALPN `h2`, RFC 9113 section 3.2) inside intercepted
    /// tunnels, besides HTTP/1.1.
    pub http2: bool,
    /// Host patterns whose intercepted tunnels offer HTTP/1.1 only.
    pub http1_hosts: Vec<String>,
}

impl TlsConfig {
    /// Whether `host` matches a `bypass_hosts` pattern (case-insensitive;
    /// `*.example.org` matches `example.org` and its subdomains).
    pub fn is_bypassed(&self, host: &str) -> bool {
        host_matches(&self.bypass_hosts, host)
    }

    /// Whether intercepted tunnels to `host` offer HTTP/2: `http2` is on
    /// and `host` matches no `http1_hosts` pattern (as [`host_matches`]).
    pub fn offers_http2(&self, host: &str) -> bool {
        self.http2 && !host_matches(&self.http1_hosts, host)
    }
}

/// Whether `host` matches one of `patterns` (case-insensitive, a final dot
/// ignored): an exact name, or `*.example.org`, which matches
/// `example.org` and every name below it.
pub fn host_matches(patterns: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    patterns.iter().any(|p| {
        let p = p.trim().trim_end_matches('.').to_ascii_lowercase();
        match p.strip_prefix("*.") {
            Some(suffix) => host == suffix || host.ends_with(&format!(".{suffix}")),
            None => host == p,
        }
    })
}

/// An IP network in CIDR notation (`127.0.0.0/8`, `::1/128`; a bare address
/// means a single host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    /// The network's address.
    pub addr: IpAddr,
    /// The prefix length, in bits.
    pub prefix: u8,
}

impl IpNet {
    /// Parses `ADDR/PREFIX` or `ADDR`.
    pub fn parse(s: &str) -> Result<IpNet, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not an IP network (expected e.g. 10.0.0.0/8)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("'{s}': prefix must be 0..={max}"))?,
            None => max,
        };
        Ok(IpNet { addr, prefix })
    }

    /// Whether `ip` lies inside this network (IPv4-mapped IPv6 addresses are
    /// compared as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = if self.prefix == 0 { 0 } else { u32::MAX << (32 - self.prefix as u32) };
                (u32::from(n) & mask) == (u32::from(a) & mask)
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask =
                    if self.prefix == 0 { 0 } else { u128::MAX << (128 - self.prefix as u32) };
                (u128::from(n) & mask) == (u128::from(a) & mask)
            }
            _ => false,
        }
    }
}

impl<'de> Deserialize<'de> for IpNet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        IpNet::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A configuration error: names the file (or "built-in defaults") and the key.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

impl Config {
    /// The built-in defaults.
    pub fn defaults() -> Result<Config, ConfigError> {
        Self::from_sources(None)
    }

    fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.cache.heuristic_fraction) {
            return Err(format!(
                "bad value for key `cache.heuristic_fraction`: {} (must be between 0 and 1)",
                self.cache.heuristic_fraction
            ));
        }
        if self.cache.max_size == 0 {
            return Err("bad value for key `cache.max_size`: must be more than 0".into());
        }
        if self.store.inline_max_bytes > 1 << 20 {
            return Err(format!("bad value for key `store.inline_max_bytes`: {} (at most 1MiB: longer bodies belong in files)", self.store.inline_max_bytes));
        }
        if self.store.memory_ceiling < 32 << 20 {
            return Err(format!(
                "bad value for key `store.memory_ceiling`: {} (at least 32MiB)",
                self.store.memory_ceiling
            ));
        }
        self.robots.validate().map_err(|e| e.to_string())?;
        self.record.validate()?;
        self.fleet.validate().map_err(|e| e.to_string())?;
        Ok(())
    }

    /// How to open the store: the budget of `cache.max_size`, the inline
    /// threshold and index cache of `[store]`.
    pub fn store_options(&self) -> crawlcache_store::StoreOptions {
        crawlcache_store::StoreOptions {
            max_size: self.cache.max_size,
            inline_max: self.store.inline_max_bytes,
            index_cache: self.store.memory_budget().index_cache(),
            record_cache: self.store.memory_budget().record_cache(),
            keep_written_pages: self.store.keep_written_pages,
        }
    }

    /// The cache policy tunables.
    pub fn policy(&self) -> crawlcache_policy::cache::PolicyConfig {
        crawlcache_policy::cache::PolicyConfig {
            shared: self.cache.shared,
            heuristic_fraction: self.cache.heuristic_fraction,
            heuristic_max: self.cache.heuristic_max,
            default_ttl: self.cache.default_ttl,
            max_stale_on_error: self.cache.max_stale_on_error,
            store_set_cookie: self.cache.store_set_cookie,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// `audit.keep` in days: a bare number is days, whole-day durations
    /// are read as such, anything else is refused (never seconds).
    #[test]
    fn audit_keep_is_read_in_days() {
        #[derive(Deserialize)]
        struct K {
            #[serde(deserialize_with = "de_keep_days")]
            keep: Duration,
        }
        let days = |text: &str| {
            toml::from_str::<K>(text).map(|k| k.keep.as_secs() / 86_400).map_err(|e| e.to_string())
        };
        assert_eq!(days("keep = 30"), Ok(30));
        assert_eq!(days("keep = \"30d\""), Ok(30));
        assert_eq!(days("keep = \"1w\""), Ok(7));
        assert_eq!(days("keep = 0"), Ok(0));
        for bad in ["keep = \"12h\"", "keep = \"30s\"", "keep = \"36h\"", "keep = -1"] {
            assert!(days(bad).is_err(), "{bad} must be refused");
        }
        assert_eq!(Config::defaults().unwrap().audit.keep, Duration::from_secs(30 * 86_400));
    }

    #[test]
    fn embedded_defaults_parse_and_match_documented_values() {
        let c = Config::defaults().expect("defaults must parse");
        assert_eq!(c.server.listen, "127.0.0.1:3128".parse().unwrap());
        assert_eq!(c.cache.max_size, 10 * 1024 * 1024 * 1024);
        assert!(c.cache.shared);
        assert_eq!(c.cache.max_stale_on_error, Duration::from_secs(86_400));
    }

    #[test]
    fn fleet_mode_is_off_by_default_and_its_keys_are_read() {
        use crawlcache_fleet::config::RedisUrl;
        let c = Config::defaults().unwrap();
        assert_eq!(c.fleet.redis_url, RedisUrl::None, "single node unless redis_url is set");
        assert!(!c.fleet.has_bucket());
        let c = Config::from_sources(Some((
            Path::new("f.toml"),
            "[fleet]\nredis_url = \"redis://127.0.0.1:6379/0\"\ns3_endpoint = \"http://127.0.0.1:9000\"\ns3_bucket = \"b\"\ns3_region = \"eu-west-1\"\nnode = \"n1\"\n",
        )))
        .unwrap();
        assert_eq!(c.fleet.redis_url, RedisUrl::Single("redis://127.0.0.1:6379/0".into()));
        assert!(c.fleet.has_bucket());
        assert_eq!((c.fleet.s3_region.as_str(), c.fleet.node_name().as_str()), ("eu-west-1", "n1"));
        let e = Config::from_sources(Some((Path::new("f.toml"), "[fleet]\ns3_bucket = \"b\"\n")))
            .unwrap_err();
        assert!(e.0.contains("f.toml") && e.0.contains("fleet.redis_url"), "{e}");
    }

    #[test]
    fn user_file_overrides_only_its_keys() {
        let c =
            Config::from_sources(Some((Path::new("my.toml"), "[cache]\nmax_size = \"1MiB\"\n")))
                .unwrap();
        assert_eq!(c.cache.max_size, 1024 * 1024);
        assert_eq!(c.server.listen.port(), 3128);
    }

    #[test]
    fn unknown_key_names_key_and_file() {
        let e = Config::from_sources(Some((Path::new("my.toml"), "[cache]\nmaxsize = 5\n")))
            .unwrap_err();
        assert!(e.0.contains("my.toml") && e.0.contains("`cache.maxsize`"), "{e}");
        let e = Config::from_sources(Some((Path::new("my.toml"), "[nope]\na = 1\n"))).unwrap_err();
        assert!(e.0.contains("`nope`"), "{e}");
    }

    #[test]
    fn bad_value_names_key_and_file() {
        let e = Config::from_sources(Some((Path::new("x.toml"), "[cache]\nmax_size = \"lots\"\n")))
            .unwrap_err();
        assert!(e.0.contains("x.toml") && e.0.contains("max_size"), "{e}");
        let e = Config::from_sources(Some((
            Path::new("x.toml"),
            "[upstream]\nconnect_timeout = \"5 parsecs\"\n",
        )))
        .unwrap_err();
        assert!(e.0.contains("x.toml") && e.0.contains("connect_timeout"), "{e}");
        let e =
            Config::from_sources(Some((Path::new("x.toml"), "[server]\nlisten = \"nowhere\"\n")))
                .unwrap_err();
        assert!(e.0.contains("x.toml") && e.0.contains("listen"), "{e}");
    }

    #[test]
    fn robots_section_defaults_and_host_overrides() {
        let c = Config::defaults().unwrap();
        assert_eq!(c.robots, crawlcache_robots::settings::RobotsConfig::default());
        let c = Config::from_sources(Some((
            Path::new("r.toml"),
            "[robots]\nmode = \"enforce\"\nfresh = \"2s\"\nstale_usable = \"4s\"\nhard_max = \"6s\"\n[robots.hosts.\"a.example\"]\nfresh = \"1s\"\n",
        )))
        .unwrap();
        assert_eq!(c.robots.mode, crawlcache_robots::settings::RobotsMode::Enforce);
        assert_eq!(c.robots.windows_for("a.example").fresh, Duration::from_secs(1));
        assert_eq!(c.robots.windows_for("b.example").fresh, Duration::from_secs(2));
        let e = Config::from_sources(Some((Path::new("r.toml"), "[robots]\nfreshness = \"1h\"\n")))
            .unwrap_err();
        assert!(e.0.contains("`robots.freshness`"), "{e}");
        let e = Config::from_sources(Some((Path::new("r.toml"), "[robots]\nfresh = \"5d\"\n")))
            .unwrap_err();
        assert!(e.0.contains("r.toml") && e.0.contains("fresh"), "{e}");
    }

    #[test]
    fn a_port_alone_listens_on_loopback() {
        let loopback = |p: u16| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p);
        assert_eq!(parse_listen("3130"), Ok(loopback(3130)));
        assert_eq!(parse_listen(":3130"), Ok(loopback(3130)));
        assert_eq!(parse_listen("0.0.0.0:3130").unwrap().to_string(), "0.0.0.0:3130");
        assert_eq!(parse_listen("[::1]:3130").unwrap().to_string(), "[::1]:3130");
        assert!(
            parse_listen("70000").is_err()
                && parse_listen(":").is_err()
                && parse_listen("host:1").is_err()
        );
        let c =
            Config::from_sources(Some((Path::new("l.toml"), "[server]\nlisten = 3130\n"))).unwrap();
        assert_eq!(c.server.listen, loopback(3130));
        let c = Config::from_sources(Some((Path::new("l.toml"), "[server]\nlisten = \":3131\"\n")))
            .unwrap();
        assert_eq!(c.server.listen, loopback(3131));
    }

    /// `server.access_log` is off by default; "stdout" and a path name
    /// destinations; the old level values still parse (as the old form,
    /// which the proxy warns about at start), so configurations written
    /// for earlier releases keep starting.
    #[test]
    fn access_log_destinations_and_the_old_level_form() {
        let c = Config::defaults().unwrap();
        assert_eq!(
            (c.server.access_log.clone(), c.server.access_log_format),
            (AccessLogTarget::Off, AccessLogFormat::Json)
        );
        let read = |v: &str| {
            Config::from_sources(Some((
                Path::new("a.toml"),
                &format!("[server]\naccess_log = \"{v}\"\n"),
            )))
            .map(|c| c.server.access_log)
        };
        assert_eq!(read("stdout").unwrap(), AccessLogTarget::Stdout);
        assert_eq!(
            read("/var/log/crawlcache/access.log").unwrap(),
            AccessLogTarget::File("/var/log/crawlcache/access.log".into())
        );
        assert_eq!(read("info").unwrap(), AccessLogTarget::Level(tracing::Level::INFO));
        assert_eq!(read("debug").unwrap().level(), Some(tracing::Level::DEBUG));
        assert_eq!(read("trace").unwrap().level(), Some(tracing::Level::TRACE));
        assert!(read("").unwrap_err().0.contains("server.access_log"));
        let c = Config::from_sources(Some((
            Path::new("a.toml"),
            "[server]\naccess_log_format = \"squid\"\n",
        )))
        .unwrap();
        assert_eq!(c.server.access_log_format, AccessLogFormat::Squid);
        assert!(Config::from_sources(Some((
            Path::new("a.toml"),
            "[server]\naccess_log_format = \"clf\"\n"
        )))
        .is_err());
    }

    #[test]
    fn bypass_patterns() {
        let t = TlsConfig {
            intercept: true,
            bypass_hosts: vec!["*.example.org".into(), "Bank.example".into()],
            http2: true,
            http1_hosts: vec!["old.example".into()],
        };
        assert!(t.offers_http2("new.example"));
        assert!(!t.offers_http2("Old.Example"));
        assert!(!TlsConfig { http2: false, ..t.clone() }.offers_http2("new.example"));
        assert!(t.is_bypassed("example.org"));
        assert!(t.is_bypassed("a.b.example.org"));
        assert!(!t.is_bypassed("badexample.org"));
        assert!(t.is_bypassed("bank.example."));
        assert!(!t.is_bypassed("www.bank.example"));
    }

    #[test]
    fn ip_networks() {
        let n = IpNet::parse("127.0.0.0/8").unwrap();
        assert!(n.contains("127.1.2.3".parse().unwrap()));
        assert!(!n.contains("10.0.0.1".parse().unwrap()));
        assert!(n.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(IpNet::parse("::1/129").is_err());
    }

    #[test]
    fn parent_proxy_is_off_by_default_and_checked() {
        let c = Config::defaults().unwrap();
        assert!(c.upstream.proxy.is_empty());
        assert!(c.upstream.no_proxy.is_empty());
        let c = Config::from_sources(Some((
            Path::new("p.toml"),
            "[upstream]\nproxy = \"http://user:secret@parent.example:3128\"\nno_proxy = [\".Example.org\", \"10.0.0.0/8\", \"::1\", \"*\"]\n",
        )))
        .unwrap();
        assert_eq!(c.upstream.proxy.as_str(), "http://user:secret@parent.example:3128");
        assert!(!format!("{:?}", c.upstream).contains("secret"), "Debug must hide credentials");
        assert_eq!(
            c.upstream.no_proxy,
            vec![
                NoProxyEntry::Domain("example.org".into()),
                NoProxyEntry::Net(IpNet::parse("10.0.0.0/8").unwrap()),
                NoProxyEntry::Net(IpNet::parse("::1").unwrap()),
                NoProxyEntry::All,
            ]
        );
        for bad in [
            "https://parent:3128",
            "socks5://parent:1080",
            "http://parent",
            "parent:3128",
            "http://parent:3128/path",
        ] {
            let e = Config::from_sources(Some((
                Path::new("p.toml"),
                &format!("[upstream]\nproxy = \"{bad}\"\n"),
            )))
            .unwrap_err();
            assert!(e.0.contains("`upstream.proxy`"), "{bad}: {e}");
        }
        for bad in ["10.0.0.0/33", "exa mple.org", "a,b", ""] {
            let e = Config::from_sources(Some((
                Path::new("p.toml"),
                &format!("[upstream]\nno_proxy = [\"{bad}\"]\n"),
            )))
            .unwrap_err();
            assert!(e.0.contains("`upstream.no_proxy`"), "{bad}: {e}");
        }
    }
}
