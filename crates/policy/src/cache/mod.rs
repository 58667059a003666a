//! HTTP caching decisions (RFC 9111, RFC 5861), kept pure: every function
//! takes parsed headers and a `now`, and returns a value. No I/O, no clock.
//!
//! - [`cache_control`]: the `Cache-Control` / `Pragma` directive parser.
//! - [`key`]: the primary cache key (normalised target URI) and the
//!   secondary key built from the request fields nominated by `Vary`.
//! - [`policy`]: one file per RFC 9111 section: storability (3),
//!   freshness lifetime, current age and reuse decisions (4.2), conditional
//!   requests and 304 freshening (4.3), invalidation (4.4).
//! - `tests.rs`: the policy's decision tests, grouped by field case and by
//!   RFC 9111 section (each group names the `policy/` file it covers).

//! - [`stored`]: [`StoredResponse`], the stored head of a response, and
//!   its encoding in the store.

pub mod cache_control;
pub mod key;
pub mod policy;
pub mod stored;
pub mod variant;

pub use stored::{encode_head, from_millis, to_millis, StoredResponse, HEAD_MAGIC};

#[cfg(test)]
mod tests;
