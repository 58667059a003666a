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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::blobs::{hash_file, BodyFile};
use crate::error::StoreError;
use crate::fsops::io_err;
use crate::hash::Hash;
use crate::index::{split_entry_key, Place, RefRow, Slot, SlotBody, State};
use crate::inner::Inner;
use crate::packs::{self, inline_intact, ReadError, RecBody};
use crate::segment_files::{list_segments, segment_name};

/// What [`Store::verify`](crate::Store::verify) found (and, with `repair`,
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

/// One verify run: what it found so far.
struct Check<'a> {
    inner: &'a Inner,
    progress: &'a mut dyn FnMut(u64, u64),
    report: VerifyReport,
    /// Bodies pinned (about to be referenced): never orphans.
    pinned: HashSet<Hash>,
    /// Body files on disk (hashed lazily, once, when an entry names them;
    /// the others are orphans), and strays in `bodies/`.
    on_disk: HashMap<Hash, PathBuf>,
    strays: Vec<PathBuf>,
    files_total: u64,
    files: HashMap<Hash, FileState>,
    files_hashed: u64,
    /// Reference-count rows as stored.
    stored: HashMap<Hash, RefRow>,
    /// Shared body records, read and hashed once each: `Some(len)` if whole.
    shared: HashMap<Hash, Option<u64>>,
    /// The totals and counts the entries make.
    derived: State,
    keep: HashMap<Hash, RefRow>,
    /// Entries naming each referenced body (also those dropped for a broken body).
    named: HashMap<Hash, u64>,
    /// Entries to drop on repair.
    bad_keys: Vec<Vec<u8>>,
    missing: BTreeSet<String>,
    corrupt: BTreeSet<String>,
}

