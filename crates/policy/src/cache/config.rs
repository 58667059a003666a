//! The policy's tunables (the `[cache]` configuration section).

use std::time::Duration;

/// Tunables of the policy (from the `[cache]` configuration section).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    /// True for a shared cache (the default): `s-maxage` applies, unqualified
    /// `private` is not storable, `Authorization` needs `public`, `s-maxage`
    /// or `must-revalidate`, `proxy-revalidate` acts like `must-revalidate`.
    pub shared: bool,
    /// Heuristic freshness as a fraction of (`Date` − `Last-Modified`), RFC 9111 section 4.2.2.
    pub heuristic_fraction: f64,
    /// Upper bound of a heuristic freshness lifetime.
    pub heuristic_max: Duration,
    /// Lifetime given to heuristically cacheable responses without
    /// `Last-Modified` and without explicit freshness; zero for none.
    pub default_ttl: Duration,
    /// How long past its lifetime a stored response may be served when the
    /// origin cannot be reached at all (RFC 9111 section 4.2.4); zero disables.
    pub max_stale_on_error: Duration,
    /// Store and replay `Set-Cookie` / `Set-Cookie2` (false, the default: a
    /// shared crawler cache never replays one client's cookies to another;
    /// RFC 9111 section 7.3 leaves it to the cache). True only for a
    /// conformance run that expects cookies to be cached like any field.
    pub store_set_cookie: bool,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            shared: true,
            heuristic_fraction: 0.1,
            heuristic_max: Duration::from_secs(86_400),
            default_ttl: Duration::ZERO,
            max_stale_on_error: Duration::from_secs(86_400),
            store_set_cookie: false,
        }
    }
}
