//! robots.txt snapshots and their three windows (RFC 9309 §2.4), pure.
//!
//! A [`Snapshot`] is what crawlcache knows about one origin's robots.txt:
//! the body it kept (first [`MAX_ROBOTS_BYTES`] bytes), its SHA-256, the
//! validators for a conditional refresh, when it was fetched and last
//! validated, its [`RobotsStatus`], redirect details and the outcome of the
//! latest attempt (with the back-off schedule after failures).
//!
//! Its [`State`] follows from its age — the time since it was last validated
//! (a 200, or a 304 that reset the age) — and the [`Windows`] of its host:
//! `fresh` (used as is), `stale_usable` and `stale_degraded` (used while a
//! background refresh is attempted), `expired` (the host is not crawlable).
//! RFC 9309 §2.4 says crawlers SHOULD NOT use a cached robots.txt for more
//! than 24 hours unless it is unreachable; the defaults (6 h, 24 h, 3 days)
//! refresh well inside that and keep the older copy only while refreshes
//! fail.
//!
//! Nothing here reads the clock: every function takes `now`.

pub use crate::outcome::FetchOutcome;
use crate::pattern::path_params_query;
use crate::robots_txt::{RobotsTxt, Verdict};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::time::{Duration, SystemTime};

/// The largest robots.txt body kept, in bytes (500 KiB; RFC 9309 §2.5 asks
/// crawlers to parse at least 500 kibibytes). Bytes beyond it are dropped.
pub const MAX_ROBOTS_BYTES: usize = 500 * 1024;

/// Most redirects followed for one robots.txt (RFC 9309 §2.3.1.2: "SHOULD
/// follow at least five consecutive redirects"); a sixth ends the chain
/// ([`RedirectGiveUp::Limit`]).
pub const MAX_REDIRECT_HOPS: usize = 5;

/// A robots.txt origin: scheme, host and port (RFC 9309 §2.3: the rules of
/// `/robots.txt` apply to that scheme, host and port only).
///
/// The scheme and host are lower-case; the port is always explicit (80 for
/// `http`, 443 for `https` when the URL elides it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: String,
    /// Host name or IP literal (IPv6 in brackets), lower-case, no trailing dot.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Origin {
    /// An origin from its parts; the scheme and host are lower-cased and a
    /// trailing dot of the host removed.
    pub fn new(scheme: &str, host: &str, port: u16) -> Origin {
        Origin {
            scheme: scheme.to_ascii_lowercase(),
            host: host.trim_end_matches('.').to_ascii_lowercase(),
            port,
        }
    }

    /// The default port of `scheme` (80 for `http`, 443 for `https`).
    pub fn default_port(scheme: &str) -> Option<u16> {
        if scheme.eq_ignore_ascii_case("http") {
            Some(80)
        } else if scheme.eq_ignore_ascii_case("https") {
            Some(443)
        } else {
            None
        }
    }

    /// The origin of an absolute `http://` or `https://` URL, or of a bare
    /// origin such as `https://example.org:8443`. A string without a scheme
    /// (`example.org`, `example.org:8080`) is taken as `http`. User info is
    /// ignored. `None` for other schemes, an empty host or a bad port.
    pub fn from_url(url: &str) -> Option<Origin> {
        let url = url.trim();
        let (scheme, rest) = match url.find("://") {
            Some(i) => (&url[..i], &url[i + 3..]),
            None => ("http", url),
        };
        let default = Self::default_port(scheme)?;
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..end];
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let (host, port) = if let Some(stripped) = authority.strip_prefix('[') {
            let close = stripped.find(']')?;
            let host = &authority[..close + 2];
            let after = &stripped[close + 1..];
            if after.is_empty() || after == ":" {
                (host, default)
            } else {
                (host, after.strip_prefix(':')?.parse::<u16>().ok()?)
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, "")) => (h, default),
                Some((h, p)) => (h, p.parse::<u16>().ok()?),
                None => (authority, default),
            }
        };
        if host.is_empty() {
            return None;
        }
        Some(Origin::new(scheme, host, port))
    }

    /// The key under which this origin's snapshot is persisted:
    /// `scheme://host:port`, port always present.
    pub fn key(&self) -> String {
        use std::fmt::Write as _;
        // Built by hand: the registry looks each request's origin up by it.
        let mut key = String::with_capacity(self.scheme.len() + self.host.len() + 9);
        key.push_str(&self.scheme);
        key.push_str("://");
        key.push_str(&self.host);
        let _ = write!(key, ":{}", self.port);
        key
    }

    /// The URL of this origin's robots.txt (RFC 9309 §2.3), default port elided.
    /// Requests are checked against the copy [`crate::origin_rules::Rules`]
    /// keeps, built once per snapshot.
    pub fn robots_url(&self) -> String {
        format!("{self}/robots.txt")
    }
}

