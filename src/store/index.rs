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
//! about 530 more; README, "Performance"): the stored head and small
//! bodies live in the pack, and hash-keyed rows exist only for bodies
//! that are files or shared. Finding whether a short body is stored
//! already, by its hash, is the work of `hints.rs` and the filter in
//! front of it, not of the index.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::packs::{Loc, Pos};
use super::{lock, StoreError};

/// A raw SHA-256 digest.
pub(crate) type Hash = [u8; 32];
/// An index row as stored: key and value bytes.
pub(crate) type RawRow = (Vec<u8>, Vec<u8>);
/// A reference-count row as found: the hash bytes, and the row if it decodes.
pub(crate) type RawRefRow = (Vec<u8>, Option<RefRow>);

/// The name of the index tree (formats 3 and 4).
pub(crate) const TREE: &str = "store";
/// Longest primary key accepted, in bytes (keeps entry keys clear of the
/// `0xFF` rows).
pub(crate) const MAX_PRIMARY_KEY: usize = 1 << 24;
const REFS: [u8; 2] = [0xFF, b'r'];
const STATE_KEY: [u8; 2] = [0xFF, b's'];
const CHECKPOINT_KEY: [u8; 2] = [0xFF, b'c'];
/// Every entry key sorts below this.
const ENTRIES_END: [u8; 1] = [0xFF];

/// The key of an entry: the primary key's length (u32 big-endian), the
/// primary key, then the secondary key. The length prefix makes a prefix scan
/// by primary key return exactly that key's variants.
pub(crate) fn entry_key(primary_key: &str, secondary_key: &[u8]) -> Vec<u8> {
    let mut key = primary_prefix(primary_key);
    key.extend_from_slice(secondary_key);
    key
}

/// Calls `f` with [`entry_key`] of `(primary_key, secondary_key)`, built in
/// a buffer this thread reuses (the hit path looks entries up by it on
/// every request).
pub(crate) fn with_entry_key<R>(primary_key: &str, secondary_key: &[u8], mut f: impl FnMut(&[u8]) -> R) -> R {
    thread_local! {
        static KEY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let reused = KEY.try_with(|k| {
        let mut key = k.try_borrow_mut().ok()?;
        // A buffer a rare huge key grew is not kept.
        if key.capacity() > 16 * 1024 {
            *key = Vec::new();
        }
        key.clear();
        push_primary_prefix(&mut key, primary_key);
        key.extend_from_slice(secondary_key);
        Some(f(&key))
    });
    match reused {
        Ok(Some(r)) => r,
        // The thread is ending, or the buffer is in use further up.
        _ => f(&entry_key(primary_key, secondary_key)),
    }
}

/// The prefix shared by every variant of `primary_key`.
pub(crate) fn primary_prefix(primary_key: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(4 + primary_key.len());
    push_primary_prefix(&mut key, primary_key);
    key
}

/// Appends [`primary_prefix`] of `primary_key` to `out`.
fn push_primary_prefix(out: &mut Vec<u8>, primary_key: &str) {
    let pk = primary_key.as_bytes();
    out.extend_from_slice(&(pk.len() as u32).to_be_bytes());
    out.extend_from_slice(pk);
}

/// The primary key bytes of an entry key, without copying; `None` if the
/// key is malformed.
pub(crate) fn primary_key_bytes(key: &[u8]) -> Option<&[u8]> {
    let len_bytes: [u8; 4] = key.get(..4)?.try_into().ok()?;
    key.get(4..4usize.checked_add(u32::from_be_bytes(len_bytes) as usize)?)
}

/// Splits an entry key into (primary key, secondary key); `None` if the key
/// is malformed (too short, or the primary key is not UTF-8).
pub(crate) fn split_entry_key(key: &[u8]) -> Option<(String, Vec<u8>)> {
    let len_bytes: [u8; 4] = key.get(..4)?.try_into().ok()?;
    let len = u32::from_be_bytes(len_bytes) as usize;
    let pk = key.get(4..4usize.checked_add(len)?)?;
    let sk = key.get(4 + len..)?;
    Some((String::from_utf8(pk.to_vec()).ok()?, sk.to_vec()))
}

/// Parses a lower-case hex SHA-256 as found in a file name or a
/// [`super::CommittedBody`].
pub(crate) fn parse_hash(hex_str: &str) -> Option<Hash> {
    if hex_str.len() != 64 || !hex_str.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_str, &mut out).ok()?;
    Some(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= ((byte & 0x7F) as u64) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The body of an entry as its index row records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotBody {
    None,
    /// Inline in the entry's own pack record, `len` bytes, referenced by no
    /// other entry (no reference-count row).
    Inline { len: u64 },
    /// The body `hash` of `len` bytes, counted in its [`RefRow`] (a body
    /// file or a shared body record).
    Ref { hash: Hash, len: u64 },
}

impl SlotBody {
    /// The body's length in bytes (0 without one).
    pub fn len(&self) -> u64 {
        match self {
            SlotBody::None => 0,
            SlotBody::Inline { len } | SlotBody::Ref { len, .. } => *len,
        }
    }
}

/// An entry row: when it was last used, where its record is, its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Last use (the record's stamp, or a later touch): larger is more recent.
    pub stamp: u64,
    pub loc: Loc,
    pub body: SlotBody,
}

impl Slot {
    /// Layout: tag (`0x31` no body, `0x32` inline, `0x33` reference; as in
    /// format 3, where a reference always named a body file), then varints
    /// stamp, segment, offset, record length, [body length], then the
    /// 32-byte SHA-256 of a referenced body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48);
        out.push(match self.body {
            SlotBody::None => 0x31,
            SlotBody::Inline { .. } => 0x32,
            SlotBody::Ref { .. } => 0x33,
        });
        put_varint(&mut out, self.stamp);
        put_varint(&mut out, self.loc.seg as u64);
        put_varint(&mut out, self.loc.off);
        put_varint(&mut out, self.loc.len as u64);
        match &self.body {
            SlotBody::None => {}
            SlotBody::Inline { len } => put_varint(&mut out, *len),
            SlotBody::Ref { hash, len } => {
                put_varint(&mut out, *len);
                out.extend_from_slice(hash);
            }
        }
        out
    }

    /// Decodes a row; `None` if the bytes are not one.
    pub fn decode(b: &[u8]) -> Option<Slot> {
        let tag = *b.first()?;
        let mut at = 1;
        let stamp = get_varint(b, &mut at)?;
        let seg = u32::try_from(get_varint(b, &mut at)?).ok()?;
        let off = get_varint(b, &mut at)?;
        let len = u32::try_from(get_varint(b, &mut at)?).ok()?;
        let body = match tag {
            0x31 => SlotBody::None,
            0x32 => SlotBody::Inline { len: get_varint(b, &mut at)? },
            0x33 => {
                let len = get_varint(b, &mut at)?;
                let hash: Hash = b.get(at..at + 32)?.try_into().ok()?;
                at += 32;
                SlotBody::Ref { hash, len }
            }
            _ => return None,
        };
        (at == b.len()).then_some(Slot { stamp, loc: Loc { seg, off, len }, body })
    }
}

