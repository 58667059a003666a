//! What the store's entries are filed under: a cache entry or a record
//! (SPEC sections 2 and 6). This file is the only one that writes or reads
//! the text of a record key and the bytes of a record's secondary key;
//! everything else goes through [`StoreKey`], [`RecordKey`] and
//! [`Selection`].
//!
//! The store files each entry under a *primary key* (text) and a
//! *secondary key* (bytes), and looks up every variant of a primary key at
//! once. Two namespaces share it:
//!
//! - **cache entries**: the primary key is the cache key, the normalised
//!   target URI after `cache.key_rules` (`http://example.com/a?b`, see
//!   [`crate::cache::key::primary_key`]); the secondary key is the RFC 9111
//!   section 4.1 secondary key built from the response's `Vary`
//!   ([`crate::cache::key::secondary_key`]).
//! - **records** (SPEC section 6): the primary key is
//!
//!   ```text
//!   record:GET http://example.com/a?b
//!   record:HEAD http://example.com/a?b
//!   record:POST http://example.com/form sha256=<hex SHA-256 of the request body>
//!   ```
//!
//!   and the secondary key is the record's [`Selection`]: which requests
//!   the recorded response answers. A cache key always starts with
//!   `http://` or `https://`, so no online lookup (which looks up exactly
//!   the cache key) ever sees a record.
//!
//! # Record secondary keys, before and after
//!
//! Records written before variants were kept (the release before issue 33)
//! all have an empty secondary key: one record per method and URL, the last
//! response written winning, whatever the request's `Vary` fields. Records
//! written since carry the RFC 9111 secondary key of the request that
//! fetched them, the same bytes the cache uses, so the variants of one URL
//! coexist; a response with `Vary: *` gets [`Selection::Identical`]
//! instead. Both forms are read ([`Selection::of_entry`]): an old record
//! whose response has a `Vary` naming fields gets the secondary key of the
//! request fields it was stored with (the `vary_request` every release kept
//! in the stored head), so it replays to the requests that select it, as a
//! new one would; an old record of a `Vary: *` response, whose request was
//! not kept, is [`Selection::Unknown`] and replays as before.

use crate::cache::key;
use crate::cache::StoredResponse;
use http::Method;
use sha2::{Digest, Sha256};

/// The first bytes of every record's primary key.
const RECORD_PREFIX: &str = "record:";

/// What separates a record key's URL from its request-body hash.
const BODY_HASH: &str = " sha256=";

/// The first byte of a [`Selection::Identical`] secondary key. A cache
/// secondary key starts with a field name's length as 4 bytes big-endian,
/// so its first byte is 0 for any name shorter than 16 MiB: never this.
const IDENTICAL: u8 = 0xFE;

/// Why a primary key in the record namespace cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// `record:` not followed by `METHOD URL`.
    #[error("record key {0:?} does not name a method and a URL")]
    NoMethod(String),
    /// The method is not an HTTP method token.
    #[error("record key {0:?} names no valid HTTP method")]
    BadMethod(String),
}

/// The key of one recorded exchange without its variant: the request's
/// method, the URL (the cache key) and, for methods other than GET and
/// HEAD, the SHA-256 of the request body. Its [`RecordKey::primary`] is
/// the store's primary key of every recorded variant of the exchange.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordKey {
    /// The request method.
    pub method: Method,
    /// The URL: the cache key of the target URI (after `cache.key_rules`).
    pub url: String,
    /// Lower-case hex SHA-256 of the request body, for methods other than
    /// GET and HEAD (a form's POST).
    pub request_body_sha256: Option<String>,
}

impl RecordKey {
    /// The record key of a `method` request for the cache key `url`;
    /// `request_body_sha256` for methods other than GET and HEAD.
    pub fn new(method: &Method, url: &str, request_body_sha256: Option<&str>) -> RecordKey {
        RecordKey {
            method: method.clone(),
            url: url.to_string(),
            request_body_sha256: request_body_sha256.map(str::to_string),
        }
    }

    /// The record key of a GET of `url`.
    pub fn get(url: &str) -> RecordKey {
        RecordKey::new(&Method::GET, url, None)
    }

    /// The store's primary key: `record:METHOD URL[ sha256=H]`.
    pub fn primary(&self) -> String {
        let mut out = String::with_capacity(
            RECORD_PREFIX.len() + self.method.as_str().len() + 1 + self.url.len() + 72,
        );
        out.push_str(RECORD_PREFIX);
        out.push_str(self.method.as_str());
        out.push(' ');
        out.push_str(&self.url);
        if let Some(h) = &self.request_body_sha256 {
            out.push_str(BODY_HASH);
            out.push_str(h);
        }
        out
    }

