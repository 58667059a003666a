//! [`Inner`]: the state every [`crate::Store`] clone and
//! [`crate::BodyWriter`] share, and how it reads entries and bodies.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{mpsc, Arc, Mutex, RwLock};

use crawlcache_base::locks::lock;

use crate::blobs::Blobs;
use crate::error::StoreError;
use crate::index::{self, split_entry_key, Hash, Index, Place, Slot};
use crate::packs::{self, Loc, Packs, ReadError, RecBody, Record};
use crate::types::{CommittedBody, Entry};
use crate::{hints, presence, record_cache};

/// Packed bodies recently seen, by hash, and where (an entry record holding
/// it inline, or its shared body record): lets [`Store::open_body`],
/// [`Store::read_body`] and [`Store::insert`] find a packed body from its
/// hash without reading the index.
pub(crate) const RECENT_PACKED: usize = 65536;

/// The shared state behind every [`Store`] clone and [`BodyWriter`].
pub(crate) struct Inner {
    pub(crate) dir: PathBuf,
    pub(crate) max_size: u64,
    pub(crate) inline_max: u64,
    /// `StoreOptions::keep_written_pages`.
    pub(crate) keep_written_pages: bool,
    pub(crate) index: Index,
    pub(crate) blobs: Blobs,
    pub(crate) packs: Packs,
    /// Touches and freshenings not yet written: entry key -> newest stamp
    /// and, after a freshening, the new metadata.
    pub(crate) pending: Mutex<HashMap<Vec<u8>, Pending>>,
    /// Moves after each freshening is recorded in `pending` (see
    /// [`Store::lookup_version`]).
    pub(crate) freshenings: AtomicU64,
    /// This store's number in the process ([`Store::lookup_version`]).
    pub(crate) id: u64,
    pub(crate) next_stamp: AtomicU64,
    pub(crate) evictions: AtomicU64,
    /// Serialises walks of the log's tail (eviction, compaction).
    pub(crate) evict_lock: Mutex<()>,
    /// Held from appending a record to writing its index row, and by the
    /// tail walk while it judges a record: the tail never passes a record
    /// whose row is still to be written.
    pub(crate) log_lock: Mutex<()>,
    /// Hashes whose count reached zero; their files are deleted by `reap`.
    pub(crate) reap_queue: Mutex<HashSet<Hash>>,
    pub(crate) reap_lock: Mutex<()>,
    /// Shared by every mutation; taken exclusively by `verify`.
    pub(crate) maintenance: RwLock<()>,
    /// Wakes the background thread (`true`: work to do, `false`: stop).
    pub(crate) wake: Mutex<mpsc::Sender<bool>>,
    /// Set while a wake-up is queued, so hot paths send at most one.
    pub(crate) wake_queued: AtomicBool,
    /// Body files renamed into place but not yet synced (group commit).
    pub(crate) unsynced: Mutex<Vec<Hash>>,
    /// The last checkpoint stamp written: every record stamped below it is
    /// synced, with its body file.
    pub(crate) checkpointed: AtomicU64,
    /// Serialises commits.
    pub(crate) commit_lock: Mutex<()>,
    /// The log's tail as of the last commit (segments before it deleted).
    pub(crate) tail_committed: Mutex<packs::Pos>,
    /// The log's end at the last commit (`Pos::default()` before the first):
    /// with no record appended since, stamps issued by touches alone need
    /// no commit (they are written by `apply_touches`).
    pub(crate) end_committed: Mutex<packs::Pos>,
    /// Test support: commits do nothing (see [`Store::pause_commits_for_tests`]).
    pub(crate) commits_paused: AtomicBool,
    /// See [`RECENT_PACKED`].
    pub(crate) recent: Mutex<lru::LruCache<Hash, Loc>>,
    /// Pack records read recently, by location (`record_cache.rs`).
    pub(crate) records: Mutex<record_cache::RecordCache>,
    /// Recent lookups by primary key (`record_cache.rs`).
    pub(crate) lookups: Mutex<record_cache::LookupCache>,
    /// Where the pack's inline bodies are, by hash (`hints.rs`).
    pub(crate) hints: hints::Hints,
    /// The filter of stored short bodies: fingerprints of every inline
    /// body and every shared one ("certainly not stored" / "maybe").
    pub(crate) body_filter: presence::Presence,
}

