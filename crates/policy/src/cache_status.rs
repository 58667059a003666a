//! The `Cache-Status` response field (RFC 9211): one list member per cache
//! that handled the response, built from what the policy decided.
//!
//! Every stage of the proxy fills one [`CacheStatus`]; it is written to the
//! response by [`CacheStatus::apply`] (the only place a `Cache-Status`
//! value is built), and the audit line and the metrics read the struct
//! ([`CacheStatus::outcome`]), never the header.
//!
//! ```text
//! crawlcache; hit; ttl=120
//! crawlcache; fwd=stale; fwd-status=304; ttl=60
//! crawlcache; fwd=uri-miss; stored
//! ```

use std::fmt::Write as _;

/// The cache name crawlcache uses in `Cache-Status`.
pub const CACHE_NAME: &str = "crawlcache";

/// Why the request went forward (RFC 9211 section 2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fwd {
    /// Configured to bypass the cache (e.g. a tunnelled host).
    Bypass,
    /// The method is not cacheable.
    Method,
    /// No stored response for the URI.
    UriMiss,
    /// Stored responses for the URI, none matching the Vary secondary key.
    VaryMiss,
    /// No stored response (when URI and Vary misses are not told apart).
    Miss,
    /// The request's directives (e.g. `no-cache`, `max-age`) required going forward.
    Request,
    /// The stored response was stale (or had to be validated).
    Stale,
    /// Only part of the response was stored.
    Partial,
}

impl Fwd {
    /// The parameter value, as registered by RFC 9211.
    pub fn as_str(self) -> &'static str {
        match self {
            Fwd::Bypass => "bypass",
            Fwd::Method => "method",
            Fwd::UriMiss => "uri-miss",
            Fwd::VaryMiss => "vary-miss",
            Fwd::Miss => "miss",
            Fwd::Request => "request",
            Fwd::Stale => "stale",
            Fwd::Partial => "partial",
        }
    }
}

/// The `detail` parameter (RFC 9211 section 2.8): why the cache answered
/// as it did, as an RFC 8941 token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Offline mode: served from the store whatever its age, or nothing stored.
    Offline,
    /// Served stale while one background revalidation runs (RFC 5861 section 3).
    StaleWhileRevalidate,
    /// Served stale because the origin answered with an error (RFC 5861 section 4).
    StaleIfError,
    /// Served stale because the origin could not be reached (RFC 9111 section 4.2.4).
    Disconnected,
    /// The request said `only-if-cached` and nothing usable was stored (RFC 9111 section 5.2.1.7).
    OnlyIfCached,
    /// A HEAD answered `200` with matching validators and freshened the stored GET (RFC 9111 section 4.3.5).
    HeadFreshened,
    /// A HEAD answered `200` with other validators: the stored GET was dropped.
    HeadMismatch,
    /// The origin failed (connection, TLS, timeout, protocol).
    UpstreamError,
    /// The request would loop back into this proxy.
    Loop,
    /// The target's scheme is not `http` or `https`.
    Scheme,
    /// Inside an intercepted tunnel, `Host` named another authority.
    Misdirected,
    /// A GET or HEAD with content: forwarded whole, never stored.
    RequestBody,
    /// The request target could not be used.
    BadTarget,
    /// The request's header fields are larger than the limit.
    HeaderTooLarge,
    /// robots.txt enforcement refused the request.
    Robots,
    /// A client's own `/robots.txt` answered from a snapshot just fetched.
    RobotsSnapshotFetched,
    /// ... from a fresh snapshot.
    RobotsSnapshotCached,
    /// ... from a snapshot in its stale-usable window.
    RobotsSnapshotStaleUsable,
    /// ... from a snapshot in its stale-degraded window.
    RobotsSnapshotStaleDegraded,
    /// ... from an expired snapshot.
    RobotsSnapshotExpired,
    /// A certificate for the intercepted host could not be made.
    Tls,
    /// Not stored: only GET responses are stored (RFC 9111 section 3).
    Method,
    /// Not stored: the status is not final, is 206 / 304, or is not understood.
    Status,
    /// Not stored: `no-store` (RFC 9111 section 5.2.1.5, 5.2.2.5).
    NoStore,
    /// Not stored: `private` in a shared cache (section 5.2.2.7).
    Private,
    /// Not stored: the request carried `Authorization` (section 3.5).
    Authorization,
    /// Not stored: no explicit freshness and not heuristically cacheable (section 3, 4.2.2).
    NoFreshnessInformation,
    /// Not stored: `Vary: *` (section 4.1).
    VaryStar,
    /// Not stored: larger than `cache.max_object_size`.
    TooLarge,
    /// Not stored: the store failed (e.g. a full disk).
    StoreError,
    /// A per-URL policy rule decided (`[[cache.rules]]`).
    Rule,
    /// Served from the fleet tier: a local miss found in the fleet's shared
    /// store, copied into the local store (fleet mode).
    Fleet,
    /// The request applies a transfer coding other than `chunked` (501,
    /// RFC 9112 section 6.1).
    TransferCoding,
    /// A protocol upgrade (`Upgrade: websocket`): relayed to the origin
    /// untouched after its `101`, never stored.
    Upgrade,
    /// An OPTIONS with `Max-Forwards: 0` answered by crawlcache itself, or
    /// one with an invalid `Max-Forwards` refused (400); not forwarded
    /// (RFC 9110 section 7.6.2).
    MaxForwards,
    /// A TRACE, refused with 405 and never forwarded (its echo would show
    /// the request's credentials to the page that sent it).
    Trace,
}

