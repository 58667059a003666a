//! The sled metadata index: record encodings and the transactions that keep
//! entries, reference counts, LRU rows and byte totals in agreement.
//!
//! Trees (all in one sled database under `<dir>/index/`):
//!
//! | tree       | key                                   | value                              |
//! |------------|---------------------------------------|------------------------------------|
//! | `entries`  | [`entry_key`]: u32 BE len, primary, secondary | [`Record`]: stamp, body, meta |
//! | `lru`      | stamp (u64 BE)                        | entry key                          |
//! | `refs`     | raw SHA-256 (32 bytes)                | [`RefRow`]: count, len (u64 BE)    |
//! | `counters` | `totals`                              | [`Totals`]: entries, bodies, bytes |
//!
//! Every update that changes more than one of these rows runs in one
//! multi-tree sled transaction, so a crash leaves either the old or the new
//! state. A transaction never deletes a body file: it returns the hashes whose
//! count reached zero, and the caller deletes them after the commit is durable
//! (see `Inner::reap` in `mod.rs`).

use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};
use sled::Transactional;

use super::StoreError;

/// A raw SHA-256 digest.
pub(crate) type Hash = [u8; 32];

/// Record format version written by this code.
const RECORD_V1: u8 = 1;
/// The key of the single row of the `counters` tree.
pub(crate) const TOTALS_KEY: &[u8] = b"totals";
/// The key of the commit checkpoint in the `counters` tree (format 2): every
/// entry whose stamp is below it has a synced body.
pub(crate) const CHECKPOINT_KEY: &[u8] = b"checkpoint";

/// Result type of a transaction closure.
type TxResult<T> = Result<T, ConflictableTransactionError<StoreError>>;

/// The key of an entry: the primary key's length (u32 big-endian), the
/// primary key, then the secondary key. The length prefix makes a prefix scan
/// by primary key return exactly that key's variants.
pub(crate) fn entry_key(primary_key: &str, secondary_key: &[u8]) -> Vec<u8> {
    let mut key = primary_prefix(primary_key);
    key.extend_from_slice(secondary_key);
    key
}

/// The prefix shared by every variant of `primary_key`.
pub(crate) fn primary_prefix(primary_key: &str) -> Vec<u8> {
    let pk = primary_key.as_bytes();
    let mut key = Vec::with_capacity(4 + pk.len());
    key.extend_from_slice(&(pk.len() as u32).to_be_bytes());
    key.extend_from_slice(pk);
    key
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

/// One entry as stored in the `entries` tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// LRU stamp: larger means more recently used; also the `lru` tree key.
    pub stamp: u64,
    /// The body's hash and length in bytes, if any.
    pub body: Option<(Hash, u64)>,
    /// Opaque metadata of the cache layer.
    pub meta: Vec<u8>,
}

impl Record {
    /// Layout: version (1), stamp (8), has_body (1), [hash (32), len (8)], meta.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + 8 + 1 + 40 + self.meta.len());
        out.push(RECORD_V1);
        out.extend_from_slice(&self.stamp.to_be_bytes());
        match &self.body {
            Some((hash, len)) => {
                out.push(1);
                out.extend_from_slice(hash);
                out.extend_from_slice(&len.to_be_bytes());
            }
            None => out.push(0),
        }
        out.extend_from_slice(&self.meta);
        out
    }

    /// Decodes a record; `None` if the bytes are not a valid record.
    pub fn decode(bytes: &[u8]) -> Option<Record> {
        if *bytes.first()? != RECORD_V1 {
            return None;
        }
        let stamp = u64::from_be_bytes(bytes.get(1..9)?.try_into().ok()?);
        let (body, rest) = match *bytes.get(9)? {
            0 => (None, bytes.get(10..)?),
            1 => {
                let hash: Hash = bytes.get(10..42)?.try_into().ok()?;
                let len = u64::from_be_bytes(bytes.get(42..50)?.try_into().ok()?);
                (Some((hash, len)), bytes.get(50..)?)
            }
            _ => return None,
        };
        Some(Record { stamp, body, meta: rest.to_vec() })
    }
}

