//! [`fill_store`]: a data directory holding many stored responses, built
//! directly through the crawlcache library (no proxy, no HTTP), for the
//! listing tests and benches at scale; and [`peak_rss_kib`], the peak
//! resident memory of a running child process.
//!
//! Uses only std and the crawlcache library, so a bench may include this
//! file alone with `#[path]`.

use crawlcache_policy::cache::StoredResponse;
use crawlcache_store::Store;
use std::path::Path;
use std::time::SystemTime;

/// The body every bulk entry shares (content-addressed: stored once).
pub const BULK_BODY: &[u8] = b"<html><body>a page of the bulk store</body></html>\n";

/// The URL of entry `i` of `host` in a bulk store.
pub fn bulk_url(host: &str, i: usize) -> String {
    format!("http://{host}/page/{i}")
}

/// What [`fill_store`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filled {
    /// Cache entries written.
    pub cached: usize,
    /// Record copies written (`record:GET URL`, for every 10th URL of the
    /// first host).
    pub recorded: usize,
}

/// Opens (creating) the store in `data_dir` and writes, for each of
/// `hosts`, `per_host` cache entries [`bulk_url`]`(host, i)`: status 200,
/// `Cache-Control: max-age=3600`, received now, all with the body
/// [`BULK_BODY`]; every 10th URL of the first host is also recorded
/// (`record:GET URL`, the same head and body). Closes the store (flushed)
/// before returning. Panics on a store error.
pub fn fill_store(data_dir: &Path, hosts: &[&str], per_host: usize) -> Filled {
    let store = Store::open(data_dir, 1 << 30)
        .unwrap_or_else(|e| panic!("opening the store in {}: {e}", data_dir.display()));
    let mut w = store.begin_body().expect("begin a body");
    w.write(BULK_BODY).expect("write the body");
    let body = w.finish().expect("finish the body");
    let now = crawlcache_policy::cache::to_millis(SystemTime::now());
    let date = httpdate::fmt_http_date(SystemTime::now()).into_bytes();
    let mut filled = Filled { cached: 0, recorded: 0 };
    for (h, host) in hosts.iter().enumerate() {
        for i in 0..per_host {
            let url = bulk_url(host, i);
            let head = StoredResponse {
                status: 200,
                headers: vec![
                    ("content-type".into(), b"text/html".to_vec()),
                    ("cache-control".into(), b"max-age=3600".to_vec()),
                    ("date".into(), date.clone()),
                ],
                request_time_ms: now,
                response_time_ms: now,
                url: url.clone(),
                vary_request: vec![],
            }
            .to_bytes();
            store
                .insert(&url, b"", &head, Some(&body))
                .unwrap_or_else(|e| panic!("inserting {url}: {e}"));
            filled.cached += 1;
            if h == 0 && i % 10 == 0 {
                let key = format!("record:GET {url}");
                store
                    .insert(&key, b"", &head, Some(&body))
                    .unwrap_or_else(|e| panic!("inserting {key}: {e}"));
                filled.recorded += 1;
            }
        }
    }
    store.flush().expect("flush the store");
    filled
}

/// `VmHWM` (peak resident set size, KiB) of the running process `pid`,
/// from `/proc/<pid>/status`; `None` when it cannot be read (the process
/// has exited, or this is not Linux).
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A finished child process watched by [`run_watched`].
#[derive(Debug)]
pub struct Watched {
    /// Exit status.
    pub status: std::process::ExitStatus,
    /// Its stdout, line by line.
    pub lines: Vec<String>,
    /// Its stderr.
    pub stderr: String,
    /// Time from the spawn to the first complete stdout line, if any.
    pub first_line_after: Option<std::time::Duration>,
    /// The highest `VmHWM` (KiB) read while it ran, polled every 2 ms
    /// (`VmHWM` only grows, so this misses at most what it grew by in its
    /// last 2 ms).
    pub peak_rss_kib: Option<u64>,
}

/// Runs `cmd` with its stdout and stderr read as they come, watching its
/// peak resident memory in `/proc`; kills it after `limit`. Panics when it
/// cannot be started or overruns `limit`.
pub fn run_watched(cmd: &mut std::process::Command, limit: std::time::Duration) -> Watched {
    use std::io::{BufRead, Read};
    use std::process::Stdio;
    use std::time::Instant;
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    let pid = child.id();
    let out = child.stdout.take().expect("stdout was piped");
    let mut err = child.stderr.take().expect("stderr was piped");
    let out_reader = std::thread::spawn(move || {
        let mut first = None;
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            first.get_or_insert_with(|| started.elapsed());
            lines.push(line);
        }
        (lines, first)
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    });
    let mut peak: Option<u64> = None;
    let status = loop {
        if let Some(kib) = peak_rss_kib(pid) {
            peak = Some(peak.map_or(kib, |p| p.max(kib)));
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{cmd:?} ran longer than {limit:?}");
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(2)),
            Err(e) => panic!("waiting for {cmd:?}: {e}"),
        }
    };
    let (lines, first_line_after) = out_reader.join().expect("stdout reader");
    let stderr = err_reader.join().expect("stderr reader");
    Watched { status, lines, stderr, first_line_after, peak_rss_kib: peak }
}
