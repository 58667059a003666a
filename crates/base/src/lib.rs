//! The leaves of crawlcache: small pieces with no HTTP in them that every
//! other crate of the workspace may use, and which use nothing of ours.
//!
//! - [`locks`]: locking that takes the state over from a holder that
//!   panicked;
//! - [`byte_lru`]: a least-recently-used map bounded by bytes.

pub mod byte_lru;
pub mod locks;