impl Detail {
    /// The token sent as `detail=` (lower-case words joined by `-`).
    pub fn as_str(self) -> &'static str {
        match self {
            Detail::Offline => "offline",
            Detail::StaleWhileRevalidate => "stale-while-revalidate",
            Detail::StaleIfError => "stale-if-error",
            Detail::Disconnected => "disconnected",
            Detail::OnlyIfCached => "only-if-cached",
            Detail::HeadFreshened => "head-freshened",
            Detail::HeadMismatch => "head-mismatch",
            Detail::UpstreamError => "upstream-error",
            Detail::Loop => "loop",
            Detail::Scheme => "scheme",
            Detail::Misdirected => "misdirected",
            Detail::RequestBody => "request-body",
            Detail::BadTarget => "bad-target",
            Detail::HeaderTooLarge => "header-too-large",
            Detail::Robots => "robots",
            Detail::RobotsSnapshotFetched => "robots-snapshot-fetched",
            Detail::RobotsSnapshotCached => "robots-snapshot-cached",
            Detail::RobotsSnapshotStaleUsable => "robots-snapshot-stale-usable",
            Detail::RobotsSnapshotStaleDegraded => "robots-snapshot-stale-degraded",
            Detail::RobotsSnapshotExpired => "robots-snapshot-expired",
            Detail::Tls => "tls",
            Detail::Method => "method",
            Detail::Status => "status",
            Detail::NoStore => "no-store",
            Detail::Private => "private",
            Detail::Authorization => "authorization",
            Detail::NoFreshnessInformation => "no-freshness-information",
            Detail::VaryStar => "vary-star",
            Detail::TooLarge => "too-large",
            Detail::StoreError => "store-error",
            Detail::Rule => "rule",
            Detail::Fleet => "fleet",
            Detail::TransferCoding => "transfer-coding",
            Detail::Upgrade => "upgrade",
            Detail::MaxForwards => "max-forwards",
            Detail::Trace => "trace",
        }
    }
}

/// What happened to a request, for metrics and logs: each request counts
/// in exactly one class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Served from the store without contacting the origin, fresh.
    Hit,
    /// Served from the store stale (stale-while-revalidate, stale-if-error,
    /// disconnected, `max-stale`, offline).
    Stale,
    /// Served from the store after the origin answered `304`.
    Revalidated,
    /// The origin's full response was forwarded (a miss, or a validation
    /// that got a new response).
    Miss,
    /// A method the cache does not serve, passed through.
    Pass,
    /// Declined by crawlcache by policy and answered by itself: robots.txt
    /// disallowed, `only-if-cached` or offline with nothing stored (504),
    /// overload (503), a request it does not forward (4xx, 508 loop).
    /// [`CacheStatus::outcome`] also puts errors here; see
    /// [`CacheStatus::outcome_for`].
    Refused,
    /// Answered by crawlcache itself because something failed: the origin
    /// could not be reached, timed out or failed TLS (502, 504), the store
    /// failed, an internal error (a 5xx of its own other than 503 and a
    /// refusal's 504). Only [`CacheStatus::outcome_for`] tells it apart.
    Error,
}

impl Outcome {
    /// Lower-case name, as used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Stale => "stale",
            Outcome::Revalidated => "revalidated",
            Outcome::Miss => "miss",
            Outcome::Pass => "pass",
            Outcome::Refused => "refused",
            Outcome::Error => "error",
        }
    }
}

