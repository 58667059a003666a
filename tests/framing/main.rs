//! Framing and addressing of what crawlcache sends (issue 11; docs/CASES.md
//! C45–C48): the real binary between raw-socket clients and recording
//! origins ([`common::RawOrigin`]), which keep the exact bytes each
//! connection carried, so that a misframed or smuggled request shows.
//!
//! - [`addressing`]: C45, `Host` generated from the target; userinfo; the
//!   intercepted tunnel's 421 and audit line; the leaf certificate's name.
//! - [`bodies`]: C46, GET/HEAD with content forwarded whole, the origin
//!   connection pool kept in sync (recording origin and nginx).
//! - [`clte`]: C47, an origin's `Content-Length` beside `Transfer-Encoding`.
//! - [`codings`]: C51, transfer codings other than chunked (502 / 501).
//! - [`tunnels`]: C50, CONNECT tunnels carrying plain HTTP, WebSocket or
//!   another protocol; WebSocket through the plain proxy.
//! - [`admin_plane`]: C54, the admin endpoints closed to other pages (a
//!   foreign `Host`, `Origin` or `Sec-Fetch-Site`), also in Chromium.
//! - [`options_trace`]: OPTIONS and TRACE: `Max-Forwards` (RFC 9110
//!   section 7.6.2), OPTIONS for a whole server as `OPTIONS *` (RFC 9112
//!   section 3.2.4), directly, over TLS and to a parent proxy.
//! - [`self_requests`]: C48, every spelling of the proxy's own address, its
//!   own `Via`, CONNECT to itself; admin beyond 127.0.0.1 with a token.
//! - [`hostile`]: the hostile-head corpus (request and response heads),
//!   and the Squid reference run (`--ignored squid_reference`).

#[path = "../common/mod.rs"]
mod common;

mod addressing;
mod admin_plane;
mod bodies;
mod clte;
mod codings;
mod hostile;
mod options_trace;
mod self_requests;
mod support;
mod tunnels;
