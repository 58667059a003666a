//! Reading one record of a WARC file: requests, responses and revisits
//! into what [`super`] stores; the URI a client sends for a target.

use std::fs::File;
use std::io::{self, BufRead, Read, Seek, SeekFrom};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::warc::http::{self as wh, ChunkedDecoder, Field, HeadError};
use crate::warc::reader::{Offset, ReadError, RecordHead, WarcReader};
use crate::warc::{parse_warc_date, strip_angle_brackets, REQUEST_BODY_SHA256};
use crawlcache_policy::cache::{key, StoredResponse};
use crawlcache_policy::store_key::{RecordKey, Selection};
use crawlcache_store::{Store, StoreError};

use super::types::*;

/// Why one record of a WARC file is not imported: the import reports it
/// (file, offset, this) and skips the record. Nothing branches on the kind
/// but the count of failures; `Display` is the reason a person reads.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The WARC reader could not read the record's block or what follows
    /// it (the reader's message; the report adds the offset).
    #[error("{}", .0.message)]
    Read(ReadError),
    /// The HTTP head of a response block is cut short or not HTTP.
    #[error("{0}")]
    Head(#[from] HeadError),
    /// The HTTP head of a request (`part`: `request record`) or response
    /// block cannot be read or parsed.
    #[error("{part}: {source}")]
    HeadIn {
        /// `request record` or `response record`.
        part: &'static str,
        /// Why.
        source: Box<RecordError>,
    },
    /// Reading a part of the block failed (`part` says which: `request
    /// body`, `the body`, `the chunked body is broken`, ...).
    #[error("{part}: {source}")]
    Io {
        /// The part being read.
        part: &'static str,
        /// The error reading it.
        source: io::Error,
    },
    /// The crawler marked the record truncated (`WARC-Truncated`, its
    /// value); `what` is `response` or `resource`.
    #[error("the crawler cut this {what} short (WARC-Truncated: {reason}); only whole {}s are replayed", if *.what == "response" { "response" } else { "record" })]
    Truncated {
        /// `response` or `resource`.
        what: &'static str,
        /// The field's value.
        reason: String,
    },
    /// A request body shorter than its `Content-Length` (bytes).
    #[error("the request body is cut short ({got} of {want} bytes)")]
    RequestBodyShort {
        /// Bytes the record holds.
        got: u64,
        /// Bytes `Content-Length` says.
        want: u64,
    },
    /// A body or block (`what`) shorter than its `Content-Length` (bytes).
    #[error("the {what} is cut short: Content-Length says {want} bytes, the record holds {got}")]
    CutShort {
        /// `body` or `block`.
        what: &'static str,
        /// Bytes the record holds.
        got: u64,
        /// Bytes `Content-Length` says.
        want: u64,
    },
    /// A response to anything but HEAD whose body is absent though
    /// `Content-Length` says it has this many bytes.
    #[error("the body is missing: Content-Length says {0} bytes, the record holds none")]
    BodyMissing(u64),
    /// The request record's method is not an HTTP method (quoted).
    #[error("bad request method {0:?}")]
    BadMethod(String),
    /// The target URI gives no absolute http(s) URI a client can send
    /// (`why`: the URL parser's reason, or the form it came to).
    #[error("WARC-Target-URI {uri:?} is not a URL a client can send ({why})")]
    NotSendable {
        /// The `WARC-Target-URI`.
        uri: String,
        /// Why.
        why: String,
    },
    /// A not-modified revisit whose original's head is nowhere.
    #[error("a not-modified revisit whose original head is not known")]
    UnknownOriginalHead,
    /// The store could not take the body or the entry.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// A record this import read before (in `name`) cannot be opened again.
    #[error("cannot read {name} again: {source}")]
    Reopen {
        /// The file.
        name: String,
        /// The error opening it.
        source: io::Error,
    },
    /// A record this import read before cannot be read again, or is
    /// not there any more (`why`), in `name`.
    #[error("{name}: {why}")]
    Reread {
        /// The file.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// A record this import read before is no longer there, or holds
    /// another body now (`what`: `is no longer there`, `changed since it
    /// was read`).
    #[error("{name}: the record at {offset} {what}")]
    Changed {
        /// The file.
        name: String,
        /// Where the record was.
        offset: Offset,
        /// What happened.
        what: &'static str,
    },
    /// The record read again is not what it was (`what`).
    #[error("the record {0}")]
    NotAsBefore(&'static str),
}

impl RecordError {
    /// `self` as found in the head of a `part` (`request record`,
    /// `response record`).
    fn within(self, part: &'static str) -> RecordError {
        RecordError::HeadIn { part, source: Box::new(self) }
    }
}

/// A file seen from `base` on: offset 0 is `base` (a record read again
/// from its offset).
pub(super) struct Window {
    pub(super) file: File,
    pub(super) base: u64,
}

impl Window {
    pub(super) fn open(path: &Path, base: u64) -> io::Result<Window> {
        let mut file = File::open(path)?;
        file.seek(SeekFrom::Start(base))?;
        Ok(Window { file, base })
    }
}

impl Read for Window {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }
}

impl Seek for Window {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let at = match pos {
            SeekFrom::Start(n) => self.file.seek(SeekFrom::Start(self.base.saturating_add(n)))?,
            other => self.file.seek(other)?,
        };
        Ok(at.saturating_sub(self.base))
    }
}

