//! Field plumbing: the one hop-by-hop list (RFC 9110 section 7.6.1) and
//! `Via` (section 7.6.3).

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Version;

/// The `received-by` name of this process in `Via` (RFC 9110 section
/// 7.6.3): `crawlcache-` and eight hex digits drawn at start, so that a
/// request that comes back to the same process is recognised as a loop
/// while a chain of two crawlcache instances is not.
pub fn via_pseudonym() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        format!("crawlcache-{:08x}", h.finish() as u32)
    })
}

/// The `received-protocol` of `Via` for a message received over
/// `version` (RFC 9110 section 7.6.3: the protocol name "HTTP" is
/// omitted): `1.0`, `1.1`, `2`, `3`; HTTP/0.9 as `0.9`.
const VIA_PROTOCOLS: [(Version, &str); 5] = [
    (Version::HTTP_11, "1.1"),
    (Version::HTTP_2, "2"),
    (Version::HTTP_10, "1.0"),
    (Version::HTTP_3, "3"),
    (Version::HTTP_09, "0.9"),
];

/// Our `Via` member for a message received over `received`. Values over
/// static bytes: a clone of one (one per response) touches no reference
/// count, where a shared one would move between the serving threads'
/// cores on every response.
fn via_value(received: Version) -> &'static HeaderValue {
    static VALUES: std::sync::OnceLock<Vec<HeaderValue>> = std::sync::OnceLock::new();
    let values = VALUES.get_or_init(|| {
        VIA_PROTOCOLS
            .iter()
            .map(|(_, protocol)| {
                let text = format!("{protocol} {}", via_pseudonym());
                match HeaderValue::from_str(&text) {
                    // Made once per process.
                    Ok(_) => HeaderValue::from_static(Box::leak(text.into_boxed_str())),
                    Err(_) => HeaderValue::from_static("1.1 crawlcache"),
                }
            })
            .collect()
    });
    let i = VIA_PROTOCOLS.iter().position(|(v, _)| *v == received).unwrap_or(0);
    &values[i]
}

/// True when a `Via` field of `headers` names this process: the request
/// has already passed through it (a loop).
pub fn via_names_us(headers: &HeaderMap) -> bool {
    let me = via_pseudonym().as_bytes();
    headers.get_all(http::header::VIA).iter().flat_map(|v| v.as_bytes().split(|&b| b == b',')).any(
        |member| {
            // received-protocol RWS received-by [ RWS comment ]
            let mut words =
                member.trim_ascii().split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty());
            words.nth(1).is_some_and(|by| by.eq_ignore_ascii_case(me))
        },
    )
}

/// Fields that describe one connection and are never forwarded nor stored
/// (RFC 9110 section 7.6.1; RFC 9111 section 3.1), plus the proxy-only
/// `Proxy-Connection`, `Proxy-Authenticate` and `Proxy-Authorization`
/// and `Proxy-Authentication-Info` (RFC 9110 section 11.7). Lower-case.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authentication-info",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// True when `name` (lower-case) is in [`HOP_BY_HOP`].
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.contains(&name)
}

/// The field names listed in `Connection` (lower-cased, RFC 9110 section
/// 7.6.1): they describe this connection only.
pub fn connection_named(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Removes hop-by-hop fields, including every field named in `Connection`.
/// Most messages carry none (and then no `Connection` either): one pass
/// over the names finds the ones present (nothing is allocated when there
/// are none), and only those are removed (each `remove` by name hashes it;
/// this runs on every miss and revalidation, for the request and for the
/// response).
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let present: Vec<HeaderName> =
        headers.keys().filter(|k| is_hop_by_hop(k.as_str())).cloned().collect();
    if present.is_empty() {
        return;
    }
    for n in connection_named(headers) {
        if let Ok(n) = HeaderName::from_bytes(n.as_bytes()) {
            headers.remove(n);
        }
    }
    for n in present {
        headers.remove(n);
    }
}

/// Appends crawlcache's `Via` entry (`1.1 crawlcache-XXXXXXXX`) to a
/// message it makes itself or serves from the store.
pub fn add_via(headers: &mut HeaderMap) {
    add_via_received(headers, Version::HTTP_11);
}