/// Where a referenced body is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// The body file `bodies/../<hash>`.
    File,
    /// The shared body record at this location of the pack.
    Packed(Loc),
}

/// A row of reference counts: how many entries reference a body, its
/// length, and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RefRow {
    pub count: u64,
    pub len: u64,
    pub place: Place,
}

impl RefRow {
    /// Layout: count, length (u64 BE each); for a shared body record then
    /// its segment (u32 BE), offset (u64 BE) and record length (u32 BE).
    /// A 16-byte row names a body file (as every row of format 3 did).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&self.len.to_be_bytes());
        if let Place::Packed(loc) = self.place {
            out.extend_from_slice(&loc.seg.to_be_bytes());
            out.extend_from_slice(&loc.off.to_be_bytes());
            out.extend_from_slice(&loc.len.to_be_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<RefRow> {
        let u64_at = |at: usize| bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
        let u32_at = |at: usize| bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes);
        let place = match bytes.len() {
            16 => Place::File,
            32 => Place::Packed(Loc { seg: u32_at(16)?, off: u64_at(20)?, len: u32_at(28)? }),
            _ => return None,
        };
        Some(RefRow { count: u64_at(0)?, len: u64_at(8)?, place })
    }
}

/// The store's running state, one row rewritten with every change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct State {
    /// Entries in the index.
    pub entries: u64,
    /// Distinct bodies: referenced ones (files, shared body records), plus
    /// one per inline body.
    pub bodies: u64,
    /// Bytes of those bodies, each counted once (what the size budget
    /// bounds).
    pub bytes: u64,
    /// Bytes of the bodies of every entry, a body counted once per entry
    /// referencing it (what the entries would take unshared).
    pub referenced: u64,
    /// Bytes of pack records some entry points at.
    pub pack_live: u64,
    /// The log's tail: records before it are gone or about to be.
    pub tail: Pos,
    /// The largest stamp any row holds.
    pub max_stamp: u64,
    /// At or past the end of every record an entry points at (the log's
    /// end as the index knows it; crash recovery compares it with the end
    /// of what reached the disk).
    pub log_end: Pos,
}

