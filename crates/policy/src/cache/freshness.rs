//! RFC 9111 section 4.2 (freshness): [`freshness_lifetime`] (4.2.1,
//! 4.2.2), [`current_age`] and [`age_value`] (4.2.3), the reuse decision
//! [`decide`] (4.2, request directives of 5.2.1, RFC 5861 section 3), and
//! serving stale when the origin fails ([`may_serve_stale_on_error`],
//! section 4.2.4 and RFC 5861 section 4).

use super::cache_control::{delta_seconds, CacheControl};
use super::config::PolicyConfig;
use super::field_lines::{stored_date, stored_expires};
use super::storable::heuristically_cacheable;
use super::stored::{from_millis, StoredResponse};
use std::time::{Duration, SystemTime};

/// RFC 9111 section 4.2.1 / 4.2.2: the freshness lifetime of a stored
/// response: `s-maxage` (shared), `max-age`, `Expires` − `Date`, then a
/// heuristic for heuristically cacheable status codes (RFC 9110 section
/// 15.1) from `Last-Modified`, then `cfg.default_ttl` for those codes. An
/// invalid `Expires` means already expired. Never negative.
pub fn freshness_lifetime(stored: &StoredResponse, cfg: &PolicyConfig) -> Duration {
    lifetime_with(stored, &CacheControl::from_stored(&stored.headers), cfg)
}

/// [`freshness_lifetime`] with the stored response's directives already parsed.
fn lifetime_with(stored: &StoredResponse, cc: &CacheControl, cfg: &PolicyConfig) -> Duration {
    let headers = &stored.headers;
    if cfg.shared {
        if let Some(s) = cc.s_maxage {
            return Duration::from_secs(s);
        }
    }
    if let Some(m) = cc.max_age {
        return Duration::from_secs(m);
    }
    let date =
        || stored_date(stored, "date").unwrap_or_else(|| from_millis(stored.response_time_ms));
    if headers.iter().any(|(n, _)| n == "expires") {
        // Section 5.3: an invalid Expires (or several) is a time in the
        // past; outside the grammar of RFC 9110 section 5.6.7 is invalid.
        return match stored_expires(stored) {
            Some(expires) => expires.duration_since(date()).unwrap_or(Duration::ZERO),
            None => Duration::ZERO,
        };
    }
    if !(heuristically_cacheable(stored.status) || cc.public) {
        return Duration::ZERO;
    }
    // Section 4.2.2: heuristic freshness, only without explicit expiration.
    match stored_date(stored, "last-modified") {
        Some(lm) => {
            let since = date().duration_since(lm).unwrap_or(Duration::ZERO);
            let fraction = if cfg.heuristic_fraction.is_finite() {
                cfg.heuristic_fraction.max(0.0)
            } else {
                0.0
            };
            let secs = (since.as_secs_f64() * fraction).min(cfg.heuristic_max.as_secs_f64());
            Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO).min(cfg.heuristic_max)
        }
        None => cfg.default_ttl,
    }
}

/// RFC 9111 section 4.2.3: the current age of a stored response at `now`
/// (`apparent_age`, `corrected_age_value` from `Age`, `resident_time`).
pub fn current_age(stored: &StoredResponse, now: SystemTime) -> Duration {
    let (initial_age, response_time) = initial_age(stored);
    initial_age + now.duration_since(response_time).unwrap_or(Duration::ZERO)
}

/// `corrected_initial_age` of RFC 9111 section 4.2.3 and the stored
/// `response_time`: the part of [`current_age`] that does not change while
/// the response is stored (`current_age` = `corrected_initial_age` +
/// `resident_time`).
fn initial_age(stored: &StoredResponse) -> (Duration, SystemTime) {
    let request_time = from_millis(stored.request_time_ms.min(stored.response_time_ms));
    let response_time = from_millis(stored.response_time_ms);
    let age_value = Duration::from_secs(age_value(&stored.headers));
    let date_value = stored_date(stored, "date").unwrap_or(response_time);
    let apparent_age = response_time.duration_since(date_value).unwrap_or(Duration::ZERO);
    let response_delay = response_time.duration_since(request_time).unwrap_or(Duration::ZERO);
    let corrected_age_value = age_value + response_delay;
    (apparent_age.max(corrected_age_value), response_time)
}

/// What the reuse decision needs from a stored response that does not
/// depend on the request or the clock, computed once per stored head
/// (RFC 9111 sections 4.2.1 to 4.2.3): its parsed `Cache-Control`, its
/// `freshness_lifetime` under one [`PolicyConfig`], its
/// `corrected_initial_age` and its `response_time`. A cache hit decides
/// from this without parsing the stored fields again
/// ([`decide_with`]).
#[derive(Debug, Clone)]
pub struct Freshness {
    /// The stored response's `Cache-Control` directives.
    pub cc: CacheControl,
    /// `freshness_lifetime` (section 4.2.1), before any policy-rule bound.
    pub freshness_lifetime: Duration,
    /// `corrected_initial_age` (section 4.2.3).
    pub corrected_initial_age: Duration,
    /// When the response was received (`response_time`, section 4.2.3).
    pub response_time: SystemTime,
}

