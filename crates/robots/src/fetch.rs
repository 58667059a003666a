//! Fetching robots.txt: redirects (RFC 9309 §2.3.1.2), mapping responses
//! and failures to a snapshot status (§2.3.1.1, §2.3.1.3, §2.3.1.4), and the
//! retry back-off.
//!
//! The network is behind [`RobotsFetch`], so everything here runs in tests
//! without sockets. [`fetch_robots`] follows redirects through it;
//! [`apply_fetch`] is the pure decision that turns the result (and the
//! previous snapshot, if any) into the snapshot to use from now on.

use crate::pattern::path_params_query;
use crate::snapshot::{
    sha256_hex, FetchOutcome, Origin, RedirectDetails, RedirectGiveUp, RobotsStatus, Snapshot,
    State, Validators, Windows, MAX_ROBOTS_BYTES,
};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

pub use crate::snapshot::MAX_REDIRECT_HOPS;

/// One robots.txt response as the fetcher saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawRobotsResponse {
    /// HTTP status code.
    pub status: u16,
    /// `Location` field (as sent; may be relative).
    pub location: Option<String>,
    /// `ETag` field.
    pub etag: Option<String>,
    /// `Last-Modified` field.
    pub last_modified: Option<String>,
    /// `Retry-After` field (delay-seconds or an HTTP-date, RFC 9110 §10.2.3).
    pub retry_after: Option<String>,
    /// The body with its content codings undone (RFC 9110 §8.4; C40), at
    /// most [`MAX_ROBOTS_BYTES`] bytes of decoded text (the fetcher stops
    /// decoding there; extra bytes given here are dropped).
    pub body: Vec<u8>,
    /// Whether the decoded body was cut at [`MAX_ROBOTS_BYTES`].
    pub truncated: bool,
    /// The `Content-Encoding` codings that were undone, as listed (`gzip,
    /// br`); `None` when the body came as is.
    pub content_encoding: Option<String>,
}

/// A transport failure: no HTTP response was received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// No response within the configured time.
    Timeout,
    /// The host name did not resolve.
    Dns(String),
    /// The connection could not be made (refused, reset).
    Connect(String),
    /// The TLS handshake failed (most often: the origin's certificate could
    /// not be verified); the message names the certificate problem.
    Tls(String),
    /// The body arrived, but its content coding is unknown or its bytes do
    /// not decode; the message names the coding (C40).
    Undecodable(String),
    /// Anything else.
    Other(String),
}

/// The future a [`RobotsFetch`] returns.
pub type FetchFuture = Pin<Box<dyn Future<Output = Result<RawRobotsResponse, FetchError>> + Send>>;

/// The network side of robots.txt fetching, implemented over the proxy's
/// upstream client (and by scripted fakes in tests).
///
/// `fetch` sends one `GET url` — never following redirects itself — with
/// `User-Agent: user_agent` (the implementation's own default when empty;
/// see [`crate::identity`]), `If-None-Match` / `If-Modified-Since` from
/// `validators` when given, and `Accept-Encoding` naming only codings it
/// can undo; it returns the body decoded ([`crate::decode`]), at most
/// [`MAX_ROBOTS_BYTES`] of decoded text. A body that does not decode is
/// [`FetchError::Undecodable`], never rules.
pub trait RobotsFetch: Send + Sync + 'static {
    /// One GET of `url` (absolute) as `user_agent`. See the trait docs.
    fn fetch(&self, url: &str, validators: Option<Validators>, user_agent: &str) -> FetchFuture;
}

/// Which redirects of a robots.txt request are followed (`robots.redirects`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RedirectPolicy {
    /// The host must stay the same; scheme and port may change (opt-in).
    SameHost,
    /// Scheme, host and port must stay the same (opt-in).
    SameOrigin,
    /// Any `http`/`https` target, across hosts (default; RFC 9309
    /// §2.3.1.2, as Google does: apex ↔ `www`, http ↔ https, a CDN host).
    /// The rules still apply to the original origin only.
    #[default]
    Any,
}

/// A text [`RedirectPolicy::parse`] does not know (trimmed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a redirect policy (use same-host, same-origin or any)")]
pub struct UnknownRedirectPolicy(pub String);

