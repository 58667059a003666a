//! The body store and its metadata index (SPEC section 3).
//!
//! Bodies live in a content-addressed directory: the file name is the
//! lower-case hex SHA-256 of the body, fanned out as `bodies/ab/cd/abcd...`.
//! A body is streamed into a temporary file under `tmp/` while it is hashed,
//! and renamed into place only once it is complete ([`BodyWriter::finish`]);
//! it is synced later, in a group, by the background committer, before the
//! checkpoint that covers its entry (see `maintenance.rs`, "Group commit"). Metadata (entries, variants, reference counts,
//! LRU order) lives in sled; every update that must agree with another (an
//! entry and the reference counts it changes) is one sled transaction
//! (see `index.rs` for the trees).
//!
//! The store knows nothing about HTTP: an entry is addressed by a primary key
//! (a string chosen by the cache layer) and a secondary key (bytes chosen by
//! the cache layer from `Vary`), and carries opaque metadata bytes plus a
//! reference to at most one body.
//!
//! Life cycle of a body file, and why a committed entry never points at a
//! deleted file:
//! 1. [`BodyWriter::finish`] renames the file into place (or finds it there)
//!    under the lock stripe of its hash and *pins* it in memory.
//! 2. [`Store::insert`] commits the entry and the reference count in one
//!    transaction, then drops the pin.
//! 3. A transaction that drops a count to zero only queues the hash. The
//!    queue is reaped by the background thread (promptly, or at the latest
//!    within a second; [`Store::flush`] and close reap too): under the stripe
//!    locks, hashes that are still unreferenced and unpinned are deleted,
//!    after a sled flush made the zero count durable (so a crash cannot
//!    bring back an entry whose file is gone). Until then the budget already
//!    counts the bytes as freed; the disk holds them a little longer.
//!
//! Crashes: a body renamed but never referenced (crash between steps 1 and
//! 2, or between a flush and the unlink in step 3) is an orphan; temporary
//! files are leftovers. Both are harmless: `open` sweeps temporary files
//! always, and orphans when the previous run did not close cleanly (no
//! `clean-shutdown` marker); [`Store::verify`] reports and repairs both.
//!
//! LRU: every entry carries a stamp, unique and increasing, that is also
//! the time of its last use in microseconds (a hybrid clock, see
//! `budget.rs`; [`Entry::last_used_at`]); the `lru` tree maps stamp to
//! entry. [`Store::touch`] only records a new stamp in
//! memory; pending stamps are written in batched transactions by a
//! background thread (every second, or as soon as [`TOUCH_BATCH`] are
//! pending), before an entry would be evicted, by [`Store::flush`] and when
//! the store is closed. The same thread reaps released bodies (step 3
//! above), so the fsync that makes a zero count durable is off the insert
//! path and shared by many deletions.
//!
//! Budget: `max_size` bounds the bytes of distinct body files (metadata and
//! the index are not counted). After each insert, and at open, the least
//! recently used entries are evicted until the total fits.
//! A body larger than the whole budget is refused with
//! [`StoreError::TooLarge`] (already while it is written): storing it would
//! first evict everything else and then the body itself.
//!
//! Files: this one holds the types and the public API; `blobs.rs` the body
//! files and their pins; `index.rs` the sled trees; `budget.rs` the LRU order
//! and eviction; `maintenance.rs` the start-up sweep, the background thread,
//! body deletion and the close; `verify.rs` the invariant check.

mod blobs;
mod budget;
pub mod format;
mod index;
mod maintenance;
mod verify;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

pub use blobs::BodyWriter;
pub use budget::TOUCH_BATCH;
pub use verify::VerifyReport;
use blobs::{io_err, Blobs};
use index::{entry_key, parse_hash, primary_prefix, sled_err, split_entry_key, Hash, Index, Record};
use maintenance::Closer;

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

/// A complete body that has been hashed and renamed into place (synced by
/// the next group commit).
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

/// Stamps below this (2001-01-01T00:00:00Z in microseconds) are not clock
/// readings: a store written by a release whose stamps were a plain counter.
const CLOCK_STAMPS_FROM: u64 = 978_307_200_000_000;

/// `t` in microseconds since the Unix epoch (0 before it).
pub(crate) fn clock_micros(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
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
}

