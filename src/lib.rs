//! crawlcache: a local caching forward proxy for web crawlers.
//!
//! A request flows down the modules once: [`proxy`] asks [`robots`] for the
//! verdict, asks [`cache`] for the decision, asks [`store`] for the bytes, and
//! only the upstream client (used by the proxy and by the robots fetcher)
//! talks to origins.
//!
//! [`cli`] is the command line (`main.rs` only parses and dispatches);
//! [`units`] and [`fsutil`] are leaves every other module may use.
//!
//! The layers below live in crates of their own (`crates/`), so that a
//! lower one cannot import a higher one: `crawlcache-base` (leaves, some
//! re-exported here: [`units`], [`fsutil`]), `crawlcache-policy` (the
//! RFC 9111 decisions: [`cache`], [`store_key`]), `crawlcache-store`
//! (the body store, [`store`]) and `crawlcache-robots` (the RFC 9309
//! engine, re-exported in [`robots`] beside the fetcher over the proxy's
//! upstream client).

pub use crawlcache_base::byte_lru;
pub(crate) use crawlcache_base::locks;
pub use crawlcache_base::{fsutil, units};
pub use crawlcache_fleet as fleet;
pub use crawlcache_policy::{cache, store_key};
pub use crawlcache_store as store;

pub mod access;
pub mod admin;
pub mod audit;
pub mod cli;
pub mod config;
pub mod metrics;
pub mod proxy;
pub mod record;
pub mod robots;
pub mod tls;
pub mod warc;
pub mod wire;
