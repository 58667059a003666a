//! The HTTP cases of `../shared/cases/CASES.md` about load and failure,
//! through the real proxy: C17 (stampede), C18 (disk full), C22
//! (stale-if-error), C23 (stale-while-revalidate).

mod common;

use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const NO_ROBOTS: &str = "[robots]\nmode = \"off\"\n";

fn start_cfg(cfg: &str, handler: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> (Origin, Proxy, TestDir) {
    let dir = TestDir::new("resilience");
    let origin = Origin::start(handler);
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &format!("{NO_ROBOTS}{cfg}"), &[]);
    (origin, proxy, dir)
}

fn burst(proxy: &Proxy, url: &str, n: usize) -> Vec<Response> {
    let addr = proxy.addr();
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let url = url.to_string();
            std::thread::spawn(move || proxy_get(addr, &url, &[]))
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("client thread")).collect()
}

/// C17: 50 concurrent misses for one key make one origin request, and so
/// does a burst on the stale entry; a no-store response is never shared.
#[test]
fn c17_stampede_collapses_to_one_origin_fetch() {
    let (origin, proxy, _d) = start_cfg("", |req| match req.path() {
        "/hot" => Reply::ok(&[("Cache-Control", "max-age=2"), ("ETag", "\"h1\"")], b"hot body")
            .delayed(Duration::from_millis(500)),
        _ => Reply::ok(&[("Cache-Control", "no-store")], b"private body").delayed(Duration::from_millis(300)),
    });
    let url = origin.url("/hot");
    let cold = burst(&proxy, &url, 50);
    assert!(cold.iter().all(|r| r.status == 200 && r.body == b"hot body"), "every client gets the body");
    assert_eq!(origin.requests().iter().filter(|r| r.path() == "/hot").count(), 1, "cold burst: one origin fetch");

    std::thread::sleep(Duration::from_millis(2200));
    let stale = burst(&proxy, &url, 50);
    assert!(stale.iter().all(|r| r.status == 200 && r.body == b"hot body"));
    let hot: Vec<_> = origin.requests().into_iter().filter(|r| r.path() == "/hot").collect();
    assert_eq!(hot.len(), 2, "stale burst: one revalidation");
    assert_eq!(hot[1].header("if-none-match"), Some("\"h1\""));

    let ns = origin.url("/nostore");
    let r = burst(&proxy, &ns, 10);
    assert!(r.iter().all(|r| r.body == b"private body"));
    assert_eq!(
        origin.requests().iter().filter(|r| r.path() == "/nostore").count(),
        10,
        "a no-store response is never handed to another client"
    );
}

/// C22: stale-if-error serves the stale body for a 503 and for a refused
/// connection inside the window, and not outside it; must-revalidate never.
#[test]
fn c22_stale_if_error() {
    let fail = Arc::new(AtomicUsize::new(0));
    let f2 = fail.clone();
    let (origin, proxy, _d) = start_cfg("", move |req| {
        if f2.load(Ordering::SeqCst) == 1 {
            return Reply::new(503, &[], b"down");
        }
        match req.path() {
            "/s" => Reply::ok(&[("Cache-Control", "max-age=1, stale-if-error=3")], b"S1"),
            _ => Reply::ok(&[("Cache-Control", "max-age=1, must-revalidate")], b"M1"),
        }
    });
    let s = origin.url("/s");
    let m = origin.url("/m");
    assert_eq!(proxy.get(&s, &[]).text(), "S1");
    assert_eq!(proxy.get(&m, &[]).text(), "M1");
    std::thread::sleep(Duration::from_millis(1500));
    fail.store(1, Ordering::SeqCst);
    let r = proxy.get(&s, &[]);
    assert_eq!((r.status, r.text()), (200, "S1".to_string()), "503 inside stale-if-error: stale served: {}", r.describe());
    assert!(r.cache_status().unwrap_or_default().contains("stale"), "{}", r.describe());
    let r = proxy.get(&m, &[]);
    assert_eq!(r.status, 503, "must-revalidate: the error, not M1: {}", r.describe());

    // The origin goes away entirely (connection refused).
    let port = origin.port();
    drop(origin);
    let r = proxy.get(&s, &[]);
    assert_eq!((r.status, r.text()), (200, "S1".to_string()), "refused inside the window: stale served: {}", r.describe());
    let r = proxy.get(&m, &[]);
    assert_eq!(r.status, 504, "must-revalidate and unreachable: 504: {}", r.describe());
    std::thread::sleep(Duration::from_millis(3000));
    let r = proxy.get(&format!("http://127.0.0.1:{port}/s"), &[]);
    assert!(r.status >= 500, "outside the window: an error, not S1: {}", r.describe());
}

