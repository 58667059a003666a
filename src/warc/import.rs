//! WARC `response` and `revisit` records into the record store (SPEC
//! section 6), so that `crawlcache serve --offline` replays what the
//! archive says was served.
//!
//! Each `response` record with an `http://` or `https://` target becomes a
//! record ([`crate::store_key::RecordKey`]: the method, the URL and, for
//! methods other than GET and HEAD, the SHA-256 of the request body), under
//! the variant its request selects, exactly as if the proxy had recorded it:
//! - the method, the request fields `Vary` nominates and, for a POST, the
//!   SHA-256 of the request body, come from the matching `request` record:
//!   the one the response names in `WARC-Concurrent-To`, or the one naming
//!   the response there, or else the latest unmatched request for the same
//!   target URI, whether it comes before the response (wget, warcio) or
//!   after it (Heritrix). A response without a request is a GET whose
//!   variant is that of a request without the nominated fields. A request
//!   record without a body may carry [`super::REQUEST_BODY_SHA256`]
//!   (crawlcache's own export);
//! - the URL is the cache key of the target URI after `cache.key_rules`.
//!   A `WARC-Target-URI` that is not a URI a client sends (an IRI, with
//!   non-ASCII characters or spaces) is turned into the one the client
//!   sent: the request record's request line and `Host` when there is one,
//!   else the WHATWG URL serialisation browsers send (host in punycode,
//!   path and query percent-encoded as UTF-8); counted in the summary. One
//!   that cannot be is reported and skipped, never stored under a key no
//!   request can reach;
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
//! **Several captures** of one URL and variant: the one with the latest
//! `WARC-Date` is kept, whatever the order of the records and files, and
//! whatever was stored before (a capture older than the stored one is
//! counted as kept out, not stored). Of two with the same date, the later
//! one read wins.
//!
//! **Revisits** (WARC/1.1 section 6.7: Heritrix, wget `--warc-dedup`,
//! Browsertrix, `crawlcache export --revisits`): a `revisit` record is
//! stored like a response, with its own head (for the
//! `server-not-modified` profile or a `304` head, the original's head
//! freshened by the revisit's fields, RFC 9111 section 3.2) and the
//! payload it refers to as its body. The payload is looked for, in order:
//! the record `WARC-Refers-To` names, a payload with the same
//! `WARC-Payload-Digest`, the capture `WARC-Refers-To-Target-URI` /
//! `WARC-Refers-To-Date` name, among the files of this import (a revisit
//! read before its original, in a later file or an earlier one, waits for
//! the end of the import); then in the store: a body an earlier import
//! stored with that payload digest (kept in the index tree
//! [`DIGEST_TREE`]), a body file with that SHA-256, or the stored record
//! of the URL referred to (at that date, its body checked against the
//! digest when it is SHA-1 or SHA-256). The store is content-addressed, so
//! the revisit's entry is one more reference to a body already there;
//! when the store no longer finds a short packed body by its hash, the
//! payload's bytes are read again from its record and written anew. A
//! revisit whose payload is found nowhere is reported and skipped.
//!
//! Records that cannot be imported are reported with their file and offset
//! and skipped: a malformed or truncated record, a body cut short (by the
//! file, by a broken chunked framing, by `WARC-Truncated` on a response, or
//! shorter than its `Content-Length`), a body over the store's budget. A
//! body is committed only together with its index entry: a skipped
//! response leaves nothing in the store, and what was imported before it
//! stays. `warcinfo`, `metadata`, `resource` and `conversion` records, and
//! responses for other schemes (`dns:`), are read and ignored.
//!
//! Memory: about 150 bytes per response record for the length of one
//! import (the payloads revisits may refer to), plus the heads of revisits
//! waiting for their original (at most [`MAX_DEFERRED_BYTES`]).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::http::{self as wh, ChunkedDecoder, Field};
use super::reader::{Offset, RecordHead, WarcReader};
use super::{parse_warc_date, strip_angle_brackets, REQUEST_BODY_SHA256};
use crate::cache::policy::PolicyConfig;
use crate::cache::{key, StoredResponse};
use crate::record::key_rules::KeyRule;
use crate::store::{CommittedBody, Store, StoreError};
use crate::store_key::{RecordKey, Selection};

/// The index tree (beside the store's own, [`Store::extra_tree`]) mapping
/// the payload digests of imported responses to the entry holding the
/// payload, so that a later import's revisits find it: key the digest
/// ([`PayloadDigest`]), value the body's SHA-256 (32 bytes), its length (8
/// bytes, big-endian), the entry's primary key, a 0 byte, its secondary
/// key. A row whose entry no longer holds that body is ignored.
pub const DIGEST_TREE: &str = "warc_payload_digests";

/// What an import needs from the configuration.
#[derive(Debug, Clone)]
pub struct Options {
    /// `cache.key_rules`: a URL's record key is its cache key.
    pub key_rules: Vec<KeyRule>,
    /// Which fields are kept (`cache.store_set_cookie`).
    pub policy: PolicyConfig,
}

/// What an import of one or more files did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// Records read (well-formed or not).
    pub records: u64,
    /// Responses and revisits stored as records.
    pub imported: u64,
    /// Records reported and skipped.
    pub skipped: u64,
    /// Revisit records stored with the payload they refer to (counted in
    /// `imported` too).
    #[serde(default)]
    pub revisits_resolved: u64,
    /// Captures not stored because a newer capture of the same URL and
    /// variant is stored (by `WARC-Date`).
    #[serde(default)]
    pub older_kept_out: u64,
    /// Target URIs turned into the form a client sends (an IRI, say).
    #[serde(default)]
    pub uris_normalised: u64,
}

impl Summary {
    /// Adds `other` to this one.
    pub fn add(&mut self, other: &Summary) {
        self.records += other.records;
        self.imported += other.imported;
        self.skipped += other.skipped;
        self.revisits_resolved += other.revisits_resolved;
        self.older_kept_out += other.older_kept_out;
        self.uris_normalised += other.uris_normalised;
    }
}

