//! The one split of `store.memory_ceiling`: how many bytes each in-memory
//! cache of the proxy may hold, so that they add up to a known share of
//! the ceiling wherever they are created.

/// The shares of the memory ceiling (bytes of resident memory the proxy
/// aims to stay under): the index's page cache a thirty-second, the
/// decoded-head cache and the record cache a sixteenth each, the serving
/// threads' lookup memos a sixty-fourth between them. What is left is for
/// connections, buffers in flight and the allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    ceiling: u64,
}

impl MemoryBudget {
    /// The split of `ceiling` bytes.
    pub fn new(ceiling: u64) -> MemoryBudget {
        MemoryBudget { ceiling }
    }

    /// Bytes of sled's page cache: a thirty-second. sled counts its cache
    /// by the serialized size of the nodes it holds, and what they take in
    /// memory is several times that (benches/scale.sh, docs/performance.md),
    /// hence the small share.
    pub fn index_cache(&self) -> u64 {
        self.ceiling / 32
    }

    /// Bytes of the cache of decoded response heads: a sixteenth.
    pub fn head_cache(&self) -> u64 {
        self.ceiling / 16
    }

    /// Bytes of the store's cache of recently read pack records (entry
    /// heads and short bodies): a sixteenth.
    pub fn record_cache(&self) -> u64 {
        self.ceiling / 16
    }

    /// Bytes of its own copies one of `threads` serving threads' lookup
    /// memo may hold: a sixty-fourth shared among them (2 MiB each for
    /// 256 MiB and two threads). `threads` of 0 counts as 1.
    pub fn lookup_memo_per_thread(&self, threads: usize) -> u64 {
        self.ceiling / 64 / threads.max(1) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_of_the_default_ceiling() {
        let b = MemoryBudget::new(256 << 20);
        assert_eq!(
            (b.index_cache(), b.head_cache(), b.record_cache()),
            (8 << 20, 16 << 20, 16 << 20)
        );
        assert_eq!(b.lookup_memo_per_thread(2), 2 << 20);
        assert_eq!(b.lookup_memo_per_thread(0), 4 << 20);
        let total =
            b.index_cache() + b.head_cache() + b.record_cache() + b.lookup_memo_per_thread(1);
        assert!(total < (256 << 20) / 4, "the caches keep to under a quarter of the ceiling");
    }
}
