//! Which short bodies the pack holds, by hash: the way from a body's
//! SHA-256 to an entry record that carries it inline, so that a second
//! entry with the same bytes shares them (`index.rs`, "How a body is kept")
//! instead of storing them again.
//!
//! A hint is (fingerprint, offset, length): the first 8 bytes of the body's
//! SHA-256 and where the record lies in its segment. Hints are only
//! hints: the record a hint points at is read and checked (its CRC, that
//! it holds that very hash, that it is still its entry's current record)
//! before anything is built on it, so a hint may be stale (the entry was
//! replaced, its body shared since) and nothing goes wrong. They are kept
//! per segment and go with it:
//! - the segment being appended to has its hints in memory (at most one
//!   per record of a 64 MiB segment);
//! - a sealed segment's hints are written by the store's background thread
//!   into `packs/NNNNNNNN.hints` (sorted by fingerprint, with a CRC) and
//!   read through a map of that file; until then they stay in memory;
//! - when the log's tail passes a segment, its hints file is deleted with
//!   it (`packs.rs`).
//!
//! At a clean close the hints of the segment being appended to are written
//! too, with the length they cover; an open loads every valid file and
//! walks only what no file covers (after a crash: the last segment; after
//! a migration: every segment).
//!
//! File layout: magic `CCHINT01`, the segment length covered (u64 LE), the
//! number of hints (u64 LE), the hints (fingerprint u64 LE, offset u64 LE,
//! record length u32 LE: 20 bytes each, sorted), CRC-32 of all of it (u32
//! LE).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crawlcache_base::locks::{self, lock};

use crate::error::StoreError;
use crate::fsops::io_err;
use crate::hash::Hash;
use crate::packs::{Loc, Packs, Pos, ReadError, RecBody};
use crate::segment_files::{self, hints_name};

const MAGIC: &[u8; 8] = b"CCHINT01";
const HEADER: usize = 24;
const ITEM: usize = 20;
/// Candidates one lookup returns at most (the newest first). Several
/// records of one fingerprint are mostly dead ones (an entry stored again
/// with the same bytes, an owner removed before another came): a live
/// owner is behind at most a few of them.
const MAX_CANDIDATES: usize = 32;
/// No earlier hint of the same fingerprint ([`Active::prev`]).
const NONE: u32 = u32::MAX;

/// The fingerprint of a body hash: its first 8 bytes.
pub(crate) fn fingerprint(hash: &Hash) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&hash[..8]);
    u64::from_le_bytes(b)
}

/// One hint: an inline body whose hash starts with `fp` is in the record
/// at `off` (`len` bytes) of its segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Hint {
    fp: u64,
    off: u64,
    len: u32,
}

/// The hints of the segment being appended to: every one, in the order
/// written, with the newest of each fingerprint and a chain to the earlier
/// ones (a record per 70 bytes at least: a segment has at most about a
/// million).
struct Active {
    seg: u32,
    hints: Vec<Hint>,
    /// For each hint, the index of the one before it with the same
    /// fingerprint ([`NONE`]).
    prev: Vec<u32>,
    /// The index of the newest hint of each fingerprint.
    newest: HashMap<u64, u32>,
}

impl Active {
    fn new(seg: u32) -> Active {
        Active { seg, hints: Vec::new(), prev: Vec::new(), newest: HashMap::new() }
    }

    fn push(&mut self, h: Hint) {
        let i = self.hints.len() as u32;
        self.prev.push(self.newest.insert(h.fp, i).unwrap_or(NONE));
        self.hints.push(h);
    }

    /// The hints of `fp`, the newest first.
    fn find(&self, fp: u64, out: &mut Vec<Loc>) {
        let mut i = self.newest.get(&fp).copied().unwrap_or(NONE);
        while i != NONE && out.len() < MAX_CANDIDATES {
            let h = self.hints[i as usize];
            out.push(Loc { seg: self.seg, off: h.off, len: h.len });
            i = self.prev[i as usize];
        }
    }

    /// Takes every hint out, sorted (the segment is sealed).
    fn take_sorted(&mut self) -> Vec<Hint> {
        self.prev.clear();
        self.newest.clear();
        let mut hints = std::mem::take(&mut self.hints);
        hints.sort_unstable();
        hints
    }

    fn sorted(&self) -> Vec<Hint> {
        let mut hints = self.hints.clone();
        hints.sort_unstable();
        hints
    }
}

