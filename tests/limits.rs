//! Limits under load (issue 32): the open-file limit raised at start,
//! `server.max_connections`, and what a connection beyond it gets: `/stats`
//! still answers, proxied requests get `503` with `Retry-After`, nothing
//! hangs or crashes, and everything recovers once connections close.
//!
//! The proxy runs under `prlimit --nofile=SOFT:HARD` (util-linux), started
//! through a small shell script.

mod common;

use common::*;
use serde_json::Value;
use std::io::Read;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn site(req: &RecordedRequest) -> Reply {
    match req.path() {
        "/robots.txt" => Reply::new(404, &[], b""),
        p => Reply::ok(
            &[("Cache-Control", "max-age=600"), ("Content-Type", "text/plain")],
            format!("page {p}").as_bytes(),
        ),
    }
}

/// A script that runs crawlcache under `prlimit --nofile=SOFT:HARD`.
fn limited_program(dir: &TestDir, soft: u64, hard: u64) -> PathBuf {
    let prlimit = find_tool(
        "prlimit",
        "CRAWLCACHE_PRLIMIT",
        &["/usr/bin/prlimit", "/bin/prlimit"],
        "prlimit comes with util-linux (apt-get install util-linux).",
    );
    let script = dir.join("crawlcache-limited.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} --nofile={soft}:{hard} {} \"$@\"\n",
            prlimit.display(),
            crawlcache_bin().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// crawlcache under `prlimit --nofile=SOFT:HARD` with `config`.
fn start_limited(label: &str, soft: u64, hard: u64, config: &str) -> Proxy {
    let dir = TestDir::new(label);
    let program = limited_program(&dir, soft, hard);
    let cfg = dir.join("crawlcache.toml");
    std::fs::write(&cfg, config).unwrap();
    let cfg = cfg.to_str().unwrap().to_string();
    Proxy::start_program(&program, &dir.subdir("data"), &["--config", &cfg]).owning(dir)
}

fn stats(proxy: &Proxy, timeout: Duration) -> Value {
    let mut c = Conn::try_open(proxy.addr(), timeout)
        .unwrap_or_else(|e| panic!("connecting for /stats: {e}"));
    c.set_timeout(timeout);
    let r = c.try_send("GET", "/stats", &[("Connection", "close")], b"").unwrap_or_else(|e| {
        panic!("/stats did not answer within {timeout:?}: {e}\n{}", proxy.stderr_tail(30))
    });
    assert_eq!(r.status, 200, "{}", r.describe());
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("/stats is not JSON: {e}"))
}

/// Lets this test process open the connections it holds (its own soft
/// limit may be 1,024 or less).
fn raise_own_limit() {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain calls on a struct that lives here.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
    }
}

/// Opens `n` connections that send nothing.
fn hold(addr: std::net::SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|i| {
            TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("connection {i} of {n}: {e}"))
        })
        .collect()
}

/// The answer already sent on a held connection, if any (waits `wait`).
fn answer_on(s: &mut TcpStream, wait: Duration) -> String {
    let _ = s.set_read_timeout(Some(wait));
    let mut buf = [0u8; 1024];
    match s.read(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(_) => String::new(),
    }
}

