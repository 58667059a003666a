//! The store's errors.

use std::path::PathBuf;

/// Errors from the store. Every variant names what failed; none of them is
/// ever turned into a panic.
#[derive(Debug)]
pub enum StoreError {
    /// A file system operation failed (`what` says which, e.g. "create tmp file").
    Io { what: String, source: std::io::Error },
    /// The sled index failed or holds a record that cannot be decoded.
    Index(String),
    /// The body named by an entry is missing from the store.
    MissingBody(String),
    /// A body of `len` bytes (or more) exceeds the whole budget of
    /// `max_size` bytes; it is not stored and nothing else was evicted.
    TooLarge { len: u64, max_size: u64 },
    /// Another process (a running crawlcache) holds the index of `dir`.
    InUse { dir: PathBuf },
    /// The data directory holds a store format this code does not read;
    /// the message says what to do.
    Format(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Io { what, source } => write!(f, "{what}: {source}"),
            StoreError::Index(m) => write!(f, "cache index: {m}"),
            StoreError::MissingBody(h) => write!(f, "body {h} is missing from the store"),
            StoreError::TooLarge { len, max_size } => write!(
                f,
                "body of {len} bytes exceeds the whole cache budget of {max_size} bytes; not stored \
                 (raise the cache's maximum size to keep bodies this large)"
            ),
            StoreError::InUse { dir } => write!(
                f,
                "the data directory {} is in use by a running crawlcache (its index is locked); \
                 stop that process first, or give this one another data directory",
                dir.display()
            ),
            StoreError::Format(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