/// The hints of a sealed segment.
enum Sealed {
    /// Not written to its file yet (sorted).
    Memory(Arc<Vec<Hint>>),
    /// Its file, mapped (validated when mapped).
    Mapped(Arc<memmap2::Mmap>),
}

impl Sealed {
    fn count(&self) -> usize {
        match self {
            Sealed::Memory(v) => v.len(),
            Sealed::Mapped(m) => (m.len() - HEADER - 4) / ITEM,
        }
    }

    fn get(&self, i: usize) -> Hint {
        match self {
            Sealed::Memory(v) => v[i],
            Sealed::Mapped(m) => decode_item(&m[HEADER + i * ITEM..HEADER + (i + 1) * ITEM]),
        }
    }

    /// The first index whose fingerprint is at least `fp` (binary search).
    fn first_at_least(&self, fp: u64) -> usize {
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.get(mid).fp < fp {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The hints with fingerprint `fp`, the newest (largest offset) first,
    /// up to `max`.
    fn find(&self, fp: u64, max: usize, out: &mut Vec<(u64, u32)>) {
        let from = self.first_at_least(fp);
        let to = fp.checked_add(1).map_or(self.count(), |next| self.first_at_least(next));
        for i in (from..to).rev().take(max) {
            let h = self.get(i);
            out.push((h.off, h.len));
        }
    }
}

fn decode_item(b: &[u8]) -> Hint {
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    Hint {
        fp: u64_at(0),
        off: u64_at(8),
        len: u32::from_le_bytes(b[16..20].try_into().unwrap_or([0; 4])),
    }
}

/// The hints of one store's pack (see the module comment).
pub(crate) struct Hints {
    dir: PathBuf,
    active: Mutex<Active>,
    sealed: RwLock<BTreeMap<u32, Sealed>>,
}

/// Encodes a hints file covering `covered` bytes of its segment.
fn encode_file(covered: u64, hints: &[Hint]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + hints.len() * ITEM + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&covered.to_le_bytes());
    out.extend_from_slice(&(hints.len() as u64).to_le_bytes());
    for h in hints {
        out.extend_from_slice(&h.fp.to_le_bytes());
        out.extend_from_slice(&h.off.to_le_bytes());
        out.extend_from_slice(&h.len.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The length a valid hints file covers; `None` when `b` is not one.
fn check_file(b: &[u8]) -> Option<u64> {
    if b.len() < HEADER + 4 || &b[..8] != MAGIC {
        return None;
    }
    let covered = u64::from_le_bytes(b[8..16].try_into().ok()?);
    let count = usize::try_from(u64::from_le_bytes(b[16..24].try_into().ok()?)).ok()?;
    if count.checked_mul(ITEM)?.checked_add(HEADER + 4)? != b.len() {
        return None;
    }
    let crc_at = b.len() - 4;
    (crc32fast::hash(&b[..crc_at]) == u32::from_le_bytes(b[crc_at..].try_into().ok()?))
        .then_some(covered)
}

/// Maps the hints file `path` if it is valid: (its map, the length it covers).
fn map_file(path: &Path) -> Option<(memmap2::Mmap, u64)> {
    let f = fs::File::open(path).ok()?;
    // SAFETY: hints files are only ever replaced by a rename, never written
    // in place, so the mapped bytes do not change under the map.
    let map = unsafe { memmap2::Mmap::map(&f) }.ok()?;
    let covered = check_file(&map)?;
    // The check read every page of the map into this process's resident
    // memory: 20 bytes per hinted record, 200 MB at ten million entries.
    // A lookup needs only the pages of its binary search, so the pages go
    // back to the page cache and fault in again when a lookup reads them.
    // SAFETY: a read-only shared map of a file never written in place (see
    // above): after DONTNEED a read gets the file's bytes again, the same
    // ones; no modified page is lost.
    if let Err(e) = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) } {
        tracing::debug!(path = %path.display(), error = %e, "cannot release the checked pages of a hints file");
    }
    Some((map, covered))
}

/// Writes a hints file through a temporary file and a rename (not synced:
/// a file lost or torn by a crash is found invalid and made again).
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = path.with_extension("hints.tmp");
    fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(io_err("write pack hints", &tmp))?;
    fs::rename(&tmp, path).map_err(io_err("rename pack hints into place at", path))
}

/// The hints of the inline bodies in segment `seg` from offset `from` to
/// `to`, read from the records (a damaged record ends the walk: what
/// follows is not hinted, which only loses sharing).
fn walk(packs: &Packs, seg: u32, from: u64, to: u64) -> Result<Vec<Hint>, StoreError> {
    let mut out = Vec::new();
    let mut pos = Pos { seg, off: from };
    loop {
        match packs.read_at(pos, to) {
            Ok(Some((rec, loc))) => {
                if let RecBody::Inline { hash, .. } = &rec.body {
                    out.push(Hint { fp: fingerprint(hash), off: loc.off, len: loc.len });
                }
                pos.off = loc.off + loc.len as u64;
            }
            Ok(None) | Err(ReadError::Gone) => break,
            Err(ReadError::Io(e)) => return Err(e),
            Err(ReadError::Invalid(m)) => {
                tracing::warn!(segment = seg, offset = pos.off, problem = %m, "a damaged pack record ends the hints of its segment (run cache verify)");
                break;
            }
        }
    }
    Ok(out)
}

impl Hints {
    /// Loads (or makes) the hints of every segment of `packs` from the
    /// log's tail segment `tail_seg` on, and deletes hints files of
    /// segments that are gone. Errors: `Io` when the pack or a hints file
    /// cannot be read or written.
    pub fn open(packs: &Packs, tail_seg: u32) -> Result<Hints, StoreError> {
        let dir = packs.dir.clone();
        let (segs, _) = segment_files::list_segments(&dir)?;
        let head = packs.head_seg();
        let tail_seg = tail_seg.max(1);
        // Hints files of segments that are gone.
        if let Ok(rd) = fs::read_dir(&dir) {
            for ent in rd.flatten() {
                let name = ent.file_name().to_string_lossy().into_owned();
                let stale = match segment_files::parse_hints_name(&name) {
                    Some(s) => s < tail_seg || !segs.iter().any(|(n, _)| *n == s),
                    None => name.ends_with(".hints.tmp"),
                };
                if stale {
                    let _ = fs::remove_file(ent.path());
                }
            }
        }
        let mut sealed = BTreeMap::new();
        let mut active = Active::new(head);
        for &(seg, len) in segs.iter().filter(|(s, _)| *s >= tail_seg) {
            let len = if seg == head { packs.seg_len(seg).unwrap_or(len) } else { len };
            let path = dir.join(hints_name(seg));
            let mapped = map_file(&path).filter(|(_, covered)| *covered <= len);
            if seg < head {
                match mapped {
                    Some((map, covered)) if covered == len => {
                        sealed.insert(seg, Sealed::Mapped(Arc::new(map)));
                    }
                    _ => {
                        let mut hints = walk(packs, seg, 0, len)?;
                        hints.sort_unstable();
                        write_file(&path, &encode_file(len, &hints))?;
                        match map_file(&path) {
                            Some((map, _)) => sealed.insert(seg, Sealed::Mapped(Arc::new(map))),
                            None => sealed.insert(seg, Sealed::Memory(Arc::new(hints))),
                        };
                    }
                }
            } else {
                let (mut hints, from) = match mapped {
                    Some((map, covered)) => {
                        let s = Sealed::Mapped(Arc::new(map));
                        ((0..s.count()).map(|i| s.get(i)).collect::<Vec<_>>(), covered)
                    }
                    None => (Vec::new(), 0),
                };
                hints.extend(walk(packs, seg, from, len)?);
                // In the order written, so that the newest comes first.
                hints.sort_unstable_by_key(|h| h.off);
                for h in hints {
                    active.push(h);
                }
            }
        }
        Ok(Hints { dir, active: Mutex::new(active), sealed: RwLock::new(sealed) })
    }

