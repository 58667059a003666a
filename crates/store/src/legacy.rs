//! Reading the index of store formats 1 and 2 (the releases up to commit
//! 7238623), for the migration to format 3 (`migrate.rs`).
//!
//! Those stores keep four sled trees: `entries` (entry key → record:
//! version 1, stamp u64, has-body flag, [SHA-256, length u64], metadata),
//! `lru` (stamp → entry key), `refs` (SHA-256 → count, length) and
//! `counters` (`totals`, and in format 2 `checkpoint`: every entry stamped
//! below it has a synced body). Every body, whatever its size, is a file
//! under `bodies/`.

use crate::hash::Hash;

/// The trees of formats 1 and 2.
pub(crate) const TREES: [&str; 4] = ["entries", "lru", "refs", "counters"];
/// The key of the commit checkpoint in the `counters` tree (format 2).
pub(crate) const CHECKPOINT_KEY: &[u8] = b"checkpoint";

/// One `entries` record of formats 1 and 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// LRU stamp.
    pub stamp: u64,
    /// The body's hash and length in bytes, if any.
    pub body: Option<(Hash, u64)>,
    /// The stored head.
    pub meta: Vec<u8>,
}

impl Record {
    /// Decodes a record; `None` if the bytes are not a valid record.
    pub fn decode(bytes: &[u8]) -> Option<Record> {
        if *bytes.first()? != 1 {
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

    /// The encoding of formats 1 and 2 (tests build such stores with it).
    #[cfg(test)]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![1u8];
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_format_2_decode_and_garbage_is_rejected() {
        let r = Record { stamp: 7, body: Some(([3u8; 32], 42)), meta: b"head".to_vec() };
        assert_eq!(Record::decode(&r.encode()), Some(r));
        let r = Record { stamp: 1, body: None, meta: vec![] };
        assert_eq!(Record::decode(&r.encode()), Some(r));
        for garbage in
            [&b""[..], &b"\x02"[..], &b"\x01\x00"[..], &[1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 9][..]]
        {
            assert_eq!(Record::decode(garbage), None);
        }
    }
}
