//! Looking a request up in the store: the variants of its URL, the one it
//! selects (RFC 9111 section 4.1, [`crawlcache_policy::cache::variant`]), and each
//! serving thread's memo of recent lookups, which answers a hit without the
//! index while the store's version of the key has not moved.

use super::meta_cache::Decoded;
use super::state::ProxyState;
use crawlcache_store::{Entry, StoreError};
use std::sync::Arc;
use std::time::SystemTime;

/// What the store holds for a request (RFC 9111 section 4.1).
pub struct Lookup {
    /// The most recent stored variant matching the request's secondary key.
    pub found: Option<Found>,
    /// Whether any variant at all is stored under the URI (tells a
    /// `vary-miss` from a `uri-miss`).
    pub had_any: bool,
    /// Offline only: the latest recorded response the request selects
    /// (SPEC section 6) and its record key, when the cache holds no
    /// matching variant.
    pub recorded: Option<(String, Found)>,
    /// Offline only, nothing recorded for the request: the request fields
    /// that selected none of the variants recorded for its URL, if any
    /// were (for the 504).
    pub missed_variant: Option<String>,
    /// The store's version of the key read before the lookup
    /// ([`crawlcache_store::Store::lookup_version`]); `None` if the lookup failed.
    pub version: Option<crawlcache_store::LookupVersion>,
}

/// A stored variant and its decoded head.
#[derive(Clone)]
pub struct Found {
    /// The index entry.
    pub entry: Arc<Entry>,
    /// The decoded stored response and its header map.
    pub decoded: Arc<Decoded>,
    /// What this serving thread remembers of the variant between hits,
    /// when it came from the thread's memo of lookups.
    pub hot: Option<Arc<HotVariant>>,
}

/// What a serving thread keeps of a variant it served, beside its head
/// ([`Found`] from the thread's memo of lookups).
#[derive(Default)]
pub struct HotVariant {
    /// The body, once served from memory (short bodies only: at most
    /// [`HOT_BODY_MAX`] bytes).
    pub body: std::sync::OnceLock<bytes::Bytes>,
    /// The second (since the Unix epoch) this thread last marked the
    /// variant used in the store's LRU order: one mark per second is
    /// enough for that order.
    pub touched: std::sync::atomic::AtomicU64,
    /// The memo keeps copies of its own for this variant
    /// (`HotKey::make_own`): a body kept from now on is copied too.
    pub own: bool,
}

/// Longest body a thread's memo keeps beside the head (at most
/// `HOT_KEYS` of them per thread: 4 MiB).
pub const HOT_BODY_MAX: u64 = 16 * 1024;

impl HotVariant {
    /// Whether a hit at `at` should mark the variant used in the store's LRU
    /// order: the first use in each second does.
    pub fn first_use_in_second(&self, at: SystemTime) -> bool {
        let secs = at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.touched.swap(secs, std::sync::atomic::Ordering::Relaxed) != secs
    }
}

/// The variants of `primary` in the store (or this thread's memo of
/// them, when the store's version of the key has not moved), and the one
/// a request with `request_headers` selects. Errors: the index cannot be
/// read.
pub fn look_up_variant(
    state: &ProxyState,
    primary: &str,
    request_headers: &http::HeaderMap,
) -> Result<Lookup, StoreError> {
    let version = state.store.lookup_version(primary);
    // Only keys with variants are memoized (had_any).
    let memo = HOT.try_with(|hot| {
        hot.try_borrow_mut().ok().and_then(|mut hot| {
            let Hot { keys, own_bytes, own_budget: budget } = &mut *hot;
            let h = keys.get_mut(primary).filter(|h| h.version == version)?;
            h.make_own(own_bytes, *budget.get_or_insert_with(|| own_budget(state)));
            Some(best_variant(&h.variants, request_headers))
        })
    });
    if let Ok(Some(found)) = memo {
        return Ok(Lookup {
            found,
            had_any: true,
            recorded: None,
            missed_variant: None,
            version: Some(version),
        });
    }
    let entries = state.store.lookup(primary)?;
    let had_any = !entries.is_empty();
    let mut variants = Vec::with_capacity(entries.len());
    let mut complete = true;
    for entry in entries {
        let Some(decoded) = state.meta_cache.decode(&entry.meta) else {
            tracing::warn!("dropping unreadable cache entry for {primary}");
            let _ = state.store.remove_variant(primary, &entry.secondary_key);
            complete = false;
            continue;
        };
        variants.push((Arc::new(entry), decoded, Arc::new(HotVariant::default())));
    }
    let found = best_variant(&variants, request_headers);
    if complete && had_any {
        let _ = HOT.try_with(|hot| {
            hot.try_borrow_mut().map(|mut hot| {
                hot.put(
                    primary,
                    HotKey { version, variants, own: false, own_refused: false, own_bytes: 0 },
                )
            })
        });
    }
    Ok(Lookup { found, had_any, recorded: None, missed_variant: None, version: Some(version) })
}

