//! C45: a client's `Host` never addresses the origin. Upstream requests
//! carry a `Host` generated from the target (RFC 9112 section 3.2.2), the
//! cache answers by the target alone, userinfo goes nowhere; inside an
//! intercepted tunnel a `Host` naming another authority is refused with 421
//! and audited; the minted leaf certificate names the SNI.

use crate::common::tls::test_pki;
use crate::common::*;
use crate::support::*;
use std::time::Duration;

/// Client A's `Host: other.example` is ignored: the origin sees the
/// target's authority, exactly, for A (the miss) and B gets A's stored
/// answer for the right host.
#[test]
fn c45_host_comes_from_the_target_not_from_the_client() {
    let (origin, proxy) = raw_origin_and_proxy("c45-host", ROBOTS_OFF, echo_host);
    let url = origin.url("/vh");
    let expected_body = format!("site for host {} target /vh", origin.authority());

    let a = Conn::open(proxy.addr()).send(
        "GET",
        &url,
        &[("Host", "other.example"), ("Connection", "close")],
        b"",
    );
    assert_eq!(a.status, 200, "client A: {}", a.describe());
    assert_eq!(a.text(), expected_body, "client A must get the site of the target's host");
    let b = proxy.get(&url, &[]);
    assert_eq!(b.status, 200, "client B: {}", b.describe());
    assert_eq!(b.text(), expected_body, "client B must get the site of the target's host");

    let seen = origin.requests();
    assert!(
        !seen.is_empty() && seen.len() <= 2,
        "one or two origin requests expected, got {}",
        seen.len()
    );
    if seen.len() == 1 {
        assert!(
            cache_status(&b).contains("hit"),
            "B was not forwarded, so it must be a hit: {}",
            b.describe()
        );
    }
    for r in &seen {
        assert_host_exact(r, &origin.authority());
        assert!(
            !r.head_text().contains("other.example"),
            "the client's Host leaked upstream:\n{}",
            r.head_text()
        );
        assert_eq!(r.target, "/vh");
        assert!(r.violations.is_empty(), "{:?}", r.violations);
    }
}

/// Userinfo in the target goes neither into `Host`, the target, nor an
/// `Authorization` field.
#[test]
fn c45_userinfo_is_dropped_and_adds_no_authorization() {
    let (origin, proxy) = raw_origin_and_proxy("c45-userinfo", ROBOTS_OFF, echo_host);
    let url = format!("http://user:pw@{}/x", origin.authority());
    let r = Conn::open(proxy.addr()).send(
        "GET",
        &url,
        &[("Host", "user:pw@other.example"), ("Connection", "close")],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(r.text(), format!("site for host {} target /x", origin.authority()));
    let seen = origin.requests();
    assert_eq!(seen.len(), 1);
    let req = &seen[0];
    assert_host_exact(req, &origin.authority());
    assert_eq!(req.target, "/x");
    let head = req.head_text();
    assert!(!head.contains("user") && !head.contains("pw@"), "userinfo leaked upstream:\n{head}");
    assert!(
        req.header("Authorization").is_none(),
        "no Authorization may be made up from userinfo:\n{head}"
    );
}

/// C45 inside an intercepted tunnel to `127.0.0.1:OP`: `GET /page` with
/// `Host: evil.example` is refused with 421 (`detail=misdirected`) and the
/// audit line says so, while the same request with the tunnel's own
/// authority (or none) reaches the origin with `Host: 127.0.0.1:OP`.
#[test]
fn c45_tunnel_host_naming_another_authority_is_421_and_audited() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = RawOrigin::start_tls(pki.server_config(), |req| {
        let mut reply = echo_host(req);
        reply.close = true;
        reply
    });
    let dir = TestDir::new("c45-tunnel");
    let ca_path = dir.join("origin-ca.pem");
    std::fs::write(&ca_path, &pki.ca_pem).expect("writing the origin CA");
    let config =
        format!("{ROBOTS_OFF}[upstream]\nextra_ca_file = {:?}\n", ca_path.display().to_string());
    let data = dir.subdir("data");
    let proxy = Proxy::start_with_config(&data, &config, &[]).owning(dir);
    let client_tls =
        tls_client_config(&std::fs::read(crawlcache_ca(&data)).expect("reading crawlcache's CA"));
    let authority = origin.authority();

    let in_tunnel = |raw: String| {
        let tcp = connect_tunnel(proxy.addr(), &authority)
            .unwrap_or_else(|e| panic!("CONNECT {authority}: {e}"));
        let (mut tls, _) =
            tls_over(tcp, client_tls.clone(), "127.0.0.1").unwrap_or_else(|e| panic!("{e}"));
        exchange_until_close(&mut tls, raw.as_bytes())
    };

    let evil =
        in_tunnel("GET /page HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n".into());
    assert_eq!(
        evil.status,
        421,
        "a Host naming another authority inside the tunnel: {}",
        evil.describe()
    );
    assert!(cache_status(&evil).contains("detail=misdirected"), "{}", evil.describe());
    assert_eq!(origin.request_count(), 0, "the misdirected request must not reach the origin");
    let url = format!("https://{authority}/page");
    let line = wait_audit_line(proxy.data_dir(), |l| {
        l.contains(&format!("\"url\":\"{url}\"")) && l.contains("misdirected")
    });
    assert!(
        line.is_some(),
        "no audit line for {url} with detail=misdirected; audit lines: {:?}",
        audit_lines(proxy.data_dir())
    );

    let good =
        in_tunnel(format!("GET /page HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"));
    assert_eq!(good.status, 200, "the tunnel's own authority: {}", good.describe());
    assert_eq!(good.text(), format!("site for host {authority} target /page"));
    let seen = origin.wait_for_requests(1, Duration::from_secs(10));
    assert_eq!(seen.len(), 1);
    assert_host_exact(&seen[0], &authority);
}

