//! [`Counter`]: a monotonic counter split into per-thread slots, so the
//! serving threads do not pass its cache line between their cores.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots of one [`Counter`]: each thread adds to one of them (picked once
/// per thread, in turn), so the serving threads do not pass a counter's
/// cache line between their cores on every request, as one shared atomic
/// would make them do (several counters move on every hit).
pub(crate) const SLOTS: usize = 8;

/// A monotonic counter split into per-thread slots; its value is their sum.
#[derive(Debug, Default)]
pub struct Counter {
    slots: [Slot; SLOTS],
}

/// One slot, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot(AtomicU64);

/// The slot of the calling thread.
fn slot_index() -> usize {
    crawlcache_base::shard::thread_ordinal() % SLOTS
}

impl Counter {
    /// Adds `n` (in the calling thread's slot).
    pub fn add(&self, n: u64) {
        self.slots[slot_index()].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The counter's value: the sum of the slots (each read once; counts
    /// added meanwhile may or may not be in it).
    pub fn get(&self) -> u64 {
        self.slots.iter().map(|s| s.0.load(Ordering::Relaxed)).fold(0u64, u64::wrapping_add)
    }
}
