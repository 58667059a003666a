//! WARC `response` records into the record store (SPEC section 6), so that
//! `crawlcache serve --offline` replays them.
//!
//! Each `response` record with an `http://` or `https://` target becomes the
//! record `record:METHOD URL` (`record:METHOD URL sha256=H` for methods
//! other than GET and HEAD), exactly as if the proxy had recorded it:
//! - the method, and for a POST the SHA-256 of the request body, come from
//!   the matching `request` record: the one the response names in
//!   `WARC-Concurrent-To`, or the one naming the response there, or else
//!   the latest unmatched request for the same target URI, whether it comes
//!   before the response (wget, warcio) or after it (Heritrix). A response
//!   without a request is a GET. A request record without a body may carry
//!   [`super::REQUEST_BODY_SHA256`] (crawlcache's own export);
//! - the URL is the cache key of the target URI after `cache.key_rules`;
//! - the head is kept as the proxy keeps an origin's
//!   ([`crate::cache::policy::headers_to_store`]: hop-by-hop fields and,
//!   by default, `Set-Cookie` dropped; a `Content-Length` beside a
//!   `Transfer-Encoding` dropped, RFC 9112 section 6.3); interim 1xx heads
//!   before the final one are skipped;
//! - the body is the block's body with the chunked framing removed (a
//!   chunked response is stored as the proxy stores it, so replay sends the
//!   bytes a client got after de-chunking), content codings kept;
//! - `request_time` and `response_time` are the request's and the
//!   response's `WARC-Date`.
//!
//! A later record for the same key replaces an earlier one (as a new
//! recording does). Records that cannot be imported are reported with their
//! offset and skipped: a malformed or truncated record, a body cut short
//! (by the file, by a broken chunked framing, by `WARC-Truncated`, or shorter
//! than its `Content-Length`), a body over the store's budget. A body is
//! committed only together with its index entry: a skipped response leaves
//! nothing in the store. `warcinfo`, `metadata`, `resource`, `revisit` and
//! `conversion` records, and responses for other schemes (`dns:`), are read
//! and ignored.

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufRead, Read, Seek};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::http::{self as wh, ChunkedDecoder, Field};
use super::reader::{Offset, RecordHead, WarcReader};
use super::{parse_warc_date, strip_angle_brackets, REQUEST_BODY_SHA256};
use crate::cache::policy::PolicyConfig;
use crate::cache::{key, StoredResponse};
use crate::record::key_rules::KeyRule;
use crate::store::{CommittedBody, Store};

/// What an import needs from the configuration.
#[derive(Debug, Clone)]
pub struct Options {
    /// `cache.key_rules`: a URL's record key is its cache key.
    pub key_rules: Vec<KeyRule>,
    /// Which fields are kept (`cache.store_set_cookie`).
    pub policy: PolicyConfig,
}

/// What an import of one or more files did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records read (well-formed or not).
    pub records: u64,
    /// Responses stored as records.
    pub imported: u64,
    /// Records reported and skipped.
    pub skipped: u64,
}

impl Summary {
    /// Adds `other` to this one.
    pub fn add(&mut self, other: &Summary) {
        self.records += other.records;
        self.imported += other.imported;
        self.skipped += other.skipped;
    }
}

/// A request record, as far as the record key needs it.
#[derive(Debug, Clone)]
struct Request {
    id: String,
    uri: String,
    method: String,
    /// Hex SHA-256 of the request body (methods other than GET and HEAD).
    body_sha256: Option<String>,
    date_ms: Option<u64>,
    fields: Vec<Field>,
    /// The record IDs it names in `WARC-Concurrent-To`.
    concurrent: Vec<String>,
}

/// A response read and its body written (pinned), waiting for its request.
struct Pending {
    offset: Offset,
    id: String,
    concurrent: Vec<String>,
    uri: String,
    date_ms: u64,
    status: u16,
    fields: Vec<Field>,
    body: Option<CommittedBody>,
    /// The head announced a body (`Content-Length` > 0) the block lacks:
    /// fine for an answer to HEAD only.
    body_missing: Option<u64>,
    body_sha256: Option<String>,
}

