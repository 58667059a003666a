//! Work on the store that no caller waits for: the group commit, the
//! start-up recovery and sweep, the background thread, deleting released
//! body files, and the close.
//!
//! Group commit: a new record is appended to the pack and its index row
//! kept in memory (the overlay, `index.rs`), and a new body file is renamed into
//! place without an fsync, so neither the miss nor the revalidation path
//! waits for the disk. Every [`COMMIT_INTERVAL`] while something was written
//! the background thread ([`Inner::commit`]) reads the next stamp `n` and
//! the end of the pack together, syncs every body file renamed since the
//! last commit (data, then their directories) and every pack segment
//! written since, then writes the index changes made before it read `end`
//! to sled in one batch with the checkpoint `(n, end)` and flushes the
//! index. Segments the log's tail has passed are deleted after that flush.
//!
//! After an unclean shutdown (no [`CLEAN_MARKER`]), `open` ([`open_sweep`]):
//! 1. walks the pack from the checkpoint's end (everything before it is
//!    durable): the first record that is not whole (torn, or never written)
//!    ends the log; the segment is cut there and any later one removed.
//!    Each whole record an entry still points at is checked: its body must
//!    hash to its name (an inline body, its body file, which may not have
//!    been synced either, or its shared body record); otherwise the entry
//!    is dropped. So is a shared body record its reference-count row names
//!    that does not hash to its name: every entry referencing it is
//!    dropped;
//! 2. if the index knows of records past that end (the state row's
//!    `log_end`, written atomically with every entry: a power loss kept
//!    index rows whose records did not reach the disk), every index row is
//!    read and those pointing past the end are dropped, with the entries
//!    of shared bodies whose record lay past it (the one case that takes
//!    time in proportion to the store);
//! 3. sweeps orphan body files (renamed, never indexed) and temporary files.
//!
//! So a crash (SIGKILL or power loss) loses the index changes of the last
//! commit interval plus the time one commit takes (entries stored, removed,
//! freshened or touched then; touches and freshenings also wait up to a
//! second before they become index changes), and never leaves an entry
//! pointing at a torn body.
//!
//! A body file whose count reaches zero is only queued
//! ([`Inner::queue_reap`]); [`Inner::reap`] deletes the queued files that are
//! still unreferenced and unpinned, after a commit made the zero counts
//! durable. The background thread also writes pending touches, reaps, and
//! compacts the pack (`budget.rs`) every [`MAINTENANCE_INTERVAL`] or when
//! woken. A clean close leaves the [`CLEAN_MARKER`] file.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{RwLockReadGuard, Weak};
use std::time::Duration;

use crawlcache_base::locks::lock;

use crate::apply::Op;
use crate::blobs::{hash_file, Blobs, BodyFile};
use crate::error::StoreError;
use crate::fsops::{drop_cached_pages, io_err, sync_dir};
use crate::hash::Hash;
use crate::index::{split_entry_key, Checkpoint, Index, Place, RefRow, Slot, SlotBody};
use crate::inner::Inner;
use crate::open::note_closed;
use crate::packs::{self, inline_intact, Packs, Pos, ReadError, RecBody};
use crate::segment_files::list_segments;

/// How often the background thread writes touches, reaps bodies and
/// considers compaction.
const MAINTENANCE_INTERVAL: Duration = Duration::from_secs(1);
/// How often the background thread commits (syncs new records and bodies,
/// writes the checkpoint, flushes the index) while there is something to
/// commit.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(10);
/// Index rows added to the filter of stored keys per round of the
/// background thread while it is built (a few milliseconds of work).
const PRESENCE_ROWS_PER_STEP: usize = 8192;
/// Name of the marker file a clean close leaves in the store directory.
const CLEAN_MARKER: &str = "clean-shutdown";

/// What [`open_sweep`] found.
pub(super) struct Recovered {
    /// The first stamp to hand out.
    pub next_stamp: u64,
    /// The stamp of the durable checkpoint.
    pub checkpoint: u64,
    /// The log's tail (segments before it are deleted).
    pub tail: Pos,
}