/// True when the DER certificate `der` carries the subjectAltName entry
/// `tag` (0x82 dNSName, 0x87 iPAddress) with exactly `value`.
fn has_san(der: &[u8], tag: u8, value: &[u8]) -> bool {
    let mut needle = vec![tag, value.len() as u8];
    needle.extend_from_slice(value);
    der.windows(needle.len()).any(|w| w == needle)
}

/// `CONNECT 127.0.0.1:PORT` with SNI `localhost`: the leaf certificate
/// presented names `localhost` (the client verifies it for that name, and
/// the certificate carries the dNSName). Without SNI it names the CONNECT
/// host (an iPAddress SAN 127.0.0.1).
#[test]
fn c45_leaf_certificate_names_the_sni() {
    let dir = TestDir::new("c45-sni");
    let data = dir.subdir("data");
    let proxy = Proxy::start_with_config(&data, ROBOTS_OFF, &[]).owning(dir);
    let client_tls =
        tls_client_config(&std::fs::read(crawlcache_ca(&data)).expect("reading crawlcache's CA"));
    // Nothing is fetched: the handshake alone is checked, so no origin is needed.
    let target = format!("127.0.0.1:{}", free_port());

    let tcp =
        connect_tunnel(proxy.addr(), &target).unwrap_or_else(|e| panic!("CONNECT {target}: {e}"));
    let (_tls, leaf) = tls_over(tcp, client_tls.clone(), "localhost").unwrap_or_else(|e| {
        panic!("CONNECT {target} with SNI localhost: the leaf must verify for localhost: {e}")
    });
    assert!(
        has_san(&leaf, 0x82, b"localhost"),
        "the leaf minted for SNI localhost has no dNSName localhost"
    );

    let tcp =
        connect_tunnel(proxy.addr(), &target).unwrap_or_else(|e| panic!("CONNECT {target}: {e}"));
    let (_tls, leaf) = tls_over(tcp, client_tls, "127.0.0.1").unwrap_or_else(|e| {
        panic!("CONNECT {target} without SNI: the leaf must verify for 127.0.0.1: {e}")
    });
    assert!(
        has_san(&leaf, 0x87, &[127, 0, 0, 1]),
        "the leaf minted without SNI has no iPAddress 127.0.0.1"
    );
}