    /// Notes that the record at `loc` holds the inline body `hash`. Called
    /// under the store's log lock right after the record was appended, so
    /// locations arrive in the order of the log.
    pub fn add(&self, loc: Loc, hash: &Hash) {
        let mut a = lock(&self.active);
        if loc.seg != a.seg {
            if loc.seg < a.seg {
                return; // not expected: appends only move forward
            }
            self.seal(&mut a);
            a.seg = loc.seg;
        }
        a.push(Hint { fp: fingerprint(hash), off: loc.off, len: loc.len });
    }

    /// Moves the active hints into the sealed ones (the segment was sealed).
    fn seal(&self, a: &mut Active) {
        if a.hints.is_empty() {
            return;
        }
        let hints = a.take_sorted();
        locks::write(&self.sealed).insert(a.seg, Sealed::Memory(Arc::new(hints)));
    }

    /// Records that may hold the inline body `hash`, the newest first (at
    /// most [`MAX_CANDIDATES`]); each must be read and checked. Only the
    /// hints held in memory with `memory_only` (no file is read).
    pub fn candidates(&self, hash: &Hash, memory_only: bool) -> Vec<Loc> {
        let fp = fingerprint(hash);
        let mut out = Vec::new();
        lock(&self.active).find(fp, &mut out);
        let sealed = locks::read(&self.sealed);
        let mut found = Vec::new();
        for (seg, s) in sealed.iter().rev() {
            if out.len() >= MAX_CANDIDATES {
                break;
            }
            if memory_only && matches!(s, Sealed::Mapped(_)) {
                continue;
            }
            found.clear();
            s.find(fp, MAX_CANDIDATES - out.len(), &mut found);
            out.extend(found.iter().map(|&(off, len)| Loc { seg: *seg, off, len }));
        }
        out
    }

