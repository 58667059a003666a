//! The one URI-reference resolver (RFC 3986 section 5.2), used for
//! `Location` / `Content-Location` (cache invalidation, RFC 9111 section
//! 4.4) and for robots.txt redirects (RFC 9309 section 2.3.1.2).

/// Resolves `reference` against the absolute URI `base` (RFC 3986 section
/// 5.2.2, with dot segments removed, section 5.2.4). The fragment is
/// dropped; an empty reference is `base` itself. `None` when `base` is not
/// absolute (no scheme or authority).
pub fn resolve(base: &str, reference: &str) -> Option<String> {
    let base: http::Uri = base.parse().ok()?;
    let reference = reference.split('#').next().unwrap_or("");
    let scheme = base.scheme_str()?;
    let authority = base.authority()?.as_str();
    let has_scheme = reference.find(':').is_some_and(|i| {
        i > 0
            && reference.as_bytes()[0].is_ascii_alphabetic()
            && reference[..i].bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    });
    if has_scheme {
        return Some(reference.to_string());
    }
    if let Some(rest) = reference.strip_prefix("//") {
        return Some(format!("{scheme}://{rest}"));
    }
    let base_path = if base.path().is_empty() { "/" } else { base.path() };
    let (path, query) = match reference.find('?') {
        Some(i) => (&reference[..i], Some(&reference[i + 1..])),
        None => (reference, None),
    };
    let (path, query) = if path.is_empty() {
        (base_path.to_string(), query.or(if reference.is_empty() { base.query() } else { None }))
    } else if path.starts_with('/') {
        (remove_dot_segments(path), query)
    } else {
        let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
        (remove_dot_segments(&format!("{dir}{path}")), query)
    };
    let mut out = format!("{scheme}://{authority}{path}");
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Some(out)
}

/// RFC 3986 section 5.2.4.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    if joined.starts_with('/') {
        joined
    } else {
        format!("/{joined}")
    }
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn rfc3986_section_5_4_normal_examples() {
        let base = "http://a/b/c/d;p?q";
        for (r, want) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g"),
            ("?y", "http://a/b/c/d;p?y"),
            ("g?y", "http://a/b/c/g?y"),
            ("g#s", "http://a/b/c/g"),
            ("..", "http://a/b/"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../g", "http://a/g"),
            ("", "http://a/b/c/d;p?q"),
        ] {
            assert_eq!(resolve(base, r).as_deref(), Some(want), "{r}");
        }
        assert_eq!(resolve("/relative", "g"), None);
    }
}
