//! Touches, the size budget, and the walk of the log's tail that evicts
//! and compacts.
//!
//! Every pack record carries the stamp it was written at, every index row
//! the stamp of its entry's last use. Stamps are a hybrid clock
//! ([`crate::stamp::issue_stamp`]): microseconds since the Unix epoch, raised past
//! the previous stamp when the clock has not moved or went back, so they are
//! unique and increasing (larger is more recent) and also say when an entry
//! was last used ([`crate::Entry::last_used_at`]). A hit (and a 304 freshening, with its new metadata) only records
//! a new stamp in memory ([`Inner::record_pending`]); pending stamps are
//! written in batches ([`Inner::apply_touches`]) by the background thread,
//! by `Store::flush` and at close. A freshening is written as a new record.
//!
//! Eviction is CLOCK over the pack log: [`Inner::evict_to_budget`] walks
//! records from the tail, in the order they were written. A record no entry
//! points at any more is skipped; an entry used since its record was written
//! (a later stamp in its row, or a pending touch) gets a second chance: its
//! record is copied to the head of the log and the walk goes on; any other
//! entry is evicted. A second-chance copy carries a fresh record stamp but
//! keeps the entry's last use in its row, so an entry not used again is
//! evicted when the tail comes round to it, and `cache prune` still sees
//! when it was really last used. Nothing in
//! memory grows with the number of entries.
//!
//! Compaction ([`Inner::compact`], from the background thread) walks the
//! tail the same way without evicting: live records are copied forward,
//! dead ones dropped, while the pack holds more than twice its live bytes
//! (plus one segment). Segments the tail has passed are deleted by the next
//! group commit, once the copies are durable.
//!
//! Shared body records are never evicted themselves: one is live while its
//! reference-count row names it, and then copied forward like a live entry
//! (its row follows it); it dies with its last reference. An entry's record
//! that still holds the inline copy of a body shared since is copied
//! without it (a reference), which is how that copy's space comes back.

use std::sync::atomic::Ordering;

use crawlcache_base::locks::lock;

use crate::apply::Op;
use crate::error::StoreError;
use crate::hash::Hash;
use crate::index::{self, split_entry_key, Place, Slot, SlotBody};
use crate::inner::{Inner, Pending};
use crate::packs::{Loc, Pos, ReadError, RecBody, Record, SEGMENT_SIZE};
use crate::stamp::issue_stamp;
use crate::types::Entry;

/// Pending touches written to the index once this many have accumulated.
pub const TOUCH_BATCH: usize = 1024;
/// Past this many pending touches the caller of `touch` writes them itself
/// (back-pressure when the background thread cannot keep up).
const TOUCH_LIMIT: usize = 16 * TOUCH_BATCH;
/// Bytes of log one compaction round walks at most before letting go of
/// the tail lock.
const COMPACT_STEP: u64 = 16 * 1024 * 1024;

/// What one step of the tail walk did.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Nothing left behind the head.
    End,
    /// Skipped a dead record (or an empty or missing segment).
    Skipped,
    /// Copied a live record to the head.
    Moved,
    /// Evicted an entry.
    Evicted,
}

