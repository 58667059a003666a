//! The sled index of store format 4: one tree, `store`, mapping each entry
//! key to the location of its current pack record (`packs.rs`), plus a few
//! rows of the store's own under keys that start with `0xFF` (an entry key
//! starts with its primary key's length, which is below 16 MiB, so its first
//! byte is never `0xFF`).
//!
//! | key                         | value                                          |
//! |-----------------------------|------------------------------------------------|
//! | [`entry_key`]               | [`Slot`]: stamp, record location, body length (and SHA-256 of a referenced body) |
//! | `FF 'r'` + SHA-256          | [`RefRow`]: entries referencing a body by hash, its length and where it is (a file, or a shared body record) |
//! | `FF 's'`                    | [`State`]: totals, the log's tail and end, the largest stamp |
//! | `FF 'c'`                    | [`Checkpoint`]: the last group commit          |
//!
//! How a body is kept (SPEC section 3: every body named by its SHA-256 and
//! stored once):
//! - a short body (under `inline_max`) that one entry has lives in that
//!   entry's pack record, and its row says `Inline` — no row of its own,
//!   since hash-keyed sled rows are the costly kind (below);
//! - once a second entry stores the same bytes, they are written once more
//!   as a shared body record, a reference-count row names it, and both
//!   entries' rows say `Ref` (the first one's record keeps its now unused
//!   copy until the tail walk rewrites it without: [`Op::Share`]);
//! - a body of `inline_max` bytes or more is a file, with a
//!   reference-count row from its first entry on.
//!
//! So a body is counted in the totals once however many entries reference
//! it, and its bytes are given back only when its last reference goes
//! ([`Applied::freed`]).
//!
//! Every change goes through [`Index::apply`], which works out the new rows
//! of a list of [`Op`]s (one at a time, under the index lock, so reading a
//! row and writing its new value cannot interleave with another change) and
//! keeps them in memory, in an overlay every read of the index sees first.
//! The group commit moves the overlay into sled as one batch, together with
//! the [`State`] row and the [`Checkpoint`] ([`Index::begin_commit`],
//! [`Index::finish_commit`]): a sled batch costs about the same for one row
//! as for hundreds (measured with sled 0.34: ~160 µs each), and sled applies
//! it atomically, so after a crash the totals and reference counts always
//! agree with the entries they describe, and the state's `log_end` is at or
//! past the end of every record an entry points at. A crash loses the
//! overlay: the changes of the last commit interval.
//!
//! What the index holds per entry is kept small on purpose (measured with
//! sled 0.34: about 280 bytes of disk per URL-keyed row even with a 4-byte
//! value, and every 32-byte random key, such as a row per body hash, adds
//! about 530 more; docs/store.md, "What the store costs"): the stored head and small
//! bodies live in the pack, and hash-keyed rows exist only for bodies
//! that are files or shared. Finding whether a short body is stored
//! already, by its hash, is the work of `hints.rs` and the filter in
//! front of it, not of the index.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crawlcache_base::locks::lock;

use crate::error::StoreError;
pub(crate) use crate::hash::{fnv1a, parse_hash, Hash};
pub(crate) use crate::kv::sled_err;
pub(crate) use crate::kv::Rows;
use crate::kv::{Batch, IndexTree, SledTree};
use crate::presence;
pub(crate) use crate::rows::*;

/// Index rows changed in memory and not yet in sled.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    /// Entry rows (`None`: removed).
    pub(crate) slots: BTreeMap<Vec<u8>, Option<Slot>>,
    /// Reference-count rows (`None`: removed).
    pub(crate) refs: HashMap<Hash, Option<RefRow>>,
}

impl Overlay {
    fn is_empty(&self) -> bool {
        self.slots.is_empty() && self.refs.is_empty()
    }

    /// Lays `newer` over this overlay.
    fn absorb(&mut self, newer: Overlay) {
        self.slots.extend(newer.slots);
        self.refs.extend(newer.refs);
    }

    /// The batch writing these rows.
    fn batch(&self) -> Batch {
        let mut batch = Batch::default();
        for (k, v) in &self.slots {
            match v {
                Some(slot) => batch.insert(k, slot.encode()),
                None => batch.remove(k),
            }
        }
        for (h, row) in &self.refs {
            match row {
                Some(r) => batch.insert(refs_key(h), r.encode()),
                None => batch.remove(refs_key(h)),
            }
        }
        batch
    }
}