impl std::fmt::Display for Summary {
    /// `N records read, M imported, K skipped; R revisits resolved, O older
    /// captures kept out, U target URIs normalised`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} records read, {} imported, {} skipped; {} revisits resolved, {} older captures kept out, {} target URIs normalised",
            self.records, self.imported, self.skipped, self.revisits_resolved, self.older_kept_out, self.uris_normalised
        )
    }
}

/// A `WARC-Payload-Digest` in one form whatever its encoding: the
/// algorithm lower-cased, `:`, the digest's bytes in lower-case hex (read
/// from base32, as wget and Heritrix write it, hex or base64). A value
/// that decodes in none of them is kept as written, lower-cased.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PayloadDigest(String);

impl PayloadDigest {
    /// Reads a digest field value (`sha1:BASE32...`); `None` when empty.
    pub fn parse(value: &str) -> Option<PayloadDigest> {
        let (algo, digest) = value.trim().split_once(':')?;
        let (algo, digest) = (algo.trim().to_ascii_lowercase(), digest.trim());
        if algo.is_empty() || digest.is_empty() {
            return None;
        }
        let expected = match algo.as_str() {
            "sha1" => Some(20),
            "sha256" | "sha-256" => Some(32),
            "md5" => Some(16),
            _ => None,
        };
        let upper = digest.to_ascii_uppercase();
        let candidates = [
            data_encoding::BASE32.decode(upper.as_bytes()).ok(),
            data_encoding::BASE32_NOPAD.decode(upper.trim_end_matches('=').as_bytes()).ok(),
            hex::decode(digest).ok(),
            data_encoding::BASE64.decode(digest.as_bytes()).ok(),
        ];
        let raw = candidates.into_iter().flatten().find(|b| expected.is_none_or(|n| b.len() == n));
        let algo = if algo == "sha-256" { "sha256".to_string() } else { algo };
        Some(match raw {
            Some(b) => PayloadDigest(format!("{algo}:{}", hex::encode(b))),
            None => PayloadDigest(format!("{algo}:{}", digest.to_ascii_lowercase())),
        })
    }

    /// The digest of `bytes` in the same algorithm, when it is one
    /// crawlcache computes (SHA-1, SHA-256) and this one decoded.
    fn of(&self, bytes_sha1: &sha1_smol::Sha1, bytes_sha256: &Sha256) -> Option<PayloadDigest> {
        let (algo, digest) = self.0.split_once(':')?;
        // A value that did not decode cannot be checked.
        if !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        match algo {
            "sha1" if digest.len() == 40 => Some(PayloadDigest(format!("sha1:{}", bytes_sha1.digest()))),
            "sha256" if digest.len() == 64 => Some(PayloadDigest(format!("sha256:{}", hex::encode(bytes_sha256.clone().finalize())))),
            _ => None,
        }
    }

    /// The SHA-256 it names, for a `sha256:` digest.
    fn sha256_hex(&self) -> Option<&str> {
        self.0.strip_prefix("sha256:").filter(|h| h.len() == 64)
    }
}

/// A request record, as far as the record key needs it.
#[derive(Debug, Clone)]
struct Request {
    id: String,
    uri: String,
    method: String,
    /// The request target of its request line (origin-form, as sent).
    target: String,
    /// Hex SHA-256 of the request body (methods other than GET and HEAD).
    body_sha256: Option<String>,
    date_ms: Option<u64>,
    fields: Vec<Field>,
    /// The record IDs it names in `WARC-Concurrent-To`.
    concurrent: Vec<String>,
}

/// What a revisit record refers to (WARC/1.1 section 6.7).
#[derive(Debug, Clone)]
struct RevisitOf {
    refers_to: Option<String>,
    target: Option<String>,
    date_ms: Option<u64>,
    /// The `server-not-modified` profile, or a `304` head: the original's
    /// head is replayed, freshened by this one's fields.
    not_modified: bool,
}

/// A response (or revisit) read and its body written (pinned), waiting
/// for its request.
struct Pending {
    file: u32,
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
    payload_digest: Option<PayloadDigest>,
    revisit: Option<RevisitOf>,
}

/// Where a payload of this import is: its response record, and its body
/// as first stored (it may have been released since).
#[derive(Debug, Clone, Copy)]
struct Source {
    file: u32,
    offset: Offset,
    /// SHA-256 and length of the body; `None` for a response without one.
    body: Option<([u8; 32], u64)>,
}

impl Source {
    fn committed(&self) -> Option<CommittedBody> {
        self.body.map(|(h, len)| CommittedBody { sha256: hex::encode(h), len })
    }
}

/// The payload a revisit refers to, found.
enum Payload {
    /// A response of this import.
    InImport(Source),
    /// A stored entry's body (and head).
    Stored { body: Option<CommittedBody>, head: Option<StoredResponse> },
}

/// The most bytes of field lines the revisits waiting for their original
/// may hold (a file of revisits whose originals never come cannot fill
/// the memory): past it, a revisit not resolved when read is reported.
pub const MAX_DEFERRED_BYTES: usize = 64 * 1024 * 1024;

/// Short, fixed-size keys for the import's maps (the first 16 bytes of a
/// SHA-256 of the text).
type MapKey = [u8; 16];

fn map_key(parts: &[&[u8]]) -> MapKey {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// One import of any number of WARC files into a store: revisits refer
/// across the files, captures are ordered across them. Read each file
/// with [`Import::file`], then [`Import::finish`].
pub struct Import<'s> {
    store: &'s Store,
    opts: Options,
    files: Vec<PathBuf>,
    summary: Summary,
    sources: Vec<Source>,
    by_id: HashMap<MapKey, u32>,
    by_digest: HashMap<MapKey, u32>,
    by_capture: HashMap<MapKey, u32>,
    /// Revisits whose payload was not found yet, with their request.
    deferred: Vec<(Pending, Option<Request>)>,
    /// Bytes of the field lines those hold (bounded by [`MAX_DEFERRED_BYTES`]).
    deferred_bytes: usize,
    digests: Option<sled::Tree>,
}

