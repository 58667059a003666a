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
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sha2::{Digest, Sha256};

use super::index::{parse_hash, Hash};
use super::{lock, CommittedBody, Inner, StoreError};

/// Number of lock stripes guarding the life cycle of body files.
const STRIPES: usize = 256;
/// Buffer size for writing and hashing bodies (bytes).
const BUF_SIZE: usize = 64 * 1024;
/// A body is held in memory while it is at most this many bytes (or shorter
/// than `inline_max`, if that is larger): the same memory as the buffer of a
/// spilled writer, and no temporary file for most bodies of a crawl.
pub(crate) const SPILL_AT: u64 = BUF_SIZE as u64;

/// Wraps an I/O error with what was being done and to which path.
pub(crate) fn io_err(what: &str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let what = format!("{what} {}", path.display());
    move |source| StoreError::Io { what, source }
}

/// Fsyncs a directory so that renames and unlinks in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync directory", dir))
}

/// Asks the kernel to drop the cached pages of bytes `from ..` (to the end
/// of the file when `to` is `None`, else to byte `to`) of `file`
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`; Linux and FreeBSD, nothing
/// elsewhere). Only for bytes already synced: the kernel skips dirty pages,
/// and only whole pages in the range go. Advice only, so errors are logged
/// at debug level and otherwise ignored; the data on disk is not touched.
/// Used after a group commit (`store.keep_written_pages = false`): pages
/// the proxy has written and synced then go back to the kernel at once and
/// the next writes reuse them, instead of the page cache growing by every
/// byte written into memory the machine has not touched before (on a
/// virtual machine that hands freed memory back to its host, about ten
/// times slower to write into: see README, "Performance").
pub(crate) fn drop_cached_pages(file: &File, from: u64, to: Option<u64>) {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    {
        use std::os::fd::AsRawFd;
        let len = match to {
            Some(to) if to <= from => return,
            Some(to) => to - from,
            None => 0, // to the end of the file
        };
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(from), libc::off_t::try_from(len)) else { return };
        // SAFETY: posix_fadvise only reads its arguments; the descriptor is
        // open for as long as `file` is borrowed.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), off, len, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            tracing::debug!(error = %io::Error::from_raw_os_error(rc), "posix_fadvise(DONTNEED) failed");
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    let _ = (file, from, to);
}

/// Page-cache residency, for tests of [`drop_cached_pages`].
#[cfg(all(test, target_os = "linux"))]
pub(crate) mod page_test {
    use std::fs::File;
    use std::io;
    use std::path::Path;

    /// Pages of the file at `path` in the page cache, and its length in
    /// pages (mincore(2) over a map of it; mapping faults nothing in).
    pub(crate) fn resident_pages(path: &Path) -> (usize, usize) {
        let f = File::open(path).unwrap();
        // SAFETY: the map is only passed to mincore, never read.
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        let pages = map.len().div_ceil(4096);
        let mut resident = vec![0u8; pages];
        // SAFETY: `resident` has one byte per page of the mapped range.
        let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, map.len(), resident.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
        (resident.iter().filter(|b| **b & 1 == 1).count(), pages)
    }

    /// Whether the file system `dir` is on drops a synced file's pages when
    /// advised to (tmpfs keeps them whatever is advised).
    pub(crate) fn pages_can_be_dropped(dir: &Path) -> bool {
        let probe = dir.join("page-probe");
        std::fs::write(&probe, vec![1u8; 1 << 20]).unwrap();
        let f = File::open(&probe).unwrap();
        f.sync_all().unwrap();
        super::drop_cached_pages(&f, 0, None);
        let dropped = resident_pages(&probe).0 == 0;
        std::fs::remove_file(&probe).unwrap();
        dropped
    }
}

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
    live_tmp: Mutex<HashSet<String>>,
    /// Small bodies finished but not yet inserted: their bytes and pin count.
    small: Mutex<HashMap<Hash, SmallPin>>,
    /// Counter for temporary file names.
    next_tmp: AtomicU64,
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
                        Some(h) if !d3 && n3[..2] == n1 && n3[2..4] == n2 => out.push(BodyFile::Valid(h, p3)),
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
    fn ensure_parent(&self, path: &Path) -> Result<(), StoreError> {
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

/// A body being written: bytes go into a SHA-256 and, while the body is at
/// most [`SPILL_AT`] bytes (or shorter than the store's `inline_max`), into
/// memory; beyond that into a temporary file under `tmp/` (nothing is then
/// held in memory beyond a 64 KiB buffer). Dropping a writer that was not
/// finished, or any write error, removes the temporary file.
pub struct BodyWriter {
    pub(crate) inner: Arc<Inner>,
    /// The bytes so far, while the body is short enough to be inline.
    mem: Option<Vec<u8>>,
    file: Option<BufWriter<File>>,
    /// Set once a write failed: every further call fails.
    failed: bool,
    tmp_name: String,
    tmp_path: PathBuf,
    hasher: Sha256,
    len: u64,
    /// Set once the temporary file is gone (finished, or removed after an error).
    closed: bool,
    /// Test hook: fail writes with ENOSPC once this many bytes were written.
    #[cfg(test)]
    pub(crate) fail_after: Option<u64>,
}

impl BodyWriter {
    /// A writer that starts in memory (the temporary file is created when
    /// the body grows to `inline_max` bytes). Errors: none today; `Io` is
    /// kept in the signature for the file it may create.
    pub(crate) fn create(inner: Arc<Inner>) -> Result<BodyWriter, StoreError> {
        // Named when a file is needed: most bodies never get one.
        let (tmp_name, tmp_path) = (String::new(), PathBuf::new());
        Ok(BodyWriter {
            inner,
            mem: Some(Vec::new()),
            file: None,
            failed: false,
            tmp_name,
            tmp_path,
            hasher: Sha256::new(),
            len: 0,
            closed: true,
            #[cfg(test)]
            fail_after: None,
        })
    }

    /// Names the temporary file (`<pid>-<n>.tmp`) if not done yet.
    fn name_tmp(&mut self) {
        static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
        if self.tmp_name.is_empty() {
            let n = self.inner.blobs.next_tmp.fetch_add(1, Ordering::Relaxed);
            self.tmp_name = format!("{}-{}.tmp", PID.get_or_init(std::process::id), n);
            self.tmp_path = self.inner.blobs.tmp.join(&self.tmp_name);
        }
    }

    /// The temporary file's path for messages.
    fn shown(&self) -> std::path::Display<'_> {
        if self.tmp_name.is_empty() {
            Path::new("(a body held in memory)").display()
        } else {
            self.tmp_path.display()
        }
    }

    /// Moves the bytes held in memory into a new temporary file.
    fn spill(&mut self, first: &[u8]) -> io::Result<()> {
        self.name_tmp();
        let file = fs::OpenOptions::new().write(true).create_new(true).open(&self.tmp_path)?;
        self.closed = false;
        lock(&self.inner.blobs.live_tmp).insert(self.tmp_name.clone());
        let mut w = BufWriter::with_capacity(BUF_SIZE, file);
        if let Some(mem) = self.mem.take() {
            w.write_all(&mem)?;
        }
        w.write_all(first)?;
        self.file = Some(w);
        Ok(())
    }

    /// Makes room in memory at once for a body announced `len` bytes long
    /// that will be held there whole (shorter than `inline_max`, or at most
    /// [`SPILL_AT`] bytes), so that it is not copied again as it grows.
    /// Nothing for a longer one, or once the body went to a file.
    pub fn expect_len(&mut self, len: u64) {
        let held = len < self.inner.inline_max || len <= SPILL_AT;
        if let Some(mem) = self.mem.as_mut().filter(|_| held) {
            mem.reserve_exact((len as usize).saturating_sub(mem.len()));
        }
    }

    /// Appends `chunk` to the body.
    ///
    /// Errors: `Io` when the write fails (for example ENOSPC), `TooLarge` once
    /// the body exceeds the store's whole budget (`max_size` bytes; such a
    /// body could never be stored). After an error the temporary file is
    /// already removed and every further call fails.
    pub fn write(&mut self, chunk: &[u8]) -> Result<(), StoreError> {
        if self.failed {
            return Err(StoreError::Io {
                what: format!("write {}", self.shown()),
                source: io::Error::other("the body writer already failed"),
            });
        }
        let new_len = self.len + chunk.len() as u64;
        let max_size = self.inner.max_size;
        if new_len > max_size {
            self.discard();
            return Err(StoreError::TooLarge { len: new_len, max_size });
        }
        #[cfg(test)]
        let injected = self.fail_after.filter(|&n| new_len > n).map(|_| io::Error::from_raw_os_error(28));
        #[cfg(not(test))]
        let injected: Option<io::Error> = None;
        let inline_max = self.inner.inline_max;
        let result = if let Some(e) = injected {
            Err(e)
        } else if let Some(mem) = self.mem.as_mut().filter(|_| new_len < inline_max || new_len <= SPILL_AT) {
            mem.extend_from_slice(chunk);
            Ok(())
        } else if self.mem.is_some() {
            self.spill(chunk)
        } else if let Some(file) = self.file.as_mut() {
            file.write_all(chunk)
        } else {
            Err(io::Error::other("the body writer already failed"))
        };
        if let Err(e) = result {
            let what = format!("write temporary body file {}", self.shown());
            self.discard();
            return Err(StoreError::Io { what, source: e });
        }
        self.hasher.update(chunk);
        self.len = new_len;
        Ok(())
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Completes the body. Only a complete body may be finished. A body of
    /// `inline_max` bytes or more is written to its content address (its
    /// temporary file renamed there, or the bytes held in memory written
    /// through one), or its temporary file dropped if that body already
    /// exists intact; a shorter one stays in memory, to be written into its
    /// entry's pack record. May block on the file system: call it from a
    /// blocking thread (a body shorter than `inline_max` only hashes). The
    /// returned body is pinned (it cannot be deleted) until it is passed to
    /// [`super::Store::insert`] or [`super::Store::discard_body`].
    ///
    /// Errors: `Io` when syncing or renaming fails; the temporary file is
    /// removed and nothing was stored.
    pub fn finish(mut self) -> Result<CommittedBody, StoreError> {
        if self.failed {
            return Err(StoreError::Io {
                what: format!("finish {}", self.shown()),
                source: io::Error::other("the body writer already failed"),
            });
        }
        if self.mem.is_some() {
            return self.finish_held(false);
        }
        let Some(buffered) = self.file.take() else {
            return Err(StoreError::Io {
                what: format!("finish {}", self.shown()),
                source: io::Error::other("the body writer already failed"),
            });
        };
        let file = buffered
            .into_inner()
            .map_err(|e| io_err("write temporary body file", &self.tmp_path)(e.into_error()))?;
        // Not synced here: the background committer syncs it before any
        // checkpoint covering its entry (group commit, `maintenance.rs`).
        drop(file);

        let hash: Hash = std::mem::take(&mut self.hasher).finalize().into();
        let len = self.len;
        let inner = Arc::clone(&self.inner);
        let _maintenance = crate::locks::read(&inner.maintenance);
        let blobs = &inner.blobs;
        let target = blobs.path(&hash);
        let mut pins = blobs.lock_stripe(Blobs::stripe_of(&hash));
        let intact = fs::metadata(&target).map(|m| m.is_file() && m.len() == len).unwrap_or(false);
        if intact {
            // Same content already stored (the name is its hash): keep that one.
            if let Err(e) = fs::remove_file(&self.tmp_path) {
                tracing::warn!(path = %self.tmp_path.display(), error = %e, "could not remove duplicate temporary body");
            }
        } else {
            blobs.ensure_parent(&target)?;
            fs::rename(&self.tmp_path, &target).map_err(io_err("rename body into place at", &target))?;
            // From here the temporary file is gone: the target is a complete
            // body (possibly not yet referenced, which the sweeps handle).
            self.closed = true;
            // Queued before the stamp of its entry is issued (see `Inner::commit`).
            lock(&inner.unsynced).push(hash);
        }
        *pins.entry(hash).or_insert(0) += 1;
        drop(pins);
        self.closed = true;
        lock(&blobs.live_tmp).remove(&self.tmp_name);
        Ok(CommittedBody { sha256: hex::encode(hash), len })
    }

    /// [`BodyWriter::finish`] without waiting for anything but page-cache
    /// writes: for a body held in memory (at most [`SPILL_AT`] bytes) while
    /// no maintenance holds the store. A short body only hashes; a longer
    /// one is written to its content address in one write and a rename, or
    /// found there already (never synced here: see `finish`), as nginx
    /// writes its cache files from its event loop. `Err(self)`, nothing
    /// done, when the body is in a temporary file or maintenance (verify,
    /// compaction) holds the store: call `finish` from a blocking thread.
    pub fn finish_quick(self) -> Result<Result<CommittedBody, StoreError>, BodyWriter> {
        if self.failed || self.mem.is_none() {
            return Err(self);
        }
        let inner = Arc::clone(&self.inner);
        let _maintenance = match inner.maintenance.try_read() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(self),
        };
        let mut this = self;
        Ok(this.finish_held(true))
    }

    /// Finishes a body held in memory: pinned in memory when shorter than
    /// `inline_max`, else written to its file (`lock_held`: the caller holds
    /// the maintenance lock).
    fn finish_held(&mut self, lock_held: bool) -> Result<CommittedBody, StoreError> {
        let mem = self.mem.take().unwrap_or_default();
        let hash: Hash = std::mem::take(&mut self.hasher).finalize().into();
        if self.len < self.inner.inline_max {
            // Short enough to live in its entry's pack record.
            self.inner.blobs.pin_small(hash, mem);
        } else {
            self.write_file(&hash, &mem, lock_held)?;
        }
        Ok(CommittedBody { sha256: hex::encode(hash), len: self.len })
    }

    /// Writes the complete body `bytes` (held in memory) to its content
    /// address: nothing to write when that body is already stored intact,
    /// otherwise a temporary file renamed into place (not synced: see
    /// `finish`). Pins the body. The maintenance lock is held throughout,
    /// so verify never sees the temporary file; on an error it is removed.
    /// `lock_held`: the caller already holds the maintenance lock (read).
    fn write_file(&mut self, hash: &Hash, bytes: &[u8], lock_held: bool) -> Result<(), StoreError> {
        self.name_tmp();
        let inner = Arc::clone(&self.inner);
        let _maintenance = (!lock_held).then(|| crate::locks::read(&inner.maintenance));
        let blobs = &inner.blobs;
        let target = blobs.path(hash);
        let len = bytes.len() as u64;
        let mut pins = blobs.lock_stripe(Blobs::stripe_of(hash));
        let intact = fs::metadata(&target).map(|m| m.is_file() && m.len() == len).unwrap_or(false);
        if !intact {
            let written = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&self.tmp_path)
                .and_then(|mut f| f.write_all(bytes));
            let placed = match written {
                Ok(()) => blobs
                    .ensure_parent(&target)
                    .and_then(|()| fs::rename(&self.tmp_path, &target).map_err(io_err("rename body into place at", &target))),
                Err(e) => Err(io_err("write temporary body file", &self.tmp_path)(e)),
            };
            if let Err(e) = placed {
                drop(pins);
                self.failed = true;
                if let Err(e) = fs::remove_file(&self.tmp_path) {
                    if e.kind() != io::ErrorKind::NotFound {
                        tracing::warn!(path = %self.tmp_path.display(), error = %e, "could not remove temporary body file; it will be swept at the next start");
                    }
                }
                return Err(e);
            }
            // Queued before the stamp of its entry is issued (see `Inner::commit`).
            lock(&inner.unsynced).push(*hash);
        }
        *pins.entry(*hash).or_insert(0) += 1;
        Ok(())
    }

    /// Closes and removes the temporary file; the writer fails from now on.
    fn discard(&mut self) {
        self.failed = true;
        self.mem = None;
        self.file = None;
        if !self.closed {
            self.closed = true;
            match fs::remove_file(&self.tmp_path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %self.tmp_path.display(), error = %e, "could not remove temporary body file; it will be swept at the next start")
                }
            }
        }
        if !self.tmp_name.is_empty() {
            lock(&self.inner.blobs.live_tmp).remove(&self.tmp_name);
        }
    }
}

impl Drop for BodyWriter {
    fn drop(&mut self) {
        self.discard();
    }
}

impl std::fmt::Debug for BodyWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyWriter").field("tmp", &self.tmp_path).field("len", &self.len).finish()
    }
}
