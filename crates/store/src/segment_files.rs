//! The files of the pack's folder by name: segments (`NNNNNNNN.pack`,
//! `packs.rs`) and their hints (`NNNNNNNN.hints`, `hints.rs`), how the
//! names are made and read, and the listing of the folder.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::fsops::io_err;

/// The file name of segment `seg`.
pub(crate) fn segment_name(seg: u32) -> String {
    format!("{seg:08}.pack")
}

/// The segment number of a file name, if it is one.
pub(crate) fn parse_segment_name(name: &str) -> Option<u32> {
    parse_numbered(name, ".pack")
}

/// The file name of the hints of segment `seg` (`hints.rs`).
pub(crate) fn hints_name(seg: u32) -> String {
    format!("{seg:08}.hints")
}

/// The segment number of a hints file name, if it is one.
pub(crate) fn parse_hints_name(name: &str) -> Option<u32> {
    parse_numbered(name, ".hints")
}

/// `NNNNNNNN<suffix>` -> NNNNNNNN.
fn parse_numbered(name: &str, suffix: &str) -> Option<u32> {
    let digits = name.strip_suffix(suffix)?;
    (digits.len() == 8 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Removes the hints file of segment `seg`, if there is one.
pub(crate) fn remove_hints(dir: &Path, seg: u32) -> Result<(), StoreError> {
    let p = dir.join(hints_name(seg));
    match fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("remove the hints of a pack segment", &p)(e)),
    }
}

/// Segments found (number, length in bytes), sorted, and any other file.
pub(crate) type Segments = (Vec<(u32, u64)>, Vec<PathBuf>);

/// Lists the segments in `dir` (sorted) and anything else found there
/// except hints files (`hints.rs` keeps those).
pub(crate) fn list_segments(dir: &Path) -> Result<Segments, StoreError> {
    let mut segs = Vec::new();
    let mut strays = Vec::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((segs, strays)),
        Err(e) => return Err(io_err("list", dir)(e)),
    };
    for ent in rd {
        let ent = ent.map_err(io_err("list", dir))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        match (parse_segment_name(&name), ent.metadata()) {
            (Some(seg), Ok(m)) if m.is_file() => segs.push((seg, m.len())),
            _ if parse_hints_name(&name).is_some() => {}
            _ => strays.push(ent.path()),
        }
    }
    segs.sort_unstable();
    strays.sort();
    Ok((segs, strays))
}
