//! crawlcache: a local caching forward proxy for web crawlers.
//!
//! A request flows down the modules once: [`proxy`] asks [`robots`] for the
//! verdict, asks `crawlcache_policy::cache` for the decision, asks
//! `crawlcache_store` for the bytes, and only the origin client
//! ([`upstream`], used by the proxy and by the robots fetcher) talks to
//! origins. The modules are floors, each using only those below it
//! (docs/architecture.md lists and draws them; tests/architecture.rs
//! holds them).
//!
//! [`cli`] is the command line (`main.rs` only parses and dispatches);
//! `crawlcache_base::units` and `crawlcache_base::fsutil` are leaves every module may use.
//!
//! The layers below live in crates of their own (`crates/`), so that a
//! lower one cannot import a higher one: `crawlcache-base` (leaves: units,
//! file-system helpers, locks, URLs), `crawlcache-policy` (the RFC 9111
//! decisions, cache keys and store keys), `crawlcache-store` (the body
//! store), `crawlcache-robots` (the RFC 9309 engine; [`robots`] holds the
//! fetcher over the proxy's upstream client) and `crawlcache-fleet`. None
//! of their items is re-exported here: every path names the crate an item
//! lives in (`crawlcache_store::Store`, `crawlcache_policy::cache::decide`),
//! in this crate, its tests and its benchmarks (tests/architecture.rs).

pub mod access;
pub mod admin;
pub mod audit;
pub mod cli;
pub mod config;
pub mod metrics;
pub mod ops;
pub mod proxy;
pub mod record;
pub mod robots;
pub mod tls;
pub mod upstream;
pub mod warc;
pub mod wire;
