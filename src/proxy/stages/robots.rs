//! The robots side of a proxied request (SPEC section 4): which rules are
//! in force, the verdict and what to do with it ([`gate`]), the answers the
//! proxy gives itself (a refusal under `enforce`, a client's own
//! `/robots.txt` from the snapshot: [`answer`]), `Robots-Status`, and
//! Crawl-delay pacing ([`pace`]).

use super::super::exchange::Exchange;
use super::super::robots_gate::{Pace, RobotsAction, RobotsGate};
use super::super::state::ProxyState;
use crate::wire::body::ProxyBody;
use crate::wire::error::error_response;
use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd};
use crawlcache_policy::hop_by_hop::add_via;
use crawlcache_robots::enforce::{self, Action, RobotsCheck};
use crawlcache_robots::politeness;
use crawlcache_robots::settings::RobotsMode;
use crawlcache_robots::snapshot::{ClientAnswer, Disposition, Origin, RobotsStatus};
use http::header::HeaderValue;
use http::{Response, StatusCode};
use std::time::SystemTime;

/// Runs the robots check for `ex` (an absolute target). `None` when robots
/// handling is off, or offline for an origin never seen. Waits only when
/// the origin is seen for the first time (or its rules expired). A fetch it
/// starts is sent under the identity derived from the request's
/// `User-Agent` (`crawlcache_robots::identity`).
///
/// Offline, nothing is fetched and the last snapshot is used whatever its
/// age (disposition `offline`, C44): the windows bound how long rules go
/// unchecked while crawling, and offline nothing is crawled. An origin
/// without a snapshot is judged by the newest robots.txt capture an
/// imported archive holds ([`crate::robots::archive`]). A URL that
/// snapshot disallows is still refused under `enforce`.
pub async fn gate(state: &ProxyState, ex: &Exchange) -> Option<RobotsGate> {
    let cfg = &state.config.robots;
    if cfg.mode == RobotsMode::Off {
        return None;
    }
    let url = ex.primary();
    let now = SystemTime::now();
    let version = state.robots.version();
    let fresh =
        if state.offline { None } else { FreshRules::recall(version, url, ex.user_agent(), now) };
    let fresh = match fresh {
        Some(f) => f,
        None => {
            let origin = Origin::from_url(url)?;
            let (rules, disposition) = if state.offline {
                // Offline: never fetch; use the stored snapshot whatever its age,
                // else the newest robots.txt capture an imported archive left
                // in the store, or run without rules if there is neither.
                let rules = match state.robots.current(&origin) {
                    Some(r) => r,
                    None => {
                        crate::robots::archive::rules(
                            &state.store,
                            &state.config.cache.key_rules,
                            cfg,
                            &origin,
                        )
                        .await?
                    }
                };
                (rules, Disposition::Offline)
            } else {
                Box::pin(state.robots.rules_for_client(&origin, now, ex.user_agent())).await
            };
            let windows = state.robots.windows(&origin);
            if disposition == Disposition::Fetched
                && rules.snapshot.status == RobotsStatus::Unavailable
            {
                tracing::warn!(
                    "robots.txt of {origin} could not be fetched ({}); its URLs count as disallowed until a retry succeeds (after the back-off, at the first request after a restart, or now with `crawlcache robots refresh {origin}`)",
                    rules.snapshot.verdict_reason().unwrap_or_else(|| rules.snapshot.last_outcome.to_string())
                );
            }
            let agent = enforce::product_token(&cfg.agent, ex.user_agent());
            let names = enforce::CheckNames::new(&rules, &agent);
            let until = rules.snapshot.validated_at.checked_add(windows.fresh);
            let fresh = std::sync::Arc::new(FreshRules {
                origin: std::sync::Arc::new(origin),
                rules,
                windows,
                names,
                disposition,
                until: until.unwrap_or(now),
            });
            if let (Disposition::Cached, true, Some(_)) =
                (disposition, fresh.rules.snapshot.status != RobotsStatus::Unavailable, until)
            {
                FreshRules::keep(version, url, ex.user_agent(), fresh.clone());
            }
            fresh
        }
    };
    let FreshRules { origin, rules, windows, names, disposition, .. } = &*fresh;
    let disposition = *disposition;
    state.metrics.robots_disposition(disposition);
    let check = RobotsCheck::with_names(rules, disposition, windows, now, names, url);
    state.metrics.robots_verdict(check.verdict.allowed);

    let is_robots_url = url.ends_with("/robots.txt") && url == origin.robots_url();
    let action = if is_robots_url && ex.is_cacheable_method() {
        RobotsAction::AnswerSnapshot(ClientAnswer::for_snapshot(
            &rules.snapshot,
            check.judged_state(),
        ))
    } else {
        match check.action(cfg.mode) {
            Action::Refuse { status, body } => RobotsAction::Refuse { status, body },
            Action::Forward => RobotsAction::Forward,
        }
    };
    let pace = cfg.honor_crawl_delay.then(|| Pace {
        origin_key: origin.key(),
        delay: politeness::effective_delay(
            rules.robots.crawl_delay(&check.agent),
            cfg.min_delay,
            cfg.max_delay,
        ),
    });
    Some(RobotsGate { check, action, pace, origin: origin.clone() })
}