    /// Writes the hints of sealed segments still held in memory to their
    /// files (the background thread's work; `head` is the segment being
    /// appended to: hints of an earlier one are sealed first). Errors:
    /// `Io`; those hints stay in memory and are tried again.
    pub fn write_sealed(&self, head: u32) -> Result<(), StoreError> {
        {
            let mut a = lock(&self.active);
            if a.seg < head {
                self.seal(&mut a);
                a.seg = head;
            }
        }
        let pending: Vec<(u32, Arc<Vec<Hint>>)> = locks::read(&self.sealed)
            .iter()
            .filter_map(|(seg, s)| match s {
                Sealed::Memory(v) => Some((*seg, Arc::clone(v))),
                Sealed::Mapped(_) => None,
            })
            .collect();
        for (seg, hints) in pending {
            let path = self.dir.join(hints_name(seg));
            let covered = fs::metadata(self.dir.join(segment_files::segment_name(seg)))
                .map(|m| m.len())
                .unwrap_or(0);
            write_file(&path, &encode_file(covered, &hints))?;
            if let Some((map, _)) = map_file(&path) {
                let mut sealed = locks::write(&self.sealed);
                // Unless the tail passed the segment meanwhile.
                if let Some(s) = sealed.get_mut(&seg) {
                    *s = Sealed::Mapped(Arc::new(map));
                }
            }
        }
        Ok(())
    }

    /// Forgets the hints of segments before `seg` (the tail passed them;
    /// their files go with the segments).
    pub fn forget_before(&self, seg: u32) {
        let mut sealed = locks::write(&self.sealed);
        *sealed = sealed.split_off(&seg);
    }

    /// Writes every hint held in memory to its file, the active segment's
    /// with the `covered` bytes of it they cover (a clean close).
    /// Errors: `Io`.
    pub fn close(&self, head: u32, covered: u64) -> Result<(), StoreError> {
        self.write_sealed(head)?;
        let a = lock(&self.active);
        write_file(&self.dir.join(hints_name(a.seg)), &encode_file(covered, &a.sorted()))
    }

    /// The segments that have hints, in order (for building the filter of
    /// stored bodies one segment at a time).
    pub fn segments(&self) -> Vec<u32> {
        let mut out: Vec<u32> = locks::read(&self.sealed).keys().copied().collect();
        out.push(lock(&self.active).seg);
        out.dedup();
        out
    }

    /// Calls `f` with the fingerprint of every hint of segment `seg`.
    pub fn for_each_fingerprint(&self, seg: u32, mut f: impl FnMut(u64)) {
        {
            let a = lock(&self.active);
            if a.seg == seg {
                a.hints.iter().for_each(|h| f(h.fp));
            }
        }
        if let Some(s) = locks::read(&self.sealed).get(&seg) {
            (0..s.count()).for_each(|i| f(s.get(i).fp));
        }
    }

    /// Hints held, in memory and in files (tests, reports).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        lock(&self.active).hints.len()
            + locks::read(&self.sealed).values().map(Sealed::count).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};
    use std::sync::atomic::AtomicU64;

    fn body(i: u32) -> (Hash, Arc<Vec<u8>>) {
        let bytes = Arc::new(format!("body {i} ").repeat(100).into_bytes());
        (Sha256::digest(bytes.as_slice()).into(), bytes)
    }