/// Recovers and sweeps what a previous run left in `dir` (see the module
/// comment): after an unclean shutdown the pack's torn end, the entries
/// written after the checkpoint, and orphan body files; always temporary files and the
/// segments the tail has passed. Consumes the clean-shutdown marker.
/// Errors: `Io` when a file cannot be listed, read or removed, `Index` when
/// sled fails.
pub(super) fn open_sweep(
    dir: &Path,
    blobs: &Blobs,
    index: &Index,
    packs: &Packs,
) -> Result<Recovered, StoreError> {
    let marker = dir.join(CLEAN_MARKER);
    let clean = marker.exists();
    if clean {
        fs::remove_file(&marker).map_err(io_err("remove", &marker))?;
        sync_dir(dir)?;
    }
    let cp = index.checkpoint()?;
    let mut max_stamp = index.state().max_stamp;
    if !clean {
        max_stamp = max_stamp.max(recover(blobs, index, packs, cp)?);
    }
    let swept = blobs.sweep_tmp(true)?;
    if !swept.is_empty() {
        tracing::info!(count = swept.len(), "removed leftover temporary body files");
    }
    if !clean {
        let mut orphans = 0u64;
        for f in blobs.walk()? {
            if let BodyFile::Valid(h, path) = f {
                if !index.file_referenced(&h)? {
                    fs::remove_file(&path).map_err(io_err("remove orphan body", &path))?;
                    orphans += 1;
                }
            }
        }
        if orphans > 0 {
            tracing::info!(
                count = orphans,
                "removed orphan body files left by an unclean shutdown"
            );
        }
    }
    let tail = index.state().tail;
    packs.delete_before(tail.seg)?;
    let next_stamp = (max_stamp + 1).max(cp.stamp);
    Ok(Recovered { next_stamp, checkpoint: cp.stamp, tail })
}

