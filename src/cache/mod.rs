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

pub mod cache_control;
pub mod key;
pub mod policy;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The stored head of a response, as serialized into the store's entry
/// metadata (JSON). Field lines keep their order and repetitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// The status code (200, 301, 404, ...).
    pub status: u16,
    /// Response field lines in the order received; names lower-case.
    /// Hop-by-hop fields, `Set-Cookie`, and fields named by qualified
    /// `no-cache="..."` / `private="..."` are already removed.
    pub headers: Vec<(String, Vec<u8>)>,
    /// `request_time` of RFC 9111 section 4.2.3, in milliseconds since the Unix epoch.
    pub request_time_ms: u64,
    /// `response_time` of RFC 9111 section 4.2.3, in milliseconds since the Unix epoch.
    pub response_time_ms: u64,
    /// The normalised target URI (the primary key).
    pub url: String,
    /// The request field lines nominated by `Vary`, as the storing request
    /// carried them (for display; matching uses the secondary key).
    #[serde(default)]
    pub vary_request: Vec<(String, Vec<u8>)>,
}

impl StoredResponse {
    /// The response headers as an [`http::HeaderMap`] (invalid names or values are skipped).
    pub fn header_map(&self) -> http::HeaderMap {
        let mut map = http::HeaderMap::with_capacity(self.headers.len());
        for (name, value) in &self.headers {
            if let (Ok(n), Ok(v)) = (
                http::header::HeaderName::from_bytes(name.as_bytes()),
                http::header::HeaderValue::from_bytes(value),
            ) {
                map.append(n, v);
            }
        }
        map
    }

    /// Serializes for the store (JSON).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses metadata read from the store; `None` if it is not a valid record.
    pub fn from_bytes(bytes: &[u8]) -> Option<StoredResponse> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Milliseconds since the Unix epoch for `t` (0 before the epoch).
pub fn to_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The `SystemTime` for `ms` milliseconds since the Unix epoch.
pub fn from_millis(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}
