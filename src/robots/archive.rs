//! robots.txt rules from an imported archive, for offline mode (SPEC
//! sections 4 and 6).
//!
//! `crawlcache import` keeps every `response` record of a WARC file as a
//! record in the store ([`crawlcache_policy::store_key::RecordKey`], the newest capture
//! per URL and variant), robots.txt captures included. Offline, an origin
//! that has no robots.txt snapshot of its own (it was never fetched
//! online) is judged by the newest robots.txt capture of that origin in
//! the store: [`rules`] answers the robots.txt request from the records
//! ([`ArchiveFetch`], a [`RobotsFetch`]) and decides exactly as a fetch
//! does ([`fetch_robots`], [`apply_fetch`]): a 2xx is parsed (its content
//! codings undone, at most `robots.max_size` of text), a 4xx is `absent`,
//! a 5xx or 429 `unavailable`; a redirect is followed to the capture of its
//! target under `robots.redirects`, with the same limit, loop detection
//! and scope, and a target the archive does not hold leaves the rules
//! unknown (`unavailable`: nothing says what it held). The snapshot is
//! dated by the capture (its `response_time`).
//!
//! An origin with neither a snapshot nor a robots.txt capture runs without
//! rules, as before. A stored snapshot always wins over the archive.
//!
//! Nothing is written: the rules are kept in memory per origin, with the
//! store's [`LookupVersion`] of every record read, and made again when one
//! of those records changes (an import into the running proxy).

use crawlcache_base::locks::lock;
use crawlcache_policy::cache::StoredResponse;
use crawlcache_policy::key_rules::KeyRule;
use crawlcache_policy::store_key::RecordKey;
use crawlcache_robots::decode::{decode, parse_content_encoding};
use crawlcache_robots::fetch::{
    apply_fetch, fetch_robots, FetchError, FetchFuture, RawRobotsResponse, RobotsFetch,
};
use crawlcache_robots::registry::Rules;
use crawlcache_robots::settings::RobotsConfig;
use crawlcache_robots::snapshot::{Origin, Validators};
use crawlcache_store::{BodyData, LookupVersion, Store};
use http::header::{CONTENT_ENCODING, ETAG, LAST_MODIFIED, LOCATION, RETRY_AFTER};
use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex};

/// Most origins whose archive rules are kept in memory; when full, the
/// memory starts over.
const MEMO_ORIGINS: usize = 4096;

/// What was made for one origin, and from which records.
struct Memo {
    /// Every record key read, with the store's version of it then.
    read: Vec<(String, LookupVersion)>,
    /// The rules (`None`: the archive holds no robots.txt of the origin).
    rules: Option<Arc<Rules>>,
}

fn memo() -> &'static Mutex<HashMap<String, Memo>> {
    static MEMO: std::sync::OnceLock<Mutex<HashMap<String, Memo>>> = std::sync::OnceLock::new();
    MEMO.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The rules the newest robots.txt capture of `origin` in `store` gives
/// (see the module docs), with `key_rules` (`cache.key_rules`, as the
/// import applied them) and `config` (`robots.redirects`,
/// `robots.max_size`, the windows and back-off the snapshot is built
/// with). `None` when the store holds no capture of `origin`'s robots.txt.
/// Never fails: a record that cannot be read counts as missing.
pub async fn rules(
    store: &Store,
    key_rules: &[KeyRule],
    config: &RobotsConfig,
    origin: &Origin,
) -> Option<Arc<Rules>> {
    let okey = origin.key();
    if let Some(m) = lock(memo()).get(&okey) {
        if m.read.iter().all(|(key, version)| store.lookup_version(key) == *version) {
            return m.rules.clone();
        }
    }
    let fetcher = ArchiveFetch {
        store: store.clone(),
        key_rules: key_rules.to_vec(),
        max_bytes: usize::try_from(config.max_size).unwrap_or(usize::MAX),
        read: Mutex::default(),
    };
    let captured_at = fetcher
        .capture(&origin.robots_url())
        .map(|(_, stored)| crawlcache_policy::cache::from_millis(stored.response_time_ms));
    let rules = match captured_at {
        None => None,
        Some(at) => {
            let result = fetch_robots(&fetcher, origin, None, config.redirects, "").await;
            let snapshot = apply_fetch(
                origin,
                None,
                result,
                &config.windows_for(&origin.host),
                &config.backoff(),
                at,
            );
            Some(Arc::new(Rules::new(snapshot)))
        }
    };
    let read = std::mem::take(&mut *lock(&fetcher.read));
    let mut m = lock(memo());
    if m.len() >= MEMO_ORIGINS {
        m.clear();
    }
    m.insert(okey, Memo { read, rules: rules.clone() });
    rules
}

