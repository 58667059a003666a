//! The per-origin robots.txt registry against a scripted fetcher and an
//! injected clock (issue 5, "It must show" 1–3 at the registry level):
//! windows, outcome mapping, back-off, redirects, collapse, persistence.

use crawlcache_robots::fetch::{
    FetchError, FetchFuture, RawRobotsResponse, RedirectPolicy, RobotsFetch,
};
use crawlcache_robots::identity::FALLBACK_USER_AGENT;
use crawlcache_robots::registry::{load_snapshot, RobotsRegistry};
use crawlcache_robots::settings::{HostOverride, RobotsConfig};
use crawlcache_robots::snapshot::{
    Disposition, FetchOutcome, Origin, RobotsStatus, State, Validators, RULE_REDIRECT_LIMIT,
    RULE_REDIRECT_REFUSED, RULE_TOO_OLD, RULE_UNAVAILABLE,
};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::Semaphore;

type Answer = Result<RawRobotsResponse, FetchError>;

/// Answers each URL from its queue (the last answer repeats), records every
/// call, and, when gated, holds every answer until the test releases it.
#[derive(Default)]
struct Fake {
    script: Mutex<HashMap<String, VecDeque<Answer>>>,
    calls: Mutex<Vec<(String, Option<Validators>)>>,
    user_agents: Mutex<Vec<String>>,
    gate: Mutex<Option<Arc<Semaphore>>>,
}

impl Fake {
    fn new() -> Arc<Fake> {
        Arc::new(Fake::default())
    }
    fn answer(&self, url: &str, answers: Vec<Answer>) {
        self.script.lock().unwrap().insert(url.to_string(), answers.into());
    }
    fn calls(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
    fn last_user_agent(&self) -> Option<String> {
        self.user_agents.lock().unwrap().last().cloned()
    }
    fn last_validators(&self) -> Option<Validators> {
        self.calls.lock().unwrap().last().and_then(|(_, v)| v.clone())
    }
    fn close_gate(&self) -> Arc<Semaphore> {
        let s = Arc::new(Semaphore::new(0));
        *self.gate.lock().unwrap() = Some(s.clone());
        s
    }
}

impl RobotsFetch for Fake {
    fn fetch(&self, url: &str, validators: Option<Validators>, user_agent: &str) -> FetchFuture {
        self.calls.lock().unwrap().push((url.to_string(), validators));
        self.user_agents.lock().unwrap().push(user_agent.to_string());
        let answer = {
            let mut script = self.script.lock().unwrap();
            match script.get_mut(url) {
                Some(q) if q.len() > 1 => q.pop_front().unwrap(),
                Some(q) => {
                    q.front().cloned().unwrap_or(Err(FetchError::Other("empty script".into())))
                }
                None => Err(FetchError::Connect("connection refused".into())),
            }
        };
        let gate = self.gate.lock().unwrap().clone();
        Box::pin(async move {
            if let Some(g) = gate {
                if let Ok(p) = g.acquire().await {
                    p.forget();
                }
            }
            answer
        })
    }
}

fn ok(body: &str, etag: Option<&str>) -> Answer {
    Ok(RawRobotsResponse {
        status: 200,
        body: body.as_bytes().to_vec(),
        etag: etag.map(str::to_string),
        ..Default::default()
    })
}
fn status(code: u16) -> Answer {
    Ok(RawRobotsResponse { status: code, ..Default::default() })
}
fn retry_after(code: u16, secs: u64) -> Answer {
    Ok(RawRobotsResponse {
        status: code,
        retry_after: Some(secs.to_string()),
        ..Default::default()
    })
}
fn redirect(to: &str) -> Answer {
    Ok(RawRobotsResponse { status: 302, location: Some(to.to_string()), ..Default::default() })
}

const RULES: &str = "User-agent: *\nDisallow: /private\n";
const H: u64 = 3600;

fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}
fn at(secs: u64) -> SystemTime {
    t0() + Duration::from_secs(secs)
}
fn origin(host: &str) -> Origin {
    Origin::new("http", host, 80)
}
fn tree() -> sled::Tree {
    let db = sled::Config::new().temporary(true).open().expect("temporary sled db");
    db.open_tree("robots").expect("robots tree")
}
fn registry(fake: &Arc<Fake>, config: RobotsConfig) -> RobotsRegistry {
    RobotsRegistry::new(tree(), fake.clone(), config)
}

