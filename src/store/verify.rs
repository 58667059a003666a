//! `crawlcache cache verify`: checks every invariant of SPEC section 3 and,
//! with repair, fixes what it finds.
//!
//! Invariants checked:
//! - each entry's pack record is whole (magic, length, CRC), belongs to the
//!   entry's key and agrees with the index row about its body;
//! - each inline body hashes to the SHA-256 its record names;
//! - each body file hashes to its name (files are stream-hashed once) and
//!   has the length its entries record; no entry names a missing file;
//! - each shared body record a reference-count row names is whole, holds
//!   that body and has its length;
//! - each stored reference count equals the number of entries naming the
//!   body;
//! - no body file is unreferenced (orphan) and nothing stray lies in
//!   `bodies/` or `packs/`; no segment lies behind the log's tail;
//! - no temporary file is left over (live writers excepted);
//! - the kept totals (entries, bodies, bytes, live pack bytes) agree with
//!   the entries, and no entry's record lies past the log's end as kept.
//!
//! Memory: one pass over the index rows reading each record (nothing kept
//! per entry), plus one count per distinct referenced body.
//!
//! Not an invariant: shared body records and inline copies nothing
//! references any more are dead pack space, which compaction reclaims
//! (`cache compact`); they are never read.
//!
//! Repair order keeps every intermediate state safe to crash in: first drop
//! the entries whose records or bodies are damaged or missing, then rewrite
//! counts and totals in one batch, flush, and only then delete files
//! (corrupt, orphan, stray, temporary, leftover segments).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::blobs::{hash_file, io_err, BodyFile};
use super::index::{sled_err, split_entry_key, Hash, Place, RefRow, Slot, SlotBody, State};
use super::packs::{inline_intact, list_segments, ReadError, RecBody};
use super::{Inner, StoreError};

/// What [`Store::verify`](super::Store::verify) found (and, with `repair`,
/// fixed).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VerifyReport {
    /// Index entries read.
    pub entries_checked: u64,
    /// Bodies hashed: body files, and inline bodies in pack records.
    pub bodies_checked: u64,
    /// Bodies whose content does not hash to their name (hashes).
    pub corrupt_bodies: Vec<String>,
    /// Hashes named by entries whose body file does not exist.
    pub missing_bodies: Vec<String>,
    /// Body files no entry references (hashes; paths for stray files and
    /// leftover pack segments).
    pub orphan_bodies: Vec<String>,
    /// Hashes whose stored reference count differs from the real count.
    pub refcount_mismatches: Vec<String>,
    /// Leftover temporary files.
    pub leftover_tmp: Vec<String>,
    /// Other index inconsistencies: undecodable rows, damaged or misplaced
    /// pack records, wrong totals.
    pub index_problems: Vec<String>,
    /// True when `repair` was requested and every problem was fixed.
    pub repaired: bool,
}

impl VerifyReport {
    /// True when no invariant is broken.
    pub fn is_clean(&self) -> bool {
        self.corrupt_bodies.is_empty()
            && self.missing_bodies.is_empty()
            && self.orphan_bodies.is_empty()
            && self.refcount_mismatches.is_empty()
            && self.leftover_tmp.is_empty()
            && self.index_problems.is_empty()
    }
}

/// A body file as found on disk.
enum FileState {
    Intact(u64),
    Corrupt,
}

