//! A least-recently-used map bounded by the bytes its values are counted
//! for, rather than by their number: the in-memory caches in front of the
//! store (decoded heads, pack records, small bodies) each hold values of
//! very different sizes under one memory bound.

use std::borrow::Borrow;
use std::hash::Hash;

/// The map. Not synchronised: each cache keeps it under its own mutex.
pub struct ByteLru<K: Hash + Eq, V> {
    map: lru::LruCache<K, V>,
    /// Bytes the values held are counted for.
    bytes: usize,
    /// Bound on `bytes`.
    capacity: usize,
    /// The bytes a value is counted for.
    cost: fn(&V) -> usize,
}

impl<K: Hash + Eq, V> ByteLru<K, V> {
    /// An empty map holding values of at most `capacity` bytes in all, each
    /// counted as `cost` says (0: nothing is kept).
    pub fn new(capacity: u64, cost: fn(&V) -> usize) -> ByteLru<K, V> {
        ByteLru {
            map: lru::LruCache::unbounded(),
            bytes: 0,
            capacity: usize::try_from(capacity).unwrap_or(usize::MAX),
            cost,
        }
    }

    /// The value under `key`, marked most recently used.
    pub fn get<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.map.get(key)
    }

    /// The value under `key`, without marking it used.
    pub fn peek<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.map.peek(key)
    }

    /// Removes and returns the value under `key`.
    pub fn pop<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let v = self.map.pop(key)?;
        self.bytes -= (self.cost)(&v);
        Some(v)
    }

    /// Keeps `value` under `key` (replacing what was there), then lets the
    /// least recently used values go until the bytes held fit the bound. A
    /// value larger than the whole bound is not kept.
    pub fn put(&mut self, key: K, value: V) {
        let size = (self.cost)(&value);
        if size > self.capacity {
            return;
        }
        if let Some(old) = self.map.put(key, value) {
            self.bytes -= (self.cost)(&old);
        }
        self.bytes += size;
        while self.bytes > self.capacity {
            match self.map.pop_lru() {
                Some((_, old)) => self.bytes -= (self.cost)(&old),
                None => break,
            }
        }
    }

    /// Bytes the values held are counted for.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_values_within_their_bytes_least_recently_used_out_first() {
        let mut m: ByteLru<&str, Vec<u8>> = ByteLru::new(10, |v| v.len());
        m.put("a", vec![0; 4]);
        m.put("b", vec![0; 4]);
        assert!(m.get("a").is_some(), "a is now the most recent");
        m.put("c", vec![0; 4]);
        assert_eq!(m.bytes(), 8);
        assert!(m.peek("b").is_none(), "b was the least recently used");
        m.put("a", vec![0; 2]);
        assert_eq!(m.bytes(), 6, "a replaced value is counted once");
        assert_eq!(m.pop("c").map(|v| v.len()), Some(4));
        assert_eq!(m.bytes(), 2);
        m.put("big", vec![0; 11]);
        assert!(m.peek("big").is_none(), "larger than the whole bound: not kept");
        let mut none: ByteLru<u8, Vec<u8>> = ByteLru::new(0, |v| v.len());
        none.put(1, vec![0]);
        assert!(none.get(&1).is_none());
    }
}