/// Imports the WARC file at `path` into `store`. `problem` gets one line
/// per record skipped (file, offset, reason); `progress` the file offset
/// reached after each record. Errors: the file cannot be opened.
pub fn import_file(
    store: &Store,
    path: &Path,
    opts: &Options,
    problem: &mut dyn FnMut(String),
    progress: &mut dyn FnMut(u64),
) -> io::Result<Summary> {
    let mut reader = WarcReader::open(path)?;
    let name = path.display().to_string();
    let mut summary = Summary::default();
    let mut state = Matcher::default();
    while let Some(next) = reader.next_record() {
        summary.records += 1;
        let head = match next {
            Ok(h) => h,
            Err(e) => {
                summary.skipped += 1;
                problem(format!("{name}: {e}; skipped"));
                progress(reader.file_position());
                continue;
            }
        };
        let outcome = match head.record_type().as_str() {
            "request" => read_request(&mut reader, &head).map(Outcome::Request),
            "response" => read_response(store, &mut reader, &head).map(Outcome::Response),
            _ => Ok(Outcome::Ignored),
        };
        // A record counts only once its block ended where its head said.
        let outcome = match (outcome, reader.finish_block()) {
            (Ok(o), Ok(())) => Ok(o),
            (Ok(Outcome::Response(Some(p))), Err(e)) => {
                if let Some(b) = &p.body {
                    store.discard_body(b);
                }
                Err(e.message)
            }
            (Ok(_), Err(e)) | (Err(_), Err(e)) => Err(e.message),
            (Err(e), Ok(())) => Err(e),
        };
        match outcome {
            Err(why) => {
                summary.skipped += 1;
                problem(format!("{name}: record at {}: {why}; skipped", head.offset));
            }
            Ok(Outcome::Ignored) | Ok(Outcome::Response(None)) | Ok(Outcome::Request(None)) => {}
            Ok(Outcome::Request(Some(req))) => {
                if let Some((p, req)) = state.add_request(req) {
                    settle(store, opts, p, Some(&req), &name, &mut summary, problem);
                }
            }
            Ok(Outcome::Response(Some(p))) => match state.request_for(&p) {
                Some(req) => settle(store, opts, p, Some(&req), &name, &mut summary, problem),
                None => state.hold(p),
            },
        }
        progress(reader.file_position());
    }
    // Responses no request came for: GETs.
    for p in state.drain() {
        settle(store, opts, p, None, &name, &mut summary, problem);
    }
    Ok(summary)
}

enum Outcome {
    Request(Option<Request>),
    Response(Option<Pending>),
    Ignored,
}

/// Pairs responses with requests (see the module docs).
#[derive(Default)]
struct Matcher {
    requests: HashMap<String, Request>,
    /// Requests not yet paired, by target URI, oldest first.
    open_by_uri: HashMap<String, VecDeque<String>>,
    /// Response ID -> the request that names it in `WARC-Concurrent-To`.
    named_by_request: HashMap<String, String>,
    pending: Vec<Option<Pending>>,
    pending_by_uri: HashMap<String, VecDeque<usize>>,
    pending_by_id: HashMap<String, usize>,
    pending_by_concurrent: HashMap<String, usize>,
}

impl Matcher {
    fn take_open(&mut self, uri: &str, id: &str) {
        if let Some(q) = self.open_by_uri.get_mut(uri) {
            q.retain(|x| x != id);
        }
    }

    /// The request a response belongs to, if it has been read.
    fn request_for(&mut self, p: &Pending) -> Option<Request> {
        let id = p
            .concurrent
            .iter()
            .find(|c| self.requests.contains_key(*c))
            .cloned()
            .or_else(|| self.named_by_request.get(&p.id).cloned())
            .or_else(|| self.open_by_uri.get(&p.uri).and_then(|q| q.back().cloned()))?;
        let req = self.requests.remove(&id)?;
        self.take_open(&req.uri, &req.id);
        Some(req)
    }

    fn hold(&mut self, p: Pending) {
        let i = self.pending.len();
        self.pending_by_uri.entry(p.uri.clone()).or_default().push_back(i);
        self.pending_by_id.insert(p.id.clone(), i);
        for c in &p.concurrent {
            self.pending_by_concurrent.insert(c.clone(), i);
        }
        self.pending.push(Some(p));
    }

