//! The `application/http` blocks of `request` and `response` records: an
//! HTTP/1.1 message as sent on the wire (RFC 9112), head and body.
//!
//! Writing ([`response_head`], [`request_block`]): the head crawlcache
//! stored, with framing made self-consistent for the body written after it
//! (`Content-Length` = the stored body's length, no `Transfer-Encoding`).
//! Reading ([`read_head`], [`parse_response_head`], [`parse_request_head`],
//! [`ChunkedDecoder`]): what a crawler recorded, chunked bodies as received.

use std::io::{self, BufRead, Read};

/// The longest HTTP head read from a block, in bytes (the proxy's own limit
/// for origin heads, `upstream.max_head_bytes`, by default).
pub const MAX_HEAD_BYTES: usize = 256 * 1024;

/// The longest line of chunked framing (a chunk size with extensions, a
/// trailer field), in bytes.
const MAX_CHUNK_LINE: usize = 8 * 1024;

/// A field line: lower-case name, raw value bytes.
pub type Field = (String, Vec<u8>);

/// The response head written for a stored response: the status line, the
/// stored field lines, and framing for a body of `body_len` bytes: no
/// `Transfer-Encoding`, and `Content-Length: body_len`, except for 1xx, 204
/// and 304 (no body, no length) and for an answer to HEAD (`head`: the
/// stored fields as they are, RFC 9110 section 9.3.2).
pub fn response_head(status: u16, fields: &[Field], body_len: u64, head: bool) -> Vec<u8> {
    let reason =
        http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
    let mut out = format!("HTTP/1.1 {status} {reason}\r\n").into_bytes();
    let no_body = (100..200).contains(&status) || status == 204 || status == 304;
    for (name, value) in fields {
        if name.eq_ignore_ascii_case("transfer-encoding")
            || (!head && name.eq_ignore_ascii_case("content-length"))
        {
            continue;
        }
        push_field(&mut out, name, value);
    }
    if !head && !no_body {
        push_field(&mut out, "content-length", body_len.to_string().as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// The request block written for an exchange: `METHOD target HTTP/1.1`
/// (origin-form), `Host`, and the request field lines `Vary` nominated
/// (`fields`). No body (crawlcache keeps only a request body's hash).
/// `None` when `url` is not an absolute http(s) URL.
pub fn request_block(method: &str, url: &str, fields: &[Field]) -> Option<Vec<u8>> {
    let uri: http::Uri = url.parse().ok()?;
    let authority = uri.authority()?.as_str();
    let authority = authority.rsplit_once('@').map(|(_, a)| a).unwrap_or(authority);
    let target = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut out = format!("{method} {target} HTTP/1.1\r\n").into_bytes();
    push_field(&mut out, "host", authority.as_bytes());
    for (name, value) in fields {
        if !name.eq_ignore_ascii_case("host") {
            push_field(&mut out, name, value);
        }
    }
    out.extend_from_slice(b"\r\n");
    Some(out)
}

fn push_field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend(value.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
    out.extend_from_slice(b"\r\n");
}

/// Reads an HTTP head (through the empty line) from `r`.
/// Errors: `r` fails, ends first, or the head exceeds [`MAX_HEAD_BYTES`].
pub fn read_head<R: BufRead>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(1024);
    loop {
        let before = head.len();
        let n = r
            .by_ref()
            .take((MAX_HEAD_BYTES + 1 - head.len()) as u64)
            .read_until(b'\n', &mut head)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the block ends inside the HTTP head",
            ));
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the HTTP head exceeds {MAX_HEAD_BYTES} bytes"),
            ));
        }
        let line = &head[before..];
        if (line == b"\r\n" || line == b"\n") && before > 0 {
            return Ok(head);
        }
    }
}

fn parse_fields(raw: &[httparse::Header<'_>]) -> Vec<Field> {
    raw.iter().map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec())).collect()
}

/// Why [`parse_response_head`] or [`parse_request_head`] refused a head.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// The head ends before its blank line (`what`: `request` or
    /// `response`).
    #[error("incomplete HTTP {what} head")]
    Incomplete {
        /// `request` or `response`.
        what: &'static str,
    },
    /// Not an HTTP/1.x head of that kind; the parser's reason.
    #[error("bad HTTP {what} head: {reason}")]
    Malformed {
        /// `request` or `response`.
        what: &'static str,
        /// What `httparse` said.
        reason: httparse::Error,
    },
}

