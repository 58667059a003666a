//! The store's exchanges as a WARC/1.1 file: a `warcinfo` record, then for
//! each exchange a `request` record and a `response` record linked both ways
//! by `WARC-Concurrent-To`.
//!
//! **Which exchanges** ([`plan`]): every record (SPEC section 6:
//! `record:METHOD URL[ sha256=H]`) and every HTTP-cache entry, grouped by
//! (URL, method, request-body hash). A group with a record is written once,
//! from the record (with `record.mode = "all"` the record holds the final
//! response the client got, and it shares the cache entry's body); a URL
//! only the cache holds is written from each of its cached variants (one per
//! `Vary` secondary key; a cache entry is always a GET). The `--host` and
//! `--prefix` filters are those of `cache ls`.
//!
//! **The response block** ([`super::http::response_head`]): the stored
//! status line and field lines, then the stored body exactly as the origin
//! sent it (content codings kept), with `Content-Length` set to its length
//! and no `Transfer-Encoding` (the proxy stores bodies after removing the
//! chunked framing), so the HTTP message in the block is self-consistent.
//! `WARC-Payload-Digest` is the SHA-256 of the body (the stored body's name,
//! checked while it is read), `WARC-Block-Digest` the SHA-256 of the block.
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
use super::{new_record_id, sha256_label, warc_date, REQUEST_BODY_SHA256};
use crate::cache::StoredResponse;
use crate::store::{Entry, Store, StoreError};

/// Which entries to export: the `cache ls` filters (`host`, `prefix`).
pub type Filter = crate::admin::inspect::KeyFilter;

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

/// What [`write`] did.
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
    match key.strip_prefix(crate::record::PREFIX) {
        Some(rest) => {
            let (method, rest) = rest.split_once(' ').unwrap_or(("GET", rest));
            let (url, hash) = match rest.rsplit_once(" sha256=") {
                Some((u, h)) => (u, Some(h.to_string())),
                None => (rest, None),
            };
            (method.to_string(), url.to_string(), hash)
        }
        None => ("GET".to_string(), key.to_string(), None),
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
    let mut groups: BTreeMap<(String, String, Option<String>), Group> = BTreeMap::new();
    let mut undecodable = Vec::new();
    for entry in store.entries()? {
        if !filter.matches(&entry.primary_key) {
            continue;
        }
        let Some(stored) = StoredResponse::from_bytes(&entry.meta) else {
            undecodable.push(format!("{}: the stored head does not decode (run `crawlcache cache verify`)", entry.primary_key));
            continue;
        };
        let (method, url, hash) = exchange_of(&entry.primary_key);
        let is_record = crate::record::is_record_key(&entry.primary_key);
        let x = Exchange { method: method.clone(), url: url.clone(), request_body_sha256: hash.clone(), entry, stored };
        let g = groups.entry((url, method, hash)).or_default();
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
            None => {
                let mut cached = g.cached;
                cached.sort_by(|a, b| a.entry.secondary_key.cmp(&b.entry.secondary_key));
                out.extend(cached);
            }
        }
    }
    Ok((out, undecodable))
}

