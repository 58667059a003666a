//! `cache ls` and `cache cat`: what the store holds, shared by the command
//! line (store opened directly) and the admin endpoints `GET /cache/ls`
//! and `GET /cache/cat` (through a running proxy).
//!
//! A listing streams: [`Listing`] walks the index with [`Store::scan`] and
//! yields one [`LsRow`] per stored response, so its memory does not grow
//! with the store. A URL held by the HTTP cache and by the record (SPEC
//! section 6) is one row (`cache+record`, the cache entry's figures); a
//! record with no cache entry for its URL is a row of its own, and so is
//! every record of another method (`HEAD`, a form's `POST`).

use crawlcache_policy::cache::{self, PolicyConfig};
use crawlcache_policy::cache::{from_millis, StoredResponse};
use crawlcache_policy::cache_rules::PolicyRule;
use crawlcache_policy::store_key::{RecordKey, Selection, StoreKey};
use crawlcache_store::{Entry, Scan, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::time::SystemTime;

/// Why a listing or a stored body could not be given.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The `--host` filter is not a host.
    #[error(transparent)]
    HostFilter(#[from] super::host_filter::HostFilterError),
    /// The index could not be read.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The body of the entry under `key` could not be read.
    #[error("{key}: {source}")]
    Body {
        /// The store key.
        key: String,
        /// The store's error (most often: the body file is missing).
        source: StoreError,
    },
    /// A content coding of the body under `key` cannot be undone.
    #[error("{key}: {source}")]
    Coding {
        /// The store key.
        key: String,
        /// The coding and why.
        source: crawlcache_robots::decode::DecodeError,
    },
}

/// The URL a store key stands for: a cache key as is; a record key
/// (`record:METHOD URL[ sha256=...]`) without its method and body hash
/// ([`StoreKey::url_of`]).
pub fn key_url(key: &str) -> &str {
    StoreKey::url_of(key)
}

/// Which entries a listing or a purge covers: every given filter must
/// hold. `host` is a host, `host:port` or a URL whose authority is used
/// ([`super::host_filter`]), compared case-insensitively with the URL's
/// host (and port, when it names one); a value that does not parse
/// matches nothing ([`KeyFilter::validate`] says why). `prefix` is a
/// prefix of the URL (the cache key, e.g. `https://example.com/docs/`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyFilter {
    /// Only URLs of this host.
    pub host: Option<String>,
    /// Only URLs starting with this.
    pub prefix: Option<String>,
}

impl KeyFilter {
    /// Whether the entry under store key `key` (cache or record) passes.
    pub fn matches(&self, key: &str) -> bool {
        let url = key_url(key);
        if let Some(p) = &self.prefix {
            if !url.starts_with(p.as_str()) {
                return false;
            }
        }
        if let Some(h) = &self.host {
            match super::host_filter::HostFilter::parse(h) {
                Ok(f) if f.matches_url(url) => {}
                _ => return false,
            }
        }
        true
    }