/// Waits (real time, bounded) until no fetch of `o` is in flight.
async fn settle(reg: &RobotsRegistry, o: &Origin) {
    for _ in 0..2000 {
        if !reg.is_refreshing(o) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("refresh of {o} never finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_fresh_1h_stale_usable_12h_stale_degraded_2d_expired_4d() {
    let fake = Fake::new();
    let reg = registry(&fake, RobotsConfig::default());
    for (host, age, want) in [
        ("a.test", H, Disposition::Cached),
        ("b.test", 12 * H, Disposition::StaleUsable),
        ("c.test", 48 * H, Disposition::StaleDegraded),
        ("d.test", 96 * H, Disposition::Expired),
    ] {
        let o = origin(host);
        fake.answer(&o.robots_url(), vec![ok(RULES, None), status(503)]);
        let (_, d) = reg.rules_for(&o, t0()).await;
        assert_eq!(d, Disposition::Fetched, "first sight of {host}");
        let (rules, d) = reg.rules_for(&o, at(age)).await;
        assert_eq!(d, want, "{host} at {age}s");
        let state = rules.snapshot.state(&reg.windows(&o), at(age));
        let v = rules.verdict(state, "Bot", &format!("http://{host}/public"));
        assert_eq!(v.allowed, want != Disposition::Expired, "{host}");
        if want == Disposition::Expired {
            assert_eq!(v.rule.as_deref(), Some(RULE_TOO_OLD));
        }
        settle(&reg, &o).await;
    }
    // The expired snapshot's refresh failed (503): with nothing usable left,
    // the rules are now unavailable.
    let (rules, _) = reg.rules_for(&origin("d.test"), at(96 * H)).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Unavailable);
    // The stale-degraded one's refresh failed too, but it is kept.
    let (rules, _) = reg.rules_for(&origin("c.test"), at(48 * H)).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Fetched);
    assert_eq!(rules.snapshot.failures, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_on_a_two_day_old_snapshot_makes_it_fresh_with_the_same_sha256() {
    let fake = Fake::new();
    let reg = registry(&fake, RobotsConfig::default());
    let o = origin("a.test");
    fake.answer(&o.robots_url(), vec![ok(RULES, Some("\"v1\"")), status(304)]);
    let (first, _) = reg.rules_for(&o, t0()).await;
    let (_, d) = reg.rules_for(&o, at(48 * H)).await;
    assert_eq!(d, Disposition::StaleDegraded, "answered at once from the old snapshot");
    settle(&reg, &o).await;
    assert_eq!(fake.calls(), 2);
    assert_eq!(
        fake.last_validators().and_then(|v| v.etag).as_deref(),
        Some("\"v1\""),
        "conditional refresh"
    );
    let (after, d) = reg.rules_for(&o, at(48 * H + 60)).await;
    assert_eq!(d, Disposition::Cached);
    assert_eq!(after.snapshot.sha256, first.snapshot.sha256);
    assert_eq!(after.snapshot.validated_at, at(48 * H));
    assert_eq!(after.snapshot.fetched_at, t0());
    assert_eq!(after.snapshot.last_outcome, FetchOutcome::NotModified);
    assert_eq!(after.snapshot.state(&reg.windows(&o), at(48 * H + 60)), State::Fresh);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_host_override_of_the_windows() {
    let fake = Fake::new();
    let mut cfg = RobotsConfig::default();
    cfg.hosts.insert(
        "short.test".into(),
        HostOverride {
            fresh: Some(Duration::from_secs(60)),
            stale_usable: Some(Duration::from_secs(120)),
            hard_max: Some(Duration::from_secs(180)),
        },
    );
    let reg = registry(&fake, cfg);
    for host in ["short.test", "long.test"] {
        // The first fetch works; every later one fails.
        fake.answer(&origin(host).robots_url(), vec![ok(RULES, None), status(503)]);
        reg.rules_for(&origin(host), t0()).await;
    }
    assert_eq!(reg.rules_for(&origin("long.test"), at(200)).await.1, Disposition::Cached);
    assert_eq!(reg.rules_for(&origin("short.test"), at(200)).await.1, Disposition::Expired);
}

/// An expired snapshot is not used to refuse a request whose own refresh
/// succeeds: like a first sight, the request waits for that refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_snapshot_with_a_healthy_origin_is_refreshed_by_the_request() {
    let fake = Fake::new();
    let reg = registry(&fake, RobotsConfig::default());
    let o = origin("idle.test");
    fake.answer(&o.robots_url(), vec![ok(RULES, None)]);
    reg.rules_for(&o, t0()).await;
    let (rules, d) = reg.rules_for(&o, at(96 * H)).await;
    assert_eq!(d, Disposition::Fetched, "the request waited for the refresh");
    assert_eq!(rules.snapshot.state(&reg.windows(&o), at(96 * H)), State::Fresh);
    assert_eq!(fake.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_sight_outcomes_200_rules_4xx_allow_all_failures_disallow_all() {
    let fake = Fake::new();
    let reg = registry(&fake, RobotsConfig::default());
    let cases: Vec<(&str, Answer, Option<bool>)> = vec![
        // (host, answer, Some(allowed on /public), private always checked)
        ("ok.test", ok(RULES, None), None),
        ("404.test", status(404), Some(true)),
        ("410.test", status(410), Some(true)),
        ("403.test", status(403), Some(true)),
        ("429.test", retry_after(429, 600), Some(false)),
        ("500.test", status(500), Some(false)),
        ("503.test", status(503), Some(false)),
        ("refused.test", Err(FetchError::Connect("connection refused".into())), Some(false)),
        ("timeout.test", Err(FetchError::Timeout), Some(false)),
        ("dns.test", Err(FetchError::Dns("no such host".into())), Some(false)),
    ];
    for (host, answer, expect) in cases {
        let o = origin(host);
        fake.answer(&o.robots_url(), vec![answer]);
        let (rules, d) = reg.rules_for(&o, t0()).await;
        assert_eq!(d, Disposition::Fetched);
        let state = rules.snapshot.state(&reg.windows(&o), t0());
        let public = rules.verdict(state, "Bot", &format!("http://{host}/public"));
        let private = rules.verdict(state, "Bot", &format!("http://{host}/private/x"));
        match expect {
            None => {
                assert_eq!(rules.snapshot.status, RobotsStatus::Fetched);
                assert!(public.allowed);
                assert!(!private.allowed);
                assert_eq!(private.rule.as_deref(), Some("Disallow: /private"));
                assert_eq!(private.line, Some(2));
            }
            Some(true) => {
                assert_eq!(rules.snapshot.status, RobotsStatus::Absent, "{host}");
                assert!(public.allowed && private.allowed && private.rule.is_none(), "{host}");
            }
            Some(false) => {
                assert_eq!(rules.snapshot.status, RobotsStatus::Unavailable, "{host}");
                assert!(!public.allowed && !private.allowed, "{host}");
                assert_eq!(public.rule.as_deref(), Some(RULE_UNAVAILABLE), "{host}");
                // /robots.txt itself stays allowed.
                assert!(rules.verdict(state, "Bot", &o.robots_url()).allowed);
            }
        }
    }
    let (rules, _) = reg.rules_for(&origin("429.test"), t0()).await;
    assert_eq!(rules.snapshot.retry_after, Some(at(600)));
    assert_eq!(rules.snapshot.next_retry, Some(at(600)));
    let outcomes: HashMap<_, _> = reg.fetch_outcomes().into_iter().collect();
    assert_eq!(outcomes.get("absent"), Some(&3));
    assert_eq!(outcomes.get("server_error"), Some(&2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_keep_the_previous_snapshot_inside_its_windows() {
    let failures: Vec<Answer> = vec![
        retry_after(429, 600),
        status(500),
        status(503),
        Err(FetchError::Connect("connection refused".into())),
        Err(FetchError::Timeout),
    ];
    for (i, failure) in failures.into_iter().enumerate() {
        let fake = Fake::new();
        let reg = registry(&fake, RobotsConfig::default());
        let o = origin("a.test");
        fake.answer(&o.robots_url(), vec![ok(RULES, Some("\"v1\"")), failure]);
        let (first, _) = reg.rules_for(&o, t0()).await;
        let (during, d) = reg.rules_for(&o, at(12 * H)).await;
        assert_eq!(d, Disposition::StaleUsable);
        assert_eq!(during.snapshot.sha256, first.snapshot.sha256);
        settle(&reg, &o).await;
        let (after, d) = reg.rules_for(&o, at(12 * H + 1)).await;
        assert_eq!(d, Disposition::StaleUsable, "case {i}: the age was not reset by a failure");
        assert_eq!(after.snapshot.status, RobotsStatus::Fetched, "case {i}");
        assert_eq!(after.snapshot.sha256, first.snapshot.sha256, "case {i}");
        assert_eq!(after.snapshot.failures, 1, "case {i}");
        assert!(after.snapshot.next_retry.is_some(), "case {i}");
        let v = after.verdict(State::StaleUsable, "Bot", "http://a.test/private");
        assert_eq!(
            v.rule.as_deref(),
            Some("Disallow: /private"),
            "case {i}: the old rules still apply"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_off_never_retries_before_retry_after() {
    let fake = Fake::new();
    let reg = registry(&fake, RobotsConfig::default());
    let o = origin("a.test");
    fake.answer(
        &o.robots_url(),
        vec![retry_after(429, 3 * H), retry_after(503, 2 * H), ok(RULES, None)],
    );
    reg.rules_for(&o, t0()).await;
    assert_eq!(fake.calls(), 1);
    // The back-off alone would allow a retry after 1 min; Retry-After says 3 h.
    for secs in [61, 600, H, 3 * H - 1] {
        let (rules, _) = reg.rules_for(&o, at(secs)).await;
        assert_eq!(rules.snapshot.status, RobotsStatus::Unavailable);
        assert!(!reg.is_refreshing(&o));
    }
    assert_eq!(fake.calls(), 1, "no retry before Retry-After");
    reg.rules_for(&o, at(3 * H)).await;
    settle(&reg, &o).await;
    assert_eq!(fake.calls(), 2);
    let (rules, _) = reg.rules_for(&o, at(3 * H)).await;
    assert_eq!(rules.snapshot.failures, 2);
    assert_eq!(
        rules.snapshot.next_retry,
        Some(at(5 * H)),
        "Retry-After 2 h beats the 2 min back-off"
    );
    reg.rules_for(&o, at(5 * H - 1)).await;
    assert_eq!(fake.calls(), 2);
    reg.rules_for(&o, at(5 * H)).await;
    settle(&reg, &o).await;
    let (rules, d) = reg.rules_for(&o, at(5 * H + 1)).await;
    assert_eq!((rules.snapshot.status, d), (RobotsStatus::Fetched, Disposition::Cached));
    assert_eq!(rules.snapshot.failures, 0);
    assert_eq!(rules.snapshot.next_retry, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_five_same_host_hops_followed_sixth_absent_c55_or_cross_host_unavailable() {
    let fake = Fake::new();
    // `same-host` is opt-in since C49 (the default is `any`).
    let reg = registry(
        &fake,
        RobotsConfig { redirects: RedirectPolicy::SameHost, ..RobotsConfig::default() },
    );
    // Five hops within the host (scheme and port may change).
    let o = origin("five.test");
    fake.answer("http://five.test/robots.txt", vec![redirect("/1")]);
    fake.answer("http://five.test/1", vec![redirect("https://five.test/2")]);
    fake.answer("https://five.test/2", vec![redirect("http://five.test:8080/3")]);
    fake.answer("http://five.test:8080/3", vec![redirect("/4")]);
    fake.answer("http://five.test:8080/4", vec![redirect("http://five.test/5")]);
    fake.answer("http://five.test/5", vec![ok(RULES, None)]);
    let (rules, _) = reg.rules_for(&o, t0()).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Fetched);
    assert_eq!(rules.snapshot.redirects.hops.len(), 5);
    assert_eq!(rules.snapshot.redirects.final_url.as_deref(), Some("http://five.test/5"));

    // A sixth hop (C55): the chain is given up as `absent`, everything
    // allowed, the verdict naming why.
    let o = origin("six.test");
    for i in 0..6 {
        let from = if i == 0 {
            "http://six.test/robots.txt".to_string()
        } else {
            format!("http://six.test/{i}")
        };
        fake.answer(&from, vec![redirect(&format!("/{}", i + 1))]);
    }
    fake.answer("http://six.test/6", vec![ok(RULES, None)]);
    let (rules, _) = reg.rules_for(&o, t0()).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Absent);
    assert_eq!(rules.snapshot.redirects.refused.as_deref(), Some("http://six.test/6"));
    assert!(matches!(rules.snapshot.last_outcome, FetchOutcome::TooManyRedirects { .. }));
    let v = rules.verdict(State::Fresh, "Bot", "http://six.test/private/x");
    assert!(v.allowed && v.rule.as_deref() == Some(RULE_REDIRECT_LIMIT), "{v:?}");
    assert!(
        !fake.calls.lock().unwrap().iter().any(|(u, _)| u == "http://six.test/6"),
        "the sixth target is never contacted"
    );

    // Another host under the opt-in same-host policy: refused, never
    // contacted, and said so.
    let o = origin("cross.test");
    fake.answer("http://cross.test/robots.txt", vec![redirect("http://elsewhere.test/robots.txt")]);
    fake.answer("http://elsewhere.test/robots.txt", vec![ok(RULES, None)]);
    let (rules, _) = reg.rules_for(&o, t0()).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Unavailable);
    assert_eq!(
        rules.snapshot.redirects.refused.as_deref(),
        Some("http://elsewhere.test/robots.txt")
    );
    assert!(matches!(rules.snapshot.last_outcome, FetchOutcome::RedirectRefused { .. }));
    assert_eq!(
        rules.verdict(State::Fresh, "Bot", "http://cross.test/x").rule.as_deref(),
        Some(RULE_REDIRECT_REFUSED)
    );
    assert!(!fake
        .calls
        .lock()
        .unwrap()
        .iter()
        .any(|(u, _)| u == "http://elsewhere.test/robots.txt"));

    // `any`, the default, follows it (RFC 9309 §2.3.1.2).
    let reg = registry(&fake, RobotsConfig::default());
    let (rules, _) = reg.rules_for(&o, t0()).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Fetched);
    assert_eq!(
        rules.snapshot.redirects.final_url.as_deref(),
        Some("http://elsewhere.test/robots.txt")
    );
}

/// C49: by default an apex → www redirect (another host) is followed, the
/// rules apply to the apex origin and the chain is in the snapshot; a
/// sixth hop across hosts ends the chain as `absent` (C55), its target
/// never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_redirects_across_hosts_are_followed_and_the_chain_recorded_c49() {
    let fake = Fake::new();
    let reg = registry(&fake, RobotsConfig::default());
    let o = origin("example.com");
    fake.answer(
        "http://example.com/robots.txt",
        vec![redirect("https://www.example.com/robots.txt")],
    );
    fake.answer(
        "https://www.example.com/robots.txt",
        vec![redirect("https://cdn.example.net/example.com/robots.txt")],
    );
    fake.answer(
        "https://cdn.example.net/example.com/robots.txt",
        vec![ok("User-agent: *\nDisallow: /private/\n", None)],
    );
    let (rules, _) = reg.rules_for(&o, t0()).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Fetched);
    assert_eq!(rules.snapshot.origin, o);
    assert_eq!(
        rules.snapshot.redirects.hops,
        ["https://www.example.com/robots.txt", "https://cdn.example.net/example.com/robots.txt"]
    );
    assert!(!rules.verdict(State::Fresh, "Bot", "http://example.com/private/x").allowed);
    assert!(rules.verdict(State::Fresh, "Bot", "http://example.com/public").allowed);
    assert_eq!(fake.calls(), 3);
    // The hop hosts got no snapshot of their own.
    assert!(reg.current(&Origin::new("https", "www.example.com", 443)).is_none());

    let o = origin("hops.test");
    for i in 0..6 {
        let from = if i == 0 {
            "http://hops.test/robots.txt".to_string()
        } else {
            format!("http://h{i}.test/robots.txt")
        };
        fake.answer(&from, vec![redirect(&format!("http://h{}.test/robots.txt", i + 1))]);
    }
    fake.answer("http://h6.test/robots.txt", vec![ok(RULES, None)]);
    let before = fake.calls();
    let (rules, _) = reg.rules_for(&o, t0()).await;
    assert_eq!(fake.calls() - before, 6, "the origin and five hops, not the sixth");
    assert_eq!(rules.snapshot.status, RobotsStatus::Absent);
    assert_eq!(rules.snapshot.redirects.refused.as_deref(), Some("http://h6.test/robots.txt"));
    let v = rules.verdict(State::Fresh, "Bot", "http://hops.test/a");
    assert!(v.allowed && v.rule.as_deref() == Some(RULE_REDIRECT_LIMIT), "{v:?}");
}

/// C43: the fetch identity comes from `robots.user_agent`, else from
/// `robots.agent` and the requesting client, and is recorded; a refresh
/// without a client keeps the recorded identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_identity_from_configuration_or_the_requesting_client_is_recorded_c43() {
    let ua = "examplebot/1.0 (+http://example.org/bot)";
    let fake = Fake::new();
    let reg =
        registry(&fake, RobotsConfig { agent: "examplebot".into(), ..RobotsConfig::default() });
    let o = origin("a.test");
    fake.answer(&o.robots_url(), vec![ok(RULES, Some("\"v1\"")), status(304)]);
    let (rules, _) = reg.rules_for_client(&o, t0(), Some(ua)).await;
    assert_eq!(
        fake.last_user_agent().as_deref(),
        Some(ua),
        "the matching client's full User-Agent"
    );
    assert_eq!(rules.snapshot.fetched_as.as_deref(), Some(ua));
    let rules = reg.refresh(&o, at(60)).await;
    assert_eq!(
        fake.last_user_agent().as_deref(),
        Some(ua),
        "a forced refresh keeps the recorded identity"
    );
    assert_eq!(rules.snapshot.fetched_as.as_deref(), Some(ua));
    let b = origin("b.test");
    fake.answer(&b.robots_url(), vec![ok(RULES, None)]);
    reg.rules_for_client(&b, t0(), Some("curl/8.0")).await;
    assert_eq!(
        fake.last_user_agent().as_deref(),
        Some("examplebot"),
        "another client: the bare agent"
    );

    // robots.user_agent wins over everything.
    let reg = registry(
        &fake,
        RobotsConfig {
            agent: "examplebot".into(),
            user_agent: "MyCrawler/3.0".into(),
            ..RobotsConfig::default()
        },
    );
    let c = origin("c.test");
    fake.answer(&c.robots_url(), vec![ok(RULES, None)]);
    let (rules, _) = reg.rules_for_client(&c, t0(), Some(ua)).await;
    assert_eq!(
        (fake.last_user_agent().as_deref(), rules.snapshot.fetched_as.as_deref()),
        (Some("MyCrawler/3.0"), Some("MyCrawler/3.0"))
    );

    // Nothing configured: the client's own User-Agent, else the fallback.
    let reg = registry(&fake, RobotsConfig::default());
    let d = origin("d.test");
    fake.answer(&d.robots_url(), vec![status(403)]);
    let (rules, _) = reg.rules_for_client(&d, t0(), Some("Mozilla/5.0 (compatible; x)")).await;
    assert_eq!(fake.last_user_agent().as_deref(), Some("Mozilla/5.0 (compatible; x)"));
    assert_eq!(rules.snapshot.status, RobotsStatus::Absent);
    let w = rules.snapshot.identity_warning().expect("a 403 is flagged");
    assert!(
        w.starts_with(
            "robots.txt answered 403 to Mozilla/5.0 (compatible; x): rules treated as allow-all"
        ),
        "{w}"
    );
    let e = origin("e.test");
    fake.answer(&e.robots_url(), vec![ok(RULES, None)]);
    let (rules, _) = reg.rules_for(&e, t0()).await;
    assert_eq!(rules.snapshot.fetched_as.as_deref(), Some(FALLBACK_USER_AGENT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_callers_on_a_stale_origin_make_one_fetch_and_none_waits() {
    let fake = Fake::new();
    let reg = registry(&fake, RobotsConfig::default());
    let o = origin("a.test");
    fake.answer(
        &o.robots_url(),
        vec![ok(RULES, Some("\"v1\"")), ok("User-agent: *\nDisallow: /\n", Some("\"v2\""))],
    );
    let (first, _) = reg.rules_for(&o, t0()).await;
    let gate = fake.close_gate();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let reg = reg.clone();
            let o = o.clone();
            tokio::spawn(async move { reg.rules_for(&o, at(7 * H)).await })
        })
        .collect();
    for t in tasks {
        // The refresh is held at the gate: any caller that waited for it
        // would time out here.
        let (rules, d) = tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .expect("no caller waits")
            .expect("task");
        assert_eq!(d, Disposition::StaleUsable);
        assert_eq!(rules.snapshot.sha256, first.snapshot.sha256);
    }
    // The background refresh is spawned by the first stale caller; give its
    // task a moment to reach the origin (bounded), then there must be
    // exactly one refresh for all twenty callers.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while fake.calls() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(fake.calls(), 2, "one first fetch and one collapsed refresh");
    assert!(reg.is_refreshing(&o));
    gate.add_permits(100);
    settle(&reg, &o).await;
    assert_eq!(fake.calls(), 2);
    let (rules, d) = reg.rules_for(&o, at(7 * H + 1)).await;
    assert_eq!(d, Disposition::Cached);
    assert_ne!(rules.snapshot.sha256, first.snapshot.sha256);
    assert!(!rules.verdict(State::Fresh, "Bot", "/public").allowed, "the new rules are in force");
    assert_eq!(reg.fetch_count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_sight_callers_share_one_fetch() {
    let fake = Fake::new();
    let reg = registry(&fake, RobotsConfig::default());
    let o = origin("a.test");
    fake.answer(&o.robots_url(), vec![ok(RULES, None)]);
    let gate = fake.close_gate();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let reg = reg.clone();
            let o = o.clone();
            tokio::spawn(async move { reg.rules_for(&o, t0()).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(tasks.iter().all(|t| !t.is_finished()), "first sight waits for the fetch");
    gate.add_permits(100);
    for t in tasks {
        let (rules, d) =
            tokio::time::timeout(Duration::from_secs(5), t).await.expect("released").expect("task");
        assert_eq!(d, Disposition::Fetched);
        assert_eq!(rules.snapshot.status, RobotsStatus::Fetched);
    }
    assert_eq!(fake.calls(), 1);
    // Later calls do not wait or fetch again.
    assert_eq!(reg.rules_for(&o, at(60)).await.1, Disposition::Cached);
    assert_eq!(fake.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_refresh_is_conditional_immediate_and_counts_for_pacing() {
    let fake = Fake::new();
    let reg = registry(&fake, RobotsConfig::default());
    let hooked = Arc::new(AtomicU64::new(0));
    let h = hooked.clone();
    reg.set_fetch_hook(Arc::new(move |_o: &Origin| {
        h.fetch_add(1, Ordering::Relaxed);
    }));
    let o = origin("a.test");
    fake.answer(&o.robots_url(), vec![ok(RULES, Some("\"v1\"")), status(304)]);
    reg.rules_for(&o, t0()).await;
    // Fresh, yet forced.
    let rules = reg.refresh(&o, at(60)).await;
    assert_eq!(rules.snapshot.validated_at, at(60));
    assert_eq!(rules.snapshot.last_outcome, FetchOutcome::NotModified);
    assert_eq!(fake.last_validators().and_then(|v| v.etag).as_deref(), Some("\"v1\""));
    assert_eq!(hooked.load(Ordering::Relaxed), 2);
    assert_eq!(reg.fetch_count(), 2);
    // A refresh of an origin never seen is a first fetch.
    let n = origin("new.test");
    fake.answer(&n.robots_url(), vec![status(404)]);
    assert_eq!(reg.refresh(&n, t0()).await.snapshot.status, RobotsStatus::Absent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_survive_closing_and_reopening_the_db() {
    let dir = tempfile::tempdir().unwrap();
    let o = origin("a.test");
    let sha = {
        let db = sled::open(dir.path()).unwrap();
        let fake = Fake::new();
        fake.answer(&o.robots_url(), vec![ok(RULES, Some("\"v1\""))]);
        let reg = RobotsRegistry::new(
            db.open_tree("robots").unwrap(),
            fake.clone(),
            RobotsConfig::default(),
        );
        let (rules, _) = reg.rules_for(&o, t0()).await;
        reg.flush().unwrap();
        rules.snapshot.sha256.clone()
    };
    let db = sled::open(dir.path()).unwrap();
    let tree = db.open_tree("robots").unwrap();
    let stored = load_snapshot(&tree, &o).unwrap().expect("stored");
    assert_eq!(stored.sha256, sha);
    assert_eq!(stored.body, RULES.as_bytes());
    let fake = Fake::new(); // would refuse every connection
    let reg = RobotsRegistry::new(tree, fake.clone(), RobotsConfig::default());
    let (rules, d) = reg.rules_for(&o, at(H)).await;
    assert_eq!(d, Disposition::Cached, "no first-sight fetch after a restart");
    assert_eq!(rules.snapshot.sha256, sha);
    assert!(!rules.verdict(State::Fresh, "Bot", "/private").allowed);
    assert_eq!(fake.calls(), 0);
}

/// The registry of a proxy restarted over the data directory `tree` of the
/// one before: a new registry on the same tree.
fn restarted(tree: &sled::Tree, fake: &Arc<Fake>) -> RobotsRegistry {
    RobotsRegistry::new(tree.clone(), fake.clone(), RobotsConfig::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_from_before_a_restart_is_retried_at_first_use_whatever_its_back_off() {
    let tree = tree();
    let o = Origin::new("https", "tls.test", 443);
    let fake = Fake::new();
    let untrusted =
        "TLS with origin tls.test failed: the origin's certificate is not trusted: UnknownIssuer";
    fake.answer(&o.robots_url(), vec![Err(FetchError::Tls(untrusted.into()))]);
    let before = restarted(&tree, &fake);
    let (rules, _) = before.rules_for(&o, t0()).await;
    assert_eq!(rules.snapshot.status, RobotsStatus::Unavailable);
    assert_eq!(rules.snapshot.next_retry, Some(at(60)), "one minute of back-off");
    let reason = rules.snapshot.verdict_reason().unwrap();
    assert!(
        reason.starts_with("certificate: ")
            && reason.contains("UnknownIssuer")
            && reason.contains("`upstream.extra_ca_file`"),
        "{reason}"
    );
    // Inside the back-off the same process does not retry.
    before.rules_for(&o, at(10)).await;
    assert_eq!(fake.calls(), 1);
    before.flush().unwrap();
    drop(before);

    // Restarted (the CA is now trusted): the first use, still inside the
    // back-off, waits for a retry and gets the rules.
    let fixed = Fake::new();
    fixed.answer(&o.robots_url(), vec![ok(RULES, None)]);
    let after = restarted(&tree, &fixed);
    let (rules, d) = after.rules_for(&o, at(20)).await;
    assert_eq!(
        (rules.snapshot.status, d),
        (RobotsStatus::Fetched, Disposition::Fetched),
        "{:?}",
        rules.snapshot.last_outcome
    );
    assert_eq!(fixed.calls(), 1);
    assert!(rules.verdict(State::Fresh, "Bot", "https://tls.test/public").allowed);
    // Once: the retry's result is this process's own.
    after.rules_for(&o, at(30)).await;
    assert_eq!(fixed.calls(), 1);

    // A retry that fails again names its new cause and keeps the back-off.
    let tree = self::tree();
    let dead = Fake::new();
    dead.answer(&o.robots_url(), vec![status(503)]);
    restarted(&tree, &dead).rules_for(&o, t0()).await;
    dead.answer(
        &o.robots_url(),
        vec![Err(FetchError::Dns("could not resolve origin host tls.test".into()))],
    );
    let again = restarted(&tree, &dead);
    let (rules, d) = again.rules_for(&o, at(5)).await;
    assert_eq!(
        (rules.snapshot.status, d, dead.calls()),
        (RobotsStatus::Unavailable, Disposition::Fetched, 2)
    );
    assert_eq!(rules.snapshot.failures, 2);
    let reason = rules.snapshot.verdict_reason().unwrap();
    assert!(
        reason.starts_with("DNS: ") && reason.contains("the origin is unreachable"),
        "{reason}"
    );
    again.rules_for(&o, at(6)).await;
    assert_eq!(dead.calls(), 2, "then the back-off holds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_rules_kept_through_failures_before_a_restart_are_used_and_retried_in_the_background()
{
    let tree = tree();
    let o = origin("a.test");
    let fake = Fake::new();
    fake.answer(&o.robots_url(), vec![ok(RULES, None), status(503)]);
    let before = restarted(&tree, &fake);
    before.rules_for(&o, t0()).await;
    before.rules_for(&o, at(7 * H)).await;
    settle(&before, &o).await;
    let (kept, _) = before.rules_for(&o, at(7 * H)).await;
    assert_eq!((kept.snapshot.status, kept.snapshot.failures), (RobotsStatus::Fetched, 1));
    drop(before);

    let fixed = Fake::new();
    fixed.answer(&o.robots_url(), vec![ok("User-agent: *\nDisallow: /other\n", None)]);
    let after = restarted(&tree, &fixed);
    let (rules, d) = after.rules_for(&o, at(7 * H + 1)).await;
    assert_eq!(d, Disposition::StaleUsable, "the kept rules answer at once");
    assert_eq!(rules.snapshot.sha256, kept.snapshot.sha256);
    settle(&after, &o).await;
    assert_eq!(fixed.calls(), 1, "and are retried in the background, inside the back-off");
    let (rules, _) = after.rules_for(&o, at(7 * H + 2)).await;
    assert_eq!(rules.snapshot.failures, 0);
    assert!(rules.verdict(State::Fresh, "Bot", "http://a.test/private").allowed);
}
