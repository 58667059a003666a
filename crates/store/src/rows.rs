//! The rows of the store's sled index and their encodings (the table in
//! `index.rs` says which key holds which): entry keys, [`Slot`] (an
//! entry's row), [`RefRow`] (a referenced body's count and place),
//! [`State`] (the totals) and [`Checkpoint`] (the last group commit). Every
//! row is decoded here and nowhere else; a row that does not decode is
//! `None`, never a panic.

use crate::hash::Hash;
use crate::packs::{Loc, Pos};

/// An index row as stored: key and value bytes.
pub(crate) type RawRow = (Vec<u8>, Vec<u8>);
/// A reference-count row as found: the hash bytes, and the row if it decodes.
pub(crate) type RawRefRow = (Vec<u8>, Option<RefRow>);

/// The name of the index tree (formats 3 and 4).
pub(crate) const TREE: &str = "store";
/// Longest primary key accepted, in bytes (keeps entry keys clear of the
/// `0xFF` rows).
pub(crate) const MAX_PRIMARY_KEY: usize = 1 << 24;
pub(crate) const REFS: [u8; 2] = [0xFF, b'r'];
pub(crate) const STATE_KEY: [u8; 2] = [0xFF, b's'];
pub(crate) const CHECKPOINT_KEY: [u8; 2] = [0xFF, b'c'];
/// Every entry key sorts below this.
pub(crate) const ENTRIES_END: [u8; 1] = [0xFF];

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
pub(crate) fn with_entry_key<R>(
    primary_key: &str,
    secondary_key: &[u8],
    mut f: impl FnMut(&[u8]) -> R,
) -> R {
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
pub(crate) fn push_primary_prefix(out: &mut Vec<u8>, primary_key: &str) {
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
    Inline {
        len: u64,
    },
    /// The body `hash` of `len` bytes, counted in its [`RefRow`] (a body
    /// file or a shared body record).
    Ref {
        hash: Hash,
        len: u64,
    },
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
        let u64_at = |at: usize| {
            bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes)
        };
        let u32_at = |at: usize| {
            bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes)
        };
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
    /// Bytes of the bodies kept in files of their own (`Place::File`),
    /// each counted once.
    pub file_bytes: u64,
}

/// Length of the state row this code writes.
pub(crate) const STATE_ROW_LEN: usize = 80;

impl State {
    /// Bytes on disk the size budget (`cache.max_size`) bounds: the pack
    /// records entries point at (their framing, metadata and inline
    /// bodies, and shared body records) plus the body files. Left out: the
    /// sled index, and dead records not yet reclaimed by the tail walk or
    /// compaction.
    pub fn budget_bytes(&self) -> u64 {
        self.pack_live.saturating_add(self.file_bytes)
    }

    /// Layout: entries, bodies, bytes, pack_live, tail offset, max_stamp,
    /// log_end offset (u64 BE each), then tail segment, log_end segment
    /// (u32 BE each), then referenced, file_bytes (u64 BE each). A 64-byte
    /// row (format 3) has no `referenced` (read as 0; the migration counts
    /// it); a 72-byte row (format 4 before the budget counted records) has
    /// no `file_bytes` (read as 0; [`crate::index::Index::new`] counts it).
    pub fn encode(&self) -> [u8; STATE_ROW_LEN] {
        let mut out = [0u8; STATE_ROW_LEN];
        let words = [
            self.entries,
            self.bodies,
            self.bytes,
            self.pack_live,
            self.tail.off,
            self.max_stamp,
            self.log_end.off,
        ];
        for (i, v) in words.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        out[56..60].copy_from_slice(&self.tail.seg.to_be_bytes());
        out[60..64].copy_from_slice(&self.log_end.seg.to_be_bytes());
        out[64..72].copy_from_slice(&self.referenced.to_be_bytes());
        out[72..80].copy_from_slice(&self.file_bytes.to_be_bytes());
        out
    }

    pub fn decode(b: &[u8]) -> Option<State> {
        if b.len() != 64 && b.len() != 72 && b.len() != STATE_ROW_LEN {
            return None;
        }
        let u = |i: usize| u64::from_be_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        Some(State {
            entries: u(0),
            bodies: u(1),
            bytes: u(2),
            referenced: if b.len() >= 72 { u(8) } else { 0 },
            file_bytes: if b.len() >= STATE_ROW_LEN { u(9) } else { 0 },
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
    pub(crate) fn encode(&self) -> [u8; 20] {
        let mut out = [0u8; 20];
        out[..8].copy_from_slice(&self.stamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.end.seg.to_be_bytes());
        out[12..].copy_from_slice(&self.end.off.to_be_bytes());
        out
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Checkpoint> {
        if b.len() != 20 {
            return None;
        }
        Some(Checkpoint {
            stamp: u64::from_be_bytes(b[..8].try_into().ok()?),
            end: Pos {
                seg: u32::from_be_bytes(b[8..12].try_into().ok()?),
                off: u64::from_be_bytes(b[12..].try_into().ok()?),
            },
        })
    }
}

/// The reference-count key of `hash`.
pub(crate) fn refs_key(hash: &Hash) -> [u8; 34] {
    let mut k = [0u8; 34];
    k[..2].copy_from_slice(&REFS);
    k[2..].copy_from_slice(hash);
    k
}