    /// Resident kilobytes of the mapping that starts at `addr`, from
    /// /proc/self/smaps.
    fn mapping_rss_kib(addr: usize) -> Option<u64> {
        let smaps = fs::read_to_string("/proc/self/smaps").ok()?;
        let mut lines = smaps.lines();
        while let Some(line) = lines.next() {
            let start = line.split('-').next().and_then(|a| usize::from_str_radix(a, 16).ok());
            if start != Some(addr) {
                continue;
            }
            return lines
                .find(|l| l.starts_with("Rss:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
        }
        None
    }

    #[test]
    fn a_checked_hints_file_leaves_no_pages_resident_and_still_answers() {
        // 100,000 hints: 2 MB, what five 64 MiB segments of 1 KiB records hint.
        let hints: Vec<Hint> =
            (0..100_000u64).map(|i| Hint { fp: i * 7, off: i * 640, len: 600 }).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000001.hints");
        write_file(&path, &encode_file(64_000_000, &hints)).unwrap();
        let (map, covered) = map_file(&path).expect("a valid file maps");
        assert_eq!(covered, 64_000_000);
        let addr = map.as_ptr() as usize;
        let rss = mapping_rss_kib(addr).expect("the map is in /proc/self/smaps");
        assert!(rss < 64, "{rss} KiB of a 1,953 KiB map resident after the check");
        let s = Sealed::Mapped(Arc::new(map));
        assert_eq!(s.first_at_least(7 * 54_321), 54_321, "lookups read the file's bytes");
        assert_eq!(s.get(99_999), hints[99_999]);
    }

    #[test]
    fn files_round_trip_and_damage_is_refused() {
        let hints = vec![
            Hint { fp: 1, off: 0, len: 70 },
            Hint { fp: 1, off: 90, len: 80 },
            Hint { fp: 7, off: 200, len: 100 },
        ];
        let b = encode_file(300, &hints);
        assert_eq!(check_file(&b), Some(300));
        for i in [0, 9, 17, 30, b.len() - 1] {
            let mut bad = b.clone();
            bad[i] ^= 1;
            assert_eq!(check_file(&bad), None, "byte {i} flipped");
        }
        assert_eq!(check_file(&b[..b.len() - 3]), None);
        let s = Sealed::Memory(Arc::new(hints));
        let mut out = Vec::new();
        s.find(1, 32, &mut out);
        assert_eq!(out, vec![(90, 80), (0, 70)], "the newest first");
        out.clear();
        s.find(5, 32, &mut out);
        assert!(out.is_empty());
        s.find(7, 32, &mut out);
        assert_eq!(out, vec![(200, 100)]);
    }

    /// Hints follow appends across segments, reach files for sealed
    /// segments, survive a clean close and are rebuilt from the records
    /// when a file is missing.
    #[test]
    fn hints_find_inline_bodies_in_every_segment_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let stamps = AtomicU64::new(1);
        let mut placed = Vec::new();
        {
            let packs = Packs::open(dir.path()).unwrap();
            let hints = Hints::open(&packs, 1).unwrap();
            // Segments roll at 1 MiB in tests: 1,500 records of ~1.2 KiB.
            for i in 0..1500u32 {
                let (hash, bytes) = body(i);
                let (_, loc) = packs
                    .append(
                        &stamps,
                        format!("k{i}").as_bytes(),
                        b"m",
                        &RecBody::Inline { hash, bytes },
                    )
                    .unwrap();
                hints.add(loc, &hash);
                placed.push((hash, loc));
                if i % 400 == 0 {
                    hints.write_sealed(packs.head_seg()).unwrap();
                }
            }
            assert!(packs.head_seg() >= 2, "several segments");
            for (hash, loc) in &placed {
                assert!(hints.candidates(hash, false).contains(loc), "{loc:?}");
            }
            let (_, other) = body(99_999);
            assert!(hints.candidates(&Sha256::digest(other.as_slice()).into(), false).is_empty());
            packs.flush().unwrap();
            hints.close(packs.head_seg(), packs.seg_len(packs.head_seg()).unwrap()).unwrap();
        }
        // Reopened: from the files; then with one sealed file gone: walked.
        for remove in [false, true] {
            if remove {
                fs::remove_file(dir.path().join(hints_name(1))).unwrap();
            }
            let packs = Packs::open(dir.path()).unwrap();
            let hints = Hints::open(&packs, 1).unwrap();
            assert_eq!(hints.len(), placed.len());
            for (hash, loc) in &placed {
                assert!(
                    hints.candidates(hash, false).contains(loc),
                    "{loc:?} after a reopen (file removed: {remove})"
                );
            }
        }
        // Hints files of segments before the tail are deleted at open.
        let packs = Packs::open(dir.path()).unwrap();
        let hints = Hints::open(&packs, 2).unwrap();
        assert!(!dir.path().join(hints_name(1)).exists());
        assert!(hints.candidates(&placed[0].0, false).is_empty());
    }
}
