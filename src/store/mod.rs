//! The body store and its metadata index (SPEC section 3), store format 4.
//!
//! Every body is named by its SHA-256 and stored once, whatever its size,
//! however many entries reference it; a body's bytes are given back only
//! when its last reference goes.
//!
//! Where things live (under the store directory):
//! - `packs/NNNNNNNN.pack`: append-only segments with one record per
//!   stored version of an entry: its key, its metadata (the stored response
//!   head) and its body — inline for a body shorter than `inline_max` bytes
//!   (32 KiB in the default configuration) that no other entry has, else a
//!   reference by SHA-256 — plus one shared body record per short body that
//!   several entries reference (`packs.rs`); beside each segment its hints,
//!   the inline bodies it holds by hash (`hints.rs`);
//! - `bodies/ab/cd/abcd...`: one content-addressed file per distinct larger
//!   body, named by the lower-case hex SHA-256 of its bytes and shared by
//!   every entry with that body (reference counted) (`blobs.rs`);
//! - `index/`: sled, one tree mapping each entry key to its current record
//!   (a few bytes per entry), plus reference counts of body files and of
//!   shared short bodies, the store's totals and the commit checkpoint
//!   (`index.rs`, which also says how a body goes from inline to shared);
//! - `format`: the store format number (`format.rs`); `tmp/`: bodies being
//!   written.
//!
//! Finding a stored short body by its hash without reading the disk on
//! every miss: a Bloom filter of the fingerprints of every stored short
//! body (the filter of stored bodies, sized from `store.memory_ceiling`,
//! `presence.rs`) answers "certainly not stored" for a new body, which then
//! goes inline into its entry's record; only a "maybe" (a body seen before,
//! or about 1 % of new ones) looks at the reference-count rows, the hints
//! and the record a hint names.
//!
//! The store knows nothing about HTTP: an entry is addressed by a primary key
//! (a string chosen by the cache layer) and a secondary key (bytes chosen by
//! the cache layer from `Vary`), and carries opaque metadata bytes plus a
//! reference to at most one body.
//!
//! Miss path: [`BodyWriter`] keeps a short body in memory, or streams a long
//! one into `tmp/` and renames it into place; [`Store::insert`] appends the
//! entry's record to the pack and puts its index row in the in-memory
//! overlay. Nothing on it waits for the disk: no fsync, no sled write. The
//! background committer (`maintenance.rs`, "Group commit") syncs what was
//! written every [`COMMIT_INTERVAL`], then writes the overlay to sled in one
//! batch with a checkpoint; a crash loses at most the changes made since the
//! last commit, and never leaves an entry pointing at a torn body (every
//! record carries a CRC, every body its SHA-256, and start-up re-checks
//! what was written after the checkpoint).
//!
//! Life cycle of a body file, and why a committed entry never points at a
//! deleted file:
//! 1. [`BodyWriter::finish`] renames the file into place (or finds it there)
//!    under the lock stripe of its hash and *pins* it in memory.
//! 2. [`Store::insert`] writes the entry, the reference count and the totals
//!    together (one overlay change, one sled batch at the commit), then
//!    drops the pin.
//! 3. A change that drops a count to zero only queues the hash. The queue is
//!    reaped by the background thread (promptly, or at the latest within a
//!    second; [`Store::flush`] and close reap too): under the stripe locks,
//!    hashes that are still unreferenced and unpinned are deleted, after a
//!    commit made the zero count durable.
//!
//! LRU and budget: `max_size` bounds the bytes of bodies (inline and files;
//! metadata and the index are not counted). When an insert goes over it,
//! the records at the log's tail are examined in the order they were
//! written: an entry used since its record was written (a hit, a
//! freshening) gets a second chance (its record is copied to the head of
//! the log), any other is evicted. This CLOCK approximation of LRU keeps no
//! per-entry structure in memory; a hit only records a stamp in memory
//! ([`Store::touch`]), written in batches by the background thread. The
//! same tail walk copies live records forward to reclaim the space of dead
//! ones when the pack holds more dead bytes than live (`budget.rs`).
//! A body larger than the whole budget is refused with
//! [`StoreError::TooLarge`] (already while it is written).
//!
//! Memory: the sled cache is sized from [`StoreOptions::index_cache`]; pending
//! touches are bounded ([`TOUCH_BATCH`]); nothing else grows with the number
//! of entries.
//!
//! Files: this one holds the types and the public API; `packs.rs` the pack
//! segments; `blobs.rs` the body files and their pins; `index.rs` the sled
//! rows; `budget.rs` touches, eviction and compaction; `maintenance.rs` the
//! group commit, crash recovery, the background thread and the close;
//! `verify.rs` the invariant check; `format.rs` and `migrate.rs` the format
//! number and the migration of older stores (`legacy.rs` reads them).

mod blobs;
mod budget;
pub mod format;
mod hints;
mod index;
mod presence;
mod legacy;
mod maintenance;
mod migrate;
mod packs;
mod record_cache;
mod verify;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};

pub use blobs::BodyWriter;
pub use budget::TOUCH_BATCH;
pub use maintenance::COMMIT_INTERVAL;
pub use verify::VerifyReport;
use blobs::{io_err, Blobs};
use index::{entry_key, parse_hash, primary_prefix, sled_err, split_entry_key, Hash, Index, Op, Place, Slot, SlotBody};
use maintenance::Closer;
use packs::{Loc, Packs, ReadError, RecBody, Record};

/// Errors from the store. Every variant names what failed; none of them is
/// ever turned into a panic.
#[derive(Debug)]
pub enum StoreError {
    /// A file system operation failed (`what` says which, e.g. "create tmp file").
    Io { what: String, source: std::io::Error },
    /// The sled index failed or holds a record that cannot be decoded.
    Index(String),
    /// The body named by an entry is missing from the store.
    MissingBody(String),
    /// A body of `len` bytes (or more) exceeds the whole budget of
    /// `max_size` bytes; it is not stored and nothing else was evicted.
    TooLarge { len: u64, max_size: u64 },
    /// Another process (a running crawlcache) holds the index of `dir`.
    InUse { dir: PathBuf },
    /// The data directory holds a store format this code does not read;
    /// the message says what to do.
    Format(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Io { what, source } => write!(f, "{what}: {source}"),
            StoreError::Index(m) => write!(f, "cache index: {m}"),
            StoreError::MissingBody(h) => write!(f, "body {h} is missing from the store"),
            StoreError::TooLarge { len, max_size } => write!(
                f,
                "body of {len} bytes exceeds the whole cache budget of {max_size} bytes; not stored \
                 (raise the cache's maximum size to keep bodies this large)"
            ),
            StoreError::InUse { dir } => write!(
                f,
                "the data directory {} is in use by a running crawlcache (its index is locked); \
                 stop that process first, or give this one another data directory",
                dir.display()
            ),
            StoreError::Format(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A complete body that has been hashed (and, if it is a file, renamed into
/// place; it is synced by the next group commit).
/// Returned by [`BodyWriter::finish`]; handed to [`Store::insert`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedBody {
    /// Lower-case hex SHA-256 of the body bytes.
    pub sha256: String,
    /// Length of the body in bytes.
    pub len: u64,
}

/// One stored variant as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The primary key this entry is stored under.
    pub primary_key: String,
    /// The secondary key (empty for responses without `Vary`).
    pub secondary_key: Vec<u8>,
    /// Opaque metadata written by the cache layer (serialized response head).
    pub meta: Vec<u8>,
    /// The body, if the entry has one (a stored 304-less HEAD has none).
    pub body: Option<CommittedBody>,
    /// LRU stamp: larger means more recently used. A hybrid clock: the time
    /// of the last use (insert, hit, freshening) in microseconds since the
    /// Unix epoch, raised when needed to stay unique and increasing (see
    /// [`Entry::last_used_at`]).
    pub last_used: u64,
}

/// See [`Store::lookup_version`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupVersion {
    store: u64,
    generation: u64,
    freshenings: u64,
}

/// Stamps below this (2001-01-01T00:00:00Z in microseconds) are not clock
/// readings: a store written by a release whose stamps were a plain counter.
const CLOCK_STAMPS_FROM: u64 = 978_307_200_000_000;

/// `t` in microseconds since the Unix epoch (0 before it).
pub(crate) fn clock_micros(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Issues a stamp from `counter` (which holds the next stamp): the current
/// time in microseconds since the Unix epoch, or the previous stamp + 1 when
/// that is larger (a clock that stood still or went back). Stamps are
/// unique and increasing and also say when they were issued
/// ([`Entry::last_used_at`]); the counter ends one past the stamp returned.
pub(crate) fn issue_stamp(counter: &AtomicU64) -> u64 {
    let now = clock_micros(std::time::SystemTime::now());
    match counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.max(now).saturating_add(1))) {
        Ok(prev) | Err(prev) => prev.max(now),
    }
}