/// One `Cache-Status` list member.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStatus {
    /// Served from the cache without going forward (`hit`).
    pub hit: bool,
    /// Why the request went forward, if it did (`fwd`).
    pub fwd: Option<Fwd>,
    /// The status of the forward response, e.g. 304 (`fwd-status`).
    pub fwd_status: Option<u16>,
    /// Freshness lifetime minus current age in seconds; negative when stale (`ttl`).
    pub ttl: Option<i64>,
    /// The forward response was stored (`stored`).
    pub stored: bool,
    /// The request was collapsed into another one's forward request (`collapsed`).
    pub collapsed: bool,
    /// The cache key (`key`), when useful for debugging.
    pub key: Option<String>,
    /// Implementation detail, e.g. `stale-if-error` or `offline` (`detail`).
    pub detail: Option<Detail>,
    /// Not sent: the response served from the store was stale.
    pub served_stale: bool,
    /// The policy rule (`[[cache.rules]]`) in force, when one matched:
    /// shown in `detail` (SPEC section 6).
    pub rule: Option<String>,
}

impl CacheStatus {
    /// A hit with its remaining freshness (`Decision::ttl`).
    pub fn hit(ttl: i64) -> CacheStatus {
        CacheStatus { hit: true, ttl: Some(ttl), ..CacheStatus::default() }
    }

    /// A forward for `why`.
    pub fn forward(why: Fwd) -> CacheStatus {
        CacheStatus { fwd: Some(why), ..CacheStatus::default() }
    }

    /// The same with `detail`.
    pub fn with_detail(mut self, detail: Detail) -> CacheStatus {
        self.detail = Some(detail);
        self
    }

    /// The class this request counts in (see [`Outcome`]).
    pub fn outcome(&self) -> Outcome {
        if self.hit {
            return if self.fwd_status == Some(304) {
                Outcome::Revalidated
            } else if self.served_stale {
                Outcome::Stale
            } else {
                Outcome::Hit
            };
        }
        // `fwd=request` is a validation the request's directives made
        // (RFC 9211 section 2.2), unless the request was passed through for
        // its body (`detail=request-body`).
        let passed_through = self.fwd == Some(Fwd::Method)
            || (self.fwd == Some(Fwd::Request) && self.detail == Some(Detail::RequestBody));
        match (self.fwd, self.fwd_status) {
            (Some(_), Some(_)) if passed_through => Outcome::Pass,
            (Some(Fwd::Stale | Fwd::Request), Some(304)) => Outcome::Revalidated,
            (Some(_), Some(_)) => Outcome::Miss,
            _ => Outcome::Refused,
        }
    }

    /// The class of a request answered with `response_status`: as
    /// [`CacheStatus::outcome`], with the answers crawlcache made itself
    /// split into [`Outcome::Refused`] (declined by policy) and
    /// [`Outcome::Error`] (something failed). A failure is an origin or
    /// certificate error (`detail=upstream-error`, `detail=tls`), a store
    /// error, or any other 5xx of crawlcache's own except 503 (overload)
    /// and the 504 of `only-if-cached` or an offline miss.
    pub fn outcome_for(&self, response_status: u16) -> Outcome {
        let outcome = self.outcome();
        if outcome != Outcome::Refused {
            return outcome;
        }
        let failed = match self.detail {
            Some(Detail::UpstreamError | Detail::Tls | Detail::StoreError) => true,
            Some(Detail::OnlyIfCached | Detail::Offline | Detail::Robots | Detail::Loop) => false,
            _ => response_status >= 500 && response_status != 503,
        };
        if failed {
            Outcome::Error
        } else {
            Outcome::Refused
        }
    }

