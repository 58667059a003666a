//! The robots outcome of one request (SPEC section 4), as the robots
//! stage ([`super::stages::robots::gate`]) leaves it in the exchange.

use crawlcache_robots::enforce::RobotsCheck;
use crawlcache_robots::snapshot::{ClientAnswer, Origin};
use std::time::Duration;

/// Spacing for requests that reach an origin (Crawl-delay, SPEC section 4).
#[derive(Debug, Clone)]
pub struct Pace {
    /// The origin's pacing key.
    pub origin_key: String,
    /// The spacing to keep between requests to it.
    pub delay: Duration,
}

/// What the proxy does with a request after the robots check.
#[derive(Debug, Clone)]
pub enum RobotsAction {
    /// Go on through the cache.
    Forward,
    /// `enforce` refuses: answer with this status and text.
    Refuse {
        /// 403 (disallowed) or 503 (rules too old).
        status: u16,
        /// Names the rule and the robots.txt URL.
        body: String,
    },
    /// A client's own GET/HEAD of the origin's robots.txt: answered from
    /// the snapshot.
    AnswerSnapshot(ClientAnswer),
}

/// The robots outcome of one request.
#[derive(Debug, Clone)]
pub struct RobotsGate {
    /// The verdict, the rules' SHA-256 and disposition.
    pub check: RobotsCheck,
    /// What to do.
    pub action: RobotsAction,
    /// Spacing for origin contacts (`robots.honor_crawl_delay`).
    pub pace: Option<Pace>,
    /// The origin, for messages.
    pub origin: std::sync::Arc<Origin>,
}