    /// Records a request; returns the held response it answers, if any
    /// (the request is then paired and not kept).
    fn add_request(&mut self, req: Request) -> Option<(Pending, Request)> {
        for c in &req.concurrent {
            self.named_by_request.insert(c.clone(), req.id.clone());
        }
        let found = self
            .pending_by_concurrent
            .get(&req.id)
            .copied()
            .filter(|i| self.pending[*i].is_some())
            .or_else(|| req.concurrent.iter().find_map(|c| self.pending_by_id.get(c).copied()).filter(|i| self.pending[*i].is_some()))
            .or_else(|| self.pending_by_uri.get(&req.uri).and_then(|q| q.iter().copied().find(|i| self.pending[*i].is_some())));
        match found.and_then(|i| self.pending[i].take()) {
            Some(p) => Some((p, req)),
            None => {
                self.open_by_uri.entry(req.uri.clone()).or_default().push_back(req.id.clone());
                self.requests.insert(req.id.clone(), req);
                None
            }
        }
    }

    fn drain(&mut self) -> Vec<Pending> {
        self.pending.drain(..).flatten().collect()
    }
}

fn record_id(head: &RecordHead) -> String {
    strip_angle_brackets(head.get("WARC-Record-ID").unwrap_or("")).to_string()
}

fn target_uri(head: &RecordHead) -> Option<String> {
    head.get("WARC-Target-URI").map(|u| strip_angle_brackets(u).to_string())
}

fn is_http(uri: &str) -> bool {
    let lower = uri.get(..8).unwrap_or(uri).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// Reads a request record's block: method, body hash. `Ok(None)` for a
/// request that is not HTTP(S).
fn read_request<R: BufRead + Seek>(reader: &mut WarcReader<R>, head: &RecordHead) -> Result<Option<Request>, String> {
    let Some(uri) = target_uri(head).filter(|u| is_http(u)) else { return Ok(None) };
    let mut block = reader.block();
    let raw = wh::read_head(&mut block).map_err(|e| format!("request record: {e}"))?;
    let (method, _, fields) = wh::parse_request_head(&raw).map_err(|e| format!("request record: {e}"))?;
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
                Ok(c) if c < n => return Err(format!("the request body is cut short ({c} of {n} bytes)")),
                other => other,
            }
        } else {
            io::copy(&mut block, &mut HashWriter(&mut h))
        };
        copied.map_err(|e| format!("request body: {e}"))?;
        Some(hex::encode(h.finalize()))
    };
    let concurrent = head.get_all("WARC-Concurrent-To").map(|c| strip_angle_brackets(c).to_string()).collect();
    Ok(Some(Request { id: record_id(head), uri, method, body_sha256, date_ms: head.get("WARC-Date").and_then(parse_warc_date), fields, concurrent }))
}

struct HashWriter<'a>(&'a mut Sha256);

impl io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads a response record: its final head, and its body into the store
/// (finished, so pinned, only when the whole body was read). `Ok(None)` for
/// a response that is not HTTP(S).
fn read_response<R: BufRead + Seek>(store: &Store, reader: &mut WarcReader<R>, head: &RecordHead) -> Result<Option<Pending>, String> {
    let Some(uri) = target_uri(head).filter(|u| is_http(u)) else { return Ok(None) };
    if let Some(t) = head.get("WARC-Truncated") {
        return Err(format!("the crawler cut this response short (WARC-Truncated: {t}); only whole responses are replayed"));
    }
    let date_ms = head.get("WARC-Date").and_then(parse_warc_date).unwrap_or_else(super::now_ms);
    let mut block = reader.block();
    let (status, fields) = loop {
        let raw = wh::read_head(&mut block).map_err(|e| format!("response record: {e}"))?;
        let (status, fields) = wh::parse_response_head(&raw)?;
        // Interim responses (100 Continue, 103 Early Hints) before the final one.
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        break (status, fields);
    };
    let no_body = (100..200).contains(&status) || status == 204 || status == 304;
    let mut writer = store.begin_body().map_err(|e| e.to_string())?;
    let mut body_missing = None;
    if !no_body {
        let mut sink = BodySink(&mut writer);
        if wh::is_chunked(&fields) {
            io::copy(&mut ChunkedDecoder::new(&mut block), &mut sink).map_err(|e| format!("the chunked body is broken: {e}"))?;
        } else if let Some(n) = wh::content_length(&fields) {
            let got = io::copy(&mut (&mut block).take(n), &mut sink).map_err(|e| format!("the body: {e}"))?;
            if got == 0 && n > 0 {
                body_missing = Some(n);
            } else if got < n {
                return Err(format!("the body is cut short: Content-Length says {n} bytes, the record holds {got}"));
            }
        } else {
            io::copy(&mut block, &mut sink).map_err(|e| format!("the body: {e}"))?;
        }
    }
    let body = writer.finish().map_err(|e| e.to_string())?;
    let concurrent = head.get_all("WARC-Concurrent-To").map(|c| strip_angle_brackets(c).to_string()).collect();
    Ok(Some(Pending {
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
    }))
}