impl<'s> Import<'s> {
    /// An import into `store` under `opts`. The digest tree
    /// ([`DIGEST_TREE`]) is opened if it can be (else revisits are resolved
    /// without it, and a warning logged).
    pub fn new(store: &'s Store, opts: Options) -> Import<'s> {
        let digests = match store.extra_tree(DIGEST_TREE) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("import: the payload digest index cannot be opened ({e}); revisits are resolved within the import only");
                None
            }
        };
        Import {
            store,
            opts,
            files: Vec::new(),
            summary: Summary::default(),
            sources: Vec::new(),
            by_id: HashMap::new(),
            by_digest: HashMap::new(),
            by_capture: HashMap::new(),
            deferred: Vec::new(),
            deferred_bytes: 0,
            digests,
        }
    }

    /// What was done so far.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Imports the WARC file at `path`, named `name` in messages. `problem`
    /// gets one line per record skipped (file, offset, reason); `progress`
    /// the file offset reached after each record. Errors: the file cannot
    /// be opened (nothing of it was imported then).
    pub fn file(&mut self, path: &Path, name: &str, problem: &mut dyn FnMut(String), progress: &mut dyn FnMut(u64)) -> io::Result<()> {
        let mut reader = WarcReader::open(path)?;
        let file = self.files.len() as u32;
        self.files.push(path.to_path_buf());
        let mut state = Matcher::default();
        while let Some(next) = reader.next_record() {
            self.summary.records += 1;
            let head = match next {
                Ok(h) => h,
                Err(e) => {
                    self.summary.skipped += 1;
                    problem(format!("{name}: {e}; skipped"));
                    progress(reader.file_position());
                    continue;
                }
            };
            let outcome = match head.record_type().as_str() {
                "request" => read_request(&mut reader, &head).map(Outcome::Request),
                "response" => read_response(self.store, &mut reader, &head, file).map(Outcome::Response),
                "revisit" => read_revisit(&mut reader, &head, file).map(Outcome::Response),
                _ => Ok(Outcome::Ignored),
            };
            // A record counts only once its block ended where its head said.
            let outcome = match (outcome, reader.finish_block()) {
                (Ok(o), Ok(())) => Ok(o),
                (Ok(Outcome::Response(Some(p))), Err(e)) => {
                    if let Some(b) = &p.body {
                        self.store.discard_body(b);
                    }
                    Err(e.message)
                }
                (Ok(_), Err(e)) | (Err(_), Err(e)) => Err(e.message),
                (Err(e), Ok(())) => Err(e),
            };
            match outcome {
                Err(why) => {
                    self.summary.skipped += 1;
                    problem(format!("{name}: record at {}: {why}; skipped", head.offset));
                }
                Ok(Outcome::Ignored) | Ok(Outcome::Response(None)) | Ok(Outcome::Request(None)) => {}
                Ok(Outcome::Request(Some(req))) => {
                    if let Some((p, req)) = state.add_request(req) {
                        self.settle(p, Some(req), false, problem);
                    }
                }
                Ok(Outcome::Response(Some(p))) => match state.request_for(&p) {
                    Some(req) => self.settle(p, Some(req), false, problem),
                    None => state.hold(p),
                },
            }
            progress(reader.file_position());
        }
        // Responses no request came for: GETs.
        for p in state.drain() {
            self.settle(p, None, false, problem);
        }
        Ok(())
    }

    /// Resolves the revisits still waiting for their payload (reporting
    /// those found nowhere) and returns what the whole import did.
    pub fn finish(mut self, problem: &mut dyn FnMut(String)) -> Summary {
        // A resolved revisit can be the payload of another one: go on while
        // something was resolved.
        loop {
            self.deferred_bytes = 0;
            let waiting = std::mem::take(&mut self.deferred);
            let before = waiting.len();
            for (p, req) in waiting {
                self.settle(p, req, false, problem);
            }
            if self.deferred.is_empty() || self.deferred.len() == before {
                break;
            }
        }
        for (p, req) in std::mem::take(&mut self.deferred) {
            self.settle(p, req, true, problem);
        }
        self.summary
    }

    fn name(&self, file: u32) -> String {
        self.files.get(file as usize).map(|p| p.display().to_string()).unwrap_or_default()
    }

    /// Stores a response or revisit under its record key (with `req`, its
    /// request, if any), or reports why not; releases its body either
    /// way. A revisit whose payload is not found waits (`last`: is
    /// reported instead).
    fn settle(&mut self, mut p: Pending, req: Option<Request>, last: bool, problem: &mut dyn FnMut(String)) {
        let name = self.name(p.file);
        let payload = match &p.revisit {
            None => None,
            Some(_) => match self.resolve(&p, req.as_ref()) {
                Some(payload) => Some(payload),
                None if !last && self.deferred_bytes < MAX_DEFERRED_BYTES => {
                    self.deferred_bytes += fields_bytes(&p.fields) + req.as_ref().map_or(0, |r| fields_bytes(&r.fields));
                    self.deferred.push((p, req));
                    return;
                }
                None if !last => {
                    self.summary.skipped += 1;
                    problem(format!(
                        "{name}: record at {}: {} (and more than {} MiB of revisits already wait for theirs: import the files holding the originals first); skipped",
                        p.offset,
                        unresolved(&p),
                        MAX_DEFERRED_BYTES >> 20
                    ));
                    return;
                }
                None => {
                    self.summary.skipped += 1;
                    problem(format!("{name}: record at {}: {}; skipped", p.offset, unresolved(&p)));
                    return;
                }
            },
        };
        let outcome = self.store_pending(&mut p, req.as_ref(), payload);
        if let Some(b) = p.body.take() {
            self.store.discard_body(&b);
        }
        match outcome {
            Ok(Stored::Inserted(source)) => {
                self.summary.imported += 1;
                if p.revisit.is_some() {
                    self.summary.revisits_resolved += 1;
                }
                self.register(&p, source);
            }
            Ok(Stored::Older(source)) => {
                self.summary.older_kept_out += 1;
                if p.revisit.is_some() {
                    self.summary.revisits_resolved += 1;
                }
                self.register(&p, source);
            }
            Err(why) => {
                self.summary.skipped += 1;
                problem(format!("{name}: record at {}: {why}; skipped", p.offset));
            }
        }
    }

    /// Remembers where the payload of `p` is, for the revisits that may
    /// refer to it.
    fn register(&mut self, p: &Pending, source: Source) {
        let i = self.sources.len() as u32;
        self.sources.push(source);
        if !p.id.is_empty() {
            self.by_id.insert(map_key(&[p.id.as_bytes()]), i);
        }
        if let Some(d) = &p.payload_digest {
            if source.body.is_some() {
                self.by_digest.entry(map_key(&[d.0.as_bytes()])).or_insert(i);
            }
        }
        if let Ok((exact, _)) = client_form(&p.uri, None) {
            self.by_capture.insert(map_key(&[exact.as_bytes(), &(p.date_ms / 1000).to_be_bytes()]), i);
        }
    }

    /// Finds the payload a revisit refers to (see the module docs).
    fn resolve(&self, p: &Pending, req: Option<&Request>) -> Option<Payload> {
        let r = p.revisit.as_ref()?;
        if let Some(id) = &r.refers_to {
            if let Some(&i) = self.by_id.get(&map_key(&[id.as_bytes()])) {
                return Some(Payload::InImport(self.sources[i as usize]));
            }
        }
        if let Some(d) = &p.payload_digest {
            if let Some(&i) = self.by_digest.get(&map_key(&[d.0.as_bytes()])) {
                return Some(Payload::InImport(self.sources[i as usize]));
            }
        }
        let target = r.target.as_deref().unwrap_or(&p.uri);
        let line = if r.target.is_none() { req.map(Request::line) } else { None };
        let exact = client_form(target, line.as_ref()).ok().map(|(e, _)| e);
        if let (Some(exact), Some(date)) = (&exact, r.date_ms) {
            if let Some(&i) = self.by_capture.get(&map_key(&[exact.as_bytes(), &(date / 1000).to_be_bytes()])) {
                return Some(Payload::InImport(self.sources[i as usize]));
            }
        }
        // What is already stored.
        if let Some(d) = &p.payload_digest {
            if let Some(found) = self.stored_by_digest(d) {
                return Some(found);
            }
            if let (Some(h), Some(len)) = (d.sha256_hex(), wh::content_length(&p.fields)) {
                if len >= self.store.inline_max() && self.store.body_path(h).is_file() {
                    return Some(Payload::Stored { body: Some(CommittedBody { sha256: h.to_string(), len }), head: None });
                }
            }
        }
        let exact = exact?;
        let primary = crate::record::key_rules::apply(&self.opts.key_rules, &exact);
        let method = req.map(|r| r.method.as_str()).unwrap_or("GET");
        let method = http::Method::from_bytes(method.as_bytes()).ok()?;
        let key = RecordKey::new(&method, &primary, None).primary();
        let entries = self.store.lookup(&key).ok()?;
        let mut candidates: Vec<(crate::store::Entry, StoredResponse)> =
            entries.into_iter().filter_map(|e| StoredResponse::from_bytes(&e.meta).map(|s| (e, s))).collect();
        if let Some(date) = r.date_ms {
            candidates.retain(|(_, s)| s.response_time_ms / 1000 == date / 1000);
        }
        for (e, s) in candidates {
            let verified = match (&p.payload_digest, &e.body) {
                (Some(d), Some(_)) => self.body_digest(&e, d).map(|mine| &mine == d),
                _ => None,
            };
            // A digest that can be checked must match; one that cannot
            // (an algorithm not computed here, or none) needs the date.
            if verified == Some(true) || (verified.is_none() && r.date_ms.is_some()) {
                return Some(Payload::Stored { body: e.body.clone(), head: Some(s) });
            }
        }
        None
    }

    /// The payload an earlier import stored with digest `d`, if its entry
    /// still holds it.
    fn stored_by_digest(&self, d: &PayloadDigest) -> Option<Payload> {
        let tree = self.digests.as_ref()?;
        let row = tree.get(d.0.as_bytes()).ok()??;
        if row.len() < 41 {
            return None;
        }
        let (sha, rest) = row.split_at(32);
        let (len, rest) = rest.split_at(8);
        let len = u64::from_be_bytes(len.try_into().ok()?);
        let zero = rest.iter().position(|&b| b == 0)?;
        let primary = std::str::from_utf8(&rest[..zero]).ok()?;
        let entry = self.store.lookup_variant(primary, &rest[zero + 1..]).ok()??;
        let body = entry.body.clone()?;
        if body.sha256 != hex::encode(sha) || body.len != len {
            return None;
        }
        Some(Payload::Stored { body: Some(body), head: StoredResponse::from_bytes(&entry.meta) })
    }

    /// The digest of a stored entry's body in the algorithm of `like`
    /// (`None`: an algorithm not computed here, or the body unreadable).
    fn body_digest(&self, e: &crate::store::Entry, like: &PayloadDigest) -> Option<PayloadDigest> {
        let mut r = self.store.read_body(e).ok()?.into_reader();
        let (mut s1, mut s256) = (sha1_smol::Sha1::new(), Sha256::new());
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = r.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            s1.update(&buf[..n]);
            s256.update(&buf[..n]);
        }
        like.of(&s1, &s256)
    }

    /// Stores `p` (its body, or for a revisit the `payload`), unless a
    /// newer capture of the same variant is stored.
    fn store_pending(&mut self, p: &mut Pending, req: Option<&Request>, payload: Option<Payload>) -> Result<Stored, String> {
        let is_head = req.is_some_and(|r| r.method == "HEAD");
        // A revisit's head: its own, or the original's freshened by it.
        let original_head = match (&payload, p.revisit.as_ref().is_some_and(|r| r.not_modified || p.status == 304)) {
            (Some(Payload::Stored { head: Some(h), .. }), true) => Some((h.status, h.headers.clone())),
            (Some(Payload::InImport(src)), true) => Some(self.reread_head(src)?),
            (_, true) => return Err("a not-modified revisit whose original head is not known".into()),
            _ => None,
        };
        if let Some((status, fields)) = original_head {
            p.status = status;
            p.fields = freshen(&fields, &p.fields);
        }
        let (key, secondary_key, stored, normalised) = stored_form(&self.opts, p, req)?;
        let primary = key.primary();
        let body: Option<CommittedBody> = match &payload {
            None => {
                if is_head {
                    if let Some(b) = p.body.take() {
                        self.store.discard_body(&b);
                    }
                    None
                } else {
                    p.body.take()
                }
            }
            Some(_) if is_head => None,
            Some(Payload::InImport(src)) => src.committed(),
            Some(Payload::Stored { body, .. }) => body.clone(),
        };
        let source = match (&payload, &body) {
            (Some(Payload::InImport(src)), _) => *src,
            (_, b) => Source {
                file: p.file,
                offset: p.offset,
                body: b.as_ref().and_then(|b| <[u8; 32]>::try_from(hex::decode(&b.sha256).ok()?.as_slice()).ok().map(|h| (h, b.len))),
            },
        };
        if normalised {
            self.summary.uris_normalised += 1;
        }
        // Several captures: the newest is kept.
        if let Ok(Some(existing)) = self.store.lookup_variant(&primary, &secondary_key) {
            if StoredResponse::from_bytes(&existing.meta).is_some_and(|s| s.response_time_ms > stored.response_time_ms) {
                if let (None, Some(b)) = (&payload, &body) {
                    self.store.discard_body(b);
                }
                return Ok(Stored::Older(source));
            }
        }
        let meta = stored.to_bytes();
        let result = match self.store.insert(&primary, &secondary_key, &meta, body.as_ref()) {
            Err(StoreError::MissingBody(_)) if matches!(payload, Some(Payload::InImport(_))) => {
                // A short body the store no longer finds by its hash: its
                // bytes again, from the record that holds them.
                let Some(Payload::InImport(src)) = &payload else { unreachable!("matched above") };
                let again = self.reread_body(src)?;
                let r = self.store.insert(&primary, &secondary_key, &meta, Some(&again));
                if r.is_err() {
                    self.store.discard_body(&again);
                }
                r
            }
            other => other,
        };
        result.map_err(|e| e.to_string())?;
        self.note_digest(p, &primary, &secondary_key, body.as_ref());
        Ok(Stored::Inserted(source))
    }

    /// Keeps the payload digest of a stored response in [`DIGEST_TREE`].
    fn note_digest(&self, p: &Pending, primary: &str, secondary_key: &[u8], body: Option<&CommittedBody>) {
        let (Some(tree), Some(d), Some(b)) = (&self.digests, &p.payload_digest, body) else { return };
        let Ok(sha) = hex::decode(&b.sha256) else { return };
        let mut row = Vec::with_capacity(41 + primary.len() + secondary_key.len());
        row.extend_from_slice(&sha);
        row.extend_from_slice(&b.len.to_be_bytes());
        row.extend_from_slice(primary.as_bytes());
        row.push(0);
        row.extend_from_slice(secondary_key);
        if let Err(e) = tree.insert(d.0.as_bytes(), row) {
            tracing::warn!("import: cannot note the payload digest of {primary}: {e}");
        }
    }

    /// Opens the record of `src` again: a reader positioned on it.
    fn reopen(&self, src: &Source) -> Result<(WarcReader<BufReader<Window>>, RecordHead), String> {
        let path = self.files.get(src.file as usize).ok_or("no such file in this import")?;
        let name = path.display();
        let window = Window::open(path, src.offset.file).map_err(|e| format!("cannot read {name} again: {e}"))?;
        let mut reader = WarcReader::new(BufReader::new(window)).map_err(|e| format!("cannot read {name} again: {e}"))?;
        let within = src.offset.within_member.unwrap_or(0);
        while let Some(next) = reader.next_record() {
            let head = next.map_err(|e| format!("{name}: {e}"))?;
            if head.offset.file == 0 && head.offset.within_member.unwrap_or(0) == within {
                return Ok((reader, head));
            }
            if head.offset.file > 0 {
                break;
            }
        }
        Err(format!("{name}: the record at {} is no longer there", src.offset))
    }

    /// The payload of `src` read again from its record into the store.
    fn reread_body(&self, src: &Source) -> Result<CommittedBody, String> {
        let (mut reader, head) = self.reopen(src)?;
        let p = read_response(self.store, &mut reader, &head, src.file)?.ok_or("the record is not an HTTP response")?;
        let body = p.body.ok_or("the record has no body")?;
        if src.committed().as_ref() != Some(&body) {
            self.store.discard_body(&body);
            return Err(format!("{}: the record at {} changed since it was read", self.name(src.file), src.offset));
        }
        Ok(body)
    }

    /// The status and fields of the response record of `src`.
    fn reread_head(&self, src: &Source) -> Result<(u16, Vec<Field>), String> {
        let (mut reader, _) = self.reopen(src)?;
        let mut block = reader.block();
        final_head(&mut block)
    }
}

