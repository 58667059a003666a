//! Which primary keys may be in the index: a Bloom filter (Bloom, 1970)
//! over the primary keys of every entry row, so that a lookup of a key
//! never stored (every request of a first crawl) is answered without
//! reading sled. sled's range scan for a key it does not hold was the
//! largest single cost of a miss (about 6 % of its CPU, twice per miss
//! with the insert's read of the old row).
//!
//! The filter can say "maybe" for a key that is absent (about 1 % of
//! absent keys while it holds fewer keys than [`Presence::capacity`]), never
//! "absent" for a key that is present: every entry row reaches the index
//! through [`crate::index::Index::apply`], which adds its key here before
//! the row can be read, and the filter is built from every row already
//! there (sled's and the in-memory overlay's) before it is used. Until
//! then it says "maybe" for everything. Removed keys stay in it (a Bloom filter
//! cannot forget); once half as many new keys as it was sized for went
//! into it, it is rebuilt from the index in the background (a new filter
//! fills while the old one keeps answering, then takes its place).
//!
//! Its size is fixed (`store.memory_ceiling` / 32, 8 MiB by default: 67
//! million bits, about 7 million keys at a 1 % false-positive rate), so
//! memory does not grow with the entry count.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Probes per key.
const PROBES: u64 = 7;

/// Bits per key the filter is sized for (1 % false positives at 7 probes).
const BITS_PER_KEY: u64 = 10;

/// One filter's bits.
pub(crate) struct Bits {
    words: Box<[AtomicU64]>,
    /// Number of bits minus one (a power of two minus one).
    mask: u64,
    /// Built: every key of the index at the time is in it.
    ready: AtomicBool,
    /// Keys added since it was started.
    added: AtomicU64,
    /// `added` when it was built: keys added after that are new keys.
    at_build: AtomicU64,
}

impl Bits {
    fn new(bytes: usize) -> Bits {
        let words = (bytes / 8).max(1).next_power_of_two();
        Bits {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            mask: (words as u64) * 64 - 1,
            ready: AtomicBool::new(false),
            added: AtomicU64::new(0),
            at_build: AtomicU64::new(0),
        }
    }

    fn probes(&self, h: (u64, u64)) -> impl Iterator<Item = u64> + '_ {
        (0..PROBES).map(move |i| h.0.wrapping_add(i.wrapping_mul(h.1)) & self.mask)
    }

    fn set(&self, h: (u64, u64)) {
        for bit in self.probes(h) {
            self.words[(bit / 64) as usize].fetch_or(1 << (bit % 64), Ordering::Release);
        }
        self.added.fetch_add(1, Ordering::Relaxed);
    }

    fn test(&self, h: (u64, u64)) -> bool {
        self.probes(h).all(|bit| {
            self.words[(bit / 64) as usize].load(Ordering::Acquire) & (1 << (bit % 64)) != 0
        })
    }
}

/// Two independent 64-bit hashes of `key` (FNV-1a, then a SplitMix64
/// finalizer of it for the second; double hashing derives the probes).
fn hash(key: &[u8]) -> (u64, u64) {
    let h = crate::hash::fnv1a(key);
    let mut z = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // An odd step visits distinct bits.
    (h ^ (h >> 29), z | 1)
}

/// The filter of the primary keys in an index (see the module docs).
pub(crate) struct Presence {
    bytes: usize,
    current: RwLock<Arc<Bits>>,
    /// A filter being built: keys added meanwhile go to it as well.
    building: Mutex<Option<Arc<Bits>>>,
    /// A build is running or asked for.
    rebuilding: AtomicBool,
}

impl Presence {
    /// A filter of `bytes` bytes (rounded to a power of two), not built yet
    /// (it says "maybe" until [`Presence::finish_build`]).
    pub fn new(bytes: usize) -> Presence {
        Presence {
            bytes,
            current: RwLock::new(Arc::new(Bits::new(bytes))),
            building: Mutex::new(None),
            rebuilding: AtomicBool::new(false),
        }
    }

    /// How many keys the filter is sized for.
    pub fn capacity(&self) -> u64 {
        (self.bytes as u64).saturating_mul(8) / BITS_PER_KEY
    }

    /// Whether `primary` (a primary key's bytes) may have entry rows:
    /// `false` only when it certainly has none.
    pub fn may_contain(&self, primary: &[u8]) -> bool {
        let cur = crawlcache_base::locks::read(&self.current);
        !cur.ready.load(Ordering::Acquire) || cur.test(hash(primary))
    }

    /// Adds `primary` (a primary key's bytes), before its row can be read.
    pub fn add(&self, primary: &[u8]) {
        let h = hash(primary);
        crawlcache_base::locks::read(&self.current).set(h);
        if let Some(b) = crawlcache_base::locks::lock(&self.building).as_ref() {
            b.set(h);
        }
    }

