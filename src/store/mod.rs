//! The body store and its metadata index (SPEC section 3).
//!
//! Bodies live in a content-addressed directory: the file name is the
//! lower-case hex SHA-256 of the body, fanned out as `bodies/ab/cd/abcd...`.
//! A body is streamed into a temporary file under `tmp/` while it is hashed,
//! synced, and renamed into place only once it is complete
//! ([`BodyWriter::finish`]). Metadata (entries, variants, reference counts,
//! LRU order) lives in sled; every update that must agree with another (an
//! entry and the reference counts it changes) is one sled transaction.
//!
//! The store knows nothing about HTTP: an entry is addressed by a primary key
//! (a string chosen by the cache layer) and a secondary key (bytes chosen by
//! the cache layer from `Vary`), and carries opaque metadata bytes plus a
//! reference to at most one body.

use std::path::{Path, PathBuf};

/// Errors from the store. Every variant names what failed; none of them is
/// ever turned into a panic.
#[derive(Debug)]
pub enum StoreError {
    /// A file system operation failed (`what` says which, e.g. "create tmp file").
    Io { what: String, source: std::io::Error },
    /// The sled index failed or holds a record that cannot be decoded.
    Index(String),
    /// The body named by an entry is missing from `bodies/`.
    MissingBody(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Io { what, source } => write!(f, "{what}: {source}"),
            StoreError::Index(m) => write!(f, "cache index: {m}"),
            StoreError::MissingBody(h) => write!(f, "body {h} is missing from the store"),
        }
    }
}
impl std::error::Error for StoreError {}

/// A complete body that has been hashed, synced and renamed into place.
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
    /// Monotonic LRU stamp: larger means more recently used.
    pub last_used: u64,
}

/// Counters reported by [`Store::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Number of entries (variants) in the index.
    pub entries: u64,
    /// Number of distinct body files referenced.
    pub bodies: u64,
    /// Bytes of body files on disk (each distinct body counted once).
    pub bytes_stored: u64,
    /// The configured budget in bytes.
    pub max_size: u64,
    /// Entries evicted by the LRU budget since the store was opened.
    pub evictions: u64,
}

/// What [`Store::verify`] found (and, with `repair`, fixed).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VerifyReport {
    pub entries_checked: u64,
    pub bodies_checked: u64,
    /// Body files whose content does not hash to their name.
    pub corrupt_bodies: Vec<String>,
    /// Entries pointing at a body file that does not exist.
    pub missing_bodies: Vec<String>,
    /// Body files no entry references.
    pub orphan_bodies: Vec<String>,
    /// Hashes whose stored reference count differs from the real count.
    pub refcount_mismatches: Vec<String>,
    /// Leftover temporary files.
    pub leftover_tmp: Vec<String>,
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
    }
}

/// Handle to an open store. Cheap to clone; all clones share one index.
#[derive(Clone)]
pub struct Store {
    _todo: std::sync::Arc<()>,
}

impl Store {
    /// Opens (creating if needed) the store under `dir` with a budget of
    /// `max_size` bytes of body files, and sweeps leftovers of a previous run
    /// (temporary files). Errors: the directory cannot be created or the index
    /// cannot be opened (for example because another process holds it).
    pub fn open(dir: &Path, max_size: u64) -> Result<Store, StoreError> {
        let _ = (dir, max_size);
        todo!()
    }

    /// The directory the store lives in.
    pub fn dir(&self) -> &Path {
        todo!()
    }

    /// Starts writing a new body into a temporary file.
    pub fn begin_body(&self) -> Result<BodyWriter, StoreError> {
        todo!()
    }

    /// All variants stored under `primary_key`, in no particular order.
    pub fn lookup(&self, primary_key: &str) -> Result<Vec<Entry>, StoreError> {
        let _ = primary_key;
        todo!()
    }

    /// Stores (or replaces) the variant `(primary_key, secondary_key)` with
    /// `meta` and `body` in one transaction that also adjusts reference counts
    /// (a replaced body loses a reference; a body whose count reaches zero is
    /// deleted). Then evicts least-recently-used entries until the bytes
    /// stored fit the budget. Returns the number of entries evicted.
    pub fn insert(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
        meta: &[u8],
        body: Option<&CommittedBody>,
    ) -> Result<u64, StoreError> {
        let _ = (primary_key, secondary_key, meta, body);
        todo!()
    }

    /// Replaces only the metadata of an existing variant (a 304 freshening,
    /// RFC 9111 section 4.3.4) and marks it used. Returns false if the variant
    /// no longer exists.
    pub fn update_meta(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
        meta: &[u8],
    ) -> Result<bool, StoreError> {
        let _ = (primary_key, secondary_key, meta);
        todo!()
    }

    /// Marks a variant as just used (LRU order). Cheap; may be batched.
    pub fn touch(&self, primary_key: &str, secondary_key: &[u8]) {
        let _ = (primary_key, secondary_key);
        todo!()
    }

    /// Opens a stored body for reading. Errors with `MissingBody` if the file
    /// is gone.
    pub fn open_body(&self, sha256: &str) -> Result<std::fs::File, StoreError> {
        let _ = sha256;
        todo!()
    }

    /// The path of a stored body file (it may not exist).
    pub fn body_path(&self, sha256: &str) -> PathBuf {
        let _ = sha256;
        todo!()
    }

    /// Removes every variant under `primary_key` (purge, or invalidation per
    /// RFC 9111 section 4.4). Returns how many variants were removed.
    pub fn remove(&self, primary_key: &str) -> Result<u64, StoreError> {
        let _ = primary_key;
        todo!()
    }

    /// Removes one variant. Returns whether it existed.
    pub fn remove_variant(&self, primary_key: &str, secondary_key: &[u8]) -> Result<bool, StoreError> {
        let _ = (primary_key, secondary_key);
        todo!()
    }

    /// Every entry in the index (for `cache show`, stats and verify).
    pub fn entries(&self) -> Result<Vec<Entry>, StoreError> {
        todo!()
    }

    /// Current counters.
    pub fn stats(&self) -> StoreStats {
        todo!()
    }

    /// Checks every invariant of SPEC section 3 and, with `repair`, fixes what
    /// it finds (drops entries with missing or corrupt bodies, deletes orphans
    /// and leftovers, rewrites reference counts).
    pub fn verify(&self, repair: bool) -> Result<VerifyReport, StoreError> {
        let _ = repair;
        todo!()
    }

    /// Flushes the index to disk (called at shutdown).
    pub fn flush(&self) -> Result<(), StoreError> {
        todo!()
    }
}

/// A body being written: bytes go to a temporary file and into a SHA-256.
pub struct BodyWriter {
    _todo: (),
}

impl BodyWriter {
    /// Appends `chunk`. Errors (for example a full disk) leave nothing behind
    /// once the writer is dropped.
    pub fn write(&mut self, chunk: &[u8]) -> Result<(), StoreError> {
        let _ = chunk;
        todo!()
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        todo!()
    }

    /// Syncs the file and renames it to its content address (or drops it if
    /// that body already exists). Only a complete body may be finished.
    pub fn finish(self) -> Result<CommittedBody, StoreError> {
        todo!()
    }
}
