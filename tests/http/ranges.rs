//! Range requests (RFC 9110 section 14) answered from a stored complete
//! response (RFC 9111 section 3.4).

use super::*;

const BODY: &[u8] = b"0123456789A";

/// An origin serving `BODY` fresh for an hour with a strong ETag and a
/// Last-Modified well before its Date.
fn stored_body_origin() -> (Origin, Proxy) {
    start(|_| {
        Reply::ok(
            &[
                ("Cache-Control", "max-age=3600"),
                ("ETag", "\"v1\""),
                ("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
                ("Content-Type", "text/plain"),
            ],
            BODY,
        )
    })
}

/// RFC 9110 section 14 / RFC 9111 section 3.4: a single byte range of a
/// complete stored response is answered from the cache with 206 and the
/// right bytes; the origin is asked once.
#[test]
fn single_range_of_a_stored_200_is_a_206_from_the_cache() {
    let (origin, proxy) = stored_body_origin();
    let url = origin.url("/r");
    let full = proxy.get(&url, &[]);
    assert_eq!(full.status, 200, "{}", full.describe());
    for (range, text, content_range) in [
        ("bytes=0-1", "01", "bytes 0-1/11"),
        ("bytes=1-", "123456789A", "bytes 1-10/11"),
        ("bytes=-1", "A", "bytes 10-10/11"),
        ("bytes=5-1000", "56789A", "bytes 5-10/11"),
    ] {
        let r = proxy.get(&url, &[("Range", range)]);
        assert_eq!(r.status, 206, "{range}: {}", r.describe());
        assert_eq!(r.text(), text, "{range}");
        assert_eq!(r.header("content-range"), Some(content_range), "{range}");
        assert_eq!(r.header("content-length"), Some(text.len().to_string().as_str()), "{range}");
        assert_eq!(r.header("etag"), Some("\"v1\""), "the stored fields come along: {range}");
        assert!(r.complete, "{range}");
    }
    assert_eq!(origin.request_count(), 1, "every range came from the stored body");
}

/// RFC 9110 section 15.5.17: a range that starts past the end gets 416
/// with `Content-Range: bytes */length`, without asking the origin.
#[test]
fn unsatisfiable_range_is_a_416_naming_the_length() {
    let (origin, proxy) = stored_body_origin();
    let url = origin.url("/r");
    proxy.get(&url, &[]);
    let r = proxy.get(&url, &[("Range", "bytes=11-")]);
    assert_eq!(r.status, 416, "{}", r.describe());
    assert_eq!(r.header("content-range"), Some("bytes */11"));
    assert!(r.body.is_empty());
    assert_eq!(origin.request_count(), 1);
}

/// RFC 9110 section 14.2 lets a server ignore `Range`: several ranges, a
/// malformed one, or an `If-Range` that does not strongly match the stored
/// validator get the whole stored body with 200.
#[test]
fn multiple_malformed_or_mismatched_if_range_get_the_whole_body() {
    let (origin, proxy) = stored_body_origin();
    let url = origin.url("/r");
    proxy.get(&url, &[]);
    for headers in [
        vec![("Range", "bytes=0-1, 4-5")],
        vec![("Range", "bytes=5-1")],
        vec![("Range", "items=0-1")],
        vec![("Range", "bytes=0-1"), ("If-Range", "\"v0\"")],
        vec![("Range", "bytes=0-1"), ("If-Range", "W/\"v1\"")],
    ] {
        let r = proxy.get(&url, &headers);
        assert_eq!(r.status, 200, "{headers:?}: {}", r.describe());
        assert_eq!(r.body, BODY, "{headers:?}");
        assert!(r.header("content-range").is_none(), "{headers:?}");
    }
    let matching = proxy.get(&url, &[("Range", "bytes=0-1"), ("If-Range", "\"v1\"")]);
    assert_eq!(
        matching.status,
        206,
        "a strong If-Range match gets the range: {}",
        matching.describe()
    );
    assert_eq!(matching.text(), "01");
    assert_eq!(origin.request_count(), 1);
}

/// RFC 9110 section 14.2: range handling is defined for GET only; a HEAD
/// with `Range` gets the stored 200's fields.
#[test]
fn head_with_range_is_answered_as_a_plain_head() {
    let (origin, proxy) = stored_body_origin();
    let url = origin.url("/r");
    proxy.get(&url, &[]);
    let mut conn = Conn::open(proxy.addr());
    let r = conn.send("HEAD", &url, &[("Range", "bytes=0-1")], b"");
    assert_eq!(r.status, 200, "{}", r.describe());
    assert!(r.header("content-range").is_none());
    assert_eq!(origin.request_count(), 1);
}

/// A stored body larger than `cache.body_memory_max_object` (256 KiB) is
/// served from its file (a map of it): whole, and by range, byte for byte,
/// every time; the origin is asked once. By default the map is written as
/// any other bytes; nothing goes out with `sendfile`.
#[test]
fn a_large_stored_body_is_served_whole_and_by_range_byte_for_byte() {
    let sent = large_body_whole_and_by_ranges(NO_ROBOTS);
    assert_eq!(sent, 0, "server.sendfile is off by default");
}

/// The same with `server.sendfile` on: the body and its ranges arrive byte
/// for byte on a plain-HTTP connection, and went out with `sendfile`.
#[test]
fn with_sendfile_a_large_stored_body_is_sent_from_its_file_byte_for_byte() {
    let sent = large_body_whole_and_by_ranges(&format!("{NO_ROBOTS}[server]\nsendfile = true\n"));
    // The first answer is the miss, relayed as it arrived from the origin;
    // then two whole bodies and the 100,001-byte range come from the file
    // (the two short ranges are written as usual, and so may be a last
    // remainder under 4 KiB of each after a partial send).
    let from_file = 2 * (600 * 1024 + 7) + 100_001;
    assert!(
        sent <= from_file && sent + 3 * 4096 > from_file,
        "the stored bodies went out with sendfile: {sent} of {from_file} bytes"
    );
}

/// Stores a 600 KiB body through a proxy configured with `config_toml`,
/// checks it three times whole and by three ranges, and returns the
/// proxy's `crawlcache_sendfile_bytes_total`.
fn large_body_whole_and_by_ranges(config_toml: &str) -> u64 {
    let big: Vec<u8> =
        (0..(600 * 1024 + 7) as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let body = big.clone();
    let (origin, proxy) = start_with_origin("http", config_toml, move |_| {
        Reply::ok(&[("Cache-Control", "max-age=3600"), ("ETag", "\"big\"")], &body)
    });
    let url = origin.url("/big");
    for round in 0..3 {
        let r = proxy.get(&url, &[]);
        assert_eq!(r.status, 200, "{}", r.describe());
        assert!(r.body == big, "round {round}: {} bytes, not the stored ones", r.body.len());
    }
    let len = big.len();
    for (range, first, last) in [
        ("bytes=0-9".to_string(), 0, 9),
        (format!("bytes={}-", len - 5), len - 5, len - 1),
        ("bytes=300000-400000".to_string(), 300_000, 400_000),
    ] {
        let r = proxy.get(&url, &[("Range", range.as_str())]);
        assert_eq!(r.status, 206, "{range}: {}", r.describe());
        assert!(r.body == big[first..=last], "{range}: wrong bytes");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {first}-{last}/{len}").as_str()),
            "{range}"
        );
    }
    assert_eq!(origin.request_count(), 1, "everything came from the stored body");
    proxy.metric("crawlcache_sendfile_bytes_total")
}