/// Writes the `warcinfo` record and then each exchange of `plan` to `out`
/// (as gzip members), calling `progress` after each exchange with the number
/// done. `filename` goes into `WARC-Filename`, `description` into the
/// warcinfo's `description`. An exchange whose body cannot be read or does
/// not hash to its name is left out and listed in [`Summary::skipped`].
///
/// Errors: writing to `out` fails (the output is then incomplete).
pub fn write<W: Write>(
    store: &Store,
    plan: &[Exchange],
    out: W,
    filename: &str,
    description: &str,
    progress: &mut dyn FnMut(u64),
) -> io::Result<(W, Summary)> {
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
    let info_digest = sha256_label(&Sha256::digest(info.as_bytes()));
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
    for (i, x) in plan.iter().enumerate() {
        match write_exchange(store, &mut w, x, &info_id)? {
            Ok(()) => summary.exchanges += 1,
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

/// Writes one exchange. The outer error is a write failure; the inner one
/// a reason to leave the exchange out (nothing was written for it then).
fn write_exchange<W: Write>(store: &Store, w: &mut WarcWriter<W>, x: &Exchange, info_id: &str) -> io::Result<Result<(), String>> {
    let is_head = x.method.eq_ignore_ascii_case("HEAD");
    let body_len = x.entry.body.as_ref().map_or(0, |b| b.len);
    let head = response_head(x.stored.status, &x.stored.headers, body_len, is_head);
    let Some(request) = request_block(&x.method, &x.url, &x.stored.vary_request) else {
        return Ok(Err(format!("{:?} is not an absolute http(s) URL", x.url)));
    };
    // First pass over the body: the payload digest (checked against the
    // body's name) and the block digest. The same open file is then read
    // again, so a body released meanwhile is still whole.
    let mut block_hash = Sha256::new();
    block_hash.update(&head);
    let mut payload_hash = Sha256::new();
    let mut file = match &x.entry.body {
        None => None,
        Some(b) => {
            let mut f = match store.read_body(&x.entry) {
                Ok(f) => f.into_reader(),
                Err(e) => return Ok(Err(e.to_string())),
            };
            let mut buf = vec![0u8; 64 * 1024];
            let mut len = 0u64;
            loop {
                let n = match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Ok(Err(format!("reading body {}: {e}", b.sha256))),
                };
                payload_hash.update(&buf[..n]);
                block_hash.update(&buf[..n]);
                len += n as u64;
            }
            let digest = payload_hash.clone().finalize();
            if len != b.len || hex::encode(digest) != b.sha256 {
                return Ok(Err(format!("body {} does not hash to its name (run `crawlcache cache verify`)", b.sha256)));
            }
            if let Err(e) = f.seek(SeekFrom::Start(0)) {
                return Ok(Err(format!("reading body {}: {e}", b.sha256)));
            }
            Some(f)
        }
    };
    let payload_digest = sha256_label(&payload_hash.finalize());
    let block_digest = sha256_label(&block_hash.finalize());
    let request_digest = sha256_label(&Sha256::digest(&request));
    let (request_id, response_id) = (new_record_id(), new_record_id());
    let request_date = warc_date(x.stored.request_time_ms.min(x.stored.response_time_ms));
    let response_date = warc_date(x.stored.response_time_ms);
    let mut request_fields: Vec<(&str, &str)> = vec![
        ("WARC-Type", "request"),
        ("WARC-Record-ID", &request_id),
        ("WARC-Date", &request_date),
        ("WARC-Target-URI", &x.url),
        ("WARC-Warcinfo-ID", info_id),
        ("WARC-Concurrent-To", &response_id),
        ("Content-Type", "application/http;msgtype=request"),
        ("WARC-Block-Digest", &request_digest),
    ];
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
        request_fields.push((REQUEST_BODY_SHA256, h));
        response_fields.push((REQUEST_BODY_SHA256, h));
    }
    w.write_record(&request_fields, request.len() as u64, &mut request.as_slice())?;
    let block_len = head.len() as u64 + body_len;
    match file.as_mut() {
        Some(f) => w.write_record(&response_fields, block_len, &mut head.as_slice().chain(f.take(body_len)))?,
        None => w.write_record(&response_fields, block_len, &mut head.as_slice())?,
    };
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_keys_split_into_method_url_and_body_hash() {
        assert_eq!(exchange_of("http://a/x"), ("GET".into(), "http://a/x".into(), None));
        assert_eq!(exchange_of("record:HEAD http://a/x"), ("HEAD".into(), "http://a/x".into(), None));
        assert_eq!(exchange_of("record:POST http://a/f sha256=ab"), ("POST".into(), "http://a/f".into(), Some("ab".into())));
    }
}