impl Inner {
    /// Records that the entry under `key` was just used (and, with `meta`,
    /// freshened): a new stamp kept in memory, written with the next batch.
    /// Wakes the background thread at [`TOUCH_BATCH`] pending touches;
    /// writes them itself past `TOUCH_LIMIT`.
    /// `key` is the entry key ([`crate::index::entry_key`]); it is copied
    /// only when the entry has no pending touch yet.
    pub(super) fn record_pending(&self, key: &[u8], meta: Option<Vec<u8>>) {
        let stamp = self.stamp();
        let freshening = meta.is_some();
        let pending = {
            let mut pending = lock(&self.pending);
            match pending.get_mut(key) {
                Some(p) => {
                    p.stamp = stamp;
                    if meta.is_some() {
                        p.meta = meta;
                    }
                }
                None => {
                    pending.insert(key.to_vec(), Pending { stamp, meta });
                }
            }
            if freshening {
                // Under the lock, after the metadata is in place: a reader
                // that sees the new count also sees the new metadata.
                self.freshenings.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
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

    /// A fresh stamp, larger than every earlier one ([`crate::stamp::issue_stamp`]).
    pub(super) fn stamp(&self) -> u64 {
        issue_stamp(&self.next_stamp)
    }

    /// Applies pending (not yet written) touches and freshenings to entries
    /// read from the index: a newer stamp, and newer metadata.
    pub(super) fn overlay_pending(&self, entries: &mut [Entry]) {
        let pending = lock(&self.pending);
        if pending.is_empty() {
            return;
        }
        for e in entries {
            // Only over the record it was made for: a later insert has a larger stamp.
            let newer = index::with_entry_key(&e.primary_key, &e.secondary_key, |key| {
                pending
                    .get(key)
                    .filter(|p| p.stamp > e.last_used)
                    .map(|p| (p.stamp, p.meta.clone()))
            });
            if let Some((stamp, meta)) = newer {
                e.last_used = stamp;
                if let Some(m) = meta {
                    e.meta = m;
                }
            }
        }
    }

    /// Writes every pending touch and freshening: touches as new stamps in
    /// the index rows, freshenings as new records. Failures are logged: a
    /// lost touch only makes an entry look older than it is, a lost
    /// freshening staler.
    pub(super) fn apply_touches(&self) {
        let batch: Vec<(Vec<u8>, Pending)> =
            std::mem::take(&mut *lock(&self.pending)).into_iter().collect();
        let mut touches = Vec::new();
        for (key, p) in batch {
            match p.meta {
                None => touches.push(Op::Touch { key, stamp: p.stamp }),
                Some(meta) => {
                    if let Err(e) = self.freshen(&key, p.stamp, &meta) {
                        tracing::warn!(error = %e, "could not write a freshened response head");
                    }
                }
            }
        }
        for chunk in touches.chunks(256) {
            if let Err(e) = self.index.apply(chunk) {
                tracing::warn!(error = %e, "could not record cache hits in the LRU order");
            }
        }
    }

    /// Writes the freshening of `key` (made at `stamp`) as a new record with
    /// the same body, unless the entry was replaced after it.
    fn freshen(&self, key: &[u8], stamp: u64, meta: &[u8]) -> Result<(), StoreError> {
        // The tail walk may move the record meanwhile: then read it again.
        for _ in 0..3 {
            let Some(slot) = self.index.get(key)? else { return Ok(()) };
            if slot.stamp > stamp {
                // Stored again (or copied with its newest head) since.
                return Ok(());
            }
            let rec = match self.packs.read(&slot.loc) {
                Ok(rec) => rec,
                Err(ReadError::Gone) => continue,
                Err(e) => return Err(e.into_store_error(&slot.loc)),
            };
            let applied = self.write_record(
                key,
                meta,
                &carried_body(rec.body, &slot.body),
                Some(slot.loc),
                None,
            )?;
            self.queue_reap(&applied.zero);
            if applied.done.first() == Some(&true) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Evicts entries until the bytes stored fit the budget. Returns how
    /// many entries went.
    pub(super) fn evict_to_budget(&self) -> Result<u64, StoreError> {
        if self.index.state().budget_bytes() <= self.max_size {
            return Ok(0);
        }
        let _g = lock(&self.evict_lock);
        let mut evicted = 0;
        while self.index.state().budget_bytes() > self.max_size {
            match self.tail_step(true)? {
                Step::Evicted => evicted += 1,
                Step::Moved | Step::Skipped => {}
                Step::End => {
                    tracing::warn!(
                        bytes = self.index.state().budget_bytes(),
                        "bytes stored exceed the budget but no entry is left (run cache verify)"
                    );
                    break;
                }
            }
        }
        Ok(evicted)
    }

    /// Bytes of log between the tail and the head.
    fn log_bytes(&self) -> u64 {
        let tail = self.index.state().tail;
        let head = self.packs.head_seg();
        let mut total = 0;
        for seg in tail.seg.max(1)..=head {
            if let Some(len) = self.packs.seg_len(seg) {
                total += if seg == tail.seg { len.saturating_sub(tail.off) } else { len };
            }
        }
        total
    }

    /// Whether the pack holds more than twice its live bytes plus a segment.
    pub(super) fn needs_compaction(&self) -> bool {
        let live = self.index.state().pack_live;
        self.log_bytes() > 2 * live + SEGMENT_SIZE
    }

    /// Copies every live record forward and drops the dead ones, to the
    /// end of what was written when it started (the segment being written
    /// is sealed first). Returns how many records it copied. The caller
    /// commits (which deletes the segments passed).
    pub(super) fn compact_all(&self) -> Result<u64, StoreError> {
        let _g = lock(&self.evict_lock);
        {
            let _log = lock(&self.log_lock);
            self.packs.roll()?;
        }
        let head = self.packs.head_seg();
        let mut moved = 0;
        while self.index.state().tail.seg.max(1) < head {
            match self.tail_step(false)? {
                Step::End => break,
                Step::Moved => moved += 1,
                Step::Skipped | Step::Evicted => {}
            }
        }
        Ok(moved)
    }

    /// Copies live records forward from the tail of sealed segments until
    /// the pack holds at most 1.5 times its live bytes plus a segment, or
    /// [`COMPACT_STEP`] bytes were walked. Returns the bytes walked.
    pub(super) fn compact(&self) -> Result<u64, StoreError> {
        let _g = lock(&self.evict_lock);
        let start = self.log_bytes();
        let mut walked = 0;
        loop {
            let st = self.index.state();
            let log = self.log_bytes();
            walked = start.saturating_sub(log).max(walked);
            if log * 2 <= 3 * st.pack_live + 2 * SEGMENT_SIZE
                || walked >= COMPACT_STEP
                || st.tail.seg >= self.packs.head_seg()
            {
                return Ok(walked);
            }
            if self.tail_step(false)? == Step::End {
                return Ok(walked);
            }
        }
    }

    /// One step of the tail walk: examines the record at the tail and
    /// moves the tail past it. With `evict`, an entry not used since its
    /// record was written is evicted; otherwise live records are copied.
    fn tail_step(&self, evict: bool) -> Result<Step, StoreError> {
        let tail = self.index.state().tail;
        let head = self.packs.head_seg();
        let tail = if tail.seg == 0 { Pos { seg: 1, off: 0 } } else { tail };
        let Some(seg_len) = self.packs.seg_len(tail.seg) else {
            return self.tail_to_next_segment(tail.seg, head);
        };
        if tail.off >= seg_len {
            return self.tail_to_next_segment(tail.seg, head);
        }
        let (rec, loc) = match self.packs.read_at(tail, seg_len) {
            Ok(Some(found)) => found,
            Ok(None) | Err(ReadError::Gone) => return self.tail_to_next_segment(tail.seg, head),
            Err(ReadError::Invalid(m)) => {
                tracing::warn!(segment = tail.seg, offset = tail.off, problem = %m, "the pack is damaged at its tail; skipping the rest of the segment (run cache verify)");
                if tail.seg >= head {
                    return Ok(Step::End);
                }
                return self.tail_to_next_segment(tail.seg, head);
            }
            Err(ReadError::Io(e)) => return Err(e),
        };
        let next = Pos { seg: loc.seg, off: loc.off + loc.len as u64 };
        let _log = lock(&self.log_lock);
        if let RecBody::Shared { hash, .. } = &rec.body {
            return self.shared_step(&rec, *hash, loc, next);
        }
        let slot = match self.index.get(&rec.key) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "an undecodable index row at the tail (run cache verify)");
                None
            }
        };
        let Some(slot) = slot.filter(|s| s.loc == loc) else {
            self.index.apply(&[Op::Tail(next)])?;
            return Ok(Step::Skipped);
        };
        let pending = lock(&self.pending).remove(&rec.key);
        let used = slot.stamp > rec.stamp || pending.is_some();
        // The entry's last use, kept in its row when the record moves.
        let last_used = pending.as_ref().map_or(slot.stamp, |p| p.stamp.max(slot.stamp));
        if evict && !used {
            let applied = self
                .index
                .apply(&[Op::Remove { key: rec.key.clone(), expect: Some(loc) }, Op::Tail(next)])?;
            if applied.done.first() == Some(&true) {
                self.evictions.fetch_add(1, Ordering::Relaxed);
                if let Some((pk, _)) = split_entry_key(&rec.key) {
                    tracing::debug!(primary_key = pk, "evicted by the size budget");
                }
                self.queue_reap(&applied.zero);
                return Ok(Step::Evicted);
            }
            return Ok(Step::Skipped);
        }
        // A second chance (or compaction): the record moves to the head,
        // with the newest head if a freshening is pending.
        let meta = pending.as_ref().and_then(|p| p.meta.clone()).unwrap_or(rec.meta);
        let body = carried_body(rec.body, &slot.body);
        let (_, new_loc) = self.packs.append(&self.next_stamp, &rec.key, &meta, &body)?;
        let put = Op::Put {
            key: rec.key,
            slot: Slot { stamp: last_used, loc: new_loc, body: slot.body },
            expect: Some(loc),
            create: None,
        };
        let applied = self.index.apply(&[put, Op::Tail(next)])?;
        self.queue_reap(&applied.zero);
        if applied.done.first() != Some(&true) {
            return Ok(Step::Skipped);
        }
        if let Some((hash, _)) = body.hash_len() {
            // A filter of stored bodies being built may have passed the
            // segment it came from.
            self.note_body_stored(&hash);
        }
        if let RecBody::Inline { hash, .. } = &body {
            self.hints.add(new_loc, hash);
            lock(&self.recent).put(*hash, new_loc);
        }
        Ok(Step::Moved)
    }

    /// The tail step over the shared body record `rec` of `hash` at `loc`
    /// (the log's lock held): copied to the head while its reference-count
    /// row names it, else passed (dead: its last reference went).
    fn shared_step(
        &self,
        rec: &Record,
        hash: Hash,
        loc: Loc,
        next: Pos,
    ) -> Result<Step, StoreError> {
        let live = match self.index.ref_row_of(&hash) {
            Ok(Some(r)) => r.place == Place::Packed(loc),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "an undecodable reference count at the tail (run cache verify)");
                false
            }
        };
        if !live {
            self.index.apply(&[Op::Tail(next)])?;
            return Ok(Step::Skipped);
        }
        let (_, new_loc) = self.packs.append(&self.next_stamp, b"", b"", &rec.body)?;
        let applied =
            self.index.apply(&[Op::MoveShared { hash, from: loc, to: new_loc }, Op::Tail(next)])?;
        if applied.done.first() != Some(&true) {
            return Ok(Step::Skipped);
        }
        lock(&self.recent).put(hash, new_loc);
        self.note_body_stored(&hash);
        Ok(Step::Moved)
    }

    /// Moves the tail to the start of the next segment after `seg`.
    fn tail_to_next_segment(&self, seg: u32, head: u32) -> Result<Step, StoreError> {
        if seg >= head {
            return Ok(Step::End);
        }
        let next = self.packs.next_seg(seg).unwrap_or(head);
        self.index.apply(&[Op::Tail(Pos { seg: next, off: 0 })])?;
        Ok(Step::Skipped)
    }
}

/// The body a copy of an entry's record carries, given its row's word on
/// it: the record's own, except that an inline copy of a body the row says
/// is shared since becomes a reference (the shared body record holds it).
fn carried_body(body: RecBody, slot: &SlotBody) -> RecBody {
    match (body, slot) {
        (RecBody::Inline { .. }, SlotBody::Ref { hash, len }) => {
            RecBody::Ref { hash: *hash, len: *len }
        }
        (body, _) => body,
    }
}