/// Steps 1 and 2 of the recovery (see the module comment). Returns the
/// largest stamp of the records kept past the checkpoint.
fn recover(blobs: &Blobs, index: &Index, packs: &Packs, cp: Checkpoint) -> Result<u64, StoreError> {
    let (segs, _) = list_segments(&packs.dir)?;
    let mut max_stamp = 0;
    let mut valid_end = cp.end;
    let mut bodies: HashMap<Hash, bool> = HashMap::new();
    let mut broken_shared: HashSet<Hash> = HashSet::new();
    let mut doomed = Vec::new();
    let mut checked = 0u64;
    'segments: for (seg, len) in segs.into_iter().filter(|(s, _)| *s >= cp.end.seg) {
        let mut pos = Pos { seg, off: if seg == cp.end.seg { cp.end.off.min(len) } else { 0 } };
        loop {
            match packs.read_at(pos, len) {
                Ok(Some((rec, loc))) => {
                    max_stamp = max_stamp.max(rec.stamp);
                    pos.off = loc.off + loc.len as u64;
                    if let RecBody::Shared { hash, .. } = &rec.body {
                        // The shared body its row names must be whole.
                        if matches!(index.ref_row_of(hash), Ok(Some(RefRow { place: Place::Packed(l), .. })) if l == loc)
                        {
                            checked += 1;
                            let whole = inline_intact(&rec.body);
                            bodies.insert(*hash, whole);
                            if !whole {
                                broken_shared.insert(*hash);
                            }
                        }
                        continue;
                    }
                    let Ok(Some(slot)) = index.get(&rec.key) else { continue };
                    if slot.loc != loc {
                        continue; // replaced since: a dead record
                    }
                    checked += 1;
                    if !record_whole(blobs, index, packs, &rec, &slot, &mut bodies) {
                        if let Some((pk, _)) = split_entry_key(&rec.key) {
                            tracing::warn!(primary_key = pk, "dropping an entry whose body did not reach the disk before the crash");
                        }
                        doomed.push(Op::Remove { key: rec.key, expect: Some(loc) });
                    }
                }
                Ok(None) => break,
                Err(ReadError::Io(e)) => return Err(e),
                Err(e) => {
                    let e = e.into_store_error(&packs::Loc { seg, off: pos.off, len: 0 });
                    tracing::warn!(segment = seg, offset = pos.off, problem = %e, "cutting the pack where the last crash left it torn");
                    packs.truncate_at(seg, pos.off)?;
                    valid_end = pos;
                    break 'segments;
                }
            }
        }
        valid_end = pos;
    }
    let log_end = index.state().log_end;
    let past_end = log_end > valid_end;
    if past_end {
        tracing::warn!("the index knows of pack records past what reached the disk (lost at a power loss); reading every index row");
        index.spill()?;
        for (k, row) in index.ref_rows()? {
            if let (Ok(h), Some(RefRow { place: Place::Packed(l), .. })) =
                (<Hash>::try_from(k.as_slice()), row)
            {
                if (Pos { seg: l.seg, off: l.off + l.len as u64 }) > valid_end {
                    broken_shared.insert(h);
                }
            }
        }
    }
    if past_end || !broken_shared.is_empty() {
        let doomed_keys: HashSet<Vec<u8>> = doomed
            .iter()
            .filter_map(|op| match op {
                Op::Remove { key, .. } => Some(key.clone()),
                _ => None,
            })
            .collect();
        for item in index.entry_rows() {
            let (k, v) = item?;
            let Some(slot) = Slot::decode(&v) else { continue };
            let past =
                (Pos { seg: slot.loc.seg, off: slot.loc.off + slot.loc.len as u64 }) > valid_end;
            let on_broken =
                matches!(slot.body, SlotBody::Ref { hash, .. } if broken_shared.contains(&hash));
            if (past || on_broken) && !doomed_keys.contains(k.as_ref()) {
                if let Some((pk, _)) = split_entry_key(&k) {
                    tracing::warn!(primary_key = pk, "dropping an entry whose record or body did not reach the disk before the crash");
                }
                doomed.push(Op::Remove { key: k.to_vec(), expect: Some(slot.loc) });
            }
        }
    }
    if !doomed.is_empty() {
        index.apply(&doomed)?;
        index.spill()?;
        index.flush()?;
    }
    if checked > 0 || !doomed.is_empty() {
        tracing::info!(
            checked,
            dropped = doomed.len(),
            "re-checked the entries stored after the last commit"
        );
    }
    Ok(max_stamp)
}

/// Whether the record `rec` of the entry `slot` is whole: it agrees with
/// the row about its body, and the body hashes to its name (a body file
/// or shared body record is hashed once, memoised in `bodies`).
fn record_whole(
    blobs: &Blobs,
    index: &Index,
    packs: &Packs,
    rec: &packs::Record,
    slot: &Slot,
    bodies: &mut HashMap<Hash, bool>,
) -> bool {
    if !inline_intact(&rec.body) {
        return false;
    }
    match (&rec.body, &slot.body) {
        (RecBody::Inline { bytes, .. }, SlotBody::Inline { len }) => bytes.len() as u64 == *len,
        (RecBody::None, SlotBody::None) => true,
        // A reference, or an inline copy of a body shared since.
        (RecBody::Ref { .. } | RecBody::Inline { .. }, SlotBody::Ref { hash, len }) => {
            if rec.body.hash_len() != Some((*hash, *len)) {
                return false;
            }
            let (hash, len) = (*hash, *len);
            *bodies
                .entry(hash)
                .or_insert_with(|| referenced_body_whole(blobs, index, packs, &hash, len))
        }
        _ => false,
    }
}

/// Whether the referenced body `hash` of `len` bytes (a body file or a
/// shared body record, as its reference-count row says) is whole.
fn referenced_body_whole(
    blobs: &Blobs,
    index: &Index,
    packs: &Packs,
    hash: &Hash,
    len: u64,
) -> bool {
    match index.ref_row_of(hash) {
        Ok(Some(RefRow { place: Place::File, len: l, .. })) => {
            l == len
                && matches!(hash_file(&blobs.path(hash)), Ok((got, n)) if got == *hash && n == len)
        }
        Ok(Some(RefRow { place: Place::Packed(loc), len: l, .. })) => {
            l == len
                && matches!(packs.read(&loc), Ok(r) if matches!(&r.body, RecBody::Shared { hash: h, bytes } if h == hash && bytes.len() as u64 == len) && inline_intact(&r.body))
        }
        _ => false,
    }
}

