//! Migration of a store written by an earlier release, run by
//! `Store::open` with progress on stderr.
//!
//! Format 1 or 2 (the releases up to commit 7238623) is first rewritten in
//! the layout of format 3 ([`run`]); format 3 (up to commit 738cd51) kept a
//! copy of a short body in every entry that had it, so then every short
//! body held by more than one entry is shared ([`merge_duplicates`]), and
//! only then does the `format` file say 4.
//!
//! From format 1 or 2:
//! 1. The new tree (`store`) and `packs/` are emptied (a migration that was
//!    interrupted starts again from the old trees, which are untouched).
//! 2. Every old entry gets a pack record with its head; a body shorter than
//!    `inline_max` is read from its file, checked against its hash and
//!    copied into the record; a longer one stays a file and is counted in
//!    the new reference rows. An entry whose body file is missing or
//!    damaged is dropped (and counted in the summary). Entries of a format-2
//!    store that was not closed cleanly, stamped after its checkpoint, have
//!    their body files hashed too (format 2's own crash check).
//! 3. The pack is synced, a checkpoint recorded, the index flushed, and only
//!    then the `format` file says 3 (a store of format 3 to merge, as above).
//! 4. The old trees are dropped and the files of the bodies now inline
//!    deleted ([`finish`]; also run at an open that finds old trees left by
//!    a crash between 3 and 4).

use std::fs;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::blobs::{hash_file, Blobs, BodyFile};
use crate::fsops::io_err;
use std::collections::HashMap;

use crate::apply::Op;
use crate::error::StoreError;
use crate::format;
use crate::hash::Hash;
use crate::index::{self, sled_err, Checkpoint, Index, Place, Slot, SlotBody};
use crate::legacy::{self, Record};
use crate::packs::{Loc, Packs, RecBody};

/// Old entries written to the new index per batch.
const BATCH: usize = 1000;
/// How often progress is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Migrates the store of format 1 or 2 in `dir` (whose sled database `db`
/// is open) to the layout of format 3. Errors: `Io` when a file cannot be read or written, `Index` when sled
/// fails; the old store is then untouched and the next open tries again.
pub(crate) fn run(
    dir: &Path,
    db: &sled::Db,
    blobs: &Blobs,
    inline_max: u64,
) -> Result<(), StoreError> {
    let from = format::read(dir)?.unwrap_or(1);
    let started = Instant::now();
    let old_entries = db.open_tree("entries").map_err(sled_err)?;
    let counters = db.open_tree("counters").map_err(sled_err)?;
    let total = old_entries.len();
    eprintln!(
        "crawlcache: migrating the cache in {} from store format {from} to {} ({total} entries)",
        dir.display(),
        format::FORMAT
    );
    const LAYOUT: u32 = 3;
    // Format 2 without a clean close: bodies of entries stamped at or after
    // its checkpoint may not have reached the disk.
    let clean = dir.join("clean-shutdown").exists();
    let suspect_from = match (from, clean) {
        (2, false) => counters
            .get(legacy::CHECKPOINT_KEY)
            .map_err(sled_err)?
            .and_then(|v| v.as_ref().try_into().ok().map(u64::from_be_bytes))
            .unwrap_or(0),
        _ => u64::MAX,
    };

    // 1. Start from nothing.
    db.drop_tree(index::TREE).map_err(sled_err)?;
    let packs_dir = dir.join("packs");
    match fs::remove_dir_all(&packs_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove", &packs_dir)(e)),
    }
    let index = Index::new(db.clone(), 1 << 20)?;
    let packs = Packs::open(&packs_dir)?;
    let stamps = AtomicU64::new(1);

    // 2. Every entry.
    let mut ops = Vec::with_capacity(BATCH);
    let (mut done, mut dropped, mut inlined) = (0u64, 0u64, 0u64);
    let mut last_progress = Instant::now();
    for item in old_entries.iter() {
        let (key, value) = item.map_err(sled_err)?;
        done += 1;
        let Some(rec) = Record::decode(&value) else {
            dropped += 1;
            continue;
        };
        let body = old_body(&rec, blobs, inline_max, suspect_from);
        inlined += u64::from(matches!(body, Some(RecBody::Inline { .. })));
        let Some(body) = body else {
            dropped += 1;
            continue;
        };
        let (stamp, loc) = packs.append(&stamps, &key, &rec.meta, &body)?;
        let (slot_body, create) = match &body {
            RecBody::Inline { bytes, .. } => (SlotBody::Inline { len: bytes.len() as u64 }, None),
            RecBody::Ref { hash, len } => {
                (SlotBody::Ref { hash: *hash, len: *len }, Some(Place::File))
            }
            RecBody::None | RecBody::Shared { .. } => (SlotBody::None, None),
        };
        ops.push(Op::Put {
            key: key.to_vec(),
            slot: Slot { stamp, loc, body: slot_body },
            expect: None,
            create,
        });
        if ops.len() >= BATCH {
            index.apply(&ops)?;
            ops.clear();
        }
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            eprintln!(
                "crawlcache: migrating: {done} of {total} entries ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
        }
    }
    index.apply(&ops)?;

    // 3. Durable, then the format says so.
    packs.sync()?;
    let (end, next) = packs.end(&stamps);
    index.put_checkpoint(Checkpoint { stamp: next, end })?;
    db.flush().map_err(sled_err)?;
    drop(index);
    format::write_version(dir, LAYOUT)?;

    // 4. The old trees and the files of inlined bodies.
    finish(db, blobs)?;
    eprintln!(
        "crawlcache: cache in {} rewritten in {:.1} s: {} entries ({inlined} short bodies moved \
         into the pack), {dropped} dropped (body missing or damaged)",
        dir.display(),
        started.elapsed().as_secs_f64(),
        done - dropped
    );
    Ok(())
}

