//! The values the store hands out and takes: bodies, entries, counters,
//! options and the outcomes of removals and compactions.

use crate::stamp::CLOCK_STAMPS_FROM;

/// A complete body that has been hashed (and, if it is a file, renamed into
/// place; it is synced by the next group commit).
/// Returned by [`crate::BodyWriter::finish`]; handed to [`crate::Store::insert`].
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

/// See [`crate::Store::lookup_version`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupVersion {
    pub(crate) store: u64,
    pub(crate) generation: u64,
    pub(crate) freshenings: u64,
}

impl Entry {
    /// When the entry was last used (stored, served, freshened by a 304),
    /// read from its stamp; `None` for a stamp written by a release whose
    /// stamps were not clock readings (that entry has not been used since
    /// the upgrade). A stamp can run ahead of the clock by at most one
    /// microsecond per use made within the same microsecond, so this is
    /// never much earlier than the real time of the last use.
    pub fn last_used_at(&self) -> Option<std::time::SystemTime> {
        (self.last_used >= CLOCK_STAMPS_FROM)
            .then(|| std::time::UNIX_EPOCH + std::time::Duration::from_micros(self.last_used))
    }
}

/// A stored body opened for reading ([`crate::Store::read_body`]).
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

/// Counters reported by [`crate::Store::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Number of entries (variants) in the index.
    pub entries: u64,
    /// Number of distinct bodies (each stored once, however many entries
    /// reference it).
    pub bodies: u64,
    /// Bytes of those distinct bodies, each counted once (what the bodies
    /// take on disk before file-system blocks and pack framing).
    pub bytes_stored: u64,
    /// Bytes on disk the budget bounds: the pack records entries point at
    /// (framing, keys, metadata, inline bodies, shared body records) plus
    /// the body files. Not counted: the sled index and dead records not yet
    /// reclaimed. Kept at or below `max_size` by eviction.
    pub budget_bytes: u64,
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
    /// The in-memory filters of stored primary keys and of stored bodies
    /// are built (crates/store/src/presence.rs). After an open they are
    /// built from the whole index in the background, which at millions of
    /// entries takes seconds of a core; until then a lookup of a key never
    /// stored reads the index.
    pub filters_ready: bool,
}

/// How to open a store ([`crate::Store::open_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Budget in bytes (`cache.max_size`) for the bodies and the records
    /// of the entries ([`StoreStats::budget_bytes`]).
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
        StoreOptions {
            max_size,
            inline_max: 4096,
            index_cache: 8 << 20,
            record_cache: 16 << 20,
            keep_written_pages: false,
        }
    }
}

/// What removing entries did ([`crate::Store::remove_variant_freeing`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removal {
    /// Entries removed.
    pub entries: u64,
    /// Bytes of bodies whose last reference went with them (given back);
    /// a body other entries still reference frees nothing.
    pub freed: u64,
}

/// What [`crate::Store::compact`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Compaction {
    /// Bytes of pack segments before.
    pub pack_bytes_before: u64,
    /// Bytes of pack segments after.
    pub pack_bytes_after: u64,
    /// Live records copied forward.
    pub records_moved: u64,
}