/// Waits (bounded) until `/stats` reports at most `n` open client connections.
fn wait_open_at_most(proxy: &Proxy, n: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = stats(proxy, Duration::from_secs(5));
        if s["connections"]["open"].as_u64().is_some_and(|o| o <= n) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "connections did not close within 20 s: {}",
            s["connections"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn no_panic_and_no_descriptor_shortage(proxy: &Proxy) {
    let err = proxy.stderr();
    assert!(!err.contains("panicked"), "the proxy panicked:\n{}", proxy.stderr_tail(40));
    assert!(
        !err.contains("Too many open files"),
        "the reserve of descriptors ran out:\n{}",
        proxy.stderr_tail(40)
    );
}

#[test]
fn the_soft_open_file_limit_is_raised_to_the_hard_limit_and_both_are_logged() {
    let proxy = start_limited("limits-raise", 256, 4096, "");
    let s = stats(&proxy, Duration::from_secs(5));
    let l = &s["connections"]["open_file_limit"];
    assert_eq!(
        (l["soft_at_start"].as_u64(), l["soft"].as_u64(), l["hard"].as_u64()),
        (Some(256), Some(4096), Some(4096)),
        "{s}"
    );
    // 0 derives the limit: (4096 - 64 - 4096/16) / 2.
    assert_eq!(s["connections"]["max"].as_u64(), Some((4096 - 64 - 256) / 2), "{s}");
    assert!(
        proxy.log_shows("serving at most 1888 client connections at once", Duration::from_secs(5)),
        "{}",
        proxy.stderr()
    );
    let err = proxy.stderr();
    assert!(
        err.contains("raised the soft open-file limit from 256 to 4096 (the hard limit is 4096)"),
        "{err}"
    );
    proxy.stop_cleanly();
}

#[test]
fn beyond_max_connections_requests_get_503_with_retry_after_and_admin_still_answers() {
    let origin = Origin::start(site);
    let dir = TestDir::new("limits-max");
    let proxy =
        Proxy::start_with_config(&dir.subdir("data"), "[server]\nmax_connections = 4\n", &[])
            .owning(dir);
    // Four keep-alive connections, each served one request: the limit is
    // full. (A connection the harness's readiness probe left open may still
    // count for a moment: then one of the four was beyond the limit, its
    // answer says `Connection: close`, and the four are opened again.)
    let mut held: Vec<Conn> = Vec::new();
    for attempt in 0..10 {
        // `/stats` counts its own connection; give its close (and the
        // readiness probe's) time to be seen before the four are opened.
        wait_open_at_most(&proxy, 1);
        std::thread::sleep(Duration::from_millis(100 * (attempt + 1)));
        held = (0..4).map(|_| Conn::open(proxy.addr())).collect();
        let mut all_kept = true;
        for c in held.iter_mut() {
            c.set_timeout(Duration::from_secs(10));
            let r = c.send("GET", "/stats", &[], b"");
            assert_eq!(r.status, 200, "{}", r.describe());
            all_kept &= r.header("connection") != Some("close");
        }
        if all_kept {
            break;
        }
        assert!(attempt < 9, "four connections never fitted under max_connections = 4");
        held.clear();
    }
    let r = proxy.get(&origin.url("/a"), &[]);
    assert_eq!(r.status, 503, "a proxied request beyond the limit: {}", r.describe());
    assert_eq!(r.header("retry-after"), Some("1"), "{}", r.describe());
    assert!(r.text().contains("server.max_connections"), "{}", r.text());
    assert_eq!(origin.request_count(), 0, "never forwarded");
    // The admin endpoints answer beyond the limit.
    let s = stats(&proxy, Duration::from_secs(5));
    assert_eq!(s["connections"]["max"].as_u64(), Some(4), "{s}");
    assert!(s["proxy"]["overload_refused"].as_u64() >= Some(1), "{s}");
    let m = proxy.admin("/metrics");
    assert!(m.text().contains("crawlcache_overload_refused_total 1"), "{}", m.text());
    // A connection within the limit is still served as a proxy connection.
    let r = held[0].send("GET", &origin.url("/b"), &[], b"");
    assert_eq!(r.status, 200, "{}", r.describe());
    drop(held);
    wait_open_at_most(&proxy, 1);
    assert_eq!(proxy.get(&origin.url("/a"), &[]).status, 200, "recovered");
    no_panic_and_no_descriptor_shortage(&proxy);
    proxy.stop_cleanly();
}

#[test]
fn with_256_open_files_512_idle_connections_leave_stats_answering_and_all_recovers() {
    raise_own_limit();
    let origin = Origin::start(site);
    let proxy = start_limited(
        "limits-256",
        256,
        256,
        "[server]\nthreads = 2\nlog = \"info,crawlcache::proxy::overload=debug\"\n",
    );
    assert_eq!(proxy.get(&origin.url("/before"), &[]).status, 200);
    let s = stats(&proxy, Duration::from_secs(5));
    let max = s["connections"]["max"].as_u64().unwrap();
    assert_eq!(max, (256 - 64 - 16) / 2, "derived from the limit of 256: {s}");
    assert_eq!(s["connections"]["open_file_limit"]["soft"].as_u64(), Some(256), "{s}");

    let mut held = hold(proxy.addr(), 512);
    // Let the proxy take in the flood.
    std::thread::sleep(Duration::from_millis(300));
    // /stats answers within 1 s (a bound that proves it is not stuck
    // behind the held connections).
    let s = stats(&proxy, Duration::from_secs(1));
    let open = s["connections"]["open"].as_u64().unwrap();
    assert!(
        open <= max + 1 && open >= max / 2,
        "the held connections fill the limit, never more: {open} of {max}: {s}"
    );
    // A new proxied request is refused, not left waiting.
    let mut c = Conn::try_open(proxy.addr(), Duration::from_secs(5)).unwrap();
    c.set_timeout(Duration::from_secs(10));
    let r = c
        .try_send("GET", &origin.url("/during"), &[("Connection", "close")], b"")
        .unwrap_or_else(|e| panic!("a new request hung: {e}"));
    assert!(r.status == 503 || r.status == 200, "{}", r.describe());
    if r.status == 503 {
        assert!(r.header("retry-after").is_some(), "{}", r.describe());
    }
    assert_eq!(
        r.status,
        503,
        "with every slot held idle, a new request is refused: {}",
        r.describe()
    );
    // Connections beyond the limit were answered 503 at once, not held.
    let refused = held
        .iter_mut()
        .rev()
        .take(50)
        .map(|s| answer_on(s, Duration::from_millis(200)))
        .filter(|a| a.starts_with("HTTP/1.1 503 "))
        .count();
    assert!(refused > 0, "the newest held connections were answered 503");
    let s = stats(&proxy, Duration::from_secs(1));
    assert!(s["proxy"]["overload_refused"].as_u64() > Some(0), "{s}");

    drop(held);
    let s = wait_open_at_most(&proxy, 1);
    assert!(s["connections"]["beyond_limit_now"].as_u64() == Some(0), "{s}");
    for i in 0..20 {
        let r = proxy.get(&origin.url(&format!("/after/{i}")), &[]);
        assert_eq!(r.status, 200, "recovered: {}", r.describe());
    }
    assert!(
        proxy.log_shows("server.max_connections is 88", Duration::from_secs(5)),
        "the limit was logged:\n{}",
        proxy.stderr_tail(20)
    );
    no_panic_and_no_descriptor_shortage(&proxy);
    proxy.stop_cleanly();
}