/// What [`Import::store_pending`] did.
enum Stored {
    /// Stored; its payload is at this source.
    Inserted(Source),
    /// Not stored: a newer capture of the same variant is.
    Older(Source),
}

/// Bytes of field lines (names and values).
fn fields_bytes(fields: &[Field]) -> usize {
    fields.iter().map(|(n, v)| n.len() + v.len() + 16).sum::<usize>() + 256
}

/// Why a revisit could not be resolved.
fn unresolved(p: &Pending) -> String {
    let r = p.revisit.as_ref();
    let mut said = Vec::new();
    if let Some(id) = r.and_then(|r| r.refers_to.as_deref()) {
        said.push(format!("WARC-Refers-To {id}"));
    }
    if let Some(t) = r.and_then(|r| r.target.as_deref()) {
        said.push(format!("WARC-Refers-To-Target-URI {t}"));
    }
    if let Some(d) = &p.payload_digest {
        said.push(format!("WARC-Payload-Digest {}", d.0));
    }
    let said = if said.is_empty() { "it names no original".to_string() } else { said.join(", ") };
    format!("revisit of {}: the payload it refers to is neither in this import nor in the store ({said})", p.uri)
}

/// `stored` freshened by the field lines of `update` (RFC 9111 section
/// 3.2): each field `update` carries replaces the stored lines of that
/// name, except the framing ones.
fn freshen(stored: &[Field], update: &[Field]) -> Vec<Field> {
    const KEEP: &[&str] = &["content-length", "transfer-encoding", "content-encoding", "content-range", "content-type"];
    let replaced: Vec<&str> = update.iter().map(|(n, _)| n.as_str()).filter(|n| !KEEP.contains(n)).collect();
    let mut out: Vec<Field> = stored.iter().filter(|(n, _)| !replaced.contains(&n.as_str())).cloned().collect();
    out.extend(update.iter().filter(|(n, _)| replaced.contains(&n.as_str())).cloned());
    out
}