pub(super) fn record_id(head: &RecordHead) -> String {
    strip_angle_brackets(head.get("WARC-Record-ID").unwrap_or("")).to_string()
}

pub(super) fn target_uri(head: &RecordHead) -> Option<String> {
    head.get("WARC-Target-URI").map(|u| strip_angle_brackets(u).to_string())
}

pub(super) fn is_http(uri: &str) -> bool {
    let lower = uri.get(..8).unwrap_or(uri).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// The cache key (before `cache.key_rules`) of the URI a client sends for
/// the target `uri`, and whether it had to be turned into that form: `uri`
/// itself when it is one; else, with a request record, its request line's
/// target and `Host`; else the WHATWG URL serialisation (IRIs: the host in
/// punycode, path and query percent-encoded as UTF-8). Errors: none of
/// these gives an absolute http(s) URI.
pub fn client_form(
    uri: &str,
    req: Option<&RequestLine<'_>>,
) -> Result<(String, bool), RecordError> {
    if let Some(k) = uri.parse::<http::Uri>().ok().and_then(|u| key::primary_key(&u)) {
        if uri.is_ascii() {
            return Ok((k, false));
        }
    }
    let scheme = if uri.get(..8).is_some_and(|p| p.eq_ignore_ascii_case("https://")) {
        "https"
    } else {
        "http"
    };
    if let Some(r) = req {
        if let Some(host) = r.host.filter(|h| h.is_ascii() && !h.is_empty()) {
            if r.target.starts_with('/') && r.target.is_ascii() {
                let sent = format!("{scheme}://{host}{}", r.target);
                if let Some(k) = sent.parse::<http::Uri>().ok().and_then(|u| key::primary_key(&u)) {
                    return Ok((k, true));
                }
            }
        }
    }
    let not_sendable = |why: String| RecordError::NotSendable { uri: uri.to_string(), why };
    let parsed = url::Url::parse(uri.trim()).map_err(|e| not_sendable(e.to_string()))?;
    let mut whatwg = parsed.clone();
    whatwg.set_fragment(None);
    let k = whatwg
        .as_str()
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| key::primary_key(&u))
        .ok_or_else(|| not_sendable(format!("as {whatwg}")))?;
    Ok((k, true))
}

/// A request record's request line and `Host`, for [`client_form`].
#[derive(Debug, Clone, Copy)]
pub struct RequestLine<'a> {
    /// The request target (origin-form: `/path?query`).
    pub target: &'a str,
    /// The `Host` field.
    pub host: Option<&'a str>,
}

impl Request {
    pub(super) fn line(&self) -> RequestLine<'_> {
        let host = self
            .fields
            .iter()
            .find(|(n, _)| n == "host")
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
            .map(str::trim);
        RequestLine { target: &self.target, host }
    }
}

