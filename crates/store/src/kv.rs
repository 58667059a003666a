//! The ordered key-value tree the store's index rows live in
//! ([`IndexTree`]): sled's tree in every build, or a keyspace of fjall (an
//! LSM tree) in a build with the `index-fjall` feature, so that the growth
//! bench can measure both engines under the same store (benches/growth.sh,
//! docs/performance.md, "Another index engine"). The store asks of it only
//! what both give: a point read, a write, an atomic batch, ordered range
//! scans and a durable flush.
//!
//! Either way the sled database stays open beside it: the other named trees
//! (the robots.txt snapshots, the WARC digests: `Store::extra_tree`)
//! and the migration of older formats are sled's.

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
    /// (key, new value or `None` to remove), in the order given. The store
    /// never names a key twice in one batch: sled would keep the later
    /// change, fjall gives both the same sequence number and no order.
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

/// The store's tree in sled (every build but `index-fjall`'s).
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

#[cfg(feature = "index-fjall")]
pub(crate) use fjall_tree::FjallTree;

#[cfg(feature = "index-fjall")]
mod fjall_tree {
    use std::ops::Bound;
    use std::path::Path;

    use sled::IVec;

    use crate::error::StoreError;
    use crate::kv::{Batch, IndexTree, Rows};

    /// Converts a fjall error into a store error.
    fn fjall_err(e: fjall::Error) -> StoreError {
        StoreError::Index(format!("fjall: {e}"))
    }

    /// The store's tree in a keyspace of fjall, in `index-fjall/` beside
    /// sled's `index/` (a build with the `index-fjall` feature).
    pub(crate) struct FjallTree {
        db: fjall::Database,
        keyspace: fjall::Keyspace,
    }

    /// How large one memtable of the keyspace grows (bytes) before it is
    /// written out as a table: a quarter of fjall's default, so that what
    /// it holds in memory compares with sled's page cache.
    const MEMTABLE: u64 = 16 << 20;

    impl FjallTree {
        /// Opens (or creates) the tree in `dir` with a block cache of
        /// `cache` bytes, or of `CRAWLCACHE_FJALL_CACHE_MIB` MiB when that
        /// is set (the bench's knob for this build only: sled's page state
        /// is outside its cache, so the same cache is not the same memory).
        /// Errors: `Index` when fjall cannot open it.
        pub(crate) fn open(dir: &Path, cache: u64) -> Result<FjallTree, StoreError> {
            let cache = std::env::var("CRAWLCACHE_FJALL_CACHE_MIB")
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(cache, |mib| mib << 20);
            tracing::warn!(
                cache_bytes = cache,
                "the store's index is in fjall: an index-fjall build is for measuring only (its crash \
                 safety is not established: docs/performance.md, \"Another index engine\")"
            );
            let db = fjall::Database::builder(dir)
                .cache_size(cache.max(1 << 20))
                .max_journaling_size(128 << 20)
                .open()
                .map_err(fjall_err)?;
            let keyspace = db
                .keyspace("store", || {
                    fjall::KeyspaceCreateOptions::default().max_memtable_size(MEMTABLE)
                })
                .map_err(fjall_err)?;
            Ok(FjallTree { db, keyspace })
        }

        fn rows(iter: fjall::Iter) -> Rows {
            Box::new(iter.map(|g| {
                g.into_inner().map(|(k, v)| (IVec::from(&*k), IVec::from(&*v))).map_err(fjall_err)
            }))
        }
    }

    impl IndexTree for FjallTree {
        fn get(&self, key: &[u8]) -> Result<Option<IVec>, StoreError> {
            Ok(self.keyspace.get(key).map_err(fjall_err)?.map(|v| IVec::from(&*v)))
        }

        fn insert(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
            self.keyspace.insert(key, value).map_err(fjall_err)
        }

        fn apply_batch(&self, batch: Batch) -> Result<(), StoreError> {
            let mut b = self.db.batch();
            for (k, v) in batch.ops {
                match v {
                    Some(v) => b.insert(&self.keyspace, k, v),
                    None => b.remove(&self.keyspace, k),
                }
            }
            b.commit().map_err(fjall_err)
        }

        fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Rows {
            let owned = |b: Bound<&[u8]>| b.map(<[u8]>::to_vec);
            Self::rows(self.keyspace.range::<Vec<u8>, _>((owned(from), owned(to))))
        }

        fn scan_prefix(&self, prefix: &[u8]) -> Rows {
            Self::rows(self.keyspace.prefix(prefix))
        }

        fn flush(&self) -> Result<(), StoreError> {
            self.db.persist(fjall::PersistMode::SyncAll).map_err(fjall_err)
        }
    }
}