/// Starts the background thread over `inner`; it stops when `wake` receives
/// `false` or `inner` is gone. Errors: `Io` when the thread cannot start.
pub(super) fn spawn(
    inner: Weak<Inner>,
    wake: mpsc::Receiver<bool>,
) -> Result<std::thread::JoinHandle<()>, StoreError> {
    std::thread::Builder::new()
        .name("crawlcache-store".into())
        .spawn(move || maintenance_loop(inner, wake))
        .map_err(|source| StoreError::Io {
            what: "start the store's background thread".into(),
            source,
        })
}

/// Stops and joins the background thread when the last `Store` clone goes.
pub(super) struct Closer {
    pub(super) wake: mpsc::Sender<bool>,
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Closer {
    fn drop(&mut self) {
        let _ = self.wake.send(false);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::warn!("the store's background thread panicked");
            }
        }
    }
}

/// The background thread: commits every [`COMMIT_INTERVAL`] while there is
/// something to commit; writes pending touches, reaps released bodies and
/// compacts every [`MAINTENANCE_INTERVAL`] or when woken, until told to stop.
fn maintenance_loop(inner: Weak<Inner>, wake: mpsc::Receiver<bool>) {
    let mut last_maintenance = std::time::Instant::now();
    let mut presence_build = None;
    let mut body_filter_build = None;
    loop {
        // While a filter is being built, a step per round without waiting
        // out the interval.
        let building = presence_build.is_some() || body_filter_build.is_some();
        let interval = if building { Duration::ZERO } else { COMMIT_INTERVAL };
        let woken = match wake.recv_timeout(interval) {
            Ok(true) => true,
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Ok(false) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let Some(inner) = inner.upgrade() else { return };
        if presence_build.is_some() || inner.index.presence_needs_build() {
            if let Err(e) =
                inner.index.build_presence_step(&mut presence_build, PRESENCE_ROWS_PER_STEP)
            {
                tracing::warn!(error = %e, "building the filter of stored keys failed; lookups read the index meanwhile");
            }
        }
        if body_filter_build.is_some() || inner.body_filter.needs_build() {
            if let Err(e) = inner.build_body_filter_step(&mut body_filter_build) {
                tracing::warn!(error = %e, "building the filter of stored bodies failed; new short bodies are looked up meanwhile");
            }
        }
        let due = woken || last_maintenance.elapsed() >= MAINTENANCE_INTERVAL;
        let written = inner.next_stamp.load(Ordering::Acquire)
            != inner.checkpointed.load(Ordering::Acquire)
            || inner.index.has_changes();
        if !due && !written && lock(&inner.unsynced).is_empty() {
            continue;
        }
        let _m = inner.read_maintenance();
        if due {
            last_maintenance = std::time::Instant::now();
            inner.wake_queued.store(false, Ordering::Release);
            inner.apply_touches();
            inner.reap();
            if let Err(e) = inner.hints.write_sealed(inner.packs.head_seg()) {
                tracing::warn!(error = %e, "cannot write the hints of a sealed pack segment; they stay in memory");
            }
            if inner.needs_compaction() {
                match inner.compact() {
                    Ok(n) => tracing::debug!(bytes = n, "compacted the pack"),
                    Err(e) => tracing::warn!(error = %e, "compacting the pack failed"),
                }
            }
        }
        if let Err(e) = inner.commit() {
            tracing::warn!(error = %e, "group commit failed; retrying");
        }
    }
}

impl Inner {
    /// A shared hold on the maintenance lock: every mutation takes one;
    /// `Store::verify` takes the lock exclusively.
    pub(super) fn read_maintenance(&self) -> RwLockReadGuard<'_, ()> {
        crawlcache_base::locks::read(&self.maintenance)
    }

    /// Group commit (see the module comment). Nothing to do when no stamp
    /// was issued and no body written since the last commit. Errors: `Io`
    /// when a body, directory or segment cannot be synced (those stay
    /// queued), `Index` when sled fails.
    pub(crate) fn commit(&self) -> Result<(), StoreError> {
        let _g = lock(&self.commit_lock);
        if self.commits_paused.load(Ordering::Acquire) {
            // Test support: the index rows reach sled, nothing is synced and
            // the checkpoint stays (what a power loss may leave behind).
            // The records reach their files (unsynced) as they did before
            // the write-behind buffer.
            self.packs.flush()?;
            return self.index.spill();
        }
        // The index changes so far, set apart first: every record they
        // point at was appended before the end read next.
        let changes = self.index.begin_commit();
        let tail = changes.state().tail;
        // Read together: every record stamped below `n` lies before `end`.
        // A body file is queued before the stamp of its record is issued,
        // so every such body is in this batch or an earlier one.
        let (end, n) = self.packs.end(&self.next_stamp);
        let batch: Vec<Hash> = std::mem::take(&mut *lock(&self.unsynced));
        // Stamps issued without a record appended (touches: a hit, a
        // freshening waiting for `apply_touches`) move no checkpoint.
        let stamps_moved =
            n != self.checkpointed.load(Ordering::Acquire) && end != *lock(&self.end_committed);
        if batch.is_empty()
            && changes.is_empty()
            && !stamps_moved
            && tail == *lock(&self.tail_committed)
        {
            self.index.cancel_commit(changes);
            return Ok(());
        }
        let mut dirs = HashSet::new();
        for (i, h) in batch.iter().enumerate() {
            let path = self.blobs.path(h);
            let synced = match fs::File::open(&path) {
                Ok(f) => f.sync_data().map(|()| {
                    if !self.keep_written_pages {
                        drop_cached_pages(&f, 0, None);
                    }
                }),
                // Deleted meanwhile (released and reaped): nothing to keep.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => Err(e),
            };
            if let Err(e) = synced {
                lock(&self.unsynced).extend_from_slice(&batch[i..]);
                return Err(io_err("sync body", &path)(e));
            }
            // Its directory, and the fan-out directories above it (they may
            // be new too): `bodies/ab/cd`, `bodies/ab`, `bodies`.
            let mut d = path.parent();
            for _ in 0..3 {
                let Some(dir) = d else { break };
                dirs.insert(dir.to_path_buf());
                d = dir.parent();
            }
        }
        // Deepest first, so a directory's new entry is durable before its parent's.
        let mut dirs: Vec<_> = dirs.into_iter().collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in &dirs {
            if let Err(e) = sync_dir(d) {
                lock(&self.unsynced).extend_from_slice(&batch);
                return Err(e);
            }
        }
        self.packs.sync()?;
        self.index.finish_commit(changes, Checkpoint { stamp: n, end })?;
        self.checkpointed.store(n, Ordering::Release);
        *lock(&self.end_committed) = end;
        // The tail's move is durable, and so are the copies it made. (Only
        // when it reached another segment: listing the directory at every
        // commit cost a directory read 100 times a second under load.)
        if tail.seg != lock(&self.tail_committed).seg {
            self.packs.delete_before(tail.seg)?;
            self.hints.forget_before(tail.seg);
        }
        *lock(&self.tail_committed) = tail;
        Ok(())
    }

    /// Wakes the background thread (at most one wake-up queued at a time).
    pub(super) fn wake(&self) {
        if !self.wake_queued.swap(true, Ordering::AcqRel) {
            let _ = lock(&self.wake).send(true);
        }
    }

    /// Wakes the background thread if bodies wait to be deleted.
    pub(super) fn wake_if_reaping(&self) {
        if !lock(&self.reap_queue).is_empty() {
            self.wake();
        }
    }

    /// Makes sure the file of `hash` exists and cannot be deleted until the
    /// matching `release_pin`: adopts the pin left by `finish`, or takes one.
    pub(super) fn hold_for_insert(&self, hash: &Hash) -> Result<(), StoreError> {
        let path = self.blobs.path(hash);
        let mut pins = self.blobs.lock_stripe(Blobs::stripe_of(hash));
        // A pinned body's file exists (the store deletes no pinned file), as
        // `finish` left it: no need to ask the file system again.
        if !pins.contains_key(hash) && !path.is_file() {
            return Err(StoreError::MissingBody(hex::encode(hash)));
        }
        pins.entry(*hash).or_insert(1);
        Ok(())
    }

    /// Drops one pin of `hash`; queues it for deletion if nothing else holds it.
    pub(super) fn release_pin(&self, hash: &Hash) {
        if self.blobs.unpin(hash) {
            self.queue_reap(&[*hash]);
        }
    }

    /// Queues `hashes`, whose counts reached zero, for [`Inner::reap`].
    pub(crate) fn queue_reap(&self, hashes: &[Hash]) {
        if !hashes.is_empty() {
            lock(&self.reap_queue).extend(hashes.iter().copied());
        }
    }

    /// Deletes the queued body files that are still unreferenced and
    /// unpinned. Holds their stripe locks from the check to the unlink, with a
    /// commit in between so the zero counts are durable before any file
    /// goes. Failures are logged: an undeleted file is an orphan for the next
    /// sweep, never a dangling entry.
    pub(super) fn reap(&self) {
        let _g = lock(&self.reap_lock);
        let queued: Vec<Hash> = lock(&self.reap_queue).drain().collect();
        if queued.is_empty() {
            return;
        }
        let mut stripes: Vec<usize> = queued.iter().map(Blobs::stripe_of).collect();
        stripes.sort_unstable();
        stripes.dedup();
        // Ascending order; no other code holds more than one stripe at a time.
        let guards: HashMap<usize, _> =
            stripes.iter().map(|&i| (i, self.blobs.lock_stripe(i))).collect();
        let mut doomed = Vec::new();
        for h in &queued {
            let pinned =
                guards.get(&Blobs::stripe_of(h)).map(|g| Blobs::pinned(g, h)).unwrap_or(true);
            if pinned {
                continue;
            }
            match self.index.file_referenced(h) {
                Ok(false) => doomed.push(*h),
                Ok(true) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read a reference count; keeping the body")
                }
            }
        }
        if doomed.is_empty() {
            return;
        }
        // The zero counts reach the disk before any file goes.
        if let Err(e) = self.commit() {
            tracing::warn!(error = %e, "cannot commit the index; released bodies are kept for now");
            lock(&self.reap_queue).extend(doomed);
            return;
        }
        for h in doomed {
            let path = self.blobs.path(&h);
            match fs::remove_file(&path) {
                Ok(()) => tracing::debug!(body = %hex::encode(h), "deleted unreferenced body"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot delete unreferenced body")
                }
            }
        }
        drop(guards);
    }
}

