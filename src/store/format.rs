//! The store format version, kept in `<dir>/format` (one line: the number).
//!
//! - 1: the releases before the file existed. Every body was synced, and its
//!   directory entry too, before its entry was indexed; there is no commit
//!   checkpoint. Recognised by an `index/` directory without a `format` file.
//! - 2: bodies are synced in groups by the background committer, which then
//!   records a checkpoint stamp in the `counters` tree (see `maintenance.rs`);
//!   after an unclean shutdown, entries stamped at or after the checkpoint are
//!   re-hashed at open and dropped if their body is not whole.
//!
//! A format-1 store is migrated on open: all its bodies were synced, so its
//! checkpoint is "everything", and its entries are kept as they are (the
//! record layout did not change; the cache layer reads both encodings of the
//! stored head). A `format` file naming any other version is refused with a
//! message saying what to do; nothing is read from such a store.

use std::fs;
use std::io::Write;
use std::path::Path;

use super::blobs::{io_err, sync_dir};
use super::StoreError;

/// The format written by this code.
pub const FORMAT: u32 = 2;
/// The name of the format file in the store directory.
pub const FORMAT_FILE: &str = "format";

/// What the data directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// No index yet: a new store.
    New,
    /// A store of [`FORMAT`].
    Current,
    /// A store of the previous release (format 1), to migrate.
    Previous,
}

/// Reads the format of the store in `dir`. Errors (`Format`) for a version
/// this code does not know or a file it cannot parse.
pub(crate) fn check(dir: &Path) -> Result<Found, StoreError> {
    let path = dir.join(FORMAT_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<u32>() {
            Ok(FORMAT) => Ok(Found::Current),
            Ok(1) => Ok(Found::Previous),
            Ok(v) => Err(StoreError::Format(format!(
                "the cache in {} has store format {v}, but this crawlcache reads formats 1 and {FORMAT}; \
                 run the crawlcache release that wrote it, or move the directory aside (or delete it) \
                 to start an empty cache",
                dir.display()
            ))),
            Err(_) => Err(StoreError::Format(format!(
                "{} does not hold a store format number ({:?}); if the cache is otherwise intact, write \
                 \"{FORMAT}\" into it only if it was written by this release, else move the directory aside",
                path.display(),
                text.chars().take(40).collect::<String>()
            ))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if dir.join("index").exists() {
                Ok(Found::Previous)
            } else {
                Ok(Found::New)
            }
        }
        Err(e) => Err(io_err("read", &path)(e)),
    }
}

/// Writes the format file (through a synced temporary file and a rename).
pub(crate) fn write(dir: &Path) -> Result<(), StoreError> {
    let path = dir.join(FORMAT_FILE);
    let tmp = dir.join("format.tmp");
    let mut f = fs::File::create(&tmp).map_err(io_err("create", &tmp))?;
    f.write_all(format!("{FORMAT}\n").as_bytes()).map_err(io_err("write", &tmp))?;
    f.sync_all().map_err(io_err("sync", &tmp))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(io_err("rename into place", &path))?;
    sync_dir(dir)
}