/// `scheme://host[:port]`, the port elided when it is the scheme's default.
impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if Self::default_port(&self.scheme) == Some(self.port) {
            write!(f, "{}://{}", self.scheme, self.host)
        } else {
            write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
        }
    }
}

/// What a snapshot says about the origin's rules (SPEC §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RobotsStatus {
    /// A 2xx response: the body is the rules (RFC 9309 §2.3.1.1).
    Fetched,
    /// A 4xx other than 429, or a redirect chain given up (more than five
    /// hops, or a loop; RFC 9309 §2.3.1.2, [`RedirectGiveUp`]): no rules
    /// published, everything allowed (RFC 9309 §2.3.1.3).
    Absent,
    /// 429, 5xx, a network failure, a body that does not decode or a
    /// refused redirect: the rules are unknown, everything disallowed (RFC
    /// 9309 §2.3.1.4).
    Unavailable,
}

impl RobotsStatus {
    /// `fetched`, `absent` or `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            RobotsStatus::Fetched => "fetched",
            RobotsStatus::Absent => "absent",
            RobotsStatus::Unavailable => "unavailable",
        }
    }

    /// Whether the status is a usable answer (`fetched` or `absent`), i.e. a
    /// snapshot worth keeping when a later refresh fails.
    pub fn is_good(self) -> bool {
        matches!(self, RobotsStatus::Fetched | RobotsStatus::Absent)
    }
}

/// The redirects followed to get a robots.txt (RFC 9309 §2.3.1.2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedirectDetails {
    /// Every redirect target followed, in order (absolute URLs). Empty when
    /// the first response was not a redirect.
    pub hops: Vec<String>,
    /// The URL whose response was used, when a redirect was followed.
    pub final_url: Option<String>,
    /// A redirect target that was not followed: outside the configured
    /// scope (the snapshot is then `unavailable`), a sixth hop, or a URL
    /// already in the chain (then `absent`, and `gave_up` says which).
    pub refused: Option<String>,
    /// Why `refused` was not followed, e.g. `outside the same-host redirect
    /// policy`.
    pub refused_reason: Option<String>,
    /// Why the chain was given up and the rules taken as `absent` (RFC 9309
    /// §2.3.1.2); `None` when it was not (and in snapshots stored before
    /// this was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up: Option<RedirectGiveUp>,
}

/// Why a robots.txt redirect chain was given up (RFC 9309 §2.3.1.2: a
/// crawler SHOULD follow at least five consecutive redirects and MAY then
/// treat the robots.txt as unavailable in the RFC's sense, like a 4xx, as
/// Google treats it like a 404): crawlcache's `absent`, everything allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RedirectGiveUp {
    /// A sixth redirect ([`MAX_REDIRECT_HOPS`]).
    Limit,
    /// A redirect to a URL already in the chain.
    Loop,
}

impl RedirectGiveUp {
    /// The rule text of verdicts under the `absent` rules it leads to:
    /// [`RULE_REDIRECT_LIMIT`] or [`RULE_REDIRECT_LOOP`].
    pub fn rule(self) -> &'static str {
        match self {
            RedirectGiveUp::Limit => RULE_REDIRECT_LIMIT,
            RedirectGiveUp::Loop => RULE_REDIRECT_LOOP,
        }
    }
}

impl RedirectDetails {
    /// The chain as fetched, from `origin`'s robots.txt through every hop
    /// followed to the target not followed, if any:
    /// `http://a/robots.txt -> http://a/r1 -> ... -> http://a/r6`.
    pub fn chain(&self, origin: &Origin) -> String {
        let mut out = origin.robots_url();
        for url in self.hops.iter().chain(self.refused.iter()) {
            out.push_str(" -> ");
            out.push_str(url);
        }
        out
    }
}