/// Appends crawlcache's `Via` entry for a message it received over
/// `received` and sends on (RFC 9110 section 7.6.3): `2
/// crawlcache-XXXXXXXX` for one received over HTTP/2.
pub fn add_via_received(headers: &mut HeaderMap, received: Version) {
    headers.append(http::header::VIA, via_value(received).clone());
}

/// The response head to send to a client for an origin response read with
/// `headers`: hop-by-hop fields removed, a `Content-Length` received beside
/// `Transfer-Encoding` dropped (RFC 9112 section 6.3: the body was framed by
/// the transfer coding, so the length is wrong or a smuggling attempt),
/// `Via` added, naming the version the response was `received` over. The
/// server library then frames what is actually sent.
pub fn client_response_fields(headers: &mut HeaderMap, received: Version) {
    drop_length_beside_transfer_coding(headers);
    single_content_length(headers);
    remove_hop_by_hop(headers);
    add_via_received(headers, received);
}

/// RFC 9110 section 8.6: a `Content-Length` received as a list or on
/// several lines of one same value (`5, 5`) is sent on as that one value;
/// one that is not a length at all is not sent on (the server library
/// cannot frame by it, and a client must not be left to guess).
pub fn single_content_length(headers: &mut HeaderMap) {
    let mut values = headers.get_all(http::header::CONTENT_LENGTH).iter().peekable();
    if values.peek().is_none() {
        return;
    }
    let mut length: Option<u64> = None;
    let mut valid = true;
    for member in values.flat_map(|v| v.as_bytes().split(|&b| b == b',')) {
        let digits = member.trim_ascii();
        let n = (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit))
            .then(|| std::str::from_utf8(digits).ok()?.parse::<u64>().ok())
            .flatten();
        match (n, length) {
            (Some(n), None) => length = Some(n),
            (Some(n), Some(l)) if n == l => {}
            _ => valid = false,
        }
    }
    match length {
        Some(n) if valid => {
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        _ => {
            headers.remove(http::header::CONTENT_LENGTH);
        }
    }
}

/// RFC 9112 section 6.3: with `Transfer-Encoding`, `Content-Length` is
/// ignored; it is removed so that nothing downstream frames by it.
pub fn drop_length_beside_transfer_coding(headers: &mut HeaderMap) {
    if headers.contains_key(http::header::TRANSFER_ENCODING) {
        headers.remove(http::header::CONTENT_LENGTH);
    }
}

/// The transfer codings other than `chunked` (and the no-op `identity`)
/// that `headers` apply
/// (`Transfer-Encoding`, every line, RFC 9112 section 6.1), lower-cased
/// and comma-separated; `None` when there are none. crawlcache decodes only
/// `chunked` (the HTTP library does): a message with any other transfer
/// coding is refused rather than handed on with its coding unapplied (its
/// field is hop-by-hop and would be removed, leaving coded bytes that look
/// like the content, C51).
pub fn other_transfer_codings(headers: &HeaderMap) -> Option<String> {
    let mut others: Vec<String> = Vec::new();
    for value in headers.get_all(http::header::TRANSFER_ENCODING) {
        for coding in String::from_utf8_lossy(value.as_bytes()).split(',') {
            // A coding may carry parameters (`gzip;q=1` is not valid here,
            // but `name; param` is the grammar): the name decides.
            let name = coding.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
            // `identity` (RFC 2616, since removed) changes nothing.
            if !name.is_empty() && name != "chunked" && name != "identity" {
                others.push(name);
            }
        }
    }
    (!others.is_empty()).then(|| others.join(", "))
}

