//! robots.txt: the engine is the `crawlcache-robots` crate (RFC 9309
//! parser and matcher, snapshots, fetch decisions, enforcement, the
//! per-origin registry), named by its own paths (`crawlcache_robots::...`);
//! what needs the proxy's own pieces stays here:
//!
//! - [`http_fetch`]: the [`crawlcache_robots::fetch::RobotsFetch`] over the proxy's upstream
//!   client (`crate::upstream::origin`);
//! - [`archive`]: offline, the rules of the robots.txt captures an
//!   imported archive left in the store.

pub mod archive;
pub mod http_fetch;
