//! `crawlcache cache verify`: checks every invariant of SPEC section 3 and,
//! with repair, fixes what it finds.
//!
//! Invariants checked:
//! - each body file hashes to its name (files are stream-hashed);
//! - no entry points at a missing body; the length an entry records is the
//!   file's length;
//! - each stored reference count equals the number of entries naming the body;
//! - no body file is unreferenced (orphan) and nothing stray lies in `bodies/`;
//! - no temporary file is left over (live writers excepted);
//! - each entry has exactly its LRU row, each LRU row its entry;
//! - the kept totals agree with the reference-count rows.
//!
//! Repair order keeps every intermediate state safe to crash in: first drop
//! the entries whose bodies are missing or corrupt, then fix LRU rows, then
//! rewrite counts and totals in one transaction, flush, and only then delete
//! files (corrupt, orphan, stray, temporary).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::PathBuf;

use sled::transaction::ConflictableTransactionError;
use sled::Transactional;

use super::blobs::{hash_file, io_err, BodyFile};
use super::index::{sled_err, split_entry_key, Hash, RefRow, Record, Totals, TOTALS_KEY};
use super::{Inner, StoreError};

/// What [`Store::verify`](super::Store::verify) found (and, with `repair`,
/// fixed).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VerifyReport {
    /// Index entries read.
    pub entries_checked: u64,
    /// Body files hashed.
    pub bodies_checked: u64,
    /// Body files whose content does not hash to their name.
    pub corrupt_bodies: Vec<String>,
    /// Hashes named by entries whose body file does not exist.
    pub missing_bodies: Vec<String>,
    /// Body files no entry references (hashes; paths for stray files).
    pub orphan_bodies: Vec<String>,
    /// Hashes whose stored reference count differs from the real count.
    pub refcount_mismatches: Vec<String>,
    /// Leftover temporary files.
    pub leftover_tmp: Vec<String>,
    /// Other index inconsistencies: undecodable records, LRU rows that
    /// disagree with their entries, wrong totals.
    pub index_problems: Vec<String>,
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
            && self.index_problems.is_empty()
    }
}


