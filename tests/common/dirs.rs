//! Temporary folders for tests: [`TestDir`] under `CARGO_TARGET_TMPDIR`,
//! removed when the test passes and kept (its path printed) when it fails.

use std::cell::Cell;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A fresh folder under `CARGO_TARGET_TMPDIR`, removed on drop unless the
/// thread is panicking (then it is kept and its path printed, for diagnosis;
/// see [`catch_expected_panic`] for panics a test expects).
pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    /// Creates `<CARGO_TARGET_TMPDIR>/crawlcache-tests/<label>-<pid>-<n>`.
    pub fn new(label: &str) -> TestDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos =
            SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("crawlcache-tests")
            .join(format!("{label}-{}-{n}-{nanos}", std::process::id()));
        fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("creating test folder {}: {e}", path.display()));
        TestDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `self.path().join(rel)`.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    /// Creates the sub-folder `rel` (and parents) and returns its path.
    pub fn subdir(&self, rel: impl AsRef<Path>) -> PathBuf {
        let p = self.path.join(rel);
        fs::create_dir_all(&p).unwrap_or_else(|e| panic!("creating {}: {e}", p.display()));
        p
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if thread::panicking() && !EXPECTING_PANIC.with(Cell::get) {
            eprintln!("[harness] test failed: keeping {} for diagnosis", self.path.display());
        } else {
            remove_dir_with_retries(&self.path);
        }
    }
}

thread_local! {
    /// Set while [`catch_expected_panic`] runs: a panic there is what the
    /// test asserts, not a failure, so folders dropped by it are removed.
    static EXPECTING_PANIC: Cell<bool> = const { Cell::new(false) };
}

/// `std::panic::catch_unwind(f)` for a test that expects `f` to panic: the
/// [`TestDir`]s that the unwinding drops are removed like those of a passing
/// test instead of being kept for diagnosis.
pub fn catch_expected_panic<R>(
    f: impl FnOnce() -> R + std::panic::UnwindSafe,
) -> std::thread::Result<R> {
    let before = EXPECTING_PANIC.with(|e| e.replace(true));
    let result = std::panic::catch_unwind(f);
    EXPECTING_PANIC.with(|e| e.set(before));
    result
}

/// Removes `path` and everything in it. A process that is still finishing
/// (a proxy flushing its index, nginx closing its log) can add a file while
/// the folder is being emptied, so this tries a few times before it gives up
/// with a warning (it never fails a passing test).
fn remove_dir_with_retries(path: &Path) {
    let mut last = None;
    for _ in 0..20 {
        match fs::remove_dir_all(path) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => last = Some(e),
        }
        thread::sleep(Duration::from_millis(50));
    }
    if let Some(e) = last {
        eprintln!("[harness] could not remove {} after a passing test: {e}", path.display());
    }
}