/// C23: inside stale-while-revalidate the stale body is served at once and
/// one background revalidation fetches the new one; outside the window the
/// proxy goes to the origin before answering.
#[test]
fn c23_stale_while_revalidate() {
    let version = Arc::new(AtomicUsize::new(1));
    let v2 = version.clone();
    let (origin, proxy, _d) = start_cfg("", move |req| {
        let v = v2.load(Ordering::SeqCst);
        let etag = format!("\"w{v}\"");
        if req.header("if-none-match") == Some(etag.as_str()) {
            return Reply::not_modified(&[("ETag", &etag), ("Cache-Control", "public, s-maxage=1, stale-while-revalidate=3")]);
        }
        Reply::ok(
            &[("Cache-Control", "public, s-maxage=1, stale-while-revalidate=3"), ("ETag", &etag)],
            format!("W{v}").as_bytes(),
        )
    });
    let w = origin.url("/w");
    let w2 = origin.url("/w2");
    assert_eq!(proxy.get(&w, &[]).text(), "W1");
    assert_eq!(proxy.get(&w2, &[]).text(), "W1");
    version.store(2, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1500));
    let r = proxy.get(&w, &[]);
    assert_eq!(r.text(), "W1", "inside the window the stale body is served at once: {}", r.describe());
    let reqs = origin.wait_for_requests(3, Duration::from_secs(5));
    assert_eq!(reqs[2].header("if-none-match"), Some("\"w1\""), "one background conditional request");
    std::thread::sleep(Duration::from_millis(300));
    let r = proxy.get(&w, &[]);
    assert_eq!(r.text(), "W2", "the refreshed body is served next: {}", r.describe());
    assert_eq!(origin.requests().iter().filter(|r| r.path() == "/w").count(), 2, "exactly one background request");

    std::thread::sleep(Duration::from_millis(3500));
    let before = origin.request_count();
    let r = proxy.get(&w2, &[]);
    assert_eq!(r.text(), "W2", "outside the window the proxy asks the origin first: {}", r.describe());
    assert_eq!(origin.request_count(), before + 1);
}

/// C18: the cache directory on a 50 MiB file system with a 1 GiB budget:
/// every client still gets complete bodies, nothing partial is kept, and
/// re-requests are valid hits or clean misses. Needs root (to mount a tmpfs).
#[test]
fn c18_disk_full_is_invisible_to_clients() {
    let dir = TestDir::new("c18");
    let mnt = dir.subdir("small");
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=50m", "tmpfs"])
        .arg(&mnt)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        // Not root (developer machines): say so loudly rather than pass silently.
        eprintln!("c18_disk_full_is_invisible_to_clients: SKIPPED, cannot mount a tmpfs (needs root; CI runs as root)");
        assert!(running_as_non_root(), "mounting a tmpfs failed although running as root");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let body = |i: usize| -> Vec<u8> { (0..1_048_576usize).map(|j| ((i * 7 + j) % 251) as u8).collect() };
    let origin = Origin::start(move |req| {
        let i: usize = req.path().trim_start_matches("/obj/").parse().unwrap_or(0);
        Reply::ok(&[("Cache-Control", "max-age=3600")], &body(i))
    });
    let proxy = Proxy::start_with_config(&mnt.join("data"), &format!("{NO_ROBOTS}[cache]\nmax_size = \"1GiB\"\n"), &[]);
    for i in 0..200 {
        let r = proxy.get(&origin.url(&format!("/obj/{i}")), &[]);
        assert_eq!(r.status, 200, "object {i}");
        assert!(r.complete && r.body.len() == 1_048_576, "object {i}: complete body even when the disk is full");
        assert_eq!(r.body, body(i), "object {i}: right bytes");
    }
    for i in 0..10 {
        let r = proxy.get(&origin.url(&format!("/obj/{i}")), &[]);
        assert_eq!(r.status, 200);
        assert_eq!(r.body, body(i), "re-request {i}: a valid hit or a clean miss, never a truncated body");
    }
    let stats = proxy.admin("/stats");
    let v: serde_json::Value = serde_json::from_slice(&stats.body).expect("stats JSON");
    assert!(v["proxy"]["store_errors"].as_u64().unwrap_or(0) > 0, "the full disk was noticed: {v}");
    let data = proxy.data_dir().to_path_buf();
    proxy.stop_cleanly();
    assert_cache_verifies(&data);
}

fn running_as_non_root() -> bool {
    std::process::Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() != "0").unwrap_or(true)
}