impl Freshness {
    /// The clock-independent freshness facts of `stored` under `cfg`.
    pub fn of(stored: &StoredResponse, cfg: &PolicyConfig) -> Freshness {
        let cc = CacheControl::from_stored(&stored.headers);
        let freshness_lifetime = lifetime_with(stored, &cc, cfg);
        let (corrected_initial_age, response_time) = initial_age(stored);
        Freshness { cc, freshness_lifetime, corrected_initial_age, response_time }
    }

    /// `current_age` at `now` (section 4.2.3): the same as [`current_age`]
    /// of the stored response.
    pub fn current_age(&self, now: SystemTime) -> Duration {
        self.corrected_initial_age
            + now.duration_since(self.response_time).unwrap_or(Duration::ZERO)
    }
}

/// `age_value` of RFC 9111 section 4.2.3, in seconds, from the stored `Age`,
/// read as RFC 9111 section 5.1 says.
///
/// All `Age` lines form one comma-separated list (RFC 9110 section 5.3);
/// its first member counts and later ones are discarded (`Age: 0, 7200`, and
/// a line `0` followed by a line `7200`, are both 0). Empty list elements are
/// skipped (RFC 9110 section 5.6.1.2). A first member that is not
/// delta-seconds (a sign, a fraction, a parameter, letters) makes the field
/// ignored: 0, as when absent. Large values saturate at 2147483648 (RFC 9111
/// section 1.2.2). Never fails.
pub fn age_value(headers: &[(String, Vec<u8>)]) -> u64 {
    headers
        .iter()
        .filter(|(n, _)| n == "age")
        .flat_map(|(_, v)| v.split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .find(|member| !member.is_empty())
        .and_then(delta_seconds)
        .unwrap_or(0)
}

/// What to do with a stored response that matched the request (primary and
/// secondary key) at `now` (RFC 9111 section 4.2, 4.2.4, 5.2.1, 5.2.2; RFC 5861 section 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reuse {
    /// Fresh (or stale within the request's `max-stale`, when the response
    /// allows serving stale): serve it.
    Serve,
    /// Stale within `stale-while-revalidate`: serve it now and revalidate
    /// once in the background.
    ServeStaleAndRevalidate,
    /// Must be validated with the origin before use (stale, `no-cache` in the
    /// request or response, request `max-age` / `min-fresh` not met).
    Revalidate,
}

/// The reuse decision plus the numbers behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether and how the stored response may be used.
    pub reuse: Reuse,
    /// `current_age` in whole seconds (the `Age` header to send).
    pub age: u64,
    /// `freshness_lifetime` − `current_age` in seconds; negative when stale
    /// (the `ttl` parameter of `Cache-Status`).
    pub ttl: i64,
    /// True when the response is stale.
    pub stale: bool,
}

/// Decides whether `stored` may answer a request whose parsed
/// `Cache-Control` (and `Pragma`) is `req` at `now` (RFC 9111 section 4.2 and 4.2.4; request directives of 5.2.1;
/// response `no-cache`, `must-revalidate`, `proxy-revalidate`; RFC 5861
/// `stale-while-revalidate`).
pub fn decide(
    req: &CacheControl,
    stored: &StoredResponse,
    now: SystemTime,
    cfg: &PolicyConfig,
) -> Decision {
    decide_bounded(req, stored, now, cfg, None, None)
}

/// [`decide`] with the freshness lifetime bounded by a configured policy
/// rule (`min`, `max`; SPEC section 6) before anything else is decided.
pub fn decide_bounded(
    req: &CacheControl,
    stored: &StoredResponse,
    now: SystemTime,
    cfg: &PolicyConfig,
    min: Option<Duration>,
    max: Option<Duration>,
) -> Decision {
    decide_with(req, &Freshness::of(stored, cfg), now, cfg, min, max)
}

