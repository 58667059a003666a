//! C48: the proxy's own address in any spelling is a loop (508), except the
//! listen address as printed (or `localhost`) from a loopback client, which
//! is admin; its own `Via` is a loop; CONNECT to itself is a loop. And the
//! admin boundary beyond 127.0.0.1: `server.admin_token`.

use crate::common::*;
use crate::support::*;
use std::net::{IpAddr, SocketAddr};

/// Every spelling of 127.0.0.1 (and the unspecified address) that is not
/// the listen address as printed.
const LOOP_SPELLINGS: &[&str] = &[
    "127.1",
    "2130706433",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "0.0.0.0",
];

fn assert_loop(what: &str, r: &Response) {
    assert_eq!(r.status, 508, "{what}: {}", r.describe());
    assert!(cache_status(r).contains("detail=loop"), "{what}: {}", r.describe());
}

fn send(proxy: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)]) -> Response {
    send_request(proxy, method, target, headers, b"")
}

#[test]
fn c48_every_other_spelling_of_the_proxy_is_a_loop() {
    let (origin, proxy) = raw_origin_and_proxy("c48", ROBOTS_OFF, echo_host);
    let p = proxy.port();
    let page = origin.url("/page");
    let first = proxy.get(&page, &[]);
    assert_eq!(first.status, 200, "{}", first.describe());
    assert!(cache_status(&first).contains("stored"), "{}", first.describe());

    for host in LOOP_SPELLINGS {
        let target = format!("http://{host}:{p}/stats");
        assert_loop(&format!("GET {target}"), &send(proxy.addr(), "GET", &target, &[]));
    }

    // A purge through another spelling is refused, and purges nothing.
    let purge = format!("http://2130706433:{p}/cache/purge?url={page}");
    assert_loop(&format!("POST {purge}"), &send(proxy.addr(), "POST", &purge, &[]));
    let after = proxy.get(&page, &[]);
    assert_eq!(after.status, 200);
    assert!(
        cache_status(&after).contains("hit"),
        "the entry must still be served as a hit: {}",
        after.describe()
    );

    // The listen address as printed, and localhost, from this loopback
    // client: admin, in absolute form (what curl sends with http_proxy set).
    for host in ["127.0.0.1", "localhost"] {
        let target = format!("http://{host}:{p}/stats");
        let r = send(proxy.addr(), "GET", &target, &[]);
        assert_eq!(r.status, 200, "GET {target}: {}", r.describe());
        let v: serde_json::Value = serde_json::from_slice(&r.body)
            .unwrap_or_else(|e| panic!("GET {target}: not JSON ({e}): {}", r.describe()));
        assert_eq!(v["listen"], proxy.addr().to_string(), "GET {target}");
    }

    // CONNECT to the proxy, in any spelling.
    for authority in [
        format!("127.1:{p}"),
        format!("2130706433:{p}"),
        format!("127.0.0.1:{p}"),
        format!("localhost:{p}"),
    ] {
        match connect_tunnel(proxy.addr(), &authority) {
            Ok(_) => panic!("CONNECT {authority} (the proxy itself) was accepted"),
            Err(head) => assert!(head.starts_with("HTTP/1.1 508"), "CONNECT {authority}: {head}"),
        }
    }

    // This process's own Via, as it wrote it on a response, is a loop; a
    // Via naming another crawlcache process is not.
    let via = first
        .header_all("Via")
        .into_iter()
        .find(|v| v.contains("crawlcache-"))
        .expect("a Via naming crawlcache")
        .to_string();
    let before = origin.request_count();
    let looped = send(proxy.addr(), "GET", &origin.url("/other"), &[("Via", &via)]);
    assert_loop(&format!("GET with Via: {via}"), &looped);
    assert_eq!(
        origin.request_count(),
        before,
        "a request carrying our own Via must not be forwarded"
    );
    let chained =
        send(proxy.addr(), "GET", &origin.url("/other"), &[("Via", "1.1 crawlcache-00000000")]);
    assert_eq!(
        chained.status,
        200,
        "another crawlcache's Via is a chain, not a loop: {}",
        chained.describe()
    );

    let stray: Vec<String> = origin
        .requests()
        .iter()
        .filter(|r| r.path() != "/page" && r.path() != "/other")
        .map(|r| r.target.clone())
        .collect();
    assert!(stray.is_empty(), "requests to the proxy reached the origin: {stray:?}");
}

/// Admin beyond 127.0.0.1: listening on 127.0.0.2 with `admin_token`,
/// `/stats` needs the bearer token (origin-form and absolute-form with the
/// listen address); other spellings of 127.0.0.2 are loops, token or not.
#[test]
fn admin_needs_the_token_and_other_spellings_are_loops() {
    let ip: IpAddr = [127, 0, 0, 2].into();
    if let Err(e) = std::net::TcpListener::bind((ip, 0)) {
        println!("SKIPPED: cannot bind 127.0.0.2 on this machine: {e}");
        return;
    }
    let dir = TestDir::new("admin-token");
    let config = format!("{ROBOTS_OFF}[server]\nadmin_token = \"s3cret\"\n");
    let bearer = ("Authorization", "Bearer s3cret");
    let proxy = Proxy::start_on(ip, &dir.subdir("data"), &config, &[bearer]).owning(dir);
    let addr = proxy.addr();
    assert_eq!(addr.ip(), ip);
    let p = addr.port();

    for target in [
        "/stats".to_string(),
        format!("http://{addr}/stats"),
        format!("http://localhost:{p}/stats"),
    ] {
        let denied = send(addr, "GET", &target, &[]);
        assert_eq!(denied.status, 403, "GET {target} without the token: {}", denied.describe());
        assert!(
            denied.text().contains("admin_token"),
            "the refusal names the key: {}",
            denied.describe()
        );
        let wrong = send(addr, "GET", &target, &[("Authorization", "Bearer nope")]);
        assert_eq!(wrong.status, 403, "GET {target} with a wrong token: {}", wrong.describe());
        let ok = send(addr, "GET", &target, &[bearer]);
        assert_eq!(ok.status, 200, "GET {target} with the token: {}", ok.describe());
        let v: serde_json::Value = serde_json::from_slice(&ok.body).expect("JSON stats");
        assert_eq!(v["listen"], addr.to_string());
    }
    for host in ["127.2", "2130706434", "0x7f.0.0.2", "0177.0.0.2", "[::ffff:127.0.0.2]", "0.0.0.0"]
    {
        let target = format!("http://{host}:{p}/stats");
        assert_loop(&format!("GET {target}"), &send(addr, "GET", &target, &[]));
        assert_loop(
            &format!("GET {target} with the token"),
            &send(addr, "GET", &target, &[bearer]),
        );
    }
    // 127.0.0.1:P is loopback like the listener: refused, never admin.
    let other = send(addr, "GET", &format!("http://127.0.0.1:{p}/stats"), &[bearer]);
    assert!(
        other.status == 508 || other.status == 502,
        "GET http://127.0.0.1:{p}/stats: {}",
        other.describe()
    );
    match connect_tunnel(addr, &format!("2130706434:{p}")) {
        Ok(_) => panic!("CONNECT to the proxy itself was accepted"),
        Err(head) => assert!(head.starts_with("HTTP/1.1 508"), "CONNECT 2130706434:{p}: {head}"),
    }
}