/// Reads a request record's block: method, body hash. `Ok(None)` for a
/// request that is not HTTP(S).
pub(super) fn read_request<R: BufRead + Seek>(
    reader: &mut WarcReader<R>,
    head: &RecordHead,
) -> Result<Option<Request>, RecordError> {
    let Some(uri) = target_uri(head).filter(|u| is_http(u)) else { return Ok(None) };
    let mut block = reader.block();
    let raw = wh::read_head(&mut block)
        .map_err(|source| RecordError::Io { part: "request record", source })?;
    let (method, target, fields) =
        wh::parse_request_head(&raw).map_err(|e| RecordError::from(e).within("request record"))?;
    let body_sha256 = if method == "GET" || method == "HEAD" {
        None
    } else if let Some(h) = head.get(REQUEST_BODY_SHA256) {
        Some(h.trim().to_ascii_lowercase())
    } else {
        let mut h = Sha256::new();
        let copied = if wh::is_chunked(&fields) {
            io::copy(&mut ChunkedDecoder::new(&mut block), &mut HashWriter(&mut h))
        } else if let Some(n) = wh::content_length(&fields) {
            let c = io::copy(&mut (&mut block).take(n), &mut HashWriter(&mut h));
            match c {
                Ok(c) if c < n => return Err(RecordError::RequestBodyShort { got: c, want: n }),
                other => other,
            }
        } else {
            io::copy(&mut block, &mut HashWriter(&mut h))
        };
        copied.map_err(|source| RecordError::Io { part: "request body", source })?;
        Some(hex::encode(h.finalize()))
    };
    let concurrent =
        head.get_all("WARC-Concurrent-To").map(|c| strip_angle_brackets(c).to_string()).collect();
    Ok(Some(Request {
        id: record_id(head),
        uri,
        method,
        target,
        body_sha256,
        date_ms: head.get("WARC-Date").and_then(parse_warc_date),
        fields,
        concurrent,
    }))
}

pub(super) struct HashWriter<'a>(&'a mut Sha256);

