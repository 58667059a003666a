//! [`Rules`]: one origin's snapshot with its body parsed once, as the
//! registry keeps it and enforcement reads it.

use crate::robots_txt::{RobotsTxt, Verdict};
use crate::snapshot::{verdict_for, RobotsStatus, Snapshot, State};

/// A snapshot with its body parsed once.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// Its body parsed (an empty rule set, allowing everything, unless the
    /// status is `fetched`; use [`Rules::verdict`], which knows the status).
    pub robots: RobotsTxt,
    /// The snapshot origin's robots.txt URL ([`crate::snapshot::Origin::robots_url`]), built
    /// once: every request checked against these rules names it.
    pub robots_url: String,
}

impl Rules {
    /// Parses `snapshot`'s body (only for `fetched`).
    pub fn new(snapshot: Snapshot) -> Rules {
        let robots = match snapshot.status {
            RobotsStatus::Fetched => RobotsTxt::parse(&snapshot.body),
            _ => RobotsTxt::parse(b""),
        };
        Rules::with_parsed(snapshot, robots)
    }

    /// `snapshot` with its body already parsed as `robots` (kept from the
    /// previous rules when a refresh brought the same body).
    pub fn with_parsed(snapshot: Snapshot, robots: RobotsTxt) -> Rules {
        let robots_url = snapshot.origin.robots_url();
        Rules { snapshot, robots, robots_url }
    }

    /// The verdict for `product_token` on `url` in `state`
    /// ([`verdict_for`]).
    pub fn verdict(&self, state: State, product_token: &str, url: &str) -> Verdict {
        verdict_for(&self.snapshot, &self.robots, state, product_token, url)
    }
}