impl Inner {
    /// The bytes of the shared body `hash` (its reference-count row names
    /// a shared body record), checked against its hash; `None` when it is
    /// not a shared short body.
    pub(crate) fn shared_bytes(&self, hash: &Hash) -> Result<Option<Arc<Vec<u8>>>, StoreError> {
        let Some(index::RefRow { place: Place::Packed(loc), .. }) = self.index.ref_row_of(hash)?
        else {
            return Ok(None);
        };
        match self.read_record(&loc).as_deref() {
            Ok(Record { body: RecBody::Shared { hash: h, bytes }, .. }) if h == hash => {
                lock(&self.recent).put(*hash, loc);
                Ok(Some(bytes.clone()))
            }
            _ => Ok(None),
        }
    }

    /// Whether the stored short body `hash` is found without reading a pack
    /// segment: a shared body (its reference-count row, read from the
    /// index as a lookup reads an entry, names it), or one written or read
    /// recently whose record is still in the record cache. The quick
    /// insert's test for a body the filter says may be stored.
    pub(crate) fn body_in_memory(&self, hash: &Hash) -> bool {
        if matches!(self.index.ref_row_of(hash), Ok(Some(_))) {
            return true;
        }
        let Some(loc) = lock(&self.recent).peek(hash).copied() else { return false };
        lock(&self.records).get(&loc).is_some()
    }

    /// The bytes of the packed body `hash`, if it is pinned or was seen
    /// recently (checked against its hash).
    pub(crate) fn packed_bytes(&self, hash: &Hash) -> Option<Arc<Vec<u8>>> {
        if let Some(b) = self.blobs.peek_small(hash) {
            return Some(b);
        }
        let loc = *lock(&self.recent).get(hash)?;
        match self.read_record(&loc).as_deref() {
            Ok(Record {
                body: RecBody::Inline { hash: h, bytes } | RecBody::Shared { hash: h, bytes },
                ..
            }) if h == hash => Some(bytes.clone()),
            _ => {
                lock(&self.recent).pop(hash);
                None
            }
        }
    }

    /// The record at `loc`, from the record cache or read (and checked)
    /// from its segment, then cached. For the lookup path only: verify,
    /// recovery and the tail walk read the disk.
    pub(crate) fn read_record(&self, loc: &Loc) -> Result<Arc<Record>, ReadError> {
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
    pub(crate) fn read_entry(&self, key: &[u8], value: &[u8]) -> Result<Option<Entry>, StoreError> {
        Ok(self.read_entry_located(key, value)?.map(|(e, _)| e))
    }

    /// [`Inner::read_entry`], with the hash and location of the entry's
    /// short body when it has one in its record.
    pub(crate) fn read_entry_located(
        &self,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<record_cache::Located>, StoreError> {
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
            tracing::warn!(
                primary_key,
                "skipping an entry whose record belongs to another key (run cache verify)"
            );
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
            RecBody::Ref { hash, len } => {
                Some(CommittedBody { sha256: hex::encode(hash), len: *len })
            }
        };
        Ok(Some((
            Entry {
                primary_key,
                secondary_key,
                meta: rec.meta.clone(),
                body,
                last_used: slot.stamp,
            },
            packed,
        )))
    }
}

/// A touch or freshening not yet written to the index.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    /// The newest stamp.
    pub stamp: u64,
    /// New metadata (a 304 freshening), if any.
    pub meta: Option<Vec<u8>>,
}