/// Parses a response head: the status code and the field lines (names
/// lower-cased, in order). Obsolete line folding and whitespace before a
/// colon are tolerated (RFC 9112 section 5). Errors: [`HeadError`], not an
/// HTTP/1.x response head.
pub fn parse_response_head(head: &[u8]) -> Result<(u16, Vec<Field>), HeadError> {
    let what = "response";
    let mut n = 128;
    loop {
        let mut headers = vec![httparse::EMPTY_HEADER; n];
        let mut resp = httparse::Response::new(&mut headers);
        let mut cfg = httparse::ParserConfig::default();
        cfg.allow_obsolete_multiline_headers_in_responses(true);
        cfg.allow_spaces_after_header_name_in_responses(true);
        match cfg.parse_response(&mut resp, head) {
            Ok(httparse::Status::Complete(_)) => {
                return Ok((resp.code.unwrap_or(0), parse_fields(resp.headers)))
            }
            Ok(httparse::Status::Partial) => return Err(HeadError::Incomplete { what }),
            Err(httparse::Error::TooManyHeaders) if n < 8192 => n *= 4,
            Err(reason) => return Err(HeadError::Malformed { what, reason }),
        }
    }
}

/// Parses a request head: method, request target, field lines (names
/// lower-cased). Errors: [`HeadError`], not an HTTP/1.x request head.
pub fn parse_request_head(head: &[u8]) -> Result<(String, String, Vec<Field>), HeadError> {
    let what = "request";
    let mut n = 128;
    loop {
        let mut headers = vec![httparse::EMPTY_HEADER; n];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(head) {
            Ok(httparse::Status::Complete(_)) => {
                return Ok((
                    req.method.unwrap_or("GET").to_string(),
                    req.path.unwrap_or("/").to_string(),
                    parse_fields(req.headers),
                ))
            }
            Ok(httparse::Status::Partial) => return Err(HeadError::Incomplete { what }),
            Err(httparse::Error::TooManyHeaders) if n < 8192 => n *= 4,
            Err(reason) => return Err(HeadError::Malformed { what, reason }),
        }
    }
}

/// True when the last transfer coding of `fields` is `chunked` (RFC 9112
/// section 6.3: the body is then framed by the chunked coding).
pub fn is_chunked(fields: &[Field]) -> bool {
    fields
        .iter()
        .filter(|(n, _)| n == "transfer-encoding")
        .flat_map(|(_, v)| v.split(|&b| b == b','))
        .map(|c| c.trim_ascii())
        .rfind(|c| !c.is_empty())
        .is_some_and(|c| c.eq_ignore_ascii_case(b"chunked"))
}

/// True when `fields` carry a `Transfer-Encoding`.
pub fn has_transfer_coding(fields: &[Field]) -> bool {
    fields.iter().any(|(n, _)| n == "transfer-encoding")
}

/// The `Content-Length` of `fields` when it is one valid length (a list of
/// one same value counts as that value); `None` otherwise.
pub fn content_length(fields: &[Field]) -> Option<u64> {
    let mut found: Option<u64> = None;
    for member in fields
        .iter()
        .filter(|(n, _)| n == "content-length")
        .flat_map(|(_, v)| v.split(|&b| b == b','))
    {
        let n: u64 = std::str::from_utf8(member.trim_ascii()).ok()?.parse().ok()?;
        match found {
            Some(f) if f != n => return None,
            _ => found = Some(n),
        }
    }
    found
}

/// Decodes the chunked transfer coding (RFC 9112 section 7.1) read from a
/// [`BufRead`]: yields the chunk data; chunk extensions and trailer fields
/// are dropped. A read error of kind `InvalidData` means the framing is
/// broken, `UnexpectedEof` that it ends before the last chunk.
pub struct ChunkedDecoder<R> {
    inner: R,
    /// Bytes left in the current chunk; `None` before a size line.
    left: Option<u64>,
    done: bool,
}

impl<R: BufRead> ChunkedDecoder<R> {
    /// A decoder of the chunked body read from `inner`.
    pub fn new(inner: R) -> ChunkedDecoder<R> {
        ChunkedDecoder { inner, left: None, done: false }
    }

    fn line(&mut self) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        let n = self.inner.by_ref().take(MAX_CHUNK_LINE as u64).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the chunked body ends before its last chunk",
            ));
        }
        if !line.ends_with(b"\n") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a chunked framing line is too long or cut short",
            ));
        }
        Ok(line)
    }
}