/// Runs verify with the maintenance lock held exclusively by the caller
/// (after a commit: everything synced). `progress(hashed, total)` is called
/// after each body file is hashed.
pub(crate) fn run(inner: &Inner, repair: bool, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport, StoreError> {
    let index = &inner.index;
    let blobs = &inner.blobs;
    let packs = &inner.packs;
    let pinned = blobs.all_pinned();
    let mut report = VerifyReport { leftover_tmp: blobs.sweep_tmp(false)?, ..Default::default() };

    // Body files on disk (hashed lazily, once, when an entry names them;
    // the others are orphans or strays).
    let mut on_disk: HashMap<Hash, PathBuf> = HashMap::new();
    let mut strays: Vec<PathBuf> = Vec::new();
    let walked = blobs.walk()?;
    let total = walked.iter().filter(|f| matches!(f, BodyFile::Valid(..))).count() as u64;
    for f in walked {
        match f {
            BodyFile::Valid(h, path) => {
                on_disk.insert(h, path);
            }
            BodyFile::Stray(path) => strays.push(path),
        }
    }
    let mut files: HashMap<Hash, FileState> = HashMap::new();
    let mut hashed = 0u64;
    let mut check_file = |h: &Hash, report: &mut VerifyReport| -> Result<Option<u64>, StoreError> {
        if let Some(s) = files.get(h) {
            return Ok(match s {
                FileState::Intact(n) => Some(*n),
                FileState::Corrupt => None,
            });
        }
        let Some(path) = on_disk.get(h) else { return Ok(None) };
        report.bodies_checked += 1;
        let (digest, len) = hash_file(path).map_err(io_err("read body", path))?;
        hashed += 1;
        progress(hashed, total);
        let state = if digest == *h { FileState::Intact(len) } else { FileState::Corrupt };
        let out = match state {
            FileState::Intact(n) => Some(n),
            FileState::Corrupt => None,
        };
        files.insert(*h, state);
        Ok(out)
    };

    // Reference counts as stored (where each referenced body is).
    let mut stored: HashMap<Hash, RefRow> = HashMap::new();
    for (k, row) in index.ref_rows()? {
        match (<Hash>::try_from(k.as_slice()), row) {
            (Ok(h), Some(row)) => {
                stored.insert(h, row);
            }
            _ => report.index_problems.push(format!("undecodable reference-count row {}", hex::encode(&k))),
        }
    }
    // Shared body records, read and hashed once each: Some(len) if whole.
    let mut shared: HashMap<Hash, Option<u64>> = HashMap::new();
    let mut check_shared = |h: &Hash, report: &mut VerifyReport| -> Result<Option<u64>, StoreError> {
        if let Some(s) = shared.get(h) {
            return Ok(*s);
        }
        let Some(RefRow { place: Place::Packed(loc), .. }) = stored.get(h) else { return Ok(None) };
        report.bodies_checked += 1;
        let found = match packs.read(loc) {
            Ok(rec) => match &rec.body {
                RecBody::Shared { hash, bytes } if hash == h && inline_intact(&rec.body) => Some(bytes.len() as u64),
                _ => None,
            },
            Err(ReadError::Io(e)) => return Err(e),
            Err(_) => None,
        };
        shared.insert(*h, found);
        Ok(found)
    };

    // Entries: read each record; count real references and totals.
    let mut derived = State { tail: index.state().tail, ..Default::default() };
    let mut keep: HashMap<Hash, RefRow> = HashMap::new();
    // Entries naming each body file (also those dropped for a broken body).
    let mut named: HashMap<Hash, u64> = HashMap::new();
    let mut bad_keys: Vec<Vec<u8>> = Vec::new();
    let mut missing: BTreeMap<String, ()> = BTreeMap::new();
    let mut corrupt: BTreeMap<String, ()> = BTreeMap::new();
    let tail = index.state().tail;
    for item in index.entry_rows() {
        let (k, v) = item.map_err(sled_err)?;
        report.entries_checked += 1;
        let (Some(_), Some(slot)) = (split_entry_key(&k), Slot::decode(&v)) else {
            report.index_problems.push(format!("undecodable index row {:?}", String::from_utf8_lossy(&k)));
            bad_keys.push(k.to_vec());
            continue;
        };
        let rec = match packs.read(&slot.loc) {
            Ok(rec) => rec,
            Err(ReadError::Io(e)) => return Err(e),
            Err(e) => {
                report.index_problems.push(format!("entry {:?}: {}", display_key(&k), e.into_store_error(&slot.loc)));
                bad_keys.push(k.to_vec());
                continue;
            }
        };
        if rec.key != k.as_ref() {
            report.index_problems.push(format!("entry {:?} points at the record of another key", display_key(&k)));
            bad_keys.push(k.to_vec());
            continue;
        }
        if (slot.loc.seg, slot.loc.off) < (tail.seg, tail.off) && tail.seg != 0 {
            report.index_problems.push(format!("entry {:?} has its record behind the log's tail", display_key(&k)));
            bad_keys.push(k.to_vec());
            continue;
        }
        let agrees = match (&rec.body, &slot.body) {
            (RecBody::None, SlotBody::None) => true,
            (RecBody::Inline { bytes, .. }, SlotBody::Inline { len }) => bytes.len() as u64 == *len,
            // A reference, or the inline copy of a body shared since.
            (RecBody::Ref { .. } | RecBody::Inline { .. }, SlotBody::Ref { hash, len }) => rec.body.hash_len() == Some((*hash, *len)),
            _ => false,
        };
        if !agrees {
            report.index_problems.push(format!("entry {:?}: its index row and its record disagree about the body", display_key(&k)));
            bad_keys.push(k.to_vec());
            continue;
        }
        if let RecBody::Inline { hash, .. } = &rec.body {
            report.bodies_checked += 1;
            if !inline_intact(&rec.body) {
                corrupt.insert(hex::encode(hash), ());
                bad_keys.push(k.to_vec());
                continue;
            }
        }
        match &slot.body {
            SlotBody::None => {}
            SlotBody::Inline { len } => {
                derived.bodies += 1;
                derived.bytes += len;
            }
            SlotBody::Ref { hash, len } => {
                *named.entry(*hash).or_insert(0) += 1;
                let place = stored.get(hash).map_or(Place::File, |r| r.place);
                let counted = keep.entry(*hash).or_insert(RefRow { count: 0, len: *len, place });
                counted.count += 1;
                let found = match place {
                    Place::File => check_file(hash, &mut report)?,
                    Place::Packed(_) => check_shared(hash, &mut report)?,
                };
                match found {
                    Some(n) if n == *len => {}
                    Some(n) => {
                        report.index_problems.push(format!(
                            "entry {:?} records {len} bytes for body {} but the file has {n}",
                            display_key(&k),
                            hex::encode(hash)
                        ));
                        counted.count -= 1;
                        bad_keys.push(k.to_vec());
                        continue;
                    }
                    None => {
                        let damaged = match place {
                            Place::File => on_disk.contains_key(hash),
                            Place::Packed(_) => true,
                        };
                        if damaged {
                            corrupt.insert(hex::encode(hash), ());
                        } else {
                            missing.insert(hex::encode(hash), ());
                        }
                        counted.count -= 1;
                        bad_keys.push(k.to_vec());
                        continue;
                    }
                }
            }
        }
        derived.entries += 1;
        derived.referenced += slot.body.len();
        derived.pack_live += slot.loc.len as u64;
        derived.max_stamp = derived.max_stamp.max(slot.stamp).max(rec.stamp);
        derived.log_end = derived.log_end.max(super::packs::Pos { seg: slot.loc.seg, off: slot.loc.off + slot.loc.len as u64 });
    }
    keep.retain(|_, r| r.count > 0);
    derived.bodies += keep.len() as u64;
    derived.bytes += keep.values().map(|r| r.len).sum::<u64>();
    derived.pack_live += keep.values().map(|r| match r.place {
        Place::Packed(loc) => loc.len as u64,
        Place::File => 0,
    }).sum::<u64>();
    report.missing_bodies = missing.into_keys().collect();
    report.corrupt_bodies = corrupt.into_keys().collect();
    for (h, f) in &files {
        if matches!(f, FileState::Corrupt) && !report.corrupt_bodies.contains(&hex::encode(h)) {
            report.corrupt_bodies.push(hex::encode(h));
        }
    }

    // Reference counts as stored, against the entries that name each body.
    let mut mismatched: Vec<String> = stored
        .keys()
        .chain(named.keys())
        .collect::<HashSet<_>>()
        .into_iter()
        .filter(|h| stored.get(*h).map(|r| r.count).unwrap_or(0) != named.get(*h).copied().unwrap_or(0))
        .map(hex::encode)
        .collect();
    mismatched.sort();
    report.refcount_mismatches = mismatched;

    // Orphans: intact files nothing references (a pinned body is about to be).
    let file_named = |h: &Hash| named.contains_key(h) && keep.get(h).is_some_and(|r| r.place == Place::File);
    let mut orphans: Vec<String> =
        on_disk.keys().filter(|h| !file_named(h) && !pinned.contains(*h)).map(hex::encode).collect();
    orphans.sort();
    orphans.extend(strays.iter().map(|p| p.display().to_string()));
    // Pack segments: strays, and segments the tail has passed.
    let (segs, pack_strays) = list_segments(&packs.dir)?;
    let leftover_segs: Vec<PathBuf> = segs
        .iter()
        .filter(|(s, _)| *s < tail.seg && *s < packs.head_seg())
        .map(|(s, _)| packs.dir.join(super::packs::segment_name(*s)))
        .collect();
    orphans.extend(leftover_segs.iter().chain(pack_strays.iter()).map(|p| p.display().to_string()));
    report.orphan_bodies = orphans;

    // Totals.
    let kept = index.state();
    let derived = State { max_stamp: kept.max_stamp.max(derived.max_stamp), log_end: kept.log_end.max(derived.log_end), ..derived };
    if (kept.entries, kept.bodies, kept.bytes, kept.referenced, kept.pack_live)
        != (derived.entries, derived.bodies, derived.bytes, derived.referenced, derived.pack_live)
        && bad_keys.is_empty()
    {
        report.index_problems.push(format!(
            "kept totals ({} entries, {} bodies, {} bytes, {} referenced bytes, {} live pack bytes) disagree with the index \
             ({} entries, {} bodies, {} bytes, {} referenced bytes, {} live pack bytes)",
            kept.entries,
            kept.bodies,
            kept.bytes,
            kept.referenced,
            kept.pack_live,
            derived.entries,
            derived.bodies,
            derived.bytes,
            derived.referenced,
            derived.pack_live
        ));
    }
    if derived.log_end > kept.log_end {
        report.index_problems.push("an entry's record lies past the log's end the index keeps".into());
    }

    if !repair || report.is_clean() {
        report.repaired = repair; // nothing to fix
        return Ok(report);
    }

    // 1. Drop entries whose records or bodies are damaged or missing.
    index.remove_raw(&bad_keys)?;
    // 2. Reference counts and totals, together.
    index.rewrite(derived, &keep)?;
    index.db.flush().map_err(sled_err)?;

    // 3. Files, last: nothing references them any more.
    for (h, path) in &on_disk {
        if !file_named(h) && !pinned.contains(h) {
            remove_path(path)?;
        }
    }
    for path in strays.iter().chain(pack_strays.iter()).chain(leftover_segs.iter()) {
        remove_path(path)?;
    }
    blobs.sweep_tmp(true)?;
    report.repaired = true;
    Ok(report)
}

/// Removes a file or a directory (stray directories in `bodies/`).
fn remove_path(path: &Path) -> Result<(), StoreError> {
    let r = if path.is_dir() { fs::remove_dir_all(path) } else { fs::remove_file(path) };
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("remove", path)(e)),
    }
}

/// A readable form of an entry key: `primary key [secondary key]`.
fn display_key(k: &[u8]) -> String {
    match split_entry_key(k) {
        Some((pk, sk)) if sk.is_empty() => pk,
        Some((pk, sk)) => format!("{pk} [{}]", String::from_utf8_lossy(&sk)),
        None => String::from_utf8_lossy(k).into_owned(),
    }
}
