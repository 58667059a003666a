//! The stages that carry out a [`super::route::Route`], one file each.
//!
//! - [`serve`]: a stored response to the client: `Age`, the client's own
//!   conditional (304), byte ranges ([`range`]).
//! - [`forward`]: a miss to the origin, and the storability decision.
//! - [`tee`]: the origin's body to the client and into the store at once.
//! - [`revalidate`]: conditional GET, 304 freshening, stale-if-error,
//!   background stale-while-revalidate.
//! - [`head`]: a HEAD validating a stored GET (RFC 9111 section 4.3.5).
//! - [`passthrough`]: other methods, and invalidation (section 4.4).
//! - [`replay`]: offline answers from the record (SPEC section 6).
//! - [`robots`]: the robots gate and the proxy's own robots answers.
//! - [`upgrade`]: WebSocket upgrades, relayed after the origin's `101`.
//! - [`options_trace`]: OPTIONS and TRACE: `Max-Forwards`, crawlcache's own
//!   answers, OPTIONS for a whole server.
//!
//! Each stage writes the request's `CacheStatus` in its `Exchange`; the
//! router puts it on the response.

pub mod forward;
pub mod head;
pub mod options_trace;
pub mod passthrough;
pub mod range;
pub mod replay;
pub mod revalidate;
pub mod robots;
pub mod serve;
pub mod tee;
pub mod upgrade;

use crate::wire::body::ProxyBody;
use http::Response;

/// What a stage did with the request.
#[allow(
    clippy::large_enum_variant,
    reason = "one per request, moved once: boxing the response would allocate on every hit"
)]
pub enum Step {
    /// The response to send.
    Done(Response<ProxyBody>),
    /// It waited for another request's fetch that stored something, or the
    /// stored body vanished: look the store up again.
    LookAgain,
}