    /// Whether a build should start: the filter was never built, or half
    /// as many new keys as it was sized for went into it since it was
    /// built (removed keys stay set: a rebuild clears them). An index
    /// holding more keys than the filter was sized for is thus rebuilt
    /// only after that many new keys, not again and again; the filter then
    /// just says "maybe" more often.
    pub fn needs_build(&self) -> bool {
        if self.rebuilding.load(Ordering::Acquire) {
            return false;
        }
        let cur = crawlcache_base::locks::read(&self.current);
        let new_keys =
            cur.added.load(Ordering::Relaxed).saturating_sub(cur.at_build.load(Ordering::Relaxed));
        !cur.ready.load(Ordering::Acquire) || new_keys > self.capacity() / 2
    }

    /// Starts a build: returns the new filter to fill with every key in
    /// the index (keys added from now on go to it too), or `None` when a
    /// build is already running. Call it while no key can be added (under
    /// the index lock), then add the keys held in memory, release the lock
    /// and add the rest; then [`Presence::finish_build`].
    pub fn start_build(&self) -> Option<Arc<Bits>> {
        if self.rebuilding.swap(true, Ordering::AcqRel) {
            return None;
        }
        let fresh = Arc::new(Bits::new(self.bytes));
        *crawlcache_base::locks::lock(&self.building) = Some(fresh.clone());
        Some(fresh)
    }

    /// Puts a filled filter in place (call it under the index lock).
    pub fn finish_build(&self, fresh: Arc<Bits>) {
        fresh.at_build.store(fresh.added.load(Ordering::Relaxed), Ordering::Relaxed);
        fresh.ready.store(true, Ordering::Release);
        *crawlcache_base::locks::write(&self.current) = fresh;
        *crawlcache_base::locks::lock(&self.building) = None;
        self.rebuilding.store(false, Ordering::Release);
    }

    /// Gives up a build that could not finish (the filter keeps answering
    /// as before; a later build may be tried).
    pub fn abandon_build(&self) {
        *crawlcache_base::locks::lock(&self.building) = None;
        self.rebuilding.store(false, Ordering::Release);
    }

    /// Whether the filter answers (it was built).
    pub fn is_ready(&self) -> bool {
        crawlcache_base::locks::read(&self.current).ready.load(Ordering::Acquire)
    }
}

/// A filter being built ([`Presence::start_build`]).
pub(crate) type Building = Arc<Bits>;

/// Adds `primary` to a filter being built.
pub(crate) fn add_to(b: &Building, primary: &[u8]) {
    b.set(hash(primary));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_never_says_absent_for_a_key_added_and_rarely_for_others() {
        let p = Presence::new(1 << 16);
        assert!(p.may_contain(b"http://a/never"), "not built: maybe for everything");
        let b = p.start_build().expect("first build");
        for i in 0..2000 {
            add_to(&b, format!("http://built/{i}").as_bytes());
        }
        p.finish_build(b);
        for i in 0..2000 {
            p.add(format!("http://added/{i}").as_bytes());
        }
        for i in 0..2000 {
            assert!(p.may_contain(format!("http://built/{i}").as_bytes()));
            assert!(p.may_contain(format!("http://added/{i}").as_bytes()));
        }
        let false_positives =
            (0..10_000).filter(|i| p.may_contain(format!("http://other/{i}").as_bytes())).count();
        assert!(false_positives < 300, "{false_positives} of 10,000 absent keys said maybe");
    }

    #[test]
    fn keys_added_during_a_build_are_in_the_new_filter() {
        let p = Presence::new(1 << 12);
        let b = p.start_build().expect("build");
        assert!(p.start_build().is_none(), "one build at a time");
        p.add(b"http://during/1");
        p.finish_build(b);
        assert!(p.may_contain(b"http://during/1"));
        assert!(!p.needs_build());
        for i in 0..p.capacity() / 2 + 1 {
            p.add(format!("http://k/{i}").as_bytes());
        }
        assert!(p.needs_build(), "half its capacity in new keys: rebuild");
    }

    /// A filter built over more keys than it was sized for is not asked to
    /// build again at once (it would rebuild forever, a core busy).
    #[test]
    fn a_filter_built_over_more_keys_than_its_size_is_not_rebuilt_at_once() {
        let p = Presence::new(1 << 8);
        let b = p.start_build().expect("build");
        for i in 0..p.capacity() * 10 {
            add_to(&b, format!("http://many/{i}").as_bytes());
        }
        p.finish_build(b);
        assert!(!p.needs_build());
        assert!(p.may_contain(b"http://many/1"));
    }
}
