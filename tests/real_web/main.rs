//! Origins that behave like real sites (issue "The real web"): pooled
//! keep-alive connections an origin closes (C41), response heads with
//! quirks (C42), and what the metrics and the access log say about a
//! miss, a revalidation and a stale serve. Cases are in `docs/CASES.md`.
//!
//! One test binary for all of them, to keep link time low.

#[path = "../common/mod.rs"]
mod common;

mod access_log;
mod heads;
mod interim;
mod metrics;
mod reuse;

use common::*;

/// robots.txt handling off, so the origin sees only the requests each test makes.
const NO_ROBOTS: &str = "[robots]\nmode = \"off\"\n";

/// A scripted origin answering with `handler` and a proxy with robots.txt
/// handling off, plus `extra` configuration.
fn start(
    extra: &str,
    handler: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
) -> (Origin, Proxy) {
    start_with_origin("http", &format!("{NO_ROBOTS}{extra}"), handler)
}
