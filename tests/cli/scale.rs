//! `cache ls` at scale (issue 12 item 6): a listing streams, one response
//! at a time, instead of collecting the index first.
//!
//! Peak resident memory of `cache ls --host` on a 100,000-response store
//! (50,000 listed), measured with the dev-profile binary when the listing
//! was made to stream: 93 MiB when the whole index was collected before
//! printing, 56 MiB streaming (then with sled's page cache at an eighth of
//! the memory ceiling). Since then the store's caches changed, and with the
//! default 256 MiB ceiling the streaming listing peaked at 77-79 MiB (82
//! once in CI), too close to a fixed bound: the listing now runs with the
//! caches sized from a 32 MiB ceiling ([`SMALL_CACHES`]), where it peaks at
//! 28 MiB over 10,000 responses and 50-54 MiB over 100,000 (the store
//! itself grows with its size too), and [`PEAK_RSS_LIMIT_KIB`] sits between
//! that and what collecting the listing first adds (37 MiB when measured).
//! Speed is not asserted here: `benches/ls_first_line.sh` measures the time
//! to the first line.

use super::common::bulk_store::{bulk_url, fill_store, run_watched, Watched, BULK_BODY};
use super::common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// `crawlcache cache ls --host a.test --data-dir DATA --config CONFIG`,
/// watched.
fn ls_host(data: &std::path::Path, config: &std::path::Path) -> Watched {
    let mut cmd = Command::new(crawlcache_bin());
    cmd.args(["cache", "ls", "--host", "a.test", "--data-dir"])
        .arg(data)
        .arg("--config")
        .arg(config)
        .env("RUST_BACKTRACE", "1");
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
    eprintln!(
        "{label}: {} cached + {} recorded entries written in {:?}",
        filled.cached,
        filled.recorded,
        started.elapsed()
    );
    let config = dir.join("small-caches.toml");
    std::fs::write(&config, SMALL_CACHES).unwrap();
    let w = ls_host(&data, &config);
    assert!(w.status.success(), "cache ls: {}\n{}", w.status, w.stderr);
    assert_eq!(
        w.lines.len(),
        per_host,
        "one line per a.test URL (its record is on the same line)\n{}",
        w.stderr
    );
    let mut seen = vec![false; per_host];
    let mut both = 0;
    for line in &w.lines {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 6, "{line}");
        let i: usize = f[0]
            .strip_prefix("http://a.test/page/")
            .and_then(|i| i.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert_eq!(f[0], bulk_url("a.test", i));
        assert!(!std::mem::replace(&mut seen[i], true), "listed twice: {line}");
        assert_eq!(
            (f[1], f[2]),
            ("200", crawlcache_base::units::format_bytes(BULK_BODY.len() as u64).as_str()),
            "{line}"
        );
        assert!(
            f[4] == "fresh 1h" || f[4].starts_with("fresh 5"),
            "fresh for about an hour: {line}"
        );
        let expected = if i.is_multiple_of(10) { "cache+record" } else { "cache" };
        assert_eq!(f[5], expected, "{line}");
        both += usize::from(i.is_multiple_of(10));
    }
    assert_eq!(both, per_host / 10);
    assert!(
        w.stderr.contains(&format!(
            "cache ls: {per_host} responses ({per_host} in the cache, {} in the record)",
            per_host / 10
        )),
        "{}",
        w.stderr
    );
    eprintln!(
        "{label}: first line after {:?}, peak RSS {:?} KiB",
        w.first_line_after, w.peak_rss_kib
    );
    w
}

/// The listing's configuration: the store's caches (sled's page cache, pack
/// records, decoded heads) sized from a 32 MiB memory ceiling instead of
/// the default 256 MiB, so that what they hold, bounded by configuration,
/// does not hide what the listing itself holds.
const SMALL_CACHES: &str = "[store]\nmemory_ceiling = \"32MiB\"\n";

/// The bound on `cache ls`'s peak resident memory over a 100,000-response
/// store with [`SMALL_CACHES`], in KiB: above the 50-54 MiB the streaming
/// listing takes, below that plus the 37 MiB a listing that collects the
/// index first adds.
const PEAK_RSS_LIMIT_KIB: u64 = 70 * 1024;

#[test]
fn ls_of_a_100k_store_streams_in_bounded_memory() {
    let small = listed("ls-scale-10k", 5_000);
    let large = listed("ls-scale-100k", 50_000);
    let (Some(small_kib), Some(large_kib)) = (small.peak_rss_kib, large.peak_rss_kib) else {
        panic!("VmHWM could not be read from /proc/<pid>/status (the tests run on Linux)");
    };
    eprintln!(
        "peak RSS of cache ls: {small_kib} KiB over 10k responses, {large_kib} KiB over 100k"
    );
    assert!(
        large_kib < PEAK_RSS_LIMIT_KIB,
        "cache ls over 100k responses peaked at {large_kib} KiB (limit {PEAK_RSS_LIMIT_KIB} KiB; {small_kib} KiB over 10k)"
    );
}
