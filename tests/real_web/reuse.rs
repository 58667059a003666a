//! C41: an origin closes a pooled keep-alive connection just as the next
//! request goes out (RFC 9112 section 9.3.1).

use super::*;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

/// An origin that answers the first request on each connection and closes
/// the connection, unanswered, when a second request arrives on it.
fn one_answer_per_connection() -> impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static {
    let seen = Mutex::new(HashSet::new());
    move |r: &RecordedRequest| {
        if seen.lock().unwrap_or_else(|p| p.into_inner()).insert(r.connection) {
            Reply::ok(
                &[("Cache-Control", "no-store"), ("Keep-Alive", "timeout=1")],
                format!("body of {}", r.path()).as_bytes(),
            )
        } else {
            Reply::hang_up()
        }
    }
}

#[test]
fn an_idempotent_request_on_a_closed_pooled_connection_is_resent_once_c41() {
    let (origin, proxy) = start("", one_answer_per_connection());
    for p in ["/p1", "/p2", "/p3", "/p4"] {
        let r = proxy.get(&origin.url(p), &[]);
        assert_eq!(r.status, 200, "{p}: {}", r.describe());
        assert_eq!(r.text(), format!("body of {p}"), "{p}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let reqs = origin.requests();
    for p in ["/p1", "/p2", "/p3", "/p4"] {
        let n = reqs.iter().filter(|r| r.path() == p).count();
        assert!(
            (1..=2).contains(&n),
            "{p} reached the origin {n} times (at most once more after a closed connection)"
        );
    }
    assert_eq!(
        reqs.iter().filter(|r| r.path() == "/p1").count(),
        1,
        "the first request went out once"
    );
}

#[test]
fn a_post_on_a_closed_pooled_connection_is_never_resent_c41() {
    let (origin, proxy) = start("", one_answer_per_connection());
    assert_eq!(proxy.get(&origin.url("/warm"), &[]).status, 200);
    let r = send_request(
        proxy.addr(),
        "POST",
        &origin.url("/form"),
        &[("Content-Type", "text/plain")],
        b"",
    );
    assert!(r.status == 502 || r.status == 200, "{}", r.describe());
    let posts = origin.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 1, "a non-idempotent request is sent once, whatever happens");
}

/// `upstream.pool_idle_timeout`: a keep-alive connection to an origin that
/// no request reuses is closed by the proxy once it has been idle that
/// long (the origin sees it end), not left open until the origin gives up
/// on it.
#[test]
fn an_idle_origin_connection_is_closed_after_the_pool_idle_timeout() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = Vec::new();
        let mut chunk = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return Err("no request arrived".to_string()),
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: 2\r\n\r\nok")
            .unwrap();
        let answered = std::time::Instant::now();
        match s.read(&mut chunk) {
            Ok(0) => Ok(answered.elapsed()),
            Ok(_) => Err("another request came on the connection".to_string()),
            Err(e) => Err(format!("the connection was still open 10 s after the answer: {e}")),
        }
    });
    let dir = TestDir::new("pool-idle");
    let proxy = Proxy::start_with_config(
        &dir.subdir("data"),
        &format!("{NO_ROBOTS}[upstream]\npool_idle_timeout = \"1s\"\n"),
        &[],
    )
    .owning(dir);
    let r = proxy.get(&format!("http://{addr}/once"), &[]);
    assert_eq!((r.status, r.text()), (200, "ok".to_string()), "{}", r.describe());
    let idle = origin.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
    assert!(idle >= Duration::from_millis(900), "closed after {idle:?}, before the idle timeout");
}
