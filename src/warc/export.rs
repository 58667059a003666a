//! The store's exchanges as a WARC/1.1 file: a `warcinfo` record, then for
//! each exchange a `request` record and a `response` record linked both ways
//! by `WARC-Concurrent-To`.
//!
//! **Which exchanges** ([`plan`]): every record (SPEC section 6, see
//! [`crawlcache_policy::store_key`]) and every HTTP-cache entry, grouped by (URL,
//! method, request-body hash, variant). A group with a record is written
//! once, from the record (with `record.mode = "all"` the record holds the
//! final response the client got, and it shares the cache entry's body); a
//! variant only the cache holds is written from the cache entry (a cache
//! entry is always a GET). Each `Vary` variant is its own exchange, its
//! request record carrying the request fields that selected it, so an
//! import keeps the variants apart. The `--host` and `--prefix` filters
//! are those of `cache ls`.
//!
//! **Revisits** (optional, `revisits`): an exchange whose body was already
//! written in the same file (the same SHA-256) is written as a `revisit`
//! record (WARC/1.1 section 6.7.2, profile `identical-payload-digest`)
//! after its request: the response head only, `WARC-Truncated: length`,
//! and `WARC-Refers-To`, `WARC-Refers-To-Target-URI`, `WARC-Refers-To-Date`
//! naming the response record that holds the body, with the same
//! `WARC-Payload-Digest`. [`super::import`] resolves them.
//!
//! **The response block** ([`super::http::response_head`]): the stored
//! status line and field lines, then the stored body exactly as the origin
//! sent it (content codings kept), with `Content-Length` set to its length
//! and no `Transfer-Encoding` (the proxy stores bodies after removing the
//! chunked framing), so the HTTP message in the block is self-consistent.
//! `WARC-Payload-Digest` is the SHA-1 of the body, `WARC-Block-Digest` the
//! SHA-1 of the block, both `sha1:` in base32 without padding (see
//! [`super`]); the body is checked against its name (its SHA-256) while it
//! is read.
//!
//! **The request block**: `METHOD target HTTP/1.1`, `Host` and the request
//! fields `Vary` nominated. A request body is not kept by crawlcache: for a
//! POST, the records carry its SHA-256 in
//! [`super::REQUEST_BODY_SHA256`] instead, which [`super::import`] reads back.
//!
//! **Dates**: `WARC-Date` is the stored `request_time` for the request
//! record and `response_time` for the response record (RFC 9111 section
//! 4.2.3), to the second.

use std::collections::BTreeMap;
use std::io::{self, Read, Seek, SeekFrom, Write};

use sha2::{Digest, Sha256};

use super::http::{request_block, response_head};
use super::writer::WarcWriter;
use super::{new_record_id, sha1_label, sha1_label_of, warc_date, REQUEST_BODY_SHA256};
use crawlcache_policy::cache::StoredResponse;
use crawlcache_policy::store_key::{Selection, StoreKey};
use crawlcache_store::{Entry, Store, StoreError};

/// Which entries to export: the `cache ls` filters (`host`, `prefix`).
pub type Filter = crate::admin::inspect::KeyFilter;

/// The warcinfo `description` of an export selected by `filter`: what was
/// exported, never where it came from on this machine (no local path goes
/// into a WARC file that may be shared).
pub fn description(filter: &Filter) -> String {
    let mut d = String::from("crawlcache export");
    if let Some(h) = &filter.host {
        d.push_str(&format!(" of host {h}"));
    }
    if let Some(p) = &filter.prefix {
        d.push_str(&format!(" of URLs under {p}"));
    }
    d
}

/// One exchange to write: a request and the stored response to it.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request method (`GET` for cache entries).
    pub method: String,
    /// The URL (the cache key, after `cache.key_rules`).
    pub url: String,
    /// For a record of a request with a body: the hex SHA-256 of that body.
    pub request_body_sha256: Option<String>,
    /// The store entry holding the response.
    pub entry: Entry,
    /// Its decoded head.
    pub stored: StoredResponse,
}

/// What [`fn@write`] did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Exchanges written (each a request and a response record).
    pub exchanges: u64,
    /// Records written, `warcinfo` included.
    pub records: u64,
    /// Bytes written (compressed).
    pub bytes: u64,
    /// Exchanges left out, each with the reason (a body file missing or not
    /// hashing to its name; an undecodable entry).
    pub skipped: Vec<String>,
}

/// Splits a store key into (method, URL, request-body hash).
fn exchange_of(key: &str) -> (String, String, Option<String>) {
    match StoreKey::parse(key) {
        Ok(StoreKey::Record(r)) => (r.method.as_str().to_string(), r.url, r.request_body_sha256),
        Ok(StoreKey::Cache(url)) => ("GET".to_string(), url, None),
        Err(_) => ("GET".to_string(), StoreKey::url_of(key).to_string(), None),
    }
}

