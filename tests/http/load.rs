//! Load and failure: collapsed forwarding of concurrent misses (C17) and
//! a full disk under the cache (C18).

use super::*;

/// `n` concurrent proxied GETs of `url`, one connection each.
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
fn concurrent_misses_collapse_into_one_origin_fetch_c17() {
    let (origin, proxy) = start(|req| match req.path() {
        "/hot" => Reply::ok(&[("Cache-Control", "max-age=2"), ("ETag", "\"h1\"")], b"hot body")
            .delayed(Duration::from_millis(500)),
        _ => Reply::ok(&[("Cache-Control", "no-store")], b"private body")
            .delayed(Duration::from_millis(300)),
    });
    let url = origin.url("/hot");
    let cold = burst(&proxy, &url, 50);
    assert!(
        cold.iter().all(|r| r.status == 200 && r.body == b"hot body"),
        "every client gets the body"
    );
    assert_eq!(
        origin.requests().iter().filter(|r| r.path() == "/hot").count(),
        1,
        "cold burst: one origin fetch"
    );

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

/// C18: the cache directory on a 50 MiB file system with a 1 GiB budget:
/// every client still gets complete bodies, nothing partial is kept, and
/// re-requests are valid hits or clean misses. Needs root (to mount a tmpfs).
#[test]
fn a_full_disk_is_invisible_to_clients_c18() {
    let dir = TestDir::new("c18");
    let mnt = dir.subdir("small");
    let Some(_tmpfs) = tmpfs::mount_or_skip("a_full_disk_is_invisible_to_clients_c18", &mnt, "50m")
    else {
        return;
    };
    let body =
        |i: usize| -> Vec<u8> { (0..1_048_576usize).map(|j| ((i * 7 + j) % 251) as u8).collect() };
    let origin = Origin::start(move |req| {
        let i: usize = req.path().trim_start_matches("/obj/").parse().unwrap_or(0);
        Reply::ok(&[("Cache-Control", "max-age=3600")], &body(i))
    });
    let proxy = Proxy::start_with_config(
        &mnt.join("data"),
        &format!("{NO_ROBOTS}[cache]\nmax_size = \"1GiB\"\n"),
        &[],
    );
    for i in 0..200 {
        let r = proxy.get(&origin.url(&format!("/obj/{i}")), &[]);
        assert_eq!(r.status, 200, "object {i}");
        assert!(
            r.complete && r.body.len() == 1_048_576,
            "object {i}: complete body even when the disk is full"
        );
        assert_eq!(r.body, body(i), "object {i}: right bytes");
    }
    for i in 0..10 {
        let r = proxy.get(&origin.url(&format!("/obj/{i}")), &[]);
        assert_eq!(r.status, 200);
        assert_eq!(
            r.body,
            body(i),
            "re-request {i}: a valid hit or a clean miss, never a truncated body"
        );
    }
    let stats = proxy.admin("/stats");
    let v: serde_json::Value = serde_json::from_slice(&stats.body).expect("stats JSON");
    assert!(v["proxy"]["store_errors"].as_u64().unwrap_or(0) > 0, "the full disk was noticed: {v}");
    let data = proxy.data_dir().to_path_buf();
    proxy.stop_cleanly();
    assert_cache_verifies(&data);
}
