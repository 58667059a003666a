//! The leaves of crawlcache: small pieces with no HTTP in them that every
//! other crate of the workspace may use, and which use nothing of ours.
//!
//! - [`locks`]: locking that takes the state over from a holder that
//!   panicked;
//! - [`byte_lru`]: a least-recently-used map bounded by bytes;
//! - [`units`]: durations and sizes as the configuration writes them;
//! - [`url`]: resolving a URI reference against a base (RFC 3986 section 5);
//! - [`fsutil`]: private directories for the data directory's state;
//! - [`shard`]: the calling thread's ordinal, to pick per-thread shards;
//! - [`time`]: RFC 3339 timestamps and calendar arithmetic;
//! - [`memory`]: the split of `store.memory_ceiling` among the caches;
//! - `collapse` (feature `sync`): single-flight, one fetch per key shared
//!   by the requests that want it at once.

pub mod byte_lru;
#[cfg(feature = "sync")]
pub mod collapse;
pub mod fsutil;
pub mod locks;
pub mod memory;
pub mod shard;
pub mod time;
pub mod units;
pub mod url;
