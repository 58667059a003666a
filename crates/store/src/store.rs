//! [`Store`]: the handle to an open store and its public operations.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};

use crawlcache_base::locks::lock;

use crate::apply::Op;
use crate::blobs::Blobs;
use crate::body_plan::Plan;
use crate::body_writer::BodyWriter;
use crate::error::StoreError;
use crate::fsops::io_err;
use crate::index::{entry_key, parse_hash, primary_prefix, sled_err, Index, Place, SlotBody};
use crate::inner::{Inner, RECENT_PACKED};
use crate::maintenance::{self, Closer};
use crate::open::open_index;
use crate::packs::{self, Packs, RecBody, Record};
use crate::scan::{Page, PageCursor, Scan};
use crate::types::*;
use crate::verify::VerifyReport;
use crate::{format, hints, index, legacy, migrate, presence, record_cache, verify};

/// The directory of the store's tree in a build with the `index-fjall`
/// feature (crates/store/src/kv.rs), beside sled's `index/`.
const FJALL_DIR: &str = "index-fjall";

/// Refuses a store in `dir` made by the other kind of build: one whose
/// rows are in fjall when this build keeps them in sled, or the reverse
/// (the rows would be missing). Checked before anything is opened, so a
/// refused store is left as it was. Errors: `Format`.
fn check_engine(dir: &Path, found: format::Found) -> Result<(), StoreError> {
    let fjall_rows = dir.join(FJALL_DIR).exists();
    let made_by = match (cfg!(feature = "index-fjall"), fjall_rows) {
        (false, true) => "the index-fjall feature (its index in fjall)",
        (true, false) if found != format::Found::New => "its index in sled",
        _ => return Ok(()),
    };
    Err(StoreError::Format(format!(
        "it was made by a build with {made_by}; this build keeps its index in {}",
        if cfg!(feature = "index-fjall") { "fjall" } else { "sled" }
    )))
}

/// The index of the store in `dir` over sled's `db`: the store's rows in
/// sled's tree, or in fjall's in a build with the `index-fjall` feature
/// ([`check_engine`] has refused a store of the other kind).
fn open_tree(
    dir: &Path,
    db: sled::Db,
    cache: u64,
    filter_bytes: usize,
) -> Result<Index, StoreError> {
    #[cfg(feature = "index-fjall")]
    {
        let tree = crate::kv::FjallTree::open(&dir.join(FJALL_DIR), cache)?;
        Index::with_tree(db, Box::new(tree), filter_bytes)
    }
    #[cfg(not(feature = "index-fjall"))]
    {
        let _ = (dir, cache);
        Index::new(db, filter_bytes)
    }
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
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.dir)
            .field("max_size", &self.inner.max_size)
            .finish()
    }
}

