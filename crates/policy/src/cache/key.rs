//! Cache keys (RFC 9111 section 4 and 4.1).
//!
//! The primary key is the target URI with scheme and host lower-cased, the
//! default port elided, the fragment removed, path and query kept byte for
//! byte. (HEAD is answered from a stored GET, so the method is not part of
//! the key: only GET responses are stored.) The secondary key is built from
//! the request fields nominated by the stored response's `Vary`.

/// The primary cache key for an absolute URI such as
/// `HTTP://Example.COM:80/a?b#c` → `http://example.com/a?b`. Returns `None`
/// when the URI has no scheme or host, or the scheme is not http or https.
/// User information in the authority is dropped; an empty path becomes `/`.
pub fn primary_key(uri: &http::Uri) -> Option<String> {
    // Built without intermediate strings: this runs for every request.
    let scheme = uri.scheme_str()?;
    let (scheme, default_port) = if scheme.eq_ignore_ascii_case("http") {
        ("http", 80)
    } else if scheme.eq_ignore_ascii_case("https") {
        ("https", 443)
    } else {
        return None;
    };
    let host = uri.host()?;
    if host.is_empty() {
        return None;
    }
    let mut key = String::with_capacity(
        scheme.len() + host.len() + uri.path().len() + uri.query().map_or(0, str::len) + 16,
    );
    key.push_str(scheme);
    key.push_str("://");
    key.extend(host.chars().map(|c| c.to_ascii_lowercase()));
    if let Some(port) = uri.port_u16() {
        if port != default_port {
            // Digit by digit: `write!` costs more than the rest of the key.
            key.push(':');
            let mut buf = [0u8; 5];
            let mut n = port;
            let mut i = buf.len();
            loop {
                i -= 1;
                buf[i] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            key.extend(buf[i..].iter().map(|&b| char::from(b)));
        }
    }
    let path = uri.path();
    if path.is_empty() || !path.starts_with('/') {
        key.push('/');
    }
    key.push_str(path.split('#').next().unwrap_or(""));
    if let Some(q) = uri.query() {
        key.push('?');
        key.push_str(q.split('#').next().unwrap_or(""));
    }
    Some(key)
}

/// The field names nominated by the `Vary` lines of `response_headers`
/// (lower-case, in order, duplicates removed); `None` for `Vary: *`.
pub fn vary_names(response_headers: &http::HeaderMap) -> Option<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for line in response_headers.get_all(http::header::VARY) {
        for name in line.as_bytes().split(|&b| b == b',') {
            let name = name.trim_ascii();
            if name.is_empty() {
                continue;
            }
            if name == b"*" {
                return None;
            }
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    Some(names)
}

/// Fields whose values are case-insensitive throughout: language ranges
/// (RFC 9110 section 12.5.4, RFC 4647 section 2) and content codings
/// (RFC 9110 section 8.4.1), so their case is normalised (RFC 9111 section 4.1).
const CASE_INSENSITIVE_FIELDS: &[&str] = &["accept-language", "accept-encoding"];

/// The request's value for one nominated field, normalised as RFC 9111
/// section 4.1 allows: its lines combined as one list, split on commas
/// outside quoted strings, each member trimmed with whitespace runs folded
/// to one space (outside quoted strings), empty members dropped (RFC 9110
/// section 5.6.1), members joined with `,`; lower-cased for
/// [`CASE_INSENSITIVE_FIELDS`]. `None` when absent.
fn normalized_value(request_headers: &http::HeaderMap, name: &str) -> Option<Vec<u8>> {
    let mut lines = request_headers.get_all(name).iter().peekable();
    lines.peek()?;
    let lower = CASE_INSENSITIVE_FIELDS.contains(&name);
    let mut members: Vec<Vec<u8>> = Vec::new();
    for line in lines {
        let mut member = Vec::new();
        let (mut in_quote, mut escaped, mut in_ws) = (false, false, false);
        for &b in line.as_bytes() {
            if in_quote {
                member.push(b);
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_quote = false;
                }
                continue;
            }
            match b {
                b',' => {
                    members.push(std::mem::take(&mut member));
                    in_ws = false;
                }
                b' ' | b'\t' => in_ws = true,
                _ => {
                    if in_ws && !member.is_empty() {
                        member.push(b' ');
                    }
                    in_ws = false;
                    if b == b'"' {
                        in_quote = true;
                    }
                    member.push(if lower { b.to_ascii_lowercase() } else { b });
                }
            }
        }
        members.push(member);
    }
    members.retain(|m| !m.is_empty());
    Some(members.join(&b","[..]))
}

/// The secondary key for a response whose `Vary` field lines are in
/// `response_headers`, given the request's `request_headers`.
///
/// For each nominated field (names lower-cased, in the order the Vary lines
/// list them, duplicates removed) the request's value is normalised as
/// `normalized_value` describes (lines combined, whitespace around list
/// members removed); an absent field differs from an empty one. Returns `Some(vec![])` when there is no `Vary`,
/// and `None` for `Vary: *` (a response that never matches a later request).
///
/// Encoding (unambiguous): for each nominated field, the name's length as
/// 4 bytes big-endian, the name, then `0xFF` when the request lacks the
/// field, or `0x01`, the value's length as 4 bytes big-endian, the value.
pub fn secondary_key(
    response_headers: &http::HeaderMap,
    request_headers: &http::HeaderMap,
) -> Option<Vec<u8>> {
    let names = vary_names(response_headers)?;
    Some(secondary_key_of(&names, request_headers))
}

/// [`secondary_key`] for the field `names` (lower-case, in order, no
/// duplicates) rather than those a `Vary` nominates: the same encoding.
pub fn secondary_key_of(names: &[String], request_headers: &http::HeaderMap) -> Vec<u8> {
    let mut key = Vec::new();
    for name in names {
        key.extend_from_slice(&(name.len() as u32).to_be_bytes());
        key.extend_from_slice(name.as_bytes());
        match normalized_value(request_headers, name) {
            None => key.push(0xFF),
            Some(v) => {
                key.push(0x01);
                key.extend_from_slice(&(v.len() as u32).to_be_bytes());
                key.extend_from_slice(&v);
            }
        }
    }
    key
}

/// The request field lines nominated by `Vary` (kept with a stored response
/// for `cache show`, and for the WARC request record an export writes):
/// names lower-case, lines as received; absent fields are omitted. For
/// `Vary: *`, which nominates the whole request (RFC 9111 section 4.1),
/// every end-to-end field line ([`end_to_end_fields`]): what a record of
/// such a response is replayed for (`crate::store_key::Selection`).
pub fn nominated_fields(
    response_headers: &http::HeaderMap,
    request_headers: &http::HeaderMap,
) -> Vec<(String, Vec<u8>)> {
    let Some(names) = vary_names(response_headers) else {
        return end_to_end_fields(request_headers);
    };
    let mut out = Vec::new();
    for name in names {
        for v in request_headers.get_all(name.as_str()) {
            out.push((name.clone(), v.as_bytes().to_vec()));
        }
    }
    out
}

/// Hop-by-hop fields (RFC 9110 section 7.6.1) and the proxy's own: never
/// part of what identifies a request end to end.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The request's end-to-end field lines (names lower-case, lines as
/// received, in order): every field but the hop-by-hop ones and those the
/// request's `Connection` names (RFC 9110 section 7.6.1).
pub fn end_to_end_fields(request_headers: &http::HeaderMap) -> Vec<(String, Vec<u8>)> {
    let connection: Vec<String> = request_headers
        .get_all(http::header::CONNECTION)
        .iter()
        .flat_map(|v| {
            v.as_bytes()
                .split(|&b| b == b',')
                .map(|n| String::from_utf8_lossy(n.trim_ascii()).to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .collect();
    request_headers
        .iter()
        .filter(|(n, _)| {
            !HOP_BY_HOP.contains(&n.as_str()) && !connection.iter().any(|c| c == n.as_str())
        })
        .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderName, HeaderValue};

    fn key(uri: &str) -> Option<String> {
        primary_key(&uri.parse::<http::Uri>().ok()?)
    }

    fn hm(fields: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (n, v) in fields {
            map.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    #[test]
    fn primary_key_normalises_scheme_host_port_and_fragment() {
        assert_eq!(key("HTTP://Example.COM:80/a?b").as_deref(), Some("http://example.com/a?b"));
        assert_eq!(
            key("https://Example.com:443/A/%7e?Q=1").as_deref(),
            Some("https://example.com/A/%7e?Q=1")
        );
        assert_eq!(key("http://example.com:443/").as_deref(), Some("http://example.com:443/"));
        assert_eq!(key("https://example.com:80/").as_deref(), Some("https://example.com:80/"));
        assert_eq!(key("http://example.com").as_deref(), Some("http://example.com/"));
        assert_eq!(key("http://example.com?x").as_deref(), Some("http://example.com/?x"));
        assert_eq!(key("http://user:pw@example.com/p").as_deref(), Some("http://example.com/p"));
        assert_eq!(key("http://[::1]:8080/p").as_deref(), Some("http://[::1]:8080/p"));
        for port in ["1", "9", "10", "99", "100", "8080", "65535"] {
            assert_eq!(
                key(&format!("http://e.org:{port}/p")),
                Some(format!("http://e.org:{port}/p"))
            );
        }
        assert_eq!(
            key("http://e.org:0080/p").as_deref(),
            Some("http://e.org/p"),
            "leading zeros: the default port"
        );
        assert_eq!(key("ftp://example.com/"), None);
        assert_eq!(key("/relative"), None);
    }

    #[test]
    fn primary_key_drops_the_fragment() {
        // A fragment never reaches the key, whether the URI parser keeps it or not.
        let uri: http::Uri =
            "http://example.com/a?b#c".parse().expect("a URI with a fragment parses");
        assert_eq!(primary_key(&uri).as_deref(), Some("http://example.com/a?b"));
        let uri: http::Uri =
            "http://example.com/a#c".parse().expect("a URI with a fragment parses");
        assert_eq!(primary_key(&uri).as_deref(), Some("http://example.com/a"));
    }

    #[test]
    fn secondary_key_is_empty_without_vary_and_none_for_star() {
        assert_eq!(secondary_key(&HeaderMap::new(), &hm(&[("accept", "x")])), Some(vec![]));
        assert_eq!(secondary_key(&hm(&[("vary", "")]), &hm(&[("accept", "x")])), Some(vec![]));
        assert_eq!(secondary_key(&hm(&[("vary", "Accept, *")]), &HeaderMap::new()), None);
        assert_eq!(
            secondary_key(&hm(&[("vary", "accept"), ("vary", "*")]), &HeaderMap::new()),
            None
        );
    }

    #[test]
    fn secondary_key_distinguishes_values_absence_and_empty() {
        let vary = hm(&[("vary", "Accept")]);
        let json = secondary_key(&vary, &hm(&[("accept", "application/json")]));
        let text = secondary_key(&vary, &hm(&[("accept", "text/plain")]));
        let absent = secondary_key(&vary, &HeaderMap::new());
        let empty = secondary_key(&vary, &hm(&[("accept", "")]));
        assert_ne!(json, text);
        assert_ne!(absent, empty);
        assert_ne!(json, absent);
        // Whitespace folded, lines combined with ", ".
        assert_eq!(
            secondary_key(&vary, &hm(&[("accept", "  text/plain,   text/html ")])),
            secondary_key(&vary, &hm(&[("accept", "text/plain, text/html")]))
        );
        assert_eq!(
            secondary_key(&vary, &hm(&[("accept", "a"), ("accept", "b")])),
            secondary_key(&vary, &hm(&[("accept", "a, b")]))
        );
    }

    #[test]
    fn section_4_1_whitespace_around_list_members_and_empty_members_do_not_matter() {
        let vary = hm(&[("vary", "Foo")]);
        let key = |v: &'static str| secondary_key(&vary, &hm(&[("foo", v)]));
        assert_eq!(key("1,2"), key(" 1, 2 "));
        assert_eq!(key("1,2"), key("1 ,\t2,,"));
        assert_ne!(key("1,2"), key("12"));
        assert_ne!(key("1,2"), key("2,1"), "order is kept");
        assert_ne!(key("a b"), key("ab"), "whitespace inside a member is kept (folded)");
        // Inside a quoted string nothing is normalised.
        assert_ne!(key("a;p=\"x, y\""), key("a;p=\"x,y\""));
        assert_eq!(key("a;p=\"x, y\" , b"), key("a;p=\"x, y\",b"));
    }

    #[test]
    fn section_4_1_case_is_normalised_only_for_case_insensitive_fields() {
        let lang = hm(&[("vary", "Accept-Language")]);
        assert_eq!(
            secondary_key(&lang, &hm(&[("accept-language", "eN, De")])),
            secondary_key(&lang, &hm(&[("accept-language", "en,de")]))
        );
        assert_ne!(
            secondary_key(&lang, &hm(&[("accept-language", "de, en")])),
            secondary_key(&lang, &hm(&[("accept-language", "en, de")])),
            "preference order is kept"
        );
        let foo = hm(&[("vary", "Foo")]);
        assert_ne!(
            secondary_key(&foo, &hm(&[("foo", "A")])),
            secondary_key(&foo, &hm(&[("foo", "a")]))
        );
    }

    #[test]
    fn secondary_key_is_unambiguous_across_names() {
        // "ab" + "c" must differ from "a" + "bc".
        let vary = hm(&[("vary", "Foo, Bar")]);
        let a = secondary_key(&vary, &hm(&[("foo", "ab"), ("bar", "c")]));
        let b = secondary_key(&vary, &hm(&[("foo", "a"), ("bar", "bc")]));
        assert_ne!(a, b);
        // Names case-insensitive and deduplicated; three-way mismatch detected.
        let v3 = hm(&[("vary", "Foo, BAR"), ("vary", "foo, Baz")]);
        let req = hm(&[("foo", "1"), ("bar", "abc"), ("baz", "789")]);
        assert_eq!(
            secondary_key(&v3, &req),
            secondary_key(&hm(&[("vary", "foo, bar, baz")]), &req)
        );
        assert_ne!(
            secondary_key(&v3, &req),
            secondary_key(&v3, &hm(&[("foo", "1"), ("bar", "abc4"), ("baz", "789")]))
        );
    }

    #[test]
    fn nominated_fields_lists_present_lines() {
        let vary = hm(&[("vary", "Accept, X-Absent")]);
        let req = hm(&[("accept", "a"), ("accept", "b"), ("other", "c")]);
        assert_eq!(
            nominated_fields(&vary, &req),
            vec![("accept".to_string(), b"a".to_vec()), ("accept".to_string(), b"b".to_vec())]
        );
        assert_eq!(
            nominated_fields(&hm(&[("vary", "*")]), &req).len(),
            3,
            "Vary: * nominates every end-to-end field"
        );
        let hop =
            hm(&[("connection", "x-hop"), ("x-hop", "1"), ("keep-alive", "5"), ("accept", "a")]);
        assert_eq!(end_to_end_fields(&hop), vec![("accept".to_string(), b"a".to_vec())]);
    }
}