/// A row of the `refs` tree: how many entries reference a body, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RefRow {
    pub count: u64,
    pub len: u64,
}

impl RefRow {
    pub fn encode(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.count.to_be_bytes());
        out[8..].copy_from_slice(&self.len.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<RefRow> {
        if bytes.len() != 16 {
            return None;
        }
        Some(RefRow {
            count: u64::from_be_bytes(bytes[..8].try_into().ok()?),
            len: u64::from_be_bytes(bytes[8..].try_into().ok()?),
        })
    }
}

/// The kept counters: entries, distinct bodies, bytes of distinct bodies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub entries: u64,
    pub bodies: u64,
    pub bytes: u64,
}

impl Totals {
    pub fn encode(&self) -> [u8; 24] {
        let mut out = [0u8; 24];
        out[..8].copy_from_slice(&self.entries.to_be_bytes());
        out[8..16].copy_from_slice(&self.bodies.to_be_bytes());
        out[16..].copy_from_slice(&self.bytes.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Totals> {
        if bytes.len() != 24 {
            return None;
        }
        Some(Totals {
            entries: u64::from_be_bytes(bytes[..8].try_into().ok()?),
            bodies: u64::from_be_bytes(bytes[8..16].try_into().ok()?),
            bytes: u64::from_be_bytes(bytes[16..].try_into().ok()?),
        })
    }
}

/// What a transaction that removed or replaced entries did.
#[derive(Debug, Default)]
pub(crate) struct Released {
    /// Entries removed (not counting a replaced entry).
    pub removed: u64,
    /// Bodies whose reference count reached zero: their files may be deleted
    /// once the commit is durable.
    pub zero: Vec<Hash>,
}

/// The outcome of one eviction step.
pub(crate) enum EvictStep {
    /// The oldest LRU row was stale (its entry was gone or re-stamped) and was dropped.
    Skipped,
    /// The entry with this key was evicted.
    Evicted { key: Vec<u8>, released: Released },
}

/// The open sled database and its trees.
pub(crate) struct Index {
    pub db: sled::Db,
    pub entries: sled::Tree,
    pub lru: sled::Tree,
    pub refs: sled::Tree,
    pub counters: sled::Tree,
}

/// Converts a sled error into a store error.
pub(crate) fn sled_err(e: sled::Error) -> StoreError {
    StoreError::Index(e.to_string())
}

/// Converts the result of a transaction into a store error.
fn tx_err(e: TransactionError<StoreError>) -> StoreError {
    match e {
        TransactionError::Abort(e) => e,
        TransactionError::Storage(e) => sled_err(e),
    }
}

fn abort<T>(msg: String) -> TxResult<T> {
    Err(ConflictableTransactionError::Abort(StoreError::Index(msg)))
}

fn corrupt_hint() -> &'static str {
    "run `crawlcache cache verify` with repair to rebuild it"
}

fn tx_totals(counters: &TransactionalTree) -> TxResult<Totals> {
    match counters.get(TOTALS_KEY)? {
        None => Ok(Totals::default()),
        Some(v) => match Totals::decode(&v) {
            Some(t) => Ok(t),
            None => abort(format!("the totals record is corrupt; {}", corrupt_hint())),
        },
    }
}

fn tx_put_totals(counters: &TransactionalTree, t: &Totals) -> TxResult<()> {
    counters.insert(TOTALS_KEY, &t.encode()[..])?;
    Ok(())
}

/// Adds one reference to `hash` (creating its row with `len`).
fn tx_acquire(refs: &TransactionalTree, totals: &mut Totals, hash: &Hash, len: u64) -> TxResult<()> {
    let row = match refs.get(hash)? {
        None => {
            totals.bodies += 1;
            totals.bytes += len;
            RefRow { count: 1, len }
        }
        Some(v) => match RefRow::decode(&v) {
            Some(r) => RefRow { count: r.count + 1, len: r.len },
            None => {
                return abort(format!(
                    "reference count of body {} is corrupt; {}",
                    hex::encode(hash),
                    corrupt_hint()
                ))
            }
        },
    };
    refs.insert(&hash[..], &row.encode()[..])?;
    Ok(())
}

/// Drops one reference to `hash`; records it in `zero` when none is left.
fn tx_release(refs: &TransactionalTree, totals: &mut Totals, hash: &Hash, zero: &mut Vec<Hash>) -> TxResult<()> {
    let Some(v) = refs.get(hash)? else {
        // Already unreferenced (an inconsistency verify reports); nothing to drop.
        tracing::warn!(body = %hex::encode(hash), "releasing a body that has no reference count");
        zero.push(*hash);
        return Ok(());
    };
    let Some(row) = RefRow::decode(&v) else {
        return abort(format!("reference count of body {} is corrupt; {}", hex::encode(hash), corrupt_hint()));
    };
    if row.count <= 1 {
        refs.remove(&hash[..])?;
        totals.bodies = totals.bodies.saturating_sub(1);
        totals.bytes = totals.bytes.saturating_sub(row.len);
        zero.push(*hash);
    } else {
        refs.insert(&hash[..], &RefRow { count: row.count - 1, len: row.len }.encode()[..])?;
    }
    Ok(())
}

/// Removes the entry `key` (and its LRU row, and its body reference) if present.
fn tx_remove_entry(
    entries: &TransactionalTree,
    lru: &TransactionalTree,
    refs: &TransactionalTree,
    totals: &mut Totals,
    key: &[u8],
    released: &mut Released,
) -> TxResult<bool> {
    let Some(old) = entries.remove(key)? else { return Ok(false) };
    totals.entries = totals.entries.saturating_sub(1);
    released.removed += 1;
    match Record::decode(&old) {
        Some(rec) => {
            if lru.get(rec.stamp.to_be_bytes())?.as_deref() == Some(key) {
                lru.remove(&rec.stamp.to_be_bytes()[..])?;
            }
            if let Some((hash, _)) = rec.body {
                tx_release(refs, totals, &hash, &mut released.zero)?;
            }
        }
        None => {
            // Its LRU row (if any) is dropped lazily by eviction; its body
            // reference, unknown, is fixed by verify.
            tracing::warn!(key = ?String::from_utf8_lossy(key), "removed an undecodable index record");
        }
    }
    Ok(true)
}

impl Index {
    /// Opens the trees of `db`.
    pub fn new(db: sled::Db) -> Result<Index, StoreError> {
        Ok(Index {
            entries: db.open_tree("entries").map_err(sled_err)?,
            lru: db.open_tree("lru").map_err(sled_err)?,
            refs: db.open_tree("refs").map_err(sled_err)?,
            counters: db.open_tree("counters").map_err(sled_err)?,
            db,
        })
    }

