//! The robots.txt differential corpus (2,978 real robots.txt files and
//! 108,584 verdicts of Google's library; formats in
//! `testdata/robots/CORPUS_README.md`), kept in the repository as
//! `testdata/robots/corpus.tar.gz` at the workspace's root and unpacked
//! with the system `tar` on first use under `CARGO_TARGET_TMPDIR`.
//!
//! Only std, included with `#[path]` by the test binaries that read the
//! corpus: `crates/robots/tests/robots_corpus.rs` (`#[path =
//! "common/corpus.rs"] mod corpus;`) and the root crate's
//! `tests/robots_cases.rs`.
//!
//! Several test threads and test binaries may ask at once: each unpacks into
//! a private temporary folder, writes a marker file there, and renames the
//! folder into place; whoever loses the race drops its copy and uses the
//! winner's. The folder's name carries a hash of the archive, so a changed
//! archive is unpacked afresh.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The archive, from the workspace's root.
pub const CORPUS_ARCHIVE: &str = "testdata/robots/corpus.tar.gz";

/// [`CORPUS_ARCHIVE`] in the workspace this test binary was built from:
/// the nearest folder at or above the manifest folder of the crate whose
/// test includes this file (the root crate, or `crates/robots`) that
/// holds it.
pub fn corpus_archive() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .map(|dir| dir.join(CORPUS_ARCHIVE))
        .find(|archive| archive.is_file())
        .unwrap_or_else(|| manifest.join(CORPUS_ARCHIVE))
}

/// Written last into an unpacked copy, before it is renamed into place.
const MARKER: &str = ".unpacked";

/// The unpacked corpus folder (`README.md`, `checks.jsonl`, `files/`),
/// unpacking it first when needed. Panics (the test fails, it never skips)
/// when the archive is missing or cannot be unpacked.
pub fn robots_corpus_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| unpack(&corpus_archive(), Path::new(env!("CARGO_TARGET_TMPDIR")))).clone()
}

/// Unpacks `archive` (a gzip'd tar holding `corpus/`) under `parent` once,
/// returning the `corpus` folder.
fn unpack(archive: &Path, parent: &Path) -> PathBuf {
    let bytes = fs::read(archive).unwrap_or_else(|e| {
        panic!(
            "the robots corpus archive {} cannot be read ({e}); it is part of the repository \
             (restore it with `git checkout -- testdata/robots/corpus.tar.gz`)",
            archive.display()
        )
    });
    let root = parent.join(format!("robots-corpus-{:016x}", fnv1a64(&bytes)));
    let corpus = root.join("corpus");
    if root.join(MARKER).is_file() {
        return corpus;
    }
    fs::create_dir_all(parent).unwrap_or_else(|e| panic!("creating {}: {e}", parent.display()));
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let tmp = parent.join(format!(
        ".robots-corpus-unpacking-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("creating {}: {e}", tmp.display()));
    let out = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("--no-same-owner")
        .arg("-C")
        .arg(&tmp)
        .output()
        .unwrap_or_else(|e| {
            panic!("running `tar -xzf {}` (is tar installed?): {e}", archive.display())
        });
    if !out.status.success() {
        let _ = fs::remove_dir_all(&tmp);
        panic!(
            "`tar -xzf {} -C {}` exited with {}: {}",
            archive.display(),
            tmp.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let unpacked = tmp.join("corpus");
    assert!(
        unpacked.join("checks.jsonl").is_file() && unpacked.join("files").is_dir(),
        "{} did not unpack to corpus/checks.jsonl and corpus/files/ (see {})",
        archive.display(),
        tmp.display()
    );
    fs::write(tmp.join(MARKER), b"")
        .unwrap_or_else(|e| panic!("writing the marker in {}: {e}", tmp.display()));
    if let Err(first) = fs::rename(&tmp, &root) {
        if !root.join(MARKER).is_file() {
            // Not a finished copy from a concurrent run (those always carry
            // the marker) but a leftover of an interrupted manual copy:
            // replace it once.
            let _ = fs::remove_dir_all(&root);
            if let Err(second) = fs::rename(&tmp, &root) {
                if !root.join(MARKER).is_file() {
                    panic!(
                        "renaming {} to {}: {first}; then {second}",
                        tmp.display(),
                        root.display()
                    );
                }
            }
        }
        // Else a concurrent run renamed its finished copy into place first.
        let _ = fs::remove_dir_all(&tmp);
    }
    corpus
}

/// 64-bit FNV-1a: names the unpacked copy after the archive's contents.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