/// Writes into a body writer (a store error becomes an I/O error naming it).
struct BodySink<'a>(&'a mut crate::store::BodyWriter);

impl io::Write for BodySink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Stores a response under its record key (with `req`, its request, if
/// any), or reports why not; releases its body either way.
fn settle(store: &Store, opts: &Options, mut p: Pending, req: Option<&Request>, name: &str, summary: &mut Summary, problem: &mut dyn FnMut(String)) {
    let outcome = stored_form(opts, &mut p, req).and_then(|(key, stored)| {
        let body = if req.is_some_and(|r| r.method == "HEAD") {
            if let Some(b) = p.body.take() {
                store.discard_body(&b);
            }
            None
        } else {
            p.body.take()
        };
        store.insert(&key, b"", &stored.to_bytes(), body.as_ref()).map(|_| ()).map_err(|e| e.to_string())
    });
    if let Some(b) = p.body.take() {
        store.discard_body(&b);
    }
    match outcome {
        Ok(()) => summary.imported += 1,
        Err(why) => {
            summary.skipped += 1;
            problem(format!("{name}: record at {}: {why}; skipped", p.offset));
        }
    }
}

/// The record key and stored head of a response.
fn stored_form(opts: &Options, p: &mut Pending, req: Option<&Request>) -> Result<(String, StoredResponse), String> {
    let method_name = req.map(|r| r.method.clone()).unwrap_or_else(|| "GET".to_string());
    let method = http::Method::from_bytes(method_name.as_bytes()).map_err(|_| format!("bad request method {method_name:?}"))?;
    if let (Some(n), false) = (p.body_missing, method == http::Method::HEAD) {
        return Err(format!("the body is missing: Content-Length says {n} bytes, the record holds none"));
    }
    let uri: http::Uri = p.uri.parse().map_err(|e| format!("WARC-Target-URI {:?} is not a URL: {e}", p.uri))?;
    let exact = key::primary_key(&uri).ok_or_else(|| format!("WARC-Target-URI {:?} is not an absolute http(s) URL", p.uri))?;
    let primary = crate::record::key_rules::apply(&opts.key_rules, &exact);
    let body_hash = match method {
        http::Method::GET | http::Method::HEAD => None,
        _ => Some(
            p.body_sha256
                .clone()
                .or_else(|| req.and_then(|r| r.body_sha256.clone()))
                .unwrap_or_else(|| hex::encode(Sha256::digest(b""))),
        ),
    };
    let record_key = crate::record::record_key(&method, &primary, body_hash.as_deref());
    let response_headers = header_map(&p.fields);
    let request_headers = req.map(|r| header_map(&r.fields)).unwrap_or_default();
    let stored = StoredResponse {
        status: p.status,
        headers: crate::cache::policy::headers_to_store(&response_headers, &opts.policy),
        request_time_ms: req.and_then(|r| r.date_ms).unwrap_or(p.date_ms).min(p.date_ms),
        response_time_ms: p.date_ms,
        url: primary,
        vary_request: key::nominated_fields(&response_headers, &request_headers),
    };
    Ok((record_key, stored))
}

/// `fields` as a header map (invalid names or values skipped); a
/// `Content-Length` beside a `Transfer-Encoding` is dropped (RFC 9112
/// section 6.3).
fn header_map(fields: &[Field]) -> http::HeaderMap {
    let chunked = wh::has_transfer_coding(fields);
    let mut map = http::HeaderMap::with_capacity(fields.len());
    for (name, value) in fields {
        if chunked && name == "content-length" {
            continue;
        }
        if let (Ok(n), Ok(v)) = (http::header::HeaderName::from_bytes(name.as_bytes()), http::header::HeaderValue::from_bytes(value)) {
            map.append(n, v);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::super::writer::WarcWriter;
    use super::*;

    fn record(w: &mut WarcWriter<Vec<u8>>, kind: &str, id: &str, uri: &str, concurrent: Option<&str>, block: &[u8]) {
        let mut fields = vec![("WARC-Type", kind), ("WARC-Record-ID", id), ("WARC-Target-URI", uri), ("WARC-Date", "2024-05-01T12:00:00Z")];
        if let Some(c) = concurrent {
            fields.push(("WARC-Concurrent-To", c));
        }
        w.write_record(&fields, block.len() as u64, &mut &block[..]).unwrap();
    }

    fn body_of(store: &Store, key: &str) -> Option<(StoredResponse, Option<Vec<u8>>)> {
        let e = store.lookup(key).unwrap().into_iter().next()?;
        let body = e.body.as_ref().map(|_| {
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut store.read_body(&e).unwrap().into_reader(), &mut out).unwrap();
            out
        });
        Some((StoredResponse::from_bytes(&e.meta).unwrap(), body))
    }

    #[test]
    fn responses_pair_with_requests_in_either_order_and_bad_bodies_leave_nothing() {
        let mut w = WarcWriter::new(Vec::new());
        // Heritrix order: the response first, its request after, naming it.
        record(&mut w, "response", "<urn:r1>", "<http://a.test/form>", None,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\nSet-Cookie: s=1\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
        record(&mut w, "request", "<urn:q1>", "http://a.test/form", Some("<urn:r1>"), b"POST /form HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\nq=1");
        // A body shorter than its Content-Length.
        record(&mut w, "request", "<urn:q2>", "http://a.test/x", None, b"GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n");
        record(&mut w, "response", "<urn:r2>", "http://a.test/x", Some("<urn:q2>"), b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd");
        // An answer to HEAD: a length, no body.
        record(&mut w, "request", "<urn:q3>", "http://a.test/h", None, b"HEAD /h HTTP/1.1\r\nHost: a.test\r\n\r\n");
        record(&mut w, "response", "<urn:r3>", "http://a.test/h", None, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
        // Not HTTP: ignored.
        record(&mut w, "response", "<urn:r4>", "dns:a.test", None, b"20240501 a.test. 300 IN A 192.0.2.1");
        let bytes = w.finish().unwrap();

        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("t.warc.gz");
        std::fs::write(&file, &bytes).unwrap();
        let store = Store::open(&tmp.path().join("data"), 1 << 30).unwrap();
        let opts = Options { key_rules: Vec::new(), policy: crate::config::Config::defaults().unwrap().policy() };
        let mut problems = Vec::new();
        let s = import_file(&store, &file, &opts, &mut |p| problems.push(p), &mut |_| {}).unwrap();
        assert_eq!(s, Summary { records: 7, imported: 2, skipped: 1 }, "{problems:?}");
        assert!(problems.len() == 1 && problems[0].contains("cut short") && problems[0].contains("offset"), "{problems:?}");

        let key = format!("record:POST http://a.test/form sha256={}", hex::encode(Sha256::digest(b"q=1")));
        let (stored, body) = body_of(&store, &key).expect("the POST is keyed by its body's hash");
        assert_eq!(body.as_deref(), Some(&b"hello"[..]), "de-chunked");
        assert!(stored.headers.iter().all(|(n, _)| n != "content-length" && n != "transfer-encoding" && n != "set-cookie"), "{:?}", stored.headers);
        assert_eq!(stored.response_time_ms, 1_714_564_800_000);
        assert!(body_of(&store, "record:GET http://a.test/x").is_none());
        let (head, body) = body_of(&store, "record:HEAD http://a.test/h").unwrap();
        assert_eq!((head.status, body), (200, None));
        let report = store.verify(false).unwrap();
        assert!(report.is_clean(), "{report:?}");
    }
}
