//! Temporary folders for tests: [`TestDir`] under `CARGO_TARGET_TMPDIR`,
//! removed when the test passes and kept (its path printed) when it fails.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh folder under `CARGO_TARGET_TMPDIR`, removed on drop unless the
/// thread is panicking (then it is kept and its path printed, for diagnosis).
pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    /// Creates `<CARGO_TARGET_TMPDIR>/crawlcache-tests/<label>-<pid>-<n>`.
    pub fn new(label: &str) -> TestDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
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
        if thread::panicking() {
            eprintln!("[harness] test failed: keeping {} for diagnosis", self.path.display());
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}