/// [`decide_bounded`] from a stored response's [`Freshness`] (computed
/// under the same `cfg`), so a cache hit does not parse the stored fields.
pub fn decide_with(
    req: &CacheControl,
    fresh: &Freshness,
    now: SystemTime,
    cfg: &PolicyConfig,
    min: Option<Duration>,
    max: Option<Duration>,
) -> Decision {
    let cc = &fresh.cc;
    let mut lifetime = fresh.freshness_lifetime;
    if let Some(m) = max {
        lifetime = lifetime.min(m);
    }
    if let Some(m) = min {
        lifetime = lifetime.max(m);
    }
    let lifetime_ms = lifetime.as_millis() as i128;
    let age_ms = fresh.current_age(now).as_millis() as i128;
    // Section 4.2: fresh when freshness_lifetime > current_age.
    let stale = lifetime_ms <= age_ms;
    let remaining_ms = lifetime_ms - age_ms;
    let decision = |reuse| Decision {
        reuse,
        age: (age_ms / 1000).min(u64::MAX as i128) as u64,
        ttl: remaining_ms.div_euclid(1000).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        stale,
    };
    // 5.2.1.4 (and Pragma, 5.4): the client wants validation.
    // 5.2.2.4: unqualified no-cache in the response: always validate.
    if req.no_cache || cc.no_cache {
        return decision(Reuse::Revalidate);
    }
    // 5.2.1.1: the client does not accept an age beyond max-age.
    if let Some(max_age) = req.max_age {
        if age_ms > i128::from(max_age) * 1000 {
            return decision(Reuse::Revalidate);
        }
    }
    // 5.2.1.3: the client wants it fresh for at least min-fresh more seconds.
    if let Some(min_fresh) = req.min_fresh {
        if remaining_ms < i128::from(min_fresh) * 1000 {
            return decision(Reuse::Revalidate);
        }
    }
    if !stale {
        return decision(Reuse::Serve);
    }
    let staleness_ms = age_ms - lifetime_ms;
    if forbids_stale(cc, cfg) {
        return decision(Reuse::Revalidate);
    }
    // 5.2.1.2: max-stale lets the client accept a stale response, unless the
    // response forbids it; s-maxage implies proxy-revalidate (5.2.2.10).
    if !(cfg.shared && cc.s_maxage.is_some()) {
        match req.max_stale {
            Some(None) => return decision(Reuse::Serve),
            Some(Some(n)) if staleness_ms <= i128::from(n) * 1000 => return decision(Reuse::Serve),
            _ => {}
        }
    }
    // RFC 5861 section 3: stale-while-revalidate.
    if let Some(swr) = cc.stale_while_revalidate {
        if staleness_ms <= i128::from(swr) * 1000 {
            return decision(Reuse::ServeStaleAndRevalidate);
        }
    }
    decision(Reuse::Revalidate)
}

/// Why an origin failed, for [`may_serve_stale_on_error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginError {
    /// The origin answered with this status (500, 502, 503 or 504 count as errors).
    Status(u16),
    /// The origin could not be reached (refused, timed out, DNS failure): the
    /// cache is disconnected (RFC 9111 section 4.2.4).
    Unreachable,
}

/// Whether a stale stored response may be served because the origin failed
/// (`req`: the request's parsed `Cache-Control`):
/// within `stale-if-error` (RFC 5861 section 4; request or response
/// directive) for status 500/502/503/504 or an unreachable origin; or, when
/// unreachable and the response carries no `stale-if-error` of its own,
/// within `cfg.max_stale_on_error` of staleness (not for `s-maxage`, which
/// implies `proxy-revalidate`). Never for `must-revalidate`,
/// `proxy-revalidate` (shared), `no-cache` responses, or a request with
/// `no-cache`. A fresh response is trivially allowed (staleness 0).
pub fn may_serve_stale_on_error(
    req: &CacheControl,
    stored: &StoredResponse,
    error: OriginError,
    now: SystemTime,
    cfg: &PolicyConfig,
) -> bool {
    let cc = CacheControl::from_stored(&stored.headers);
    if req.no_cache || forbids_stale(&cc, cfg) {
        return false;
    }
    let is_error = match error {
        OriginError::Status(code) => matches!(code, 500 | 502 | 503 | 504),
        OriginError::Unreachable => true,
    };
    if !is_error {
        return false;
    }
    let lifetime = lifetime_with(stored, &cc, cfg);
    let age = current_age(stored, now);
    let staleness = age.saturating_sub(lifetime);
    // RFC 5861 section 4: stale-if-error in the response or the request.
    let window = match (cc.stale_if_error, req.stale_if_error) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    if let Some(window) = window {
        if staleness <= Duration::from_secs(window) {
            return true;
        }
    }
    // RFC 9111 section 4.2.4: a disconnected cache may serve stale, within
    // the configured bound, unless s-maxage (implied proxy-revalidate)
    // forbids it, or the origin set its own bound with stale-if-error (C22:
    // past that window an unreachable origin is an error).
    error == OriginError::Unreachable
        && cc.stale_if_error.is_none()
        && !(cfg.shared && cc.s_maxage.is_some())
        && !cfg.max_stale_on_error.is_zero()
        && staleness <= cfg.max_stale_on_error
}

/// When a stale response must not be served at all (RFC 9111 section 4.2.4,
/// 5.2.2.2, 5.2.2.4, 5.2.2.8): must-revalidate, no-cache, and in a shared
/// cache proxy-revalidate.
fn forbids_stale(cc: &CacheControl, cfg: &PolicyConfig) -> bool {
    cc.must_revalidate || cc.no_cache || (cfg.shared && cc.proxy_revalidate)
}