    /// Checks the `host` filter's spelling. Errors: the
    /// [`super::host_filter::HostFilterError`] of its parse.
    pub fn validate(&self) -> Result<(), super::host_filter::HostFilterError> {
        match &self.host {
            Some(h) => super::host_filter::HostFilter::parse(h).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Whether a filter was given at all (an empty listing then says that
    /// nothing matched).
    pub fn is_set(&self) -> bool {
        self.host.is_some() || self.prefix.is_some()
    }

    /// The filters given, as command-line options (`--host H --prefix P`).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(h) = &self.host {
            parts.push(format!("--host {h}"));
        }
        if let Some(p) = &self.prefix {
            parts.push(format!("--prefix {p}"));
        }
        parts.join(" ")
    }
}

/// One line of `cache ls`: a stored response. Serialized as one JSON
/// object per line (`--json`, `GET /cache/ls?json=1`); [`LsRow::text`] is
/// the tab-separated line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LsRow {
    /// The URL (the cache key, after `cache.key_rules`).
    pub url: String,
    /// The response's status code (`None`: the stored head is unreadable).
    pub status: Option<u16>,
    /// Bytes of the stored body (as stored, still content-coded).
    pub bytes: u64,
    /// When the response was received (`response_time`, RFC 3339, UTC).
    pub stored: Option<String>,
    /// Freshness left in seconds: freshness_lifetime (bounded by a matching
    /// `[[cache.rules]]`) minus current_age (RFC 9111 section 4.2); negative
    /// when stale, by that many seconds.
    pub ttl: Option<i64>,
    /// In the HTTP cache.
    pub cache: bool,
    /// In the record (SPEC section 6): a `record:` entry for this URL.
    pub record: bool,
    /// The store key of the entry the figures are from.
    pub key: String,
    /// For a record of a method other than GET: that method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// For a record of a request with a body: the body's SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body_sha256: Option<String>,
    /// The secondary key (the `Vary` request fields), when there is one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub secondary_key: String,
    /// The variant: the request fields the response's `Vary` nominates, as
    /// the request that fetched it carried them (`accept: "text/html"`),
    /// when it has a `Vary`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub variant: String,
    /// SHA-256 of the stored body.
    pub body_sha256: Option<String>,
    /// When the entry was last used (stored, served, freshened; RFC 3339),
    /// when known.
    pub last_used: Option<String>,
}

impl LsRow {
    /// Where the response is: `cache`, `record`, `cache+record`; a record
    /// of another method says which (`record(HEAD)`, `record(POST
    /// sha256=HEX)`).
    pub fn place(&self) -> String {
        match (self.cache, self.record, &self.method) {
            (true, true, _) => "cache+record".into(),
            (true, false, _) => "cache".into(),
            (false, _, Some(m)) => match &self.request_body_sha256 {
                Some(h) => format!("record({m} sha256={h})"),
                None => format!("record({m})"),
            },
            (false, _, None) => "record".into(),
        }
    }

    /// The text line: `URL STATUS BYTES STORED TTL IN`, tab-separated
    /// (`-` for what is unknown; TTL in seconds with an `s`).
    pub fn text(&self) -> String {
        let dash = || "-".to_string();
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            self.url,
            self.status.map_or_else(dash, |s| s.to_string()),
            self.bytes,
            self.stored.clone().unwrap_or_else(dash),
            self.ttl.map_or_else(dash, |t| format!("{t}s")),
            self.place()
        )
    }

    /// The JSON line.
    pub fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

/// The figures of a listing, for its summary line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LsSummary {
    /// Rows listed.
    pub rows: u64,
    /// Rows in the HTTP cache.
    pub cached: u64,
    /// Rows in the record.
    pub recorded: u64,
    /// Body bytes of the rows listed (a body several rows share counts for
    /// each).
    pub bytes: u64,
    /// Distinct bodies among them (by SHA-256) and their bytes, each
    /// counted once: what they take in the store.
    pub distinct: u64,
    /// See `distinct`.
    pub distinct_bytes: u64,
    /// The bodies seen, by the first 8 bytes of their SHA-256 (8 bytes of
    /// memory and a little more per distinct body).
    seen: std::collections::HashSet<u64>,
}

impl LsSummary {
    /// Counts `row`.
    pub fn add(&mut self, row: &LsRow) {
        self.rows += 1;
        self.cached += u64::from(row.cache);
        self.recorded += u64::from(row.record);
        self.bytes += row.bytes;
        let fingerprint = row
            .body_sha256
            .as_deref()
            .and_then(|h| h.get(..16))
            .and_then(|h| u64::from_str_radix(h, 16).ok());
        if fingerprint.is_none_or(|fp| self.seen.insert(fp)) {
            self.distinct += 1;
            self.distinct_bytes += row.bytes;
        }
    }
}