/// The close: pending touches written, pins dropped and their bodies reaped,
/// everything synced, the index flushed, and the clean-shutdown marker left.
impl Drop for Inner {
    fn drop(&mut self) {
        note_closed(&self.dir);
        self.apply_touches();
        let pinned = self.blobs.clear_pins();
        self.blobs.clear_small();
        self.queue_reap(&pinned);
        self.reap();
        if let Err(e) = self.commit() {
            // No clean-shutdown marker: the next open re-checks what was not committed.
            tracing::warn!(error = %e, "cannot sync the last records and bodies at close");
            return;
        }
        if self.commits_paused.load(Ordering::Acquire) {
            // Test support: what was written after the pause stays unchecked.
            return;
        }
        let head = self.packs.head_seg();
        if let Err(e) = self.hints.close(head, self.packs.seg_len(head).unwrap_or(0)) {
            // The next open walks the last segment for them instead.
            tracing::warn!(error = %e, "cannot write the hints of the last pack segment at close");
        }
        match self.index.flush() {
            Ok(_) => {
                let marker = self.dir.join(CLEAN_MARKER);
                if let Err(e) = fs::write(&marker, b"") {
                    tracing::warn!(path = %marker.display(), error = %e, "cannot leave the clean-shutdown marker");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot flush the cache index at close"),
        }
    }
}