impl Entry {
    /// When the entry was last used (stored, served, freshened by a 304),
    /// read from its stamp; `None` for a stamp written by a release whose
    /// stamps were not clock readings (that entry has not been used since
    /// the upgrade). A stamp can run ahead of the clock by at most one
    /// microsecond per use made within the same microsecond, so this is
    /// never much earlier than the real time of the last use.
    pub fn last_used_at(&self) -> Option<std::time::SystemTime> {
        (self.last_used >= CLOCK_STAMPS_FROM).then(|| std::time::UNIX_EPOCH + std::time::Duration::from_micros(self.last_used))
    }
}

/// The entries of the index one at a time, in index order, from
/// [`Store::scan`]. Each item is decoded when it is reached (with a pending
/// touch or freshening laid over it, like [`Store::lookup`]), so a scan of
/// any size holds one entry at a time. The scan sees the index as it is when
/// each item is read: entries inserted or removed meanwhile may or may not
/// appear. Undecodable rows are skipped with a warning.
pub struct Scan {
    rows: sled::Iter,
    prefix: Vec<u8>,
    store: Store,
    /// An error met before the first row (moving the in-memory changes
    /// into sled), reported as the first item.
    failed: Option<StoreError>,
}

impl Iterator for Scan {
    type Item = Result<Entry, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        loop {
            let (k, v) = match self.rows.next()? {
                Ok(row) => row,
                Err(e) => return Some(Err(sled_err(e))),
            };
            if !self.prefix.is_empty() && !index::primary_key_bytes(&k).is_some_and(|pk| pk.starts_with(&self.prefix)) {
                continue;
            }
            match self.store.inner.read_entry(&k, &v) {
                Ok(Some(mut e)) => {
                    self.store.inner.overlay_pending(std::slice::from_mut(&mut e));
                    return Some(Ok(e));
                }
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// A stored body opened for reading ([`Store::read_body`]).
#[derive(Debug)]
pub enum BodyData {
    /// A body file, at its start; read [`CommittedBody::len`] bytes.
    File(std::fs::File),
    /// A short body, read whole from its pack record (already checked
    /// against its CRC).
    Bytes(Vec<u8>),
}

impl BodyData {
    /// A reader (with seeking) over the body, for callers that stream it
    /// (`cache cat`, WARC export) whatever its kind.
    pub fn into_reader(self) -> BodyReader {
        match self {
            BodyData::File(f) => BodyReader::File(f),
            BodyData::Bytes(b) => BodyReader::Bytes(std::io::Cursor::new(b)),
        }
    }
}

/// A stored body as a `Read + Seek` ([`BodyData::into_reader`]).
#[derive(Debug)]
pub enum BodyReader {
    /// A body file.
    File(std::fs::File),
    /// A short body's bytes.
    Bytes(std::io::Cursor<Vec<u8>>),
}

impl std::io::Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            BodyReader::File(f) => f.read(buf),
            BodyReader::Bytes(c) => c.read(buf),
        }
    }
}

impl std::io::Seek for BodyReader {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        match self {
            BodyReader::File(f) => f.seek(pos),
            BodyReader::Bytes(c) => c.seek(pos),
        }
    }
}

/// Counters reported by [`Store::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Number of entries (variants) in the index.
    pub entries: u64,
    /// Number of distinct bodies (each stored once, however many entries
    /// reference it).
    pub bodies: u64,
    /// Bytes of those distinct bodies, each counted once (what the budget
    /// bounds, and what the bodies take on disk before file-system blocks
    /// and pack framing).
    pub bytes_stored: u64,
    /// Bytes of the bodies of every entry, a body counted once for each
    /// entry that references it (what the entries would take unshared;
    /// `bytes_referenced - bytes_stored` is what sharing saves).
    pub bytes_referenced: u64,
    /// The configured budget in bytes.
    pub max_size: u64,
    /// Entries evicted by the LRU budget since the store was opened.
    pub evictions: u64,
    /// Bytes of the pack segments on disk (records of entries, live and
    /// not yet reclaimed).
    pub pack_bytes: u64,
}

/// How to open a store ([`Store::open_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Budget for bodies, in bytes (`cache.max_size`).
    pub max_size: u64,
    /// Bodies shorter than this many bytes live in their entry's pack
    /// record instead of a file of their own (`store.inline_max_bytes`).
    pub inline_max: u64,
    /// Bytes of memory sled may use for its page cache (derived from
    /// `store.memory_ceiling`).
    pub index_cache: u64,
    /// Bytes of recently read pack records kept in memory (entry heads and
    /// short bodies; derived from `store.memory_ceiling`). Recent lookups
    /// are kept in half as many bytes again.
    pub record_cache: u64,
    /// Leave the pages of pack records and body files in the kernel's page
    /// cache after the group commit has synced them
    /// (`store.keep_written_pages`); `false` drops them.
    pub keep_written_pages: bool,
}

impl StoreOptions {
    /// The store's own defaults (inline bodies under 4 KiB, an 8 MiB index
    /// cache, 16 MiB of cached records, written pages dropped) with a budget of `max_size` bytes,
    /// for tools and tests that open a store directly. The proxy and the
    /// `cache` commands take theirs from the configuration
    /// (`Config::store_options`: inline bodies under 32 KiB by default).
    pub fn new(max_size: u64) -> StoreOptions {
        StoreOptions { max_size, inline_max: 4096, index_cache: 8 << 20, record_cache: 16 << 20, keep_written_pages: false }
    }
}

/// Packed bodies recently seen, by hash, and where (an entry record holding
/// it inline, or its shared body record): lets [`Store::open_body`],
/// [`Store::read_body`] and [`Store::insert`] find a packed body from its
/// hash without reading the index.
const RECENT_PACKED: usize = 65536;

/// What removing entries did ([`Store::remove_variant_freeing`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removal {
    /// Entries removed.
    pub entries: u64,
    /// Bytes of bodies whose last reference went with them (given back);
    /// a body other entries still reference frees nothing.
    pub freed: u64,
}

/// What [`Store::compact`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Compaction {
    /// Bytes of pack segments before.
    pub pack_bytes_before: u64,
    /// Bytes of pack segments after.
    pub pack_bytes_after: u64,
    /// Live records copied forward.
    pub records_moved: u64,
}

/// A build of the filter of stored bodies in progress
/// ([`Inner::build_body_filter_step`]).
pub(crate) struct BodyFilterBuild {
    fresh: presence::Building,
    /// The segments whose hints go in, and the next one.
    segments: Vec<u32>,
    next: usize,
    /// The last reference-count row added (`None`: from the first).
    refs_after: Option<Vec<u8>>,
}

/// How a new entry record is to carry its body (see `index.rs`, "How a
/// body is kept").
enum Plan {
    /// No body.
    None,
    /// The bytes in the entry's own record: no stored entry has them.
    Owner { hash: Hash, bytes: Arc<Vec<u8>> },
    /// A reference to a body with a reference-count row, or with `create`
    /// a body that gets its first (a body file).
    Ref { hash: Hash, len: u64, create: Option<Place>, bytes: Option<Arc<Vec<u8>>> },
    /// The bytes are the inline body of the entry `owner` (its record at
    /// `owner_loc`): both come to share them.
    Share { hash: Hash, bytes: Arc<Vec<u8>>, owner: Vec<u8>, owner_loc: Loc },
}