/// The stored variant among `variants` whose secondary key matches the
/// request's (RFC 9111 section 4.1), the most recently received when
/// several do.
fn best_variant(variants: &[HotEntry], request_headers: &http::HeaderMap) -> Option<Found> {
    let best = crawlcache_policy::cache::variant::select(
        variants,
        |(entry, decoded, _)| {
            crawlcache_policy::cache::variant::matches(
                &entry.secondary_key,
                &decoded.headers,
                request_headers,
            )
        },
        |(_, decoded, _)| &decoded.stored,
    );
    best.map(|(entry, decoded, hot)| Found {
        entry: entry.clone(),
        decoded: decoded.clone(),
        hot: Some(hot.clone()),
    })
}

/// The decoded variants of one primary key, as a lookup found them, and
/// the store's [`crawlcache_store::LookupVersion`] read before that lookup.
struct HotKey {
    version: crawlcache_store::LookupVersion,
    variants: Vec<HotEntry>,
    /// The heads and bodies are this thread's own copies
    /// ([`HotKey::make_own`]).
    own: bool,
    /// They did not fit in the thread's budget for copies: shared values.
    own_refused: bool,
    /// Bytes of the thread's budget for copies this key holds.
    own_bytes: u64,
}

impl HotKey {
    /// Bytes the thread's own copies of this key would take
    /// ([`HotKey::make_own`]): each head's decoded size, and each short
    /// body's length.
    fn own_cost(&self) -> u64 {
        self.variants
            .iter()
            .map(|(entry, decoded, _)| {
                let body = entry.body.as_ref().map_or(0, |b| b.len);
                crate::proxy::meta_cache::cost(decoded) as u64
                    + if body <= HOT_BODY_MAX { body } else { 0 }
            })
            .sum()
    }

    /// Replaces the variants' heads and short bodies, shared with the
    /// decoded-head and body caches (and so with the other serving
    /// threads), by copies of this thread's own, once: at the key's first
    /// hit from the memo, so a key looked up once (a miss, or a
    /// revalidation, which changes the key's lookup version every time) is
    /// never copied. Every hit clones and drops the header values and the
    /// body; on values shared between threads those reference counts move
    /// between the cores at each step. The copies of all keys of a thread
    /// stay within `budget` bytes ([`own_budget`]); a key that does not fit
    /// keeps the shared values. `reserved`: the thread's bytes of copies
    /// so far, raised by this key's.
    fn make_own(&mut self, reserved: &mut u64, budget: u64) {
        if self.own || self.own_refused {
            return;
        }
        let cost = self.own_cost();
        if reserved.saturating_add(cost) > budget {
            self.own_refused = true;
            return;
        }
        *reserved += cost;
        self.own = true;
        self.own_bytes = cost;
        for (_, decoded, hot) in &mut self.variants {
            *decoded = Arc::new(decoded.thread_copy());
            let body = std::sync::OnceLock::new();
            if let Some(b) = hot.body.get() {
                let _ = body.set(bytes::Bytes::copy_from_slice(b));
            }
            let touched = std::sync::atomic::AtomicU64::new(
                hot.touched.load(std::sync::atomic::Ordering::Relaxed),
            );
            *hot = Arc::new(HotVariant { body, touched, own: true });
        }
    }
}

/// Bytes of copies of its own (see [`HotKey::make_own`]) one serving
/// thread's memo may hold: a sixty-fourth of `store.memory_ceiling`,
/// shared among the serving threads (2 MiB each for the default 256 MiB
/// and two threads).
fn own_budget(state: &ProxyState) -> u64 {
    state
        .config
        .store
        .memory_budget()
        .lookup_memo_per_thread(super::shares::serving_threads(state.config.server.threads))
}

/// One variant in a thread's memo of lookups.
type HotEntry = (Arc<Entry>, Arc<Decoded>, Arc<HotVariant>);

