//! File-system helpers shared by the modules that keep private state in the
//! data directory (the store, the certificate authority, the audit trail).
//!
//! A leaf module: it imports nothing from the crate.

use std::io;
use std::path::Path;

/// Creates the directory `dir` readable by its owner only, with any missing
/// parents: `mkdir -p` for the parents, then `mkdir -m 0700` for `dir`.
///
/// - `dir` is new (this call created it): its mode is set to exactly 0700,
///   whatever the umask. Parents this call creates get the usual mode (0777
///   minus the umask), as `std::fs::create_dir_all` gives.
/// - `dir` already exists as a directory (even if another process created
///   it a moment ago): `Ok(())`, and its mode is left as it is; tightening
///   an existing directory is the caller's decision.
///
/// On systems other than Unix this is `std::fs::create_dir_all`.
///
/// Errors: the `io::Error` of the failed step (`PermissionDenied`, ...);
/// the caller adds the path and what it was for. When `dir` or one of its
/// parents exists as something other than a directory (a regular file),
/// the error keeps its kind but says so, naming that path, instead of the
/// system's "File exists" or "Not a directory".
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    create_private_dir_inner(dir).map_err(|e| match blocking_non_directory(dir) {
        Some(p) if p == dir => {
            io::Error::new(e.kind(), format!("{} exists and is not a directory", p.display()))
        }
        Some(p) => io::Error::new(
            e.kind(),
            format!(
                "{} is not a directory (a file is in the way of {})",
                p.display(),
                dir.display()
            ),
        ),
        None => e,
    })
}

/// The path nearest the root among `dir` and its parents that exists and
/// is not a directory (following symbolic links), if any: what makes
/// `dir` impossible to create or use as a directory.
pub fn blocking_non_directory(dir: &Path) -> Option<&Path> {
    let mut ancestors: Vec<&Path> = dir.ancestors().filter(|p| !p.as_os_str().is_empty()).collect();
    ancestors.reverse();
    ancestors.into_iter().find(|p| std::fs::metadata(p).is_ok_and(|m| !m.is_dir()))
}

fn create_private_dir_inner(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::fs::{self, DirBuilder, Permissions};
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)?;
        }
        match DirBuilder::new().mode(0o700).create(dir) {
            // The umask may have narrowed 0700; make it exact.
            Ok(()) => fs::set_permissions(dir, Permissions::from_mode(0o700)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_directory_is_owner_only_and_its_new_parents_are_ordinary() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/c");
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let parent = tmp.path().join("a");
        std::fs::create_dir(tmp.path().join("plain")).unwrap();
        assert_eq!(
            mode(&parent),
            mode(&tmp.path().join("plain")),
            "parents as create_dir_all makes them"
        );
    }

    #[test]
    fn an_existing_directory_is_left_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("open");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o755);
    }

    #[test]
    fn a_file_in_the_way_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let err = create_private_dir(&file).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(err.to_string(), format!("{} exists and is not a directory", file.display()));
    }

    #[test]
    fn a_file_among_the_parents_is_named_instead_of_file_exists() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let dir = file.join("data/inner");
        let err = create_private_dir(&dir).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{} is not a directory (a file is in the way of {})",
                file.display(),
                dir.display()
            )
        );
    }
}