impl Store {
    /// Opens (creating if needed) the store under `dir` with a budget of
    /// `max_size` bytes of bodies and records on disk
    /// ([`crate::StoreStats::budget_bytes`]) and the other [`StoreOptions`] at their
    /// defaults. See [`crate::Store::open_with`].
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
        check_engine(dir, found)?;
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
        let index = open_tree(dir, db, options.index_cache, filter_bytes)?;
        let packs =
            Packs::open(&dir.join("packs"))?.keeping_written_pages(options.keep_written_pages);
        let mut recovered = maintenance::open_sweep(dir, &blobs, &index, &packs)?;
        if let format::Found::Previous(_) = found {
            // Format 3 (also what a format 1 or 2 store became above) kept
            // a copy of a short body in every entry that had it.
            recovered.next_stamp =
                migrate::merge_duplicates(dir, &index, &packs, recovered.next_stamp)?;
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
            recent: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(RECENT_PACKED).unwrap_or(NonZeroUsize::MIN),
            )),
            records: Mutex::new(record_cache::RecordCache::new(options.record_cache)),
            lookups: Mutex::new(record_cache::LookupCache::new(options.record_cache / 2)),
            hints,
            body_filter: presence::Presence::new(filter_bytes),
        });
        let thread = maintenance::spawn(Arc::downgrade(&inner), wake_rx)?;
        let store =
            Store { _closer: Arc::new(Closer { wake: wake_tx, thread: Some(thread) }), inner };
        // A crash between an insert and its eviction, or a smaller budget
        // than last time, leaves more bytes than the budget allows.
        let evicted = store.inner.evict_to_budget()?;
        if evicted > 0 {
            tracing::info!(
                evicted,
                max_size = options.max_size,
                "evicted entries to fit the size budget at start-up"
            );
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

    /// A value that differs whenever [`crate::Store::lookup`] of `primary_key` may
    /// answer differently than when the value was read, except for the
    /// entries' `last_used` stamps: it combines this store's number in the
    /// process, the index generation covering `primary_key` (moved by every
    /// insert, removal, eviction or rewrite of its rows) and a counter of
    /// recorded freshenings (pending new metadata). Read it before the
    /// lookup: a caller that keeps a lookup's answer under the version it
    /// read first may use that answer while the version is unchanged.
    pub fn lookup_version(&self, primary_key: &str) -> LookupVersion {
        let inner = &self.inner;
        LookupVersion {
            store: inner.id,
            generation: inner.index.generation(primary_key),
            freshenings: inner.freshenings.load(Ordering::Acquire),
        }
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
            // Never stored (crates/store/src/presence.rs): nothing to read.
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

    /// The variant `(primary_key, secondary_key)`, as [`crate::Store::lookup`]
    /// returns it, if stored: one index row read (no scan of the key's
    /// variants), then its record.
    /// Errors: as [`crate::Store::lookup`].
    pub fn lookup_variant(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
    ) -> Result<Option<Entry>, StoreError> {
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
    /// reaches zero is deleted). Then evicts entries until the bytes the
    /// budget counts ([`crate::StoreStats::budget_bytes`]) fit it. Returns the number of entries evicted.
    ///
    /// `body` is one returned by [`crate::BodyWriter::finish`], or the body of an
    /// entry [`crate::Store::lookup`] returned (a body file, or a short body read
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

    /// [`crate::Store::insert`] when it is sure to be quick: `body` is a short body
    /// held in memory ([`crate::BodyWriter::finish`] of fewer than `inline_max`
    /// bytes) or a body file already in place (as `finish` or
    /// [`BodyWriter::finish_quick`] leave it), the bytes stored leave room
    /// for it (nothing to evict), and no maintenance holds the store. The
    /// record is then appended to the pack (a write to the page cache, never
    /// synced here) and its index row kept in memory, so an async task may
    /// call it without blocking for long. `None` (nothing done, `body` still
    /// pinned) when it is not quick: call [`crate::Store::insert`] from a blocking
    /// thread instead.
    pub fn try_insert_quick(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
        meta: &[u8],
        body: &CommittedBody,
    ) -> Option<Result<u64, StoreError>> {
        let inner = &self.inner;
        // The record adds its header, keys and metadata to the body.
        let record = body.len
            + (crate::packs::HEADER_LEN + primary_key.len() + secondary_key.len() + meta.len())
                as u64;
        if inner.index.state().budget_bytes().saturating_add(record) > inner.max_size {
            return None;
        }
        let _m = match inner.maintenance.try_read() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let hash = parse_hash(&body.sha256)?;
        // A short body must be held in memory, and either certainly not
        // stored yet or stored where it is found without reading a pack
        // segment (shared: its reference-count row says so; or its record
        // cached): what a miss for a body many URLs serve meets.
        if body.len < inner.inline_max
            && (!inner.blobs.is_small_pinned(&hash)
                || (inner.body_maybe_stored(&hash) && !inner.body_in_memory(&hash)))
        {
            return None;
        }
        Some(self.insert_locked(primary_key, secondary_key, meta, Some(body)))
    }

    /// [`crate::Store::insert`], the maintenance lock held (read) by the caller.
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
            return Err(StoreError::Index(format!(
                "a primary key of {} bytes is too long to store",
                primary_key.len()
            )));
        }
        let key = entry_key(primary_key, secondary_key);
        let plan = match body {
            None => Plan::None,
            Some(b) => {
                let h = parse_hash(&b.sha256).ok_or_else(|| {
                    StoreError::Index(format!("{:?} is not a lower-case hex SHA-256", b.sha256))
                })?;
                if b.len > inner.max_size {
                    self.release_committed(b);
                    return Err(StoreError::TooLarge { len: b.len, max_size: inner.max_size });
                }
                inner.plan_body(&key, &h, b.len)?
            }
        };
        let file_pin = match &plan {
            Plan::Ref { hash, create: Some(Place::File), .. } => Some(hash.to_owned()),
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

    /// Releases a body returned by [`crate::BodyWriter::finish`] that will not be
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
    /// seen by [`crate::Store::lookup`] at once) and written with the next batch of
    /// touches, like [`crate::Store::touch`]. A crash can lose a freshening of the
    /// last second; the entry is then merely staler than it was.
    pub fn update_meta(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
        meta: &[u8],
    ) -> Result<bool, StoreError> {
        let key = entry_key(primary_key, secondary_key);
        if self.inner.index.get(&key)?.is_none() {
            return Ok(false);
        }
        self.inner.record_pending(&key, Some(meta.to_vec()));
        Ok(true)
    }

    /// Marks a variant as just used (LRU order). Cheap: the new stamp is kept
    /// in memory and written with the next batch (see [`crate::TOUCH_BATCH`]), by
    /// [`crate::Store::flush`], or at close. Touching a missing variant does nothing.
    pub fn touch(&self, primary_key: &str, secondary_key: &[u8]) {
        index::with_entry_key(primary_key, secondary_key, |key| {
            self.inner.record_pending(key, None)
        });
    }

    /// Opens a stored body for reading, by its SHA-256. A body file is
    /// opened as it is; a short body kept in a pack record is copied into
    /// an unnamed temporary file (the store's own readers use
    /// [`crate::Store::read_body`], which does not copy). A packed body is found
    /// when it is shared (its reference-count row names its record), or
    /// was returned by a recent [`crate::Store::lookup`] or [`crate::BodyWriter::finish`]
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
            None => self
                .inner
                .shared_bytes(&hash)?
                .ok_or_else(|| StoreError::MissingBody(sha256.to_string()))?,
        };
        let tmp = &self.inner.blobs.tmp;
        let mut f = tempfile::tempfile_in(tmp)
            .map_err(io_err("create a temporary copy of a body in", tmp))?;
        use std::io::{Seek, Write};
        f.write_all(&bytes)
            .and_then(|_| f.rewind())
            .map_err(io_err("write a temporary copy of a body in", tmp))?;
        Ok(f)
    }

    /// Opens the body of `entry` (as returned by [`crate::Store::lookup`]) for
    /// reading: a body file, or the bytes of a short body from its pack
    /// record. An entry without a body reads as no bytes.
    /// Errors: `MissingBody` when the body is gone (the entry was replaced
    /// or evicted meanwhile, or its file deleted), `Io` when it cannot be
    /// read.
    pub fn read_body(&self, entry: &Entry) -> Result<BodyData, StoreError> {
        let Some(body) = &entry.body else { return Ok(BodyData::Bytes(Vec::new())) };
        let hash =
            parse_hash(&body.sha256).ok_or_else(|| StoreError::MissingBody(body.sha256.clone()))?;
        if let Some(bytes) = self.inner.packed_bytes(&hash) {
            return Ok(BodyData::Bytes(bytes.to_vec()));
        }
        // Not seen recently: through the entry's own row.
        let key = entry_key(&entry.primary_key, &entry.secondary_key);
        if let Some(slot) = self.inner.index.get(&key)? {
            match slot.body {
                SlotBody::Inline { .. } => {
                    if let Ok(Record { body: RecBody::Inline { hash: h, bytes }, .. }) =
                        self.inner.packs.read(&slot.loc)
                    {
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
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(StoreError::MissingBody(body.sha256.clone()))
            }
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
    pub fn remove_variant(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
    ) -> Result<bool, StoreError> {
        Ok(self.remove_variant_freeing(primary_key, secondary_key)?.entries > 0)
    }

    /// Removes one variant and says what that gave back: its body's bytes
    /// only when no other entry references that body (`freed`; the pack
    /// space itself is reclaimed by compaction, a body file deleted in the
    /// background). Errors: `Index` on sled failures.
    pub fn remove_variant_freeing(
        &self,
        primary_key: &str,
        secondary_key: &[u8],
    ) -> Result<Removal, StoreError> {
        let inner = &self.inner;
        let _m = inner.read_maintenance();
        let applied = inner
            .index
            .apply(&[Op::Remove { key: entry_key(primary_key, secondary_key), expect: None }])?;
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
        Ok(Compaction {
            pack_bytes_before: before,
            pack_bytes_after: inner.packs.bytes(),
            records_moved: moved,
        })
    }

    /// Every entry in the index, collected ([`crate::Store::scan`] without the
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
        Scan::new(self.inner.index.entry_rows(), prefix, Arc::clone(&self.inner), spilled)
    }

    /// A page of the entries whose primary key `keep` accepts: at most
    /// `limit` entries, after `after` (from the start with `None`), by a
    /// key-range scan of the index that looks at no more than `budget` rows
    /// (at least one). Only the keys are read until `keep` accepts one, so
    /// a page over a store of ten million entries costs `budget` key reads
    /// at most, whatever the filter; the next page goes on from
    /// [`Page::next`], also when the budget ended this one before `limit`
    /// entries were found. Entries inserted or removed meanwhile may or may
    /// not appear. Errors: `Index` when sled cannot be read, `Io` when a
    /// pack cannot.
    pub fn page(
        &self,
        after: Option<&PageCursor>,
        limit: usize,
        budget: usize,
        keep: impl FnMut(&str) -> bool,
    ) -> Result<Page, StoreError> {
        crate::scan::page(&self.inner, after, limit, budget, keep)
    }

    /// Current counters (kept in the index, not computed by a scan).
    pub fn stats(&self) -> StoreStats {
        let st = self.inner.index.state();
        StoreStats {
            entries: st.entries,
            bodies: st.bodies,
            bytes_stored: st.bytes,
            budget_bytes: st.budget_bytes(),
            bytes_referenced: st.referenced,
            max_size: self.inner.max_size,
            evictions: self.inner.evictions.load(Ordering::Relaxed),
            pack_bytes: self.inner.packs.bytes(),
            filters_ready: self.inner.index.presence_ready() && self.inner.body_filter.is_ready(),
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

    /// [`crate::Store::verify`], calling `progress(hashed, total)` after each body
    /// file is hashed (for a progress bar).
    pub fn verify_with_progress(
        &self,
        repair: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport, StoreError> {
        let inner = &self.inner;
        let _m = crawlcache_base::locks::write(&inner.maintenance);
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
    /// sled on [`crate::Store::flush`]), so that a crash test can simulate a power
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
        self.inner.index.flush()?;
        Ok(())
    }
}