    /// The kept counters (zero for an empty index).
    pub fn totals(&self) -> Result<Totals, StoreError> {
        match self.counters.get(TOTALS_KEY).map_err(sled_err)? {
            None => Ok(Totals::default()),
            Some(v) => Totals::decode(&v)
                .ok_or_else(|| StoreError::Index(format!("the totals record is corrupt; {}", corrupt_hint()))),
        }
    }

    /// The commit checkpoint (0 when none was written yet).
    pub fn checkpoint(&self) -> Result<u64, StoreError> {
        Ok(match self.counters.get(CHECKPOINT_KEY).map_err(sled_err)? {
            Some(v) => v.as_ref().try_into().map(u64::from_be_bytes).unwrap_or(0),
            None => 0,
        })
    }

    /// Records the commit checkpoint (not flushed: the caller flushes).
    pub fn put_checkpoint(&self, stamp: u64) -> Result<(), StoreError> {
        self.counters.insert(CHECKPOINT_KEY, &stamp.to_be_bytes()[..]).map_err(sled_err)?;
        Ok(())
    }

    /// The entries whose LRU row is at `from` or later: (stamp, entry key).
    pub fn stamped_since(&self, from: u64) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let mut out = Vec::new();
        for item in self.lru.range(from.to_be_bytes()..) {
            let (k, v) = item.map_err(sled_err)?;
            let stamp = k.as_ref().try_into().map(u64::from_be_bytes).unwrap_or(0);
            out.push((stamp, v.to_vec()));
        }
        Ok(out)
    }