impl State {
    /// Layout: entries, bodies, bytes, pack_live, tail offset, max_stamp,
    /// log_end offset (u64 BE each), then tail segment, log_end segment
    /// (u32 BE each), then referenced (u64 BE). A 64-byte row (format 3)
    /// has no `referenced` (read as 0; the migration counts it).
    pub fn encode(&self) -> [u8; 72] {
        let mut out = [0u8; 72];
        let words = [self.entries, self.bodies, self.bytes, self.pack_live, self.tail.off, self.max_stamp, self.log_end.off];
        for (i, v) in words.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        out[56..60].copy_from_slice(&self.tail.seg.to_be_bytes());
        out[60..64].copy_from_slice(&self.log_end.seg.to_be_bytes());
        out[64..].copy_from_slice(&self.referenced.to_be_bytes());
        out
    }

    pub fn decode(b: &[u8]) -> Option<State> {
        if b.len() != 64 && b.len() != 72 {
            return None;
        }
        let u = |i: usize| u64::from_be_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        Some(State {
            entries: u(0),
            bodies: u(1),
            bytes: u(2),
            referenced: if b.len() == 72 { u(8) } else { 0 },
            pack_live: u(3),
            tail: Pos { seg: u32::from_be_bytes(b[56..60].try_into().ok()?), off: u(4) },
            max_stamp: u(5),
            log_end: Pos { seg: u32::from_be_bytes(b[60..64].try_into().ok()?), off: u(6) },
        })
    }
}

/// The last group commit: every record stamped below `stamp` lies before
/// `end` and is synced, with its body file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub stamp: u64,
    pub end: Pos,
}

impl Checkpoint {
    fn encode(&self) -> [u8; 20] {
        let mut out = [0u8; 20];
        out[..8].copy_from_slice(&self.stamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.end.seg.to_be_bytes());
        out[12..].copy_from_slice(&self.end.off.to_be_bytes());
        out
    }

    fn decode(b: &[u8]) -> Option<Checkpoint> {
        if b.len() != 20 {
            return None;
        }
        Some(Checkpoint {
            stamp: u64::from_be_bytes(b[..8].try_into().ok()?),
            end: Pos { seg: u32::from_be_bytes(b[8..12].try_into().ok()?), off: u64::from_be_bytes(b[12..].try_into().ok()?) },
        })
    }
}

/// One change for [`Index::apply`].
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// `key` now has the record `slot.loc` (written just before, stamped
    /// `slot.stamp`). With `expect`, only if its current record is there.
    /// A `Ref` body takes a reference on its [`RefRow`]; when there is none,
    /// `create` says where the body is (a new row counting this entry),
    /// else the op is not done (the body is gone: the caller stores it
    /// anew).
    Put { key: Vec<u8>, slot: Slot, expect: Option<Loc>, create: Option<Place> },
    /// Makes the inline body of `owner` (whose current record must be
    /// `owner_loc`, with an `Inline` body of `len` bytes) a shared one: the
    /// body `hash`, now also in the shared body record at `body` (written
    /// just before), gets a [`RefRow`] counting `owner`, whose row says
    /// `Ref` from now on. When `hash` already has a row (another entry
    /// shared it first) `owner` is counted there instead and `body` is dead
    /// space; its inline copy is no longer counted either way. Not done when
    /// `owner`'s row is not as expected.
    Share { owner: Vec<u8>, owner_loc: Loc, hash: Hash, len: u64, body: Loc },
    /// The shared body record of `hash` moved from `from` to `to` (the
    /// tail walk copied it); only if its row still names `from`.
    MoveShared { hash: Hash, from: Loc, to: Loc },
    /// Removes `key`; with `expect`, only if its current record is there.
    Remove { key: Vec<u8>, expect: Option<Loc> },
    /// Marks `key` used at `stamp` (if it exists and is not used later).
    Touch { key: Vec<u8>, stamp: u64 },
    /// Moves the log's tail.
    Tail(Pos),
}

/// What [`Index::apply`] did.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// Per op: whether it took effect.
    pub done: Vec<bool>,
    /// Entries removed.
    pub removed: u64,
    /// Body files whose reference count reached zero: their files may be
    /// deleted once the batch is durable.
    pub zero: Vec<Hash>,
    /// Bytes of bodies whose last reference went (inline bodies, shared
    /// body records, body files): what the store gives back. A body other
    /// entries still reference frees nothing.
    pub freed: u64,
}