impl io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The final HTTP head of a response block (interim 1xx heads before it
/// skipped).
pub(super) fn final_head<R: BufRead>(block: &mut R) -> Result<(u16, Vec<Field>), RecordError> {
    loop {
        let raw = wh::read_head(block)
            .map_err(|source| RecordError::Io { part: "response record", source })?;
        let (status, fields) = wh::parse_response_head(&raw)?;
        // Interim responses (100 Continue, 103 Early Hints) before the final one.
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        return Ok((status, fields));
    }
}

/// Reads a response record: its final head, and its body into the store
/// (finished, so pinned, only when the whole body was read). `Ok(None)` for
/// a response that is not HTTP(S).
pub(super) fn read_response<R: BufRead + Seek>(
    store: &Store,
    reader: &mut WarcReader<R>,
    head: &RecordHead,
    file: u32,
) -> Result<Option<Pending>, RecordError> {
    let Some(uri) = target_uri(head).filter(|u| is_http(u)) else { return Ok(None) };
    if let Some(t) = head.get("WARC-Truncated") {
        return Err(RecordError::Truncated { what: "response", reason: t.to_string() });
    }
    let date_ms =
        head.get("WARC-Date").and_then(parse_warc_date).unwrap_or_else(crate::warc::now_ms);
    let mut block = reader.block();
    let (status, fields) = final_head(&mut block)?;
    let no_body = (100..200).contains(&status) || status == 204 || status == 304;
    let mut writer = store.begin_body()?;
    let mut body_missing = None;
    if !no_body {
        let mut sink = BodySink(&mut writer);
        if wh::is_chunked(&fields) {
            io::copy(&mut ChunkedDecoder::new(&mut block), &mut sink)
                .map_err(|source| RecordError::Io { part: "the chunked body is broken", source })?;
        } else if let Some(n) = wh::content_length(&fields) {
            let got = io::copy(&mut (&mut block).take(n), &mut sink)
                .map_err(|source| RecordError::Io { part: "the body", source })?;
            if got == 0 && n > 0 {
                body_missing = Some(n);
            } else if got < n {
                return Err(RecordError::CutShort { what: "body", got, want: n });
            }
        } else {
            io::copy(&mut block, &mut sink)
                .map_err(|source| RecordError::Io { part: "the body", source })?;
        }
    }
    let body = writer.finish()?;
    let concurrent =
        head.get_all("WARC-Concurrent-To").map(|c| strip_angle_brackets(c).to_string()).collect();
    Ok(Some(Pending {
        file,
        offset: head.offset,
        id: record_id(head),
        concurrent,
        uri,
        date_ms,
        status,
        fields,
        body: Some(body),
        body_missing,
        body_sha256: head.get(REQUEST_BODY_SHA256).map(|h| h.trim().to_ascii_lowercase()),
        payload_digest: head.get("WARC-Payload-Digest").and_then(PayloadDigest::parse),
        revisit: None,
    }))
}

/// Reads a `resource` record (WARC/1.1 section 6.4) with an http(s)
/// target as pywb replays one: a `200` whose only field is the record's
/// `Content-Type` (none when the record has none), the whole block its
/// body. Its payload digest is `WARC-Payload-Digest`, else the block's
/// (the block is the payload). `Ok(None)` for another scheme (`dns:`,
/// `urn:`, `file:`). Errors: `WARC-Truncated`, or the block cut short.
pub(super) fn read_resource<R: BufRead + Seek>(
    store: &Store,
    reader: &mut WarcReader<R>,
    head: &RecordHead,
    file: u32,
) -> Result<Option<Pending>, RecordError> {
    let Some(uri) = target_uri(head).filter(|u| is_http(u)) else { return Ok(None) };
    if let Some(t) = head.get("WARC-Truncated") {
        return Err(RecordError::Truncated { what: "resource", reason: t.to_string() });
    }
    let date_ms =
        head.get("WARC-Date").and_then(parse_warc_date).unwrap_or_else(crate::warc::now_ms);
    let mut writer = store.begin_body()?;
    let got = io::copy(&mut reader.block(), &mut BodySink(&mut writer))
        .map_err(|source| RecordError::Io { part: "the resource's block", source })?;
    if got < head.content_length {
        return Err(RecordError::CutShort { what: "block", got, want: head.content_length });
    }
    let body = writer.finish()?;
    let digest = head.get("WARC-Payload-Digest").or_else(|| head.get("WARC-Block-Digest"));
    Ok(Some(Pending {
        file,
        offset: head.offset,
        id: record_id(head),
        concurrent: Vec::new(),
        uri,
        date_ms,
        status: 200,
        fields: resource_fields(head),
        body: Some(body),
        body_missing: None,
        body_sha256: None,
        payload_digest: digest.and_then(PayloadDigest::parse),
        revisit: None,
    }))
}

/// The HTTP fields a `resource` record replays with: its `Content-Type`.
pub(super) fn resource_fields(head: &RecordHead) -> Vec<Field> {
    head.get("Content-Type")
        .map(|ct| vec![("content-type".to_string(), ct.trim().as_bytes().to_vec())])
        .unwrap_or_default()
}

/// Reads a revisit record (WARC/1.1 section 6.7): what it refers to, and
/// the HTTP head its block holds (none: the original's, as for the
/// `server-not-modified` profile). `Ok(None)` when it is not HTTP(S).
pub(super) fn read_revisit<R: BufRead + Seek>(
    reader: &mut WarcReader<R>,
    head: &RecordHead,
    file: u32,
) -> Result<Option<Pending>, RecordError> {
    let Some(uri) = target_uri(head).filter(|u| is_http(u)) else { return Ok(None) };
    let date_ms =
        head.get("WARC-Date").and_then(parse_warc_date).unwrap_or_else(crate::warc::now_ms);
    let profile = head.get("WARC-Profile").unwrap_or("").to_ascii_lowercase();
    let (status, fields, had_head) = if head.content_length == 0 {
        (0, Vec::new(), false)
    } else {
        let mut block = reader.block();
        let (s, f) = final_head(&mut block)?;
        (s, f, true)
    };
    let revisit = RevisitOf {
        refers_to: head
            .get("WARC-Refers-To")
            .map(|v| strip_angle_brackets(v).to_string())
            .filter(|v| !v.is_empty()),
        target: head
            .get("WARC-Refers-To-Target-URI")
            .map(|v| strip_angle_brackets(v).to_string())
            .filter(|v| !v.is_empty()),
        date_ms: head.get("WARC-Refers-To-Date").and_then(parse_warc_date),
        not_modified: profile.ends_with("server-not-modified") || !had_head,
    };
    let concurrent =
        head.get_all("WARC-Concurrent-To").map(|c| strip_angle_brackets(c).to_string()).collect();
    Ok(Some(Pending {
        file,
        offset: head.offset,
        id: record_id(head),
        concurrent,
        uri,
        date_ms,
        status,
        fields,
        body: None,
        body_missing: None,
        body_sha256: head.get(REQUEST_BODY_SHA256).map(|h| h.trim().to_ascii_lowercase()),
        payload_digest: head.get("WARC-Payload-Digest").and_then(PayloadDigest::parse),
        revisit: Some(revisit),
    }))
}

/// Writes into a body writer (a store error becomes an I/O error naming it).
pub(super) struct BodySink<'a>(&'a mut crawlcache_store::BodyWriter);