    /// What every record's primary key starts with (a prefix for
    /// `Store::scan` of the store).
    pub fn namespace() -> &'static str {
        RECORD_PREFIX
    }
}

impl std::fmt::Display for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.primary())
    }
}

/// What a store entry is filed under, read from its primary key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKey {
    /// An HTTP-cache entry under its cache key (a URL).
    Cache(String),
    /// A record.
    Record(RecordKey),
}

impl StoreKey {
    /// Reads a primary key. Errors: a key in the record namespace that
    /// names no method and URL (never written by crawlcache).
    pub fn parse(primary: &str) -> Result<StoreKey, KeyError> {
        let Some(rest) = primary.strip_prefix(RECORD_PREFIX) else {
            return Ok(StoreKey::Cache(primary.to_string()));
        };
        let (method, rest) =
            rest.split_once(' ').ok_or_else(|| KeyError::NoMethod(primary.to_string()))?;
        let method = Method::from_bytes(method.as_bytes())
            .map_err(|_| KeyError::BadMethod(primary.to_string()))?;
        let (url, hash) = match rest.rsplit_once(BODY_HASH) {
            Some((u, h)) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
                (u, Some(h.to_string()))
            }
            _ => (rest, None),
        };
        Ok(StoreKey::Record(RecordKey { method, url: url.to_string(), request_body_sha256: hash }))
    }

    /// True when `primary` is in the record namespace (no parsing).
    pub fn is_record(primary: &str) -> bool {
        primary.starts_with(RECORD_PREFIX)
    }

    /// The URL the key stands for: a cache key as is, a record key's URL
    /// without its method and body hash. For a record key that does not
    /// parse, what follows `record:`.
    pub fn url_of(primary: &str) -> &str {
        let Some(rest) = primary.strip_prefix(RECORD_PREFIX) else { return primary };
        let rest = rest.split_once(' ').map_or(rest, |(_, u)| u);
        match rest.rsplit_once(BODY_HASH) {
            Some((u, h)) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => u,
            _ => rest,
        }
    }

    /// The URL the key stands for ([`StoreKey::url_of`]).
    pub fn url(&self) -> &str {
        match self {
            StoreKey::Cache(u) => u,
            StoreKey::Record(r) => &r.url,
        }
    }

    /// The record key, for a record.
    pub fn record(&self) -> Option<&RecordKey> {
        match self {
            StoreKey::Cache(_) => None,
            StoreKey::Record(r) => Some(r),
        }
    }

    /// The primary key this stands for.
    pub fn primary(&self) -> String {
        match self {
            StoreKey::Cache(u) => u.clone(),
            StoreKey::Record(r) => r.primary(),
        }
    }
}

/// Which requests one recorded response answers: a record's secondary key.
/// Offline, a request is answered by the recorded variant whose selection
/// [`admits`](Selection::admits) it, and by no other (RFC 9111 section
/// 4.1, as the cache selects among its variants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// The response's `Vary` names these request fields (or none): the
    /// RFC 9111 section 4.1 secondary key of the request that fetched it
    /// ([`crate::cache::key::secondary_key`], empty without `Vary`).
    Fields(Vec<u8>),
    /// `Vary: *`: only an identical request, by the SHA-256 of the
    /// secondary key over all its end-to-end fields
    /// ([`crate::cache::key::end_to_end_fields`], names sorted).
    Identical([u8; 32]),
    /// A record written before variants were kept, of a `Vary: *`
    /// response: the request it answered is not known, so it answers any
    /// request, as it did then. Never written.
    Unknown,
}

impl Selection {
    /// The selection of a response with `response_headers` recorded for a
    /// request with `request_headers`.
    pub fn of_request(
        response_headers: &http::HeaderMap,
        request_headers: &http::HeaderMap,
    ) -> Selection {
        match key::secondary_key(response_headers, request_headers) {
            Some(sk) => Selection::Fields(sk),
            None => Selection::Identical(identity(request_headers)),
        }
    }

    /// The store's secondary key for it.
    pub fn secondary_key(&self) -> Vec<u8> {
        match self {
            Selection::Fields(sk) => sk.clone(),
            Selection::Identical(h) => {
                let mut out = Vec::with_capacity(33);
                out.push(IDENTICAL);
                out.extend_from_slice(h);
                out
            }
            Selection::Unknown => Vec::new(),
        }
    }