/// The body of the old entry `rec` as the new layout holds it: short
/// bodies (under `inline_max` bytes) read into the pack when their file is
/// whole, longer ones kept as files; files of entries stamped at or after
/// `suspect_from` (format 2 without a clean close) are hashed, others only
/// sized. `None` when the body is missing or damaged: the entry is dropped.
fn old_body(rec: &Record, blobs: &Blobs, inline_max: u64, suspect_from: u64) -> Option<RecBody> {
    match rec.body {
        None => Some(RecBody::None),
        Some((hash, len)) => {
            let path = blobs.path(&hash);
            if len < inline_max {
                match fs::read(&path) {
                    Ok(bytes)
                        if bytes.len() as u64 == len
                            && Sha256::digest(&bytes).as_slice() == hash =>
                    {
                        Some(RecBody::Inline { hash, bytes: std::sync::Arc::new(bytes) })
                    }
                    _ => None,
                }
            } else {
                let whole = if rec.stamp >= suspect_from {
                    matches!(hash_file(&path), Ok((got, n)) if got == hash && n == len)
                } else {
                    fs::metadata(&path).map(|m| m.is_file() && m.len() == len).unwrap_or(false)
                };
                whole.then_some(RecBody::Ref { hash, len })
            }
        }
    }
}

/// Whether `db` still holds trees of an earlier format.
pub(crate) fn unfinished(db: &sled::Db) -> bool {
    let names = db.tree_names();
    legacy::TREES.iter().any(|t| names.iter().any(|n| n.as_ref() == t.as_bytes()))
}

/// Drops the trees of the earlier format and deletes every body file no
/// reference row of the new index names (the bodies now inline).
/// Errors: `Io` / `Index`.
pub(crate) fn finish(db: &sled::Db, blobs: &Blobs) -> Result<(), StoreError> {
    let index = Index::new(db.clone(), 1 << 20)?;
    for f in blobs.walk()? {
        if let BodyFile::Valid(h, path) = f {
            if !index.file_referenced(&h)? {
                fs::remove_file(&path)
                    .map_err(io_err("remove the file of a body moved into the pack", &path))?;
            }
        }
    }
    for t in legacy::TREES {
        db.drop_tree(t).map_err(sled_err)?;
    }
    db.flush().map_err(sled_err)?;
    Ok(())
}

