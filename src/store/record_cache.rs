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

use super::packs::{Loc, RecBody, Record};
use crate::byte_lru::ByteLru;

/// Fixed bytes counted per cached record besides its fields (map node,
/// `Arc`, `Vec` headers).
const OVERHEAD: usize = 160;

/// The bytes a cached record is counted for.
fn cost(rec: &Record) -> usize {
    let body = match &rec.body {
        RecBody::Inline { bytes, .. } => bytes.len(),
        RecBody::None | RecBody::File { .. } => 0,
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u64, meta: usize) -> Record {
        Record { stamp: i, key: format!("k{i}").into_bytes(), meta: vec![b'm'; meta], body: RecBody::None }
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