impl io::Write for BodySink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The record key, its variant's secondary key and the stored head of a
/// response, and whether its target URI had to be normalised.
pub(super) fn stored_form(
    opts: &Options,
    p: &Pending,
    req: Option<&Request>,
) -> Result<(RecordKey, Vec<u8>, StoredResponse, bool), RecordError> {
    let method_name = req.map(|r| r.method.clone()).unwrap_or_else(|| "GET".to_string());
    let method = http::Method::from_bytes(method_name.as_bytes())
        .map_err(|_| RecordError::BadMethod(method_name.clone()))?;
    if let (Some(n), false) = (p.body_missing, method == http::Method::HEAD) {
        return Err(RecordError::BodyMissing(n));
    }
    let line = req.map(Request::line);
    let (exact, normalised) = client_form(&p.uri, line.as_ref())?;
    let primary = crawlcache_policy::key_rules::apply(&opts.key_rules, &exact);
    let body_hash = match method {
        http::Method::GET | http::Method::HEAD => None,
        _ => Some(
            p.body_sha256
                .clone()
                .or_else(|| req.and_then(|r| r.body_sha256.clone()))
                .unwrap_or_else(|| hex::encode(Sha256::digest(b""))),
        ),
    };
    let record_key = RecordKey::new(&method, &primary, body_hash.as_deref());
    let response_headers = header_map(&p.fields);
    let request_headers = req.map(|r| header_map(&r.fields)).unwrap_or_default();
    let selection = Selection::of_request(&response_headers, &request_headers);
    let stored = StoredResponse {
        status: p.status,
        headers: crawlcache_policy::cache::headers_to_store(&response_headers, &opts.policy),
        request_time_ms: req.and_then(|r| r.date_ms).unwrap_or(p.date_ms).min(p.date_ms),
        response_time_ms: p.date_ms,
        url: primary,
        vary_request: key::nominated_fields(&response_headers, &request_headers),
    };
    Ok((record_key, selection.secondary_key(), stored, normalised))
}

/// `fields` as a header map (invalid names or values skipped); a
/// `Content-Length` beside a `Transfer-Encoding` is dropped (RFC 9112
/// section 6.3).
pub(super) fn header_map(fields: &[Field]) -> http::HeaderMap {
    let chunked = wh::has_transfer_coding(fields);
    let mut map = http::HeaderMap::with_capacity(fields.len());
    for (name, value) in fields {
        if chunked && name == "content-length" {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            http::header::HeaderName::from_bytes(name.as_bytes()),
            http::header::HeaderValue::from_bytes(value),
        ) {
            map.append(n, v);
        }
    }
    map
}