impl Iterator for Scan {
    type Item = Result<Entry, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (k, v) = match self.rows.next()? {
                Ok(row) => row,
                Err(e) => return Some(Err(sled_err(e))),
            };
            if !self.prefix.is_empty() && !index::primary_key_bytes(&k).is_some_and(|pk| pk.starts_with(&self.prefix)) {
                continue;
            }
            if let Some(mut e) = decode_entry(&k, &v) {
                self.store.inner.overlay_pending(std::slice::from_mut(&mut e));
                return Some(Ok(e));
            }
        }
    }
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

/// Locks a mutex, ignoring poisoning (every guarded state stays valid when a
/// holder panics).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared state behind every [`Store`] clone and [`BodyWriter`].
pub(crate) struct Inner {
    dir: PathBuf,
    pub(crate) max_size: u64,
    pub(crate) index: Index,
    pub(crate) blobs: Blobs,
    /// Touches and freshenings not yet written: entry key -> newest stamp
    /// and, after a freshening, the new metadata.
    pending: Mutex<HashMap<Vec<u8>, budget::Pending>>,
    next_stamp: AtomicU64,
    evictions: AtomicU64,
    /// Serialises eviction so concurrent inserts do not over-evict.
    evict_lock: Mutex<()>,
    /// Hashes whose count reached zero; their files are deleted by `reap`.
    reap_queue: Mutex<HashSet<Hash>>,
    reap_lock: Mutex<()>,
    /// Shared by every mutation; taken exclusively by `verify`.
    pub(crate) maintenance: RwLock<()>,
    /// Wakes the background thread (`true`: work to do, `false`: stop).
    wake: Mutex<mpsc::Sender<bool>>,
    /// Set while a wake-up is queued, so hot paths send at most one.
    wake_queued: AtomicBool,
    /// Bodies renamed into place but not yet synced (group commit; see
    /// `maintenance.rs`).
    pub(crate) unsynced: Mutex<Vec<Hash>>,
    /// The last checkpoint stamp written: every entry stamped below it has
    /// a synced body.
    pub(crate) checkpointed: AtomicU64,
    /// Serialises commits.
    commit_lock: Mutex<()>,
    /// Test support: commits do nothing (see [`Store::pause_commits_for_tests`]).
    pub(crate) commits_paused: AtomicBool,
}