/// A [`RobotsFetch`] that answers from the records of a store: the newest
/// capture (by `response_time`) of the GET of a URL, under the record key
/// an import gives it. No network.
pub struct ArchiveFetch {
    store: Store,
    key_rules: Vec<KeyRule>,
    /// Most bytes of decoded text kept (`robots.max_size`).
    max_bytes: usize,
    /// Every record key read, with its version before the read.
    read: Mutex<Vec<(String, LookupVersion)>>,
}

impl ArchiveFetch {
    /// The newest capture of a GET of `url`, with its head; `None` when
    /// there is none (or `url` is not an `http`/`https` URL).
    fn capture(&self, url: &str) -> Option<(crawlcache_store::Entry, StoredResponse)> {
        let uri: http::Uri = url.parse().ok()?;
        let key = crawlcache_policy::cache::key::primary_key(&uri)?;
        let primary =
            RecordKey::get(&crawlcache_policy::key_rules::apply(&self.key_rules, &key)).primary();
        let version = self.store.lookup_version(&primary);
        lock(&self.read).push((primary.clone(), version));
        let entries = match self.store.lookup(&primary) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!("offline robots.txt: the record {primary} cannot be read: {e}");
                return None;
            }
        };
        // The newest capture whatever its variant (RFC 9111 section 4.1's
        // order, kept in one place).
        let captures =
            entries.into_iter().filter_map(|e| StoredResponse::from_bytes(&e.meta).map(|s| (e, s)));
        crawlcache_policy::cache::variant::select(captures, |_| true, |(_, s)| s)
    }

    /// The response the archive holds for `url`, as the network fetcher
    /// gives it (`crawlcache::robots::http_fetch`): status, fields, and for
    /// a 2xx the body with its content codings undone.
    fn answer(&self, url: &str) -> Result<RawRobotsResponse, FetchError> {
        let Some((entry, stored)) = self.capture(url) else {
            return Err(FetchError::Other(format!(
                "the archive holds no capture of {url} (offline: nothing is fetched)"
            )));
        };
        let h = stored.header_map();
        let field = |name| {
            h.get(name)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
                .map(|s| s.trim().to_string())
        };
        let mut raw = RawRobotsResponse {
            status: stored.status,
            location: field(LOCATION),
            etag: field(ETAG),
            last_modified: field(LAST_MODIFIED),
            retry_after: field(RETRY_AFTER),
            ..RawRobotsResponse::default()
        };
        if !(200..300).contains(&stored.status) {
            return Ok(raw);
        }
        let codings = parse_content_encoding(
            h.get_all(CONTENT_ENCODING).iter().map(|v| v.to_str().unwrap_or("(not text)")),
        );
        // As the network fetcher: coded bytes up to a larger bound.
        let read_max = if codings.is_empty() {
            self.max_bytes
        } else {
            self.max_bytes.saturating_mul(2).saturating_add(64 * 1024)
        };
        let body = self.store.read_body(&entry).map_err(|e| {
            FetchError::Other(format!("the archived body of {url} cannot be read: {e}"))
        })?;
        let mut bytes = match body {
            BodyData::Bytes(b) => b,
            BodyData::File(f) => {
                let mut b = Vec::new();
                let limit = u64::try_from(read_max).unwrap_or(u64::MAX).saturating_add(1);
                f.take(limit).read_to_end(&mut b).map_err(|e| {
                    FetchError::Other(format!("the archived body of {url} cannot be read: {e}"))
                })?;
                b
            }
        };
        raw.truncated = bytes.len() > read_max;
        bytes.truncate(read_max);
        if codings.is_empty() {
            raw.body = bytes;
            return Ok(raw);
        }
        let listed = codings.join(", ");
        let decoded = decode(&codings, &bytes, self.max_bytes).map_err(|e| {
            FetchError::Undecodable(format!(
                "archived robots.txt {url} with Content-Encoding `{listed}`: {e}"
            ))
        })?;
        raw.body = decoded.body;
        raw.truncated = decoded.truncated;
        raw.content_encoding = Some(listed);
        Ok(raw)
    }
}

impl RobotsFetch for ArchiveFetch {
    fn fetch(&self, url: &str, _validators: Option<Validators>, _user_agent: &str) -> FetchFuture {
        let answer = self.answer(url);
        Box::pin(async move { answer })
    }
}