    /// The selection of a stored record: its `secondary_key` and decoded
    /// head `stored` (whose field lines are `response_headers`). Reads both
    /// forms (see the module docs): an empty secondary key beside a `Vary`
    /// that names fields is a record from before variants were kept, and
    /// its selection is rebuilt from the request fields stored with it.
    pub fn of_entry(
        secondary_key: &[u8],
        stored: &StoredResponse,
        response_headers: &http::HeaderMap,
    ) -> Selection {
        if secondary_key.first() == Some(&IDENTICAL) {
            if let Ok(h) = <[u8; 32]>::try_from(&secondary_key[1..]) {
                return Selection::Identical(h);
            }
        }
        if !secondary_key.is_empty() {
            return Selection::Fields(secondary_key.to_vec());
        }
        match key::vary_names(response_headers) {
            None => Selection::Unknown,
            Some(names) if names.is_empty() => Selection::Fields(Vec::new()),
            Some(names) => {
                Selection::Fields(key::secondary_key_of(&names, &fields_map(&stored.vary_request)))
            }
        }
    }

    /// Whether the recorded response (its field lines `response_headers`)
    /// answers a request with `request_headers`.
    pub fn admits(
        &self,
        response_headers: &http::HeaderMap,
        request_headers: &http::HeaderMap,
    ) -> bool {
        match self {
            Selection::Fields(sk) => {
                key::secondary_key(response_headers, request_headers).is_some_and(|k| &k == sk)
            }
            Selection::Identical(h) => identity(request_headers) == *h,
            Selection::Unknown => true,
        }
    }
}

/// The SHA-256 identifying a request by all its end-to-end fields: the
/// secondary key over every such field name, sorted.
fn identity(request_headers: &http::HeaderMap) -> [u8; 32] {
    let mut names: Vec<String> =
        key::end_to_end_fields(request_headers).into_iter().map(|(n, _)| n).collect();
    names.sort();
    names.dedup();
    Sha256::digest(key::secondary_key_of(&names, request_headers)).into()
}