/// Runs verify with the maintenance lock held exclusively by the caller
/// (after a commit: everything synced). `progress(hashed, total)` is called
/// after each body file is hashed.
pub(crate) fn run(
    inner: &Inner,
    repair: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, StoreError> {
    let mut check = Check::new(inner, progress)?;
    for item in inner.index.entry_rows() {
        let (k, v) = item?;
        check.entry(&k, &v)?;
    }
    check.counts();
    let leftovers = check.orphans()?;
    check.totals();
    if !repair || check.report.is_clean() {
        check.report.repaired = repair; // nothing to fix
        return Ok(check.report);
    }
    check.repair(&leftovers)
}

impl<'a> Check<'a> {
    /// Lists what is on disk and the stored reference counts.
    fn new(
        inner: &'a Inner,
        progress: &'a mut dyn FnMut(u64, u64),
    ) -> Result<Check<'a>, StoreError> {
        let report =
            VerifyReport { leftover_tmp: inner.blobs.sweep_tmp(false)?, ..Default::default() };
        let mut check = Check {
            inner,
            progress,
            report,
            pinned: inner.blobs.all_pinned(),
            on_disk: HashMap::new(),
            strays: Vec::new(),
            files_total: 0,
            files: HashMap::new(),
            files_hashed: 0,
            stored: HashMap::new(),
            shared: HashMap::new(),
            derived: State { tail: inner.index.state().tail, ..Default::default() },
            keep: HashMap::new(),
            named: HashMap::new(),
            bad_keys: Vec::new(),
            missing: BTreeSet::new(),
            corrupt: BTreeSet::new(),
        };
        for f in inner.blobs.walk()? {
            match f {
                BodyFile::Valid(h, path) => {
                    check.on_disk.insert(h, path);
                }
                BodyFile::Stray(path) => check.strays.push(path),
            }
        }
        check.files_total = check.on_disk.len() as u64;
        for (k, row) in inner.index.ref_rows()? {
            match (<Hash>::try_from(k.as_slice()), row) {
                (Ok(h), Some(row)) => {
                    check.stored.insert(h, row);
                }
                _ => check
                    .report
                    .index_problems
                    .push(format!("undecodable reference-count row {}", hex::encode(&k))),
            }
        }
        Ok(check)
    }

    /// The length of the body file `h` if it is intact (hashed once).
    fn check_file(&mut self, h: &Hash) -> Result<Option<u64>, StoreError> {
        if let Some(s) = self.files.get(h) {
            return Ok(match s {
                FileState::Intact(n) => Some(*n),
                FileState::Corrupt => None,
            });
        }
        let Some(path) = self.on_disk.get(h) else { return Ok(None) };
        self.report.bodies_checked += 1;
        let (digest, len) = hash_file(path).map_err(io_err("read body", path))?;
        self.files_hashed += 1;
        (self.progress)(self.files_hashed, self.files_total);
        let (state, out) = if digest == *h {
            (FileState::Intact(len), Some(len))
        } else {
            (FileState::Corrupt, None)
        };
        self.files.insert(*h, state);
        Ok(out)
    }

    /// The length of the shared body `h` if its record is whole (read once).
    fn check_shared(&mut self, h: &Hash) -> Result<Option<u64>, StoreError> {
        if let Some(s) = self.shared.get(h) {
            return Ok(*s);
        }
        let Some(RefRow { place: Place::Packed(loc), .. }) = self.stored.get(h) else {
            return Ok(None);
        };
        self.report.bodies_checked += 1;
        let found = match self.inner.packs.read(loc) {
            Ok(rec) => match &rec.body {
                RecBody::Shared { hash, bytes } if hash == h && inline_intact(&rec.body) => {
                    Some(bytes.len() as u64)
                }
                _ => None,
            },
            Err(ReadError::Io(e)) => return Err(e),
            Err(_) => None,
        };
        self.shared.insert(*h, found);
        Ok(found)
    }

    /// Notes the entry `k` as broken (dropped on repair), with `problem`.
    fn broken(&mut self, k: &[u8], problem: Option<String>) {
        if let Some(p) = problem {
            self.report.index_problems.push(p);
        }
        self.bad_keys.push(k.to_vec());
    }

    /// Checks the entry row `(k, v)`: its record, its body, and counts it.
    fn entry(&mut self, k: &[u8], v: &[u8]) -> Result<(), StoreError> {
        self.report.entries_checked += 1;
        let tail = self.derived.tail;
        let (Some(_), Some(slot)) = (split_entry_key(k), Slot::decode(v)) else {
            self.broken(k, Some(format!("undecodable index row {:?}", String::from_utf8_lossy(k))));
            return Ok(());
        };
        let rec = match self.inner.packs.read(&slot.loc) {
            Ok(rec) => rec,
            Err(ReadError::Io(e)) => return Err(e),
            Err(e) => {
                self.broken(
                    k,
                    Some(format!("entry {:?}: {}", display_key(k), e.into_store_error(&slot.loc))),
                );
                return Ok(());
            }
        };
        if rec.key != k {
            self.broken(
                k,
                Some(format!("entry {:?} points at the record of another key", display_key(k))),
            );
            return Ok(());
        }
        if (slot.loc.seg, slot.loc.off) < (tail.seg, tail.off) && tail.seg != 0 {
            self.broken(
                k,
                Some(format!("entry {:?} has its record behind the log's tail", display_key(k))),
            );
            return Ok(());
        }
        let agrees = match (&rec.body, &slot.body) {
            (RecBody::None, SlotBody::None) => true,
            (RecBody::Inline { bytes, .. }, SlotBody::Inline { len }) => bytes.len() as u64 == *len,
            // A reference, or the inline copy of a body shared since.
            (RecBody::Ref { .. } | RecBody::Inline { .. }, SlotBody::Ref { hash, len }) => {
                rec.body.hash_len() == Some((*hash, *len))
            }
            _ => false,
        };
        if !agrees {
            self.broken(
                k,
                Some(format!(
                    "entry {:?}: its index row and its record disagree about the body",
                    display_key(k)
                )),
            );
            return Ok(());
        }
        if let RecBody::Inline { hash, .. } = &rec.body {
            self.report.bodies_checked += 1;
            if !inline_intact(&rec.body) {
                self.corrupt.insert(hex::encode(hash));
                self.broken(k, None);
                return Ok(());
            }
        }
        match &slot.body {
            SlotBody::None => {}
            SlotBody::Inline { len } => {
                self.derived.bodies += 1;
                self.derived.bytes += len;
            }
            SlotBody::Ref { hash, len } => {
                if !self.referenced_body(k, hash, *len)? {
                    return Ok(());
                }
            }
        }
        let d = &mut self.derived;
        d.entries += 1;
        d.referenced += slot.body.len();
        d.pack_live += slot.loc.len as u64;
        d.max_stamp = d.max_stamp.max(slot.stamp).max(rec.stamp);
        d.log_end = d
            .log_end
            .max(packs::Pos { seg: slot.loc.seg, off: slot.loc.off + slot.loc.len as u64 });
        Ok(())
    }

    /// Counts the entry `k`'s reference to the body `hash` of `len` bytes
    /// and checks that body; false (the entry is broken) when it is
    /// missing, damaged or of another length.
    fn referenced_body(&mut self, k: &[u8], hash: &Hash, len: u64) -> Result<bool, StoreError> {
        *self.named.entry(*hash).or_insert(0) += 1;
        let place = self.stored.get(hash).map_or(Place::File, |r| r.place);
        self.keep.entry(*hash).or_insert(RefRow { count: 0, len, place }).count += 1;
        let found = match place {
            Place::File => self.check_file(hash)?,
            Place::Packed(_) => self.check_shared(hash)?,
        };
        let problem = match found {
            Some(n) if n == len => return Ok(true),
            Some(n) => Some(format!(
                "entry {:?} records {len} bytes for body {} but the file has {n}",
                display_key(k),
                hex::encode(hash)
            )),
            None => {
                let damaged = match place {
                    Place::File => self.on_disk.contains_key(hash),
                    Place::Packed(_) => true,
                };
                let set = if damaged { &mut self.corrupt } else { &mut self.missing };
                set.insert(hex::encode(hash));
                None
            }
        };
        if let Some(r) = self.keep.get_mut(hash) {
            r.count -= 1;
        }
        self.broken(k, problem);
        Ok(false)
    }

    /// The referenced bodies in the totals; missing and corrupt bodies and
    /// reference counts that differ from the entries', in the report.
    fn counts(&mut self) {
        self.keep.retain(|_, r| r.count > 0);
        let d = &mut self.derived;
        d.bodies += self.keep.len() as u64;
        d.bytes += self.keep.values().map(|r| r.len).sum::<u64>();
        d.pack_live += self
            .keep
            .values()
            .map(|r| match r.place {
                Place::Packed(loc) => loc.len as u64,
                Place::File => 0,
            })
            .sum::<u64>();
        d.file_bytes +=
            self.keep.values().filter(|r| r.place == Place::File).map(|r| r.len).sum::<u64>();
        self.report.missing_bodies = std::mem::take(&mut self.missing).into_iter().collect();
        self.report.corrupt_bodies = std::mem::take(&mut self.corrupt).into_iter().collect();
        for (h, f) in &self.files {
            if matches!(f, FileState::Corrupt)
                && !self.report.corrupt_bodies.contains(&hex::encode(h))
            {
                self.report.corrupt_bodies.push(hex::encode(h));
            }
        }
        let (stored, named) = (&self.stored, &self.named);
        let mut mismatched: Vec<String> = stored
            .keys()
            .chain(named.keys())
            .collect::<HashSet<_>>()
            .into_iter()
            .filter(|h| {
                stored.get(*h).map(|r| r.count).unwrap_or(0) != named.get(*h).copied().unwrap_or(0)
            })
            .map(hex::encode)
            .collect();
        mismatched.sort();
        self.report.refcount_mismatches = mismatched;
    }

    /// Whether an entry references the body file `h` (so it is no orphan).
    fn file_named(&self, h: &Hash) -> bool {
        self.named.contains_key(h) && self.keep.get(h).is_some_and(|r| r.place == Place::File)
    }

    /// Orphans (intact files nothing references; a pinned body is about to
    /// be), strays, and segments the tail has passed, in the report.
    /// Returns the paths a repair removes besides orphan files.
    fn orphans(&mut self) -> Result<Vec<PathBuf>, StoreError> {
        let mut orphans: Vec<String> = self
            .on_disk
            .keys()
            .filter(|h| !self.file_named(h) && !self.pinned.contains(*h))
            .map(hex::encode)
            .collect();
        orphans.sort();
        orphans.extend(self.strays.iter().map(|p| p.display().to_string()));
        let packs = &self.inner.packs;
        let tail = self.derived.tail;
        let (segs, pack_strays) = list_segments(&packs.dir)?;
        let mut leftovers: Vec<PathBuf> = segs
            .iter()
            .filter(|(s, _)| *s < tail.seg && *s < packs.head_seg())
            .map(|(s, _)| packs.dir.join(segment_name(*s)))
            .collect();
        leftovers.extend(pack_strays);
        orphans.extend(leftovers.iter().map(|p| p.display().to_string()));
        self.report.orphan_bodies = orphans;
        leftovers.extend(self.strays.iter().cloned());
        Ok(leftovers)
    }

    /// The kept totals against the derived ones, in the report.
    fn totals(&mut self) {
        let kept = self.inner.index.state();
        let d = State {
            max_stamp: kept.max_stamp.max(self.derived.max_stamp),
            log_end: kept.log_end.max(self.derived.log_end),
            ..self.derived
        };
        self.derived = d;
        let totals =
            |s: &State| (s.entries, s.bodies, s.bytes, s.referenced, s.pack_live, s.file_bytes);
        if totals(&kept) != totals(&d) && self.bad_keys.is_empty() {
            self.report.index_problems.push(format!(
                "kept totals ({} entries, {} bodies, {} bytes, {} referenced bytes, {} live pack bytes, {} body file bytes) \
                 disagree with the index ({} entries, {} bodies, {} bytes, {} referenced bytes, {} live pack bytes, {} body file bytes)",
                kept.entries, kept.bodies, kept.bytes, kept.referenced, kept.pack_live, kept.file_bytes,
                d.entries, d.bodies, d.bytes, d.referenced, d.pack_live, d.file_bytes
            ));
        }
        if d.log_end > kept.log_end {
            self.report
                .index_problems
                .push("an entry's record lies past the log's end the index keeps".into());
        }
    }

    /// Repairs, in an order every step of which is safe to crash in: drop
    /// the broken entries, rewrite counts and totals together, flush, and
    /// only then delete files (`leftovers`: strays and passed segments).
    fn repair(mut self, leftovers: &[PathBuf]) -> Result<VerifyReport, StoreError> {
        let index = &self.inner.index;
        index.remove_raw(&self.bad_keys)?;
        index.rewrite(self.derived, &self.keep)?;
        index.flush()?;
        for (h, path) in &self.on_disk {
            if !self.file_named(h) && !self.pinned.contains(h) {
                remove_path(path)?;
            }
        }
        for path in leftovers {
            remove_path(path)?;
        }
        self.inner.blobs.sweep_tmp(true)?;
        self.report.repaired = true;
        Ok(self.report)
    }
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
