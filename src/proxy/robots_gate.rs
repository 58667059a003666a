//! The robots side of a proxied request (SPEC section 4): which rules are
//! in force, the verdict, enforcement, a client's own `/robots.txt`,
//! Crawl-delay pacing, and the audit line.

use super::body::ProxyBody;
use super::handler::error_response;
use super::headers::{add_via, set_cache_status};
use super::ProxyState;
use crate::admin::metrics::Metrics;
use crate::audit::AuditRecord;
use crate::robots::enforce::{self, Action, RobotsCheck};
use crate::robots::politeness;
use crate::robots::settings::RobotsMode;
use crate::robots::snapshot::{ClientAnswer, Disposition, Origin};
use http::header::HeaderValue;
use http::{Method, Response, StatusCode};
use std::time::{Duration, SystemTime};

/// Spacing for requests that reach an origin, carried in the request's
/// extensions from the robots check to the upstream call.
#[derive(Debug, Clone)]
pub struct Pace {
    /// The origin's pacing key.
    pub origin_key: String,
    /// The spacing to keep between requests to it.
    pub delay: Duration,
}

/// The outcome of the robots gate for one request.
pub enum Gate {
    /// Go on through the cache; `check` is `None` when robots handling is off.
    Forward { check: Option<RobotsCheck>, pace: Option<Pace> },
    /// Answer now with this response (enforcement, or the client's own
    /// `/robots.txt` answered from the snapshot).
    Answer { check: Option<RobotsCheck>, response: Response<ProxyBody> },
}

/// Runs the robots check for a request to `url` (the normalised target).
/// Waits only when the origin is seen for the first time.
pub async fn gate(state: &ProxyState, method: &Method, url: &str, user_agent: Option<&str>) -> Gate {
    let cfg = &state.config.robots;
    if cfg.mode == RobotsMode::Off {
        return Gate::Forward { check: None, pace: None };
    }
    let Some(origin) = Origin::from_url(url) else {
        return Gate::Forward { check: None, pace: None };
    };
    let now = SystemTime::now();
    let (rules, disposition) = if state.offline {
        // Offline: never fetch; use the stored snapshot as it is, or run
        // without rules if this origin was never seen.
        match state.robots.current(&origin) {
            Some(r) => {
                let d = Disposition::from_state(r.snapshot.state(&state.robots.windows(&origin), now));
                (r, d)
            }
            None => return Gate::Forward { check: None, pace: None },
        }
    } else {
        state.robots.rules_for(&origin, now).await
    };
    state.metrics.robots_disposition(disposition);
    let windows = state.robots.windows(&origin);
    if disposition == Disposition::Fetched && rules.snapshot.status == crate::robots::snapshot::RobotsStatus::Unavailable {
        tracing::warn!(
            "robots.txt of {origin} could not be fetched ({}); its URLs count as disallowed until a retry succeeds (`crawlcache robots refresh {origin}` retries now)",
            rules.snapshot.last_outcome
        );
    }
    let agent = enforce::product_token(&cfg.agent, user_agent);
    let check = RobotsCheck::new(&rules, disposition, &windows, now, &agent, url);
    state.metrics.robots_verdict(check.verdict.allowed);

    // A client's own GET of this origin's robots.txt is answered from the snapshot.
    let is_robots_url = url == origin.robots_url();
    if is_robots_url && (method == Method::GET || method == Method::HEAD) {
        let answer = ClientAnswer::for_snapshot(&rules.snapshot, rules.snapshot.state(&windows, now));
        let status = StatusCode::from_u16(answer.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let mut response = match answer {
            ClientAnswer::Body(body) => {
                let mut r = Response::new(if method == Method::HEAD { ProxyBody::empty() } else { ProxyBody::full(body.clone()) });
                r.headers_mut().insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
                r.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                r
            }
            ClientAnswer::NotFound => Response::new(ProxyBody::full(format!(
                "crawlcache: {} publishes no robots.txt (status {}): everything is allowed\n",
                origin,
                rules.snapshot.status.as_str()
            ))),
            ClientAnswer::Unavailable(why) => Response::new(ProxyBody::full(format!("crawlcache: robots.txt of {origin}: {why}\n"))),
        };
        *response.status_mut() = status;
        let h = response.headers_mut();
        h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        add_via(h);
        set_cache_status(h, &format!("hit; detail=robots-snapshot-{}", check.disposition.as_str().replace('_', "-")));
        if let Ok(v) = HeaderValue::from_str(&check.status_header()) {
            h.insert(enforce::ROBOTS_STATUS_HEADER, v);
        }
        return Gate::Answer { check: Some(check), response };
    }

    if let Action::Refuse { status, body } = check.action(cfg.mode) {
        let mut response = error_response(StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN), body.trim_end(), "fwd=bypass; detail=robots");
        if let Ok(v) = HeaderValue::from_str(&check.status_header()) {
            response.headers_mut().insert(enforce::ROBOTS_STATUS_HEADER, v);
        }
        return Gate::Answer { check: Some(check), response };
    }

    let pace = if cfg.honor_crawl_delay {
        let delay = politeness::effective_delay(rules.robots.crawl_delay(&agent), cfg.min_delay, cfg.max_delay);
        Some(Pace { origin_key: origin.key(), delay })
    } else {
        None
    };
    Gate::Forward { check: Some(check), pace }
}

/// Adds `Robots-Status` to a response.
pub fn annotate(response: &mut Response<ProxyBody>, check: &RobotsCheck) {
    if let Ok(v) = HeaderValue::from_str(&check.status_header()) {
        response.headers_mut().insert(enforce::ROBOTS_STATUS_HEADER, v);
    }
}

/// Waits for this request's pacing slot before it contacts the origin.
/// Cache hits never call this, so they are never delayed.
pub async fn pace(state: &ProxyState, pace: Option<&Pace>) {
    let Some(p) = pace else { return };
    let now = SystemTime::now();
    let start = state.pacer.reserve(&p.origin_key, p.delay, now);
    if let Ok(wait) = start.duration_since(now) {
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// Builds the audit record for a request that arrived at `at`.
pub fn audit_record(at: SystemTime, method: &Method, url: &str, check: Option<&RobotsCheck>) -> AuditRecord {
    AuditRecord::new(at, method.as_str(), url, check)
}

impl Metrics {
    /// Counts a robots disposition.
    pub fn robots_disposition(&self, d: Disposition) {
        let c = match d {
            Disposition::Fetched => &self.robots_fetched,
            Disposition::Cached => &self.robots_cached,
            Disposition::StaleUsable => &self.robots_stale_usable,
            Disposition::StaleDegraded => &self.robots_stale_degraded,
            Disposition::Expired => &self.robots_expired,
        };
        Metrics::inc(c);
    }

    /// Counts a robots verdict.
    pub fn robots_verdict(&self, allowed: bool) {
        Metrics::inc(if allowed { &self.robots_allowed } else { &self.robots_disallowed });
    }
}
