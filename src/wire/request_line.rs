//! What the HTTP library's URI type forgets about a request line: whether
//! an absolute-form target had an empty path. `OPTIONS http://host:port`
//! asks about the server as a whole, `OPTIONS http://host:port/` about the
//! resource `/` (RFC 9112 section 3.2.4), but the URI type reads an empty
//! path as `/` when it parses the line, so both reach the proxy alike.
//!
//! [`RequestLines`] watches the bytes a client connection receives, on
//! their way into the HTTP library, and notes each line that reads
//! `OPTIONS scheme://authority HTTP/...` or `OPTIONS scheme://authority/
//! HTTP/...`. When the library hands over such a request, its entry is
//! taken ([`RequestLines::take_whole_server`]), oldest first: requests on
//! one connection are handled in the order they arrived. A line inside a
//! request body that looks like one is noted too; it can only stand before
//! a later request of the same client on the same connection, and is
//! dropped when a newer entry for the same authority is taken.
//!
//! Cheap on every other byte: a line is looked at only when it starts with
//! `O`, at most [`MAX_LINE`] bytes of it, and at most [`MAX_ENTRIES`]
//! entries are kept per connection.

use std::collections::VecDeque;

/// The longest request line looked at, in bytes (an absolute URI without
/// a path is an authority, at most a few hundred bytes).
pub const MAX_LINE: usize = 1024;

/// Entries kept per connection; the oldest goes first.
pub const MAX_ENTRIES: usize = 32;

/// The OPTIONS request lines with an empty path or `/` seen on one client
/// connection, in order.
#[derive(Debug)]
pub struct RequestLines {
    /// The next byte starts a line (true at the start of the connection).
    at_line_start: bool,
    /// The line being read, when it started with `O` and is short enough.
    line: Option<Vec<u8>>,
    /// `scheme://authority` as received, and whether its path was empty.
    seen: VecDeque<(String, bool)>,
}

impl Default for RequestLines {
    fn default() -> RequestLines {
        RequestLines::new()
    }
}

impl RequestLines {
    /// A record for a new connection.
    pub fn new() -> RequestLines {
        RequestLines { at_line_start: true, line: None, seen: VecDeque::new() }
    }

    /// Notes the OPTIONS lines in `bytes`, the next bytes the connection
    /// received.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if let Some(line) = &mut self.line {
                let end = bytes.iter().position(|&b| b == b'\n');
                let part = &bytes[..end.unwrap_or(bytes.len())];
                if line.len() + part.len() > MAX_LINE {
                    self.line = None;
                    self.at_line_start = false;
                } else {
                    line.extend_from_slice(part);
                }
                let Some(end) = end else { return };
                if let Some(line) = self.line.take() {
                    self.note(&line);
                }
                self.at_line_start = true;
                bytes = &bytes[end + 1..];
                continue;
            }
            if self.at_line_start && bytes[0] == b'O' {
                self.line = Some(Vec::new());
                continue;
            }
            match bytes.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    self.at_line_start = true;
                    bytes = &bytes[end + 1..];
                }
                None => {
                    self.at_line_start = false;
                    return;
                }
            }
        }
    }

    /// Keeps `line` (without its LF) when it is `OPTIONS scheme://authority`
    /// with an empty path or `/`, and no query.
    fn note(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(line) = std::str::from_utf8(line) else { return };
        let mut parts = line.split(' ');
        let (Some("OPTIONS"), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        if !version.starts_with("HTTP/") {
            return;
        }
        let Some((scheme, rest)) = target.split_once("://") else { return };
        let (authority, empty) = match rest.strip_suffix('/') {
            Some(authority) => (authority, false),
            None => (rest, true),
        };
        if scheme.is_empty() || authority.is_empty() || authority.contains(['/', '?', '#']) {
            return;
        }
        if self.seen.len() == MAX_ENTRIES {
            self.seen.pop_front();
        }
        self.seen.push_back((format!("{scheme}://{authority}"), empty));
    }

    /// For an OPTIONS request the library read as `scheme://authority/`
    /// (`target`): whether its request line had an empty path, asking
    /// about the whole server. Takes the oldest entry for `target` (letter
    /// case aside) and drops those before it; false when there is none.
    pub fn take_whole_server(&mut self, target: &str) -> bool {
        let Some(at) = self.seen.iter().position(|(t, _)| t.eq_ignore_ascii_case(target)) else {
            return false;
        };
        let empty = self.seen[at].1;
        self.seen.drain(..=at);
        empty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `stream` fed in pieces of `step` bytes.
    fn fed(stream: &[u8], step: usize) -> RequestLines {
        let mut r = RequestLines::new();
        for piece in stream.chunks(step) {
            r.feed(piece);
        }
        r
    }

    /// RFC 9112 section 3.2.4: the empty path and `/` are told apart, in
    /// the order the requests came, however the bytes are split.
    #[test]
    fn an_empty_path_is_told_from_a_slash_rfc9112_3_2_4() {
        let stream = b"OPTIONS http://a.example:8080 HTTP/1.1\r\nHost: a.example:8080\r\n\r\n\
                       GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example:8080\r\n\r\n\
                       OPTIONS http://a.example:8080/ HTTP/1.1\r\nHost: a.example:8080\r\n\r\n\
                       OPTIONS https://B.example HTTP/1.1\nHost: b.example\n\n";
        for step in [1, 2, 7, stream.len()] {
            let mut r = fed(stream, step);
            assert!(r.take_whole_server("http://a.example:8080"), "step {step}");
            assert!(!r.take_whole_server("http://a.example:8080"), "step {step}");
            assert!(r.take_whole_server("https://b.example"), "step {step}: letter case aside");
            assert!(!r.take_whole_server("http://a.example:8080"), "step {step}: nothing left");
        }
    }

    /// Only whole request lines of OPTIONS with an absolute target and no
    /// path beyond `/` are noted.
    #[test]
    fn other_lines_are_not_noted() {
        let stream = b"OPTIONS http://a.example/x HTTP/1.1\r\n\
                       OPTIONS http://a.example?q HTTP/1.1\r\n\
                       OPTIONS * HTTP/1.1\r\n\
                       OPTIONS /  HTTP/1.1\r\n\
                       GET http://a.example HTTP/1.1\r\n\
                       X-Note: OPTIONS http://a.example HTTP/1.1\r\n\
                       options http://a.example HTTP/1.1\r\n\
                       OPTIONS http://a.example HTTP/1.1 extra\r\n";
        let mut r = fed(stream, 3);
        assert!(!r.take_whole_server("http://a.example"));
        assert!(r.seen.is_empty(), "{:?}", r.seen);
    }

    /// Long lines are skipped, and the record stays bounded.
    #[test]
    fn bounded_in_line_length_and_entries() {
        let mut long = b"OPTIONS http://".to_vec();
        long.extend(std::iter::repeat_n(b'a', 2 * MAX_LINE));
        long.extend_from_slice(b" HTTP/1.1\r\n");
        let mut r = fed(&long, 100);
        assert!(r.seen.is_empty());
        for i in 0..2 * MAX_ENTRIES {
            r.feed(format!("OPTIONS http://h{i} HTTP/1.1\r\n").as_bytes());
        }
        assert_eq!(r.seen.len(), MAX_ENTRIES);
        assert!(!r.take_whole_server("http://h0"), "the oldest went first");
        assert!(r.take_whole_server(&format!("http://h{}", 2 * MAX_ENTRIES - 1)));
    }
}
