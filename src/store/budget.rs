//! The size budget and the LRU order.
//!
//! Every entry carries a stamp (larger means more recently used); the `lru`
//! tree maps stamp to entry. Stamps are a hybrid clock ([`Inner::stamp`]):
//! microseconds since the Unix epoch at the time of the use, raised past the
//! previous stamp when the clock has not moved or went back, so they are
//! unique and increasing and also say when an entry was last used
//! ([`super::Entry::last_used_at`]). A hit (and a
//! 304 freshening, with its new metadata) only records a new stamp in memory
//! ([`Inner::record_pending`]); pending stamps
//! are written in batches ([`Inner::apply_touches`]) by the background
//! thread, before an entry would be evicted, by `Store::flush` and at close.
//! [`Inner::evict_to_budget`] removes the least recently used entries until
//! the bytes of distinct body files fit `max_size`.

use std::sync::atomic::Ordering;

use super::index::{entry_key, split_entry_key, EvictStep};
use super::{lock, Entry, Inner, StoreError};

/// Pending touches written to the index once this many have accumulated.
pub const TOUCH_BATCH: usize = 1024;
/// Past this many pending touches the caller of `touch` writes them itself
/// (back-pressure when the background thread cannot keep up).
const TOUCH_LIMIT: usize = 16 * TOUCH_BATCH;

/// A touch or freshening not yet written to the index.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    /// The newest stamp.
    pub stamp: u64,
    /// New metadata (a 304 freshening), if any.
    pub meta: Option<Vec<u8>>,
}

impl Inner {
    /// Records that the entry under `key` was just used (and, with `meta`,
    /// freshened): a new stamp kept in memory, written with the next batch.
    /// Wakes the background thread at [`TOUCH_BATCH`] pending touches;
    /// writes them itself past `TOUCH_LIMIT`.
    pub(super) fn record_pending(&self, key: Vec<u8>, meta: Option<Vec<u8>>) {
        let stamp = self.stamp();
        let pending = {
            let mut pending = lock(&self.pending);
            match pending.entry(key) {
                std::collections::hash_map::Entry::Occupied(mut o) => {
                    let p = o.get_mut();
                    p.stamp = stamp;
                    if meta.is_some() {
                        p.meta = meta;
                    }
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(Pending { stamp, meta });
                }
            }
            pending.len()
        };
        if pending >= TOUCH_LIMIT {
            let _m = self.read_maintenance();
            self.apply_touches();
        } else if pending >= TOUCH_BATCH {
            self.wake();
        }
    }

    /// A fresh LRU stamp, larger than every earlier one: the current time
    /// in microseconds since the Unix epoch, or the previous stamp + 1 when
    /// that is larger (a clock that stood still or went back).
    pub(super) fn stamp(&self) -> u64 {
        let now = super::clock_micros(std::time::SystemTime::now());
        match self.next_stamp.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.max(now).saturating_add(1))) {
            Ok(prev) | Err(prev) => prev.max(now),
        }
    }

    /// Applies pending (not yet written) touches and freshenings to entries
    /// read from the index: a newer stamp, and newer metadata.
    pub(super) fn overlay_pending(&self, entries: &mut [Entry]) {
        let pending = lock(&self.pending);
        if pending.is_empty() {
            return;
        }
        for e in entries {
            if let Some(p) = pending.get(&entry_key(&e.primary_key, &e.secondary_key)) {
                // Only over the record it was made for: a later insert has a larger stamp.
                if p.stamp > e.last_used {
                    e.last_used = p.stamp;
                    if let Some(m) = &p.meta {
                        e.meta = m.clone();
                    }
                }
            }
        }
    }

    /// Writes every pending touch and freshening to the index. Failures are
    /// logged: a lost touch only makes an entry look older than it is, a
    /// lost freshening staler.
    pub(super) fn apply_touches(&self) {
        let batch: Vec<(Vec<u8>, Pending)> = std::mem::take(&mut *lock(&self.pending)).into_iter().collect();
        for chunk in batch.chunks(256) {
            if let Err(e) = self.index.restamp_many(chunk) {
                tracing::warn!(error = %e, "could not record cache hits in the LRU order");
            }
        }
    }

    /// Evicts least-recently-used entries until the bytes stored fit the
    /// budget. Returns how many entries went.
    pub(super) fn evict_to_budget(&self) -> Result<u64, StoreError> {
        let _g = lock(&self.evict_lock);
        let mut evicted = 0;
        loop {
            let totals = self.index.totals()?;
            if totals.bytes <= self.max_size {
                break;
            }
            let Some((stamp, key)) = self.index.oldest()? else {
                tracing::warn!(bytes = totals.bytes, "bytes stored exceed the budget but no entry is left (run cache verify)");
                break;
            };
            // A hit not yet written makes this entry recent: record it instead.
            let touched = lock(&self.pending).remove(&key);
            if let Some(p) = touched {
                if p.stamp > stamp && self.index.restamp(&key, p.stamp, p.meta.as_deref()).is_ok() {
                    continue;
                }
            }
            match self.index.evict(stamp)? {
                EvictStep::Skipped => {}
                EvictStep::Evicted { key, released } => {
                    evicted += 1;
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                    if let Some((pk, _)) = split_entry_key(&key) {
                        tracing::debug!(primary_key = pk, "evicted by the size budget");
                    }
                    self.queue_reap(&released.zero);
                }
            }
        }
        Ok(evicted)
    }
}