/// Makes every short body that several entries of a format-3 store hold
/// (each its own copy) one shared body: one shared body record per such
/// body, appended and synced first, then each entry holding a copy is
/// counted on it (its row says `Ref`; the copy in its record is dead space
/// the tail walk reclaims). Also counts the bytes every entry references
/// (format 3 did not keep that total). Idempotent: a merge cut short by a
/// crash is done again at the next open (the `format` file still says 3),
/// and an entry already counted on a shared body is left as it is.
/// Progress on stderr. Returns the next stamp to hand out.
///
/// Memory: a count per distinct short body while it runs (about 50 bytes
/// each), plus the location of each duplicated one.
/// Errors: `Io` / `Index`; the store is then as a crash would leave it.
pub(crate) fn merge_duplicates(
    dir: &Path,
    index: &Index,
    packs: &Packs,
    next_stamp: u64,
) -> Result<u64, StoreError> {
    let started = Instant::now();
    let total = index.state().entries;
    eprintln!("crawlcache: migrating the cache in {} to store format {}: sharing duplicate short bodies ({total} entries)", dir.display(), format::FORMAT);
    index.spill()?;
    // 1. How many entries hold each short body inline; every entry's body bytes.
    let mut counts: HashMap<Hash, u32> = HashMap::new();
    let mut referenced = 0u64;
    let mut last_progress = Instant::now();
    let mut seen = 0u64;
    for item in index.entry_rows() {
        let (k, v) = item?;
        let Some(slot) = Slot::decode(&v) else { continue };
        referenced += slot.body.len();
        if let SlotBody::Inline { .. } = slot.body {
            if let Ok(rec) = packs.read(&slot.loc) {
                if let (RecBody::Inline { hash, .. }, true) = (&rec.body, rec.key == k.as_ref()) {
                    *counts.entry(*hash).or_insert(0) += 1;
                }
            }
        }
        seen += 1;
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            eprintln!(
                "crawlcache: migrating: read {seen} of {total} entries ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
        }
    }
    counts.retain(|h, n| *n > 1 || index.ref_row_of(h).ok().flatten().is_some());
    index.set_referenced(referenced);
    // 2. One shared body record per body held twice or more (unless it has one).
    let stamps = AtomicU64::new(next_stamp);
    let mut records: HashMap<Hash, Loc> = HashMap::new();
    let mut ops = Vec::new();
    let mut merged = 0u64;
    for pass in 0..2 {
        for item in index.entry_rows() {
            let (k, v) = item?;
            let Some(slot) = Slot::decode(&v) else { continue };
            let SlotBody::Inline { len } = slot.body else { continue };
            let Ok(rec) = packs.read(&slot.loc) else { continue };
            let RecBody::Inline { hash, bytes } = &rec.body else { continue };
            if rec.key != k.as_ref() || !counts.contains_key(hash) {
                continue;
            }
            if pass == 0 {
                if !records.contains_key(hash) && index.ref_row_of(hash)?.is_none() {
                    let (_, loc) = packs.append(
                        &stamps,
                        b"",
                        b"",
                        &RecBody::Shared { hash: *hash, bytes: bytes.clone() },
                    )?;
                    records.insert(*hash, loc);
                }
                continue;
            }
            // The shared body records are durable before any row names them.
            let body = records.get(hash).copied().unwrap_or(slot.loc);
            ops.push(Op::Share { owner: k.to_vec(), owner_loc: slot.loc, hash: *hash, len, body });
            merged += 1;
            if ops.len() >= BATCH {
                index.apply(&ops)?;
                ops.clear();
            }
        }
        if pass == 0 {
            packs.sync()?;
        }
    }
    index.apply(&ops)?;
    // 3. Durable.
    packs.sync()?;
    let (end, next) = packs.end(&stamps);
    index.put_checkpoint(Checkpoint { stamp: next, end })?;
    index.db.flush().map_err(sled_err)?;
    let st = index.state();
    eprintln!(
        "crawlcache: cache in {} migrated to store format {} in {:.1} s: {} entries, {} distinct bodies ({} bytes; \
         {merged} entries now share {} duplicated short bodies)",
        dir.display(),
        format::FORMAT,
        started.elapsed().as_secs_f64(),
        st.entries,
        st.bodies,
        st.bytes,
        counts.len()
    );
    Ok(next)
}