/// Imports the WARC file at `path` into `store` on its own (one
/// [`Import`] of one file). `problem` gets one line per record skipped
/// (file, offset, reason); `progress` the file offset reached after each
/// record. Errors: the file cannot be opened.
pub fn import_file(
    store: &Store,
    path: &Path,
    opts: &Options,
    problem: &mut dyn FnMut(String),
    progress: &mut dyn FnMut(u64),
) -> io::Result<Summary> {
    let mut import = Import::new(store, opts.clone());
    import.file(path, &path.display().to_string(), problem, progress)?;
    Ok(import.finish(problem))
}

/// A file seen from `base` on: offset 0 is `base` (a record read again
/// from its offset).
struct Window {
    file: File,
    base: u64,
}

impl Window {
    fn open(path: &Path, base: u64) -> io::Result<Window> {
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

/// The cache key (before `cache.key_rules`) of the URI a client sends for
/// the target `uri`, and whether it had to be turned into that form: `uri`
/// itself when it is one; else, with a request record, its request line's
/// target and `Host`; else the WHATWG URL serialisation (IRIs: the host in
/// punycode, path and query percent-encoded as UTF-8). Errors: none of
/// these gives an absolute http(s) URI.
pub fn client_form(uri: &str, req: Option<&RequestLine<'_>>) -> Result<(String, bool), String> {
    if let Some(k) = uri.parse::<http::Uri>().ok().and_then(|u| key::primary_key(&u)) {
        if uri.is_ascii() {
            return Ok((k, false));
        }
    }
    let scheme = if uri.get(..8).is_some_and(|p| p.eq_ignore_ascii_case("https://")) { "https" } else { "http" };
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
    let parsed = url::Url::parse(uri.trim()).map_err(|e| format!("WARC-Target-URI {uri:?} is not a URL a client can send ({e})"))?;
    let mut whatwg = parsed.clone();
    whatwg.set_fragment(None);
    let k = whatwg
        .as_str()
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| key::primary_key(&u))
        .ok_or_else(|| format!("WARC-Target-URI {uri:?} is not a URL a client can send (as {whatwg})"))?;
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
    fn line(&self) -> RequestLine<'_> {
        let host = self.fields.iter().find(|(n, _)| n == "host").and_then(|(_, v)| std::str::from_utf8(v).ok()).map(str::trim);
        RequestLine { target: &self.target, host }
    }
}