/// The most keys one thread's memo of lookups holds; when full it starts
/// over (the hot set of a crawl or re-crawl refills it at once).
const HOT_KEYS: usize = 256;

/// A serving thread's memo of recent lookups (primary key -> decoded
/// variants), used while the store's [`crawlcache_store::Store::lookup_version`]
/// of the key is unchanged: a repeated hit skips the store's lookup (its
/// locks, its copies of the entry) and the decoded-head cache. Holds the
/// heads and, once served, bodies of at most [`HOT_BODY_MAX`] bytes
/// (shared with the body cache, or copies of its own within
/// [`own_budget`]), for at most [`HOT_KEYS`] keys per thread.
#[derive(Default)]
struct Hot {
    keys: std::collections::HashMap<String, HotKey>,
    /// Bytes of copies of its own the memo holds ([`HotKey::make_own`]).
    own_bytes: u64,
    /// [`own_budget`], worked out at this thread's first memo hit.
    own_budget: Option<u64>,
}

impl Hot {
    fn put(&mut self, primary: &str, key: HotKey) {
        if self.keys.len() >= HOT_KEYS && !self.keys.contains_key(primary) {
            self.keys.clear();
            self.own_bytes = 0;
        }
        if let Some(old) = self.keys.insert(primary.to_string(), key) {
            self.own_bytes = self.own_bytes.saturating_sub(old.own_bytes);
        }
    }
}

thread_local! {
    static HOT: std::cell::RefCell<Hot> = std::cell::RefCell::new(Hot::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memo key of one variant with a `body_len`-byte body, its head
    /// decoded by `cache` (shared, as a lookup leaves it).
    fn hot_key(
        cache: &crate::proxy::meta_cache::MetaCache,
        version: crawlcache_store::LookupVersion,
        url: &str,
        body_len: u64,
    ) -> HotKey {
        let stored = crawlcache_policy::cache::StoredResponse {
            status: 200,
            headers: vec![
                ("content-type".into(), b"text/plain".to_vec()),
                ("etag".into(), b"\"v1\"".to_vec()),
            ],
            request_time_ms: 1,
            response_time_ms: 2,
            url: url.into(),
            vary_request: Vec::new(),
        };
        let meta = stored.to_bytes();
        let decoded = cache.decode(&meta).expect("a head this code wrote decodes");
        let entry = Entry {
            primary_key: url.into(),
            secondary_key: Vec::new(),
            meta,
            body: Some(crawlcache_store::CommittedBody { sha256: "00".repeat(32), len: body_len }),
            last_used: 1,
        };
        HotKey {
            version,
            variants: vec![(Arc::new(entry), decoded, Arc::new(HotVariant::default()))],
            own: false,
            own_refused: false,
            own_bytes: 0,
        }
    }

    #[test]
    fn a_thread_copies_hot_heads_only_within_its_budget() {
        let cache = crate::proxy::meta_cache::MetaCache::new(1 << 20);
        let dir = tempfile::tempdir().unwrap();
        let store = crawlcache_store::Store::open(dir.path(), 1 << 20).unwrap();
        let v = store.lookup_version("http://e/a");
        let mut first = hot_key(&cache, v, "http://e/a", 10_000);
        let shared = Arc::clone(&first.variants[0].1);
        let cost = first.own_cost();
        assert!(cost >= 10_000, "the short body counts: {cost}");
        let mut reserved = 0;
        first.make_own(&mut reserved, cost);
        assert!(first.own && first.variants[0].2.own);
        assert!(!Arc::ptr_eq(&shared, &first.variants[0].1), "a head of the thread's own");
        assert_eq!(first.variants[0].1.headers, shared.headers, "the same fields");
        assert_eq!(reserved, cost);

        // The budget is spent: a second key keeps the shared head.
        let mut second = hot_key(&cache, v, "http://e/b", 10_000);
        let shared = Arc::clone(&second.variants[0].1);
        second.make_own(&mut reserved, cost);
        assert!(!second.own && second.own_refused && !second.variants[0].2.own);
        assert!(Arc::ptr_eq(&shared, &second.variants[0].1));
        assert_eq!(reserved, cost);

        // Replacing the first key gives its bytes back.
        let mut hot = Hot { keys: Default::default(), own_bytes: reserved, own_budget: None };
        hot.keys.insert("http://e/a".into(), first);
        hot.put("http://e/a", hot_key(&cache, v, "http://e/a", 10_000));
        assert_eq!(hot.own_bytes, 0);
    }
}