/// What the index lock guards.
pub(crate) struct Mem {
    /// The state with every change applied (in sled or not).
    pub(crate) state: State,
    /// Changes since the last commit began.
    pub(crate) active: Overlay,
    /// Changes a commit is writing to sled (read after `active`).
    pub(crate) flushing: Option<Arc<Overlay>>,
    /// A commit is writing `flushing` to sled right now, outside this lock
    /// ([`Index::finish_commit`]): nothing else may write rows to sled
    /// until it is done (a spill from `apply` waits for the next round).
    pub(crate) committing: bool,
}

/// Past this many changed rows in memory, the writer moves them to sled
/// itself (a commit that cannot keep up must not let memory grow).
pub(crate) const SPILL_ROWS: usize = 32 * 1024;

/// How many change counters [`Index::generation`] spreads primary keys over.
const GENERATIONS: usize = 4096;

/// The counter of [`Index::generation`] that `primary` (a primary key's
/// bytes) falls on (FNV-1a).
fn generation_slot(primary: &[u8]) -> usize {
    (fnv1a(primary) % GENERATIONS as u64) as usize
}

/// The open sled database and the store's tree.
pub(crate) struct Index {
    /// sled's database: the store's tree in every build but `index-fjall`'s,
    /// and the other named trees (`Store::extra_tree`).
    pub db: sled::Db,
    /// The tree of the store's rows ([`crate::kv`]).
    pub tree: Box<dyn IndexTree>,
    pub(crate) mem: Mutex<Mem>,
    /// Change counters by primary key (see [`Index::generation`]).
    pub(crate) generations: Box<[AtomicU64]>,
    /// Which primary keys may have entry rows ([`Index::may_contain`]).
    pub(crate) presence: presence::Presence,
    /// Held while a commit writes rows to sled outside `mem`, and taken
    /// before `mem` by the other writers of sled rows (`spill`, `rewrite`,
    /// `remove_raw`; the spill inside `apply` instead waits for a round
    /// without a commit writing, see `Mem::committing`), so writes land in
    /// order. Lock order: `commit_writes`, then `mem`.
    pub(crate) commit_writes: Mutex<()>,
}

/// A build of the filter of stored keys in progress
/// ([`Index::build_presence_step`]).
pub(crate) struct PresenceBuild {
    fresh: presence::Building,
    /// The last sled key added; `None` before the first.
    after: Option<Vec<u8>>,
}

/// A commit in progress (see [`Index::begin_commit`]).
pub(crate) struct CommitBatch {
    state: State,
    overlay: Arc<Overlay>,
}

impl CommitBatch {
    /// The state the commit's changes lead to.
    pub fn state(&self) -> State {
        self.state
    }

    /// Whether it has no changes.
    pub fn is_empty(&self) -> bool {
        self.overlay.is_empty()
    }
}

pub(crate) fn corrupt(what: String) -> StoreError {
    StoreError::Index(format!("{what}; run `crawlcache cache verify --repair` to rebuild it"))
}

/// Bytes of the bodies kept in files, from the reference-count rows in
/// `tree` (a scan of those rows: one per file and per shared body record).
/// Errors: `Index` when the tree cannot be read or a row is corrupt.
fn file_bytes_of(tree: &dyn IndexTree) -> Result<u64, StoreError> {
    let mut total = 0u64;
    for item in tree.scan_prefix(&REFS) {
        let (k, v) = item?;
        let row = RefRow::decode(&v).ok_or_else(|| {
            corrupt(format!("the reference count of body {} is corrupt", hex::encode(&k[2..])))
        })?;
        if row.place == Place::File {
            total = total.saturating_add(row.len);
        }
    }
    Ok(total)
}

impl Index {
    /// Opens the store's tree in `db` and reads its state row.
    /// Errors: `Index` when sled fails or the state row is corrupt.
    /// `presence_bytes`: the size of the filter of stored primary keys
    /// ([`Index::may_contain`]), built by [`Index::build_presence`].
    pub fn new(db: sled::Db, presence_bytes: usize) -> Result<Index, StoreError> {
        let tree = db.open_tree(TREE).map_err(sled_err)?;
        Index::with_tree(db.clone(), Box::new(SledTree { db, tree }), presence_bytes)
    }

