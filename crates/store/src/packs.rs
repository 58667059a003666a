//! Pack segments: append-only files holding two kinds of record. An
//! *entry record* is one stored version of an entry: its key, its metadata
//! (the stored response head) and its body, either inline (the bytes
//! themselves, for a body under `inline_max` bytes that no other entry
//! shares) or as a reference by SHA-256 to a body kept elsewhere (a body
//! file, `blobs.rs`, or a shared body record). A *shared body record*
//! holds the bytes of one short body that several entries reference; it
//! has no key and no metadata, and the index's reference-count row of its
//! hash says where it lies (`index.rs`).
//!
//! Layout: `packs/NNNNNNNN.pack` (the segment number, 8 decimal digits),
//! numbered from 1 in the order they are written. New records are appended
//! to the last segment; a segment is sealed once it reaches
//! [`SEGMENT_SIZE`] bytes and the next one is started. The index
//! (`index.rs`) maps an entry key to the position of its current record
//! and the hash of a shared body to its record; a record nothing points at
//! is dead space, reclaimed when the log's tail passes it (eviction and
//! compaction, `budget.rs`) and its segment is deleted. Beside each
//! segment, `NNNNNNNN.hints` lists the inline bodies it holds by hash
//! (`hints.rs`).
//!
//! Record layout (big-endian integers):
//!
//! | offset | size | field                                                  |
//! |--------|------|--------------------------------------------------------|
//! | 0      | 2    | magic `C5 7A`                                          |
//! | 2      | 1    | body kind: 0 none, 1 inline, 2 reference, 3 shared body |
//! | 3      | 1    | reserved, 0                                            |
//! | 4      | 4    | total length of the record, this header and CRC included |
//! | 8      | 8    | stamp (the store's monotonic counter when written)     |
//! | 16     | 4    | key length (0 for a shared body)                       |
//! | 20     | 4    | metadata length (0 for a shared body)                  |
//! | 24     | 8    | body length in bytes                                   |
//! | 32     | 32   | body SHA-256 (zeros without a body)                    |
//! | 64     | ...  | key, metadata, inline body bytes                       |
//! | end-4  | 4    | CRC-32 of every byte before it                         |
//!
//! Kinds 0 to 2 are the records of store format 3 (kind 2 named a body
//! file there, which is what a reference to a body file still is), so a
//! format-3 pack reads as it is.
//!
//! Every read checks the magic, the length and the CRC, so a torn or
//! overwritten record is never decoded; an inline or shared body is also
//! checked against its SHA-256 when the store is verified and after a crash.
//! Records are appended to an in-memory write-behind buffer and reach the
//! segment file in one `write` of many records ([`PENDING_FLUSH`] bytes, or
//! whatever is pending at the next group commit, every few milliseconds):
//! one large write costs ext4 a fraction of many record-sized ones. A
//! record is readable from the buffer until then. Nothing is synced here:
//! the group commit (`maintenance.rs`) writes the buffer and syncs the
//! segments written since the last commit before it records the checkpoint
//! that covers their records, so a crash (SIGKILL included) loses at most
//! the records of the last commit interval, never a record the index
//! committed.

use crate::segment_files::{list_segments, remove_hints, segment_name};
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crawlcache_base::locks::lock;

use crate::error::{Damage, StoreError};
use crate::fsops::{drop_cached_pages, io_err, sync_dir};
use crate::hash::Hash;
use crate::stamp::issue_stamp;

/// A segment is sealed once it holds this many bytes (a record larger than
/// that gets a segment of its own). 1 MiB in the unit tests, so that they
/// fill segments quickly.
pub const SEGMENT_SIZE: u64 = if cfg!(test) { 1024 * 1024 } else { 64 * 1024 * 1024 };
/// Records appended are kept in memory and written to the segment in one
/// write once this many bytes are pending, or at the next group commit
/// (every few milliseconds), whichever comes first: ext4 spends about
/// 10 us on each unaligned 17 KiB write and 2.5-4 us per 16 KiB of a
/// 1 MiB write (measured on this project's 2-core machine).
pub(crate) const PENDING_FLUSH: usize = 256 * 1024;
/// While writes fail (a full disk), appends are refused once this many
/// bytes are pending, so memory stays bounded.
const PENDING_MAX: usize = 32 * 1024 * 1024;
/// Bytes of a record before the key.
pub(crate) const HEADER_LEN: usize = 64;
/// Bytes after the last field (the CRC).
const TRAILER_LEN: usize = 4;
const MAGIC: [u8; 2] = [0xC5, 0x7A];
/// Open read handles kept at most (segments beyond are reopened on demand).
const MAX_READERS: usize = 256;
/// Largest record accepted when reading (keys and heads are bounded far
/// below this; anything larger is damage).
const MAX_RECORD: u64 = 1 << 30;

/// Where a record lives: segment number, byte offset, total length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Loc {
    pub seg: u32,
    pub off: u64,
    pub len: u32,
}