/// One origin's robots.txt as crawlcache knows it (SPEC §4). Serialisable;
/// persisted as JSON (body in hex) by the registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Whose rules these are.
    pub origin: Origin,
    /// `fetched`, `absent` or `unavailable`.
    pub status: RobotsStatus,
    /// The body kept: the first [`MAX_ROBOTS_BYTES`] bytes of a 2xx response;
    /// empty for `absent` and `unavailable`.
    #[serde(with = "hex_body")]
    pub body: Vec<u8>,
    /// Whether the response body was longer than what was kept.
    pub truncated: bool,
    /// Lower-case hex SHA-256 of `body` (of the empty body for `absent` and
    /// `unavailable`).
    pub sha256: String,
    /// `ETag` of the response, for `If-None-Match`.
    pub etag: Option<String>,
    /// `Last-Modified` of the response, for `If-Modified-Since`.
    pub last_modified: Option<String>,
    /// When the status and body were obtained (the request time of the fetch).
    pub fetched_at: SystemTime,
    /// When they were last confirmed: `fetched_at`, or the time of the latest
    /// 304. The snapshot's age counts from here (RFC 9309 §2.4).
    pub validated_at: SystemTime,
    /// Status code of the response the status came from, if there was one.
    pub http_status: Option<u16>,
    /// Redirects followed (or refused) on the fetch that produced the status.
    pub redirects: RedirectDetails,
    /// Outcome of the most recent attempt (which may have failed while this
    /// snapshot was kept).
    pub last_outcome: FetchOutcome,
    /// When the most recent attempt was made.
    pub last_attempt: SystemTime,
    /// Consecutive failed attempts since the last success (0 after one).
    pub failures: u32,
    /// `Retry-After` of the last failed attempt, as an absolute time.
    pub retry_after: Option<SystemTime>,
    /// No automatic retry before this time (back-off after a failure, never
    /// sooner than `retry_after`). `None` after a success.
    pub next_retry: Option<SystemTime>,
    /// The `User-Agent` the status and body were fetched under (C43,
    /// [`crate::identity`]); `None` in snapshots stored before it was
    /// recorded.
    #[serde(default)]
    pub fetched_as: Option<String>,
    /// The content codings the body arrived with, as listed in its
    /// `Content-Encoding` (`gzip, br`), all undone: `body` and `sha256` are
    /// of the decoded text (C40). `None` when it came as is.
    #[serde(default)]
    pub content_encoding: Option<String>,
}

/// Lower-case hex SHA-256 of `body`.
pub fn sha256_hex(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

mod hex_body {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(b))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        hex::decode(s).map_err(serde::de::Error::custom)
    }
}

impl Snapshot {
    /// A snapshot of `origin` taken at `now` with `status` and `body`
    /// (kept whole; the fetch truncates to [`MAX_ROBOTS_BYTES`] before),
    /// after one attempt whose outcome was `last_outcome` (its status code,
    /// if it has one, is `http_status`): no validators, no redirects, no
    /// content coding, no retry scheduled; one failure counted when the
    /// status is [`RobotsStatus::Unavailable`]. The other fields are set by
    /// name over it (`Snapshot { etag, ..Snapshot::new(...) }`).
    pub fn new(
        origin: Origin,
        status: RobotsStatus,
        body: Vec<u8>,
        last_outcome: FetchOutcome,
        now: SystemTime,
    ) -> Snapshot {
        let http_status = match &last_outcome {
            FetchOutcome::Ok { status }
            | FetchOutcome::ClientError { status }
            | FetchOutcome::ServerError { status }
            | FetchOutcome::UnexpectedStatus { status } => Some(*status),
            FetchOutcome::NotModified => Some(304),
            FetchOutcome::TooManyRequests => Some(429),
            _ => None,
        };
        Snapshot {
            origin,
            status,
            sha256: sha256_hex(&body),
            body,
            truncated: false,
            etag: None,
            last_modified: None,
            fetched_at: now,
            validated_at: now,
            http_status,
            redirects: RedirectDetails::default(),
            last_outcome,
            last_attempt: now,
            failures: u32::from(status == RobotsStatus::Unavailable),
            retry_after: None,
            next_retry: None,
            fetched_as: None,
            content_encoding: None,
        }
    }

