//! What the proxy does with a verdict (`robots.mode`), pure.
//!
//! [`RobotsCheck::new`] gathers, for one request, the verdict, the snapshot's
//! state and SHA-256 and the disposition; [`RobotsCheck::action`] says
//! whether the request may go on (`off`, `annotate`, or allowed under
//! `enforce`) or is answered by the proxy (403, or 503 for expired rules);
//! [`RobotsCheck::status_header`] is the `Robots-Status` response field.

use crate::origin_rules::Rules;
use crate::robots_txt::Verdict;
use crate::settings::RobotsMode;
use crate::snapshot::{Disposition, RobotsStatus, State, Windows, RULE_REDIRECT_REFUSED};

/// Most bytes of the `reason` parameter of `Robots-Status` (a redirect
/// chain of long URLs is cut there, marked `...`); the audit line and the
/// refusal carry it whole.
pub const MAX_REASON_BYTES: usize = 2048;
use crate::token::product_token_from_user_agent;
use std::sync::Arc;
use std::time::SystemTime;

/// The `Robots-Status` response field name.
pub const ROBOTS_STATUS_HEADER: &str = "robots-status";

/// The product token to check a request with (RFC 9309 §2.2.1):
/// `robots.agent` when set, else the product token of the request's
/// `User-Agent` ([`product_token_from_user_agent`]), else `*` (only the `*`
/// groups apply).
pub fn product_token(configured: &str, user_agent: Option<&str>) -> String {
    let c = configured.trim();
    if !c.is_empty() {
        return c.to_string();
    }
    user_agent.and_then(product_token_from_user_agent).unwrap_or_else(|| "*".to_string())
}

/// The names a [`RobotsCheck`] carries for one set of rules and one
/// product token, made once and shared by the checks of every request that
/// uses them (a serving thread keeps them with the fresh rules of an origin),
/// so a check copies no strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckNames {
    /// The product token checked.
    pub agent: Arc<str>,
    /// SHA-256 (hex) of the rules.
    pub sha256: Arc<str>,
    /// The robots.txt URL the rules come from.
    pub robots_url: Arc<str>,
    /// The `User-Agent` the snapshot was fetched as (C43).
    pub fetched_as: Option<Arc<str>>,
    /// The snapshot's warning ([`crate::snapshot::Snapshot::warning`]):
    /// about the client's identity, or why the verdicts are not the file's.
    pub warning: Option<Arc<str>>,
    /// Why the verdicts are not a rule of the file
    /// ([`crate::snapshot::Snapshot::verdict_reason`]).
    pub reason: Option<Arc<str>>,
}

impl CheckNames {
    /// The names of `rules` checked for product token `agent`.
    pub fn new(rules: &Rules, agent: &str) -> CheckNames {
        let snapshot = &rules.snapshot;
        CheckNames {
            agent: agent.into(),
            sha256: snapshot.sha256.as_str().into(),
            robots_url: rules.robots_url.as_str().into(),
            fetched_as: snapshot.fetched_as.as_deref().map(Arc::from),
            warning: snapshot.warning().map(Arc::from),
            reason: snapshot.verdict_reason().map(Arc::from),
        }
    }
}

/// The robots side of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsCheck {
    /// The product token checked.
    pub agent: Arc<str>,
    /// The verdict.
    pub verdict: Verdict,
    /// The snapshot's state when checked.
    pub state: State,
    /// How the rules were obtained.
    pub disposition: Disposition,
    /// The snapshot's status.
    pub status: RobotsStatus,
    /// SHA-256 (hex) of the rules in force.
    pub sha256: Arc<str>,
    /// The robots.txt URL the rules come from.
    pub robots_url: Arc<str>,
    /// The snapshot's age in seconds.
    pub age_secs: u64,
    /// The host's hard maximum in seconds.
    pub hard_max_secs: u64,
    /// The `User-Agent` the snapshot was fetched as (C43).
    pub fetched_as: Option<Arc<str>>,
    /// A warning about the rules in force, for the audit line
    /// ([`crate::snapshot::Snapshot::warning`]): the robots.txt answered 401
    /// or 403 to `fetched_as`, or why the verdicts are not the file's rules.
    pub warning: Option<Arc<str>>,
    /// Why the verdict is not a rule of the file
    /// ([`crate::snapshot::Snapshot::verdict_reason`]): for `unavailable`
    /// rules the cause of the failure (certificate, DNS, connection,
    /// status, ...) and what fixes it; for a redirect chain given up, the
    /// limit or the loop and the chain.
    pub reason: Option<Arc<str>>,
}

