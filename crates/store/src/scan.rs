//! [`Scan`]: the entries of the index, one at a time.

use std::sync::Arc;

use crate::error::StoreError;
use crate::index::{self, sled_err};
use crate::inner::Inner;
use crate::types::Entry;

/// The entries of the index one at a time, in index order, from
/// [`Store::scan`]. Each item is decoded when it is reached (with a pending
/// touch or freshening laid over it, like [`Store::lookup`]), so a scan of
/// any size holds one entry at a time. The scan sees the index as it is when
/// each item is read: entries inserted or removed meanwhile may or may not
/// appear. Undecodable rows are skipped with a warning.
pub struct Scan {
    rows: sled::Iter,
    prefix: Vec<u8>,
    inner: Arc<Inner>,
    /// An error met before the first row (moving the in-memory changes
    /// into sled), reported as the first item.
    failed: Option<StoreError>,
}

impl Scan {
    /// A scan of `rows` (the index's entry rows) keeping those under
    /// `prefix`; `failed` is reported first.
    pub(crate) fn new(rows: sled::Iter, prefix: &str, inner: Arc<Inner>, failed: Option<StoreError>) -> Scan {
        Scan { rows, prefix: prefix.as_bytes().to_vec(), inner, failed }
    }
}

impl Iterator for Scan {
    type Item = Result<Entry, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        loop {
            let (k, v) = match self.rows.next()? {
                Ok(row) => row,
                Err(e) => return Some(Err(sled_err(e))),
            };
            if !self.prefix.is_empty() && !index::primary_key_bytes(&k).is_some_and(|pk| pk.starts_with(&self.prefix)) {
                continue;
            }
            match self.inner.read_entry(&k, &v) {
                Ok(Some(mut e)) => {
                    self.inner.overlay_pending(std::slice::from_mut(&mut e));
                    return Some(Ok(e));
                }
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