/// When this process last closed a store, by directory: sled releases its
/// lock on the index from background threads that may outlive the close by
/// a moment, so an open right after a close in the same process waits for
/// them (bounded by [`REOPEN_WAIT`]) instead of reporting `InUse`.
static CLOSED: Mutex<Vec<(PathBuf, std::time::Instant)>> = Mutex::new(Vec::new());
/// How long an open waits for the lock of a store this process just closed.
const REOPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// sled's segment size (bytes) for an index created from now on. sled
/// writes its log in segments of this size and rewrites a segment once at
/// most half of it is live; larger segments left less of the log as garbage
/// when benches/scale.sh filled a million entries (index bytes per entry
/// at 1,000,000: 296-300 with sled's default of 512 KiB, 256-271 with 2-4
/// MiB, 210-218 with 8 MiB), at the price of one segment-sized write buffer
/// in memory and a larger index while the store is small (336-378 bytes per
/// entry at 100,000 with 4 MiB, against 309-320). sled refuses to open an
/// index with a segment size other than the one it was created with, so an
/// existing index keeps its own ([`index_segment_size`]).
const INDEX_SEGMENT_SIZE: usize = 4 << 20;

/// sled's own default segment size (bytes): every index created before
/// [`INDEX_SEGMENT_SIZE`] was set has it.
const SLED_DEFAULT_SEGMENT_SIZE: usize = 512 << 10;

/// The segment size (bytes) to open the sled index in `index_dir` with: the
/// one its `conf` file records (sled writes it when it creates the index),
/// sled's default when that file cannot be read or names none (an index
/// from before [`INDEX_SEGMENT_SIZE`]), [`INDEX_SEGMENT_SIZE`] for a new
/// index (no `conf` file yet).
fn index_segment_size(index_dir: &Path) -> usize {
    match fs::read(index_dir.join("conf")) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => INDEX_SEGMENT_SIZE,
        Err(_) => SLED_DEFAULT_SEGMENT_SIZE,
        Ok(conf) => String::from_utf8_lossy(&conf)
            .lines()
            .find_map(|l| l.strip_prefix("segment_size:").and_then(|v| v.trim().parse::<usize>().ok()))
            .filter(|n| n.is_power_of_two())
            .unwrap_or(SLED_DEFAULT_SEGMENT_SIZE),
    }
}

/// The file in the data directory that keeps one index segment's worth of
/// disk space set aside ([`open_index`]).
pub(crate) const INDEX_RESERVE: &str = "index.reserve";

/// Sets aside `len` bytes of disk in `path` (allocated, not a sparse
/// file), unless the file is already that long. On failure (a full disk)
/// the partial file is removed and a warning logged: the next open on a
/// full disk may then fail until space is freed.
fn keep_index_reserve(path: &Path, len: u64) {
    if fs::metadata(path).is_ok_and(|m| m.len() == len) {
        return;
    }
    let made = fs::OpenOptions::new().create(true).write(true).truncate(false).open(path).and_then(|f| {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let len = libc::off_t::try_from(len).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
            // SAFETY: `f` is an open descriptor for the whole call.
            match unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len) } {
                0 => Ok(()),
                e => Err(std::io::Error::from_raw_os_error(e)),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            use std::io::Write as _;
            let mut f = f;
            f.write_all(&vec![0u8; len as usize])
        }
    });
    if let Err(e) = made {
        let _ = fs::remove_file(path);
        tracing::warn!(path = %path.display(), error = %e, "cannot set aside disk space for the cache index; opening the cache on a full disk may fail until space is freed");
    }
}

/// Opens the sled index of the store in `dir` with a page cache of
/// `cache` bytes. Errors: `InUse` when another process holds it, `Index`.
///
/// sled pads the log segment it was writing to its end when it opens an
/// index, so an open needs up to one segment of free disk
/// ([`INDEX_SEGMENT_SIZE`]; measured on a full 50 MiB tmpfs: an index of
/// 512 KiB segments opened with 888 KiB free, one of 1 MiB did not). A
/// file of that size ([`INDEX_RESERVE`]) is kept beside the index; when
/// the open fails for want of space it is deleted and the open tried
/// again, and it is made again once the index is open and there is room.
fn open_index(dir: &Path, cache: u64) -> Result<sled::Db, StoreError> {
    let segment_size = index_segment_size(&dir.join("index"));
    let db = open_index_with_reserve(dir, cache, segment_size)?;
    keep_index_reserve(&dir.join(INDEX_RESERVE), segment_size as u64);
    Ok(db)
}

/// [`open_index`] with `segment_size` ([`index_segment_size`]), using the
/// reserve when the disk is full.
fn open_index_with_reserve(dir: &Path, cache: u64, segment_size: usize) -> Result<sled::Db, StoreError> {
    let closed_at = lock(&CLOSED).iter().find(|(d, _)| d == dir).map(|(_, t)| *t);
    let index_dir = dir.join("index");
    let conf = index_dir.join("conf");
    let new_index = !conf.exists();
    let mut released = false;
    loop {
        match sled::Config::new().path(&index_dir).cache_capacity(cache.max(1 << 20)).segment_size(segment_size).open() {
            Ok(db) => {
                if new_index {
                    // sled writes `conf` without syncing it, and an index whose
                    // `conf` is lost or empty would be opened with sled's
                    // default segment size (`index_segment_size`): made
                    // durable before anything is stored in the index.
                    fs::File::open(&conf).and_then(|f| f.sync_all()).map_err(io_err("sync", &conf))?;
                    blobs::sync_dir(&index_dir)?;
                }
                return Ok(db);
            }
            Err(sled::Error::Io(ref io)) if io.to_string().contains("could not acquire lock") => {
                if closed_at.is_some_and(|t| t.elapsed() < REOPEN_WAIT) {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
                return Err(StoreError::InUse { dir: dir.to_path_buf() });
            }
            Err(sled::Error::Io(ref io)) if io.raw_os_error() == Some(libc::ENOSPC) && !released && dir.join(INDEX_RESERVE).exists() => {
                tracing::warn!("the disk holding {} is full: using the space set aside for the cache index", dir.display());
                fs::remove_file(dir.join(INDEX_RESERVE)).map_err(io_err("remove", &dir.join(INDEX_RESERVE)))?;
                released = true;
            }
            Err(e) => return Err(StoreError::Index(format!("cannot open {}: {e}", dir.join("index").display()))),
        }
    }
}

/// Notes that this process closed the store in `dir` (see [`CLOSED`]).
pub(crate) fn note_closed(dir: &Path) {
    let mut closed = lock(&CLOSED);
    closed.retain(|(d, t)| d != dir && t.elapsed() < REOPEN_WAIT);
    closed.push((dir.to_path_buf(), std::time::Instant::now()));
}

pub(crate) use crate::locks::lock;

/// The shared state behind every [`Store`] clone and [`BodyWriter`].
pub(crate) struct Inner {
    dir: PathBuf,
    pub(crate) max_size: u64,
    pub(crate) inline_max: u64,
    /// `StoreOptions::keep_written_pages`.
    pub(crate) keep_written_pages: bool,
    pub(crate) index: Index,
    pub(crate) blobs: Blobs,
    pub(crate) packs: Packs,
    /// Touches and freshenings not yet written: entry key -> newest stamp
    /// and, after a freshening, the new metadata.
    pending: Mutex<HashMap<Vec<u8>, budget::Pending>>,
    /// Moves after each freshening is recorded in `pending` (see
    /// [`Store::lookup_version`]).
    pub(crate) freshenings: AtomicU64,
    /// This store's number in the process ([`Store::lookup_version`]).
    id: u64,
    pub(crate) next_stamp: AtomicU64,
    evictions: AtomicU64,
    /// Serialises walks of the log's tail (eviction, compaction).
    evict_lock: Mutex<()>,
    /// Held from appending a record to writing its index row, and by the
    /// tail walk while it judges a record: the tail never passes a record
    /// whose row is still to be written.
    log_lock: Mutex<()>,
    /// Hashes whose count reached zero; their files are deleted by `reap`.
    reap_queue: Mutex<HashSet<Hash>>,
    reap_lock: Mutex<()>,
    /// Shared by every mutation; taken exclusively by `verify`.
    pub(crate) maintenance: RwLock<()>,
    /// Wakes the background thread (`true`: work to do, `false`: stop).
    wake: Mutex<mpsc::Sender<bool>>,
    /// Set while a wake-up is queued, so hot paths send at most one.
    wake_queued: AtomicBool,
    /// Body files renamed into place but not yet synced (group commit).
    pub(crate) unsynced: Mutex<Vec<Hash>>,
    /// The last checkpoint stamp written: every record stamped below it is
    /// synced, with its body file.
    pub(crate) checkpointed: AtomicU64,
    /// Serialises commits.
    commit_lock: Mutex<()>,
    /// The log's tail as of the last commit (segments before it deleted).
    pub(crate) tail_committed: Mutex<packs::Pos>,
    /// The log's end at the last commit (`Pos::default()` before the first):
    /// with no record appended since, stamps issued by touches alone need
    /// no commit (they are written by `apply_touches`).
    pub(crate) end_committed: Mutex<packs::Pos>,
    /// Test support: commits do nothing (see [`Store::pause_commits_for_tests`]).
    pub(crate) commits_paused: AtomicBool,
    /// See [`RECENT_PACKED`].
    recent: Mutex<lru::LruCache<Hash, Loc>>,
    /// Pack records read recently, by location (`record_cache.rs`).
    records: Mutex<record_cache::RecordCache>,
    /// Recent lookups by primary key (`record_cache.rs`).
    lookups: Mutex<record_cache::LookupCache>,
    /// Where the pack's inline bodies are, by hash (`hints.rs`).
    pub(crate) hints: hints::Hints,
    /// The filter of stored short bodies: fingerprints of every inline
    /// body and every shared one ("certainly not stored" / "maybe").
    pub(crate) body_filter: presence::Presence,
}

/// Handle to an open store. Cheap to clone; all clones share one index.
/// The store closes (pending touches written, everything synced, index
/// flushed, clean-shutdown marker left) when the last clone and the last
/// [`BodyWriter`] are dropped.
#[derive(Clone)]
pub struct Store {
    // Declared first so it is dropped first: the background thread is
    // joined before the last reference to `inner` goes.
    _closer: Arc<Closer>,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.inner.dir).field("max_size", &self.inner.max_size).finish()
    }
}

