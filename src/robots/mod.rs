//! robots.txt: the engine is the `crawlcache-robots` crate (RFC 9309
//! parser and matcher, snapshots, fetch decisions, enforcement, the
//! per-origin registry), re-exported here whole so that
//! `crate::robots::...` paths name it; what needs the proxy's own pieces
//! stays here:
//!
//! - [`http_fetch`]: the [`fetch::RobotsFetch`] over the proxy's upstream
//!   client (`crate::wire::origin`);
//! - [`archive`]: offline, the rules of the robots.txt captures an
//!   imported archive left in the store.

pub use crawlcache_robots::*;

pub mod archive;
pub mod http_fetch;
