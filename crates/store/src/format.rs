//! The store format version, kept in `<dir>/format` (one line: the number).
//!
//! - 1: the releases before the file existed. Every body was a file, synced
//!   with its directory entry before its entry was indexed; no commit
//!   checkpoint. Recognised by an `index/` directory without a `format` file.
//! - 2: as 1, but bodies synced in groups by a background committer that
//!   records a checkpoint stamp (releases up to commit 7238623).
//! - 3: entry records and short bodies in pack segments, one small index
//!   row per entry; a short body copied into every entry that had it
//!   (releases up to commit 738cd51).
//! - 4 (this code): as 3, but every body stored once: a short body several
//!   entries have is a shared body record with a reference count, and
//!   pack segments carry hints of their inline bodies by hash (see
//!   `mod.rs`).
//!
//! A store of format 1, 2 or 3 is migrated on open (`migrate.rs`), with
//! progress on stderr; its `format` file says 4 only once the new index is
//! complete and durable, so an interrupted migration starts again at the
//! next open (from format 1 or 2 the file says 3 in between). A `format`
//! file naming any other version is refused with a message saying what to
//! do; nothing is read from such a store.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::StoreError;
use crate::fsops::{io_err, sync_dir};

/// The format written by this code.
pub const FORMAT: u32 = 4;
/// The name of the format file in the store directory.
pub const FORMAT_FILE: &str = "format";

/// What the data directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// No index yet: a new store.
    New,
    /// A store of [`FORMAT`].
    Current,
    /// A store of an earlier release (format 1, 2 or 3), to migrate.
    Previous(u32),
}

/// The format number of the store in `dir` as its file says (1 when the
/// file is missing but an index exists, `None` for a new store).
pub(crate) fn read(dir: &Path) -> Result<Option<u32>, StoreError> {
    let path = dir.join(FORMAT_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u32>().map(Some).map_err(|_| {
            StoreError::Format(format!(
                "{} does not hold a store format number ({:?}); if the cache is otherwise intact, write \
                 \"{FORMAT}\" into it only if it was written by this release, else move the directory aside",
                path.display(),
                text.chars().take(40).collect::<String>()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(dir.join("index").exists().then_some(1)),
        Err(e) => Err(io_err("read", &path)(e)),
    }
}

/// Reads the format of the store in `dir`. Errors (`Format`) for a version
/// this code does not know or a file it cannot parse.
pub(crate) fn check(dir: &Path) -> Result<Found, StoreError> {
    match read(dir)? {
        None => Ok(Found::New),
        Some(FORMAT) => Ok(Found::Current),
        Some(v @ 1..=3) => Ok(Found::Previous(v)),
        Some(v) => Err(StoreError::Format(format!(
            "the cache in {} has store format {v}, but this crawlcache reads formats 1 to {FORMAT}; \
             run the crawlcache release that wrote it, or move the directory aside (or delete it) \
             to start an empty cache",
            dir.display()
        ))),
    }
}

/// Writes the format file saying [`FORMAT`] (through a synced temporary
/// file and a rename).
pub(crate) fn write(dir: &Path) -> Result<(), StoreError> {
    write_version(dir, FORMAT)
}

/// Writes the format file saying `version` (a migration's intermediate
/// step).
pub(crate) fn write_version(dir: &Path, version: u32) -> Result<(), StoreError> {
    let path = dir.join(FORMAT_FILE);
    let tmp = dir.join("format.tmp");
    let mut f = fs::File::create(&tmp).map_err(io_err("create", &tmp))?;
    f.write_all(format!("{version}\n").as_bytes()).map_err(io_err("write", &tmp))?;
    f.sync_all().map_err(io_err("sync", &tmp))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(io_err("rename into place", &path))?;
    sync_dir(dir)
}