/// The exchanges to export from `store` under `filter`, in URL order (see
/// the module docs for the choice between a record and cache entries), and
/// the entries left out because their head does not decode.
/// Errors: the index cannot be read.
pub fn plan(store: &Store, filter: &Filter) -> Result<(Vec<Exchange>, Vec<String>), StoreError> {
    #[derive(Default)]
    struct Group {
        record: Option<Exchange>,
        cached: Vec<Exchange>,
    }
    let mut groups: BTreeMap<(String, String, Option<String>, Vec<u8>), Group> = BTreeMap::new();
    let mut undecodable = Vec::new();
    for entry in store.entries()? {
        if !filter.matches(&entry.primary_key) {
            continue;
        }
        let Some(stored) = StoredResponse::from_bytes(&entry.meta) else {
            undecodable.push(format!(
                "{}: the stored head does not decode (run `crawlcache cache verify`)",
                entry.primary_key
            ));
            continue;
        };
        let (method, url, hash) = exchange_of(&entry.primary_key);
        let is_record = StoreKey::is_record(&entry.primary_key);
        // The variant, as the cache's secondary key (also for a record
        // written before variants were kept).
        let variant = if is_record {
            Selection::of_entry(&entry.secondary_key, &stored, &stored.header_map()).secondary_key()
        } else {
            entry.secondary_key.clone()
        };
        let x = Exchange {
            method: method.clone(),
            url: url.clone(),
            request_body_sha256: hash.clone(),
            entry,
            stored,
        };
        let g = groups.entry((url, method, hash, variant)).or_default();
        if is_record {
            g.record = Some(x);
        } else {
            g.cached.push(x);
        }
    }
    let mut out = Vec::new();
    for (_, g) in groups {
        match g.record {
            Some(r) => out.push(r),
            None => out.extend(g.cached),
        }
    }
    Ok((out, undecodable))
}

/// How [`fn@write`] writes the file.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Goes into the warcinfo's `WARC-Filename`.
    pub filename: String,
    /// Goes into the warcinfo's `description`.
    pub description: String,
    /// Write a `revisit` record for a body already written in this file
    /// (see the module docs).
    pub revisits: bool,
}

/// A response record already written, for the revisits that refer to it.
struct Written {
    record_id: String,
    url: String,
    date: String,
    /// Its `WARC-Payload-Digest`, which the revisits repeat.
    payload_digest: String,
}

/// Writes the `warcinfo` record and then each exchange of `plan` to `out`
/// (as gzip members), calling `progress` after each exchange with the number
/// done. An exchange whose body cannot be read or does not hash to its name
/// is left out and listed in [`Summary::skipped`].
///
/// Errors: writing to `out` fails (the output is then incomplete).
pub fn write<W: Write>(
    store: &Store,
    plan: &[Exchange],
    out: W,
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64),
) -> io::Result<(W, Summary)> {
    let (filename, description) = (opts.filename.as_str(), opts.description.as_str());
    let mut w = WarcWriter::new(out);
    let mut summary = Summary::default();
    let info_id = new_record_id();
    let info = format!(
        "software: crawlcache/{}\r\nformat: WARC File Format 1.1\r\n\
         conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n\
         description: {}\r\n",
        env!("CARGO_PKG_VERSION"),
        description.replace(['\r', '\n'], " ")
    );
    let info_digest = sha1_label_of(info.as_bytes());
    let now = warc_date(super::now_ms());
    w.write_record(
        &[
            ("WARC-Type", "warcinfo"),
            ("WARC-Record-ID", &info_id),
            ("WARC-Date", &now),
            ("WARC-Filename", filename),
            ("Content-Type", "application/warc-fields"),
            ("WARC-Block-Digest", &info_digest),
        ],
        info.len() as u64,
        &mut info.as_bytes(),
    )?;
    let mut written: std::collections::HashMap<String, Written> = std::collections::HashMap::new();
    for (i, x) in plan.iter().enumerate() {
        let earlier = match &x.entry.body {
            Some(b) if opts.revisits && b.len > 0 => written.get(&b.sha256),
            _ => None,
        };
        let done = match earlier {
            Some(earlier) => write_revisit(&mut w, x, &info_id, earlier)?.map(|_| None),
            None => write_exchange(store, &mut w, x, &info_id)?.map(Some),
        };
        match done {
            Ok(first) => {
                summary.exchanges += 1;
                if let (Some(response), Some(b)) = (first, &x.entry.body) {
                    if opts.revisits {
                        written.entry(b.sha256.clone()).or_insert(response);
                    }
                }
            }
            Err(why) => {
                tracing::warn!("export: leaving out {} {}: {why}", x.method, x.url);
                summary.skipped.push(format!("{} {}: {why}", x.method, x.url));
            }
        }
        progress(i as u64 + 1);
    }
    summary.records = w.records_written();
    summary.bytes = w.bytes_written();
    Ok((w.finish()?, summary))
}