/// Handle to an open store. Cheap to clone; all clones share one index.
/// The store closes (pending touches written, index flushed, clean-shutdown
/// marker left) when the last clone and the last [`BodyWriter`] are dropped.
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
    /// `max_size` bytes of body files, and sweeps leftovers of a previous run
    /// (temporary files always; orphan body files when the previous run did
    /// not close cleanly), then evicts entries until the budget is met.
    /// Errors: `Io` when the directory cannot be created or a leftover cannot
    /// be removed, `InUse` when another process holds the index, `Index`
    /// when sled fails.
    pub fn open(dir: &Path, max_size: u64) -> Result<Store, StoreError> {
        let blobs = Blobs::new(dir);
        fs::create_dir_all(dir).map_err(io_err("create store directory", dir))?;
        let found = format::check(dir)?;
        for d in [blobs.bodies.as_path(), blobs.tmp.as_path()] {
            fs::create_dir_all(d).map_err(io_err("create store directory", d))?;
        }
        let db = sled::Config::new().path(dir.join("index")).open().map_err(|e| match e {
            sled::Error::Io(ref io) if io.to_string().contains("could not acquire lock") => {
                StoreError::InUse { dir: dir.to_path_buf() }
            }
            e => StoreError::Index(format!("cannot open {}: {e}", dir.join("index").display())),
        })?;
        let index = Index::new(db)?;
        if found == format::Found::Previous {
            // Format 1 synced every body before indexing it: all of it is committed.
            let all = index.max_stamp()? + 1;
            eprintln!("crawlcache: migrating the cache in {} from store format 1 to {}", dir.display(), format::FORMAT);
            index.put_checkpoint(all)?;
            index.db.flush().map_err(sled_err)?;
        }
        maintenance::sweep_leftovers(dir, &blobs, &index)?;
        if found != format::Found::Current {
            format::write(dir)?;
            if found == format::Found::Previous {
                eprintln!("crawlcache: cache in {} migrated to store format {}", dir.display(), format::FORMAT);
            }
        }
        let checkpoint = index.checkpoint()?;
        // Stamps restart above the checkpoint even when touches recorded
        // after it were lost, so no new entry is mistaken for a committed one.
        let next_stamp = (index.max_stamp()? + 1).max(checkpoint);
        let (wake_tx, wake_rx) = mpsc::channel();
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            max_size,
            index,
            blobs,
            pending: Mutex::new(HashMap::new()),
            next_stamp: AtomicU64::new(next_stamp),
            evictions: AtomicU64::new(0),
            evict_lock: Mutex::new(()),
            reap_queue: Mutex::new(HashSet::new()),
            reap_lock: Mutex::new(()),
            maintenance: RwLock::new(()),
            wake: Mutex::new(wake_tx.clone()),
            wake_queued: AtomicBool::new(false),
            unsynced: Mutex::new(Vec::new()),
            checkpointed: AtomicU64::new(checkpoint),
            commit_lock: Mutex::new(()),
            commits_paused: AtomicBool::new(false),
        });
        let thread = maintenance::spawn(Arc::downgrade(&inner), wake_rx)?;
        let store = Store { _closer: Arc::new(Closer { wake: wake_tx, thread: Some(thread) }), inner };
        // A crash between an insert and its eviction, or a smaller budget
        // than last time, leaves more bytes than the budget allows.
        let evicted = store.inner.evict_to_budget()?;
        if evicted > 0 {
            tracing::info!(evicted, max_size, "evicted entries to fit the size budget at start-up");
            store.inner.wake_if_reaping();
        }
        Ok(store)
    }

    /// The directory the store lives in.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Starts writing a new body into a temporary file.
    /// Errors: `Io` when the temporary file cannot be created.
    pub fn begin_body(&self) -> Result<BodyWriter, StoreError> {
        BodyWriter::create(Arc::clone(&self.inner))
    }

    /// All variants stored under `primary_key`, in no particular order.
    /// Undecodable records are skipped with a warning.
    /// Errors: `Index` when sled cannot be read.
    pub fn lookup(&self, primary_key: &str) -> Result<Vec<Entry>, StoreError> {
        let mut out = Vec::new();
        for item in self.inner.index.entries.scan_prefix(primary_prefix(primary_key)) {
            let (k, v) = item.map_err(sled_err)?;
            if let Some(e) = decode_entry(&k, &v) {
                out.push(e);
            }
        }
        self.inner.overlay_pending(&mut out);
        Ok(out)
    }

    /// Stores (or replaces) the variant `(primary_key, secondary_key)` with
    /// `meta` and `body` in one transaction that also adjusts reference counts
    /// (a replaced body loses a reference; a body whose count reaches zero is
    /// deleted). Then evicts least-recently-used entries until the bytes
    /// stored fit the budget. Returns the number of entries evicted.
    ///
    /// Errors: `TooLarge` when `body` is larger than the whole budget (the
    /// store is left unchanged, the body file released); `MissingBody` when
    /// the body file is not in the store; `Index` on sled failures.
    pub fn insert(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
        meta: &[u8],
        body: Option<&CommittedBody>,
    ) -> Result<u64, StoreError> {
        let inner = &self.inner;
        let _m = inner.read_maintenance();
        let body = match body {
            None => None,
            Some(b) => {
                let h = parse_hash(&b.sha256)
                    .ok_or_else(|| StoreError::Index(format!("{:?} is not a lower-case hex SHA-256", b.sha256)))?;
                Some((h, b.len))
            }
        };
        if let Some((h, len)) = body {
            if len > inner.max_size {
                inner.release_pin(&h);
                inner.reap();
                return Err(StoreError::TooLarge { len, max_size: inner.max_size });
            }
            inner.hold_for_insert(&h)?;
        }
        let key = entry_key(primary_key, secondary_key);
        let rec = Record { stamp: inner.stamp(), body, meta: meta.to_vec() };
        let result = inner.index.put(&key, &rec);
        if let Some((h, _)) = body {
            inner.release_pin(&h);
        }
        let released = match result {
            Ok(r) => r,
            Err(e) => {
                inner.reap();
                return Err(e);
            }
        };
        inner.queue_reap(&released.zero);
        let evicted = inner.evict_to_budget();
        inner.wake_if_reaping();
        evicted
    }

    /// Releases a body returned by [`BodyWriter::finish`] that will not be
    /// inserted after all: its file is deleted unless an entry references it.
    pub fn discard_body(&self, body: &CommittedBody) {
        if let Some(h) = parse_hash(&body.sha256) {
            let _m = self.inner.read_maintenance();
            self.inner.release_pin(&h);
            self.inner.reap();
        }
    }

    /// Replaces only the metadata of an existing variant (a 304 freshening,
    /// RFC 9111 section 4.3.4) and marks it used. Returns false if the variant
    /// no longer exists. Errors: `Index` on sled failures or a corrupt record.
    ///
    /// Nothing waits for the disk: the new metadata is kept in memory (and
    /// seen by [`Store::lookup`] at once) and written with the next batch of
    /// touches, like [`Store::touch`]. A crash can lose a freshening of the
    /// last second; the entry is then merely staler than it was.
    pub fn update_meta(&self, primary_key: &str, secondary_key: &[u8], meta: &[u8]) -> Result<bool, StoreError> {
        let key = entry_key(primary_key, secondary_key);
        if !self.inner.index.entries.contains_key(&key).map_err(sled_err)? {
            return Ok(false);
        }
        self.inner.record_pending(key, Some(meta.to_vec()));
        Ok(true)
    }

    /// Marks a variant as just used (LRU order). Cheap: the new stamp is kept
    /// in memory and written with the next batch (see [`TOUCH_BATCH`]), by
    /// [`Store::flush`], or at close. Touching a missing variant does nothing.
    pub fn touch(&self, primary_key: &str, secondary_key: &[u8]) {
        self.inner.record_pending(entry_key(primary_key, secondary_key), None);
    }

    /// Opens a stored body for reading. Errors with `MissingBody` if the file
    /// is gone (or `sha256` is not a hash), `Io` if it cannot be opened.
    pub fn open_body(&self, sha256: &str) -> Result<std::fs::File, StoreError> {
        if parse_hash(sha256).is_none() {
            return Err(StoreError::MissingBody(sha256.to_string()));
        }
        let path = self.body_path(sha256);
        match fs::File::open(&path) {
            Ok(f) => Ok(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::MissingBody(sha256.to_string())),
            Err(e) => Err(io_err("open body", &path)(e)),
        }
    }

    /// The path of a stored body file (it may not exist).
    pub fn body_path(&self, sha256: &str) -> PathBuf {
        self.inner.blobs.path_hex(sha256)
    }

    /// Removes every variant under `primary_key` (purge, or invalidation per
    /// RFC 9111 section 4.4). Returns how many variants were removed; their
    /// bodies are deleted in the background once unreferenced.
    /// Errors: `Index` on sled failures.
    pub fn remove(&self, primary_key: &str) -> Result<u64, StoreError> {
        let inner = &self.inner;
        let _m = inner.read_maintenance();
        let mut keys = Vec::new();
        for k in inner.index.entries.scan_prefix(primary_prefix(primary_key)).keys() {
            keys.push(k.map_err(sled_err)?.to_vec());
        }
        if keys.is_empty() {
            return Ok(0);
        }
        let released = inner.index.remove(&keys)?;
        inner.queue_reap(&released.zero);
        inner.wake_if_reaping();
        Ok(released.removed)
    }

    /// Removes one variant. Returns whether it existed.
    /// Errors: `Index` on sled failures.
    pub fn remove_variant(&self, primary_key: &str, secondary_key: &[u8]) -> Result<bool, StoreError> {
        let inner = &self.inner;
        let _m = inner.read_maintenance();
        let released = inner.index.remove(&[entry_key(primary_key, secondary_key)])?;
        inner.queue_reap(&released.zero);
        inner.wake_if_reaping();
        Ok(released.removed > 0)
    }

    /// Every entry in the index, collected ([`Store::scan`] without the
    /// memory: use that for listings of any size). Undecodable records are
    /// skipped with a warning. Errors: `Index` when sled cannot be read.
    pub fn entries(&self) -> Result<Vec<Entry>, StoreError> {
        self.scan("").collect()
    }

    /// Streams the entries whose primary key starts with `prefix` (`""`:
    /// all of them), decoding one at a time (see [`Scan`]). The prefix is
    /// checked on each row's key before its record is decoded; the index is
    /// ordered by key length first, so the scan still reads every key.
    /// Items are `Err(Index)` when sled cannot be read.
    pub fn scan(&self, prefix: &str) -> Scan {
        Scan { rows: self.inner.index.entries.iter(), prefix: prefix.as_bytes().to_vec(), store: self.clone() }
    }

    /// Current counters (kept in the index, not computed by a scan). If the
    /// totals cannot be read, that is logged and they are reported as 0.
    pub fn stats(&self) -> StoreStats {
        let totals = self.inner.index.totals().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the store's totals");
            Default::default()
        });
        StoreStats {
            entries: totals.entries,
            bodies: totals.bodies,
            bytes_stored: totals.bytes,
            max_size: self.inner.max_size,
            evictions: self.inner.evictions.load(Ordering::Relaxed),
        }
    }

    /// Checks every invariant of SPEC section 3 and, with `repair`, fixes what
    /// it finds (drops entries with missing or corrupt bodies, deletes orphans
    /// and leftovers, rewrites reference counts, LRU rows and totals). Hashes
    /// every body file, so it reads the whole store. Other operations wait
    /// while it runs. Errors: `Io` / `Index` when the store cannot be read.
    pub fn verify(&self, repair: bool) -> Result<VerifyReport, StoreError> {
        self.verify_with_progress(repair, &mut |_, _| {})
    }

    /// [`Store::verify`], calling `progress(hashed, total)` after each body
    /// file is hashed (for a progress bar).
    pub fn verify_with_progress(&self, repair: bool, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport, StoreError> {
        let inner = &self.inner;
        let _m = inner.maintenance.write().unwrap_or_else(|e| e.into_inner());
        inner.apply_touches();
        inner.reap();
        verify::run(inner, repair, progress)
    }

    /// A named sled tree in the same index, for other persistent state that
    /// lives beside the cache (robots.txt snapshots). Its name must not be
    /// one of the store's own trees (`entries`, `lru`, `refs`, `counters`).
    /// Errors: `Index` for a reserved name or when sled cannot open it.
    pub fn extra_tree(&self, name: &str) -> Result<sled::Tree, StoreError> {
        if matches!(name, "entries" | "lru" | "refs" | "counters") {
            return Err(StoreError::Index(format!("tree name {name} is reserved by the store")));
        }
        self.inner.index.db.open_tree(name).map_err(sled_err)
    }

    /// Test support: stops group commits (new bodies stay unsynced, the
    /// checkpoint stays where it is), so that a crash test can simulate a
    /// power loss by damaging the bodies written afterwards.
    #[doc(hidden)]
    pub fn pause_commits_for_tests(&self) {
        self.inner.commits_paused.store(true, Ordering::Release);
    }

    /// Writes pending touches, deletes released bodies, syncs new bodies and
    /// flushes the index to disk (called at shutdown). Errors: `Index` when sled cannot flush.
    pub fn flush(&self) -> Result<(), StoreError> {
        let _m = self.inner.read_maintenance();
        self.inner.apply_touches();
        self.inner.reap();
        self.inner.commit()?;
        self.inner.index.db.flush().map_err(sled_err)?;
        Ok(())
    }
}

/// Decodes one `entries` row; `None` (with a warning) if it is corrupt.
fn decode_entry(key: &[u8], value: &[u8]) -> Option<Entry> {
    let Some((primary_key, secondary_key)) = split_entry_key(key) else {
        tracing::warn!(key = ?String::from_utf8_lossy(key), "skipping an index entry with a malformed key");
        return None;
    };
    let Some(rec) = Record::decode(value) else {
        tracing::warn!(primary_key, "skipping an undecodable index record (run cache verify)");
        return None;
    };
    Some(Entry {
        primary_key,
        secondary_key,
        meta: rec.meta,
        body: rec.body.map(|(h, len)| CommittedBody { sha256: hex::encode(h), len }),
        last_used: rec.stamp,
    })
}

#[cfg(test)]
mod tests;
