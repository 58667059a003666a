//! Body files: content-addressed paths, the streaming [`BodyWriter`], pins
//! that keep a just-finished body alive until its entry is committed, and the
//! sweeps of temporary and orphan files.
//!
//! A body shorter than the store's `inline_max` bytes never becomes a file:
//! the writer keeps it in memory, [`BodyWriter::finish`] pins the bytes under
//! their SHA-256, and [`super::Store::insert`] writes them into the entry's
//! pack record (`packs.rs`). A longer body is also held in memory up to
//! [`SPILL_AT`] bytes (no more than the write buffer a file would take) and
//! written to its file by `finish` in one go: temporary file, write, rename,
//! or no file at all when that content is already stored. Only a body longer
//! than that spills to a temporary file while it is being written.
//!
//! Layout under the store directory:
//! - `bodies/ab/cd/abcd...`: one file per distinct body of `inline_max`
//!   bytes or more, named by the lower-case hex SHA-256 of its bytes;
//! - `tmp/<pid>-<n>.tmp`: such bodies being written; never read, swept at open.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use sha2::{Digest, Sha256};

use crawlcache_base::locks::lock;

use crate::error::StoreError;
use crate::fsops::io_err;
use crate::hash::{parse_hash, Hash};

/// Number of lock stripes guarding the life cycle of body files.
const STRIPES: usize = 256;
/// Buffer size for writing and hashing bodies (bytes).
pub(crate) const BUF_SIZE: usize = 64 * 1024;
/// A body is held in memory while it is at most this many bytes (or shorter
/// than `inline_max`, if that is larger): the same memory as the buffer of a
/// spilled writer, and no temporary file for most bodies of a crawl.
pub(crate) const SPILL_AT: u64 = BUF_SIZE as u64;

/// The body files and the in-process state that guards them.
pub(crate) struct Blobs {
    /// `<dir>/bodies`.
    pub bodies: PathBuf,
    /// `<dir>/tmp`.
    pub tmp: PathBuf,
    /// Per-stripe pin counts: a pinned body file is never deleted. Locking a
    /// stripe also serialises "is this file present / rename it into place"
    /// against "delete it because nothing references it".
    stripes: Vec<Mutex<HashMap<Hash, u32>>>,
    /// Names of temporary files of live writers (verify must not report them).
    pub(crate) live_tmp: Mutex<HashSet<String>>,
    /// Small bodies finished but not yet inserted: their bytes and pin count.
    small: Mutex<HashMap<Hash, SmallPin>>,
    /// Counter for temporary file names.
    pub(crate) next_tmp: AtomicU64,
}

/// A finished short body's bytes and how many pins it has.
type SmallPin = (Arc<Vec<u8>>, u32);

/// What a walk of `bodies/` found.
pub(crate) enum BodyFile {
    /// A file whose name is a hash, at its fanned-out place.
    Valid(Hash, PathBuf),
    /// Anything else (a stray file, a misplaced or misnamed file, a directory
    /// where a file belongs).
    Stray(PathBuf),
}

impl Blobs {
    pub fn new(dir: &Path) -> Blobs {
        Blobs {
            bodies: dir.join("bodies"),
            tmp: dir.join("tmp"),
            stripes: (0..STRIPES).map(|_| Mutex::new(HashMap::new())).collect(),
            live_tmp: Mutex::new(HashSet::new()),
            small: Mutex::new(HashMap::new()),
            next_tmp: AtomicU64::new(0),
        }
    }

    /// Pins the bytes of a finished small body.
    pub fn pin_small(&self, hash: Hash, bytes: Vec<u8>) {
        let mut small = lock(&self.small);
        let e = small.entry(hash).or_insert_with(|| (Arc::new(bytes), 0));
        e.1 += 1;
    }

    /// Takes one pin of the small body `hash`, returning its bytes (`None`
    /// when it is not pinned).
    pub fn take_small(&self, hash: &Hash) -> Option<Arc<Vec<u8>>> {
        let mut small = lock(&self.small);
        let (bytes, n) = small.get_mut(hash)?;
        let bytes = Arc::clone(bytes);
        *n -= 1;
        if *n == 0 {
            small.remove(hash);
        }
        Some(bytes)
    }

    /// Whether the small body `hash` is pinned (its bytes in memory).
    pub fn is_small_pinned(&self, hash: &Hash) -> bool {
        lock(&self.small).contains_key(hash)
    }

    /// The bytes of the pinned small body `hash`, leaving the pin.
    pub fn peek_small(&self, hash: &Hash) -> Option<Arc<Vec<u8>>> {
        lock(&self.small).get(hash).map(|(b, _)| Arc::clone(b))
    }

    /// Forgets every small-body pin (at close).
    pub fn clear_small(&self) {
        lock(&self.small).clear();
    }

