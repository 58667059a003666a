//! HTTP caching behaviour of the real proxy binary against a scripted
//! origin on loopback, grouped by the section of RFC 9111 (and RFC 5861,
//! RFC 9110 for ranges) each test is about. A test named `..._cNN` is field
//! case CNN of `docs/CASES.md`. Every test asserts what a crawler relies on:
//! which requests reach the origin, and what the client receives.
//!
//! One test binary for all of them, to keep link time low.
//!
//! Times such as "T+3600 s" are produced with `Date` headers in the past
//! rather than by sleeping, so the suite stays quick.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod freshness;
mod head;
mod invalidation;
mod load;
mod ranges;
mod stale;
mod storable;
mod validation;
mod vary;

use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// These tests are about HTTP caching alone: robots.txt handling is off so
/// the origin sees only the requests each test makes.
const NO_ROBOTS: &str = "[robots]\nmode = \"off\"\n";

/// A scripted origin answering with `handler` and a proxy with robots.txt
/// handling off.
fn start(handler: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> (Origin, Proxy) {
    start_with_origin("http", NO_ROBOTS, handler)
}

fn ago(secs: u64) -> String {
    http_date(SystemTime::now() - Duration::from_secs(secs))
}

fn from_now(secs: i64) -> String {
    if secs >= 0 {
        http_date(SystemTime::now() + Duration::from_secs(secs as u64))
    } else {
        ago((-secs) as u64)
    }
}

/// Polls `/stats` until `done` holds (at most 5 s), returning the last value.
fn wait_for_stats(proxy: &Proxy, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let stats = proxy.admin("/stats");
        let v: serde_json::Value = serde_json::from_slice(&stats.body).expect("stats JSON");
        if done(&v) || std::time::Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn status_of(r: &Response) -> String {
    r.cache_status().unwrap_or_default()
}

fn is_hit(r: &Response) -> bool {
    status_of(r).contains("; hit")
}