    /// The time since the snapshot was last validated, in whole
    /// nanoseconds; zero when `now` is earlier (clock set back).
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.validated_at).unwrap_or(Duration::ZERO)
    }

    /// The snapshot's state at `now` under `windows` ([`Windows::state`]).
    pub fn state(&self, windows: &Windows, now: SystemTime) -> State {
        windows.state(self.age(now))
    }

    /// Whether a background (automatic) refresh should start at `now`:
    /// never before `next_retry` (back-off and `Retry-After`, RFC 9309
    /// §2.3.1.4 / RFC 9110 §10.2.3); then always for an `unavailable`
    /// snapshot, and for a good one once it is no longer fresh (RFC 9309 §2.4).
    pub fn refresh_due(&self, windows: &Windows, now: SystemTime) -> bool {
        if let Some(next) = self.next_retry {
            if now < next {
                return false;
            }
        }
        match self.status {
            RobotsStatus::Unavailable => true,
            _ => self.state(windows, now) != State::Fresh,
        }
    }

    /// The rule text of verdicts while this snapshot is `unavailable`:
    /// [`RULE_REDIRECT_REFUSED`] when a redirect was refused (outside the
    /// scope), else [`RULE_UNAVAILABLE`].
    pub fn unavailable_rule(&self) -> &'static str {
        if self.redirects.refused.is_some() && self.redirects.gave_up.is_none() {
            RULE_REDIRECT_REFUSED
        } else {
            RULE_UNAVAILABLE
        }
    }

    /// The rule text of verdicts while this snapshot is `absent` because its
    /// redirect chain was given up ([`RedirectGiveUp::rule`]); `None`
    /// otherwise (a 4xx: no rule decides).
    pub fn absent_rule(&self) -> Option<&'static str> {
        match self.status {
            RobotsStatus::Absent => self.redirects.gave_up.map(RedirectGiveUp::rule),
            _ => None,
        }
    }

    /// Why the verdicts under this snapshot are not a rule of the file, for
    /// `Robots-Status` (`reason`), the audit line and refusals:
    /// - `unavailable`: the cause of the failure and what fixes it
    ///   ([`FetchOutcome::failure_cause`]);
    /// - `absent` after a redirect chain was given up: the limit or the
    ///   loop, and the chain ([`RedirectDetails::chain`]).
    ///
    /// `None` for `fetched` and for an ordinary `absent` (a 4xx).
    pub fn verdict_reason(&self) -> Option<String> {
        match (self.status, self.redirects.gave_up) {
            (RobotsStatus::Unavailable, _) => Some(
                self.last_outcome.failure_cause().unwrap_or_else(|| self.last_outcome.to_string()),
            ),
            (RobotsStatus::Absent, Some(why)) => {
                let what = match why {
                    RedirectGiveUp::Limit => format!("more than {MAX_REDIRECT_HOPS} redirects"),
                    RedirectGiveUp::Loop => "a redirect loop".to_string(),
                };
                Some(format!(
                    "{what}: {}; the robots.txt is treated as absent, everything allowed (RFC 9309 section 2.3.1.2)",
                    self.redirects.chain(&self.origin)
                ))
            }
            _ => None,
        }
    }

    /// The warning that goes with every verdict under this snapshot (the
    /// audit line's `robots_warning`): the identity warning of a 401/403
    /// ([`Snapshot::identity_warning`]), else the [`Snapshot::verdict_reason`].
    pub fn warning(&self) -> Option<String> {
        self.identity_warning().or_else(|| self.verdict_reason())
    }

    /// The warning for a robots.txt that answered 401 or 403 (C43): RFC
    /// 9309 §2.3.1.3 makes that "no rules", which is also what a firewall
    /// refusing the fetch identity looks like. `None` otherwise.
    pub fn identity_warning(&self) -> Option<String> {
        match (self.status, self.http_status) {
            (RobotsStatus::Absent, Some(code @ (401 | 403))) => Some(format!(
                "robots.txt answered {code} to {}: rules treated as allow-all (RFC 9309 2.3.1.3); check the crawler's identity",
                self.fetched_as.as_deref().unwrap_or("(identity not recorded)")
            )),
            _ => None,
        }
    }

    /// The validators for a conditional refresh (RFC 9110 §13.1.1, §13.1.3),
    /// only for a `fetched` snapshot that has at least one: `absent` and
    /// `unavailable` snapshots are always fetched unconditionally.
    pub fn validators(&self) -> Option<Validators> {
        if self.status != RobotsStatus::Fetched
            || (self.etag.is_none() && self.last_modified.is_none())
        {
            return None;
        }
        Some(Validators { etag: self.etag.clone(), last_modified: self.last_modified.clone() })
    }
}