/// Reads a request record's block: method, body hash. `Ok(None)` for a
/// request that is not HTTP(S).
fn read_request<R: BufRead + Seek>(reader: &mut WarcReader<R>, head: &RecordHead) -> Result<Option<Request>, String> {
    let Some(uri) = target_uri(head).filter(|u| is_http(u)) else { return Ok(None) };
    let mut block = reader.block();
    let raw = wh::read_head(&mut block).map_err(|e| format!("request record: {e}"))?;
    let (method, target, fields) = wh::parse_request_head(&raw).map_err(|e| format!("request record: {e}"))?;
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

/// The final HTTP head of a response block (interim 1xx heads before it
/// skipped).
fn final_head<R: BufRead>(block: &mut R) -> Result<(u16, Vec<Field>), String> {
    loop {
        let raw = wh::read_head(block).map_err(|e| format!("response record: {e}"))?;
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
fn read_response<R: BufRead + Seek>(store: &Store, reader: &mut WarcReader<R>, head: &RecordHead, file: u32) -> Result<Option<Pending>, String> {
    let Some(uri) = target_uri(head).filter(|u| is_http(u)) else { return Ok(None) };
    if let Some(t) = head.get("WARC-Truncated") {
        return Err(format!("the crawler cut this response short (WARC-Truncated: {t}); only whole responses are replayed"));
    }
    let date_ms = head.get("WARC-Date").and_then(parse_warc_date).unwrap_or_else(super::now_ms);
    let mut block = reader.block();
    let (status, fields) = final_head(&mut block)?;
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

/// Reads a revisit record (WARC/1.1 section 6.7): what it refers to, and
/// the HTTP head its block holds (none: the original's, as for the
/// `server-not-modified` profile). `Ok(None)` when it is not HTTP(S).
fn read_revisit<R: BufRead + Seek>(reader: &mut WarcReader<R>, head: &RecordHead, file: u32) -> Result<Option<Pending>, String> {
    let Some(uri) = target_uri(head).filter(|u| is_http(u)) else { return Ok(None) };
    let date_ms = head.get("WARC-Date").and_then(parse_warc_date).unwrap_or_else(super::now_ms);
    let profile = head.get("WARC-Profile").unwrap_or("").to_ascii_lowercase();
    let (status, fields, had_head) = if head.content_length == 0 {
        (0, Vec::new(), false)
    } else {
        let mut block = reader.block();
        let (s, f) = final_head(&mut block)?;
        (s, f, true)
    };
    let revisit = RevisitOf {
        refers_to: head.get("WARC-Refers-To").map(|v| strip_angle_brackets(v).to_string()).filter(|v| !v.is_empty()),
        target: head.get("WARC-Refers-To-Target-URI").map(|v| strip_angle_brackets(v).to_string()).filter(|v| !v.is_empty()),
        date_ms: head.get("WARC-Refers-To-Date").and_then(parse_warc_date),
        not_modified: profile.ends_with("server-not-modified") || !had_head,
    };
    let concurrent = head.get_all("WARC-Concurrent-To").map(|c| strip_angle_brackets(c).to_string()).collect();
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

/// The record key, its variant's secondary key and the stored head of a
/// response, and whether its target URI had to be normalised.
fn stored_form(opts: &Options, p: &Pending, req: Option<&Request>) -> Result<(RecordKey, Vec<u8>, StoredResponse, bool), String> {
    let method_name = req.map(|r| r.method.clone()).unwrap_or_else(|| "GET".to_string());
    let method = http::Method::from_bytes(method_name.as_bytes()).map_err(|_| format!("bad request method {method_name:?}"))?;
    if let (Some(n), false) = (p.body_missing, method == http::Method::HEAD) {
        return Err(format!("the body is missing: Content-Length says {n} bytes, the record holds none"));
    }
    let line = req.map(Request::line);
    let (exact, normalised) = client_form(&p.uri, line.as_ref())?;
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
    let record_key = RecordKey::new(&method, &primary, body_hash.as_deref());
    let response_headers = header_map(&p.fields);
    let request_headers = req.map(|r| header_map(&r.fields)).unwrap_or_default();
    let selection = Selection::of_request(&response_headers, &request_headers);
    let stored = StoredResponse {
        status: p.status,
        headers: crate::cache::policy::headers_to_store(&response_headers, &opts.policy),
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
        assert_eq!(s, Summary { records: 7, imported: 2, skipped: 1, ..Summary::default() }, "{problems:?}");
        assert!(problems.len() == 1 && problems[0].contains("cut short") && problems[0].contains("offset"), "{problems:?}");

        let key = RecordKey::new(&http::Method::POST, "http://a.test/form", Some(&hex::encode(Sha256::digest(b"q=1")))).primary();
        let (stored, body) = body_of(&store, &key).expect("the POST is keyed by its body's hash");
        assert_eq!(body.as_deref(), Some(&b"hello"[..]), "de-chunked");
        assert!(stored.headers.iter().all(|(n, _)| n != "content-length" && n != "transfer-encoding" && n != "set-cookie"), "{:?}", stored.headers);
        assert_eq!(stored.response_time_ms, 1_714_564_800_000);
        assert!(body_of(&store, &RecordKey::get("http://a.test/x").primary()).is_none());
        let (head, body) = body_of(&store, &RecordKey::new(&http::Method::HEAD, "http://a.test/h", None).primary()).unwrap();
        assert_eq!((head.status, body), (200, None));
        let report = store.verify(false).unwrap();
        assert!(report.is_clean(), "{report:?}");
    }

    fn open(tmp: &tempfile::TempDir) -> (Store, Options) {
        let store = Store::open(&tmp.path().join("data"), 1 << 30).unwrap();
        (store, Options { key_rules: Vec::new(), policy: crate::config::Config::defaults().unwrap().policy() })
    }

    fn revisit_fields<'a>(id: &'a str, uri: &'a str, date: &'a str, digest: &'a str, refers: &'a [(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut f = vec![("WARC-Type", "revisit"), ("WARC-Record-ID", id), ("WARC-Target-URI", uri), ("WARC-Date", date), ("WARC-Payload-Digest", digest)];
        f.extend_from_slice(refers);
        f
    }

    #[test]
    fn payload_digests_read_in_every_encoding_warc_writers_use() {
        let raw = sha1_smol::Sha1::from(b"AAA\n").digest().bytes();
        let b32 = format!("sha1:{}", data_encoding::BASE32.encode(&raw));
        let hexed = format!("SHA1:{}", hex::encode(raw));
        let b64 = format!("sha1:{}", data_encoding::BASE64.encode(&raw));
        let want = PayloadDigest::parse(&b32).unwrap();
        assert_eq!(want.0, format!("sha1:{}", hex::encode(raw)));
        assert_eq!(PayloadDigest::parse(&hexed), Some(want.clone()));
        assert_eq!(PayloadDigest::parse(&b64), Some(want.clone()));
        assert_eq!(PayloadDigest::parse(&b32.trim_end_matches('=').to_string()), Some(want));
        assert_eq!(PayloadDigest::parse("nonsense"), None);
        assert_eq!(PayloadDigest::parse("x-other:Zz").unwrap().0, "x-other:zz", "unknown forms are kept as written");
    }

    #[test]
    fn target_uris_become_the_uri_a_client_sends() {
        assert_eq!(client_form("http://a.test/x?y", None), Ok(("http://a.test/x?y".to_string(), false)));
        // An IRI: the WHATWG serialisation (punycode host, UTF-8 percent-encoded path).
        assert_eq!(
            client_form("http://bücher.example/café?q=ü", None),
            Ok(("http://xn--bcher-kva.example/caf%C3%A9?q=%C3%BC".to_string(), true))
        );
        assert_eq!(client_form("http://a.test/b c", None), Ok(("http://a.test/b%20c".to_string(), true)));
        // With a request record, what the client put on its request line.
        let line = RequestLine { target: "/caf%c3%a9", host: Some("a.test") };
        assert_eq!(client_form("http://a.test/café", Some(&line)), Ok(("http://a.test/caf%c3%a9".to_string(), true)));
        assert!(client_form("http://", None).is_err());
        assert!(client_form("not a url", None).is_err());
    }

    #[test]
    fn revisits_resolve_by_refers_to_by_digest_and_by_uri_and_date_in_either_order() {
        let page = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\nAAA\n";
        let digest = format!("sha1:{}", data_encoding::BASE32.encode(&sha1_smol::Sha1::from(b"AAA\n").digest().bytes()));
        let revisit_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Second: yes\r\nContent-Length: 4\r\n\r\n";
        let mut first = WarcWriter::new(Vec::new());
        let f = [("WARC-Type", "response"), ("WARC-Record-ID", "<urn:o1>"), ("WARC-Target-URI", "http://a.test/one"), ("WARC-Date", "2024-05-01T12:00:00Z"), ("WARC-Payload-Digest", digest.as_str())];
        first.write_record(&f, page.len() as u64, &mut &page[..]).unwrap();
        let mut second = WarcWriter::new(Vec::new());
        // By WARC-Refers-To, another URL (as wget --warc-dedup writes them).
        let r = revisit_fields("<urn:v1>", "http://a.test/two", "2024-05-02T12:00:00Z", &digest, &[("WARC-Refers-To", "<urn:o1>"), ("WARC-Truncated", "length")]);
        second.write_record(&r, revisit_head.len() as u64, &mut &revisit_head[..]).unwrap();
        // By the digest alone.
        let r = revisit_fields("<urn:v2>", "http://a.test/three", "2024-05-02T12:00:00Z", &digest, &[]);
        second.write_record(&r, revisit_head.len() as u64, &mut &revisit_head[..]).unwrap();
        // By URI and date, the server-not-modified profile: the original's head.
        let r = revisit_fields("<urn:v3>", "http://a.test/one", "2024-05-03T12:00:00Z", "sha1:unknown", &[
            ("WARC-Refers-To-Target-URI", "http://a.test/one"),
            ("WARC-Refers-To-Date", "2024-05-01T12:00:00Z"),
            ("WARC-Profile", "http://netpreserve.org/warc/1.1/revisit/server-not-modified"),
        ]);
        let nm = b"HTTP/1.1 304 Not Modified\r\nETag: \"e2\"\r\n\r\n";
        second.write_record(&r, nm.len() as u64, &mut &nm[..]).unwrap();
        // Nowhere.
        let r = revisit_fields("<urn:v4>", "http://a.test/lost", "2024-05-02T12:00:00Z", "sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", &[("WARC-Refers-To", "<urn:gone>")]);
        second.write_record(&r, revisit_head.len() as u64, &mut &revisit_head[..]).unwrap();
        let (first, second) = (first.finish().unwrap(), second.finish().unwrap());

        for order in [[0usize, 1], [1, 0]] {
            let tmp = tempfile::tempdir().unwrap();
            let files = [tmp.path().join("first.warc.gz"), tmp.path().join("second.warc.gz")];
            std::fs::write(&files[0], &first).unwrap();
            std::fs::write(&files[1], &second).unwrap();
            let (store, opts) = open(&tmp);
            let mut problems = Vec::new();
            let mut import = Import::new(&store, opts);
            for i in order {
                import.file(&files[i], &files[i].display().to_string(), &mut |p| problems.push(p), &mut |_| {}).unwrap();
            }
            let s = import.finish(&mut |p| problems.push(p));
            assert_eq!((s.imported, s.revisits_resolved, s.skipped), (4, 3, 1), "order {order:?}: {s:?} {problems:?}");
            assert!(problems.len() == 1 && problems[0].contains("/lost") && problems[0].contains("second.warc.gz"), "{problems:?}");
            for path in ["/one", "/two", "/three"] {
                let (head, body) = body_of(&store, &RecordKey::get(&format!("http://a.test{path}")).primary()).unwrap();
                assert_eq!(body.as_deref(), Some(&b"AAA\n"[..]), "order {order:?}: {path}");
                assert_eq!(head.status, 200, "{path}");
            }
            let (two, _) = body_of(&store, &RecordKey::get("http://a.test/two").primary()).unwrap();
            assert!(two.headers.iter().any(|(n, _)| n == "x-second"), "the revisit's own head");
            let (one, _) = body_of(&store, &RecordKey::get("http://a.test/one").primary()).unwrap();
            assert_eq!(one.response_time_ms, 1_714_737_600_000, "the newer capture (the 304 revisit) is kept");
            assert!(one.headers.iter().any(|(n, v)| n == "etag" && v == b"\"e2\""), "freshened by the 304: {:?}", one.headers);
            assert!(store.verify(false).unwrap().is_clean());

            // Against what is already stored: the revisits alone, in a new import.
            let tmp2 = tempfile::tempdir().unwrap();
            let (store2, opts) = open(&tmp2);
            import_file(&store2, &files[0], &opts, &mut |_| {}, &mut |_| {}).unwrap();
            let mut problems = Vec::new();
            let s = import_file(&store2, &files[1], &opts, &mut |p| problems.push(p), &mut |_| {}).unwrap();
            assert_eq!((s.imported, s.revisits_resolved), (3, 3), "{s:?} {problems:?}");
            let (_, body) = body_of(&store2, &RecordKey::get("http://a.test/three").primary()).unwrap();
            assert_eq!(body.as_deref(), Some(&b"AAA\n"[..]));
        }
    }

    #[test]
    fn the_newest_capture_is_kept_whatever_the_order() {
        let capture = |date: &str, body: &[u8]| {
            let mut w = WarcWriter::new(Vec::new());
            let block = [format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes(), body.to_vec()].concat();
            let f = [("WARC-Type", "response"), ("WARC-Record-ID", "<urn:x>"), ("WARC-Target-URI", "http://a.test/p"), ("WARC-Date", date)];
            w.write_record(&f, block.len() as u64, &mut &block[..]).unwrap();
            w.finish().unwrap()
        };
        let (old, new) = (capture("2023-01-01T00:00:00Z", b"old"), capture("2024-01-01T00:00:00Z", b"new"));
        for (a, b) in [(&old, &new), (&new, &old)] {
            let tmp = tempfile::tempdir().unwrap();
            let (fa, fb) = (tmp.path().join("a.warc.gz"), tmp.path().join("b.warc.gz"));
            std::fs::write(&fa, a).unwrap();
            std::fs::write(&fb, b).unwrap();
            let (store, opts) = open(&tmp);
            let mut import = Import::new(&store, opts);
            import.file(&fa, "a", &mut |_| {}, &mut |_| {}).unwrap();
            import.file(&fb, "b", &mut |_| {}, &mut |_| {}).unwrap();
            let s = import.finish(&mut |_| {});
            assert_eq!(s.older_kept_out + s.imported, 2);
            let (_, body) = body_of(&store, &RecordKey::get("http://a.test/p").primary()).unwrap();
            assert_eq!(body.as_deref(), Some(&b"new"[..]));
        }
    }
}
