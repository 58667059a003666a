//! crawlcache's HTTP caching policy: what may be stored, for how long it is
//! fresh, how it is revalidated, under which key, and how the outcome is
//! told to the client. Everything here is synchronous and does no I/O: the
//! functions take parsed fields and a `now`, and return a value (as
//! pingora-cache's do), so the proxy wires them to the network and the
//! store, and the tests run without either.
//!
//! - [`cache`]: RFC 9111 decisions (`cache::decide`, `cache::storable`, ...), the `Cache-Control`
//!   parser, the primary and secondary cache keys, and the stored head;
//! - [`keep()`] ([`mod@keep`]): what becomes of a response from the origin,
//!   stored for the cache, recorded for replay, both or neither (RFC 9111
//!   section 3 with the per-URL rules, the size limit and `[record]`);
//! - [`store_key`]: the typed key of a stored entry, a cache entry or a
//!   record, the only writer and reader of those keys' bytes;
//! - [`key_rules`] and [`cache_rules`]: the user's per-URL key rules
//!   (`cache.key_rules`) and policy rules (`[[cache.rules]]`);
//! - [`hop_by_hop`] and [`upstream_fields`]: hop-by-hop fields (RFC 9110
//!   section 7.6.1) and the fields sent to origins;
//! - [`cache_status`]: the `Cache-Status` field (RFC 9211).

pub mod cache;
pub mod cache_rules;
pub mod cache_status;
pub mod hop_by_hop;
pub mod keep;
pub mod key_rules;
pub mod store_key;
pub mod upstream_fields;

pub use keep::{keep, Keep};
