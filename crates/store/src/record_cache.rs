//! Pack records read recently, by where they lie, so a hit on a stored
//! entry reads neither the segment file nor its CRC again.
//!
//! A record never changes where it lies: the pack is append-only, a record
//! moved by the tail walk is written elsewhere, and a segment is only cut
//! back at start-up (before anything is cached). So a cached record is the
//! record at that location, checked against its CRC when it was read; an
//! index row that points elsewhere is simply not found here. Only the
//! lookup path reads through this cache: `cache verify`, recovery and the
//! tail walk read the disk.
//!
//! Bounded by bytes (key, head and short body of each record, plus a fixed
//! overhead), least recently used out first.

use std::sync::Arc;

use crawlcache_base::byte_lru::ByteLru;

use crate::hash::Hash;
use crate::packs::{Loc, Record};
use crate::types::Entry;

/// Fixed bytes counted per cached record besides its fields (map node,
/// `Arc`, `Vec` headers).
const OVERHEAD: usize = 160;

/// The bytes a cached record is counted for.
fn cost(rec: &Record) -> usize {
    let body = rec.body.held_bytes().map_or(0, |b| b.len());
    rec.key.len() + rec.meta.len() + body + OVERHEAD
}

/// The cache (not synchronised: the store keeps it under a mutex).
pub(crate) struct RecordCache {
    map: ByteLru<Loc, Arc<Record>>,
}

impl RecordCache {
    /// A cache holding records of at most `capacity` bytes (0: none).
    pub fn new(capacity: u64) -> RecordCache {
        RecordCache { map: ByteLru::new(capacity, |r| cost(r)) }
    }

    /// The record at `loc`, if cached.
    pub fn get(&mut self, loc: &Loc) -> Option<Arc<Record>> {
        self.map.get(loc).cloned()
    }

    /// Keeps `rec`, read whole and checked from `loc`, evicting the least
    /// recently used records beyond the capacity. A record larger than the
    /// whole capacity is not kept.
    pub fn put(&mut self, loc: Loc, rec: Arc<Record>) {
        self.map.put(loc, rec);
    }

    /// Bytes counted now.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.map.bytes()
    }
}

/// An entry as a lookup read it, with the hash and location of its short
/// body when it has one in its pack record.
pub(crate) type Located = (Entry, Option<(Hash, Loc)>);

/// What a lookup found for one primary key.
pub(crate) type Found = Arc<[Located]>;

/// The bytes a cached lookup is counted for (the key twice: as the map's
/// key and in each entry).
fn found_cost(found: &(u64, Found)) -> usize {
    found
        .1
        .iter()
        .map(|(e, _)| {
            2 * e.primary_key.len() + e.secondary_key.len() + e.meta.len() + 64 + OVERHEAD
        })
        .sum()
}

/// Results of recent [`crate::Store::lookup`]s by primary key, each with
/// the index generation it was read at (`Index::generation`): a result
/// stands while the generation of its key has not moved, so a hit reads no
/// index rows. Bounded by bytes, least recently used out first; lookups
/// that found nothing are not kept (a new URL is a miss anyway).
pub(crate) struct LookupCache {
    map: ByteLru<String, (u64, Found)>,
}

impl LookupCache {
    /// A cache of at most `capacity` bytes (0: none).
    pub fn new(capacity: u64) -> LookupCache {
        LookupCache { map: ByteLru::new(capacity, found_cost) }
    }

    /// What the lookup of `primary_key` found when the index was at
    /// `generation`, if cached at that generation (a result read at another
    /// one is dropped).
    pub fn get(&mut self, primary_key: &str, generation: u64) -> Option<Found> {
        match self.map.get(primary_key) {
            Some((g, found)) if *g == generation => Some(Arc::clone(found)),
            Some(_) => {
                self.map.pop(primary_key);
                None
            }
            None => None,
        }
    }

    /// Keeps what the lookup of `primary_key` found at `generation`.
    pub fn put(&mut self, primary_key: &str, generation: u64, found: Found) {
        if !found.is_empty() {
            self.map.put(primary_key.to_string(), (generation, found));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packs::RecBody;

    fn rec(i: u64, meta: usize) -> Record {
        Record {
            stamp: i,
            key: format!("k{i}").into_bytes(),
            meta: vec![b'm'; meta],
            body: RecBody::None,
        }
    }

    #[test]
    fn keeps_records_by_location_within_its_bytes() {
        let mut c = RecordCache::new(10_000);
        for i in 0..100u64 {
            c.put(Loc { seg: 1, off: i * 1000, len: 1000 }, Arc::new(rec(i, 500)));
            assert!(c.bytes() <= 10_000, "{} bytes after {i}", c.bytes());
        }
        assert!(c.get(&Loc { seg: 1, off: 0, len: 1000 }).is_none(), "the oldest went");
        let last = c.get(&Loc { seg: 1, off: 99_000, len: 1000 }).expect("the newest stays");
        assert_eq!(last.stamp, 99);
        // Another location is another record, whatever its contents.
        assert!(c.get(&Loc { seg: 2, off: 99_000, len: 1000 }).is_none());
        let mut none = RecordCache::new(0);
        none.put(Loc { seg: 1, off: 0, len: 10 }, Arc::new(rec(0, 1)));
        assert!(none.get(&Loc { seg: 1, off: 0, len: 10 }).is_none());
    }
}