/// Index rows changed in memory and not yet in sled.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    /// Entry rows (`None`: removed).
    slots: BTreeMap<Vec<u8>, Option<Slot>>,
    /// Reference-count rows (`None`: removed).
    refs: HashMap<Hash, Option<RefRow>>,
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

    /// The sled batch writing these rows.
    fn batch(&self) -> sled::Batch {
        let mut batch = sled::Batch::default();
        for (k, v) in &self.slots {
            match v {
                Some(slot) => batch.insert(k.as_slice(), slot.encode()),
                None => batch.remove(k.as_slice()),
            }
        }
        for (h, row) in &self.refs {
            match row {
                Some(r) => batch.insert(&refs_key(h)[..], r.encode()),
                None => batch.remove(&refs_key(h)[..]),
            }
        }
        batch
    }
}

/// What the index lock guards.
struct Mem {
    /// The state with every change applied (in sled or not).
    state: State,
    /// Changes since the last commit began.
    active: Overlay,
    /// Changes a commit is writing to sled (read after `active`).
    flushing: Option<Arc<Overlay>>,
    /// A commit is writing `flushing` to sled right now, outside this lock
    /// ([`Index::finish_commit`]): nothing else may write rows to sled
    /// until it is done (a spill from `apply` waits for the next round).
    committing: bool,
}

/// Past this many changed rows in memory, the writer moves them to sled
/// itself (a commit that cannot keep up must not let memory grow).
const SPILL_ROWS: usize = 32 * 1024;

/// How many change counters [`Index::generation`] spreads primary keys over.
const GENERATIONS: usize = 4096;

/// The counter of [`Index::generation`] that `primary` (a primary key's
/// bytes) falls on (FNV-1a).
fn generation_slot(primary: &[u8]) -> usize {
    (fnv1a(primary) % GENERATIONS as u64) as usize
}

/// FNV-1a (64 bits) of `bytes`: the hash of primary keys for the change
/// counters and the filter of stored keys (src/store/presence.rs).
pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The open sled database and the store's tree.
pub(crate) struct Index {
    pub db: sled::Db,
    pub tree: sled::Tree,
    mem: Mutex<Mem>,
    /// Change counters by primary key (see [`Index::generation`]).
    generations: Box<[AtomicU64]>,
    /// Which primary keys may have entry rows ([`Index::may_contain`]).
    presence: super::presence::Presence,
    /// Held while a commit writes rows to sled outside `mem`, and taken
    /// before `mem` by the other writers of sled rows (`spill`, `rewrite`,
    /// `remove_raw`; the spill inside `apply` instead waits for a round
    /// without a commit writing, see `Mem::committing`), so writes land in
    /// order. Lock order: `commit_writes`, then `mem`.
    commit_writes: Mutex<()>,
}