impl RedirectPolicy {
    /// Parses `same-host`, `same-origin` or `any`. Errors:
    /// [`UnknownRedirectPolicy`].
    pub fn parse(s: &str) -> Result<RedirectPolicy, UnknownRedirectPolicy> {
        match s.trim() {
            "same-host" => Ok(RedirectPolicy::SameHost),
            "same-origin" => Ok(RedirectPolicy::SameOrigin),
            "any" => Ok(RedirectPolicy::Any),
            other => Err(UnknownRedirectPolicy(other.to_string())),
        }
    }

    /// `same-host`, `same-origin` or `any`.
    pub fn as_str(self) -> &'static str {
        match self {
            RedirectPolicy::SameHost => "same-host",
            RedirectPolicy::SameOrigin => "same-origin",
            RedirectPolicy::Any => "any",
        }
    }

    /// Whether a redirect of `origin`'s robots.txt to `target` may be
    /// followed. Scope is always judged against the origin whose rules are
    /// wanted, not the previous hop.
    pub fn allows(self, origin: &Origin, target: &Origin) -> bool {
        match self {
            RedirectPolicy::SameHost => target.host == origin.host,
            RedirectPolicy::SameOrigin => target == origin,
            RedirectPolicy::Any => true,
        }
    }
}

/// Resolves a `Location` value against the URL it answered (RFC 9110
/// §10.2.2, RFC 3986 §5.2, through [`crawlcache_base::url::resolve`]). The
/// fragment is dropped. `None` when the value is empty, `base` is not
/// absolute, or the result is not an `http`/`https` origin.
pub fn resolve_location(base: &str, location: &str) -> Option<String> {
    let location = location.trim();
    if location.split('#').next().unwrap_or("").is_empty() {
        return None;
    }
    let resolved = crawlcache_base::url::resolve(base, location)?;
    Origin::from_url(&resolved)?;
    let lower = resolved.to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://")).then_some(resolved)
}

/// Parses `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date,
/// as an absolute time relative to `now`. `None` when malformed.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<SystemTime> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        let secs: u64 = v.parse().unwrap_or(u64::MAX).min(10 * 365 * 86_400);
        return now.checked_add(Duration::from_secs(secs));
    }
    httpdate::parse_http_date(v).ok()
}

/// Retry back-off after failed robots.txt fetches: the first retry after
/// `initial`, each further one twice as late, capped at `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failure (default 1 min).
    pub initial: Duration,
    /// Longest delay (default 1 h).
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { initial: Duration::from_secs(60), max: Duration::from_secs(3600) }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (1 → `initial`,
    /// 2 → twice that, ...), at most `max`. Zero failures → zero.
    pub fn delay(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(failures.saturating_sub(1).min(30)).unwrap_or(u32::MAX);
        self.initial.checked_mul(factor).unwrap_or(self.max).min(self.max)
    }

    /// The earliest automatic retry after `failures` consecutive failures
    /// at `now`: `now + delay(failures)`, and never before `retry_after`
    /// (RFC 9110 §10.2.3).
    pub fn next_retry(
        &self,
        failures: u32,
        retry_after: Option<SystemTime>,
        now: SystemTime,
    ) -> SystemTime {
        let backoff = now.checked_add(self.delay(failures)).unwrap_or(now);
        match retry_after {
            Some(r) if r > backoff => r,
            _ => backoff,
        }
    }
}

/// What [`fetch_robots`] got: the outcome, the final response if there was
/// one, the redirects and the identity used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResult {
    /// How the attempt ended.
    pub outcome: FetchOutcome,
    /// The last response received (the one the outcome is about), if any.
    pub response: Option<RawRobotsResponse>,
    /// Redirects followed or refused.
    pub redirects: RedirectDetails,
    /// The `User-Agent` sent on every hop (`None`: the fetcher's default).
    pub fetched_as: Option<String>,
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// A URL as loop detection compares it: scheme and host lower-cased, the
/// port explicit, then path, params and query byte for byte (the fragment
/// is already gone).
fn chain_identity(url: &str) -> String {
    let origin = Origin::from_url(url).map(|o| o.key()).unwrap_or_default();
    format!("{origin}{}", path_params_query(url))
}

