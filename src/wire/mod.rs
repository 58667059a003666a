//! The plumbing floor under the proxy: it carries bytes and writes fields,
//! and makes no caching or robots decision. The field rules it applies are
//! `crawlcache_policy`'s, named there: `hop_by_hop` (RFC 9110 section
//! 7.6.1, `Via`), `cache_status` (RFC 9211) and `upstream_fields` (the
//! fields of a request sent to an origin).
//!
//! - [`body`]: the one response body type sent to clients.
//! - [`error`]: plain-text error responses that name their cause.
//! - [`interim`]: 1xx interim responses relayed to the client.
//! - [`sendfile`]: large stored bodies sent with `sendfile(2)` on plain
//!   client connections.
//! - [`request_line`]: what the URI type forgets of an OPTIONS request
//!   line (an empty path), noted as a client connection's bytes arrive.
//! - [`net`]: the one loopback test for socket addresses.
//! - [`url`]: the one URI-reference resolver (RFC 3986 section 5).
//! - [`coarse_timer`]: the timer behind the client connections'
//!   header-read timeout (fires within a quarter second of its deadline).

pub mod body;
pub mod coarse_timer;
pub mod error;
pub mod h2_guard;
pub mod interim;
pub mod net;
pub mod request_line;
pub mod sendfile;
