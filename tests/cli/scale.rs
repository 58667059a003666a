//! `cache ls` at scale (issue 12 item 6): a listing streams, one response
//! at a time, instead of collecting the index first.
//!
//! Peak resident memory of `cache ls --host` on a 100,000-response store
//! (50,000 listed), measured with the dev-profile binary: 93 MiB when the
//! whole index was collected before printing, 56 MiB streaming, of which
//! about 40 MiB is sled's own page cache filled by reading every index page
//! once (a bare scan that lists nothing peaks as high; opening the store
//! alone takes 17 MiB). [`PEAK_RSS_LIMIT_KIB`] sits between the two.
//! Speed is not asserted here: `benches/ls_first_line.sh` measures the time
//! to the first line.

use super::common::bulk_store::{bulk_url, fill_store, run_watched, Watched, BULK_BODY};
use super::common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// `crawlcache cache ls --host a.test --data-dir DATA`, watched.
fn ls_host(data: &std::path::Path) -> Watched {
    let mut cmd = Command::new(crawlcache_bin());
    cmd.args(["cache", "ls", "--host", "a.test", "--data-dir"]).arg(data).env("RUST_BACKTRACE", "1");
    run_watched(&mut cmd, Duration::from_secs(300))
}

/// A store of `per_host` responses on each of a.test and b.test (every
/// 10th a.test URL recorded too), listed with `ls --host a.test`: checks
/// the output and returns the listing.
fn listed(label: &str, per_host: usize) -> Watched {
    let dir = TestDir::new(label);
    let data = dir.subdir("data");
    let started = Instant::now();
    let filled = fill_store(&data, &["a.test", "b.test"], per_host);
    eprintln!("{label}: {} cached + {} recorded entries written in {:?}", filled.cached, filled.recorded, started.elapsed());
    let w = ls_host(&data);
    assert!(w.status.success(), "cache ls: {}\n{}", w.status, w.stderr);
    assert_eq!(w.lines.len(), per_host, "one line per a.test URL (its record is on the same line)\n{}", w.stderr);
    let mut seen = vec![false; per_host];
    let mut both = 0;
    for line in &w.lines {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 6, "{line}");
        let i: usize = f[0].strip_prefix("http://a.test/page/").and_then(|i| i.parse().ok()).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(f[0], bulk_url("a.test", i));
        assert!(!std::mem::replace(&mut seen[i], true), "listed twice: {line}");
        assert_eq!((f[1], f[2]), ("200", BULK_BODY.len().to_string().as_str()), "{line}");
        let ttl: i64 = f[4].trim_end_matches('s').parse().unwrap_or_else(|_| panic!("{line}"));
        assert!((3000..=3600).contains(&ttl), "fresh for about an hour: {line}");
        let expected = if i % 10 == 0 { "cache+record" } else { "cache" };
        assert_eq!(f[5], expected, "{line}");
        both += usize::from(i % 10 == 0);
    }
    assert_eq!(both, per_host / 10);
    assert!(w.stderr.contains(&format!("cache ls: {per_host} responses ({per_host} in the cache, {} in the record)", per_host / 10)), "{}", w.stderr);
    eprintln!(
        "{label}: first line after {:?}, peak RSS {:?} KiB",
        w.first_line_after,
        w.peak_rss_kib
    );
    w
}

/// The bound on `cache ls`'s peak resident memory over a 100,000-response
/// store, in KiB: above the 56 MiB the streaming listing takes, below the
/// 93 MiB of the listing that collected the index first.
const PEAK_RSS_LIMIT_KIB: u64 = 80 * 1024;

#[test]
fn ls_of_a_100k_store_streams_in_bounded_memory() {
    let small = listed("ls-scale-10k", 5_000);
    let large = listed("ls-scale-100k", 50_000);
    let (Some(small_kib), Some(large_kib)) = (small.peak_rss_kib, large.peak_rss_kib) else {
        panic!("VmHWM could not be read from /proc/<pid>/status (the tests run on Linux)");
    };
    eprintln!("peak RSS of cache ls: {small_kib} KiB over 10k responses, {large_kib} KiB over 100k");
    assert!(
        large_kib < PEAK_RSS_LIMIT_KIB,
        "cache ls over 100k responses peaked at {large_kib} KiB (limit {PEAK_RSS_LIMIT_KIB} KiB; {small_kib} KiB over 10k)"
    );
}
