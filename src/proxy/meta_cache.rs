//! A small in-memory cache of decoded entry metadata, so a cache hit does
//! not parse the stored response head and rebuild its header map
//! every time.
//!
//! It is keyed by the metadata bytes themselves (a hash, confirmed by
//! comparing the bytes), so it can never serve a head other than the one
//! stored: there is nothing to invalidate when entries change.

use crate::cache::StoredResponse;
use http::HeaderMap;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

/// A stored response head, decoded once.
pub struct Decoded {
    /// The metadata bytes this was decoded from.
    raw: Vec<u8>,
    /// The stored response.
    pub stored: StoredResponse,
    /// Its header fields as a map.
    pub headers: HeaderMap,
}

/// Bounded map from metadata bytes to their decoded form.
pub struct MetaCache {
    map: Mutex<lru::LruCache<u64, Arc<Decoded>>>,
}

impl MetaCache {
    /// A cache holding at most `capacity` decoded heads.
    pub fn new(capacity: usize) -> MetaCache {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        MetaCache { map: Mutex::new(lru::LruCache::new(cap)) }
    }

    /// The decoded form of `meta`; `None` if it is not a valid record.
    pub fn decode(&self, meta: &[u8]) -> Option<Arc<Decoded>> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        meta.hash(&mut h);
        let key = h.finish();
        {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(d) = map.get(&key) {
                if d.raw == meta {
                    return Some(d.clone());
                }
            }
        }
        let stored = StoredResponse::from_bytes(meta)?;
        let headers = stored.header_map();
        let d = Arc::new(Decoded { raw: meta.to_vec(), stored, headers });
        self.map.lock().unwrap_or_else(|p| p.into_inner()).put(key, d.clone());
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_once_and_never_confuses_records() {
        let a = StoredResponse { status: 200, headers: vec![("etag".into(), b"\"a\"".to_vec())], request_time_ms: 1, response_time_ms: 2, url: "http://a/".into(), vary_request: vec![] };
        let mut b = a.clone();
        b.headers[0].1 = b"\"b\"".to_vec();
        let c = MetaCache::new(2);
        let da = c.decode(&a.to_bytes()).expect("valid");
        let da2 = c.decode(&a.to_bytes()).expect("valid");
        assert!(Arc::ptr_eq(&da, &da2), "second decode comes from the cache");
        let db = c.decode(&b.to_bytes()).expect("valid");
        assert_eq!(db.headers.get("etag").unwrap(), "\"b\"");
        assert!(c.decode(b"not json").is_none());
    }
}
