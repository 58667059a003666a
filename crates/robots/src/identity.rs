//! Which `User-Agent` a robots.txt fetch is sent under (C43).
//!
//! RFC 9309 does not say; Google fetches a robots.txt under the identity of
//! the crawler whose access it governs, and origins that filter by
//! `User-Agent` serve different rules (or a 403) to other identities. So the
//! rules in force should be those the origin serves to the crawler:
//!
//! 1. `robots.user_agent`, when set;
//! 2. else, when `robots.agent` is set: the requesting client's full
//!    `User-Agent` when its product token is that agent (case-insensitive),
//!    otherwise the bare `robots.agent`;
//! 3. else the requesting client's own `User-Agent`;
//! 4. else (no client, as for `crawlcache robots refresh`, or a client
//!    without one) the identity the snapshot was last fetched under, and
//!    failing that [`FALLBACK_USER_AGENT`].
//!
//! Without a client `User-Agent`, step 4 comes before step 2 when the
//! recorded identity names `robots.agent`: a forced refresh keeps the full
//! `User-Agent` the crawler's own request used.
//!
//! One snapshot per origin is shared by every client: it is fetched under
//! the identity of the request that needed the fetch (first sight, or the
//! request that started a refresh).

use crate::token::product_token_from_user_agent;

/// The `User-Agent` of a robots.txt fetch when neither configuration nor a
/// client gives one: product name and version.
pub const FALLBACK_USER_AGENT: &str =
    concat!("crawlcache/", env!("CARGO_PKG_VERSION"), " (+https://github.com/crawlcache)");

/// The `User-Agent` for a robots.txt fetch needed by a client sending
/// `client_user_agent` (`None` for no client), from `robots.user_agent`
/// (`configured`), `robots.agent` (`agent`) and the identity the origin's
/// snapshot was last fetched under (`previous`); see the module docs.
pub fn fetch_identity(
    configured: &str,
    agent: &str,
    client_user_agent: Option<&str>,
    previous: Option<&str>,
) -> String {
    let client_given = client_user_agent.is_some_and(|u| !u.trim().is_empty());
    let derived = derive(configured, agent, client_user_agent);
    if !configured.trim().is_empty() || client_given {
        if let Some(d) = derived {
            return d;
        }
    }
    let previous = previous.map(str::trim).filter(|p| {
        !p.is_empty() && http::HeaderValue::from_str(p).is_ok() && fits_agent(p, agent)
    });
    previous.map(str::to_string).or(derived).unwrap_or_else(|| FALLBACK_USER_AGENT.to_string())
}

/// Steps 1–3 of the module docs; `None` when none applies.
fn derive(configured: &str, agent: &str, client_user_agent: Option<&str>) -> Option<String> {
    let configured = configured.trim();
    if !configured.is_empty() {
        return Some(configured.to_string());
    }
    let client = client_user_agent
        .map(str::trim)
        .filter(|u| !u.is_empty() && http::HeaderValue::from_str(u).is_ok());
    let agent = agent.trim();
    if !agent.is_empty() {
        let matches = client
            .and_then(product_token_from_user_agent)
            .is_some_and(|t| t.eq_ignore_ascii_case(agent));
        return Some(match (matches, client) {
            (true, Some(ua)) => ua.to_string(),
            _ => agent.to_string(),
        });
    }
    client.map(str::to_string)
}

/// Whether an identity recorded under an older configuration may be reused
/// for a refresh under `agent` (`robots.agent`): always when no agent is
/// configured, else only when its product token is that agent.
fn fits_agent(identity: &str, agent: &str) -> bool {
    let agent = agent.trim();
    agent.is_empty()
        || product_token_from_user_agent(identity).is_some_and(|t| t.eq_ignore_ascii_case(agent))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(configured: &str, agent: &str, client: Option<&str>, previous: Option<&str>) -> String {
        fetch_identity(configured, agent, client, previous)
    }

    #[test]
    fn configured_user_agent_wins() {
        assert_eq!(
            id("MyBot/2 (+http://x)", "examplebot", Some("examplebot/1.0"), Some("old")),
            "MyBot/2 (+http://x)"
        );
        assert_eq!(id("MyBot/2", "", None, None), "MyBot/2");
    }

    #[test]
    fn agent_sends_the_matching_clients_full_user_agent_else_itself_c43() {
        let ua = "examplebot/1.0 (+http://example.org/bot)";
        assert_eq!(id("", "examplebot", Some(ua), None), ua);
        assert_eq!(id("", "ExampleBot", Some(ua), None), ua, "tokens compare case-insensitively");
        assert_eq!(id("", "examplebot", Some("otherbot/1.0"), Some(ua)), "examplebot");
        assert_eq!(
            id("", "examplebot", Some("Mozilla/5.0 (compatible; examplebot/1.0)"), None),
            "examplebot"
        );
        assert_eq!(id("", "examplebot", None, None), "examplebot");
    }

    #[test]
    fn otherwise_the_clients_own_user_agent() {
        assert_eq!(
            id("", "", Some("Mozilla/5.0 (compatible; x)"), Some("old/1")),
            "Mozilla/5.0 (compatible; x)"
        );
    }

    #[test]
    fn without_a_client_the_recorded_identity_then_the_fallback() {
        let ua = "examplebot/1.0 (+http://example.org/bot)";
        assert_eq!(
            id("", "examplebot", None, Some(ua)),
            ua,
            "a forced refresh keeps the crawler's full User-Agent"
        );
        assert_eq!(
            id("", "examplebot", None, Some("otherbot/1.0")),
            "examplebot",
            "recorded under another agent"
        );
        assert_eq!(id("", "", Some("  "), Some("old/1")), "old/1");
        assert_eq!(id("", "", None, None), FALLBACK_USER_AGENT);
        assert_eq!(
            id("", "", Some("bad\u{1}value"), None),
            FALLBACK_USER_AGENT,
            "never a value that is not a valid field value"
        );
        assert!(FALLBACK_USER_AGENT.starts_with("crawlcache/"));
        assert!(http::HeaderValue::from_str(FALLBACK_USER_AGENT).is_ok());
    }
}
