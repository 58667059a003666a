//! WARC `response`, `resource` and `revisit` records into the record store
//! (SPEC section 6), so that `crawlcache serve --offline` replays what the
//! archive says was served.
//!
//! Each `response` record with an `http://` or `https://` target becomes a
//! record ([`crawlcache_policy::store_key::RecordKey`]: the method, the URL and, for
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
//!   ([`crawlcache_policy::cache::headers_to_store`]: hop-by-hop fields and,
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
//! **Resources** (WARC/1.1 section 6.4: warcio, Browsertrix, pywb's own
//! recorder): a `resource` record with an http(s) target is stored as pywb
//! replays it: a GET answered `200`, the record's `Content-Type` its one
//! field, the whole block its body, `WARC-Date` its response time. It has
//! no request record; several captures and revisits treat it as a response.
//!
//! **Every record is counted** ([`Summary`]) in exactly one of: imported;
//! already present (the variant already holds this head and body: a file
//! imported twice stores nothing the second time); an older capture kept
//! out; failed (reported with its file and offset: a malformed or
//! truncated record, a body cut short by the file, by a broken chunked
//! framing, by `WARC-Truncated` on a response or resource, or shorter than
//! its `Content-Length`, a body over the store's budget); or skipped by
//! its `WARC-Type` as replaying nothing: `warcinfo`, `metadata`,
//! `request` (read for its response's method and variant), `conversion`,
//! `continuation`, responses, resources and revisits for other schemes
//! (`dns:`, `urn:`), unknown types, and revisits whose payload is found
//! nowhere (these are also reported). A body is committed only together
//! with its index entry: a failed record leaves nothing in the store, and
//! what was imported before it stays.
//!
//! Memory: about 150 bytes per response record for the length of one
//! import (the payloads revisits may refer to), plus the heads of revisits
//! waiting for their original (at most [`MAX_DEFERRED_BYTES`]).

use std::collections::HashMap;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::http::{self as wh, Field};
use super::reader::{RecordHead, WarcReader};
use crawlcache_policy::cache::StoredResponse;
use crawlcache_policy::store_key::RecordKey;
use crawlcache_store::{CommittedBody, Store, StoreError};

mod matcher;
mod read;
mod types;

