//! A small in-memory cache of decoded entry metadata, so a cache hit does
//! not parse the stored response head and rebuild its header map
//! every time. Bounded by bytes (`store.memory_ceiling` / 16).
//!
//! It is keyed by the metadata bytes themselves (a hash, confirmed by
//! comparing the bytes), so it can never serve a head other than the one
//! stored: there is nothing to invalidate when entries change.

use crawlcache_base::byte_lru::ByteLru;
use crawlcache_policy::cache::StoredResponse;
use crawlcache_policy::cache::{Freshness, PolicyConfig};
use http::HeaderMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

/// A stored response head, decoded once.
pub struct Decoded {
    /// The metadata bytes this was decoded from.
    raw: Vec<u8>,
    /// The stored response.
    pub stored: StoredResponse,
    /// Its header fields as a map.
    pub headers: HeaderMap,
    /// Its freshness facts, computed at the first reuse decision (under the
    /// one policy configuration of the proxy this cache belongs to).
    freshness: OnceLock<Freshness>,
}

impl Decoded {
    /// The decoded form of `stored` (encoded as `raw`).
    fn new(raw: Vec<u8>, stored: StoredResponse) -> Decoded {
        let headers = stored.header_map();
        Decoded { raw, stored, headers, freshness: OnceLock::new() }
    }

    /// A copy with header values of its own (the same fields, newly
    /// allocated), for a serving thread's memo of lookups: every hit clones
    /// and drops the values of its head, and values shared with the other
    /// serving threads would move their reference counts between the
    /// cores at each of those steps.
    pub fn thread_copy(&self) -> Decoded {
        Decoded {
            raw: self.raw.clone(),
            stored: self.stored.clone(),
            headers: self.stored.header_map(),
            freshness: self.freshness.clone(),
        }
    }

    /// The stored response's freshness facts under `cfg`
    /// ([`Freshness::of`]), computed once: a cache serves one proxy, whose
    /// policy configuration does not change while it runs.
    pub fn freshness(&self, cfg: &PolicyConfig) -> &Freshness {
        self.freshness.get_or_init(|| Freshness::of(&self.stored, cfg))
    }
}

/// Map from metadata bytes to their decoded form, bounded by bytes (an
/// estimate of what each decoded head holds), least recently used first out.
pub struct MetaCache {
    inner: Mutex<ByteLru<u64, Arc<Decoded>>>,
}

/// Estimated bytes one decoded head holds: its raw bytes, the decoded
/// fields (names and values again), the header map (again, plus its index
/// table), and the fixed parts.
pub(crate) fn cost(d: &Arc<Decoded>) -> usize {
    3 * d.raw.len() + 48 * d.headers.len() + 512
}

impl MetaCache {
    /// A cache holding decoded heads of at most about `capacity_bytes` bytes.
    pub fn new(capacity_bytes: u64) -> MetaCache {
        MetaCache { inner: Mutex::new(ByteLru::new(capacity_bytes, cost)) }
    }

    /// The decoded form of `meta`; `None` if it is not a valid record.
    pub fn decode(&self, meta: &[u8]) -> Option<Arc<Decoded>> {
        let key = hash(meta);
        {
            let mut inner = self.lock();
            if let Some(d) = inner.get(&key) {
                if d.raw == meta {
                    return Some(d.clone());
                }
            }
        }
        let stored = StoredResponse::from_bytes(meta)?;
        let d = Arc::new(Decoded::new(meta.to_vec(), stored));
        self.lock().put(key, d.clone());
        Some(d)
    }

    /// Records that the head decoded as `old` was just replaced by `stored`,
    /// whose encoding is `meta` (a 304 freshening, RFC 9111 section 4.3.4):
    /// `old` leaves the cache (no entry holds those bytes any more), and the
    /// new head enters it already decoded, so that the next look-up of the
    /// entry (which reads `meta`) neither parses it nor builds its header
    /// map. Returns the new head's decoded form.
    pub fn replace(&self, old: &Decoded, meta: Vec<u8>, stored: StoredResponse) -> Arc<Decoded> {
        let d = Arc::new(Decoded::new(meta, stored));
        let old_key = hash(&old.raw);
        let mut inner = self.lock();
        if inner.peek(&old_key).is_some_and(|o| o.raw == old.raw) {
            inner.pop(&old_key);
        }
        inner.put(hash(&d.raw), d.clone());
        d
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByteLru<u64, Arc<Decoded>>> {
        crawlcache_base::locks::lock(&self.inner)
    }

    /// Estimated bytes held now.
    pub fn bytes(&self) -> usize {
        self.lock().bytes()
    }
}

/// The cache key of metadata bytes (confirmed by comparing the bytes).
fn hash(meta: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    meta.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_once_and_never_confuses_records() {
        let a = StoredResponse {
            status: 200,
            headers: vec![("etag".into(), b"\"a\"".to_vec())],
            request_time_ms: 1,
            response_time_ms: 2,
            url: "http://a/".into(),
            vary_request: vec![],
        };
        let mut b = a.clone();
        b.headers[0].1 = b"\"b\"".to_vec();
        let c = MetaCache::new(1 << 20);
        let da = c.decode(&a.to_bytes()).expect("valid");
        let da2 = c.decode(&a.to_bytes()).expect("valid");
        assert!(Arc::ptr_eq(&da, &da2), "second decode comes from the cache");
        let db = c.decode(&b.to_bytes()).expect("valid");
        assert_eq!(db.headers.get("etag").unwrap(), "\"b\"");
        assert!(c.decode(b"not json").is_none());
    }

    #[test]
    fn a_replaced_head_leaves_and_its_successor_is_served_decoded() {
        let a = StoredResponse {
            status: 200,
            headers: vec![("etag".into(), b"\"a\"".to_vec())],
            request_time_ms: 1,
            response_time_ms: 2,
            url: "http://a/".into(),
            vary_request: vec![],
        };
        let c = MetaCache::new(1 << 20);
        let da = c.decode(&a.to_bytes()).expect("valid");
        let held = c.bytes();
        let mut fresh = a.clone();
        fresh.response_time_ms = 3;
        fresh.headers.push(("age".into(), b"0".to_vec()));
        let df = c.replace(&da, fresh.to_bytes(), fresh.clone());
        assert_eq!(df.headers.get("age").unwrap(), "0");
        let df2 = c.decode(&fresh.to_bytes()).expect("valid");
        assert!(Arc::ptr_eq(&df, &df2), "the freshened head comes from the cache");
        assert_eq!(df2.stored.response_time_ms, 3);
        assert!(c.bytes() > held, "the new head is larger");
        assert!(c.bytes() < 2 * held, "and the old one left");
        let da2 = c.decode(&a.to_bytes()).expect("valid");
        assert!(!Arc::ptr_eq(&da, &da2), "the old head was decoded again");
        assert_eq!(da2.headers.get("etag").unwrap(), "\"a\"");
    }

    #[test]
    fn the_bytes_held_stay_under_the_bound() {
        let c = MetaCache::new(64 * 1024);
        for i in 0..2000 {
            let s = StoredResponse {
                status: 200,
                headers: vec![
                    ("etag".into(), format!("\"{i}\"").into_bytes()),
                    ("x-pad".into(), vec![b'p'; 300]),
                ],
                request_time_ms: 1,
                response_time_ms: 2,
                url: format!("http://a/{i}"),
                vary_request: vec![],
            };
            c.decode(&s.to_bytes()).expect("valid");
            assert!(c.bytes() <= 64 * 1024, "{} bytes after {i}", c.bytes());
        }
        assert!(c.bytes() > 32 * 1024, "and the room is used");
    }
}