    /// Sets `Cache-Status` on `headers` to this member, named `crawlcache`,
    /// and returns the value set (for the audit line; shared with the
    /// next responses of this thread that carry the same status).
    pub fn apply(&self, headers: &mut http::HeaderMap) -> std::sync::Arc<str> {
        thread_local! {
            /// The last status applied on this thread and its field value:
            /// consecutive responses mostly carry the same one.
            static LAST: std::cell::RefCell<Option<(CacheStatus, std::sync::Arc<str>, http::HeaderValue)>> = const { std::cell::RefCell::new(None) };
        }
        let name = http::header::HeaderName::from_static("cache-status");
        let reused = LAST
            .try_with(|l| {
                l.try_borrow().ok().and_then(|l| {
                    l.as_ref().filter(|(s, _, _)| s == self).map(|(_, t, v)| (t.clone(), v.clone()))
                })
            })
            .ok()
            .flatten();
        if let Some((text, value)) = reused {
            headers.insert(name, value);
            return text;
        }
        let text: std::sync::Arc<str> = self.to_field_value(CACHE_NAME).into();
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            headers.insert(name, v.clone());
            let _ = LAST.try_with(|l| {
                l.try_borrow_mut().map(|mut l| *l = Some((self.clone(), text.clone(), v)))
            });
        }
        text
    }

    /// Serializes as an RFC 8941 list member: `cache_name` (a token, or a
    /// quoted string when it is not one), then the parameters in RFC 9211 order.
    pub fn to_field_value(&self, cache_name: &str) -> String {
        let mut out = String::with_capacity(64);
        if is_token(cache_name) {
            out.push_str(cache_name);
        } else {
            push_sf_string(&mut out, cache_name);
        }
        if self.hit {
            out.push_str("; hit");
        }
        if let Some(fwd) = self.fwd {
            out.push_str("; fwd=");
            out.push_str(fwd.as_str());
        }
        if let Some(status) = self.fwd_status {
            let _ = write!(out, "; fwd-status={status}");
        }
        if let Some(ttl) = self.ttl {
            let _ = write!(out, "; ttl={ttl}");
        }
        if self.stored {
            out.push_str("; stored");
        }
        if self.collapsed {
            out.push_str("; collapsed");
        }
        if let Some(key) = &self.key {
            out.push_str("; key=");
            push_sf_string(&mut out, key);
        }
        match (&self.rule, self.detail) {
            (Some(rule), d) => {
                out.push_str("; detail=");
                let text = match d {
                    Some(d) if d != Detail::Rule => format!("{} rule={rule}", d.as_str()),
                    _ => format!("rule={rule}"),
                };
                push_sf_string(&mut out, &text);
            }
            (None, Some(detail)) => {
                out.push_str("; detail=");
                out.push_str(detail.as_str());
            }
            (None, None) => {}
        }
        out
    }
}

/// RFC 8941 section 3.3.4 token: ALPHA / "*" first, then tchar / ":" / "/".
fn is_token(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'*' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b))
}

/// RFC 8941 section 3.3.3 sf-string; characters outside printable ASCII become `?`.
fn push_sf_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 46: an origin that cannot be reached (502) or times out (504)
    /// is an error; `only-if-cached` or an offline miss (504), robots.txt
    /// (403) and overload (503) are refusals; the proxy's own 500 is an
    /// error; a forwarded origin 5xx stays a miss.
    #[test]
    fn errors_are_told_apart_from_refusals() {
        let upstream = CacheStatus::forward(Fwd::UriMiss).with_detail(Detail::UpstreamError);
        assert_eq!(
            (upstream.outcome(), upstream.outcome_for(502), upstream.outcome_for(504)),
            (Outcome::Refused, Outcome::Error, Outcome::Error)
        );
        assert_eq!(
            CacheStatus::forward(Fwd::Miss).with_detail(Detail::OnlyIfCached).outcome_for(504),
            Outcome::Refused
        );
        assert_eq!(
            CacheStatus::forward(Fwd::Miss).with_detail(Detail::Offline).outcome_for(504),
            Outcome::Refused
        );
        assert_eq!(
            CacheStatus::forward(Fwd::Bypass).with_detail(Detail::Robots).outcome_for(403),
            Outcome::Refused
        );
        assert_eq!(CacheStatus::default().outcome_for(503), Outcome::Refused);
        assert_eq!(CacheStatus::default().outcome_for(500), Outcome::Error);
        assert_eq!(CacheStatus::default().outcome_for(400), Outcome::Refused);
        let origin_500 = CacheStatus {
            fwd: Some(Fwd::UriMiss),
            fwd_status: Some(500),
            ..CacheStatus::default()
        };
        assert_eq!(origin_500.outcome_for(500), Outcome::Miss);
        assert_eq!(Outcome::Error.as_str(), "error");
    }

    #[test]
    fn serializes_the_spec_examples() {
        assert_eq!(CacheStatus::hit(120).to_field_value("crawlcache"), "crawlcache; hit; ttl=120");
        let revalidated = CacheStatus { fwd_status: Some(304), ..CacheStatus::forward(Fwd::Stale) };
        assert_eq!(
            revalidated.to_field_value("crawlcache"),
            "crawlcache; fwd=stale; fwd-status=304"
        );
        let stored = CacheStatus { stored: true, ..CacheStatus::forward(Fwd::UriMiss) };
        assert_eq!(stored.to_field_value("crawlcache"), "crawlcache; fwd=uri-miss; stored");
    }

    #[test]
    fn strings_are_quoted_and_escaped() {
        let s = CacheStatus {
            key: Some("http://e/\"\u{e9}".into()),
            ..CacheStatus::hit(-5).with_detail(Detail::StaleIfError)
        };
        assert_eq!(
            s.to_field_value("my cache"),
            "\"my cache\"; hit; ttl=-5; key=\"http://e/\\\"?\"; detail=stale-if-error"
        );
    }
}