/// Fetches `origin`'s robots.txt through `fetcher` as `user_agent`
/// (empty: the fetcher's default), following up to [`MAX_REDIRECT_HOPS`]
/// redirects allowed by `policy` (RFC 9309 §2.3.1.2). `validators` and the
/// `User-Agent` are sent on every hop.
///
/// Each redirect target is judged in this order, and one that is not
/// followed is put in [`RedirectDetails::refused`] and never contacted:
/// 1. outside the policy → [`FetchOutcome::RedirectRefused`] (the rules
///    are then `unavailable`);
/// 2. a URL already in the chain (the robots.txt itself included; scheme
///    and host compared case-insensitively, default ports elided) →
///    [`FetchOutcome::RedirectLoop`], detected before fetching it again;
/// 3. a sixth redirect → [`FetchOutcome::TooManyRedirects`].
///
/// The last two give up the chain ([`RedirectDetails::gave_up`]); the rules
/// are then `absent` ([`apply_fetch`]). Never fails: every transport error
/// becomes an outcome.
pub async fn fetch_robots(
    fetcher: &dyn RobotsFetch,
    origin: &Origin,
    validators: Option<Validators>,
    policy: RedirectPolicy,
    user_agent: &str,
) -> FetchResult {
    let mut url = origin.robots_url();
    let mut redirects = RedirectDetails::default();
    let mut seen = vec![chain_identity(&url)];
    let fetched_as = (!user_agent.is_empty()).then(|| user_agent.to_string());
    loop {
        let resp = match fetcher.fetch(&url, validators.clone(), user_agent).await {
            Ok(r) => r,
            Err(e) => {
                let outcome = match e {
                    FetchError::Timeout => FetchOutcome::Timeout,
                    FetchError::Dns(d) => FetchOutcome::Dns { detail: d },
                    FetchError::Connect(d) => FetchOutcome::Connect { detail: d },
                    FetchError::Tls(d) => FetchOutcome::Tls { detail: d },
                    FetchError::Undecodable(d) => FetchOutcome::Undecodable { detail: d },
                    FetchError::Other(d) => FetchOutcome::Other { detail: d },
                };
                return FetchResult { outcome, response: None, redirects, fetched_as };
            }
        };
        if is_redirect(resp.status) {
            if let Some(target) = resp.location.as_deref().and_then(|l| resolve_location(&url, l)) {
                let target_origin = Origin::from_url(&target);
                let identity = chain_identity(&target);
                let (outcome, reason, gave_up) =
                    if !target_origin.as_ref().is_some_and(|t| policy.allows(origin, t)) {
                        (
                            FetchOutcome::RedirectRefused { to: target.clone() },
                            format!("outside the {} redirect policy", policy.as_str()),
                            None,
                        )
                    } else if seen.contains(&identity) {
                        (
                            FetchOutcome::RedirectLoop { to: target.clone() },
                            "a redirect loop: already in the chain".to_string(),
                            Some(RedirectGiveUp::Loop),
                        )
                    } else if redirects.hops.len() >= MAX_REDIRECT_HOPS {
                        (
                            FetchOutcome::TooManyRedirects { to: target.clone() },
                            format!("more than {MAX_REDIRECT_HOPS} redirects"),
                            Some(RedirectGiveUp::Limit),
                        )
                    } else {
                        seen.push(identity);
                        redirects.hops.push(target.clone());
                        redirects.final_url = Some(target.clone());
                        url = target;
                        continue;
                    };
                redirects.refused = Some(target);
                redirects.refused_reason = Some(reason);
                redirects.gave_up = gave_up;
                return FetchResult { outcome, response: Some(resp), redirects, fetched_as };
            }
        }
        let outcome = classify_status(resp.status);
        return FetchResult { outcome, response: Some(resp), redirects, fetched_as };
    }
}