/// A position in the log (between records): segment number and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Pos {
    pub seg: u32,
    pub off: u64,
}

/// The body a record carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RecBody {
    /// No body (a stored response without one).
    None,
    /// The body bytes themselves, with their SHA-256 (an entry record).
    Inline { hash: Hash, bytes: Arc<Vec<u8>> },
    /// A reference to the body `hash` of `len` bytes kept elsewhere (a body
    /// file or a shared body record: the index's reference-count row of
    /// `hash` says which).
    Ref { hash: Hash, len: u64 },
    /// A shared body record: the bytes of a body several entries
    /// reference (no key, no metadata).
    Shared { hash: Hash, bytes: Arc<Vec<u8>> },
}

impl RecBody {
    /// The body's SHA-256 and length, if there is a body.
    pub fn hash_len(&self) -> Option<(Hash, u64)> {
        match self {
            RecBody::None => None,
            RecBody::Inline { hash, bytes } | RecBody::Shared { hash, bytes } => {
                Some((*hash, bytes.len() as u64))
            }
            RecBody::Ref { hash, len } => Some((*hash, *len)),
        }
    }

    /// The bytes the record itself holds (an inline or shared body).
    pub fn held_bytes(&self) -> Option<&Arc<Vec<u8>>> {
        match self {
            RecBody::Inline { bytes, .. } | RecBody::Shared { bytes, .. } => Some(bytes),
            RecBody::None | RecBody::Ref { .. } => None,
        }
    }
}

/// One decoded record.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub stamp: u64,
    pub key: Vec<u8>,
    pub meta: Vec<u8>,
    pub body: RecBody,
}

/// Why a record could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The segment file does not exist (deleted after the tail passed it).
    Gone,
    /// The bytes there are not a whole, valid record (torn, overwritten,
    /// past the end of the file).
    Invalid(Damage),
    /// The read itself failed.
    Io(StoreError),
}

impl ReadError {
    /// As a store error naming the record.
    pub fn into_store_error(self, loc: &Loc) -> StoreError {
        match self {
            ReadError::Gone => StoreError::Index(format!(
                "pack segment {} is gone (record at {})",
                loc.seg, loc.off
            )),
            ReadError::Invalid(m) => StoreError::Index(format!(
                "pack record at segment {} offset {} is damaged: {m}",
                loc.seg, loc.off
            )),
            ReadError::Io(e) => e,
        }
    }
}

/// Bytes of the record [`encode_into`] writes for these fields.
fn record_len(key: &[u8], meta: &[u8], body: &RecBody) -> usize {
    let inline = body.held_bytes().map_or(0, |b| b.len());
    HEADER_LEN + key.len() + meta.len() + inline + TRAILER_LEN
}

/// Appends the record [`encode`] gives to `out` (the write-behind buffer)
/// and returns its length.
fn encode_into(out: &mut Vec<u8>, stamp: u64, key: &[u8], meta: &[u8], body: &RecBody) -> usize {
    let (kind, hash, body_len, inline): (u8, [u8; 32], u64, &[u8]) = match body {
        RecBody::None => (0, [0; 32], 0, &[]),
        RecBody::Inline { hash, bytes } => (1, *hash, bytes.len() as u64, bytes.as_slice()),
        RecBody::Ref { hash, len } => (2, *hash, *len, &[]),
        RecBody::Shared { hash, bytes } => (3, *hash, bytes.len() as u64, bytes.as_slice()),
    };
    let total = record_len(key, meta, body);
    let start = out.len();
    out.reserve(total);
    out.extend_from_slice(&MAGIC);
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&stamp.to_be_bytes());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(&(meta.len() as u32).to_be_bytes());
    out.extend_from_slice(&body_len.to_be_bytes());
    out.extend_from_slice(&hash);
    out.extend_from_slice(key);
    out.extend_from_slice(meta);
    out.extend_from_slice(inline);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
    total
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// The total length a record header announces; `None` if `head` (at least
/// 8 bytes) does not start a record.
pub(crate) fn announced_len(head: &[u8]) -> Option<u64> {
    if head.len() < 8 || head[..2] != MAGIC || head[2] > 3 || head[3] != 0 {
        return None;
    }
    let total = be_u32(head, 4) as u64;
    (total as usize >= HEADER_LEN + TRAILER_LEN).then_some(total)
}

