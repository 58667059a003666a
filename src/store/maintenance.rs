//! Work on the store that no caller waits for: the start-up sweep, the
//! background thread, deleting released bodies, and the close.
//!
//! A body whose reference count reaches zero is only queued
//! ([`Inner::queue_reap`]); [`Inner::reap`] deletes the queued files that are
//! still unreferenced and unpinned, after a sled flush made the zero counts
//! durable. The background thread reaps and writes pending LRU touches every
//! [`MAINTENANCE_INTERVAL`] or when woken. A clean close leaves the
//! [`CLEAN_MARKER`] file; without it the next open also sweeps orphan bodies.
//!
//! Group commit (store format 2): a new body is renamed into place without
//! an fsync, and its entry is indexed without a flush, so neither the miss
//! nor the revalidation path waits for the disk. Every [`COMMIT_INTERVAL`]
//! the background thread ([`Inner::commit`]) reads the next stamp `n`, syncs
//! every body renamed since the last commit (data, then their directories),
//! writes `n` as the checkpoint and flushes the index. So every entry stamped
//! below a durable checkpoint has a durable, whole body. After an unclean
//! shutdown, `open` re-hashes the bodies of the entries stamped at or after
//! the checkpoint (the last few milliseconds of work) and drops the entries
//! whose body is missing, short or not the bytes its name says; orphans are
//! then swept. A crash can therefore lose entries stored (or freshened, or
//! touched) in the last commit interval plus the time one commit takes, and
//! never leaves an entry pointing at a torn body.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{RwLockReadGuard, Weak};
use std::time::Duration;

use super::blobs::{hash_file, io_err, sync_dir, BodyFile, Blobs};
use super::index::{split_entry_key, Hash, Index, Record};
use super::{lock, Inner, StoreError};

/// How often the background thread writes touches and reaps bodies.
const MAINTENANCE_INTERVAL: Duration = Duration::from_secs(1);
/// How often the background thread commits (syncs new bodies, writes the
/// checkpoint, flushes the index) while there is something to commit.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(10);
/// Name of the marker file a clean close leaves in the store directory.
const CLEAN_MARKER: &str = "clean-shutdown";

/// Sweeps what a previous run left in `dir`: temporary body files always,
/// orphan body files (no entry references them) when that run did not close
/// cleanly (no [`CLEAN_MARKER`]); consumes the marker.
/// Errors: `Io` when a file cannot be listed or removed, `Index` when a
/// reference count cannot be read.
pub(super) fn sweep_leftovers(dir: &Path, blobs: &Blobs, index: &Index) -> Result<(), StoreError> {
    let marker = dir.join(CLEAN_MARKER);
    let clean = marker.exists();
    if clean {
        fs::remove_file(&marker).map_err(io_err("remove", &marker))?;
        sync_dir(dir)?;
    }
    if !clean {
        drop_uncommitted_torn(blobs, index)?;
    }
    let swept = blobs.sweep_tmp(true)?;
    if !swept.is_empty() {
        tracing::info!(count = swept.len(), "removed leftover temporary body files");
    }
    if !clean {
        let mut orphans = 0u64;
        for f in blobs.walk()? {
            if let BodyFile::Valid(h, path) = f {
                if !index.is_referenced(&h)? {
                    fs::remove_file(&path).map_err(io_err("remove orphan body", &path))?;
                    orphans += 1;
                }
            }
        }
        if orphans > 0 {
            tracing::info!(count = orphans, "removed orphan body files left by an unclean shutdown");
        }
    }
    Ok(())
}

/// After an unclean shutdown: re-hashes the bodies of the entries stamped at
/// or after the durable checkpoint (their bodies may not have reached the
/// disk) and removes the entries whose body is not whole. Their files, now
/// unreferenced, go with the orphan sweep.
fn drop_uncommitted_torn(blobs: &Blobs, index: &Index) -> Result<(), StoreError> {
    let checkpoint = index.checkpoint()?;
    let mut checked: HashMap<Hash, bool> = HashMap::new();
    let mut doomed = Vec::new();
    let mut seen = 0u64;
    for (stamp, key) in index.stamped_since(checkpoint)? {
        let Some(v) = index.entries.get(&key).map_err(super::index::sled_err)? else { continue };
        let Some(rec) = Record::decode(&v) else { continue };
        if rec.stamp != stamp {
            continue;
        }
        seen += 1;
        let Some((h, len)) = rec.body else { continue };
        let whole = *checked.entry(h).or_insert_with(|| matches!(hash_file(&blobs.path(&h)), Ok((got, n)) if got == h && n == len));
        if !whole {
            doomed.push(key);
        }
    }
    if !doomed.is_empty() {
        for k in &doomed {
            if let Some((pk, _)) = split_entry_key(k) {
                tracing::warn!(primary_key = pk, "dropping an entry whose body did not reach the disk before the crash");
            }
        }
        index.remove(&doomed)?;
        index.db.flush().map_err(super::index::sled_err)?;
    }
    if seen > 0 {
        tracing::info!(checked = seen, dropped = doomed.len(), "re-checked the entries stored after the last commit");
    }
    Ok(())
}