/// What the proxy does with the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Go on (cache, then origin).
    Forward,
    /// Answer with this status and plain-text body; never contact the
    /// origin, never serve from cache.
    Refuse {
        /// 403 (disallowed) or 503 (rules too old).
        status: u16,
        /// Names the rule and the robots.txt URL.
        body: String,
    },
}

impl RobotsCheck {
    /// Checks `url` for `agent` against `rules` (obtained with
    /// `disposition`) at `now` under `windows`. With
    /// [`Disposition::Offline`] the windows do not apply: the rules are used
    /// whatever their age (C44).
    pub fn new(
        rules: &Rules,
        disposition: Disposition,
        windows: &Windows,
        now: SystemTime,
        agent: impl AsRef<str>,
        url: &str,
    ) -> RobotsCheck {
        RobotsCheck::with_names(
            rules,
            disposition,
            windows,
            now,
            &CheckNames::new(rules, agent.as_ref()),
            url,
        )
    }

    /// [`RobotsCheck::new`] with the names of `rules` and the product token
    /// made beforehand (`names`, from [`CheckNames::new`] for the same
    /// rules): the check shares them instead of copying.
    pub fn with_names(
        rules: &Rules,
        disposition: Disposition,
        windows: &Windows,
        now: SystemTime,
        names: &CheckNames,
        url: &str,
    ) -> RobotsCheck {
        let state = rules.snapshot.state(windows, now);
        let judged = if disposition == Disposition::Offline { State::Fresh } else { state };
        RobotsCheck {
            verdict: rules.verdict(judged, &names.agent, url),
            agent: names.agent.clone(),
            state,
            disposition,
            status: rules.snapshot.status,
            sha256: names.sha256.clone(),
            robots_url: names.robots_url.clone(),
            age_secs: rules.snapshot.age(now).as_secs(),
            hard_max_secs: windows.hard_max.as_secs(),
            fetched_as: names.fetched_as.clone(),
            warning: names.warning.clone(),
            reason: names.reason.clone(),
        }
    }

    /// The state the rules are judged in: the snapshot's, except offline,
    /// where age does not count (as if fresh).
    pub fn judged_state(&self) -> State {
        if self.disposition == Disposition::Offline {
            State::Fresh
        } else {
            self.state
        }
    }

    /// The action under `mode`: `off` and `annotate` always forward;
    /// `enforce` refuses a disallowed request with 403 naming the rule and
    /// the robots.txt URL, or 503 "host not crawlable: rules too old" when
    /// the snapshot is expired (SPEC §4; never offline, C44).
    pub fn action(&self, mode: RobotsMode) -> Action {
        if mode != RobotsMode::Enforce || self.verdict.allowed {
            return Action::Forward;
        }
        if self.judged_state() == State::Expired && self.status != RobotsStatus::Unavailable {
            return Action::Refuse {
                status: 503,
                body: format!(
                    "host not crawlable: rules too old\nThe robots.txt snapshot from {} is {} s old (hard maximum {} s) and could not be refreshed.\nRun `crawlcache robots refresh` or retry later.\n",
                    self.robots_url, self.age_secs, self.hard_max_secs
                ),
            };
        }
        let rule = self.verdict.rule.as_deref().unwrap_or("(no rule)");
        let line = self.verdict.line.map(|l| format!(" (line {l})")).unwrap_or_default();
        let why = if self.status == RobotsStatus::Unavailable {
            let detail = self.reason.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
            if self.verdict.rule.as_deref() == Some(RULE_REDIRECT_REFUSED) {
                format!("a redirect of the robots.txt was refused{detail}, so the rules are unknown and everything is disallowed (RFC 9309 section 2.3.1.2; `robots.redirects`)")
            } else {
                format!(
                    "the robots.txt could not be fetched{detail}, so everything is disallowed (RFC 9309 section 2.3.1.4) until a fetch succeeds: \
                     after the retry back-off, at the first request after a restart, or now with `crawlcache robots refresh`"
                )
            }
        } else {
            format!("rule `{rule}`{line}")
        };
        Action::Refuse {
            status: 403,
            body: format!(
                "blocked by robots.txt: {why}\nrobots.txt: {}\nagent: {}\nsha256: {}\n",
                self.robots_url, self.agent, self.sha256
            ),
        }
    }

