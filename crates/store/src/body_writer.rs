//! [`BodyWriter`]: a body being written, hashed as it arrives, held in
//! memory while short and spilled to a temporary file when long, then
//! finished under its SHA-256 (`blobs.rs` says where bodies live).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crawlcache_base::locks::lock;
use sha2::{Digest, Sha256};

use crate::blobs::{Blobs, BUF_SIZE, SPILL_AT};
use crate::error::StoreError;
use crate::fsops::io_err;
use crate::hash::Hash;
use crate::inner::Inner;
use crate::types::CommittedBody;

/// A body being written: bytes go into a SHA-256 and, while the body is at
/// most `SPILL_AT` bytes (or shorter than the store's `inline_max`), into
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
    /// `SPILL_AT` bytes), so that it is not copied again as it grows.
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
        let injected =
            self.fail_after.filter(|&n| new_len > n).map(|_| io::Error::from_raw_os_error(28));
        #[cfg(not(test))]
        let injected: Option<io::Error> = None;
        let inline_max = self.inner.inline_max;
        let result = if let Some(e) = injected {
            Err(e)
        } else if let Some(mem) =
            self.mem.as_mut().filter(|_| new_len < inline_max || new_len <= SPILL_AT)
        {
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
    /// [`crate::Store::insert`] or [`crate::Store::discard_body`].
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
        let _maintenance = crawlcache_base::locks::read(&inner.maintenance);
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
            fs::rename(&self.tmp_path, &target)
                .map_err(io_err("rename body into place at", &target))?;
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
    /// writes: for a body held in memory (at most `SPILL_AT` bytes) while
    /// no maintenance holds the store. A short body only hashes; a longer
    /// one is written to its content address in one write and a rename, or
    /// found there already (never synced here: see `finish`), as nginx
    /// writes its cache files from its event loop. `Err(self)`, nothing
    /// done, when the body is in a temporary file or maintenance (verify,
    /// compaction) holds the store: call `finish` from a blocking thread.
    #[allow(
        clippy::result_large_err,
        reason = "the writer is handed back to be finished elsewhere, moved once per body"
    )]
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
        let _maintenance = (!lock_held).then(|| crawlcache_base::locks::read(&inner.maintenance));
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
                Ok(()) => blobs.ensure_parent(&target).and_then(|()| {
                    fs::rename(&self.tmp_path, &target)
                        .map_err(io_err("rename body into place at", &target))
                }),
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