/// A build of the filter of stored keys in progress
/// ([`Index::build_presence_step`]).
pub(crate) struct PresenceBuild {
    fresh: super::presence::Building,
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

/// Converts a sled error into a store error.
pub(crate) fn sled_err(e: sled::Error) -> StoreError {
    StoreError::Index(e.to_string())
}

fn corrupt(what: String) -> StoreError {
    StoreError::Index(format!("{what}; run `crawlcache cache verify --repair` to rebuild it"))
}

/// The reference-count key of `hash`.
pub(crate) fn refs_key(hash: &Hash) -> [u8; 34] {
    let mut k = [0u8; 34];
    k[..2].copy_from_slice(&REFS);
    k[2..].copy_from_slice(hash);
    k
}

impl Index {
    /// Opens the store's tree in `db` and reads its state row.
    /// Errors: `Index` when sled fails or the state row is corrupt.
    /// `presence_bytes`: the size of the filter of stored primary keys
    /// ([`Index::may_contain`]), built by [`Index::build_presence`].
    pub fn new(db: sled::Db, presence_bytes: usize) -> Result<Index, StoreError> {
        let tree = db.open_tree(TREE).map_err(sled_err)?;
        let state = match tree.get(STATE_KEY).map_err(sled_err)? {
            None => State::default(),
            Some(v) => State::decode(&v).ok_or_else(|| corrupt("the store's state row is corrupt".into()))?,
        };
        let generations = (0..GENERATIONS).map(|_| AtomicU64::new(0)).collect();
        Ok(Index { db, tree, mem: Mutex::new(Mem { state, active: Overlay::default(), flushing: None, committing: false }),
            commit_writes: Mutex::new(()), generations, presence: super::presence::Presence::new(presence_bytes) })
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
    /// certainly has none (src/store/presence.rs; "maybe" until the filter
    /// is built).
    pub fn may_contain(&self, primary_key: &str) -> bool {
        self.presence.may_contain(primary_key.as_bytes())
    }

    /// Whether the filter of [`Index::may_contain`] answers (was built).
    #[cfg(test)]
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
    pub fn build_presence_step(&self, build: &mut Option<PresenceBuild>, rows: usize) -> Result<bool, StoreError> {
        if build.is_none() {
            let mem = lock(&self.mem);
            let Some(fresh) = self.presence.start_build() else { return Ok(true) };
            let flushing = mem.flushing.iter().flat_map(|f| f.slots.keys());
            for k in mem.active.slots.keys().chain(flushing) {
                if let Some(p) = primary_key_bytes(k) {
                    super::presence::add_to(&fresh, p);
                }
            }
            *build = Some(PresenceBuild { fresh, after: None });
        }
        let Some(b) = build.as_mut() else { return Ok(true) };
        let range = match &b.after {
            None => self.tree.range(..&ENTRIES_END[..]),
            Some(k) => self.tree.range::<&[u8], _>((std::ops::Bound::Excluded(k.as_slice()), std::ops::Bound::Excluded(&ENTRIES_END[..]))),
        };
        let mut seen = 0;
        for item in range {
            let (k, _) = match item {
                Ok(row) => row,
                Err(e) => {
                    self.presence.abandon_build();
                    *build = None;
                    return Err(sled_err(e));
                }
            };
            if let Some(p) = primary_key_bytes(&k) {
                super::presence::add_to(&b.fresh, p);
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
    fn changed(&self, key: &[u8]) {
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
        match self.tree.get(key).map_err(sled_err)? {
            None => Ok(None),
            Some(v) => Slot::decode(&v)
                .map(Some)
                .ok_or_else(|| corrupt(format!("the index row of {:?} is corrupt", String::from_utf8_lossy(key)))),
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
                for (k, v) in rows.range::<[u8], _>(range).take_while(|(k, _)| k.starts_with(prefix)) {
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
            let (k, v) = item.map_err(sled_err)?;
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
    pub fn entry_rows(&self) -> sled::Iter {
        self.tree.range(..&ENTRIES_END[..])
    }

    /// Moves the changes held in memory into sled (not a commit: nothing
    /// is synced), so that [`Index::entry_rows`] sees them.
    pub fn spill(&self) -> Result<(), StoreError> {
        let _writes = lock(&self.commit_writes);
        let mut mem = lock(&self.mem);
        self.spill_locked(&mut mem)
    }

    fn spill_locked(&self, mem: &mut Mem) -> Result<(), StoreError> {
        if mem.active.is_empty() && mem.flushing.is_none() {
            return Ok(());
        }
        let mut all = Overlay::default();
        if let Some(f) = mem.flushing.take() {
            let f = Arc::try_unwrap(f).unwrap_or_else(|a| Overlay { slots: a.slots.clone(), refs: a.refs.clone() });
            all.absorb(f);
        }
        all.absorb(std::mem::take(&mut mem.active));
        let mut batch = all.batch();
        batch.insert(&STATE_KEY[..], &mem.state.encode()[..]);
        if let Err(e) = self.tree.apply_batch(batch) {
            // Keep them for the next attempt.
            mem.flushing = Some(Arc::new(all));
            return Err(sled_err(e));
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
                let mut older = Arc::try_unwrap(f).unwrap_or_else(|a| Overlay { slots: a.slots.clone(), refs: a.refs.clone() });
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
        if mem.flushing.as_ref().is_some_and(|f| Arc::ptr_eq(f, &commit.overlay)) && commit.overlay.is_empty() {
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
    pub fn finish_commit(&self, commit: CommitBatch, checkpoint: Checkpoint) -> Result<(), StoreError> {
        {
            let _writes = lock(&self.commit_writes);
            let mine = {
                let mut mem = lock(&self.mem);
                let mine = mem.flushing.as_ref().map(|f| Arc::ptr_eq(f, &commit.overlay)).unwrap_or(false);
                mem.committing = mine;
                mine
            };
            let mut batch = if mine {
                let mut b = commit.overlay.batch();
                b.insert(&STATE_KEY[..], &commit.state.encode()[..]);
                b
            } else {
                sled::Batch::default()
            };
            batch.insert(&CHECKPOINT_KEY[..], &checkpoint.encode()[..]);
            let written = self.tree.apply_batch(batch).map_err(sled_err);
            let mut mem = lock(&self.mem);
            mem.committing = false;
            if mine && written.is_ok() && mem.flushing.as_ref().is_some_and(|f| Arc::ptr_eq(f, &commit.overlay)) {
                mem.flushing = None;
            }
            written?;
        }
        self.db.flush().map_err(sled_err)?;
        Ok(())
    }

    /// Every reference-count row in sled: (hash, row or `None` if
    /// undecodable). Callers write the overlay first ([`Index::spill`]).
    pub fn ref_rows(&self) -> Result<Vec<RawRefRow>, StoreError> {
        let mut out = Vec::new();
        for item in self.tree.scan_prefix(REFS) {
            let (k, v) = item.map_err(sled_err)?;
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
        match self.tree.get(refs_key(hash)).map_err(sled_err)? {
            None => Ok(None),
            Some(v) => RefRow::decode(&v)
                .map(Some)
                .ok_or_else(|| corrupt(format!("the reference count of body {} is corrupt", hex::encode(hash)))),
        }
    }

    /// Up to `n` hashes of reference-count rows in sled after the row key
    /// `after` (from the first with `None`), and the key to resume after
    /// (`None` when the rows are done). For building the filter of stored
    /// bodies a step at a time; callers move the overlay into sled first.
    /// Errors: `Index`.
    pub fn ref_hashes_step(&self, after: Option<&[u8]>, n: usize) -> Result<(Vec<Hash>, Option<Vec<u8>>), StoreError> {
        use std::ops::Bound;
        let end = [0xFF, b'r' + 1];
        let start = match after {
            Some(k) => Bound::Excluded(k.to_vec()),
            None => Bound::Included(REFS.to_vec()),
        };
        let mut out = Vec::new();
        for item in self.tree.range::<Vec<u8>, _>((start, Bound::Excluded(end.to_vec()))) {
            let (k, _) = item.map_err(sled_err)?;
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
        Ok(match self.tree.get(CHECKPOINT_KEY).map_err(sled_err)? {
            Some(v) => Checkpoint::decode(&v).ok_or_else(|| corrupt("the commit checkpoint row is corrupt".into()))?,
            None => Checkpoint::default(),
        })
    }

    /// Records a checkpoint, with everything changed so far (not flushed:
    /// the caller flushes). For the migration, which commits once.
    pub fn put_checkpoint(&self, cp: Checkpoint) -> Result<(), StoreError> {
        self.spill()?;
        self.tree.insert(CHECKPOINT_KEY, &cp.encode()[..]).map_err(sled_err)?;
        Ok(())
    }

    /// Rewrites the state row and reference counts wholesale (verify's
    /// repair): `refs` replaces every reference-count row.
    pub fn rewrite(&self, state: State, refs: &HashMap<Hash, RefRow>) -> Result<(), StoreError> {
        let _writes = lock(&self.commit_writes);
        let mut mem = lock(&self.mem);
        self.spill_locked(&mut mem)?;
        let mut batch = sled::Batch::default();
        for (k, _) in self.ref_rows()? {
            if <Hash>::try_from(k.as_slice()).map(|h| !refs.contains_key(&h)).unwrap_or(true) {
                let mut key = REFS.to_vec();
                key.extend_from_slice(&k);
                batch.remove(key);
            }
        }
        for (h, row) in refs {
            batch.insert(&refs_key(h)[..], row.encode());
        }
        batch.insert(&STATE_KEY[..], &state.encode()[..]);
        self.tree.apply_batch(batch).map_err(sled_err)?;
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
        let mut batch = sled::Batch::default();
        for k in keys {
            batch.remove(k.as_slice());
        }
        let r = self.tree.apply_batch(batch).map_err(sled_err);
        self.changed_all();
        r
    }

    /// Applies `ops` in order (see the module comment): the new rows go to
    /// the overlay, to reach sled with the next commit. Errors: `Index` when
    /// sled cannot be read or a reference count is corrupt; then nothing was
    /// applied.
    pub fn apply(&self, ops: &[Op]) -> Result<Applied, StoreError> {
        let mut mem = lock(&self.mem);
        let mut state = mem.state;
        let mut slots: HashMap<Vec<u8>, Option<Slot>> = HashMap::new();
        let mut refs: HashMap<Hash, Option<RefRow>> = HashMap::new();
        let mut applied = Applied::default();
        for op in ops {
            let done = match op {
                Op::Put { key, slot, expect, create } => {
                    let old = self.current(&mem, &mut slots, key)?;
                    if expect.is_some() && old.map(|s| s.loc) != *expect {
                        false
                    } else if !self.acquire(&mem, &mut refs, &mut state, &slot.body, *create)? {
                        false
                    } else {
                        state.referenced += slot.body.len();
                        match old {
                            Some(o) => self.release(&mem, &mut refs, &mut state, &o, &mut applied)?,
                            None => {
                                state.entries += 1;
                                // A new key, before its row can be read
                                // (src/store/presence.rs).
                                if let Some(p) = primary_key_bytes(key) {
                                    self.presence.add(p);
                                }
                            }
                        }
                        state.pack_live += slot.loc.len as u64;
                        state.max_stamp = state.max_stamp.max(slot.stamp);
                        state.log_end = state.log_end.max(Pos { seg: slot.loc.seg, off: slot.loc.off + slot.loc.len as u64 });
                        slots.insert(key.clone(), Some(*slot));
                        true
                    }
                }
                Op::Share { owner, owner_loc, hash, len, body } => match self.current(&mem, &mut slots, owner)? {
                    Some(o) if o.loc == *owner_loc && o.body == (SlotBody::Inline { len: *len }) => {
                        let row = match self.ref_row(&mem, &mut refs, hash)? {
                            None => {
                                state.pack_live += body.len as u64;
                                state.log_end = state.log_end.max(Pos { seg: body.seg, off: body.off + body.len as u64 });
                                RefRow { count: 1, len: *len, place: Place::Packed(*body) }
                            }
                            Some(r) => {
                                // Its own copy was a distinct body until now.
                                state.bodies = state.bodies.saturating_sub(1);
                                state.bytes = state.bytes.saturating_sub(*len);
                                RefRow { count: r.count + 1, ..r }
                            }
                        };
                        refs.insert(*hash, Some(row));
                        slots.insert(owner.clone(), Some(Slot { body: SlotBody::Ref { hash: *hash, len: *len }, ..o }));
                        true
                    }
                    _ => false,
                },
                Op::MoveShared { hash, from, to } => match self.ref_row(&mem, &mut refs, hash)? {
                    Some(r) if r.place == Place::Packed(*from) => {
                        state.pack_live = state.pack_live.saturating_sub(from.len as u64) + to.len as u64;
                        state.log_end = state.log_end.max(Pos { seg: to.seg, off: to.off + to.len as u64 });
                        refs.insert(*hash, Some(RefRow { place: Place::Packed(*to), ..r }));
                        true
                    }
                    _ => false,
                },
                Op::Remove { key, expect } => match self.current(&mem, &mut slots, key)? {
                    Some(o) if expect.is_none_or(|e| e == o.loc) => {
                        self.release(&mem, &mut refs, &mut state, &o, &mut applied)?;
                        state.entries = state.entries.saturating_sub(1);
                        applied.removed += 1;
                        slots.insert(key.clone(), None);
                        true
                    }
                    _ => false,
                },
                Op::Touch { key, stamp } => match self.current(&mem, &mut slots, key)? {
                    Some(mut s) if s.stamp < *stamp => {
                        s.stamp = *stamp;
                        state.max_stamp = state.max_stamp.max(*stamp);
                        slots.insert(key.clone(), Some(s));
                        true
                    }
                    _ => false,
                },
                Op::Tail(pos) => {
                    state.tail = *pos;
                    true
                }
            };
            applied.done.push(done);
        }
        // Counters move while the lock is held, before the rows change: a
        // reader that sees the new value reads the rows after the lock is
        // released. (Rows only read by the ops are left alone.)
        for (k, v) in &slots {
            if mem.active.slots.get(k.as_slice()) != Some(v) {
                self.changed(k);
            }

        }
        mem.active.slots.extend(slots);
        mem.active.refs.extend(refs);
        mem.state = state;
        // Not while a commit writes to sled (it ends within milliseconds;
        // the next apply spills).
        if mem.active.slots.len() + mem.active.refs.len() > SPILL_ROWS && !mem.committing {
            self.spill_locked(&mut mem)?;
        }
        Ok(applied)
    }

    /// The slot of `key` as the ops being applied see it.
    fn current(&self, mem: &Mem, slots: &mut HashMap<Vec<u8>, Option<Slot>>, key: &[u8]) -> Result<Option<Slot>, StoreError> {
        if let Some(s) = slots.get(key) {
            return Ok(*s);
        }
        let over = mem.active.slots.get(key).copied().or_else(|| mem.flushing.as_ref().and_then(|f| f.slots.get(key).copied()));
        if let Some(s) = over {
            return Ok(s);
        }
        // A key never stored (a new entry, the common case) has no row to read.
        if primary_key_bytes(key).is_some_and(|p| !self.presence.may_contain(p)) {
            slots.insert(key.to_vec(), None);
            return Ok(None);
        }
        let s = match self.tree.get(key).map_err(sled_err)? {
            None => None,
            Some(v) => match Slot::decode(&v) {
                Some(s) => Some(s),
                None => {
                    // Replaced or removed as if absent; verify reports what it referenced.
                    tracing::warn!(key = ?String::from_utf8_lossy(key), "an undecodable index row is overwritten");
                    None
                }
            },
        };
        slots.insert(key.to_vec(), s);
        Ok(s)
    }

    /// The reference-count row of `hash` as the ops being applied see it.
    fn ref_row(&self, mem: &Mem, refs: &mut HashMap<Hash, Option<RefRow>>, hash: &Hash) -> Result<Option<RefRow>, StoreError> {
        if let Some(r) = refs.get(hash) {
            return Ok(*r);
        }
        let over = mem.active.refs.get(hash).copied().or_else(|| mem.flushing.as_ref().and_then(|f| f.refs.get(hash).copied()));
        if let Some(r) = over {
            return Ok(r);
        }
        let r = match self.tree.get(refs_key(hash)).map_err(sled_err)? {
            None => None,
            Some(v) => Some(
                RefRow::decode(&v)
                    .ok_or_else(|| corrupt(format!("the reference count of body {} is corrupt", hex::encode(hash))))?,
            ),
        };
        refs.insert(*hash, r);
        Ok(r)
    }

    /// Counts a new reference to `body`: false (nothing changed) when it is
    /// a reference to a body without a row and `create` does not say where
    /// that body is.
    fn acquire(
        &self,
        mem: &Mem,
        refs: &mut HashMap<Hash, Option<RefRow>>,
        state: &mut State,
        body: &SlotBody,
        create: Option<Place>,
    ) -> Result<bool, StoreError> {
        match body {
            SlotBody::None => {}
            SlotBody::Inline { len } => {
                state.bodies += 1;
                state.bytes += len;
            }
            SlotBody::Ref { hash, len } => {
                let row = match (self.ref_row(mem, refs, hash)?, create) {
                    (Some(r), _) => RefRow { count: r.count + 1, ..r },
                    (None, Some(place)) => {
                        state.bodies += 1;
                        state.bytes += len;
                        if let Place::Packed(loc) = place {
                            state.pack_live += loc.len as u64;
                            state.log_end = state.log_end.max(Pos { seg: loc.seg, off: loc.off + loc.len as u64 });
                        }
                        RefRow { count: 1, len: *len, place }
                    }
                    (None, None) => return Ok(false),
                };
                refs.insert(*hash, Some(row));
            }
        }
        Ok(true)
    }

    /// Drops the reference (and the record) of the entry `old`; a body
    /// whose last reference this was is counted in `applied.freed` (and a
    /// body file in `applied.zero`).
    fn release(
        &self,
        mem: &Mem,
        refs: &mut HashMap<Hash, Option<RefRow>>,
        state: &mut State,
        old: &Slot,
        applied: &mut Applied,
    ) -> Result<(), StoreError> {
        state.pack_live = state.pack_live.saturating_sub(old.loc.len as u64);
        state.referenced = state.referenced.saturating_sub(old.body.len());
        match old.body {
            SlotBody::None => {}
            SlotBody::Inline { len } => {
                state.bodies = state.bodies.saturating_sub(1);
                state.bytes = state.bytes.saturating_sub(len);
                applied.freed += len;
            }
            SlotBody::Ref { hash, .. } => match self.ref_row(mem, refs, &hash)? {
                None => {
                    tracing::warn!(body = %hex::encode(hash), "releasing a body that has no reference count");
                    applied.zero.push(hash);
                }
                Some(r) if r.count <= 1 => {
                    refs.insert(hash, None);
                    state.bodies = state.bodies.saturating_sub(1);
                    state.bytes = state.bytes.saturating_sub(r.len);
                    applied.freed += r.len;
                    match r.place {
                        Place::File => applied.zero.push(hash),
                        Place::Packed(loc) => state.pack_live = state.pack_live.saturating_sub(loc.len as u64),
                    }
                }
                Some(r) => {
                    refs.insert(hash, Some(RefRow { count: r.count - 1, ..r }));
                }
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for body in [SlotBody::None, SlotBody::Inline { len: 1024 }, SlotBody::Ref { hash: [7; 32], len: 1 << 33 }] {
            let s = Slot { stamp: 1 << 40, loc, body };
            assert_eq!(Slot::decode(&s.encode()), Some(s));
        }
        let small = Slot { stamp: 900_000, loc, body: SlotBody::Inline { len: 1024 } }.encode();
        assert!(small.len() <= 14, "an inline entry's row stays small: {} bytes", small.len());
        for garbage in [&b""[..], &b"\x01"[..], &b"\x32\x80"[..], &[0x33, 1, 1, 1, 1, 1][..], &[0x31, 1, 1, 1, 1, 9][..]] {
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
        };
        assert_eq!(State::decode(&st.encode()), Some(st));
        // A format-3 state row (64 bytes) reads without `referenced`.
        assert_eq!(State::decode(&st.encode()[..64]), Some(State { referenced: 0, ..st }));
        for place in [Place::File, Place::Packed(Loc { seg: 9, off: 1 << 35, len: 77 })] {
            let r = RefRow { count: 3, len: 1 << 20, place };
            assert_eq!(RefRow::decode(&r.encode()), Some(r));
        }
        assert_eq!(RefRow { count: 1, len: 2, place: Place::File }.encode().len(), 16, "a file's row is format 3's");
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