/// Starts the background thread over `inner`; it stops when `wake` receives
/// `false` or `inner` is gone. Errors: `Io` when the thread cannot start.
pub(super) fn spawn(inner: Weak<Inner>, wake: mpsc::Receiver<bool>) -> Result<std::thread::JoinHandle<()>, StoreError> {
    std::thread::Builder::new()
        .name("crawlcache-store".into())
        .spawn(move || maintenance_loop(inner, wake))
        .map_err(|source| StoreError::Io { what: "start the store's background thread".into(), source })
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

/// The background thread: writes pending touches and reaps released bodies
/// every [`MAINTENANCE_INTERVAL`] or when woken, until told to stop.
fn maintenance_loop(inner: Weak<Inner>, wake: mpsc::Receiver<bool>) {
    let mut last_maintenance = std::time::Instant::now();
    loop {
        let woken = match wake.recv_timeout(COMMIT_INTERVAL) {
            Ok(true) => true,
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Ok(false) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let Some(inner) = inner.upgrade() else { return };
        let due = woken || last_maintenance.elapsed() >= MAINTENANCE_INTERVAL;
        if !due && lock(&inner.unsynced).is_empty() {
            continue;
        }
        let _m = inner.read_maintenance();
        if due {
            last_maintenance = std::time::Instant::now();
            inner.wake_queued.store(false, Ordering::Release);
            inner.apply_touches();
            inner.reap();
        }
        // New bodies are committed every COMMIT_INTERVAL; stamps issued by
        // hits and freshenings alone, with the other maintenance.
        if let Err(e) = inner.commit() {
            tracing::warn!(error = %e, "group commit failed; retrying");
        }
    }
}

impl Inner {
    /// A shared hold on the maintenance lock: every mutation takes one;
    /// `Store::verify` takes the lock exclusively.
    pub(super) fn read_maintenance(&self) -> RwLockReadGuard<'_, ()> {
        self.maintenance.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Group commit: syncs the bodies renamed since the last commit, then
    /// records the checkpoint (the stamp read before they were taken) and
    /// flushes the index. Nothing to do when no stamp was issued and no body
    /// written since the last commit. Errors: `Io` when a body or directory
    /// cannot be synced (those bodies stay queued), `Index` when sled fails.
    pub(crate) fn commit(&self) -> Result<(), StoreError> {
        let _g = lock(&self.commit_lock);
        if self.commits_paused.load(Ordering::Acquire) {
            return Ok(());
        }
        // Read before taking the queue: a body is queued before the stamp of
        // its entry is issued, so every entry stamped below `n` has its body
        // in this batch or in an earlier, completed one.
        let n = self.next_stamp.load(Ordering::Acquire);
        let batch: Vec<Hash> = std::mem::take(&mut *lock(&self.unsynced));
        if batch.is_empty() && n == self.checkpointed.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut dirs = HashSet::new();
        for (i, h) in batch.iter().enumerate() {
            let path = self.blobs.path(h);
            let synced = match fs::File::open(&path) {
                Ok(f) => f.sync_data(),
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
        self.index.put_checkpoint(n)?;
        self.index.db.flush().map_err(super::index::sled_err)?;
        self.checkpointed.store(n, Ordering::Release);
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
        if !path.is_file() {
            if let Some(n) = pins.get_mut(hash) {
                *n -= 1;
                if *n == 0 {
                    pins.remove(hash);
                }
            }
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
    /// sled flush in between so the zero counts are durable before any file
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
        let guards: HashMap<usize, _> = stripes.iter().map(|&i| (i, self.blobs.lock_stripe(i))).collect();
        let mut doomed = Vec::new();
        for h in &queued {
            let pinned = guards.get(&Blobs::stripe_of(h)).map(|g| Blobs::pinned(g, h)).unwrap_or(true);
            if pinned {
                continue;
            }
            match self.index.is_referenced(h) {
                Ok(false) => doomed.push(*h),
                Ok(true) => {}
                Err(e) => tracing::warn!(error = %e, "cannot read a reference count; keeping the body"),
            }
        }
        if doomed.is_empty() {
            return;
        }
        if let Err(e) = self.index.db.flush() {
            tracing::warn!(error = %e, "cannot flush the index; released bodies are kept for now");
            lock(&self.reap_queue).extend(doomed);
            return;
        }
        for h in doomed {
            let path = self.blobs.path(&h);
            match fs::remove_file(&path) {
                Ok(()) => tracing::debug!(body = %hex::encode(h), "deleted unreferenced body"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot delete unreferenced body"),
            }
        }
        drop(guards);
    }
}

/// The close: pending touches written, pins dropped and their bodies reaped,
/// the index flushed, and the clean-shutdown marker left.
impl Drop for Inner {
    fn drop(&mut self) {
        self.apply_touches();
        let pinned = self.blobs.clear_pins();
        self.queue_reap(&pinned);
        self.reap();
        if let Err(e) = self.commit() {
            // No clean-shutdown marker: the next open re-checks what was not committed.
            tracing::warn!(error = %e, "cannot sync the last bodies at close");
            return;
        }
        match self.index.db.flush() {
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