    /// The largest LRU stamp in use (0 for an empty index).
    pub fn max_stamp(&self) -> Result<u64, StoreError> {
        Ok(match self.lru.last().map_err(sled_err)? {
            Some((k, _)) => k.as_ref().try_into().map(u64::from_be_bytes).unwrap_or(0),
            None => 0,
        })
    }

    /// Whether a reference-count row exists for `hash`.
    pub fn is_referenced(&self, hash: &Hash) -> Result<bool, StoreError> {
        self.refs.contains_key(hash).map_err(sled_err)
    }

    /// Stores `rec` under `key`, replacing any previous record, in one
    /// transaction over all four trees: the old body loses a reference, the
    /// new one gains one, the LRU row moves to `rec.stamp`, the totals follow.
    pub fn put(&self, key: &[u8], rec: &Record) -> Result<Released, StoreError> {
        let encoded = rec.encode();
        (&self.entries, &self.lru, &self.refs, &self.counters)
            .transaction(|(entries, lru, refs, counters)| {
                let mut totals = tx_totals(counters)?;
                let mut released = Released::default();
                let old = entries.get(key)?;
                let old_rec = old.as_ref().and_then(|v| Record::decode(v));
                if old.is_some() && old_rec.is_none() {
                    tracing::warn!(key = ?String::from_utf8_lossy(key), "replacing an undecodable index record");
                }
                if let Some(o) = &old_rec {
                    if lru.get(o.stamp.to_be_bytes())?.as_deref() == Some(key) {
                        lru.remove(&o.stamp.to_be_bytes()[..])?;
                    }
                }
                let old_hash = old_rec.as_ref().and_then(|o| o.body.map(|(h, _)| h));
                let new_hash = rec.body.map(|(h, _)| h);
                if old_hash != new_hash {
                    if let Some((h, len)) = &rec.body {
                        tx_acquire(refs, &mut totals, h, *len)?;
                    }
                    if let Some(h) = &old_hash {
                        tx_release(refs, &mut totals, h, &mut released.zero)?;
                    }
                }
                if old.is_none() {
                    totals.entries += 1;
                }
                entries.insert(key, encoded.as_slice())?;
                lru.insert(&rec.stamp.to_be_bytes()[..], key)?;
                tx_put_totals(counters, &totals)?;
                Ok(released)
            })
            .map_err(tx_err)
    }

    /// Removes the entries `keys` in one transaction.
    pub fn remove(&self, keys: &[Vec<u8>]) -> Result<Released, StoreError> {
        (&self.entries, &self.lru, &self.refs, &self.counters)
            .transaction(|(entries, lru, refs, counters)| {
                let mut totals = tx_totals(counters)?;
                let mut released = Released::default();
                for key in keys {
                    tx_remove_entry(entries, lru, refs, &mut totals, key, &mut released)?;
                }
                tx_put_totals(counters, &totals)?;
                Ok(released)
            })
            .map_err(tx_err)
    }

    /// Moves each entry of `batch` (entry key, stamp, new metadata if
    /// freshened) to its new LRU stamp, in one transaction (recorded cache
    /// hits and 304 freshenings). Missing entries, entries
    /// already stamped later and undecodable records are skipped.
    pub fn restamp_many(&self, batch: &[(Vec<u8>, super::budget::Pending)]) -> Result<(), StoreError> {
        (&self.entries, &self.lru)
            .transaction(|(entries, lru)| {
                for (key, p) in batch {
                    let stamp = &p.stamp;
                    let Some(v) = entries.get(key)? else { continue };
                    let Some(mut rec) = Record::decode(&v) else { continue };
                    if rec.stamp >= *stamp {
                        continue;
                    }
                    if let Some(m) = &p.meta {
                        rec.meta = m.clone();
                    }
                    if lru.get(rec.stamp.to_be_bytes())?.as_deref() == Some(key.as_slice()) {
                        lru.remove(&rec.stamp.to_be_bytes()[..])?;
                    }
                    rec.stamp = *stamp;
                    lru.insert(&stamp.to_be_bytes()[..], key.as_slice())?;
                    entries.insert(key.as_slice(), rec.encode())?;
                }
                Ok(())
            })
            .map_err(tx_err)
    }