/// Validators sent on a conditional robots.txt request: `If-None-Match`
/// from the stored `ETag`, `If-Modified-Since` from the stored `Last-Modified`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// The stored `ETag`, sent as `If-None-Match`.
    pub etag: Option<String>,
    /// The stored `Last-Modified`, sent as `If-Modified-Since`.
    pub last_modified: Option<String>,
}

/// The three windows of a snapshot, measured from its last validation
/// (`robots.fresh`, `robots.stale_usable`, `robots.hard_max`; per host in
/// `[robots.hosts."HOST"]`). Each bound is an age, not a length after the
/// previous one: with the defaults a snapshot is fresh below 6 h, stale but
/// usable below 24 h, degraded below 3 days, and expired from then on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Windows {
    /// Age below which the snapshot is used as is (default 6 h).
    pub fresh: Duration,
    /// Age below which a stale snapshot is still fully usable (default 24 h).
    pub stale_usable: Duration,
    /// Age from which the snapshot is expired and the host not crawlable
    /// (default 3 days).
    pub hard_max: Duration,
}

impl Default for Windows {
    fn default() -> Windows {
        Windows {
            fresh: Duration::from_secs(6 * 3600),
            stale_usable: Duration::from_secs(24 * 3600),
            hard_max: Duration::from_secs(3 * 86_400),
        }
    }
}

impl Windows {
    /// The state of a snapshot of age `age`: below `fresh` → `Fresh`, below
    /// `stale_usable` → `StaleUsable`, below `hard_max` → `StaleDegraded`,
    /// else `Expired`.
    pub fn state(&self, age: Duration) -> State {
        if age < self.fresh {
            State::Fresh
        } else if age < self.stale_usable {
            State::StaleUsable
        } else if age < self.hard_max {
            State::StaleDegraded
        } else {
            State::Expired
        }
    }
}

/// A snapshot's state (SPEC §4; RFC 9309 §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Used as is.
    Fresh,
    /// Used; a background refresh is attempted.
    StaleUsable,
    /// Still used, but old; a background refresh is attempted.
    StaleDegraded,
    /// Too old: the host is not crawlable until a refresh succeeds.
    Expired,
}

impl State {
    /// `fresh`, `stale_usable`, `stale_degraded` or `expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Fresh => "fresh",
            State::StaleUsable => "stale_usable",
            State::StaleDegraded => "stale_degraded",
            State::Expired => "expired",
        }
    }
}

/// How the rules for a request were obtained: the audit trail's
/// `disposition` and the `robots_disposition_total{disposition}` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// The request waited for the origin's first robots.txt fetch.
    Fetched,
    /// A fresh snapshot was used.
    Cached,
    /// A stale-usable snapshot was used (a background refresh runs or is
    /// scheduled).
    StaleUsable,
    /// A stale-degraded snapshot was used (likewise).
    StaleDegraded,
    /// The snapshot was expired: the host is not crawlable.
    Expired,
    /// Offline mode: the last snapshot, whatever its age (C44; the windows
    /// bound how long rules go unchecked while crawling, and offline nothing
    /// is crawled).
    Offline,
}

impl Disposition {
    /// The disposition of a request that found a snapshot in `state`.
    pub fn from_state(state: State) -> Disposition {
        match state {
            State::Fresh => Disposition::Cached,
            State::StaleUsable => Disposition::StaleUsable,
            State::StaleDegraded => Disposition::StaleDegraded,
            State::Expired => Disposition::Expired,
        }
    }