/// Rules a serving thread found fresh for an origin and a client
/// `User-Agent`, kept so the next requests of that client to that origin
/// skip the registry (its lock, the origin's parse and key): while the
/// registry's [`crawlcache_robots::registry::RobotsRegistry::version`] is
/// unchanged and the snapshot is inside its fresh window, the registry
/// would return the same rules as `cached` without starting a refresh
/// (RFC 9309 section 2.4: fresh rules are used as they are).
///
/// Also what the gate reads its rules from on every request, fresh or not:
/// the names a check carries are made once here ([`enforce::CheckNames`]),
/// and the memo's own `Arc` of it is counted on the serving thread alone,
/// where the registry's rules are shared by all threads.
struct FreshRules {
    origin: std::sync::Arc<Origin>,
    rules: std::sync::Arc<crawlcache_robots::registry::Rules>,
    windows: crawlcache_robots::snapshot::Windows,
    /// The product token checked for this client, and the rules' names.
    names: enforce::CheckNames,
    /// How the rules were obtained (`cached` for those kept in the memo).
    disposition: Disposition,
    /// When the snapshot leaves its fresh window.
    until: SystemTime,
}

/// Most origins one thread keeps [`FreshRules`] for; when full it starts over.
const FRESH_ORIGINS: usize = 256;

/// Per registry version: origin part of the primary key -> (User-Agent, rules).
type FreshMemo = (
    (u64, u64),
    std::collections::HashMap<String, Vec<(Option<String>, std::sync::Arc<FreshRules>)>>,
);

thread_local! {
    static FRESH: std::cell::RefCell<FreshMemo> = std::cell::RefCell::new(((u64::MAX, 0), std::collections::HashMap::new()));
}

impl FreshRules {
    /// `scheme://authority` of a primary key (lower-case host, no default
    /// port: the same origin always gives the same text).
    fn origin_part(url: &str) -> Option<&str> {
        let start = url.find("://")? + 3;
        let end = url[start..].find(['/', '?']).map_or(url.len(), |i| start + i);
        Some(&url[..end])
    }

    /// The fresh rules kept for `url`'s origin and `user_agent` under
    /// `version`, if still fresh at `now`.
    fn recall(
        version: (u64, u64),
        url: &str,
        user_agent: Option<&str>,
        now: SystemTime,
    ) -> Option<std::sync::Arc<FreshRules>> {
        let part = Self::origin_part(url)?;
        FRESH
            .try_with(|m| {
                let m = m.try_borrow().ok()?;
                if m.0 != version {
                    return None;
                }
                let (_, f) = m.1.get(part)?.iter().find(|(ua, _)| ua.as_deref() == user_agent)?;
                (now < f.until).then(|| f.clone())
            })
            .ok()
            .flatten()
    }

    /// Keeps `fresh` for `url`'s origin and `user_agent` under `version`
    /// (read before the rules were asked for).
    fn keep(
        version: (u64, u64),
        url: &str,
        user_agent: Option<&str>,
        fresh: std::sync::Arc<FreshRules>,
    ) {
        let Some(part) = Self::origin_part(url) else { return };
        let _ = FRESH.try_with(|m| {
            let Ok(mut m) = m.try_borrow_mut() else { return };
            let (v, map) = &mut *m;
            if *v != version || map.len() >= FRESH_ORIGINS {
                *v = version;
                map.clear();
            }
            let agents = map.entry(part.to_string()).or_default();
            match agents.iter().position(|(ua, _)| ua.as_deref() == user_agent) {
                Some(i) => agents[i].1 = fresh,
                // A handful of client identities per origin; more start over.
                None if agents.len() < 8 => agents.push((user_agent.map(str::to_string), fresh)),
                None => *agents = vec![(user_agent.map(str::to_string), fresh)],
            }
        });
    }
}