    /// Moves the entry `key` to LRU stamp `stamp` (if it exists and is not
    /// already newer), optionally replacing its metadata. Returns whether the
    /// entry exists.
    pub fn restamp(&self, key: &[u8], stamp: u64, meta: Option<&[u8]>) -> Result<bool, StoreError> {
        (&self.entries, &self.lru)
            .transaction(|(entries, lru)| {
                let Some(v) = entries.get(key)? else { return Ok(false) };
                let Some(mut rec) = Record::decode(&v) else {
                    return abort(format!(
                        "the record of {:?} is corrupt; {}",
                        String::from_utf8_lossy(key),
                        corrupt_hint()
                    ));
                };
                if let Some(m) = meta {
                    rec.meta = m.to_vec();
                }
                if rec.stamp < stamp {
                    if lru.get(rec.stamp.to_be_bytes())?.as_deref() == Some(key) {
                        lru.remove(&rec.stamp.to_be_bytes()[..])?;
                    }
                    rec.stamp = stamp;
                    lru.insert(&stamp.to_be_bytes()[..], key)?;
                } else if meta.is_none() {
                    return Ok(true);
                }
                entries.insert(key, rec.encode())?;
                Ok(true)
            })
            .map_err(tx_err)
    }

    /// The oldest LRU row: (stamp, entry key).
    pub fn oldest(&self) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
        let Some((k, v)) = self.lru.first().map_err(sled_err)? else { return Ok(None) };
        let stamp = k.as_ref().try_into().map(u64::from_be_bytes).unwrap_or(0);
        Ok(Some((stamp, v.to_vec())))
    }

    /// Evicts the entry the LRU row `stamp` points at, if that row is still
    /// current; otherwise drops the stale row.
    pub fn evict(&self, stamp: u64) -> Result<EvictStep, StoreError> {
        let stamp_key = stamp.to_be_bytes();
        (&self.entries, &self.lru, &self.refs, &self.counters)
            .transaction(|(entries, lru, refs, counters)| {
                let Some(key) = lru.get(stamp_key)? else { return Ok(EvictStep::Skipped) };
                let current = match entries.get(&key)? {
                    Some(v) => Record::decode(&v).map(|r| r.stamp == stamp),
                    None => Some(false),
                };
                if current == Some(false) {
                    // The entry is gone or was re-stamped: the row is stale.
                    lru.remove(&stamp_key[..])?;
                    return Ok(EvictStep::Skipped);
                }
                let mut totals = tx_totals(counters)?;
                let mut released = Released::default();
                tx_remove_entry(entries, lru, refs, &mut totals, &key, &mut released)?;
                // An undecodable record left its row behind: drop it too.
                lru.remove(&stamp_key[..])?;
                tx_put_totals(counters, &totals)?;
                Ok(EvictStep::Evicted { key: key.to_vec(), released })
            })
            .map_err(tx_err)
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
    }

    #[test]
    fn records_round_trip_and_garbage_is_rejected_not_panicked_on() {
        let r = Record { stamp: 7, body: Some(([3u8; 32], 42)), meta: b"head".to_vec() };
        assert_eq!(Record::decode(&r.encode()), Some(r));
        let r = Record { stamp: 1, body: None, meta: vec![] };
        assert_eq!(Record::decode(&r.encode()), Some(r));
        for garbage in [&b""[..], &b"\x02"[..], &b"\x01\x00"[..], &[1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 9][..]] {
            assert_eq!(Record::decode(garbage), None);
        }
        assert_eq!(RefRow::decode(b"short"), None);
        assert_eq!(Totals::decode(b""), None);
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