    /// `fetched`, `cached`, `stale_usable`, `stale_degraded`, `expired` or
    /// `offline`.
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Fetched => "fetched",
            Disposition::Cached => "cached",
            Disposition::StaleUsable => "stale_usable",
            Disposition::StaleDegraded => "stale_degraded",
            Disposition::Expired => "expired",
            Disposition::Offline => "offline",
        }
    }
}

/// The rule text of a verdict given while the rules are unknown.
pub const RULE_UNAVAILABLE: &str = "rules unavailable";
/// The rule text of a verdict given while the snapshot is expired.
pub const RULE_TOO_OLD: &str = "rules too old";
/// The rule text of a verdict given while the rules are unknown because a
/// redirect of the robots.txt was refused (outside `robots.redirects`).
pub const RULE_REDIRECT_REFUSED: &str = "redirect refused";
/// The rule text of a verdict (allowed) under an `absent` snapshot whose
/// redirect chain went past five hops (RFC 9309 §2.3.1.2).
pub const RULE_REDIRECT_LIMIT: &str = "redirect limit";
/// The rule text of a verdict (allowed) under an `absent` snapshot whose
/// redirect chain looped (RFC 9309 §2.3.1.2).
pub const RULE_REDIRECT_LOOP: &str = "redirect loop";

/// The verdict for `product_token` on `url` under a snapshot in `state`
/// whose body parsed into `rules`:
/// - the URL `/robots.txt` itself is always allowed (RFC 9309 §2.2.2);
/// - `unavailable` → disallowed, rule [`RULE_UNAVAILABLE`] (RFC 9309 §2.3.1.4),
///   or [`RULE_REDIRECT_REFUSED`] when a redirect was refused;
/// - expired → disallowed, rule [`RULE_TOO_OLD`] (SPEC §4);
/// - `absent` → allowed (RFC 9309 §2.3.1.3), no rule, or
///   [`RULE_REDIRECT_LIMIT`] / [`RULE_REDIRECT_LOOP`] when a redirect chain
///   was given up (§2.3.1.2);
/// - `fetched` → [`RobotsTxt::check`].
pub fn verdict_for(
    snapshot: &Snapshot,
    rules: &RobotsTxt,
    state: State,
    product_token: &str,
    url: &str,
) -> Verdict {
    if path_params_query(url) == "/robots.txt" {
        return Verdict { allowed: true, rule: None, line: None };
    }
    match (snapshot.status, state) {
        (RobotsStatus::Unavailable, _) => {
            Verdict { allowed: false, rule: Some(snapshot.unavailable_rule().into()), line: None }
        }
        (_, State::Expired) => {
            Verdict { allowed: false, rule: Some(RULE_TOO_OLD.into()), line: None }
        }
        (RobotsStatus::Absent, _) => {
            Verdict { allowed: true, rule: snapshot.absent_rule().map(Into::into), line: None }
        }
        (RobotsStatus::Fetched, _) => rules.check(product_token, url),
    }
}

/// How the proxy answers a client's own `GET /robots.txt` (SPEC §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAnswer {
    /// 200 with the kept body (`fetched`, not expired).
    Body(Vec<u8>),
    /// 404: the origin publishes no rules (`absent`, not expired).
    NotFound,
    /// 503: the rules are unknown or too old; the text says which.
    Unavailable(&'static str),
}

impl ClientAnswer {
    /// The answer for a snapshot in `state`.
    pub fn for_snapshot(snapshot: &Snapshot, state: State) -> ClientAnswer {
        match (snapshot.status, state) {
            (RobotsStatus::Unavailable, _) => {
                ClientAnswer::Unavailable(snapshot.unavailable_rule())
            }
            (_, State::Expired) => ClientAnswer::Unavailable(RULE_TOO_OLD),
            (RobotsStatus::Absent, _) => ClientAnswer::NotFound,
            (RobotsStatus::Fetched, _) => ClientAnswer::Body(snapshot.body.clone()),
        }
    }