    /// [`Index::new`] with the store's rows in `tree` (crates/store/src/kv.rs)
    /// instead of sled's tree of `db`.
    pub fn with_tree(
        db: sled::Db,
        tree: Box<dyn IndexTree>,
        presence_bytes: usize,
    ) -> Result<Index, StoreError> {
        let state = match tree.get(&STATE_KEY)? {
            None => State::default(),
            Some(v) => {
                let mut st = State::decode(&v)
                    .ok_or_else(|| corrupt("the store's state row is corrupt".into()))?;
                if v.len() < STATE_ROW_LEN {
                    // Written before the row kept the bytes of body files:
                    // counted once here, written with the next commit.
                    st.file_bytes = file_bytes_of(tree.as_ref())?;
                }
                st
            }
        };
        let generations = (0..GENERATIONS).map(|_| AtomicU64::new(0)).collect();
        Ok(Index {
            db,
            tree,
            mem: Mutex::new(Mem {
                state,
                active: Overlay::default(),
                flushing: None,
                committing: false,
            }),
            commit_writes: Mutex::new(()),
            generations,
            presence: presence::Presence::new(presence_bytes),
        })
    }

    /// A counter that moves whenever a row of `primary_key`'s variants
    /// changes (stored, removed, touched, moved by the tail walk, repaired):
    /// a lookup result read while it had one value still holds while it
    /// keeps that value (the lookup cache of `Store::lookup`). Read it
    /// before reading the rows. Keys share counters, so a change to another
    /// key may move it too (only a wasted re-read).
    pub fn generation(&self, primary_key: &str) -> u64 {
        self.generations[generation_slot(primary_key.as_bytes())].load(Ordering::Acquire)
    }

    /// Whether `primary_key` may have entry rows: `false` only when it
    /// certainly has none (crates/store/src/presence.rs; "maybe" until the filter
    /// is built).
    pub fn may_contain(&self, primary_key: &str) -> bool {
        self.presence.may_contain(primary_key.as_bytes())
    }

    /// Whether the filter of [`Index::may_contain`] answers (was built).
    pub fn presence_ready(&self) -> bool {
        self.presence.is_ready()
    }

    /// Whether the filter of [`Index::may_contain`] should be (re)built:
    /// never built yet, or holding more keys than it was sized for.
    pub fn presence_needs_build(&self) -> bool {
        self.presence.needs_build()
    }

    /// One step of building the filter of [`Index::may_contain`] from
    /// every entry row, while rows keep being written (keys added meanwhile
    /// go to the new filter too): the first step takes the rows held in
    /// memory and starts `build`; each step then adds at most `rows` of
    /// sled's rows, resuming after the last key seen. Returns whether the
    /// build is done (the new filter then answers). Called by the store's
    /// background thread a step per round, so a large index never holds
    /// up its group commits. Errors: `Index` when sled cannot be read (the
    /// build is given up; the filter keeps answering as before).
    pub fn build_presence_step(
        &self,
        build: &mut Option<PresenceBuild>,
        rows: usize,
    ) -> Result<bool, StoreError> {
        if build.is_none() {
            let mem = lock(&self.mem);
            let Some(fresh) = self.presence.start_build() else { return Ok(true) };
            let flushing = mem.flushing.iter().flat_map(|f| f.slots.keys());
            for k in mem.active.slots.keys().chain(flushing) {
                if let Some(p) = primary_key_bytes(k) {
                    presence::add_to(&fresh, p);
                }
            }
            *build = Some(PresenceBuild { fresh, after: None });
        }
        let Some(b) = build.as_mut() else { return Ok(true) };
        let range = match &b.after {
            None => self.entry_rows(),
            Some(k) => self.tree.range(
                std::ops::Bound::Excluded(k.as_slice()),
                std::ops::Bound::Excluded(&ENTRIES_END[..]),
            ),
        };
        let mut seen = 0;
        for item in range {
            let (k, _) = match item {
                Ok(row) => row,
                Err(e) => {
                    self.presence.abandon_build();
                    *build = None;
                    return Err(e);
                }
            };
            if let Some(p) = primary_key_bytes(&k) {
                presence::add_to(&b.fresh, p);
            }
            seen += 1;
            if seen >= rows {
                b.after = Some(k.to_vec());
                return Ok(false);
            }
        }
        let Some(done) = build.take() else { return Ok(true) };
        let _mem = lock(&self.mem);
        self.presence.finish_build(done.fresh);
        Ok(true)
    }