    /// The `Robots-Status` field value: the verdict, then `rule`, `line`
    /// (when known), `sha256`, `disposition` as parameters, e.g.
    /// `disallowed; rule="Disallow: /private"; line=2; sha256="ab…"; disposition=cached`,
    /// then `reason` when the verdict is not a rule of the file
    /// ([`RobotsCheck::reason`], at most [`MAX_REASON_BYTES`]), e.g.
    /// `allowed; rule="redirect loop"; sha256="e3…"; disposition=fetched; reason="a redirect loop: http://… -> …"`.
    /// Strings are quoted with `\` escapes; bytes outside printable ASCII
    /// are percent-encoded, so the value is always a valid field value.
    pub fn status_header(&self) -> String {
        let mut s = String::from(if self.verdict.allowed { "allowed" } else { "disallowed" });
        if let Some(r) = &self.verdict.rule {
            s.push_str("; rule=");
            s.push_str(&quote(r));
        }
        if let Some(l) = self.verdict.line {
            use std::fmt::Write as _;
            let _ = write!(s, "; line={l}");
        }
        s.push_str("; sha256=\"");
        s.push_str(&self.sha256);
        s.push_str("\"; disposition=");
        s.push_str(self.disposition.as_str());
        if let Some(r) = &self.reason {
            s.push_str("; reason=");
            if r.len() <= MAX_REASON_BYTES {
                s.push_str(&quote(r));
            } else {
                let mut cut = MAX_REASON_BYTES;
                while !r.is_char_boundary(cut) {
                    cut -= 1;
                }
                s.push_str(&quote(&format!("{}...", &r[..cut])));
            }
        }
        s
    }
}