/// Decodes a whole record; an error says what is wrong with it.
pub(crate) fn decode(bytes: &[u8]) -> Result<Record, Damage> {
    let total = announced_len(bytes).ok_or(Damage::NoHeader)? as usize;
    if total != bytes.len() {
        return Err(Damage::Length { announced: total, read: bytes.len() });
    }
    let crc_at = total - TRAILER_LEN;
    if crc32fast::hash(&bytes[..crc_at]) != be_u32(bytes, crc_at) {
        return Err(Damage::Checksum);
    }
    let stamp = be_u64(bytes, 8);
    let key_len = be_u32(bytes, 16) as usize;
    let meta_len = be_u32(bytes, 20) as usize;
    let body_len = be_u64(bytes, 24);
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&bytes[32..64]);
    let inline_len =
        if matches!(bytes[2], 1 | 3) { usize::try_from(body_len).unwrap_or(usize::MAX) } else { 0 };
    if HEADER_LEN
        .checked_add(key_len)
        .and_then(|n| n.checked_add(meta_len))
        .and_then(|n| n.checked_add(inline_len))
        != Some(crc_at)
    {
        return Err(Damage::FieldLengths);
    }
    let key = bytes[HEADER_LEN..HEADER_LEN + key_len].to_vec();
    let meta = bytes[HEADER_LEN + key_len..HEADER_LEN + key_len + meta_len].to_vec();
    let held = || Arc::new(bytes[HEADER_LEN + key_len + meta_len..crc_at].to_vec());
    let body = match bytes[2] {
        0 => RecBody::None,
        1 => RecBody::Inline { hash, bytes: held() },
        2 => RecBody::Ref { hash, len: body_len },
        _ => {
            if key_len != 0 || meta_len != 0 {
                return Err(Damage::SharedWithKey);
            }
            RecBody::Shared { hash, bytes: held() }
        }
    };
    Ok(Record { stamp, key, meta, body })
}

/// Whether the bytes a record holds (an inline or shared body) hash to the
/// SHA-256 it names (always true for the other kinds).
pub(crate) fn inline_intact(body: &RecBody) -> bool {
    match body {
        RecBody::Inline { hash, bytes } | RecBody::Shared { hash, bytes } => {
            Sha256::digest(bytes.as_slice()).as_slice() == hash
        }
        RecBody::None | RecBody::Ref { .. } => true,
    }
}

fn read_exact_at(f: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(f, buf, off)
    }
    #[cfg(not(unix))]
    {
        let mut done = 0;
        while done < buf.len() {
            let n =
                std::os::windows::fs::FileExt::seek_read(f, &mut buf[done..], off + done as u64)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            done += n;
        }
        Ok(())
    }
}

fn write_all_at(f: &File, buf: &[u8], off: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(f, buf, off)
    }
    #[cfg(not(unix))]
    {
        let mut done = 0;
        while done < buf.len() {
            let n = std::os::windows::fs::FileExt::seek_write(f, &buf[done..], off + done as u64)?;
            done += n;
        }
        Ok(())
    }
}

/// The segment being appended to.
struct Writer {
    seg: u32,
    file: Arc<File>,
    /// The segment's length, the records still in `pending` included.
    len: u64,
    /// The last records appended, not yet written to the file: bytes
    /// `len - pending.len() .. len` of the segment. Whole records only.
    pending: Vec<u8>,
}

impl Writer {
    fn new(seg: u32, file: Arc<File>, len: u64) -> Writer {
        Writer { seg, file, len, pending: Vec::new() }
    }

    /// Where `pending` starts in the segment.
    fn written(&self) -> u64 {
        self.len - self.pending.len() as u64
    }

    /// Writes `pending` to the file with one write. On error it stays
    /// pending (whatever part reached the file is written again next time).
    fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        write_all_at(&self.file, &self.pending, self.written())?;
        // A buffer grown by a burst is not kept.
        if self.pending.capacity() > 2 * PENDING_FLUSH {
            self.pending = Vec::new();
        } else {
            self.pending.clear();
        }
        Ok(())
    }

    /// Bytes `off .. off + buf.len()` of the active segment when they are
    /// all still pending (`false`: read them from the file).
    fn read_pending(&self, off: u64, buf: &mut [u8]) -> bool {
        let written = self.written();
        if off < written || off + buf.len() as u64 > self.len {
            return false;
        }
        let at = (off - written) as usize;
        buf.copy_from_slice(&self.pending[at..at + buf.len()]);
        true
    }
}

/// The pack segments of one store.
pub(crate) struct Packs {
    /// `<store>/packs`.
    pub dir: PathBuf,
    writer: Mutex<Writer>,
    /// Read handles of segments (bounded by [`MAX_READERS`]).
    readers: Mutex<HashMap<u32, Arc<File>>>,
    /// Segments written since the last commit, each with the offset its
    /// first such record starts at, rounded down to a page. Locked after
    /// `writer` when both are held.
    unsynced: Mutex<BTreeMap<u32, u64>>,
    /// A segment was created since the last sync: [`Packs::sync`] syncs
    /// the directory too, so that its name survives a crash before the
    /// checkpoint that covers its records.
    dir_unsynced: AtomicBool,
    /// Bytes in segments from the first to the current end (updated on
    /// append and segment deletion; the tail offset is not subtracted).
    bytes: AtomicU64,
    /// Leave what [`Packs::sync`] synced in the kernel's page cache
    /// (`store.keep_written_pages`); `false` drops it
    /// ([`drop_cached_pages`]).
    keep_written_pages: bool,
}