    /// Moves the counter of the entry key `key` (under the index lock, so
    /// that no reader reads the rows between the move and the change).
    pub(crate) fn changed(&self, key: &[u8]) {
        match primary_key_bytes(key) {
            Some(p) => {
                self.generations[generation_slot(p)].fetch_add(1, Ordering::AcqRel);
            }
            None => self.changed_all(),
        }
    }

    /// Moves every counter (a repair that rewrites rows wholesale).
    fn changed_all(&self) {
        for g in self.generations.iter() {
            g.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Whether changes wait in memory for the next commit.
    pub fn has_changes(&self) -> bool {
        !lock(&self.mem).active.is_empty()
    }

    /// The state with every change applied.
    pub fn state(&self) -> State {
        lock(&self.mem).state
    }

    /// Sets the total of bytes every entry references (the migration of a
    /// format-3 store, which did not keep it); written with the next spill
    /// or commit.
    pub fn set_referenced(&self, bytes: u64) {
        lock(&self.mem).state.referenced = bytes;
    }

    /// The overlay's word on `key`: `Some(row)` when it changed it.
    fn overlaid(&self, key: &[u8]) -> Option<Option<Slot>> {
        let mem = lock(&self.mem);
        if let Some(s) = mem.active.slots.get(key) {
            return Some(*s);
        }
        mem.flushing.as_ref().and_then(|f| f.slots.get(key).copied())
    }

    /// The slot of `key`, if it is an entry (undecodable rows read as `Err`).
    pub fn get(&self, key: &[u8]) -> Result<Option<Slot>, StoreError> {
        if let Some(s) = self.overlaid(key) {
            return Ok(s);
        }
        match self.tree.get(key)? {
            None => Ok(None),
            Some(v) => Slot::decode(&v).map(Some).ok_or_else(|| {
                corrupt(format!("the index row of {:?} is corrupt", String::from_utf8_lossy(key)))
            }),
        }
    }

    /// Every entry row whose key starts with `prefix`, in key order, as raw
    /// (key, value) pairs: sled's rows with the overlay laid over them.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<RawRow>, StoreError> {
        use std::ops::Bound;
        let range = (Bound::Included(prefix), Bound::Unbounded);
        // The overlay's rows under the prefix: the flushing batch's first,
        // then the active one's, which are newer.
        let mut over: Vec<(Vec<u8>, Option<Slot>)> = Vec::new();
        {
            let mem = lock(&self.mem);
            let mut lay = |rows: &BTreeMap<Vec<u8>, Option<Slot>>| {
                for (k, v) in
                    rows.range::<[u8], _>(range).take_while(|(k, _)| k.starts_with(prefix))
                {
                    match over.iter_mut().find(|(o, _)| o == k) {
                        Some(o) => o.1 = *v,
                        None => over.push((k.clone(), *v)),
                    }
                }
            };
            if let Some(f) = &mem.flushing {
                lay(&f.slots);
            }
            lay(&mem.active.slots);
        }
        // sled yields its rows in key order; the overlay is merged in.
        let mut out: Vec<RawRow> = Vec::new();
        for item in self.tree.scan_prefix(prefix) {
            let (k, v) = item?;
            out.push((k.to_vec(), v.to_vec()));
        }
        for (k, v) in over {
            match (out.binary_search_by(|(o, _)| o.as_slice().cmp(&k)), v) {
                (Ok(i), Some(slot)) => out[i].1 = slot.encode(),
                (Ok(i), None) => {
                    out.remove(i);
                }
                (Err(i), Some(slot)) => out.insert(i, (k, slot.encode())),
                (Err(_), None) => {}
            }
        }
        Ok(out)
    }

    /// Every entry row in sled, in key order (callers make sure the overlay
    /// is written first: [`Index::spill`]).
    pub fn entry_rows(&self) -> Rows {
        self.tree.range(std::ops::Bound::Unbounded, std::ops::Bound::Excluded(&ENTRIES_END[..]))
    }

    /// Makes every change written to the tree (and to sled's other trees)
    /// durable. Errors: `Index` when the engine cannot flush.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.tree.flush()?;
        if cfg!(feature = "index-fjall") {
            self.db.flush().map_err(sled_err)?;
        }
        Ok(())
    }