/// Runs verify with the maintenance lock held exclusively by the caller.
/// `progress(hashed, total)` is called after each body file is hashed.
pub(crate) fn run(inner: &Inner, repair: bool, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport, StoreError> {
    let index = &inner.index;
    let blobs = &inner.blobs;
    let pinned = blobs.all_pinned();
    let mut report = VerifyReport { leftover_tmp: blobs.sweep_tmp(false)?, ..Default::default() };

    // Body files: hash each one.
    let mut files: HashMap<Hash, (PathBuf, u64)> = HashMap::new();
    let mut corrupt: BTreeMap<Hash, PathBuf> = BTreeMap::new();
    let mut strays: Vec<PathBuf> = Vec::new();
    let walked = blobs.walk()?;
    let total = walked.iter().filter(|f| matches!(f, BodyFile::Valid(..))).count() as u64;
    for f in walked {
        match f {
            BodyFile::Valid(h, path) => {
                report.bodies_checked += 1;
                progress(report.bodies_checked, total);
                let (digest, len) = hash_file(&path).map_err(io_err("read body", &path))?;
                if digest == h {
                    files.insert(h, (path, len));
                } else {
                    corrupt.insert(h, path);
                }
            }
            BodyFile::Stray(path) => strays.push(path),
        }
    }
    report.corrupt_bodies = corrupt.keys().map(hex::encode).collect();

    // Entries: count real references; find the ones to drop.
    let mut referenced: HashMap<Hash, u64> = HashMap::new();
    let mut keep: HashMap<Hash, RefRow> = HashMap::new();
    let mut bad_keys: Vec<Vec<u8>> = Vec::new();
    let mut live: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut missing: BTreeMap<String, ()> = BTreeMap::new();
    for item in index.entries.iter() {
        let (k, v) = item.map_err(sled_err)?;
        report.entries_checked += 1;
        let rec = match (split_entry_key(&k), Record::decode(&v)) {
            (Some(_), Some(rec)) => rec,
            _ => {
                report.index_problems.push(format!("undecodable entry record {:?}", String::from_utf8_lossy(&k)));
                bad_keys.push(k.to_vec());
                continue;
            }
        };
        if let Some((h, len)) = rec.body {
            *referenced.entry(h).or_insert(0) += 1;
            if corrupt.contains_key(&h) {
                bad_keys.push(k.to_vec());
                continue;
            }
            let Some((_, file_len)) = files.get(&h) else {
                missing.insert(hex::encode(h), ());
                bad_keys.push(k.to_vec());
                continue;
            };
            if *file_len != len {
                report.index_problems.push(format!(
                    "entry {:?} records {len} bytes for body {} but the file has {file_len}",
                    display_key(&k),
                    hex::encode(h)
                ));
                bad_keys.push(k.to_vec());
                continue;
            }
            keep.entry(h).or_insert(RefRow { count: 0, len }).count += 1;
        }
        live.insert(k.to_vec(), rec.stamp);
    }
    report.missing_bodies = missing.into_keys().collect();

    // Reference counts as stored.
    let mut stored: HashMap<Hash, RefRow> = HashMap::new();
    let mut bad_ref_keys: Vec<Vec<u8>> = Vec::new();
    for item in index.refs.iter() {
        let (k, v) = item.map_err(sled_err)?;
        match (<Hash>::try_from(k.as_ref()), RefRow::decode(&v)) {
            (Ok(h), Some(row)) => {
                stored.insert(h, row);
            }
            _ => {
                report.index_problems.push(format!("undecodable reference-count row {}", hex::encode(&k)));
                bad_ref_keys.push(k.to_vec());
            }
        }
    }
    let mut mismatched: Vec<String> = stored
        .keys()
        .chain(referenced.keys())
        .collect::<HashSet<_>>()
        .into_iter()
        .filter(|h| stored.get(*h).map(|r| r.count).unwrap_or(0) != referenced.get(*h).copied().unwrap_or(0))
        .map(hex::encode)
        .collect();
    mismatched.sort();
    report.refcount_mismatches = mismatched;

    // Orphans: intact files nothing references (a pinned body is about to be).
    let mut orphans: Vec<String> = files
        .keys()
        .filter(|h| !referenced.contains_key(*h) && !pinned.contains(*h))
        .map(hex::encode)
        .collect();
    orphans.sort();
    orphans.extend(strays.iter().map(|p| p.display().to_string()));
    report.orphan_bodies = orphans;

    // LRU rows against entries.
    let mut lru_rows: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut stale_rows: Vec<Vec<u8>> = Vec::new();
    for item in index.lru.iter() {
        let (k, v) = item.map_err(sled_err)?;
        let stamp = <[u8; 8]>::try_from(k.as_ref()).map(u64::from_be_bytes);
        match stamp {
            Ok(s) if live.get(v.as_ref()) == Some(&s) => {
                lru_rows.insert(s, v.to_vec());
            }
            _ => {
                report.index_problems.push(format!("stale LRU row for {:?}", display_key(&v)));
                stale_rows.push(k.to_vec());
            }
        }
    }
    let mut unranked: Vec<Vec<u8>> = Vec::new();
    for (k, s) in &live {
        if lru_rows.get(s) != Some(k) {
            report.index_problems.push(format!("entry {:?} has no LRU row", display_key(k)));
            unranked.push(k.clone());
        }
    }

    // Totals against the rows they summarise.
    let stored_totals = index.totals().unwrap_or_else(|e| {
        report.index_problems.push(e.to_string());
        Totals { entries: u64::MAX, ..Default::default() }
    });
    let derived = Totals {
        entries: report.entries_checked,
        bodies: stored.len() as u64,
        bytes: stored.values().map(|r| r.len).sum(),
    };
    if stored_totals != derived {
        report.index_problems.push(format!(
            "kept totals ({} entries, {} bodies, {} bytes) disagree with the index ({} entries, {} bodies, {} bytes)",
            stored_totals.entries,
            stored_totals.bodies,
            stored_totals.bytes,
            derived.entries,
            derived.bodies,
            derived.bytes
        ));
    }

    if !repair || report.is_clean() {
        report.repaired = repair; // nothing to fix
        return Ok(report);
    }

    // 1. Drop entries whose bodies are missing, corrupt or mismatched.
    for k in &bad_keys {
        if let Some(v) = index.entries.remove(k).map_err(sled_err)? {
            if let Some(rec) = Record::decode(&v) {
                let sk = rec.stamp.to_be_bytes();
                if index.lru.get(sk).map_err(sled_err)?.as_deref() == Some(k.as_slice()) {
                    index.lru.remove(sk).map_err(sled_err)?;
                }
            }
        }
    }
    // 2. LRU rows.
    for k in &stale_rows {
        index.lru.remove(k).map_err(sled_err)?;
    }
    for k in &unranked {
        let stamp = inner.stamp();
        if let Some(v) = index.entries.get(k).map_err(sled_err)? {
            if let Some(mut rec) = Record::decode(&v) {
                rec.stamp = stamp;
                index.entries.insert(k.as_slice(), rec.encode()).map_err(sled_err)?;
                index.lru.insert(stamp.to_be_bytes(), k.as_slice()).map_err(sled_err)?;
            }
        }
    }
    // 3. Reference counts and totals, together.
    let entries_left = index.entries.len() as u64;
    let totals = Totals {
        entries: entries_left,
        bodies: keep.len() as u64,
        bytes: keep.values().map(|r| r.len).sum(),
    };
    (&index.refs, &index.counters)
        .transaction(|(refs, counters)| {
            for k in &bad_ref_keys {
                refs.remove(k.as_slice())?;
            }
            for h in stored.keys() {
                if !keep.contains_key(h) {
                    refs.remove(&h[..])?;
                }
            }
            for (h, row) in &keep {
                if stored.get(h) != Some(row) {
                    refs.insert(&h[..], &row.encode()[..])?;
                }
            }
            counters.insert(TOTALS_KEY, &totals.encode()[..])?;
            Ok::<(), ConflictableTransactionError<StoreError>>(())
        })
        .map_err(|e| match e {
            sled::transaction::TransactionError::Abort(e) => e,
            sled::transaction::TransactionError::Storage(e) => sled_err(e),
        })?;
    index.db.flush().map_err(sled_err)?;

    // 4. Files, last: nothing references them any more.
    for (h, path) in &corrupt {
        if !pinned.contains(h) {
            remove_path(path)?;
        }
    }
    for (h, (path, _)) in &files {
        if !keep.contains_key(h) && !pinned.contains(h) {
            remove_path(path)?;
        }
    }
    for path in &strays {
        remove_path(path)?;
    }
    blobs.sweep_tmp(true)?;
    report.repaired = true;
    Ok(report)
}

/// Removes a file or a directory (stray directories in `bodies/`).
fn remove_path(path: &std::path::Path) -> Result<(), StoreError> {
    let r = if path.is_dir() { fs::remove_dir_all(path) } else { fs::remove_file(path) };
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("remove", path)(e)),
    }
}

/// A readable form of an entry key: `primary key [secondary key]`.
fn display_key(k: &[u8]) -> String {
    match split_entry_key(k) {
        Some((pk, sk)) if sk.is_empty() => pk,
        Some((pk, sk)) => format!("{pk} [{}]", String::from_utf8_lossy(&sk)),
        None => String::from_utf8_lossy(k).into_owned(),
    }
}
