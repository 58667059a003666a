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
//! - [`self_requests`]: C48, every spelling of the proxy's own address, its
//!   own `Via`, CONNECT to itself; admin beyond 127.0.0.1 with a token.
//! - [`hostile`]: the hostile-head corpus (request and response heads),
//!   and the Squid reference run (`--ignored squid_reference`).

#[path = "../common/mod.rs"]
mod common;

mod addressing;
mod bodies;
mod clte;
mod codings;
mod hostile;
mod self_requests;
mod support;
mod tunnels;