impl std::fmt::Display for LsSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} responses ({} in the cache, {} in the record), {} body bytes; {} distinct bodies, {} bytes stored",
            self.rows, self.cached, self.recorded, self.bytes, self.distinct, self.distinct_bytes
        )
    }
}

/// What a listing needs besides the store: the filter, and the policy and
/// rules the freshness is judged by, at `now`.
#[derive(Debug, Clone)]
pub struct ListSpec {
    /// Which URLs.
    pub filter: KeyFilter,
    /// The cache policy (`[cache]`).
    pub policy: PolicyConfig,
    /// `[[cache.rules]]`.
    pub rules: Vec<PolicyRule>,
    /// The time freshness is judged at.
    pub now: SystemTime,
}

/// The rows of `cache ls`, one at a time, in index order (not sorted).
/// Items are `Err` when the index cannot be read.
pub struct Listing {
    scan: Scan,
    store: Store,
    spec: ListSpec,
}

impl Listing {
    /// A listing of `store` under `spec`.
    pub fn new(store: &Store, spec: ListSpec) -> Listing {
        Listing { scan: store.scan(""), store: store.clone(), spec }
    }

    /// The row for `e`, or `None` when it is listed elsewhere (a GET record
    /// whose URL the cache holds) or filtered out.
    /// Errors: [`InspectError::Store`], the index cannot be read.
    pub fn row(&self, e: Entry) -> Result<Option<LsRow>, InspectError> {
        if !self.spec.filter.matches(&e.primary_key) {
            return Ok(None);
        }
        let key = StoreKey::parse(&e.primary_key).ok();
        let url = key
            .as_ref()
            .map_or_else(|| key_url(&e.primary_key).to_string(), |k| k.url().to_string());
        let record_key = key.as_ref().and_then(StoreKey::record);
        let method = match (&key, record_key) {
            (Some(_), Some(r)) => Some(r.method.as_str().to_string()),
            (Some(_), None) => None,
            (None, _) => Some("?".to_string()),
        };
        let stored = StoredResponse::from_bytes(&e.meta);
        // A cache entry and the GET record of the same variant are one row.
        let (cache, record) = match method.as_deref() {
            None => {
                let rk = RecordKey::get(&url).primary();
                let records = self.store.lookup(&rk)?;
                (true, records.iter().any(|r| record_secondary_key(r) == e.secondary_key))
            }
            Some("GET") => {
                let mine = record_secondary_key(&e);
                if self.store.lookup(&url)?.iter().any(|c| c.secondary_key == mine) {
                    return Ok(None);
                }
                (false, true)
            }
            Some(_) => (false, true),
        };
        let ttl = stored.as_ref().map(|s| {
            let lifetime = crawlcache_policy::cache_rules::freshness_lifetime(
                &self.spec.rules,
                &url,
                s,
                &self.spec.policy,
            );
            let age = cache::current_age(s, self.spec.now);
            let left = lifetime.as_millis() as i128 - age.as_millis() as i128;
            left.div_euclid(1000).clamp(i64::MIN as i128, i64::MAX as i128) as i64
        });
        Ok(Some(LsRow {
            status: stored.as_ref().map(|s| s.status),
            bytes: e.body.as_ref().map_or(0, |b| b.len),
            stored: stored
                .as_ref()
                .map(|s| crawlcache_base::time::format_rfc3339(from_millis(s.response_time_ms))),
            ttl,
            cache,
            record,
            method: method.filter(|m| m != "GET"),
            request_body_sha256: record_key.and_then(|r| r.request_body_sha256.clone()),
            secondary_key: String::from_utf8_lossy(&e.secondary_key).into_owned(),
            variant: stored.as_ref().map(|s| variant_of(s, &e.secondary_key)).unwrap_or_default(),
            body_sha256: e.body.as_ref().map(|b| b.sha256.clone()),
            last_used: e.last_used_at().map(crawlcache_base::time::format_rfc3339),
            key: e.primary_key,
            url,
        }))
    }
}