use matcher::*;
use read::*;
pub use read::{client_form, RecordError, RequestLine};
use types::*;
pub use types::{Options, PayloadDigest, Summary, DIGEST_TREE, MAX_DEFERRED_BYTES};

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
    /// The variants (primary and secondary key) this import inserted: a
    /// newer capture replacing one of them makes that one "kept out", so
    /// the summary does not depend on the order of the captures.
    inserted: std::collections::HashSet<MapKey>,
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
            inserted: std::collections::HashSet::new(),
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
    pub fn file(
        &mut self,
        path: &Path,
        name: &str,
        problem: &mut dyn FnMut(String),
        progress: &mut dyn FnMut(u64),
    ) -> io::Result<()> {
        let mut reader = WarcReader::open(path)?;
        let file = self.files.len() as u32;
        self.files.push(path.to_path_buf());
        let mut state = Matcher::default();
        while let Some(next) = reader.next_record() {
            self.summary.records += 1;
            let head = match next {
                Ok(h) => h,
                Err(e) => {
                    self.summary.failed += 1;
                    problem(format!("{name}: {e}; skipped"));
                    progress(reader.file_position());
                    continue;
                }
            };
            let kind = head.record_type();
            let outcome = match kind.as_str() {
                "request" => read_request(&mut reader, &head).map(Outcome::Request),
                "response" => {
                    read_response(self.store, &mut reader, &head, file).map(Outcome::Response)
                }
                "resource" => {
                    read_resource(self.store, &mut reader, &head, file).map(Outcome::Resource)
                }
                "revisit" => read_revisit(&mut reader, &head, file).map(Outcome::Response),
                _ => Ok(Outcome::Ignored),
            };
            // A record counts only once its block ended where its head said.
            let outcome = match (outcome, reader.finish_block()) {
                (Ok(o), Ok(())) => Ok(o),
                (Ok(Outcome::Response(Some(p)) | Outcome::Resource(Some(p))), Err(e)) => {
                    if let Some(b) = &p.body {
                        self.store.discard_body(b);
                    }
                    Err(RecordError::Read(e))
                }
                (Ok(_), Err(e)) | (Err(_), Err(e)) => Err(RecordError::Read(e)),
                (Err(e), Ok(())) => Err(e),
            };
            match outcome {
                Err(why) => {
                    self.summary.failed += 1;
                    problem(format!("{name}: record at {}: {why}; skipped", head.offset));
                }
                // Nothing to replay: counted by type (a request also when
                // it gives its response the method and variant).
                Ok(
                    Outcome::Ignored
                    | Outcome::Response(None)
                    | Outcome::Resource(None)
                    | Outcome::Request(None),
                ) => self.summary.skip(&kind),
                Ok(Outcome::Request(Some(req))) => {
                    self.summary.skip(&kind);
                    if let Some((p, req)) = state.add_request(req) {
                        self.settle(p, Some(req), false, problem);
                    }
                }
                // A resource has no request (WARC/1.1 section 6.4): a GET.
                Ok(Outcome::Resource(Some(p))) => self.settle(p, None, false, problem),
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
    fn settle(
        &mut self,
        mut p: Pending,
        req: Option<Request>,
        last: bool,
        problem: &mut dyn FnMut(String),
    ) {
        let name = self.name(p.file);
        let payload = match &p.revisit {
            None => None,
            Some(_) => match self.resolve(&p, req.as_ref()) {
                Some(payload) => Some(payload),
                None if !last && self.deferred_bytes < MAX_DEFERRED_BYTES => {
                    self.deferred_bytes += fields_bytes(&p.fields)
                        + req.as_ref().map_or(0, |r| fields_bytes(&r.fields));
                    self.deferred.push((p, req));
                    return;
                }
                None if !last => {
                    self.summary.skip("revisit");
                    problem(format!(
                        "{name}: record at {}: {} (and more than {} MiB of revisits already wait for theirs: import the files holding the originals first); skipped",
                        p.offset,
                        unresolved(&p),
                        MAX_DEFERRED_BYTES >> 20
                    ));
                    return;
                }
                None => {
                    self.summary.skip("revisit");
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
            Ok(stored) => {
                let source = match stored {
                    Stored::Inserted(source) => {
                        self.summary.imported += 1;
                        source
                    }
                    Stored::Replaced(source) => {
                        // The capture this one replaced was counted as
                        // imported by this run: it is kept out now, and this
                        // one takes its place among the imported.
                        self.summary.older_kept_out += 1;
                        source
                    }
                    Stored::Present(source) => {
                        self.summary.already_present += 1;
                        source
                    }
                    Stored::Older(source) => {
                        self.summary.older_kept_out += 1;
                        source
                    }
                };
                if p.revisit.is_some() {
                    self.summary.revisits_resolved += 1;
                }
                self.register(&p, source);
            }
            Err(why) => {
                self.summary.failed += 1;
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
            self.by_capture
                .insert(map_key(&[exact.as_bytes(), &(p.date_ms / 1000).to_be_bytes()]), i);
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
            if let Some(&i) =
                self.by_capture.get(&map_key(&[exact.as_bytes(), &(date / 1000).to_be_bytes()]))
            {
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
                    return Some(Payload::Stored {
                        body: Some(CommittedBody { sha256: h.to_string(), len }),
                        head: None,
                    });
                }
            }
        }
        let exact = exact?;
        let primary = crawlcache_policy::key_rules::apply(&self.opts.key_rules, &exact);
        let method = req.map(|r| r.method.as_str()).unwrap_or("GET");
        let method = http::Method::from_bytes(method.as_bytes()).ok()?;
        let key = RecordKey::new(&method, &primary, None).primary();
        let entries = self.store.lookup(&key).ok()?;
        let mut candidates: Vec<(crawlcache_store::Entry, StoredResponse)> = entries
            .into_iter()
            .filter_map(|e| StoredResponse::from_bytes(&e.meta).map(|s| (e, s)))
            .collect();
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
    fn body_digest(
        &self,
        e: &crawlcache_store::Entry,
        like: &PayloadDigest,
    ) -> Option<PayloadDigest> {
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
    fn store_pending(
        &mut self,
        p: &mut Pending,
        req: Option<&Request>,
        payload: Option<Payload>,
    ) -> Result<Stored, RecordError> {
        let is_head = req.is_some_and(|r| r.method == "HEAD");
        // A revisit's head: its own, or the original's freshened by it.
        let original_head =
            match (&payload, p.revisit.as_ref().is_some_and(|r| r.not_modified || p.status == 304))
            {
                (Some(Payload::Stored { head: Some(h), .. }), true) => {
                    Some((h.status, h.headers.clone()))
                }
                (Some(Payload::InImport(src)), true) => Some(self.reread_head(src)?),
                (_, true) => return Err(RecordError::UnknownOriginalHead),
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
                body: b.as_ref().and_then(|b| {
                    <[u8; 32]>::try_from(hex::decode(&b.sha256).ok()?.as_slice())
                        .ok()
                        .map(|h| (h, b.len))
                }),
            },
        };
        if normalised {
            self.summary.uris_normalised += 1;
        }
        let meta = stored.to_bytes();
        // Several captures: the newest is kept; the same one again is not
        // stored twice.
        if let Ok(Some(existing)) = self.store.lookup_variant(&primary, &secondary_key) {
            let older = StoredResponse::from_bytes(&existing.meta)
                .is_some_and(|s| crawlcache_policy::cache::variant::newer(&s, &stored));
            let same = existing.meta == meta && existing.body == body;
            if older || same {
                if let (None, Some(b)) = (&payload, &body) {
                    self.store.discard_body(b);
                }
                if same {
                    self.note_digest(p, &primary, &secondary_key, body.as_ref());
                    return Ok(Stored::Present(source));
                }
                return Ok(Stored::Older(source));
            }
        }
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
        result?;
        self.note_digest(p, &primary, &secondary_key, body.as_ref());
        match self.inserted.insert(map_key(&[primary.as_bytes(), &secondary_key])) {
            true => Ok(Stored::Inserted(source)),
            false => Ok(Stored::Replaced(source)),
        }
    }

    /// Keeps the payload digest of a stored response in [`DIGEST_TREE`].
    fn note_digest(
        &self,
        p: &Pending,
        primary: &str,
        secondary_key: &[u8],
        body: Option<&CommittedBody>,
    ) {
        let (Some(tree), Some(d), Some(b)) = (&self.digests, &p.payload_digest, body) else {
            return;
        };
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
    fn reopen(
        &self,
        src: &Source,
    ) -> Result<(WarcReader<BufReader<Window>>, RecordHead), RecordError> {
        let path = self
            .files
            .get(src.file as usize)
            .ok_or(RecordError::NotAsBefore("is in no file of this import"))?;
        let name = path.display().to_string();
        let reopen = |source| RecordError::Reopen { name: name.clone(), source };
        let window = Window::open(path, src.offset.file).map_err(reopen)?;
        let mut reader = WarcReader::new(BufReader::new(window)).map_err(reopen)?;
        let within = src.offset.within_member.unwrap_or(0);
        while let Some(next) = reader.next_record() {
            let head =
                next.map_err(|e| RecordError::Reread { name: name.clone(), why: e.to_string() })?;
            if head.offset.file == 0 && head.offset.within_member.unwrap_or(0) == within {
                return Ok((reader, head));
            }
            if head.offset.file > 0 {
                break;
            }
        }
        Err(RecordError::Changed { name, offset: src.offset, what: "is no longer there" })
    }

    /// The payload of `src` read again from its record into the store.
    fn reread_body(&self, src: &Source) -> Result<CommittedBody, RecordError> {
        let (mut reader, head) = self.reopen(src)?;
        let p = match head.record_type().as_str() {
            "resource" => read_resource(self.store, &mut reader, &head, src.file)?,
            _ => read_response(self.store, &mut reader, &head, src.file)?,
        };
        let p = p.ok_or(RecordError::NotAsBefore("is not an HTTP response"))?;
        let body = p.body.ok_or(RecordError::NotAsBefore("has no body"))?;
        if src.committed().as_ref() != Some(&body) {
            self.store.discard_body(&body);
            return Err(RecordError::Changed {
                name: self.name(src.file),
                offset: src.offset,
                what: "changed since it was read",
            });
        }
        Ok(body)
    }

    /// The status and fields of the response record of `src`.
    fn reread_head(&self, src: &Source) -> Result<(u16, Vec<Field>), RecordError> {
        let (mut reader, head) = self.reopen(src)?;
        if head.record_type() == "resource" {
            return Ok((200, resource_fields(&head)));
        }
        let mut block = reader.block();
        final_head(&mut block)
    }
}

/// What [`Import::store_pending`] did.
enum Stored {
    /// Stored; its payload is at this source.
    Inserted(Source),
    /// Stored in place of an older capture this import had stored.
    Replaced(Source),
    /// Not stored: a newer capture of the same variant is.
    Older(Source),
    /// Not stored again: the variant holds this very head and body.
    Present(Source),
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
    const KEEP: &[&str] = &[
        "content-length",
        "transfer-encoding",
        "content-encoding",
        "content-range",
        "content-type",
    ];
    let replaced: Vec<&str> =
        update.iter().map(|(n, _)| n.as_str()).filter(|n| !KEEP.contains(n)).collect();
    let mut out: Vec<Field> =
        stored.iter().filter(|(n, _)| !replaced.contains(&n.as_str())).cloned().collect();
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

#[cfg(test)]
mod tests {
    use super::super::writer::WarcWriter;
    use super::*;

    fn record(
        w: &mut WarcWriter<Vec<u8>>,
        kind: &str,
        id: &str,
        uri: &str,
        concurrent: Option<&str>,
        block: &[u8],
    ) {
        let mut fields = vec![
            ("WARC-Type", kind),
            ("WARC-Record-ID", id),
            ("WARC-Target-URI", uri),
            ("WARC-Date", "2024-05-01T12:00:00Z"),
        ];
        if let Some(c) = concurrent {
            fields.push(("WARC-Concurrent-To", c));
        }
        w.write_record(&fields, block.len() as u64, &mut &block[..]).unwrap();
    }

    fn body_of(store: &Store, key: &str) -> Option<(StoredResponse, Option<Vec<u8>>)> {
        let e = store.lookup(key).unwrap().into_iter().next()?;
        let body = e.body.as_ref().map(|_| {
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut store.read_body(&e).unwrap().into_reader(), &mut out)
                .unwrap();
            out
        });
        Some((StoredResponse::from_bytes(&e.meta).unwrap(), body))
    }

    #[test]
    fn responses_pair_with_requests_in_either_order_and_bad_bodies_leave_nothing() {
        let mut w = WarcWriter::new(Vec::new());
        // Heritrix order: the response first, its request after, naming it.
        record(
            &mut w,
            "response",
            "<urn:r1>",
            "<http://a.test/form>",
            None,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\nSet-Cookie: s=1\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        );
        record(
            &mut w,
            "request",
            "<urn:q1>",
            "http://a.test/form",
            Some("<urn:r1>"),
            b"POST /form HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\nq=1",
        );
        // A body shorter than its Content-Length.
        record(
            &mut w,
            "request",
            "<urn:q2>",
            "http://a.test/x",
            None,
            b"GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n",
        );
        record(
            &mut w,
            "response",
            "<urn:r2>",
            "http://a.test/x",
            Some("<urn:q2>"),
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd",
        );
        // An answer to HEAD: a length, no body.
        record(
            &mut w,
            "request",
            "<urn:q3>",
            "http://a.test/h",
            None,
            b"HEAD /h HTTP/1.1\r\nHost: a.test\r\n\r\n",
        );
        record(
            &mut w,
            "response",
            "<urn:r3>",
            "http://a.test/h",
            None,
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
        );
        // Not HTTP: ignored.
        record(
            &mut w,
            "response",
            "<urn:r4>",
            "dns:a.test",
            None,
            b"20240501 a.test. 300 IN A 192.0.2.1",
        );
        let bytes = w.finish().unwrap();

        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("t.warc.gz");
        std::fs::write(&file, &bytes).unwrap();
        let store = Store::open(&tmp.path().join("data"), 1 << 30).unwrap();
        let opts = Options {
            key_rules: Vec::new(),
            policy: crate::config::Config::defaults().unwrap().policy(),
        };
        let mut problems = Vec::new();
        let s = import_file(&store, &file, &opts, &mut |p| problems.push(p), &mut |_| {}).unwrap();
        let skipped_by_type = [("request".to_string(), 3), ("response".to_string(), 1)].into();
        assert_eq!(
            s,
            Summary { records: 7, imported: 2, failed: 1, skipped_by_type, ..Summary::default() },
            "{problems:?}"
        );
        assert!(
            problems.len() == 1
                && problems[0].contains("cut short")
                && problems[0].contains("offset"),
            "{problems:?}"
        );

        let key = RecordKey::new(
            &http::Method::POST,
            "http://a.test/form",
            Some(&hex::encode(Sha256::digest(b"q=1"))),
        )
        .primary();
        let (stored, body) = body_of(&store, &key).expect("the POST is keyed by its body's hash");
        assert_eq!(body.as_deref(), Some(&b"hello"[..]), "de-chunked");
        assert!(
            stored.headers.iter().all(|(n, _)| n != "content-length"
                && n != "transfer-encoding"
                && n != "set-cookie"),
            "{:?}",
            stored.headers
        );
        assert_eq!(stored.response_time_ms, 1_714_564_800_000);
        assert!(body_of(&store, &RecordKey::get("http://a.test/x").primary()).is_none());
        let (head, body) = body_of(
            &store,
            &RecordKey::new(&http::Method::HEAD, "http://a.test/h", None).primary(),
        )
        .unwrap();
        assert_eq!((head.status, body), (200, None));
        let report = store.verify(false).unwrap();
        assert!(report.is_clean(), "{report:?}");
    }

    fn open(tmp: &tempfile::TempDir) -> (Store, Options) {
        let store = Store::open(&tmp.path().join("data"), 1 << 30).unwrap();
        (
            store,
            Options {
                key_rules: Vec::new(),
                policy: crate::config::Config::defaults().unwrap().policy(),
            },
        )
    }

    fn revisit_fields<'a>(
        id: &'a str,
        uri: &'a str,
        date: &'a str,
        digest: &'a str,
        refers: &'a [(&'a str, &'a str)],
    ) -> Vec<(&'a str, &'a str)> {
        let mut f = vec![
            ("WARC-Type", "revisit"),
            ("WARC-Record-ID", id),
            ("WARC-Target-URI", uri),
            ("WARC-Date", date),
            ("WARC-Payload-Digest", digest),
        ];
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
        assert_eq!(PayloadDigest::parse(b32.trim_end_matches('=')), Some(want));
        assert_eq!(PayloadDigest::parse("nonsense"), None);
        assert_eq!(
            PayloadDigest::parse("x-other:Zz").unwrap().0,
            "x-other:zz",
            "unknown forms are kept as written"
        );
    }

    #[test]
    fn target_uris_become_the_uri_a_client_sends() {
        assert_eq!(
            client_form("http://a.test/x?y", None).ok(),
            Some(("http://a.test/x?y".to_string(), false))
        );
        // An IRI: the WHATWG serialisation (punycode host, UTF-8 percent-encoded path).
        assert_eq!(
            client_form("http://bücher.example/café?q=ü", None).ok(),
            Some(("http://xn--bcher-kva.example/caf%C3%A9?q=%C3%BC".to_string(), true))
        );
        assert_eq!(
            client_form("http://a.test/b c", None).ok(),
            Some(("http://a.test/b%20c".to_string(), true))
        );
        // With a request record, what the client put on its request line.
        let line = RequestLine { target: "/caf%c3%a9", host: Some("a.test") };
        assert_eq!(
            client_form("http://a.test/café", Some(&line)).ok(),
            Some(("http://a.test/caf%c3%a9".to_string(), true))
        );
        assert!(client_form("http://", None).is_err());
        assert!(client_form("not a url", None).is_err());
    }

    #[test]
    fn revisits_resolve_by_refers_to_by_digest_and_by_uri_and_date_in_either_order() {
        let page = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\nAAA\n";
        let digest = format!(
            "sha1:{}",
            data_encoding::BASE32.encode(&sha1_smol::Sha1::from(b"AAA\n").digest().bytes())
        );
        let revisit_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Second: yes\r\nContent-Length: 4\r\n\r\n";
        let mut first = WarcWriter::new(Vec::new());
        let f = [
            ("WARC-Type", "response"),
            ("WARC-Record-ID", "<urn:o1>"),
            ("WARC-Target-URI", "http://a.test/one"),
            ("WARC-Date", "2024-05-01T12:00:00Z"),
            ("WARC-Payload-Digest", digest.as_str()),
        ];
        first.write_record(&f, page.len() as u64, &mut &page[..]).unwrap();
        let mut second = WarcWriter::new(Vec::new());
        // By WARC-Refers-To, another URL (as wget --warc-dedup writes them).
        let r = revisit_fields(
            "<urn:v1>",
            "http://a.test/two",
            "2024-05-02T12:00:00Z",
            &digest,
            &[("WARC-Refers-To", "<urn:o1>"), ("WARC-Truncated", "length")],
        );
        second.write_record(&r, revisit_head.len() as u64, &mut &revisit_head[..]).unwrap();
        // By the digest alone.
        let r =
            revisit_fields("<urn:v2>", "http://a.test/three", "2024-05-02T12:00:00Z", &digest, &[]);
        second.write_record(&r, revisit_head.len() as u64, &mut &revisit_head[..]).unwrap();
        // By URI and date, the server-not-modified profile: the original's head.
        let r = revisit_fields(
            "<urn:v3>",
            "http://a.test/one",
            "2024-05-03T12:00:00Z",
            "sha1:unknown",
            &[
                ("WARC-Refers-To-Target-URI", "http://a.test/one"),
                ("WARC-Refers-To-Date", "2024-05-01T12:00:00Z"),
                ("WARC-Profile", "http://netpreserve.org/warc/1.1/revisit/server-not-modified"),
            ],
        );
        let nm = b"HTTP/1.1 304 Not Modified\r\nETag: \"e2\"\r\n\r\n";
        second.write_record(&r, nm.len() as u64, &mut &nm[..]).unwrap();
        // Nowhere.
        let r = revisit_fields(
            "<urn:v4>",
            "http://a.test/lost",
            "2024-05-02T12:00:00Z",
            "sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            &[("WARC-Refers-To", "<urn:gone>")],
        );
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
                import
                    .file(
                        &files[i],
                        &files[i].display().to_string(),
                        &mut |p| problems.push(p),
                        &mut |_| {},
                    )
                    .unwrap();
            }
            let s = import.finish(&mut |p| problems.push(p));
            // The revisit of /one is a newer capture of the original it
            // resolves to: that original is kept out, in either order.
            assert_eq!(
                (s.imported, s.older_kept_out, s.revisits_resolved, s.failed),
                (3, 1, 3, 0),
                "order {order:?}: {s:?} {problems:?}"
            );
            assert_eq!(
                (s.skipped_by_type.get("revisit"), s.accounted()),
                (Some(&1), s.records),
                "the lost revisit, by its type: {s:?}"
            );
            assert!(
                problems.len() == 1
                    && problems[0].contains("/lost")
                    && problems[0].contains("second.warc.gz"),
                "{problems:?}"
            );
            for path in ["/one", "/two", "/three"] {
                let (head, body) =
                    body_of(&store, &RecordKey::get(&format!("http://a.test{path}")).primary())
                        .unwrap();
                assert_eq!(body.as_deref(), Some(&b"AAA\n"[..]), "order {order:?}: {path}");
                assert_eq!(head.status, 200, "{path}");
            }
            let (two, _) = body_of(&store, &RecordKey::get("http://a.test/two").primary()).unwrap();
            assert!(two.headers.iter().any(|(n, _)| n == "x-second"), "the revisit's own head");
            let (one, _) = body_of(&store, &RecordKey::get("http://a.test/one").primary()).unwrap();
            assert_eq!(
                one.response_time_ms, 1_714_737_600_000,
                "the newer capture (the 304 revisit) is kept"
            );
            assert!(
                one.headers.iter().any(|(n, v)| n == "etag" && v == b"\"e2\""),
                "freshened by the 304: {:?}",
                one.headers
            );
            assert!(store.verify(false).unwrap().is_clean());

            // Against what is already stored: the revisits alone, in a new import.
            let tmp2 = tempfile::tempdir().unwrap();
            let (store2, opts) = open(&tmp2);
            import_file(&store2, &files[0], &opts, &mut |_| {}, &mut |_| {}).unwrap();
            let mut problems = Vec::new();
            let s = import_file(&store2, &files[1], &opts, &mut |p| problems.push(p), &mut |_| {})
                .unwrap();
            assert_eq!((s.imported, s.revisits_resolved), (3, 3), "{s:?} {problems:?}");
            let (_, body) =
                body_of(&store2, &RecordKey::get("http://a.test/three").primary()).unwrap();
            assert_eq!(body.as_deref(), Some(&b"AAA\n"[..]));
        }
    }

    #[test]
    fn the_newest_capture_is_kept_whatever_the_order() {
        let capture = |date: &str, body: &[u8]| {
            let mut w = WarcWriter::new(Vec::new());
            let block = [
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes(),
                body.to_vec(),
            ]
            .concat();
            let f = [
                ("WARC-Type", "response"),
                ("WARC-Record-ID", "<urn:x>"),
                ("WARC-Target-URI", "http://a.test/p"),
                ("WARC-Date", date),
            ];
            w.write_record(&f, block.len() as u64, &mut &block[..]).unwrap();
            w.finish().unwrap()
        };
        let (old, new) =
            (capture("2023-01-01T00:00:00Z", b"old"), capture("2024-01-01T00:00:00Z", b"new"));
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
            assert_eq!(
                (s.imported, s.older_kept_out),
                (1, 1),
                "whatever the order of the captures: {s}"
            );
            let (_, body) = body_of(&store, &RecordKey::get("http://a.test/p").primary()).unwrap();
            assert_eq!(body.as_deref(), Some(&b"new"[..]));
        }
    }

    /// A record of a test WARC: its named fields and its block.
    type TestRecord<'a> = (Vec<(&'a str, &'a str)>, &'a [u8]);

    /// A WARC file of `(fields, block)` records, each its own gzip member.
    fn warc_of(records: &[TestRecord<'_>]) -> Vec<u8> {
        let mut w = WarcWriter::new(Vec::new());
        for (fields, block) in records {
            w.write_record(fields, block.len() as u64, &mut &block[..]).unwrap();
        }
        w.finish().unwrap()
    }

    fn import_bytes(
        store: &Store,
        opts: &Options,
        dir: &std::path::Path,
        name: &str,
        bytes: &[u8],
    ) -> (Summary, Vec<String>) {
        let file = dir.join(name);
        std::fs::write(&file, bytes).unwrap();
        let mut problems = Vec::new();
        let s = import_file(store, &file, opts, &mut |p| problems.push(p), &mut |_| {}).unwrap();
        (s, problems)
    }

    fn typed<'a>(kind: &'a str, uri: &'a str, id: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("WARC-Type", kind),
            ("WARC-Record-ID", id),
            ("WARC-Target-URI", uri),
            ("WARC-Date", "2024-05-01T12:00:00Z"),
        ]
    }

    #[test]
    fn resources_replay_as_pywb_replays_them_warc_1_1_section_6_4() {
        let png: &[u8] = b"\x89PNG\r\n\x1a\n not really";
        let with_type = |kind, uri, id, ct| {
            let mut f = typed(kind, uri, id);
            f.push(("Content-Type", ct));
            f
        };
        let bytes = warc_of(&[
            (with_type("resource", "http://a.test/logo.png", "<urn:s1>", "image/png"), png),
            // A body that looks like an HTTP message is still the body.
            (
                with_type(
                    "resource",
                    "https://a.test/notes.txt",
                    "<urn:s2>",
                    "text/plain; charset=utf-8",
                ),
                b"HTTP/1.1 200 OK\r\n\r\nnot a head",
            ),
            (typed("resource", "http://a.test/untyped", "<urn:s3>"), b"bytes"),
            (typed("resource", "http://a.test/empty", "<urn:s4>"), b""),
            // Cut short by the crawler: not replayed.
            (
                {
                    let mut f =
                        with_type("resource", "http://a.test/cut", "<urn:s5>", "text/plain");
                    f.push(("WARC-Truncated", "length"));
                    f
                },
                b"part",
            ),
            // Not http(s): nothing to replay.
            (
                with_type(
                    "resource",
                    "urn:pageinfo:http://a.test/",
                    "<urn:s6>",
                    "application/json",
                ),
                b"{}",
            ),
            (
                with_type("resource", "dns:a.test", "<urn:s7>", "text/dns"),
                b"20240501 a.test. 300 IN A 192.0.2.1",
            ),
        ]);
        let tmp = tempfile::tempdir().unwrap();
        let (store, opts) = open(&tmp);
        let (s, problems) = import_bytes(&store, &opts, tmp.path(), "r.warc.gz", &bytes);
        assert_eq!(
            (s.records, s.imported, s.failed, s.skipped_by_type.get("resource")),
            (7, 4, 1, Some(&2)),
            "{s:?} {problems:?}"
        );
        assert!(problems.len() == 1 && problems[0].contains("WARC-Truncated"), "{problems:?}");
        let expect = [
            ("http://a.test/logo.png", Some("image/png"), png),
            (
                "https://a.test/notes.txt",
                Some("text/plain; charset=utf-8"),
                &b"HTTP/1.1 200 OK\r\n\r\nnot a head"[..],
            ),
            ("http://a.test/untyped", None, &b"bytes"[..]),
            ("http://a.test/empty", None, &b""[..]),
        ];
        for (url, ct, body) in expect {
            let (head, stored) = body_of(&store, &RecordKey::get(url).primary())
                .unwrap_or_else(|| panic!("{url} is stored"));
            assert_eq!(head.status, 200, "{url}");
            let got: Vec<(&str, &[u8])> =
                head.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())).collect();
            assert_eq!(
                got,
                ct.map(|c| vec![("content-type", c.as_bytes())]).unwrap_or_default(),
                "{url}: the record's Content-Type only"
            );
            assert_eq!(stored.unwrap_or_default(), body, "{url}: the block is the body");
            assert_eq!(head.response_time_ms, 1_714_564_800_000, "{url}: WARC-Date");
        }
        assert!(body_of(&store, &RecordKey::get("http://a.test/cut").primary()).is_none());
        assert!(store.verify(false).unwrap().is_clean());
    }

    #[test]
    fn every_record_is_counted_once_imported_present_failed_or_skipped_by_type_warc_1_1_section_6()
    {
        let page = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\nAAA\n";
        let nowhere = {
            let mut f = typed("revisit", "http://a.test/gone", "<urn:v1>");
            f.extend([
                ("WARC-Refers-To", "<urn:never>"),
                ("WARC-Payload-Digest", "sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
            ]);
            f
        };
        let records: Vec<TestRecord<'_>> = vec![
            (
                vec![
                    ("WARC-Type", "warcinfo"),
                    ("WARC-Record-ID", "<urn:i>"),
                    ("WARC-Date", "2024-05-01T12:00:00Z"),
                ],
                b"software: test\r\n",
            ),
            (
                typed("request", "http://a.test/", "<urn:q>"),
                b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
            ),
            (typed("response", "http://a.test/", "<urn:r>"), page),
            (typed("metadata", "http://a.test/", "<urn:m>"), b"outlink: http://a.test/x\r\n"),
            (typed("conversion", "http://a.test/", "<urn:c>"), b"converted"),
            (typed("continuation", "http://a.test/big", "<urn:k>"), b"second segment"),
            (typed("resource", "http://a.test/r.txt", "<urn:s>"), b"text"),
            (typed("resource", "urn:X-wget:log", "<urn:l>"), b"wget log"),
            (typed("response", "dns:a.test", "<urn:d>"), b"20240501 a.test. 300 IN A 192.0.2.1"),
            (typed("request", "dns:a.test", "<urn:dq>"), b""),
            (typed("X-Custom-Type", "http://a.test/", "<urn:x>"), b"?"),
            (
                vec![("WARC-Record-ID", "<urn:none>"), ("WARC-Date", "2024-05-01T12:00:00Z")],
                b"no type",
            ),
            (nowhere, b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n"),
            // A response whose body is cut short: failed.
            (
                typed("response", "http://a.test/short", "<urn:f>"),
                b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd",
            ),
        ];
        let bytes = warc_of(&records);
        let tmp = tempfile::tempdir().unwrap();
        let (store, opts) = open(&tmp);
        let (s, problems) = import_bytes(&store, &opts, tmp.path(), "all.warc.gz", &bytes);
        let by_type: Vec<(&str, u64)> =
            s.skipped_by_type.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        assert_eq!(
            by_type,
            [
                ("continuation", 1),
                ("conversion", 1),
                ("metadata", 1),
                ("none", 1),
                ("request", 2),
                ("resource", 1),
                ("response", 1),
                ("revisit", 1),
                ("warcinfo", 1),
                ("x-custom-type", 1)
            ],
            "{s}"
        );
        assert_eq!(
            (s.records, s.imported, s.failed, s.already_present, s.older_kept_out),
            (14, 2, 1, 0, 0),
            "{s}"
        );
        assert_eq!(s.accounted(), s.records, "every record in one category: {s}");
        // Reported: the failed record and the revisit found nowhere; the rest is counted silently.
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            s.to_string().starts_with("14 records read: 2 imported, 0 already present, 0 older captures kept out, 1 failed, 11 skipped (continuation 1, "),
            "{s}"
        );

        // The same file again: nothing new is stored, each response is already present.
        let entries_before = store.entries().unwrap().len();
        let (again, _) = import_bytes(&store, &opts, tmp.path(), "again.warc.gz", &bytes);
        assert_eq!((again.imported, again.already_present, again.failed), (0, 2, 1), "{again}");
        assert_eq!(again.accounted(), again.records, "{again}");
        assert_eq!(store.entries().unwrap().len(), entries_before);
        assert!(store.verify(false).unwrap().is_clean());

        // The same URL with another body, at the same date, is not "present": it replaces.
        let other = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\nBBB\n";
        let (third, _) = import_bytes(
            &store,
            &opts,
            tmp.path(),
            "other.warc.gz",
            &warc_of(&[(typed("response", "http://a.test/", "<urn:r2>"), other)]),
        );
        assert_eq!((third.imported, third.already_present), (1, 0), "{third}");
        let (_, body) = body_of(&store, &RecordKey::get("http://a.test/").primary()).unwrap();
        assert_eq!(body.as_deref(), Some(&b"BBB\n"[..]));
    }

    #[test]
    fn made_up_record_types_cannot_grow_the_summary_without_bound() {
        let mut s = Summary::default();
        for i in 0..100 {
            s.skip(&format!("x-type-{i}"));
        }
        s.skip("");
        assert_eq!(s.skipped_by_type.len(), MAX_TYPES + 1, "{s:?}");
        assert_eq!(s.skipped_total(), 101);
        assert!(s.skipped_by_type["other"] >= 100 - MAX_TYPES as u64);
        // Summaries of several files add up type by type.
        let mut total = Summary { records: 2, imported: 1, ..Default::default() };
        total.skip("request");
        total.add(&total.clone());
        assert_eq!(
            (total.records, total.imported, total.skipped_by_type["request"], total.accounted()),
            (4, 2, 2, 4)
        );
        // The release before per-type counts called failures `skipped`.
        let old: Summary =
            serde_json::from_str(r#"{"records":3,"imported":2,"skipped":1}"#).unwrap();
        assert_eq!((old.failed, old.skipped_total()), (1, 0));
    }

    #[test]
    fn exports_of_earlier_releases_still_import_sha256_base32_padded_digests() {
        // What `crawlcache export --revisits` wrote before SHA-1: sha256,
        // base32 with `=` padding; a revisit that names its original by
        // the payload digest alone, in another file.
        let old_label = |bytes: &[u8]| {
            format!("sha256:{}", data_encoding::BASE32.encode(&Sha256::digest(bytes)))
        };
        let page = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\nAAA\n";
        let (payload, block) = (old_label(b"AAA\n"), old_label(page));
        assert!(payload.ends_with("===="), "{payload}");
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\n";
        let mut original = typed("response", "http://a.test/one", "<urn:o>");
        original.extend([
            ("WARC-Payload-Digest", payload.as_str()),
            ("WARC-Block-Digest", block.as_str()),
        ]);
        let mut revisit = typed("revisit", "http://a.test/two", "<urn:v>");
        revisit.extend([
            ("WARC-Payload-Digest", payload.as_str()),
            ("WARC-Profile", crate::warc::export::REVISIT_PROFILE),
            ("WARC-Truncated", "length"),
        ]);
        let (first, second) = (warc_of(&[(original, page)]), warc_of(&[(revisit, head)]));
        for together in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let (store, opts) = open(&tmp);
            let s = if together {
                let (a, b) = (tmp.path().join("a.warc.gz"), tmp.path().join("b.warc.gz"));
                std::fs::write(&a, &first).unwrap();
                std::fs::write(&b, &second).unwrap();
                let mut import = Import::new(&store, opts);
                import.file(&b, "b", &mut |_| {}, &mut |_| {}).unwrap();
                import.file(&a, "a", &mut |_| {}, &mut |_| {}).unwrap();
                import.finish(&mut |_| {})
            } else {
                // Against the store: found through the digest index.
                import_bytes(&store, &opts, tmp.path(), "a.warc.gz", &first);
                import_bytes(&store, &opts, tmp.path(), "b.warc.gz", &second).0
            };
            assert_eq!(
                (s.failed, s.revisits_resolved, s.skipped_total()),
                (0, 1, 0),
                "together={together}: {s}"
            );
            let (_, body) =
                body_of(&store, &RecordKey::get("http://a.test/two").primary()).unwrap();
            assert_eq!(body.as_deref(), Some(&b"AAA\n"[..]), "together={together}");
        }
    }
}