    /// Moves the changes held in memory into sled (not a commit: nothing
    /// is synced), so that [`Index::entry_rows`] sees them.
    pub fn spill(&self) -> Result<(), StoreError> {
        let _writes = lock(&self.commit_writes);
        let mut mem = lock(&self.mem);
        self.spill_locked(&mut mem)
    }

    pub(crate) fn spill_locked(&self, mem: &mut Mem) -> Result<(), StoreError> {
        if mem.active.is_empty() && mem.flushing.is_none() {
            return Ok(());
        }
        let mut all = Overlay::default();
        if let Some(f) = mem.flushing.take() {
            let f = Arc::try_unwrap(f)
                .unwrap_or_else(|a| Overlay { slots: a.slots.clone(), refs: a.refs.clone() });
            all.absorb(f);
        }
        all.absorb(std::mem::take(&mut mem.active));
        let mut batch = all.batch();
        batch.insert(&STATE_KEY[..], &mem.state.encode()[..]);
        if let Err(e) = self.tree.apply_batch(batch) {
            // Keep them for the next attempt.
            mem.flushing = Some(Arc::new(all));
            return Err(e);
        }
        Ok(())
    }

    /// Starts a group commit: the changes made so far are set apart (still
    /// read through the overlay) with the state they lead to. Called before
    /// the commit reads the log's end, so every record they point at lies
    /// before it.
    pub fn begin_commit(&self) -> CommitBatch {
        let mut mem = lock(&self.mem);
        let active = std::mem::take(&mut mem.active);
        let overlay = match mem.flushing.take() {
            // A commit that failed: its changes go again, under the newer ones.
            Some(f) => {
                let mut older = Arc::try_unwrap(f)
                    .unwrap_or_else(|a| Overlay { slots: a.slots.clone(), refs: a.refs.clone() });
                older.absorb(active);
                Arc::new(older)
            }
            None => Arc::new(active),
        };
        mem.flushing = Some(Arc::clone(&overlay));
        CommitBatch { state: mem.state, overlay }
    }

    /// Ends a commit that had nothing to write.
    pub fn cancel_commit(&self, commit: CommitBatch) {
        let mut mem = lock(&self.mem);
        if mem.flushing.as_ref().is_some_and(|f| Arc::ptr_eq(f, &commit.overlay))
            && commit.overlay.is_empty()
        {
            mem.flushing = None;
        }
    }

    /// Writes the changes of `commit`, their state and `checkpoint` to sled
    /// in one batch and flushes it. A spill (which writes newer changes)
    /// and a commit cannot land in the wrong order: the spills of
    /// [`Index::spill`], `rewrite` and `remove_raw` take `commit_writes`
    /// first, and the spill inside `apply` does not run while a commit
    /// writes (`Mem::committing`); when a spill already wrote this
    /// commit's changes, only the checkpoint is added. Errors: `Index`;
    /// the changes stay in memory for the next commit.
    ///
    /// The batch is written without holding the index lock (requests keep
    /// reading and applying changes meanwhile: the rows being written are
    /// read from `flushing` until it is done), under `commit_writes`, which
    /// every other writer of sled rows takes first.
    pub fn finish_commit(
        &self,
        commit: CommitBatch,
        checkpoint: Checkpoint,
    ) -> Result<(), StoreError> {
        {
            let _writes = lock(&self.commit_writes);
            let mine = {
                let mut mem = lock(&self.mem);
                let mine =
                    mem.flushing.as_ref().map(|f| Arc::ptr_eq(f, &commit.overlay)).unwrap_or(false);
                mem.committing = mine;
                mine
            };
            let mut batch = if mine {
                let mut b = commit.overlay.batch();
                b.insert(&STATE_KEY[..], &commit.state.encode()[..]);
                b
            } else {
                Batch::default()
            };
            batch.insert(CHECKPOINT_KEY, checkpoint.encode());
            let written = self.tree.apply_batch(batch);
            let mut mem = lock(&self.mem);
            mem.committing = false;
            if mine
                && written.is_ok()
                && mem.flushing.as_ref().is_some_and(|f| Arc::ptr_eq(f, &commit.overlay))
            {
                mem.flushing = None;
            }
            written?;
        }
        self.flush()
    }

