//! `cache ls --host` over a 100,000-response store (issue 12 item 6): how
//! long the release binary takes to print its first line (target: under
//! 1 s), the whole listing, and its peak resident memory. Run by
//! `benches/ls_first_line.sh`; `LS_BENCH_RESPONSES` changes the store size.
//!
//! The store is written directly through the library ([`fill_store`]):
//! half the responses on a.test (every 10th also recorded), half on b.test;
//! the listing is of a.test. A report, not a test: nothing is asserted.

#[path = "../tests/common/bulk_store.rs"]
#[allow(dead_code)]
mod bulk_store;

use bulk_store::{fill_store, run_watched};
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    let responses: usize =
        std::env::var("LS_BENCH_RESPONSES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let data = tmp.path().join("data");
    let started = Instant::now();
    let filled = fill_store(&data, &["a.test", "b.test"], responses / 2);
    println!(
        "store: {} responses ({} recorded too) written in {:.1} s",
        filled.cached,
        filled.recorded,
        started.elapsed().as_secs_f64()
    );
    let bin = env!("CARGO_BIN_EXE_crawlcache");
    for run in 1..=3 {
        let mut cmd = Command::new(bin);
        cmd.args(["cache", "ls", "--host", "a.test", "--data-dir"]).arg(&data);
        let started = Instant::now();
        let w = run_watched(&mut cmd, Duration::from_secs(600));
        let total = started.elapsed();
        assert!(w.status.success(), "cache ls failed: {}", w.stderr);
        let first = w
            .first_line_after
            .map_or("none".to_string(), |d| format!("{:.0} ms", d.as_secs_f64() * 1000.0));
        let peak = w
            .peak_rss_kib
            .map_or("unknown".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        println!(
            "run {run}: first line after {first}; {} lines in {:.2} s; peak RSS {peak}",
            w.lines.len(),
            total.as_secs_f64()
        );
    }
}
