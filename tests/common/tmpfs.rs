//! A small tmpfs for the disk-full tests (a real ENOSPC). Mounting needs
//! root, as CI has: elsewhere [`mount_or_skip`] prints `SKIPPED: <reason>`
//! on stderr and the test returns; as root a mount that fails fails the test.
//!
//! Only std: test binaries that need nothing else include this file alone
//! (`crates/store/tests/store_behaviour.rs`: `#[path =
//! "../../../tests/common/tmpfs.rs"] mod tmpfs;`).
#![allow(dead_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A mounted tmpfs, unmounted (lazily) on drop.
pub struct Tmpfs {
    mountpoint: PathBuf,
}

impl Tmpfs {
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ =
            Command::new("umount").arg("-l").arg(&self.mountpoint).stdin(Stdio::null()).status();
    }
}

/// Mounts a tmpfs of `size` (as `mount -o size=`, e.g. `"50m"`) on the
/// existing folder `mountpoint`. When this process is not root, prints
/// `SKIPPED: <test>: ...` to stderr (uncaptured) and returns `None` (the
/// caller returns).
/// As root, panics when the mount fails.
pub fn mount_or_skip(test: &str, mountpoint: &Path, size: &str) -> Option<Tmpfs> {
    if !running_as_root() {
        // Straight to the process's stderr, past the test harness's output
        // capture, so that the skip shows in a normal `cargo test` run.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: {test}: mounting a {size} tmpfs needs root (CI runs as root)"
        );
        return None;
    }
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(mountpoint)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("{test}: running `mount -t tmpfs` on {}: {e}", mountpoint.display())
        });
    assert!(
        out.status.success(),
        "{test}: mounting a {size} tmpfs on {} failed although running as root ({}): {}",
        mountpoint.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(Tmpfs { mountpoint: mountpoint.to_path_buf() })
}

/// Whether the effective user id is 0 (from /proc/self/status, else `id -u`).
pub fn running_as_root() -> bool {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        if let Some(line) = status.lines().find(|l| l.starts_with("Uid:")) {
            // Uid: real effective saved filesystem
            return line.split_whitespace().nth(2) == Some("0");
        }
    }
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