fn quote(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for b in v.bytes() {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{FetchOutcome, Origin, Snapshot};
    use std::time::Duration;

    fn rules(status: RobotsStatus, body: &str, at: SystemTime) -> Rules {
        let s = Snapshot::new(
            Origin::new("http", "example.org", 80),
            status,
            body.as_bytes().to_vec(),
            FetchOutcome::Ok { status: 200 },
            at,
        );
        Rules::new(Snapshot { failures: 0, fetched_as: Some("Bot/1.0".into()), ..s })
    }

    #[test]
    fn product_token_from_config_then_user_agent_then_star() {
        assert_eq!(product_token("MyBot", Some("Other/1.0")), "MyBot");
        assert_eq!(product_token("", Some("ExampleBot/2.1 (+http://e.org)")), "ExampleBot");
        assert_eq!(product_token("", Some("Mozilla/5.0 (X11)")), "*");
        assert_eq!(product_token("", None), "*");
    }

    #[test]
    fn enforce_refuses_disallowed_with_rule_and_robots_url_annotate_forwards() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let r = rules(RobotsStatus::Fetched, "User-agent: *\nDisallow: /private\n", t);
        let w = Windows::default();
        let c =
            RobotsCheck::new(&r, Disposition::Cached, &w, t, "Bot", "http://example.org/private/a");
        assert!(!c.verdict.allowed);
        assert_eq!(c.action(RobotsMode::Annotate), Action::Forward);
        assert_eq!(c.action(RobotsMode::Off), Action::Forward);
        match c.action(RobotsMode::Enforce) {
            Action::Refuse { status, body } => {
                assert_eq!(status, 403);
                assert!(
                    body.contains("Disallow: /private")
                        && body.contains("line 2")
                        && body.contains("http://example.org/robots.txt"),
                    "{body}"
                );
            }
            a => panic!("{a:?}"),
        }
        assert_eq!(c.status_header(), format!("disallowed; rule=\"Disallow: /private\"; line=2; sha256=\"{}\"; disposition=cached", r.snapshot.sha256));
        let ok =
            RobotsCheck::new(&r, Disposition::Cached, &w, t, "Bot", "http://example.org/public");
        assert_eq!(ok.action(RobotsMode::Enforce), Action::Forward);
        assert!(ok.status_header().starts_with("allowed; sha256="));
    }

    #[test]
    fn expired_rules_give_503_unavailable_rules_give_403() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let w = Windows::default();
        let later = t + Duration::from_secs(4 * 86_400);
        let r = rules(RobotsStatus::Absent, "", t);
        let c =
            RobotsCheck::new(&r, Disposition::Expired, &w, later, "Bot", "http://example.org/a");
        match c.action(RobotsMode::Enforce) {
            Action::Refuse { status: 503, body } => {
                assert!(body.starts_with("host not crawlable: rules too old"), "{body}")
            }
            a => panic!("{a:?}"),
        }
        let r = rules(RobotsStatus::Unavailable, "", t);
        let c = RobotsCheck::new(&r, Disposition::Fetched, &w, t, "Bot", "http://example.org/a");
        match c.action(RobotsMode::Enforce) {
            Action::Refuse { status: 403, body } => {
                assert!(body.contains("could not be fetched"), "{body}")
            }
            a => panic!("{a:?}"),
        }
        assert!(c.status_header().starts_with("disallowed; rule=\"rules unavailable\"; sha256="));
    }

    #[test]
    fn offline_judges_by_the_last_snapshot_whatever_its_age_c44() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let w = Windows::default();
        let later = t + Duration::from_secs(30 * 86_400);
        let r = rules(RobotsStatus::Fetched, "User-agent: *\nDisallow: /private\n", t);
        let c = RobotsCheck::new(
            &r,
            Disposition::Offline,
            &w,
            later,
            "Bot",
            "http://example.org/public",
        );
        assert_eq!(c.state, State::Expired, "the snapshot's own state is kept for display");
        assert_eq!(c.judged_state(), State::Fresh);
        assert!(c.verdict.allowed);
        assert_eq!(c.action(RobotsMode::Enforce), Action::Forward);
        assert!(c.status_header().ends_with("disposition=offline"), "{}", c.status_header());
        let c = RobotsCheck::new(
            &r,
            Disposition::Offline,
            &w,
            later,
            "Bot",
            "http://example.org/private/a",
        );
        match c.action(RobotsMode::Enforce) {
            Action::Refuse { status: 403, body } => {
                assert!(body.contains("Disallow: /private"), "{body}")
            }
            a => panic!("{a:?}"),
        }
    }

    #[test]
    fn a_refused_redirect_is_named_in_the_refusal_c49() {
        let t = SystemTime::UNIX_EPOCH;
        let mut r = rules(RobotsStatus::Unavailable, "", t);
        r.snapshot.redirects.refused = Some("http://b.test/robots.txt".into());
        r.snapshot.last_outcome =
            FetchOutcome::RedirectRefused { to: "http://b.test/robots.txt".into() };
        let c = RobotsCheck::new(
            &r,
            Disposition::Fetched,
            &Windows::default(),
            t,
            "Bot",
            "http://example.org/a",
        );
        assert!(
            c.status_header().starts_with("disallowed; rule=\"redirect refused\""),
            "{}",
            c.status_header()
        );
        match c.action(RobotsMode::Enforce) {
            Action::Refuse { status: 403, body } => {
                assert!(
                    body.contains("redirect of the robots.txt was refused")
                        && body.contains("http://b.test/robots.txt"),
                    "{body}"
                )
            }
            a => panic!("{a:?}"),
        }
    }

    #[test]
    fn unavailable_rules_name_the_cause_and_the_fix_in_the_refusal_the_header_and_the_audit_warning(
    ) {
        let t = SystemTime::UNIX_EPOCH;
        for (outcome, cause, fix) in [
            (
                FetchOutcome::Tls { detail: "TLS with origin localhost:8443 failed: the origin's certificate is not trusted: UnknownIssuer".into() },
                "certificate: ",
                "`upstream.extra_ca_file`",
            ),
            (FetchOutcome::Dns { detail: "could not resolve origin host nowhere.test".into() }, "DNS: ", "the origin is unreachable"),
            (
                FetchOutcome::Connect { detail: "could not connect to origin 127.0.0.1:9: Connection refused".into() },
                "connection: ",
                "the origin is unreachable",
            ),
            (FetchOutcome::ServerError { status: 503 }, "status: ", "answered 503"),
        ] {
            let mut r = rules(RobotsStatus::Unavailable, "", t);
            r.snapshot.last_outcome = outcome.clone();
            let c = RobotsCheck::new(&r, Disposition::Fetched, &Windows::default(), t, "Bot", "http://example.org/a");
            let reason = c.reason.as_deref().unwrap_or_default();
            assert!(reason.starts_with(cause) && reason.contains(fix), "{outcome}: {reason}");
            let h = c.status_header();
            assert!(h.starts_with("disallowed; rule=\"rules unavailable\"; sha256=") && h.contains("; reason=\"") && h.contains(cause), "{h}");
            assert!(http::HeaderValue::from_str(&h).is_ok());
            assert_eq!(c.warning.as_deref(), Some(reason), "the audit line's robots_warning says the same");
            match c.action(RobotsMode::Enforce) {
                Action::Refuse { status: 403, body } => assert!(body.contains("could not be fetched") && body.contains(cause) && body.contains(fix), "{body}"),
                a => panic!("{a:?}"),
            }
        }
    }

    #[test]
    fn a_long_reason_is_cut_in_the_header_only() {
        let t = SystemTime::UNIX_EPOCH;
        let mut r = rules(RobotsStatus::Unavailable, "", t);
        r.snapshot.last_outcome = FetchOutcome::Other { detail: "é".repeat(3000) };
        let c = RobotsCheck::new(
            &r,
            Disposition::Fetched,
            &Windows::default(),
            t,
            "Bot",
            "http://example.org/a",
        );
        let h = c.status_header();
        assert!(h.ends_with("...\"") && h.len() < 3 * MAX_REASON_BYTES + 200, "{}", h.len());
        assert!(c.reason.as_deref().is_some_and(|r| r.len() > 6000));
    }

    #[test]
    fn header_value_is_always_printable_ascii() {
        let t = SystemTime::UNIX_EPOCH;
        let r = rules(RobotsStatus::Fetched, "User-agent: *\nDisallow: /ä\"\\\t\n", t);
        let mut c = RobotsCheck::new(&r, Disposition::Cached, &Windows::default(), t, "Bot", "/x");
        c.verdict =
            Verdict { allowed: false, rule: Some("Disallow: /ä\"\\\t".into()), line: Some(2) };
        let h = c.status_header();
        assert!(h.contains("rule=\"Disallow: /%C3%A4\\\"\\\\%09\""), "{h}");
        assert!(h.bytes().all(|b| (0x20..0x7f).contains(&b)), "{h}");
        assert!(http::HeaderValue::from_str(&h).is_ok());
    }
}