/// A WARC record to write: its named fields and its block.
type Record = (Vec<(String, String)>, Vec<u8>);

/// The request record of `x` (concurrent to the response record
/// `response_id`): its fields and block. `None` when the URL is unusable.
fn request_record(
    x: &Exchange,
    info_id: &str,
    request_id: &str,
    response_id: &str,
) -> Option<Record> {
    let request = request_block(&x.method, &x.url, &x.stored.vary_request)?;
    let mut fields: Vec<(String, String)> = vec![
        ("WARC-Type".into(), "request".into()),
        ("WARC-Record-ID".into(), request_id.into()),
        ("WARC-Date".into(), warc_date(x.stored.request_time_ms.min(x.stored.response_time_ms))),
        ("WARC-Target-URI".into(), x.url.clone()),
        ("WARC-Warcinfo-ID".into(), info_id.into()),
        ("WARC-Concurrent-To".into(), response_id.into()),
        ("Content-Type".into(), "application/http;msgtype=request".into()),
        ("WARC-Block-Digest".into(), sha1_label_of(&request)),
    ];
    if let Some(h) = &x.request_body_sha256 {
        fields.push((REQUEST_BODY_SHA256.into(), h.clone()));
    }
    Some((fields, request))
}

/// Why an exchange is left out of the archive (listed in
/// [`Summary::skipped`]; nothing of it was written).
#[derive(Debug, thiserror::Error)]
pub enum LeftOut {
    /// A revisit was planned for an entry without a body.
    #[error("no body to refer to")]
    NoBody,
    /// The stored URL is not an absolute `http(s)` URL (quoted).
    #[error("{0:?} is not an absolute http(s) URL")]
    NotAbsolute(String),
    /// The store could not open the body.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Reading the body (named by its SHA-256) failed.
    #[error("reading body {sha256}: {source}")]
    ReadBody {
        /// The body's name.
        sha256: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// The body's bytes do not hash to its name.
    #[error("body {0} does not hash to its name (run `crawlcache cache verify`)")]
    Damaged(String),
}

/// Writes `x` as its request and a `revisit` record referring to the
/// response record `earlier`, which holds the same body (WARC/1.1 section
/// 6.7.2). Errors as [`write_exchange`].
fn write_revisit<W: Write>(
    w: &mut WarcWriter<W>,
    x: &Exchange,
    info_id: &str,
    earlier: &Written,
) -> io::Result<Result<(), LeftOut>> {
    let Some(b) = &x.entry.body else { return Ok(Err(LeftOut::NoBody)) };
    let (request_id, revisit_id) = (new_record_id(), new_record_id());
    let Some((request_fields, request)) = request_record(x, info_id, &request_id, &revisit_id)
    else {
        return Ok(Err(LeftOut::NotAbsolute(x.url.clone())));
    };
    let head = response_head(
        x.stored.status,
        &x.stored.headers,
        b.len,
        x.method.eq_ignore_ascii_case("HEAD"),
    );
    let (date, block) = (warc_date(x.stored.response_time_ms), sha1_label_of(&head));
    let mut fields: Vec<(&str, &str)> = vec![
        ("WARC-Type", "revisit"),
        ("WARC-Record-ID", &revisit_id),
        ("WARC-Date", &date),
        ("WARC-Target-URI", &x.url),
        ("WARC-Warcinfo-ID", info_id),
        ("WARC-Concurrent-To", &request_id),
        ("WARC-Profile", REVISIT_PROFILE),
        ("WARC-Refers-To", &earlier.record_id),
        ("WARC-Refers-To-Target-URI", &earlier.url),
        ("WARC-Refers-To-Date", &earlier.date),
        ("WARC-Truncated", "length"),
        ("Content-Type", "application/http;msgtype=response"),
        ("WARC-Block-Digest", &block),
        ("WARC-Payload-Digest", &earlier.payload_digest),
    ];
    if let Some(h) = &x.request_body_sha256 {
        fields.push((REQUEST_BODY_SHA256, h));
    }
    let request_fields: Vec<(&str, &str)> =
        request_fields.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    w.write_record(&request_fields, request.len() as u64, &mut request.as_slice())?;
    w.write_record(&fields, head.len() as u64, &mut head.as_slice())?;
    Ok(Ok(()))
}

/// The `WARC-Profile` of the revisits [`fn@write`] writes (WARC/1.1 section 6.7.2).
pub const REVISIT_PROFILE: &str =
    "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest";

/// Writes one exchange; returns where its response record is, for the
/// revisits that may refer to it. The outer error is a write failure; the
/// inner one a reason to leave the exchange out (nothing was written for it
/// then).
fn write_exchange<W: Write>(
    store: &Store,
    w: &mut WarcWriter<W>,
    x: &Exchange,
    info_id: &str,
) -> io::Result<Result<Written, LeftOut>> {
    let is_head = x.method.eq_ignore_ascii_case("HEAD");
    let body_len = x.entry.body.as_ref().map_or(0, |b| b.len);
    let head = response_head(x.stored.status, &x.stored.headers, body_len, is_head);
    let (request_id, response_id) = (new_record_id(), new_record_id());
    let Some((request_fields, request)) = request_record(x, info_id, &request_id, &response_id)
    else {
        return Ok(Err(LeftOut::NotAbsolute(x.url.clone())));
    };
    // First pass over the body: the payload digest (checked against the
    // body's name) and the block digest. The same open file is then read
    // again, so a body released meanwhile is still whole.
    let mut block_hash = sha1_smol::Sha1::from(&head);
    let (mut payload_hash, mut name_hash) = (sha1_smol::Sha1::new(), Sha256::new());
    let mut file = match &x.entry.body {
        None => None,
        Some(b) => {
            let mut f = match store.read_body(&x.entry) {
                Ok(f) => f.into_reader(),
                Err(e) => return Ok(Err(e.into())),
            };
            let mut buf = vec![0u8; 64 * 1024];
            let mut len = 0u64;
            loop {
                let n = match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(source) => {
                        return Ok(Err(LeftOut::ReadBody { sha256: b.sha256.clone(), source }))
                    }
                };
                payload_hash.update(&buf[..n]);
                block_hash.update(&buf[..n]);
                name_hash.update(&buf[..n]);
                len += n as u64;
            }
            let digest = name_hash.finalize();
            if len != b.len || hex::encode(digest) != b.sha256 {
                return Ok(Err(LeftOut::Damaged(b.sha256.clone())));
            }
            if let Err(source) = f.seek(SeekFrom::Start(0)) {
                return Ok(Err(LeftOut::ReadBody { sha256: b.sha256.clone(), source }));
            }
            Some(f)
        }
    };
    let payload_digest = sha1_label(&payload_hash.digest().bytes());
    let block_digest = sha1_label(&block_hash.digest().bytes());
    let response_date = warc_date(x.stored.response_time_ms);
    let mut response_fields: Vec<(&str, &str)> = vec![
        ("WARC-Type", "response"),
        ("WARC-Record-ID", &response_id),
        ("WARC-Date", &response_date),
        ("WARC-Target-URI", &x.url),
        ("WARC-Warcinfo-ID", info_id),
        ("WARC-Concurrent-To", &request_id),
        ("Content-Type", "application/http;msgtype=response"),
        ("WARC-Block-Digest", &block_digest),
        ("WARC-Payload-Digest", &payload_digest),
    ];
    if let Some(h) = &x.request_body_sha256 {
        response_fields.push((REQUEST_BODY_SHA256, h));
    }
    let request_fields: Vec<(&str, &str)> =
        request_fields.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    w.write_record(&request_fields, request.len() as u64, &mut request.as_slice())?;
    let block_len = head.len() as u64 + body_len;
    match file.as_mut() {
        Some(f) => w.write_record(
            &response_fields,
            block_len,
            &mut head.as_slice().chain(f.take(body_len)),
        )?,
        None => w.write_record(&response_fields, block_len, &mut head.as_slice())?,
    };
    Ok(Ok(Written {
        record_id: response_id.clone(),
        url: x.url.clone(),
        date: response_date.clone(),
        payload_digest,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_keys_split_into_method_url_and_body_hash() {
        assert_eq!(exchange_of("http://a/x"), ("GET".into(), "http://a/x".into(), None));
        let head =
            crawlcache_policy::store_key::RecordKey::new(&http::Method::HEAD, "http://a/x", None)
                .primary();
        assert_eq!(exchange_of(&head), ("HEAD".into(), "http://a/x".into(), None));
        let post = crawlcache_policy::store_key::RecordKey::new(
            &http::Method::POST,
            "http://a/f",
            Some("ab"),
        )
        .primary();
        assert_eq!(exchange_of(&post), ("POST".into(), "http://a/f".into(), Some("ab".into())));
    }
}