/// Whether a request with `method` and `headers` asks to switch to the
/// WebSocket protocol: a GET with `Upgrade: websocket` and `upgrade` among
/// the `Connection` options (RFC 6455 section 4.1, RFC 9110 section 7.8;
/// names compared case-insensitively).
pub fn is_websocket_upgrade(method: &http::Method, headers: &http::HeaderMap) -> bool {
    let has_token = |name: http::header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split(',')
                .any(|t| t.split('/').next().unwrap_or("").trim().eq_ignore_ascii_case(token))
        })
    };
    method == http::Method::GET
        && has_token(http::header::UPGRADE, "websocket")
        && has_token(http::header::CONNECTION, "upgrade")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_codings_other_than_chunked_are_named() {
        let te = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append("transfer-encoding", HeaderValue::from_str(v).unwrap());
            }
            other_transfer_codings(&h)
        };
        assert_eq!(te(&[]), None);
        assert_eq!(te(&["chunked"]), None);
        assert_eq!(te(&["Chunked "]), None);
        assert_eq!(te(&["gzip"]).as_deref(), Some("gzip"));
        assert_eq!(te(&["gzip, chunked"]).as_deref(), Some("gzip"));
        assert_eq!(te(&["GZIP", "deflate, chunked"]).as_deref(), Some("gzip, deflate"));
        assert_eq!(te(&[", chunked"]), None);
        assert_eq!(te(&["identity, chunked"]), None);
    }

    #[test]
    fn hop_by_hop_and_connection_named_fields_are_removed() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, X-Private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("proxy-authorization", HeaderValue::from_static("Basic x"));
        h.insert("etag", HeaderValue::from_static("\"a\""));
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("etag"));
        // A field on several lines goes with all of them; a message without
        // hop-by-hop fields is left as it was, repeated lines included.
        let mut h = HeaderMap::new();
        h.append("te", HeaderValue::from_static("trailers"));
        h.append("te", HeaderValue::from_static("gzip"));
        h.append("vary", HeaderValue::from_static("accept"));
        h.append("vary", HeaderValue::from_static("cookie"));
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 2);
        let before = h.clone();
        remove_hop_by_hop(&mut h);
        assert_eq!(h, before);
    }

    #[test]
    fn own_via_is_recognised_and_others_are_not() {
        let mut h = HeaderMap::new();
        h.append("via", HeaderValue::from_static("1.1 other, HTTP/1.1 crawlcache-0000zzzz"));
        assert!(!via_names_us(&h));
        add_via(&mut h);
        assert!(via_names_us(&h));
        let mut h = HeaderMap::new();
        h.append(
            "via",
            HeaderValue::from_str(&format!("1.0 squid, 1.1 {} (comment)", via_pseudonym()))
                .unwrap(),
        );
        assert!(via_names_us(&h));
    }

    #[test]
    fn via_names_the_protocol_received_rfc9110_7_6_3() {
        for (version, protocol) in
            [(Version::HTTP_2, "2"), (Version::HTTP_11, "1.1"), (Version::HTTP_10, "1.0")]
        {
            let mut h = HeaderMap::new();
            client_response_fields(&mut h, version);
            let via = h.get("via").unwrap().to_str().unwrap();
            assert_eq!(via, format!("{protocol} {}", via_pseudonym()));
            assert!(via_names_us(&h), "{via}");
        }
    }

    #[test]
    fn content_length_beside_transfer_encoding_is_dropped_rfc9112_6_3() {
        let mut h = HeaderMap::new();
        h.insert("content-length", HeaderValue::from_static("5"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        client_response_fields(&mut h, Version::HTTP_11);
        assert!(!h.contains_key("content-length") && !h.contains_key("transfer-encoding"));
        let mut h = HeaderMap::new();
        h.insert("content-length", HeaderValue::from_static("5"));
        client_response_fields(&mut h, Version::HTTP_11);
        assert_eq!(h.get("content-length").unwrap(), "5");
    }

    #[test]
    fn a_list_of_one_length_is_sent_as_that_length_rfc9110_8_6() {
        let mut h = HeaderMap::new();
        h.append("content-length", HeaderValue::from_static("5, 5"));
        h.append("content-length", HeaderValue::from_static("005"));
        client_response_fields(&mut h, Version::HTTP_11);
        assert_eq!(h.get_all("content-length").iter().collect::<Vec<_>>(), ["5"]);
        for bad in ["5, 6", "+5", "", "5 5", "99999999999999999999999"] {
            let mut h = HeaderMap::new();
            h.append("content-length", HeaderValue::from_static(bad));
            client_response_fields(&mut h, Version::HTTP_11);
            assert!(!h.contains_key("content-length"), "{bad:?}");
        }
    }
}
