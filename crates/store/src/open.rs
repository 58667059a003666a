//! Opening the sled index: its segment size, the disk it keeps set aside,
//! and waiting for a store this process just closed.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crawlcache_base::locks::lock;

use crate::error::StoreError;
use crate::fsops::{io_err, sync_dir};

/// When this process last closed a store, by directory: sled releases its
/// lock on the index from background threads that may outlive the close by
/// a moment, so an open right after a close in the same process waits for
/// them (bounded by [`REOPEN_WAIT`]) instead of reporting `InUse`.
static CLOSED: Mutex<Vec<(PathBuf, std::time::Instant)>> = Mutex::new(Vec::new());
/// How long an open waits for the lock of a store this process just closed.
const REOPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// sled's segment size (bytes) for an index created from now on. sled
/// writes its log in segments of this size and rewrites a segment once at
/// most half of it is live; larger segments left less of the log as garbage
/// when benches/scale.sh filled a million entries (index bytes per entry
/// at 1,000,000: 296-300 with sled's default of 512 KiB, 256-271 with 2-4
/// MiB, 210-218 with 8 MiB), at the price of one segment-sized write buffer
/// in memory and a larger index while the store is small (336-378 bytes per
/// entry at 100,000 with 4 MiB, against 309-320). sled refuses to open an
/// index with a segment size other than the one it was created with, so an
/// existing index keeps its own ([`index_segment_size`]).
pub(crate) const INDEX_SEGMENT_SIZE: usize = 4 << 20;

/// sled's own default segment size (bytes): every index created before
/// [`INDEX_SEGMENT_SIZE`] was set has it.
pub(crate) const SLED_DEFAULT_SEGMENT_SIZE: usize = 512 << 10;

/// The segment size (bytes) to open the sled index in `index_dir` with: the
/// one its `conf` file records (sled writes it when it creates the index),
/// sled's default when that file cannot be read or names none (an index
/// from before [`INDEX_SEGMENT_SIZE`]), [`INDEX_SEGMENT_SIZE`] for a new
/// index (no `conf` file yet).
pub(crate) fn index_segment_size(index_dir: &Path) -> usize {
    match fs::read(index_dir.join("conf")) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => INDEX_SEGMENT_SIZE,
        Err(_) => SLED_DEFAULT_SEGMENT_SIZE,
        Ok(conf) => String::from_utf8_lossy(&conf)
            .lines()
            .find_map(|l| {
                l.strip_prefix("segment_size:").and_then(|v| v.trim().parse::<usize>().ok())
            })
            .filter(|n| n.is_power_of_two())
            .unwrap_or(SLED_DEFAULT_SEGMENT_SIZE),
    }
}

/// The file in the data directory that keeps one index segment's worth of
/// disk space set aside ([`open_index`]).
pub(crate) const INDEX_RESERVE: &str = "index.reserve";

/// Sets aside `len` bytes of disk in `path` (allocated, not a sparse
/// file), unless the file is already that long. On failure (a full disk)
/// the partial file is removed and a warning logged: the next open on a
/// full disk may then fail until space is freed.
fn keep_index_reserve(path: &Path, len: u64) {
    if fs::metadata(path).is_ok_and(|m| m.len() == len) {
        return;
    }
    let made =
        fs::OpenOptions::new().create(true).write(true).truncate(false).open(path).and_then(|f| {
            #[cfg(target_os = "linux")]
            {
                use std::os::fd::AsRawFd;
                let len = libc::off_t::try_from(len)
                    .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
                // SAFETY: `f` is an open descriptor for the whole call.
                match unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len) } {
                    0 => Ok(()),
                    e => Err(std::io::Error::from_raw_os_error(e)),
                }
            }
            #[cfg(not(target_os = "linux"))]
            {
                use std::io::Write as _;
                let mut f = f;
                f.write_all(&vec![0u8; len as usize])
            }
        });
    if let Err(e) = made {
        let _ = fs::remove_file(path);
        tracing::warn!(path = %path.display(), error = %e, "cannot set aside disk space for the cache index; opening the cache on a full disk may fail until space is freed");
    }
}

/// Opens the sled index of the store in `dir` with a page cache of
/// `cache` bytes. Errors: `InUse` when another process holds it, `Index`.
///
/// sled pads the log segment it was writing to its end when it opens an
/// index, so an open needs up to one segment of free disk
/// ([`INDEX_SEGMENT_SIZE`]; measured on a full 50 MiB tmpfs: an index of
/// 512 KiB segments opened with 888 KiB free, one of 1 MiB did not). A
/// file of that size ([`INDEX_RESERVE`]) is kept beside the index; when
/// the open fails for want of space it is deleted and the open tried
/// again, and it is made again once the index is open and there is room.
pub(crate) fn open_index(dir: &Path, cache: u64) -> Result<sled::Db, StoreError> {
    let segment_size = index_segment_size(&dir.join("index"));
    let db = open_index_with_reserve(dir, cache, segment_size)?;
    keep_index_reserve(&dir.join(INDEX_RESERVE), segment_size as u64);
    Ok(db)
}

/// [`open_index`] with `segment_size` ([`index_segment_size`]), using the
/// reserve when the disk is full.
fn open_index_with_reserve(
    dir: &Path,
    cache: u64,
    segment_size: usize,
) -> Result<sled::Db, StoreError> {
    let closed_at = lock(&CLOSED).iter().find(|(d, _)| d == dir).map(|(_, t)| *t);
    let index_dir = dir.join("index");
    let conf = index_dir.join("conf");
    let new_index = !conf.exists();
    let mut released = false;
    loop {
        match sled::Config::new()
            .path(&index_dir)
            .cache_capacity(cache.max(1 << 20))
            .segment_size(segment_size)
            .open()
        {
            Ok(db) => {
                if new_index {
                    // sled writes `conf` without syncing it, and an index whose
                    // `conf` is lost or empty would be opened with sled's
                    // default segment size (`index_segment_size`): made
                    // durable before anything is stored in the index.
                    fs::File::open(&conf)
                        .and_then(|f| f.sync_all())
                        .map_err(io_err("sync", &conf))?;
                    sync_dir(&index_dir)?;
                }
                return Ok(db);
            }
            Err(sled::Error::Io(ref io)) if io.to_string().contains("could not acquire lock") => {
                if closed_at.is_some_and(|t| t.elapsed() < REOPEN_WAIT) {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
                return Err(StoreError::InUse { dir: dir.to_path_buf() });
            }
            Err(sled::Error::Io(ref io))
                if io.raw_os_error() == Some(libc::ENOSPC)
                    && !released
                    && dir.join(INDEX_RESERVE).exists() =>
            {
                tracing::warn!(
                    "the disk holding {} is full: using the space set aside for the cache index",
                    dir.display()
                );
                fs::remove_file(dir.join(INDEX_RESERVE))
                    .map_err(io_err("remove", &dir.join(INDEX_RESERVE)))?;
                released = true;
            }
            Err(e) => {
                return Err(StoreError::Index(format!(
                    "cannot open {}: {e}",
                    dir.join("index").display()
                )))
            }
        }
    }
}

/// Notes that this process closed the store in `dir` (see [`CLOSED`]).
pub(crate) fn note_closed(dir: &Path) {
    let mut closed = lock(&CLOSED);
    closed.retain(|(d, t)| d != dir && t.elapsed() < REOPEN_WAIT);
    closed.push((dir.to_path_buf(), std::time::Instant::now()));
}
