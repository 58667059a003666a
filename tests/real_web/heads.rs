//! C42: real-world quirks in an origin's response head (RFC 9112 section
//! 5.1; RFC 9110 section 5.4).

use super::*;

fn head_with_fields(n: usize, name: &str) -> Vec<u8> {
    let mut head =
        String::from("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: 3\r\n");
    for i in 0..n {
        head.push_str(&format!("{name}{i:03}: v\r\n"));
    }
    head.push_str("\r\nok\n");
    head.into_bytes()
}

#[test]
fn whitespace_before_the_colon_is_removed_and_the_response_stored_c42() {
    let (origin, proxy) = start("", |_| {
        Reply::raw(b"HTTP/1.1 200 OK\r\nX-XSS-Protection : 1; mode=block\r\nCache-Control: max-age=60\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
            .closing()
    });
    let url = origin.url("/q");
    let miss = proxy.get(&url, &[]);
    assert_eq!(miss.status, 200, "{}", miss.describe());
    assert_eq!(miss.header("x-xss-protection"), Some("1; mode=block"), "{}", miss.describe());
    assert_eq!(miss.text(), "ok\n");
    let hit = proxy.get(&url, &[]);
    assert!(
        hit.cache_status().unwrap_or_default().contains("; hit"),
        "stored and replayed: {}",
        hit.describe()
    );
    assert_eq!(hit.header("x-xss-protection"), Some("1; mode=block"));
    assert_eq!(origin.request_count(), 1);
}

#[test]
fn heads_with_hundreds_and_thousands_of_fields_are_accepted_c42() {
    let (origin, proxy) = start("", |r: &RecordedRequest| match r.path() {
        "/101" => Reply::raw(&head_with_fields(98, "X-H")),
        "/cookies" => Reply::raw(&head_with_fields(110, "Set-Cookie: c")),
        _ => Reply::raw(&head_with_fields(2000, "X-H")),
    });
    for path in ["/101", "/cookies", "/2000"] {
        let r = proxy.get(&origin.url(path), &[]);
        assert_eq!(r.status, 200, "{path}: {}", r.describe());
        assert_eq!(r.text(), "ok\n", "{path}");
    }
    let hit = proxy.get(&origin.url("/2000"), &[]);
    assert!(hit.cache_status().unwrap_or_default().contains("; hit"), "{}", hit.describe());
    assert_eq!(hit.header_all("x-h1999").len(), 1, "every field replayed");
    // The first parse has room for 256 fields: /101 and /cookies fit, and
    // /2000 was sent a second time with room for max_head_fields. The
    // origin is remembered: a new URL there is sent once.
    let paths = |origin: &Origin| {
        origin.requests().iter().map(|r| r.path().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(paths(&origin), ["/101", "/cookies", "/2000", "/2000"]);
    let r = proxy.get(&origin.url("/2000?again"), &[]);
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(
        paths(&origin),
        ["/101", "/cookies", "/2000", "/2000", "/2000"],
        "sent once, with room"
    );
}

#[test]
fn a_request_that_cannot_be_resent_learns_the_room_for_the_next_c42() {
    let (origin, proxy) = start("", |r: &RecordedRequest| match r.path() {
        "/small" => Reply::raw(&head_with_fields(10, "X-H")),
        _ => Reply::raw(&head_with_fields(300, "X-H")),
    });
    let post = |path: &str| {
        send_request(
            proxy.addr(),
            "POST",
            &origin.url(path),
            &[("Content-Type", "text/plain")],
            b"form=1",
        )
    };
    // Heads within the first parse's room: no difference.
    assert_eq!(post("/small").status, 200);
    // 300 fields on a POST the proxy must not send twice: a 502 that says
    // why and that the next request gets the room; the origin saw it once.
    let first = post("/big");
    assert_eq!(first.status, 502, "{}", first.describe());
    assert!(
        first.text().contains("cannot be sent again")
            && first.text().contains("upstream.max_head_fields"),
        "{}",
        first.text()
    );
    let second = post("/big");
    assert_eq!(second.status, 200, "{}", second.describe());
    assert_eq!(second.header_all("x-h299").len(), 1);
    let seen: Vec<String> = origin
        .requests()
        .iter()
        .map(|r| format!("{} {} {}", r.method, r.path(), r.body.len()))
        .collect();
    assert_eq!(seen, ["POST /small 6", "POST /big 6", "POST /big 6"]);
}

#[test]
fn a_head_beyond_the_byte_limit_gets_a_502_naming_the_limit_c42() {
    let (origin, proxy) = start("[upstream]\nmax_head_bytes = \"64KiB\"\n", |_| {
        let mut head = String::from("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
        for i in 0..100 {
            head.push_str(&format!("X-Big{i}: {}\r\n", "y".repeat(1000)));
        }
        head.push_str("\r\nok");
        Reply::raw(head.as_bytes())
    });
    let r = proxy.get(&origin.url("/big"), &[]);
    assert_eq!(r.status, 502, "{}", r.describe());
    assert!(r.text().contains("upstream.max_head_bytes"), "the body names the limit: {}", r.text());
    // Refused for its bytes, not its fields: not asked for a second time.
    assert_eq!(origin.request_count(), 1);
    assert!(
        proxy.log_shows("upstream.max_head_bytes", std::time::Duration::from_secs(5)),
        "and so does the log"
    );
}

#[test]
fn a_crawler_with_many_cookies_is_not_refused_below_the_origin_limits_c42() {
    let (origin, proxy) = start("", |_| Reply::ok(&[("Cache-Control", "no-store")], b"ok"));
    // RFC 6265 section 5.4: one Cookie line; 1,500 cookies make ~150 KB,
    // under the 256 KiB the origin side also allows, plus 80 other fields.
    let cookie: String =
        (0..1500).map(|i| format!("c{i}={}", "z".repeat(90))).collect::<Vec<_>>().join("; ");
    let others: Vec<(String, String)> =
        (0..80).map(|i| (format!("X-Crawler-{i}"), "v".to_string())).collect();
    let mut fields: Vec<(&str, &str)> =
        others.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    fields.push(("Cookie", cookie.as_str()));
    let r = proxy.get(&origin.url("/c"), &fields);
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(
        origin.requests()[0].header("cookie"),
        Some(cookie.as_str()),
        "the cookie line forwarded whole"
    );
}