    /// Every reference-count row in sled: (hash, row or `None` if
    /// undecodable). Callers write the overlay first ([`Index::spill`]).
    pub fn ref_rows(&self) -> Result<Vec<RawRefRow>, StoreError> {
        let mut out = Vec::new();
        for item in self.tree.scan_prefix(&REFS) {
            let (k, v) = item?;
            out.push((k[2..].to_vec(), RefRow::decode(&v)));
        }
        Ok(out)
    }

    /// The reference-count row of `hash`, if it has one (the changes held
    /// in memory first). Errors: `Index` when sled cannot be read or the
    /// row is corrupt.
    pub fn ref_row_of(&self, hash: &Hash) -> Result<Option<RefRow>, StoreError> {
        {
            let mem = lock(&self.mem);
            if let Some(r) = mem.active.refs.get(hash) {
                return Ok(*r);
            }
            if let Some(r) = mem.flushing.as_ref().and_then(|f| f.refs.get(hash)) {
                return Ok(*r);
            }
        }
        match self.tree.get(&refs_key(hash))? {
            None => Ok(None),
            Some(v) => RefRow::decode(&v).map(Some).ok_or_else(|| {
                corrupt(format!("the reference count of body {} is corrupt", hex::encode(hash)))
            }),
        }
    }

    /// Up to `n` hashes of reference-count rows in sled after the row key
    /// `after` (from the first with `None`), and the key to resume after
    /// (`None` when the rows are done). For building the filter of stored
    /// bodies a step at a time; callers move the overlay into sled first.
    /// Errors: `Index`.
    pub fn ref_hashes_step(
        &self,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<(Vec<Hash>, Option<Vec<u8>>), StoreError> {
        use std::ops::Bound;
        let end = [0xFF, b'r' + 1];
        let start = match after {
            Some(k) => Bound::Excluded(k),
            None => Bound::Included(&REFS[..]),
        };
        let mut out = Vec::new();
        for item in self.tree.range(start, Bound::Excluded(&end[..])) {
            let (k, _) = item?;
            if let Ok(h) = <Hash>::try_from(&k[2..]) {
                out.push(h);
            }
            if out.len() >= n {
                return Ok((out, Some(k.to_vec())));
            }
        }
        Ok((out, None))
    }

    /// Whether an entry references the body *file* `hash` (a reference-count
    /// row naming a file; a shared body record of the same hash makes a
    /// file of that name an orphan).
    pub fn file_referenced(&self, hash: &Hash) -> Result<bool, StoreError> {
        Ok(self.ref_row_of(hash)?.is_some_and(|r| r.place == Place::File))
    }

    /// The last commit checkpoint (zero when none was written).
    pub fn checkpoint(&self) -> Result<Checkpoint, StoreError> {
        Ok(match self.tree.get(&CHECKPOINT_KEY)? {
            Some(v) => Checkpoint::decode(&v)
                .ok_or_else(|| corrupt("the commit checkpoint row is corrupt".into()))?,
            None => Checkpoint::default(),
        })
    }

    /// Records a checkpoint, with everything changed so far (not flushed:
    /// the caller flushes). For the migration, which commits once.
    pub fn put_checkpoint(&self, cp: Checkpoint) -> Result<(), StoreError> {
        self.spill()?;
        self.tree.insert(&CHECKPOINT_KEY, &cp.encode()[..])?;
        Ok(())
    }

    /// Rewrites the state row and reference counts wholesale (verify's
    /// repair): `refs` replaces every reference-count row.
    pub fn rewrite(&self, state: State, refs: &HashMap<Hash, RefRow>) -> Result<(), StoreError> {
        let _writes = lock(&self.commit_writes);
        let mut mem = lock(&self.mem);
        self.spill_locked(&mut mem)?;
        let mut batch = Batch::default();
        for (k, _) in self.ref_rows()? {
            if <Hash>::try_from(k.as_slice()).map(|h| !refs.contains_key(&h)).unwrap_or(true) {
                let mut key = REFS.to_vec();
                key.extend_from_slice(&k);
                batch.remove(key);
            }
        }
        for (h, row) in refs {
            batch.insert(refs_key(h), row.encode());
        }
        batch.insert(STATE_KEY, state.encode());
        self.tree.apply_batch(batch)?;
        mem.state = state;
        self.changed_all();
        Ok(())
    }

    /// Removes raw rows (verify's repair of undecodable rows); the state is
    /// rewritten afterwards by [`Index::rewrite`].
    pub fn remove_raw(&self, keys: &[Vec<u8>]) -> Result<(), StoreError> {
        let _writes = lock(&self.commit_writes);
        let mut mem = lock(&self.mem);
        self.spill_locked(&mut mem)?;
        let mut batch = Batch::default();
        for k in keys {
            batch.remove(k);
        }
        let r = self.tree.apply_batch(batch);
        self.changed_all();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packs::{Loc, Pos};

    #[test]
    fn entry_keys_round_trip_and_prefix_only_their_primary_key() {
        let k = entry_key("http://a/x", b"gzip");
        assert_eq!(split_entry_key(&k), Some(("http://a/x".to_string(), b"gzip".to_vec())));
        assert!(k.starts_with(&primary_prefix("http://a/x")));
        // "http://a/x" must not prefix-match "http://a/xy".
        assert!(!entry_key("http://a/xy", b"").starts_with(&primary_prefix("http://a/x")));
        assert_eq!(split_entry_key(&[0, 0]), None);
        assert_eq!(split_entry_key(&[0, 0, 0, 9, b'a']), None);
        assert!(entry_key(&"x".repeat(MAX_PRIMARY_KEY - 1), b"")[0] < 0xFF);
    }

    #[test]
    fn slots_round_trip_and_garbage_is_rejected_not_panicked_on() {
        let loc = Loc { seg: 3, off: 70_000_000, len: 1300 };
        for body in [
            SlotBody::None,
            SlotBody::Inline { len: 1024 },
            SlotBody::Ref { hash: [7; 32], len: 1 << 33 },
        ] {
            let s = Slot { stamp: 1 << 40, loc, body };
            assert_eq!(Slot::decode(&s.encode()), Some(s));
        }
        let small = Slot { stamp: 900_000, loc, body: SlotBody::Inline { len: 1024 } }.encode();
        assert!(small.len() <= 14, "an inline entry's row stays small: {} bytes", small.len());
        for garbage in [
            &b""[..],
            &b"\x01"[..],
            &b"\x32\x80"[..],
            &[0x33, 1, 1, 1, 1, 1][..],
            &[0x31, 1, 1, 1, 1, 9][..],
        ] {
            assert_eq!(Slot::decode(garbage), None);
        }
        let st = State {
            entries: 1,
            bodies: 2,
            bytes: 3,
            referenced: 10,
            pack_live: 4,
            tail: Pos { seg: 5, off: 6 },
            max_stamp: 7,
            log_end: Pos { seg: 8, off: 9 },
            file_bytes: 11,
        };
        assert_eq!(State::decode(&st.encode()), Some(st));
        // A format-3 state row (64 bytes) reads without `referenced`, an
        // earlier format-4 row (72 bytes) without `file_bytes`.
        assert_eq!(
            State::decode(&st.encode()[..64]),
            Some(State { referenced: 0, file_bytes: 0, ..st })
        );
        assert_eq!(State::decode(&st.encode()[..72]), Some(State { file_bytes: 0, ..st }));
        for place in [Place::File, Place::Packed(Loc { seg: 9, off: 1 << 35, len: 77 })] {
            let r = RefRow { count: 3, len: 1 << 20, place };
            assert_eq!(RefRow::decode(&r.encode()), Some(r));
        }
        assert_eq!(
            RefRow { count: 1, len: 2, place: Place::File }.encode().len(),
            16,
            "a file's row is format 3's"
        );
        assert_eq!(RefRow::decode(b"short"), None);
        assert_eq!(State::decode(b""), None);
    }

    #[test]
    fn hashes_must_be_64_lower_case_hex_digits() {
        let h = "ab".repeat(32);
        assert_eq!(parse_hash(&h), Some([0xab; 32]));
        assert_eq!(parse_hash(&h.to_uppercase()), None);
        assert_eq!(parse_hash("abc"), None);
        assert_eq!(parse_hash(&"zz".repeat(32)), None);
    }
}