/// The secondary key a record's variant has (the cache's for the same
/// variant), also for a record written before variants were kept.
fn record_secondary_key(record: &Entry) -> Vec<u8> {
    match StoredResponse::from_bytes(&record.meta) {
        Some(s) => Selection::of_entry(&record.secondary_key, &s, &s.header_map()).secondary_key(),
        None => record.secondary_key.clone(),
    }
}

/// The variant of a stored response (`accept: "text/html"`), from the
/// request fields kept with it; empty without `Vary`.
fn variant_of(stored: &StoredResponse, secondary_key: &[u8]) -> String {
    let headers = stored.header_map();
    if crawlcache_policy::cache::key::vary_names(&headers).is_some_and(|n| n.is_empty()) {
        return String::new();
    }
    match Selection::of_entry(secondary_key, stored, &headers) {
        Selection::Unknown => "Vary: * (recorded before variants were kept)".to_string(),
        _ => crawlcache_policy::store_key::describe_variant(
            &headers,
            &crawlcache_policy::store_key::fields_map(&stored.vary_request),
        ),
    }
}

impl Iterator for Listing {
    type Item = Result<LsRow, InspectError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let e = match self.scan.next()? {
                Ok(e) => e,
                Err(e) => return Some(Err(e.into())),
            };
            match self.row(e) {
                Ok(Some(row)) => return Some(Ok(row)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// The stored response `cache cat` prints: the newest cache variant of the
/// URL, else its GET record.
pub struct Picked {
    /// The store key it is under (the cache key, or `record:GET URL`).
    pub key: String,
    /// The entry.
    pub entry: Entry,
    /// Its decoded head.
    pub stored: StoredResponse,
}

impl Picked {
    /// `cache` or `record`.
    pub fn source(&self) -> &'static str {
        if StoreKey::is_record(&self.key) {
            "record"
        } else {
            "cache"
        }
    }

    /// The `Content-Encoding` codings of the stored response, as listed.
    pub fn codings(&self) -> Vec<String> {
        crawlcache_robots::decode::parse_content_encoding(
            self.stored
                .headers
                .iter()
                .filter(|(n, _)| n == "content-encoding")
                .filter_map(|(_, v)| std::str::from_utf8(v).ok()),
        )
    }

    /// The body as stored, or with its content codings undone (`decode`;
    /// gzip, deflate, br, also stacked). Errors: the body file is missing,
    /// ([`InspectError::Body`]), or a coding cannot be undone
    /// ([`InspectError::Coding`]). A body that turns out not to decode
    /// fails later, as a read error naming the coding.
    pub fn body(&self, store: &Store, decode: bool) -> Result<Box<dyn Read + Send>, InspectError> {
        let raw: Box<dyn Read + Send> = match &self.entry.body {
            Some(_) => Box::new(
                store
                    .read_body(&self.entry)
                    .map_err(|source| InspectError::Body { key: self.key.clone(), source })?
                    .into_reader(),
            ),
            None => Box::new(std::io::empty()),
        };
        if !decode {
            return Ok(raw);
        }
        crawlcache_robots::decode::reader(&self.codings(), raw)
            .map_err(|source| InspectError::Coding { key: self.key.clone(), source })
    }
}

/// The response `cache cat` prints for `url` (normalised, `key_rules`
/// applied): the newest cache variant, else the newest GET record, else
/// the newest record of another method (a HEAD's, a form's POST: found by
/// a scan of the record keys, read key by key); `None` when none is
/// stored. Errors: `url` is not an absolute http(s) URL, or the index
/// cannot be read.
pub fn pick(
    store: &Store,
    url: &str,
    key_rules: &[crawlcache_policy::key_rules::KeyRule],
) -> Result<Option<Picked>, super::lookup::LookupError> {
    let key = super::lookup::cache_key(url, key_rules)?;
    let record_key = RecordKey::get(&key).primary();
    for k in [key.clone(), record_key] {
        let entries = store.lookup(&k)?;
        if let Some(best) = newest(entries.into_iter().map(|e| (k.clone(), e))) {
            return Ok(Some(best));
        }
    }
    // Records of other methods: their keys name the method (and a body's
    // hash), so they are found by their URL in the record namespace.
    let mut others = Vec::new();
    for entry in store.scan(RecordKey::namespace()) {
        let entry = entry?;
        if StoreKey::url_of(&entry.primary_key) == key {
            others.push((entry.primary_key.clone(), entry));
        }
    }
    Ok(newest(others))
}

/// The most recently received of `entries` (each with the key it is
/// stored under) whose head decodes.
fn newest(entries: impl IntoIterator<Item = (String, Entry)>) -> Option<Picked> {
    let decoded = entries.into_iter().filter_map(|(key, entry)| {
        Some(Picked { stored: StoredResponse::from_bytes(&entry.meta)?, key, entry })
    });
    crawlcache_policy::cache::variant::select(decoded, |_| true, |p| &p.stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_url_and_host() {
        assert_eq!(key_url("http://a.test/x"), "http://a.test/x");
        assert_eq!(key_url(&RecordKey::get("http://a.test/x").primary()), "http://a.test/x");
        assert_eq!(
            key_url(&RecordKey::new(&http::Method::POST, "http://a.test/f", Some("ab")).primary()),
            "http://a.test/f"
        );
        assert_eq!(super::super::host_filter::url_host("https://A.test:8443/x?y"), "A.test");
        assert_eq!(super::super::host_filter::url_host("http://[::1]:80/"), "::1");
        assert_eq!(super::super::host_filter::url_host("http://a.test"), "a.test");
        let f = KeyFilter { host: Some("a.TEST".into()), prefix: None };
        assert!(
            f.matches("https://a.test:8443/x")
                && f.matches(&RecordKey::get("http://a.test/").primary())
                && !f.matches("http://b.test/")
        );
        assert!(!f.matches("http://a.test.evil/"));
        let f = KeyFilter { host: None, prefix: Some("http://a.test/docs/".into()) };
        assert!(
            f.matches(
                &RecordKey::new(&http::Method::POST, "http://a.test/docs/f", Some("00")).primary()
            ) && !f.matches("http://a.test/doc")
        );
    }

    #[test]
    fn a_row_prints_as_six_tab_separated_fields_and_round_trips_as_json() {
        let row = LsRow {
            url: "http://a.test/f".into(),
            status: Some(200),
            bytes: 12,
            stored: Some("2026-01-01T00:00:00.000Z".into()),
            ttl: Some(-30),
            cache: false,
            record: true,
            key: RecordKey::new(&http::Method::POST, "http://a.test/f", Some("ab")).primary(),
            method: Some("POST".into()),
            request_body_sha256: Some("ab".into()),
            secondary_key: String::new(),
            variant: String::new(),
            body_sha256: None,
            last_used: None,
        };
        assert_eq!(
            row.text(),
            "http://a.test/f\t200\t12\t2026-01-01T00:00:00.000Z\t-30s\trecord(POST sha256=ab)"
        );
        assert_eq!(serde_json::from_str::<LsRow>(&row.json()).unwrap(), row);
        let mut s = LsSummary::default();
        s.add(&row);
        assert_eq!(s.to_string(), "1 responses (0 in the cache, 1 in the record), 12 body bytes; 1 distinct bodies, 12 bytes stored");
        // Two more rows of one body: counted in the bytes, once in the distinct.
        let shared = LsRow {
            body_sha256: Some("ab".repeat(32)),
            bytes: 100,
            cache: true,
            record: false,
            ..row
        };
        s.add(&shared);
        s.add(&LsRow { url: "http://a.test/g".into(), ..shared });
        assert_eq!((s.rows, s.bytes, s.distinct, s.distinct_bytes), (3, 212, 2, 112));
    }
}