    /// The HTTP status code: 200, 404 or 503.
    pub fn status(&self) -> u16 {
        match self {
            ClientAnswer::Body(_) => 200,
            ClientAnswer::NotFound => 404,
            ClientAnswer::Unavailable(_) => 503,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3600;

    fn t0() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    /// A snapshot of a fetched robots.txt `body` at `at` (test fixture).
    fn fetched(body: &[u8], at: SystemTime) -> Snapshot {
        let s = Snapshot::new(
            Origin::new("http", "example.org", 80),
            RobotsStatus::Fetched,
            body.to_vec(),
            FetchOutcome::Ok { status: 200 },
            at,
        );
        Snapshot { etag: Some("\"v1\"".into()), fetched_as: Some("Bot/1.0".into()), ..s }
    }

    #[test]
    fn rfc9309_2_4_window_transitions_with_default_windows() {
        let w = Windows::default();
        let s = fetched(b"User-agent: *\nDisallow: /x\n", t0());
        assert_eq!(s.state(&w, t0() + Duration::from_secs(H)), State::Fresh);
        assert_eq!(s.state(&w, t0() + Duration::from_secs(12 * H)), State::StaleUsable);
        assert_eq!(s.state(&w, t0() + Duration::from_secs(48 * H)), State::StaleDegraded);
        assert_eq!(s.state(&w, t0() + Duration::from_secs(96 * H)), State::Expired);
        // Bounds: each window ends exactly at its age.
        assert_eq!(w.state(Duration::from_secs(6 * H)), State::StaleUsable);
        assert_eq!(w.state(Duration::from_secs(24 * H)), State::StaleDegraded);
        assert_eq!(w.state(Duration::from_secs(72 * H)), State::Expired);
        // A clock set back gives age zero, not a panic.
        assert_eq!(s.age(t0() - Duration::from_secs(10)), Duration::ZERO);
    }

    #[test]
    fn refresh_due_only_after_fresh_and_never_before_next_retry() {
        let w = Windows::default();
        let mut s = fetched(b"", t0());
        assert!(!s.refresh_due(&w, t0() + Duration::from_secs(H)));
        assert!(s.refresh_due(&w, t0() + Duration::from_secs(7 * H)));
        s.next_retry = Some(t0() + Duration::from_secs(8 * H));
        assert!(!s.refresh_due(&w, t0() + Duration::from_secs(7 * H)));
        assert!(s.refresh_due(&w, t0() + Duration::from_secs(8 * H)));
        s.status = RobotsStatus::Unavailable;
        s.next_retry = None;
        assert!(s.refresh_due(&w, t0()), "unavailable: retry whenever the back-off allows");
    }

    #[test]
    fn verdicts_by_status_and_state() {
        let body = b"User-agent: *\nDisallow: /private\n";
        let rules = RobotsTxt::parse(body);
        let mut s = fetched(body, t0());
        let v = verdict_for(&s, &rules, State::Fresh, "Bot", "http://example.org/private/a");
        assert_eq!(
            v,
            Verdict { allowed: false, rule: Some("Disallow: /private".into()), line: Some(2) }
        );
        assert!(verdict_for(&s, &rules, State::StaleDegraded, "Bot", "/public").allowed);
        let v = verdict_for(&s, &rules, State::Expired, "Bot", "/public");
        assert_eq!(v, Verdict { allowed: false, rule: Some(RULE_TOO_OLD.into()), line: None });
        // RFC 9309 §2.2.2: /robots.txt is always allowed, even when expired.
        assert!(
            verdict_for(&s, &rules, State::Expired, "Bot", "http://example.org/robots.txt").allowed
        );
        s.status = RobotsStatus::Absent;
        assert_eq!(
            verdict_for(&s, &rules, State::Fresh, "Bot", "/private"),
            Verdict { allowed: true, rule: None, line: None }
        );
        s.status = RobotsStatus::Unavailable;
        let v = verdict_for(&s, &rules, State::Fresh, "Bot", "/public");
        assert_eq!(v, Verdict { allowed: false, rule: Some(RULE_UNAVAILABLE.into()), line: None });
    }

    #[test]
    fn client_answers() {
        let mut s = fetched(b"User-agent: *\n", t0());
        assert_eq!(
            ClientAnswer::for_snapshot(&s, State::Fresh),
            ClientAnswer::Body(b"User-agent: *\n".to_vec())
        );
        assert_eq!(ClientAnswer::for_snapshot(&s, State::Expired).status(), 503);
        s.status = RobotsStatus::Absent;
        assert_eq!(ClientAnswer::for_snapshot(&s, State::StaleUsable).status(), 404);
        s.status = RobotsStatus::Unavailable;
        assert_eq!(ClientAnswer::for_snapshot(&s, State::Fresh).status(), 503);
    }

    #[test]
    fn origins_from_urls() {
        assert_eq!(
            Origin::from_url("http://Example.ORG/a?b"),
            Some(Origin::new("http", "example.org", 80))
        );
        assert_eq!(
            Origin::from_url("HTTPS://example.org:8443"),
            Some(Origin::new("https", "example.org", 8443))
        );
        assert_eq!(
            Origin::from_url("https://u:p@example.org./x"),
            Some(Origin::new("https", "example.org", 443))
        );
        assert_eq!(
            Origin::from_url("http://[::1]:8080/x"),
            Some(Origin::new("http", "[::1]", 8080))
        );
        assert_eq!(Origin::from_url("http://[::1]/x"), Some(Origin::new("http", "[::1]", 80)));
        assert_eq!(
            Origin::from_url("example.org:81"),
            Some(Origin::new("http", "example.org", 81))
        );
        assert_eq!(Origin::from_url("ftp://example.org/"), None);
        assert_eq!(Origin::from_url("http://example.org:99999/"), None);
        assert_eq!(Origin::from_url("http:///x"), None);
        let o = Origin::new("https", "example.org", 443);
        assert_eq!(o.robots_url(), "https://example.org/robots.txt");
        assert_eq!(o.key(), "https://example.org:443");
        assert_eq!(Origin::new("http", "h", 8080).robots_url(), "http://h:8080/robots.txt");
    }

    #[test]
    fn snapshots_stored_before_identity_and_coding_were_recorded_still_load() {
        let s = fetched(b"User-agent: *\n", t0());
        let mut j: serde_json::Value = serde_json::to_value(&s).unwrap();
        let m = j.as_object_mut().unwrap();
        m.remove("fetched_as");
        m.remove("content_encoding");
        let back: Snapshot = serde_json::from_value(j).unwrap();
        assert_eq!((back.fetched_as, back.content_encoding), (None, None));
        assert_eq!(back.body, s.body);
    }

    #[test]
    fn a_refused_redirect_says_so_in_the_verdict_and_the_client_answer_c49() {
        let rules = RobotsTxt::parse(b"");
        let mut s = fetched(b"", t0());
        s.status = RobotsStatus::Unavailable;
        assert_eq!(s.unavailable_rule(), RULE_UNAVAILABLE);
        s.redirects.refused = Some("http://elsewhere.test/robots.txt".into());
        let v = verdict_for(&s, &rules, State::Fresh, "Bot", "/public");
        assert_eq!(
            v,
            Verdict { allowed: false, rule: Some(RULE_REDIRECT_REFUSED.into()), line: None }
        );
        assert_eq!(
            ClientAnswer::for_snapshot(&s, State::Fresh),
            ClientAnswer::Unavailable(RULE_REDIRECT_REFUSED)
        );
    }

    #[test]
    fn a_401_or_403_robots_txt_is_flagged_with_the_identity_c43() {
        let mut s = fetched(b"", t0());
        assert_eq!(s.identity_warning(), None);
        s.status = RobotsStatus::Absent;
        s.http_status = Some(404);
        assert_eq!(s.identity_warning(), None, "a 404 is an ordinary absent robots.txt");
        for code in [401, 403] {
            s.http_status = Some(code);
            assert_eq!(
                s.identity_warning().as_deref(),
                Some(format!("robots.txt answered {code} to Bot/1.0: rules treated as allow-all (RFC 9309 2.3.1.3); check the crawler's identity").as_str())
            );
        }
    }

    #[test]
    fn snapshot_round_trips_through_json() {
        let mut s = fetched(&[0u8, 0xff, b'a'], t0());
        s.redirects.hops.push("http://example.org/r".into());
        s.last_outcome = FetchOutcome::Connect { detail: "refused".into() };
        s.content_encoding = Some("gzip, br".into());
        let j = serde_json::to_string(&s).unwrap();
        let back: Snapshot = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
    }
}