/// The proxy's own answer for a request the gate did not let through:
/// the enforcement refusal, or the client's `/robots.txt` from the snapshot.
pub fn answer(ex: &mut Exchange) -> Response<ProxyBody> {
    let Some(g) = ex.robots.as_ref() else {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "crawlcache: no robots verdict",
            &CacheStatus::default(),
        );
    };
    match &g.action {
        RobotsAction::Refuse { status, body } => {
            ex.status = CacheStatus::forward(Fwd::Bypass).with_detail(Detail::Robots);
            error_response(
                StatusCode::from_u16(*status).unwrap_or(StatusCode::FORBIDDEN),
                body.trim_end(),
                &ex.status,
            )
        }
        RobotsAction::AnswerSnapshot(answer) => {
            let origin = &g.origin;
            let mut response = match answer {
                ClientAnswer::Body(body) => {
                    let mut r = Response::new(if ex.is_head() { ProxyBody::empty() } else { ProxyBody::full(body.clone()) });
                    r.headers_mut().insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
                    r.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                    r
                }
                ClientAnswer::NotFound => Response::new(ProxyBody::full(format!(
                    "crawlcache: {origin} publishes no robots.txt (status {}): everything is allowed\n",
                    g.check.status.as_str()
                ))),
                ClientAnswer::Unavailable(why) => Response::new(ProxyBody::full(format!("crawlcache: robots.txt of {origin}: {why}\n"))),
            };
            *response.status_mut() =
                StatusCode::from_u16(answer.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            let h = response.headers_mut();
            h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            add_via(h);
            ex.status = CacheStatus { hit: true, ..CacheStatus::default() }.with_detail(
                match g.check.disposition {
                    Disposition::Fetched => Detail::RobotsSnapshotFetched,
                    Disposition::Cached => Detail::RobotsSnapshotCached,
                    Disposition::StaleUsable => Detail::RobotsSnapshotStaleUsable,
                    Disposition::StaleDegraded => Detail::RobotsSnapshotStaleDegraded,
                    Disposition::Expired => Detail::RobotsSnapshotExpired,
                    Disposition::Offline => Detail::Offline,
                },
            );
            response
        }
        RobotsAction::Forward => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "crawlcache: robots said forward",
            &CacheStatus::default(),
        ),
    }
}

/// Adds `Robots-Status` to a response.
///
/// Consecutive requests on a thread mostly carry the same value (the same
/// rules, disposition and verdict), so the last value rendered on this
/// thread is kept with what it was rendered from and reused when those match.
pub fn annotate(response: &mut Response<ProxyBody>, check: &RobotsCheck) {
    /// What a `Robots-Status` value is rendered from, and the value.
    struct Rendered {
        allowed: bool,
        rule: Option<String>,
        line: Option<u32>,
        sha256: std::sync::Arc<str>,
        disposition: Disposition,
        reason: Option<std::sync::Arc<str>>,
        value: HeaderValue,
    }
    thread_local! {
        static LAST: std::cell::RefCell<Option<Rendered>> = const { std::cell::RefCell::new(None) };
    }
    let same = |r: &Rendered| {
        r.allowed == check.verdict.allowed
            && r.line == check.verdict.line
            && r.disposition == check.disposition
            && r.rule == check.verdict.rule
            && r.sha256 == check.sha256
            && r.reason == check.reason
    };
    let reused = LAST
        .try_with(|last| {
            last.try_borrow()
                .ok()
                .and_then(|l| l.as_ref().filter(|r| same(r)).map(|r| r.value.clone()))
        })
        .ok()
        .flatten();
    let value = match reused {
        Some(v) => v,
        None => {
            let Ok(v) = HeaderValue::from_maybe_shared(bytes::Bytes::from(check.status_header()))
            else {
                return;
            };
            let rendered = Rendered {
                allowed: check.verdict.allowed,
                rule: check.verdict.rule.clone(),
                line: check.verdict.line,
                sha256: check.sha256.clone(),
                disposition: check.disposition,
                reason: check.reason.clone(),
                value: v.clone(),
            };
            let _ = LAST.try_with(|last| last.try_borrow_mut().map(|mut l| *l = Some(rendered)));
            v
        }
    };
    response.headers_mut().insert(enforce::ROBOTS_STATUS_HEADER, value);
}

/// Waits for this request's pacing slot before it contacts the origin:
/// in fleet mode the fleet's slot for the origin (spacing the whole fleet's
/// requests), else (or while Redis cannot be used) this node's. Cache hits
/// never call this, so they are never delayed.
pub async fn pace(state: &ProxyState, ex: &Exchange) {
    let Some(p) = ex.robots.as_ref().and_then(|g| g.pace.as_ref()) else { return };
    // Fleet mode: the slot is the fleet's (Redis), unless Redis cannot be used.
    if let Some(f) = &state.fleet {
        if let Some(wait) = f.reserve_slot(&p.origin_key, p.delay).await {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            // A late wake-up must not shorten the gap after the last send
            // (closed loop, see crawlcache_fleet::pace); bounded retries.
            for _ in 0..20 {
                match f.confirm_send(&p.origin_key, p.delay).await {
                    Some(wait) if !wait.is_zero() => tokio::time::sleep(wait).await,
                    _ => break,
                }
            }
            return;
        }
    }
    let now = SystemTime::now();
    let start = state.pacer.reserve(&p.origin_key, p.delay, now);
    if let Ok(wait) = start.duration_since(now) {
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}
