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
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let host = uri.host()?;
    if host.is_empty() {
        return None;
    }
    let mut key = String::with_capacity(scheme.len() + host.len() + uri.path().len() + 16);
    key.push_str(&scheme);
    key.push_str("://");
    key.push_str(&host.to_ascii_lowercase());
    if let Some(port) = uri.port_u16() {
        if port != default_port {
            key.push(':');
            key.push_str(&port.to_string());
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

/// The request's value for one nominated field: its lines combined with
/// `, `, whitespace runs folded to one space, trimmed; `None` when absent.
fn normalized_value(request_headers: &http::HeaderMap, name: &str) -> Option<Vec<u8>> {
    let mut lines = request_headers.get_all(name).iter().peekable();
    lines.peek()?;
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        let mut in_ws = false;
        for &b in line.as_bytes().trim_ascii() {
            if b == b' ' || b == b'\t' {
                in_ws = true;
                continue;
            }
            if in_ws {
                out.push(b' ');
                in_ws = false;
            }
            out.push(b);
        }
    }
    Some(out)
}

/// The secondary key for a response whose `Vary` field lines are in
/// `response_headers`, given the request's `request_headers`.
///
/// For each nominated field (names lower-cased, in the order the Vary lines
/// list them, duplicates removed) the request's field lines are combined with
/// `, `, and whitespace runs folded to one space and trimmed; an absent field
/// differs from an empty one. Returns `Some(vec![])` when there is no `Vary`,
/// and `None` for `Vary: *` (a response that never matches a later request).
///
/// Encoding (unambiguous): for each nominated field, the name's length as
/// 4 bytes big-endian, the name, then `0xFF` when the request lacks the
/// field, or `0x01`, the value's length as 4 bytes big-endian, the value.
pub fn secondary_key(response_headers: &http::HeaderMap, request_headers: &http::HeaderMap) -> Option<Vec<u8>> {
    let names = vary_names(response_headers)?;
    let mut key = Vec::new();
    for name in &names {
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
    Some(key)
}

/// The request field lines nominated by `Vary` (for display in `cache show`):
/// names lower-case, lines as received; absent fields are omitted. Empty for
/// `Vary: *`.
pub fn nominated_fields(response_headers: &http::HeaderMap, request_headers: &http::HeaderMap) -> Vec<(String, Vec<u8>)> {
    let names = vary_names(response_headers).unwrap_or_default();
    let mut out = Vec::new();
    for name in names {
        for v in request_headers.get_all(name.as_str()) {
            out.push((name.clone(), v.as_bytes().to_vec()));
        }
    }
    out
}
