//! Fuzzes the request-target, `Host` and header-rewriting code crawlcache
//! owns: the primary cache key, the fields of the request sent upstream
//! (what `forward_request` sends: `upstream_fields`, with `host_field`),
//! and the fields of the response sent to a client (`client_response_fields`,
//! `remove_hop_by_hop`, `via_names_us`).
//!
//! Input: the first line is a request target (as on a request line); the
//! following lines are request fields `name: value` until a line `--`,
//! then response fields. The first byte's low bit says whether the body
//! sent upstream has an unknown length (chunked).
//!
//! Invariants: nothing panics; for an absolute target whose cache key is a
//! URI (else crawlcache refuses it), the `Host` sent upstream is exactly the key's
//! authority (host, and port unless the scheme's default; never userinfo);
//! no `Content-Length`, no hop-by-hop field and no field the client's
//! `Connection` named goes upstream, `Transfer-Encoding: chunked` exactly
//! when the body's length is unknown, and our `Via` last; after
//! `client_response_fields` there is never `Content-Length` beside
//! `Transfer-Encoding`, and at most one `Content-Length`, all digits.
//!
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run request_target fuzz/corpus/request_target
//! fuzz/seeds/request_target` from the crate root.
#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use libfuzzer_sys::fuzz_target;

// The policy crate (synchronous, no I/O) holds the code fuzzed here: the
// same `cache::key`, `hop_by_hop` and `upstream_fields` crawlcache uses.
use crawlcache_policy::cache::key;
use crawlcache_policy::hop_by_hop::{
    client_response_fields, connection_named, remove_hop_by_hop, via_names_us, HOP_BY_HOP,
};
use crawlcache_policy::upstream_fields::{host_field, upstream_fields};

fn header_map(lines: &[&[u8]]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        h.append(name, value);
    }
    h
}

/// The authority of a primary key `scheme://authority/path?query`.
fn key_authority(key: &str) -> &str {
    let rest = &key[key.find("://").map(|i| i + 3).unwrap_or(0)..];
    &rest[..rest.find(['/', '?']).unwrap_or(rest.len())]
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, data)) = data.split_first() else { return };
    let chunked = flags & 1 == 1;
    let mut lines = data.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let target = lines.next().unwrap_or_default();
    let rest: Vec<&[u8]> = lines.collect();
    let split = rest.iter().position(|l| *l == b"--").unwrap_or(rest.len());
    let request = header_map(&rest[..split]);
    let mut response = header_map(rest.get(split + 1..).unwrap_or_default());

    let _ = via_names_us(&request);

    // The request sent upstream.
    if let Ok(uri) = Uri::try_from(target) {
        if let Some(key) = key::primary_key(&uri) {
            // A key that is not a URI makes the target unusable (400, in
            // crawlcache's proxy::exchange::classify): nothing is sent.
            let Ok(upstream) = key.parse::<Uri>() else { return };
            let authority = key_authority(&key);
            assert!(!authority.contains('@'), "userinfo in the key {key:?}");
            let fields = upstream_fields(&upstream, &request, chunked, http::Version::HTTP_11);
            let hosts: Vec<&HeaderValue> = fields.get_all(http::header::HOST).iter().collect();
            assert_eq!(hosts.len(), 1, "{key}: Host {hosts:?}");
            assert_eq!(
                hosts[0].as_bytes(),
                authority.as_bytes(),
                "{key}: Host is not the key's authority"
            );
            let direct = host_field(&uri).expect("an absolute URI with a host has a Host");
            assert!(
                direct.as_bytes().eq_ignore_ascii_case(hosts[0].as_bytes()),
                "{uri}: Host {direct:?} vs {:?}",
                hosts[0]
            );
            assert!(
                !fields.contains_key(http::header::CONTENT_LENGTH),
                "{key}: Content-Length sent upstream"
            );
            for name in HOP_BY_HOP.iter().filter(|n| **n != "transfer-encoding") {
                assert!(!fields.contains_key(*name), "{key}: hop-by-hop {name} sent upstream");
            }
            for name in connection_named(&request) {
                if name != "host" && name != "via" && name != "transfer-encoding" {
                    assert!(
                        !fields.contains_key(name.as_str()),
                        "{key}: {name} (named in Connection) sent upstream"
                    );
                }
            }
            let te: Vec<&HeaderValue> =
                fields.get_all(http::header::TRANSFER_ENCODING).iter().collect();
            assert_eq!(te.len(), usize::from(chunked), "{key}: Transfer-Encoding {te:?}");
            assert!(te.iter().all(|v| *v == "chunked"));
            assert!(via_names_us(&fields), "{key}: our Via is missing");
        }
    }

    // The response sent to a client.
    let named = connection_named(&response);
    let mut stripped = response.clone();
    remove_hop_by_hop(&mut stripped);
    for name in HOP_BY_HOP.iter().copied().chain(named.iter().map(String::as_str)) {
        assert!(!stripped.contains_key(name), "{name} survived remove_hop_by_hop");
    }
    client_response_fields(&mut response, http::Version::HTTP_11);
    let cl: Vec<&HeaderValue> = response.get_all(http::header::CONTENT_LENGTH).iter().collect();
    assert!(
        cl.is_empty() || !response.contains_key(http::header::TRANSFER_ENCODING),
        "Content-Length beside Transfer-Encoding"
    );
    assert!(cl.len() <= 1, "several Content-Length lines {cl:?}");
    assert!(
        cl.iter().all(|v| !v.is_empty() && v.as_bytes().iter().all(u8::is_ascii_digit)),
        "Content-Length {cl:?}"
    );
    assert!(via_names_us(&response));
});