/// Maps a final (non-followed) status code to an outcome: 2xx → `Ok`
/// (§2.3.1.1), 304 → `NotModified`, 429 → `TooManyRequests`, other 4xx →
/// `ClientError` (§2.3.1.3), 5xx → `ServerError` (§2.3.1.4), anything else
/// (1xx, other 3xx, a redirect without a usable `Location`, 6xx+) →
/// `UnexpectedStatus`.
pub fn classify_status(status: u16) -> FetchOutcome {
    match status {
        200..=299 => FetchOutcome::Ok { status },
        304 => FetchOutcome::NotModified,
        429 => FetchOutcome::TooManyRequests,
        400..=499 => FetchOutcome::ClientError { status },
        500..=599 => FetchOutcome::ServerError { status },
        _ => FetchOutcome::UnexpectedStatus { status },
    }
}

/// Turns a fetch attempt started at `now` into the snapshot to use from now
/// on (RFC 9309 §2.3.1, §2.4):
/// - 2xx → `fetched` with the first [`MAX_ROBOTS_BYTES`] of the body;
/// - 304 → `previous` with its age reset (same body and SHA-256); a 304
///   without a good previous snapshot is treated as unavailable;
/// - 4xx except 429 → `absent`;
/// - a redirect chain given up (more than [`MAX_REDIRECT_HOPS`], or a loop;
///   RFC 9309 §2.3.1.2 lets a crawler treat it like a 4xx, as Google does)
///   → `absent`, the chain and the reason in its redirect details;
/// - anything else (429, 5xx, transport failure, undecodable body, refused
///   redirect) → the previous snapshot when it is good (`fetched`/`absent`)
///   and not expired under `windows`, with the failure recorded and a retry
///   scheduled; otherwise a new `unavailable` snapshot. Retries follow `backoff`,
///   never before `Retry-After`.
pub fn apply_fetch(
    origin: &Origin,
    previous: Option<&Snapshot>,
    result: FetchResult,
    windows: &Windows,
    backoff: &Backoff,
    now: SystemTime,
) -> Snapshot {
    let FetchResult { outcome, response, redirects, fetched_as } = result;
    let response = response.unwrap_or_default();
    let good_previous = previous.filter(|p| p.status.is_good());
    let fresh = |status: RobotsStatus, mut body: Vec<u8>, truncated: bool| {
        let truncated = truncated || body.len() > MAX_ROBOTS_BYTES;
        body.truncate(MAX_ROBOTS_BYTES);
        Snapshot {
            origin: origin.clone(),
            status,
            sha256: sha256_hex(&body),
            body,
            truncated,
            etag: response.etag.clone(),
            last_modified: response.last_modified.clone(),
            fetched_at: now,
            validated_at: now,
            http_status: Some(response.status),
            redirects: redirects.clone(),
            last_outcome: outcome.clone(),
            last_attempt: now,
            failures: 0,
            retry_after: None,
            next_retry: None,
            fetched_as: fetched_as.clone(),
            content_encoding: response.content_encoding.clone(),
        }
    };
    match &outcome {
        FetchOutcome::Ok { .. } => {
            return fresh(RobotsStatus::Fetched, response.body.clone(), response.truncated)
        }
        FetchOutcome::ClientError { .. }
        | FetchOutcome::TooManyRedirects { .. }
        | FetchOutcome::RedirectLoop { .. } => {
            let mut s = fresh(RobotsStatus::Absent, Vec::new(), false);
            s.etag = None;
            s.last_modified = None;
            return s;
        }
        FetchOutcome::NotModified => {
            if let Some(p) = good_previous {
                let mut s = p.clone();
                s.validated_at = now;
                s.last_outcome = outcome;
                s.last_attempt = now;
                s.failures = 0;
                s.retry_after = None;
                s.next_retry = None;
                if fetched_as.is_some() {
                    s.fetched_as = fetched_as.clone();
                }
                // RFC 9111 §4.3.4: a 304 may carry updated validators.
                if response.etag.is_some() {
                    s.etag = response.etag.clone();
                }
                if response.last_modified.is_some() {
                    s.last_modified = response.last_modified.clone();
                }
                return s;
            }
        }
        _ => {}
    }
    // Failure: keep a good previous snapshot while it is inside its windows.
    let retry_after = response.retry_after.as_deref().and_then(|v| parse_retry_after(v, now));
    let failures = previous.map_or(0, |p| p.failures).saturating_add(1);
    let next_retry = Some(backoff.next_retry(failures, retry_after, now));
    if let Some(p) = good_previous.filter(|p| p.state(windows, now) != State::Expired) {
        let mut s = p.clone();
        s.last_outcome = outcome;
        s.last_attempt = now;
        s.failures = failures;
        s.retry_after = retry_after;
        s.next_retry = next_retry;
        return s;
    }
    let mut s = fresh(RobotsStatus::Unavailable, Vec::new(), false);
    s.etag = None;
    s.last_modified = None;
    s.content_encoding = None;
    s.http_status = (response.status != 0).then_some(response.status);
    s.failures = failures;
    s.retry_after = retry_after;
    s.next_retry = next_retry;
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    fn t0() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    /// Answers by URL from a script; records the URLs asked.
    struct Script {
        answers: HashMap<String, Result<RawRobotsResponse, FetchError>>,
        asked: Mutex<Vec<String>>,
    }

    impl RobotsFetch for Script {
        fn fetch(&self, url: &str, _v: Option<Validators>, _ua: &str) -> FetchFuture {
            if let Ok(mut a) = self.asked.lock() {
                a.push(url.to_string());
            }
            let r = self
                .answers
                .get(url)
                .cloned()
                .unwrap_or(Err(FetchError::Connect("no script".into())));
            Box::pin(async move { r })
        }
    }

    fn redirect(to: &str) -> Result<RawRobotsResponse, FetchError> {
        Ok(RawRobotsResponse { status: 301, location: Some(to.into()), ..Default::default() })
    }

    fn ok(body: &str) -> Result<RawRobotsResponse, FetchError> {
        Ok(RawRobotsResponse { status: 200, body: body.as_bytes().to_vec(), ..Default::default() })
    }

    fn script(pairs: Vec<(&str, Result<RawRobotsResponse, FetchError>)>) -> Script {
        Script {
            answers: pairs.into_iter().map(|(u, r)| (u.to_string(), r)).collect(),
            asked: Mutex::new(vec![]),
        }
    }

    fn run<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(f)
    }

    #[test]
    fn rfc9309_2_3_1_2_five_same_host_redirects_are_followed() {
        let o = Origin::new("http", "a.test", 80);
        let s = script(vec![
            ("http://a.test/robots.txt", redirect("/r1")),
            ("http://a.test/r1", redirect("https://a.test/r2")),
            ("https://a.test/r2", redirect("http://a.test:8080/r3")),
            ("http://a.test:8080/r3", redirect("r4")),
            ("http://a.test:8080/r4", redirect("//a.test/r5")),
            ("http://a.test/r5", ok("User-agent: *\nDisallow: /\n")),
        ]);
        let r = run(fetch_robots(&s, &o, None, RedirectPolicy::SameHost, ""));
        assert_eq!(r.outcome, FetchOutcome::Ok { status: 200 });
        assert_eq!(r.redirects.hops.len(), 5);
        assert_eq!(r.redirects.final_url.as_deref(), Some("http://a.test/r5"));
        assert_eq!(r.redirects.refused, None);
    }

    #[test]
    fn rfc9309_2_3_1_2_a_sixth_redirect_ends_the_chain_as_absent_c55() {
        let o = Origin::new("http", "a.test", 80);
        let s = script(vec![
            ("http://a.test/robots.txt", redirect("/r1")),
            ("http://a.test/r1", redirect("/r2")),
            ("http://a.test/r2", redirect("/r3")),
            ("http://a.test/r3", redirect("/r4")),
            ("http://a.test/r4", redirect("/r5")),
            ("http://a.test/r5", redirect("/r6")),
            ("http://a.test/r6", ok("User-agent: *\nDisallow: /private/\n")),
        ]);
        let r = run(fetch_robots(&s, &o, None, RedirectPolicy::Any, ""));
        assert_eq!(r.outcome, FetchOutcome::TooManyRedirects { to: "http://a.test/r6".into() });
        assert_eq!(r.redirects.refused.as_deref(), Some("http://a.test/r6"));
        assert_eq!(r.redirects.gave_up, Some(RedirectGiveUp::Limit));
        assert!(
            !s.asked.lock().unwrap().contains(&"http://a.test/r6".to_string()),
            "the sixth target is never contacted"
        );
        let snap = apply_fetch(&o, None, r, &Windows::default(), &Backoff::default(), t0());
        assert_eq!(snap.status, RobotsStatus::Absent, "given up like a 4xx: everything allowed");
        assert_eq!((snap.failures, snap.next_retry), (0, None), "not a failure: no back-off");
        assert_eq!(
            snap.redirects.chain(&o),
            "http://a.test/robots.txt -> http://a.test/r1 -> http://a.test/r2 -> http://a.test/r3 -> http://a.test/r4 -> http://a.test/r5 -> http://a.test/r6"
        );
        let reason = snap.verdict_reason().unwrap();
        assert!(
            reason.starts_with("more than 5 redirects: http://a.test/robots.txt -> ")
                && reason.contains("treated as absent"),
            "{reason}"
        );
        let v = crate::snapshot::verdict_for(
            &snap,
            &crate::RobotsTxt::parse(b""),
            State::Fresh,
            "Bot",
            "http://a.test/private/x",
        );
        assert_eq!(
            v,
            crate::Verdict {
                allowed: true,
                rule: Some(crate::snapshot::RULE_REDIRECT_LIMIT.into()),
                line: None
            }
        );
    }

    #[test]
    fn rfc9309_2_3_1_2_a_redirect_loop_is_detected_before_fetching_again_and_ends_as_absent_c55() {
        let o = Origin::new("http", "example.com", 80);
        let s = script(vec![
            ("http://example.com/robots.txt", redirect("/robots-a.txt")),
            ("http://example.com/robots-a.txt", redirect("/robots-b.txt")),
            ("http://example.com/robots-b.txt", redirect("/robots-a.txt")),
        ]);
        let r = run(fetch_robots(&s, &o, None, RedirectPolicy::Any, ""));
        assert_eq!(
            r.outcome,
            FetchOutcome::RedirectLoop { to: "http://example.com/robots-a.txt".into() }
        );
        assert_eq!(r.redirects.gave_up, Some(RedirectGiveUp::Loop));
        let asked = s.asked.lock().unwrap().clone();
        assert_eq!(
            asked,
            [
                "http://example.com/robots.txt",
                "http://example.com/robots-a.txt",
                "http://example.com/robots-b.txt"
            ],
            "the repeated URL is not fetched again"
        );
        let snap = apply_fetch(&o, None, r, &Windows::default(), &Backoff::default(), t0());
        assert_eq!(snap.status, RobotsStatus::Absent);
        let reason = snap.verdict_reason().unwrap();
        assert!(
            reason.starts_with("a redirect loop: http://example.com/robots.txt -> http://example.com/robots-a.txt -> http://example.com/robots-b.txt -> http://example.com/robots-a.txt;"),
            "{reason}"
        );
        assert_eq!(snap.absent_rule(), Some(crate::snapshot::RULE_REDIRECT_LOOP));

        // Back to the robots.txt itself, spelled with another case and the
        // default port: still the same URL.
        let s = script(vec![(
            "http://example.com/robots.txt",
            redirect("HTTP://EXAMPLE.com:80/robots.txt"),
        )]);
        let r = run(fetch_robots(&s, &o, None, RedirectPolicy::Any, ""));
        assert!(matches!(r.outcome, FetchOutcome::RedirectLoop { .. }), "{:?}", r.outcome);
        assert_eq!(s.asked.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_redirect_outside_a_stricter_scope_stays_a_refusal_even_as_a_sixth_hop_or_a_loop_c55() {
        let o = Origin::new("http", "a.test", 80);
        let s = script(vec![
            ("http://a.test/robots.txt", redirect("/r1")),
            ("http://a.test/r1", redirect("/r2")),
            ("http://a.test/r2", redirect("/r3")),
            ("http://a.test/r3", redirect("/r4")),
            ("http://a.test/r4", redirect("/r5")),
            ("http://a.test/r5", redirect("http://b.test/robots.txt")),
        ]);
        let r = run(fetch_robots(&s, &o, None, RedirectPolicy::SameHost, ""));
        assert_eq!(
            r.outcome,
            FetchOutcome::RedirectRefused { to: "http://b.test/robots.txt".into() }
        );
        assert_eq!(r.redirects.gave_up, None);
        let snap = apply_fetch(&o, None, r, &Windows::default(), &Backoff::default(), t0());
        assert_eq!(snap.status, RobotsStatus::Unavailable);
        assert_eq!(snap.unavailable_rule(), crate::snapshot::RULE_REDIRECT_REFUSED);
    }

    #[test]
    fn redirect_scope_by_policy() {
        let o = Origin::new("http", "a.test", 80);
        let s = script(vec![
            ("http://a.test/robots.txt", redirect("http://b.test/robots.txt")),
            ("http://b.test/robots.txt", ok("x")),
        ]);
        let r = run(fetch_robots(&s, &o, None, RedirectPolicy::SameHost, ""));
        assert_eq!(
            r.outcome,
            FetchOutcome::RedirectRefused { to: "http://b.test/robots.txt".into() }
        );
        assert_eq!(r.redirects.refused.as_deref(), Some("http://b.test/robots.txt"));
        let r = run(fetch_robots(&s, &o, None, RedirectPolicy::Any, ""));
        assert_eq!(r.outcome, FetchOutcome::Ok { status: 200 });
        assert_eq!(r.redirects.final_url.as_deref(), Some("http://b.test/robots.txt"));

        let s = script(vec![
            ("http://a.test/robots.txt", redirect("https://a.test/robots.txt")),
            ("https://a.test/robots.txt", ok("x")),
        ]);
        assert_eq!(
            run(fetch_robots(&s, &o, None, RedirectPolicy::SameHost, "")).outcome,
            FetchOutcome::Ok { status: 200 }
        );
        assert!(matches!(
            run(fetch_robots(&s, &o, None, RedirectPolicy::SameOrigin, "")).outcome,
            FetchOutcome::RedirectRefused { .. }
        ));
    }

    #[test]
    fn rfc9309_2_3_1_2_cross_host_redirects_are_followed_by_default_c49() {
        assert_eq!(RedirectPolicy::default(), RedirectPolicy::Any);
        let o = Origin::new("http", "example.com", 80);
        let s = script(vec![
            ("http://example.com/robots.txt", redirect("http://www.example.com/robots.txt")),
            ("http://www.example.com/robots.txt", ok("User-agent: *\nDisallow: /private/\n")),
        ]);
        let r = run(fetch_robots(&s, &o, None, RedirectPolicy::default(), "examplebot/1.0"));
        assert_eq!(r.outcome, FetchOutcome::Ok { status: 200 });
        assert_eq!(r.fetched_as.as_deref(), Some("examplebot/1.0"));
        let snap = apply_fetch(&o, None, r, &Windows::default(), &Backoff::default(), t0());
        assert_eq!(snap.origin, o, "the rules apply to the original origin");
        assert_eq!(snap.redirects.hops, vec!["http://www.example.com/robots.txt".to_string()]);
        assert_eq!(snap.fetched_as.as_deref(), Some("examplebot/1.0"));
        assert_eq!(snap.status, RobotsStatus::Fetched);
    }

    #[test]
    fn an_undecodable_body_is_a_failed_fetch_never_rules_c40() {
        let o = Origin::new("http", "a.test", 80);
        let s = script(vec![(
            "http://a.test/robots.txt",
            Err(FetchError::Undecodable("Content-Encoding `gzip`: invalid gzip header".into())),
        )]);
        let r = run(fetch_robots(&s, &o, None, RedirectPolicy::Any, ""));
        assert_eq!(r.outcome.label(), "undecodable");
        assert!(r.outcome.to_string().contains("gzip"), "{}", r.outcome);
        let snap = apply_fetch(&o, None, r, &Windows::default(), &Backoff::default(), t0());
        assert_eq!(snap.status, RobotsStatus::Unavailable);
        assert_eq!((snap.body.len(), snap.failures), (0, 1));
        assert!(snap.next_retry.is_some(), "retried with back-off");
    }

    #[test]
    fn status_classes_map_to_statuses() {
        let o = Origin::new("http", "a.test", 80);
        let w = Windows::default();
        let b = Backoff::default();
        let snap = |status: u16| {
            let r = FetchResult {
                outcome: classify_status(status),
                response: Some(RawRobotsResponse {
                    status,
                    body: b"User-agent: *\nDisallow: /\n".to_vec(),
                    ..Default::default()
                }),
                redirects: RedirectDetails::default(),
                fetched_as: None,
            };
            apply_fetch(&o, None, r, &w, &b, t0()).status
        };
        assert_eq!(snap(200), RobotsStatus::Fetched);
        assert_eq!(snap(203), RobotsStatus::Fetched);
        for s in [400, 401, 403, 404, 410, 451] {
            assert_eq!(snap(s), RobotsStatus::Absent, "{s}");
        }
        for s in [429, 500, 502, 503, 599, 304, 300, 100] {
            assert_eq!(snap(s), RobotsStatus::Unavailable, "{s}");
        }
    }

    #[test]
    fn body_is_cut_at_500_kib() {
        let o = Origin::new("http", "a.test", 80);
        let body = vec![b'#'; MAX_ROBOTS_BYTES + 10];
        let r = FetchResult {
            outcome: FetchOutcome::Ok { status: 200 },
            response: Some(RawRobotsResponse { status: 200, body, ..Default::default() }),
            redirects: RedirectDetails::default(),
            fetched_as: None,
        };
        let s = apply_fetch(&o, None, r, &Windows::default(), &Backoff::default(), t0());
        assert_eq!(s.body.len(), MAX_ROBOTS_BYTES);
        assert!(s.truncated);
        assert_eq!(s.sha256, sha256_hex(&vec![b'#'; MAX_ROBOTS_BYTES]));
    }

    #[test]
    fn rfc9110_10_2_3_retry_after_seconds_and_date() {
        assert_eq!(parse_retry_after("120", t0()), Some(t0() + Duration::from_secs(120)));
        let date = httpdate::fmt_http_date(t0() + Duration::from_secs(7200));
        assert_eq!(parse_retry_after(&date, t0()), Some(t0() + Duration::from_secs(7200)));
        assert_eq!(parse_retry_after("soon", t0()), None);
        assert_eq!(parse_retry_after("-5", t0()), None);
        assert!(parse_retry_after("99999999999999999999999", t0()).is_some());
    }

    #[test]
    fn backoff_doubles_from_one_minute_capped_and_never_before_retry_after() {
        let b = Backoff::default();
        assert_eq!(b.delay(1), Duration::from_secs(60));
        assert_eq!(b.delay(2), Duration::from_secs(120));
        assert_eq!(b.delay(4), Duration::from_secs(480));
        assert_eq!(b.delay(50), Duration::from_secs(3600));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(3600));
        assert_eq!(b.next_retry(1, None, t0()), t0() + Duration::from_secs(60));
        let ra = t0() + Duration::from_secs(7200);
        assert_eq!(b.next_retry(1, Some(ra), t0()), ra);
        assert_eq!(
            b.next_retry(1, Some(t0() + Duration::from_secs(5)), t0()),
            t0() + Duration::from_secs(60)
        );
    }

    #[test]
    fn location_resolution() {
        let base = "http://a.test:8080/dir/robots.txt?x";
        assert_eq!(resolve_location(base, "/x").as_deref(), Some("http://a.test:8080/x"));
        assert_eq!(
            resolve_location(base, "y.txt").as_deref(),
            Some("http://a.test:8080/dir/y.txt")
        );
        assert_eq!(resolve_location(base, "//b.test/z").as_deref(), Some("http://b.test/z"));
        assert_eq!(
            resolve_location(base, "HTTPS://b.test/z#f").as_deref(),
            Some("HTTPS://b.test/z")
        );
        assert_eq!(
            resolve_location(base, "?q").as_deref(),
            Some("http://a.test:8080/dir/robots.txt?q")
        );
        assert_eq!(resolve_location(base, "ftp://b.test/"), None);
        assert_eq!(resolve_location(base, ""), None);
        assert_eq!(resolve_location(base, "http://:99999/"), None);
    }
}
