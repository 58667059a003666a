//! The ordered key-value tree the store's index rows live in
//! ([`IndexTree`]): sled's tree, behind a trait so that another engine can
//! be measured under the same store (issue 44 asks for that row). The store
//! asks of it only what an ordered engine gives: a point read, a write, an
//! atomic batch, ordered range scans and a durable flush.
//!
//! The sled database also holds the other named trees (the robots.txt
//! snapshots, the WARC digests: [`crate::Store::extra_tree`]) and is what
//! the migration of older formats reads.

use std::ops::Bound;

use sled::IVec;

use crate::error::StoreError;

/// One row of a scan: (key, value). sled's byte type for both engines (a
/// value of up to 22 bytes, as most entry rows are, is held inline).
pub(crate) type Row = (IVec, IVec);

/// The rows of a scan, in key order; an error ends it.
pub(crate) type Rows = Box<dyn Iterator<Item = Result<Row, StoreError>> + Send>;

/// Writes and removals applied together by [`IndexTree::apply_batch`].
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// (key, new value or `None` to remove), in the order given; a later
    /// change of the same key wins.
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Batch {
    /// Sets `key` to `value`.
    pub(crate) fn insert(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.ops.push((key.as_ref().to_vec(), Some(value.as_ref().to_vec())));
    }

    /// Removes `key`.
    pub(crate) fn remove(&mut self, key: impl AsRef<[u8]>) {
        self.ops.push((key.as_ref().to_vec(), None));
    }
}

/// An ordered key-value tree holding the store's index rows. Every method
/// fails with `StoreError::Index` when the engine does.
pub(crate) trait IndexTree: Send + Sync {
    /// The value of `key`, if any.
    fn get(&self, key: &[u8]) -> Result<Option<IVec>, StoreError>;
    /// Sets `key` to `value` (not durable until [`IndexTree::flush`]).
    fn insert(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    /// Applies every change of `batch` atomically: after a crash, all of
    /// them or none (not durable until [`IndexTree::flush`]).
    fn apply_batch(&self, batch: Batch) -> Result<(), StoreError>;
    /// The rows with keys between `from` and `to`, in key order.
    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Rows;
    /// The rows whose keys start with `prefix`, in key order.
    fn scan_prefix(&self, prefix: &[u8]) -> Rows;
    /// Makes every change so far durable (fsync).
    fn flush(&self) -> Result<(), StoreError>;
}

/// Converts a sled error into a store error.
pub(crate) fn sled_err(e: sled::Error) -> StoreError {
    StoreError::Index(e.to_string())
}

/// The store's tree in sled.
pub(crate) struct SledTree {
    pub(crate) db: sled::Db,
    pub(crate) tree: sled::Tree,
}

/// sled's rows as [`Rows`].
fn sled_rows(iter: sled::Iter) -> Rows {
    Box::new(iter.map(|r| r.map_err(sled_err)))
}

impl IndexTree for SledTree {
    fn get(&self, key: &[u8]) -> Result<Option<IVec>, StoreError> {
        self.tree.get(key).map_err(sled_err)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.tree.insert(key, value).map(drop).map_err(sled_err)
    }

    fn apply_batch(&self, batch: Batch) -> Result<(), StoreError> {
        let mut b = sled::Batch::default();
        for (k, v) in batch.ops {
            match v {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        self.tree.apply_batch(b).map_err(sled_err)
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Rows {
        sled_rows(self.tree.range::<&[u8], _>((from, to)))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Rows {
        sled_rows(self.tree.scan_prefix(prefix))
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map(drop).map_err(sled_err)
    }
}