/// Field lines as a header map (invalid names or values skipped).
pub fn fields_map(fields: &[(String, Vec<u8>)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::with_capacity(fields.len());
    for (name, value) in fields {
        if let (Ok(n), Ok(v)) = (
            http::header::HeaderName::from_bytes(name.as_bytes()),
            http::header::HeaderValue::from_bytes(value),
        ) {
            map.append(n, v);
        }
    }
    map
}

/// The request fields a stored response was selected by, for messages and
/// listings: `accept: "text/html", accept-encoding absent`; `Vary: *` for
/// a response only an identical request gets; empty without `Vary`.
pub fn describe_variant(
    response_headers: &http::HeaderMap,
    request_headers: &http::HeaderMap,
) -> String {
    let Some(names) = key::vary_names(response_headers) else {
        return "Vary: * (only an identical request)".to_string();
    };
    names
        .iter()
        .map(|n| {
            let values: Vec<String> = request_headers
                .get_all(n.as_str())
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect();
            if values.is_empty() {
                format!("{n} absent")
            } else {
                format!("{n}: {:?}", values.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderName, HeaderValue};

    fn hm(fields: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (n, v) in fields {
            map.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    fn stored(headers: &[(&str, &str)], vary_request: &[(&str, &str)]) -> StoredResponse {
        StoredResponse {
            status: 200,
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect(),
            request_time_ms: 1,
            response_time_ms: 2,
            url: "http://a.test/x".into(),
            vary_request: vary_request
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn record_keys_round_trip_and_never_look_like_cache_keys() {
        let get = RecordKey::get("http://a/x");
        assert_eq!(get.primary(), "record:GET http://a/x");
        assert_eq!(StoreKey::parse(&get.primary()), Ok(StoreKey::Record(get.clone())));
        let post = RecordKey::new(&Method::POST, "http://a/f?q= sha256=x", Some("ab01"));
        assert_eq!(post.primary(), "record:POST http://a/f?q= sha256=x sha256=ab01");
        assert_eq!(
            StoreKey::parse(&post.primary()),
            Ok(StoreKey::Record(post.clone())),
            "the last ` sha256=` is the body's"
        );
        assert_eq!(StoreKey::url_of(&post.primary()), "http://a/f?q= sha256=x");
        assert_eq!(StoreKey::url_of(&get.primary()), "http://a/x");
        assert!(StoreKey::is_record(&get.primary()) && !StoreKey::is_record("http://record:80/"));
        assert_eq!(
            StoreKey::parse("http://record:80/"),
            Ok(StoreKey::Cache("http://record:80/".into()))
        );
        assert_eq!(StoreKey::parse("http://a/x").unwrap().url(), "http://a/x");
        assert!(matches!(StoreKey::parse("record:nothing"), Err(KeyError::NoMethod(_))));
        assert!(matches!(StoreKey::parse("record:B@D http://a/"), Err(KeyError::BadMethod(_))));
        // A URL whose query ends in what looks like a hash but is not hex stays whole.
        assert_eq!(StoreKey::url_of("record:GET http://a/?x sha256=zz"), "http://a/?x sha256=zz");
    }

    #[test]
    fn section_4_1_a_record_variant_admits_only_the_requests_that_select_it() {
        let resp = hm(&[("vary", "Accept")]);
        let html = Selection::of_request(&resp, &hm(&[("accept", "text/html")]));
        assert_eq!(
            html.secondary_key(),
            key::secondary_key(&resp, &hm(&[("accept", "text/html")])).unwrap(),
            "the cache's secondary key"
        );
        assert!(html.admits(&resp, &hm(&[("accept", "text/html")])));
        assert!(
            html.admits(&resp, &hm(&[("accept", " text/html ")])),
            "normalised as RFC 9111 section 4.1 allows"
        );
        assert!(!html.admits(&resp, &hm(&[("accept", "application/json")])));
        assert!(!html.admits(&resp, &HeaderMap::new()));
        let none = Selection::of_request(&HeaderMap::new(), &hm(&[("accept", "x")]));
        assert_eq!(none, Selection::Fields(Vec::new()));
        assert!(none.admits(&HeaderMap::new(), &hm(&[("accept", "y")])));
    }

    #[test]
    fn section_4_1_vary_star_records_answer_only_an_identical_request() {
        let resp = hm(&[("vary", "*")]);
        let req = hm(&[("accept", "a"), ("user-agent", "u"), ("connection", "close")]);
        let sel = Selection::of_request(&resp, &req);
        assert!(matches!(sel, Selection::Identical(_)));
        assert_eq!(sel.secondary_key().len(), 33);
        assert!(
            sel.admits(&resp, &hm(&[("user-agent", "u"), ("accept", "a")])),
            "field order and hop-by-hop fields do not matter"
        );
        assert!(!sel.admits(&resp, &hm(&[("accept", "a")])), "a field fewer");
        assert!(
            !sel.admits(&resp, &hm(&[("accept", "a"), ("user-agent", "u"), ("cookie", "c")])),
            "a field more"
        );
        assert!(!sel.admits(&resp, &hm(&[("accept", "b"), ("user-agent", "u")])));
        // Read back from the store, and rebuilt from the fields kept with it.
        let s = stored(&[("vary", "*")], &[]);
        assert_eq!(Selection::of_entry(&sel.secondary_key(), &s, &resp), sel);
        let kept = key::nominated_fields(&resp, &req);
        assert_eq!(
            Selection::of_request(&resp, &fields_map(&kept)),
            sel,
            "an export's request record gives the same selection"
        );
    }

    #[test]
    fn records_written_before_variants_still_replay_to_the_requests_that_selected_them() {
        // The release before: secondary key empty, the request's Vary fields in the head.
        let resp = hm(&[("vary", "Accept-Encoding")]);
        let old = stored(&[("vary", "Accept-Encoding")], &[("accept-encoding", "gzip")]);
        let sel = Selection::of_entry(b"", &old, &resp);
        assert!(sel.admits(&resp, &hm(&[("accept-encoding", "gzip")])));
        assert!(!sel.admits(&resp, &hm(&[("accept-encoding", "identity")])));
        assert_eq!(
            sel,
            Selection::of_request(&resp, &hm(&[("accept-encoding", "gzip")])),
            "the same key a new record gets"
        );
        // No Vary: one record for every request, as before.
        assert_eq!(
            Selection::of_entry(b"", &stored(&[], &[]), &HeaderMap::new()),
            Selection::Fields(Vec::new())
        );
        // Vary: * with the request unknown: still replayed.
        let star = hm(&[("vary", "*")]);
        let sel = Selection::of_entry(b"", &stored(&[("vary", "*")], &[]), &star);
        assert_eq!(sel, Selection::Unknown);
        assert!(sel.admits(&star, &hm(&[("accept", "x")])));
    }

    #[test]
    fn variants_are_described_by_their_selecting_fields() {
        let resp = hm(&[("vary", "Accept, Accept-Language")]);
        assert_eq!(
            describe_variant(&resp, &hm(&[("accept", "text/csv")])),
            "accept: \"text/csv\", accept-language absent"
        );
        assert_eq!(describe_variant(&HeaderMap::new(), &HeaderMap::new()), "");
        assert!(describe_variant(&hm(&[("vary", "*")]), &HeaderMap::new()).contains("identical"));
    }
}