/// Offsets are rounded down to this before pages are dropped, so a page a
/// record ends in is dropped by the next commit, once it is whole.
const PAGE: u64 = 4096;

impl Packs {
    /// Opens the segments in `dir` (creating it and a first segment):
    /// appends go to the end of the last segment (cut back by
    /// [`Packs::truncate_at`] first when a crash left it torn).
    pub fn open(dir: &Path) -> Result<Packs, StoreError> {
        fs::create_dir_all(dir).map_err(io_err("create store directory", dir))?;
        let (segs, _) = list_segments(dir)?;
        let (seg, len) = segs.last().copied().unwrap_or((1, 0));
        let path = dir.join(segment_name(seg));
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err("open pack segment", &path))?;
        let bytes = segs.iter().map(|s| s.1).sum::<u64>().max(len);
        Ok(Packs {
            dir: dir.to_path_buf(),
            writer: Mutex::new(Writer::new(seg, Arc::new(file), len)),
            readers: Mutex::new(HashMap::new()),
            unsynced: Mutex::new(BTreeMap::new()),
            bytes: AtomicU64::new(bytes),
            dir_unsynced: AtomicBool::new(false),
            keep_written_pages: false,
        })
    }

    /// Whether what [`Packs::sync`] synced stays in the kernel's page cache
    /// (`store.keep_written_pages`; by default it is dropped).
    pub fn keeping_written_pages(mut self, keep: bool) -> Packs {
        self.keep_written_pages = keep;
        self
    }

    /// Cuts segment `seg` back to `len` bytes and removes every later
    /// segment (what follows a damaged record cannot be trusted), then
    /// reopens the writer at that end. Used at start-up after a crash.
    pub fn truncate_at(&self, seg: u32, len: u64) -> Result<(), StoreError> {
        let (segs, _) = list_segments(&self.dir)?;
        for (s, _) in segs.iter().filter(|(s, _)| *s > seg) {
            let p = self.dir.join(segment_name(*s));
            fs::remove_file(&p).map_err(io_err("remove damaged pack segment", &p))?;
            remove_hints(&self.dir, *s)?;
        }
        remove_hints(&self.dir, seg)?;
        let path = self.dir.join(segment_name(seg));
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err("open pack segment", &path))?;
        file.set_len(len).map_err(io_err("truncate pack segment", &path))?;
        file.sync_all().map_err(io_err("sync pack segment", &path))?;
        lock(&self.readers).clear();
        let (segs, _) = list_segments(&self.dir)?;
        self.bytes.store(segs.iter().map(|s| s.1).sum(), Ordering::Release);
        *lock(&self.writer) = Writer::new(seg, Arc::new(file), len);
        Ok(())
    }

    /// Appends a record for `key`, `meta` and `body`. The stamp is taken
    /// from `stamps` while the segment is locked, so stamps and positions
    /// grow together: every record with a stamp below a value read under
    /// the same lock ([`Packs::end`]) lies before the end read with it.
    /// The record joins the write-behind buffer ([`PENDING_FLUSH`]); it is
    /// readable at once and reaches the file by the next [`Packs::sync`].
    /// Returns the record's stamp and location.
    /// Errors: `Io` when a new segment cannot be created, or the buffer
    /// cannot be written while [`PENDING_MAX`] bytes are pending.
    pub fn append(
        &self,
        stamps: &AtomicU64,
        key: &[u8],
        meta: &[u8],
        body: &RecBody,
    ) -> Result<(u64, Loc), StoreError> {
        let mut w = lock(&self.writer);
        let rec_len = record_len(key, meta, body) as u64;
        if w.len > 0 && w.len + rec_len > SEGMENT_SIZE {
            // The sealed segment's records go to its file first.
            self.start_segment(&mut w)?;
        }
        if w.pending.len() >= PENDING_FLUSH {
            if let Err(e) = w.flush() {
                if w.pending.len() >= PENDING_MAX {
                    return Err(io_err(
                        "append to pack segment",
                        &self.dir.join(segment_name(w.seg)),
                    )(e));
                }
                tracing::warn!(error = %e, segment = w.seg, "cannot write the pack segment; its last records stay in memory and are retried");
            }
        }
        let stamp = issue_stamp(stamps);
        let off = w.len;
        let len = encode_into(&mut w.pending, stamp, key, meta, body);
        w.len += len as u64;
        self.bytes.fetch_add(len as u64, Ordering::AcqRel);
        lock(&self.unsynced).entry(w.seg).or_insert(off - off % PAGE);
        Ok((stamp, Loc { seg: w.seg, off, len: len as u32 }))
    }

    /// Writes the records still in memory to their segment (before the
    /// store is verified or closed). Errors: `Io`; they stay pending.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.flush_locked(&mut lock(&self.writer))
    }

    /// [`Packs::flush`] with the writer's lock already held.
    fn flush_locked(&self, w: &mut Writer) -> Result<(), StoreError> {
        w.flush()
            .map_err(|e| io_err("append to pack segment", &self.dir.join(segment_name(w.seg)))(e))
    }

    /// The end of the log and the next stamp, read together (see
    /// [`Packs::append`]).
    pub fn end(&self, stamps: &AtomicU64) -> (Pos, u64) {
        let w = lock(&self.writer);
        (Pos { seg: w.seg, off: w.len }, stamps.load(Ordering::Acquire))
    }

    /// The segment being appended to.
    pub fn head_seg(&self) -> u32 {
        lock(&self.writer).seg
    }

    /// Writes the pending records, then syncs every segment written since
    /// the last call (data only) and, when a segment was created since, the
    /// directory; unless `keep_written_pages`, drops the pages it synced
    /// from the page cache. Errors: `Io`; the segments stay queued.
    pub fn sync(&self) -> Result<(), StoreError> {
        // Every record appended so far reaches its file before the syncs;
        // the segments are taken under the same lock, so a record appended
        // after the flush queues its segment again for the next call.
        let (segs, head) = {
            let mut w = lock(&self.writer);
            self.flush_locked(&mut w)?;
            let segs: Vec<(u32, u64)> =
                std::mem::take(&mut *lock(&self.unsynced)).into_iter().collect();
            (segs, (w.seg, w.len))
        };
        // A segment created since the last call: its name too (a record in
        // it may be covered by the checkpoint that follows this call).
        if self.dir_unsynced.swap(false, Ordering::AcqRel) {
            if let Err(e) = sync_dir(&self.dir) {
                self.dir_unsynced.store(true, Ordering::Release);
                self.requeue(&segs);
                return Err(e);
            }
        }
        for (i, (seg, from)) in segs.iter().enumerate() {
            let synced = match self.handle(*seg) {
                Ok(f) => f
                    .sync_data()
                    .map(|()| Some(f))
                    .map_err(io_err("sync pack segment", &self.dir.join(segment_name(*seg)))),
                Err(ReadError::Gone) => Ok(None),
                Err(e) => Err(e.into_store_error(&Loc { seg: *seg, off: 0, len: 0 })),
            };
            match synced {
                Ok(Some(f)) if !self.keep_written_pages => {
                    // The head segment only up to what this call synced:
                    // later bytes are still dirty, and the next call drops them.
                    let to = (*seg == head.0).then_some(head.1);
                    drop_cached_pages(&f, *from, to);
                }
                Ok(_) => {}
                Err(e) => {
                    self.requeue(&segs[i..]);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Queues `segs` (segment, offset of its first unsynced page) for the
    /// next [`Packs::sync`] again, after a sync failed.
    fn requeue(&self, segs: &[(u32, u64)]) {
        let mut unsynced = lock(&self.unsynced);
        for (s, f) in segs {
            let from = unsynced.entry(*s).or_insert(*f);
            *from = (*from).min(*f);
        }
    }

    /// A handle on segment `seg` for reading.
    fn handle(&self, seg: u32) -> Result<Arc<File>, ReadError> {
        {
            let w = lock(&self.writer);
            if w.seg == seg {
                return Ok(Arc::clone(&w.file));
            }
        }
        if let Some(f) = lock(&self.readers).get(&seg) {
            return Ok(Arc::clone(f));
        }
        let path = self.dir.join(segment_name(seg));
        let f = match File::open(&path) {
            Ok(f) => Arc::new(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadError::Gone),
            Err(e) => return Err(ReadError::Io(io_err("open pack segment", &path)(e))),
        };
        let mut readers = lock(&self.readers);
        if readers.len() >= MAX_READERS {
            readers.clear();
        }
        readers.insert(seg, Arc::clone(&f));
        Ok(f)
    }

    /// Reads and checks the record at `loc`.
    pub fn read(&self, loc: &Loc) -> Result<Record, ReadError> {
        let mut buf = vec![0u8; loc.len as usize];
        match self.read_bytes(loc.seg, loc.off, &mut buf)? {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(ReadError::Invalid(Damage::SegmentEnds))
            }
            Err(e) => {
                return Err(ReadError::Io(io_err(
                    "read pack segment",
                    &self.dir.join(segment_name(loc.seg)),
                )(e)))
            }
        }
        decode(&buf).map_err(ReadError::Invalid)
    }

    /// Bytes `off .. off + buf.len()` of segment `seg`, from the
    /// write-behind buffer when they are still there, else from the file.
    fn read_bytes(&self, seg: u32, off: u64, buf: &mut [u8]) -> Result<io::Result<()>, ReadError> {
        let f = {
            let w = lock(&self.writer);
            if w.seg == seg {
                if w.read_pending(off, buf) {
                    return Ok(Ok(()));
                }
                Some(Arc::clone(&w.file))
            } else {
                None
            }
        };
        let f = match f {
            Some(f) => f,
            None => self.handle(seg)?,
        };
        Ok(read_exact_at(&f, buf, off))
    }

    /// Reads the record starting at `pos` without knowing its length
    /// (walking a segment). `Ok(None)` at the segment's end (`seg_len`).
    pub fn read_at(&self, pos: Pos, seg_len: u64) -> Result<Option<(Record, Loc)>, ReadError> {
        if pos.off >= seg_len {
            return Ok(None);
        }
        let mut head = [0u8; 8];
        if pos.off + 8 > seg_len || self.read_bytes(pos.seg, pos.off, &mut head)?.is_err() {
            return Err(ReadError::Invalid(Damage::PartialHeader));
        }
        let total = announced_len(&head).ok_or(ReadError::Invalid(Damage::NoHeader))?;
        if total > MAX_RECORD || pos.off + total > seg_len {
            return Err(ReadError::Invalid(Damage::PastSegmentEnd));
        }
        let loc = Loc { seg: pos.seg, off: pos.off, len: total as u32 };
        Ok(Some((self.read(&loc)?, loc)))
    }

    /// The length of segment `seg` (the writer's length for the active one);
    /// `None` when it does not exist.
    pub fn seg_len(&self, seg: u32) -> Option<u64> {
        {
            let w = lock(&self.writer);
            if w.seg == seg {
                return Some(w.len);
            }
        }
        fs::metadata(self.dir.join(segment_name(seg))).ok().map(|m| m.len())
    }

    /// The first segment after `seg` that exists (up to the active one).
    pub fn next_seg(&self, seg: u32) -> Option<u32> {
        let head = self.head_seg();
        (seg + 1..=head).find(|s| self.seg_len(*s).is_some())
    }

    /// Deletes every sealed segment numbered below `seg` (the log's tail
    /// has passed them). Returns how many went. Errors: `Io`.
    pub fn delete_before(&self, seg: u32) -> Result<u64, StoreError> {
        let head = self.head_seg();
        let (segs, _) = list_segments(&self.dir)?;
        let mut n = 0;
        for (s, len) in segs.into_iter().filter(|(s, _)| *s < seg && *s < head) {
            let p = self.dir.join(segment_name(s));
            match fs::remove_file(&p) {
                Ok(()) => {
                    n += 1;
                    self.bytes
                        .fetch_sub(len.min(self.bytes.load(Ordering::Acquire)), Ordering::AcqRel);
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove pack segment", &p)(e)),
            }
            remove_hints(&self.dir, s)?;
            lock(&self.readers).remove(&s);
            lock(&self.unsynced).remove(&s);
        }
        Ok(n)
    }

    /// Seals the segment being appended to, if it holds anything, so that
    /// the log's tail can pass every record written so far (a full
    /// compaction). Errors: `Io` when the records pending cannot be written
    /// or the new segment cannot be created.
    pub fn roll(&self) -> Result<(), StoreError> {
        let mut w = lock(&self.writer);
        if w.len == 0 {
            return Ok(());
        }
        self.start_segment(&mut w)
    }

    /// Writes the records pending for the segment of `w` to it and starts
    /// the next segment (the writer's lock held).
    fn start_segment(&self, w: &mut Writer) -> Result<(), StoreError> {
        w.flush().map_err(|e| {
            io_err("append to pack segment", &self.dir.join(segment_name(w.seg)))(e)
        })?;
        let seg = w.seg + 1;
        let path = self.dir.join(segment_name(seg));
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(io_err("create pack segment", &path))?;
        lock(&self.unsynced).entry(w.seg).or_insert(0);
        // Its name reaches the disk with the next sync.
        self.dir_unsynced.store(true, Ordering::Release);
        *w = Writer::new(seg, Arc::new(file), 0);
        Ok(())
    }

    /// Bytes in all segments.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }
}

impl Drop for Packs {
    /// The records still in memory go to their file (not synced: a clean
    /// shutdown's last group commit syncs them; this is the fallback).
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!(error = %e, "cannot write the last pack records at close");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment_files::parse_segment_name;

    /// Encodes a record with `stamp`.
    fn encode(stamp: u64, key: &[u8], meta: &[u8], body: &RecBody) -> Vec<u8> {
        let mut out = Vec::new();
        encode_into(&mut out, stamp, key, meta, body);
        out
    }

    #[cfg(target_os = "linux")]
    use crate::fsops::page_test::{pages_can_be_dropped, resident_pages};

    #[test]
    fn records_round_trip_and_damage_is_detected_not_panicked_on() {
        let bytes = Arc::new(b"inline body".to_vec());
        let hash: Hash = Sha256::digest(bytes.as_slice()).into();
        let body = RecBody::Inline { hash, bytes };
        let rec = encode(42, b"key", b"meta", &body);
        let d = decode(&rec).unwrap();
        assert_eq!((d.stamp, d.key.as_slice(), d.meta.as_slice()), (42, &b"key"[..], &b"meta"[..]));
        assert_eq!(d.body, body);
        assert!(inline_intact(&d.body));
        let file = encode(7, b"k", b"", &RecBody::Ref { hash: [9; 32], len: 1 << 40 });
        assert_eq!(decode(&file).unwrap().body, RecBody::Ref { hash: [9; 32], len: 1 << 40 });
        let shared_bytes = Arc::new(b"shared".to_vec());
        let shared = RecBody::Shared {
            hash: Sha256::digest(shared_bytes.as_slice()).into(),
            bytes: shared_bytes,
        };
        let d = decode(&encode(8, b"", b"", &shared)).unwrap();
        assert_eq!((d.key.len(), d.meta.len(), &d.body), (0, 0, &shared));
        assert!(inline_intact(&d.body));
        assert!(decode(&encode(8, b"k", b"", &shared)).is_err(), "a shared body record has no key");
        for cut in [0, 3, 8, 63, rec.len() - 1] {
            assert!(decode(&rec[..cut]).is_err(), "cut at {cut}");
        }
        for i in [0, 2, 5, 12, 20, 40, 70, rec.len() - 2] {
            let mut bad = rec.clone();
            bad[i] ^= 0x40;
            assert!(decode(&bad).is_err(), "flipped byte {i}");
        }
    }

    #[test]
    fn appends_roll_segments_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let packs = Packs::open(dir.path()).unwrap();
        let stamps = AtomicU64::new(1);
        let (s1, l1) = packs.append(&stamps, b"a", b"m", &RecBody::None).unwrap();
        let (s2, l2) = packs.append(&stamps, b"b", b"mm", &RecBody::None).unwrap();
        assert!(s2 > s1 && l2.off == l1.off + l1.len as u64);
        assert_eq!(packs.read(&l2).unwrap().key, b"b");
        let (rec, loc) = packs
            .read_at(Pos { seg: l1.seg, off: 0 }, packs.seg_len(l1.seg).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!((rec.key.as_slice(), loc), (&b"a"[..], l1));
        assert!(packs.read(&Loc { seg: 99, off: 0, len: 70 }).is_err());
        assert_eq!(parse_segment_name(&segment_name(12)), Some(12));
        assert_eq!(parse_segment_name("12.pack"), None);
    }

    #[test]
    fn records_are_readable_while_pending_and_reach_the_file_by_sync_or_close() {
        let dir = tempfile::tempdir().unwrap();
        let stamps = AtomicU64::new(1);
        let seg_file = |seg: u32| std::fs::read(dir.path().join(segment_name(seg))).unwrap();
        let packs = Packs::open(dir.path()).unwrap();
        let body = Arc::new(vec![7u8; 3000]);
        let hash: Hash = Sha256::digest(body.as_slice()).into();
        let (_, l1) = packs
            .append(&stamps, b"k1", b"m1", &RecBody::Inline { hash, bytes: body.clone() })
            .unwrap();
        let (_, l2) = packs.append(&stamps, b"k2", b"m2", &RecBody::None).unwrap();
        // Not written yet, but readable, by location and by walking.
        assert_eq!(seg_file(l1.seg).len(), 0);
        assert_eq!(packs.read(&l1).unwrap().body, RecBody::Inline { hash, bytes: body.clone() });
        let (rec, loc) = packs
            .read_at(Pos { seg: l2.seg, off: l2.off }, packs.seg_len(l2.seg).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!((rec.key.as_slice(), loc), (&b"k2"[..], l2));
        // A sync writes them, whole and in order.
        packs.sync().unwrap();
        let on_disk = seg_file(l1.seg);
        assert_eq!(on_disk.len() as u64, l2.off + l2.len as u64);
        assert_eq!(
            decode(&on_disk[l1.off as usize..(l1.off + l1.len as u64) as usize]).unwrap().key,
            b"k1"
        );
        // Past the flush threshold the appender writes them itself.
        let big = Arc::new(vec![1u8; PENDING_FLUSH]);
        let big_hash: Hash = Sha256::digest(big.as_slice()).into();
        let (_, l3) = packs
            .append(&stamps, b"k3", b"", &RecBody::Inline { hash: big_hash, bytes: big })
            .unwrap();
        let (_, l4) = packs.append(&stamps, b"k4", b"", &RecBody::None).unwrap();
        assert_eq!(
            seg_file(l3.seg).len() as u64,
            l3.off + l3.len as u64,
            "the first append past the threshold wrote what was pending"
        );
        // Closing writes the rest (a clean shutdown).
        drop(packs);
        assert_eq!(seg_file(l4.seg).len() as u64, l4.off + l4.len as u64);
        let packs = Packs::open(dir.path()).unwrap();
        assert_eq!(packs.read(&l4).unwrap().key, b"k4");
    }

    #[cfg(unix)]
    #[test]
    fn a_failed_write_keeps_the_records_in_order_and_a_later_one_writes_them() {
        let dir = tempfile::tempdir().unwrap();
        let stamps = AtomicU64::new(1);
        let packs = Packs::open(dir.path()).unwrap();
        let big = Arc::new(vec![3u8; PENDING_FLUSH]);
        let hash: Hash = Sha256::digest(big.as_slice()).into();
        let (_, l1) = packs
            .append(&stamps, b"k1", b"m", &RecBody::Inline { hash, bytes: big.clone() })
            .unwrap();
        // The segment's handle cannot write (as with EIO or a full disk).
        let path = dir.path().join(segment_name(l1.seg));
        let writable =
            std::mem::replace(&mut lock(&packs.writer).file, Arc::new(File::open(&path).unwrap()));
        assert!(packs.sync().is_err());
        // Appends go on meanwhile (this one's write past the threshold
        // fails too), and every record stays readable.
        let (_, l2) = packs.append(&stamps, b"k2", b"m", &RecBody::None).unwrap();
        assert_eq!(packs.read(&l1).unwrap().key, b"k1");
        assert_eq!(packs.read(&l2).unwrap().key, b"k2");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        // Once writes work again, the next sync writes both, in order.
        lock(&packs.writer).file = writable;
        packs.sync().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(on_disk.len() as u64, l2.off + l2.len as u64);
        assert_eq!(
            decode(&on_disk[l1.off as usize..(l1.off + l1.len as u64) as usize]).unwrap().body,
            RecBody::Inline { hash, bytes: big }
        );
        assert_eq!(decode(&on_disk[l2.off as usize..]).unwrap().key, b"k2");
    }

    #[test]
    fn threads_appending_and_syncing_at_once_leave_every_record_whole_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let stamps = AtomicU64::new(1);
        let packs = Packs::open(dir.path()).unwrap();
        let locs = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let (packs, stamps, locs) = (&packs, &stamps, &locs);
                s.spawn(move || {
                    for i in 0..300u32 {
                        let bytes = Arc::new(vec![t; 1000 + (i as usize * 37) % 20_000]);
                        let hash: Hash = Sha256::digest(bytes.as_slice()).into();
                        let key = format!("{t}-{i}").into_bytes();
                        let (_, loc) = packs
                            .append(stamps, &key, b"m", &RecBody::Inline { hash, bytes })
                            .unwrap();
                        // Readable at once, pending or in the file.
                        assert_eq!(packs.read(&loc).unwrap().key, key);
                        if i % 50 == 0 {
                            packs.sync().unwrap();
                        }
                        lock(locs).push((key, loc));
                    }
                });
            }
        });
        packs.sync().unwrap();
        drop(packs);
        let packs = Packs::open(dir.path()).unwrap();
        let locs = locs.into_inner().unwrap();
        assert_eq!(locs.len(), 1200);
        for (key, loc) in locs {
            assert_eq!(packs.read(&loc).unwrap().key, key, "record at {loc:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn what_a_sync_wrote_leaves_the_page_cache_unless_kept() {
        let dir = tempfile::tempdir().unwrap();
        if !pages_can_be_dropped(dir.path()) {
            eprintln!("skipped: this file system keeps pages after POSIX_FADV_DONTNEED");
            return;
        }
        let body = Arc::new(vec![5u8; 16 * 1024]);
        let hash: Hash = Sha256::digest(body.as_slice()).into();
        for keep in [false, true] {
            let packs_dir = dir.path().join(format!("keep-{keep}"));
            let packs = Packs::open(&packs_dir).unwrap().keeping_written_pages(keep);
            let stamps = AtomicU64::new(1);
            let mut locs = Vec::new();
            for round in 0..3 {
                for i in 0..40 {
                    let key = format!("k{round}-{i}");
                    let (_, loc) = packs
                        .append(
                            &stamps,
                            key.as_bytes(),
                            b"m",
                            &RecBody::Inline { hash, bytes: body.clone() },
                        )
                        .unwrap();
                    locs.push(loc);
                }
                packs.sync().unwrap();
                // Segments roll at 1 MiB in tests, so count every segment:
                // a segment left behind by a roll is dropped whole.
                let (mut resident, mut pages) = (0, 0);
                for entry in std::fs::read_dir(&packs_dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .and_then(parse_segment_name)
                        .is_some()
                    {
                        let (r, p) = resident_pages(&path);
                        (resident, pages) = (resident + r, pages + p);
                    }
                }
                assert!(pages >= 160 * (round + 1), "{pages} pages after round {round}");
                if keep {
                    assert_eq!(resident, pages, "kept: every written page stays cached");
                } else {
                    // Only the page the last record ends in may stay (it is
                    // not whole yet); the next sync drops it.
                    assert!(
                        resident <= 1,
                        "{resident} of {pages} pages still cached after round {round}"
                    );
                }
            }
            // Dropped pages are read back from the disk.
            for loc in [locs[0], locs[locs.len() / 2], locs[locs.len() - 1]] {
                assert_eq!(
                    packs.read(&loc).unwrap().body,
                    RecBody::Inline { hash, bytes: body.clone() }
                );
            }
        }
    }
}
