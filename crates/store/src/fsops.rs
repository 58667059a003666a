//! File-system operations the store's files share: errors that name the
//! path, directory syncs, and handing written pages back to the kernel.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::StoreError;

/// Wraps an I/O error with what was being done and to which path.
pub(crate) fn io_err(what: &str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let what = format!("{what} {}", path.display());
    move |source| StoreError::Io { what, source }
}

/// Fsyncs a directory so that renames and unlinks in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err("sync directory", dir))
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
/// times slower to write into: see benches/runs/load-2026-12.md).
pub(crate) fn drop_cached_pages(file: &File, from: u64, to: Option<u64>) {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    {
        use std::os::fd::AsRawFd;
        let len = match to {
            Some(to) if to <= from => return,
            Some(to) => to - from,
            None => 0, // to the end of the file
        };
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(from), libc::off_t::try_from(len)) else {
            return;
        };
        // SAFETY: posix_fadvise only reads its arguments; the descriptor is
        // open for as long as `file` is borrowed.
        let rc =
            unsafe { libc::posix_fadvise(file.as_raw_fd(), off, len, libc::POSIX_FADV_DONTNEED) };
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
        let rc = unsafe {
            libc::mincore(map.as_ptr() as *mut libc::c_void, map.len(), resident.as_mut_ptr())
        };
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
        crate::fsops::drop_cached_pages(&f, 0, None);
        let dropped = resident_pages(&probe).0 == 0;
        std::fs::remove_file(&probe).unwrap();
        dropped
    }
}