    /// `bodies/ab/cd/<hash>` for a hex hash (a hex string that is not a
    /// SHA-256 maps to `bodies/invalid`, which never exists).
    pub fn path_hex(&self, sha256: &str) -> PathBuf {
        match parse_hash(sha256) {
            Some(h) => self.path(&h),
            None => self.bodies.join("invalid"),
        }
    }

    /// `bodies/ab/cd/<hash>`.
    pub fn path(&self, hash: &Hash) -> PathBuf {
        let hex = hex::encode(hash);
        self.bodies.join(&hex[..2]).join(&hex[2..4]).join(&hex)
    }

    pub fn stripe_of(hash: &Hash) -> usize {
        hash[0] as usize % STRIPES
    }

    pub fn lock_stripe(&self, i: usize) -> MutexGuard<'_, HashMap<Hash, u32>> {
        lock(&self.stripes[i % STRIPES])
    }

    /// Whether `hash` is pinned (checked under its stripe lock by the caller).
    pub fn pinned(pins: &HashMap<Hash, u32>, hash: &Hash) -> bool {
        pins.get(hash).copied().unwrap_or(0) > 0
    }

    /// Removes one pin of `hash`; returns true if it was the last.
    pub fn unpin(&self, hash: &Hash) -> bool {
        let mut pins = self.lock_stripe(Self::stripe_of(hash));
        match pins.get_mut(hash) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                pins.remove(hash);
                true
            }
            None => true,
        }
    }

    /// Every pinned hash (verify skips them; drop releases them).
    pub fn all_pinned(&self) -> HashSet<Hash> {
        let mut out = HashSet::new();
        for s in &self.stripes {
            out.extend(lock(s).keys().copied());
        }
        out
    }

    /// Forgets every pin (at close).
    pub fn clear_pins(&self) -> Vec<Hash> {
        let mut out = Vec::new();
        for s in &self.stripes {
            out.extend(lock(s).drain().map(|(h, _)| h));
        }
        out
    }

    fn live_tmp_names(&self) -> HashSet<String> {
        lock(&self.live_tmp).clone()
    }

    /// Removes every file in `tmp/` that no live writer owns. Returns the
    /// names found (removed only if `remove`).
    pub fn sweep_tmp(&self, remove: bool) -> Result<Vec<String>, StoreError> {
        let live = self.live_tmp_names();
        let mut found = Vec::new();
        let rd = match fs::read_dir(&self.tmp) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(io_err("list", &self.tmp)(e)),
        };
        for ent in rd {
            let ent = ent.map_err(io_err("list", &self.tmp))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            if live.contains(&name) {
                continue;
            }
            if remove {
                let p = ent.path();
                let r = if p.is_dir() { fs::remove_dir_all(&p) } else { fs::remove_file(&p) };
                match r {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_err("remove leftover temporary file", &p)(e)),
                }
            }
            found.push(name);
        }
        found.sort();
        Ok(found)
    }

    /// Lists everything under `bodies/` (no hashing).
    pub fn walk(&self) -> Result<Vec<BodyFile>, StoreError> {
        fn list(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>, StoreError> {
            let rd = match fs::read_dir(dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(io_err("list", dir)(e)),
            };
            let mut out = Vec::new();
            for ent in rd {
                let ent = ent.map_err(io_err("list", dir))?;
                let is_dir = ent.file_type().map(|t| t.is_dir()).unwrap_or(false);
                out.push((ent.file_name().to_string_lossy().into_owned(), ent.path(), is_dir));
            }
            out.sort();
            Ok(out)
        }
        let mut out = Vec::new();
        for (n1, p1, d1) in list(&self.bodies)? {
            if !d1 || n1.len() != 2 {
                out.push(BodyFile::Stray(p1));
                continue;
            }
            for (n2, p2, d2) in list(&p1)? {
                if !d2 || n2.len() != 2 {
                    out.push(BodyFile::Stray(p2));
                    continue;
                }
                for (n3, p3, d3) in list(&p2)? {
                    match parse_hash(&n3) {
                        Some(h) if !d3 && n3[..2] == n1 && n3[2..4] == n2 => {
                            out.push(BodyFile::Valid(h, p3))
                        }
                        _ => out.push(BodyFile::Stray(p3)),
                    }
                }
            }
        }
        Ok(out)
    }

    /// Creates the fan-out directories of `path` if needed. Not synced
    /// here: the committer syncs the directories above every body of its
    /// batch (`Inner::commit`) before the checkpoint covering it.
    pub(crate) fn ensure_parent(&self, path: &Path) -> Result<(), StoreError> {
        let Some(cd) = path.parent() else { return Ok(()) };
        if cd.is_dir() {
            return Ok(());
        }
        fs::create_dir_all(cd).map_err(io_err("create directory", cd))?;
        Ok(())
    }
}

/// Streams a file through SHA-256. Returns the digest and the length in bytes.
pub(crate) fn hash_file(path: &Path) -> io::Result<(Hash, u64)> {
    let mut f = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; BUF_SIZE];
    let mut len = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((hasher.finalize().into(), len))
}
