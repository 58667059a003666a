//! The store's errors.

use std::path::PathBuf;

/// Errors from the store. Every variant names what failed; none of them is
/// ever turned into a panic.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file system operation failed (`what` says which, e.g. "create tmp file").
    #[error("{what}: {source}")]
    Io {
        /// The operation and its path.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The sled index failed or holds a record that cannot be decoded.
    #[error("cache index: {0}")]
    Index(String),
    /// The body named by an entry is missing from the store.
    #[error("body {0} is missing from the store")]
    MissingBody(String),
    /// A body of `len` bytes (or more) exceeds the whole budget of
    /// `max_size` bytes; it is not stored and nothing else was evicted.
    #[error(
        "body of {len} bytes exceeds the whole cache budget of {max_size} bytes; not stored \
         (raise the cache's maximum size to keep bodies this large)"
    )]
    TooLarge {
        /// The body's length (so far), in bytes.
        len: u64,
        /// The cache's budget, in bytes.
        max_size: u64,
    },
    /// Another process (a running crawlcache) holds the index of `dir`.
    #[error(
        "the data directory {} is in use by a running crawlcache (its index is locked); \
         stop that process first, or give this one another data directory",
        dir.display()
    )]
    InUse {
        /// The data directory.
        dir: PathBuf,
    },
    /// The data directory holds a store format this code does not read;
    /// the message says what to do.
    #[error("{0}")]
    Format(String),
}

/// What is wrong with the bytes where a pack record should be (a record
/// torn by a crash, overwritten, or past the end of its segment). Inside
/// the crate only: a reader turns it into [`StoreError::Index`] naming the
/// record, or skips the rest of the segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Damage {
    /// The first bytes are not a record header (magic, kind).
    #[error("no record header")]
    NoHeader,
    /// Fewer than the 8 bytes a header starts with are there.
    #[error("a partial record header")]
    PartialHeader,
    /// The header announces another length than the bytes read.
    #[error("record announces {announced} bytes, {read} read")]
    Length {
        /// The length in the header, bytes.
        announced: usize,
        /// The bytes read, bytes.
        read: usize,
    },
    /// The record is longer than the segment holds after it.
    #[error("the record runs past the end of its segment")]
    PastSegmentEnd,
    /// The segment file ends before the record does.
    #[error("the segment ends before the record")]
    SegmentEnds,
    /// The CRC-32 does not match the bytes.
    #[error("checksum mismatch")]
    Checksum,
    /// The key, metadata and body lengths do not add up to the record's.
    #[error("field lengths disagree with the record length")]
    FieldLengths,
    /// A shared body record carries a key or metadata.
    #[error("a shared body record with a key or metadata")]
    SharedWithKey,
}