impl<R: BufRead> Read for ChunkedDecoder<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.done || out.is_empty() {
                return Ok(0);
            }
            match self.left {
                None => {
                    let line = self.line()?;
                    let size = line.split(|&b| b == b';').next().unwrap_or(&[]).trim_ascii();
                    let size = std::str::from_utf8(size)
                        .ok()
                        .filter(|s| !s.is_empty())
                        .and_then(|s| u64::from_str_radix(s, 16).ok())
                        .ok_or_else(|| {
                            io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("bad chunk size line {:?}", String::from_utf8_lossy(&line)),
                            )
                        })?;
                    if size == 0 {
                        // Trailer section, then the end.
                        loop {
                            let t = self.line()?;
                            if t == b"\r\n" || t == b"\n" {
                                break;
                            }
                        }
                        self.done = true;
                        return Ok(0);
                    }
                    self.left = Some(size);
                }
                Some(0) => {
                    let line = self.line()?;
                    if line != b"\r\n" && line != b"\n" {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "chunk data is not followed by CRLF",
                        ));
                    }
                    self.left = None;
                }
                Some(left) => {
                    let avail = self.inner.fill_buf()?;
                    if avail.is_empty() {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the chunked body ends inside a chunk",
                        ));
                    }
                    let n =
                        avail.len().min(out.len()).min(usize::try_from(left).unwrap_or(usize::MAX));
                    out[..n].copy_from_slice(&avail[..n]);
                    self.inner.consume(n);
                    self.left = Some(left - n as u64);
                    return Ok(n);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dechunk(raw: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        ChunkedDecoder::new(raw).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn chunked_bodies_decode_and_broken_framing_is_an_error() {
        assert_eq!(
            dechunk(b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n").unwrap(),
            b"hello world"
        );
        assert_eq!(dechunk(b"A\nabcdefghij\n0\n\n").unwrap(), b"abcdefghij");
        assert_eq!(dechunk(b"5\r\nhel").unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(dechunk(b"5\r\nhello\r\n").unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(
            dechunk(b"zz\r\nhello\r\n0\r\n\r\n").unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert_eq!(
            dechunk(b"2\r\nhello\r\n0\r\n\r\n").unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn response_heads_get_self_consistent_framing() {
        let fields: Vec<Field> = vec![
            ("content-type".into(), b"text/html".to_vec()),
            ("content-length".into(), b"999".to_vec()),
            ("transfer-encoding".into(), b"chunked".to_vec()),
        ];
        let head = String::from_utf8(response_head(200, &fields, 5, false)).unwrap();
        assert_eq!(head, "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 5\r\n\r\n");
        let head = String::from_utf8(response_head(304, &fields[..1], 0, false)).unwrap();
        assert_eq!(head, "HTTP/1.1 304 Not Modified\r\ncontent-type: text/html\r\n\r\n");
        let head = String::from_utf8(response_head(200, &fields[..2], 0, true)).unwrap();
        assert!(head.contains("content-length: 999\r\n"), "a HEAD answer keeps its length: {head}");
        let (status, parsed) =
            parse_response_head(response_head(404, &fields, 3, false).as_slice()).unwrap();
        assert_eq!((status, content_length(&parsed), is_chunked(&parsed)), (404, Some(3), false));
    }

    #[test]
    fn request_blocks_are_origin_form_with_host() {
        let b = request_block(
            "GET",
            "http://u:p@Example.com:8080/a/b?c=d",
            &[("accept-encoding".into(), b"gzip".to_vec())],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(b.clone()).unwrap(),
            "GET /a/b?c=d HTTP/1.1\r\nhost: Example.com:8080\r\naccept-encoding: gzip\r\n\r\n"
        );
        let (m, t, f) = parse_request_head(&b).unwrap();
        assert_eq!((m.as_str(), t.as_str(), f.len()), ("GET", "/a/b?c=d", 2));
        assert!(request_block("GET", "not a url", &[]).is_none());
    }

    #[test]
    fn framing_fields_are_read_as_rfc_9112_says() {
        let f = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect::<Vec<Field>>()
        };
        assert!(is_chunked(&f(&[("transfer-encoding", "gzip, chunked")])));
        assert!(!is_chunked(&f(&[("transfer-encoding", "chunked, gzip")])));
        assert_eq!(content_length(&f(&[("content-length", "5, 5")])), Some(5));
        assert_eq!(content_length(&f(&[("content-length", "5"), ("content-length", "6")])), None);
        assert_eq!(content_length(&f(&[("content-length", "x")])), None);
        let mut r = &b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody"[..];
        let head = read_head(&mut r).unwrap();
        assert!(head.ends_with(b"\r\n\r\n") && r == b"body");
        assert!(read_head(&mut &b"HTTP/1.1 200 OK\r\nA: b\r\n"[..]).is_err());
    }
}
