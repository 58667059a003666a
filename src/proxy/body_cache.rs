//! Stored bodies kept in memory for cache hits, bounded by bytes.
//!
//! A hit on a small entry would otherwise open, read and close its body
//! file every time: three system calls and a path walk, more than the rest
//! of the hit costs. Bodies are content-addressed (named by their SHA-256),
//! so a body held here can never be the wrong one for an entry that names
//! it: there is nothing to invalidate when entries change or are removed
//! (the index lookup that comes first decides what is served; this only
//! replaces the file read).

use bytes::Bytes;
use crawlcache_base::byte_lru::ByteLru;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// Least-recently-used map from body SHA-256 (hex) to the body's bytes,
/// holding at most `max_bytes` of bodies, each at most `max_object` bytes.
///
/// Also the maps of larger body files being sent ([`BodyCache::live_map`]):
/// while one response is sending a mapped body, another request for the
/// same body shares that map instead of mapping the file again. Only maps
/// in use are found; nothing here keeps one alive.
pub struct BodyCache {
    max_bytes: u64,
    max_object: u64,
    inner: Mutex<ByteLru<String, Bytes>>,
    live_maps: Mutex<HashMap<String, Weak<memmap2::Mmap>>>,
}

/// A shared map as the owner of response bytes.
struct SharedMap(Arc<memmap2::Mmap>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl BodyCache {
    /// A cache of at most `max_bytes` bytes of bodies, each of at most
    /// `max_object` bytes (`cache.body_memory`, `cache.body_memory_max_object`).
    /// `max_bytes = 0` turns it off.
    pub fn new(max_bytes: u64, max_object: u64) -> BodyCache {
        BodyCache {
            max_bytes,
            max_object: max_object.min(max_bytes),
            inner: Mutex::new(ByteLru::new(max_bytes, |b: &Bytes| b.len())),
            live_maps: Mutex::new(HashMap::new()),
        }
    }

    /// The bytes of the body named `sha256` from a map of its file that a
    /// response is sending right now, if there is one. A map costs a
    /// system call, a page-table entry per 4 KiB page and their teardown
    /// (a fifth of the CPU of a 4 MiB hit); bodies are named by their
    /// content, so any live map of that name holds the right bytes.
    pub fn live_map(&self, sha256: &str) -> Option<Bytes> {
        let map = crawlcache_base::locks::lock(&self.live_maps).get(sha256)?.upgrade()?;
        Some(Bytes::from_owner(SharedMap(map)))
    }

    /// Bytes backed by `map`, a map of the whole body file named `sha256`,
    /// which later requests find with [`BodyCache::live_map`] for as long
    /// as some response uses it.
    pub fn share_map(&self, sha256: &str, map: memmap2::Mmap) -> Bytes {
        let map = Arc::new(map);
        let mut live = crawlcache_base::locks::lock(&self.live_maps);
        if live.len() >= 64 {
            live.retain(|_, m| m.strong_count() > 0);
        }
        live.insert(sha256.to_owned(), Arc::downgrade(&map));
        drop(live);
        Bytes::from_owner(SharedMap(map))
    }

    /// Whether a body of `len` bytes is kept here.
    pub fn admits(&self, len: u64) -> bool {
        len > 0 && len <= self.max_object
    }

    /// The body named `sha256`, if held (and marks it recently used).
    pub fn get(&self, sha256: &str) -> Option<Bytes> {
        if self.max_bytes == 0 {
            return None;
        }
        crawlcache_base::locks::lock(&self.inner).get(sha256).cloned()
    }

    /// Keeps `body` under `sha256`, evicting the least recently used bodies
    /// beyond the byte budget. Bodies [`admits`](Self::admits) refuses are
    /// ignored.
    pub fn insert(&self, sha256: &str, body: Bytes) {
        let len = body.len() as u64;
        if !self.admits(len) {
            return;
        }
        crawlcache_base::locks::lock(&self.inner).put(sha256.to_owned(), body);
    }

    /// Bytes of bodies held.
    pub fn bytes(&self) -> u64 {
        crawlcache_base::locks::lock(&self.inner).bytes() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_map_is_shared_while_in_use_and_forgotten_after() {
        use std::io::Write;
        let c = BodyCache::new(1 << 20, 1 << 10);
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&[7u8; 100_000]).unwrap();
        let map = crate::wire::sendfile::copy_map(f.as_file(), 100_000).unwrap();
        assert!(c.live_map("h").is_none());
        let first = c.share_map("h", map);
        let second = c.live_map("h").expect("found while the first response holds it");
        assert_eq!(first.as_ptr(), second.as_ptr(), "the same map, not a new one");
        assert!(second == vec![7u8; 100_000]);
        drop(first);
        assert!(c.live_map("h").is_some(), "still held by the second");
        drop(second);
        assert!(c.live_map("h").is_none(), "nothing keeps a map alive once no response uses it");
    }

    #[test]
    fn stays_within_its_byte_budget_evicting_the_least_recently_used() {
        let c = BodyCache::new(10, 4);
        c.insert("a", Bytes::from_static(b"aaaa"));
        c.insert("b", Bytes::from_static(b"bbbb"));
        assert_eq!(c.get("a").as_deref(), Some(&b"aaaa"[..])); // a is now the most recent
        c.insert("c", Bytes::from_static(b"cccc"));
        assert_eq!(c.bytes(), 8);
        assert!(c.get("b").is_none(), "b was the least recently used");
        assert!(c.get("a").is_some() && c.get("c").is_some());
    }

    #[test]
    fn refuses_bodies_over_the_object_limit_and_empty_ones() {
        let c = BodyCache::new(100, 4);
        c.insert("big", Bytes::from_static(b"12345"));
        c.insert("empty", Bytes::new());
        assert!(c.get("big").is_none() && c.get("empty").is_none());
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn a_zero_budget_holds_nothing() {
        let c = BodyCache::new(0, 1024);
        c.insert("a", Bytes::from_static(b"a"));
        assert!(c.get("a").is_none());
    }

    #[test]
    fn replacing_a_body_keeps_the_count_right() {
        let c = BodyCache::new(100, 10);
        c.insert("a", Bytes::from_static(b"aaaa"));
        c.insert("a", Bytes::from_static(b"aaaa"));
        assert_eq!(c.bytes(), 4);
    }
}