impl Store {
    /// Opens (creating if needed) the store under `dir` with a budget of
    /// `max_size` bytes of bodies and the other [`StoreOptions`] at their
    /// defaults. See [`Store::open_with`].
    pub fn open(dir: &Path, max_size: u64) -> Result<Store, StoreError> {
        Self::open_with(dir, &StoreOptions::new(max_size))
    }

    /// Opens (creating if needed) the store under `dir`. A store written by
    /// an earlier release (format 1 or 2) is migrated first, with progress
    /// on stderr (`migrate.rs`). After an unclean shutdown, what the last
    /// group commit did not cover is checked and torn entries are dropped,
    /// leftovers swept (`maintenance.rs`). Then entries are evicted until
    /// the budget is met.
    /// Errors: `Io` when the directory cannot be created or a leftover cannot
    /// be removed, `InUse` when another process holds the index, `Index`
    /// when sled fails, `Format` for a store of an unknown format.
    pub fn open_with(dir: &Path, options: &StoreOptions) -> Result<Store, StoreError> {
        let blobs = Blobs::new(dir);
        fs::create_dir_all(dir).map_err(io_err("create store directory", dir))?;
        let found = format::check(dir)?;
        for d in [blobs.bodies.as_path(), blobs.tmp.as_path()] {
            fs::create_dir_all(d).map_err(io_err("create store directory", d))?;
        }
        let db = open_index(dir, options.index_cache)?;
        if let format::Found::Previous(v) = found {
            if v < 3 {
                migrate::run(dir, &db, &blobs, options.inline_max)?;
            }
        }
        if found != format::Found::New && migrate::unfinished(&db) {
            // A migration from format 1 or 2 that stopped after its
            // `format` file was written.
            migrate::finish(&db, &blobs)?;
        }
        // The filters of stored keys and of stored bodies: half the record
        // cache's size each (a thirty-second of `store.memory_ceiling`).
        let filter_bytes = usize::try_from(options.record_cache / 2).unwrap_or(usize::MAX);
        let index = Index::new(db, filter_bytes)?;
        let packs = Packs::open(&dir.join("packs"))?.keeping_written_pages(options.keep_written_pages);
        let mut recovered = maintenance::open_sweep(dir, &blobs, &index, &packs)?;
        if let format::Found::Previous(_) = found {
            // Format 3 (also what a format 1 or 2 store became above) kept
            // a copy of a short body in every entry that had it.
            recovered.next_stamp = migrate::merge_duplicates(dir, &index, &packs, recovered.next_stamp)?;
            format::write(dir)?;
        }
        let hints = hints::Hints::open(&packs, index.state().tail.seg)?;
        if found == format::Found::New {
            format::write(dir)?;
        }
        let (wake_tx, wake_rx) = mpsc::channel();
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            max_size: options.max_size,
            inline_max: options.inline_max,
            keep_written_pages: options.keep_written_pages,
            index,
            blobs,
            packs,
            pending: Mutex::new(HashMap::new()),
            freshenings: AtomicU64::new(0),
            id: {
                static STORES: AtomicU64 = AtomicU64::new(0);
                STORES.fetch_add(1, Ordering::Relaxed)
            },
            next_stamp: AtomicU64::new(recovered.next_stamp),
            evictions: AtomicU64::new(0),
            evict_lock: Mutex::new(()),
            log_lock: Mutex::new(()),
            reap_queue: Mutex::new(HashSet::new()),
            reap_lock: Mutex::new(()),
            maintenance: RwLock::new(()),
            wake: Mutex::new(wake_tx.clone()),
            wake_queued: AtomicBool::new(false),
            unsynced: Mutex::new(Vec::new()),
            checkpointed: AtomicU64::new(recovered.checkpoint),
            commit_lock: Mutex::new(()),
            tail_committed: Mutex::new(recovered.tail),
            end_committed: Mutex::new(packs::Pos::default()),
            commits_paused: AtomicBool::new(false),
            recent: Mutex::new(lru::LruCache::new(NonZeroUsize::new(RECENT_PACKED).unwrap_or(NonZeroUsize::MIN))),
            records: Mutex::new(record_cache::RecordCache::new(options.record_cache)),
            lookups: Mutex::new(record_cache::LookupCache::new(options.record_cache / 2)),
            hints,
            body_filter: presence::Presence::new(filter_bytes),
        });
        let thread = maintenance::spawn(Arc::downgrade(&inner), wake_rx)?;
        let store = Store { _closer: Arc::new(Closer { wake: wake_tx, thread: Some(thread) }), inner };
        // A crash between an insert and its eviction, or a smaller budget
        // than last time, leaves more bytes than the budget allows.
        let evicted = store.inner.evict_to_budget()?;
        if evicted > 0 {
            tracing::info!(evicted, max_size = options.max_size, "evicted entries to fit the size budget at start-up");
            store.inner.wake_if_reaping();
        }
        Ok(store)
    }

    /// The directory the store lives in.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Bodies shorter than this many bytes live in their entry's pack record.
    pub fn inline_max(&self) -> u64 {
        self.inner.inline_max
    }

    /// Starts writing a new body.
    /// Errors: `Io` when a temporary file cannot be created.
    pub fn begin_body(&self) -> Result<BodyWriter, StoreError> {
        BodyWriter::create(Arc::clone(&self.inner))
    }

    /// A value that differs whenever [`Store::lookup`] of `primary_key` may
    /// answer differently than when the value was read, except for the
    /// entries' `last_used` stamps: it combines this store's number in the
    /// process, the index generation covering `primary_key` (moved by every
    /// insert, removal, eviction or rewrite of its rows) and a counter of
    /// recorded freshenings (pending new metadata). Read it before the
    /// lookup: a caller that keeps a lookup's answer under the version it
    /// read first may use that answer while the version is unchanged.
    pub fn lookup_version(&self, primary_key: &str) -> LookupVersion {
        let inner = &self.inner;
        LookupVersion { store: inner.id, generation: inner.index.generation(primary_key), freshenings: inner.freshenings.load(Ordering::Acquire) }
    }

    /// All variants stored under `primary_key`, in no particular order.
    /// Undecodable or damaged records are skipped with a warning (`cache
    /// verify` reports them).
    /// Errors: `Index` when sled cannot be read, `Io` when a pack segment
    /// cannot be read.
    pub fn lookup(&self, primary_key: &str) -> Result<Vec<Entry>, StoreError> {
        let inner = &self.inner;
        // Read before the rows: a change after this moves it (`Index::generation`).
        let generation = inner.index.generation(primary_key);
        let cached = lock(&inner.lookups).get(primary_key, generation);
        let mut out = match cached {
            Some(found) => {
                let mut recent = None;
                let mut out = Vec::with_capacity(found.len());
                for (e, packed) in found.iter() {
                    if let Some((hash, loc)) = packed {
                        recent.get_or_insert_with(|| lock(&inner.recent)).put(*hash, *loc);
                    }
                    out.push(e.clone());
                }
                out
            }
            // Never stored (src/store/presence.rs): nothing to read.
            None if !inner.index.may_contain(primary_key) => Vec::new(),
            None => {
                let mut found = Vec::new();
                for (k, v) in inner.index.scan_prefix(&primary_prefix(primary_key))? {
                    if let Some(e) = inner.read_entry_located(&k, &v)? {
                        found.push(e);
                    }
                }
                let out = found.iter().map(|(e, _)| e.clone()).collect();
                lock(&inner.lookups).put(primary_key, generation, found.into());
                out
            }
        };
        inner.overlay_pending(&mut out);
        Ok(out)
    }

    /// The variant `(primary_key, secondary_key)`, as [`Store::lookup`]
    /// returns it, if stored: one index row read (no scan of the key's
    /// variants), then its record.
    /// Errors: as [`Store::lookup`].
    pub fn lookup_variant(&self, primary_key: &str, secondary_key: &[u8]) -> Result<Option<Entry>, StoreError> {
        let key = entry_key(primary_key, secondary_key);
        let Some(slot) = self.inner.index.get(&key)? else { return Ok(None) };
        let Some(e) = self.inner.read_entry(&key, &slot.encode())? else { return Ok(None) };
        let mut out = [e];
        self.inner.overlay_pending(&mut out);
        let [e] = out;
        Ok(Some(e))
    }

    /// Stores (or replaces) the variant `(primary_key, secondary_key)` with
    /// `meta` and `body`: appends its record to the pack, then writes its
    /// index row with the reference counts and totals it changes in one
    /// batch (a replaced body loses a reference; a body file whose count
    /// reaches zero is deleted). Then evicts entries until the bytes stored
    /// fit the budget. Returns the number of entries evicted.
    ///
    /// `body` is one returned by [`BodyWriter::finish`], or the body of an
    /// entry [`Store::lookup`] returned (a body file, or a short body read
    /// recently).
    ///
    /// Errors: `TooLarge` when `body` is larger than the whole budget (the
    /// store is left unchanged, the body released); `MissingBody` when the
    /// body is not in the store; `Index` on sled failures, `Io` when the
    /// pack cannot be written.
    pub fn insert(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
        meta: &[u8],
        body: Option<&CommittedBody>,
    ) -> Result<u64, StoreError> {
        let _m = self.inner.read_maintenance();
        self.insert_locked(primary_key, secondary_key, meta, body)
    }

    /// [`Store::insert`] when it is sure to be quick: `body` is a short body
    /// held in memory ([`BodyWriter::finish`] of fewer than `inline_max`
    /// bytes) or a body file already in place (as `finish` or
    /// [`BodyWriter::finish_quick`] leave it), the bytes stored leave room
    /// for it (nothing to evict), and no maintenance holds the store. The
    /// record is then appended to the pack (a write to the page cache, never
    /// synced here) and its index row kept in memory, so an async task may
    /// call it without blocking for long. `None` (nothing done, `body` still
    /// pinned) when it is not quick: call [`Store::insert`] from a blocking
    /// thread instead.
    pub fn try_insert_quick(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
        meta: &[u8],
        body: &CommittedBody,
    ) -> Option<Result<u64, StoreError>> {
        let inner = &self.inner;
        if inner.index.state().bytes.saturating_add(body.len) > inner.max_size {
            return None;
        }
        let _m = match inner.maintenance.try_read() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let hash = parse_hash(&body.sha256)?;
        // A short body must be held in memory and certainly not stored yet
        // (finding a stored one may read the disk).
        if body.len < inner.inline_max && (!inner.blobs.is_small_pinned(&hash) || inner.body_maybe_stored(&hash)) {
            return None;
        }
        Some(self.insert_locked(primary_key, secondary_key, meta, Some(body)))
    }

    /// [`Store::insert`], the maintenance lock held (read) by the caller.
    fn insert_locked(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
        meta: &[u8],
        body: Option<&CommittedBody>,
    ) -> Result<u64, StoreError> {
        let inner = &self.inner;
        if primary_key.len() >= index::MAX_PRIMARY_KEY {
            if let Some(b) = body {
                self.release_committed(b);
            }
            return Err(StoreError::Index(format!("a primary key of {} bytes is too long to store", primary_key.len())));
        }
        let key = entry_key(primary_key, secondary_key);
        let plan = match body {
            None => Plan::None,
            Some(b) => {
                let h = parse_hash(&b.sha256)
                    .ok_or_else(|| StoreError::Index(format!("{:?} is not a lower-case hex SHA-256", b.sha256)))?;
                if b.len > inner.max_size {
                    self.release_committed(b);
                    return Err(StoreError::TooLarge { len: b.len, max_size: inner.max_size });
                }
                inner.plan_body(&key, &h, b.len)?
            }
        };
        let file_pin = match &plan {
            Plan::Ref { hash, create: Some(Place::File), .. } => Some(*hash),
            _ => None,
        };
        let result = inner.write_planned(&key, meta, plan);
        if let Some(hash) = &file_pin {
            inner.release_pin(hash);
        }
        let applied = match result {
            Ok(a) => a,
            Err(e) => {
                inner.reap();
                return Err(e);
            }
        };
        inner.queue_reap(&applied.zero);
        let evicted = inner.evict_to_budget();
        inner.wake_if_reaping();
        evicted
    }

    /// Releases one pin of `body` (a body that will not be inserted).
    fn release_committed(&self, body: &CommittedBody) {
        if let Some(h) = parse_hash(&body.sha256) {
            if self.inner.blobs.take_small(&h).is_none() {
                self.inner.release_pin(&h);
                self.inner.reap();
            }
        }
    }

    /// Releases a body returned by [`BodyWriter::finish`] that will not be
    /// inserted after all: a body file is deleted unless an entry references
    /// it; a short body's bytes are dropped.
    pub fn discard_body(&self, body: &CommittedBody) {
        let _m = self.inner.read_maintenance();
        self.release_committed(body);
    }

    /// Replaces only the metadata of an existing variant (a 304 freshening,
    /// RFC 9111 section 4.3.4) and marks it used. Returns false if the variant
    /// no longer exists. Errors: `Index` on sled failures.
    ///
    /// Nothing waits for the disk: the new metadata is kept in memory (and
    /// seen by [`Store::lookup`] at once) and written with the next batch of
    /// touches, like [`Store::touch`]. A crash can lose a freshening of the
    /// last second; the entry is then merely staler than it was.
    pub fn update_meta(&self, primary_key: &str, secondary_key: &[u8], meta: &[u8]) -> Result<bool, StoreError> {
        let key = entry_key(primary_key, secondary_key);
        if self.inner.index.get(&key)?.is_none() {
            return Ok(false);
        }
        self.inner.record_pending(&key, Some(meta.to_vec()));
        Ok(true)
    }

    /// Marks a variant as just used (LRU order). Cheap: the new stamp is kept
    /// in memory and written with the next batch (see [`TOUCH_BATCH`]), by
    /// [`Store::flush`], or at close. Touching a missing variant does nothing.
    pub fn touch(&self, primary_key: &str, secondary_key: &[u8]) {
        index::with_entry_key(primary_key, secondary_key, |key| self.inner.record_pending(key, None));
    }

    /// Opens a stored body for reading, by its SHA-256. A body file is
    /// opened as it is; a short body kept in a pack record is copied into
    /// an unnamed temporary file (the store's own readers use
    /// [`Store::read_body`], which does not copy). A packed body is found
    /// when it is shared (its reference-count row names its record), or
    /// was returned by a recent [`Store::lookup`] or [`BodyWriter::finish`]
    /// (the store keeps the last 65,536 such locations).
    /// Errors: `MissingBody` if the body is not found (or `sha256` is not a
    /// hash), `Io` if it cannot be read.
    pub fn open_body(&self, sha256: &str) -> Result<std::fs::File, StoreError> {
        let Some(hash) = parse_hash(sha256) else {
            return Err(StoreError::MissingBody(sha256.to_string()));
        };
        let path = self.body_path(sha256);
        match fs::File::open(&path) {
            Ok(f) => return Ok(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("open body", &path)(e)),
        }
        let bytes = match self.inner.packed_bytes(&hash) {
            Some(b) => b,
            None => self.inner.shared_bytes(&hash)?.ok_or_else(|| StoreError::MissingBody(sha256.to_string()))?,
        };
        let tmp = &self.inner.blobs.tmp;
        let mut f = tempfile::tempfile_in(tmp).map_err(io_err("create a temporary copy of a body in", tmp))?;
        use std::io::{Seek, Write};
        f.write_all(&bytes).and_then(|_| f.rewind()).map_err(io_err("write a temporary copy of a body in", tmp))?;
        Ok(f)
    }

    /// Opens the body of `entry` (as returned by [`Store::lookup`]) for
    /// reading: a body file, or the bytes of a short body from its pack
    /// record. An entry without a body reads as no bytes.
    /// Errors: `MissingBody` when the body is gone (the entry was replaced
    /// or evicted meanwhile, or its file deleted), `Io` when it cannot be
    /// read.
    pub fn read_body(&self, entry: &Entry) -> Result<BodyData, StoreError> {
        let Some(body) = &entry.body else { return Ok(BodyData::Bytes(Vec::new())) };
        let hash = parse_hash(&body.sha256).ok_or_else(|| StoreError::MissingBody(body.sha256.clone()))?;
        if let Some(bytes) = self.inner.packed_bytes(&hash) {
            return Ok(BodyData::Bytes(bytes.to_vec()));
        }
        // Not seen recently: through the entry's own row.
        let key = entry_key(&entry.primary_key, &entry.secondary_key);
        if let Some(slot) = self.inner.index.get(&key)? {
            match slot.body {
                SlotBody::Inline { .. } => {
                    if let Ok(Record { body: RecBody::Inline { hash: h, bytes }, .. }) = self.inner.packs.read(&slot.loc) {
                        if h == hash {
                            return Ok(BodyData::Bytes(bytes.to_vec()));
                        }
                    }
                }
                SlotBody::Ref { hash: h, .. } if h == hash => {
                    if let Some(bytes) = self.inner.shared_bytes(&hash)? {
                        return Ok(BodyData::Bytes(bytes.to_vec()));
                    }
                }
                _ => {}
            }
        }
        let path = self.body_path(&body.sha256);
        match fs::File::open(&path) {
            Ok(f) => Ok(BodyData::File(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::MissingBody(body.sha256.clone())),
            Err(e) => Err(io_err("open body", &path)(e)),
        }
    }

    /// The path a body *file* has (or would have); a short body kept in a
    /// pack record has none (it may not exist).
    pub fn body_path(&self, sha256: &str) -> PathBuf {
        self.inner.blobs.path_hex(sha256)
    }

    /// Removes every variant under `primary_key` (purge, or invalidation per
    /// RFC 9111 section 4.4). Returns how many variants were removed; their
    /// body files are deleted in the background once unreferenced.
    /// Errors: `Index` on sled failures.
    pub fn remove(&self, primary_key: &str) -> Result<u64, StoreError> {
        let inner = &self.inner;
        let _m = inner.read_maintenance();
        let mut ops = Vec::new();
        for (key, _) in inner.index.scan_prefix(&primary_prefix(primary_key))? {
            ops.push(Op::Remove { key, expect: None });
        }
        if ops.is_empty() {
            return Ok(0);
        }
        let applied = inner.index.apply(&ops)?;
        inner.queue_reap(&applied.zero);
        inner.wake_if_reaping();
        Ok(applied.removed)
    }

    /// Removes one variant. Returns whether it existed.
    /// Errors: `Index` on sled failures.
    pub fn remove_variant(&self, primary_key: &str, secondary_key: &[u8]) -> Result<bool, StoreError> {
        Ok(self.remove_variant_freeing(primary_key, secondary_key)?.entries > 0)
    }

    /// Removes one variant and says what that gave back: its body's bytes
    /// only when no other entry references that body (`freed`; the pack
    /// space itself is reclaimed by compaction, a body file deleted in the
    /// background). Errors: `Index` on sled failures.
    pub fn remove_variant_freeing(&self, primary_key: &str, secondary_key: &[u8]) -> Result<Removal, StoreError> {
        let inner = &self.inner;
        let _m = inner.read_maintenance();
        let applied = inner.index.apply(&[Op::Remove { key: entry_key(primary_key, secondary_key), expect: None }])?;
        inner.queue_reap(&applied.zero);
        inner.wake_if_reaping();
        Ok(Removal { entries: applied.removed, freed: applied.freed })
    }

    /// Compacts the whole pack now: seals the segment being written, copies
    /// every live record forward and drops the dead ones (replaced or
    /// removed entries, shared bodies nobody references any more, the
    /// unused inline copy a shared body leaves in its first entry's
    /// record), then commits and deletes the segments passed. The
    /// background thread does the same a step at a time once the pack holds
    /// more than twice its live bytes; this is `cache compact`. Other
    /// writers wait while the tail walks. Errors: `Io` / `Index`.
    pub fn compact(&self) -> Result<Compaction, StoreError> {
        let inner = &self.inner;
        let _m = inner.read_maintenance();
        inner.apply_touches();
        let before = inner.packs.bytes();
        let moved = inner.compact_all()?;
        inner.commit()?;
        Ok(Compaction { pack_bytes_before: before, pack_bytes_after: inner.packs.bytes(), records_moved: moved })
    }

    /// Every entry in the index, collected ([`Store::scan`] without the
    /// memory: use that for listings of any size). Undecodable or damaged
    /// records are skipped with a warning. Errors: `Index` when sled cannot
    /// be read, `Io` when a pack cannot.
    pub fn entries(&self) -> Result<Vec<Entry>, StoreError> {
        self.scan("").collect()
    }

    /// Streams the entries whose primary key starts with `prefix` (`""`:
    /// all of them), reading one record at a time (see [`Scan`]). The
    /// changes still held in memory are moved into sled first (not synced:
    /// that is the group commit's work). The prefix is checked on each row's
    /// key before its record is read; the index is ordered by key length
    /// first, so the scan still reads every key. Items are `Err(Index)` when
    /// sled cannot be read, `Err(Io)` when a pack cannot.
    pub fn scan(&self, prefix: &str) -> Scan {
        let spilled = self.inner.index.spill().err();
        Scan { rows: self.inner.index.entry_rows(), prefix: prefix.as_bytes().to_vec(), store: self.clone(), failed: spilled }
    }

    /// Current counters (kept in the index, not computed by a scan).
    pub fn stats(&self) -> StoreStats {
        let st = self.inner.index.state();
        StoreStats {
            entries: st.entries,
            bodies: st.bodies,
            bytes_stored: st.bytes,
            bytes_referenced: st.referenced,
            max_size: self.inner.max_size,
            evictions: self.inner.evictions.load(Ordering::Relaxed),
            pack_bytes: self.inner.packs.bytes(),
        }
    }

    /// Checks every invariant of SPEC section 3 and, with `repair`, fixes what
    /// it finds (drops entries with missing or damaged records or bodies,
    /// deletes orphans and leftovers, rewrites reference counts and totals).
    /// Reads every record and hashes every body, so it reads the whole store.
    /// Other operations wait while it runs. Errors: `Io` / `Index` when the
    /// store cannot be read.
    pub fn verify(&self, repair: bool) -> Result<VerifyReport, StoreError> {
        self.verify_with_progress(repair, &mut |_, _| {})
    }

    /// [`Store::verify`], calling `progress(hashed, total)` after each body
    /// file is hashed (for a progress bar).
    pub fn verify_with_progress(&self, repair: bool, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport, StoreError> {
        let inner = &self.inner;
        let _m = crate::locks::write(&inner.maintenance);
        inner.apply_touches();
        inner.reap();
        inner.commit()?;
        verify::run(inner, repair, progress)
    }

    /// A named sled tree in the same index, for other persistent state that
    /// lives beside the cache (robots.txt snapshots). Its name must not be
    /// one of the store's own trees (`store`, and `entries`, `lru`, `refs`,
    /// `counters` of earlier formats).
    /// Errors: `Index` for a reserved name or when sled cannot open it.
    pub fn extra_tree(&self, name: &str) -> Result<sled::Tree, StoreError> {
        if name == index::TREE || legacy::TREES.contains(&name) {
            return Err(StoreError::Index(format!("tree name {name} is reserved by the store")));
        }
        self.inner.index.db.open_tree(name).map_err(sled_err)
    }

    /// Test support: stops group commits (new records and bodies stay
    /// unsynced, the checkpoint stays where it is; index rows still reach
    /// sled on [`Store::flush`]), so that a crash test can simulate a power
    /// loss by damaging what was written afterwards.
    #[doc(hidden)]
    pub fn pause_commits_for_tests(&self) {
        self.inner.commits_paused.store(true, Ordering::Release);
    }

    /// Writes pending touches, deletes released bodies, syncs new records
    /// and bodies and flushes the index to disk (called at shutdown).
    /// Errors: `Index` when sled cannot flush, `Io` when a sync fails.
    pub fn flush(&self) -> Result<(), StoreError> {
        let _m = self.inner.read_maintenance();
        self.inner.apply_touches();
        self.inner.reap();
        self.inner.commit()?;
        self.inner.index.db.flush().map_err(sled_err)?;
        Ok(())
    }
}

impl Inner {
    /// Whether the short body `hash` may be stored already ("maybe"), by
    /// the filter of stored bodies; `false` is certain.
    fn body_maybe_stored(&self, hash: &Hash) -> bool {
        self.body_filter.may_contain(&hints::fingerprint(hash).to_le_bytes())
    }

    /// Notes that the short body `hash` is stored (before its record can be
    /// found), the log's lock held: every write or copy of an inline body
    /// and every new shared body.
    pub(crate) fn note_body_stored(&self, hash: &Hash) {
        self.body_filter.add(&hints::fingerprint(hash).to_le_bytes());
    }

    /// One step of building the filter of stored bodies (the background
    /// thread runs one per round while it lasts): the first step starts it,
    /// each then adds the hints of one segment, and the last ones the
    /// hashes of the reference-count rows (8,192 a step). Bodies noted
    /// meanwhile ([`Inner::note_body_stored`], always under the log's lock,
    /// as the start and the end of the build are) go into the new filter
    /// as well. Errors: `Index` (the
    /// build is given up; the filter answers as before).
    pub(crate) fn build_body_filter_step(&self, build: &mut Option<BodyFilterBuild>) -> Result<(), StoreError> {
        if build.is_none() {
            let _log = lock(&self.log_lock);
            let Some(fresh) = self.body_filter.start_build() else { return Ok(()) };
            *build = Some(BodyFilterBuild { fresh, segments: self.hints.segments(), next: 0, refs_after: None });
            return Ok(());
        }
        let Some(b) = build.as_mut() else { return Ok(()) };
        if let Some(&seg) = b.segments.get(b.next) {
            self.hints.for_each_fingerprint(seg, |fp| presence::add_to(&b.fresh, &fp.to_le_bytes()));
            b.next += 1;
            return Ok(());
        }
        let step = self.index.spill().and_then(|()| self.index.ref_hashes_step(b.refs_after.as_deref(), 8192));
        let (hashes, after) = match step {
            Ok(found) => found,
            Err(e) => {
                self.body_filter.abandon_build();
                *build = None;
                return Err(e);
            }
        };
        for h in &hashes {
            presence::add_to(&b.fresh, &hints::fingerprint(h).to_le_bytes());
        }
        b.refs_after = after;
        if b.refs_after.is_none() {
            if let Some(done) = build.take() {
                // Under the log's lock, as every body is noted: a body
                // noted while the filters change places is in the new one.
                let _log = lock(&self.log_lock);
                self.body_filter.finish_build(done.fresh);
            }
        }
        Ok(())
    }

    /// How a new record of the entry `key` is to carry the body `hash` of
    /// `len` bytes: a body file, a body with a reference-count row, the
    /// inline body of another entry (shared), or new bytes of its own.
    /// The bytes come from the pin [`BodyWriter::finish`] left (taken here)
    /// or from a stored copy. May read the index, hints and records (never
    /// for a short body the filter says is new).
    /// Errors: `MissingBody` when the body is neither pinned nor stored.
    fn plan_body(&self, key: &[u8], hash: &Hash, len: u64) -> Result<Plan, StoreError> {
        let pinned = self.blobs.take_small(hash);
        if pinned.is_none() && (len >= self.inline_max || self.blobs.path(hash).is_file()) && self.hold_for_insert(hash).is_ok() {
            return Ok(Plan::Ref { hash: *hash, len, create: Some(Place::File), bytes: None });
        }
        let bytes = match pinned.or_else(|| self.packed_bytes(hash)) {
            Some(b) if b.len() as u64 == len => b,
            _ => {
                // A body only a reference-count row knows (shared).
                return match self.index.ref_row_of(hash)? {
                    Some(r) if r.len == len => Ok(Plan::Ref { hash: *hash, len, create: None, bytes: None }),
                    _ => Err(StoreError::MissingBody(hex::encode(hash))),
                };
            }
        };
        if !self.body_maybe_stored(hash) {
            return Ok(Plan::Owner { hash: *hash, bytes });
        }
        if self.index.ref_row_of(hash)?.is_some_and(|r| r.len == len) {
            return Ok(Plan::Ref { hash: *hash, len, create: None, bytes: Some(bytes) });
        }
        match self.find_owner(key, hash, len, false)? {
            Some((owner, owner_loc)) => Ok(Plan::Share { hash: *hash, bytes, owner, owner_loc }),
            None => Ok(Plan::Owner { hash: *hash, bytes }),
        }
    }

    /// Another entry (not `key`) whose current record holds the short body
    /// `hash` of `len` bytes inline, unshared: its key and record. Looks at
    /// the location seen last and at the hints (only those in memory with
    /// `memory_only`), reading each candidate record. Errors: `Index` when
    /// the index cannot be read.
    fn find_owner(&self, key: &[u8], hash: &Hash, len: u64, memory_only: bool) -> Result<Option<(Vec<u8>, Loc)>, StoreError> {
        let recent = lock(&self.recent).get(hash).copied();
        let mut tried = Vec::new();
        for loc in recent.into_iter().chain(self.hints.candidates(hash, memory_only)) {
            if tried.contains(&loc) {
                continue;
            }
            tried.push(loc);
            let Ok(rec) = self.read_record(&loc) else { continue };
            let RecBody::Inline { hash: h, bytes } = &rec.body else { continue };
            if h != hash || bytes.len() as u64 != len || rec.key.is_empty() || rec.key == key {
                continue;
            }
            if let Some(slot) = self.index.get(&rec.key)? {
                if slot.loc == loc && slot.body == (SlotBody::Inline { len }) {
                    return Ok(Some((rec.key.clone(), loc)));
                }
            }
        }
        Ok(None)
    }

    /// The bytes of the shared body `hash` (its reference-count row names
    /// a shared body record), checked against its hash; `None` when it is
    /// not a shared short body.
    fn shared_bytes(&self, hash: &Hash) -> Result<Option<Arc<Vec<u8>>>, StoreError> {
        let Some(index::RefRow { place: Place::Packed(loc), .. }) = self.index.ref_row_of(hash)? else { return Ok(None) };
        match self.read_record(&loc).as_deref() {
            Ok(Record { body: RecBody::Shared { hash: h, bytes }, .. }) if h == hash => {
                lock(&self.recent).put(*hash, loc);
                Ok(Some(bytes.clone()))
            }
            _ => Ok(None),
        }
    }

    /// Writes the record of the entry `key` as `plan` says and its index
    /// row (see [`Inner::write_record`]). A plan overtaken meanwhile (the
    /// shared body went, the owner was replaced, an owner of the same bytes
    /// appeared) is redone under the log's lock, ending in new bytes of the
    /// entry's own when nothing else holds.
    fn write_planned(&self, key: &[u8], meta: &[u8], plan: Plan) -> Result<index::Applied, StoreError> {
        let _log = lock(&self.log_lock);
        let mut plan = plan;
        // A failed share and the search that finds the owner again take
        // two rounds.
        for _ in 0..6 {
            plan = match plan {
                Plan::None => return self.write_record_locked(key, meta, &RecBody::None, None, None),
                Plan::Owner { hash, bytes } => {
                    // An owner of the same bytes written since the plan was
                    // made is in the hints held in memory.
                    let len = bytes.len() as u64;
                    if self.body_maybe_stored(&hash) {
                        if let Some((owner, owner_loc)) = self.find_owner(key, &hash, len, true)? {
                            plan = Plan::Share { hash, bytes, owner, owner_loc };
                            continue;
                        }
                    }
                    return self.write_record_locked(key, meta, &RecBody::Inline { hash, bytes }, None, None);
                }
                Plan::Ref { hash, len, create, bytes } => {
                    let applied = self.write_record_locked(key, meta, &RecBody::Ref { hash, len }, None, create)?;
                    match bytes {
                        // The shared body went meanwhile: store the bytes anew.
                        Some(bytes) if applied.done.first() == Some(&false) => Plan::Owner { hash, bytes },
                        _ => return Ok(applied),
                    }
                }
                Plan::Share { hash, bytes, owner, owner_loc } => {
                    let len = bytes.len() as u64;
                    self.note_body_stored(&hash);
                    let (_, body_loc) = self.packs.append(&self.next_stamp, b"", b"", &RecBody::Shared { hash, bytes: bytes.clone() })?;
                    let (stamp, loc) = self.packs.append(&self.next_stamp, key, meta, &RecBody::Ref { hash, len })?;
                    let put = Op::Put { key: key.to_vec(), slot: Slot { stamp, loc, body: SlotBody::Ref { hash, len } }, expect: None, create: None };
                    let applied = self.index.apply(&[Op::Share { owner, owner_loc, hash, len, body: body_loc }, put])?;
                    match applied.done.as_slice() {
                        [true, true] => {
                            lock(&self.recent).put(hash, body_loc);
                            return Ok(applied);
                        }
                        // The owner went, or shared the body first.
                        [_, true] => return Ok(applied),
                        _ => Plan::Owner { hash, bytes },
                    }
                }
            };
        }
        match plan {
            Plan::Owner { hash, bytes } | Plan::Share { hash, bytes, .. } => {
                self.write_record_locked(key, meta, &RecBody::Inline { hash, bytes }, None, None)
            }
            Plan::Ref { hash, len, create, .. } => self.write_record_locked(key, meta, &RecBody::Ref { hash, len }, None, create),
            Plan::None => self.write_record_locked(key, meta, &RecBody::None, None, None),
        }
    }

    /// Appends a record for `key` and writes its index row (with `expect`,
    /// only if the entry's current record is still there; a reference with
    /// `create` to a body without a row gives it one).
    pub(crate) fn write_record(
        &self,
        key: &[u8],
        meta: &[u8],
        body: &RecBody,
        expect: Option<Loc>,
        create: Option<Place>,
    ) -> Result<index::Applied, StoreError> {
        let _log = lock(&self.log_lock);
        self.write_record_locked(key, meta, body, expect, create)
    }

    /// [`Inner::write_record`] with the log's lock held. An inline body
    /// that was written is noted in the hints and the filter of stored
    /// bodies.
    fn write_record_locked(
        &self,
        key: &[u8],
        meta: &[u8],
        body: &RecBody,
        expect: Option<Loc>,
        create: Option<Place>,
    ) -> Result<index::Applied, StoreError> {
        let (stamp, loc) = self.packs.append(&self.next_stamp, key, meta, body)?;
        let slot_body = match body {
            RecBody::None | RecBody::Shared { .. } => SlotBody::None,
            RecBody::Inline { bytes, .. } => SlotBody::Inline { len: bytes.len() as u64 },
            RecBody::Ref { hash, len } => SlotBody::Ref { hash: *hash, len: *len },
        };
        if let RecBody::Inline { hash, .. } = body {
            // Before the row can be read: a body that is stored is never
            // "certainly not" to the filter.
            self.note_body_stored(hash);
        }
        let applied = self.index.apply(&[Op::Put { key: key.to_vec(), slot: Slot { stamp, loc, body: slot_body }, expect, create }])?;
        if let (RecBody::Inline { hash, .. }, Some(true)) = (body, applied.done.first()) {
            lock(&self.recent).put(*hash, loc);
            self.hints.add(loc, hash);
        }
        Ok(applied)
    }

    /// The bytes of the packed body `hash`, if it is pinned or was seen
    /// recently (checked against its hash).
    fn packed_bytes(&self, hash: &Hash) -> Option<Arc<Vec<u8>>> {
        if let Some(b) = self.blobs.peek_small(hash) {
            return Some(b);
        }
        let loc = *lock(&self.recent).get(hash)?;
        match self.read_record(&loc).as_deref() {
            Ok(Record { body: RecBody::Inline { hash: h, bytes } | RecBody::Shared { hash: h, bytes }, .. }) if h == hash => {
                Some(bytes.clone())
            }
            _ => {
                lock(&self.recent).pop(hash);
                None
            }
        }
    }

    /// The record at `loc`, from the record cache or read (and checked)
    /// from its segment, then cached. For the lookup path only: verify,
    /// recovery and the tail walk read the disk.
    fn read_record(&self, loc: &Loc) -> Result<Arc<Record>, ReadError> {
        if let Some(rec) = lock(&self.records).get(loc) {
            return Ok(rec);
        }
        let rec = Arc::new(self.packs.read(loc)?);
        lock(&self.records).put(*loc, rec.clone());
        Ok(rec)
    }

    /// Builds the entry of the index row `(key, value)` from its record.
    /// `None` (with a warning) when the row or record is damaged; a record
    /// whose segment went meanwhile (the tail walk moved it) is looked up
    /// again.
    fn read_entry(&self, key: &[u8], value: &[u8]) -> Result<Option<Entry>, StoreError> {
        Ok(self.read_entry_located(key, value)?.map(|(e, _)| e))
    }

    /// [`Inner::read_entry`], with the hash and location of the entry's
    /// short body when it has one in its record.
    fn read_entry_located(&self, key: &[u8], value: &[u8]) -> Result<Option<record_cache::Located>, StoreError> {
        let Some((primary_key, secondary_key)) = split_entry_key(key) else {
            tracing::warn!(key = ?String::from_utf8_lossy(key), "skipping an index entry with a malformed key");
            return Ok(None);
        };
        let Some(mut slot) = Slot::decode(value) else {
            tracing::warn!(primary_key, "skipping an undecodable index row (run cache verify)");
            return Ok(None);
        };
        let mut tries = 0;
        let rec = loop {
            match self.read_record(&slot.loc) {
                Ok(rec) => break rec,
                Err(ReadError::Gone) if tries < 3 => {
                    tries += 1;
                    match self.index.get(key) {
                        Ok(Some(s)) => slot = s,
                        Ok(None) => return Ok(None),
                        Err(_) => return Ok(None),
                    }
                }
                Err(ReadError::Io(e)) => return Err(e),
                Err(e) => {
                    tracing::warn!(primary_key, error = %e.into_store_error(&slot.loc), "skipping an entry whose record is unreadable (run cache verify)");
                    return Ok(None);
                }
            }
        };
        if rec.key != key {
            tracing::warn!(primary_key, "skipping an entry whose record belongs to another key (run cache verify)");
            return Ok(None);
        }
        let mut packed = None;
        let body = match &rec.body {
            RecBody::None | RecBody::Shared { .. } => None,
            // Its own bytes (also when the entry's row says the body is
            // shared since: the copy in its record is the same bytes).
            RecBody::Inline { hash, bytes } => {
                lock(&self.recent).put(*hash, slot.loc);
                packed = Some((*hash, slot.loc));
                Some(CommittedBody { sha256: hex::encode(hash), len: bytes.len() as u64 })
            }
            RecBody::Ref { hash, len } => Some(CommittedBody { sha256: hex::encode(hash), len: *len }),
        };
        Ok(Some((Entry { primary_key, secondary_key, meta: rec.meta.clone(), body, last_used: slot.stamp }, packed)))
    }
}

#[cfg(test)]
mod tests;
